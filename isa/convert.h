// Exact conversions between the data types of ISA section 2, on raw bit patterns.
//
// Every conversion goes through one exact intermediate (sign, integer significand, binary
// exponent) and one rounding step, so results are correctly rounded (to nearest, ties to even)
// and never double-rounded:
//   float -> float: RNE; into f16/bf16/f32/f64 overflow gives +-inf and NaN stays NaN; into
//                   types of <= 8 bits overflow (and +-inf) saturates to +-max, NaN becomes the
//                   format's NaN or +0 if it has none; subnormals produced; sign of zero kept.
//   float -> int:   toward zero, saturating, NaN -> 0.
//   int -> float:   RNE (saturating as above for <= 8-bit floats).
//   int -> int:     keep the low N bits; signed sub-byte values sign-extend from bit N-1.
//   bool -> number: 0 or 1; number -> bool: x != 0 (NaN is true, -0 is false).
// Source patterns are read from their low `bits` bits only; results use only the low `bits`
// bits of the target (bool: 0 or 1). Converting a type to itself returns the pattern unchanged
// (NaN payloads included); every other conversion that yields NaN yields canonicalNaN(to).
#pragma once

#include "isa/dtype.h"

#include <cstdint>

namespace tilus {

/// Mask of the low `bits` bits.
inline uint64_t bitMask(int bits) { return bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << bits) - 1; }

/// Convert the value with bit pattern `bits` of type `from` to type `to`.
uint64_t convertBits(uint64_t bits, DataType from, DataType to);

/// The value as a double (exact for every type except 64-bit integers beyond 2^53).
double toDouble(uint64_t bits, DataType type);
/// The double converted to `type` by the rules above (as from f64).
uint64_t fromDouble(double value, DataType type);
/// Integer value of an integer or bool pattern (sign-extended for signed types).
int64_t toInt64(uint64_t bits, DataType type);
/// An integer converted to `type` by the rules above (as from i64).
uint64_t fromInt64(int64_t value, DataType type);

/// Whether a float pattern is NaN (false for types without NaN and for non-floats).
bool isNaN(uint64_t bits, DataType type);
/// Whether a float pattern is +-inf (false for types without infinities and for non-floats).
bool isInf(uint64_t bits, DataType type);
/// Largest finite value of a float type, as a bit pattern (for integers and bool: the largest
/// value).
uint64_t maxFinite(DataType type);
/// The NaN that conversions and scalar arithmetic produce: positive, quiet, no payload
/// (f16 0x7E00, bf16 0x7FC0, f32 0x7FC00000, f64 0x7FF8000000000000, f8e5m2 0x7E,
/// f8e4m3 0x7F); 0 (+0) for types without NaN.
uint64_t canonicalNaN(DataType type);
/// The low `n` bits of `bits` read as an n-bit two's-complement value (1 <= n <= 64).
int64_t signExtend(uint64_t bits, int n);

} // namespace tilus
