// Internal to the register-layout implementation (isa/layout*.cpp), not part of the API.
//
// Every RegisterLayout value is produced by LayoutAccess::create from a RawLayout: a unified form
// that may hold size-1 modes, unmerged neighbours, modes in any order across dimensions and
// replication entries anywhere in the mode vector. create() validates it, canonicalises it and
// rejects forms that no chain of primitives can express, so the invariants of layout.h hold for
// every value that exists. Operations (product, division, permute, reduce) only rearrange modes.
#pragma once

#include "isa/layout.h"

namespace tilus {

/// A unified form that need not be canonical. A mode's significance within its dimension is its
/// order among the modes of that dimension in `modes`; the order of replication entries (dim -1)
/// in `modes` is irrelevant. rank -1 means "no rank yet" (then `shape` is empty).
struct RawLayout {
  int rank = 0;
  std::vector<int64_t> shape;
  std::vector<LayoutMode> modes;
  std::vector<int32_t> spatial;
  std::vector<int32_t> local;
};

struct LayoutAccess {
  /// Validate, canonicalise and check expressibility; layout-invalid on failure.
  static Expected<RegisterLayout> create(RawLayout raw);
  /// The canonical form of `l` as a RawLayout.
  static RawLayout raw(const RegisterLayout &l);
};

/// Keep only the modes that the lists reference (preserving their order), remapping the lists.
RawLayout compactModes(RawLayout raw);

} // namespace tilus
