// StoreScalar (docs/isa.md): one element of a global or shared tensor written with a scalar
// expression's value, converted to the element type; a global element outside the tensor is
// not written; a run-time shared index outside the tensor traps; the race detector sees a write
// by thread 0. Expected values are computed by hand in the tests.
#include "cpu_test_util.h"

using namespace cputest;

TEST_CASE("StoreScalar writes one element per block, converted to the element type") {
  // Block b writes counts[b] = 10 b + 1 (i32), h[b] = 0.75 b (f16), flags[b] = 300 + b
  // (i32 -> u8 keeps the low 8 bits) into a view of 2 elements (block 2 writes nothing), and
  // y[b, 2] = b + 5 through shared memory, the rest of its row zero.
  const char *src = R"(
def k<3>(i32* counts, f16* h, u8* flags, i32* y) threads=32:
    b = BlockIndices()
    StoreScalar(ViewGlobal(counts, shape=[3]), offset=[b], value=b * 10 + 1)
    StoreScalar(ViewGlobal(h, shape=[3]), offset=[b], value=f32(b) * 0.75)
    StoreScalar(ViewGlobal(flags, shape=[2]), offset=[b], value=300 + b)
    s = AllocateShared(i32, shape=[4])
    StoreShared(AllocateRegister(i32, layout=local(4).replicate(32), init=0), s)
    Synchronize()
    StoreScalar(s, offset=[2], value=b + 5)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=local(4).replicate(32)), ViewGlobal(y, shape=[3, 4]), offset=[b, 0:])
)";
  std::vector<int32_t> counts(3, -1), y(12, -1);
  std::vector<uint16_t> h(3, 0xFFFF);
  std::vector<uint8_t> flags = {9, 9, 9};
  CHECK_OK(run(build(src), {bufferArg(counts), bufferArg(h), bufferArg(flags), bufferArg(y)}));
  CHECK(counts == std::vector<int32_t>{1, 11, 21});
  CHECK(h == std::vector<uint16_t>{0x0000, 0x3A00, 0x3E00}); // 0, 0.75, 1.5
  CHECK(flags == std::vector<uint8_t>{44, 45, 9});           // 300 mod 256, 301 mod 256, untouched
  CHECK(y == std::vector<int32_t>{0, 0, 5, 0, 0, 0, 6, 0, 0, 0, 7, 0});
}

TEST_CASE("StoreScalar outside a global tensor writes nothing; outside a shared one traps") {
  const char *global = R"(
def k<1>(i32* x_ptr, i32 i) threads=32:
    g = ViewGlobal(x_ptr, shape=[3])
    StoreScalar(SliceGlobal(g, offset=[1:]), offset=[i], value=8)
)";
  for (int i : {-1, 0, 1, 2}) {
    CAPTURE(i);
    std::vector<int32_t> x(4, 0);
    CHECK_OK(run(build(global), {bufferArg(x), i32Arg(i)}));
    // the slice holds elements 1 and 2 of the view; index 2 of the slice is element 3 of the
    // buffer, outside the view's 3 elements
    std::vector<int32_t> want(4, 0);
    if (i == 0 || i == 1)
      want[size_t(i + 1)] = 8;
    CHECK(x == want);
  }
  const char *shared = R"(
def k<1>(i32 i) threads=32:
    s = AllocateShared(i32, shape=[4])
    StoreScalar(s, offset=[i], value=1)
)";
  CHECK_OK(run(build(shared), {i32Arg(3)}));
  Status s = run(build(shared), {i32Arg(4)});
  CHECK_ERROR(s, ErrorCode::OutOfBounds);
  CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds, {"test.tasm:4:", "StoreScalar", "[4]"}));
}

TEST_CASE("StoreScalar is a write by thread 0 for the race detector") {
  auto program = [](bool synchronize) {
    return std::string(R"(
def k<1>(i32* y_ptr) threads=32:
    s = AllocateShared(i32, shape=[32])
    StoreScalar(s, offset=[7], value=42)
)") + (synchronize ? "    Synchronize()\n" : "    pass\n") +
           R"(    v = LoadShared(s, layout=spatial(32))
    StoreGlobal(v, ViewGlobal(y_ptr, shape=[32]))
)";
  };
  std::vector<int32_t> y(32, -1);
  Status racy = run(build(program(false)), {bufferArg(y)});
  CHECK_ERROR(racy, ErrorCode::Race);
  CHECK(hasDiagnostic(racy, ErrorCode::Race, {"LoadShared", "StoreScalar"}));
  CHECK_OK(run(build(program(true)), {bufferArg(y)}));
  CHECK(y[7] == 42);
}
