// What the two schedulers of cooperative tasks share (group_scheduler.h: the thread groups of a
// parallel statement; cluster_scheduler.h: the blocks of a cluster): the fixed order in which the
// next task to run is chosen.
#pragma once

#include <cstddef>
#include <vector>

namespace tilus::cpu {

/// The task to run after task `from` (which blocks or ends; `none` when nothing runs yet, then
/// the search starts at task 0): the first after it, in circular order, that has not ended and
/// either has not started or waits for something that has happened (its `ready()`); `none` when
/// no task can make progress. Task has `done`, `started` and a callable `ready`.
template <class Task>
size_t nextRunnable(const std::vector<Task> &tasks, size_t from, size_t none) {
  for (size_t k = 1; k <= tasks.size(); ++k) {
    size_t j = (from == none ? k - 1 : from + k) % tasks.size();
    const Task &t = tasks[j];
    if (j != from && !t.done && (!t.started || t.ready()))
      return j;
  }
  return none;
}

/// Whether every task has ended.
template <class Task> bool allEnded(const std::vector<Task> &tasks) {
  for (const Task &t : tasks)
    if (!t.done)
      return false;
  return true;
}

/// When task `from` ends and nextRunnable finds no task that can make progress: every other
/// task has ended or waits for what nothing can bring any more. The first of those (marked
/// `deadlock`) runs next to report its wait as a deadlock; `none` when every task has ended.
template <class Task> size_t deadlockedTask(std::vector<Task> &tasks, size_t none) {
  for (size_t j = 0; j < tasks.size(); ++j)
    if (!tasks[j].done) {
      tasks[j].deadlock = true;
      return j;
    }
  return none;
}

} // namespace tilus::cpu
