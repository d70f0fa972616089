// Printing register layouts: toString() writes a chain of primitives that the assembler parses
// back to an equal layout, canonicalString() writes the unified form itself.
//
// A chain is a sequence of factors; each factor takes a run of consecutive entries of one list
// (spatial or local) whose modes belong to distinct dimensions in increasing order (a row
// primitive) or decreasing order (a column primitive), or a single replication entry. A factor
// may take a mode only once every more significant mode of its dimension has been taken. With
// the lists consumed as prefixes, a state is the pair of prefix lengths, so a small dynamic
// program finds the chain with the fewest factors; ties go to the longer first factor, then to
// spatial before local. Example: the mma B fragment (modes 0:2 0:4 0:2 1:8, spatial [1:8, 0:4],
// local [0:2, 0:2]) prints as "local(2, 1).column_spatial(4, 8).local(2, 1)" (3 factors), not
// "spatial(1, 8).local(2, 1).spatial(4, 1).local(2, 1)" (4 factors).
#include "isa/layout.h"

#include <limits>

namespace tilus {

namespace {

struct Factor {
  bool spatial = false;
  int32_t begin = 0; // position of the run in its list
  int32_t length = 0;
};

std::string joinInts(const std::vector<int64_t> &values) {
  std::string out;
  for (size_t k = 0; k < values.size(); ++k)
    out += (k ? ", " : "") + std::to_string(values[k]);
  return out;
}

class ChainPrinter {
public:
  explicit ChainPrinter(const RegisterLayout &l)
      : l_(l), modes_(l.modes()), lists_{&l.spatialModes(), &l.localModes()},
        dimPrev_(modes_.size(), -1), listPos_(modes_.size(), 0), inSpatial_(modes_.size()) {
    for (size_t k = 1; k < modes_.size(); ++k)
      if (modes_[k].dim >= 0 && modes_[k].dim == modes_[k - 1].dim)
        dimPrev_[k] = int32_t(k - 1);
    for (int which = 0; which < 2; ++which)
      for (size_t p = 0; p < lists_[which]->size(); ++p) {
        listPos_[(*lists_[which])[p]] = int32_t(p);
        inSpatial_[(*lists_[which])[p]] = which == 0;
      }
  }

  std::vector<Factor> bestChain() {
    const size_t ns = lists_[0]->size(), nl = lists_[1]->size();
    cost_.assign((ns + 1) * (nl + 1), kUnknown);
    choice_.assign(cost_.size(), Factor{});
    std::vector<Factor> chain;
    [[maybe_unused]] const int total = solve(0, 0);
    assert(total != kInfinite);
    for (size_t s = 0, l = 0; s < ns || l < nl;) {
      const Factor f = choice_[s * (nl + 1) + l];
      chain.push_back(f);
      (f.spatial ? s : l) += size_t(f.length);
    }
    return chain;
  }

  std::string factorText(const Factor &f) const {
    const std::vector<int32_t> &list = *lists_[f.spatial ? 0 : 1];
    const LayoutMode &first = modes_[list[f.begin]];
    if (first.dim == -1)
      return "replicate(" + std::to_string(first.size) + ")";
    std::vector<int64_t> sizes(size_t(l_.rank()), 1);
    for (int32_t p = f.begin; p < f.begin + f.length; ++p)
      sizes[modes_[list[p]].dim] = modes_[list[p]].size;
    const bool column = f.length > 1 && modes_[list[f.begin + 1]].dim < first.dim;
    return std::string(column ? "column_" : "") + (f.spatial ? "spatial(" : "local(") +
           joinInts(sizes) + ")";
  }

private:
  static constexpr int kUnknown = -1;
  static constexpr int kInfinite = std::numeric_limits<int>::max() / 2;

  bool taken(int32_t mode, size_t s, size_t l) const {
    return size_t(listPos_[mode]) < (inSpatial_[mode] ? s : l);
  }

  /// The longest valid run starting at the head of one list in state (s, l).
  int32_t longestRun(bool spatial, size_t s, size_t l) const {
    const std::vector<int32_t> &list = *lists_[spatial ? 0 : 1];
    const size_t begin = spatial ? s : l;
    int32_t length = 0, direction = 0;
    for (size_t p = begin; p < list.size(); ++p) {
      const int32_t m = list[p];
      if (modes_[m].dim == -1)
        return length == 0 ? 1 : length; // replication entries stand alone
      if (dimPrev_[m] >= 0 && !taken(dimPrev_[m], s, l))
        break;
      if (length > 0) {
        const int32_t prevDim = modes_[list[p - 1]].dim;
        if (prevDim == -1 || prevDim == modes_[m].dim)
          break;
        const int32_t step = modes_[m].dim > prevDim ? 1 : -1;
        if (direction != 0 && step != direction)
          break;
        direction = step;
      }
      ++length;
    }
    return length;
  }

  int solve(size_t s, size_t l) {
    const size_t nl = lists_[1]->size();
    int &cost = cost_[s * (nl + 1) + l];
    if (cost != kUnknown)
      return cost;
    if (s == lists_[0]->size() && l == nl)
      return cost = 0;
    cost = kInfinite;
    int32_t bestLength = 0;
    for (bool spatial : {true, false}) {
      const int32_t longest = longestRun(spatial, s, l);
      for (int32_t length = longest; length >= 1; --length) {
        const int rest = spatial ? solve(s + size_t(length), l) : solve(s, l + size_t(length));
        if (rest == kInfinite)
          continue;
        // Strictly fewer factors wins; on a tie the longer first factor, then spatial first.
        if (rest + 1 < cost || (rest + 1 == cost && length > bestLength)) {
          cost = rest + 1;
          bestLength = length;
          choice_[s * (nl + 1) + l] = Factor{spatial, int32_t(spatial ? s : l), length};
        }
      }
    }
    return cost;
  }

  const RegisterLayout &l_;
  const std::vector<LayoutMode> &modes_;
  const std::vector<int32_t> *lists_[2];
  std::vector<int32_t> dimPrev_;
  std::vector<int32_t> listPos_;
  std::vector<bool> inSpatial_;
  std::vector<int> cost_;
  std::vector<Factor> choice_;
};

} // namespace

std::string RegisterLayout::toString() const {
  ChainPrinter printer(*this);
  std::string out;
  bool ranked = false; // whether some factor fixes the rank
  for (const Factor &f : printer.bestChain()) {
    const std::string text = printer.factorText(f);
    ranked = ranked || text.rfind("replicate(", 0) != 0;
    out += (out.empty() ? "" : ".") + text;
  }
  if (rank_ < 0)
    return out.empty() ? "replicate(1)" : out;
  if (ranked)
    return out;
  // Only replication (or nothing): a leading local(1, .., 1) carries the rank.
  const std::string carrier = "local(" + joinInts(std::vector<int64_t>(size_t(rank_), 1)) + ")";
  return out.empty() ? carrier : carrier + "." + out;
}

std::string RegisterLayout::canonicalString() const {
  std::string out = rank_ < 0 ? "shape=*" : "shape=[" + joinInts(shape_) + "]";
  out += " modes=[";
  for (size_t k = 0; k < modes_.size(); ++k)
    out += (k ? ", " : "") +
           (modes_[k].dim < 0 ? std::string("r") : std::to_string(modes_[k].dim)) + ":" +
           std::to_string(modes_[k].size);
  auto list = [](const std::vector<int32_t> &entries) {
    return joinInts(std::vector<int64_t>(entries.begin(), entries.end()));
  };
  return out + "] spatial=[" + list(spatial_) + "] local=[" + list(local_) + "]";
}

} // namespace tilus
