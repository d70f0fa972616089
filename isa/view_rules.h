// The memory-view rules of ISA section 4 ("Offsets"), written once for every stage: how an
// `offset=[...]` argument (with SliceGlobal / SliceShared's `shape=`) turns a view of global
// or shared memory into a slice, or into the tile that a load, store or copy touches.
//
// The rules are templates over the stage's index arithmetic `A` (A::Index, A::Bool and the
// operations zero, add, mul, sub, max, min, inside, both): the interpreter computes them on
// integers (IntArithmetic below), the JIT emits them as LLVM IR (jit/codegen.h), and the
// checker applies the rank rule to the static structure of the arguments.
//
// A view is a struct of the stage with these members (the rules use those it has):
//   bounds      shape, lo, hi (per dimension: length and the range [lo, hi) of indices inside
//               every tensor of its slice chain), valid (false once a fixed index of the chain
//               fell outside its parent); a stage that does not bound a view has none of them
//   addressing  offset, strides (global: element x at offset + sum x_d * strides_d), or
//               origin, dims (shared: view index y_d adds to root coordinate origin[dims[d]])
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

namespace tilus {

/// What an offset argument makes of a view.
enum class OffsetUse : uint8_t {
  Slice, // SliceGlobal / SliceShared: a view of its own
  Tile,  // the tile of a load, store or copy; its lengths are the tile's
};

/// Offset-rank (ISA section 4): an offset has one entry per dimension of the view, and as many
/// slice entries as the slice's `shape=` or the tile has dimensions.
enum class OffsetRank : uint8_t { Holds, EntryCount, SliceCount };

/// offsetRank's `sliceDims` when nothing fixes the number of slice entries (a slice without
/// `shape=`).
inline constexpr size_t kAnySliceCount = SIZE_MAX;

/// The rank rule for an offset of `entries` entries, `slices` of them slice entries, on a view
/// of rank `viewRank`; `sliceDims` is the number of dimensions the slices must fill (the
/// tile's rank, or the length of a given `shape=`), or kAnySliceCount.
inline OffsetRank offsetRank(size_t entries, size_t slices, size_t viewRank, size_t sliceDims) {
  if (entries != viewRank)
    return OffsetRank::EntryCount;
  if (sliceDims != kAnySliceCount && sliceDims != slices)
    return OffsetRank::SliceCount;
  return OffsetRank::Holds;
}

/// The number of slice entries of a list of entries with a `slice` member.
template <class Entries> size_t sliceEntries(const Entries &entries) {
  return size_t(
      std::count_if(entries.begin(), entries.end(), [](const auto &e) { return bool(e.slice); }));
}

/// The `length` of applyOffset when no slice entry has a given length (tiles, and slices
/// without `shape=`).
struct DefaultLengths {
  std::nullopt_t operator()(size_t) const { return std::nullopt; }
};

/// Apply the `entries` entries of an offset to view `from`, giving `to` (a slice view, or a
/// tile: kUse). `start(d)` gives entry d as {start, isSlice}; for a slice, `length(k)` gives the
/// `shape=` length of the k-th slice entry, or nullopt for the default. In entry order:
///   address      strided: to.offset += e * strides_d;  rooted: to.origin[dims_d] += e
///   fixed entry  to.valid &= lo_d <= e < hi_d, and the dimension is dropped
///   slice entry  the dimension is kept (its stride, or its root dimension) with
///                  slice: length n = the given length or max(shape_d - e, 0) and valid range
///                         [max(lo_d - e, 0), min(hi_d - e, n))
///                  tile:  valid range [lo_d - e, hi_d - e) (the tile's own length bounds it)
/// `to` starts as the parent's address and validity (offset or origin, valid) with empty
/// per-dimension lists. Precondition: offsetRank holds.
template <OffsetUse kUse, class A, class From, class To, class Start, class Length = DefaultLengths>
void applyOffset(A &a, const From &from, To &to, size_t entries, Start &&start,
                 Length &&length = {}) {
  constexpr bool kStrided = requires { from.strides; };
  constexpr bool kBounded = requires { from.lo; };
  size_t slices = 0; // slice entries before entry d
  for (size_t d = 0; d < entries; ++d) {
    auto [e, slice] = start(d);
    size_t k = slices;
    slices += slice ? 1 : 0;
    if constexpr (kStrided) {
      to.offset = a.add(to.offset, a.mul(e, from.strides[d]));
      if (slice)
        to.strides.push_back(from.strides[d]);
    } else {
      auto &origin = to.origin[size_t(from.dims[d])];
      origin = a.add(origin, e);
      if (slice)
        to.dims.push_back(from.dims[d]);
    }
    if constexpr (kBounded) {
      if (!slice) {
        to.valid = a.both(to.valid, a.inside(e, from.lo[d], from.hi[d]));
        continue;
      }
      if constexpr (kUse == OffsetUse::Tile) {
        to.lo.push_back(a.sub(from.lo[d], e));
        to.hi.push_back(a.sub(from.hi[d], e));
      } else {
        std::optional<typename A::Index> given = length(k);
        auto n = given ? *given : a.max(a.sub(from.shape[d], e), a.zero());
        to.shape.push_back(n);
        to.lo.push_back(a.max(a.sub(from.lo[d], e), a.zero()));
        to.hi.push_back(a.min(a.sub(from.hi[d], e), n));
      }
    }
  }
}

/// The index arithmetic of known integers (the interpreter's).
struct IntArithmetic {
  using Index = int64_t;
  using Bool = bool;
  int64_t zero() const { return 0; }
  int64_t add(int64_t x, int64_t y) const { return x + y; }
  int64_t mul(int64_t x, int64_t y) const { return x * y; }
  int64_t sub(int64_t x, int64_t y) const { return x - y; }
  int64_t max(int64_t x, int64_t y) const { return std::max(x, y); }
  int64_t min(int64_t x, int64_t y) const { return std::min(x, y); }
  bool inside(int64_t e, int64_t lo, int64_t hi) const { return e >= lo && e < hi; }
  bool both(bool x, bool y) const { return x && y; }
};

} // namespace tilus
