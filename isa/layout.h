// Register layouts (ISA section 3.1): which thread holds which element of a register tensor.
//
// A layout L of rank r has a shape S, a thread count T and a per-thread local size N, and is a
// function L(t, i) from a thread t in [0, T) and a local slot i in [0, N) to an index of S.
//
// The representation is the canonical *unified form* (Tilus section 5). Each dimension d is
// split into modes (most significant first); two ordered lists say which modes index threads
// (`spatial`, where a replication factor is an extra entry with dim == -1) and which index local
// slots (`local`). t is the row-major ravel of the spatial modes' coordinates (first entry most
// significant), i likewise over the local modes, and x_d is the row-major ravel of dimension d's
// mode coordinates. Canonicalisation drops size-1 modes and merges modes that are adjacent both
// in their dimension and in their list, so two layouts are equal iff their functions are equal.
//
// Worked example, the mma.m16n8k16 C fragment `local(2,1).spatial(8,4).local(1,2)`:
//   modes:   m0 = (dim 0, 2), m1 = (dim 0, 8), m2 = (dim 1, 4), m3 = (dim 1, 2)
//   spatial: [m1, m2]  (T = 32)          local: [m0, m3]  (N = 4)
//   L(t, i) = (8*(i/2) + t/4, 2*(t%4) + i%2)
//
// The product f.g (Kronecker) puts f's modes of each dimension before (more significant than)
// g's and concatenates the lists: (f.g)(t, i) = f(t / T_g, i / N_g) * S_g + g(t % T_g, i % N_g).
// Division h / g returns the f with f.g == h when one exists.
#pragma once

#include "isa/status.h"

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilus {

/// The most cells (threads x locals, replicated ones included) and elements a register layout
/// may have: the bytecode's limit (BytecodeLimits::maxLayoutElements), enforced where layouts
/// are built so that whatever the assembler accepts also decodes, and printing or enumerating a
/// layout stays bounded.
constexpr int64_t kMaxLayoutCells = int64_t(1) << 21;

struct LayoutMode {
  int32_t dim = 0;  // dimension, or -1 for a replication entry (spatial list only)
  int64_t size = 1; // > 1 in canonical form
  friend bool operator==(const LayoutMode &, const LayoutMode &) = default;
};

class RegisterLayout {
public:
  /// Rank-0, one thread, one local: the identity of the product.
  RegisterLayout() = default;

  /// Primitives of ISA section 3.1. Sizes must be positive (else layout-invalid).
  static Expected<RegisterLayout> local(const std::vector<int64_t> &n);
  static Expected<RegisterLayout> columnLocal(const std::vector<int64_t> &n);
  static Expected<RegisterLayout> spatial(const std::vector<int64_t> &n);
  static Expected<RegisterLayout> columnSpatial(const std::vector<int64_t> &n);
  /// replicate(k): T = k, N = 1; its rank adapts to the layout it is multiplied with.
  static Expected<RegisterLayout> replicate(int64_t k);

  /// Build from a (not necessarily canonical) unified form; validates and canonicalises.
  /// `modes` lists, per dimension in order of significance, the modes; `spatial` and `local`
  /// index into `modes`; replication entries are modes with dim == -1 that appear in `spatial`.
  static Expected<RegisterLayout> tryCreate(std::vector<int64_t> shape,
                                            std::vector<LayoutMode> modes,
                                            std::vector<int32_t> spatial,
                                            std::vector<int32_t> local);

  /// f.g; ranks must agree unless one side has no rank yet (a bare replicate).
  [[nodiscard]] Expected<RegisterLayout> product(const RegisterLayout &g) const;
  /// The f with f.g == *this, if one exists.
  [[nodiscard]] std::optional<RegisterLayout> divideRight(const RegisterLayout &g) const;
  /// The g with f.g == *this, if one exists.
  [[nodiscard]] std::optional<RegisterLayout> divideLeft(const RegisterLayout &f) const;
  /// Dimensions permuted like numpy.transpose: result dimension k is dimension dims[k].
  [[nodiscard]] Expected<RegisterLayout> permute(const std::vector<int64_t> &dims) const;
  /// Reduce over `dim` (ISA section 5): its local modes are dropped, its spatial modes become
  /// replication of the same size; with keepDim the dimension stays with size 1.
  [[nodiscard]] Expected<RegisterLayout> reduce(int dim, bool keepDim) const;

  /// -1 for a layout without rank (a product of replicates only).
  int rank() const { return rank_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t numThreads() const { return threads_; }
  int64_t numLocals() const { return locals_; }
  int64_t numElements() const;
  /// Canonical form.
  const std::vector<LayoutMode> &modes() const { return modes_; }
  const std::vector<int32_t> &spatialModes() const { return spatial_; }
  const std::vector<int32_t> &localModes() const { return local_; }
  /// Whether some element has more than one owner.
  bool isReplicated() const;
  /// The smallest thread that holds the same elements at the same local slots as thread t:
  /// t with its digits of the replication entries set to 0 (only those entries give an
  /// element a second owner, always at the same slot). Precondition: t < T.
  int64_t replicaRoot(int64_t t) const;

  /// L(t, i): writes rank() coordinates to `index`. Precondition: t < T, i < N.
  void apply(int64_t t, int64_t i, int64_t *index) const;
  std::vector<int64_t> apply(int64_t t, int64_t i) const;
  /// Row-major linear index of L(t, i) within shape().
  int64_t applyLinear(int64_t t, int64_t i) const;
  /// For each element in row-major order, its owners (t, i) in increasing order.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> owners() const;

  /// A product of primitives that denotes this layout, e.g.
  /// "local(2, 1).spatial(8, 4).local(1, 2)"; parsing it gives back an equal layout.
  std::string toString() const;
  /// The unified form: "shape=[16, 8] modes=[...] spatial=[...] local=[...]".
  std::string canonicalString() const;
  size_t hash() const;

  friend bool operator==(const RegisterLayout &a, const RegisterLayout &b) {
    return a.rank_ == b.rank_ && a.shape_ == b.shape_ && a.modes_ == b.modes_ &&
           a.spatial_ == b.spatial_ && a.local_ == b.local_;
  }

private:
  friend struct LayoutAccess; // isa/layout_internal.h: the one constructor of canonical forms

  int rank_ = 0;
  std::vector<int64_t> shape_;
  std::vector<LayoutMode> modes_; // grouped by dimension, most significant first; then replicas
  std::vector<int32_t> spatial_;
  std::vector<int32_t> local_;
  int64_t threads_ = 1;
  int64_t locals_ = 1;
};

} // namespace tilus
