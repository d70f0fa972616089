// The rules of layout inference (assembler/layout_rules.h), one family at a time, against
// layouts derived by hand (docs/layout-inference.md, "The rules"). Expected layouts are written
// as chains and parsed, so that equality is equality of functions (canonical forms).
#include "assembler/assembler.h"
#include "assembler/layout_rules.h"
#include "test_helpers.h"

namespace doctest {
template <> struct StringMaker<tilus::RegisterLayout> {
  static String convert(const tilus::RegisterLayout &l) { return l.toString().c_str(); }
};
} // namespace doctest

using namespace tilus;
using namespace tilus::tasm;

namespace {

RegisterLayout L(const std::string &text) {
  Expected<RegisterLayout> l = parseRegisterLayout(text);
  REQUIRE_OK(l);
  return std::move(l).value();
}

} // namespace

TEST_CASE("Dot rule: 64 x 64 x 32 f16 over four warps is 2 x 2 warps of 32 x 32") {
  std::vector<DotPlan> plans = dotPlans(64, 64, 32, DataType::f16(), DataType::f32(), 128);
  REQUIRE(!plans.empty());
  const DotPlan &p = plans[0];
  CHECK(p.mma);
  CHECK(std::string(p.atom) == "m16n8k16");
  CHECK(p.rows == 2);
  CHECK(p.cols == 2);
  CHECK(p.replicas == 1);
  // the layouts of programs/matmul_f16_pipelined.tasm
  CHECK(p.c == L("spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(p.a ==
        L("spatial(2, 1).replicate(2).local(2, 2).column_local(2, 2).spatial(8, 4).local(1, 2)"));
  CHECK(p.b == L("replicate(2).spatial(1, 2).local(2, 4).local(2, 1).column_spatial(4, 8)."
                 "local(2, 1)"));
  // next: 1 x 4 (traffic 64 + 16 = 80) before 4 x 1 (16 + 64, more warp rows)
  REQUIRE(plans.size() >= 3);
  CHECK(plans[1].rows == 1);
  CHECK(plans[1].cols == 4);
  CHECK(plans[2].rows == 4);
  CHECK(plans[2].cols == 1);
  CHECK(p.describe(64, 64) == "mma m16n8k16, 2 x 2 warps, 32 x 32 per warp");
}

TEST_CASE("Dot rule: 128 x 128 x 32 over eight warps is 2 x 4 (the large-tile layouts)") {
  DotPlan p = dotPlans(128, 128, 32, DataType::f16(), DataType::f32(), 256)[0];
  CHECK(p.c == L("spatial(2, 4).local(4, 4).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(p.a == L("spatial(2, 1).replicate(4).local(4, 2).column_local(2, 2).spatial(8, 4)."
                 "local(1, 2)"));
  CHECK(p.b == L("replicate(2).spatial(1, 4).local(2, 4).local(2, 1).column_spatial(4, 8)."
                 "local(2, 1)"));
}

TEST_CASE("Dot rule: 8-bit operands take the m16n8k32 fragments") {
  DotPlan p = dotPlans(16, 8, 32, DataType::i(8), DataType::i32(), 32)[0];
  CHECK(std::string(p.atom) == "m16n8k32");
  CHECK(p.a == L("column_local(2, 2).spatial(8, 4).local(1, 4)"));
  CHECK(p.b == L("local(2, 1).column_spatial(4, 8).local(4, 1)"));
  CHECK(p.c == L("local(2, 1).spatial(8, 4).local(1, 2)"));
}

TEST_CASE("Dot rule: more warps than atoms replicate the tile") {
  DotPlan p = dotPlans(16, 8, 16, DataType::f16(), DataType::f32(), 64)[0];
  CHECK(p.replicas == 2);
  CHECK(p.c == L("replicate(2).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(p.a == L("replicate(2).column_local(2, 2).spatial(8, 4).local(1, 2)"));
  CHECK(dotLayoutsFit(p.a, p.b, p.c, DataType::f16(), DataType::f32(), true));
}

TEST_CASE("Dot rule: f32 has no atom; per-thread arrangements over threads") {
  std::vector<DotPlan> plans = dotPlans(16, 8, 16, DataType::f32(), DataType::f32(), 32);
  const DotPlan &p = plans[0];
  CHECK(!p.mma);
  // 8 x 4 threads: each holds 2 x 2 of c (traffic 2 + 2, the least)
  CHECK(p.c == L("spatial(8, 4).local(2, 2)"));
  CHECK(p.a == L("spatial(8, 1).replicate(4).local(2, 16)"));
  CHECK(p.b == L("replicate(8).spatial(1, 4).local(16, 2)"));
  CHECK(dotLayoutsFit(p.a, p.b, p.c, DataType::f32(), DataType::f32(), false));
  // programs/variants/matmul_f32_u2.tasm's hand-written layouts satisfy the rule too
  RegisterLayout c = L("spatial(4, 8).local(4, 1)"),
                 a = L("spatial(4, 1).replicate(8).local(4, 16)"),
                 b = L("replicate(4).spatial(1, 8).local(16, 1)");
  CHECK(dotLayoutsFit(a, b, c, DataType::f32(), DataType::f32(), false));
  // ... but not with a and b of the other arrangement
  CHECK(!dotLayoutsFit(p.a, p.b, c, DataType::f32(), DataType::f32(), false));
  // and the f16 Dot lists the per-thread arrangements after its mma ones
  std::vector<DotPlan> f16 = dotPlans(16, 8, 16, DataType::f16(), DataType::f32(), 32);
  CHECK(f16.front().mma);
  CHECK(!f16.back().mma);
}

TEST_CASE("Dot rule: an operand converted from an integer type weighs 5 per element") {
  CHECK(operandCost(false) == 1);
  CHECK(operandCost(true) == 5);
  // matmul_f32_u2: b = Cast(u2 load, f32). 8 x 4 threads: 1 * 16 / 8 + 5 * 8 / 4 = 12;
  // 4 x 8 threads: 1 * 16 / 4 + 5 * 8 / 8 = 9, the least: each thread converts one column of b
  // (16 conversions per k tile instead of 32), the hand-written arrangement.
  std::vector<DotPlan> plans =
      dotPlans(16, 8, 16, DataType::f32(), DataType::f32(), 32, 1, operandCost(true));
  CHECK(plans[0].c == L("spatial(4, 8).local(4, 1)"));
  CHECK(plans[0].a == L("spatial(4, 1).replicate(8).local(4, 16)"));
  CHECK(plans[0].b == L("replicate(4).spatial(1, 8).local(16, 1)"));
  // converting a instead favours fewer rows of a per thread: 16 x 2 threads cost
  // 5 * 16 / 16 + 8 / 2 = 9, against 12 for 8 x 4 and 21 for 4 x 8
  std::vector<DotPlan> convA =
      dotPlans(16, 8, 16, DataType::f32(), DataType::f32(), 32, operandCost(true), 1);
  CHECK(convA[0].c == L("spatial(16, 2).local(1, 4)"));
}

TEST_CASE("Dot rule: a written operand that the 2 x 1 plan fits (a16wx's activations)") {
  // WARPS = 2, KS = 8, BM = 16: b [128, 16] replicated over the warps, atoms column-major
  RegisterLayout b =
      L("replicate(2).column_local(8, 2).local(2, 1).column_spatial(4, 8).local(2, 1)");
  std::vector<DotPlan> plans = dotPlans(32, 16, 128, DataType::f16(), DataType::f32(), 64);
  const DotPlan *fit = nullptr;
  for (const DotPlan &p : plans)
    if (dotLayoutsFit(p.a, b, p.c, DataType::f16(), DataType::f32(), p.mma)) {
      fit = &p;
      break;
    }
  REQUIRE(fit != nullptr);
  CHECK(fit->rows == 2);
  CHECK(fit->cols == 1);
  CHECK(fit->c == L("spatial(2, 1).local(1, 2).local(2, 1).spatial(8, 4).local(1, 2)"));
  // the 1 x 2 plan would read b's tiles at local slots that differ between the warps
  for (const DotPlan &p : plans)
    if (p.mma && p.rows == 1 && p.cols == 2)
      CHECK(!dotLayoutsFit(p.a, b, p.c, DataType::f16(), DataType::f32(), true));
}

TEST_CASE("Dot rule: the per-thread plan made from a written accumulator") {
  RegisterLayout c = L("column_spatial(16, 2).local(1, 4)"); // thread t: row t % 16
  std::optional<DotPlan> p = perThreadPlanFor(c, 16);
  REQUIRE(p);
  CHECK(p->a == L("replicate(2).spatial(16, 1).local(1, 16)"));
  CHECK(p->b == L("spatial(1, 2).replicate(16).local(1, 4).local(16, 1)"));
  CHECK(dotLayoutsFit(p->a, p->b, c, DataType::f32(), DataType::f32(), false));
  // the grid plans that fit it give every thread the whole of a (one warp row): thread t's
  // rows t % 16 are in no grid arrangement's row-major thread order
  std::vector<DotPlan> grid = dotPlans(16, 8, 16, DataType::f32(), DataType::f32(), 32);
  CHECK(!dotLayoutsFit(grid[0].a, grid[0].b, c, DataType::f32(), DataType::f32(), false));
  for (const DotPlan &q : grid)
    if (dotLayoutsFit(q.a, q.b, c, DataType::f32(), DataType::f32(), false))
      CHECK(q.rows == 1);
}

TEST_CASE("load/store rule: 16-byte runs, threads along the unit-stride dimension first") {
  // softmax: [4, 128] f32 over 128 threads
  CHECK(vectorLayouts({4, 128}, 32, 128, 1)[0] == L("spatial(4, 32).local(1, 4)"));
  // vector_add: 16-byte runs would idle half the threads; 8-byte runs keep all busy
  std::vector<RegisterLayout> add = vectorLayouts({256}, 32, 128, 0);
  CHECK(add[0] == L("spatial(128).local(2)"));
  CHECK(add[1] == L("local(2).spatial(128)"));
  CHECK(add[2] == L("replicate(2).spatial(64).local(4)"));
  // gemv: [8, 256] f16: a warp per row, two rows each
  CHECK(vectorLayouts({8, 256}, 16, 128, 1)[0] == L("local(2, 1).spatial(4, 32).local(1, 8)"));
  // unit stride along dimension 0 (a ViewGlobal with strides [1, N]): lanes run down dim 0
  CHECK(vectorLayouts({16, 2}, 16, 32, 0)[0] == L("column_spatial(16, 2)"));
  CHECK(vectorLayouts({64, 2}, 16, 32, 0)[0] == L("column_spatial(16, 2).local(4, 1)"));
  // a tile smaller than the block: replicated, widest runs first
  CHECK(vectorLayouts({16}, 32, 128, 0)[0] == L("replicate(32).spatial(4).local(4)"));
  // ... unless the widest runs leave each thread many more elements than narrower ones: [5, 828]
  // f32 (828 = 4 x 207, 5 odd) over 128 threads is 5 x 828 = 4,140 per thread with 16-byte runs
  // (every thread holds the tile) and 5 x 207 = 1,035 with 4-byte runs over four threads
  std::vector<RegisterLayout> odd = vectorLayouts({5, 828}, 32, 128, 1);
  CHECK(odd[0].numLocals() == 1035);
  CHECK(odd[0].numThreads() == 128);
  CHECK(vectorRun(odd[0], 1) == 1);
  CHECK(odd.back().numLocals() == 4140);
  // (a small tile keeps the widest runs: [64] over 128 threads, 4 elements per thread)
  CHECK(vectorLayouts({64}, 32, 128, 0)[0].numLocals() == 4);
  // sub-byte elements: 16 bytes are 32 u4
  CHECK(vectorLayouts({32, 32}, 4, 32, 1)[0] == L("spatial(32, 1).local(1, 32)"));
  // rank 0
  CHECK(vectorLayouts({}, 32, 64, 0)[0] == L("local().replicate(64)"));
}

TEST_CASE("load/store rule: over every small 2-D shape, the first option is the one intended") {
  // Every [a, b] with a, b in 1..48, f32 and f16, 32 and 128 threads: each option is a layout of
  // the shape over the threads; an option that keeps every thread busy (no replication) comes
  // first when there is one; otherwise the first has the fewest elements per thread, or at most
  // 64 of them with the widest runs.
  for (int bits : {32, 16})
    for (int64_t threads : {32, 128})
      for (int64_t a = 1; a <= 48; ++a)
        for (int64_t b = 1; b <= 48; ++b) {
          INFO("[" << a << ", " << b << "] bits " << bits << " threads " << threads);
          std::vector<RegisterLayout> opts = vectorLayouts({a, b}, bits, threads, 1);
          REQUIRE(!opts.empty());
          bool anyBusy = false;
          int64_t fewest = opts[0].numLocals();
          for (const RegisterLayout &l : opts) {
            CHECK(l.shape() == std::vector<int64_t>{a, b});
            CHECK(l.numThreads() == threads);
            // busy: every thread holds distinct elements, so threads x locals = the tile
            anyBusy = anyBusy || l.numThreads() * l.numLocals() == a * b;
            fewest = std::min(fewest, l.numLocals());
          }
          const RegisterLayout &first = opts[0];
          if (anyBusy)
            CHECK(first.numThreads() * first.numLocals() == a * b);
          else
            CHECK((first.numLocals() == fewest || first.numLocals() <= 64));
        }
}

TEST_CASE("load/store rule: the run length of a layout") {
  CHECK(vectorRun(L("spatial(4, 32).local(1, 4)"), 1) == 4);
  CHECK(vectorRun(L("spatial(4, 32).local(1, 4)"), 0) == 1);
  CHECK(vectorRun(L("local(2, 1).spatial(8, 4).local(1, 2)"), 1) == 2);
  // the last local mode of dim 1 is followed by a spatial one of dim 1: strided, no run
  CHECK(vectorRun(L("local(1, 2).spatial(1, 4)"), 1) == 1);
}

TEST_CASE("broadcast rule: the result reduced over the broadcast dimensions") {
  RegisterLayout x = L("spatial(4, 32).local(1, 4)");
  CHECK(*broadcastLayout(x, {4, 1}) == L("spatial(4, 1).replicate(32)"));
  CHECK(*broadcastLayout(x, {1, 128}) == L("replicate(4).spatial(1, 32).local(1, 4)"));
  CHECK(*broadcastLayout(x, {128}) == L("replicate(4).spatial(32).local(4)"));
  CHECK(*broadcastLayout(x, {4, 128}) == x);
  CHECK(!broadcastLayout(x, {3, 128}));
  CHECK(!broadcastLayout(x, {2, 4, 128}));
  // a16wx's scales under the mma C fragment
  CHECK(*broadcastLayout(L("local(2, 1).spatial(8, 4).local(1, 2)"), {16, 1}) ==
        L("local(2, 1).spatial(8, 1).replicate(4)"));
}

TEST_CASE("cover rule: the owners of each result element own the operand element") {
  RegisterLayout x = L("spatial(4, 32).local(1, 4)");
  CHECK(covers(x, x));
  CHECK(covers(x, L("spatial(4, 1).replicate(32)")));
  CHECK(covers(x, L("local(4, 1).replicate(128)"))); // every thread holds every row
  CHECK(!covers(x, L("local(1, 4).spatial(4, 32)")));
  CHECK(covers(x, L("replicate(4).spatial(1, 32).local(1, 4)")));  // the broadcast layout
  CHECK(!covers(x, L("replicate(4).local(1, 4).spatial(1, 32)"))); // columns 32 i + t % 32
  CHECK(!covers(x, L("spatial(2, 1).replicate(64)")));             // shapes that do not broadcast
}

TEST_CASE("shared rule: column-chunk readers and the swizzles they get") {
  RegisterLayout fragmentA = L("column_local(2, 2).spatial(8, 4).local(1, 2)");
  CHECK(readsColumnChunks(fragmentA, 16));
  CHECK(readsColumnChunks(L("local(2, 1).column_spatial(4, 8).local(2, 1)"), 16));
  CHECK(!readsColumnChunks(L("spatial(4, 32).local(1, 4)"), 32)); // a warp reads one row
  CHECK(!readsColumnChunks(L("spatial(128).local(2)"), 32));
  auto swizzled = [](std::vector<int64_t> shape, int bits, int base, int shift) {
    return SharedLayout::swizzle(SharedLayout::rowMajor(shape).value(), bits, base, shift).value();
  };
  // 64-byte rows (two per 128-byte line): the chunk bits 3-5 XORed with bits 6-8, the row pair
  CHECK(sharedLayoutFor({4, 128, 32}, 16, true) == swizzled({4, 128, 32}, 3, 3, 3));
  // 256-byte rows: bits 7-9, the row; programs/gemm/mma_sync.tasm's hand-written B swizzle
  CHECK(sharedLayoutFor({4, 32, 128}, 16, true) == swizzled({4, 32, 128}, 3, 3, 4));
  // ... and its epilogue tile
  CHECK(sharedLayoutFor({256, 128}, 16, true) == swizzled({256, 128}, 3, 3, 4));
  // 32-byte rows: four rows per 128-byte line, XOR with the line index (bits 6-8)
  CHECK(sharedLayoutFor({64, 16}, 16, true) == swizzled({64, 16}, 3, 3, 3));
  // f32: 4-element chunks (bits 2-4) XORed with the row (bits 5-7)
  CHECK(sharedLayoutFor({32, 32}, 32, true) == swizzled({32, 32}, 3, 2, 3));
  // no column reads, or no room for a swizzle: row-major
  CHECK(sharedLayoutFor({64, 32}, 16, false) == SharedLayout::rowMajor({64, 32}).value());
  CHECK(sharedLayoutFor({2, 100}, 16, true) == SharedLayout::rowMajor({2, 100}).value());
  CHECK(sharedLayoutFor({8, 4}, 32, true) == SharedLayout::rowMajor({8, 4}).value());
  CHECK(sharedLayoutFor({64, 4}, 16, true) == SharedLayout::rowMajor({64, 4}).value());
  // a tensor of fewer rows than a whole swizzle block takes fewer bits
  CHECK(sharedLayoutFor({4, 64}, 16, true) == swizzled({4, 64}, 2, 3, 3));
}
