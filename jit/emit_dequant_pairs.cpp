// Dequantisation of low-bit integers from where their codes lie: two codes per 32-bit lane pair
// with one mask, one magic number and one packed subtraction.
//
// A register slot of a sub-byte type is, in the IR that View and the loads emit, a chain of
// shifts, masks, truncations and extensions of a wider value (a loaded 32-bit word, a byte of a
// loop-carried register). traceCode walks that chain back to its root and the bit offset of the
// code in it. For a pair of slots (k, k + 1) the two codes are then placed, unshifted when they
// fit, in the low and high half of one 32-bit value Y (code 0 at bit p0, code 1 at bit 16 + p1;
// the byte moves become `prmt` or nothing), and
//
//     lanes = (Y & M) ^ (K | magic)        M: the two code fields; K: the sign bias of signed
//                                          types (code ^ 2^(N-1) makes it non-negative);
//                                          magic: 2^(10-p) (exponent 25 - p) in each half
//     value = lanes - (2^(10-p) + bias)    one sub.f16x2 by an immediate pair
//
// so that a lane holding the code c' at bit p reads 2^(10-p) + c' (the exponent makes the
// mantissa's unit 2^-p, so bit p has weight 1) and the sub leaves c' - bias. Every step is
// exact: the code fits the mantissa (p + N <= 10) and the result is a small integer, so the one
// rounding of the sub rounds an exact value. bf16 works alike with 2^(7-p) (exponent 134 - p, 7
// mantissa bits, p + N <= 7) where that exponent's low bit, which lies in the code's byte, is 0
// (p even); at an odd p the half keeps 128.0 (0x4300), where the code reads 128 + c' 2^p, and the
// pair takes one fma by 2^-p instead (sm_90: fma.rn.bf16x2 with these constants). LLVM folds the
// byte re-assembly (e.g. the bytes of a loop-carried word) back into the word, and ptxas forms
// `prmt` and `lop3` from the rest: three instructions per pair of codes instead of a shift, a
// bit-field extract and an or per code.
#include "jit/codegen.h"
#include "jit/trace_code.h"

#include "isa/convert.h"

#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <cmath>

namespace tilus::jit {

std::optional<std::vector<llvm::Value *>>
Codegen::dequantizePairs(const std::vector<llvm::Value *> &slots, DataType from, DataType to) {
  bool intoBf16 = to == DataType::bf16();
  if (from.isFloat())
    return dequantizeFloatPairs(slots, from, to);
  if (from.isBool() || from.bits > 8 || (to != DataType::f16() && !intoBf16))
    return std::nullopt;
  int n = from.bits;
  // mantissa bits of the target: a code at bit p fits when p + n <= room
  int room = intoBf16 ? 7 : 10;
  if (n > room)
    return std::nullopt; // 8-bit integers into bf16: emit_dequant.cpp goes through f32
  // fma.rn.bf16x2 with these constants: sm_90 (sm_80 aligns every code to bit 0, a plain sub)
  bool scaled = !intoBf16 || opts.smVersion >= 90;
  double base = intoBf16 ? 128.0 : 1024.0;
  // the magic number of a half whose code lies at bit p: 2^(room - p), whose mantissa unit is
  // 2^-p (bit p has weight 1), when its exponent's bits fit above the code's byte (f16: always;
  // bf16: even p); otherwise 2^room (bit p then has weight 2^p, undone by the fma's scale)
  auto magicAt = [&](int p) -> uint32_t {
    uint32_t e = uint32_t((intoBf16 ? 134 : 25) - p) << room;
    return (e & 0xFFu) == 0 ? e : (intoBf16 ? 0x4300u : 0x6400u);
  };
  auto unitAt = [&](int p) { return magicAt(p) != (intoBf16 ? 0x4300u : 0x6400u) || p == 0; };
  uint32_t signBias = from.isSigned() ? (1u << (n - 1)) : 0u;
  llvm::Type *i16 = b.getInt16Ty();
  llvm::Type *i32 = b.getInt32Ty();
  llvm::Type *lane = elemType(to);
  auto *pairType = llvm::FixedVectorType::get(lane, 2);

  // Where every code lies: bits [8 byte + p, 8 byte + p + n) of a 32-bit word, inside the bytes
  // `byte` and `byte + 1` that one half of a `prmt` takes. The words are keyed by their root and
  // 32-bit part, so that the codes of one word share it, and for signed types the word is
  // xor-ed once with the sign bits of all its codes (the bias that makes them non-negative).
  struct Word {
    llvm::Value *root = nullptr;
    unsigned part = 0;
    uint32_t flip = 0;
    llvm::Value *value = nullptr;
  };
  struct Placed {
    size_t word = 0;
    int byte = 0, p = 0;
  };
  std::vector<Word> words;
  std::vector<CodeBits> traced(slots.size());
  std::vector<std::optional<Placed>> placed(slots.size());
  for (size_t k = 0; k < slots.size(); ++k) {
    traced[k] = traceCode(slots[k], unsigned(n));
    std::optional<WordCode> c = wordCode(traced[k], n);
    if (!c)
      continue;
    int byte = int(c->offset / 8), p = int(c->offset % 8);
    if (p + n > room || (!scaled && p != 0) || (p + n > 8 && byte == 3))
      continue;
    size_t w = 0;
    while (w < words.size() && !(words[w].root == c->root && words[w].part == c->part))
      ++w;
    if (w == words.size())
      words.push_back(Word{c->root, c->part, 0, nullptr});
    words[w].flip |= signBias << c->offset;
    placed[k] = Placed{w, byte, p};
  }
  for (Word &w : words) {
    llvm::Value *v = wordValue(b, w.root, w.part);
    w.value = w.flip ? b.CreateXor(v, b.getInt32(w.flip)) : v;
  }
  // A code that cannot be read in place: shifted to bit 0 of a 16-bit half (not yet biased).
  auto shifted = [&](size_t k) -> llvm::Value * {
    const CodeBits &c = traced[k];
    llvm::Value *v = c.offset ? b.CreateLShr(c.root, uint64_t(c.offset)) : c.root;
    return b.CreateZExt(b.CreateZExtOrTrunc(v, i16), i32);
  };
  llvm::Value *zero = b.getInt32(0);
  // the prmt selector nibbles of one half: bytes `byte` and `byte + 1` of operand `which`
  auto halfSelector = [](const Placed &c, int which) {
    uint32_t lo = uint32_t(4 * which + c.byte), hi = uint32_t(4 * which + std::min(c.byte + 1, 3));
    return lo | hi << 4;
  };
  auto inByte = [&](const std::optional<Placed> &c) { return c && c->p + n <= 8; };

  std::vector<llvm::Value *> out;
  out.reserve(slots.size());
  const std::optional<Placed> noCode;
  for (size_t k = 0; k < slots.size(); k += 2) {
    bool pair = k + 1 < slots.size();
    const std::optional<Placed> &c0 = placed[k];
    const std::optional<Placed> &c1 = pair ? placed[k + 1] : noCode;
    int p0 = c0 ? c0->p : 0, p1 = c1 ? c1->p : 0;
    uint32_t magic0 = magicAt(p0), magic1 = magicAt(p1);
    uint32_t field = uint32_t(bitMask(n));
    llvm::Value *lanes = nullptr;
    // both codes of a word at the same place q of its two halves (e.g. codes i and i + 4 of a
    // word of u4 codes): the pair is in place already, or after one shift right of the word
    // (shared by the codes that need it), so one mask and one xor (a lop3) replace the prmt
    std::optional<int> inPlace;
    if (pair && c0 && c1 && c0->word == c1->word && n <= 4) {
      int q = 8 * c0->byte + c0->p, q1 = 8 * c1->byte + c1->p;
      if (q < 16 && q1 == q + 16) {
        int s = q + n <= room ? 0 : (q >= 8 && q - 8 + n <= room ? 8 : q);
        if (!scaled && q - s != 0)
          s = q;
        inPlace = s;
        p0 = p1 = q - s;
        magic0 = magic1 = magicAt(p0);
      }
    }
    if (inPlace) {
      llvm::Value *w = words[c0->word].value;
      if (*inPlace)
        w = b.CreateLShr(w, uint64_t(*inPlace));
      uint32_t mask = field << p0 | field << (16 + p1);
      lanes = b.CreateXor(b.CreateAnd(w, b.getInt32(mask)), b.getInt32(magic0 | magic1 << 16));
    } else if (inByte(c0) && (!pair || (inByte(c1) && c1->word == c0->word))) {
      // each code's byte in the low byte of its half, its half's magic exponent byte above it,
      // all from one prmt; one mask then clears the neighbouring codes (none for 8-bit codes)
      uint32_t sel0 = uint32_t(c0->byte) | 4u << 4;
      uint32_t sel1 = pair ? uint32_t(c1->byte) | 5u << 4 : 0x44u;
      llvm::Value *magicBytes = b.getInt32(magic0 >> 8 | (magic1 >> 8) << 8);
      llvm::Value *y = prmt(b, words[c0->word].value, magicBytes, sel0 | sel1 << 8);
      uint32_t mask = field << p0 | 0xFF00u | (pair ? field << (16 + p1) : 0u) | 0xFF000000u;
      lanes = mask == 0xFFFFFFFFu ? y : b.CreateAnd(y, b.getInt32(mask));
    } else {
      llvm::Value *y = nullptr;
      if (c0 && c1) {
        // both halves from one prmt (of one word, or of two)
        bool same = c0->word == c1->word;
        y = prmt(b, words[c0->word].value, same ? zero : words[c1->word].value,
                 halfSelector(*c0, 0) | halfSelector(*c1, same ? 0 : 1) << 8);
      } else {
        // the low half: code 0 in place (the high half selects zeros: byte 0 of operand 2) or
        // shifted to bit 0; the high half alike
        y = c0 ? prmt(b, words[c0->word].value, zero, halfSelector(*c0, 0) | 0x4400u) : shifted(k);
        if (pair)
          y = b.CreateOr(
              y, c1 ? prmt(b, words[c1->word].value, zero, 0x44u | halfSelector(*c1, 0) << 8)
                    : b.CreateShl(shifted(k + 1), 16));
      }
      uint32_t mask = field << p0 | (pair ? field << (16 + p1) : 0u);
      // the codes read in place are biased already (their word was xor-ed)
      uint32_t flip = (c0 ? 0u : signBias) | (pair && !c1 ? signBias << 16 : 0u);
      lanes =
          b.CreateXor(b.CreateAnd(y, b.getInt32(mask)), b.getInt32(flip | magic0 | magic1 << 16));
    }
    llvm::Value *x = b.CreateBitCast(lanes, pairType);
    llvm::Value *r = nullptr;
    auto constPair = [&](double lo, double hi) {
      return llvm::ConstantVector::get(
          {llvm::ConstantFP::get(lane, lo), llvm::ConstantFP::get(lane, hi)});
    };
    // either way the offset is 2^(room - p) + bias: the magic number, less the code's bias
    llvm::Value *shift = constPair(std::ldexp(base, -p0) + double(signBias),
                                   std::ldexp(base, -p1) + double(signBias));
    if (unitAt(p0) && unitAt(p1)) {
      r = b.CreateFSub(x, shift);
    } else {
      llvm::Value *scale = constPair(unitAt(p0) ? 1.0 : std::ldexp(1.0, -p0),
                                     unitAt(p1) ? 1.0 : std::ldexp(1.0, -p1));
      r = b.CreateIntrinsic(llvm::Intrinsic::fma, {pairType}, {x, scale, b.CreateFNeg(shift)});
    }
    out.push_back(b.CreateExtractElement(r, uint64_t(0)));
    if (pair)
      out.push_back(b.CreateExtractElement(r, uint64_t(1)));
  }
  return out;
}

std::optional<std::vector<llvm::Value *>>
Codegen::dequantizeFloatPairs(const std::vector<llvm::Value *> &slots, DataType from, DataType to) {
  // Generic floats (no infinities, no NaN) with E <= 4: the code's E + M bits go to the bottom
  // of the target's exponent field and the top of its mantissa, its sign to bit 15; read as the
  // target type that is the value times 2^(bias - targetBias), and one mul.f16x2 (bf16x2 on
  // sm_90) by 2^(targetBias - bias) restores it, exactly (emit_dequant.cpp). Here each code is
  // first brought to the top of a byte of its word (one shift per word and distinct position,
  // shared by all the codes there), one prmt puts the byte of code 0 in the high byte of the low
  // half and that of code 1 in the high byte of the high half, so both signs are at bits 15 and
  // 31 already, and one shift right by 15 - T - E moves both E + M fields into place:
  //     h = (Y & 0x80008000) | ((Y >> (15 - T - E)) & emFields)       T: target mantissa bits
  bool intoBf16 = to == DataType::bf16();
  if (from.floatStyle() != FloatStyle::Finite || from.bits > 8 || from.exponent > 4 ||
      (to != DataType::f16() && !intoBf16))
    return std::nullopt;
  int n = from.bits, e = from.exponent, m = from.mantissa;
  if (intoBf16 && (m > 7 || opts.smVersion < 90))
    return std::nullopt; // mul.bf16x2 is sm_90 (emit_dequant.cpp keeps the generic path)
  int targetMantissa = intoBf16 ? 7 : 10, targetBias = intoBf16 ? 127 : 15;
  int bias = (1 << (e - 1)) - 1;
  int down = 15 - targetMantissa - e; // from "sign at bit 15" to the exponent/mantissa place
  llvm::Type *lane = elemType(to);
  auto *pairType = llvm::FixedVectorType::get(lane, 2);
  uint32_t emField = uint32_t(bitMask(n - 1)) << (targetMantissa - m);

  // Each code traced to its word; `lift` = how far the word is shifted left so that the code
  // ends at the top of a byte (0 to 7; up to 16 - n for a pair in place), `byte` that byte's
  // index in the shifted word.
  struct Copy {
    llvm::Value *root = nullptr;
    unsigned part = 0;
    int lift = 0;
    llvm::Value *value = nullptr;
  };
  struct Placed {
    size_t copy = 0;
    int byte = 0;
  };
  std::vector<Copy> copies;
  std::vector<Placed> placed(slots.size());
  std::vector<WordCode> codes;
  for (size_t k = 0; k < slots.size(); ++k) {
    std::optional<WordCode> c = wordCode(traceCode(slots[k], unsigned(n)), n);
    if (!c)
      return std::nullopt; // straddles two 32-bit parts: emit_dequant.cpp's per-code path
    codes.push_back(*c);
  }
  auto copyOf = [&](const WordCode &c, int lift) {
    size_t i = 0;
    while (i < copies.size() &&
           !(copies[i].root == c.root && copies[i].part == c.part && copies[i].lift == lift))
      ++i;
    if (i == copies.size())
      copies.push_back(Copy{c.root, c.part, lift, nullptr});
    return i;
  };
  for (size_t k = 0; k < slots.size(); ++k) {
    const WordCode &c = codes[k];
    // A pair in place (code 0 at bit q of a word, q + n <= 16, code 1 at bit q + 16 of the
    // same word): one shift left by 16 - q - n puts the codes at the tops of bytes 1 and 3,
    // where the prmt below would have put them, so the pair needs no prmt.
    if (k % 2 == 0 && k + 1 < slots.size()) {
      const WordCode &d = codes[k + 1];
      if (d.root == c.root && d.part == c.part && d.offset == c.offset + 16 &&
          int(c.offset) + n <= 16) {
        size_t i = copyOf(c, 16 - int(c.offset) - n);
        placed[k] = Placed{i, 1};
        placed[k + 1] = Placed{i, 3};
        ++k;
        continue;
      }
    }
    int top = int(c.offset) + n; // the bit above the code
    int byte = (top - 1) / 8, lift = 8 * byte + 8 - top;
    placed[k] = Placed{copyOf(c, lift), byte};
  }
  for (Copy &c : copies) {
    llvm::Value *v = wordValue(b, c.root, c.part);
    c.value = c.lift ? b.CreateShl(v, uint64_t(c.lift)) : v;
  }
  auto *fixLane =
      llvm::cast<llvm::ConstantFP>(llvm::ConstantFP::get(lane, std::ldexp(1.0, targetBias - bias)));
  llvm::Value *fix = llvm::ConstantVector::getSplat(llvm::ElementCount::getFixed(2), fixLane);

  std::vector<llvm::Value *> out;
  out.reserve(slots.size());
  for (size_t k = 0; k < slots.size(); k += 2) {
    bool pair = k + 1 < slots.size();
    const Placed &c0 = placed[k], &c1 = placed[pair ? k + 1 : k];
    // byte of code 0 -> byte 1 (and byte 0, ignored), byte of code 1 -> byte 3 (and 2)
    uint32_t b0 = uint32_t(c0.byte), b1 = uint32_t(c1.byte);
    bool same = c1.copy == c0.copy;
    if (!same)
      b1 += 4;
    // bytes 1 and 3 of one copy are in place already (only they are read below)
    llvm::Value *y = same && b0 == 1 && b1 == 3
                         ? copies[c0.copy].value
                         : prmt(b, copies[c0.copy].value, copies[c1.copy].value,
                                b0 | b0 << 4 | b1 << 8 | b1 << 12);
    llvm::Value *sign = b.CreateAnd(y, b.getInt32(0x80008000u));
    llvm::Value *em =
        b.CreateAnd(b.CreateLShr(y, uint64_t(down)), b.getInt32(emField | emField << 16));
    llvm::Value *bits = b.CreateOr(sign, em);
    llvm::Value *raw = b.CreateBitCast(bits, pairType);
    llvm::Value *r = b.CreateFMul(raw, fix);
    dequantProducts_[r] = DequantProduct{raw, fixLane};
    out.push_back(b.CreateExtractElement(r, uint64_t(0)));
    if (pair)
      out.push_back(b.CreateExtractElement(r, uint64_t(1)));
  }
  return out;
}

llvm::Value *Codegen::unscaledDequant(llvm::Value *slot, llvm::Value *factor) {
  // slot = extractelement(bits * 2^t, i), an exact product (the code's value, which the target
  // type holds); times 2^-t it is bits' lane i, exactly (whatever the rounding mode: no rounding
  // happens), so the program's Mul by 2^-t of a Cast is free, and a scale by 2^t that it moves
  // elsewhere (a16wx.tasm: onto the f32 group scale) saves one mul.f16x2 per pair of codes
  auto *lane = llvm::dyn_cast<llvm::ExtractElementInst>(slot);
  auto *f = llvm::dyn_cast<llvm::ConstantFP>(factor);
  if (!lane || !f)
    return nullptr;
  auto it = dequantProducts_.find(lane->getVectorOperand());
  if (it == dequantProducts_.end() || it->second.fix->getType() != f->getType())
    return nullptr;
  // the factor must be the exact inverse of the product's power of two
  double p = it->second.fix->getValueAPF().convertToDouble();
  double q = f->getValueAPF().convertToDouble();
  if (p * q != 1.0)
    return nullptr;
  return b.CreateExtractElement(it->second.bits, lane->getIndexOperand());
}

bool Codegen::isDequantLane(llvm::Value *slot) const {
  auto *lane = llvm::dyn_cast<llvm::ExtractElementInst>(slot);
  return lane && dequantProducts_.count(lane->getVectorOperand()) > 0;
}

} // namespace tilus::jit
