// Register-tensor computation that stays within each thread: elementwise operators, math,
// Where, Cast, View, Permute, Iota, AllocateRegister, BlockIndices.
//
// Elementwise operands are matched to result slots at compile time (gatherSlots): a thread that
// owns a result element owns the broadcast operand element (checker rule layout-mismatch), so
// the operand value is one of the thread's own registers. When the operand slot is the same for
// every thread the register is used directly; otherwise (rare: e.g. a replicated operand with
// more locals than the result) the slot index is computed from the thread index and a short
// select chain picks the register.
// Operators follow applyOp (lower_scalar.cpp), math functions are computed by the device
// library: Exp and Exp2 of f32/f16/bf16 in f32 (within 0.77 ulp of f32), everything else in f64
// (within 1.1 ulp of f64), then rounded into the type, so at most 1 ulp from the correctly
// rounded result; Sqrt is the IEEE square root (.rn); Rsqrt is 1 / sqrt(x) in f64, as the
// interpreter computes it.
// View reinterprets the thread's bit stream (ISA section 2 packing): output slot j is bits
// [j * sr, (j + 1) * sr) of the concatenated input slots, assembled with shifts at compile time.
#include "jit/codegen.h"

#include "isa/convert.h"
#include "isa/scalar_eval.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <cassert>
#include <set>

namespace tilus::jit {

namespace {

/// The operand's local slot for result slot i as a run-time value (see gatherSlots).
llvm::Value *runtimeSlot(Codegen &cg, const LayoutMap &result, int64_t i,
                         const LayoutMap &operand) {
  llvm::IRBuilder<> &b = cg.b;
  const std::vector<llvm::Value *> &s = cg.threadPart(result);
  std::vector<llvm::Value *> x(size_t(result.rank()));
  for (int d = 0; d < result.rank(); ++d)
    x[size_t(d)] = b.CreateAdd(s[size_t(d)], b.getInt64(uint64_t(result.localPart(i)[d])));
  // broadcast (right-aligned; size-1 dimensions read index 0)
  size_t r = x.size(), o = operand.shape().size();
  std::vector<llvm::Value *> y(o);
  for (size_t k = 0; k < o; ++k)
    y[k] = operand.shape()[k] == 1 ? b.getInt64(0) : x[r - o + k];
  llvm::Value *slot = b.getInt64(0);
  for (const LayoutTerm &term : operand.localTerms()) {
    llvm::Value *digit =
        b.CreateURem(b.CreateUDiv(y[size_t(term.dim)], b.getInt64(uint64_t(term.stride))),
                     b.getInt64(uint64_t(term.size)));
    slot = b.CreateAdd(slot, b.CreateMul(digit, b.getInt64(uint64_t(term.div))));
  }
  return slot;
}

llvm::Value *selectByIndex(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &values,
                           llvm::Value *index, const std::vector<int64_t> &perThread) {
  std::set<int64_t> candidates(perThread.begin(), perThread.end());
  llvm::Value *v = values[size_t(*candidates.begin())];
  for (int64_t c : candidates)
    if (c != *candidates.begin())
      v = b.CreateSelect(b.CreateICmpEQ(index, b.getInt64(uint64_t(c))), values[size_t(c)], v);
  return v;
}

} // namespace

Expected<std::vector<llvm::Value *>> Codegen::operandSlots(const Instruction &inst,
                                                           const Argument &arg,
                                                           const LayoutMap &result, DataType t) {
  std::vector<llvm::Value *> out(size_t(result.locals()));
  if (!arg.isTensor()) {
    llvm::Value *v = scalarArg(arg, t);
    std::fill(out.begin(), out.end(), v);
    return out;
  }
  const VarType &type = info.vars[arg.var];
  if (type.kind != VarKind::Register)
    return error(ErrorCode::Scope, inst,
                 "operand `" + prog.var(arg.var).name + "` is not a register tensor");
  std::vector<llvm::Value *> values = readRegister(arg.var);
  for (llvm::Value *&v : values)
    v = convert(v, type.dtype, t);
  const LayoutMap &operand = layoutOf(arg.var);
  std::vector<SlotSource> sources = gatherSlots(result, operand);
  for (int64_t i = 0; i < result.locals(); ++i) {
    const SlotSource &src = sources[size_t(i)];
    if (!src.ok)
      return error(ErrorCode::LayoutMismatch, inst,
                   "operand `" + prog.var(arg.var).name + "` is not owned by the result's threads");
    out[size_t(i)] = src.uniform ? values[size_t(src.slot)]
                                 : selectByIndex(b, values, runtimeSlot(*this, result, i, operand),
                                                 src.perThread);
  }
  return out;
}

llvm::Value *Codegen::mathOp(MathFn fn, llvm::Value *x, DataType t) {
  DataType f64 = DataType::f64();
  if (fn == MathFn::Sqrt) {
    bool narrow = t == DataType::f16() || t == DataType::bf16();
    llvm::Value *v = narrow ? b.CreateFPExt(x, b.getFloatTy()) : x;
    llvm::Value *r = callIntrinsic(llvm::Intrinsic::sqrt, {v->getType()}, {v});
    if (narrow)
      r = b.CreateFPTrunc(r, elemType(t));
    return canonicalizeNaN(r, t);
  }
  bool narrow = t == DataType::f16() || t == DataType::bf16() || t == DataType::f32();
  if (narrow && (fn == MathFn::Exp || fn == MathFn::Exp2)) {
    // f32 exponentials within 0.77 ulp of f32 (exhaustively checked on the host)
    llvm::Value *f = convert(x, t, DataType::f32());
    llvm::Value *r = callDevlib(fn == MathFn::Exp ? "tl_expf" : "tl_exp2f", {f});
    return canonicalizeNaN(convert(r, DataType::f32(), t), t);
  }
  llvm::Value *d = convert(x, t, f64);
  llvm::Value *r = nullptr;
  switch (fn) {
  case MathFn::Rsqrt:
    r = b.CreateFDiv(llvm::ConstantFP::get(b.getDoubleTy(), 1.0),
                     callIntrinsic(llvm::Intrinsic::sqrt, {b.getDoubleTy()}, {d}));
    break;
  case MathFn::Exp:
    r = callDevlib("tl_exp", {d});
    break;
  case MathFn::Exp2:
    r = callDevlib("tl_exp2", {d});
    break;
  case MathFn::Log:
    r = callDevlib("tl_log", {d});
    break;
  case MathFn::Log2:
    r = callDevlib("tl_log2", {d});
    break;
  case MathFn::Sin:
    r = callDevlib("tl_sin", {d});
    break;
  case MathFn::Cos:
    r = callDevlib("tl_cos", {d});
    break;
  case MathFn::Tanh:
    r = callDevlib("tl_tanh", {d});
    break;
  case MathFn::Sqrt: // handled above
  case MathFn::None:
    assert(false && "not a math function");
    r = d;
    break;
  }
  return canonicalizeNaN(convert(r, f64, t), t);
}

Status Codegen::visitElementwise(const Instruction &inst) {
  VarId r = inst.results[0];
  const VarType &rtype = info.vars[r];
  const LayoutMap &result = layoutOf(r);
  DataType rt = rtype.dtype;
  InstructionCategory category = inst.spec().category;
  const Argument &a = inst.arg(ArgName::a);
  bool binary = inst.hasArg(ArgName::b);
  // Operand type: comparisons compare in the tensor operand's dtype, everything else computes
  // in the result's.
  DataType ct = rt;
  if (category == InstructionCategory::Comparison) {
    const Argument &bArg = inst.arg(ArgName::b);
    if (a.isTensor())
      ct = info.vars[a.var].dtype;
    else if (bArg.isTensor())
      ct = info.vars[bArg.var].dtype;
    else
      ct = promoteScalarTypes(prog.expr(a.expr).dtype, prog.expr(bArg.expr).dtype)
               .value_or(DataType::f64());
  }
  Expected<std::vector<llvm::Value *>> xs = operandSlots(inst, a, result, ct);
  if (!xs)
    return xs.takeStatus();
  std::vector<llvm::Value *> ys;
  if (binary) {
    Expected<std::vector<llvm::Value *>> yv = operandSlots(inst, inst.arg(ArgName::b), result, ct);
    if (!yv)
      return yv.takeStatus();
    ys = std::move(*yv);
  }
  std::vector<llvm::Value *> out(xs->size());
  for (size_t i = 0; i < out.size(); ++i) {
    llvm::Value *x = (*xs)[i];
    std::optional<ExprOp> op = scalarOpOf(inst.opcode);
    MathFn fn = mathFnOf(inst.opcode);
    if (!op && fn == MathFn::None) { // Abs: the one unary row with neither payload
      if (ct.isFloat()) {
        llvm::Value *bits = b.CreateAnd(
            toBits(x, ct), llvm::ConstantInt::get(b.getIntNTy(ct.bits), bitMask(ct.bits - 1)));
        out[i] = canonicalizeNaN(fromBits(bits, ct), ct);
        if (ct.isFloat() && elemType(ct)->isIntegerTy()) // no NaN test on packed formats
          out[i] = fromBits(bits, ct);
      } else if (ct.isSigned()) {
        out[i] = b.CreateSelect(b.CreateICmpSLT(x, llvm::ConstantInt::get(x->getType(), 0)),
                                b.CreateNeg(x), x);
      } else {
        out[i] = x;
      }
      continue;
    }
    if (!op) {
      if (!ct.isFloat() || elemType(ct)->isIntegerTy())
        return error(ErrorCode::DtypeMismatch, inst, "math on " + ct.name());
      out[i] = mathOp(fn, x, ct);
      continue;
    }
    llvm::Value *v = applyOp(*op, ct, x, binary ? ys[i] : nullptr);
    out[i] = category == InstructionCategory::Comparison ? convert(v, DataType::boolean(), rt) : v;
  }
  writeRegister(r, out);
  return Status::success();
}

Status Codegen::visitWhere(const Instruction &inst) {
  VarId r = inst.results[0];
  const LayoutMap &result = layoutOf(r);
  DataType rt = info.vars[r].dtype;
  Expected<std::vector<llvm::Value *>> c =
      operandSlots(inst, inst.arg(ArgName::c), result, DataType::boolean());
  if (!c)
    return c.takeStatus();
  Expected<std::vector<llvm::Value *>> x = operandSlots(inst, inst.arg(ArgName::a), result, rt);
  if (!x)
    return x.takeStatus();
  Expected<std::vector<llvm::Value *>> y = operandSlots(inst, inst.arg(ArgName::b), result, rt);
  if (!y)
    return y.takeStatus();
  std::vector<llvm::Value *> out(c->size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = b.CreateSelect((*c)[i], (*x)[i], (*y)[i]);
  writeRegister(r, out);
  return Status::success();
}

Status Codegen::visitCast(const Instruction &inst) {
  VarId r = inst.results[0];
  const Argument &a = inst.arg(ArgName::a);
  DataType rt = info.vars[r].dtype;
  DataType from = a.isTensor() ? info.vars[a.var].dtype : prog.expr(a.expr).dtype;
  Expected<std::vector<llvm::Value *>> xs = operandSlots(inst, a, layoutOf(r), from);
  if (!xs)
    return xs.takeStatus();
  if (std::optional<std::vector<llvm::Value *>> fast = dequantize(*xs, from, rt)) {
    writeRegister(r, *fast);
    return Status::success();
  }
  std::vector<llvm::Value *> out;
  for (llvm::Value *x : *xs)
    out.push_back(convert(x, from, rt));
  writeRegister(r, out);
  return Status::success();
}

Status Codegen::visitView(const Instruction &inst) {
  VarId a = inst.arg(ArgName::a).var, r = inst.results[0];
  if (a == kNoId)
    return error(ErrorCode::Scope, inst, "View of something other than a register tensor");
  DataType da = info.vars[a].dtype, dr = info.vars[r].dtype;
  int64_t na = info.vars[a].layout->numLocals(), nr = info.vars[r].layout->numLocals();
  int sa = da.storageBits(), sr = dr.storageBits();
  if (na * sa != nr * sr)
    return error(ErrorCode::ViewBits, inst,
                 "View of " + std::to_string(na * sa) + " bits per thread into " +
                     std::to_string(nr * sr));
  std::vector<llvm::Value *> in = readRegister(a);
  std::vector<llvm::Value *> inBits(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    llvm::Value *bits = da.isBool() ? b.CreateZExt(in[k], b.getInt8Ty()) : toBits(in[k], da);
    inBits[k] = b.CreateZExtOrTrunc(bits, b.getInt64Ty());
  }
  std::vector<llvm::Value *> out(static_cast<size_t>(nr));
  for (int64_t j = 0; j < nr; ++j) {
    int64_t lo = j * sr, hi = lo + sr;
    llvm::Value *v = constI64(0);
    for (int64_t k = lo / sa; k < na && k * sa < hi; ++k) {
      int64_t pos = k * sa - lo; // where input k's bit 0 lands in output j
      llvm::Value *piece = inBits[size_t(k)];
      if (pos >= 64 || pos <= -64)
        continue;
      piece = pos >= 0 ? b.CreateShl(piece, uint64_t(pos)) : b.CreateLShr(piece, uint64_t(-pos));
      v = b.CreateOr(v, piece);
    }
    v = b.CreateAnd(v, constI64(int64_t(bitMask(sr))));
    if (dr.isBool()) {
      out[size_t(j)] = b.CreateICmpNE(v, constI64(0));
      continue;
    }
    out[size_t(j)] = fromBits(b.CreateTrunc(v, b.getIntNTy(dr.bits)), dr);
  }
  writeRegister(r, out);
  return Status::success();
}

Status Codegen::visitPermute(const Instruction &inst) {
  VarId a = inst.arg(ArgName::a).var;
  if (a == kNoId)
    return error(ErrorCode::Scope, inst, "Permute of something other than a register tensor");
  writeRegister(inst.results[0], readRegister(a));
  return Status::success();
}

Status Codegen::visitIota(const Instruction &inst) {
  VarId r = inst.results[0];
  const LayoutMap &map = layoutOf(r);
  int64_t dim = inst.arg(ArgName::dim).intValue;
  if (dim < 0 || dim >= map.rank())
    return error(ErrorCode::ReduceDim, inst,
                 "Iota dimension " + std::to_string(dim) + " out of range");
  DataType t = info.vars[r].dtype;
  const std::vector<llvm::Value *> &s = threadPart(map);
  std::vector<llvm::Value *> out;
  for (int64_t i = 0; i < map.locals(); ++i) {
    llvm::Value *x = b.CreateAdd(s[size_t(dim)], constI64(map.localPart(i)[dim]));
    out.push_back(convert(x, DataType::i64(), t));
  }
  writeRegister(r, out);
  return Status::success();
}

Status Codegen::visitAllocateRegister(const Instruction &inst) {
  VarId r = inst.results[0];
  DataType t = info.vars[r].dtype;
  llvm::Value *v = zeroOf(t);
  if (const Argument &init = inst.arg(ArgName::init); init.present)
    v = convert(emitExpr(init.expr), prog.expr(init.expr).dtype, t);
  writeRegister(r, std::vector<llvm::Value *>(size_t(info.vars[r].layout->numLocals()), v));
  return Status::success();
}

Status Codegen::visitBlockIndices(const Instruction &inst) {
  static const llvm::Intrinsic::ID ids[3] = {llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_x,
                                             llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_y,
                                             llvm::Intrinsic::nvvm_read_ptx_sreg_ctaid_z};
  for (size_t k = 0; k < inst.results.size() && k < 3; ++k) {
    VarId v = inst.results[k];
    llvm::Value *index = callIntrinsic(ids[k], {}, {});
    // The index is below the grid's extent: a range when the extent is a constant, an
    // assumption otherwise. Bounds tests of tiles addressed by block indices then fold.
    if (k < prog.grid.size()) {
      llvm::Value *extent = exprI64(prog.grid[k]);
      auto *call = llvm::dyn_cast<llvm::CallInst>(index);
      auto *constant = llvm::dyn_cast<llvm::ConstantInt>(extent);
      if (call && constant && constant->getSExtValue() >= 1 &&
          constant->getSExtValue() <= int64_t(INT32_MAX))
        call->addRangeRetAttr(llvm::ConstantRange(
            llvm::APInt(32, 0), llvm::APInt(32, uint64_t(constant->getSExtValue()))));
      else if (!constant)
        b.CreateAssumption(b.CreateICmpSLT(b.CreateZExt(index, b.getInt64Ty()), extent));
    }
    writeScalar(v, convert(index, DataType::i32(), prog.var(v).dtype));
  }
  return Status::success();
}

} // namespace tilus::jit
