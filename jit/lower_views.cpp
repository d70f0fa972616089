// Tensor creation and memory views: BlockIndices, AllocateRegister, Iota (register tensors
// built in each thread's registers) and the views of global and shared memory (ViewGlobal,
// AllocateGlobal, AllocateShared, SliceGlobal, SliceShared).
//
// Views mirror the interpreter's (vm/cpu/memory.h): a global view is a root pointer, an element
// offset, per-dimension strides and the index range [lo, hi) inside every tensor of its slice
// chain; a shared view is a root allocation and an origin in root coordinates. Loads and stores
// address them through tiles (lower_memory.cpp).
#include "jit/lowering.h"

#include "isa/convert.h"
#include "isa/view_rules.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

Status ViewLowering::visitBlockIndices(const Instruction &inst) {
  static const llvm::Intrinsic::ID ids[3] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                             llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                             llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
  for (size_t k = 0; k < inst.results.size() && k < 3; ++k) {
    VarId v = inst.results[k];
    llvm::Value *index = cg.callIntrinsic(ids[k], {}, {});
    // The index is below the grid's extent: a range when the extent is a constant, an
    // assumption otherwise. Bounds tests of tiles addressed by block indices then fold.
    if (k < prog.grid.size()) {
      llvm::Value *extent = cg.exprI64(prog.grid[k]);
      auto *call = llvm::dyn_cast<llvm::CallInst>(index);
      auto *constant = llvm::dyn_cast<llvm::ConstantInt>(extent);
      if (call && constant && constant->getSExtValue() >= 1 &&
          constant->getSExtValue() <= int64_t(INT32_MAX))
        call->addRangeRetAttr(llvm::ConstantRange(
            llvm::APInt(32, 0), llvm::APInt(32, uint64_t(constant->getSExtValue()))));
      else if (!constant)
        b.CreateAssumption(b.CreateICmpSLT(b.CreateZExt(index, b.getInt64Ty()), extent));
    }
    cg.writeScalar(v, cg.convert(index, DataType::i32(), prog.var(v).dtype));
    cg.noteBlockIndex(v, int(k));
  }
  return Status::success();
}

Status ViewLowering::visitAllocateRegister(const Instruction &inst) {
  VarId r = inst.results[0];
  DataType t = info.vars[r].dtype;
  llvm::Value *v = cg.zeroOf(t);
  if (const Argument &init = inst.arg(ArgName::init); init.present)
    v = cg.convert(cg.emitExpr(init.expr), prog.expr(init.expr).dtype, t);
  cg.writeRegister(r, std::vector<llvm::Value *>(size_t(info.vars[r].layout->numLocals()), v));
  return Status::success();
}

Status ViewLowering::visitIota(const Instruction &inst) {
  VarId r = inst.results[0];
  const LayoutMap &map = cg.layoutOf(r);
  int64_t dim = inst.arg(ArgName::dim).intValue;
  if (dim < 0 || dim >= map.rank())
    return cg.error(ErrorCode::ReduceDim, inst,
                    "Iota dimension " + std::to_string(dim) + " out of range");
  DataType t = info.vars[r].dtype;
  const std::vector<llvm::Value *> &s = cg.threadPart(map);
  std::vector<llvm::Value *> out;
  for (int64_t i = 0; i < map.locals(); ++i) {
    llvm::Value *x = b.CreateAdd(s[size_t(dim)], cg.constI64(map.localPart(i)[dim]));
    out.push_back(cg.convert(x, DataType::i64(), t));
  }
  cg.writeRegister(r, out);
  return Status::success();
}

namespace {

/// The strides (i64) of a contiguous row-major tensor of run-time shape `shape`.
std::vector<llvm::Value *> contiguousStrides(llvm::IRBuilder<> &b,
                                             const std::vector<llvm::Value *> &shape) {
  std::vector<llvm::Value *> strides(shape.size(), nullptr);
  llvm::Value *s = b.getInt64(1);
  for (size_t d = shape.size(); d-- > 0;) {
    strides[d] = s;
    s = mulFolded(b, s, shape[d]);
  }
  return strides;
}

} // namespace

Status ViewLowering::visitViewGlobal(const Instruction &inst) {
  VarId ptrVar = inst.arg(ArgName::ptr).var;
  if (ptrVar == kNoId || prog.var(ptrVar).kind != VarKind::Pointer)
    return cg.error(ErrorCode::Scope, inst, "the pointer is not a pointer parameter");
  GlobalView view;
  const Argument &dtype = inst.arg(ArgName::dtype);
  view.dtype = dtype.present ? dtype.dtype : prog.var(ptrVar).dtype;
  view.ptr = cg.readPointer(ptrVar);
  view.offset = cg.constI64(0);
  view.valid = b.getTrue();
  if (const Argument &shape = inst.arg(ArgName::shape); shape.present) {
    for (ExprId e : shape.exprs)
      view.shape.push_back(cg.exprI64(e));
    cg.noteViewShape(inst.results[0], shape.exprs);
  } else {
    // The whole buffer, one-dimensional: its size is not part of the kernel ABI, so the JIT
    // view is unbounded (the interpreter bounds it by the argument's byte size).
    view.shape.push_back(cg.constI64(INT64_MAX));
  }
  if (const Argument &strides = inst.arg(ArgName::strides); strides.present) {
    if (strides.exprs.size() != view.shape.size())
      return cg.error(ErrorCode::ShapeMismatch, inst, "strides and shape differ in length");
    for (ExprId e : strides.exprs)
      view.strides.push_back(cg.exprI64(e));
  } else {
    view.strides = contiguousStrides(b, view.shape);
  }
  IrArithmetic a{cg}; // a constant extent's bound stays a constant
  for (llvm::Value *n : view.shape) {
    view.lo.push_back(cg.constI64(0));
    view.hi.push_back(a.max(n, cg.constI64(0)));
  }
  cg.writeGlobal(inst.results[0], view);
  return Status::success();
}

Status ViewLowering::visitAllocateGlobal(const Instruction &inst) {
  GlobalView view;
  view.dtype = inst.arg(ArgName::dtype).dtype;
  view.ptr = cg.workspaceRegion(inst);
  view.offset = cg.constI64(0);
  view.valid = b.getTrue();
  for (ExprId e : inst.arg(ArgName::shape).exprs)
    view.shape.push_back(cg.exprI64(e));
  view.strides = contiguousStrides(b, view.shape);
  for (llvm::Value *n : view.shape) {
    view.lo.push_back(cg.constI64(0));
    view.hi.push_back(n);
  }
  cg.writeGlobal(inst.results[0], view);
  return Status::success();
}

Status ViewLowering::visitAllocateShared(const Instruction &inst) {
  VarId r = inst.results[0];
  const VarType &type = info.vars[r];
  if (!type.sharedLayout)
    return cg.error(ErrorCode::Runtime, inst, "shared allocation without a planned layout");
  SharedView view;
  view.root = r;
  view.dtype = type.dtype;
  view.shape = type.sharedLayout->shape();
  for (size_t d = 0; d < view.shape.size(); ++d) {
    view.dims.push_back(int32_t(d));
    view.origin.push_back(cg.constI64(0));
  }
  return cg.writeShared(r, view);
}

namespace {

/// The rank rule of isa/view_rules.h (an inconsistency the checker rules out).
Status offsetRankStatus(Codegen &cg, const Instruction &inst, size_t viewRank, size_t sliceDims) {
  const std::vector<OffsetEntry> &entries = inst.arg(ArgName::offset).offsets;
  switch (offsetRank(entries.size(), sliceEntries(entries), viewRank, sliceDims)) {
  case OffsetRank::Holds:
    return Status::success();
  case OffsetRank::EntryCount:
    return cg.error(ErrorCode::OffsetRank, inst, "offset rank differs from the tensor's");
  case OffsetRank::SliceCount:
    return cg.error(ErrorCode::OffsetRank, inst, "shape and slice entries differ in number");
  }
  return Status::success();
}

} // namespace

Status ViewLowering::visitSliceGlobal(const Instruction &inst) {
  GlobalView parent = cg.readGlobal(inst.arg(ArgName::g).var);
  const Argument &offset = inst.arg(ArgName::offset);
  const Argument &shapeArg = inst.arg(ArgName::shape);
  TILUSVM_TRY(offsetRankStatus(cg, inst, parent.shape.size(),
                               shapeArg.present ? shapeArg.exprs.size() : kAnySliceCount));
  GlobalView out;
  out.dtype = parent.dtype;
  out.ptr = parent.ptr;
  out.offset = parent.offset;
  out.valid = parent.valid;
  IrArithmetic a{cg};
  applyOffset<OffsetUse::Slice>(
      a, parent, out, offset.offsets.size(), [&](size_t d) { return cg.offsetEntry(offset, d); },
      [&](size_t k) {
        return shapeArg.present ? std::optional(cg.exprI64(shapeArg.exprs[k])) : std::nullopt;
      });
  cg.writeGlobal(inst.results[0], out);
  return Status::success();
}

Status ViewLowering::visitSliceShared(const Instruction &inst) {
  SharedView parent = cg.readShared(inst.arg(ArgName::s).var);
  const Argument &offset = inst.arg(ArgName::offset);
  SharedView out;
  out.root = parent.root;
  out.dtype = parent.dtype;
  out.origin = parent.origin;
  out.shape = info.vars[inst.results[0]].shape;
  TILUSVM_TRY(offsetRankStatus(cg, inst, parent.shape.size(), out.shape.size()));
  IrArithmetic a{cg};
  applyOffset<OffsetUse::Slice>(a, parent, out, offset.offsets.size(),
                                [&](size_t d) { return cg.offsetEntry(offset, d); });
  return cg.writeShared(inst.results[0], out);
}

Status ViewLowering::visitPermuteShared(const Instruction &inst) {
  SharedView parent = cg.readShared(inst.arg(ArgName::s).var);
  SharedView out = parent;
  const std::vector<int64_t> &dims = inst.arg(ArgName::dims).ints;
  for (size_t k = 0; k < dims.size(); ++k) {
    out.dims[k] = parent.dims[size_t(dims[k])];
    out.shape[k] = parent.shape[size_t(dims[k])];
  }
  return cg.writeShared(inst.results[0], out);
}

} // namespace tilus::jit
