// Correct rounding of a long double (64-bit significand on x86-64) into an IEEE-style float
// dtype (f16, bf16, f32, f64), for references of math functions: the rounding is done once, by
// nearbyintl in round-to-nearest-even on the value scaled to the dtype's ulp, so a long double
// result of a libm function (within a few ulp of 2^-64 of the exact value) rounds to the
// correctly rounded dtype value unless the exact value lies within that distance of a midpoint.
#pragma once

#include "isa/convert.h"
#include "isa/dtype.h"

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace tilus::testing {

/// v rounded to nearest-even into t (subnormals and overflow to infinity included).
inline long double roundInto(long double v, DataType t) {
  if (std::isnan(v) || std::isinf(v) || v == 0)
    return v;
  int p = t.mantissa + 1;                 // significand bits
  int emin = 2 - (1 << (t.exponent - 1)); // exponent of the smallest normal
  int e = 0;
  std::frexp(v, &e);                     // |v| in [2^(e-1), 2^e)
  int q = std::max(e - p, emin - p + 1); // exponent of the ulp at v
  long double r = std::ldexp(std::nearbyint(std::ldexp(v, -q)), q);
  long double largest = (long double)toDouble(maxFinite(t), t);
  if (std::fabs(r) > largest)
    return std::copysign((long double)INFINITY, v);
  return r;
}

/// How many representable values of t lie between got and want (both values of t), 0 when equal
/// (NaN meets NaN); infinite when exactly one of them is NaN or infinite.
inline double codesApart(long double got, long double want, DataType t) {
  if (std::isnan(got) || std::isnan(want))
    return std::isnan(got) && std::isnan(want) ? 0.0 : INFINITY;
  if (got == want)
    return 0.0;
  if (std::isinf(got) || std::isinf(want))
    return INFINITY;
  auto index = [&](long double v) {
    uint64_t bits = fromDouble(double(v), t); // exact: v is a value of t
    uint64_t sign = uint64_t(1) << (t.bits - 1);
    int64_t magnitude = int64_t(bits & (sign - 1));
    return (bits & sign) ? -magnitude : magnitude;
  };
  return double(std::llabs(index(got) - index(want)));
}

} // namespace tilus::testing
