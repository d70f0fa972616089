// Layout expressions: register layouts compared with layouts built by the factories by hand and
// with the reference functions of ISA section 3.1; shared layouts with the factories and hand
// offsets; parseRegisterLayout (used by `tilus-asm layout`) and its errors.
#include "asm_test_util.h"

namespace {

using namespace tilus;
using namespace tilus::testing;

RegisterLayout parsed(const std::string &text) {
  auto l = parseRegisterLayout(text);
  REQUIRE_OK(l);
  return *l;
}

RegisterLayout chain(std::initializer_list<Expected<RegisterLayout>> parts) {
  RegisterLayout acc;
  bool first = true;
  for (const Expected<RegisterLayout> &p : parts) {
    REQUIRE_OK(p);
    if (first) {
      acc = *p;
      first = false;
      continue;
    }
    auto prod = acc.product(*p);
    REQUIRE_OK(prod);
    acc = *prod;
  }
  return acc;
}

/// The register layout of AllocateRegister(f32, layout=TEXT) in a program with constants.
RegisterLayout inProgram(const std::string &text) {
  Program p = asmProgram(
      "const BM, W = 16, 2\ndef k<1>():\n    r = AllocateRegister(f32, layout=" + text + ")\n");
  REQUIRE(p.instructions[0].arg(ArgName::layout).regLayout);
  return *p.instructions[0].arg(ArgName::layout).regLayout;
}

/// Checks L(t, i) for every thread and local against a reference function.
template <typename F> void checkFunction(const RegisterLayout &l, int64_t T, int64_t N, F ref) {
  REQUIRE(l.numThreads() == T);
  REQUIRE(l.numLocals() == N);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t i = 0; i < N; ++i) {
      CAPTURE(t);
      CAPTURE(i);
      CHECK(l.apply(t, i) == ref(t, i));
    }
}

TEST_CASE("register layout chains equal the product of their primitives") {
  CHECK(parsed("local(2, 3)") == chain({RegisterLayout::local({2, 3})}));
  CHECK(parsed("local(2, 1).spatial(8, 4).local(1, 2)") ==
        chain({RegisterLayout::local({2, 1}), RegisterLayout::spatial({8, 4}),
               RegisterLayout::local({1, 2})}));
  CHECK(parsed("column_local(2, 2).spatial(8, 4).local(1, 2)") ==
        chain({RegisterLayout::columnLocal({2, 2}), RegisterLayout::spatial({8, 4}),
               RegisterLayout::local({1, 2})}));
  CHECK(parsed("spatial(2, 1).replicate(2).column_spatial(4, 8)") ==
        chain({RegisterLayout::spatial({2, 1}), RegisterLayout::replicate(2),
               RegisterLayout::columnSpatial({4, 8})}));
  CHECK(parsed("replicate(4).spatial(32)") ==
        chain({RegisterLayout::replicate(4), RegisterLayout::spatial({32})}));
  // Parentheses group without changing the (associative) product.
  CHECK(parsed("(local(2).spatial(4)).local(3)") == parsed("local(2).(spatial(4).local(3))"));
  // Integer arithmetic in sizes.
  CHECK(parsed("local(1 + 1, 6 / 2)") == parsed("local(2, 3)"));
  CHECK(parsed("  spatial(2 * 16) ") == parsed("spatial(32)"));
}

TEST_CASE("register layouts match the reference functions of ISA section 3.1") {
  checkFunction(parsed("local(2, 3)"), 1, 6,
                [](int64_t, int64_t i) { return std::vector<int64_t>{i / 3, i % 3}; });
  checkFunction(parsed("spatial(2, 3)"), 6, 1,
                [](int64_t t, int64_t) { return std::vector<int64_t>{t / 3, t % 3}; });
  checkFunction(parsed("local(2, 1).spatial(8, 4).local(1, 2)"), 32, 4, [](int64_t t, int64_t i) {
    return std::vector<int64_t>{t / 4 + 8 * (i / 2), 2 * (t % 4) + i % 2};
  });
  checkFunction(
      parsed("column_local(2, 2).spatial(8, 4).local(1, 2)"), 32, 8, [](int64_t t, int64_t i) {
        return std::vector<int64_t>{t / 4 + 8 * ((i / 2) % 2), 2 * (t % 4) + i % 2 + 8 * (i / 4)};
      });
  checkFunction(parsed("local(2, 1).column_spatial(4, 8).local(2, 1)"), 32, 4,
                [](int64_t t, int64_t i) {
                  return std::vector<int64_t>{8 * (i / 2) + 2 * (t % 4) + i % 2, t / 4};
                });
}

TEST_CASE("layouts in programs use constants") {
  CHECK(inProgram("spatial(BM / 8, 16).local(W, 1)") ==
        chain({RegisterLayout::spatial({2, 16}), RegisterLayout::local({2, 1})}));
  CHECK(inProgram("replicate(W).spatial(16)") == parsed("replicate(2).spatial(16)"));
}

TEST_CASE("shared layout expressions equal the factories") {
  Program p = asmProgram(R"(const N = 8
def k<1>():
    a = AllocateShared(f16, shape=[4, 8], layout=row_major(4, N))
    b = AllocateShared(f16, shape=[4, 8], layout=column_major(4, 8))
    c = AllocateShared(f16, shape=[4, 8], layout=strided([4, 8], [1, 4 + 1]))
    d = AllocateShared(f16, shape=[8, 8], layout=row_major(2, 2).row_major(4, 4))
    e = AllocateShared(f16, shape=[64, 32], layout=swizzle(row_major(64, 32), 3, 3, 3))
    f = AllocateShared(f16, shape=[16, 16], layout=row_major(2, 2).(row_major(2, 2).row_major(4, 4)))
    g = AllocateShared(f16, shape=[4, 8])
)");
  auto layout = [&](size_t k) { return *p.instructions[k].arg(ArgName::layout).sharedLayout; };
  CHECK(layout(0) == *SharedLayout::rowMajor({4, 8}));
  CHECK(layout(1) == *SharedLayout::columnMajor({4, 8}));
  CHECK(layout(2) == *SharedLayout::strided({4, 8}, {1, 5}));
  CHECK(layout(3) ==
        *SharedLayout::tile(*SharedLayout::rowMajor({2, 2}), *SharedLayout::rowMajor({4, 4})));
  CHECK(layout(4) == *SharedLayout::swizzle(*SharedLayout::rowMajor({64, 32}), 3, 3, 3));
  CHECK(layout(5) == *SharedLayout::tile(*SharedLayout::rowMajor({2, 2}),
                                         *SharedLayout::tile(*SharedLayout::rowMajor({2, 2}),
                                                             *SharedLayout::rowMajor({4, 4}))));
  CHECK_FALSE(p.instructions[6].arg(ArgName::layout).present);
  // Hand-computed offsets: column-major [4, 8] puts (1, 2) at 1 + 2*4; the tiling puts (5, 6)
  // in tile (1, 1) at 3 * 16 and within it at (1, 2) -> 1*4 + 2.
  CHECK(layout(1).offset({1, 2}) == 9);
  CHECK(layout(2).offset({3, 7}) == 3 + 35);
  CHECK(layout(3).offset({5, 6}) == 3 * 16 + 6);
  // Swizzle<3,3,3> of row-major [64, 32]: o = 1*32 + 8 = 40, (40 >> 3) & (7 << 3) = 0 -> 40;
  // o = 9*32 = 288, (288 >> 3) & 56 = 36 & 56 = 32 -> 288 ^ 32 = 256.
  CHECK(layout(4).offset({1, 8}) == 40);
  CHECK(layout(4).offset({9, 0}) == 256);
}

TEST_CASE("layout errors") {
  auto invalid = parseRegisterLayout("local(2, 0)");
  CHECK_ERROR(invalid, ErrorCode::LayoutInvalid);
  CHECK(invalid.status().first().location.toString() == "<layout>:1:1");
  auto rank = parseRegisterLayout("local(2).spatial(2, 2)");
  CHECK_ERROR(rank, ErrorCode::LayoutInvalid);
  CHECK(rank.status().first().location.toString() == "<layout>:1:10");
  CHECK_ERROR(parseRegisterLayout("local(N)"), ErrorCode::UndefinedName);
  CHECK_ERROR(parseRegisterLayout("blocked(2)"), ErrorCode::BadArgument);
  CHECK_ERROR(parseRegisterLayout("local(2.5)"), ErrorCode::BadArgument);
  CHECK_ERROR(parseRegisterLayout("replicate(2, 2)"), ErrorCode::BadArgument);
  CHECK_ERROR(parseRegisterLayout("local"), ErrorCode::BadArgument);
  CHECK_ERROR(parseRegisterLayout("local(n=2)"), ErrorCode::BadArgument);
  CHECK_ERROR(parseRegisterLayout("local(2) spatial(2)"), ErrorCode::Syntax);
  CHECK_ERROR(parseRegisterLayout(""), ErrorCode::Syntax);

  auto inProg = asmText("def k<1>(i32 n):\n    r = AllocateRegister(f32, layout=spatial(n))\n");
  CHECK_ERROR(inProg, ErrorCode::BadArgument);
  CHECK(firstWhere(inProg.status()) == "t.tasm:2:46");
  auto shared = asmText("def k<1>():\n    s = AllocateShared(f16, shape=[4], "
                        "layout=swizzle(row_major(4), 3, 0, 1))\n");
  CHECK_ERROR(shared, ErrorCode::LayoutInvalid);
  CHECK(firstWhere(shared.status()) == "t.tasm:2:47");
  CHECK_ERROR(asmText("def k<1>():\n    s = AllocateShared(f16, shape=[4], layout=diagonal(4))\n"),
              ErrorCode::BadArgument);
  CHECK_ERROR(
      asmText("def k<1>():\n    s = AllocateShared(f16, shape=[4], layout=strided([4], 1))\n"),
      ErrorCode::BadArgument);
}

} // namespace
