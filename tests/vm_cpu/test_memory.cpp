// Global and shared memory: bounds (out-of-bounds global reads give 0 and stores are dropped,
// shared accesses outside the tensor trap with a location), slices and strides, bit-packed
// sub-byte stores from many threads and many blocks into shared bytes, shared layouts, the
// CopyAsync group semantics (data lands at the covering wait), and the global workspace.
#include "byte_transpose_program.h"
#include "cpu_test_util.h"

#include <random>

using namespace cputest;

TEST_CASE("global bounds: out-of-bounds reads give 0, stores outside the view are dropped") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr, i32 n) threads=32:
    gx = ViewGlobal(x_ptr, shape=[n])
    gy = ViewGlobal(y_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(32), offset=[4:])
    StoreGlobal(Add(x, 1.0), gy, offset=[6:])
)";
  // n = 20 of 64 allocated elements: the view ends at 20 although the buffer goes on
  std::vector<float> x(64), y(64, -5.0f);
  for (size_t i = 0; i < 64; ++i)
    x[i] = float(i);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y), i32Arg(20)}));
  for (size_t j = 0; j < 64; ++j) {
    CAPTURE(j);
    if (j < 6 || j >= 20) {
      CHECK(y[j] == -5.0f); // untouched
      continue;
    }
    size_t src_index = j - 6 + 4;
    CHECK(y[j] == (src_index < 20 ? x[src_index] : 0.0f) + 1.0f);
  }
}

TEST_CASE("slices compose offsets, default to the remaining extent and stay inside the parent") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr, i32* z_ptr) threads=32:
    g = ViewGlobal(x_ptr, shape=[6, 8])
    s = SliceGlobal(g, offset=[2:, 3:])
    row = SliceGlobal(s, offset=[1, 0:])
    StoreGlobal(LoadGlobal(s, layout=spatial(4, 8)), ViewGlobal(y_ptr, shape=[4, 8]))
    StoreGlobal(LoadGlobal(row, layout=spatial(32)), ViewGlobal(z_ptr, shape=[32]))
)";
  std::vector<int32_t> x(64), y(32, -1), z(32, -1);
  for (size_t i = 0; i < 64; ++i)
    x[i] = int32_t(i) + 100;
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y), bufferArg(z)}));
  // s is rows 2..5, columns 3..7 of the 6x8 view (shape [4, 5]); column 5.. of the tile is
  // outside it (even though the buffer has data there) and reads 0
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 8; ++j)
      CHECK(y[i * 8 + j] == (j < 5 ? x[(i + 2) * 8 + j + 3] : 0));
  for (size_t j = 0; j < 32; ++j)
    CHECK(z[j] == (j < 5 ? x[3 * 8 + j + 3] : 0));
}

TEST_CASE("explicit strides: a column-major view and a shape from strides") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr) threads=32:
    g = ViewGlobal(x_ptr, shape=[8, 4], strides=[1, 8])
    StoreGlobal(LoadGlobal(g, layout=spatial(8, 4)), ViewGlobal(y_ptr, shape=[8, 4]))
)";
  std::vector<int32_t> x(32), y(32);
  for (size_t i = 0; i < 32; ++i)
    x[i] = int32_t(i * 3);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y)}));
  for (size_t i = 0; i < 8; ++i)
    for (size_t j = 0; j < 4; ++j)
      CHECK(y[i * 4 + j] == x[j * 8 + i]);
}

namespace {

/// Store u<bits> values from every thread so that neighbouring elements of different threads
/// (and, with several blocks, of different blocks) share bytes.
void packedStoreCase(const std::string &dtype, int bits, int blocks, int workers) {
  std::string src = R"(
def k<BLOCKS>(i32* in_ptr, T* out_ptr) threads=32:
    b = BlockIndices()
    v = LoadGlobal(ViewGlobal(in_ptr, shape=[BLOCKS * 96]), layout=spatial(32).local(3), offset=[b * 96:])
    StoreGlobal(Cast(v, T), ViewGlobal(out_ptr, shape=[BLOCKS * 96]), offset=[b * 96:])
)";
  src = replaceAll(replaceAll(replaceAll(src, "BLOCKS", std::to_string(blocks)), "T*", dtype + "*"),
                   ", T)", ", " + dtype + ")");
  int64_t n = int64_t(blocks) * 96;
  std::vector<int32_t> in(static_cast<size_t>(n));
  std::mt19937 rng(uint32_t(bits * 1000 + blocks));
  for (int32_t &v : in)
    v = int32_t(rng() % (1u << bits));
  if (dtype[0] == 'i')
    for (int32_t &v : in)
      v -= 1 << (bits - 1);
  VerifiedModule m = build(src);
  for (int repeat = 0; repeat < 5; ++repeat) {
    std::vector<uint8_t> out(size_t((n * bits + 7) / 8), uint8_t(0xA5));
    CHECK_OK(run(m, {bufferArg(in), bufferArg(out)}, options(true, workers)));
    std::vector<uint8_t> want(out.size(), uint8_t(0xA5)); // bits past the end stay
    for (int64_t k = 0; k < n; ++k)
      putPacked(want, k, bits, uint32_t(in[size_t(k)]) & ((1u << bits) - 1));
    CHECK(out == want);
  }
}

} // namespace

TEST_CASE("packed sub-byte stores from many threads into shared bytes (u3, i5, u6)") {
  packedStoreCase("u3", 3, 1, 1);
  packedStoreCase("i5", 5, 1, 1);
  packedStoreCase("u6", 6, 1, 1);
}

TEST_CASE("packed sub-byte stores from parallel blocks sharing bytes at block boundaries") {
  // 96 elements of 3 or 5 bits per block: block boundaries fall inside bytes
  packedStoreCase("u3", 3, 24, 4);
  packedStoreCase("i5", 5, 24, 4);
}

TEST_CASE("sub-byte loads sign-extend signed types") {
  const char *src = R"(
def k<1>(i5* x_ptr, u5* y_ptr, i32* a_ptr, i32* b_ptr) threads=32:
    StoreGlobal(Cast(LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32).local(2)), i32), ViewGlobal(a_ptr, shape=[64]))
    StoreGlobal(Cast(LoadGlobal(ViewGlobal(y_ptr, shape=[64]), layout=local(2).spatial(32)), i32), ViewGlobal(b_ptr, shape=[64]))
)";
  std::vector<uint8_t> packed(40);
  for (int k = 0; k < 64; ++k)
    putPacked(packed, k, 5, uint32_t(k * 7) % 32);
  std::vector<int32_t> a(64), b(64);
  CHECK_OK(run(build(src), {bufferArg(packed), bufferArg(packed), bufferArg(a), bufferArg(b)}));
  for (int k = 0; k < 64; ++k) {
    int u = (k * 7) % 32;
    CHECK(b[size_t(k)] == u);
    CHECK(a[size_t(k)] == (u >= 16 ? u - 32 : u));
  }
}

TEST_CASE("shared memory round trip through swizzled and tiled layouts, transposed on reload") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr, i32* z_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[8, 16]), layout=spatial(8, 4).local(1, 4))
    s = AllocateShared(i32, shape=[8, 16], layout=swizzle(row_major(8, 16), 2, 0, 4))
    t = AllocateShared(i32, shape=[8, 16], layout=column_major(2, 4).row_major(4, 4))
    StoreShared(x, s)
    StoreShared(x, t)
    Synchronize()
    a = LoadShared(s, layout=local(8, 1).spatial(1, 16).replicate(2))
    b = LoadShared(t, layout=spatial(2, 16).local(4, 1))
    StoreGlobal(a, ViewGlobal(y_ptr, shape=[8, 16]))
    StoreGlobal(b, ViewGlobal(z_ptr, shape=[8, 16]))
)";
  std::vector<int32_t> x(128), y(128), z(128);
  for (size_t i = 0; i < 128; ++i)
    x[i] = int32_t(i * 7 + 1);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y), bufferArg(z)}));
  CHECK(y == x);
  CHECK(z == x);
}

TEST_CASE("shared accesses outside the tensor trap with the instruction's location") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32 start) threads=32:
    s = AllocateShared(i32, shape=[16])
    v = AllocateRegister(i32, layout=spatial(16).replicate(2), init=1)
    StoreShared(v, s, offset=[start:])
)";
  VerifiedModule m = build(src);
  std::vector<int32_t> x(1);
  CHECK_OK(run(m, {bufferArg(x), i32Arg(0)}));
  Status s = run(m, {bufferArg(x), i32Arg(3)});
  CHECK_ERROR(s, ErrorCode::OutOfBounds);
  CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds,
                      {"test.tasm:5:", "StoreShared", "[16]", "block (0, 0, 0)"}));
  // traps in unchecked mode too
  CHECK_ERROR(run(m, {bufferArg(x), i32Arg(-1)}, options(false)), ErrorCode::OutOfBounds);
}

TEST_CASE("CopyAsync data lands at the covering wait: early readers see the old contents") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* early_ptr, i32* one_ptr, i32* late_ptr) threads=32:
    g = ViewGlobal(x_ptr, shape=[64])
    s = AllocateShared(i32, shape=[2, 32])
    StoreShared(AllocateRegister(i32, layout=spatial(2, 16).local(1, 2), init=-1), s)
    Synchronize()
    CopyAsync(SliceShared(s, offset=[0, 0:]), g, offset=[0:])
    CopyAsyncCommitGroup()
    CopyAsync(SliceShared(s, offset=[1, 0:]), g, offset=[32:])
    CopyAsyncCommitGroup()
    StoreGlobal(LoadShared(s, layout=spatial(2, 16).local(1, 2)), ViewGlobal(early_ptr, shape=[2, 32]))
    CopyAsyncWaitGroup(1)
    StoreGlobal(LoadShared(s, layout=spatial(2, 16).local(1, 2)), ViewGlobal(one_ptr, shape=[2, 32]))
    CopyAsyncWaitAll()
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(2, 16).local(1, 2)), ViewGlobal(late_ptr, shape=[2, 32]))
)";
  VerifiedModule m = build(src);
  std::vector<int32_t> x(64), early(64), one(64), late(64);
  for (size_t i = 0; i < 64; ++i)
    x[i] = int32_t(i) * 10;
  Status unchecked =
      run(m, {bufferArg(x), bufferArg(early), bufferArg(one), bufferArg(late)}, options(false));
  CHECK_OK(unchecked);
  for (size_t i = 0; i < 64; ++i) {
    CHECK(early[i] == -1);
    CHECK(one[i] == (i < 32 ? x[i] : -1)); // the older group only
    CHECK(late[i] == x[i]);
  }
  // checked mode reports the early reads (and the read right after the wait, before any
  // Synchronize), at the lines of the LoadShared instructions
  Status checked = run(m, {bufferArg(x), bufferArg(early), bufferArg(one), bufferArg(late)});
  CHECK_ERROR(checked, ErrorCode::Race);
  CHECK(hasDiagnostic(checked, ErrorCode::Race,
                      {"test.tasm:11:", "may still be copying", "CopyAsync at 7:"}));
  CHECK(hasDiagnostic(checked, ErrorCode::Race, {"test.tasm:13:", "delivered by CopyAsync at 7:"}));
  CHECK(hasDiagnostic(checked, ErrorCode::Race,
                      {"test.tasm:13:", "may still be copying", "CopyAsync at 9:"}));
  CHECK_FALSE(hasDiagnostic(checked, ErrorCode::Race, {"test.tasm:16:"}));
}

TEST_CASE("CopyAsync of a partial tile reads zeros outside the global tensor") {
  const char *src = R"(
def k<1>(f16* x_ptr, f16* y_ptr, i32 n) threads=32:
    s = AllocateShared(f16, shape=[4, 8])
    CopyAsync(s, ViewGlobal(x_ptr, shape=[n, 8]), offset=[2:, 0:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitGroup(0)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(4, 8)), ViewGlobal(y_ptr, shape=[4, 8]))
)";
  std::vector<uint16_t> x(48), y(32, 0xFFFF);
  for (size_t i = 0; i < 48; ++i)
    x[i] = doubleToHalf(double(i));
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y), i32Arg(5)}));
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 0; c < 8; ++c)
      CHECK(y[r * 8 + c] == (r + 2 < 5 ? x[(r + 2) * 8 + c] : 0));
}

TEST_CASE("AllocateGlobal workspace: requires_clean starts zeroed and must be left zeroed") {
  const char *src = R"(
def k<1>(i32* y_ptr, i32 leave) threads=32:
    w = AllocateGlobal(i32, shape=[32], requires_clean=True)
    v = LoadGlobal(w, layout=spatial(32))
    Synchronize()
    StoreGlobal(Add(v, Iota(layout=spatial(32), dim=0)), w)
    Synchronize()
    StoreGlobal(LoadGlobal(w, layout=spatial(32)), ViewGlobal(y_ptr, shape=[32]))
    Synchronize()
    if leave == 0:
        StoreGlobal(AllocateRegister(i32, layout=spatial(32)), w)
)";
  VerifiedModule m = build(src);
  std::vector<int32_t> y(32);
  CHECK_OK(run(m, {bufferArg(y), i32Arg(0)}));
  for (int32_t i = 0; i < 32; ++i)
    CHECK(y[size_t(i)] == i);
  Status dirty = run(m, {bufferArg(y), i32Arg(1)});
  CHECK(hasDiagnostic(dirty, ErrorCode::Runtime,
                      {"requires_clean workspace left dirty", "test.tasm:3:", "31 of 128 bytes"}));
}

TEST_CASE("a pointer argument smaller than the view is an error, not a host overflow") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr) threads=32:
    StoreGlobal(LoadGlobal(ViewGlobal(x_ptr, shape=[32]), layout=spatial(32)), ViewGlobal(y_ptr, shape=[32]))
)";
  std::vector<float> x(16), y(32);
  Status s = run(build(src), {bufferArg(x), bufferArg(y)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"64-byte buffer", "`x_ptr`"}));
}

TEST_CASE("SliceShared: default and explicit lengths; a tile past the slice's parent traps") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr, i32* z_ptr, i32 col) threads=32:
    s = AllocateShared(i32, shape=[4, 16])
    StoreShared(LoadGlobal(ViewGlobal(x_ptr, shape=[4, 16]), layout=spatial(4, 8).local(1, 2)), s)
    Synchronize()
    right = SliceShared(s, offset=[0:, 8:])
    one = SliceShared(right, offset=[2, 0:], shape=[4])
    StoreGlobal(LoadShared(right, layout=spatial(4, 8)), ViewGlobal(y_ptr, shape=[4, 8]))
    StoreGlobal(LoadShared(one, layout=spatial(4).replicate(8), offset=[col:]), ViewGlobal(z_ptr, shape=[4]))
)";
  VerifiedModule m = build(src);
  std::vector<int32_t> x(64), y(32, -1), z(4, -1);
  for (size_t i = 0; i < 64; ++i)
    x[i] = int32_t(i) * 3;
  CHECK_OK(run(m, {bufferArg(x), bufferArg(y), bufferArg(z), i32Arg(0)}));
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 0; c < 8; ++c)
      CHECK(y[r * 8 + c] == x[r * 16 + 8 + c]);
  for (size_t c = 0; c < 4; ++c)
    CHECK(z[c] == x[2 * 16 + 8 + c]);
  // `one` has length 4 inside a row of 8: starting at column 1 the tile leaves `one` although
  // it stays inside `right` and `s`
  Status s = run(m, {bufferArg(x), bufferArg(y), bufferArg(z), i32Arg(1)});
  CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds,
                      {"test.tasm:9:17:", "LoadShared reads index [4]", "shape [4]"}));
}

TEST_CASE("byte transposes: words viewed as bytes, reordered k fastest, through shared memory") {
  // tests/byte_transpose_program.h: out[k, n] = byte n % 4 of w[k, n / 4] for every kernel
  VerifiedModule m = build(tilus::testing::kByteTransposes);
  std::mt19937 rng(7);
  for (auto [name, rows] :
       {std::pair{"transpose4", 16}, std::pair{"transpose8", 32}, std::pair{"rows", 16}}) {
    INFO(name);
    std::vector<uint32_t> w(size_t(rows) * 32);
    for (uint32_t &x : w)
      x = uint32_t(rng());
    std::vector<uint8_t> out(size_t(rows) * 128, 0);
    CHECK_OK(run(m, {bufferArg(w), bufferArg(out)}, options(), name));
    for (int k = 0; k < rows; ++k)
      for (int n = 0; n < 128; ++n)
        CHECK(out[size_t(k * 128 + n)] == uint8_t(w[size_t(k * 32 + n / 4)] >> (8 * (n % 4))));
  }
}
