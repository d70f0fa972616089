// The result of loading: a module that passed the layout type checker, with the facts that
// later stages need derived once (types of every variable, threads per block, shared-memory
// plan, pointer extents).
#pragma once

#include "isa/program.h"

#include <cstdint>
#include <map>
#include <optional>
#include <vector>

namespace tilus {

/// The type of one variable, derived by the checker.
struct VarType {
  VarKind kind = VarKind::Scalar;
  DataType dtype;
  /// Register and shared tensors: the static shape. Global tensors: empty (their extents are
  /// scalar expressions of the ViewGlobal / AllocateGlobal root and the SliceGlobal chain).
  std::vector<int64_t> shape;
  /// Number of dimensions of a tensor of any kind (shape.size() for register and shared
  /// tensors; the only static shape fact of a global tensor). 0 for scalars and pointers.
  size_t rank = 0;
  /// Register tensors.
  std::optional<RegisterLayout> layout;
  /// Shared and global tensors are views. `root` is the variable created by AllocateShared,
  /// ViewGlobal or AllocateGlobal; `slices` are the SliceShared / PermuteShared / SliceGlobal
  /// instructions (indices into Program::instructions) applied to it, outermost first. A root
  /// has no slices.
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
    /// The view's element type (ViewGlobal's dtype=, default the pointer's). When it differs
    /// from the pointer's, evaluateExtent converts: ceil(elements * bits(view) / bits(pointer)).
    DataType dtype;
    uint32_t instruction = kNoId; // the ViewGlobal (index into Program::instructions)
  };
  std::vector<View> views;
  /// False when some view's shape or strides depend on something other than parameters and
  /// constants, or a view has no shape; then the extent cannot be computed before launch.
  bool computable = true;
};

/// A wgmma matrix descriptor (PTX "matrix descriptor") of one instruction atom, relative to the
/// shared operand view: start = the byte address of the view's origin element + startDelta.
struct WgmmaDescriptor {
  int64_t startDelta = 0;
  int64_t lbo = 0, sbo = 0; // leading / stride dimension byte offsets
  int mode = 0;             // PTX encoding: 0 no swizzle, 1 128-byte, 2 64-byte, 3 32-byte swizzle
};

/// How one Wgmma instruction is issued (docs/isa.md, "wgmma"): the block's W = threads / 128
/// warpgroups form a wgM x wgN grid over the [M, N] accumulator; warpgroup (i, j) computes rows
/// [i * 64 * tilesM, (i + 1) * 64 * tilesM) and columns [j * n, (j + 1) * n) as tilesM atoms
/// m64 n k(atomK) per k step. Descriptors: a[(i * tilesM + r) * ksteps + s],
/// b[j * ksteps + s].
struct WgmmaPlan {
  int wgM = 1, wgN = 1;
  int64_t tilesM = 1, n = 8, atomK = 16, ksteps = 1;
  bool transB = false;    // B is N-major (its N index contiguous): imm-trans-b = 1
  bool registerA = false; // A is a register tensor in the wgmma A fragment layout (a is empty)
  std::vector<WgmmaDescriptor> a, b;
};

/// A tensor map that the runtime builds at launch for TmaLoad (docs/isa.md,
/// "Tensor-memory-accelerator loads"): the ViewGlobal whose shape and strides (expressions of
/// parameters and constants) describe the global tensor, its element type, the box that one
/// copy writes (per view dimension, outermost first) and the swizzle (0, 32, 64 or 128 bytes).
struct TensorMapSpec {
  uint32_t view = kNoId;    // the ViewGlobal instruction (index into Program::instructions)
  VarId pointer = kNoId;    // its pointer parameter
  DataType dtype;           // the view's element type (8, 16, 32 or 64 bits)
  std::vector<int64_t> box; // per tensor-map dimension, outermost first: extents in [1, 256]
  int swizzleBytes = 0;
  /// Per tensor-map dimension, outermost first: how many consecutive dimensions of the view it
  /// covers (1 unless a view of rank above 5 had dimensions merged: docs/isa.md, "Tensor-memory-
  /// accelerator loads"), and the factor its first view dimension's coordinate is scaled by (the
  /// product of the constant extents of the others, which the tile covers whole from 0).
  std::vector<uint32_t> groups;
  std::vector<int64_t> scales;
};

/// How one TmaLoad is issued: boxes of tensor map `tensorMap`, box `i` written at shared byte
/// distance `boxes[i].sharedDelta` from the destination view's origin and read at the
/// instruction's coordinates plus `innerShift` along the innermost dimension.
struct TmaPlan {
  uint32_t tensorMap = 0; // index into ProgramInfo::tensorMaps
  struct Box {
    int64_t sharedDelta = 0;
    int64_t innerShift = 0;
  };
  std::vector<Box> boxes;
  int64_t bytes = 0; // transaction bytes of the whole instruction
};

struct ProgramInfo {
  uint32_t threads = 0;      // threads per block
  std::vector<VarType> vars; // indexed by VarId
  /// The block's shared-memory footprint in bytes: every AllocateShared root (each at its
  /// VarType::sharedByteOffset, aligned to 128 bytes, 1024 for layouts with a swizzle, allocated
  /// in program order without reuse)
  /// followed by the scratch area.
  int64_t sharedBytes = 0;
  /// Scratch area that the JIT may use for cross-thread exchanges (generic Dot, ConvertLayout,
  /// Reduce): starts at scratchByteOffset (aligned to 128), scratchBytes long, where
  /// scratchBytes is the maximum over instructions of
  ///   Dot:           M*K*storageBytes(a) + K*N*storageBytes(b)
  ///   ConvertLayout: elements(a) * storageBytes(a)
  ///   Reduce:        elements(a) * 8
  /// each rounded up to 16 (storageBytes of a sub-byte type is 1). 0 when none occurs.
  int64_t scratchByteOffset = 0;
  int64_t scratchBytes = 0;
  /// Per thread group, in program order (docs/isa.md, "Thread groups"): its own part of the
  /// scratch area (offset from scratchByteOffset, bytes), since groups run at the same time. The
  /// parts of one parallel statement lie one after the other; scratchBytes covers them.
  std::vector<std::pair<int64_t, int64_t>> groupScratch;
  std::vector<PointerExtent> extents; // one per pointer parameter, in parameter order
  bool usesWorkspace = false;         // has AllocateGlobal
  /// Per Wgmma instruction (index into Program::instructions): its issue plan.
  std::map<uint32_t, WgmmaPlan> wgmma;
  /// The tensor maps of the program's TmaLoads (kernel parameters after the program's own and
  /// the workspace pointer, in this order) and each TmaLoad's plan, by instruction.
  std::vector<TensorMapSpec> tensorMaps;
  std::map<uint32_t, TmaPlan> tma;
};

struct VerifiedModule {
  Module module;
  std::vector<ProgramInfo> programs; // parallel to module.programs
};

} // namespace tilus
