// Division of register layouts: h / g (the f with f.g == h) and its left twin (the g with
// f.g == h). The checker and the JIT use it to recognise instruction layouts inside a tensor's
// layout ("the accumulator is divisible by the mma C atom").
//
// The canonical form of f.g is the concatenation of f's and g's forms (per dimension f's modes
// first, per list f's entries first) in which at most one pair merges per list: f's last entry
// with g's first, when they are neighbours of one dimension (or both replication entries). So if
// a quotient exists, the last |g.L| entries of h's list L are g's, except that the first of them
// may carry a factor of f (a merged mode, split back here). That determines the only candidate;
// the product is then recomputed and compared with h, which decides divisibility.
// Example: h = local(2, 1).spatial(8, 4).local(1, 2), g = spatial(2, 4).local(1, 2): h's spatial
// list [0:8, 1:4] ends in g's [0:2, 1:4] with 0:8 split into 0:4 . 0:2, so f = local(2, 1).
// spatial(4, 1), and f.g == h confirms it.
#include "isa/layout.h"
#include "isa/layout_internal.h"

namespace tilus {

namespace {

/// Removes `g`'s list from the end of `hList` (divideRight) or `f`'s list from its beginning
/// (divideLeft), splitting the boundary mode. Writes the remaining list into `rest` and the kept
/// size of each consumed mode into `keep`. Returns false when the list cannot match.
bool stripList(const RawLayout &h, const std::vector<int32_t> &hList, const RawLayout &other,
               const std::vector<int32_t> &otherList, bool fromEnd, std::vector<int64_t> &keep,
               std::vector<int32_t> &rest) {
  const size_t m = otherList.size(), n = hList.size();
  if (m > n)
    return false;
  if (m == 0) {
    rest = hList;
    return true;
  }
  // Position in hList of other's entry p (other's entries are contiguous at one end).
  auto at = [&](size_t p) { return fromEnd ? n - m + p : p; };
  const size_t boundary = fromEnd ? 0 : m - 1; // the entry of `other` that may have merged
  for (size_t p = 0; p < m; ++p) {
    const LayoutMode &hm = h.modes[hList[at(p)]];
    const LayoutMode &om = other.modes[otherList[p]];
    if (hm.dim != om.dim)
      return false;
    if (p != boundary && hm.size != om.size)
      return false;
    if (p == boundary && hm.size % om.size != 0)
      return false;
    keep[hList[at(p)]] = p == boundary ? hm.size / om.size : 1;
  }
  const int32_t split = hList[at(boundary)];
  if (fromEnd) {
    rest.assign(hList.begin(), hList.begin() + long(n - m));
    if (keep[split] > 1)
      rest.push_back(split);
  } else {
    if (keep[split] > 1)
      rest.push_back(split);
    rest.insert(rest.end(), hList.begin() + long(m), hList.end());
  }
  return true;
}

/// The quotient of h by `other` (g when fromEnd, else f); nullopt when none exists.
std::optional<RegisterLayout> divide(const RegisterLayout &hLayout, const RegisterLayout &oLayout,
                                     bool fromEnd) {
  if (oLayout.rank() >= 0 && hLayout.rank() != oLayout.rank())
    return std::nullopt;
  const RawLayout h = LayoutAccess::raw(hLayout), other = LayoutAccess::raw(oLayout);
  RawLayout q{h.rank, h.shape, h.modes, {}, {}};
  // Modes of h that no list of `other` touches stay whole in the quotient.
  std::vector<int64_t> keep(h.modes.size());
  for (size_t k = 0; k < h.modes.size(); ++k)
    keep[k] = h.modes[k].size;
  if (!stripList(h, h.spatial, other, other.spatial, fromEnd, keep, q.spatial) ||
      !stripList(h, h.local, other, other.local, fromEnd, keep, q.local))
    return std::nullopt;
  for (size_t k = 0; k < h.modes.size(); ++k)
    q.modes[k].size = keep[k];
  for (int d = 0; d < std::max(h.rank, 0); ++d) {
    const int64_t os = oLayout.rank() >= 0 ? other.shape[d] : 1;
    if (h.shape[d] % os != 0)
      return std::nullopt;
    q.shape[d] = h.shape[d] / os;
  }
  Expected<RegisterLayout> quotient = LayoutAccess::create(compactModes(std::move(q)));
  if (!quotient)
    return std::nullopt;
  Expected<RegisterLayout> back = fromEnd ? quotient->product(oLayout) : oLayout.product(*quotient);
  if (!back || !(*back == hLayout))
    return std::nullopt;
  return std::move(quotient).value();
}

} // namespace

std::optional<RegisterLayout> RegisterLayout::divideRight(const RegisterLayout &g) const {
  return divide(*this, g, true);
}

std::optional<RegisterLayout> RegisterLayout::divideLeft(const RegisterLayout &f) const {
  return divide(*this, f, false);
}

} // namespace tilus
