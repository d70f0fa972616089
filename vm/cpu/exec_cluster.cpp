// Thread-block clusters (docs/isa.md, "Thread-block clusters and TMA multicast"), run for the
// whole block. The blocks of a cluster are cooperative tasks of one ClusterScheduler
// (cluster_scheduler.h): ClusterSync() lets the other blocks run until all have reached it, and
// an arrival at another block's mbarrier is bookkeeping in that block's state (the scheduler runs
// one block at a time, so it is exact). TmaLoadMulticast is in exec_memory_tma.cpp.
#include "isa/convert.h"
#include "vm/cpu/cluster_scheduler.h"
#include "vm/cpu/exec.h"

namespace tilus::cpu {

Expected<BlockState *> Exec::clusterTarget(BlockState &b, uint32_t index, int64_t rank,
                                           const char *what) {
  const int64_t c = int64_t(b.program.cluster);
  if (rank < 0 || rank >= c)
    return b.fail(ErrorCode::Runtime, index,
                  std::string(what) + " names rank " + std::to_string(rank) +
                      ", outside the cluster's ranks [0, " + std::to_string(c - 1) + "]");
  if (rank == b.clusterRank || !b.cluster)
    return &b;
  if (b.cluster->ended(int32_t(rank)))
    return b.fail(ErrorCode::Runtime, index,
                  std::string(what) + " delivers into " +
                      b.cluster->block(int32_t(rank)).blockText() +
                      ", which has ended (a block that other blocks of its cluster deliver into "
                      "ends with a ClusterSync() after their last delivery)");
  return &b.cluster->block(int32_t(rank));
}

Status Exec::visitClusterRank(BlockState &b, uint32_t index) {
  VarId r = b.program.instructions[index].results[0];
  b.scalars[r] = fromInt64(b.clusterRank, b.program.var(r).dtype);
  return Status::success();
}

Status Exec::visitClusterSync(BlockState &b, uint32_t index) {
  if (b.cluster) {
    ClusterScheduler::Wake wake = b.cluster->sync(b.clusterRank);
    if (wake == ClusterScheduler::Wake::Aborted)
      return Status::error(ErrorCode::Runtime, "abandoned: another block of the cluster failed");
    if (wake == ClusterScheduler::Wake::Deadlock)
      return b.fail(ErrorCode::Runtime, index,
                    "ClusterSync() never returns: " + b.cluster->syncBlockers() + " (deadlock)");
  }
  if (b.race) // a barrier of the block's threads too
    b.race->synchronize();
  return Status::success();
}

Status Exec::visitMbarrierArriveCluster(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  int64_t address = 0, element = 0;
  TILUSVM_TRY(barrierAddress(b, index, ArgName::s, address, element));
  int64_t rank = b.evalInt(inst.arg(ArgName::rank).expr);
  Expected<BlockState *> target = clusterTarget(b, index, rank, "MbarrierArriveCluster");
  if (!target)
    return target.takeStatus();
  if (*target == &b && b.race) // the block's own barrier: read as MbarrierArrive reads it
    b.race->sharedRead(b.shareds[inst.arg(ArgName::s).var].root, element, -1);
  return arriveAt(**target, b, index, address, 0);
}

} // namespace tilus::cpu
