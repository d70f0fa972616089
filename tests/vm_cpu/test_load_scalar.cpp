// LoadScalar (docs/isa.md): a block table followed page by page, sequence lengths as loop
// bounds and conditions, out-of-bounds global reads that give 0, conversions to the scalar's
// dtype (sub-byte and f16 elements included), shared sources, a trap on a run-time shared index
// outside the tensor, and the race detector seeing the read. Expected values are computed by
// hand in the tests.
#include "cpu_test_util.h"

using namespace cputest;

TEST_CASE("LoadScalar follows a block table: pages, lengths and conditions from memory") {
  // Block b sums rows table[b, j] of data for j < lens[b], skipping negative table entries.
  const char *src = R"(
def k<3>(i32* table, i32* lens, f32* data, f32* out) threads=32:
    b = BlockIndices()
    gt = ViewGlobal(table, shape=[3, 4])
    gd = ViewGlobal(data, shape=[8, 32])
    go = ViewGlobal(out, shape=[3, 32])
    n = LoadScalar(ViewGlobal(lens, shape=[3]), offset=[b], dtype=i32)
    acc = AllocateRegister(f32, layout=spatial(32), init=0.0)
    for j in range(n):
        page = LoadScalar(gt, offset=[b, j], dtype=i32)
        if page >= 0:
            x = LoadGlobal(gd, layout=spatial(32), offset=[page, 0:])
            acc = Add(acc, x)
    StoreGlobal(acc, go, offset=[b, 0:])
)";
  std::vector<int32_t> table = {5, 2, 7, 0, /**/ 3, -1, 3, 1, /**/ 6, 6, 6, 6};
  std::vector<int32_t> lens = {2, 4, 0};
  std::vector<float> data(8 * 32), out(3 * 32, -1.0f);
  for (size_t r = 0; r < 8; ++r)
    for (size_t c = 0; c < 32; ++c)
      data[r * 32 + c] = float(r * 100 + c);
  CHECK_OK(run(build(src), {bufferArg(table), bufferArg(lens), bufferArg(data), bufferArg(out)}));
  for (size_t c = 0; c < 32; ++c) {
    CAPTURE(c);
    CHECK(out[c] == float(500 + c) + float(200 + c));                       // pages 5, 2
    CHECK(out[32 + c] == float(300 + c) + float(300 + c) + float(100 + c)); // 3, (-1), 3, 1
    CHECK(out[64 + c] == 0.0f);                                             // length 0
  }
}

TEST_CASE("LoadScalar of a global element outside the tensor reads 0") {
  // The view has 5 elements of a 16-element buffer; a slice of it ends at the view's end.
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr) threads=32:
    g = ViewGlobal(x_ptr, shape=[5])
    s = SliceGlobal(g, offset=[3:])
    gy = ViewGlobal(y_ptr, shape=[6])
    a = LoadScalar(g, offset=[4], dtype=i32)
    b = LoadScalar(g, offset=[5], dtype=i32)
    c = LoadScalar(g, offset=[-1], dtype=i32)
    d = LoadScalar(s, offset=[1], dtype=i32)
    e = LoadScalar(s, offset=[2], dtype=i32)
    f = LoadScalar(SliceGlobal(g, offset=[9:]), offset=[0], dtype=i32)
    v = AllocateRegister(i32, layout=local(6).replicate(32), init=0)
    i = Iota(layout=local(6).replicate(32), dim=0)
    v = Where(Eq(i, 0), a, v)
    v = Where(Eq(i, 1), b, v)
    v = Where(Eq(i, 2), c, v)
    v = Where(Eq(i, 3), d, v)
    v = Where(Eq(i, 4), e, v)
    v = Where(Eq(i, 5), f, v)
    StoreGlobal(v, gy)
)";
  std::vector<int32_t> x(16), y(6, -7);
  for (size_t i = 0; i < 16; ++i)
    x[i] = int32_t(i) * 10 + 1;
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y)}));
  // a = x[4]; b, c outside the view; d = x[4]; e = index 5 of the view (outside); f outside
  CHECK(y == std::vector<int32_t>{41, 0, 0, 41, 0, 0});
}

TEST_CASE("LoadScalar converts the element to its dtype (sub-byte, f16, signed, float)") {
  const char *src = R"(
def k<1>(u4* q_ptr, f16* h_ptr, i8* s_ptr, f32* f_ptr, f32* y_ptr) threads=32:
    q = LoadScalar(ViewGlobal(q_ptr, shape=[8]), offset=[5], dtype=i32)
    h = LoadScalar(ViewGlobal(h_ptr, shape=[2]), offset=[1], dtype=f32)
    s = LoadScalar(ViewGlobal(s_ptr, shape=[2]), offset=[0], dtype=i32)
    t = LoadScalar(ViewGlobal(f_ptr, shape=[2]), offset=[1], dtype=i32)
    u = LoadScalar(ViewGlobal(f_ptr, shape=[2]), offset=[0], dtype=bool)
    i = Iota(layout=local(5).replicate(32), dim=0)
    v = AllocateRegister(f32, layout=local(5).replicate(32), init=0.0)
    v = Where(Eq(i, 0), f32(q), v)
    v = Where(Eq(i, 1), h, v)
    v = Where(Eq(i, 2), f32(s), v)
    v = Where(Eq(i, 3), f32(t), v)
    v = Where(Eq(i, 4), f32(u), v)
    StoreGlobal(v, ViewGlobal(y_ptr, shape=[5]))
)";
  // u4 element 5 lives in the high nibble of byte 2: 0xB0 -> 11
  std::vector<uint8_t> q = {0x21, 0x43, 0xB5, 0x87};
  std::vector<uint16_t> h = {0, 0x3E00}; // 1.5
  std::vector<int8_t> s = {-3, 0};
  std::vector<float> f = {0.25f, -7.9f}, y(5, -1.0f);
  CHECK_OK(run(build(src), {bufferArg(q), bufferArg(h), bufferArg(s), bufferArg(f), bufferArg(y)}));
  // -7.9 truncates toward zero; 0.25 != 0 is true
  CHECK(y == std::vector<float>{11.0f, 1.5f, -3.0f, -7.0f, 1.0f});
}

TEST_CASE("LoadScalar of shared memory: after Synchronize, a loop bound from it, a while") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr) threads=32:
    s = AllocateShared(i32, shape=[2, 16])
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[2, 16]), layout=spatial(2, 16))
    StoreShared(x, s)
    Synchronize()
    n = LoadScalar(s, offset=[1, 15], dtype=i32)
    total = 0
    for j in range(n):
        t = LoadScalar(s, offset=[0, j], dtype=i32)
        total = total + t
    k = 0
    c = LoadScalar(s, offset=[0, 0], dtype=i32)
    while c != 0:
        k = k + 1
        c = LoadScalar(s, offset=[0, k], dtype=i32)
    v = AllocateRegister(i32, layout=local(2).replicate(32), init=total)
    v = Where(Eq(Iota(layout=local(2).replicate(32), dim=0), 1), k, v)
    StoreGlobal(v, ViewGlobal(y_ptr, shape=[2]))
)";
  std::vector<int32_t> x(32, 0), y(2, -1);
  for (int j = 0; j < 10; ++j)
    x[size_t(j)] = j + 1; // 1..10, then zeros
  x[31] = 4;              // n
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y)}));
  CHECK(y == std::vector<int32_t>{1 + 2 + 3 + 4, 10});
}

TEST_CASE("LoadScalar of shared memory at a run-time index outside the tensor traps") {
  const char *src = R"(
def k<1>(i32* x_ptr) threads=32:
    s = AllocateShared(i32, shape=[4])
    StoreShared(AllocateRegister(i32, layout=local(4).replicate(32), init=1), s)
    Synchronize()
    i = LoadScalar(ViewGlobal(x_ptr, shape=[1]), offset=[0], dtype=i32)
    v = LoadScalar(s, offset=[i], dtype=i32)
)";
  std::vector<int32_t> inside = {3}, outside = {4};
  CHECK_OK(run(build(src), {bufferArg(inside)}));
  Status s = run(build(src), {bufferArg(outside)});
  CHECK_ERROR(s, ErrorCode::OutOfBounds);
  CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds, {"test.tasm:7:", "LoadScalar", "[4]"}));
}

TEST_CASE("LoadScalar is a read for the race detector") {
  auto program = [](bool synchronize) {
    return std::string(R"(
def k<1>(i32* y_ptr) threads=32:
    s = AllocateShared(i32, shape=[32])
    StoreShared(Iota(layout=spatial(32), dim=0), s)
)") + (synchronize ? "    Synchronize()\n" : "    pass\n") +
           R"(    n = LoadScalar(s, offset=[7], dtype=i32)
    StoreGlobal(AllocateRegister(i32, layout=local(1).replicate(32), init=n), ViewGlobal(y_ptr, shape=[1]))
)";
  };
  std::vector<int32_t> y(1, -1);
  Status racy = run(build(program(false)), {bufferArg(y)});
  CHECK_ERROR(racy, ErrorCode::Race);
  CHECK(hasDiagnostic(racy, ErrorCode::Race, {"LoadScalar", "StoreShared"}));
  CHECK_OK(run(build(program(true)), {bufferArg(y)}));
  CHECK(y[0] == 7);
}

TEST_CASE("LoadScalar of an element another block writes is a cross-block race") {
  const char *src = R"(
def k<2>(i32* x_ptr) threads=32:
    b = BlockIndices()
    g = ViewGlobal(x_ptr, shape=[2])
    if b == 0:
        StoreGlobal(AllocateRegister(i32, layout=local(1).replicate(32), init=5), g, offset=[1:])
    else:
        v = LoadScalar(g, offset=[1], dtype=i32)
)";
  std::vector<int32_t> x(2, 0);
  Status s = run(build(src), {bufferArg(x)});
  CHECK_ERROR(s, ErrorCode::Race);
}
