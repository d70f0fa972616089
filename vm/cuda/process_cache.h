// Compiled kernels shared by every runtime of the process.
//
// A kernel's machine code depends on its key (kernel_cache.h: program, architecture, driver,
// options), not on the device or the runtime that asks, so runtimes on devices of one
// architecture share it. The first runtime to ask for a key builds the code (from the disk
// cache, or with the JIT and the driver's PTX compiler); runtimes that ask for the same key
// while that build runs wait for it instead of compiling again; later ones take it from
// memory. Each runtime then loads the code into its own context. A failed build is not kept:
// the runtimes that waited for it get its error, and the next request builds again.
#pragma once

#include "vm/cuda/kernel_cache.h"

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace tilus::cuda {

class ProcessKernelCache {
public:
  /// The process's cache (every CudaRuntime uses it). Tests may make their own instances.
  static ProcessKernelCache &instance();

  ProcessKernelCache() = default;
  ProcessKernelCache(const ProcessKernelCache &) = delete;
  ProcessKernelCache &operator=(const ProcessKernelCache &) = delete;

  struct Code {
    CachedKernel kernel;
    std::string origin; // how the builder got it: "compiled" or "disk"
  };
  using Builder = std::function<Expected<Code>()>;
  struct Result {
    std::shared_ptr<const Code> code;
    bool built = false; // true when this call ran `build`
  };

  /// The code of `keyText`: from memory, by waiting for a build of it in progress on another
  /// thread, or by calling `build` on this thread (then Result::built). The builder runs
  /// without any lock held, so different keys build in parallel.
  Expected<Result> getOrBuild(const std::string &keyText, const Builder &build);

  struct Stats {
    uint64_t builds = 0;   // builds that succeeded
    uint64_t failures = 0; // builds that failed
    uint64_t waits = 0;    // requests that waited for another thread's build
    uint64_t hits = 0;     // requests answered from memory
  };
  Stats stats() const;
  /// Keys held (built and ready).
  size_t size() const;
  /// Forget every built entry (builds in progress finish and are kept). Runtimes keep the
  /// kernels they already loaded; new requests build again.
  void clear();

private:
  struct Entry {
    bool building = false;
    std::shared_ptr<const Code> code; // set once built
    std::optional<Status> failure;    // the failed build's error, for its waiters
    std::condition_variable done;
  };
  mutable std::mutex mutex_;
  std::unordered_map<std::string, std::shared_ptr<Entry>> entries_;
  Stats stats_;
};

} // namespace tilus::cuda
