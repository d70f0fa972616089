// The atomics and Fence on the interpreter (docs/isa.md, "Atomics"): results against values
// computed by hand, each element updated once however many threads own it, the old values handed
// to every owner, the f32 subnormal rule of global adds, bounds, and the race rules (atomics
// never race with each other, always with plain accesses of the same epoch or of another block).
#include "cpu_test_util.h"

#include <limits>

using namespace cputest;

namespace {

uint32_t bitsOf(float f) {
  uint32_t b;
  std::memcpy(&b, &f, 4);
  return b;
}

float floatOf(uint32_t b) {
  float f;
  std::memcpy(&f, &b, 4);
  return f;
}

} // namespace

TEST_CASE("AtomicAdd of i32 from every block; the old values follow the blocks' order") {
  // Block b adds (t + 1) to element t and records the old value. With one worker the blocks run
  // in linear order, so block b sees b * (t + 1).
  const char *src = R"(
def k<4>(i32* acc_ptr, i32* old_ptr) threads=32:
    b = BlockIndices()
    v = Add(Iota(layout=spatial(32), dim=0), 1)
    old = AtomicAdd(ViewGlobal(acc_ptr, shape=[32]), v)
    StoreGlobal(old, ViewGlobal(old_ptr, shape=[4, 32]), offset=[b, 0:])
)";
  VerifiedModule m = build(src);
  std::vector<int32_t> acc(32, 100), old(128, -1);
  REQUIRE_OK(run(m, {bufferArg(acc), bufferArg(old)}, options(true, 1)));
  for (int t = 0; t < 32; ++t) {
    CHECK(acc[size_t(t)] == 100 + 4 * (t + 1));
    for (int b = 0; b < 4; ++b)
      CHECK(old[size_t(b * 32 + t)] == 100 + b * (t + 1));
  }
  // In parallel the order is open, the sums are not.
  std::vector<int32_t> acc2(32, 0);
  for (int rep = 0; rep < 20; ++rep)
    REQUIRE_OK(run(m, {bufferArg(acc2), bufferArg(old)}, options(true, 4)));
  for (int t = 0; t < 32; ++t)
    CHECK(acc2[size_t(t)] == 20 * 4 * (t + 1));
}

TEST_CASE("a replicated operand updates each element once and every owner gets the old value") {
  // local(4).replicate(32): all 32 threads hold the 4 elements; each is added once, and so is
  // the rank-0 operand of every thread.
  const char *src = R"(
def k<1>(u32* acc_ptr, u32* old_ptr) threads=32:
    v = Add(Iota(layout=local(4).replicate(32), dim=0, dtype=u32), 10)
    old = AtomicAdd(ViewGlobal(acc_ptr, shape=[4]), v)
    StoreGlobal(old, ViewGlobal(old_ptr, shape=[4]))
    one = AllocateRegister(u32, layout=replicate(32), init=1)
    t = AtomicAdd(ViewGlobal(acc_ptr, shape=[4]), one, offset=[3])
    StoreGlobal(t, ViewGlobal(old_ptr, shape=[5]), offset=[4])
)";
  std::vector<uint32_t> acc = {1, 2, 3, 4}, old(5, 0);
  REQUIRE_OK(run(build(src), {bufferArg(acc), bufferArg(old)}));
  CHECK(acc == std::vector<uint32_t>{11, 13, 15, 18});
  CHECK(old == std::vector<uint32_t>{1, 2, 3, 4, 17});
}

TEST_CASE("AtomicMax and AtomicMin compare signed and unsigned integers by their type") {
  const char *src = R"(
def k<1>(i32* s_ptr, u32* u_ptr, i64* l_ptr, i32* old_ptr) threads=32:
    v = Sub(Iota(layout=spatial(4).replicate(8), dim=0), 2)
    AtomicMax(ViewGlobal(s_ptr, shape=[8]), v)
    old = AtomicMin(ViewGlobal(s_ptr, shape=[8]), v, offset=[4:])
    StoreGlobal(old, ViewGlobal(old_ptr, shape=[4]))
    AtomicMax(ViewGlobal(u_ptr, shape=[4]), Cast(v, u32))
    AtomicMin(ViewGlobal(l_ptr, shape=[4]), Cast(v, i64))
)";
  // v = [-2, -1, 0, 1]
  std::vector<int32_t> s = {-5, 0, -7, 3, 1, -3, 0, 0}, old(4);
  std::vector<uint32_t> u = {0, 0xFFFFFFFFu, 5, 0};
  std::vector<int64_t> l = {-1, -1, int64_t(1) << 40, -(int64_t(1) << 40)};
  REQUIRE_OK(run(build(src), {bufferArg(s), bufferArg(u), bufferArg(l), bufferArg(old)}));
  CHECK(s == std::vector<int32_t>{-2, 0, 0, 3, -2, -3, 0, 0});
  CHECK(old == std::vector<int32_t>{1, -3, 0, 0});
  // as u32, -2 and -1 are the largest values
  CHECK(u == std::vector<uint32_t>{0xFFFFFFFEu, 0xFFFFFFFFu, 5, 1});
  CHECK(l == std::vector<int64_t>{-2, -1, 0, -(int64_t(1) << 40)});
}

TEST_CASE("AtomicExch returns the old bits; AtomicCas writes only where the compare matches") {
  const char *src = R"(
def k<1>(f32* f_ptr, f32* fo_ptr, i64* c_ptr, i64* co_ptr) threads=32:
    x = Cast(Iota(layout=spatial(32), dim=0), f32)
    StoreGlobal(AtomicExch(ViewGlobal(f_ptr, shape=[32]), Mul(x, 0.5)), ViewGlobal(fo_ptr, shape=[32]))
    cmp = Cast(Iota(layout=spatial(4).replicate(8), dim=0), i64)
    new = AllocateRegister(i64, layout=spatial(4).replicate(8), init=-9)
    StoreGlobal(AtomicCas(ViewGlobal(c_ptr, shape=[4]), cmp, new), ViewGlobal(co_ptr, shape=[4]))
)";
  std::vector<float> f(32), fo(32);
  for (int i = 0; i < 32; ++i)
    f[size_t(i)] = float(-i) - 0.25f;
  std::vector<int64_t> c = {0, 7, 2, int64_t(1) << 33}, co(4);
  REQUIRE_OK(run(build(src), {bufferArg(f), bufferArg(fo), bufferArg(c), bufferArg(co)}));
  for (int i = 0; i < 32; ++i) {
    CHECK(f[size_t(i)] == float(i) * 0.5f);
    CHECK(fo[size_t(i)] == float(-i) - 0.25f);
  }
  CHECK(c == std::vector<int64_t>{-9, 7, -9, int64_t(1) << 33});
  CHECK(co == std::vector<int64_t>{0, 7, 2, int64_t(1) << 33});
}

TEST_CASE("float adds round once to nearest even; global f32 adds flush subnormals") {
  const char *src = R"(
def k<1>(f16* h_ptr, f16* hv_ptr, f32* g_ptr, f32* gv_ptr, f32* s_out) threads=32:
    hv = LoadGlobal(ViewGlobal(hv_ptr, shape=[4]), layout=spatial(4).replicate(8))
    AtomicAdd(ViewGlobal(h_ptr, shape=[4]), hv)
    gv = LoadGlobal(ViewGlobal(gv_ptr, shape=[4]), layout=spatial(4).replicate(8))
    AtomicAdd(ViewGlobal(g_ptr, shape=[4]), gv)
    s = AllocateShared(f32, shape=[4])
    StoreShared(gv, s)
    Synchronize()
    AtomicAdd(s, gv)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(4).replicate(8)), ViewGlobal(s_out, shape=[4]))
)";
  // f16: 1 + 2^-11 is a tie between 1 and 1 + 2^-10 (to even: 1); 1 + 3 * 2^-11 is a tie
  // between 1 + 2^-10 and 1 + 2^-9 (to even: 1 + 2^-9); 65504 + 16 is a tie that rounds to
  // even 65536, which overflows to inf; -0 + -0 = -0.
  std::vector<uint16_t> h = {0x3C00, 0x3C00, 0x7BFF, 0x8000};
  std::vector<uint16_t> hv = {0x1000, 0x1600, 0x4C00, 0x8000};
  const float sub = floatOf(0x00400000); // 2^-127, subnormal
  std::vector<float> g = {sub, 1.0f, -sub, std::ldexp(1.0f, -125)};
  std::vector<float> gv = {0.0f, sub, -sub, -std::ldexp(1.0f, -126) * 1.5f};
  std::vector<float> sOut(4);
  REQUIRE_OK(
      run(build(src), {bufferArg(h), bufferArg(hv), bufferArg(g), bufferArg(gv), bufferArg(sOut)}));
  CHECK(h == std::vector<uint16_t>{0x3C00, 0x3C02, 0x7C00, 0x8000});
  // global: sub + 0 -> +0 (flushed input), 1 + sub -> 1, -sub + -sub -> -0, 2^-125 - 1.5 * 2^-126
  // = 2^-127 (subnormal result) -> +0
  CHECK(bitsOf(g[0]) == 0x00000000u);
  CHECK(g[1] == 1.0f);
  CHECK(bitsOf(g[2]) == 0x80000000u);
  CHECK(bitsOf(g[3]) == 0x00000000u);
  // shared: no flushing, gv + gv
  CHECK(sOut[0] == 0.0f);
  CHECK(bitsOf(sOut[1]) == 0x00800000u); // 2^-126
  CHECK(bitsOf(sOut[2]) == 0x80800000u);
  CHECK(sOut[3] == -std::ldexp(1.0f, -126) * 3.0f);
}

TEST_CASE("64-bit adds wrap; elements outside a global view are not updated and read 0") {
  const char *src = R"(
def k<1>(u64* a_ptr, u64* old_ptr) threads=32:
    one = AllocateRegister(u64, layout=spatial(32), init=1)
    old = AtomicAdd(ViewGlobal(a_ptr, shape=[3]), one, offset=[1:])
    StoreGlobal(old, ViewGlobal(old_ptr, shape=[32]))
)";
  std::vector<uint64_t> a = {5, std::numeric_limits<uint64_t>::max(), 41, 77}, old(32, 99);
  REQUIRE_OK(run(build(src), {bufferArg(a), bufferArg(old)}));
  CHECK(a == std::vector<uint64_t>{5, 0, 42, 77});
  CHECK(old[0] == std::numeric_limits<uint64_t>::max());
  CHECK(old[1] == 41);
  for (size_t i = 2; i < 32; ++i)
    CHECK(old[i] == 0);
}

TEST_CASE("a shared atomic outside the tensor traps") {
  const char *src = R"(
def k<1>(i32 n) threads=32:
    s = AllocateShared(i32, shape=[40])
    AtomicAdd(s, AllocateRegister(i32, layout=spatial(32), init=1), offset=[n:])
)";
  VerifiedModule m = build(src);
  CHECK_OK(run(m, {i32Arg(8)}));
  Status s = run(m, {i32Arg(9)});
  CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds, {"test.tasm:4:", "AtomicAdd updates index [40]"}));
}

TEST_CASE("atomics do not race with atomics; they race with plain accesses") {
  // Two AtomicAdds of one shared element in one epoch: no race. A LoadShared of it in the same
  // epoch: a race, named by both instructions.
  const char *src = R"(
def k<1>(i32* y_ptr) threads=32:
    s = AllocateShared(i32, shape=[1])
    StoreShared(AllocateRegister(i32, layout=replicate(32)), s, offset=[0])
    Synchronize()
    one = AllocateRegister(i32, layout=replicate(32), init=1)
    AtomicAdd(s, one, offset=[0])
    AtomicAdd(s, one, offset=[0])
    Synchronize()
    y = LoadShared(s, layout=replicate(32), offset=[0])
    AtomicAdd(s, one, offset=[0])
    StoreGlobal(y, ViewGlobal(y_ptr, shape=[1]), offset=[0])
)";
  std::vector<int32_t> y(1);
  Status st = run(build(src), {bufferArg(y)});
  CHECK(y[0] == 2);
  CHECK(hasDiagnostic(st, ErrorCode::Race,
                      {"test.tasm:11:", "AtomicAdd at 11:5", "updates shared element 0 of `s`",
                       "atomically, read by LoadShared at 10:"}));
  CHECK(st.diagnostics().size() == 1);
}

TEST_CASE("across blocks, atomics of one element are clean; a plain read of it races") {
  const char *atomicsOnly = R"(
def k<8>(f32* acc_ptr) threads=32:
    one = AllocateRegister(f32, layout=spatial(32), init=1.0)
    AtomicAdd(ViewGlobal(acc_ptr, shape=[32]), one)
    AtomicExch(ViewGlobal(acc_ptr, shape=[32]), AtomicAdd(ViewGlobal(acc_ptr, shape=[32]), one))
)";
  std::vector<float> acc(32, 0.0f);
  REQUIRE_OK(run(build(atomicsOnly), {bufferArg(acc)}));
  const char *plainRead = R"(
def k<8>(f32* acc_ptr, f32* out_ptr) threads=32:
    b = BlockIndices()
    one = AllocateRegister(f32, layout=spatial(32), init=1.0)
    AtomicAdd(ViewGlobal(acc_ptr, shape=[32]), one)
    if b == 7:
        StoreGlobal(LoadGlobal(ViewGlobal(acc_ptr, shape=[32]), layout=spatial(32)), ViewGlobal(out_ptr, shape=[32]))
)";
  std::vector<float> out(32);
  Status st = run(build(plainRead), {bufferArg(acc), bufferArg(out)});
  CHECK(hasDiagnostic(st, ErrorCode::Race,
                      {"data race between blocks", "updates atomically global element",
                       "LoadGlobal at 7:", "block (7, 0, 0)"}));
}

TEST_CASE("Fence assembles, checks and runs as a no-op on the interpreter") {
  const char *src = R"(
def k<2>(i32* y_ptr) threads=32:
    b = BlockIndices()
    AtomicAdd(ViewGlobal(y_ptr, shape=[1]), AllocateRegister(i32, layout=replicate(32), init=3), offset=[0])
    Fence(scope=gpu)
    Fence(scope=block)
)";
  std::vector<int32_t> y(1, 1);
  REQUIRE_OK(run(build(src), {bufferArg(y)}));
  CHECK(y[0] == 7);
}

TEST_CASE("AtomicStore and AtomicLoad: values, bounds, replicated tiles, global and shared") {
  // Block b stores 10 b + t into row b (t < 3 of a tile of 4 that leaves the [2, 3] view: the
  // fourth element is dropped), then reads row b back, a replicated rank-0 element and one
  // outside the view (0); in shared memory the same through a replicated operand (one write per
  // element).
  const char *src = R"(
def k<2>(i64* w_ptr, i64* out_ptr, f32* s_out) threads=32:
    b = BlockIndices()
    w = ViewGlobal(w_ptr, shape=[2, 3])
    v = Add(Cast(Iota(layout=local(4).replicate(32), dim=0), i64), 10 * b)
    AtomicStore(w, v, offset=[b, 0:])
    Synchronize()
    row = AtomicLoad(w, layout=local(4).replicate(32), offset=[b, 0:])
    StoreGlobal(row, ViewGlobal(out_ptr, shape=[2, 6]), offset=[b, 0:])
    one = AtomicLoad(w, layout=replicate(32), offset=[b, 2])
    StoreGlobal(one, ViewGlobal(out_ptr, shape=[2, 6]), offset=[b, 4])
    off = AtomicLoad(w, layout=replicate(32), offset=[b + 2, 0])
    StoreGlobal(off, ViewGlobal(out_ptr, shape=[2, 6]), offset=[b, 5])
    s = AllocateShared(f32, shape=[8])
    AtomicStore(s, Cast(Iota(layout=local(8).replicate(32), dim=0), f32))
    Synchronize()
    x = AtomicLoad(s, layout=spatial(8).replicate(4), offset=[0:])
    StoreGlobal(Mul(x, 0.5), ViewGlobal(s_out, shape=[2, 8]), offset=[b, 0:])
)";
  std::vector<int64_t> w(6, -1), out(12, 99);
  std::vector<float> sOut(16, -1.0f);
  REQUIRE_OK(run(build(src), {bufferArg(w), bufferArg(out), bufferArg(sOut)}));
  CHECK(w == std::vector<int64_t>{0, 1, 2, 10, 11, 12});
  CHECK(out == std::vector<int64_t>{0, 1, 2, 0, 2, 0, 10, 11, 12, 0, 12, 0});
  for (int i = 0; i < 16; ++i)
    CHECK(sOut[size_t(i)] == 0.5f * float(i % 8));
}

TEST_CASE("AtomicStore and AtomicLoad race with nothing atomic; plain accesses race with them") {
  // Every block stores its partial into its own slot and reads every slot (including the other
  // blocks' ones) with AtomicLoad: no race across blocks. A LoadGlobal of a slot that another
  // block writes with AtomicStore is one; so is an AtomicLoad of a slot that another block
  // writes with StoreGlobal.
  const char *clean = R"(
def k<4>(i32* out_ptr) threads=32:
    b = BlockIndices()
    w = AllocateGlobal(i32, shape=[4, 32])
    AtomicStore(w, Add(Iota(layout=spatial(32), dim=0), b), offset=[b, 0:])
    Fence(scope=gpu)
    seen = AtomicLoad(w, layout=local(4, 1).spatial(1, 32), offset=[0:, 0:])
    StoreGlobal(Reduce(seen, dim=0, op=max), ViewGlobal(out_ptr, shape=[4, 32]), offset=[b, 0:])
)";
  std::vector<int32_t> out(128, -1);
  REQUIRE_OK(run(build(clean), {bufferArg(out)}, options(true, 1)));
  // with one worker, block b sees the slots of blocks 0..b (later ones are still 0)
  for (int b = 0; b < 4; ++b)
    for (int t = 0; t < 32; ++t)
      CHECK(out[size_t(b * 32 + t)] == t + b);
  const char *plainRead = R"(
def k<2>(i32* out_ptr) threads=32:
    b = BlockIndices()
    w = AllocateGlobal(i32, shape=[32])
    if b == 0:
        AtomicStore(w, Iota(layout=spatial(32), dim=0))
    if b == 1:
        StoreGlobal(LoadGlobal(w, layout=spatial(32)), ViewGlobal(out_ptr, shape=[32]))
)";
  Status st = run(build(plainRead), {bufferArg(out)});
  CHECK(hasDiagnostic(st, ErrorCode::Race,
                      {"data race between blocks", "AtomicStore at 6:", "LoadGlobal at 8:"}));
  const char *plainWrite = R"(
def k<2>(i32* out_ptr) threads=32:
    b = BlockIndices()
    w = AllocateGlobal(i32, shape=[32])
    if b == 0:
        StoreGlobal(Iota(layout=spatial(32), dim=0), w)
    if b == 1:
        StoreGlobal(AtomicLoad(w, layout=spatial(32)), ViewGlobal(out_ptr, shape=[32]))
)";
  st = run(build(plainWrite), {bufferArg(out)});
  CHECK(hasDiagnostic(st, ErrorCode::Race,
                      {"data race between blocks", "StoreGlobal at 6:", "AtomicLoad at 8:"}));
}
