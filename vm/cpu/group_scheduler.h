// The thread groups of a parallel statement (docs/isa.md, "Thread groups: warp
// specialisation") as cooperative tasks: each group's body runs on a host thread of its own,
// but only one runs at a time, and control passes only where a group cannot go on (an
// MbarrierWait whose phase has not completed) or ends. The order is fixed (the next group after
// the blocked one that can make progress), so a run is deterministic. Each group keeps its own
// CopyAsync, Wgmma and TmaStore queues: the scheduler swaps them in and out of the BlockState
// with the group that runs. The copies of a group clause (copies=C) are groups of their own that
// run the same body: the variables the body defines, the copy index among them, are per copy,
// and the scheduler swaps them in and out with the copy that runs.
#pragma once

#include "vm/cpu/block_state.h"

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace tilus::cpu {

/// The values of the variables that a group clause's body defines, for one of its copies (the
/// per-VarId state of BlockState for those variables).
struct GroupLocals {
  std::vector<VarId> vars;
  std::vector<uint64_t> scalars;
  std::vector<std::vector<uint64_t>> regs;
  std::vector<GlobalView> globals;
  std::vector<SharedView> shareds;
  std::vector<uint32_t> wgmmaPending, wgmmaLast, wgmmaReading, wgmmaReader;
};

/// The asynchronous work that one set of threads has issued and not yet waited for.
struct AsyncQueues {
  std::vector<AsyncCopy> uncommitted;
  std::deque<std::vector<AsyncCopy>> committed;
  std::vector<PendingWgmma> wgmmaUncommitted;
  std::deque<std::vector<PendingWgmma>> wgmmaCommitted;
  std::vector<PendingTmaStore> tmaStoreUncommitted;
  std::deque<std::vector<PendingTmaStore>> tmaStoreCommitted;
};

class GroupScheduler {
public:
  /// How a group's wait ended: the phase it waits for has completed, nothing can complete it
  /// any more, or another group failed and the statement is being abandoned.
  enum class Wake { Resumed, Deadlock, Aborted };

  GroupScheduler(BlockState &b, const Stmt &parallel);
  ~GroupScheduler();

  /// Run every group to its end (or to the first error, which is returned).
  Status run();
  /// Called by the running group when `ready` is false: let the others run until it is true.
  Wake wait(std::function<bool()> ready);

private:
  struct Task {
    const Stmt *stmt = nullptr;
    int32_t firstThread = 0; // in the block
    GroupLocals locals;      // the variables of its own (none for a clause without copies or index)
    std::thread thread;
    std::function<bool()> ready; // while blocked
    bool started = false, done = false, deadlock = false;
    AsyncQueues queues;
  };
  void body(size_t index);
  /// The group to run after `from` (which blocks or ends), npos when none can make progress.
  size_t next(size_t from) const;
  /// Hand control to `to` (npos: back to the block), under the lock.
  void switchTo(size_t to);
  void abort(Status status);
  /// Whether some unfinished group can go on (in a cluster, the other blocks run until one can).
  bool anyReady() const;
  bool allDone() const;
  Status finishGroup(size_t index);

  BlockState &b_;
  std::vector<Task> tasks_;
  AsyncQueues blockQueues_;
  std::mutex mutex_;
  std::condition_variable cv_;
  static constexpr size_t kBlock = size_t(-1);
  size_t running_ = kBlock;
  bool aborting_ = false;
  Status error_;
};

} // namespace tilus::cpu
