// Conversions of ISA section 2, checked against references written independently of
// isa/convert.cpp:
//   - refValue: the value of a low-precision float code, from its bit fields by the ISA formula;
//   - refRound: the nearest finite code by brute force over every code (ties to the even code),
//     which for a saturating format is exactly "round to nearest even, saturate to max";
//   - the compiler's _Float16 and the hardware's float/double/integer conversions;
//   - the classic integer rounding trick for bf16 and f8e5m2 (both are truncations of a wider
//     format) and hand-computed values from docs/isa.md.
#include "isa/convert.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace tilus;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

/// Every generic and OCP float of at most 8 bits: all E >= 1, M >= 1 with 1 + E + M <= 8.
std::vector<DataType> smallFloats() {
  std::vector<DataType> types;
  for (int e = 1; e <= 6; ++e)
    for (int m = 1; 1 + e + m <= 8; ++m)
      types.push_back(DataType::f(e, m));
  return types;
}

bool isOcpE4M3(DataType t) { return t.bits == 8 && t.exponent == 4; }
bool isE5M2(DataType t) { return t.bits == 8 && t.exponent == 5; }

/// ISA section 2: bias 2^(E-1)-1, exponent field 0 subnormal, others normal; e5m2 has IEEE
/// inf/NaN; e4m3 has NaN S.1111.111.
double refValue(uint64_t code, DataType t) {
  int e = t.exponent, m = t.mantissa, n = 1 + e + m;
  int sign = int(code >> (n - 1)) & 1;
  int expField = int(code >> m) & ((1 << e) - 1);
  int mantField = int(code) & ((1 << m) - 1);
  int bias = (1 << (e - 1)) - 1;
  double s = sign ? -1.0 : 1.0;
  if (isE5M2(t) && expField == 31)
    return mantField == 0 ? s * kInf : kNaN;
  if (isOcpE4M3(t) && expField == 15 && mantField == 7)
    return kNaN;
  double fraction = mantField / double(1 << m);
  if (expField == 0)
    return s * std::ldexp(fraction, 1 - bias);
  return s * std::ldexp(1.0 + fraction, expField - bias);
}

/// Nearest finite code of x's sign (ties to the even code); the zero keeps x's sign.
uint64_t refRound(double x, DataType t) {
  uint64_t signBit = uint64_t(std::signbit(x)) << (t.bits - 1);
  uint64_t best = signBit;
  double bestDist = std::fabs(x);
  for (uint64_t c = signBit; c < signBit + (uint64_t(1) << (t.bits - 1)); ++c) {
    double v = refValue(c, t);
    if (std::isnan(v) || std::isinf(v))
      continue;
    double dist = std::fabs(v - x);
    if (dist < bestDist || (dist == bestDist && (c & 1) == 0 && v != 0)) {
      best = c;
      bestDist = dist;
    }
  }
  return best;
}

uint64_t dbits(double d) { return std::bit_cast<uint64_t>(d); }
uint64_t fbits(float f) { return std::bit_cast<uint32_t>(f); }
uint64_t hbits(_Float16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
_Float16 halfOf(uint64_t bits) {
  uint16_t b = uint16_t(bits);
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return h;
}

/// Deterministic 64-bit generator (splitmix64).
struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

const DataType kF16 = DataType::f16(), kBF16 = DataType::bf16(), kF32 = DataType::f32(),
               kF64 = DataType::f64(), kE4M3 = DataType::f8e4m3(), kE5M2 = DataType::f8e5m2();

} // namespace

TEST_CASE("convert: decode every code of every float of at most 8 bits") {
  for (DataType t : smallFloats()) {
    INFO(t.name());
    for (uint64_t c = 0; c < (uint64_t(1) << t.bits); ++c) {
      INFO(c);
      double expected = refValue(c, t);
      double got = toDouble(c, t);
      CHECK(isNaN(c, t) == std::isnan(expected));
      CHECK(isInf(c, t) == std::isinf(expected));
      if (std::isnan(expected)) {
        CHECK(std::isnan(got));
        continue;
      }
      CHECK(got == expected);
      CHECK(std::signbit(got) == std::signbit(expected));
      // The same through f32: every such value is exact in f32.
      CHECK(convertBits(c, t, kF32) == fbits(float(expected)));
    }
  }
}

TEST_CASE("convert: docs/isa.md spot values of low-precision floats") {
  DataType e2m1 = DataType::f(2, 1);
  const double table[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
  for (uint64_t c = 0; c < 8; ++c) {
    CHECK(toDouble(c, e2m1) == table[c]);
    CHECK(toDouble(c | 8, e2m1) == -table[c]);
  }
  CHECK(toDouble(maxFinite(e2m1), e2m1) == 6);
  CHECK(toDouble(maxFinite(DataType::f(3, 2)), DataType::f(3, 2)) == 28);
  CHECK(toDouble(maxFinite(DataType::f(2, 3)), DataType::f(2, 3)) == 7.5);
  CHECK(toDouble(maxFinite(DataType::f(1, 1)), DataType::f(1, 1)) == 3); // f3e1m1: 0 1 2 3
  CHECK(toDouble(1, DataType::f(1, 1)) == 1);
  CHECK(maxFinite(kE4M3) == 0x7E);
  CHECK(toDouble(0x7E, kE4M3) == 448);
  CHECK(toDouble(0xFE, kE4M3) == -448);
  CHECK(isNaN(0x7F, kE4M3));
  CHECK(isNaN(0xFF, kE4M3));
  CHECK_FALSE(isNaN(0x7E, kE4M3));
  CHECK_FALSE(isInf(0x78, kE4M3)); // S.1111.000 is 256, not inf
  CHECK(toDouble(0x78, kE4M3) == 256);
  CHECK(toDouble(0x01, kE4M3) == std::ldexp(1.0, -9));
  CHECK(maxFinite(kE5M2) == 0x7B);
  CHECK(toDouble(0x7B, kE5M2) == 57344);
  CHECK(toDouble(0x7C, kE5M2) == kInf);
  CHECK(toDouble(0xFC, kE5M2) == -kInf);
  CHECK(isNaN(0x7D, kE5M2));
  CHECK(isNaN(0xFF, kE5M2));
  CHECK(toDouble(0x01, kE5M2) == std::ldexp(1.0, -16));
  CHECK(toDouble(0x7F, DataType::f(6, 1)) == std::ldexp(1.5, 32)); // f8e6m1: no inf, no NaN
}

TEST_CASE("convert: every finite code encodes back to itself") {
  for (DataType t : smallFloats()) {
    INFO(t.name());
    for (uint64_t c = 0; c < (uint64_t(1) << t.bits); ++c) {
      double v = refValue(c, t);
      if (std::isnan(v) || std::isinf(v))
        continue;
      INFO(c);
      CHECK(fromDouble(v, t) == c); // includes -0 -> the sign-bit-only code
      CHECK(convertBits(fbits(float(v)), kF32, t) == c);
    }
  }
}

TEST_CASE("convert: midpoints round to the even code, neighbours to the nearer code") {
  for (DataType t : smallFloats()) {
    INFO(t.name());
    std::vector<std::pair<double, uint64_t>> values; // non-negative finite values
    for (uint64_t c = 0; c < (uint64_t(1) << (t.bits - 1)); ++c) {
      double v = refValue(c, t);
      if (!std::isnan(v) && !std::isinf(v))
        values.push_back({v, c});
    }
    std::sort(values.begin(), values.end());
    uint64_t signBit = uint64_t(1) << (t.bits - 1);
    for (size_t k = 0; k + 1 < values.size(); ++k) {
      auto [lo, loCode] = values[k];
      auto [hi, hiCode] = values[k + 1];
      double mid = (lo + hi) / 2;
      INFO(lo << " .. " << hi);
      REQUIRE(hiCode == loCode + 1);
      uint64_t even = (loCode & 1) == 0 ? loCode : hiCode;
      CHECK(fromDouble(mid, t) == even);
      CHECK(fromDouble(-mid, t) == (even | signBit));
      CHECK(convertBits(fbits(float(mid)), kF32, t) == even);
      CHECK(fromDouble(std::nextafter(mid, -kInf), t) == loCode);
      CHECK(fromDouble(std::nextafter(mid, kInf), t) == hiCode);
      CHECK(fromDouble(-std::nextafter(mid, kInf), t) == (hiCode | signBit));
    }
  }
}

TEST_CASE("convert: overflow, infinities and NaN into floats of at most 8 bits") {
  for (DataType t : smallFloats()) {
    INFO(t.name());
    uint64_t signBit = uint64_t(1) << (t.bits - 1);
    uint64_t maxCode = maxFinite(t);
    double max = refValue(maxCode, t);
    double ulp = max - refValue(maxCode - 1, t);
    for (double beyond : {max + ulp / 2, max + ulp / 4, max + ulp, 2 * max, 1e300,
                          std::numeric_limits<double>::max(), kInf}) {
      INFO(beyond);
      CHECK(fromDouble(beyond, t) == maxCode);
      CHECK(fromDouble(-beyond, t) == (maxCode | signBit));
    }
    CHECK(fromDouble(std::nextafter(max + ulp / 2, 0.0), t) == maxCode);
    CHECK(convertBits(0x7F800000, kF32, t) == maxCode);         // f32 +inf
    CHECK(convertBits(0xFC00, kF16, t) == (maxCode | signBit)); // f16 -inf
    uint64_t expectedNaN = isOcpE4M3(t) ? 0x7F : isE5M2(t) ? 0x7E : 0;
    CHECK(fromDouble(kNaN, t) == expectedNaN);
    CHECK(fromDouble(-kNaN, t) == expectedNaN);
    CHECK(convertBits(0xFFC00001, kF32, t) == expectedNaN);
    CHECK(canonicalNaN(t) == expectedNaN);
  }
  CHECK(fromDouble(1e9, kE4M3) == 0x7E);
  CHECK(fromDouble(464, kE4M3) == 0x7E);   // midpoint of 448 and 480: saturates
  CHECK(fromDouble(61440, kE5M2) == 0x7B); // midpoint of 57344 and 65536: saturates
  CHECK(fromDouble(kInf, kE5M2) == 0x7B);
  CHECK(fromDouble(-kInf, kE5M2) == 0xFB);
  CHECK(fromDouble(7, DataType::f(2, 1)) == 0x7);
}

TEST_CASE("convert: subnormals and signed zero in floats of at most 8 bits") {
  for (DataType t : smallFloats()) {
    INFO(t.name());
    uint64_t signBit = uint64_t(1) << (t.bits - 1);
    double tiny = refValue(1, t); // smallest subnormal
    CHECK(tiny == std::ldexp(1.0, 2 - (1 << (t.exponent - 1)) - t.mantissa));
    CHECK(fromDouble(tiny, t) == 1);
    CHECK(fromDouble(tiny / 2, t) == 0); // tie with 0: even
    CHECK(fromDouble(-tiny / 2, t) == signBit);
    CHECK(fromDouble(std::nextafter(tiny / 2, 1.0), t) == 1);
    CHECK(fromDouble(-std::nextafter(tiny / 2, 1.0), t) == (1 | signBit));
    CHECK(fromDouble(1.5 * tiny, t) == 2); // tie between codes 1 and 2
    CHECK(fromDouble(1e-300, t) == 0);
    CHECK(fromDouble(-1e-300, t) == signBit);
    CHECK(fromDouble(0.0, t) == 0);
    CHECK(fromDouble(-0.0, t) == signBit);
    CHECK(convertBits(0x8000, kF16, t) == signBit);
    CHECK(convertBits(0x80000001, kF32, t) == signBit); // f32 -min subnormal underflows
  }
}

TEST_CASE("convert: doubles and integers into low-precision floats match the brute force") {
  Rng rng{42};
  for (DataType t : smallFloats()) {
    INFO(t.name());
    double max = refValue(maxFinite(t), t);
    for (int k = 0; k < 3000; ++k) {
      // Every third sample within 2.2 * max, the others spread over 2^-40 .. 2^40.
      double unit = double(rng.next() >> 11) * 0x1p-53; // [0, 1)
      double x = k % 3 == 0 ? 2.2 * unit * max : unit * std::ldexp(1.0, int(rng.next() % 80) - 40);
      if (rng.next() & 1)
        x = -x;
      INFO(x);
      CHECK(fromDouble(x, t) == refRound(x, t));
    }
    for (int64_t i = -600; i <= 600; ++i) {
      INFO(i);
      uint64_t expected = refRound(double(i), t);
      if (i == 0)
        expected = 0; // integer zero has no sign
      CHECK(convertBits(uint64_t(i), DataType::i32(), t) == expected);
      CHECK(fromInt64(i, t) == expected);
    }
    for (uint64_t u = 0; u < 256; ++u)
      CHECK(convertBits(u, DataType::u(8), t) == refRound(double(u), t));
  }
  CHECK(convertBits(5, DataType::i32(), DataType::f(2, 1)) == 0x6); // tie 4 | 6 -> 4 (even)
  CHECK(convertBits(1000, DataType::i32(), kE4M3) == 0x7E);         // saturates to 448
  CHECK(convertBits(uint64_t(-1000), DataType::i32(), kE4M3) == 0xFE);
  CHECK(convertBits(60000, DataType::i32(), kE5M2) == 0x7B);
  CHECK(convertBits(~uint64_t(0), DataType::u(64), kE5M2) == 0x7B);
}

TEST_CASE("convert: f16 into low-precision floats, every f16 code") {
  for (DataType t : {kE4M3, kE5M2, DataType::f(2, 1), DataType::f(3, 2), DataType::f(1, 6)}) {
    INFO(t.name());
    for (uint64_t h = 0; h < 0x10000; ++h) {
      double v = double(halfOf(h));
      uint64_t expected = std::isnan(v) ? canonicalNaN(t) : refRound(v, t);
      if (!std::isnan(v) && std::isinf(v))
        expected = maxFinite(t) | (std::signbit(v) ? uint64_t(1) << (t.bits - 1) : 0);
      INFO(h);
      CHECK(convertBits(h, kF16, t) == expected);
    }
  }
}

TEST_CASE("convert: f8e5m2 is the top byte of f16") {
  for (uint64_t c = 0; c < 256; ++c) {
    INFO(c);
    if (isNaN(c, kE5M2)) {
      CHECK(convertBits(c, kE5M2, kF16) == 0x7E00);
      continue;
    }
    CHECK(convertBits(c, kE5M2, kF16) == c << 8);
  }
  for (uint64_t h = 0; h < 0x10000; ++h) {
    uint64_t sign = h & 0x8000, magnitude = h & 0x7FFF;
    uint64_t expected;
    if (magnitude > 0x7C00) {
      expected = 0x7E;
    } else {
      uint64_t rounded = (magnitude + 0x7F + ((magnitude >> 8) & 1)) >> 8; // RNE on 8 bits
      expected = (sign >> 8) | std::min<uint64_t>(rounded, 0x7B);
    }
    INFO(h);
    CHECK(convertBits(h, kF16, kE5M2) == expected);
  }
}

TEST_CASE("convert: f16 hand-computed values") {
  CHECK(fromDouble(1.0, kF16) == 0x3C00);
  CHECK(fromDouble(65504, kF16) == 0x7BFF);
  CHECK(fromDouble(65519.99, kF16) == 0x7BFF);
  CHECK(fromDouble(65520, kF16) == 0x7C00); // midpoint above max: IEEE overflow to inf
  CHECK(fromDouble(-65520, kF16) == 0xFC00);
  CHECK(fromDouble(1e10, kF16) == 0x7C00);
  CHECK(fromDouble(kInf, kF16) == 0x7C00);
  CHECK(fromDouble(-kInf, kF16) == 0xFC00);
  CHECK(fromDouble(kNaN, kF16) == 0x7E00);
  CHECK(fromDouble(-kNaN, kF16) == 0x7E00);
  CHECK(fromDouble(std::ldexp(1.0, -24), kF16) == 0x0001);
  CHECK(fromDouble(std::ldexp(1.0, -25), kF16) == 0x0000); // tie with 0
  CHECK(fromDouble(std::ldexp(1.0 + std::ldexp(1.0, -20), -25), kF16) == 0x0001);
  CHECK(fromDouble(std::ldexp(3.0, -25), kF16) == 0x0002);    // tie 1 | 2 -> 2
  CHECK(fromDouble(std::ldexp(1.0, -14), kF16) == 0x0400);    // min normal
  CHECK(fromDouble(std::ldexp(1023.5, -24), kF16) == 0x0400); // rounds up into the normals
  CHECK(fromDouble(-0.0, kF16) == 0x8000);
  CHECK(fromDouble(-1e-30, kF16) == 0x8000);
  CHECK(fromDouble(1.0 + std::ldexp(1.0, -11), kF16) == 0x3C00); // tie -> even
  CHECK(fromDouble(1.0 + std::ldexp(3.0, -11), kF16) == 0x3C02); // tie -> even (up)
  // Double-rounding trap: through f32 this would become the tie 1 + 2^-11 and round down.
  CHECK(fromDouble(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), kF16) == 0x3C01);
  CHECK(convertBits(0x3F801000, kF32, kF16) == 0x3C00); // f32 1 + 2^-11: tie -> even
  CHECK(convertBits(0x3F801001, kF32, kF16) == 0x3C01);
  CHECK(convertBits(0x33800000, kF32, kF16) == 0x0001); // f32 2^-24
  CHECK(convertBits(0x7F800000, kF32, kF16) == 0x7C00);
  CHECK(convertBits(0x7F800001, kF32, kF16) == 0x7E00); // signalling NaN -> canonical
  CHECK(convertBits(0x7BFF, kF16, kF32) == fbits(65504.0f));
  CHECK(convertBits(0x0001, kF16, kF64) == dbits(std::ldexp(1.0, -24)));
}

TEST_CASE("convert: bf16 hand-computed values and the f32 rounding trick") {
  CHECK(fromDouble(1.0, kBF16) == 0x3F80);
  CHECK(fromDouble(1.0 + std::ldexp(1.0, -8), kBF16) == 0x3F80); // tie -> even
  CHECK(fromDouble(1.0 + std::ldexp(3.0, -8), kBF16) == 0x3F82);
  CHECK(fromDouble(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), kBF16) == 0x3F81);
  CHECK(convertBits(0x7F7FFFFF, kF32, kBF16) == 0x7F80); // FLT_MAX overflows to inf
  CHECK(convertBits(0x7F7F7FFF, kF32, kBF16) == 0x7F7F); // just below the midpoint
  CHECK(convertBits(0x00000001, kF32, kBF16) == 0x0000);
  CHECK(convertBits(0x00008000, kF32, kBF16) == 0x0000); // subnormal tie -> even
  CHECK(convertBits(0x00018000, kF32, kBF16) == 0x0002);
  CHECK(convertBits(0xFFC00000, kF32, kBF16) == 0x7FC0);
  CHECK(fromDouble(1e39, kBF16) == 0x7F80);
  CHECK(fromDouble(std::ldexp(1.0, -133), kBF16) == 0x0001); // smallest bf16 subnormal
  for (uint64_t b = 0; b < 0x10000; ++b) {
    uint64_t expected = isNaN(b, kBF16) ? 0x7FC00000 : b << 16;
    CHECK(convertBits(b, kBF16, kF32) == expected);
  }
  Rng rng{7};
  for (int k = 0; k < (1 << 20); ++k) {
    uint64_t f = rng.next() & 0xFFFFFFFF;
    if (k < 4096)
      f = (f & 0xFFFF0000) | 0x8000 | (k & 1 ? 0 : 0x7FFF); // ties and near-ties
    uint64_t expected;
    if ((f & 0x7FFFFFFF) > 0x7F800000)
      expected = 0x7FC0;
    else
      expected = (f + 0x7FFF + ((f >> 16) & 1)) >> 16; // RNE, carries into inf correctly
    INFO(f);
    CHECK(convertBits(f, kF32, kBF16) == expected);
  }
}

TEST_CASE("convert: f16 against the compiler's _Float16") {
  for (uint64_t h = 0; h < 0x10000; ++h) {
    float f = float(halfOf(h));
    INFO(h);
    CHECK(convertBits(h, kF16, kF32) == (std::isnan(f) ? 0x7FC00000 : fbits(f)));
  }
  Rng rng{11};
  for (int k = 0; k < (1 << 20); ++k) {
    uint64_t f = rng.next() & 0xFFFFFFFF;
    if (k % 2 == 0) // concentrate on f32 values in and around the f16 range
      f = (f & 0x807FFFFF) | (uint64_t(127 - 28 + (rng.next() % 46)) << 23);
    float x = std::bit_cast<float>(uint32_t(f));
    INFO(f);
    CHECK(convertBits(f, kF32, kF16) == (std::isnan(x) ? 0x7E00 : hbits(_Float16(x))));
    double d = std::ldexp(double(rng.next() >> 11), int(rng.next() % 48) - 53 - 28);
    if (rng.next() & 1)
      d = -d;
    INFO(d);
    CHECK(fromDouble(d, kF16) == hbits(_Float16(d)));
  }
}

TEST_CASE("convert: f32 and f64 against the hardware conversions") {
  Rng rng{5};
  for (int k = 0; k < (1 << 18); ++k) {
    double d = std::bit_cast<double>(rng.next());
    if (k % 2 == 0) // doubles in and around the f32 range, including its subnormals
      d = std::ldexp(double(rng.next() >> 11) * 0x1p-53, int(rng.next() % 320) - 170);
    if (std::isnan(d))
      continue;
    INFO(d);
    CHECK(fromDouble(d, kF32) == fbits(float(d)));
    float f = std::bit_cast<float>(uint32_t(rng.next()));
    if (!std::isnan(f))
      CHECK(convertBits(fbits(f), kF32, kF64) == dbits(double(f)));
  }
  CHECK(convertBits(0x7FC00001, kF32, kF64) == 0x7FF8000000000000);
  CHECK(convertBits(0xFFF0000000000001, kF64, kF32) == 0x7FC00000);
  CHECK(fromDouble(1.0 + std::ldexp(1.0, -24) + std::ldexp(1.0, -50), kF32) == 0x3F800001);
  CHECK(fromDouble(std::ldexp(1.0, -150), kF32) == 0);          // tie with 0
  CHECK(fromDouble(std::ldexp(1.5, -150), kF32) == 1);          // above the tie
  CHECK(fromDouble(3.4028235677973366e38, kF32) == 0x7F800000); // FLT_MAX + half ulp: inf
  CHECK(fromDouble(3.4028235677973362e38, kF32) == 0x7F7FFFFF); // just below
  CHECK(convertBits(0x0001, kF64, kF32) == 0);                  // min f64 subnormal
  CHECK(convertBits(0x8000000000000001, kF64, kF16) == 0x8000);
}

TEST_CASE("convert: 64-bit integers into floats round once") {
  DataType i64 = DataType::i64(), u64 = DataType::u(64);
  uint64_t p60 = uint64_t(1) << 60, p36 = uint64_t(1) << 36;
  // f32 ulp at 2^60 is 2^37: 2^36 is half an ulp. Through double, 2^60 + 2^36 + 1 would first
  // round to the tie 2^60 + 2^36 and then down to 2^60.
  CHECK(convertBits(p60 + p36 + 1, i64, kF32) == 0x5D800001);
  CHECK(convertBits(p60 + p36, i64, kF32) == 0x5D800000);     // tie -> even
  CHECK(convertBits(p60 + 3 * p36, i64, kF32) == 0x5D800002); // tie -> even (up)
  CHECK(convertBits(uint64_t(0) - (p60 + p36 + 1), i64, kF32) == 0xDD800001);
  CHECK(convertBits(~uint64_t(0), u64, kF32) == 0x5F800000);                    // 2^64
  CHECK(convertBits(uint64_t(1) << 63, i64, kF32) == 0xDF000000);               // -2^63
  CHECK(convertBits(uint64_t(1) << 63, u64, kF32) == 0x5F000000);               // +2^63
  CHECK(convertBits((uint64_t(1) << 53) + 1, i64, kF64) == 0x4340000000000000); // tie
  CHECK(convertBits((uint64_t(1) << 53) + 3, i64, kF64) == 0x4340000000000002);
  CHECK(convertBits(p60 + p36 + 1, i64, kF16) == 0x7C00); // overflow to inf
  CHECK(convertBits(65519, i64, kF16) == 0x7BFF);
  CHECK(convertBits(65520, i64, kF16) == 0x7C00);
  CHECK(convertBits(2049, DataType::i32(), kF16) == 0x6800); // 2048: tie -> even
  CHECK(convertBits(2051, DataType::i32(), kF16) == 0x6802); // 2052
  CHECK(convertBits(257, DataType::i(16), kBF16) == 0x4380); // 256: tie -> even
  Rng rng{3};
  for (int k = 0; k < (1 << 18); ++k) {
    uint64_t bits = rng.next() >> (rng.next() % 64);
    int64_t s = int64_t(rng.next() & 1 ? bits : uint64_t(0) - bits);
    INFO(bits);
    CHECK(convertBits(uint64_t(s), i64, kF32) == fbits(float(s)));
    CHECK(convertBits(uint64_t(s), i64, kF64) == dbits(double(s)));
    CHECK(convertBits(bits, u64, kF32) == fbits(float(bits)));
    CHECK(convertBits(bits, u64, kF64) == dbits(double(bits)));
    CHECK(convertBits(uint64_t(s), i64, kF16) == hbits(_Float16(s)));
  }
}

TEST_CASE("convert: floats into integers truncate, saturate, NaN -> 0") {
  DataType i32 = DataType::i32(), u8 = DataType::u(8), i64 = DataType::i64(), u64 = DataType::u(64),
           i6 = DataType::i(6), u1 = DataType::u(1);
  CHECK(fromDouble(3.7, i32) == 3);
  CHECK(fromDouble(-3.7, i32) == uint64_t(uint32_t(-3)));
  CHECK(fromDouble(-0.9, i32) == 0);
  CHECK(fromDouble(1e10, i32) == 0x7FFFFFFF);
  CHECK(fromDouble(-1e10, i32) == 0x80000000);
  CHECK(fromDouble(2147483647.9, i32) == 0x7FFFFFFF);
  CHECK(fromDouble(-2147483648.9, i32) == 0x80000000);
  CHECK(fromDouble(kNaN, i32) == 0);
  CHECK(fromDouble(kInf, i32) == 0x7FFFFFFF);
  CHECK(fromDouble(-kInf, i32) == 0x80000000);
  CHECK(fromDouble(-1.5, u8) == 0);
  CHECK(fromDouble(300.5, u8) == 255);
  CHECK(fromDouble(255.9, u8) == 255);
  CHECK(fromDouble(std::ldexp(1.0, 63), i64) == 0x7FFFFFFFFFFFFFFF);
  CHECK(fromDouble(-std::ldexp(1.0, 63), i64) == 0x8000000000000000);
  CHECK(fromDouble(std::nextafter(-std::ldexp(1.0, 63), -kInf), i64) == 0x8000000000000000);
  CHECK(fromDouble(std::ldexp(1.0, 64), u64) == ~uint64_t(0));
  CHECK(fromDouble(1.8e19, u64) == 18000000000000000000ull);
  CHECK(fromDouble(1e300, u64) == ~uint64_t(0));
  CHECK(fromDouble(40.0, i6) == 0x1F);
  CHECK(fromDouble(-40.0, i6) == 0x20);
  CHECK(fromDouble(-3.9, i6) == 0x3D);
  CHECK(toInt64(fromDouble(-3.9, i6), i6) == -3);
  CHECK(fromDouble(0.7, u1) == 0);
  CHECK(fromDouble(1.0, u1) == 1);
  CHECK(fromDouble(5.0, u1) == 1);
  CHECK(convertBits(0xFC00, kF16, DataType::i(16)) == 0x8000); // -inf
  CHECK(convertBits(0x7E00, kF16, DataType::i(16)) == 0);      // NaN
  CHECK(convertBits(0x7F, kE4M3, i32) == 0);                   // NaN
  CHECK(convertBits(0x7E, kE4M3, u8) == 255);                  // 448 saturates
  CHECK(convertBits(0x7E, kE4M3, DataType::i(16)) == 448);
  // Every low-precision float code into every integer type of at most 16 bits.
  std::vector<DataType> ints;
  for (int n = 2; n <= 8; ++n)
    ints.push_back(DataType::i(n));
  for (int n = 1; n <= 8; ++n)
    ints.push_back(DataType::u(n));
  ints.push_back(DataType::i(16));
  ints.push_back(DataType::u(16));
  for (DataType t : smallFloats())
    for (uint64_t c = 0; c < (uint64_t(1) << t.bits); ++c)
      for (DataType it : ints) {
        double v = refValue(c, t);
        double lo = it.isSigned() ? -std::ldexp(1.0, it.bits - 1) : 0;
        double hi = it.isSigned() ? std::ldexp(1.0, it.bits - 1) - 1 : std::ldexp(1.0, it.bits) - 1;
        double expected = std::isnan(v) ? 0 : std::clamp(std::trunc(v), lo, hi);
        INFO(t.name() << " " << c << " -> " << it.name());
        CHECK(toInt64(convertBits(c, t, it), it) == int64_t(expected));
      }
}

TEST_CASE("convert: f32 and f64 into 32/64-bit integers match the C cast in range") {
  Rng rng{9};
  for (int k = 0; k < (1 << 17); ++k) {
    double d = std::ldexp(double(rng.next() >> 11) * 0x1p-53, int(rng.next() % 70) - 3);
    if (rng.next() & 1)
      d = -d;
    INFO(d);
    if (std::fabs(d) < 2147483648.0)
      CHECK(fromDouble(d, DataType::i32()) == uint64_t(uint32_t(int32_t(d))));
    if (std::fabs(d) < 9223372036854775808.0)
      CHECK(fromDouble(d, DataType::i64()) == uint64_t(int64_t(d)));
    if (d >= 0 && d < 18446744073709551616.0)
      CHECK(fromDouble(d, DataType::u(64)) == uint64_t(d));
    if (d >= 0 && d < 4294967296.0)
      CHECK(fromDouble(d, DataType::u(32)) == uint64_t(uint32_t(d)));
  }
}

TEST_CASE("convert: integers into integers wrap; signed sub-byte values sign-extend") {
  DataType i32 = DataType::i32(), u8 = DataType::u(8), i6 = DataType::i(6);
  CHECK(convertBits(300, i32, u8) == 44);
  CHECK(convertBits(300, i32, i6) == 0x2C);
  CHECK(toInt64(convertBits(300, i32, i6), i6) == -20);
  CHECK(convertBits(uint64_t(-1), i32, DataType::u(4)) == 0xF);
  CHECK(convertBits(0xFF, u8, DataType::i(8)) == 0xFF);
  CHECK(toInt64(0xFF, DataType::i(8)) == -1);
  CHECK(convertBits(0x20, i6, i32) == 0xFFFFFFE0);
  CHECK(convertBits(0x20, DataType::u(6), i32) == 32);
  CHECK(convertBits(0x100000005, DataType::i64(), i32) == 5);
  CHECK(convertBits(0xFFFFFFFF, i32, DataType::i64()) == ~uint64_t(0));
  CHECK(convertBits(0xFFFFFFFF, DataType::u(32), DataType::i64()) == 0xFFFFFFFF);
  CHECK(convertBits(0xFFFFFF80, i32, DataType::i(16)) == 0xFF80);
  CHECK(toInt64(0x3, DataType::i(2)) == -1);
  CHECK(toInt64(0x2, DataType::i(2)) == -2);
  CHECK(signExtend(0x20, 6) == -32);
  CHECK(signExtend(0x1F, 6) == 31);
  CHECK(signExtend(0x8000000000000000, 64) == INT64_MIN);
  // Every value of every integer type of at most 16 bits, into every such type.
  std::vector<DataType> ints;
  for (int n = 1; n <= 8; ++n)
    ints.push_back(DataType::u(n));
  for (int n = 2; n <= 8; ++n)
    ints.push_back(DataType::i(n));
  ints.push_back(DataType::i(16));
  ints.push_back(DataType::u(16));
  for (DataType from : ints) {
    int64_t lo = from.isSigned() ? -(int64_t(1) << (from.bits - 1)) : 0;
    int64_t hi =
        from.isSigned() ? (int64_t(1) << (from.bits - 1)) - 1 : (int64_t(1) << from.bits) - 1;
    for (int64_t v = lo; v <= hi; ++v) {
      uint64_t pattern = uint64_t(v) & ((uint64_t(1) << from.bits) - 1);
      REQUIRE(toInt64(pattern, from) == v);
      for (DataType to : ints) {
        int64_t modulus = int64_t(1) << to.bits;
        int64_t wrapped = ((v % modulus) + modulus) % modulus;
        if (to.isSigned() && wrapped >= modulus / 2)
          wrapped -= modulus;
        INFO(v << " " << from.name() << " -> " << to.name());
        CHECK(toInt64(convertBits(pattern, from, to), to) == wrapped);
        CHECK(convertBits(pattern, from, to) == (uint64_t(wrapped) & uint64_t(modulus - 1)));
      }
    }
  }
}

TEST_CASE("convert: bool") {
  DataType b = DataType::boolean();
  CHECK(convertBits(1, b, kF32) == 0x3F800000);
  CHECK(convertBits(0, b, kF32) == 0);
  CHECK(convertBits(1, b, DataType::i32()) == 1);
  CHECK(convertBits(1, b, DataType::i(2)) == 1);
  CHECK(convertBits(1, b, kE4M3) == 0x38);
  CHECK(convertBits(1, b, DataType::f(2, 1)) == 0x2);
  CHECK(convertBits(0x80000000, kF32, b) == 0); // -0
  CHECK(convertBits(0x7FC00000, kF32, b) == 1); // NaN != 0
  CHECK(convertBits(0x00000001, kF32, b) == 1); // min subnormal
  CHECK(fromDouble(0.5, b) == 1);
  CHECK(fromDouble(-kInf, b) == 1);
  CHECK(convertBits(256, DataType::i32(), b) == 1); // not a wrap to 8 bits
  CHECK(convertBits(0, DataType::u(8), b) == 0);
  CHECK(convertBits(0x20, DataType::i(6), b) == 1);
  CHECK(convertBits(0x8, DataType::f(2, 1), b) == 0); // -0 of f4e2m1
  CHECK(convertBits(0x1, DataType::f(2, 1), b) == 1);
  CHECK(convertBits(0x7F, kE4M3, b) == 1);
  CHECK(maxFinite(b) == 1);
}

TEST_CASE("convert: identity, masking and helpers") {
  CHECK(convertBits(0x7F800001, kF32, kF32) == 0x7F800001); // identity keeps NaN payloads
  CHECK(convertBits(0xFFFF7C00, kF16, kF32) == 0x7F800000); // only the low 16 bits are read
  CHECK(convertBits(0x1FF, DataType::u(8), DataType::u(16)) == 0xFF);
  CHECK(maxFinite(kF16) == 0x7BFF);
  CHECK(maxFinite(kBF16) == 0x7F7F);
  CHECK(maxFinite(kF32) == 0x7F7FFFFF);
  CHECK(maxFinite(kF64) == 0x7FEFFFFFFFFFFFFF);
  CHECK(maxFinite(DataType::i(6)) == 31);
  CHECK(maxFinite(DataType::u(64)) == ~uint64_t(0));
  CHECK(canonicalNaN(kF16) == 0x7E00);
  CHECK(canonicalNaN(kBF16) == 0x7FC0);
  CHECK(canonicalNaN(kF32) == 0x7FC00000);
  CHECK(canonicalNaN(kF64) == 0x7FF8000000000000);
  CHECK(isNaN(0xFFF8000000000000, kF64));
  CHECK_FALSE(isNaN(0x7F800000, kF32));
  CHECK(isInf(0xFF800000, kF32));
  CHECK_FALSE(isNaN(0xFFFFFFFF, DataType::u(32)));
  CHECK(toDouble(0x8000000000000000, DataType::i64()) == -std::ldexp(1.0, 63));
  CHECK(toDouble(~uint64_t(0), DataType::u(64)) == std::ldexp(1.0, 64));
  CHECK(toInt64(0x4049000000000000, kF64) == 50); // 50.0 as a double
  CHECK(fromInt64(-1, DataType::u(8)) == 0xFF);
  CHECK(fromInt64(INT64_MIN, kF32) == 0xDF000000);
}
