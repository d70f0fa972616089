// Mbarriers and the async-proxy fence (docs/isa.md, "Hopper instructions"), run for the whole
// block. The block executes each instruction as one step, so an mbarrier is exact bookkeeping:
// MbarrierArrive is one block arrival (count is in block arrivals), transaction bytes are
// expected by MbarrierArrive(tx=) and completed by the asynchronous copies that name the
// barrier, and a phase completes when both its arrivals and its bytes are in. A wait returns
// when the phase of the given parity has completed; otherwise nothing else could ever complete
// it (every copy of the block has already landed), so the wait is reported as a deadlock. In a
// thread group the wait lets the other groups run first (group_scheduler.h): a deadlock is when
// none of them can make progress either.
//
// TmaLoad (exec_memory_tma.cpp) completes its bytes when issued and leaves its data with the
// barrier: it lands at the first wait that returns after its phase completed, as a write ordered
// before that wait (race detector: sharedAsyncLand), so an access before the wait races with
// the copy.
//
// Race detection: MbarrierInit writes the barrier's element (thread 0), arrivals and waits read
// it (the whole block), so a use of a barrier in the epoch of its initialisation is a race. The
// completion of a phase starts a new epoch, like Synchronize(): accesses before the arrivals
// are ordered before accesses after the wait (an access after the completion that skips the
// wait is not reported, a limit of the epoch model).
#include "vm/cpu/cluster_scheduler.h"
#include "vm/cpu/exec.h"
#include "vm/cpu/group_scheduler.h"

namespace tilus::cpu {

namespace {

constexpr int64_t kMaxPending = (int64_t(1) << 20) - 1;

} // namespace

/// The byte address and root element of a one-element mbarrier view (traps when outside).
Status Exec::barrierAddress(BlockState &b, uint32_t index, ArgName which, int64_t &address,
                            int64_t &element) {
  const Instruction &inst = b.program.instructions[index];
  TILUSVM_TRY(b.requireShared(index, inst.arg(which).var));
  const SharedView &view = b.shareds[inst.arg(which).var];
  std::vector<OffsetValue> whole(view.shape.size(), OffsetValue{0, true});
  Expected<TileAccess> tile = sharedTile(view, whole, view.shape);
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  if (tile->elements() != 1 || !tile->allValid())
    return b.fail(ErrorCode::OutOfBounds, index,
                  "the mbarrier element lies outside its shared tensor");
  std::vector<int64_t> zero(view.shape.size(), 0);
  element = tile->elementOffset(zero.data());
  address = view.byteOffset + element * 8;
  return Status::success();
}

namespace {

std::string describe(int64_t address) {
  return "the mbarrier at shared byte " + std::to_string(address);
}

Status liveBarrier(BlockState &b, uint32_t index, int64_t address, MbarrierState *&state) {
  auto it = b.mbarriers.find(address);
  if (it == b.mbarriers.end())
    return b.fail(ErrorCode::Runtime, index,
                  describe(address) + " is used before MbarrierInit initialised it" +
                      (b.cluster ? " (a barrier that other blocks of the cluster use is "
                                   "initialised, then ClusterSync(), before their first use)"
                                 : ""));
  state = &it->second;
  return Status::success();
}

/// Complete the phase when nothing is pending (its TmaLoad data then waits for a wait). For
/// the race detector a completion is a barrier of the block: every warp arrived, so what the
/// block did before it is ordered before what any thread does after a wait that observes it.
void maybeComplete(BlockState &b, MbarrierState &m) {
  if (m.pending == 0 && m.tx == 0) {
    for (AsyncCopy &copy : m.inFlight)
      m.completed.push_back(std::move(copy));
    m.inFlight.clear();
    ++m.phase;
    m.pending = m.count;
    if (b.race)
      b.race->synchronize();
  }
}

} // namespace

Status Exec::useBarrier(BlockState &b, uint32_t index, ArgName which, int64_t &address,
                        MbarrierState *&state) {
  int64_t element = 0;
  TILUSVM_TRY(barrierAddress(b, index, which, address, element));
  if (b.race)
    b.race->sharedRead(b.shareds[b.program.instructions[index].arg(which).var].root, element, -1);
  return liveBarrier(b, index, address, state);
}

Status Exec::visitMbarrierInit(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  int64_t address = 0, element = 0;
  TILUSVM_TRY(barrierAddress(b, index, ArgName::s, address, element));
  MbarrierState m;
  m.count = inst.arg(ArgName::count).intValue;
  m.pending = m.count;
  m.initInstruction = index;
  b.mbarriers[address] = m;
  if (b.race)
    b.race->sharedWrite(b.shareds[inst.arg(ArgName::s).var].root, element, 0);
  return Status::success();
}

Status Exec::arriveAt(BlockState &target, const BlockState &b, uint32_t index, int64_t address,
                      int64_t tx) {
  MbarrierState *m = nullptr;
  if (&target != &b) {
    auto it = target.mbarriers.find(address);
    if (it == target.mbarriers.end())
      return b.fail(ErrorCode::Runtime, index,
                    "arrival at " + describe(address) + " of " + target.blockText() +
                        ", which MbarrierInit has not initialised there (initialise it, then "
                        "ClusterSync(), before other blocks use it)");
    m = &it->second;
  } else {
    TILUSVM_TRY(liveBarrier(target, index, address, m));
  }
  m->tx += tx;
  m->pending -= 1;
  maybeComplete(target, *m);
  return Status::success();
}

Status Exec::visitMbarrierArrive(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  int64_t address = 0;
  MbarrierState *m = nullptr;
  TILUSVM_TRY(useBarrier(b, index, ArgName::s, address, m));
  int64_t tx = 0;
  if (inst.arg(ArgName::tx).present) {
    tx = b.evalInt(inst.arg(ArgName::tx).expr);
    if (tx < 0 || tx > kMaxPending)
      return b.fail(ErrorCode::Runtime, index,
                    "MbarrierArrive tx=" + std::to_string(tx) + " outside [0, " +
                        std::to_string(kMaxPending) + "] transaction bytes");
  }
  return arriveAt(b, b, index, address, tx);
}

Status Exec::completeTransaction(BlockState &b, uint32_t index, int64_t address, int64_t bytes) {
  MbarrierState *m = nullptr;
  TILUSVM_TRY(liveBarrier(b, index, address, m));
  m->tx -= bytes;
  maybeComplete(b, *m);
  return Status::success();
}

Status Exec::visitMbarrierWait(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  int64_t address = 0;
  MbarrierState *m = nullptr;
  TILUSVM_TRY(useBarrier(b, index, ArgName::s, address, m));
  uint64_t parity = uint64_t(b.evalInt(inst.arg(ArgName::parity).expr)) & 1;
  // The phase in progress has parity phase % 2; the phase of the other parity (the previous
  // one, or the one before the first) has completed. In a thread group, the other groups run
  // until it has (group_scheduler.h).
  GroupScheduler::Wake wake = GroupScheduler::Wake::Deadlock;
  if (m->phase % 2 == parity && b.groups)
    wake = b.groups->wait([m, parity] { return m->phase % 2 != parity; });
  else if (m->phase % 2 == parity && b.cluster && b.cluster->wait(b.clusterRank, [m, parity] {
             return m->phase % 2 != parity;
           }) == ClusterScheduler::Wake::Aborted)
    wake = GroupScheduler::Wake::Aborted; // in a cluster, the other blocks run first
  if (wake == GroupScheduler::Wake::Aborted)
    return Status::error(ErrorCode::Runtime, "abandoned: another thread group or block failed");
  if (m->phase % 2 == parity)
    return b.fail(ErrorCode::Runtime, index,
                  "MbarrierWait(parity=" + std::to_string(parity) + ") never returns: phase " +
                      std::to_string(m->phase) + " of " + describe(address) + " still lacks " +
                      std::to_string(m->pending) + " of " + std::to_string(m->count) +
                      " arrivals and " + std::to_string(m->tx) +
                      " transaction bytes, and nothing else can arrive (deadlock)");
  for (const AsyncCopy &copy : m->completed)
    Exec::landCopy(b, copy, /*atBarrier=*/true);
  m->completed.clear();
  return Status::success();
}

Status Exec::visitFenceProxyAsync(BlockState &, uint32_t) {
  // Orders the block's generic-proxy shared accesses before its later async-proxy ones; the
  // interpreter performs every access in program order already.
  return Status::success();
}

} // namespace tilus::cpu
