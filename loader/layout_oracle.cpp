// Ownership questions about register layouts (the cover rule and the per-thread Dot rule),
// answered by enumeration and memoised per layout.
//
// Why enumeration: a layout is a function (t, i) -> element; "which elements does thread t
// own" is the image of {t} x [0, N), T*N evaluations in all, which for the tiles of one block
// (at most a few tens of thousands of slots) costs microseconds. Sorting each thread's
// elements makes "does t own e" a binary search, so a cover check costs O(T*N log N). Both
// the per-layout ownership tables and the answers per layout pair (or Dot quadruple) are
// cached: the checker asks the same question for every instruction that combines the same
// layouts, and a program typically uses a handful of layouts, so checking stays linear in
// the number of instructions.
//
// Worked example (cover): result local(2).spatial(32) ([64]), operand spatial(32).local(2)
// ([64]). Thread 0 owns result elements {0, 32} but operand elements {0, 1}: the cover fails
// with thread 0, result element 32, operand element 32.
#include "loader/checker_impl.h"

#include <algorithm>

namespace tilus::detail {

namespace {

struct LayoutHash {
  size_t operator()(const RegisterLayout &l) const { return l.hash(); }
};

size_t combine(size_t seed, size_t h) {
  return seed ^ (h + 0x9e3779b97f4a7c15ULL + (seed << 6) + (seed >> 2));
}

struct LayoutTuple {
  std::vector<RegisterLayout> layouts;
  friend bool operator==(const LayoutTuple &, const LayoutTuple &) = default;
};

struct TupleHash {
  size_t operator()(const LayoutTuple &t) const {
    size_t h = t.layouts.size();
    for (const RegisterLayout &l : t.layouts)
      h = combine(h, l.hash());
    return h;
  }
};

struct VerdictHash {
  size_t operator()(const std::pair<uint64_t, LayoutTuple> &k) const {
    return combine(std::hash<uint64_t>()(k.first), TupleHash()(k.second));
  }
};

/// Per thread, the sorted row-major linear indices of the elements it owns.
struct Owned {
  int64_t threads = 0;
  int64_t locals = 0;
  std::vector<int64_t> elems; // thread t's elements at [t*locals, (t+1)*locals), sorted

  const int64_t *begin(int64_t t) const { return elems.data() + t * locals; }
  const int64_t *end(int64_t t) const { return begin(t) + locals; }
  bool owns(int64_t t, int64_t e) const {
    return t < threads && std::binary_search(begin(t), end(t), e);
  }
};

/// Sorted values that occur exactly `count` times (distinct entries only) in a sorted range.
std::vector<int64_t> fullRuns(const std::vector<int64_t> &keys, const std::vector<int64_t> &elems,
                              int64_t count) {
  std::vector<int64_t> out;
  size_t p = 0;
  while (p < keys.size()) {
    size_t q = p;
    int64_t distinct = 0;
    for (; q < keys.size() && keys[q] == keys[p]; ++q)
      distinct += (q == p || elems[q] != elems[q - 1]) ? 1 : 0;
    if (distinct == count)
      out.push_back(keys[p]);
    p = q;
  }
  return out;
}

} // namespace

struct LayoutOracle::Impl {
  std::unordered_map<RegisterLayout, std::unique_ptr<Owned>, LayoutHash> owned;
  std::unordered_map<LayoutTuple, std::optional<CoverFailure>, TupleHash> cover;
  std::unordered_map<LayoutTuple, std::optional<DotFailure>, TupleHash> dot;
  std::unordered_map<std::pair<uint64_t, LayoutTuple>, std::optional<std::string>, VerdictHash>
      verdicts;

  const Owned &ownedOf(const RegisterLayout &l) {
    auto it = owned.find(l);
    if (it != owned.end())
      return *it->second;
    auto o = std::make_unique<Owned>();
    o->threads = l.numThreads();
    o->locals = l.numLocals();
    o->elems.resize(size_t(o->threads * o->locals));
    for (int64_t t = 0; t < o->threads; ++t) {
      int64_t *row = o->elems.data() + t * o->locals;
      for (int64_t i = 0; i < o->locals; ++i)
        row[i] = l.applyLinear(t, i);
      std::sort(row, row + o->locals);
    }
    return *owned.emplace(l, std::move(o)).first->second;
  }

  std::optional<CoverFailure> computeCover(const RegisterLayout &result,
                                           const RegisterLayout &operand);
  std::optional<DotFailure> computeDot(const RegisterLayout &a, const RegisterLayout &b,
                                       const RegisterLayout &c, const RegisterLayout &d);
};

LayoutOracle::LayoutOracle() : impl_(std::make_unique<Impl>()) {}
LayoutOracle::~LayoutOracle() = default;

std::optional<CoverFailure> LayoutOracle::Impl::computeCover(const RegisterLayout &result,
                                                             const RegisterLayout &operand) {
  const Owned &own = ownedOf(operand);
  const std::vector<int64_t> &rs = result.shape();
  const std::vector<int64_t> &os = operand.shape();
  // Operand stride of each result dimension (0 where the operand broadcasts).
  const size_t r = rs.size(), lead = r - std::min(r, os.size());
  std::vector<int64_t> stride(r, 0);
  int64_t s = 1;
  for (size_t q = os.size(); q-- > 0;) {
    if (q + lead < r && os[q] != 1)
      stride[q + lead] = s;
    s *= os[q];
  }
  auto operandIndex = [&](int64_t linear) {
    int64_t o = 0;
    for (size_t d = r; d-- > 0;) {
      o += (linear % rs[d]) * stride[d];
      linear /= rs[d];
    }
    return o;
  };
  if (result.numThreads() != operand.numThreads())
    return CoverFailure{std::min(result.numThreads(), operand.numThreads()), 0, 0};
  for (int64_t t = 0; t < result.numThreads(); ++t)
    for (int64_t i = 0; i < result.numLocals(); ++i) {
      int64_t e = result.applyLinear(t, i);
      int64_t oe = operandIndex(e);
      if (!own.owns(t, oe))
        return CoverFailure{t, e, oe};
    }
  return std::nullopt;
}

std::optional<CoverFailure> LayoutOracle::cover(const RegisterLayout &result,
                                                const RegisterLayout &operand) {
  if (result == operand)
    return std::nullopt;
  LayoutTuple key{{result, operand}};
  auto it = impl_->cover.find(key);
  if (it != impl_->cover.end())
    return it->second;
  std::optional<CoverFailure> answer = impl_->computeCover(result, operand);
  impl_->cover.emplace(std::move(key), answer);
  return answer;
}

std::optional<DotFailure> LayoutOracle::Impl::computeDot(const RegisterLayout &a,
                                                         const RegisterLayout &b,
                                                         const RegisterLayout &c,
                                                         const RegisterLayout &d) {
  const int64_t K = a.shape()[1], N = b.shape()[1], T = d.numThreads();
  if (a.numThreads() != T || b.numThreads() != T || c.numThreads() != T)
    return DotFailure{0, 0, 0, 'c', 0};
  const Owned &oa = ownedOf(a), &ob = ownedOf(b), &oc = ownedOf(c);
  for (int64_t t = 0; t < T; ++t) {
    // Rows of a that t owns entirely, columns of b that t owns entirely.
    std::vector<int64_t> elems(oa.begin(t), oa.end(t)), keys(elems.size());
    for (size_t x = 0; x < elems.size(); ++x)
      keys[x] = elems[x] / K;
    std::vector<int64_t> rows = fullRuns(keys, elems, K);
    std::vector<std::pair<int64_t, int64_t>> colPairs;
    for (const int64_t *p = ob.begin(t); p != ob.end(t); ++p)
      colPairs.emplace_back(*p % N, *p);
    std::sort(colPairs.begin(), colPairs.end());
    std::vector<int64_t> colKeys, colElems;
    for (auto &[n, e] : colPairs) {
      colKeys.push_back(n);
      colElems.push_back(e);
    }
    std::vector<int64_t> cols = fullRuns(colKeys, colElems, K);
    for (int64_t i = 0; i < d.numLocals(); ++i) {
      int64_t lin = d.applyLinear(t, i), m = lin / N, n = lin % N;
      if (!oc.owns(t, lin))
        return DotFailure{t, m, n, 'c', 0};
      if (!std::binary_search(rows.begin(), rows.end(), m)) {
        int64_t k = 0;
        while (k < K && oa.owns(t, m * K + k))
          ++k;
        return DotFailure{t, m, n, 'a', k};
      }
      if (!std::binary_search(cols.begin(), cols.end(), n)) {
        int64_t k = 0;
        while (k < K && ob.owns(t, k * N + n))
          ++k;
        return DotFailure{t, m, n, 'b', k};
      }
    }
  }
  return std::nullopt;
}

std::optional<DotFailure> LayoutOracle::dotPerThread(const RegisterLayout &a,
                                                     const RegisterLayout &b,
                                                     const RegisterLayout &c,
                                                     const RegisterLayout &d) {
  LayoutTuple key{{a, b, c, d}};
  auto it = impl_->dot.find(key);
  if (it != impl_->dot.end())
    return it->second;
  std::optional<DotFailure> answer = impl_->computeDot(a, b, c, d);
  impl_->dot.emplace(std::move(key), answer);
  return answer;
}

std::optional<std::string>
LayoutOracle::verdict(uint64_t tag, std::vector<RegisterLayout> layouts,
                      const std::function<std::optional<std::string>()> &compute) {
  std::pair<uint64_t, LayoutTuple> key{tag, LayoutTuple{std::move(layouts)}};
  auto it = impl_->verdicts.find(key);
  if (it != impl_->verdicts.end())
    return it->second;
  std::optional<std::string> answer = compute();
  impl_->verdicts.emplace(std::move(key), answer);
  return answer;
}

} // namespace tilus::detail
