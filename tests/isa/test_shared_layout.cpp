// Shared layouts (ISA section 3.2) against hand-written offset formulas over whole shapes, CuTe's
// Swizzle<B, M, S> formula, brute-force size and injectivity, and a small parser in the test
// for the printed expressions (the real parser is the assembler's).
#include "isa/shared_layout.h"
#include "tests/test_helpers.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <cctype>
#include <functional>
#include <set>

using namespace tilus;

namespace {

SharedLayout make(Expected<SharedLayout> l) {
  REQUIRE_OK(l);
  return *l;
}

void forEachIndex(const std::vector<int64_t> &shape,
                  const std::function<void(const std::vector<int64_t> &)> &fn) {
  std::vector<int64_t> x(shape.size(), 0);
  std::function<void(size_t)> rec = [&](size_t d) {
    if (d == shape.size()) {
      fn(x);
      return;
    }
    for (x[d] = 0; x[d] < shape[d]; ++x[d])
      rec(d + 1);
  };
  rec(0);
}

void checkOffsets(const SharedLayout &l, const std::vector<int64_t> &shape,
                  const std::function<int64_t(const std::vector<int64_t> &)> &ref) {
  CHECK(l.shape() == shape);
  int64_t count = 0;
  forEachIndex(shape, [&](const std::vector<int64_t> &x) {
    CHECK(l.offset(x) == ref(x));
    ++count;
  });
  CHECK(l.numElements() == count);
}

/// size() and isInjective() by brute force.
void checkSizeAndInjectivity(const SharedLayout &l) {
  int64_t maxOffset = -1;
  std::set<int64_t> offsets;
  int64_t count = 0;
  forEachIndex(l.shape(), [&](const std::vector<int64_t> &x) {
    maxOffset = std::max(maxOffset, l.offset(x));
    offsets.insert(l.offset(x));
    ++count;
  });
  INFO(l.toString());
  CHECK(l.size() == maxOffset + 1);
  CHECK(l.isInjective() == (int64_t(offsets.size()) == count));
}

// expr := atom ('.' atom)* ; atom := row_major(INTS) | column_major(INTS)
//       | strided([INTS], [INTS]) | swizzle(expr, INT, INT, INT)
class Parser {
public:
  explicit Parser(std::string text) : text_(std::move(text)) {}

  std::optional<SharedLayout> parseAll() {
    std::optional<SharedLayout> l = expr();
    if (!l || pos_ != text_.size())
      return std::nullopt;
    return l;
  }

private:
  bool eat(const std::string &s) {
    if (text_.compare(pos_, s.size(), s) != 0)
      return false;
    pos_ += s.size();
    return true;
  }
  std::optional<int64_t> integer() {
    const size_t start = pos_;
    while (pos_ < text_.size() && std::isdigit(text_[pos_]))
      ++pos_;
    if (pos_ == start)
      return std::nullopt;
    return std::stoll(text_.substr(start, pos_ - start));
  }
  std::optional<std::vector<int64_t>> integers(const std::string &close) {
    std::vector<int64_t> out;
    while (!eat(close)) {
      if (!out.empty() && !eat(", "))
        return std::nullopt;
      std::optional<int64_t> v = integer();
      if (!v)
        return std::nullopt;
      out.push_back(*v);
    }
    return out;
  }
  std::optional<SharedLayout> atom() {
    for (bool column : {false, true})
      if (eat(column ? "column_major(" : "row_major(")) {
        auto n = integers(")");
        if (!n)
          return std::nullopt;
        return make(column ? SharedLayout::columnMajor(*n) : SharedLayout::rowMajor(*n));
      }
    if (eat("strided([")) {
      auto n = integers("]");
      if (!n || !eat(", ["))
        return std::nullopt;
      auto s = integers("]");
      if (!s || !eat(")"))
        return std::nullopt;
      return make(SharedLayout::strided(*n, *s));
    }
    if (eat("swizzle(")) {
      std::optional<SharedLayout> inner = expr();
      if (!inner || !eat(", "))
        return std::nullopt;
      auto params = integers(")");
      if (!params || params->size() != 3)
        return std::nullopt;
      return make(SharedLayout::swizzle(*inner, (*params)[0], (*params)[1], (*params)[2]));
    }
    return std::nullopt;
  }
  std::optional<SharedLayout> expr() {
    std::optional<SharedLayout> l = atom();
    while (l && eat(".")) {
      std::optional<SharedLayout> r = atom();
      if (!r)
        return std::nullopt;
      l = make(SharedLayout::tile(*l, *r));
    }
    return l;
  }

  std::string text_;
  size_t pos_ = 0;
};

void checkRoundTrip(const SharedLayout &l) {
  INFO(l.toString());
  std::optional<SharedLayout> back = Parser(l.toString()).parseAll();
  REQUIRE(back.has_value());
  CHECK(*back == l);
}

// CuTe's Swizzle<B, M, S>::apply for S >= 0: offset ^ ((offset & yyy_msk) >> S) with
// yyy_msk = ((1 << B) - 1) << (M + S).
int64_t cuteSwizzle(int64_t offset, int64_t b, int64_t m, int64_t s) {
  const int64_t yyyMask = ((int64_t(1) << b) - 1) << (m + s);
  return offset ^ ((offset & yyyMask) >> s);
}

} // namespace

TEST_CASE("shared layout: row_major, column_major and strided offsets") {
  const SharedLayout r = make(SharedLayout::rowMajor({2, 3, 4}));
  checkOffsets(r, {2, 3, 4}, [](const auto &x) { return x[0] * 12 + x[1] * 4 + x[2]; });
  CHECK(r.size() == 24);
  CHECK(r.isInjective());
  CHECK(r.kind() == SharedLayout::Kind::RowMajor);

  const SharedLayout c = make(SharedLayout::columnMajor({3, 5}));
  checkOffsets(c, {3, 5}, [](const auto &x) { return x[0] + 3 * x[1]; });
  CHECK(c.size() == 15);
  CHECK(c.isInjective());

  const SharedLayout s = make(SharedLayout::strided({4, 3}, {5, 1}));
  checkOffsets(s, {4, 3}, [](const auto &x) { return 5 * x[0] + x[1]; });
  CHECK(s.size() == 18); // padded rows: 3 * 5 + 2 + 1
  CHECK(s.isInjective());
  CHECK(s.strides() == std::vector<int64_t>{5, 1});

  const SharedLayout broadcast = make(SharedLayout::strided({2, 3}, {0, 1}));
  CHECK(broadcast.size() == 3);
  CHECK_FALSE(broadcast.isInjective());
  const SharedLayout overlap = make(SharedLayout::strided({3, 3}, {2, 1}));
  CHECK(overlap.size() == 7);
  CHECK_FALSE(overlap.isInjective());
  const SharedLayout sparse = make(SharedLayout::strided({2, 2}, {1000, 1}));
  CHECK(sparse.size() == 1002);
  CHECK(sparse.isInjective());

  for (const SharedLayout &l : {r, c, s, broadcast, overlap, sparse}) {
    checkSizeAndInjectivity(l);
    checkRoundTrip(l);
  }
  CHECK(r.toString() == "row_major(2, 3, 4)");
  CHECK(c.toString() == "column_major(3, 5)");
  CHECK(s.toString() == "strided([4, 3], [5, 1])");
}

TEST_CASE("shared layout: rank 0") {
  const SharedLayout zero;
  CHECK(zero.rank() == 0);
  CHECK(zero.size() == 1);
  CHECK(zero.numElements() == 1);
  CHECK(zero.offset(std::vector<int64_t>{}) == 0);
  CHECK(zero.isInjective());
  CHECK(zero.toString() == "row_major()");
  CHECK(make(SharedLayout::rowMajor({})) == zero);
}

TEST_CASE("shared layout: tiling") {
  const SharedLayout a = make(SharedLayout::rowMajor({2, 2}));
  const SharedLayout b = make(SharedLayout::rowMajor({4, 8}));
  const SharedLayout t = make(SharedLayout::tile(a, b));
  checkOffsets(t, {8, 16}, [](const auto &x) {
    return (x[0] / 4 * 2 + x[1] / 8) * 32 + (x[0] % 4) * 8 + x[1] % 8;
  });
  CHECK(t.size() == 128);
  CHECK(t.toString() == "row_major(2, 2).row_major(4, 8)");

  // A padded inner tile (row stride 9): size(B) = 3 * 9 + 7 + 1 = 35; outer column-major.
  const SharedLayout padded = make(SharedLayout::strided({4, 8}, {9, 1}));
  const SharedLayout outer = make(SharedLayout::columnMajor({3, 2}));
  const SharedLayout tp = make(SharedLayout::tile(outer, padded));
  CHECK(padded.size() == 35);
  checkOffsets(tp, {12, 16}, [](const auto &x) {
    return (x[0] / 4 + 3 * (x[1] / 8)) * 35 + 9 * (x[0] % 4) + x[1] % 8;
  });
  CHECK(tp.size() == 6 * 35);

  // Tiling is associative; trees are kept left-leaning so the text reads back left to right.
  const SharedLayout c = make(SharedLayout::columnMajor({2, 3}));
  const SharedLayout left = make(SharedLayout::tile(make(SharedLayout::tile(a, b)), c));
  const SharedLayout right = make(SharedLayout::tile(a, make(SharedLayout::tile(b, c))));
  CHECK(left == right);
  CHECK(right.children()[0]->kind() == SharedLayout::Kind::Tile);
  CHECK(right.children()[1]->kind() == SharedLayout::Kind::ColumnMajor);
  CHECK(right.toString() == "row_major(2, 2).row_major(4, 8).column_major(2, 3)");
  checkOffsets(right, {16, 48}, [](const auto &x) {
    const int64_t y0 = x[0] / 2, y1 = x[1] / 3; // index into a.b
    const int64_t ab = (y0 / 4 * 2 + y1 / 8) * 32 + (y0 % 4) * 8 + y1 % 8;
    return ab * 6 + (x[0] % 2) + 2 * (x[1] % 3);
  });

  const SharedLayout broadcastInner = make(SharedLayout::strided({2}, {0}));
  const SharedLayout tb =
      make(SharedLayout::tile(make(SharedLayout::rowMajor({3})), broadcastInner));
  CHECK(tb.size() == 3);
  CHECK_FALSE(tb.isInjective());

  for (const SharedLayout &l : {t, tp, left, tb}) {
    checkSizeAndInjectivity(l);
    checkRoundTrip(l);
  }
  CHECK(t.isInjective());
  CHECK(tp.isInjective());
}

TEST_CASE("shared layout: swizzle matches CuTe's Swizzle<B, M, S>") {
  struct Case {
    std::vector<int64_t> shape;
    int64_t bits, base, shift;
  };
  for (const Case &k : {Case{{8, 64}, 3, 3, 3}, Case{{16, 32}, 2, 3, 3}, Case{{32, 8}, 3, 0, 3},
                        Case{{4, 16}, 1, 2, 4}, Case{{8, 8}, 0, 2, 0}, Case{{64, 64}, 3, 4, 3}}) {
    const SharedLayout inner = make(SharedLayout::rowMajor(k.shape));
    const SharedLayout l = make(SharedLayout::swizzle(inner, k.bits, k.base, k.shift));
    INFO(l.toString());
    checkOffsets(l, k.shape, [&](const auto &x) {
      return cuteSwizzle(x[0] * k.shape[1] + x[1], k.bits, k.base, k.shift);
    });
    if (k.bits == 0) {
      // no bits: the inner layout itself (a constant can turn a swizzle off)
      CHECK(l == inner);
      CHECK(l.kind() == SharedLayout::Kind::RowMajor);
    } else {
      CHECK(l.kind() == SharedLayout::Kind::Swizzle);
      CHECK(l.swizzleBits() == k.bits);
      CHECK(l.swizzleBase() == k.base);
      CHECK(l.swizzleShift() == k.shift);
      CHECK(*l.children()[0] == inner);
    }
    CHECK(l.isInjective());
    checkSizeAndInjectivity(l);
    checkRoundTrip(l);
  }
  const SharedLayout s =
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({64, 32})), 3, 3, 3));
  CHECK(s.toString() == "swizzle(row_major(64, 32), 3, 3, 3)");
  CHECK(s.size() == 2048);

  // A swizzle can move offsets past the inner layout's size: bit 3 ^= bit 4 maps 23 to 31.
  const SharedLayout grow =
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({24})), 1, 3, 1));
  CHECK(grow.offset(std::vector<int64_t>{23}) == 31);
  CHECK(grow.size() == 32);
  CHECK(grow.isInjective());
  checkSizeAndInjectivity(grow);

  // Swizzle of a non-injective layout stays non-injective; tiles of swizzles print and parse.
  const SharedLayout bad =
      make(SharedLayout::swizzle(make(SharedLayout::strided({4, 8}, {0, 1})), 2, 0, 3));
  CHECK_FALSE(bad.isInjective());
  checkSizeAndInjectivity(bad);
  const SharedLayout tiled = make(SharedLayout::tile(make(SharedLayout::rowMajor({2, 1})), s));
  CHECK(tiled.toString() == "row_major(2, 1).swizzle(row_major(64, 32), 3, 3, 3)");
  checkRoundTrip(tiled);
  checkSizeAndInjectivity(tiled);
  const SharedLayout nested = make(SharedLayout::swizzle(tiled, 1, 8, 4));
  checkRoundTrip(nested);
  checkSizeAndInjectivity(nested);
}

TEST_CASE("shared layout: invalid layouts") {
  CHECK_ERROR(SharedLayout::rowMajor({0}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::rowMajor({4, -1}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::columnMajor({0, 2}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::strided({2, 2}, {1}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::strided({2, 2}, {-1, 1}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::strided({0}, {1}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::strided({2}, {int64_t(1) << 62}), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::rowMajor({int64_t(1) << 13, int64_t(1) << 12}),
              ErrorCode::LayoutInvalid);
  const SharedLayout r2 = make(SharedLayout::rowMajor({2, 2}));
  const SharedLayout r1 = make(SharedLayout::rowMajor({4}));
  CHECK_ERROR(SharedLayout::tile(r2, r1), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::swizzle(r2, 3, 0, 2), ErrorCode::LayoutInvalid); // shift < bits
  CHECK_ERROR(SharedLayout::swizzle(r2, -1, 0, 2), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::swizzle(r2, 1, -1, 2), ErrorCode::LayoutInvalid);
  CHECK_ERROR(SharedLayout::swizzle(r2, 1, 70, 2), ErrorCode::LayoutInvalid);
  CHECK_OK(SharedLayout::swizzle(r2, 0, 0, 0));
}

TEST_CASE("shared layout: equality is structural") {
  const SharedLayout r = make(SharedLayout::rowMajor({4, 4}));
  CHECK(r == make(SharedLayout::rowMajor({4, 4})));
  CHECK_FALSE(r == make(SharedLayout::rowMajor({4, 2})));
  CHECK_FALSE(r == make(SharedLayout::columnMajor({4, 4})));
  CHECK_FALSE(r == make(SharedLayout::strided({4, 4}, {4, 1})));
  CHECK_FALSE(make(SharedLayout::swizzle(r, 1, 0, 2)) == make(SharedLayout::swizzle(r, 1, 0, 3)));
  CHECK_FALSE(make(SharedLayout::swizzle(r, 1, 0, 2)) == make(SharedLayout::swizzle(r, 1, 1, 2)));
  CHECK_FALSE(make(SharedLayout::tile(r, r)) ==
              make(SharedLayout::tile(r, make(SharedLayout::columnMajor({4, 4})))));
}

TEST_CASE("shared layout: contiguousRuns, shown from the expression or checked, agrees with "
          "every index") {
  // The reference: every run of `width` indices along `dim` starting at a multiple of `width`
  // maps to consecutive offsets from a multiple of `width`, checked index by index here. Over
  // linear layouts, tilings (inner tiles whose runs fit and whose sizes keep the start aligned,
  // and ones that do not), swizzles (runs inside and across the swizzled bits) and their nests,
  // for every dimension and widths 1 to 16.
  auto reference = [](const SharedLayout &l, int dim, int64_t width) {
    const std::vector<int64_t> &shape = l.shape();
    if (shape[size_t(dim)] % width != 0)
      return false;
    bool ok = true;
    forEachIndex(shape, [&](const std::vector<int64_t> &x) {
      if (x[size_t(dim)] % width != 0)
        return;
      std::vector<int64_t> y = x;
      const int64_t first = l.offset(y);
      ok = ok && first % width == 0;
      for (int64_t j = 1; j < width; ++j) {
        ++y[size_t(dim)];
        ok = ok && l.offset(y) == first + j;
      }
    });
    return ok;
  };
  std::vector<SharedLayout> layouts = {
      make(SharedLayout::rowMajor({4, 16})),
      make(SharedLayout::rowMajor({3, 8, 6})),
      make(SharedLayout::columnMajor({16, 4})),
      make(SharedLayout::strided({4, 8}, {10, 1})),
      make(SharedLayout::strided({4, 8}, {16, 1})),
      make(SharedLayout::strided({8, 4}, {1, 8})),
      make(SharedLayout::strided({4, 8}, {16, 2})), // even offsets: no run of two is consecutive
      make(SharedLayout::tile(make(SharedLayout::rowMajor({2, 2})),
                              make(SharedLayout::rowMajor({4, 8})))),
      make(SharedLayout::tile(make(SharedLayout::columnMajor({2, 3})),
                              make(SharedLayout::rowMajor({4, 4})))),
      make(SharedLayout::tile(make(SharedLayout::rowMajor({2, 2})),
                              make(SharedLayout::strided({2, 6}, {6, 1})))),
      make(SharedLayout::tile(make(SharedLayout::rowMajor({2, 2})),
                              make(SharedLayout::columnMajor({8, 4})))),
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({16, 64})), 3, 3, 3)),
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({8, 32})), 2, 2, 3)),
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({8, 32})), 2, 0, 3)),
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({4, 16})), 0, 2, 2)),
      make(SharedLayout::swizzle(
          make(SharedLayout::swizzle(make(SharedLayout::rowMajor({8, 32})), 1, 2, 5)), 2, 3, 2)),
      make(SharedLayout::tile(
          make(SharedLayout::rowMajor({2, 1, 3})),
          make(SharedLayout::swizzle(make(SharedLayout::rowMajor({1, 8, 64})), 3, 3, 3)))),
      make(SharedLayout::swizzle(make(SharedLayout::tile(make(SharedLayout::rowMajor({2, 2})),
                                                         make(SharedLayout::rowMajor({8, 16})))),
                                 2, 4, 3)),
  };
  int64_t cases = 0, contiguous = 0;
  for (const SharedLayout &l : layouts)
    for (int dim = 0; dim < l.rank(); ++dim)
      for (int64_t width : {1, 2, 3, 4, 8, 16}) {
        bool want = reference(l, dim, width);
        std::string what =
            l.toString() + " dim " + std::to_string(dim) + " width " + std::to_string(width);
        CHECK_MESSAGE(l.contiguousRuns(dim, width) == want, what);
        ++cases;
        contiguous += want ? 1 : 0;
      }
  // both answers occur, widths above 1 among the contiguous ones
  CHECK(contiguous > 20);
  CHECK(cases - contiguous > 20);
  CHECK(!make(SharedLayout::rowMajor({4, 16})).contiguousRuns(2, 2)); // no such dimension
}
