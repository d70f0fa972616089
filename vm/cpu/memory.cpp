// Address computation for global and shared tensors: composing slices into views, and turning
// a load/store/copy's `offset=[...]` into a TileAccess (which tile index lands on which memory
// element, and which tile indices are inside the tensor). The element loops themselves live
// with the instructions (exec_memory.cpp); this file only does index arithmetic.
#include "vm/cpu/memory.h"

#include "isa/view_rules.h"

#include <algorithm>
#include <functional>
#include <numeric>

namespace tilus::cpu {

int64_t TileAccess::elements() const {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
}

bool TileAccess::allValid() const {
  if (!valid)
    return false;
  for (size_t k = 0; k < shape.size(); ++k)
    if (shape[k] > 0 && (lo[k] > 0 || hi[k] < shape[k]))
      return false;
  return true;
}

void TileAccess::offsetRange(int64_t &min, int64_t &max) const {
  min = max = offset;
  for (size_t k = 0; k < shape.size(); ++k) {
    int64_t reach = strides[k] * std::max<int64_t>(shape[k] - 1, 0);
    (reach < 0 ? min : max) += reach;
  }
}

int64_t TileAccess::elementOffset(const int64_t *idx) const {
  size_t rank = shape.size();
  if (linear) {
    int64_t off = offset;
    for (size_t k = 0; k < rank; ++k)
      off += idx[k] * strides[k];
    return off;
  }
  constexpr size_t kInline = 16;
  int64_t inlineCoords[kInline];
  std::vector<int64_t> heapCoords;
  int64_t *coords = inlineCoords;
  if (origin.size() > kInline) {
    heapCoords.resize(origin.size());
    coords = heapCoords.data();
  }
  std::copy(origin.begin(), origin.end(), coords);
  for (size_t k = 0; k < rank; ++k)
    coords[dims[k]] += idx[k];
  return layout->offset(coords);
}

namespace {

Status countMismatch(const char *what, size_t got, size_t want) {
  return Status::error(ErrorCode::OffsetRank, std::string(what) + " has " + std::to_string(got) +
                                                  " entries, expected " + std::to_string(want));
}

/// The rank rule of isa/view_rules.h as a status (an inconsistency the checker rules out);
/// `sliceDims` is the tile's rank (use Tile) or the given shape's length (use Slice).
Status offsetRankStatus(const std::vector<OffsetValue> &offsets, size_t viewRank, size_t sliceDims,
                        OffsetUse use) {
  size_t slices = sliceEntries(offsets);
  switch (offsetRank(offsets.size(), slices, viewRank, sliceDims)) {
  case OffsetRank::Holds:
    return Status::success();
  case OffsetRank::EntryCount:
    return countMismatch("offset", offsets.size(), viewRank);
  case OffsetRank::SliceCount:
    if (use == OffsetUse::Tile)
      return countMismatch("offset slices", slices, sliceDims);
    return countMismatch("shape", sliceDims, slices);
  }
  return Status::success();
}

/// Entry d of evaluated offsets, as applyOffset reads it.
auto entryOf(const std::vector<OffsetValue> &offsets) {
  return
      [&offsets](size_t d) { return std::pair<int64_t, bool>{offsets[d].start, offsets[d].slice}; };
}

/// The given length of slice entry k (none: the default).
auto lengthOf(const std::vector<int64_t> &shape) {
  return [&shape](size_t k) {
    return shape.empty() ? std::nullopt : std::optional<int64_t>(shape[k]);
  };
}

/// The tile of `tileShape` at `offsets` in `view`: `tile` starts with the view's address
/// (offset, or layout and origin), and the rules of isa/view_rules.h add the offset's.
template <class View>
Expected<TileAccess> offsetTile(const View &view, const std::vector<OffsetValue> &offsets,
                                const std::vector<int64_t> &tileShape, TileAccess tile) {
  TILUSVM_TRY(offsetRankStatus(offsets, view.shape.size(), tileShape.size(), OffsetUse::Tile));
  tile.shape = tileShape;
  tile.valid = view.valid;
  IntArithmetic a;
  applyOffset<OffsetUse::Tile>(a, view, tile, offsets.size(), entryOf(offsets));
  return tile;
}

} // namespace

Expected<TileAccess> globalTile(const GlobalView &view, const std::vector<OffsetValue> &offsets,
                                const std::vector<int64_t> &tileShape) {
  TileAccess start;
  start.offset = view.offset;
  return offsetTile(view, offsets, tileShape, std::move(start));
}

Expected<TileAccess> sharedTile(const SharedView &view, const std::vector<OffsetValue> &offsets,
                                const std::vector<int64_t> &tileShape) {
  TileAccess start;
  start.layout = view.layout;
  start.origin = view.origin;
  Expected<TileAccess> shifted = offsetTile(view, offsets, tileShape, std::move(start));
  if (!shifted)
    return shifted;
  TileAccess &tile = *shifted;
  std::vector<int64_t> rootStrides = view.layout->linearStrides();
  tile.linear = !rootStrides.empty() || view.layout->rank() == 0;
  tile.strides.assign(tileShape.size(), 0);
  if (tile.linear) {
    for (size_t r = 0; r < rootStrides.size(); ++r)
      tile.offset += tile.origin[r] * rootStrides[r];
    for (size_t k = 0; k < tileShape.size(); ++k)
      tile.strides[k] = rootStrides[size_t(tile.dims[k])];
  }
  return shifted;
}

namespace {

/// SliceGlobal and SliceShared alike: the parent's address and validity, the per-dimension
/// lists rebuilt by applyOffset.
template <class View>
Expected<View> slice(const View &view, const std::vector<OffsetValue> &offsets,
                     const std::vector<int64_t> &shape) {
  size_t given = shape.empty() ? kAnySliceCount : shape.size();
  TILUSVM_TRY(offsetRankStatus(offsets, view.shape.size(), given, OffsetUse::Slice));
  View out = view;
  out.shape.clear();
  out.lo.clear();
  out.hi.clear();
  if constexpr (requires { out.strides; })
    out.strides.clear();
  else
    out.dims.clear();
  IntArithmetic a;
  applyOffset<OffsetUse::Slice>(a, view, out, offsets.size(), entryOf(offsets), lengthOf(shape));
  return out;
}

} // namespace

Expected<GlobalView> sliceGlobal(const GlobalView &view, const std::vector<OffsetValue> &offsets,
                                 const std::vector<int64_t> &shape) {
  return slice(view, offsets, shape);
}

Expected<SharedView> sliceShared(const SharedView &view, const std::vector<OffsetValue> &offsets,
                                 const std::vector<int64_t> &shape) {
  return slice(view, offsets, shape);
}

} // namespace tilus::cpu
