// Cooperative tasks for the thread groups of a parallel statement (group_scheduler.h).
#include "vm/cpu/group_scheduler.h"

#include "vm/cpu/cluster_scheduler.h"
#include "vm/cpu/cooperative_tasks.h"
#include "vm/cpu/exec.h"

#include <algorithm>

namespace tilus::cpu {

namespace {

void swapQueues(BlockState &b, AsyncQueues &q) {
  std::swap(b.uncommitted, q.uncommitted);
  std::swap(b.committed, q.committed);
  std::swap(b.wgmmaUncommitted, q.wgmmaUncommitted);
  std::swap(b.wgmmaCommitted, q.wgmmaCommitted);
  std::swap(b.tmaStoreUncommitted, q.tmaStoreUncommitted);
  std::swap(b.tmaStoreCommitted, q.tmaStoreCommitted);
}

/// The variables that statements define (instruction results, assignment targets, loop
/// variables), appended to `out`.
void definedVars(const Program &p, const std::vector<Stmt> &body, std::vector<VarId> &out) {
  for (const Stmt &s : body) {
    if (s.kind == StmtKind::Instruction && s.index < p.instructions.size())
      for (VarId r : p.instructions[s.index].results)
        out.push_back(r);
    if ((s.kind == StmtKind::Assign || s.kind == StmtKind::Specialize || s.kind == StmtKind::For) &&
        s.var != kNoId)
      out.push_back(s.var);
    definedVars(p, s.body, out);
    definedVars(p, s.orelse, out);
  }
}

/// Exchange the per-VarId state of `l.vars` between the block and `l`.
void swapLocals(BlockState &b, GroupLocals &l) {
  for (size_t i = 0; i < l.vars.size(); ++i) {
    VarId v = l.vars[i];
    std::swap(b.scalars[v], l.scalars[i]);
    std::swap(b.regs[v], l.regs[i]);
    std::swap(b.globals[v], l.globals[i]);
    std::swap(b.shareds[v], l.shareds[i]);
    std::swap(b.wgmmaPending[v], l.wgmmaPending[i]);
    std::swap(b.wgmmaLast[v], l.wgmmaLast[i]);
    std::swap(b.wgmmaReading[v], l.wgmmaReading[i]);
    std::swap(b.wgmmaReader[v], l.wgmmaReader[i]);
  }
}

} // namespace

GroupScheduler::GroupScheduler(BlockState &b, const Stmt &parallel) : b_(b) {
  int32_t first = 0;
  for (const Stmt &g : parallel.body) {
    // the variables of each copy: those the body defines where there are several copies, and
    // the copy index
    std::vector<VarId> vars;
    if (g.copies > 1)
      definedVars(b.program, g.body, vars);
    if (g.var != kNoId)
      vars.push_back(g.var);
    std::sort(vars.begin(), vars.end());
    vars.erase(std::unique(vars.begin(), vars.end()), vars.end());
    for (uint32_t c = 0; c < std::max<uint32_t>(g.copies, 1); ++c) {
      Task t;
      t.stmt = &g;
      t.firstThread = first;
      first += int32_t(g.threads);
      // each copy starts from the block's state of those variables (none is defined yet: the
      // checker), its own index set
      GroupLocals &l = t.locals;
      l.vars = vars;
      for (VarId v : vars) {
        l.scalars.push_back(v == g.var ? uint64_t(c) : b.scalars[v]);
        l.regs.push_back(b.regs[v]);
        l.globals.push_back(b.globals[v]);
        l.shareds.push_back(b.shareds[v]);
        l.wgmmaPending.push_back(b.wgmmaPending[v]);
        l.wgmmaLast.push_back(b.wgmmaLast[v]);
        l.wgmmaReading.push_back(b.wgmmaReading[v]);
        l.wgmmaReader.push_back(b.wgmmaReader[v]);
      }
      tasks_.push_back(std::move(t));
    }
  }
}

GroupScheduler::~GroupScheduler() {
  for (Task &t : tasks_)
    if (t.thread.joinable())
      t.thread.join();
}

size_t GroupScheduler::next(size_t from) const { return nextRunnable(tasks_, from, kBlock); }

void GroupScheduler::switchTo(size_t to) {
  if (running_ != kBlock) {
    swapQueues(b_, tasks_[running_].queues);
    swapLocals(b_, tasks_[running_].locals);
  }
  running_ = to;
  if (to != kBlock) {
    swapQueues(b_, tasks_[to].queues);
    swapLocals(b_, tasks_[to].locals);
    tasks_[to].started = true;
  }
  if (b_.race)
    b_.race->enterGroup(to == kBlock ? -1 : int32_t(to), to == kBlock ? 0 : tasks_[to].firstThread);
  cv_.notify_all();
}

void GroupScheduler::abort(Status status) {
  if (!aborting_)
    error_ = std::move(status);
  aborting_ = true;
  cv_.notify_all();
}

Status GroupScheduler::finishGroup(size_t index) {
  Location loc = statementLocation(b_, *tasks_[index].stmt);
  std::string where = b_.blockText() + ", thread group " + std::to_string(index) + ": ";
  if (!b_.wgmmaUncommitted.empty() || !b_.wgmmaCommitted.empty())
    return Status::error(ErrorCode::Runtime,
                         where + "the group ends while a Wgmma it issued is still in flight: "
                                 "commit it and wait for it (WgmmaWaitGroup(0)) before the end",
                         loc);
  if (!b_.tmaStoreUncommitted.empty() || !b_.tmaStoreCommitted.empty())
    return Status::error(ErrorCode::Runtime,
                         where + "the group ends while a TmaStore it issued may still read its "
                                 "shared source: commit it and wait for it (TmaStoreWaitGroup(0)) "
                                 "before the end",
                         loc);
  return Status::success();
}

void GroupScheduler::body(size_t index) {
  std::unique_lock<std::mutex> lock(mutex_);
  cv_.wait(lock, [&] { return running_ == index || aborting_; });
  Status status;
  if (!aborting_) {
    lock.unlock(); // only this group runs until it waits or ends
    Flow flow = Flow::Normal;
    status = execBody(b_, tasks_[index].stmt->body, flow);
    if (status.ok())
      status = finishGroup(index);
    lock.lock();
  }
  tasks_[index].done = true;
  if (!status.ok()) {
    abort(std::move(status));
  }
  if (aborting_) {
    if (running_ == index)
      switchTo(kBlock);
    cv_.notify_all();
    return;
  }
  size_t to = next(index);
  if (to == kBlock && b_.cluster && !allDone()) {
    // in a cluster, the other blocks run until one of this block's groups can go on
    ClusterScheduler::Wake wake = b_.cluster->wait(b_.clusterRank, [this] { return anyReady(); });
    if (wake == ClusterScheduler::Wake::Aborted) {
      abort(Status::error(ErrorCode::Runtime, "abandoned: another block of the cluster failed"));
      cv_.notify_all();
      return;
    }
    if (wake == ClusterScheduler::Wake::Resumed)
      to = next(index);
  }
  switchTo(to != kBlock ? to : deadlockedTask(tasks_, kBlock));
}

GroupScheduler::Wake GroupScheduler::wait(std::function<bool()> ready) {
  std::unique_lock<std::mutex> lock(mutex_);
  size_t self = running_;
  Task &task = tasks_[self];
  task.ready = std::move(ready);
  size_t to = next(self);
  while (to == kBlock) {
    if (!b_.cluster)
      return Wake::Deadlock;
    // in a cluster, the other blocks run until one of this block's groups can go on
    ClusterScheduler::Wake wake = b_.cluster->wait(b_.clusterRank, [this] { return anyReady(); });
    if (wake == ClusterScheduler::Wake::Aborted)
      return Wake::Aborted;
    if (wake == ClusterScheduler::Wake::Deadlock)
      return Wake::Deadlock;
    if (task.ready()) {
      task.ready = nullptr;
      return Wake::Resumed;
    }
    to = next(self);
  }
  switchTo(to);
  cv_.wait(lock, [&] { return running_ == self || aborting_; });
  task.ready = nullptr;
  if (aborting_)
    return Wake::Aborted;
  if (task.deadlock)
    return Wake::Deadlock;
  return Wake::Resumed;
}

bool GroupScheduler::anyReady() const {
  for (const Task &t : tasks_)
    if (!t.done && (!t.started || (t.ready && t.ready())))
      return true;
  return false;
}

bool GroupScheduler::allDone() const { return allEnded(tasks_); }

Status GroupScheduler::run() {
  swapQueues(b_, blockQueues_); // the block's own queues wait for the statement's end
  for (size_t i = 0; i < tasks_.size(); ++i)
    tasks_[i].thread = std::thread([this, i] { body(i); });
  {
    std::unique_lock<std::mutex> lock(mutex_);
    switchTo(0);
    cv_.wait(lock, [&] { return allEnded(tasks_); });
  }
  for (Task &t : tasks_)
    t.thread.join();
  swapQueues(b_, blockQueues_);
  return error_;
}

} // namespace tilus::cpu
