// The Hopper instructions on the CPU interpreter (docs/isa.md, "Hopper instructions"):
// mbarrier phases and parities, transaction bytes, the deadlock and use-before-init errors,
// and the race between a barrier's initialisation and its use.
#include "cpu_test_util.h"
#include "isa/wgmma_fragment.h"

using namespace cputest;
using tilus::wgmmaAFragment;

TEST_CASE("mbarrier phases: waits on the completed parity return, stores after them happen") {
  // Two barriers of count 2; each iteration arrives twice on one of them (completing its
  // phase) and waits on the parity of the phase it completed. Iteration i stores i + 1.
  const char *src = R"(
def k<1>(i32* out_ptr) threads=64:
    g = ViewGlobal(out_ptr, shape=[4])
    bars = AllocateShared(u64, shape=[2])
    for i in range(2):
        MbarrierInit(SliceShared(bars, offset=[i]), count=2)
    Synchronize()
    one = AllocateRegister(i32, layout=spatial(1).replicate(64), init=1)
    for it in range(4):
        bar = SliceShared(bars, offset=[it % 2])
        MbarrierArrive(bar)
        MbarrierArrive(bar, tx=0)
        MbarrierWait(bar, parity=it / 2 % 2)
        MbarrierWait(bar, parity=it / 2 % 2)
        StoreGlobal(Add(one, it), g, offset=[it:])
)";
  std::vector<int32_t> out(4, 0);
  CHECK_OK(run(build(src), {bufferArg(out)}));
  CHECK(out == std::vector<int32_t>{1, 2, 3, 4});
}

TEST_CASE("a wait on a phase that cannot complete is a deadlock naming what is missing") {
  // count 3, two arrivals, 48 expected bytes that nothing delivers
  const char *src = R"(
def k<1>() threads=32:
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=3)
    Synchronize()
    MbarrierArrive(bar, tx=48)
    MbarrierArrive(bar)
    MbarrierWait(bar, parity=0)
)";
  Status s = run(build(src), {});
  CHECK_ERROR(s, ErrorCode::Runtime);
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"test.tasm:8:", "MbarrierWait(parity=0) never returns", "phase 0",
                       "lacks 1 of 3 arrivals and 48 transaction bytes", "deadlock"}));
}

TEST_CASE("the parity before the first phase has completed; the first phase has not") {
  const char *ok = R"(
def k<1>() threads=32:
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierWait(bar, parity=1)
)";
  CHECK_OK(run(build(ok), {}));
  std::string stuck = replaceAll(ok, "parity=1", "parity=0");
  Status s = run(build(stuck), {});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"never returns", "lacks 1 of 1 arrivals and 0"}));
}

TEST_CASE("an mbarrier used before MbarrierInit is an error") {
  const char *src = R"(
def k<1>() threads=32:
    bars = AllocateShared(u64, shape=[2])
    MbarrierInit(SliceShared(bars, offset=[0]), count=1)
    Synchronize()
    MbarrierArrive(SliceShared(bars, offset=[1]))
)";
  Status s = run(build(src), {});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"test.tasm:6:", "mbarrier at shared byte 8", "before MbarrierInit"}));
}

TEST_CASE("using an mbarrier in the epoch of its initialisation is a race") {
  const char *src = R"(
def k<1>() threads=32:
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    MbarrierArrive(bar)
)";
  Status s = run(build(src), {});
  CHECK_ERROR(s, ErrorCode::Race);
  CHECK(hasDiagnostic(s, ErrorCode::Race, {"test.tasm:5:", "MbarrierInit at 4:5"}));
  // unchecked mode runs it
  CHECK_OK(run(build(src), {}, options(false)));
}

namespace {

std::string defines(std::string s, int n, int threads) {
  s = replaceAll(s, "64 * T / 128", std::to_string(64 * threads / 128));
  s = replaceAll(s, "T / 8", std::to_string(threads / 8));
  return replaceAll(s, "N]", std::to_string(n) + "]");
}

// A 64 x 64 K-major A tile (128-byte swizzle) times B given by `bLayout`, into an f32
// accumulator that starts at 1.
std::string wgmmaSource(const std::string &bShape, const std::string &bLayout,
                        const std::string &bLoad, const std::string &acc, int n, int threads) {
  std::string src = R"(
def k<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr) threads=)" +
                    std::to_string(threads) + R"(:
    ga = ViewGlobal(a_ptr, shape=[64 * T / 128, 64])
    gb = ViewGlobal(b_ptr, shape=[64, N])
    gc = ViewGlobal(c_ptr, shape=[64 * T / 128, N])
    sa = AllocateShared(f16, shape=[64 * T / 128, 64], layout=swizzle(row_major(64 * T / 128, 64), 3, 3, 3))
    sb = AllocateShared(f16, shape=)" +
                    bShape + ", layout=" + bLayout + R"()
    StoreShared(LoadGlobal(ga, layout=spatial(T / 8, 8).local(4, 8)), sa)
    StoreShared(LoadGlobal(gb, layout=)" +
                    bLoad + R"(), sb)
    FenceProxyAsync()
    Synchronize()
    acc = AllocateRegister(f32, layout=)" +
                    acc + R"(, init=1.0)
    WgmmaFence()
    Wgmma(sa, sb, acc, out=acc)
    WgmmaCommitGroup()
    WgmmaWaitGroup(0)
    StoreGlobal(acc, gc)
)";
  return defines(src, n, threads);
}

/// c = 1 + a @ b with small integers (exact in f16 and f32).
void checkWgmma(const std::string &src, int m, int n) {
  std::vector<uint16_t> a(size_t(m * 64)), b(size_t(64 * n));
  std::vector<float> c(size_t(m * n), -7.0f);
  for (int i = 0; i < m; ++i)
    for (int k = 0; k < 64; ++k)
      a[size_t(i * 64 + k)] = doubleToHalf(double((i * 7 + k * 3) % 5) - 2.0);
  for (int k = 0; k < 64; ++k)
    for (int j = 0; j < n; ++j)
      b[size_t(k * n + j)] = doubleToHalf(double((k * 5 + j * 11) % 7) - 3.0);
  CHECK_OK(run(build(src), {bufferArg(a), bufferArg(b), bufferArg(c)}));
  int bad = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 1.0;
      for (int k = 0; k < 64; ++k)
        want += (double((i * 7 + k * 3) % 5) - 2.0) * (double((k * 5 + j * 11) % 7) - 3.0);
      bad += c[size_t(i * n + j)] == float(want) ? 0 : 1;
    }
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("Wgmma: K-major B (column-major, 128-byte swizzle), one warpgroup, n = 8") {
  std::string src =
      wgmmaSource("[64, 8]", "swizzle(column_major(64, 8), 3, 3, 3)", "spatial(16, 8).local(4, 1)",
                  "spatial(4, 1).local(1, 1).local(2, 1).spatial(8, 4).local(1, 2)", 8, 128);
  checkWgmma(src, 64, 8);
}

TEST_CASE("Wgmma: N-major B in 64-column panels, two warpgroups along M, n = 128") {
  std::string src = wgmmaSource(
      "[64, 128]", "row_major(1, 2).swizzle(row_major(64, 64), 3, 3, 3)",
      "spatial(32, 8).local(2, 16)",
      "spatial(2, 1).spatial(4, 1).local(1, 16).local(2, 1).spatial(8, 4).local(1, 2)", 128, 256);
  checkWgmma(src, 128, 128);
}

TEST_CASE("Wgmma: reading the accumulator before its wait is an error") {
  std::string src =
      wgmmaSource("[64, 8]", "swizzle(column_major(64, 8), 3, 3, 3)", "spatial(16, 8).local(4, 1)",
                  "spatial(4, 1).local(1, 1).local(2, 1).spatial(8, 4).local(1, 2)", 8, 128);
  src = replaceAll(src, "    WgmmaWaitGroup(0)\n    StoreGlobal(acc, gc)\n",
                   "    StoreGlobal(acc, gc)\n    WgmmaWaitGroup(0)\n");
  std::vector<uint16_t> a(64 * 64), b(64 * 8);
  std::vector<float> c(64 * 8);
  Status s = run(build(src), {bufferArg(a), bufferArg(b), bufferArg(c)});
  CHECK(hasDiagnostic(s, ErrorCode::Race,
                      {"test.tasm:16:", "`acc` is read while Wgmma at 14:5", "WgmmaWaitGroup"}));
}

TEST_CASE("Wgmma: writing an operand before the wait races with the Wgmma") {
  std::string src =
      wgmmaSource("[64, 8]", "swizzle(column_major(64, 8), 3, 3, 3)", "spatial(16, 8).local(4, 1)",
                  "spatial(4, 1).local(1, 1).local(2, 1).spatial(8, 4).local(1, 2)", 8, 128);
  src =
      replaceAll(src, "    WgmmaWaitGroup(0)\n",
                 "    Synchronize()\n    StoreShared(LoadGlobal(gb, layout=spatial(16, 8).local(4, "
                 "1)), sb)\n    WgmmaWaitGroup(0)\n");
  std::vector<uint16_t> a(64 * 64), b(64 * 8);
  std::vector<float> c(64 * 8);
  Status s = run(build(src), {bufferArg(a), bufferArg(b), bufferArg(c)});
  CHECK(hasDiagnostic(s, ErrorCode::Race,
                      {"test.tasm:17:", "while Wgmma at 14:5 may still be reading it"}));
}

TEST_CASE("a completed mbarrier phase orders a shared exchange; a store after the arrival races") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr) threads=64:
    bar = AllocateShared(u64, shape=[1])
    s = AllocateShared(f32, shape=[64])
    MbarrierInit(bar, count=1)
    Synchronize()
    StoreShared(LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(64)), s)
    MbarrierArrive(bar)
    MbarrierWait(bar, parity=0)
    r = LoadShared(s, layout=replicate(64).local(64))
    StoreGlobal(r, ViewGlobal(y_ptr, shape=[64]))
)";
  std::vector<float> x(64), y(64, 0.0f);
  for (int i = 0; i < 64; ++i)
    x[size_t(i)] = float(i) * 0.5f;
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y)}));
  CHECK(y == x);
  // the store moved after the arrival: the wait does not order it
  std::string late = replaceAll(src,
                                "    StoreShared(LoadGlobal(ViewGlobal(x_ptr, shape=[64]), "
                                "layout=spatial(64)), s)\n    MbarrierArrive(bar)\n",
                                "    MbarrierArrive(bar)\n    StoreShared(LoadGlobal(ViewGlobal("
                                "x_ptr, shape=[64]), layout=spatial(64)), s)\n");
  Status st = run(build(late), {bufferArg(x), bufferArg(y)});
  CHECK(hasDiagnostic(st, ErrorCode::Race, {"test.tasm:10:", "written by StoreShared at 8:"}));
}

namespace {

// Wgmma with A in registers: a [M, K] loaded from global memory in the layout `aLayout`, B
// [K, N] copied into shared memory with `bLayout`, c = 1 + a @ b stored to global memory.
// `tail` replaces the wait and the store (for the ordering tests).
std::string registerASource(const std::string &dtype, int threads, int m, int k, int n,
                            const std::string &aLayout, const std::string &bLayout,
                            const std::string &bLoad, const std::string &acc,
                            const std::string &tail = "") {
  std::string ms = std::to_string(m), ks = std::to_string(k), ns = std::to_string(n);
  return R"(
def k<1>()" +
         dtype + "* a_ptr, " + dtype + R"(* b_ptr, f32* c_ptr) threads=)" +
         std::to_string(threads) + R"(:
    ga = ViewGlobal(a_ptr, shape=[)" +
         ms + ", " + ks + R"(])
    gb = ViewGlobal(b_ptr, shape=[)" +
         ks + ", " + ns + R"(])
    gc = ViewGlobal(c_ptr, shape=[)" +
         ms + ", " + ns + R"(])
    sb = AllocateShared()" +
         dtype + ", shape=[" + ks + ", " + ns + "], layout=" + bLayout + R"()
    StoreShared(LoadGlobal(gb, layout=)" +
         bLoad + R"(), sb)
    FenceProxyAsync()
    Synchronize()
    a = LoadGlobal(ga, layout=)" +
         aLayout + R"()
    acc = AllocateRegister(f32, layout=)" +
         acc + R"(, init=1.0)
    WgmmaFence()
    Wgmma(a, sb, acc, out=acc)
    WgmmaCommitGroup()
)" + (tail.empty() ? "    WgmmaWaitGroup(0)\n    StoreGlobal(acc, gc)\n" : tail);
}

double registerAValue(int i, int kk) { return double((i * 7 + kk * 3) % 5) - 2.0; }
double registerBValue(int kk, int j) { return double((kk * 5 + j * 11) % 7) - 3.0; }

/// Runs c = 1 + a @ b with small integers (exact in f16, f8e4m3 and f32) and compares with
/// the plain sum.
void checkRegisterA(const std::string &src, bool fp8, int m, int k, int n) {
  auto encode = [&](double v) -> uint16_t {
    return fp8 ? uint16_t(doubleToIeee(v, 4, 3)) : doubleToHalf(v);
  };
  std::vector<uint16_t> a16(size_t(m * k)), b16(size_t(k * n));
  for (int i = 0; i < m; ++i)
    for (int kk = 0; kk < k; ++kk)
      a16[size_t(i * k + kk)] = encode(registerAValue(i, kk));
  for (int kk = 0; kk < k; ++kk)
    for (int j = 0; j < n; ++j)
      b16[size_t(kk * n + j)] = encode(registerBValue(kk, j));
  std::vector<uint8_t> a8(a16.begin(), a16.end()), b8(b16.begin(), b16.end());
  std::vector<float> c(size_t(m * n), -7.0f);
  if (fp8)
    CHECK_OK(run(build(src), {bufferArg(a8), bufferArg(b8), bufferArg(c)}));
  else
    CHECK_OK(run(build(src), {bufferArg(a16), bufferArg(b16), bufferArg(c)}));
  int bad = 0;
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j) {
      double want = 1.0;
      for (int kk = 0; kk < k; ++kk)
        want += registerAValue(i, kk) * registerBValue(kk, j);
      bad += c[size_t(i * n + j)] == float(want) ? 0 : 1;
    }
  CHECK(bad == 0);
}

} // namespace

TEST_CASE("wgmma A fragment layout: slot order is the PTX register order a0..a3") {
  // thread t of warpgroup i, atom r, k step s, register j, element l of the register:
  // row 64 (i tilesM + r) + 16 warp + lane / 4 + 8 (j % 2),
  // column s atomK + (j / 2) atomK / 2 + e (lane % 4) + l  (e elements per 32-bit register)
  for (int bits : {16, 8}) {
    const int wgM = 2, tilesM = 2, ksteps = 3, e = 32 / bits, atomK = 4 * 2 * e;
    std::optional<RegisterLayout> layout = wgmmaAFragment(wgM, tilesM, ksteps, bits);
    REQUIRE(layout.has_value());
    CHECK(layout->shape() == std::vector<int64_t>{64 * wgM * tilesM, atomK * ksteps});
    CHECK(layout->numThreads() == 128 * wgM);
    CHECK(layout->numLocals() == tilesM * ksteps * 4 * e);
    int bad = 0;
    for (int t = 0; t < 128 * wgM; ++t)
      for (int r = 0; r < tilesM; ++r)
        for (int s = 0; s < ksteps; ++s)
          for (int j = 0; j < 4; ++j)
            for (int l = 0; l < e; ++l) {
              int wg = t / 128, warp = t / 32 % 4, lane = t % 32;
              int64_t row = 64 * (wg * tilesM + r) + 16 * warp + lane / 4 + 8 * (j % 2);
              int64_t col = s * atomK + (j / 2) * atomK / 2 + e * (lane % 4) + l;
              int64_t slot = ((r * ksteps + s) * 4 + j) * e + l;
              bad += layout->apply(t, slot) == std::vector<int64_t>{row, col} ? 0 : 1;
            }
    CHECK(bad == 0);
  }
  CHECK_FALSE(wgmmaAFragment(1, 1, 1, 32).has_value());
}

TEST_CASE("Wgmma with A in registers: one warpgroup, two atoms along M, two k16 steps, n = 16") {
  std::string src = registerASource(
      "f16", 128, 128, 32, 16,
      "local(2, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 2)",
      "swizzle(column_major(32, 16), 2, 3, 3)", "spatial(32, 4).local(1, 4)",
      "local(2, 1).spatial(4, 1).local(1, 2).local(2, 1).spatial(8, 4).local(1, 2)");
  checkRegisterA(src, false, 128, 32, 16);
}

TEST_CASE("Wgmma with A in registers: two warpgroups along M, N-major B, n = 64") {
  std::string src = registerASource(
      "f16", 256, 128, 32, 64,
      "spatial(2, 1).local(1, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 2)",
      "swizzle(row_major(32, 64), 3, 3, 3)", "spatial(32, 8).local(1, 8)",
      "spatial(2, 1).spatial(4, 1).local(1, 8).local(2, 1).spatial(8, 4).local(1, 2)");
  checkRegisterA(src, false, 128, 32, 64);
}

TEST_CASE("Wgmma with A in registers: f8e4m3, two k32 steps, n = 8") {
  std::string src =
      registerASource("f8e4m3", 128, 64, 64, 8,
                      "local(1, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 4)",
                      "swizzle(column_major(64, 8), 2, 4, 3)", "spatial(64, 2).local(1, 4)",
                      "spatial(4, 1).local(1, 1).local(2, 1).spatial(8, 4).local(1, 2)");
  checkRegisterA(src, true, 64, 64, 8);
}

TEST_CASE("Wgmma with A in registers: a is read until the wait (writes and reads are errors)") {
  const std::string aLayout =
      "local(1, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 2)";
  const std::string bLayout = "swizzle(column_major(32, 8), 2, 3, 3)";
  const std::string bLoad = "spatial(32, 4).local(1, 2)";
  const std::string acc = "spatial(4, 1).local(1, 1).local(2, 1).spatial(8, 4).local(1, 2)";
  std::vector<uint16_t> a(64 * 32), b(32 * 8);
  std::vector<float> c(64 * 8);
  // updating a before the wait
  std::string write =
      registerASource("f16", 128, 64, 32, 8, aLayout, bLayout, bLoad, acc,
                      "    Add(a, a, out=a)\n    WgmmaWaitGroup(0)\n    StoreGlobal(acc, gc)\n");
  Status s = run(build(write), {bufferArg(a), bufferArg(b), bufferArg(c)});
  CHECK_ERROR(s, ErrorCode::Race);
  CHECK(hasDiagnostic(s, ErrorCode::Race,
                      {"test.tasm:15:", "`a` is written while Wgmma at 13:5", "as its A operand",
                       "WgmmaWaitGroup"}));
  // reading a other than as a further Wgmma's A operand
  std::string read =
      registerASource("f16", 128, 64, 32, 8, aLayout, bLayout, bLoad, acc,
                      "    b2 = Add(a, a)\n    WgmmaWaitGroup(0)\n    StoreGlobal(acc, gc)\n");
  s = run(build(read), {bufferArg(a), bufferArg(b), bufferArg(c)});
  CHECK(hasDiagnostic(s, ErrorCode::Race, {"test.tasm:15:", "`a` is read while Wgmma at 13:5"}));
  // after the wait both are fine, and a further Wgmma may read a before it: c = 1 + 2 a @ b
  std::string ok = registerASource("f16", 128, 64, 32, 8, aLayout, bLayout, bLoad, acc,
                                   "    Wgmma(a, sb, acc, out=acc)\n    WgmmaCommitGroup()\n"
                                   "    WgmmaWaitGroup(0)\n    a = Add(a, a)\n"
                                   "    StoreGlobal(acc, gc)\n");
  for (int i = 0; i < 64; ++i)
    for (int kk = 0; kk < 32; ++kk)
      a[size_t(i * 32 + kk)] = doubleToHalf(registerAValue(i, kk));
  for (int kk = 0; kk < 32; ++kk)
    for (int j = 0; j < 8; ++j)
      b[size_t(kk * 8 + j)] = doubleToHalf(registerBValue(kk, j));
  CHECK_OK(run(build(ok), {bufferArg(a), bufferArg(b), bufferArg(c)}));
  int bad = 0;
  for (int i = 0; i < 64; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = 1.0;
      for (int kk = 0; kk < 32; ++kk)
        want += 2.0 * registerAValue(i, kk) * registerBValue(kk, j);
      bad += c[size_t(i * 8 + j)] == float(want) ? 0 : 1;
    }
  CHECK(bad == 0);
}

TEST_CASE("Wgmma with A in registers: a pipelined loop must not redefine a before the wait") {
  // the loop body's a is one variable: the second iteration's LoadGlobal writes it while the
  // first iteration's Wgmma (kept in flight by WgmmaWaitGroup(1)) still reads it
  const char *src = R"(
def k<1>(f16* a_ptr, f16* b_ptr) threads=128:
    ga = ViewGlobal(a_ptr, shape=[64, 32])
    gb = ViewGlobal(b_ptr, shape=[32, 8])
    sb = AllocateShared(f16, shape=[32, 8], layout=swizzle(column_major(32, 8), 2, 3, 3))
    StoreShared(LoadGlobal(gb, layout=spatial(32, 4).local(1, 2)), sb)
    FenceProxyAsync()
    Synchronize()
    acc = AllocateRegister(f32, layout=spatial(4, 1).local(2, 1).spatial(8, 4).local(1, 2))
    for it in range(2):
        a = LoadGlobal(ga, layout=local(1, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 2))
        WgmmaFence()
        Wgmma(a, sb, acc, out=acc)
        WgmmaCommitGroup()
        WgmmaWaitGroup(1)
    WgmmaWaitGroup(0)
)";
  std::vector<uint16_t> a(64 * 32), b(32 * 8);
  Status s = run(build(src), {bufferArg(a), bufferArg(b)});
  CHECK(hasDiagnostic(
      s, ErrorCode::Race,
      {"test.tasm:11:", "`a` is written while Wgmma at 13:9 may still be reading it"}));
  // with the wait for every group in the loop it runs
  CHECK_OK(run(build(replaceAll(src, "WgmmaWaitGroup(1)", "WgmmaWaitGroup(0)")),
               {bufferArg(a), bufferArg(b)}));
}
