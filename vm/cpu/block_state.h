// The state of one thread block while it runs: block-uniform scalars, register tensors as
// per-thread local slots, runtime views of global and shared tensors, the block's shared memory,
// its in-flight CopyAsync groups, and (checked mode) its race detector.
//
// Register tensor v with layout L holds T * N_L slots; slot t * N_L + i is the bit pattern of
// L(t, i) as held by thread t (canonical: the value's low bits, higher bits zero). Replicated
// elements therefore exist once per owner, exactly as on the GPU, and View reinterprets a
// thread's own slots.
#pragma once

#include "isa/scalar_eval.h"
#include "vm/cpu/launch_plan.h"
#include "vm/cpu/memory.h"
#include "vm/cpu/race_detector.h"

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace tilus::cpu {

/// One CopyAsync instruction's data, read from global memory when issued and written into
/// shared memory when a wait covers it.
struct AsyncCopy {
  uint32_t instruction = kNoId;
  VarId root = kNoId; // destination shared root
  int storageBits = 8;
  std::vector<int64_t> bitAddrs; // in the block's shared memory
  std::vector<int64_t> elements; // element offsets within the root (race detection)
  std::vector<uint64_t> values;
};

/// An mbarrier's state (docs/isa.md, "Mbarriers"), kept beside the shared memory it lives in.
/// `count` is in block arrivals (MbarrierArrive executions); `phase` counts completed phases,
/// so the phase in progress has parity phase % 2.
struct MbarrierState {
  int64_t count = 0;
  int64_t pending = 0; // arrivals still missing in the phase in progress
  int64_t tx = 0;      // transaction bytes still expected (negative: arrived before expected)
  uint64_t phase = 0;
  uint32_t initInstruction = kNoId;
  /// TmaLoad data of the phase in progress, and of completed phases that no wait has observed
  /// yet: it lands at the first MbarrierWait that returns after its phase completed.
  std::vector<AsyncCopy> inFlight, completed;
};

/// One issued Wgmma: its accumulator, its A operand when that is a register tensor, and the
/// shared elements it reads until its wait.
struct PendingWgmma {
  VarId accumulator = kNoId;
  uint32_t instruction = kNoId;
  VarId registerA = kNoId;
  std::vector<std::pair<VarId, int64_t>> operands; // (shared root, element)
};

/// One TmaStore: the values it read from shared memory when issued, written to global memory
/// at the TmaStoreWaitGroup that covers its group (elements outside the view left out).
struct PendingTmaStore {
  uint32_t instruction = kNoId;
  VarId sharedRoot = kNoId;
  std::vector<int64_t> sharedElements;    // read by the copy until the wait
  GlobalView global;                      // the destination view
  std::vector<int64_t> bitAddrs, offsets; // per written element: bit in global.base, element
  std::vector<uint64_t> values;
};

enum class Flow : uint8_t { Normal, Break, Continue, Exit };

class GroupScheduler;
class ClusterScheduler;

class BlockState {
public:
  explicit BlockState(const LaunchPlan &plan);

  /// Prepare for block `linear` (x fastest): parameters bound, everything else cleared.
  void reset(int64_t linear);

  const LaunchPlan &plan;
  const Program &program;
  const ProgramInfo &info;

  int64_t linear = 0;
  int64_t index[3] = {0, 0, 0};

  std::vector<uint64_t> scalars;                // per VarId: Scalar and Pointer variables
  std::vector<std::vector<uint64_t>> regs;      // per VarId: register tensors (slots)
  std::vector<GlobalView> globals;              // per VarId: global tensors
  std::vector<SharedView> shareds;              // per VarId: shared tensors
  std::vector<uint8_t> shared;                  // the block's shared memory
  std::vector<AsyncCopy> uncommitted;           // issued since the last commit
  std::deque<std::vector<AsyncCopy>> committed; // oldest first
  std::map<int64_t, MbarrierState> mbarriers;   // by byte address in shared memory
  /// Per VarId: Wgmma still accumulating into it (reads of it are errors) and the last one.
  std::vector<uint32_t> wgmmaPending, wgmmaLast;
  /// Per VarId: Wgmma still reading it as their register A operand (only further Wgmma may
  /// read it, nothing may write it) and the last one; and how many such reads are pending.
  std::vector<uint32_t> wgmmaReading, wgmmaReader;
  uint32_t wgmmaRegisterReads = 0;
  std::vector<PendingWgmma> wgmmaUncommitted;                 // issued since the last commit
  std::deque<std::vector<PendingWgmma>> wgmmaCommitted;       // oldest first
  std::vector<PendingTmaStore> tmaStoreUncommitted;           // issued since the last commit
  std::deque<std::vector<PendingTmaStore>> tmaStoreCommitted; // oldest first
  std::unique_ptr<BlockRaceDetector> race;                    // checked mode only
  /// While a parallel statement runs: its scheduler (an MbarrierWait lets another thread group
  /// run; docs/isa.md, "Thread groups").
  GroupScheduler *groups = nullptr;
  /// In a program with cluster= above 1: the scheduler of the block's cluster and the block's
  /// rank in it (docs/isa.md, "Thread-block clusters and TMA multicast"); a block of a launch
  /// without clusters has none and rank 0.
  ClusterScheduler *cluster = nullptr;
  int32_t clusterRank = 0;
  std::vector<uint64_t> scratch[3]; // operand staging for elementwise instructions

  /// Evaluate a scalar expression in this block.
  uint64_t eval(ExprId id) const { return evaluateExpr(program, id, varValue_); }
  /// Evaluate an expression as an integer (floats truncate toward zero).
  int64_t evalInt(ExprId id) const;
  /// Offsets of a load/store/copy for a memory tensor of rank `rank` (absent: all `0:`).
  std::vector<OffsetValue> offsets(const Argument &arg, size_t rank) const;

  /// A register result buffer of n slots (reuses the capacity of a dropped tensor).
  std::vector<uint64_t> takeBuffer(size_t n);
  /// Install `slots` as the value of register variable v.
  void setRegister(VarId v, std::vector<uint64_t> &&slots);

  /// An error unless register variable v holds a value (the checker makes this hold for
  /// every well-formed program; bytecode could still break it).
  Status requireRegister(uint32_t instruction, VarId v) const;
  /// An error when instruction `index` reads or writes a register tensor that a Wgmma still
  /// reads as its A operand (docs/isa.md, "wgmma", Ordering); a further Wgmma may read it as A.
  Status checkWgmmaRegisterA(uint32_t index) const;
  /// An error unless shared view v has been created.
  Status requireShared(uint32_t instruction, VarId v) const;

  /// "block (1, 0, 0)".
  std::string blockText() const;
  /// An error at an instruction: "block (..): message" located at the instruction.
  Status fail(ErrorCode code, uint32_t instruction, const std::string &message) const;

private:
  std::vector<uint64_t> spare_;
  VarValueFn varValue_;
};

} // namespace tilus::cpu
