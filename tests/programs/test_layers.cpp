// programs/layers/ on the CPU interpreter against plain C++ references of their contracts:
// rmsnorm.tasm (with and without the residual add), rotary.tasm (neox and interleaved, queries
// and keys, shuffled positions) and swiglu_quant.tasm (f8e4m3 and i8), for f16 and bf16, at
// small and ragged sizes (rows not multiples of a vector, head counts not multiples of a
// block's heads, a single token). Values of AT, f8e4m3 and i8 are encoded and decoded here by
// the textbook formulas (vm_cpu/cpu_test_util.h), independently of isa/convert.
#include "vm_cpu/cpu_test_util.h"

#include <random>

using namespace cputest;

namespace {

struct Half {
  bool bf16;
  double decode(uint16_t h) const { return bf16 ? bf16ToDouble(h) : halfToDouble(h); }
  uint16_t encode(double v) const { return bf16 ? doubleToBf16(v) : doubleToHalf(v); }
  /// Round a value to the type (as a double).
  double round(double v) const { return decode(encode(v)); }
  const char *name() const { return bf16 ? "bf16" : "f16"; }
  double eps() const { return bf16 ? 1.0 / 128 : 1.0 / 1024; }
};

std::vector<uint16_t> randomHalves(const Half &t, size_t n, double lo, double hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<uint16_t> v(n);
  for (uint16_t &x : v)
    x = t.encode(dist(rng));
  return v;
}

/// The value of an f8e4m3 code (OCP: bias 7, no infinities, S.1111.111 is NaN).
double f8e4m3Value(uint8_t code) {
  int sign = code >> 7, exp = (code >> 3) & 15, man = code & 7;
  if (exp == 15 && man == 7)
    return NAN;
  double v = exp == 0 ? std::ldexp(man, -9) : std::ldexp(8 + man, exp - 10);
  return sign ? -v : v;
}

/// The f8e4m3 value nearest to v with ties to the even code, saturating at +-448.
double nearestF8e4m3(double v) {
  double best = 0;
  int bestCode = -1;
  for (int code = 0; code < 256; ++code) {
    double c = f8e4m3Value(uint8_t(code));
    if (std::isnan(c))
      continue;
    double d = std::fabs(c - v), bd = std::fabs(best - v);
    if (bestCode < 0 || d < bd || (d == bd && (code & 1) == 0 && (bestCode & 1) == 1)) {
      best = c;
      bestCode = code;
    }
  }
  return best;
}

// ---- RMSNorm ------------------------------------------------------------------------------

void checkRmsnorm(const Half &t, int n, int m, bool residual) {
  CAPTURE(t.name());
  CAPTURE(n);
  CAPTURE(m);
  CAPTURE(residual);
  VerifiedModule mod = build(
      readSource("programs/layers/rmsnorm.tasm"),
      {{"AT", t.name()}, {"N", std::to_string(n)}, {"T", "32"}, {"RESIDUAL", residual ? "1" : "0"}},
      "rmsnorm.tasm");
  size_t count = size_t(n) * size_t(m);
  std::vector<uint16_t> x = randomHalves(t, count, -3, 3, 11 + n);
  std::vector<uint16_t> r = randomHalves(t, count, -3, 3, 12 + m);
  std::vector<uint16_t> w = randomHalves(t, size_t(n), 0.5, 1.5, 13);
  std::vector<uint16_t> y(count, 0x7777), r0 = r;
  if (m > 1) // a row of zeros: y = 0 (eps keeps the inverse finite)
    for (int j = 0; j < n; ++j)
      x[size_t(n) + size_t(j)] = r[size_t(n) + size_t(j)] = r0[size_t(n) + size_t(j)] = 0;
  const float eps = 1e-5f;
  REQUIRE_OK(
      run(mod, {bufferArg(x), bufferArg(r), bufferArg(w), bufferArg(y), i32Arg(m), f32Arg(eps)}));
  for (int i = 0; i < m; ++i) {
    std::vector<float> h(static_cast<size_t>(n));
    double ss = 0;
    for (int j = 0; j < n; ++j) {
      size_t e = size_t(i) * size_t(n) + size_t(j);
      float v = float(t.decode(x[e]));
      if (residual) {
        float sum = v + float(t.decode(r0[e]));
        uint16_t hb = t.encode(double(sum));
        CHECK(r[e] == hb); // the new residual, bit for bit
        v = float(t.decode(hb));
      }
      h[size_t(j)] = v;
      ss += double(v) * double(v);
    }
    if (!residual)
      CHECK(r == r0);
    double inv = 1.0 / std::sqrt(ss / n + double(eps));
    for (int j = 0; j < n; ++j) {
      size_t e = size_t(i) * size_t(n) + size_t(j);
      double want = double(h[size_t(j)]) * inv * t.decode(w[size_t(j)]);
      double got = t.decode(y[e]);
      CAPTURE(i);
      CAPTURE(j);
      CHECK(std::fabs(got - want) <= 2 * t.eps() * std::fabs(want) + 1e-6);
    }
  }
}

// ---- rotary -------------------------------------------------------------------------------

void checkRotary(const Half &t, int hd, int style, int tokens, int heads, int kvHeads) {
  CAPTURE(t.name());
  CAPTURE(hd);
  CAPTURE(style);
  CAPTURE(heads);
  CAPTURE(kvHeads);
  VerifiedModule mod =
      build(readSource("programs/layers/rotary.tasm"),
            {{"AT", t.name()}, {"HD", std::to_string(hd)}, {"STYLE", std::to_string(style)}},
            "rotary.tasm");
  const int maxPos = 19;
  std::vector<int32_t> pos(static_cast<size_t>(tokens));
  for (int i = 0; i < tokens; ++i)
    pos[size_t(i)] = (i * 7 + 5) % maxPos; // shuffled positions
  std::vector<float> cs(size_t(maxPos) * size_t(hd));
  for (int p = 0; p < maxPos; ++p)
    for (int i = 0; i < hd / 2; ++i) {
      double theta = std::pow(10000.0, -2.0 * i / hd);
      cs[size_t(p * hd + i)] = float(std::cos(p * theta));
      cs[size_t(p * hd + hd / 2 + i)] = float(std::sin(p * theta));
    }
  std::vector<uint16_t> q = randomHalves(t, size_t(tokens * heads * hd), -2, 2, 21);
  std::vector<uint16_t> k = randomHalves(t, size_t(tokens * kvHeads * hd), -2, 2, 22);
  std::vector<uint16_t> q0 = q, k0 = k;
  REQUIRE_OK(run(mod, {bufferArg(pos), bufferArg(q), bufferArg(k), bufferArg(cs), i32Arg(tokens),
                       i32Arg(heads), i32Arg(kvHeads), i32Arg(maxPos)}));
  auto check = [&](const std::vector<uint16_t> &before, const std::vector<uint16_t> &after,
                   int nh) {
    for (int tok = 0; tok < tokens; ++tok)
      for (int h = 0; h < nh; ++h)
        for (int i = 0; i < hd / 2; ++i) {
          size_t base = size_t((tok * nh + h) * hd);
          size_t ia = base + size_t(style == 0 ? i : 2 * i);
          size_t ib = base + size_t(style == 0 ? i + hd / 2 : 2 * i + 1);
          float c = cs[size_t(pos[size_t(tok)] * hd + i)];
          float s = cs[size_t(pos[size_t(tok)] * hd + hd / 2 + i)];
          float a = float(t.decode(before[ia])), b = float(t.decode(before[ib]));
          float ac = a * c, bs = b * s, bc = b * c, as = a * s;
          CAPTURE(tok);
          CAPTURE(h);
          CAPTURE(i);
          CHECK(after[ia] == t.encode(double(ac - bs)));
          CHECK(after[ib] == t.encode(double(bc + as)));
        }
  };
  check(q0, q, heads);
  check(k0, k, kvHeads);
}

// ---- SwiGLU + quantisation ----------------------------------------------------------------

void checkSwiglu(const Half &t, bool fp8, int n, int m,
                 std::map<std::string, std::string> extra = {}) {
  CAPTURE(t.name());
  CAPTURE(fp8);
  CAPTURE(n);
  CAPTURE(m);
  std::map<std::string, std::string> defines = {
      {"AT", t.name()}, {"QT", fp8 ? "f8e4m3" : "i8"}, {"N", std::to_string(n)}, {"T", "32"}};
  for (const auto &[k, v] : extra) {
    CAPTURE(k);
    CAPTURE(v);
    defines[k] = v;
  }
  VerifiedModule mod =
      build(readSource("programs/layers/swiglu_quant.tasm"), defines, "swiglu_quant.tasm");
  std::vector<uint16_t> x = randomHalves(t, size_t(2 * n * m), -4, 4, 31 + n);
  if (m > 2) // a row whose gate is zero: a = 0, scale 1, q = 0
    for (int j = 0; j < n; ++j)
      x[size_t(2 * n * 2 + j)] = 0;
  std::vector<uint8_t> q(size_t(n * m), 0x55);
  std::vector<float> s(size_t(m), -1.0f);
  REQUIRE_OK(run(mod, {bufferArg(x), bufferArg(q), bufferArg(s), i32Arg(m)}));
  const double qmax = fp8 ? 448.0 : 127.0;
  for (int i = 0; i < m; ++i) {
    std::vector<double> a(static_cast<size_t>(n));
    double amax = 0;
    for (int j = 0; j < n; ++j) {
      double g = t.decode(x[size_t(2 * n * i + j)]), u = t.decode(x[size_t(2 * n * i + n + j)]);
      a[size_t(j)] = g / (std::exp(-g) + 1.0) * u;
      amax = std::max(amax, std::fabs(a[size_t(j)]));
    }
    double scale = amax > 0 ? amax / qmax : 1.0;
    CAPTURE(i);
    CHECK(std::fabs(s[size_t(i)] - scale) <= 1e-5 * scale);
    for (int j = 0; j < n; ++j) {
      CAPTURE(j);
      double y = a[size_t(j)] / scale; // in [-qmax, qmax]
      uint8_t code = q[size_t(n * i + j)];
      if (fp8) {
        double got = f8e4m3Value(code), want = nearestF8e4m3(y);
        // exp is within 2 ulp: a value next to a rounding boundary may round either way
        CHECK(std::fabs(got - y) <= std::fabs(want - y) + 1e-4 * std::fabs(y) + 1e-9);
      } else { // round half to even; next to a tie (exp within 2 ulp) either neighbour
        double got = double(int8_t(code)), want = std::nearbyint(y);
        if (std::fabs(std::fabs(y - std::trunc(y)) - 0.5) > 1e-4 * std::fabs(y) + 1e-9)
          CHECK(got == want);
        else
          CHECK(std::fabs(got - y) <= 0.5 + 1e-4 * std::fabs(y));
      }
    }
  }
}

} // namespace

TEST_CASE("rmsnorm.tasm with the residual add: f16 and bf16, ragged rows, one row") {
  for (bool bf16 : {false, true}) {
    Half t{bf16};
    checkRmsnorm(t, 256, 3, true);  // one 16-byte chunk per thread
    checkRmsnorm(t, 300, 4, true);  // a row that is not a multiple of 8: element path
    checkRmsnorm(t, 40, 1, true);   // most of the tile is padding
    checkRmsnorm(t, 520, 2, false); // plain RMSNorm, two chunks per thread
  }
}

TEST_CASE("rotary.tasm: neox and interleaved, queries and keys, GQA, shuffled positions") {
  for (bool bf16 : {false, true}) {
    Half t{bf16};
    for (int style : {0, 1}) {
      checkRotary(t, 32, style, 3, 4, 4); // ratio 1
      checkRotary(t, 64, style, 2, 8, 1); // ratio 8
      checkRotary(t, 16, style, 1, 9, 3); // heads not a multiple of the block's, one token
    }
  }
}

TEST_CASE("swiglu_quant.tasm: f8e4m3 and i8 with per-token scales, ragged rows") {
  for (bool bf16 : {false, true}) {
    Half t{bf16};
    for (bool fp8 : {true, false}) {
      checkSwiglu(t, fp8, 256, 3);
      checkSwiglu(t, fp8, 44, 4); // not a multiple of 8: element path; a zero row
      checkSwiglu(t, fp8, 8, 1);
      checkSwiglu(t, fp8, 1000, 3); // four chunks of 256 (T = 32), the last one partial
      checkSwiglu(t, fp8, 300, 2);  // two chunks, element path
    }
  }
  // a row too long for shared memory (4 C 8 T bytes above 160 KiB): the registers-only design
  for (bool fp8 : {true, false})
    checkSwiglu(Half{false}, fp8, 41000, 2);
}

TEST_CASE("swiglu_quant.tasm: each design, several rows per block of the pipelined one") {
  // STAGED = 2 (the rows of a block double- or triple-buffered in shared memory): NB = 2 blocks
  // of 3 and 2 rows (m = 5), of 1 row and none past m (m = 1), of 4 rows each with NB = 1 and
  // 3 buffers; then the chunked design (1) and the registers-only one (0) at sizes that would
  // pick the pipelined one
  for (bool bf16 : {false, true}) {
    Half t{bf16};
    for (bool fp8 : {true, false}) {
      checkSwiglu(t, fp8, 1000, 5, {{"STAGED", "2"}, {"NB", "2"}});
      checkSwiglu(t, fp8, 300, 5, {{"STAGED", "2"}, {"NB", "2"}});
      checkSwiglu(t, fp8, 256, 1, {{"STAGED", "2"}, {"NB", "2"}});
      checkSwiglu(t, fp8, 520, 4, {{"STAGED", "2"}, {"NB", "1"}, {"BUFS", "3"}});
      checkSwiglu(t, fp8, 1000, 3, {{"STAGED", "1"}});
      checkSwiglu(t, fp8, 1000, 3, {{"STAGED", "0"}});
    }
  }
}
