// The JIT's device library (jit/devlib), compiled for the host from the same source that the
// JIT embeds as NVPTX bitcode. Conversions are checked against isa/convert.h over whole domains
// (every pattern of every format of at most 16 bits; dense samples of f32, f64 and integers);
// math against long double libm with an ulp bound; fmod against the exact libm fmod.
#include "jit/devlib/devlib.h"

#include "isa/convert.h"
#include "test_helpers.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <ios>
#include <random>
#include <vector>

namespace {

using namespace tilus;

int styleOf(DataType t) {
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

/// Every float format of at most 8 bits, plus f16 and bf16.
std::vector<DataType> smallFormats() {
  std::vector<DataType> out;
  for (int n = 3; n <= 8; ++n)
    for (int e = 1; e <= n - 2; ++e)
      out.push_back(DataType::f(e, n - 1 - e));
  out.push_back(DataType::f16());
  out.push_back(DataType::bf16());
  return out;
}

/// f32 values that exercise rounding into every small format: all f32 whose low 13 mantissa bits
/// are 0, 1, a half-way pattern or all ones, over the whole exponent range, both signs.
std::vector<uint32_t> f32Samples() {
  std::vector<uint32_t> out;
  const uint32_t lows[] = {0x0, 0x1, 0xFFF, 0x1000, 0x1001, 0x1FFF, 0x800, 0x7FF};
  for (uint32_t sign = 0; sign < 2; ++sign)
    for (uint32_t exp = 0; exp < 256; ++exp)
      for (uint32_t high = 0; high < 1024; ++high)
        for (uint32_t low : lows)
          out.push_back(sign << 31 | exp << 23 | high << 13 | low);
  return out;
}

} // namespace

TEST_CASE("devlib: f32 into every small float format matches convertBits") {
  std::vector<uint32_t> samples = f32Samples();
  for (DataType t : smallFormats()) {
    INFO(t.name());
    int mismatches = 0;
    for (uint32_t bits : samples) {
      uint64_t want = convertBits(bits, DataType::f32(), t);
      uint64_t got =
          tl_f32_to_float(std::bit_cast<float>(bits), t.exponent, t.mantissa, styleOf(t));
      if (want != got && mismatches++ < 3)
        FAIL_CHECK("f32 " << std::hex << bits << " -> " << t.name() << ": want " << want << " got "
                          << got);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("devlib: f64 into small formats and bf16 matches convertBits") {
  std::mt19937_64 rng(7);
  std::vector<DataType> formats = smallFormats();
  formats.push_back(DataType::f32());
  for (DataType t : formats) {
    INFO(t.name());
    int mismatches = 0;
    for (int k = 0; k < 200000; ++k) {
      uint64_t bits = rng();
      if (k % 2) // concentrate on the format's range: exponent within +-40 of 1
        bits = (bits & 0x800FFFFFFFFFFFFFull) | (uint64_t(1023 - 40 + int(rng() % 80)) << 52);
      uint64_t want = convertBits(bits, DataType::f64(), t);
      uint64_t got =
          tl_f64_to_float(std::bit_cast<double>(bits), t.exponent, t.mantissa, styleOf(t));
      if (want != got && mismatches++ < 3)
        FAIL_CHECK("f64 " << std::hex << bits << ": want " << want << " got " << got);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("devlib: integers into floats match convertBits (round once from the integer)") {
  std::mt19937_64 rng(11);
  std::vector<DataType> formats = smallFormats();
  formats.push_back(DataType::f32());
  for (DataType t : formats) {
    INFO(t.name());
    int mismatches = 0;
    for (int k = 0; k < 100000; ++k) {
      uint64_t v = rng() >> (rng() % 64);
      uint64_t sv = (k & 1) ? uint64_t(0) - v : v; // negative values too
      uint64_t wantS = convertBits(sv, DataType::i64(), t);
      uint64_t gotS = tl_i64_to_float(int64_t(sv), t.exponent, t.mantissa, styleOf(t));
      uint64_t wantU = convertBits(v, DataType::u(64), t);
      uint64_t gotU = tl_u64_to_float(v, t.exponent, t.mantissa, styleOf(t));
      if ((wantS != gotS || wantU != gotU) && mismatches++ < 3)
        FAIL_CHECK(std::hex << v << ": signed " << wantS << "/" << gotS << " unsigned " << wantU
                            << "/" << gotU);
    }
    // the example of isa/convert.cpp: 2^60 + 2^36 + 1 must round up into f32
    CHECK(tl_i64_to_float(int64_t((1ull << 60) + (1ull << 36) + 1), 8, 23, 0) ==
          convertBits((1ull << 60) + (1ull << 36) + 1, DataType::i64(), DataType::f32()));
    for (int64_t v = -70000; v <= 70000; v += 7) {
      uint64_t want = convertBits(uint64_t(v), DataType::i64(), t);
      uint64_t got = tl_i64_to_float(v, t.exponent, t.mantissa, styleOf(t));
      if (want != got && mismatches++ < 3)
        FAIL_CHECK(v << ": want " << want << " got " << got);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("devlib: every pattern of every small format decodes exactly into f32") {
  for (DataType t : smallFormats()) {
    INFO(t.name());
    int mismatches = 0;
    for (uint32_t bits = 0; bits < (1u << t.bits); ++bits) {
      uint64_t want = convertBits(bits, t, DataType::f32());
      float got = tl_float_to_f32(bits, t.exponent, t.mantissa, styleOf(t));
      uint32_t gotBits = std::bit_cast<uint32_t>(got);
      bool same = std::isnan(got) ? isNaN(want, DataType::f32()) : gotBits == uint32_t(want);
      if (!same && mismatches++ < 3)
        FAIL_CHECK(std::hex << bits << ": want " << want << " got " << gotBits);
    }
    CHECK(mismatches == 0);
  }
}

TEST_CASE("devlib: hand-computed low-precision values (ISA section 2)") {
  // f4e2m1: max 6; f6e3m2: max 28; f6e2m3: max 7.5; e4m3: max 448, NaN 0x7F; e5m2: max 57344
  CHECK(tl_float_to_f32(0x7, 2, 1, 2) == 6.0f);
  CHECK(tl_float_to_f32(0x1F, 3, 2, 2) == 28.0f);
  CHECK(tl_float_to_f32(0x1F, 2, 3, 2) == 7.5f);
  CHECK(tl_float_to_f32(0x7E, 4, 3, 1) == 448.0f);
  CHECK(std::isnan(tl_float_to_f32(0x7F, 4, 3, 1)));
  CHECK(tl_float_to_f32(0x7B, 5, 2, 0) == 57344.0f);
  CHECK(std::isinf(tl_float_to_f32(0x7C, 5, 2, 0)));
  CHECK(tl_f32_to_float(1e6f, 4, 3, 1) == 0x7E);     // saturates
  CHECK(tl_f32_to_float(-1e6f, 5, 2, 0) == 0xFB);    // saturates, sign kept
  CHECK(tl_f32_to_float(INFINITY, 5, 2, 0) == 0x7B); // inf saturates in <= 8-bit formats
  CHECK(tl_f32_to_float(NAN, 4, 3, 1) == 0x7F);
  CHECK(tl_f32_to_float(NAN, 2, 1, 2) == 0x0);   // no NaN: +0
  CHECK(tl_f32_to_float(0.25f, 2, 1, 2) == 0x0); // half the smallest subnormal 0.5: ties to even
  CHECK(tl_f32_to_float(0.75f, 2, 1, 2) == 0x2); // 0.75 between 0.5 and 1.0: ties to even 1.0
  CHECK(tl_f32_to_float(-0.0f, 2, 1, 2) == 0x8); // sign of zero kept
  CHECK(tl_f64_to_float(65520.0, 5, 10, 0) == 0x7C00); // f16 overflow to inf
}

namespace {

double ulpError(double got, long double ref) {
  double r = double(ref);
  if (std::isnan(r))
    return std::isnan(got) ? 0.0 : 1e9;
  if (std::isinf(r))
    return got == r ? 0.0 : 1e9;
  int e;
  std::frexp(r, &e);
  double ulp = std::ldexp(1.0, std::max(e - 53, -1074));
  return double(std::fabs((long double)got - ref) / ulp);
}

void checkMath(const char *name, double (*f)(double), long double (*ref)(long double), double lo,
               double hi, bool logScale, double bound) {
  std::mt19937_64 rng(3);
  double worst = 0, at = 0;
  for (int k = 0; k < 300000; ++k) {
    double x;
    if (logScale) {
      x = std::exp(std::uniform_real_distribution<double>(std::log(lo), std::log(hi))(rng));
      if (k & 1)
        x = -x;
    } else {
      x = std::uniform_real_distribution<double>(lo, hi)(rng);
    }
    double e = ulpError(f(x), ref((long double)x));
    if (e > worst) {
      worst = e;
      at = x;
    }
  }
  INFO(name << " worst " << worst << " ulp at " << at);
  CHECK(worst <= bound);
}

long double refExp(long double x) { return expl(x); }
long double refExp2(long double x) { return exp2l(x); }
long double refExpm1(long double x) { return expm1l(x); }
long double refLog(long double x) { return logl(x); }
long double refLog2(long double x) { return log2l(x); }
long double refSin(long double x) { return sinl(x); }
long double refCos(long double x) { return cosl(x); }
long double refTanh(long double x) { return tanhl(x); }

} // namespace

TEST_CASE("devlib: f64 math within 1.1 ulp of long double libm") {
  checkMath("exp", tl_exp, refExp, -745, 709.7, false, 1.1);
  checkMath("exp2", tl_exp2, refExp2, -1074, 1023, false, 1.1);
  checkMath("expm1", tl_expm1, refExpm1, -40, 700, false, 1.1);
  checkMath("expm1 small", tl_expm1, refExpm1, 1e-300, 1, true, 1.1);
  checkMath("log", tl_log, refLog, 1e-320, 1e300, true, 1.1);
  checkMath("log near 1", tl_log, refLog, 0.5, 2, false, 1.1);
  checkMath("log2", tl_log2, refLog2, 1e-320, 1e300, true, 1.1);
  checkMath("sin", tl_sin, refSin, -10, 10, false, 1.1);
  checkMath("sin huge", tl_sin, refSin, 1e-300, 1e300, true, 1.1);
  checkMath("cos", tl_cos, refCos, -1e6, 1e6, false, 1.1);
  checkMath("cos huge", tl_cos, refCos, 1e-300, 1e300, true, 1.1);
  checkMath("tanh", tl_tanh, refTanh, -25, 25, false, 1.1);
  checkMath("tanh small", tl_tanh, refTanh, 1e-300, 2, true, 1.1);
}

TEST_CASE("devlib: math special values") {
  CHECK(std::isnan(tl_exp(NAN)));
  CHECK(tl_exp(-INFINITY) == 0.0);
  CHECK(tl_exp(INFINITY) == INFINITY);
  CHECK(tl_exp(0.0) == 1.0);
  CHECK(tl_exp2(10.0) == 1024.0);
  CHECK(tl_exp2(-1074.0) == std::ldexp(1.0, -1074));
  CHECK(tl_log(1.0) == 0.0);
  CHECK(tl_log(0.0) == -INFINITY);
  CHECK(std::isnan(tl_log(-1.0)));
  CHECK(tl_log2(1024.0) == 10.0);
  CHECK(tl_log2(std::ldexp(1.0, -1074)) == -1074.0);
  CHECK(std::isnan(tl_sin(INFINITY)));
  CHECK(tl_sin(0.0) == 0.0);
  CHECK(std::signbit(tl_sin(-0.0)));
  CHECK(tl_cos(0.0) == 1.0);
  CHECK(tl_tanh(30.0) == 1.0);
  CHECK(tl_tanh(-30.0) == -1.0);
}

TEST_CASE("devlib: fmod is exact") {
  std::mt19937_64 rng(1);
  int mismatches = 0;
  for (int k = 0; k < 300000; ++k) {
    uint64_t a = rng(), b = rng();
    if (k % 3 == 0) // divisor within 60 binades below the dividend
      b = (b & 0x800FFFFFFFFFFFFFull) | ((((a >> 52) & 0x7FF) - rng() % 60) & 0x7FF) << 52;
    double x = std::bit_cast<double>(a), y = std::bit_cast<double>(b);
    double got = tl_fmod(x, y), want = std::fmod(x, y);
    bool same = std::isnan(want) ? std::isnan(got)
                                 : std::bit_cast<uint64_t>(got) == std::bit_cast<uint64_t>(want);
    if (!same && mismatches++ < 3)
      FAIL_CHECK(std::hexfloat << x << " % " << y << ": want " << want << " got " << got);
  }
  CHECK(mismatches == 0);
  CHECK(tl_fmod(5.5, 2.0) == 1.5);
  CHECK(tl_fmod(-5.5, 2.0) == -1.5);
  CHECK(std::isnan(tl_fmod(1.0, 0.0)));
  CHECK(tl_fmod(1.0, INFINITY) == 1.0);
}

TEST_CASE("devlib: f32 exp within 1 ulp of exact (every 61st f32, every subnormal result)") {
  // tl_expf is branchless f32 arithmetic (jit/devlib/devlib.cpp), so this host build computes
  // exactly what the GPU does. Checked once over every f32: at most 0.976 ulp from exp (at
  // x = -0x1.86ed5ep+5); here every 61st f32, every input with a subnormal or overflowing result
  // and the inputs around that worst case.
  double worst = 0;
  float worstAt = 0;
  int64_t bad = 0;
  auto check = [&](uint32_t u) {
    float x = std::bit_cast<float>(u);
    float got = tl_expf(x);
    if (std::isnan(x)) {
      if (!std::isnan(got) && bad++ < 5)
        FAIL_CHECK(std::hexfloat << x << " -> " << got << " want NaN");
      return;
    }
    double ref = std::exp(double(x)); // within 2^-52 relative: exact enough for f32 ulps
    if (std::isinf(float(ref)) || ref < 0x1p-150) {
      if (got != float(ref) && bad++ < 5) // overflow and results below half the least subnormal
        FAIL_CHECK(std::hexfloat << x << " -> " << got << " want " << float(ref));
      return;
    }
    int e;
    std::frexp(ref, &e);
    double err = std::fabs(double(got) - ref) / std::ldexp(1.0, std::max(e - 24, -149));
    if (err > worst) {
      worst = err;
      worstAt = x;
    }
  };
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 61)
    check(uint32_t(u));
  auto range = [&](float from, float to) {
    for (uint32_t u = std::bit_cast<uint32_t>(from); u <= std::bit_cast<uint32_t>(to); ++u)
      check(u);
  };
  range(-0x1.5p+6f, -0x1.5cp+6f);          // -84 .. -87: the last normal results
  range(-0x1.5cp+6f, -0x1.ap+6f);          // -87 .. -104: subnormal results and 0
  range(0x1.6p+6f, 0x1.64p+6f);            // 88 .. 89: the overflow threshold
  range(-0x1.86ed5ep+5f, -0x1.86fd5ep+5f); // the worst case and 2^16 inputs past it
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, 0x1p-149f, -0x1p-149f, 1.0f, -1.0f})
    check(std::bit_cast<uint32_t>(x));
  CHECK(tl_expf(0.0f) == 1.0f);
  CHECK(tl_expf(-0.0f) == 1.0f);
  CHECK(tl_expf(INFINITY) == INFINITY);
  CHECK(tl_expf(-INFINITY) == 0.0f);
  CHECK(tl_expf(89.0f) == INFINITY);
  CHECK(tl_expf(-104.0f) == 0.0f);
  INFO("expf " << worst << " ulp at " << std::hexfloat << worstAt);
  CHECK(bad == 0);
  CHECK(worst <= 0.98);
}
