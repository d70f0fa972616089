// Shared-memory layouts (ISA section 3.2): an injective map from a logical index to an element
// offset within a block's shared allocation. Immutable value type built from the expressions
//   row_major(n..)  column_major(n..)  strided([n..], [s..])  A.B (tiling)
//   swizzle(L, bits, base, shift)   (CuTe's Swizzle<bits, base, shift> applied to L's offset)
// size() is max offset + 1 (in elements).
#pragma once

#include "isa/status.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace tilus {

/// Row-major strides (in elements) of a shape: the last dimension has stride 1.
std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape);

class SharedLayout {
public:
  enum class Kind : uint8_t { RowMajor = 0, ColumnMajor = 1, Strided = 2, Tile = 3, Swizzle = 4 };

  SharedLayout() = default; // rank 0, size 1

  static Expected<SharedLayout> rowMajor(std::vector<int64_t> shape);
  static Expected<SharedLayout> columnMajor(std::vector<int64_t> shape);
  static Expected<SharedLayout> strided(std::vector<int64_t> shape, std::vector<int64_t> strides);
  /// A.B: offset A(x / S_B) * size(B) + B(x mod S_B); ranks must agree.
  static Expected<SharedLayout> tile(const SharedLayout &a, const SharedLayout &b);
  /// o XOR ((o >> shift) AND ((2^bits - 1) << base)); requires shift >= bits >= 0.
  static Expected<SharedLayout> swizzle(const SharedLayout &inner, int64_t bits, int64_t base,
                                        int64_t shift);

  Kind kind() const { return kind_; }
  int rank() const { return int(shape_.size()); }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t numElements() const;
  /// max offset + 1.
  int64_t size() const { return size_; }
  int64_t offset(const int64_t *index) const;
  int64_t offset(const std::vector<int64_t> &index) const { return offset(index.data()); }
  /// Whether distinct indices map to distinct offsets (checked exhaustively; shapes are small).
  bool isInjective() const;
  /// The strides when the layout is linear in the index (row_major, column_major, strided):
  /// offset(x) = sum_d x_d * strides_d. Empty for tiled and swizzled layouts.
  std::vector<int64_t> linearStrides() const;
  /// Whether every run of `width` indices along dimension `dim` that starts at a multiple of
  /// `width` there maps to `width` consecutive offsets starting at a multiple of `width` (the
  /// chunks of a vector or cp.async access). Shown from the expression where it can be (linear
  /// strides; a tile whose inner layout has such runs; a swizzle that leaves the run's bits
  /// alone), otherwise checked over every index.
  bool contiguousRuns(int dim, int64_t width) const;

  /// Strides for Strided; children for Tile (two) and Swizzle (one); swizzle parameters.
  const std::vector<int64_t> &strides() const { return strides_; }
  const std::vector<std::shared_ptr<const SharedLayout>> &children() const { return children_; }
  int64_t swizzleBits() const { return swizzle_[0]; }
  int64_t swizzleBase() const { return swizzle_[1]; }
  int64_t swizzleShift() const { return swizzle_[2]; }
  /// The bits below which a swizzle reads and writes (base + shift + bits): adding a multiple
  /// of 2^swizzleReach() to an offset commutes with the swizzle.
  int64_t swizzleReach() const { return swizzle_[0] + swizzle_[1] + swizzle_[2]; }

  /// The expression, e.g. "swizzle(row_major(64, 32), 3, 3, 3)"; parses back to an equal value.
  std::string toString() const;
  /// Structural equality of the expression trees.
  friend bool operator==(const SharedLayout &a, const SharedLayout &b);

private:
  /// rowMajor or columnMajor (`kind`), `name` in its errors.
  static Expected<SharedLayout> contiguous(Kind kind, const char *name, std::vector<int64_t> shape);

  Kind kind_ = Kind::RowMajor;
  std::vector<int64_t> shape_;
  std::vector<int64_t> strides_;
  std::vector<std::shared_ptr<const SharedLayout>> children_;
  int64_t swizzle_[3] = {0, 0, 0};
  int64_t size_ = 1;
};

} // namespace tilus
