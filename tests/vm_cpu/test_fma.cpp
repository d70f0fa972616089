// Fma on the CPU interpreter (docs/isa.md, "Fma"): one rounding of a * b + c, against values
// computed by hand; broadcasting of a row and a scalar operand; f64; special values.
#include "cpu_test_util.h"

#include <bit>
#include <cmath>
#include <limits>

using namespace cputest;

TEST_CASE("Fma rounds a * b + c once, where Add(Mul(a, b), c) rounds twice") {
  // a = b = 1 + 2^-12: a b = 1 + 2^-11 + 2^-24 exactly, which Mul rounds to 1 + 2^-11 (a tie,
  // to even); c = -(1 + 2^-11): Fma gives 2^-24, Add(Mul(a, b), c) gives 0. The other rows:
  // exact products (2 * 3 + 1 = 7); a subnormal result: 2^-75 * 2^-75 + 2^-149 = 1.5 * 2^-149,
  // a tie between 2^-149 and 2^-148 rounded once to even, 2^-148 (Mul alone rounds 2^-150, a
  // tie between 0 and 2^-149, to 0); and inf * 0 + 1 = NaN (the canonical NaN)
  const char *src = R"(
def k<1>(f32* a_ptr, f32* b_ptr, f32* c_ptr, f32* d_ptr, f32* e_ptr) threads=32:
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[4]), layout=spatial(4).replicate(8))
    b = LoadGlobal(ViewGlobal(b_ptr, shape=[4]), layout=spatial(4).replicate(8))
    c = LoadGlobal(ViewGlobal(c_ptr, shape=[4]), layout=spatial(4).replicate(8))
    StoreGlobal(Fma(a, b, c), ViewGlobal(d_ptr, shape=[4]))
    StoreGlobal(Add(Mul(a, b), c), ViewGlobal(e_ptr, shape=[4]))
)";
  const float one12 = 1.0f + std::ldexp(1.0f, -12);
  std::vector<float> a = {one12, 2.0f, std::ldexp(1.0f, -75),
                          std::numeric_limits<float>::infinity()};
  std::vector<float> b = {one12, 3.0f, std::ldexp(1.0f, -75), 0.0f};
  std::vector<float> c = {-(1.0f + std::ldexp(1.0f, -11)), 1.0f, std::ldexp(1.0f, -149), 1.0f};
  std::vector<float> d(4, -1.0f), e(4, -1.0f);
  CHECK_OK(run(build(src), {bufferArg(a), bufferArg(b), bufferArg(c), bufferArg(d), bufferArg(e)}));
  CHECK(d[0] == std::ldexp(1.0f, -24));
  CHECK(e[0] == 0.0f);
  CHECK(d[1] == 7.0f);
  CHECK(d[2] == std::ldexp(1.0f, -148));
  CHECK(e[2] == std::ldexp(1.0f, -149)); // 2^-150 rounds to 0 (a tie, to even), + 2^-149
  CHECK(std::bit_cast<uint32_t>(d[3]) == 0x7FC00000u); // the canonical NaN of f32
}

TEST_CASE("Fma broadcasts like every elementwise instruction: a row of scales and a scalar") {
  // acc [4, 8] += part [4, 8] * s [4, 1] (one scale per row), then d = Fma(d, 2, -1) with
  // scalars: small integers, exact either way
  const char *src = R"(
def k<1>(f32* p_ptr, f32* s_ptr, f32* d_ptr) threads=32:
    part = LoadGlobal(ViewGlobal(p_ptr, shape=[4, 8]), layout=spatial(4, 8))
    s = LoadGlobal(ViewGlobal(s_ptr, shape=[4, 1]), layout=spatial(4, 1).replicate(8))
    acc = AllocateRegister(f32, layout=spatial(4, 8), init=10.0)
    acc = Fma(part, s, acc)
    StoreGlobal(Fma(acc, 2.0, -1.0), ViewGlobal(d_ptr, shape=[4, 8]))
)";
  std::vector<float> p(32), s = {1.0f, -2.0f, 0.5f, 3.0f}, d(32, 0.0f);
  for (int i = 0; i < 32; ++i)
    p[size_t(i)] = float(i - 7);
  CHECK_OK(run(build(src), {bufferArg(p), bufferArg(s), bufferArg(d)}));
  for (int r = 0; r < 4; ++r)
    for (int col = 0; col < 8; ++col) {
      int i = r * 8 + col;
      CHECK(d[size_t(i)] == (10.0f + p[size_t(i)] * s[size_t(r)]) * 2.0f - 1.0f);
    }
}

TEST_CASE("Fma of f64: one rounding of the exact a * b + c") {
  // a = b = 1 + 2^-27: a b = 1 + 2^-26 + 2^-54, c = -(1 + 2^-26): Fma gives 2^-54
  const char *src = R"(
def k<1>(f64* a_ptr, f64* c_ptr, f64* d_ptr) threads=32:
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[32]), layout=spatial(32))
    c = LoadGlobal(ViewGlobal(c_ptr, shape=[32]), layout=spatial(32))
    StoreGlobal(Fma(a, a, c), ViewGlobal(d_ptr, shape=[32]))
)";
  std::vector<double> a(32, 1.0 + std::ldexp(1.0, -27)), c(32, -(1.0 + std::ldexp(1.0, -26))),
      d(32, -1.0);
  CHECK_OK(run(build(src), {bufferArg(a), bufferArg(c), bufferArg(d)}));
  for (double v : d)
    CHECK(v == std::ldexp(1.0, -54));
}
