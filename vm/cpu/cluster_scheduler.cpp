// Cooperative tasks for the blocks of a thread-block cluster (cluster_scheduler.h).
#include "vm/cpu/cluster_scheduler.h"

#include "vm/cpu/block_state.h"
#include "vm/cpu/cooperative_tasks.h"

#include <cassert>

namespace tilus::cpu {

ClusterScheduler::ClusterScheduler(std::vector<BlockState *> blocks) {
  tasks_.resize(blocks.size());
  for (size_t r = 0; r < blocks.size(); ++r) {
    tasks_[r].block = blocks[r];
    blocks[r]->cluster = this;
    assert(blocks[r]->clusterRank == int32_t(r) && "blocks come in rank order");
  }
}

ClusterScheduler::~ClusterScheduler() {
  for (Task &t : tasks_) {
    if (t.thread.joinable())
      t.thread.join();
    t.block->cluster = nullptr;
  }
}

size_t ClusterScheduler::next(size_t from) const { return nextRunnable(tasks_, from, kNone); }

void ClusterScheduler::switchTo(size_t to) {
  running_ = to;
  if (to != kNone)
    tasks_[to].started = true;
  cv_.notify_all();
}

void ClusterScheduler::body(size_t index, const std::function<Status(BlockState &)> &runBlock) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return running_ == index || aborting_; });
  Status status;
  if (!aborting_) {
    lock.unlock(); // only this block runs until it waits or ends
    status = runBlock(*tasks_[index].block);
    lock.lock();
  }
  Task &task = tasks_[index];
  task.done = true;
  task.ready = nullptr;
  if (!status.ok() && !task.abandoned) {
    task.status = std::move(status);
    aborting_ = true; // the other blocks are abandoned: their waits return Aborted
  }
  if (aborting_) {
    if (running_ == index)
      running_ = kNone;
    cv_.notify_all();
    return;
  }
  size_t to = next(index);
  switchTo(to != kNone ? to : deadlockedTask(tasks_, kNone));
}

ClusterScheduler::Wake ClusterScheduler::waitLocked(std::unique_lock<std::mutex> &lock, size_t self,
                                                    std::function<bool()> ready) {
  Task &task = tasks_[self];
  if (ready())
    return Wake::Resumed;
  task.ready = std::move(ready);
  size_t to = next(self);
  if (to == kNone) {
    task.ready = nullptr;
    return Wake::Deadlock;
  }
  switchTo(to);
  cv_.wait(lock, [&] { return running_ == self || aborting_; });
  task.ready = nullptr;
  if (aborting_) {
    task.abandoned = true;
    return Wake::Aborted;
  }
  if (task.deadlock) {
    task.deadlock = false;
    return Wake::Deadlock;
  }
  return Wake::Resumed;
}

ClusterScheduler::Wake ClusterScheduler::wait(int32_t rank, std::function<bool()> ready) {
  std::unique_lock<std::mutex> lock(mutex_);
  return waitLocked(lock, size_t(rank), std::move(ready));
}

ClusterScheduler::Wake ClusterScheduler::sync(int32_t rank) {
  std::unique_lock<std::mutex> lock(mutex_);
  uint64_t generation = syncGeneration_;
  if (++syncArrived_ == tasks_.size()) {
    syncArrived_ = 0;
    ++syncGeneration_;
    return Wake::Resumed;
  }
  tasks_[size_t(rank)].inSync = true;
  Wake wake =
      waitLocked(lock, size_t(rank), [this, generation] { return syncGeneration_ != generation; });
  tasks_[size_t(rank)].inSync = false;
  return wake;
}

std::string ClusterScheduler::syncBlockers() const {
  std::string ended, elsewhere;
  for (const Task &t : tasks_) {
    if (t.done)
      ended += (ended.empty() ? "" : ", ") + t.block->blockText();
    else if (!t.inSync)
      elsewhere += (elsewhere.empty() ? "" : ", ") + t.block->blockText();
  }
  std::string out;
  if (!ended.empty())
    out += ended + " ended";
  if (!elsewhere.empty())
    out += (out.empty() ? "" : "; ") + elsewhere + " wait elsewhere";
  return out;
}

std::vector<Status> ClusterScheduler::run(const std::function<Status(BlockState &)> &runBlock) {
  for (size_t i = 0; i < tasks_.size(); ++i)
    tasks_[i].thread = std::thread([this, i, &runBlock] { body(i, runBlock); });
  {
    std::unique_lock<std::mutex> lock(mutex_);
    switchTo(0);
    cv_.wait(lock, [&] { return allEnded(tasks_); });
  }
  std::vector<Status> statuses;
  for (Task &t : tasks_) {
    t.thread.join();
    statuses.push_back(std::move(t.status));
  }
  return statuses;
}

} // namespace tilus::cpu
