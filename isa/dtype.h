// Data types of ISA section 2: bool, integers of 1 to 64 bits, IEEE floats, the two OCP FP8
// formats and generic low-precision floats fNeEmM.
//
// A DataType is a small value: its kind, its width in bits and, for floats, the exponent and
// mantissa widths. The float *style* decides special values:
//   - IEEE (f16, bf16, f32, f64) and f8e5m2: infinities and NaN as in IEEE 754;
//   - f8e4m3 (OCP): no infinities, NaN is S.1111.111, max 448;
//   - every other fNeEmM: no infinities, no NaN, every exponent field > 0 is normal.
//
// Element values travel through the system as raw bit patterns held in the low `bits` bits
// of a uint64_t (see isa/convert.h for conversions between types).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace tilus {

enum class TypeKind : uint8_t { Bool = 0, Int = 1, UInt = 2, Float = 3 };

enum class FloatStyle : uint8_t {
  Ieee,    // f16 bf16 f32 f64 f8e5m2: inf and NaN
  OcpE4M3, // f8e4m3: NaN = S.1111.111 only, no inf
  Finite,  // generic fNeEmM: no inf, no NaN
};

struct DataType {
  TypeKind kind = TypeKind::Int;
  uint8_t bits = 32;
  uint8_t exponent = 0; // floats only
  uint8_t mantissa = 0; // floats only

  static constexpr DataType boolean() { return {TypeKind::Bool, 1, 0, 0}; }
  static constexpr DataType i(int bits) { return {TypeKind::Int, uint8_t(bits), 0, 0}; }
  static constexpr DataType u(int bits) { return {TypeKind::UInt, uint8_t(bits), 0, 0}; }
  static constexpr DataType f(int e, int m) {
    return {TypeKind::Float, uint8_t(1 + e + m), uint8_t(e), uint8_t(m)};
  }
  static constexpr DataType f16() { return f(5, 10); }
  static constexpr DataType bf16() { return f(8, 7); }
  static constexpr DataType f32() { return f(8, 23); }
  static constexpr DataType f64() { return f(11, 52); }
  static constexpr DataType f8e4m3() { return f(4, 3); }
  static constexpr DataType f8e5m2() { return f(5, 2); }
  static constexpr DataType i32() { return i(32); }
  static constexpr DataType i64() { return i(64); }

  bool isBool() const { return kind == TypeKind::Bool; }
  bool isInt() const { return kind == TypeKind::Int || kind == TypeKind::UInt; }
  bool isSigned() const { return kind == TypeKind::Int; }
  bool isFloat() const { return kind == TypeKind::Float; }
  /// Sub-byte integers and floats (bool is stored as a byte and is not sub-byte).
  bool isSubByte() const { return !isBool() && bits < 8; }
  /// Types on which arithmetic is defined (ISA section 5): bool, 8-64 bit integers,
  /// f16 bf16 f32 f64.
  bool isArithmetic() const;
  /// The special-value style of a float type (Finite for non-floats, which have none).
  FloatStyle floatStyle() const;
  /// Bits an element occupies in memory: 8 for bool, `bits` otherwise.
  int storageBits() const { return isBool() ? 8 : bits; }

  /// The canonical spelling: "i6", "u1", "bool", "f16", "bf16", "f8e4m3", "f6e3m2".
  std::string name() const;
  /// Parse a spelling; nullopt if it names no type of ISA section 2.
  static std::optional<DataType> parse(std::string_view text);
  /// True for every combination a DataType can represent legally (used by the decoder).
  bool valid() const;

  friend bool operator==(const DataType &, const DataType &) = default;
};

} // namespace tilus
