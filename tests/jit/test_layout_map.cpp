// The JIT's split of register layouts into thread and local parts (jit/layout_map.h), checked
// over every (thread, slot) against RegisterLayout::apply and owners(), and the slot matching
// of elementwise operands against hand-computed tables.
#include "jit/layout_map.h"

#include "assembler/assembler.h"
#include "test_helpers.h"

#include <set>

namespace {

using namespace tilus;
using tilus::jit::LayoutMap;

RegisterLayout parse(const char *text) {
  Expected<RegisterLayout> l = parseRegisterLayout(text);
  REQUIRE_OK(l);
  return *l;
}

const char *kLayouts[] = {
    "local(2, 1).spatial(8, 4).local(1, 2)",
    "column_local(2, 2).spatial(8, 4).local(1, 2)",
    "local(2, 1).column_spatial(4, 8).local(2, 1)",
    "spatial(4, 32).local(1, 4)",
    "spatial(4, 1).replicate(32)",
    "spatial(128).local(2)",
    "spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)",
    "spatial(2, 1).replicate(2).local(2, 2).column_local(2, 2).spatial(8, 4).local(1, 2)",
    "replicate(2).spatial(1, 2).local(2, 4).local(2, 1).column_spatial(4, 8).local(2, 1)",
    "local(3).spatial(32)",
    "replicate(4).spatial(1, 8).local(16, 1)",
    "column_spatial(2, 3, 4).local(2, 1, 3)",
    "local(2).replicate(3).column_local(2).spatial(2)",
};

} // namespace

TEST_CASE("LayoutMap: x(t, i) = S(t) + Loc(i) equals RegisterLayout::apply everywhere") {
  for (const char *text : kLayouts) {
    INFO(text);
    RegisterLayout layout = parse(text);
    LayoutMap map(layout);
    REQUIRE(map.threads() == layout.numThreads());
    REQUIRE(map.locals() == layout.numLocals());
    std::vector<int64_t> x(size_t(map.rank()) + 1);
    for (int64_t t = 0; t < map.threads(); ++t)
      for (int64_t i = 0; i < map.locals(); ++i) {
        map.apply(t, i, x.data());
        std::vector<int64_t> want = layout.apply(t, i);
        REQUIRE(std::vector<int64_t>(x.begin(), x.begin() + map.rank()) == want);
        CHECK(map.localSlotOf(x.data()) == i);
        CHECK(map.owns(t, x.data()));
      }
  }
}

TEST_CASE("LayoutMap: primary threads are the first owners, owns() matches owners()") {
  for (const char *text : kLayouts) {
    INFO(text);
    RegisterLayout layout = parse(text);
    LayoutMap map(layout);
    std::vector<std::vector<std::pair<int64_t, int64_t>>> owners = layout.owners();
    std::set<int64_t> firstOwnerThreads, allThreads;
    for (const auto &list : owners)
      firstOwnerThreads.insert(list.front().first);
    for (int64_t t = 0; t < map.threads(); ++t) {
      // t is primary iff every element it holds has t as its first owner
      bool allFirst = true;
      for (int64_t i = 0; i < map.locals(); ++i)
        allFirst =
            allFirst && owners[size_t(layout.applyLinear(t, i))].front() == std::make_pair(t, i);
      CHECK(map.isPrimary(t) == allFirst);
    }
    // owns(t, x) iff (t, i) is in x's owner list for some i
    std::vector<int64_t> x(size_t(map.rank()) + 1);
    for (size_t e = 0; e < owners.size(); ++e) {
      int64_t rest = int64_t(e);
      for (int d = map.rank(); d-- > 0;) {
        x[size_t(d)] = rest % map.shape()[size_t(d)];
        rest /= map.shape()[size_t(d)];
      }
      std::set<int64_t> ownerThreads;
      for (auto [t, i] : owners[e])
        ownerThreads.insert(t);
      for (int64_t t = 0; t < map.threads(); ++t)
        CHECK(map.owns(t, x.data()) == (ownerThreads.count(t) == 1));
    }
  }
}

TEST_CASE("LayoutMap: reference terms of the mma C fragment (ISA section 3.1)") {
  LayoutMap map(parse("local(2, 1).spatial(8, 4).local(1, 2)"));
  // (t, i) -> (t/4 + 8 (i/2), 2 (t%4) + i%2)
  int64_t x[2];
  map.apply(13, 3, x);
  CHECK(x[0] == 13 / 4 + 8);
  CHECK(x[1] == 2 * (13 % 4) + 1);
  CHECK(map.localPart(3)[0] == 8);
  CHECK(map.localPart(3)[1] == 1);
  int64_t s[2];
  map.threadPart(13, s);
  CHECK(s[0] == 3);
  CHECK(s[1] == 2);
}

TEST_CASE("gatherSlots: same layout is the identity") {
  LayoutMap map(parse("column_local(2, 2).spatial(8, 4).local(1, 2)"));
  std::vector<jit::SlotSource> src = jit::gatherSlots(map, map);
  for (size_t i = 0; i < src.size(); ++i) {
    CHECK(src[i].ok);
    CHECK(src[i].uniform);
    CHECK(src[i].slot == int64_t(i));
  }
}

TEST_CASE("gatherSlots: broadcast of a row vector and thread-dependent slots") {
  // result spatial(4, 32).local(1, 4) [4, 128]; operand [4, 1] spatial(4, 1).replicate(32):
  // every result slot reads the operand's only slot.
  LayoutMap result(parse("spatial(4, 32).local(1, 4)"));
  LayoutMap column(parse("spatial(4, 1).replicate(32)"));
  for (const jit::SlotSource &s : jit::gatherSlots(result, column)) {
    CHECK(s.ok);
    CHECK(s.uniform);
    CHECK(s.slot == 0);
  }
  // result spatial(2).local(2) [4] (x = 2t + i); operand replicate(2).local(4): thread t reads
  // slot 2t + i, so slot 0 reads operand slot 0 in thread 0 and 2 in thread 1.
  LayoutMap r2(parse("spatial(2).local(2)"));
  LayoutMap o2(parse("replicate(2).local(4)"));
  std::vector<jit::SlotSource> src = jit::gatherSlots(r2, o2);
  REQUIRE(src.size() == 2);
  CHECK(src[0].ok);
  CHECK_FALSE(src[0].uniform);
  CHECK(src[0].perThread == std::vector<int64_t>{0, 2});
  CHECK(src[1].perThread == std::vector<int64_t>{1, 3});
  // operand spatial(2).local(2) (the other way round) is not owned: thread 0 needs x = 0..3
  std::vector<jit::SlotSource> bad = jit::gatherSlots(o2, r2);
  CHECK_FALSE(bad[2].ok);
}
