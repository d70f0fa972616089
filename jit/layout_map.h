// Register layouts as the code generator needs them: split into a thread part and a local part.
//
// In the unified form (isa/layout.h) every mode of a layout indexes either threads or local
// slots, so the index a thread t holds in local slot i is a sum of two independent parts:
//   x_d(t, i) = S_d(t) + Loc_d(i)
//   S_d(t)    = sum over spatial modes m of dim d of ((t / threadDiv_m) % size_m) * stride_m
//   Loc_d(i)  = sum over local modes m of dim d of ((i / localDiv_m) % size_m) * stride_m
// where stride_m is the mode's weight within its dimension. The JIT computes S(t) once per
// thread at run time and folds Loc(i) into constants, because i is always known at compile time
// (register tensors are unrolled into one LLVM value per local slot).
//
// Worked example, `local(2,1).spatial(8,4).local(1,2)` (16x8, T = 32, N = 4):
//   spatial: (dim 0, threadDiv 4, size 8, stride 1), (dim 1, threadDiv 1, size 4, stride 2)
//   local:   (dim 0, localDiv 2, size 2, stride 8),  (dim 1, localDiv 1, size 2, stride 1)
//   x(t, 3) = (t/4 + 8, 2 (t%4) + 1)
//
// Replication modes (dim -1) only index threads: the owners of an element differ exactly in
// those coordinates, so the owner with the smallest (t, i) is the one whose replication
// coordinates are all zero (`isPrimary`).
#pragma once

#include "isa/layout.h"

#include <cstdint>
#include <initializer_list>
#include <vector>

namespace tilus::jit {

struct LayoutTerm {
  int dim = 0;     // -1: replication (spatial terms only)
  int64_t div = 1; // threadDiv or localDiv
  int64_t size = 1;
  int64_t stride = 1; // weight of the coordinate within its dimension
};

class LayoutMap {
public:
  explicit LayoutMap(const RegisterLayout &layout);

  int rank() const { return rank_; }
  const std::vector<int64_t> &shape() const { return shape_; }
  int64_t threads() const { return threads_; }
  int64_t locals() const { return locals_; }
  const std::vector<LayoutTerm> &spatialTerms() const { return spatial_; }
  const std::vector<LayoutTerm> &localTerms() const { return local_; }

  /// Loc_d(i) for every d (rank() entries).
  const int64_t *localPart(int64_t i) const { return localPart_.data() + i * rank_; }
  /// S_d(t) for every d, written to `out`.
  void threadPart(int64_t t, int64_t *out) const;
  /// x(t, i), written to `out`.
  void apply(int64_t t, int64_t i, int64_t *out) const;
  /// Whether every replication coordinate of t is zero.
  bool isPrimary(int64_t t) const;
  /// The local slot that holds index x in any thread that owns x.
  int64_t localSlotOf(const int64_t *x) const;
  /// Whether thread t owns index x.
  bool owns(int64_t t, const int64_t *x) const;
  /// Row-major linear index of x within shape().
  int64_t linear(const int64_t *x) const;

private:
  int rank_ = 0;
  std::vector<int64_t> shape_;
  int64_t threads_ = 1;
  int64_t locals_ = 1;
  std::vector<LayoutTerm> spatial_;
  std::vector<LayoutTerm> local_;
  std::vector<int64_t> localPart_; // locals_ x rank_
};

/// Where a result slot finds an operand's value. The operand is broadcast (numpy rules, shapes
/// aligned on the right) to the result's shape; a thread that owns a result element owns the
/// matching operand element (the checker's layout-mismatch rule). `slots[t]` is the operand
/// slot in thread t; `uniform` when it is the same for every thread.
struct SlotSource {
  bool uniform = true;
  int64_t slot = 0;               // when uniform
  std::vector<int64_t> perThread; // otherwise, indexed by thread
  bool ok = true;                 // false: some owner thread does not own the operand element
};

/// For every local slot of `result`, where `operand` holds the broadcast element.
std::vector<SlotSource> gatherSlots(const LayoutMap &result, const LayoutMap &operand);

/// Broadcast index x of the result's shape to the operand's shape (right-aligned; size-1
/// dimensions take index 0).
void broadcastIndex(const std::vector<int64_t> &resultShape, const int64_t *x,
                    const std::vector<int64_t> &operandShape, int64_t *out);

/// The product of layouts that are known to compose (the fixed fragment layouts of mma and
/// ldmatrix), left to right.
RegisterLayout layoutChain(std::initializer_list<Expected<RegisterLayout>> parts);

} // namespace tilus::jit
