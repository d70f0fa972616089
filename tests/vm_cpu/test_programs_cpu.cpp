// The shared programs of programs/ on the CPU interpreter, at sizes that are not multiples of
// their tiles, against plain C++ references; in checked mode they must report nothing.
#include "cpu_test_util.h"

#include <random>

using namespace cputest;

namespace {

/// A random f16 with a modest exponent range, and its value.
uint16_t randomHalf(std::mt19937 &rng, double &value) {
  value = double(int(rng() % 2001) - 1000) / 512; // |v| < 2, exact in f16 (11 bits)
  return doubleToHalf(value);
}

/// |got - want| within one f16 ulp of `want` (the final rounding, which f32 accumulation
/// errors of ~1e-6 may push across a rounding boundary) plus that accumulation slack.
bool closeToHalf(uint16_t got, double want) {
  double g = halfToDouble(got);
  double ulp = std::ldexp(1.0, std::max(-24, std::ilogb(std::max(std::fabs(want), 6.2e-5)) - 10));
  return std::fabs(g - want) <= ulp + 1e-5;
}

} // namespace

TEST_CASE("vector_add: n not a multiple of the 256-element block") {
  VerifiedModule m = build(readSource("programs/vector_add.tasm"), {}, "vector_add.tasm");
  for (int32_t n : {1, 255, 1000, 4097}) {
    CAPTURE(n);
    std::vector<float> x(static_cast<size_t>(n)), y(static_cast<size_t>(n)),
        z(size_t(n) + 7, -1.0f);
    for (int32_t i = 0; i < n; ++i) {
      x[size_t(i)] = float(i) * 0.25f - 3.0f;
      y[size_t(i)] = 1.0f / float(i + 1);
    }
    CHECK_OK(run(m, {bufferArg(x), bufferArg(y), bufferArg(z), i32Arg(n)}));
    for (int32_t i = 0; i < n; ++i)
      CHECK(z[size_t(i)] == x[size_t(i)] + y[size_t(i)]);
    for (size_t i = size_t(n); i < z.size(); ++i)
      CHECK(z[i] == -1.0f); // past n: untouched
  }
}

TEST_CASE("softmax_rows: m not a multiple of the 4 rows per block") {
  VerifiedModule m = build(readSource("programs/softmax_rows.tasm"), {}, "softmax_rows.tasm");
  const int32_t rows = 10, cols = 128;
  std::vector<float> x(size_t(rows * cols)), y(size_t(rows * cols) + 128, -7.0f);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> dist(-8.0f, 8.0f);
  for (float &v : x)
    v = dist(rng);
  CHECK_OK(run(m, {bufferArg(x), bufferArg(y), i32Arg(rows)}));
  for (int32_t r = 0; r < rows; ++r) {
    double mx = -1e300, sum = 0;
    for (int32_t c = 0; c < cols; ++c)
      mx = std::max(mx, double(x[size_t(r * cols + c)]));
    for (int32_t c = 0; c < cols; ++c)
      sum += std::exp(double(x[size_t(r * cols + c)]) - mx);
    for (int32_t c = 0; c < cols; ++c) {
      double want = std::exp(double(x[size_t(r * cols + c)]) - mx) / sum;
      CHECK(std::fabs(double(y[size_t(r * cols + c)]) - want) <= 1e-6 * want + 1e-9);
    }
  }
  for (size_t i = size_t(rows * cols); i < y.size(); ++i)
    CHECK(y[i] == -7.0f);
}

namespace {

void matmulCase(const VerifiedModule &m, int32_t M, int32_t N, int32_t K, bool checked) {
  CAPTURE(M);
  CAPTURE(N);
  CAPTURE(K);
  std::mt19937 rng(uint32_t(M * 7 + N * 3 + K));
  std::vector<uint16_t> a(size_t(M * K)), b(size_t(K * N)), c(size_t(M * N), 0xFFFF);
  std::vector<double> av(a.size()), bv(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = randomHalf(rng, av[i]);
  for (size_t i = 0; i < b.size(); ++i)
    b[i] = randomHalf(rng, bv[i]);
  CHECK_OK(run(m, {bufferArg(a), bufferArg(b), bufferArg(c), i32Arg(M), i32Arg(N), i32Arg(K)},
               options(checked)));
  int bad = 0;
  for (int32_t i = 0; i < M; ++i)
    for (int32_t j = 0; j < N; ++j) {
      double want = 0;
      for (int32_t p = 0; p < K; ++p)
        want += av[size_t(i * K + p)] * bv[size_t(p * N + j)];
      if (!closeToHalf(c[size_t(i * N + j)], want) && bad++ < 5)
        FAIL_CHECK("c[" << i << ", " << j << "] = " << halfToDouble(c[size_t(i * N + j)])
                        << ", want " << want);
    }
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("matmul_f16_pipelined at sizes that are not multiples of the tiles") {
  VerifiedModule m =
      build(readSource("programs/matmul_f16_pipelined.tasm"), {}, "matmul_f16_pipelined.tasm");
  matmulCase(m, 100, 72, 40, true);
  matmulCase(m, 64, 64, 96, true); // more k-tiles than stages
  matmulCase(m, 17, 130, 33, false);
}

TEST_CASE("the paper's f16 x i6 matmul at M = N = K = 64: transform_b, then matmul") {
  VerifiedModule m = build(readSource("programs/paper_matmul_f16_i6.tasm"),
                           {{"M", "64"}, {"N", "64"}, {"K", "64"}}, "paper_matmul_f16_i6.tasm");
  const int M = 64, N = 64, K = 64;
  std::mt19937 rng(42);
  std::vector<int> w(size_t(K * N));
  std::vector<uint8_t> packed(size_t(K * N * 6 / 8));
  for (size_t i = 0; i < w.size(); ++i) {
    w[i] = int(rng() % 64) - 32;
    putPacked(packed, int64_t(i), 6, uint32_t(w[i]) & 63);
  }
  std::vector<uint8_t> transformed(packed.size(), 0);
  CHECK_OK(run(m, {bufferArg(packed), bufferArg(transformed)}, options(), "transform_b"));
  std::vector<uint16_t> a(size_t(M * K)), c(size_t(M * N));
  std::vector<double> av(a.size());
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = randomHalf(rng, av[i]);
  CHECK_OK(run(m, {bufferArg(a), bufferArg(transformed), bufferArg(c)}, options(), "matmul"));
  int bad = 0;
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = 0;
      for (int p = 0; p < K; ++p)
        want += av[size_t(i * K + p)] * w[size_t(p * N + j)];
      if (!closeToHalf(c[size_t(i * N + j)], want) && bad++ < 5)
        FAIL_CHECK("c[" << i << ", " << j << "] = " << halfToDouble(c[size_t(i * N + j)])
                        << ", want " << want);
    }
  CHECK(bad == 0);
}
