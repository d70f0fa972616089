// The workspace plan (offsets and sizes of AllocateGlobal regions, computed by hand from the
// documented layout) and the dirty-range set (checked against a bitset over a whole small
// address space under random operations).
#include "vm/cuda/workspace.h"

#include "assembler/assembler.h"
#include "test_helpers.h"

#include <bitset>
#include <random>

using namespace tilus;
using namespace tilus::cuda;

namespace {

Program assembleOne(const char *text) {
  auto module = assemble(text);
  REQUIRE_OK(module);
  REQUIRE(module->programs.size() == 1);
  return module->programs[0];
}

VarValueFn paramsByName(const Program &program, std::map<std::string, uint64_t> values) {
  return [&program, values](VarId id) -> uint64_t {
    auto it = values.find(program.var(id).name);
    return it == values.end() ? 0 : it->second;
  };
}

} // namespace

TEST_CASE("workspace regions follow instruction order, 256-byte aligned, packed sizes") {
  Program program = assembleOne(R"(
def ws<1>(i32 n, f32* out) threads=32:
    a = AllocateGlobal(f32, shape=[n, 3])
    b = AllocateGlobal(i6, shape=[7], requires_clean=True)
    c = AllocateGlobal(f16, shape=[2 * n])
)");
  auto plan = planWorkspace(program, paramsByName(program, {{"n", 100}}));
  REQUIRE_OK(plan);
  REQUIRE(plan->regions.size() == 3);
  // a: 100*3*4 = 1200 bytes at 0; b: 7*6 = 42 bits -> 6 bytes at 1280; c: 400 bytes at 1536.
  CHECK(plan->regions[0].offset == 0);
  CHECK(plan->regions[0].bytes == 1200);
  CHECK_FALSE(plan->regions[0].requiresClean);
  CHECK(plan->regions[1].offset == 1280);
  CHECK(plan->regions[1].bytes == 6);
  CHECK(plan->regions[1].requiresClean);
  CHECK(plan->regions[2].offset == 1536);
  CHECK(plan->regions[2].bytes == 400);
  CHECK(plan->totalBytes == 1936);
  CHECK(plan->regions[0].instruction < plan->regions[1].instruction);
}

TEST_CASE("a program without AllocateGlobal needs no workspace") {
  Program program = assembleOne(R"(
def nows<1>(f32* out) threads=32:
    g = ViewGlobal(out, shape=[32])
    StoreGlobal(AllocateRegister(f32, layout=spatial(32)), g)
)");
  auto plan = planWorkspace(program, paramsByName(program, {}));
  REQUIRE_OK(plan);
  CHECK(plan->totalBytes == 0);
  CHECK(plan->regions.empty());
}

TEST_CASE("workspace shapes must depend on parameters only and be non-negative") {
  Program blockDependent = assembleOne(R"(
def bad<2>(f32* out) threads=32:
    bi = BlockIndices()
    a = AllocateGlobal(f32, shape=[bi + 1])
)");
  CHECK_ERROR(planWorkspace(blockDependent, paramsByName(blockDependent, {})), ErrorCode::Runtime);
  Program negative = assembleOne(R"(
def neg<1>(i32 n) threads=32:
    a = AllocateGlobal(f32, shape=[n])
)");
  CHECK_ERROR(planWorkspace(negative, paramsByName(negative, {{"n", 0xffffffffu}})),
              ErrorCode::Runtime);
  Program huge = assembleOne(R"(
def huge<1>(i64 n) threads=32:
    a = AllocateGlobal(f64, shape=[n, n])
)");
  CHECK_ERROR(planWorkspace(huge, paramsByName(huge, {{"n", uint64_t(1) << 30}})),
              ErrorCode::Runtime);
}

TEST_CASE("workspace sizes are checked before they are multiplied or summed") {
  // 2^32 x 2^32 x 2^32 bytes is 2^96: a 64-bit product would wrap to 0.
  Program wraps = assembleOne(R"(
def wraps<1>(i64 n) threads=32:
    a = AllocateGlobal(u8, shape=[n, n, n])
)");
  CHECK_ERROR(planWorkspace(wraps, paramsByName(wraps, {{"n", uint64_t(1) << 32}})),
              ErrorCode::Runtime);
  // Exactly 2^48 bytes is the largest workspace; one more byte is refused.
  Program exact = assembleOne(R"(
def exact<1>(i64 n) threads=32:
    a = AllocateGlobal(u1, shape=[n, 8])
)");
  auto plan = planWorkspace(exact, paramsByName(exact, {{"n", uint64_t(1) << 48}}));
  REQUIRE_OK(plan);
  CHECK(plan->totalBytes == uint64_t(1) << 48);
  CHECK_ERROR(planWorkspace(exact, paramsByName(exact, {{"n", (uint64_t(1) << 48) + 1}})),
              ErrorCode::Runtime);
  // Two regions of 2^47 + 1 bytes each fit alone but not together (2^48 + 256 + 1 bytes).
  Program sum = assembleOne(R"(
def sum<1>(i64 n) threads=32:
    a = AllocateGlobal(u8, shape=[n])
    b = AllocateGlobal(u8, shape=[n])
)");
  CHECK_ERROR(planWorkspace(sum, paramsByName(sum, {{"n", (uint64_t(1) << 47) + 1}})),
              ErrorCode::Runtime);
  // A shape computed with a division by zero is refused, not taken as 0.
  Program byZero = assembleOne(R"(
def byzero<1>(i32 n, i32 d) threads=32:
    a = AllocateGlobal(f32, shape=[n / d])
)");
  CHECK_ERROR(planWorkspace(byZero, paramsByName(byZero, {{"n", 64}, {"d", 0}})),
              ErrorCode::Runtime);
  auto fine = planWorkspace(byZero, paramsByName(byZero, {{"n", 64}, {"d", 2}}));
  REQUIRE_OK(fine);
  CHECK(fine->totalBytes == 128);
}

TEST_CASE("dirty ranges agree with a bitset under random operations") {
  constexpr int kBits = 64;
  std::mt19937 rng(1234);
  for (int round = 0; round < 200; ++round) {
    DirtyRanges ranges;
    std::bitset<kBits> reference;
    for (int op = 0; op < 12; ++op) {
      uint64_t a = rng() % (kBits + 1), b = rng() % (kBits + 1);
      uint64_t begin = std::min(a, b), end = std::max(a, b);
      if (rng() % 2) {
        ranges.add(begin, end);
        for (uint64_t i = begin; i < end; ++i)
          reference.set(i);
      } else {
        std::bitset<kBits> taken;
        for (const DirtyRanges::Range &r : ranges.takeClean(begin, end))
          for (uint64_t i = r.begin; i < r.end; ++i) {
            CHECK_FALSE(taken.test(i)); // taken ranges are disjoint
            taken.set(i);
          }
        std::bitset<kBits> expected;
        for (uint64_t i = begin; i < end; ++i)
          if (reference.test(i))
            expected.set(i);
        CHECK(taken == expected);
        reference &= ~expected;
      }
      // The set is sorted, disjoint, non-empty ranges whose union is the reference.
      std::bitset<kBits> covered;
      uint64_t last = 0;
      for (const DirtyRanges::Range &r : ranges.ranges()) {
        CHECK(r.begin < r.end);
        CHECK(r.begin >= last);
        last = r.end;
        for (uint64_t i = r.begin; i < r.end; ++i)
          covered.set(i);
      }
      CHECK(covered == reference);
    }
  }
}

TEST_CASE("adding touching ranges merges them") {
  DirtyRanges ranges;
  ranges.add(0, 4);
  ranges.add(8, 12);
  ranges.add(4, 8);
  REQUIRE(ranges.ranges().size() == 1);
  CHECK(ranges.ranges()[0] == DirtyRanges::Range{0, 12});
  auto taken = ranges.takeClean(2, 5);
  REQUIRE(taken.size() == 1);
  CHECK(taken[0] == DirtyRanges::Range{2, 5});
  REQUIRE(ranges.ranges().size() == 2);
  CHECK(ranges.ranges()[0] == DirtyRanges::Range{0, 2});
  CHECK(ranges.ranges()[1] == DirtyRanges::Range{5, 12});
}

TEST_CASE("taking a clean range next to a dirty one takes nothing and keeps it whole") {
  DirtyRanges ranges;
  ranges.add(0, 10);
  CHECK(ranges.takeClean(10, 20).empty()); // touches [0, 10) at its end: no overlap
  CHECK(ranges.takeClean(20, 30).empty());
  REQUIRE(ranges.ranges().size() == 1);
  CHECK(ranges.ranges()[0] == DirtyRanges::Range{0, 10});
  ranges.add(30, 40);
  CHECK(ranges.takeClean(20, 30).empty()); // touches [30, 40) at its start
  REQUIRE(ranges.ranges().size() == 2);
  CHECK(ranges.ranges()[1] == DirtyRanges::Range{30, 40});
}

TEST_CASE("overlapping() gives the dirty parts of a range and changes nothing") {
  constexpr int kBits = 64;
  std::mt19937 rng(4321);
  for (int round = 0; round < 200; ++round) {
    DirtyRanges ranges;
    std::bitset<kBits> reference;
    for (int op = 0; op < 4; ++op) {
      uint64_t a = rng() % (kBits + 1), b = rng() % (kBits + 1);
      ranges.add(std::min(a, b), std::max(a, b));
      for (uint64_t i = std::min(a, b); i < std::max(a, b); ++i)
        reference.set(i);
    }
    std::vector<DirtyRanges::Range> before = ranges.ranges();
    uint64_t a = rng() % (kBits + 1), b = rng() % (kBits + 1);
    uint64_t begin = std::min(a, b), end = std::max(a, b);
    std::bitset<kBits> found, expected;
    for (const DirtyRanges::Range &r : ranges.overlapping(begin, end)) {
      CHECK(r.begin < r.end);
      for (uint64_t i = r.begin; i < r.end; ++i) {
        CHECK_FALSE(found.test(i));
        found.set(i);
      }
    }
    for (uint64_t i = begin; i < end; ++i)
      if (reference.test(i))
        expected.set(i);
    CHECK(found == expected);
    CHECK(ranges.ranges() == before);
  }
  DirtyRanges touching;
  touching.add(0, 10);
  CHECK(touching.overlapping(10, 20).empty()); // touching is not overlapping
  auto inside = touching.overlapping(3, 5);
  REQUIRE(inside.size() == 1);
  CHECK(inside[0] == DirtyRanges::Range{3, 5});
}
