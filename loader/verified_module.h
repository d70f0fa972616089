// The result of loading: a module that passed the layout type checker, with the facts that
// later stages need derived once (types of every variable, threads per block, shared-memory
// plan, pointer extents).
#pragma once

#include "isa/program.h"

#include <cstdint>
#include <optional>
#include <vector>

namespace tilus {

/// The type of one variable, derived by the checker.
struct VarType {
  VarKind kind = VarKind::Scalar;
  DataType dtype;
  /// Register and shared tensors: the static shape. Global tensors: empty (see globalShape).
  std::vector<int64_t> shape;
  /// Register tensors.
  std::optional<RegisterLayout> layout;
  /// Shared and global tensors are views. `root` is the variable created by AllocateShared,
  /// ViewGlobal or AllocateGlobal; `slices` are the SliceShared / SliceGlobal instructions
  /// (indices into Program::instructions) applied to it, outermost first. A root has no slices.
  VarId root = kNoId;
  std::vector<uint32_t> slices;
  /// Shared roots: the layout and the byte offset of the allocation in the block's shared memory.
  std::optional<SharedLayout> sharedLayout;
  int64_t sharedByteOffset = 0;
};

/// The elements of a pointer parameter that the program's views of it can touch:
/// for each ViewGlobal of the pointer, 1 + sum_d (shape_d - 1) * stride_d elements (0 if any
/// shape_d is 0); the extent is the maximum over views. Shapes and strides are expressions of
/// scalar parameters and constants.
struct PointerExtent {
  VarId pointer = kNoId;
  struct View {
    std::vector<ExprId> shape;
    std::vector<ExprId> strides; // empty: row-major over shape
  };
  std::vector<View> views;
  /// False when some view's shape or strides depend on something other than parameters and
  /// constants; then the extent cannot be computed before launch.
  bool computable = true;
};

struct ProgramInfo {
  uint32_t threads = 0;         // threads per block
  std::vector<VarType> vars;    // indexed by VarId
  int64_t sharedBytes = 0;      // the block's shared-memory footprint
  std::vector<PointerExtent> extents; // one per pointer parameter, in parameter order
  bool usesWorkspace = false;   // has AllocateGlobal
};

struct VerifiedModule {
  Module module;
  std::vector<ProgramInfo> programs; // parallel to module.programs
};

} // namespace tilus
