// Address computation for global and shared tensors: composing slices into views, and turning
// a load/store/copy's `offset=[...]` into a TileAccess (which tile index lands on which memory
// element, and which tile indices are inside the tensor). The element loops themselves live
// with the instructions (exec_memory.cpp); this file only does index arithmetic.
#include "vm/cpu/memory.h"

#include <algorithm>

namespace tilus::cpu {

int64_t TileAccess::elements() const {
  int64_t n = 1;
  for (int64_t s : shape)
    n *= s;
  return n;
}

bool TileAccess::allValid() const {
  if (empty)
    return false;
  for (size_t k = 0; k < shape.size(); ++k)
    if (shape[k] > 0 && (lo[k] > 0 || hi[k] < shape[k]))
      return false;
  return true;
}

void TileAccess::offsetRange(int64_t &min, int64_t &max) const {
  min = max = base;
  for (size_t k = 0; k < shape.size(); ++k) {
    int64_t reach = stride[k] * std::max<int64_t>(shape[k] - 1, 0);
    (reach < 0 ? min : max) += reach;
  }
}

int64_t TileAccess::elementOffset(const int64_t *idx) const {
  size_t rank = shape.size();
  if (linear) {
    int64_t off = base;
    for (size_t k = 0; k < rank; ++k)
      off += idx[k] * stride[k];
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
    coords[rootDim[k]] += idx[k];
  return layout->offset(coords);
}

namespace {

Status countMismatch(const char *what, size_t got, size_t want) {
  return Status::error(ErrorCode::OffsetRank, std::string(what) + " has " + std::to_string(got) +
                                                  " entries, expected " + std::to_string(want));
}

size_t sliceCount(const std::vector<OffsetValue> &offsets) {
  return size_t(
      std::count_if(offsets.begin(), offsets.end(), [](const OffsetValue &o) { return o.slice; }));
}

} // namespace

Expected<TileAccess> globalTile(const GlobalView &view, const std::vector<OffsetValue> &offsets,
                                const std::vector<int64_t> &tileShape) {
  if (offsets.size() != view.shape.size())
    return countMismatch("offset", offsets.size(), view.shape.size());
  if (sliceCount(offsets) != tileShape.size())
    return countMismatch("offset slices", sliceCount(offsets), tileShape.size());
  TileAccess tile;
  tile.shape = tileShape;
  tile.empty = view.empty;
  tile.base = view.offset;
  size_t k = 0;
  for (size_t d = 0; d < offsets.size(); ++d) {
    int64_t e = offsets[d].start;
    tile.base += e * view.strides[d];
    if (!offsets[d].slice) {
      tile.empty = tile.empty || e < view.lo[d] || e >= view.hi[d];
      continue;
    }
    tile.stride.push_back(view.strides[d]);
    tile.lo.push_back(view.lo[d] - e);
    tile.hi.push_back(view.hi[d] - e);
    ++k;
  }
  return tile;
}

Expected<TileAccess> sharedTile(const SharedView &view, const std::vector<OffsetValue> &offsets,
                                const std::vector<int64_t> &tileShape) {
  if (offsets.size() != view.shape.size())
    return countMismatch("offset", offsets.size(), view.shape.size());
  if (sliceCount(offsets) != tileShape.size())
    return countMismatch("offset slices", sliceCount(offsets), tileShape.size());
  TileAccess tile;
  tile.shape = tileShape;
  tile.empty = view.empty;
  tile.layout = view.layout;
  tile.origin = view.origin;
  for (size_t d = 0; d < offsets.size(); ++d) {
    int64_t e = offsets[d].start;
    tile.origin[size_t(view.dims[d])] += e;
    if (!offsets[d].slice) {
      tile.empty = tile.empty || e < view.lo[d] || e >= view.hi[d];
      continue;
    }
    tile.rootDim.push_back(view.dims[d]);
    tile.lo.push_back(view.lo[d] - e);
    tile.hi.push_back(view.hi[d] - e);
  }
  std::vector<int64_t> rootStrides = view.layout->linearStrides();
  tile.linear = !rootStrides.empty() || view.layout->rank() == 0;
  tile.stride.assign(tileShape.size(), 0);
  if (tile.linear) {
    for (size_t r = 0; r < rootStrides.size(); ++r)
      tile.base += tile.origin[r] * rootStrides[r];
    for (size_t k = 0; k < tileShape.size(); ++k)
      tile.stride[k] = rootStrides[size_t(tile.rootDim[k])];
  }
  return tile;
}

Expected<GlobalView> sliceGlobal(const GlobalView &view, const std::vector<OffsetValue> &offsets,
                                 const std::vector<int64_t> &shape) {
  if (offsets.size() != view.shape.size())
    return countMismatch("offset", offsets.size(), view.shape.size());
  size_t slices = sliceCount(offsets);
  if (!shape.empty() && shape.size() != slices)
    return countMismatch("shape", shape.size(), slices);
  GlobalView out = view;
  out.shape.clear();
  out.strides.clear();
  out.lo.clear();
  out.hi.clear();
  for (size_t d = 0; d < offsets.size(); ++d) {
    int64_t e = offsets[d].start;
    out.offset += e * view.strides[d];
    if (!offsets[d].slice) {
      out.empty = out.empty || e < view.lo[d] || e >= view.hi[d];
      continue;
    }
    int64_t n = shape.empty() ? std::max<int64_t>(0, view.shape[d] - e) : shape[out.shape.size()];
    out.shape.push_back(n);
    out.strides.push_back(view.strides[d]);
    out.lo.push_back(std::max<int64_t>(0, view.lo[d] - e));
    out.hi.push_back(std::min<int64_t>(n, view.hi[d] - e));
  }
  return out;
}

Expected<SharedView> sliceShared(const SharedView &view, const std::vector<OffsetValue> &offsets,
                                 const std::vector<int64_t> &shape) {
  if (offsets.size() != view.shape.size())
    return countMismatch("offset", offsets.size(), view.shape.size());
  size_t slices = sliceCount(offsets);
  if (!shape.empty() && shape.size() != slices)
    return countMismatch("shape", shape.size(), slices);
  SharedView out = view;
  out.dims.clear();
  out.shape.clear();
  out.lo.clear();
  out.hi.clear();
  for (size_t d = 0; d < offsets.size(); ++d) {
    int64_t e = offsets[d].start;
    out.origin[size_t(view.dims[d])] += e;
    if (!offsets[d].slice) {
      out.empty = out.empty || e < view.lo[d] || e >= view.hi[d];
      continue;
    }
    int64_t n = shape.empty() ? std::max<int64_t>(0, view.shape[d] - e) : shape[out.shape.size()];
    out.dims.push_back(view.dims[d]);
    out.shape.push_back(n);
    out.lo.push_back(std::max<int64_t>(0, view.lo[d] - e));
    out.hi.push_back(std::min<int64_t>(n, view.hi[d] - e));
  }
  return out;
}

} // namespace tilus::cpu
