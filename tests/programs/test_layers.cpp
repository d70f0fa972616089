// programs/layers/ on the CPU interpreter against plain C++ references of their contracts:
// rmsnorm.tasm (with and without the residual add), rotary.tasm (neox and interleaved, queries
// and keys, shuffled positions) and swiglu_quant.tasm (f8e4m3 and i8), for f16 and bf16, at
// small and ragged sizes (rows not multiples of a vector, head counts not multiples of a
// block's heads, a single token), and linear_fp8.tasm (every AT and CT, ragged shapes, the
// persistent loop). Values of AT, f8e4m3 and i8 are encoded and decoded here by
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

// ---- Linear (FP8) --------------------------------------------------------------------------

/// The value of an f8e5m2 code (OCP: bias 15, like the high byte of an f16).
double f8e5m2Value(uint8_t code) { return halfToDouble(uint16_t(code << 8)); }

/// Codes of AT whose values are the multiples of 1/8 in [-2, 2] (exact in every AT here), with
/// the values: products are multiples of 1/64 and sums over k <= 512 stay below 2^11, so every
/// partial sum is exact in f32 (and in the FP8 tensor cores' 14 bits after the scale, which is
/// checked on the GPU) and y is the correctly rounded scale * sum.
std::vector<std::pair<uint16_t, double>> eighths(const std::string &at) {
  std::vector<std::pair<uint16_t, double>> out;
  for (int q = -16; q <= 16; ++q) {
    double v = q / 8.0;
    if (at == "f16" || at == "bf16") {
      Half h{at == "bf16"};
      out.push_back({h.encode(v), v});
      continue;
    }
    for (int code = 0; code < 256; ++code) { // the exact code, +0 for 0
      double c = at == "f8e4m3" ? f8e4m3Value(uint8_t(code)) : f8e5m2Value(uint8_t(code));
      if (c == v && !(v == 0 && code != 0)) {
        out.push_back({uint16_t(code), v});
        break;
      }
    }
  }
  return out;
}

void checkLinear(const std::string &at, const std::string &ct, int m, int n, int k,
                 std::map<std::string, std::string> extra = {}) {
  CAPTURE(at);
  CAPTURE(ct);
  CAPTURE(m);
  CAPTURE(n);
  CAPTURE(k);
  std::map<std::string, std::string> defines = {{"AT", at}, {"CT", ct}};
  for (const auto &[name, value] : extra) {
    CAPTURE(name);
    CAPTURE(value);
    defines[name] = value;
  }
  VerifiedModule mod =
      build(readSource("programs/layers/linear_fp8.tasm"), defines, "linear_fp8.tasm");
  std::vector<std::pair<uint16_t, double>> values = eighths(at);
  // e5m2 has 2 mantissa bits: 1.125 etc. are not values, fewer eighths remain
  REQUIRE(values.size() >= (at == "f8e5m2" ? 21u : 33u));
  std::mt19937 rng(unsigned(m * 131 + n * 7 + k));
  const int bytes = at == "f16" || at == "bf16" ? 2 : 1;
  std::vector<double> x(size_t(m * k)), w(size_t(n * k));
  std::vector<uint8_t> xb(x.size() * size_t(bytes)), wb(w.size() * size_t(bytes));
  auto fill = [&](std::vector<double> &v, std::vector<uint8_t> &b) {
    for (size_t i = 0; i < v.size(); ++i) {
      const auto &[code, value] = values[rng() % values.size()];
      v[i] = value;
      std::memcpy(&b[i * size_t(bytes)], &code, size_t(bytes)); // little-endian low byte(s)
    }
  };
  fill(x, xb);
  fill(w, wb);
  const bool f32 = ct == "f32";
  std::vector<uint8_t> y(size_t(m * n) * (f32 ? 4 : 2), 0xAB);
  const double scale = 0.5;
  REQUIRE_OK(run(mod, {bufferArg(xb), bufferArg(wb), bufferArg(y), i32Arg(m), i32Arg(n), i32Arg(k),
                       f32Arg(float(scale))}));
  Half out{ct == "bf16"};
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 0;
      for (int p = 0; p < k; ++p)
        want += x[size_t(i * k + p)] * w[size_t(j * k + p)];
      want *= scale;
      size_t e = size_t(i * n + j);
      CAPTURE(i);
      CAPTURE(j);
      if (f32) {
        float got;
        std::memcpy(&got, &y[e * 4], 4);
        REQUIRE(double(got) == want);
      } else {
        uint16_t got;
        std::memcpy(&got, &y[e * 2], 2);
        REQUIRE(got == out.encode(want));
      }
    }
}

} // namespace

TEST_CASE("linear_fp8.tasm: y = scale x w^T for every AT and CT, ragged m, n and k, persistent") {
  // one row and one k tile; fewer rows and columns than a tile with a partial k tile; several
  // tiles in m and n (3 x 3 with SMS = 4: three rounds on three blocks, the producer running ahead
  // into a block's next tile)
  checkLinear("f8e4m3", "f16", 1, 16, 16);
  checkLinear("f8e4m3", "f32", 37, 264, 144);
  checkLinear("f8e4m3", "bf16", 300, 520, 272, {{"SMS", "4"}});
  checkLinear("f8e5m2", "f16", 37, 264, 144);
  checkLinear("f8e5m2", "f32", 130, 8, 48, {{"SMS", "2"}});
  checkLinear("f16", "f16", 37, 264, 72);
  checkLinear("bf16", "f32", 300, 520, 136, {{"SMS", "4"}, {"PERSIST", "0"}});
}

TEST_CASE("linear_fp8.tasm's split-K where the tiles leave blocks idle") {
  // S = max(1, min(SPLITS, SMS / tiles, num_k / KMIN)) blocks per tile, each storing its f32
  // part of the k tiles into its own workspace slot and the last one summing them and storing
  // y. SMS = 8, KMIN = 1: four tiles (2 x 2, partial at the edges) of 3 k tiles (f8e4m3, 128
  // per tile; the last partial) in S = 2 splits of one and two; one tile of 9 k tiles in S = 8
  // splits of one or two; f16 operands (64 per k tile) in three tiles, S = 2 splits of 3 and 4.
  // The interpreter fails a launch that leaves the requires_clean tickets dirty.
  checkLinear("f8e4m3", "f16", 200, 264, 272, {{"SMS", "8"}, {"KMIN", "1"}});
  checkLinear("f8e4m3", "f32", 37, 48, 1040, {{"SMS", "8"}, {"KMIN", "1"}});
  checkLinear("f16", "bf16", 300, 136, 440, {{"SMS", "6"}, {"KMIN", "3"}});
  // SPLITS = 3 caps S (min(3, 8, 9) = 3); SPLITS = 1: no split (four tiles loop on two blocks);
  // PERSIST = 0: S = min(8, 8 / 1, 9) blocks of one tile, no cap
  checkLinear("f8e5m2", "f16", 37, 48, 1040, {{"SMS", "8"}, {"KMIN", "1"}, {"SPLITS", "3"}});
  checkLinear("f8e4m3", "f16", 200, 264, 272, {{"SMS", "2"}, {"KMIN", "1"}, {"SPLITS", "1"}});
  checkLinear("f8e4m3", "bf16", 37, 48, 1040, {{"SMS", "8"}, {"KMIN", "1"}, {"PERSIST", "0"}});
  // BN = 128 (six stages): 2 x 3 tiles in S = 2 splits, the second row tile's 72 rows (160 of
  // the 256 consumer threads hold rows of y); f32 y; and the tile without split-K
  checkLinear("f8e4m3", "f16", 200, 264, 1040, {{"BN", "128"}, {"SMS", "12"}, {"KMIN", "1"}});
  checkLinear("f16", "f32", 37, 136, 200, {{"BN", "128"}, {"SMS", "4"}, {"KMIN", "1"}});
  checkLinear("f8e5m2", "bf16", 300, 520, 272, {{"BN", "128"}, {"SMS", "4"}, {"SPLITS", "1"}});
}

TEST_CASE("linear_fp8.tasm refuses rows that are not whole 16-byte units") {
  VerifiedModule mod = build(readSource("programs/layers/linear_fp8.tasm"), {}, "linear_fp8.tasm");
  std::vector<uint8_t> x(64 * 64), w(64 * 64), y(64 * 64 * 2);
  for (auto [n, k] : {std::pair{64, 24}, std::pair{60, 64}}) {
    CAPTURE(n);
    CAPTURE(k);
    Status st = run(mod, {bufferArg(x), bufferArg(w), bufferArg(y), i32Arg(16), i32Arg(n),
                          i32Arg(k), f32Arg(1.0f)});
    CHECK(st.code() == ErrorCode::Assert);
  }
}

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
