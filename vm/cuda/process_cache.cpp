// The process-wide cache of compiled kernels (see process_cache.h).
//
// Several runtimes of one process (one per GPU, each driven by its own host thread, as serving
// engines do) ask for the same kernels at the same time. Compiling costs far more than waiting,
// so one build per key runs and the other askers sleep on its entry until it is done.
#include "vm/cuda/process_cache.h"

#include <exception>

namespace tilus::cuda {

ProcessKernelCache &ProcessKernelCache::instance() {
  // Never destroyed: runtimes that outlive static destruction may still ask.
  static ProcessKernelCache *cache = new ProcessKernelCache();
  return *cache;
}

Expected<ProcessKernelCache::Result> ProcessKernelCache::getOrBuild(const std::string &keyText,
                                                                    const Builder &build) {
  std::unique_lock lock(mutex_);
  std::shared_ptr<Entry> &slot = entries_[keyText];
  if (!slot)
    slot = std::make_shared<Entry>();
  std::shared_ptr<Entry> entry = slot;
  if (entry->code) {
    ++stats_.hits;
    return Result{entry->code, false};
  }
  if (entry->building) {
    ++stats_.waits;
    entry->done.wait(lock, [&] { return !entry->building; });
    if (entry->code)
      return Result{entry->code, false};
    return *entry->failure;
  }
  entry->building = true;
  lock.unlock();
  std::optional<Expected<Code>> built;
  std::exception_ptr thrown;
  try {
    built.emplace(build());
  } catch (...) { // waiters must still wake up; the exception goes on to this caller
    thrown = std::current_exception();
    built.emplace(Status::error(ErrorCode::Runtime, "the kernel build threw an exception"));
  }
  lock.lock();
  entry->building = false;
  std::shared_ptr<const Code> code;
  if (built->ok()) {
    code = entry->code = std::make_shared<const Code>(std::move(built->value()));
    ++stats_.builds;
  } else {
    entry->failure = built->status();
    ++stats_.failures;
    auto it = entries_.find(keyText);
    if (it != entries_.end() && it->second == entry)
      entries_.erase(it); // failures are not kept: the next request builds again
  }
  entry->done.notify_all();
  lock.unlock();
  if (thrown)
    std::rethrow_exception(thrown);
  if (!code)
    return built->status();
  return Result{std::move(code), true};
}

ProcessKernelCache::Stats ProcessKernelCache::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

size_t ProcessKernelCache::size() const {
  std::lock_guard lock(mutex_);
  size_t ready = 0;
  for (const auto &[key, entry] : entries_)
    ready += entry->code ? 1 : 0;
  return ready;
}

void ProcessKernelCache::clear() {
  std::lock_guard lock(mutex_);
  std::erase_if(entries_, [](const auto &item) { return !item.second->building; });
}

} // namespace tilus::cuda
