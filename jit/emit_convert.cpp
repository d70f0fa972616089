// Conversions between the types of ISA section 2 (Cast, scalar casts, operand conversions),
// bit-exact with isa/convert.h.
//
// Native PTX conversions are used where they round exactly once from the exact source value:
//   int -> f64, f32, f16 (cvt.rn from the integer; into f16 also via f32, since every integer
//   that f32 rounds is far beyond f16's range); float widening; f64 -> f32, f64 -> f16,
//   f32 -> f16, f32 -> bf16 (cvt.rn); f64 -> bf16 only on sm_90 (cvt.rn.bf16.f64).
// Everything else goes through the device library, whose encoders round once from an exact
// (sign, significand, exponent) value: integers wider than 24 bits -> bf16, every conversion
// into or out of the 8-bit-and-narrower float formats (fNeEmM, OCP e4m3, e5m2), f64 -> bf16 on
// sm_80. Low-precision sources are first decoded exactly into f32.
// float -> int is explicit (NaN -> 0, saturation at powers of two, then truncation), because
// the rounding and NaN behaviour of the hardware's saturating cvt differ between widths.
// Every float result that is NaN is the canonical NaN of its type, except a conversion of a
// type to itself, which keeps the pattern (isa/convert.h).
#include "jit/codegen.h"

#include "isa/convert.h"

#include <cmath>

namespace tilus::jit {

namespace {

bool isNativeFloat(DataType t) {
  return t == DataType::f16() || t == DataType::bf16() || t == DataType::f32() ||
         t == DataType::f64();
}

int styleCode(DataType t) {
  switch (t.floatStyle()) {
  case FloatStyle::Ieee:
    return 0;
  case FloatStyle::OcpE4M3:
    return 1;
  case FloatStyle::Finite:
    return 2;
  }
  return 2;
}

} // namespace

llvm::Value *Codegen::convert(llvm::Value *v, DataType from, DataType to) {
  if (from == to)
    return v;
  llvm::Type *target = elemType(to);
  // ---- into bool
  if (to.isBool()) {
    if (from.isBool())
      return v;
    if (!from.isFloat())
      return b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0));
    if (isNativeFloat(from))
      return b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
    llvm::Value *magnitude =
        b.CreateAnd(v, llvm::ConstantInt::get(v->getType(), bitMask(from.bits - 1)));
    return b.CreateICmpNE(magnitude, llvm::ConstantInt::get(v->getType(), 0));
  }
  // ---- from bool: the integer 0 or 1
  if (from.isBool())
    return convert(b.CreateZExt(v, b.getInt8Ty()), DataType::u(8), to);
  // ---- integer -> integer: keep the low bits
  if (!from.isFloat() && !to.isFloat())
    return from.isSigned() ? b.CreateSExtOrTrunc(v, target) : b.CreateZExtOrTrunc(v, target);
  // ---- low-precision float source: decode exactly into f32 first
  if (from.isFloat() && !isNativeFloat(from)) {
    llvm::Value *bits = b.CreateZExt(v, b.getInt32Ty());
    llvm::Value *f =
        callDevlib("tl_float_to_f32", {bits, constI32(from.exponent), constI32(from.mantissa),
                                       constI32(styleCode(from))});
    llvm::Value *r = convert(f, DataType::f32(), to);
    return r;
  }
  // ---- integer -> float
  if (!from.isFloat()) {
    bool s = from.isSigned();
    if (to == DataType::f64() || to == DataType::f32() || to == DataType::f16() ||
        (to == DataType::bf16() && from.bits <= 24)) {
      if (to == DataType::bf16()) {
        llvm::Value *f = s ? b.CreateSIToFP(v, b.getFloatTy()) : b.CreateUIToFP(v, b.getFloatTy());
        return b.CreateFPTrunc(f, target); // exact into f32, one rounding into bf16
      }
      return s ? b.CreateSIToFP(v, target) : b.CreateUIToFP(v, target);
    }
    llvm::Value *wide =
        s ? b.CreateSExtOrTrunc(v, b.getInt64Ty()) : b.CreateZExtOrTrunc(v, b.getInt64Ty());
    llvm::Value *bits =
        callDevlib(s ? "tl_i64_to_float" : "tl_u64_to_float",
                   {wide, constI32(to.exponent), constI32(to.mantissa), constI32(styleCode(to))});
    return fromBits(b.CreateTrunc(bits, b.getIntNTy(to.bits)), to);
  }
  // ---- native float -> integer
  if (!to.isFloat()) {
    llvm::Value *x = v;
    if (from == DataType::f16() || from == DataType::bf16())
      x = b.CreateFPExt(x, b.getFloatTy());
    llvm::Type *ft = x->getType();
    int n = to.bits;
    bool s = to.isSigned();
    llvm::Value *isNaN = b.CreateFCmpUNO(x, x);
    llvm::Value *r;
    if (s) {
      llvm::Value *limit = llvm::ConstantFP::get(ft, std::ldexp(1.0, n - 1));
      llvm::Value *negLimit = llvm::ConstantFP::get(ft, -std::ldexp(1.0, n - 1));
      llvm::Value *inRange = b.CreateAnd(b.CreateFCmpOLT(x, limit), b.CreateFCmpOGE(x, negLimit));
      llvm::Value *safe = b.CreateSelect(inRange, x, llvm::ConstantFP::get(ft, 0.0));
      llvm::Value *t = b.CreateFPToSI(safe, b.getInt64Ty());
      llvm::Value *maxV = b.getInt64(uint64_t(bitMask(n - 1)));
      llvm::Value *minV = b.getInt64(uint64_t(0) - (uint64_t(1) << (n - 1)));
      r = b.CreateSelect(inRange, t, b.CreateSelect(b.CreateFCmpOGE(x, limit), maxV, minV));
    } else {
      llvm::Value *limit = llvm::ConstantFP::get(ft, std::ldexp(1.0, n));
      llvm::Value *inRange = b.CreateAnd(b.CreateFCmpOLT(x, limit),
                                         b.CreateFCmpOGE(x, llvm::ConstantFP::get(ft, 0.0)));
      llvm::Value *safe = b.CreateSelect(inRange, x, llvm::ConstantFP::get(ft, 0.0));
      llvm::Value *t = b.CreateFPToUI(safe, b.getInt64Ty());
      llvm::Value *maxV = b.getInt64(bitMask(n));
      r = b.CreateSelect(inRange, t,
                         b.CreateSelect(b.CreateFCmpOGE(x, limit), maxV, b.getInt64(0)));
    }
    r = b.CreateSelect(isNaN, b.getInt64(0), r);
    return b.CreateTrunc(r, target);
  }
  // ---- native float -> float
  if (!isNativeFloat(to)) { // into a low-precision format
    llvm::Value *bits;
    if (from == DataType::f64()) {
      bits = callDevlib("tl_f64_to_float",
                        {v, constI32(to.exponent), constI32(to.mantissa), constI32(styleCode(to))});
    } else {
      llvm::Value *f = from == DataType::f32() ? v : b.CreateFPExt(v, b.getFloatTy());
      bits = callDevlib("tl_f32_to_float",
                        {f, constI32(to.exponent), constI32(to.mantissa), constI32(styleCode(to))});
    }
    return b.CreateTrunc(bits, target);
  }
  llvm::Value *r;
  if (to.bits > from.bits) {
    r = b.CreateFPExt(v, target);
  } else if ((from == DataType::f16() && to == DataType::bf16()) ||
             (from == DataType::bf16() && to == DataType::f16())) {
    r = b.CreateFPTrunc(b.CreateFPExt(v, b.getFloatTy()), target);
  } else if (from == DataType::f64() && to == DataType::bf16() && opts.smVersion < 90) {
    llvm::Value *bits = callDevlib("tl_f64_to_float", {v, constI32(8), constI32(7), constI32(0)});
    r = fromBits(b.CreateTrunc(bits, b.getInt16Ty()), to);
  } else {
    r = b.CreateFPTrunc(v, target);
  }
  return canonicalizeNaN(r, to);
}

} // namespace tilus::jit
