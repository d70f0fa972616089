// Register layouts (ISA section 3.1): the unified form, its canonicalisation, and the algebra that
// only rearranges modes (primitives, product, permute, reduce) plus evaluation.
//
// Every value goes through LayoutAccess::create, which validates a unified form, canonicalises it
// (size-1 modes dropped, modes adjacent both in their dimension and in their list merged, modes
// grouped by dimension with replication entries last in spatial-list order) and rejects forms
// whose order constraints are cyclic, because no chain of primitives writes those. The canonical
// form of a layout function is unique, so operator== on the form is equality of functions, and
// each operation below is a few lines that build a raw form and let create() do the rest.
// Example: product(local(2, 1), spatial(8, 4)) concatenates the modes of each dimension
// (f's more significant) and the lists (f's first): modes [0:2, 0:8, 1:4], spatial [1, 2],
// local [0]. docs/layouts.md explains the form and why canonical forms are unique.
#include "isa/layout.h"
#include "isa/layout_internal.h"
#include "isa/shape.h"

#include <array>
#include <xxhash.h>

namespace tilus {

namespace {

/// Every mode has size >= 2 after canonicalisation; the non-replication modes multiply to at most
/// the number of elements and the replication entries to at most the thread count, both below
/// 2^63, so a canonical form has at most 2 * 63 modes.
constexpr size_t kMaxModes = 128;

Status invalid(std::string message) {
  return Status::error(ErrorCode::LayoutInvalid, std::move(message));
}

bool mulChecked(int64_t a, int64_t b, int64_t &out) { return !__builtin_mul_overflow(a, b, &out); }

Status validateShapeAndModes(const RawLayout &raw) {
  assert(raw.rank >= -1 && (raw.rank >= 0 || raw.shape.empty()));
  for (size_t d = 0; d < raw.shape.size(); ++d)
    if (raw.shape[d] < 1)
      return invalid("dimension " + std::to_string(d) + " has non-positive size " +
                     std::to_string(raw.shape[d]));
  for (size_t k = 0; k < raw.modes.size(); ++k) {
    const LayoutMode &m = raw.modes[k];
    if (m.size < 1)
      return invalid("mode " + std::to_string(k) + " has non-positive size " +
                     std::to_string(m.size));
    if (m.dim < -1 || m.dim >= std::max(raw.rank, 0))
      return invalid("mode " + std::to_string(k) + " has dimension " + std::to_string(m.dim) +
                     ", outside rank " + std::to_string(raw.rank));
  }
  return Status::success();
}

Status validateLists(const RawLayout &raw) {
  const size_t n = raw.modes.size();
  std::vector<int> inSpatial(n, 0), inLocal(n, 0);
  for (int32_t k : raw.spatial) {
    if (k < 0 || size_t(k) >= n)
      return invalid("spatial entry " + std::to_string(k) + " is not a mode index (" +
                     std::to_string(n) + " modes)");
    ++inSpatial[k];
  }
  for (int32_t k : raw.local) {
    if (k < 0 || size_t(k) >= n)
      return invalid("local entry " + std::to_string(k) + " is not a mode index (" +
                     std::to_string(n) + " modes)");
    ++inLocal[k];
  }
  for (size_t k = 0; k < n; ++k) {
    if (raw.modes[k].dim == -1 && inLocal[k] != 0)
      return invalid("replication mode " + std::to_string(k) + " is in the local list");
    if (inSpatial[k] + inLocal[k] != 1)
      return invalid("mode " + std::to_string(k) + " appears " +
                     std::to_string(inSpatial[k] + inLocal[k]) +
                     " times in the spatial and local lists, expected once");
  }
  return Status::success();
}

/// Products per dimension must equal the shape; thread, local and element counts must fit.
Status validateSizes(const RawLayout &raw) {
  std::vector<int64_t> dimProduct(raw.shape.size(), 1);
  for (const LayoutMode &m : raw.modes) {
    if (m.dim < 0)
      continue;
    if (!mulChecked(dimProduct[m.dim], m.size, dimProduct[m.dim]))
      return invalid("the modes of dimension " + std::to_string(m.dim) + " overflow 64 bits");
  }
  int64_t elements = 1;
  for (size_t d = 0; d < raw.shape.size(); ++d) {
    if (dimProduct[d] != raw.shape[d])
      return invalid("dimension " + std::to_string(d) + " has size " +
                     std::to_string(raw.shape[d]) + " but its modes multiply to " +
                     std::to_string(dimProduct[d]));
    if (!mulChecked(elements, raw.shape[d], elements))
      return invalid("the number of elements overflows 64 bits");
  }
  int64_t threads = 1;
  for (int32_t k : raw.spatial)
    if (!mulChecked(threads, raw.modes[k].size, threads))
      return invalid("the thread count overflows 64 bits");
  int64_t locals = 1;
  for (int32_t k : raw.local)
    if (!mulChecked(locals, raw.modes[k].size, locals))
      return invalid("the local count overflows 64 bits");
  int64_t cells = 0;
  if (!mulChecked(threads, locals, cells) || cells > kMaxLayoutCells || elements > kMaxLayoutCells)
    return invalid(std::to_string(threads) + " threads x " + std::to_string(locals) + " locals (" +
                   std::to_string(elements) + " elements) exceed the limit of " +
                   std::to_string(kMaxLayoutCells) + " cells of a register layout");
  return Status::success();
}

/// Drops size-1 modes and merges neighbours of a list that are also neighbours (in that order) in
/// their dimension, or that are both replication entries; then orders the modes canonically.
RawLayout canonicalForm(const RawLayout &raw) {
  const size_t n = raw.modes.size();
  std::vector<int64_t> size(n);
  std::vector<bool> alive(n);
  std::vector<int32_t> next(n, -1); // the next less significant live mode of the same dimension
  std::vector<int32_t> last(std::max(raw.rank, 0), -1);
  for (size_t k = 0; k < n; ++k) {
    size[k] = raw.modes[k].size;
    alive[k] = size[k] > 1;
    const int32_t dim = raw.modes[k].dim;
    if (!alive[k] || dim < 0)
      continue;
    if (last[dim] >= 0)
      next[last[dim]] = int32_t(k);
    last[dim] = int32_t(k);
  }
  auto merge = [&](const std::vector<int32_t> &list) {
    std::vector<int32_t> out;
    for (int32_t k : list) {
      if (!alive[k])
        continue;
      if (!out.empty()) {
        const int32_t h = out.back();
        const int32_t dh = raw.modes[h].dim, dk = raw.modes[k].dim;
        if ((dh == -1 && dk == -1) || (dh == dk && next[h] == k)) {
          size[h] *= size[k];
          next[h] = next[k];
          alive[k] = false;
          continue;
        }
      }
      out.push_back(k);
    }
    return out;
  };
  const std::vector<int32_t> spatial = merge(raw.spatial);
  const std::vector<int32_t> local = merge(raw.local);

  std::vector<int32_t> order; // old indices in canonical order
  for (int d = 0; d < raw.rank; ++d)
    for (size_t k = 0; k < n; ++k)
      if (alive[k] && raw.modes[k].dim == d)
        order.push_back(int32_t(k));
  for (int32_t k : spatial)
    if (raw.modes[k].dim == -1)
      order.push_back(k);
  std::vector<int32_t> newIndex(n, -1);
  RawLayout c{raw.rank, raw.shape, {}, {}, {}};
  for (int32_t k : order) {
    newIndex[k] = int32_t(c.modes.size());
    c.modes.push_back(LayoutMode{raw.modes[k].dim, size[k]});
  }
  for (int32_t k : spatial)
    c.spatial.push_back(newIndex[k]);
  for (int32_t k : local)
    c.local.push_back(newIndex[k]);
  return c;
}

/// A chain of primitives places each mode after its predecessor in its dimension and after its
/// predecessor in its list, so the union of those orders must be acyclic (Kahn's algorithm).
/// Conversely every acyclic form is the chain of its modes, one primitive per mode, in a
/// topological order; see docs/layouts.md.
bool isExpressible(const RawLayout &c) {
  const size_t n = c.modes.size();
  std::vector<std::vector<int32_t>> succ(n);
  std::vector<int> indegree(n, 0);
  auto edge = [&](int32_t a, int32_t b) {
    succ[a].push_back(b);
    ++indegree[b];
  };
  for (const auto *list : {&c.spatial, &c.local})
    for (size_t p = 1; p < list->size(); ++p)
      edge((*list)[p - 1], (*list)[p]);
  for (size_t k = 1; k < n; ++k)
    if (c.modes[k].dim >= 0 && c.modes[k].dim == c.modes[k - 1].dim)
      edge(int32_t(k - 1), int32_t(k));
  std::vector<int32_t> ready;
  for (size_t k = 0; k < n; ++k)
    if (indegree[k] == 0)
      ready.push_back(int32_t(k));
  size_t visited = 0;
  while (!ready.empty()) {
    const int32_t k = ready.back();
    ready.pop_back();
    ++visited;
    for (int32_t s : succ[k])
      if (--indegree[s] == 0)
        ready.push_back(s);
  }
  return visited == n;
}

Expected<RegisterLayout> primitive(const char *name, const std::vector<int64_t> &n, bool spatial,
                                   bool column) {
  RawLayout raw;
  raw.rank = int(n.size());
  raw.shape = n;
  for (size_t d = 0; d < n.size(); ++d) {
    if (n[d] < 1)
      return invalid(std::string(name) + " size " + std::to_string(n[d]) + " in dimension " +
                     std::to_string(d) + " is not positive");
    raw.modes.push_back(LayoutMode{int32_t(d), n[d]});
  }
  std::vector<int32_t> &list = spatial ? raw.spatial : raw.local;
  for (size_t d = 0; d < n.size(); ++d)
    list.push_back(int32_t(column ? n.size() - 1 - d : d));
  return LayoutAccess::create(std::move(raw));
}

} // namespace

RawLayout compactModes(RawLayout raw) {
  std::vector<int32_t> newIndex(raw.modes.size(), -1);
  for (int32_t k : raw.spatial)
    newIndex[k] = 0;
  for (int32_t k : raw.local)
    newIndex[k] = 0;
  std::vector<LayoutMode> modes;
  for (size_t k = 0; k < raw.modes.size(); ++k) {
    if (newIndex[k] < 0)
      continue;
    newIndex[k] = int32_t(modes.size());
    modes.push_back(raw.modes[k]);
  }
  raw.modes = std::move(modes);
  for (int32_t &k : raw.spatial)
    k = newIndex[k];
  for (int32_t &k : raw.local)
    k = newIndex[k];
  return raw;
}

Expected<RegisterLayout> LayoutAccess::create(RawLayout raw) {
  TILUSVM_TRY(validateShapeAndModes(raw));
  TILUSVM_TRY(validateLists(raw));
  TILUSVM_TRY(validateSizes(raw));
  RawLayout c = canonicalForm(raw);
  if (!isExpressible(c))
    return invalid("no chain of primitives expresses this unified form: the orders of its "
                   "dimensions and of its spatial and local lists are cyclic");
  assert(c.modes.size() <= kMaxModes);
  RegisterLayout l;
  l.rank_ = c.rank;
  l.shape_ = std::move(c.shape);
  l.modes_ = std::move(c.modes);
  l.spatial_ = std::move(c.spatial);
  l.local_ = std::move(c.local);
  for (int32_t k : l.spatial_)
    l.threads_ *= l.modes_[k].size;
  for (int32_t k : l.local_)
    l.locals_ *= l.modes_[k].size;
  return l;
}

RawLayout LayoutAccess::raw(const RegisterLayout &l) {
  return RawLayout{l.rank_, l.shape_, l.modes_, l.spatial_, l.local_};
}

Expected<RegisterLayout> RegisterLayout::local(const std::vector<int64_t> &n) {
  return primitive("local", n, false, false);
}

Expected<RegisterLayout> RegisterLayout::columnLocal(const std::vector<int64_t> &n) {
  return primitive("column_local", n, false, true);
}

Expected<RegisterLayout> RegisterLayout::spatial(const std::vector<int64_t> &n) {
  return primitive("spatial", n, true, false);
}

Expected<RegisterLayout> RegisterLayout::columnSpatial(const std::vector<int64_t> &n) {
  return primitive("column_spatial", n, true, true);
}

Expected<RegisterLayout> RegisterLayout::replicate(int64_t k) {
  if (k < 1)
    return invalid("replicate factor " + std::to_string(k) + " is not positive");
  return LayoutAccess::create(RawLayout{-1, {}, {LayoutMode{-1, k}}, {0}, {}});
}

Expected<RegisterLayout> RegisterLayout::tryCreate(std::vector<int64_t> shape,
                                                   std::vector<LayoutMode> modes,
                                                   std::vector<int32_t> spatial,
                                                   std::vector<int32_t> local) {
  const int rank = int(shape.size());
  return LayoutAccess::create(
      RawLayout{rank, std::move(shape), std::move(modes), std::move(spatial), std::move(local)});
}

Expected<RegisterLayout> RegisterLayout::product(const RegisterLayout &g) const {
  if (rank_ >= 0 && g.rank_ >= 0 && rank_ != g.rank_)
    return invalid("product of layouts of rank " + std::to_string(rank_) + " and " +
                   std::to_string(g.rank_));
  RawLayout raw;
  raw.rank = rank_ >= 0 ? rank_ : g.rank_;
  raw.shape.assign(std::max(raw.rank, 0), 1);
  for (int d = 0; d < raw.rank; ++d) {
    const int64_t a = rank_ >= 0 ? shape_[d] : 1, b = g.rank_ >= 0 ? g.shape_[d] : 1;
    if (!mulChecked(a, b, raw.shape[d]))
      return invalid("dimension " + std::to_string(d) + " of the product overflows 64 bits");
  }
  const int32_t offset = int32_t(modes_.size());
  raw.modes = modes_;
  raw.modes.insert(raw.modes.end(), g.modes_.begin(), g.modes_.end());
  raw.spatial = spatial_;
  raw.local = local_;
  for (int32_t k : g.spatial_)
    raw.spatial.push_back(k + offset);
  for (int32_t k : g.local_)
    raw.local.push_back(k + offset);
  return LayoutAccess::create(std::move(raw));
}

Expected<RegisterLayout> RegisterLayout::permute(const std::vector<int64_t> &dims) const {
  const size_t rank = size_t(std::max(rank_, 0));
  if (dims.size() != rank)
    return Status::error(ErrorCode::BadArgument, "permutation has " + std::to_string(dims.size()) +
                                                     " entries for a layout of rank " +
                                                     std::to_string(rank_));
  std::vector<int32_t> inverse(rank, -1);
  for (size_t k = 0; k < rank; ++k) {
    if (dims[k] < 0 || size_t(dims[k]) >= rank || inverse[dims[k]] >= 0)
      return Status::error(ErrorCode::BadArgument, "permutation entry " + std::to_string(dims[k]) +
                                                       " at position " + std::to_string(k) +
                                                       " is out of range or repeated");
    inverse[dims[k]] = int32_t(k);
  }
  RawLayout raw = LayoutAccess::raw(*this);
  for (LayoutMode &m : raw.modes)
    if (m.dim >= 0)
      m.dim = inverse[m.dim];
  for (size_t k = 0; k < rank; ++k)
    raw.shape[k] = shape_[dims[k]];
  return LayoutAccess::create(std::move(raw));
}

Expected<RegisterLayout> RegisterLayout::reduce(int dim, bool keepDim) const {
  if (dim < 0 || dim >= rank_)
    return Status::error(ErrorCode::ReduceDim, "reduce dimension " + std::to_string(dim) +
                                                   " is out of range for rank " +
                                                   std::to_string(rank_));
  RawLayout raw = LayoutAccess::raw(*this);
  for (int32_t k : raw.spatial)
    if (raw.modes[k].dim == dim)
      raw.modes[k].dim = -1;
  std::vector<int32_t> local;
  for (int32_t k : raw.local)
    if (raw.modes[k].dim != dim)
      local.push_back(k);
  raw.local = std::move(local);
  if (keepDim) {
    raw.shape[dim] = 1;
  } else {
    raw.shape.erase(raw.shape.begin() + dim);
    --raw.rank;
    for (LayoutMode &m : raw.modes)
      if (m.dim > dim)
        --m.dim;
  }
  return LayoutAccess::create(compactModes(std::move(raw)));
}

int64_t RegisterLayout::numElements() const { return productOf(shape_); }

bool RegisterLayout::isReplicated() const {
  // Non-replication modes are digits that (t, i) and the index share one to one; only a
  // replication entry (size >= 2 in canonical form) gives an element a second owner.
  return !modes_.empty() && modes_.back().dim == -1;
}

int64_t RegisterLayout::replicaRoot(int64_t t) const {
  // The spatial entries are the digits of t, the last one least significant.
  int64_t root = t, stride = 1;
  for (size_t k = spatial_.size(); k-- > 0;) {
    const LayoutMode &mode = modes_[size_t(spatial_[k])];
    if (mode.dim == -1)
      root -= ((t / stride) % mode.size) * stride;
    stride *= mode.size;
  }
  return root;
}

namespace {

/// The coordinate of every mode for thread t and local slot i (lists are row-major ravels).
void modeCoordinates(const std::vector<LayoutMode> &modes, const std::vector<int32_t> &spatial,
                     const std::vector<int32_t> &local, int64_t t, int64_t i, int64_t *coord) {
  for (size_t p = spatial.size(); p-- > 0;) {
    const int64_t size = modes[spatial[p]].size;
    coord[spatial[p]] = t % size;
    t /= size;
  }
  for (size_t p = local.size(); p-- > 0;) {
    const int64_t size = modes[local[p]].size;
    coord[local[p]] = i % size;
    i /= size;
  }
}

} // namespace

void RegisterLayout::apply(int64_t t, int64_t i, int64_t *index) const {
  assert(t >= 0 && t < threads_ && i >= 0 && i < locals_);
  std::array<int64_t, kMaxModes> coord;
  modeCoordinates(modes_, spatial_, local_, t, i, coord.data());
  for (int d = 0; d < rank_; ++d)
    index[d] = 0;
  for (size_t k = 0; k < modes_.size(); ++k)
    if (modes_[k].dim >= 0)
      index[modes_[k].dim] = index[modes_[k].dim] * modes_[k].size + coord[k];
}

std::vector<int64_t> RegisterLayout::apply(int64_t t, int64_t i) const {
  std::vector<int64_t> index(std::max(rank_, 0));
  apply(t, i, index.data());
  return index;
}

int64_t RegisterLayout::applyLinear(int64_t t, int64_t i) const {
  assert(t >= 0 && t < threads_ && i >= 0 && i < locals_);
  // The modes are grouped by dimension in order, most significant first, and each dimension's
  // size is the product of its modes: the row-major index is the ravel of all the modes.
  std::array<int64_t, kMaxModes> coord;
  modeCoordinates(modes_, spatial_, local_, t, i, coord.data());
  int64_t linear = 0;
  for (size_t k = 0; k < modes_.size(); ++k)
    if (modes_[k].dim >= 0)
      linear = linear * modes_[k].size + coord[k];
  return linear;
}

std::vector<std::vector<std::pair<int64_t, int64_t>>> RegisterLayout::owners() const {
  std::vector<std::vector<std::pair<int64_t, int64_t>>> result(static_cast<size_t>(numElements()));
  for (int64_t t = 0; t < threads_; ++t)
    for (int64_t i = 0; i < locals_; ++i)
      result[size_t(applyLinear(t, i))].emplace_back(t, i);
  return result;
}

size_t RegisterLayout::hash() const {
  std::vector<int64_t> words;
  words.push_back(rank_);
  words.insert(words.end(), shape_.begin(), shape_.end());
  words.push_back(int64_t(modes_.size()));
  for (const LayoutMode &m : modes_) {
    words.push_back(m.dim);
    words.push_back(m.size);
  }
  words.push_back(int64_t(spatial_.size()));
  words.insert(words.end(), spatial_.begin(), spatial_.end());
  words.insert(words.end(), local_.begin(), local_.end());
  return size_t(XXH3_64bits(words.data(), words.size() * sizeof(int64_t)));
}

} // namespace tilus
