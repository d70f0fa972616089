// The library's programs on the GPU against plain host references written here: the
// pipelined f16 matmul (partial tiles, and a pipeline deep enough to need more than 48 KiB of
// dynamic shared memory), the paper's f16 x i6 matmul with its weight transform, row softmax.
#include "gpu_support.h"

#include <cmath>

using namespace tilus;
using namespace gpu;

namespace {

/// Sign-extended element e of a packed i6 array (ISA section 2: bits [6e, 6e+6), LSB first).
int signedSixBits(const std::vector<uint8_t> &packed, size_t e) {
  int value = 0;
  for (int b = 0; b < 6; ++b) {
    size_t bit = e * 6 + size_t(b);
    value |= ((packed[bit / 8] >> (bit % 8)) & 1) << b;
  }
  return value >= 32 ? value - 64 : value;
}

/// Count the elements of an f16 result outside |c - ref| <= rtol * (|ref| + 1).
int f16Mismatches(const std::vector<uint16_t> &c, const std::vector<double> &ref, double rtol) {
  int wrong = 0;
  double worst = 0;
  for (size_t i = 0; i < ref.size(); ++i) {
    double err = std::fabs(halfToDouble(c[i]) - ref[i]);
    worst = std::max(worst, err);
    if (!(err <= rtol * (std::fabs(ref[i]) + 1.0)))
      ++wrong;
  }
  MESSAGE("max abs error " << worst << " over " << ref.size() << " elements");
  return wrong;
}

void runPipelinedMatmul(int m, int n, int k, const std::map<std::string, std::string> &defines) {
  cuda::LoadedModule module = loadProgramFile("matmul_f16_pipelined.tasm", defines);
  std::vector<uint16_t> a = randomHalves(size_t(m) * size_t(k), 31);
  std::vector<uint16_t> b = randomHalves(size_t(k) * size_t(n), 32);
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b),
              dc = DeviceArray::from(std::vector<uint16_t>(size_t(m) * size_t(n), 0x7e00));
  REQUIRE_OK(runtime().launch(
      module, 0,
      {da.arg(), db.arg(), dc.arg(), scalar(uint32_t(m)), scalar(uint32_t(n)), scalar(uint32_t(k))},
      nullptr));
  REQUIRE_OK(runtime().synchronize(nullptr));
  std::vector<double> ref(size_t(m) * size_t(n), 0.0);
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double sum = 0;
      for (int p = 0; p < k; ++p)
        sum += halfToDouble(a[size_t(i * k + p)]) * halfToDouble(b[size_t(p * n + j)]);
      ref[size_t(i * n + j)] = sum;
    }
  CHECK(f16Mismatches(dc.to<uint16_t>(), ref, 1e-2) == 0);
}

} // namespace

TEST_CASE("pipelined f16 matmul with partial tiles") { runPipelinedMatmul(100, 72, 40, {}); }

TEST_CASE("pipelined f16 matmul at 256^3") { runPipelinedMatmul(256, 256, 256, {}); }

TEST_CASE("an 8-stage pipeline needs and gets more than 48 KiB of dynamic shared memory") {
  cuda::LoadedModule module = loadProgramFile("matmul_f16_pipelined.tasm", {{"STAGES", "8"}});
  CHECK(module.verified.programs[0].sharedBytes > 48 * 1024);
  runPipelinedMatmul(128, 128, 320, {{"STAGES", "8"}});
}

TEST_CASE("the paper's f16 x i6 matmul with its weight transform at 64^3") {
  const int M = 64, N = 64, K = 64;
  std::map<std::string, std::string> sizes = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
  cuda::LoadedModule module = loadProgramFile("paper_matmul_f16_i6.tasm", sizes);
  size_t transform = programIndex(module, "transform_b"), matmul = programIndex(module, "matmul");
  std::vector<uint16_t> a = randomHalves(size_t(M * K), 41);
  std::vector<uint8_t> b(size_t(K * N * 6 / 8));
  uint32_t state = 77;
  for (uint8_t &byte : b) {
    state = state * 1664525u + 1013904223u;
    byte = uint8_t(state >> 24);
  }
  DeviceArray da = DeviceArray::from(a), db = DeviceArray::from(b),
              dt = DeviceArray::from(std::vector<uint8_t>(b.size(), 0)),
              dc = DeviceArray::from(std::vector<uint16_t>(size_t(M * N), 0x7e00));
  REQUIRE_OK(runtime().launch(module, transform, {db.arg(), dt.arg()}, nullptr));
  REQUIRE_OK(runtime().launch(module, matmul, {da.arg(), dt.arg(), dc.arg()}, nullptr));
  REQUIRE_OK(runtime().synchronize(nullptr));
  std::vector<double> ref(size_t(M * N), 0.0);
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double sum = 0;
      for (int p = 0; p < K; ++p)
        sum += halfToDouble(a[size_t(i * K + p)]) * signedSixBits(b, size_t(p * N + j));
      ref[size_t(i * N + j)] = sum;
    }
  CHECK(f16Mismatches(dc.to<uint16_t>(), ref, 1e-2) == 0);
}

TEST_CASE("row softmax with a partial last block") {
  cuda::LoadedModule module = loadProgramFile("softmax_rows.tasm");
  const int m = 37, n = 128;
  std::vector<float> x = randomFloats(size_t(m * n), 51);
  for (float &v : x)
    v *= 8.0f;
  DeviceArray dx = DeviceArray::from(x), dy = DeviceArray::from(std::vector<float>(m * n, -1));
  REQUIRE_OK(runtime().launch(module, 0, {dx.arg(), dy.arg(), scalar(uint32_t(m))}, nullptr));
  REQUIRE_OK(runtime().synchronize(nullptr));
  std::vector<float> y = dy.to<float>();
  int wrong = 0;
  for (int r = 0; r < m; ++r) {
    double mx = -1e300, sum = 0;
    for (int c = 0; c < n; ++c)
      mx = std::max(mx, double(x[size_t(r * n + c)]));
    for (int c = 0; c < n; ++c)
      sum += std::exp(double(x[size_t(r * n + c)]) - mx);
    for (int c = 0; c < n; ++c) {
      double ref = std::exp(double(x[size_t(r * n + c)]) - mx) / sum;
      if (!(std::fabs(y[size_t(r * n + c)] - ref) <= 1e-5 * ref + 1e-7))
        ++wrong;
    }
  }
  CHECK(wrong == 0);
}
