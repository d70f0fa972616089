// The byte addresses of a shared view as the checker knows them (docs/isa.md, "wgmma" and
// "Tensor-memory-accelerator loads"): the rules that hand a shared tile to an asynchronous unit
// (wgmma matrix descriptors, TMA boxes) compare the hardware's address of every element with
// the address the ISA layout gives it, for every value that the run-time parts of the view's
// origin can take (a pipeline stage index), so that the JIT can use one plan relative to the
// view's origin.
#include "isa/view_rules.h"
#include "loader/checker_impl.h"

namespace tilus::detail {

namespace {

/// The origin of a rooted view as the checker knows it: per root dimension the constant part
/// and whether a run-time term adds to it (applyOffset's rooted addressing), and a power of two
/// that divides every run-time term (ProgramChecker::knownMultiple; their residues are in the
/// constant part).
struct StaticIndex {
  int64_t constant = 0;
  bool runtime = false;
  int64_t multiple = 1;
};
struct StaticArithmetic {
  using Index = StaticIndex;
  StaticIndex add(StaticIndex x, StaticIndex y) const {
    int64_t m = x.runtime && y.runtime ? std::min(x.multiple, y.multiple)
                                       : (x.runtime ? x.multiple : y.multiple);
    return {x.constant + y.constant, x.runtime || y.runtime, m};
  }
};
struct RootedView {
  std::vector<StaticIndex> origin;
  std::vector<int32_t> dims;
};

} // namespace

int64_t SharedViewAddresses::address(size_t origin, const std::vector<int64_t> &index) const {
  root_.assign(origins[origin].begin(), origins[origin].end());
  for (size_t d = 0; d < dims.size(); ++d)
    root_[size_t(dims[d])] += index[d];
  return rootBase + layout->offset(root_) * elemBytes;
}

bool ProgramChecker::sharedViewAddresses(const VarType &v, SharedViewAddresses &out,
                                         std::string &why) {
  const VarType &root = info_.vars[v.root];
  size_t rr = root.shape.size();
  RootedView view;
  view.origin.assign(rr, StaticIndex{});
  for (size_t d = 0; d < rr; ++d)
    view.dims.push_back(int32_t(d));
  StaticArithmetic arithmetic;
  for (uint32_t si : v.slices) {
    const Instruction &slice = prog_.instructions[si];
    if (slice.opcode == Opcode::PermuteShared) { // view dimension k is the parent's dims[k]
      std::vector<int32_t> permuted;
      for (int64_t d : slice.arg(ArgName::dims).ints)
        permuted.push_back(view.dims[size_t(d)]);
      view.dims = std::move(permuted);
      continue;
    }
    const std::vector<OffsetEntry> &entries = slice.arg(ArgName::offset).offsets;
    RootedView next;
    next.origin = view.origin;
    applyOffset<OffsetUse::Slice>(arithmetic, view, next, entries.size(), [&](size_t d) {
      std::optional<int64_t> cv = constValue(entries[d].expr);
      if (cv)
        return std::pair<StaticIndex, bool>{StaticIndex{*cv, false, 1}, entries[d].slice};
      KnownMultiple k = knownMultiple(entries[d].expr);
      return std::pair<StaticIndex, bool>{StaticIndex{k.residue, true, k.multiple},
                                          entries[d].slice};
    });
    view = std::move(next);
  }
  out.layout = &*root.sharedLayout;
  out.rootBase = root.sharedByteOffset;
  out.elemBytes = std::max<int64_t>(1, root.dtype.storageBits() / 8);
  out.dims = view.dims;
  std::vector<int64_t> extent(rr, 1);
  for (size_t d = 0; d < out.dims.size(); ++d)
    extent[size_t(out.dims[d])] = v.shape[d];
  std::vector<int64_t> origin(rr, 0);
  for (size_t r = 0; r < rr; ++r)
    origin[r] = view.origin[r].constant;
  out.origins = {origin};
  for (size_t r = 0; r < rr; ++r) {
    if (!view.origin[r].runtime)
      continue;
    // the origins the run-time terms allow: every in-range value congruent to the constant
    // part modulo their known multiple
    int64_t m = view.origin[r].multiple;
    int64_t first = ((view.origin[r].constant % m) + m) % m;
    std::vector<std::vector<int64_t>> grown;
    for (const std::vector<int64_t> &o : out.origins)
      for (int64_t x = first; x + extent[r] <= root.shape[r]; x += m) {
        grown.push_back(o);
        grown.back()[r] = x;
      }
    out.origins = std::move(grown);
    if (out.origins.size() > 4096) {
      why = "its view's origin can take more than 4096 run-time values";
      return false;
    }
  }
  return true;
}

} // namespace tilus::detail
