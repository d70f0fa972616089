// Global and shared tensors as the interpreter sees them at run time: views (a root plus the
// composed offsets of its slices) and, per data-movement instruction, a TileAccess that maps
// each element of the register (or shared) tile to an element of the memory tensor.
//
// The rules that make slices and tiles are isa/view_rules.h's. A view keeps, per dimension, the
// range of indices that are inside every tensor of its slice chain ([lo, hi)): a slice never
// reaches outside its parent, so an index inside the slice's own shape but outside its parent's
// counts as out of bounds (global: read as 0, store dropped; shared: a trap).
#pragma once

#include "isa/program.h"

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tilus::cpu {

/// A global tensor: element x is at element offset `offset + sum x_d * strides_d` from `base`
/// (sub-byte types: at bit storageBits * that offset).
struct GlobalView {
  uint8_t *base = nullptr;
  uint64_t byteSize = 0; // bytes of the buffer at base (a pointer argument or workspace)
  VarId root = kNoId;    // the ViewGlobal / AllocateGlobal variable
  VarId buffer = kNoId;  // the pointer parameter (kNoId for the workspace)
  DataType dtype;
  int64_t offset = 0;
  std::vector<int64_t> shape, strides, lo, hi;
  bool valid = true; // false once a fixed slice index fell outside its parent
};

/// A shared tensor: element y is the root's element at root coordinates `origin` plus y_d in
/// root dimension dims[d]; the root's layout turns coordinates into element offsets.
struct SharedView {
  VarId root = kNoId;
  DataType dtype;
  const SharedLayout *layout = nullptr;
  int64_t byteOffset = 0;      // of the root allocation
  std::vector<int64_t> origin; // per root dimension
  std::vector<int32_t> dims;   // per view dimension: its root dimension
  std::vector<int64_t> shape, lo, hi;
  bool valid = true;
};

/// Offsets of a load, store or copy, evaluated: one entry per memory dimension.
struct OffsetValue {
  int64_t start = 0;
  bool slice = true;
};

/// The elements of a tile (row-major over `shape`) and where they are in memory.
struct TileAccess {
  std::vector<int64_t> shape;  // tile shape
  std::vector<int64_t> lo, hi; // valid index range per tile dimension
  bool valid = true;           // false: no element is valid
  // Linear addressing (global views; shared layouts row_major/column_major/strided):
  // element offset = offset + sum idx_k * strides_k.
  bool linear = true;
  int64_t offset = 0;
  std::vector<int64_t> strides;
  // Other shared layouts: root coordinates = origin + idx_k in root dimension dims[k].
  const SharedLayout *layout = nullptr;
  std::vector<int64_t> origin;
  std::vector<int32_t> dims;

  int64_t elements() const;
  /// Whether every tile index is valid.
  bool allValid() const;
  /// Element offset of a tile index (precondition: inside [lo, hi)).
  int64_t elementOffset(const int64_t *idx) const;
  /// Linear tiles: the smallest and largest element offset of any tile index (valid or not).
  void offsetRange(int64_t &min, int64_t &max) const;
};

/// The tile of `view` at `offsets` whose slice dimensions have the lengths `tileShape`.
/// Fails (an internal inconsistency the checker rules out) on a count mismatch.
Expected<TileAccess> globalTile(const GlobalView &view, const std::vector<OffsetValue> &offsets,
                                const std::vector<int64_t> &tileShape);
Expected<TileAccess> sharedTile(const SharedView &view, const std::vector<OffsetValue> &offsets,
                                const std::vector<int64_t> &tileShape);

/// The bounds of a root view (AllocateShared, AllocateGlobal, ViewGlobal): every index of its
/// shape, [0, shape_d) per dimension (a negative run-time length holds no index).
template <class View> void boundByShape(View &view) {
  view.lo.assign(view.shape.size(), 0);
  view.hi = view.shape;
  for (int64_t &h : view.hi)
    h = std::max<int64_t>(h, 0);
}

/// Slices (SliceGlobal / SliceShared): offsets as above; `shape` gives the lengths of the
/// sliced dimensions (empty: each defaults to the remaining extent).
Expected<GlobalView> sliceGlobal(const GlobalView &view, const std::vector<OffsetValue> &offsets,
                                 const std::vector<int64_t> &shape);
Expected<SharedView> sliceShared(const SharedView &view, const std::vector<OffsetValue> &offsets,
                                 const std::vector<int64_t> &shape);

using tilus::rowMajorStrides;

/// Visit every tile element in row-major order: f(linear, idx, valid, elementOffset); the
/// offset is only computed for valid elements.
template <typename F> void forEachTileElement(const TileAccess &tile, F &&f) {
  size_t rank = tile.shape.size();
  int64_t count = tile.elements();
  constexpr size_t kInline = 16;
  int64_t inlineIdx[kInline] = {};
  std::vector<int64_t> heapIdx(rank > kInline ? rank : 0, 0);
  int64_t *idx = rank > kInline ? heapIdx.data() : inlineIdx;
  int64_t offset = tile.offset;
  bool allValid = tile.allValid();
  for (int64_t e = 0; e < count; ++e) {
    bool valid = allValid;
    if (!allValid) {
      valid = tile.valid;
      for (size_t k = 0; k < rank && valid; ++k)
        valid = idx[k] >= tile.lo[k] && idx[k] < tile.hi[k];
    }
    int64_t at = valid ? (tile.linear ? offset : tile.elementOffset(idx)) : 0;
    f(e, static_cast<const int64_t *>(idx), valid, at);
    for (size_t k = rank; k-- > 0;) {
      ++idx[k];
      offset += tile.strides[k];
      if (idx[k] < tile.shape[k])
        break;
      offset -= tile.strides[k] * idx[k];
      idx[k] = 0;
    }
  }
}

} // namespace tilus::cpu
