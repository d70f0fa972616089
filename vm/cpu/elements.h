// Element values as the interpreter moves them: bit patterns in the low bits of a uint64_t
// (canonical: bits above the type's width are zero, bool is 0 or 1), read from and written to
// byte memory with the packing of ISA section 2 (little-endian, sub-byte elements bit-packed
// least significant bit first), and decoded to double on the hot paths of f32/f64/f16/bf16.
#pragma once

#include "isa/convert.h"
#include "isa/dtype.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace tilus::cpu {

static_assert(std::endian::native == std::endian::little,
              "the interpreter assumes a little-endian host");

/// Float value classes with a fast decode/encode.
enum class FloatKind : uint8_t { F32, F64, F16, BF16, Other };

inline FloatKind floatKind(DataType t) {
  if (t == DataType::f32())
    return FloatKind::F32;
  if (t == DataType::f64())
    return FloatKind::F64;
  if (t == DataType::f16())
    return FloatKind::F16;
  if (t == DataType::bf16())
    return FloatKind::BF16;
  return FloatKind::Other;
}

/// f16 patterns decoded to float (exact), built once from toDouble.
const float *halfToFloatTable();

/// The value of a float pattern, exactly.
inline double decodeFloat(uint64_t bits, DataType t) {
  switch (floatKind(t)) {
  case FloatKind::F32:
    return double(std::bit_cast<float>(uint32_t(bits)));
  case FloatKind::F64:
    return std::bit_cast<double>(bits);
  case FloatKind::F16:
    return double(halfToFloatTable()[bits & 0xFFFF]);
  case FloatKind::BF16:
    return double(std::bit_cast<float>(uint32_t(bits & 0xFFFF) << 16));
  case FloatKind::Other:
    return toDouble(bits, t);
  }
  return 0.0;
}

/// A double rounded once into float type `t` (NaN becomes the canonical NaN of `t`).
inline uint64_t encodeFloat(double v, DataType t) {
  if (std::isnan(v))
    return canonicalNaN(t);
  switch (floatKind(t)) {
  case FloatKind::F32:
    return std::bit_cast<uint32_t>(float(v));
  case FloatKind::F64:
    return std::bit_cast<uint64_t>(v);
  case FloatKind::F16:
  case FloatKind::BF16:
  case FloatKind::Other:
    return fromDouble(v, t);
  }
  return 0;
}

/// Load/store of a whole 1, 2, 4 or 8-byte element (constant-size copies, no library call).
inline uint64_t loadBytes(const uint8_t *p, int bytes) {
  switch (bytes) {
  case 1:
    return *p;
  case 2: {
    uint16_t v;
    std::memcpy(&v, p, 2);
    return v;
  }
  case 4: {
    uint32_t v;
    std::memcpy(&v, p, 4);
    return v;
  }
  default: {
    uint64_t v;
    std::memcpy(&v, p, 8);
    return v;
  }
  }
}

inline void storeBytes(uint8_t *p, int bytes, uint64_t value) {
  switch (bytes) {
  case 1:
    *p = uint8_t(value);
    return;
  case 2: {
    uint16_t v = uint16_t(value);
    std::memcpy(p, &v, 2);
    return;
  }
  case 4: {
    uint32_t v = uint32_t(value);
    std::memcpy(p, &v, 4);
    return;
  }
  default:
    std::memcpy(p, &value, 8);
    return;
  }
}

/// Read an element of `storageBits` bits at bit address `bitAddr` of `mem`.
inline uint64_t readBits(const uint8_t *mem, int64_t bitAddr, int storageBits) {
  if ((storageBits & 7) == 0 && (bitAddr & 7) == 0)
    return loadBytes(mem + (bitAddr >> 3), storageBits >> 3);
  // Sub-byte: at most 7 bits, so the element lies within two bytes.
  const uint8_t *p = mem + (bitAddr >> 3);
  int shift = int(bitAddr & 7);
  uint32_t window = p[0];
  if (shift + storageBits > 8)
    window |= uint32_t(p[1]) << 8;
  return (window >> shift) & bitMask(storageBits);
}

/// Write an element (no other bits of memory change).
inline void writeBits(uint8_t *mem, int64_t bitAddr, int storageBits, uint64_t value) {
  if ((storageBits & 7) == 0 && (bitAddr & 7) == 0) {
    storeBytes(mem + (bitAddr >> 3), storageBits >> 3, value);
    return;
  }
  uint8_t *p = mem + (bitAddr >> 3);
  int shift = int(bitAddr & 7);
  uint32_t mask = uint32_t(bitMask(storageBits)) << shift;
  uint32_t bits = (uint32_t(value) << shift) & mask;
  p[0] = uint8_t((p[0] & ~mask) | bits);
  if (shift + storageBits > 8)
    p[1] = uint8_t((p[1] & ~(mask >> 8)) | (bits >> 8));
}

/// Packed (sub-byte) writeBits where other host threads may update neighbouring elements of the
/// same bytes: each byte changes by an atomic read-modify-write of this element's bits only.
void writeBitsAtomic(uint8_t *mem, int64_t bitAddr, int storageBits, uint64_t value);

/// writeBits for memory that other host threads may update at the same time (global memory:
/// blocks run in parallel and packed elements of different blocks can share a byte).
inline void writeBitsShared(uint8_t *mem, int64_t bitAddr, int storageBits, uint64_t value) {
  if ((storageBits & 7) == 0 && (bitAddr & 7) == 0)
    storeBytes(mem + (bitAddr >> 3), storageBits >> 3, value);
  else
    writeBitsAtomic(mem, bitAddr, storageBits, value);
}

/// The element as stored in memory becomes a canonical register pattern (bool: != 0).
inline uint64_t canonicalFromMemory(uint64_t raw, DataType t) {
  if (t.isBool())
    return raw != 0 ? 1 : 0;
  return raw & bitMask(t.bits);
}

} // namespace tilus::cpu
