// The kernel skeleton: parameters, variable storage, structured control flow (the statements,
// and the helpers that lowerers build branches and loops with) and the dispatcher that hands
// each instruction to its family's lowerer (lowering.h, lower_*.cpp).
//
// Control flow is block-uniform (ISA section 1), so `for`, `if`, `while`, `break`, `continue`
// and `return` become plain branches that every thread of the block takes together; barriers
// inside loops are therefore legal. A `for` evaluates start, stop and step once, like the
// interpreter, and runs while `step > 0 ? i < stop : i > stop` (a zero step runs no
// iteration: the interpreter reports it as an error, a kernel cannot).
//
// Everything that depends only on the thread index or on parameters (thread parts of layouts,
// the workspace regions) is computed in the prologue block, so that the cached values dominate
// every use wherever the first use happens to be.
#include "jit/codegen.h"

#include <llvm/IR/InlineAsm.h>

#include "isa/convert.h"
#include "jit/lowering.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <algorithm>

namespace tilus::jit {

Codegen::Codegen(llvm::Module &module, const Program &program, const ProgramInfo &info,
                 const JitOptions &options)
    : ctx(module.getContext()), mod(module), b(module.getContext()), prog(program), info(info),
      opts(options) {}

// ---- types and constants --------------------------------------------------------------------

llvm::Type *Codegen::elemType(DataType t) {
  if (t.isBool())
    return b.getInt1Ty();
  if (t == DataType::f16())
    return b.getHalfTy();
  if (t == DataType::bf16())
    return b.getBFloatTy();
  if (t == DataType::f32())
    return b.getFloatTy();
  if (t == DataType::f64())
    return b.getDoubleTy();
  return b.getIntNTy(t.bits);
}

llvm::Value *Codegen::constBits(DataType t, uint64_t bits) {
  bits &= bitMask(t.bits);
  llvm::Type *type = elemType(t);
  if (type->isIntegerTy())
    return llvm::ConstantInt::get(type, bits);
  llvm::Constant *asInt = llvm::ConstantInt::get(b.getIntNTy(t.bits), bits);
  return llvm::ConstantExpr::getBitCast(asInt, type);
}

llvm::Value *Codegen::toBits(llvm::Value *v, DataType t) {
  if (v->getType()->isIntegerTy())
    return v;
  return b.CreateBitCast(v, b.getIntNTy(t.bits));
}

llvm::Value *Codegen::fromBits(llvm::Value *bits, DataType t) {
  llvm::Type *type = elemType(t);
  if (type->isIntegerTy())
    return bits;
  return b.CreateBitCast(bits, type);
}

llvm::Value *Codegen::packRegister32(const std::vector<llvm::Value *> &slots, int64_t first,
                                     int64_t count, DataType t) {
  auto *vector =
      llvm::FixedVectorType::get(b.getIntNTy(unsigned(t.storageBits())), unsigned(count));
  llvm::Value *packed = llvm::PoisonValue::get(vector);
  for (int64_t l = 0; l < count; ++l)
    packed = b.CreateInsertElement(packed, toBits(slots[size_t(first + l)], t), uint64_t(l));
  return b.CreateBitCast(packed, b.getInt32Ty());
}

llvm::CallInst *Codegen::volatileAsm(llvm::Type *ret, const std::string &text,
                                     const std::string &constraints,
                                     llvm::ArrayRef<llvm::Value *> args) {
  std::vector<llvm::Type *> types;
  for (llvm::Value *a : args)
    types.push_back(a->getType());
  auto *type = llvm::FunctionType::get(ret, types, false);
  return b.CreateCall(llvm::InlineAsm::get(type, text, constraints, /*hasSideEffects=*/true), args);
}

llvm::Value *Codegen::tid() { return tid_; }

llvm::Value *Codegen::tidAfresh() {
  auto *type = llvm::FunctionType::get(b.getInt32Ty(), false);
  llvm::InlineAsm *read = llvm::InlineAsm::get(type, "mov.u32 $0, %tid.x;", "=r", true);
  llvm::Value *fresh = b.CreateCall(read);
  if (tid_ == blockTid_)
    return fresh;
  // in a thread group: minus its first thread (tid.x - tid(), computed in the prologue)
  return b.CreateSub(fresh, b.CreateSub(blockTid_, tid_));
}

llvm::Value *Codegen::sharedBase() {
  llvm::GlobalVariable *smem = mod.getNamedGlobal("tilus_smem");
  if (!smem) {
    smem = new llvm::GlobalVariable(mod, llvm::ArrayType::get(b.getInt8Ty(), 0), false,
                                    llvm::GlobalValue::ExternalLinkage, nullptr, "tilus_smem",
                                    nullptr, llvm::GlobalValue::NotThreadLocal, 3);
    // wgmma descriptors and their swizzles address absolute shared bytes: the checker places
    // swizzled allocations at multiples of 1024, so the base must be 1024-aligned too
    smem->setAlignment(llvm::Align(info.wgmma.empty() && info.tma.empty() ? 16 : 1024));
  }
  return smem;
}

llvm::Value *Codegen::callIntrinsic(llvm::Intrinsic::ID id, llvm::ArrayRef<llvm::Type *> types,
                                    llvm::ArrayRef<llvm::Value *> args) {
  llvm::Function *f = llvm::Intrinsic::getDeclaration(&mod, id, types);
  return b.CreateCall(f, args);
}

llvm::Value *Codegen::callDevlib(const char *name, llvm::ArrayRef<llvm::Value *> args) {
  llvm::Function *f = mod.getFunction(name);
  assert(f && "device library function missing");
  return b.CreateCall(f, args);
}

void Codegen::barrier() {
  if (group_.threads == 0 || (group_.threads == int64_t(info.threads) && !group_.copyIndex)) {
    // the block, or a thread group of all its threads: the block's barrier
    callIntrinsic(llvm::Intrinsic::nvvm_barrier0, {}, {});
    return;
  }
  if (group_.copyIndex != nullptr && group_.threads == 32) {
    // a one-warp copy of a clause lowered as one body: the warp's own barrier (bar.warp.sync
    // orders the warp's shared-memory accesses as bar.sync does); a named barrier chosen by a
    // register would make ptxas reserve all 16 of the block, which limits the blocks per SM
    callIntrinsic(llvm::Intrinsic::nvvm_bar_warp_sync, {}, {constI32(-1)});
    return;
  }
  llvm::Value *id = constI32(group_.barrier);
  if (group_.copyIndex != nullptr)
    id = b.CreateAdd(id, group_.copyIndex);
  callIntrinsic(llvm::Intrinsic::nvvm_barrier_sync_cnt, {}, {id, constI32(group_.threads)});
}

Status Codegen::requireHopper(const Instruction &inst) {
  if (opts.smVersion >= 90)
    return Status::success();
  return error(ErrorCode::Unsupported, inst,
               std::string(inst.spec().name) + " needs sm_90a (Hopper); the target is sm_" +
                   std::to_string(opts.smVersion));
}

Status Codegen::error(ErrorCode code, const Instruction &inst, const std::string &message) {
  Location loc;
  loc.program = prog.name;
  loc.line = inst.loc.line;
  loc.column = inst.loc.column;
  for (size_t k = 0; k < prog.instructions.size(); ++k)
    if (&prog.instructions[k] == &inst)
      loc.instruction = int64_t(k);
  return Status::error(code, std::string(inst.spec().name) + ": " + message, loc);
}

// ---- variables --------------------------------------------------------------------------------

void Codegen::countAssignments(const std::vector<Stmt> &body) {
  for (const Stmt &s : body) {
    switch (s.kind) {
    case StmtKind::Instruction:
      for (VarId r : prog.instructions[s.index].results)
        assignments_[r] += 1;
      break;
    case StmtKind::Assign:
    case StmtKind::Specialize:
      assignments_[s.var] += 1;
      break;
    case StmtKind::For:
      assignments_[s.var] += 2; // the loop updates it
      break;
    case StmtKind::If:
    case StmtKind::While:
    case StmtKind::Break:
    case StmtKind::Continue:
    case StmtKind::Assert:
    case StmtKind::Parallel:
      break;
    case StmtKind::Group:
      if (s.var != kNoId)
        assignments_[s.var] += s.copies > 1 ? 2 : 1; // the copy index, set on entry to each copy
      break;
    }
    countAssignments(s.body);
    countAssignments(s.orelse);
  }
}

VarStorage &Codegen::storage(VarId v, const std::vector<llvm::Type *> &types) {
  std::unique_ptr<VarStorage> &slot = storage_[v];
  if (slot)
    return *slot;
  slot = std::make_unique<VarStorage>();
  slot->types = types;
  slot->multi = assignments_[v] > 1;
  if (slot->multi) {
    llvm::IRBuilder<> ab(allocaPoint_);
    for (llvm::Type *t : types)
      slot->allocas.push_back(ab.CreateAlloca(t, nullptr, prog.var(v).name));
  } else {
    slot->values.assign(types.size(), nullptr);
  }
  return *slot;
}

std::vector<llvm::Value *> Codegen::readComponents(VarId v) {
  VarStorage &s = *storage_[v];
  std::vector<llvm::Value *> out(s.types.size());
  for (size_t k = 0; k < out.size(); ++k) {
    if (s.multi)
      out[k] = b.CreateLoad(s.types[k], s.allocas[k]);
    else
      out[k] = s.values[k] ? s.values[k] : llvm::UndefValue::get(s.types[k]);
  }
  return out;
}

void Codegen::writeComponents(VarId v, const std::vector<llvm::Value *> &values) {
  VarStorage &s = *storage_[v];
  for (size_t k = 0; k < values.size(); ++k) {
    if (s.multi)
      b.CreateStore(values[k], s.allocas[k]);
    else
      s.values[k] = values[k];
  }
}

llvm::Value *Codegen::readPointer(VarId v) { return readComponents(v)[0]; }

llvm::Value *Codegen::readScalar(VarId v) {
  storage(v, {elemType(prog.var(v).dtype)});
  return readComponents(v)[0];
}

void Codegen::writeScalar(VarId v, llvm::Value *value) {
  storage(v, {elemType(prog.var(v).dtype)});
  writeComponents(v, {value});
}

std::vector<llvm::Value *> Codegen::readRegister(VarId v) {
  const VarType &type = info.vars[v];
  storage(v, std::vector<llvm::Type *>(size_t(type.layout->numLocals()), elemType(type.dtype)));
  return readComponents(v);
}

void Codegen::writeRegister(VarId v, const std::vector<llvm::Value *> &slots) {
  const VarType &type = info.vars[v];
  storage(v, std::vector<llvm::Type *>(size_t(type.layout->numLocals()), elemType(type.dtype)));
  writeComponents(v, slots);
}

namespace {

llvm::Type *ptrGlobal(llvm::LLVMContext &ctx) { return llvm::PointerType::get(ctx, 1); }

} // namespace

GlobalView Codegen::readGlobal(VarId v) {
  VarStorage &s = *storage_[v];
  std::vector<llvm::Value *> c = readComponents(v);
  GlobalView view;
  view.dtype = info.vars[v].dtype;
  view.ptr = c[0];
  view.offset = c[1];
  view.valid = c[2];
  size_t rank = (s.types.size() - 3) / 4;
  for (size_t d = 0; d < rank; ++d) {
    view.shape.push_back(c[3 + d]);
    view.lo.push_back(c[3 + rank + d]);
    view.hi.push_back(c[3 + 2 * rank + d]);
    view.strides.push_back(c[3 + 3 * rank + d]);
  }
  return view;
}

void Codegen::writeGlobal(VarId v, const GlobalView &view) {
  size_t rank = view.shape.size();
  std::vector<llvm::Type *> types = {ptrGlobal(ctx), b.getInt64Ty(), b.getInt1Ty()};
  types.resize(3 + 4 * rank, b.getInt64Ty());
  storage(v, types);
  std::vector<llvm::Value *> c = {view.ptr, view.offset, view.valid};
  for (auto *list : {&view.shape, &view.lo, &view.hi, &view.strides})
    c.insert(c.end(), list->begin(), list->end());
  writeComponents(v, c);
}

SharedView Codegen::readShared(VarId v) {
  const VarType &type = info.vars[v];
  SharedView view;
  view.root = type.root == kNoId ? v : type.root;
  view.dtype = type.dtype;
  view.shape = type.shape;
  view.dims = *sharedDims_[v];
  view.origin = readComponents(v);
  return view;
}

Status Codegen::writeShared(VarId v, const SharedView &view) {
  if (sharedDims_[v] && *sharedDims_[v] != view.dims)
    return Status::error(ErrorCode::Unsupported,
                         "shared tensor `" + prog.var(v).name +
                             "` is updated with a view of other root dimensions");
  sharedDims_[v] = view.dims;
  storage(v, std::vector<llvm::Type *>(view.origin.size(), b.getInt64Ty()));
  writeComponents(v, view.origin);
  return Status::success();
}

const LayoutMap &Codegen::layoutMap(const RegisterLayout &layout) {
  std::string key = layout.canonicalString();
  std::unique_ptr<LayoutMap> &slot = layoutCache_[key];
  if (!slot) {
    slot = std::make_unique<LayoutMap>(layout);
    cachedMaps_.insert(slot.get());
  }
  return *slot;
}

std::shared_ptr<const std::vector<SlotSource>> Codegen::slotSources(const LayoutMap &result,
                                                                    const LayoutMap &operand) {
  if (!cachedMaps_.count(&result) || !cachedMaps_.count(&operand))
    return std::make_shared<const std::vector<SlotSource>>(gatherSlots(result, operand));
  std::shared_ptr<const std::vector<SlotSource>> &slot = slotSourceCache_[{&result, &operand}];
  if (!slot)
    slot = std::make_shared<const std::vector<SlotSource>>(gatherSlots(result, operand));
  return slot;
}

const LayoutMap &Codegen::layoutOf(VarId v) { return layoutMap(*info.vars[v].layout); }

const std::vector<llvm::Value *> &Codegen::threadPart(const LayoutMap &map) {
  auto it = threadPartCache_.find(&map);
  if (it != threadPartCache_.end())
    return it->second;
  llvm::IRBuilder<> pb(entry_->getTerminator());
  std::vector<llvm::Value *> parts(size_t(map.rank()), pb.getInt64(0));
  llvm::Value *t = pb.CreateZExt(tid_, pb.getInt64Ty());
  for (const LayoutTerm &term : map.spatialTerms()) {
    if (term.dim < 0)
      continue;
    llvm::Value *coord = pb.CreateURem(pb.CreateUDiv(t, pb.getInt64(uint64_t(term.div))),
                                       pb.getInt64(uint64_t(term.size)));
    llvm::Value *scaled = pb.CreateMul(coord, pb.getInt64(uint64_t(term.stride)));
    parts[size_t(term.dim)] = pb.CreateAdd(parts[size_t(term.dim)], scaled);
  }
  return threadPartCache_.emplace(&map, std::move(parts)).first->second;
}

llvm::Value *Codegen::isPrimary(const LayoutMap &map) {
  auto it = primaryCache_.find(&map);
  if (it != primaryCache_.end())
    return it->second;
  llvm::IRBuilder<> pb(entry_->getTerminator());
  llvm::Value *primary = pb.getTrue();
  for (const LayoutTerm &term : map.spatialTerms()) {
    if (term.dim >= 0)
      continue;
    llvm::Value *coord = pb.CreateURem(pb.CreateUDiv(tid_, pb.getInt32(uint32_t(term.div))),
                                       pb.getInt32(uint32_t(term.size)));
    primary = pb.CreateAnd(primary, pb.CreateICmpEQ(coord, pb.getInt32(0)));
  }
  primaryCache_[&map] = primary;
  return primary;
}

llvm::Value *Codegen::workspaceRegion(const Instruction &inst) {
  size_t index = size_t(&inst - prog.instructions.data());
  return b.CreateGEP(b.getInt8Ty(), workspace_, workspaceRegions_[index]);
}

// ---- the kernel -------------------------------------------------------------------------------

namespace {

std::string sanitize(const std::string &name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$') ? c : '_';
  if (out.empty() || std::isdigit(static_cast<unsigned char>(out[0])))
    out = "_" + out;
  return out;
}

} // namespace

Status Codegen::setupParameters() {
  // Parameters: the program's, then the workspace pointer.
  // Launch-time specialisation (jit.h): facts the runtime guarantees for this kernel.
  const std::vector<ParamFact> &facts = opts.specialization.params;
  if (!facts.empty() && facts.size() != prog.params.size())
    return Status::error(ErrorCode::Jit, "specialisation has " + std::to_string(facts.size()) +
                                             " parameter facts; program " + prog.name + " has " +
                                             std::to_string(prog.params.size()) + " parameters");
  llvm::Function::arg_iterator arg = fn_->arg_begin();
  for (size_t index = 0; index < prog.params.size(); ++index) {
    VarId p = prog.params[index];
    const Variable &var = prog.var(p);
    ParamFact fact = facts.empty() ? ParamFact::None : facts[index];
    llvm::Value *value = &*arg++;
    value->setName(var.name);
    bool integer = var.kind != VarKind::Pointer && !var.dtype.isFloat() && !var.dtype.isBool();
    if ((fact == ParamFact::Aligned16 && var.kind != VarKind::Pointer) ||
        ((fact == ParamFact::Divisible16 || fact == ParamFact::One || fact == ParamFact::NotOne) &&
         !integer))
      return Status::error(ErrorCode::Jit, "specialisation fact of parameter " + var.name +
                                               " does not fit its kind");
    if (var.kind == VarKind::Pointer) {
      if (fact == ParamFact::Aligned16)
        fn_->addParamAttr(unsigned(index), llvm::Attribute::getWithAlignment(ctx, llvm::Align(16)));
      storage(p, {value->getType()});
      writeComponents(p, {value});
      continue;
    }
    if (fact == ParamFact::One)
      value = llvm::ConstantInt::get(value->getType(), 1);
    else if (fact == ParamFact::NotOne)
      // a test against 1 folds (a loop chosen for m == 1 leaves the kernel of the other class)
      b.CreateAssumption(b.CreateICmpNE(value, llvm::ConstantInt::get(value->getType(), 1)));
    else if (fact == ParamFact::Divisible16) {
      b.CreateAssumption(
          b.CreateICmpEQ(b.CreateAnd(value, llvm::ConstantInt::get(value->getType(), 15)),
                         llvm::ConstantInt::get(value->getType(), 0)));
      // the value as the lowering sees it: its zero low bits visible to computeKnownBits without
      // the assumption (e.g. bounds that no vector group can straddle); InstCombine removes the
      // mask again by the assumption
      value = b.CreateAnd(value, llvm::ConstantInt::get(value->getType(), ~uint64_t(15)));
    }
    DataType t = var.dtype;
    llvm::Type *want = elemType(t);
    if (value->getType() != want) {
      llvm::Value *bits = value;
      if (bits->getType()->isIntegerTy() && bits->getType()->getIntegerBitWidth() != t.bits)
        bits = b.CreateTrunc(bits, b.getIntNTy(t.bits));
      value = t.isBool() ? b.CreateICmpNE(bits, llvm::ConstantInt::get(bits->getType(), 0))
                         : fromBits(bits, t);
    }
    writeScalar(p, value);
  }
  if (info.usesWorkspace) {
    workspace_ = &*arg++;
    workspace_->setName("workspace");
    // the runtime's workspace is 256-byte aligned (docs/runtime.md, "Caller workspaces"), and so
    // is every region
    fn_->addParamAttr(unsigned(prog.params.size()),
                      llvm::Attribute::getWithAlignment(ctx, llvm::Align(256)));
  }
  // Workspace regions (vm/cuda/workspace.h): one per AllocateGlobal in instruction order, each
  // starting at the end of the previous one rounded up to 256 bytes.
  workspaceRegions_.assign(prog.instructions.size(), nullptr);
  llvm::Value *offset = b.getInt64(0);
  for (size_t k = 0; k < prog.instructions.size(); ++k) {
    const Instruction &inst = prog.instructions[k];
    if (inst.opcode != Opcode::AllocateGlobal)
      continue;
    llvm::Value *aligned = b.CreateAnd(b.CreateAdd(offset, b.getInt64(255)), b.getInt64(~255ull));
    workspaceRegions_[k] = aligned;
    llvm::Value *elements = b.getInt64(1);
    for (ExprId e : inst.arg(ArgName::shape).exprs)
      elements = b.CreateMul(elements, exprI64(e));
    DataType t = inst.arg(ArgName::dtype).dtype;
    llvm::Value *bits = b.CreateMul(elements, b.getInt64(uint64_t(t.storageBits())));
    offset = b.CreateAdd(aligned, b.CreateUDiv(b.CreateAdd(bits, b.getInt64(7)), b.getInt64(8)));
  }
  return Status::success();
}

Status Codegen::run() {
  std::vector<llvm::Type *> params;
  for (VarId p : prog.params) {
    const Variable &var = prog.var(p);
    if (var.kind == VarKind::Pointer) {
      params.push_back(ptrGlobal(ctx));
      continue;
    }
    DataType t = var.dtype;
    if (t == DataType::f32())
      params.push_back(b.getFloatTy());
    else if (t == DataType::f64())
      params.push_back(b.getDoubleTy());
    else
      params.push_back(b.getIntNTy(t.bits > 32 ? 64 : 32));
  }
  if (info.usesWorkspace)
    params.push_back(ptrGlobal(ctx));
  // the tensor maps of TmaLoad: 128-byte objects passed by value in the parameter space
  const size_t firstTensorMap = params.size();
  for (size_t i = 0; i < info.tensorMaps.size(); ++i)
    params.push_back(llvm::PointerType::get(ctx, 0));
  auto *fnType = llvm::FunctionType::get(b.getVoidTy(), params, false);
  fn_ =
      llvm::Function::Create(fnType, llvm::GlobalValue::ExternalLinkage, sanitize(prog.name), &mod);
  fn_->setCallingConv(llvm::CallingConv::PTX_Kernel);
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  if (!info.tensorMaps.empty()) {
    // byval + grid_constant: the operand of cp.async.bulk.tensor is the parameter's own
    // (generic) address, with no copy to local memory
    llvm::Type *object = llvm::ArrayType::get(b.getInt8Ty(), 128);
    std::vector<llvm::Metadata *> indices;
    for (size_t i = 0; i < info.tensorMaps.size(); ++i) {
      unsigned index = unsigned(firstTensorMap + i);
      fn_->addParamAttr(index, llvm::Attribute::getWithByValType(ctx, object));
      fn_->addParamAttr(index, llvm::Attribute::getWithAlignment(ctx, llvm::Align(64)));
      fn_->getArg(index)->setName("tmap" + std::to_string(i));
      tensorMaps_.push_back(fn_->getArg(index));
      indices.push_back(llvm::ConstantAsMetadata::get(b.getInt32(index + 1))); // 1-based
    }
    llvm::Metadata *md[] = {llvm::ValueAsMetadata::get(fn_),
                            llvm::MDString::get(ctx, "grid_constant"),
                            llvm::MDNode::get(ctx, indices)};
    mod.getOrInsertNamedMetadata("nvvm.annotations")->addOperand(llvm::MDNode::get(ctx, md));
  }

  assignments_.assign(prog.vars.size(), 0);
  for (VarId p : prog.params)
    assignments_[p] = 1;
  countAssignments(prog.body);
  storage_.resize(prog.vars.size());
  sharedDims_.resize(prog.vars.size());

  entry_ = llvm::BasicBlock::Create(ctx, "prologue", fn_);
  llvm::BasicBlock *body = llvm::BasicBlock::Create(ctx, "body", fn_);
  b.SetInsertPoint(entry_);
  allocaPoint_ = llvm::cast<llvm::Instruction>(b.CreateAlloca(b.getInt32Ty(), nullptr, "anchor"));
  tid_ = blockTid_ = callIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_tid_x, {}, {});
  b.CreateBr(body);
  b.SetInsertPoint(entry_->getTerminator());
  TILUSVM_TRY(setupParameters());
  b.SetInsertPoint(body);
  InstructionRouter router(*this);
  router_ = &router;
  Status status = lowerBody(prog.body);
  router_ = nullptr;
  TILUSVM_TRY(status);
  b.CreateRetVoid();
  allocaPoint_->eraseFromParent();
  return Status::success();
}

// ---- control flow -------------------------------------------------------------------------------

void Codegen::startDeadBlock() { b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "dead", fn_)); }

Status Codegen::lowerBody(const std::vector<Stmt> &body) {
  for (const Stmt &s : body)
    TILUSVM_TRY(lowerStmt(s));
  return Status::success();
}

Status Codegen::lowerStmt(const Stmt &s) {
  switch (s.kind) {
  case StmtKind::Instruction:
    return lowerInstruction(prog.instructions[s.index]);
  case StmtKind::Assign: {
    DataType from = prog.expr(s.expr).dtype, to = prog.var(s.var).dtype;
    writeScalar(s.var, convert(emitExpr(s.expr), from, to));
    return Status::success();
  }
  case StmtKind::Specialize: {
    // the value the launch computed (the kernel's class), else the expression's value
    const std::vector<bool> &values = opts.specialization.values;
    if (values.empty()) {
      writeScalar(s.var, emitExpr(s.expr));
      return Status::success();
    }
    size_t k = specialized_++;
    if (k >= values.size())
      return Status::error(ErrorCode::Bytecode,
                           "the launch class has " + std::to_string(values.size()) +
                               " specialized values; the program has more specialize statements");
    writeScalar(s.var, b.getInt1(values[k]));
    return Status::success();
  }
  case StmtKind::For:
    return lowerFor(s);
  case StmtKind::If:
    return lowerIf(s);
  case StmtKind::While:
    return lowerWhile(s);
  case StmtKind::Break:
  case StmtKind::Continue:
    if (loops_.empty())
      return Status::error(ErrorCode::BreakOutsideLoop, "break or continue outside a loop");
    b.CreateBr(s.kind == StmtKind::Break ? loops_.back().breakTo : loops_.back().continueTo);
    startDeadBlock();
    return Status::success();
  case StmtKind::Assert: // a precondition, checked on the host before the launch
    return Status::success();
  case StmtKind::Parallel:
    return lowerParallel(s);
  case StmtKind::Group: // only inside a Parallel (the checker)
    return Status::error(ErrorCode::Bytecode, "group statement outside a parallel statement");
  }
  return Status::success();
}

Status Codegen::lowerFor(const Stmt &s) {
  DataType type = prog.var(s.var).dtype;
  llvm::Value *start = exprI64(s.expr);
  llvm::Value *stop = exprI64(s.stop);
  llvm::Value *step = s.step == kNoId ? b.getInt64(1) : exprI64(s.step);
  auto test = [&](llvm::Value *i) {
    llvm::Value *up = b.CreateICmpSGT(step, b.getInt64(0));
    llvm::Value *down = b.CreateICmpSLT(step, b.getInt64(0));
    return b.CreateOr(b.CreateAnd(up, b.CreateICmpSLT(i, stop)),
                      b.CreateAnd(down, b.CreateICmpSGT(i, stop)));
  };
  return emitLoop(
      "for", start, step, test,
      [&](llvm::Value *i, const LoopTargets &targets) {
        writeScalar(s.var, convert(i, DataType::i64(), type));
        loops_.push_back(targets);
        Status status = lowerBody(s.body);
        loops_.pop_back();
        return status;
      },
      prog.var(s.var).name + ".i", /*unroll=*/true, s.unroll);
}

Status Codegen::lowerIf(const Stmt &s) {
  llvm::Value *cond = truth(emitExpr(s.expr), prog.expr(s.expr).dtype);
  // a condition of constants and launch-time specialised values: only the side that runs is
  // lowered (the other would be deleted by the pipeline's first SimplifyCFG, after costing the
  // IR building its instructions: the split code of a whole-tile GEMM kernel)
  if (auto *known = llvm::dyn_cast<llvm::ConstantInt>(cond))
    return lowerBody(known->isOne() ? s.body : s.orelse);
  llvm::BasicBlock *thenBlock = llvm::BasicBlock::Create(ctx, "if.then", fn_);
  llvm::BasicBlock *elseBlock = llvm::BasicBlock::Create(ctx, "if.else", fn_);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx, "if.end", fn_);
  b.CreateCondBr(cond, thenBlock, elseBlock);
  b.SetInsertPoint(thenBlock);
  TILUSVM_TRY(lowerBody(s.body));
  b.CreateBr(join);
  b.SetInsertPoint(elseBlock);
  TILUSVM_TRY(lowerBody(s.orelse));
  b.CreateBr(join);
  b.SetInsertPoint(join);
  return Status::success();
}

Status Codegen::lowerWhile(const Stmt &s) {
  llvm::BasicBlock *header = llvm::BasicBlock::Create(ctx, "while.header", fn_);
  llvm::BasicBlock *bodyBlock = llvm::BasicBlock::Create(ctx, "while.body", fn_);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx, "while.exit", fn_);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  b.CreateCondBr(truth(emitExpr(s.expr), prog.expr(s.expr).dtype), bodyBlock, exit);
  b.SetInsertPoint(bodyBlock);
  loops_.push_back({header, exit});
  Status status = lowerBody(s.body);
  loops_.pop_back();
  TILUSVM_TRY(status);
  b.CreateBr(header);
  b.SetInsertPoint(exit);
  return Status::success();
}

// ---- control flow inside a lowering ---------------------------------------------------------

void Codegen::emitIf(llvm::Value *cond, const llvm::Twine &name, llvm::function_ref<void()> then) {
  emitIf(cond, name, {}, [&] {
    then();
    return std::vector<llvm::Value *>();
  });
}

std::vector<llvm::Value *> Codegen::emitIf(llvm::Value *cond, const llvm::Twine &name,
                                           const std::vector<llvm::Value *> &otherwise,
                                           llvm::function_ref<std::vector<llvm::Value *>()> then) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *from = b.GetInsertBlock();
  llvm::BasicBlock *thenBlock = llvm::BasicBlock::Create(ctx, name, fn);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx, name + ".end", fn);
  b.CreateCondBr(cond, thenBlock, join);
  b.SetInsertPoint(thenBlock);
  std::vector<llvm::Value *> values = then();
  assert(values.size() == otherwise.size() && "emitIf: one value per `otherwise` entry");
  llvm::BasicBlock *thenEnd = b.GetInsertBlock();
  b.CreateBr(join);
  b.SetInsertPoint(join);
  for (size_t k = 0; k < values.size(); ++k) {
    llvm::PHINode *phi = b.CreatePHI(otherwise[k]->getType(), 2);
    phi->addIncoming(values[k], thenEnd);
    phi->addIncoming(otherwise[k], from);
    values[k] = phi;
  }
  return values;
}

void Codegen::emitIfElse(llvm::Value *cond, const llvm::Twine &name,
                         llvm::function_ref<void()> then, llvm::function_ref<void()> otherwise) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *thenBlock = llvm::BasicBlock::Create(ctx, name, fn);
  llvm::BasicBlock *elseBlock = llvm::BasicBlock::Create(ctx, name + ".else", fn);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx, name + ".end", fn);
  b.CreateCondBr(cond, thenBlock, elseBlock);
  b.SetInsertPoint(elseBlock);
  otherwise();
  b.CreateBr(join);
  b.SetInsertPoint(thenBlock);
  then();
  b.CreateBr(join);
  b.SetInsertPoint(join);
}

std::vector<llvm::Value *> Codegen::emitCountedLoop(const llvm::Twine &name, llvm::Value *start,
                                                    llvm::Value *end, int64_t step,
                                                    const std::vector<llvm::Value *> &init,
                                                    CarriedBody body, bool mayBeEmpty) {
  assert((!mayBeEmpty || init.empty()) && "a loop that may not run carries no values out");
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *pre = b.GetInsertBlock();
  llvm::BasicBlock *loop = llvm::BasicBlock::Create(ctx, name, fn);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx, name + ".end", fn);
  if (mayBeEmpty)
    b.CreateCondBr(b.CreateICmpSLT(start, end), loop, exit);
  else
    b.CreateBr(loop);
  b.SetInsertPoint(loop);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2);
  std::vector<llvm::PHINode *> phis;
  std::vector<llvm::Value *> carried;
  for (llvm::Value *v : init) {
    phis.push_back(b.CreatePHI(v->getType(), 2));
    carried.push_back(phis.back());
  }
  i->addIncoming(start, pre);
  for (size_t k = 0; k < init.size(); ++k)
    phis[k]->addIncoming(init[k], pre);
  std::vector<llvm::Value *> next = body(i, carried);
  assert(next.size() == init.size() && "emitCountedLoop: one value per carried value");
  llvm::Value *in = b.CreateAdd(i, b.getInt64(uint64_t(step)));
  i->addIncoming(in, b.GetInsertBlock());
  for (size_t k = 0; k < next.size(); ++k)
    phis[k]->addIncoming(next[k], b.GetInsertBlock());
  b.CreateCondBr(b.CreateICmpSLT(in, end), loop, exit);
  b.SetInsertPoint(exit);
  return next;
}

Status
Codegen::emitLoop(const llvm::Twine &name, llvm::Value *start, llvm::Value *step,
                  llvm::function_ref<llvm::Value *(llvm::Value *i)> test,
                  llvm::function_ref<Status(llvm::Value *i, const LoopTargets &targets)> body,
                  const llvm::Twine &index, bool unroll, uint32_t unrollCount) {
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *header = llvm::BasicBlock::Create(ctx, name + ".header", fn);
  llvm::BasicBlock *bodyBlock = llvm::BasicBlock::Create(ctx, name + ".body", fn);
  llvm::BasicBlock *latch = llvm::BasicBlock::Create(ctx, name + ".latch", fn);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(ctx, name + ".exit", fn);
  llvm::BasicBlock *pre = b.GetInsertBlock();
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *i = b.CreatePHI(b.getInt64Ty(), 2, index);
  i->addIncoming(start, pre);
  b.CreateCondBr(test(i), bodyBlock, exit);
  b.SetInsertPoint(bodyBlock);
  TILUSVM_TRY(body(i, LoopTargets{latch, exit}));
  b.CreateBr(latch);
  b.SetInsertPoint(latch);
  i->addIncoming(b.CreateAdd(i, step), latch);
  llvm::BranchInst *back = b.CreateBr(header);
  // the loop's metadata: no unrolling, or unrolling by the program's hint (LoopUnroll then
  // unrolls by exactly that count, with a remainder where the trip count may not divide it;
  // a hint of 1 keeps the loop as it is). Without either, LLVM decides.
  llvm::MDNode *hint = nullptr;
  if (!unroll || unrollCount == 1)
    hint = llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"));
  else if (unrollCount >= 2)
    hint = llvm::MDNode::get(ctx, {llvm::MDString::get(ctx, "llvm.loop.unroll.count"),
                                   llvm::ConstantAsMetadata::get(b.getInt32(unrollCount))});
  if (hint) {
    llvm::MDNode *loop = llvm::MDNode::getDistinct(ctx, {nullptr, hint});
    loop->replaceOperandWith(0, loop);
    back->setMetadata(llvm::LLVMContext::MD_loop, loop);
  }
  b.SetInsertPoint(exit);
  return Status::success();
}

// ---- dispatch ----------------------------------------------------------------------------------

Status Codegen::lowerInstruction(const Instruction &inst) {
  if (!countIr_)
    return visitInstruction(inst.opcode, *router_, inst);
  auto instructions = [&] {
    int64_t n = 0;
    for (const llvm::BasicBlock &block : *fn_)
      n += int64_t(block.size());
    return n;
  };
  int64_t before = instructions();
  Status status = visitInstruction(inst.opcode, *router_, inst);
  irCounts_.push_back(
      {size_t(&inst - prog.instructions.data()), inst.spec().name, instructions() - before});
  return status;
}

void Codegen::addSharedAccess(const SharedAccessReport &report) {
  for (const SharedAccessReport &r : sharedAccesses_)
    if (r.instruction == report.instruction)
      return;
  auto at =
      std::find_if(sharedAccesses_.begin(), sharedAccesses_.end(),
                   [&](const SharedAccessReport &r) { return r.instruction > report.instruction; });
  sharedAccesses_.insert(at, report);
}

Status InstructionRouter::visitInvalid(const Instruction &inst) {
  return core_.error(ErrorCode::Unsupported, inst, "unknown opcode");
}

} // namespace tilus::jit
