// The out-of-bounds rules of the ISA (section 1, Bounds) on every memory instruction, against
// expectations computed here: LoadGlobal and CopyAsync read elements outside the global view as
// 0 and StoreGlobal drops them, for fixed indices below, at and past the extent, slices partly
// and wholly outside, and negative starts, on a view that ends before its buffer does and on a
// SliceGlobal whose parent has data all around it (so an element wrongly taken as inside would
// show the buffer's data); LoadShared and StoreShared trap on every such access and move the
// data of every access inside.
#include "cpu_test_util.h"

using namespace cputest;

namespace {

// VIEW is replaced by a [4, 32] view of the i32 buffer x_ptr (8 x 32 elements).
const char *kGlobalPrograms = R"(
def load_fixed<1>(i32* x_ptr, i32* y_ptr, i32 r) threads=32:
    g = VIEW
    StoreGlobal(LoadGlobal(g, layout=spatial(32), offset=[r, 0:]), ViewGlobal(y_ptr, shape=[32]))

def load_tile<1>(i32* x_ptr, i32* y_ptr, i32 r, i32 c) threads=32:
    g = VIEW
    t = LoadGlobal(g, layout=spatial(2, 16), offset=[r:, c:])
    StoreGlobal(t, ViewGlobal(y_ptr, shape=[2, 16]))

def store_fixed<1>(i32* v_ptr, i32* x_ptr, i32 r) threads=32:
    g = VIEW
    StoreGlobal(LoadGlobal(ViewGlobal(v_ptr, shape=[32]), layout=spatial(32)), g, offset=[r, 0:])

def store_tile<1>(i32* v_ptr, i32* x_ptr, i32 r, i32 c) threads=32:
    g = VIEW
    v = LoadGlobal(ViewGlobal(v_ptr, shape=[2, 16]), layout=spatial(2, 16))
    StoreGlobal(v, g, offset=[r:, c:])

def copy_fixed<1>(i32* x_ptr, i32* y_ptr, i32 r) threads=32:
    g = VIEW
    s = AllocateShared(i32, shape=[32])
    CopyAsync(s, g, offset=[r, 0:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitAll()
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(32)), ViewGlobal(y_ptr, shape=[32]))

def copy_tile<1>(i32* x_ptr, i32* y_ptr, i32 r, i32 c) threads=32:
    g = VIEW
    s = AllocateShared(i32, shape=[2, 16])
    CopyAsync(s, g, offset=[r:, c:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitAll()
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(2, 16)), ViewGlobal(y_ptr, shape=[2, 16]))
)";

struct ViewVariant {
  const char *name;
  const char *expr;
  int64_t baseRow; // the view's row 0 is this row of the 8 x 32 buffer
};

const ViewVariant kViews[] = {
    {"ViewGlobal [4, 32] of an 8 x 32 buffer", "ViewGlobal(x_ptr, shape=[4, 32])", 0},
    {"SliceGlobal rows 2..5 of an 8 x 32 view",
     "SliceGlobal(ViewGlobal(x_ptr, shape=[8, 32]), offset=[2:, 0:], shape=[4, 32])", 2},
};

// Fixed row indices: below (negative), inside, the last row, at the extent, past it.
const int32_t kFixedRows[] = {-2, -1, 0, 3, 4, 5};

// Starts of a [2, 16] tile in the [4, 32] view: inside, at the far corner, partly outside
// (rows, columns, both, negative rows, negative columns), wholly outside (at and past the
// extent, negative).
const std::pair<int32_t, int32_t> kTileStarts[] = {
    {0, 0}, {2, 16}, {3, 0},  {2, 20}, {3, 24},  {-1, 0}, {0, -8}, {-1, -8},
    {4, 0}, {5, 3},  {0, 32}, {-2, 0}, {0, -16}, {6, 40}, {1, 31}, {-3, -20},
};

bool inView(int64_t row, int64_t col) { return row >= 0 && row < 4 && col >= 0 && col < 32; }

std::vector<int32_t> buffer8x32() {
  std::vector<int32_t> x(256);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = int32_t(1000 + i);
  return x;
}

/// What a [rows, cols] tile read at (r, c) holds: the buffer inside the view, 0 outside.
std::vector<int32_t> expectedRead(const std::vector<int32_t> &x, const ViewVariant &v, int32_t r,
                                  int32_t c, int rows, int cols) {
  std::vector<int32_t> out(size_t(rows * cols));
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      out[size_t(i * cols + j)] =
          inView(r + i, c + j) ? x[size_t((v.baseRow + r + i) * 32 + c + j)] : 0;
  return out;
}

/// The buffer after storing a [rows, cols] tile `t` at (r, c): elements outside are dropped.
std::vector<int32_t> expectedStore(std::vector<int32_t> x, const std::vector<int32_t> &t,
                                   const ViewVariant &v, int32_t r, int32_t c, int rows, int cols) {
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j)
      if (inView(r + i, c + j))
        x[size_t((v.baseRow + r + i) * 32 + c + j)] = t[size_t(i * cols + j)];
  return x;
}

} // namespace

TEST_CASE("LoadGlobal: fixed indices and tiles below, at and past the view's extent read 0") {
  for (const ViewVariant &v : kViews) {
    CAPTURE(v.name);
    VerifiedModule m = build(replaceAll(kGlobalPrograms, "VIEW", v.expr));
    std::vector<int32_t> x = buffer8x32();
    for (int32_t r : kFixedRows) {
      CAPTURE(r);
      std::vector<int32_t> y(32, -5);
      REQUIRE_OK(run(m, {bufferArg(x), bufferArg(y), i32Arg(r)}, options(), "load_fixed"));
      CHECK(y == expectedRead(x, v, r, 0, 1, 32));
    }
    for (auto [r, c] : kTileStarts) {
      CAPTURE(r);
      CAPTURE(c);
      std::vector<int32_t> y(32, -5);
      REQUIRE_OK(
          run(m, {bufferArg(x), bufferArg(y), i32Arg(r), i32Arg(c)}, options(), "load_tile"));
      CHECK(y == expectedRead(x, v, r, c, 2, 16));
    }
  }
}

TEST_CASE("LoadGlobal: row 4 of a [4, 32] view reads 0 although the buffer has a row 4") {
  VerifiedModule m = build(replaceAll(kGlobalPrograms, "VIEW", kViews[0].expr));
  std::vector<int32_t> x = buffer8x32(), y(32, -5);
  REQUIRE_OK(run(m, {bufferArg(x), bufferArg(y), i32Arg(4)}, options(), "load_fixed"));
  CHECK(y == std::vector<int32_t>(32, 0));
  REQUIRE_OK(run(m, {bufferArg(x), bufferArg(y), i32Arg(3)}, options(), "load_fixed"));
  CHECK(y[0] == 1096);
  CHECK(y[31] == 1127);
}

TEST_CASE("StoreGlobal: elements at fixed indices and tiles outside the view are dropped") {
  for (const ViewVariant &v : kViews) {
    CAPTURE(v.name);
    VerifiedModule m = build(replaceAll(kGlobalPrograms, "VIEW", v.expr));
    std::vector<int32_t> values(32);
    for (size_t i = 0; i < 32; ++i)
      values[i] = int32_t(-100 - i);
    for (int32_t r : kFixedRows) {
      CAPTURE(r);
      std::vector<int32_t> x = buffer8x32();
      std::vector<int32_t> want = expectedStore(x, values, v, r, 0, 1, 32);
      REQUIRE_OK(run(m, {bufferArg(values), bufferArg(x), i32Arg(r)}, options(), "store_fixed"));
      CHECK(x == want);
    }
    for (auto [r, c] : kTileStarts) {
      CAPTURE(r);
      CAPTURE(c);
      std::vector<int32_t> x = buffer8x32();
      std::vector<int32_t> want = expectedStore(x, values, v, r, c, 2, 16);
      REQUIRE_OK(
          run(m, {bufferArg(values), bufferArg(x), i32Arg(r), i32Arg(c)}, options(), "store_tile"));
      CHECK(x == want);
    }
  }
}

TEST_CASE("CopyAsync: fixed indices and tiles outside the global view land as 0") {
  for (const ViewVariant &v : kViews) {
    CAPTURE(v.name);
    VerifiedModule m = build(replaceAll(kGlobalPrograms, "VIEW", v.expr));
    std::vector<int32_t> x = buffer8x32();
    for (int32_t r : kFixedRows) {
      CAPTURE(r);
      std::vector<int32_t> y(32, -5);
      REQUIRE_OK(run(m, {bufferArg(x), bufferArg(y), i32Arg(r)}, options(), "copy_fixed"));
      CHECK(y == expectedRead(x, v, r, 0, 1, 32));
    }
    for (auto [r, c] : kTileStarts) {
      CAPTURE(r);
      CAPTURE(c);
      std::vector<int32_t> y(32, -5);
      REQUIRE_OK(
          run(m, {bufferArg(x), bufferArg(y), i32Arg(r), i32Arg(c)}, options(), "copy_tile"));
      CHECK(y == expectedRead(x, v, r, c, 2, 16));
    }
  }
}

namespace {

const char *kSharedPrograms = R"(
def lshared_fixed<1>(i32* x_ptr, i32* y_ptr, i32 r) threads=32:
    s = AllocateShared(i32, shape=[4, 32])
    StoreShared(LoadGlobal(ViewGlobal(x_ptr, shape=[4, 32]), layout=spatial(4, 8).local(1, 4)), s)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(32), offset=[r, 0:]), ViewGlobal(y_ptr, shape=[32]))

def lshared_tile<1>(i32* x_ptr, i32* y_ptr, i32 r, i32 c) threads=32:
    s = AllocateShared(i32, shape=[4, 32])
    StoreShared(LoadGlobal(ViewGlobal(x_ptr, shape=[4, 32]), layout=spatial(4, 8).local(1, 4)), s)
    Synchronize()
    t = LoadShared(s, layout=spatial(2, 16), offset=[r:, c:])
    StoreGlobal(t, ViewGlobal(y_ptr, shape=[2, 16]))

def sshared_fixed<1>(i32* v_ptr, i32* y_ptr, i32 r) threads=32:
    s = AllocateShared(i32, shape=[4, 32])
    StoreShared(AllocateRegister(i32, layout=spatial(4, 8).local(1, 4), init=-7), s)
    Synchronize()
    StoreShared(LoadGlobal(ViewGlobal(v_ptr, shape=[32]), layout=spatial(32)), s, offset=[r, 0:])
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(4, 8).local(1, 4)), ViewGlobal(y_ptr, shape=[4, 32]))

def sshared_tile<1>(i32* v_ptr, i32* y_ptr, i32 r, i32 c) threads=32:
    s = AllocateShared(i32, shape=[4, 32])
    StoreShared(AllocateRegister(i32, layout=spatial(4, 8).local(1, 4), init=-7), s)
    Synchronize()
    v = LoadGlobal(ViewGlobal(v_ptr, shape=[2, 16]), layout=spatial(2, 16))
    StoreShared(v, s, offset=[r:, c:])
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(4, 8).local(1, 4)), ViewGlobal(y_ptr, shape=[4, 32]))
)";

bool tileInside(int32_t r, int32_t c, int rows, int cols) {
  return inView(r, c) && inView(r + rows - 1, c + cols - 1);
}

} // namespace

TEST_CASE("LoadShared and StoreShared: accesses inside move the data, any element outside traps") {
  VerifiedModule m = build(kSharedPrograms, {}, "shared.tasm");
  std::vector<int32_t> x(128);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = int32_t(2000 + i);
  std::vector<int32_t> values(32);
  for (size_t i = 0; i < 32; ++i)
    values[i] = int32_t(-100 - i);
  const ViewVariant flat = {"shared [4, 32]", "", 0};
  auto expectTrap = [](const Status &s, const char *line, const char *instruction) {
    CHECK_ERROR(s, ErrorCode::OutOfBounds);
    CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds, {line, instruction, "[4, 32]"}));
  };
  for (int32_t r : kFixedRows) {
    CAPTURE(r);
    bool inside = r >= 0 && r < 4;
    std::vector<int32_t> y(32, -5);
    Status load = run(m, {bufferArg(x), bufferArg(y), i32Arg(r)}, options(), "lshared_fixed");
    std::vector<int32_t> z(128, -5);
    Status store = run(m, {bufferArg(values), bufferArg(z), i32Arg(r)}, options(), "sshared_fixed");
    if (!inside) {
      expectTrap(load, "shared.tasm:6:", "LoadShared");
      expectTrap(store, "shared.tasm:19:", "StoreShared");
      continue;
    }
    CHECK_OK(load);
    CHECK(y == expectedRead(x, flat, r, 0, 1, 32));
    CHECK_OK(store);
    CHECK(z == expectedStore(std::vector<int32_t>(128, -7), values, flat, r, 0, 1, 32));
  }
  for (auto [r, c] : kTileStarts) {
    CAPTURE(r);
    CAPTURE(c);
    std::vector<int32_t> y(32, -5);
    Status load =
        run(m, {bufferArg(x), bufferArg(y), i32Arg(r), i32Arg(c)}, options(), "lshared_tile");
    std::vector<int32_t> z(128, -5);
    Status store =
        run(m, {bufferArg(values), bufferArg(z), i32Arg(r), i32Arg(c)}, options(), "sshared_tile");
    if (!tileInside(r, c, 2, 16)) {
      expectTrap(load, "shared.tasm:12:", "LoadShared");
      expectTrap(store, "shared.tasm:28:", "StoreShared");
      continue;
    }
    CHECK_OK(load);
    CHECK(y == expectedRead(x, flat, r, c, 2, 16));
    CHECK_OK(store);
    CHECK(z == expectedStore(std::vector<int32_t>(128, -7), values, flat, r, c, 2, 16));
  }
}

TEST_CASE("SliceGlobal of a slice: elements outside the parent slice read 0 and are not written") {
  // base: an 8 x 32 buffer; parent: its rows 4..7; below: rows -2..1 of the parent (base rows
  // 2..5, of which 2 and 3 are outside the parent); above: rows 2..5 of the parent (base rows
  // 6..9, of which 8 and 9 are outside the parent and the buffer).
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr, i32* v_ptr) threads=32:
    parent = SliceGlobal(ViewGlobal(x_ptr, shape=[8, 32]), offset=[4:, 0:], shape=[4, 32])
    below = SliceGlobal(parent, offset=[-2:, 0:], shape=[4, 32])
    above = SliceGlobal(parent, offset=[2:, 0:], shape=[4, 32])
    gy = ViewGlobal(y_ptr, shape=[2, 4, 32])
    StoreGlobal(LoadGlobal(below, layout=spatial(4, 8).local(1, 4)), gy, offset=[0, 0:, 0:])
    StoreGlobal(LoadGlobal(above, layout=spatial(4, 8).local(1, 4)), gy, offset=[1, 0:, 0:])
    v = LoadGlobal(ViewGlobal(v_ptr, shape=[4, 32]), layout=spatial(4, 8).local(1, 4))
    Synchronize()
    StoreGlobal(v, below)
    StoreGlobal(v, above)
)";
  std::vector<int32_t> x = buffer8x32(), y(256, -5), v(128);
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = int32_t(-1 - i);
  std::vector<int32_t> original = x;
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y), bufferArg(v)}));
  for (size_t r = 0; r < 4; ++r)
    for (size_t c = 0; c < 32; ++c) {
      CAPTURE(r);
      CAPTURE(c);
      CHECK(y[r * 32 + c] == (r >= 2 ? original[(r + 2) * 32 + c] : 0));      // base rows 2..5
      CHECK(y[128 + r * 32 + c] == (r < 2 ? original[(r + 6) * 32 + c] : 0)); // base rows 6..9
    }
  // Stores: below's rows 2, 3 are base rows 4, 5; above's rows 0, 1 are base rows 6, 7.
  for (size_t r = 0; r < 8; ++r)
    for (size_t c = 0; c < 32; ++c) {
      CAPTURE(r);
      CAPTURE(c);
      int32_t want = original[r * 32 + c];
      if (r == 4 || r == 5)
        want = v[(r - 2) * 32 + c];
      if (r == 6 || r == 7)
        want = v[(r - 6) * 32 + c];
      CHECK(x[r * 32 + c] == want);
    }
}

TEST_CASE("a view with a negative stride that reaches before its buffer is an error") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr) threads=32:
    g = ViewGlobal(x_ptr, shape=[32], strides=[-1])
    StoreGlobal(LoadGlobal(g, layout=spatial(32)), ViewGlobal(y_ptr, shape=[32]))
)";
  std::vector<float> x(64), y(32);
  Status s = run(build(src), {bufferArg(x), bufferArg(y)});
  CHECK_ERROR(s, ErrorCode::Runtime);
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"`x_ptr`"}));
}

TEST_CASE("SliceShared fixed indices at and past a slice's extent trap, inside its parent too") {
  // t is rows 0..3 of an 8-row allocation: row r of t for r = 4 lies in the allocation but
  // outside t, so it must trap all the same.
  const char *src = R"(
def k<1>(i32* y_ptr, i32 r) threads=32:
    s = AllocateShared(i32, shape=[8, 32])
    StoreShared(AllocateRegister(i32, layout=spatial(8, 4).local(1, 8), init=7), s)
    Synchronize()
    t = SliceShared(s, offset=[0:, 0:], shape=[4, 32])
    row = SliceShared(t, offset=[r, 0:])
    StoreGlobal(LoadShared(row, layout=spatial(32)), ViewGlobal(y_ptr, shape=[32]))
)";
  VerifiedModule m = build(src, {}, "slice.tasm");
  for (int32_t r : {-1, 0, 3, 4, 5}) {
    CAPTURE(r);
    std::vector<int32_t> y(32, -5);
    Status s = run(m, {bufferArg(y), i32Arg(r)});
    if (r >= 0 && r < 4) {
      CHECK_OK(s);
      CHECK(y == std::vector<int32_t>(32, 7));
    } else {
      CHECK_ERROR(s, ErrorCode::OutOfBounds);
      CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds, {"slice.tasm:8:", "LoadShared"}));
    }
  }
}
