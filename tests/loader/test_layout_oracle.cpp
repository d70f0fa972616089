// The layout oracle (loader/layout_oracle.cpp) against a plain reference written from the rule
// text, over every pair (or quadruple) of a small domain of layouts. The reference uses
// RegisterLayout::owners() (element -> owner list); the oracle uses applyLinear (thread ->
// elements), so the two computations share nothing but the layout itself.
#include "check_test_util.h"
#include "loader/checker_impl.h"
#include "test_helpers.h"

#include <set>

using namespace tilus;
using namespace tilus::testing;

namespace {

/// Owner threads of every element, row-major.
std::vector<std::set<int64_t>> ownerThreads(const RegisterLayout &l) {
  std::vector<std::set<int64_t>> out;
  for (const auto &owners : l.owners()) {
    std::set<int64_t> threads;
    for (const auto &[t, i] : owners)
      threads.insert(t);
    out.push_back(threads);
  }
  return out;
}

/// ISA section 6, layout-mismatch: for every element of the result, each of its owner threads
/// owns the matching (broadcast) element of the operand.
bool referenceCover(const RegisterLayout &result, const RegisterLayout &operand) {
  std::vector<std::set<int64_t>> r = ownerThreads(result), o = ownerThreads(operand);
  const std::vector<int64_t> &rs = result.shape(), &os = operand.shape();
  for (size_t e = 0; e < r.size(); ++e) {
    std::vector<int64_t> idx = detail::unravelIndex(int64_t(e), rs);
    int64_t oe = 0;
    for (size_t q = 0; q < os.size(); ++q) {
      int64_t x = os[q] == 1 ? 0 : idx[idx.size() - os.size() + q];
      oe = oe * os[q] + x;
    }
    for (int64_t t : r[e])
      if (!o[oe].count(t))
        return false;
  }
  return true;
}

/// ISA section 6, dot-layout's per-thread rule.
bool referenceDot(const RegisterLayout &a, const RegisterLayout &b, const RegisterLayout &c,
                  const RegisterLayout &d) {
  const int64_t M = a.shape()[0], K = a.shape()[1], N = b.shape()[1];
  auto oa = ownerThreads(a), ob = ownerThreads(b), oc = ownerThreads(c), od = ownerThreads(d);
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n)
      for (int64_t t : od[m * N + n]) {
        if (!oc[m * N + n].count(t))
          return false;
        for (int64_t k = 0; k < K; ++k)
          if (!oa[m * K + k].count(t) || !ob[k * N + n].count(t))
            return false;
      }
  return true;
}

std::vector<RegisterLayout> domain(const std::vector<const char *> &texts) {
  std::vector<RegisterLayout> out;
  for (const char *t : texts)
    out.push_back(layoutOf(t));
  return out;
}

} // namespace

TEST_CASE("cover agrees with the reference over a domain of 4-thread layouts") {
  // Shapes [4, 4], [4, 1], [1, 4], [4] and [2, 4]; replicated and not.
  std::vector<RegisterLayout> ls = domain(
      {"spatial(4, 1).local(1, 4)", "local(1, 4).spatial(4, 1)", "spatial(1, 4).local(4, 1)",
       "column_spatial(2, 2).local(2, 2)", "spatial(2, 2).local(2, 2)", "local(2, 2).spatial(2, 2)",
       "local(4, 4).replicate(4)", "spatial(4, 1)", "local(4, 1).replicate(4)",
       "replicate(4).local(1, 4)", "spatial(1, 4)", "spatial(2, 1).replicate(2).local(2, 1)",
       "spatial(4)", "local(4).replicate(4)", "replicate(2).spatial(2).local(2)",
       "spatial(2, 2).local(1, 2)", "local(2, 1).replicate(2).spatial(1, 2).local(1, 2)"});
  detail::LayoutOracle oracle;
  int compared = 0, covered = 0;
  for (const RegisterLayout &r : ls)
    for (const RegisterLayout &o : ls) {
      std::optional<std::vector<int64_t>> b = detail::broadcastShapes(r.shape(), o.shape());
      if (!b || *b != r.shape())
        continue;
      CAPTURE(r.toString());
      CAPTURE(o.toString());
      bool want = referenceCover(r, o);
      std::optional<detail::CoverFailure> got = oracle.cover(r, o);
      CHECK(want == !got.has_value());
      // Asking again gives the memoised answer.
      CHECK(oracle.cover(r, o).has_value() == got.has_value());
      if (got) {
        // The witness is a real counterexample: the thread holds the result element...
        bool holds = false;
        for (int64_t i = 0; i < r.numLocals(); ++i)
          holds = holds || r.applyLinear(got->thread, i) == got->resultIndex;
        CHECK(holds);
        // ...and not the operand element.
        for (int64_t i = 0; i < o.numLocals(); ++i)
          CHECK(o.applyLinear(got->thread, i) != got->operandIndex);
      }
      ++compared;
      covered += want ? 1 : 0;
    }
  CHECK(compared > 60);
  CHECK(covered > 10);
  CHECK(compared - covered > 10);
}

TEST_CASE("cover witness of the worked example") {
  detail::LayoutOracle oracle;
  std::optional<detail::CoverFailure> f =
      oracle.cover(layoutOf("local(2).spatial(32)"), layoutOf("spatial(32).local(2)"));
  REQUIRE(f.has_value());
  CHECK(f->thread == 0);
  CHECK(f->resultIndex == 32);
  CHECK(f->operandIndex == 32);
}

TEST_CASE("per-thread Dot rule agrees with the reference over a domain") {
  // a [4, 2], b [2, 4], c and d [4, 4], 4 threads.
  std::vector<RegisterLayout> as =
      domain({"spatial(4, 1).local(1, 2)", "local(4, 2).replicate(4)",
              "spatial(2, 1).replicate(2).local(2, 2)", "spatial(4, 1).replicate(1).local(1, 2)",
              "spatial(2, 2).local(2, 1)"});
  std::vector<RegisterLayout> bs =
      domain({"local(2, 4).replicate(4)", "replicate(4).local(2, 4)", "spatial(1, 4).local(2, 1)",
              "replicate(2).spatial(1, 2).local(2, 2)"});
  std::vector<RegisterLayout> cs =
      domain({"spatial(4, 1).local(1, 4)", "spatial(2, 2).local(2, 2)", "spatial(1, 4).local(4, 1)",
              "local(4, 4).replicate(4)", "spatial(2, 2).local(2, 2)"});
  detail::LayoutOracle oracle;
  int holds = 0, total = 0;
  for (const RegisterLayout &a : as)
    for (const RegisterLayout &b : bs)
      for (const RegisterLayout &c : cs)
        for (const RegisterLayout &d : cs) {
          CAPTURE(a.toString());
          CAPTURE(b.toString());
          CAPTURE(c.toString());
          CAPTURE(d.toString());
          bool want = referenceDot(a, b, c, d);
          std::optional<detail::DotFailure> got = oracle.dotPerThread(a, b, c, d);
          CHECK(want == !got.has_value());
          holds += want ? 1 : 0;
          ++total;
        }
  CHECK(holds > 5);
  CHECK(total - holds > 50);
}
