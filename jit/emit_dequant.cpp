// Fast dequantisation: Cast of low-bit integers and low-precision floats to f16 and bf16 with
// packed two-lane arithmetic instead of one conversion per element.
//
// The generic path (emit_convert.cpp) converts every element on its own: an integer goes
// through `cvt.rn.f16.u16` (I2F, a quarter-rate instruction on sm_80 and sm_90), a generic float
// through the device library. A low-bit GEMM converts every weight it reads, so that cost
// decides whether the kernel reaches the memory-bandwidth wall. Here two register slots are
// converted together, as one f16x2 / bf16x2 value, with exact bit tricks:
//
//  * integers uN, iN (N <= 8) -> f16: the code (biased by 2^(N-1) when signed, so it is
//    non-negative) becomes the mantissa of 1024.0 (0x6400: exponent 10, so the mantissa's unit
//    is 1), and one packed subtraction (or fma) leaves the integer; emit_dequant_pairs.cpp reads
//    the codes where they lie in their words. Into bf16 the same with 128.0 (0x4300, 7 mantissa
//    bits) for N <= 7; 8-bit integers need 8 mantissa bits and go through f32 (0x4B000000,
//    2^23) and an exact `cvt` to bf16 (here).
//  * floats with E <= 4 (the generic fNeEmM, and OCP e4m3 whose NaN codes are then replaced by
//    the canonical NaN) -> f16: the E+M code bits are
//    placed at the low end of f16's exponent and the top of its mantissa, the sign at bit 15;
//    read as f16 that is the value times 2^(bias - 15) (normals and subnormals alike, since both
//    formats put the hidden bit in the same place), and one `mul.f16x2` by 2^(15 - bias)
//    restores it. E <= 4 keeps every result finite in f16, so the product is exact. Into bf16
//    the same with bf16's exponent bias 127 (needs M <= 7, which every such type has).
//  * OCP e5m2 -> f16: the code is the high byte of the f16 (infinities included), NaN codes
//    replaced by the canonical NaN.
//  * on sm_90, OCP e4m3 and e5m2 -> f16 instead take the hardware's pair conversion
//    (`cvt.rn.f16x2.e4m3x2` / `.e5m2x2`: one instruction per two codes), NaN codes again
//    replaced by the canonical NaN. Its 16-bit operand (the pair's two bytes) is one `prmt` of
//    the 32-bit words the two codes lie in (trace_code.h), or nothing when they are the low or
//    high half of one word, instead of a shift, a mask and an or of each byte.
//
// Low-bit integers and floats into f32 take the path into f16, then one exact widening per
// element.
//
// Every result is exactly the ISA's conversion (isa/convert.h): integers of at most 8 bits and
// every value of these float formats are representable in the target, so no rounding happens;
// zero keeps its sign (x - x is +0; -0 * 2^k is -0). tests/jit checks every code of every type
// on the GPU against isa/convert.
#include "jit/codegen.h"
#include "jit/nan_canonical.h"
#include "jit/trace_code.h"

#include "isa/convert.h"

#include <llvm/IR/InlineAsm.h>

#include <cmath>
#include <functional>

namespace tilus::jit {

namespace {

/// Whether the fast path applies to a conversion from `from` to `to`.
bool dequantizable(DataType from, DataType to, int smVersion) {
  if (to != DataType::f16() && to != DataType::bf16())
    return false;
  if (from.isBool())
    return false;
  if (!from.isFloat())
    return from.bits <= 8;
  if (from.bits > 8)
    return false;
  // OCP e5m2 is the top byte of an f16 (infinities included); into bf16 it keeps the generic path
  if (from.floatStyle() == FloatStyle::Ieee)
    return from.exponent == 5 && from.mantissa == 2 && to == DataType::f16();
  if (from.exponent > 4)
    return false;
  if (to == DataType::bf16() && (from.mantissa > 7 || smVersion < 90))
    return false; // mul.bf16x2 is sm_90; sm_80 keeps the generic path
  return true;
}

} // namespace

std::optional<std::vector<llvm::Value *>>
Codegen::dequantize(const std::vector<llvm::Value *> &slots, DataType from, DataType to) {
  if (to == DataType::f32() && from.bits <= 8 && !from.isBool()) {
    // every such value is exact in f16, so the two-lane path into f16 then one exact widening per
    // element replace the device library's per-element decoding of floats and the quarter-rate
    // integer conversion (I2F) of integers
    std::optional<std::vector<llvm::Value *>> half = dequantize(slots, from, DataType::f16());
    if (!half)
      return std::nullopt;
    // the widening of a NaN gives the hardware's NaN: FP8's NaN codes are made canonical again
    bool hasNaN = from.isFloat() && from.floatStyle() != FloatStyle::Finite;
    for (llvm::Value *&h : *half) {
      h = b.CreateFPExt(h, b.getFloatTy());
      if (hasNaN)
        h = canonicalizeNaN(h, DataType::f32());
    }
    return half;
  }
  if (!dequantizable(from, to, opts.smVersion) || slots.empty())
    return std::nullopt;
  if (std::optional<std::vector<llvm::Value *>> pairs = dequantizePairs(slots, from, to))
    return pairs; // integers and generic floats, read where they lie (emit_dequant_pairs.cpp)
  llvm::Type *i16 = b.getInt16Ty();
  llvm::Type *i32 = b.getInt32Ty();
  bool intoBf16 = to == DataType::bf16();
  llvm::Type *lane = elemType(to);
  auto *pairType = llvm::FixedVectorType::get(lane, 2);
  int n = from.bits;

  // Per slot: the 16 bits that go into one lane before the packed operation.
  std::function<llvm::Value *(llvm::Value *)> laneBits;
  llvm::Value *fix = nullptr; // the packed operand of the one mul
  if (!from.isFloat()) {
    // integers that reach here are 8-bit into bf16 (dequantizePairs takes the others): exact
    // through f32 (2^23 + code), then cvt.rn.bf16.f32 (exact).
    std::vector<llvm::Value *> out;
    uint32_t bias = from.isSigned() ? 128u : 0u;
    for (llvm::Value *v : slots) {
      llvm::Value *code = b.CreateZExt(v, i32);
      if (bias)
        code = b.CreateXor(code, b.getInt32(bias));
      llvm::Value *f = b.CreateBitCast(b.CreateOr(code, b.getInt32(0x4B000000u)), b.getFloatTy());
      f = b.CreateFSub(f, llvm::ConstantFP::get(b.getFloatTy(), 8388608.0 + double(bias)));
      out.push_back(b.CreateFPTrunc(f, lane));
    }
    return out;
  } else if (from.floatStyle() == FloatStyle::Ieee) {
    // f8e5m2 -> f16: the code is the f16's high byte; no arithmetic at all
    laneBits = [&](llvm::Value *v) { return b.CreateShl(b.CreateZExt(v, i16), uint64_t(8)); };
    fix = nullptr;
  } else {
    int e = from.exponent, m = from.mantissa;
    int targetMantissa = intoBf16 ? 7 : 10;
    int targetBias = intoBf16 ? 127 : 15;
    int bias = (1 << (e - 1)) - 1;
    uint64_t emMask = bitMask(n - 1);
    laneBits = [&, emMask, m, targetMantissa, n](llvm::Value *v) {
      llvm::Value *code = b.CreateZExt(v, i16);
      llvm::Value *em = b.CreateShl(b.CreateAnd(code, b.getInt16(uint16_t(emMask))),
                                    uint64_t(targetMantissa - m));
      llvm::Value *sign =
          b.CreateShl(b.CreateAnd(code, b.getInt16(uint16_t(1u << (n - 1)))), uint64_t(16 - n));
      return b.CreateOr(em, sign);
    };
    fix = llvm::ConstantFP::get(pairType, std::ldexp(1.0, targetBias - bias));
  }

  // OCP FP8 into f16 on sm_90: the hardware conversion of a pair of codes (two bytes of one
  // 16-bit register, the first in the low byte) to f16x2, exact for every finite code and the
  // infinities; NaN codes are made canonical below like those of the bit tricks.
  const char *hardware = nullptr;
  if (from.isFloat() && from.bits == 8 && !intoBf16 && opts.smVersion >= 90) {
    if (from.floatStyle() == FloatStyle::OcpE4M3)
      hardware = "cvt.rn.f16x2.e4m3x2 $0, $1;";
    else if (from.floatStyle() == FloatStyle::Ieee)
      hardware = "cvt.rn.f16x2.e5m2x2 $0, $1;";
  }

  // The pair's operand of the hardware conversion, from the words its bytes lie in: the low or
  // high half of one word as it stands, else one prmt (byte 0 of the result from word a's byte
  // i, byte 1 from word b's byte j: selector nibbles i and 4 + j); nullptr when a code is not a
  // whole byte of a 32-bit part of a traced value.
  auto pairFromWords = [&](llvm::Value *lo, llvm::Value *hi) -> llvm::Value * {
    std::optional<WordCode> a = wordCode(traceCode(lo, 8), 8);
    std::optional<WordCode> c = wordCode(traceCode(hi, 8), 8);
    if (!a || !c || a->offset % 8 != 0 || c->offset % 8 != 0)
      return nullptr;
    llvm::Value *wa = wordValue(b, a->root, a->part);
    unsigned i = a->offset / 8, j = c->offset / 8;
    if (a->root == c->root && a->part == c->part && j == i + 1 && i % 2 == 0)
      return b.CreateTrunc(i ? b.CreateLShr(wa, uint64_t(16)) : wa, i16);
    llvm::Value *wc = wordValue(b, c->root, c->part);
    // inline PTX keeps the selector an immediate (the intrinsic's becomes a register move)
    llvm::Value *bytes =
        pureAsm(b, i32, "prmt.b32 $0, $1, $2, " + std::to_string(i | ((4 + j) << 4)) + ";",
                "=r,r,r", {wa, wc});
    return b.CreateTrunc(bytes, i16);
  };

  std::vector<llvm::Value *> out;
  out.reserve(slots.size());
  for (size_t k = 0; k < slots.size(); k += 2) {
    bool pair = k + 1 < slots.size();
    llvm::Value *r = nullptr;
    if (hardware) {
      llvm::Value *codes = pair ? pairFromWords(slots[k], slots[k + 1]) : nullptr;
      if (!codes) {
        codes = b.CreateZExt(slots[k], i16);
        if (pair)
          codes = b.CreateOr(codes, b.CreateShl(b.CreateZExt(slots[k + 1], i16), 8));
      }
      auto *asmType = llvm::FunctionType::get(i32, {i16}, false);
      r = b.CreateBitCast(
          b.CreateCall(llvm::InlineAsm::get(asmType, hardware, "=r,h", false), {codes}), pairType);
    } else {
      llvm::Value *lo = b.CreateZExt(laneBits(slots[k]), i32);
      llvm::Value *packed = lo;
      if (pair)
        packed = b.CreateOr(lo, b.CreateShl(b.CreateZExt(laneBits(slots[k + 1]), i32), 16));
      llvm::Value *x = b.CreateBitCast(packed, pairType);
      r = fix ? b.CreateFMul(x, fix) : x;
    }
    if (from.floatStyle() != FloatStyle::Finite && from.isFloat()) {
      // the FP8 NaN codes (e4m3: S.1111.111; e5m2: exponent 31, mantissa != 0) become the
      // target's canonical NaN; computed on the packed codes, so the pair stays packed
      auto *codeType = llvm::FixedVectorType::get(i16, 2);
      llvm::Value *codes = llvm::PoisonValue::get(codeType);
      codes = b.CreateInsertElement(codes, b.CreateZExt(slots[k], i16), uint64_t(0));
      codes = b.CreateInsertElement(codes, pair ? b.CreateZExt(slots[k + 1], i16) : b.getInt16(0),
                                    uint64_t(1));
      llvm::Value *magnitude = b.CreateAnd(codes, llvm::ConstantInt::get(codeType, 0x7F));
      llvm::Value *isNaN = from.floatStyle() == FloatStyle::OcpE4M3
                               ? b.CreateICmpEQ(magnitude, llvm::ConstantInt::get(codeType, 0x7F))
                               : b.CreateICmpUGT(magnitude, llvm::ConstantInt::get(codeType, 0x7C));
      llvm::Value *nan =
          b.CreateBitCast(llvm::ConstantInt::get(codeType, intoBf16 ? 0x7FC0 : 0x7E00), pairType);
      auto *select = llvm::cast<llvm::SelectInst>(b.CreateSelect(isNaN, nan, r));
      // where the hardware converts and where e5m2 is f16's high byte, a NaN code already gives
      // a NaN (of another payload): the select only canonicalizes, and nan_canonical.cpp may
      // drop it where no payload can be seen (an mma operand); the bit tricks of e4m3 give a
      // finite value for its NaN codes, so there the select stays
      if (hardware || from.floatStyle() == FloatStyle::Ieee)
        markNaNCanonicalization(select);
      r = select;
    }
    out.push_back(b.CreateExtractElement(r, uint64_t(0)));
    if (pair)
      out.push_back(b.CreateExtractElement(r, uint64_t(1)));
  }
  return out;
}

} // namespace tilus::jit
