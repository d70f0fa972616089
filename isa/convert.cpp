// Conversions between every pair of ISA section 2 types, on raw bit patterns.
//
// A conversion first decodes its source into an exact value (sign, 64-bit integer significand,
// binary exponent); every source value of every type fits exactly, including u64 and the f64
// subnormals. It then rounds that value once, to nearest with ties to even, into the target.
// Rounding straight from the exact value is what makes i64 -> f32 and f64 -> f16 correct:
// going through double or float first would round twice. For example 2^60 + 2^36 + 1 as an
// i64 lies just above the midpoint between two f32 values and must round up; through double
// it would first become 2^60 + 2^36, the midpoint itself, and then round down to even.
//
// Special values follow the target's FloatStyle: IEEE types overflow to infinity (only the
// ones wider than 8 bits; every type of at most 8 bits saturates), f8e4m3 has NaN but no
// infinity, generic fNeEmM types have neither (NaN becomes +0). The NaN produced by a
// conversion is always the canonical one of canonicalNaN() (docs/types.md).
#include "isa/convert.h"

#include <bit>
#include <cassert>
#include <limits>

namespace tilus {

namespace {

enum class ValueClass : uint8_t { Zero, Finite, Inf, NaN };

/// (-1)^negative * significand * 2^exponent; significand != 0 exactly when cls is Finite.
struct ExactValue {
  ValueClass cls = ValueClass::Zero;
  bool negative = false;
  uint64_t significand = 0;
  int exponent = 0;
};

int floatBias(DataType t) { return (1 << (t.exponent - 1)) - 1; }

int64_t signExtendBits(uint64_t bits, int n) {
  if (n >= 64)
    return int64_t(bits);
  uint64_t sign = uint64_t(1) << (n - 1);
  uint64_t low = bits & bitMask(n);
  return int64_t((low ^ sign) - sign);
}

ExactValue decodeFloat(uint64_t bits, DataType t) {
  int e = t.exponent, m = t.mantissa;
  ExactValue v;
  v.negative = (bits >> (e + m)) & 1;
  uint64_t expField = (bits >> m) & bitMask(e);
  uint64_t mant = bits & bitMask(m);
  FloatStyle style = t.floatStyle();
  if (style == FloatStyle::Ieee && expField == bitMask(e)) {
    v.cls = mant == 0 ? ValueClass::Inf : ValueClass::NaN;
    return v;
  }
  if (style == FloatStyle::OcpE4M3 && expField == bitMask(e) && mant == bitMask(m)) {
    v.cls = ValueClass::NaN;
    return v;
  }
  if (expField == 0 && mant == 0)
    return v; // signed zero
  v.cls = ValueClass::Finite;
  int bias = floatBias(t);
  if (expField == 0) {
    v.significand = mant;
    v.exponent = 1 - bias - m;
    return v;
  }
  v.significand = mant | (uint64_t(1) << m);
  v.exponent = int(expField) - bias - m;
  return v;
}

/// Integers and bool: the value of the (masked) pattern.
ExactValue decodeInteger(uint64_t bits, DataType t) {
  ExactValue v;
  uint64_t magnitude = bits & bitMask(t.bits);
  if (t.isSigned()) {
    int64_t value = signExtendBits(bits, t.bits);
    v.negative = value < 0;
    magnitude = v.negative ? uint64_t(0) - uint64_t(value) : uint64_t(value);
  }
  if (magnitude != 0) {
    v.cls = ValueClass::Finite;
    v.significand = magnitude;
  }
  return v;
}

ExactValue decode(uint64_t bits, DataType t) {
  return t.isFloat() ? decodeFloat(bits, t) : decodeInteger(bits, t);
}

/// significand / 2^shift rounded to nearest, ties to even. A shift <= 0 is exact; the caller
/// guarantees that the result then fits in 64 bits.
uint64_t roundShift(uint64_t significand, int shift) {
  if (shift <= 0)
    return significand << -shift;
  if (shift > 64)
    return 0; // below half a unit: significand < 2^64 <= 2^(shift-1)
  if (shift == 64)
    return significand > (uint64_t(1) << 63) ? 1 : 0; // exactly half: ties to even (0)
  uint64_t result = significand >> shift;
  uint64_t rest = significand & bitMask(shift);
  uint64_t half = uint64_t(1) << (shift - 1);
  if (rest > half || (rest == half && (result & 1)))
    ++result;
  return result;
}

uint64_t infinityBits(DataType t) { return bitMask(t.exponent) << t.mantissa; }

/// Overflowing values: infinity for IEEE types wider than 8 bits, max finite otherwise.
uint64_t overflowBits(DataType t, uint64_t signBit) {
  if (t.bits > 8 && t.floatStyle() == FloatStyle::Ieee)
    return signBit | infinityBits(t);
  return signBit | maxFinite(t);
}

/// Largest exponent field that a finite value may use.
uint64_t maxFiniteExpField(DataType t) {
  return t.floatStyle() == FloatStyle::Ieee ? bitMask(t.exponent) - 1 : bitMask(t.exponent);
}

/// Round a finite non-zero exact value into float type `t` (one rounding step).
uint64_t roundToFloat(const ExactValue &v, DataType t) {
  int m = t.mantissa;
  uint64_t signBit = uint64_t(v.negative) << (t.bits - 1);
  int msb = 63 - std::countl_zero(v.significand);
  int valueExp = msb + v.exponent; // v in [2^valueExp, 2^(valueExp+1))
  int minExp = 1 - floatBias(t);
  // Exponent of the unit in the last place: that of the normal binade, or of the subnormals.
  int quantum = (valueExp < minExp ? minExp : valueExp) - m;
  uint64_t units = roundShift(v.significand, quantum - v.exponent); // <= 2^(m+1)
  if (units == 0)
    return signBit;
  if (units >> (m + 1)) { // rounded up into the next binade: units == 2^(m+1)
    units >>= 1;
    ++quantum;
  }
  if (units < (uint64_t(1) << m)) // subnormal (quantum is minExp - m)
    return signBit | units;
  int64_t expField = int64_t(quantum) + m + floatBias(t);
  uint64_t mant = units - (uint64_t(1) << m);
  if (expField > int64_t(maxFiniteExpField(t)))
    return overflowBits(t, signBit);
  uint64_t result = signBit | (uint64_t(expField) << m) | mant;
  if (t.floatStyle() == FloatStyle::OcpE4M3 &&
      (result & bitMask(t.bits - 1)) == (bitMask(t.exponent) << m | bitMask(m)))
    return overflowBits(t, signBit); // would be the NaN code S.1111.111
  return result;
}

uint64_t encodeFloat(const ExactValue &v, DataType t) {
  uint64_t signBit = uint64_t(v.negative) << (t.bits - 1);
  switch (v.cls) {
  case ValueClass::Zero:
    return signBit;
  case ValueClass::NaN:
    return canonicalNaN(t);
  case ValueClass::Inf:
    return overflowBits(t, signBit);
  case ValueClass::Finite:
    return roundToFloat(v, t);
  }
  return 0;
}

/// Toward zero, saturating to the N-bit range of integer type `t`; NaN gives 0.
uint64_t encodeIntegerFromFloat(const ExactValue &v, DataType t) {
  int n = t.bits;
  uint64_t maxMagnitude = t.isSigned() ? bitMask(n - 1) : bitMask(n); // of positive values
  uint64_t minMagnitude = t.isSigned() ? uint64_t(1) << (n - 1) : 0;  // of negative values
  uint64_t limit = v.negative ? minMagnitude : maxMagnitude;
  uint64_t magnitude = 0;
  switch (v.cls) {
  case ValueClass::Zero:
  case ValueClass::NaN:
    return 0;
  case ValueClass::Inf:
    magnitude = limit;
    break;
  case ValueClass::Finite:
    if (v.exponent >= 0) {
      bool fits = v.exponent < 64 && v.significand <= (~uint64_t(0) >> v.exponent);
      magnitude = fits ? v.significand << v.exponent : ~uint64_t(0);
    } else {
      magnitude = v.exponent <= -64 ? 0 : v.significand >> -v.exponent;
    }
    break;
  }
  if (magnitude > limit)
    magnitude = limit;
  uint64_t value = v.negative ? uint64_t(0) - magnitude : magnitude;
  return value & bitMask(n);
}

} // namespace

uint64_t canonicalNaN(DataType type) {
  switch (type.floatStyle()) {
  case FloatStyle::Ieee:
    return infinityBits(type) | (uint64_t(1) << (type.mantissa - 1));
  case FloatStyle::OcpE4M3:
    return bitMask(type.bits - 1);
  case FloatStyle::Finite:
    return 0;
  }
  return 0;
}

uint64_t convertBits(uint64_t bits, DataType from, DataType to) {
  bits &= bitMask(from.bits);
  if (from == to)
    return bits;
  if (to.isBool()) {
    if (!from.isFloat())
      return bits != 0;
    return decodeFloat(bits, from).cls != ValueClass::Zero; // NaN != 0 is true
  }
  if (!from.isFloat() && !to.isFloat()) { // wrap to the low N bits
    uint64_t value = from.isSigned() ? uint64_t(signExtendBits(bits, from.bits)) : bits;
    return value & bitMask(to.bits);
  }
  ExactValue v = decode(bits, from);
  if (to.isFloat())
    return encodeFloat(v, to);
  return encodeIntegerFromFloat(v, to);
}

double toDouble(uint64_t bits, DataType type) {
  return std::bit_cast<double>(convertBits(bits, type, DataType::f64()));
}

uint64_t fromDouble(double value, DataType type) {
  return convertBits(std::bit_cast<uint64_t>(value), DataType::f64(), type);
}

int64_t toInt64(uint64_t bits, DataType type) {
  return int64_t(convertBits(bits, type, DataType::i64()));
}

uint64_t fromInt64(int64_t value, DataType type) {
  return convertBits(uint64_t(value), DataType::i64(), type);
}

int64_t signExtend(uint64_t bits, int n) {
  assert(n >= 1 && n <= 64);
  return signExtendBits(bits, n);
}

bool isNaN(uint64_t bits, DataType type) {
  return type.isFloat() && decodeFloat(bits, type).cls == ValueClass::NaN;
}

bool isInf(uint64_t bits, DataType type) {
  return type.isFloat() && decodeFloat(bits, type).cls == ValueClass::Inf;
}

uint64_t maxFinite(DataType type) {
  switch (type.kind) {
  case TypeKind::Bool:
    return 1;
  case TypeKind::Int:
    return bitMask(type.bits - 1);
  case TypeKind::UInt:
    return bitMask(type.bits);
  case TypeKind::Float:
    break;
  }
  switch (type.floatStyle()) {
  case FloatStyle::Ieee:
    return (maxFiniteExpField(type) << type.mantissa) | bitMask(type.mantissa);
  case FloatStyle::OcpE4M3:
    return bitMask(type.bits - 1) - 1;
  case FloatStyle::Finite:
    return bitMask(type.bits - 1);
  }
  return 0;
}

} // namespace tilus
