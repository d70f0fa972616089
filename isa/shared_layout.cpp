// Shared-memory layouts (ISA section 3.2): the expression tree of row_major, column_major,
// strided, tiling and swizzle, its offset function and its size.
//
// The factories validate what input can get wrong (non-positive sizes, negative strides, rank
// mismatches, swizzle parameters outside shift >= bits >= 0) and compute size() once: closed
// forms for the first four kinds, an exhaustive scan for swizzle, whose largest offset depends on
// which offsets its inner layout produces. Tiling is associative, so A.(B.C) is stored as
// (A.B).C: trees stay left-leaning, toString() needs no parentheses, and "A.B.C" read left to
// right rebuilds the same tree. Example: tile(row_major(2, 2), row_major(4, 8)) has shape
// [8, 16], size 128, and offset(5, 9) = row_major(2,2)(1, 0) * 32 + row_major(4,8)(1, 1) = 73.
#include "isa/shared_layout.h"

#include "isa/shape.h"

#include <algorithm>
#include <array>

namespace tilus {

namespace {

/// Shared memory holds at most 228 KiB, i.e. fewer than 2^21 elements even of 1-bit types; the
/// limit keeps the exhaustive scans (size of a swizzle, injectivity) cheap.
constexpr int64_t kMaxElements = int64_t(1) << 24;
/// Offsets stay below 2^62 so that sums and swizzle shifts cannot overflow.
constexpr int64_t kMaxOffsetBits = 62;

Status invalid(std::string message) {
  return Status::error(ErrorCode::LayoutInvalid, std::move(message));
}

std::string joinInts(const std::vector<int64_t> &values) {
  std::string out;
  for (size_t k = 0; k < values.size(); ++k)
    out += (k ? ", " : "") + std::to_string(values[k]);
  return out;
}

Status checkShape(const char *name, const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] < 1)
      return invalid(std::string(name) + " size " + std::to_string(shape[d]) + " in dimension " +
                     std::to_string(d) + " is not positive");
    if (__builtin_mul_overflow(elements, shape[d], &elements) || elements > kMaxElements)
      return invalid(std::string(name) + " shape [" + joinInts(shape) + "] has more than " +
                     std::to_string(kMaxElements) + " elements");
  }
  return Status::success();
}

/// Calls fn(index) for every index of `shape` in row-major order.
template <typename Fn> void forEachIndex(const std::vector<int64_t> &shape, Fn &&fn) {
  for (int64_t s : shape)
    if (s <= 0)
      return;
  std::vector<int64_t> index(shape.size(), 0);
  while (true) {
    fn(index.data());
    size_t d = shape.size();
    while (d > 0 && ++index[d - 1] == shape[d - 1])
      index[--d] = 0;
    if (d == 0)
      return;
  }
}

/// Scratch space for the index arithmetic of a tile: on the stack for ranks up to 8.
class IndexBuffer {
public:
  explicit IndexBuffer(size_t rank) : data_(rank <= kInline ? inline_.data() : nullptr) {
    if (rank > kInline) {
      heap_.resize(rank);
      data_ = heap_.data();
    }
  }
  int64_t *data() { return data_; }

private:
  static constexpr size_t kInline = 8;
  std::array<int64_t, kInline> inline_;
  std::vector<int64_t> heap_;
  int64_t *data_;
};

} // namespace

Expected<SharedLayout> SharedLayout::contiguous(Kind kind, const char *name,
                                                std::vector<int64_t> shape) {
  TILUSVM_TRY(checkShape(name, shape));
  SharedLayout l;
  l.kind_ = kind;
  l.shape_ = std::move(shape);
  l.size_ = l.numElements();
  return l;
}

Expected<SharedLayout> SharedLayout::rowMajor(std::vector<int64_t> shape) {
  return contiguous(Kind::RowMajor, "row_major", std::move(shape));
}

Expected<SharedLayout> SharedLayout::columnMajor(std::vector<int64_t> shape) {
  return contiguous(Kind::ColumnMajor, "column_major", std::move(shape));
}

Expected<SharedLayout> SharedLayout::strided(std::vector<int64_t> shape,
                                             std::vector<int64_t> strides) {
  TILUSVM_TRY(checkShape("strided", shape));
  if (strides.size() != shape.size())
    return invalid("strided layout has " + std::to_string(shape.size()) + " sizes but " +
                   std::to_string(strides.size()) + " strides");
  int64_t maxOffset = 0;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (strides[d] < 0)
      return invalid("stride " + std::to_string(strides[d]) + " in dimension " + std::to_string(d) +
                     " is negative");
    int64_t term = 0;
    if (__builtin_mul_overflow(shape[d] - 1, strides[d], &term) ||
        __builtin_add_overflow(maxOffset, term, &maxOffset) ||
        maxOffset >= (int64_t(1) << kMaxOffsetBits))
      return invalid("strided layout offsets exceed 2^" + std::to_string(kMaxOffsetBits));
  }
  SharedLayout l;
  l.kind_ = Kind::Strided;
  l.shape_ = std::move(shape);
  l.strides_ = std::move(strides);
  l.size_ = maxOffset + 1;
  return l;
}

Expected<SharedLayout> SharedLayout::tile(const SharedLayout &a, const SharedLayout &b) {
  if (a.rank() != b.rank())
    return invalid("tiling layouts of rank " + std::to_string(a.rank()) + " and " +
                   std::to_string(b.rank()));
  if (b.kind_ == Kind::Tile) { // A.(B1.B2) == (A.B1).B2
    Expected<SharedLayout> left = tile(a, *b.children_[0]);
    if (!left)
      return left;
    return tile(*left, *b.children_[1]);
  }
  SharedLayout l;
  l.kind_ = Kind::Tile;
  l.shape_.resize(a.shape_.size());
  int64_t elements = 1;
  for (size_t d = 0; d < a.shape_.size(); ++d)
    if (__builtin_mul_overflow(a.shape_[d], b.shape_[d], &l.shape_[d]) ||
        __builtin_mul_overflow(elements, l.shape_[d], &elements) || elements > kMaxElements)
      return invalid("tiled layout has more than " + std::to_string(kMaxElements) + " elements");
  // The largest offset is A's largest times size(B) plus B's largest: size(A) * size(B) - 1.
  if (__builtin_mul_overflow(a.size_, b.size_, &l.size_) ||
      l.size_ > (int64_t(1) << kMaxOffsetBits))
    return invalid("tiled layout offsets exceed 2^" + std::to_string(kMaxOffsetBits));
  l.children_ = {std::make_shared<const SharedLayout>(a), std::make_shared<const SharedLayout>(b)};
  return l;
}

Expected<SharedLayout> SharedLayout::swizzle(const SharedLayout &inner, int64_t bits, int64_t base,
                                             int64_t shift) {
  if (bits < 0 || base < 0 || shift < bits)
    return invalid("swizzle(bits " + std::to_string(bits) + ", base " + std::to_string(base) +
                   ", shift " + std::to_string(shift) + ") needs shift >= bits >= 0 and base >= 0");
  if (bits > kMaxOffsetBits || base > kMaxOffsetBits || shift > kMaxOffsetBits ||
      base + bits > kMaxOffsetBits)
    return invalid("swizzle(bits " + std::to_string(bits) + ", base " + std::to_string(base) +
                   ", shift " + std::to_string(shift) + ") reaches beyond offset bit " +
                   std::to_string(kMaxOffsetBits));
  // A swizzle of no bits XORs nothing: it is its inner layout (so a program can turn a
  // swizzle off with a constant and get exactly the layout beneath it, linear where that is)
  if (bits == 0)
    return inner;
  SharedLayout l;
  l.kind_ = Kind::Swizzle;
  l.shape_ = inner.shape_;
  l.children_ = {std::make_shared<const SharedLayout>(inner)};
  l.swizzle_[0] = bits;
  l.swizzle_[1] = base;
  l.swizzle_[2] = shift;
  int64_t maxOffset = 0;
  forEachIndex(l.shape_, [&](const int64_t *x) { maxOffset = std::max(maxOffset, l.offset(x)); });
  l.size_ = maxOffset + 1;
  return l;
}

int64_t SharedLayout::numElements() const { return productOf(shape_); }

int64_t SharedLayout::offset(const int64_t *index) const {
  const size_t rank = shape_.size();
  switch (kind_) {
  case Kind::RowMajor: {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d)
      o = o * shape_[d] + index[d];
    return o;
  }
  case Kind::ColumnMajor: {
    int64_t o = 0;
    for (size_t d = rank; d-- > 0;)
      o = o * shape_[d] + index[d];
    return o;
  }
  case Kind::Strided: {
    int64_t o = 0;
    for (size_t d = 0; d < rank; ++d)
      o += index[d] * strides_[d];
    return o;
  }
  case Kind::Tile: {
    const SharedLayout &a = *children_[0], &b = *children_[1];
    IndexBuffer outer(rank), inner(rank);
    for (size_t d = 0; d < rank; ++d) {
      outer.data()[d] = index[d] / b.shape_[d];
      inner.data()[d] = index[d] % b.shape_[d];
    }
    return a.offset(outer.data()) * b.size_ + b.offset(inner.data());
  }
  case Kind::Swizzle: {
    const int64_t o = children_[0]->offset(index);
    const int64_t mask = ((int64_t(1) << swizzle_[0]) - 1) << swizzle_[1];
    return o ^ ((o >> swizzle_[2]) & mask);
  }
  }
  assert(false && "unknown shared layout kind");
  return 0;
}

bool SharedLayout::isInjective() const {
  const int64_t n = numElements();
  if (size_ < n)
    return false; // more indices than offsets
  if (size_ <= 16 * n) {
    std::vector<bool> seen(size_t(size_), false);
    bool injective = true;
    forEachIndex(shape_, [&](const int64_t *x) {
      const int64_t o = offset(x);
      injective = injective && !seen[size_t(o)];
      seen[size_t(o)] = true;
    });
    return injective;
  }
  std::vector<int64_t> offsets;
  offsets.reserve(size_t(n));
  forEachIndex(shape_, [&](const int64_t *x) { offsets.push_back(offset(x)); });
  std::sort(offsets.begin(), offsets.end());
  return std::adjacent_find(offsets.begin(), offsets.end()) == offsets.end();
}

std::string SharedLayout::toString() const {
  switch (kind_) {
  case Kind::RowMajor:
    return "row_major(" + joinInts(shape_) + ")";
  case Kind::ColumnMajor:
    return "column_major(" + joinInts(shape_) + ")";
  case Kind::Strided:
    return "strided([" + joinInts(shape_) + "], [" + joinInts(strides_) + "])";
  case Kind::Tile: // right children are never tiles, so "A.B.C" reads back left to right
    return children_[0]->toString() + "." + children_[1]->toString();
  case Kind::Swizzle:
    return "swizzle(" + children_[0]->toString() + ", " + std::to_string(swizzle_[0]) + ", " +
           std::to_string(swizzle_[1]) + ", " + std::to_string(swizzle_[2]) + ")";
  }
  assert(false && "unknown shared layout kind");
  return "";
}

bool operator==(const SharedLayout &a, const SharedLayout &b) {
  if (a.kind_ != b.kind_ || a.shape_ != b.shape_ || a.strides_ != b.strides_ ||
      a.children_.size() != b.children_.size())
    return false;
  for (int k = 0; k < 3; ++k)
    if (a.swizzle_[k] != b.swizzle_[k])
      return false;
  for (size_t k = 0; k < a.children_.size(); ++k)
    if (!(*a.children_[k] == *b.children_[k]))
      return false;
  return true;
}

std::vector<int64_t> rowMajorStrides(const std::vector<int64_t> &shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;)
    strides[d - 1] = strides[d] * shape[d];
  return strides;
}

namespace {

/// True when the expression shows the runs contiguous (SharedLayout::contiguousRuns); false when
/// it does not (they may still be).
bool runsShown(const SharedLayout &l, size_t dim, int64_t width) {
  if (width == 1)
    return true;
  const std::vector<int64_t> &shape = l.shape();
  if (shape[dim] % width != 0)
    return false;
  if (std::vector<int64_t> strides = l.linearStrides(); !strides.empty()) {
    // offset(x + j e_dim) = offset(x) + j, and every other stride keeps the start aligned
    if (strides[dim] != 1)
      return false;
    for (size_t k = 0; k < shape.size(); ++k)
      if (k != dim && shape[k] > 1 && strides[k] % width != 0)
        return false;
    return true;
  }
  if (l.kind() == SharedLayout::Kind::Tile) {
    // A(x / S) size(B) + B(x mod S): a run stays inside one tile of B when B's extent is a
    // multiple of the width, and A's part keeps the start aligned when size(B) is
    const SharedLayout &b = *l.children()[1];
    return b.shape()[dim] % width == 0 && b.size() % width == 0 && runsShown(b, dim, width);
  }
  if (l.kind() == SharedLayout::Kind::Swizzle) {
    // o ^ ((o >> shift) & ((2^bits - 1) << base)): with width 2^p <= 2^base the XOR term reads
    // bits from base + shift >= p up, constant within an aligned run of the child, and writes
    // bits from base up, so the run stays an aligned run
    if ((width & (width - 1)) != 0)
      return false;
    int p = 0;
    while ((int64_t(1) << p) < width)
      ++p;
    if (l.swizzleBits() != 0 && p > l.swizzleBase())
      return false;
    return runsShown(*l.children()[0], dim, width);
  }
  return false;
}

} // namespace

bool SharedLayout::contiguousRuns(int dim, int64_t width) const {
  if (dim < 0 || dim >= rank() || width < 1 || shape_[size_t(dim)] % width != 0)
    return false;
  if (runsShown(*this, size_t(dim), width))
    return true;
  bool ok = true;
  std::vector<int64_t> y(shape_.size());
  forEachIndex(shape_, [&](const int64_t *x) {
    if (!ok || x[dim] % width != 0)
      return;
    const int64_t first = offset(x);
    if (first % width != 0) {
      ok = false;
      return;
    }
    std::copy(x, x + shape_.size(), y.begin());
    for (int64_t j = 1; j < width && ok; ++j) {
      ++y[size_t(dim)];
      ok = offset(y.data()) == first + j;
    }
  });
  return ok;
}

std::vector<int64_t> SharedLayout::linearStrides() const {
  switch (kind_) {
  case Kind::RowMajor:
    return rowMajorStrides(shape_);
  case Kind::ColumnMajor: {
    std::vector<int64_t> strides(shape_.size(), 1);
    for (size_t d = 1; d < strides.size(); ++d)
      strides[d] = strides[d - 1] * shape_[d - 1];
    return strides;
  }
  case Kind::Strided:
    return strides_;
  case Kind::Tile:
  case Kind::Swizzle:
    return {};
  }
  return {};
}

} // namespace tilus
