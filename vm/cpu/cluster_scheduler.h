// The blocks of one thread-block cluster (docs/isa.md, "Thread-block clusters and TMA
// multicast") as cooperative tasks: each block runs on a host thread of its own, but only one
// runs at a time, and control passes only where a block cannot go on (an MbarrierWait whose
// phase has not completed, a ClusterSync() that not every block has reached, a thread-group
// scheduler none of whose groups can go on) or ends. The order is fixed (the next block after the
// blocked one that can make progress), so a run is deterministic. A wait may come from any host
// thread that acts for the running block (its own, or one of its thread groups': the group
// scheduler asks the cluster to run other blocks when none of its groups can go on).
#pragma once

#include "isa/status.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tilus::cpu {

class BlockState;

class ClusterScheduler {
public:
  /// How a block's wait ended: what it waits for has happened, nothing can make it happen any
  /// more, or another block failed and the cluster is being abandoned.
  enum class Wake { Resumed, Deadlock, Aborted };

  /// `blocks[r]` is the block of rank r (its clusterRank, set by BlockState::reset); each gets
  /// this scheduler.
  explicit ClusterScheduler(std::vector<BlockState *> blocks);
  ~ClusterScheduler();

  /// Run every block with `runBlock` to its end; one status per rank. After a failure the other
  /// blocks are abandoned (their statuses are success: the failure is the report).
  std::vector<Status> run(const std::function<Status(BlockState &)> &runBlock);
  /// Called for the running block of rank `rank` when `ready` is false: let the other blocks run
  /// until it is true.
  Wake wait(int32_t rank, std::function<bool()> ready);
  /// ClusterSync() of the block of rank `rank`: returns when every block has reached it.
  Wake sync(int32_t rank);
  /// The block of rank `rank`, and whether it has ended.
  BlockState &block(int32_t rank) const { return *tasks_[size_t(rank)].block; }
  bool ended(int32_t rank) const { return tasks_[size_t(rank)].done; }
  /// For a deadlock report of ClusterSync(): which blocks have ended or wait elsewhere.
  std::string syncBlockers() const;

private:
  struct Task {
    BlockState *block = nullptr;
    std::thread thread;
    std::function<bool()> ready; // while blocked
    bool started = false, done = false, deadlock = false, abandoned = false, inSync = false;
    Status status;
  };
  void body(size_t index, const std::function<Status(BlockState &)> &runBlock);
  /// The block to run after `from` (which blocks or ends), npos when none can make progress.
  size_t next(size_t from) const;
  void switchTo(size_t to);
  Wake waitLocked(std::unique_lock<std::mutex> &lock, size_t self, std::function<bool()> ready);

  std::vector<Task> tasks_;
  std::mutex mutex_;
  std::condition_variable cv_;
  static constexpr size_t kNone = size_t(-1);
  size_t running_ = kNone;
  bool aborting_ = false;
  /// ClusterSync(): blocks arrived in the sync in progress, and syncs completed.
  size_t syncArrived_ = 0;
  uint64_t syncGeneration_ = 0;
};

} // namespace tilus::cpu
