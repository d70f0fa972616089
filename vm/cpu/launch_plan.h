// What one launch of a program needs before any block runs, computed once and then only read
// by the workers that run blocks in parallel: the grid, the parameter values, a table per
// register layout (slot -> logical element, element -> owners), for every elementwise
// instruction the slot of each operand that feeds each result slot, and the global workspace
// of AllocateGlobal.
#pragma once

#include "loader/verified_module.h"
#include "vm/cpu/interpreter.h"
#include "vm/kernel_args.h"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace tilus::cpu {

class CrossBlockRaces;

/// A register layout tabulated: slot s = t * locals + i holds logical element slotLinear[s]
/// (row-major over shape); ownerSlots[ownerStart[e] .. ownerStart[e + 1]) are the slots that
/// hold element e, in increasing (t, i) order.
struct LayoutTable {
  int64_t threads = 1;
  int64_t locals = 1;
  int64_t elements = 1;
  std::vector<int64_t> shape;
  std::vector<int32_t> slotLinear;
  std::vector<int32_t> ownerStart;
  std::vector<int32_t> ownerSlots;

  int64_t numSlots() const { return threads * locals; }
  int32_t firstOwner(int64_t e) const { return ownerSlots[size_t(ownerStart[size_t(e)])]; }
  /// A slot of thread t holding element e; the first owner when t holds none.
  int32_t ownerOnThread(int64_t e, int64_t t) const;
};

LayoutTable buildLayoutTable(const RegisterLayout &layout);

/// How the value of one operand of an elementwise instruction reaches each result slot.
struct OperandMap {
  enum class Kind : uint8_t { Scalar, Identity, Gather };
  Kind kind = Kind::Scalar;
  /// Gather: result slot -> operand slot (an owner of the broadcast element, on the same
  /// thread where that thread holds one).
  std::vector<int32_t> slot;
};

/// The region of the launch workspace that one AllocateGlobal instruction returns.
struct WorkspaceRegion {
  uint32_t instruction = kNoId;
  int64_t byteOffset = 0;
  int64_t bytes = 0;
  bool requiresClean = false;
};

struct LaunchPlan {
  const Module *module = nullptr;
  const Program *program = nullptr;
  const ProgramInfo *info = nullptr;
  const KernelArgs *args = nullptr;
  bool checked = true;
  uint64_t maxMemoryBytes = 0; // workspace limit; 0: the host's available memory
  std::ostream *printStream = nullptr;
  mutable std::mutex printMutex;
  /// Held by a block for the whole of one atomic instruction on global memory, so that the
  /// read-modify-writes of blocks running in parallel do not interleave.
  mutable std::mutex atomicMutex;
  CrossBlockRaces *crossBlockRaces = nullptr;

  int64_t grid[3] = {1, 1, 1};
  int64_t numBlocks() const { return grid[0] * grid[1] * grid[2]; }
  /// Parameter VarId -> index into args (kNoId for variables that are not parameters).
  std::vector<uint32_t> paramIndex;

  std::vector<std::unique_ptr<LayoutTable>> tables;
  std::vector<RegisterLayout> tableLayouts;   // parallel to tables
  std::vector<const LayoutTable *> varTables; // per VarId; null for non-register variables
  /// Per instruction: one entry per Value argument of elementwise instructions (Arithmetic,
  /// Bitwise, Comparison, Unary, Math, Where, Cast, ConvertLayout), in argument order.
  std::vector<std::vector<OperandMap>> operandMaps;

  std::vector<WorkspaceRegion> workspaceRegions;
  std::vector<int32_t> workspaceRegionOf; // per instruction; -1 if not AllocateGlobal
  std::unique_ptr<uint8_t[]> workspace;
  int64_t workspaceBytes = 0;

  /// Value of a parameter (scalar bits, or the pointer's address).
  uint64_t paramValue(VarId v) const;
  /// "StoreShared at 12:5", or "StoreShared (instruction 7)" without source locations.
  std::string describe(uint32_t instruction) const;
  /// The diagnostic location of an instruction.
  Location location(uint32_t instruction) const;
};

/// Validate the arguments, evaluate the grid, tabulate layouts, plan operands and the
/// workspace.
Status buildLaunchPlan(LaunchPlan &plan, const VerifiedModule &module, size_t programIndex,
                       const KernelArgs &args, const CpuRunOptions &options);

} // namespace tilus::cpu
