// PermuteShared on the CPU interpreter (docs/isa.md, "PermuteShared"): a transposed view reads
// and writes the same elements in the other index order, slices of it, and the use it exists
// for: a K tile that a TMA load writes as [keys, HD] and Wgmma reads as the K-major B operand
// [HD, keys] of S = Q K^T, against a plain sum.
#include "cpu_test_util.h"

using namespace cputest;

TEST_CASE("PermuteShared: a transposed view reads and writes the transposed elements") {
  // x [4, 8] stored row-major; y = the [8, 4] view, read whole and as a slice of its rows 2..5;
  // then the view is written with x^T's doubled values and s read back as [4, 8]
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr, i32* z_ptr, i32* w_ptr) threads=32:
    s = AllocateShared(i32, shape=[4, 8])
    StoreShared(LoadGlobal(ViewGlobal(x_ptr, shape=[4, 8]), layout=spatial(4, 8)), s)
    Synchronize()
    t = PermuteShared(s, dims=[1, 0])
    StoreGlobal(LoadShared(t, layout=spatial(8, 4)), ViewGlobal(y_ptr, shape=[8, 4]))
    StoreGlobal(LoadShared(SliceShared(t, offset=[2:, 1:], shape=[4, 2]), layout=spatial(4, 2).replicate(4)), ViewGlobal(z_ptr, shape=[4, 2]))
    Synchronize()
    StoreShared(Add(LoadGlobal(ViewGlobal(y_ptr, shape=[8, 4]), layout=spatial(8, 4)), LoadGlobal(ViewGlobal(y_ptr, shape=[8, 4]), layout=spatial(8, 4))), t)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(4, 8)), ViewGlobal(w_ptr, shape=[4, 8]))
)";
  std::vector<int32_t> x(32), y(32, -1), z(8, -1), w(32, -1);
  for (int i = 0; i < 32; ++i)
    x[size_t(i)] = i * 3 + 1;
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y), bufferArg(z), bufferArg(w)}));
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 4; ++i)
      CHECK(y[size_t(j * 4 + i)] == x[size_t(i * 8 + j)]);
  for (int a = 0; a < 4; ++a)
    for (int b = 0; b < 2; ++b)
      CHECK(z[size_t(a * 2 + b)] == x[size_t((1 + b) * 8 + (2 + a))]);
  for (int i = 0; i < 32; ++i)
    CHECK(w[size_t(i)] == 2 * x[size_t(i)]);
}

TEST_CASE("PermuteShared: a K tile loaded by TMA as [keys, HD] is Wgmma's K-major B [HD, keys]") {
  // S = Q K^T: Q [64, 64] f16 K-major, K [32, 64] (keys x HD) in global memory; sKT [64, 32]
  // is K-major for wgmma (rows of 64 HD values, 128-byte swizzle), written by TmaLoad through
  // its [32, 64] transposed view
  const char *src = R"(
def k<1>(f16* q_ptr, f16* k_ptr, f32* s_ptr) threads=128:
    gq = ViewGlobal(q_ptr, shape=[64, 64])
    gk = ViewGlobal(k_ptr, shape=[32, 64])
    sq = AllocateShared(f16, shape=[64, 64], layout=swizzle(row_major(64, 64), 3, 3, 3))
    skt = AllocateShared(f16, shape=[64, 32], layout=swizzle(column_major(64, 32), 3, 3, 3))
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=(64 * 64 + 32 * 64) * 2)
    TmaLoad(sq, gq, bar=bar)
    TmaLoad(PermuteShared(skt, dims=[1, 0]), gk, bar=bar)
    MbarrierWait(bar, parity=0)
    acc = AllocateRegister(f32, layout=spatial(4, 1).local(1, 4).local(2, 1).spatial(8, 4).local(1, 2), init=0.0)
    WgmmaFence()
    Wgmma(sq, skt, acc, out=acc)
    WgmmaCommitGroup()
    WgmmaWaitGroup(0)
    StoreGlobal(acc, ViewGlobal(s_ptr, shape=[64, 32]))
)";
  std::vector<uint16_t> q(64 * 64), kk(32 * 64);
  std::vector<float> s(64 * 32, -1.0f);
  for (int i = 0; i < 64; ++i)
    for (int d = 0; d < 64; ++d)
      q[size_t(i * 64 + d)] = doubleToHalf(double((i * 5 + d * 3) % 7) - 3.0);
  for (int j = 0; j < 32; ++j)
    for (int d = 0; d < 64; ++d)
      kk[size_t(j * 64 + d)] = doubleToHalf(double((j * 3 + d * 7) % 5) - 2.0);
  CHECK_OK(run(build(src), {bufferArg(q), bufferArg(kk), bufferArg(s)}));
  int bad = 0;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 32; ++j) {
      double want = 0;
      for (int d = 0; d < 64; ++d)
        want += halfToDouble(q[size_t(i * 64 + d)]) * halfToDouble(kk[size_t(j * 64 + d)]);
      bad += double(s[size_t(i * 32 + j)]) != want;
    }
  CHECK(bad == 0);
}

TEST_CASE("PermuteShared: dims must be a permutation") {
  const char *src = R"(
def k<1>(i32* x_ptr) threads=32:
    s = AllocateShared(i32, shape=[4, 8])
    t = PermuteShared(s, dims=[1, 1])
)";
  Expected<Module> module = assemble(src);
  REQUIRE_OK(module);
  Expected<VerifiedModule> m = checkModule(std::move(module).value());
  REQUIRE_FALSE(m.ok());
  CHECK(hasDiagnostic(m.status(), ErrorCode::BadArgument,
                      {"PermuteShared dims=[1, 1] is not a permutation of the 2 dimensions"}));
}
