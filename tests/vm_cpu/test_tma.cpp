// TmaLoad on the CPU interpreter (docs/isa.md, "Tensor-memory-accelerator loads"): tiles of
// swizzled, paneled and plain layouts against a plain C++ reference with zeros outside the view,
// a two-stage pipeline over mbarrier phases, coordinates before the start, a fixed offset entry
// of a strided view, the race of a read before the wait, and the launch requirements of tensor
// maps.
#include "cpu_test_util.h"
#include "stage_rows_program.h"

using namespace cputest;

namespace {

// Copies the [R, C] tile of a [m, n] f16 view at (r0, c0) into a shared tile of layout
// `layout` with TmaLoad, waits, and stores the tile (LoadShared) to out [R, C].
std::string tileSource(int rows, int cols, const std::string &layout) {
  std::string r = std::to_string(rows), c = std::to_string(cols);
  return R"(
def k<1>(f16* a_ptr, f16* out_ptr, i32 m, i32 n, i32 r0, i32 c0) threads=128:
    ga = ViewGlobal(a_ptr, shape=[m, n])
    s = AllocateShared(f16, shape=[)" +
         r + ", " + c + "], layout=" + layout + R"()
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=)" +
         std::to_string(rows * cols * 2) + R"()
    TmaLoad(s, ga, bar=bar, offset=[r0:, c0:])
    MbarrierWait(bar, parity=0)
    t = LoadShared(s, layout=spatial(32, 4).local()" +
         std::to_string(rows / 32) + ", " + std::to_string(cols / 4) + R"())
    StoreGlobal(t, ViewGlobal(out_ptr, shape=[)" +
         r + ", " + c + R"(]))
)";
}

// a[i, j] = distinct half values; the expected tile with zeros outside [m, n]
std::vector<uint16_t> matrix(int m, int n) {
  std::vector<uint16_t> a(size_t(m) * size_t(n));
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < n; ++j)
      a[size_t(i * n + j)] = doubleToHalf(double((i * 37 + j * 11) % 2001) - 1000.0);
  return a;
}

std::vector<uint16_t> expectedTile(const std::vector<uint16_t> &a, int m, int n, int r0, int c0,
                                   int rows, int cols) {
  std::vector<uint16_t> t(size_t(rows) * size_t(cols), 0);
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) {
      int r = r0 + i, c = c0 + j;
      if (r >= 0 && r < m && c >= 0 && c < n)
        t[size_t(i * cols + j)] = a[size_t(r * n + c)];
    }
  return t;
}

} // namespace

TEST_CASE("TmaLoad: swizzled, paneled and plain tiles land as the view holds them, zeros "
          "outside") {
  struct Case {
    int rows, cols;
    const char *layout;
  } cases[] = {
      {64, 64, "swizzle(row_major(64, 64), 3, 3, 3)"},                  // 128-byte swizzle
      {32, 128, "row_major(1, 2).swizzle(row_major(32, 64), 3, 3, 3)"}, // two panels
      {32, 32, "swizzle(row_major(32, 32), 2, 3, 3)"},                  // 64-byte swizzle
      {32, 16, "swizzle(row_major(32, 16), 1, 3, 3)"},                  // 32-byte swizzle
      {32, 8, "row_major(32, 8)"},                                      // no swizzle
  };
  const int m = 70, n = 104; // rows of 208 bytes (a multiple of 16)
  std::vector<uint16_t> a = matrix(m, n);
  for (const Case &c : cases)
    for (auto [r0, c0] : {std::pair{0, 0}, std::pair{40, 64}, std::pair{-5, -8}}) {
      CAPTURE(std::string(c.layout));
      CAPTURE(r0);
      CAPTURE(c0);
      std::vector<uint16_t> out(size_t(c.rows * c.cols), 0xffff);
      CHECK_OK(run(build(tileSource(c.rows, c.cols, c.layout)),
                   {bufferArg(a), bufferArg(out), i32Arg(m), i32Arg(n), i32Arg(r0), i32Arg(c0)}));
      CHECK(out == expectedTile(a, m, n, r0, c0, c.rows, c.cols));
    }
}

TEST_CASE("TmaLoad: a two-stage pipeline over mbarrier phases sums every tile") {
  // out[r, c] = sum over tiles t of a[t * 16 + r, c]; the load of tile t + 2 goes into the
  // stage tile t used, after a Synchronize that orders tile t's reads before it
  const char *src = R"(
def k<1>(f32* a_ptr, f32* out_ptr, i32 tiles) threads=128:
    ga = ViewGlobal(a_ptr, shape=[tiles * 16, 32])
    s = AllocateShared(f32, shape=[2, 16, 32])
    bars = AllocateShared(u64, shape=[2])
    for i in range(2):
        MbarrierInit(SliceShared(bars, offset=[i]), count=1)
    Synchronize()
    for i in range(2):
        if i < tiles:
            MbarrierArrive(SliceShared(bars, offset=[i]), tx=2048)
            TmaLoad(SliceShared(s, offset=[i, 0:, 0:]), ga, bar=SliceShared(bars, offset=[i]), offset=[i * 16:, 0:])
    acc = AllocateRegister(f32, layout=spatial(16, 8).local(1, 4))
    for t in range(tiles):
        stage = t % 2
        MbarrierWait(SliceShared(bars, offset=[stage]), parity=t / 2 % 2)
        acc = Add(acc, LoadShared(s, layout=spatial(16, 8).local(1, 4), offset=[stage, 0:, 0:]))
        Synchronize()
        if t + 2 < tiles:
            MbarrierArrive(SliceShared(bars, offset=[stage]), tx=2048)
            TmaLoad(SliceShared(s, offset=[stage, 0:, 0:]), ga, bar=SliceShared(bars, offset=[stage]), offset=[(t + 2) * 16:, 0:])
    StoreGlobal(acc, ViewGlobal(out_ptr, shape=[16, 32]))
)";
  const int tiles = 5;
  std::vector<float> a(size_t(tiles * 16 * 32)), out(16 * 32, -1.0f), want(16 * 32, 0.0f);
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(int(i % 97) - 48);
  for (int t = 0; t < tiles; ++t)
    for (int e = 0; e < 16 * 32; ++e)
      want[size_t(e)] += a[size_t(t * 512 + e)];
  CHECK_OK(run(build(src), {bufferArg(a), bufferArg(out), i32Arg(tiles)}));
  CHECK(out == want);
}

TEST_CASE("TmaLoad: a fixed offset entry of a strided view selects one plane") {
  // view [planes, rows, 8] f32 with a row stride of 12 (48 bytes); plane p rows [r0, r0 + 16)
  const char *src = R"(
def k<1>(f32* a_ptr, f32* out_ptr, i32 planes, i32 rows, i32 p, i32 r0) threads=32:
    ga = ViewGlobal(a_ptr, shape=[planes, rows, 8], strides=[rows * 12, 12, 1])
    s = AllocateShared(f32, shape=[16, 8])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    TmaLoad(s, ga, bar=bar, offset=[p, r0:, 0:])
    MbarrierArrive(bar, tx=512)
    MbarrierWait(bar, parity=0)
    StoreGlobal(LoadShared(s, layout=spatial(16, 2).local(1, 4)), ViewGlobal(out_ptr, shape=[16, 8]))
)";
  const int planes = 3, rows = 20;
  std::vector<float> a(size_t(planes * rows * 12));
  for (size_t i = 0; i < a.size(); ++i)
    a[i] = float(i) + 0.25f;
  for (auto [p, r0] : {std::pair{1, 0}, std::pair{2, 10}}) {
    CAPTURE(p);
    CAPTURE(r0);
    std::vector<float> out(16 * 8, -1.0f);
    CHECK_OK(run(build(src), {bufferArg(a), bufferArg(out), i32Arg(planes), i32Arg(rows), i32Arg(p),
                              i32Arg(r0)}));
    for (int i = 0; i < 16; ++i)
      for (int j = 0; j < 8; ++j) {
        int r = r0 + i;
        float want = r < rows ? a[size_t(p * rows * 12 + r * 12 + j)] : 0.0f;
        CHECK(out[size_t(i * 8 + j)] == want);
      }
  }
}

TEST_CASE("TmaLoad: a view of rank 6 whose inner dimensions merge, pages out of range read "
          "zeros") {
  // a paged cache [pages, 2 halves, 2, 4 slots, heads, 4 words]: the tile of (page p, half q,
  // head h) is its 2 x 4 slots x 4 words; dimensions 2 and 3 merge into the half, so the tensor
  // map has rank 4 with the half's coordinate times 8
  const char *src = R"(
def k<1>(f32* c_ptr, f32* out_ptr, i32 pages, i32 heads, i32 p, i32 q, i32 h) threads=32:
    gc = ViewGlobal(c_ptr, shape=[pages, 2, 2, 4, heads, 4])
    s = AllocateShared(f32, shape=[2, 4, 4])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=128)
    TmaLoad(s, gc, bar=bar, offset=[p, q, 0:, 0:, h, 0:])
    MbarrierWait(bar, parity=0)
    StoreGlobal(LoadShared(s, layout=local(2, 1, 1).spatial(1, 4, 1).spatial(1, 1, 4).local(1, 1, 1).replicate(2)), ViewGlobal(out_ptr, shape=[2, 4, 4]))
)";
  const int pages = 3, heads = 3;
  std::vector<float> c(size_t(pages * 2 * 8 * heads * 4));
  for (size_t i = 0; i < c.size(); ++i)
    c[i] = float(i) + 0.5f;
  for (auto [p, q, h] :
       {std::tuple{1, 1, 2}, std::tuple{2, 0, 0}, std::tuple{3, 0, 1}, std::tuple{-1, 1, 1},
        std::tuple{0, 2, 1}, std::tuple{0, -1, 0}, std::tuple{1, 0, 3}}) {
    CAPTURE(p);
    CAPTURE(q);
    CAPTURE(h);
    std::vector<float> out(32, -1.0f);
    CHECK_OK(run(build(src), {bufferArg(c), bufferArg(out), i32Arg(pages), i32Arg(heads), i32Arg(p),
                              i32Arg(q), i32Arg(h)}));
    bool inside = p >= 0 && p < pages && q >= 0 && q < 2 && h >= 0 && h < heads;
    for (int slot = 0; slot < 8; ++slot)
      for (int w = 0; w < 4; ++w) {
        float want = inside ? c[size_t((((p * 2 + q) * 8 + slot) * heads + h) * 4 + w)] : 0.0f;
        CHECK(out[size_t(slot * 4 + w)] == want);
      }
  }
}

TEST_CASE("TmaLoad: reading the destination before the wait races with the copy") {
  std::string src = tileSource(32, 8, "row_major(32, 8)");
  std::string early =
      replaceAll(src, "    MbarrierWait(bar, parity=0)\n    t = LoadShared", "    t = LoadShared");
  early = replaceAll(early, "    StoreGlobal(t,",
                     "    MbarrierWait(bar, parity=0)\n    StoreGlobal(t,");
  std::vector<uint16_t> a = matrix(32, 8), out(32 * 8);
  Status s = run(build(early),
                 {bufferArg(a), bufferArg(out), i32Arg(32), i32Arg(8), i32Arg(0), i32Arg(0)});
  CHECK(hasDiagnostic(s, ErrorCode::Race,
                      {"test.tasm:10:", "while TmaLoad at 9:5 may still be copying into it",
                       "no MbarrierWait that observes the completion of its phase"}));
}

TEST_CASE("TmaLoad: a wait whose bytes never come is a deadlock; the launch requirements") {
  std::string src = tileSource(32, 8, "row_major(32, 8)");
  std::vector<uint16_t> a = matrix(32, 16), out(32 * 8);
  // expecting more bytes than the copy delivers
  std::string more = replaceAll(src, "tx=512", "tx=1024");
  Status s =
      run(build(more), {bufferArg(a), bufferArg(out), i32Arg(32), i32Arg(8), i32Arg(0), i32Arg(0)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"never returns", "512 transaction bytes"}));
  // a barrier that MbarrierInit has not initialised
  std::string uninit = replaceAll(replaceAll(src, "    MbarrierInit(bar, count=1)\n", ""),
                                  "    MbarrierArrive(bar, tx=512)\n", "");
  s = run(build(uninit),
          {bufferArg(a), bufferArg(out), i32Arg(32), i32Arg(8), i32Arg(0), i32Arg(0)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"test.tasm:7:", "is used before MbarrierInit initialised it"}));
  // a row of 12 f16 elements is 24 bytes, not a multiple of 16
  s = run(build(src), {bufferArg(a), bufferArg(out), i32Arg(16), i32Arg(12), i32Arg(0), i32Arg(0)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"the tensor map of a_ptr", "stride of dimension 0 (12 elements of f16)",
                       "multiple of 16 bytes"}));
  // an extent of 0
  s = run(build(src), {bufferArg(a), bufferArg(out), i32Arg(0), i32Arg(8), i32Arg(0), i32Arg(0)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"extent 0 of dimension 0 outside [1, 2^32]"}));
  // an innermost coordinate of 4 f16 elements: 8 bytes into a row
  s = run(build(src), {bufferArg(a), bufferArg(out), i32Arg(32), i32Arg(16), i32Arg(0), i32Arg(4)});
  CHECK(
      hasDiagnostic(s, ErrorCode::Runtime,
                    {"test.tasm:9:", "innermost coordinate 4 (8 bytes) is not a multiple of 16"}));
  // an address that is not a multiple of 16 bytes
  KernelArg shifted = bufferArg(a);
  shifted.pointer = a.data() + 1;
  shifted.byteSize -= 2;
  s = run(build(src), {shifted, bufferArg(out), i32Arg(8), i32Arg(8), i32Arg(0), i32Arg(0)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"is not a multiple of 16 bytes"}));
}

namespace {

// Copies in [R, C] f16 (global) through registers into a shared tile of layout `layout`, then
// TmaStores the tile into out [m, n] at (r0, c0); out starts as 0xffff everywhere.
std::string storeSource(int rows, int cols, const std::string &layout) {
  std::string r = std::to_string(rows), c = std::to_string(cols);
  return R"(
def k<1>(f16* in_ptr, f16* out_ptr, i32 m, i32 n, i32 r0, i32 c0) threads=128:
    s = AllocateShared(f16, shape=[)" +
         r + ", " + c + "], layout=" + layout + R"()
    t = LoadGlobal(ViewGlobal(in_ptr, shape=[)" +
         r + ", " + c + R"(]), layout=spatial(32, 4).local()" + std::to_string(rows / 32) + ", " +
         std::to_string(cols / 4) + R"())
    StoreShared(t, s)
    FenceProxyAsync()
    Synchronize()
    TmaStore(s, ViewGlobal(out_ptr, shape=[m, n]), offset=[r0:, c0:])
    TmaStoreCommitGroup()
    TmaStoreWaitGroup(0)
)";
}

} // namespace

TEST_CASE("TmaStore: swizzled, paneled and plain tiles written where the view holds them, "
          "nothing outside") {
  struct Case {
    int rows, cols;
    const char *layout;
  } cases[] = {
      {64, 64, "swizzle(row_major(64, 64), 3, 3, 3)"},
      {32, 128, "row_major(1, 2).swizzle(row_major(32, 64), 3, 3, 3)"},
      {32, 8, "row_major(32, 8)"},
  };
  const int m = 70, n = 104;
  for (const Case &c : cases)
    for (auto [r0, c0] : {std::pair{0, 0}, std::pair{40, 64}, std::pair{69, 96}}) {
      CAPTURE(std::string(c.layout));
      CAPTURE(r0);
      CAPTURE(c0);
      std::vector<uint16_t> in = matrix(c.rows, c.cols), out(size_t(m * n), 0xffff);
      CHECK_OK(run(build(storeSource(c.rows, c.cols, c.layout)),
                   {bufferArg(in), bufferArg(out), i32Arg(m), i32Arg(n), i32Arg(r0), i32Arg(c0)}));
      std::vector<uint16_t> want(size_t(m * n), 0xffff);
      for (int i = 0; i < c.rows; ++i)
        for (int j = 0; j < c.cols; ++j) {
          int r = r0 + i, col = c0 + j;
          if (r >= 0 && r < m && col >= 0 && col < n)
            want[size_t(r * n + col)] = in[size_t(i * c.cols + j)];
        }
      CHECK(out == want);
    }
}

TEST_CASE("TmaStore: rewriting the source before the wait races; a block must wait before "
          "it ends") {
  std::string src = storeSource(32, 8, "row_major(32, 8)");
  std::vector<uint16_t> in = matrix(32, 8), out(32 * 8);
  KernelArgs args{bufferArg(in), bufferArg(out), i32Arg(32), i32Arg(8), i32Arg(0), i32Arg(0)};
  // a write of the source between the store and its wait
  std::string early = replaceAll(src, "    TmaStoreCommitGroup()\n",
                                 "    TmaStoreCommitGroup()\n    StoreShared(t, s)\n");
  Status s = run(build(early), args);
  CHECK(hasDiagnostic(s, ErrorCode::Race,
                      {"test.tasm:10:", "while TmaStore at 8:5 may still be reading it",
                       "no covering TmaStoreWaitGroup and Synchronize()"}));
  // after the wait, but without a Synchronize: thread 0 waited, the others did not
  std::string unsynced = src + "    StoreShared(t, s)\n";
  s = run(build(unsynced), args);
  CHECK(hasDiagnostic(s, ErrorCode::Race, {"test.tasm:11:", "read by TmaStoreWaitGroup at 10:"}));
  CHECK_OK(run(build(src + "    Synchronize()\n    StoreShared(t, s)\n"), args));
  // no wait, then no commit either
  std::string nowait = replaceAll(src, "    TmaStoreWaitGroup(0)\n", "");
  s = run(build(nowait), args);
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"test.tasm:8:", "the block ends while this TmaStore may still read",
                       "wait for it (TmaStoreWaitGroup(0))"}));
  std::string nocommit = replaceAll(nowait, "    TmaStoreCommitGroup()\n", "");
  s = run(build(nocommit), args);
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"commit its group (TmaStoreCommitGroup)"}));
  // a store's box must start at a coordinate of at least 0, and rows on 16 bytes
  s = run(build(src),
          {bufferArg(in), bufferArg(out), i32Arg(32), i32Arg(8), i32Arg(-1), i32Arg(0)});
  CHECK(hasDiagnostic(
      s, ErrorCode::Runtime,
      {"test.tasm:8:", "TmaStore coordinate -1 of dimension 0 is outside [0, 2^31)"}));
  s = run(build(src), {bufferArg(in), bufferArg(out), i32Arg(32), i32Arg(8), i32Arg(0), i32Arg(4)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"innermost coordinate 4 (8 bytes)"}));
}

TEST_CASE("TmaLoad and TmaStore: stages as rows of one 2-D tile, sliced at run-time multiples of "
          "the stage height") {
  // four stages of 32 rows x 128 columns (two 64-column panels of 128 rows), each loaded by a
  // slice at (t + r) % 4 * 32 rows (t the loop variable, r a parameter: the checker knows the
  // origin is a multiple of 32 rows, 4 KiB); the first 64 rows then go back out by one TMA store
  // of a slice at a parameter's multiple of 64, the last 64 by LoadShared
  const std::string src = tilus::testing::kStageRowsProgram;
  std::vector<uint16_t> a = matrix(128, 128);
  for (int r : {0, 1, 3}) {
    CAPTURE(r);
    std::vector<uint16_t> out(64 * 128, 0xffff), back(64 * 128, 0xffff);
    REQUIRE_OK(run(build(src), {bufferArg(a), bufferArg(out), bufferArg(back), i32Arg(r)}));
    // shared row block q (32 rows) holds global row block t with q = (t + r) % 4
    auto globalRow = [&](int sharedRow) {
      int q = sharedRow / 32, t = ((q - r) % 4 + 4) % 4;
      return t * 32 + sharedRow % 32;
    };
    for (int i = 0; i < 64; ++i)
      for (int j = 0; j < 128; ++j) {
        CAPTURE(i);
        CAPTURE(j);
        REQUIRE(out[size_t(i * 128 + j)] == a[size_t(globalRow(64 + i) * 128 + j)]);
        REQUIRE(back[size_t(i * 128 + j)] == a[size_t(globalRow(r % 2 * 64 + i) * 128 + j)]);
      }
  }
}
