// programs/examples/: programs written without any performance layout (the assembler infers
// them, docs/layout-inference.md), on the CPU interpreter against plain C++ references, in
// checked mode; and the layouts inferred for them against the ones written by hand for the
// same computations.
#include "cpu_test_util.h"

#include <random>

using namespace cputest;

namespace {

/// The text of a program's register layouts after assembly (every instruction's layout argument,
/// in program order), so that two programs' choices can be compared.
std::vector<std::string> layoutsOf(const VerifiedModule &m, const std::string &program) {
  std::vector<std::string> out;
  const Program &p = m.module.programs[programIndex(m, program)];
  for (const Instruction &inst : p.instructions)
    for (const Argument &a : inst.args)
      if (a.present && a.regLayout)
        out.push_back(std::string(inst.spec().name) + " " + a.regLayout->toString());
  return out;
}

} // namespace

TEST_CASE("examples/gemv: y = W x with inferred layouts, n not a multiple of the block") {
  VerifiedModule m = build(readSource("programs/examples/gemv.tasm"), {}, "gemv.tasm");
  // The layouts one would write by hand: 16-byte vectors of W along k, a warp per row (two rows
  // each), x broadcast to the four warps, the sum over k replicated over each warp's lanes.
  CHECK(layoutsOf(m, "gemv") ==
        std::vector<std::string>{"AllocateRegister local(2, 1).spatial(4, 32).local(1, 8)",
                                 "LoadGlobal local(2, 1).spatial(4, 32).local(1, 8)",
                                 "LoadGlobal replicate(4).spatial(1, 32).local(1, 8)"});
  const int32_t n = 20, k = 512;
  std::mt19937 rng(5);
  std::vector<uint16_t> w(size_t(n * k)), x(static_cast<size_t>(k)), y(size_t(n) + 8, 0x7777);
  std::vector<double> wv(w.size()), xv(x.size());
  for (size_t i = 0; i < w.size(); ++i) {
    wv[i] = double(int(rng() % 201) - 100) / 64;
    w[i] = doubleToHalf(wv[i]);
  }
  for (size_t i = 0; i < x.size(); ++i) {
    xv[i] = double(int(rng() % 201) - 100) / 64;
    x[i] = doubleToHalf(xv[i]);
  }
  CHECK_OK(run(m, {bufferArg(w), bufferArg(x), bufferArg(y), i32Arg(n), i32Arg(k)}));
  // the hand-annotated twin (other rows per warp) computes the same exact sums
  VerifiedModule hand =
      build(readSource("programs/examples/gemv_annotated.tasm"), {}, "gemv_annotated.tasm");
  std::vector<uint16_t> yHand(y.size(), 0x7777);
  CHECK_OK(run(hand, {bufferArg(w), bufferArg(x), bufferArg(yHand), i32Arg(n), i32Arg(k)}));
  CHECK(yHand == y);
  for (int32_t r = 0; r < n; ++r) {
    double want = 0;
    for (int32_t c = 0; c < k; ++c)
      want += wv[size_t(r * k + c)] * xv[size_t(c)];
    // every product and partial sum is a multiple of 2^-12 below 2^11: exact in f32
    CHECK(y[size_t(r)] == doubleToHalf(want));
  }
  for (size_t i = size_t(n); i < y.size(); ++i)
    CHECK(y[i] == 0x7777);
}

TEST_CASE("examples/softmax: the layouts of programs/softmax_rows.tasm, and its results") {
  VerifiedModule m = build(readSource("programs/examples/softmax.tasm"), {}, "softmax.tasm");
  VerifiedModule hand = build(readSource("programs/softmax_rows.tasm"), {}, "softmax_rows.tasm");
  CHECK(layoutsOf(m, "softmax") == layoutsOf(hand, "softmax"));
  const int32_t rows = 7, cols = 128;
  std::vector<float> x(size_t(rows * cols)), y(size_t(rows * cols) + 128, -7.0f);
  std::mt19937 rng(3);
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

TEST_CASE("examples/quant_matmul: bf16 x u4 with inferred mma fragments") {
  std::map<std::string, std::string> sizes = {{"M", "64"}, {"N", "32"}, {"K", "48"}};
  VerifiedModule m =
      build(readSource("programs/examples/quant_matmul.tasm"), sizes, "quant_matmul.tasm");
  VerifiedModule hand = build(readSource("programs/variants/matmul_bf16_u4_2warps.tasm"), sizes,
                              "matmul_bf16_u4_2warps.tasm");
  CHECK(layoutsOf(m, "matmul") == layoutsOf(hand, "matmul"));
  const int64_t M = 64, N = 32, K = 48;
  std::mt19937 rng(11);
  std::vector<uint16_t> a(size_t(M * K)), c(size_t(M * N), 0xFFFF);
  std::vector<double> av(a.size());
  std::vector<int> bv(size_t(K * N));
  std::vector<uint8_t> b(size_t(K * N / 2), 0);
  for (size_t i = 0; i < a.size(); ++i) {
    av[i] = double(int(rng() % 33) - 16) / 8; // exact in bf16
    a[i] = doubleToBf16(av[i]);
  }
  for (size_t i = 0; i < bv.size(); ++i) {
    bv[i] = int(rng() % 16);
    putPacked(b, int64_t(i), 4, uint32_t(bv[i]));
  }
  CHECK_OK(run(m, {bufferArg(a), bufferArg(b), bufferArg(c)}));
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      double want = 0; // multiples of 1/8 below 2^11: the f32 accumulation is exact
      for (int64_t p = 0; p < K; ++p)
        want += av[size_t(i * K + p)] * bv[size_t(p * N + j)];
      CHECK(c[size_t(i * N + j)] == doubleToBf16(want));
    }
}
