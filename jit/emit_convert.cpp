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
// On sm_90, f32, f16 and bf16 into OCP e4m3 and e5m2 use the hardware's saturating pair
// conversion instead (quantizeFp8 below), and a Cast of f32 into f16 (sm_80) or bf16 (sm_90)
// rounds two slots at a time (narrowPairs below).
// f32, f16 and bf16 -> integers of at most 32 bits use the hardware's `cvt.rzi` (below); f64
// sources and 64-bit targets are explicit (NaN -> 0, saturation at powers of two, then
// truncation), because there the hardware gives NaN the value 2^(N-1) instead of 0.
// Every float result that is NaN is the canonical NaN of its type, except a conversion of a
// type to itself, which keeps the pattern (isa/convert.h).
#include "jit/codegen.h"
#include "jit/nan_canonical.h"

#include "isa/convert.h"

#include <llvm/IR/InlineAsm.h>

#include <cmath>
#include <cstdlib>
#include <string>

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

/// Whether the hardware converts `from` into the OCP FP8 type `to` (sm_90).
bool hardwareFp8(DataType from, DataType to, int smVersion) {
  bool fp8 = to.isFloat() && to.bits == 8 &&
             (to.floatStyle() == FloatStyle::OcpE4M3 || to.floatStyle() == FloatStyle::Ieee);
  bool source = from == DataType::f32() || from == DataType::f16() || from == DataType::bf16();
  return smVersion >= 90 && fp8 && source;
}

} // namespace

std::optional<std::vector<llvm::Value *>>
Codegen::quantizeFp8(const std::vector<llvm::Value *> &slots, DataType from, DataType to) {
  // PTX ISA, cvt: `cvt.rn.satfinite.{e4m3x2,e5m2x2}.f32 d, a, b` puts a's code in d[15:8] and
  // b's in d[7:0] (`.f16x2` source: the upper half's code in d[15:8]); rounding is to nearest
  // even from the exact source value; with .satfinite an input whose magnitude is above
  // MAX_NORM (448, 57344) gives the sign-preserved MAX_NORM, infinities included, and a NaN
  // input gives a NaN code of the format (pattern unspecified). The ISA (section 2) asks for
  // exactly this rounding and saturation: a magnitude in (MAX_NORM, midpoint above it] rounds
  // down to MAX_NORM, anything above rounds past it and saturates; a NaN must become the
  // canonical 0x7F (e4m3) / 0x7E (e5m2), which the bit operations below make of every NaN code
  // (finite results never have them: e4m3's magnitudes stop at 0x7E, e5m2's at 0x7B). Zero keeps
  // its sign, f32 subnormals round to a signed zero. bf16 widens exactly to f32 first. Four
  // codes are fixed at a time, on the 32-bit word of two conversions.
  if (!hardwareFp8(from, to, opts.smVersion) || slots.empty())
    return std::nullopt;
  bool e4m3 = to.floatStyle() == FloatStyle::OcpE4M3;
  std::string cvt = std::string("cvt.rn.satfinite.") + (e4m3 ? "e4m3x2" : "e5m2x2");
  llvm::Type *i16 = b.getInt16Ty(), *i32 = b.getInt32Ty(), *f32 = b.getFloatTy();
  auto pair = [&](llvm::Value *lo, llvm::Value *hi) -> llvm::Value * {
    if (from == DataType::f16()) {
      llvm::Value *h = llvm::ConstantFP::get(b.getHalfTy(), 0.0);
      llvm::Value *v = llvm::PoisonValue::get(llvm::FixedVectorType::get(b.getHalfTy(), 2));
      v = b.CreateInsertElement(v, lo, uint64_t(0));
      v = b.CreateInsertElement(v, hi ? hi : h, uint64_t(1));
      return pureAsm(b, i16, cvt + ".f16x2 $0, $1;", "=h,r", {b.CreateBitCast(v, i32)});
    }
    auto widen = [&](llvm::Value *x) {
      return from == DataType::f32() ? x : b.CreateFPExt(x, f32);
    };
    llvm::Value *h = hi ? widen(hi) : llvm::ConstantFP::get(f32, 0.0);
    return pureAsm(b, i16, cvt + ".f32 $0, $1, $2;", "=h,f,f", {h, widen(lo)});
  };
  // NaN codes to the canonical one, on four codes: t has bit 7 of a byte set exactly where the
  // code is NaN (e4m3: magnitude 0x7F; e5m2: magnitude above 0x7C); e4m3 clears the sign of
  // those bytes, e5m2 replaces them by 0x7E (prmt replicates each byte's bit 7 over the byte).
  auto canonical = [&](llvm::Value *word) -> llvm::Value * {
    llvm::Value *t = b.CreateAdd(b.CreateAnd(word, b.getInt32(0x7F7F7F7F)),
                                 b.getInt32(e4m3 ? 0x01010101 : 0x03030303));
    if (e4m3)
      return b.CreateAnd(word, b.CreateNot(b.CreateAnd(t, b.getInt32(0x80808080u))));
    llvm::Value *nan = pureAsm(b, i32, "prmt.b32 $0, $1, 0, 0xBA98;", "=r,r", {t});
    return b.CreateOr(b.CreateAnd(word, b.CreateNot(nan)),
                      b.CreateAnd(nan, b.getInt32(0x7E7E7E7E)));
  };
  std::vector<llvm::Value *> out;
  out.reserve(slots.size());
  for (size_t k = 0; k < slots.size(); k += 4) {
    size_t n = std::min<size_t>(4, slots.size() - k);
    llvm::Value *word = b.CreateZExt(pair(slots[k], n > 1 ? slots[k + 1] : nullptr), i32);
    if (n > 2)
      word = b.CreateOr(
          word,
          b.CreateShl(b.CreateZExt(pair(slots[k + 2], n > 3 ? slots[k + 3] : nullptr), i32), 16));
    word = canonical(word);
    for (size_t j = 0; j < n; ++j)
      out.push_back(b.CreateTrunc(b.CreateLShr(word, uint64_t(8 * j)), b.getInt8Ty()));
  }
  return out;
}

namespace {

/// TILUSVM_JIT_PAIRS=0 converts and computes slot by slot, for experiments (part of
/// compilerVersion): narrowPairs and arithmeticPairs.
bool pairsOff() {
  const char *v = std::getenv("TILUSVM_JIT_PAIRS");
  return v && std::string(v) == "0";
}

} // namespace

std::optional<std::vector<llvm::Value *>>
Codegen::narrowPairs(const std::vector<llvm::Value *> &slots, DataType from, DataType to) {
  // PTX ISA, cvt: `cvt.rn.f16x2.f32 d, a, b` (sm_80) rounds a into d[31:16] and b into d[15:0]
  // to nearest even, each exactly as `cvt.rn.f16.f32` does (subnormal results kept, overflow to
  // infinity); `.bf16x2` likewise. A NaN input gives a NaN half (pattern unspecified), which the
  // select after it makes the canonical NaN of the type; the select is checked by set.nan on the
  // pair (nan_canonical.cpp), which bf16x2 has from sm_90 on.
  bool off = pairsOff();
  bool f16 = to == DataType::f16() && opts.smVersion >= 80;
  bool bf16 = to == DataType::bf16() && opts.smVersion >= 90;
  if (off || from != DataType::f32() || !(f16 || bf16) || slots.size() < 2)
    return std::nullopt;
  llvm::Type *lane = elemType(to);
  auto *pairType = llvm::FixedVectorType::get(lane, 2);
  llvm::Value *nan = llvm::ConstantVector::getSplat(
      llvm::ElementCount::getFixed(2), llvm::cast<llvm::Constant>(constBits(to, canonicalNaN(to))));
  std::string cvt = std::string("cvt.rn.") + (f16 ? "f16x2" : "bf16x2") + ".f32 $0, $1, $2;";
  std::vector<llvm::Value *> out;
  out.reserve(slots.size());
  size_t k = 0;
  for (; k + 1 < slots.size(); k += 2) {
    llvm::Value *pair = pureAsm(b, pairType, cvt, "=r,f,f", {slots[k + 1], slots[k]});
    auto *select =
        llvm::cast<llvm::SelectInst>(b.CreateSelect(b.CreateFCmpUNO(pair, pair), nan, pair));
    markNaNCanonicalization(select);
    out.push_back(b.CreateExtractElement(select, uint64_t(0)));
    out.push_back(b.CreateExtractElement(select, uint64_t(1)));
  }
  if (k < slots.size())
    out.push_back(convert(slots[k], from, to));
  return out;
}

std::optional<std::vector<llvm::Value *>>
Codegen::arithmeticPairs(ExprOp op, DataType t, const std::vector<llvm::Value *> &xs,
                         const std::vector<llvm::Value *> &ys) {
  // PTX ISA, add/sub/mul (half precision): `.rn.f16x2` rounds each half to nearest even, keeps
  // subnormals (no .ftz), as the scalar `.rn.f16` does; the scalar path computes in f32, which
  // holds every sum, difference and product of two f16 values exactly, and rounds once: the same
  // bits. A NaN half is made canonical by the select after it (lowerPairCanonicalizations).
  bool arithmetic = op == ExprOp::Add || op == ExprOp::Sub || op == ExprOp::Mul;
  if (pairsOff() || !arithmetic || t != DataType::f16() || xs.size() < 2 || xs.size() != ys.size())
    return std::nullopt;
  auto *pairType = llvm::FixedVectorType::get(b.getHalfTy(), 2);
  llvm::Value *nan = llvm::ConstantVector::getSplat(
      llvm::ElementCount::getFixed(2), llvm::cast<llvm::Constant>(constBits(t, canonicalNaN(t))));
  auto pairOf = [&](const std::vector<llvm::Value *> &slots, size_t k) {
    llvm::Value *v = llvm::PoisonValue::get(pairType);
    v = b.CreateInsertElement(v, slots[k], uint64_t(0));
    return b.CreateInsertElement(v, slots[k + 1], uint64_t(1));
  };
  std::vector<llvm::Value *> out;
  out.reserve(xs.size());
  size_t k = 0;
  for (; k + 1 < xs.size(); k += 2) {
    llvm::Value *x = pairOf(xs, k), *y = pairOf(ys, k);
    llvm::Value *r = op == ExprOp::Add   ? b.CreateFAdd(x, y)
                     : op == ExprOp::Sub ? b.CreateFSub(x, y)
                                         : b.CreateFMul(x, y);
    auto *select = llvm::cast<llvm::SelectInst>(b.CreateSelect(b.CreateFCmpUNO(r, r), nan, r));
    markNaNCanonicalization(select);
    out.push_back(b.CreateExtractElement(select, uint64_t(0)));
    out.push_back(b.CreateExtractElement(select, uint64_t(1)));
  }
  if (k < xs.size())
    out.push_back(applyOp(op, t, xs[k], ys[k]));
  return out;
}

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
  if (!to.isFloat() && from != DataType::f64() && to.bits <= 32) {
    // PTX ISA, cvt: float -> integer saturates to the destination's range by default, and a
    // NaN gives 0 unless the source is f64 or the destination 64-bit: exactly the ISA's
    // truncation, saturation and NaN -> 0. Widths other than 8, 16 and 32 convert into 32 bits
    // (saturating there) and are clamped to their own range; f16 and bf16 widen exactly first.
    llvm::Value *x = from == DataType::f32() ? v : b.CreateFPExt(v, b.getFloatTy());
    bool s = to.isSigned();
    int n = to.bits;
    bool native = n == 8 || n == 16 || n == 32;
    std::string text = std::string("cvt.rzi.") + (s ? "s" : "u") + std::to_string(native ? n : 32) +
                       ".f32 $0, $1;";
    llvm::Value *r = pureAsm(b, b.getInt32Ty(), text, "=r,f", {x});
    if (!native) {
      llvm::Type *i32 = b.getInt32Ty();
      if (s) {
        r = callIntrinsic(llvm::Intrinsic::smin, {i32}, {r, b.getInt32(uint32_t(bitMask(n - 1)))});
        r = callIntrinsic(llvm::Intrinsic::smax, {i32},
                          {r, b.getInt32(uint32_t(0) - (uint32_t(1) << (n - 1)))});
      } else {
        r = callIntrinsic(llvm::Intrinsic::umin, {i32}, {r, b.getInt32(uint32_t(bitMask(n)))});
      }
    }
    return b.CreateTrunc(r, target);
  }
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
  if (hardwareFp8(from, to, opts.smVersion))
    return (*quantizeFp8({v}, from, to))[0];
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

llvm::Value *pureAsm(llvm::IRBuilder<> &b, llvm::Type *result, const std::string &text,
                     const char *constraints, llvm::ArrayRef<llvm::Value *> args) {
  std::vector<llvm::Type *> params;
  for (llvm::Value *a : args)
    params.push_back(a->getType());
  auto *type = llvm::FunctionType::get(result, params, false);
  llvm::CallInst *r = b.CreateCall(llvm::InlineAsm::get(type, text, constraints, false), args);
  r->setDoesNotAccessMemory();
  r->setDoesNotThrow();
  return r;
}

} // namespace tilus::jit
