// The elementwise instructions, computed within each thread: the arithmetic, bitwise, comparison,
// unary and math rows (one family handler, visitElementwise) and Where.
//
// Operands are matched to the result's slots by Codegen::operandSlots (emit_operands.cpp).
// Operators follow applyOp (emit_scalar.cpp). Math functions (ISA: within 2 ulp of the correctly
// rounded result): Exp2 of f32/f16/bf16 and Exp of f16/bf16 by the hardware exponential
// (`ex2.approx`, see fastExp2 for the error bounds); Exp of f32 by the device library in f32
// (within 0.77 ulp of f32); everything else by the device library in f64 (within 1.1 ulp of
// f64), then rounded into the type, so at most 1 ulp from the correctly rounded result; Sqrt is
// the IEEE square root (.rn); Rsqrt is 1 / sqrt(x) in f64, as the interpreter computes it; Rcp
// of f32/f16/bf16 by the hardware reciprocal (`rcp.approx.f32`, see fastRcp), of f64 the IEEE
// division 1 / x.
#include "jit/lowering.h"

#include "isa/convert.h"
#include "isa/scalar_eval.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <cassert>

namespace tilus::jit {

namespace {} // namespace

llvm::Value *ElementwiseLowering::fastExp2(MathFn fn, llvm::Value *x, DataType t) {
  // 2^x (Exp2) or e^x = 2^(x log2(e)) (Exp) in f32 by the hardware exponential (MUFU.EX2), then
  // rounded once into t. The PTX ISA (section "Floating Point Instructions: ex2") documents
  // `ex2.approx.f32` as within 2 ulp of the correctly rounded result across the full range of
  // inputs, subnormal inputs and results supported without `.ftz`, and 2^-inf = +0,
  // 2^+inf = +inf, 2^NaN = NaN, 2^+-0 = 1. It is also CUDA's exp2f (libdevice's __nv_exp2f
  // without __CUDA_FTZ is this one instruction).
  //
  // f32, Exp2 only: exactly the ISA's bound of 2 ulp. No f32 input lies near the overflow
  // threshold (the largest below 128 gives 2^128 (1 - 2^-17.5)). The GPU test "math functions
  // within 2 ulp" sweeps this against a correctly rounded reference, every input with a
  // subnormal result included. Exp of f32 stays on the device library: rounding x log2(e) to
  // f32 alone costs up to |x log2(e)| 2^-24 ln(2) relative, about 100 ulp at x = 88.
  //
  // f16 and bf16, Exp2 and Exp: the f32 result v is within 2.5 ulp of f32 of 2^s' (2 ulp of the
  // correctly rounded f32 plus its half ulp), 2^-21.7 relative (2.5 2^-149 absolute below
  // 2^-126). For Exp the exponent s = x log2(e) is x (exact in f32) times the f32 log2(e)
  // (relative error 2^-26.2), rounded (2^-24): |s' - s| <= |s| 2^-23.7, so 2^s' is off by at
  // most |s| 2^-24.2 relative; for Exp2, s' = s = x. Only |s| <= 25 (f16) or 134 (bf16)
  // matters: beyond, the exact y and v both lie below half the smallest subnormal of t (the
  // result r and the correctly rounded c are 0 or that subnormal: neighbours) or both
  // overflow t. So |v - y| <= 2^-19.2 |y| (f16) or 2^-17 |y| (bf16); as the ulp u of t at y
  // is >= 2^-11 |y| (f16) or 2^-8 |y| (bf16), larger on subnormal results, |v - y| <= 2^-8 u,
  // and rounding v into t gives |r - y| < u / 2 + 2^-8 u while |c - y| <= u / 2: r is c or a
  // neighbour of c, within 1 ulp. Overflow agrees unless y lies within that error of t's
  // overflow threshold, which no f16 or bf16 input's does (every code is checked in
  // tests/jit/test_jit_codegen.cpp). f16 uses `.ftz`: a result below 2^-126 flushed to +0
  // rounds to +0 in f16 anyway (anything below 2^-25 does) and no f16 input is an f32
  // subnormal; bf16 shares f32's exponent range and keeps subnormal results.
  //
  // The half-precision instructions are not used. `ex2.approx.ftz.bf16` / `.bf16x2` flush
  // subnormal results (2^x for x in (-134, -126) becomes 0, many ulp from the correctly rounded
  // result). `ex2.approx.f16` / `.f16x2` have a maximum relative error of 2^-9.9, up to 2.14 ulp
  // of f16 from y: within 2 ulp of c only because r - c is a whole number of ulp, with no
  // margin, and the PTX ISA says nothing of subnormal results; the f32 route is within 1 ulp
  // for two conversions more and needs no pairing of slots.
  llvm::Value *f = cg.convert(x, t, DataType::f32());
  if (fn == MathFn::Exp)
    f = b.CreateFMul(f, llvm::ConstantFP::get(b.getFloatTy(), 0x1.715476p+0));
  llvm::Value *r = cg.callIntrinsic(t == DataType::f16() ? llvm::Intrinsic::nvvm_ex2_approx_ftz_f
                                                         : llvm::Intrinsic::nvvm_ex2_approx_f,
                                    {}, {f});
  return cg.canonicalizeNaN(cg.convert(r, DataType::f32(), t), t);
}

llvm::Value *ElementwiseLowering::fastRcp(llvm::Value *x, DataType t) {
  // 1 / x in f32 by the hardware reciprocal (MUFU.RCP), then rounded once into t. The PTX ISA
  // (section "Floating Point Instructions: rcp") documents `rcp.approx.f32` as within 1 ulp
  // across the full range of inputs, subnormal inputs and results supported without `.ftz`, and
  // 1/+-0 = +-inf, 1/+-inf = +-0, 1/NaN = NaN (CUDA's __frcp_rn is the correctly rounded
  // instruction sequence; this is the one instruction of 1.0f / x under -prec-div=false). For
  // f16 and bf16 the f32 result v is within 2^-23 |y| of y = 1 / x, and the ulp u of t at y is
  // at least 2^-11 |y| (f16) or 2^-8 |y| (bf16), larger on subnormal results: |v - y| <= 2^-12 u,
  // so rounding v into t gives a neighbour of the correctly rounded result at worst, within
  // 1 ulp (every f16 and bf16 code is checked on the GPU: tests/jit/test_jit_gpu.cpp, "math
  // functions within 2 ulp, special values"). f32's own range covers every f16 and bf16 input
  // and result.
  llvm::Value *f = cg.convert(x, t, DataType::f32());
  llvm::Value *r = pureAsm(b, b.getFloatTy(), "rcp.approx.f32 $0, $1;", "=f,f", {f});
  return cg.canonicalizeNaN(cg.convert(r, DataType::f32(), t), t);
}

llvm::Value *ElementwiseLowering::mathOp(MathFn fn, llvm::Value *x, DataType t) {
  DataType f64 = DataType::f64();
  if (fn == MathFn::Rcp && t != f64)
    return fastRcp(x, t);
  if (fn == MathFn::Sqrt) {
    bool narrow = t == DataType::f16() || t == DataType::bf16();
    llvm::Value *v = narrow ? b.CreateFPExt(x, b.getFloatTy()) : x;
    llvm::Value *r = cg.callIntrinsic(llvm::Intrinsic::sqrt, {v->getType()}, {v});
    if (narrow)
      r = b.CreateFPTrunc(r, cg.elemType(t));
    return cg.canonicalizeNaN(r, t);
  }
  bool half = t == DataType::f16() || t == DataType::bf16();
  if ((fn == MathFn::Exp2 && (half || t == DataType::f32())) || (fn == MathFn::Exp && half))
    return fastExp2(fn, x, t);
  if (fn == MathFn::Exp && t == DataType::f32()) {
    // within 0.77 ulp of f32 (exhaustively checked on the host)
    llvm::Value *r = cg.callDevlib("tl_expf", {x});
    return cg.canonicalizeNaN(r, t);
  }
  llvm::Value *d = cg.convert(x, t, f64);
  llvm::Value *r = nullptr;
  switch (fn) {
  case MathFn::Rsqrt:
    r = b.CreateFDiv(llvm::ConstantFP::get(b.getDoubleTy(), 1.0),
                     cg.callIntrinsic(llvm::Intrinsic::sqrt, {b.getDoubleTy()}, {d}));
    break;
  case MathFn::Exp:
    r = cg.callDevlib("tl_exp", {d});
    break;
  case MathFn::Exp2:
    r = cg.callDevlib("tl_exp2", {d});
    break;
  case MathFn::Log:
    r = cg.callDevlib("tl_log", {d});
    break;
  case MathFn::Log2:
    r = cg.callDevlib("tl_log2", {d});
    break;
  case MathFn::Sin:
    r = cg.callDevlib("tl_sin", {d});
    break;
  case MathFn::Cos:
    r = cg.callDevlib("tl_cos", {d});
    break;
  case MathFn::Tanh:
    r = cg.callDevlib("tl_tanh", {d});
    break;
  case MathFn::Rcp: // f64 (the others above)
    r = b.CreateFDiv(llvm::ConstantFP::get(b.getDoubleTy(), 1.0), d);
    break;
  case MathFn::Sqrt: // handled above
  case MathFn::None:
    assert(false && "not a math function");
    r = d;
    break;
  }
  return cg.canonicalizeNaN(cg.convert(r, f64, t), t);
}

Status ElementwiseLowering::visitElementwise(const Instruction &inst) {
  VarId r = inst.results[0];
  const VarType &rtype = info.vars[r];
  const LayoutMap &result = cg.layoutOf(r);
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
  Expected<std::vector<llvm::Value *>> xs = cg.operandSlots(inst, a, result, ct);
  if (!xs)
    return xs.takeStatus();
  if (inst.opcode == Opcode::Fma) {
    // a * b + c rounded once: llvm.fma (fma.rn.f32 / fma.rn.f64); f32 and f64 only (checker)
    if (rt != DataType::f32() && rt != DataType::f64())
      return cg.error(ErrorCode::DtypeMismatch, inst, "Fma on " + rt.name());
    Expected<std::vector<llvm::Value *>> yv =
        cg.operandSlots(inst, inst.arg(ArgName::b), result, rt);
    if (!yv)
      return yv.takeStatus();
    Expected<std::vector<llvm::Value *>> zv =
        cg.operandSlots(inst, inst.arg(ArgName::c), result, rt);
    if (!zv)
      return zv.takeStatus();
    std::vector<llvm::Value *> out(xs->size());
    for (size_t i = 0; i < out.size(); ++i)
      out[i] = cg.canonicalizeNaN(cg.callIntrinsic(llvm::Intrinsic::fma, {(*xs)[i]->getType()},
                                                   {(*xs)[i], (*yv)[i], (*zv)[i]}),
                                  rt);
    cg.writeRegister(r, out);
    return Status::success();
  }
  std::vector<llvm::Value *> ys;
  if (binary) {
    Expected<std::vector<llvm::Value *>> yv =
        cg.operandSlots(inst, inst.arg(ArgName::b), result, ct);
    if (!yv)
      return yv.takeStatus();
    ys = std::move(*yv);
  }
  std::vector<llvm::Value *> out(xs->size());
  if (std::optional<ExprOp> op = scalarOpOf(inst.opcode);
      op && binary && category != InstructionCategory::Comparison) {
    // f16 arithmetic two slots at a time, unless a Mul takes a Cast's dequantised pairs
    // (unscaledDequant below folds those into the dequantisation instead)
    bool folds = false;
    for (size_t i = 0; i < out.size() && *op == ExprOp::Mul && !folds; ++i)
      folds = cg.isDequantLane((*xs)[i]) || cg.isDequantLane(ys[i]);
    if (!folds) {
      if (std::optional<std::vector<llvm::Value *>> pairs = cg.arithmeticPairs(*op, ct, *xs, ys)) {
        cg.writeRegister(r, *pairs);
        return Status::success();
      }
    }
  }
  for (size_t i = 0; i < out.size(); ++i) {
    llvm::Value *x = (*xs)[i];
    std::optional<ExprOp> op = scalarOpOf(inst.opcode);
    MathFn fn = mathFnOf(inst.opcode);
    if (!op && fn == MathFn::None) { // Abs: the one unary row with neither payload
      if (ct == DataType::f32() || ct == DataType::f64()) {
        // the sign bit cleared (abs.f32 / abs.f64), which nan_canonical.cpp sees pass a NaN on
        llvm::Value *r = cg.callIntrinsic(llvm::Intrinsic::fabs, {x->getType()}, {x});
        out[i] = cg.canonicalizeNaN(r, ct);
      } else if (ct.isFloat()) {
        llvm::Value *bits = b.CreateAnd(
            cg.toBits(x, ct), llvm::ConstantInt::get(b.getIntNTy(ct.bits), bitMask(ct.bits - 1)));
        out[i] = cg.canonicalizeNaN(cg.fromBits(bits, ct), ct);
        if (ct.isFloat() && cg.elemType(ct)->isIntegerTy()) // no NaN test on packed formats
          out[i] = cg.fromBits(bits, ct);
      } else if (ct.isSigned()) {
        out[i] = b.CreateSelect(b.CreateICmpSLT(x, llvm::ConstantInt::get(x->getType(), 0)),
                                b.CreateNeg(x), x);
      } else {
        out[i] = x;
      }
      continue;
    }
    if (!op) {
      if (!ct.isFloat() || cg.elemType(ct)->isIntegerTy())
        return cg.error(ErrorCode::DtypeMismatch, inst, "math on " + ct.name());
      out[i] = mathOp(fn, x, ct);
      continue;
    }
    if (*op == ExprOp::Mul && binary && ct.isFloat()) {
      // a Cast's exact dequantised pair lane times the inverse of its power-of-two scale: the
      // codes' bits as they are (Codegen::unscaledDequant)
      llvm::Value *u = cg.unscaledDequant(x, ys[i]);
      if (!u)
        u = cg.unscaledDequant(ys[i], x);
      if (u) {
        out[i] = u;
        continue;
      }
    }
    llvm::Value *v = cg.applyOp(*op, ct, x, binary ? ys[i] : nullptr);
    out[i] =
        category == InstructionCategory::Comparison ? cg.convert(v, DataType::boolean(), rt) : v;
  }
  cg.writeRegister(r, out);
  return Status::success();
}

Status ElementwiseLowering::visitWhere(const Instruction &inst) {
  VarId r = inst.results[0];
  const LayoutMap &result = cg.layoutOf(r);
  DataType rt = info.vars[r].dtype;
  Expected<std::vector<llvm::Value *>> c =
      cg.operandSlots(inst, inst.arg(ArgName::c), result, DataType::boolean());
  if (!c)
    return c.takeStatus();
  Expected<std::vector<llvm::Value *>> x = cg.operandSlots(inst, inst.arg(ArgName::a), result, rt);
  if (!x)
    return x.takeStatus();
  Expected<std::vector<llvm::Value *>> y = cg.operandSlots(inst, inst.arg(ArgName::b), result, rt);
  if (!y)
    return y.takeStatus();
  std::vector<llvm::Value *> out(c->size());
  for (size_t i = 0; i < out.size(); ++i)
    out[i] = b.CreateSelect((*c)[i], (*x)[i], (*y)[i]);
  cg.writeRegister(r, out);
  return Status::success();
}

} // namespace tilus::jit
