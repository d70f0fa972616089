// The global workspace behind AllocateGlobal.
//
// Plan (host side, shared convention with the JIT): a launch's workspace holds one region per
// AllocateGlobal instruction, in instruction order; region k starts at the end of region k-1
// rounded up to kWorkspaceAlignment bytes (the first at 0) and is
// ceil(prod(shape) * storageBits(dtype) / 8) bytes, the shape evaluated with the launch's
// scalar parameters. The kernel receives the workspace's base address as its last parameter.
//
// Memory (device side): one buffer per (device, stream), so launches on different streams
// never share scratch memory and launches on one stream are ordered by the stream. A buffer
// grows on demand: the old one is retired with an event recorded on its stream and freed only
// once that event has completed, so kernels still running never lose their memory. A new
// buffer is zeroed once. requires_clean regions must read zero: programs leave them zeroed,
// but another program's non-clean region may have left bytes there, so the workspace tracks
// which byte ranges may be dirty and zeroes (asynchronously, on the launch's stream) only the
// parts of a clean region that a previous launch could have dirtied.
#pragma once

#include "isa/program.h"
#include "isa/scalar_eval.h"
#include "loader/verified_module.h"
#include "vm/cuda/driver.h"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <vector>

namespace tilus::cuda {

inline constexpr uint64_t kWorkspaceAlignment = 256;

struct WorkspaceRegion {
  uint32_t instruction = 0; // index of the AllocateGlobal in Program::instructions
  uint64_t offset = 0;
  uint64_t bytes = 0;
  bool requiresClean = false;
};

struct WorkspacePlan {
  std::vector<WorkspaceRegion> regions;
  uint64_t totalBytes = 0;
};

/// The plan for concrete parameter values (`paramValue` gives a scalar parameter's bits).
/// Errors: a shape that depends on something other than parameters and constants, a negative
/// dimension, or a size beyond 2^48 bytes.
Expected<WorkspacePlan> planWorkspace(const Program &program, const VarValueFn &paramValue);

/// Byte ranges [begin, end) that may hold non-zero bytes: a sorted list of disjoint ranges.
class DirtyRanges {
public:
  struct Range {
    uint64_t begin = 0;
    uint64_t end = 0;
    friend bool operator==(const Range &, const Range &) = default;
  };
  /// Mark [begin, end) as possibly dirty.
  void add(uint64_t begin, uint64_t end);
  /// The dirty parts of [begin, end), which become clean (the caller zeroes them).
  std::vector<Range> takeClean(uint64_t begin, uint64_t end);
  void clear() { ranges_.clear(); }
  const std::vector<Range> &ranges() const { return ranges_; }

private:
  std::vector<Range> ranges_;
};

/// The workspace buffers of one device (one per stream). Thread-safe. Methods other than the
/// destructor expect the device's context to be current.
class WorkspacePool {
public:
  explicit WorkspacePool(const DriverApi &api) : api_(api) {}
  WorkspacePool(const WorkspacePool &) = delete;
  WorkspacePool &operator=(const WorkspacePool &) = delete;
  /// Waits for retired buffers' events, then frees everything (context must be alive).
  ~WorkspacePool();

  /// Make `stream`'s buffer at least plan.totalBytes long with every requires_clean region
  /// zero (work queued on `stream`), call `launch` with the buffer's base address (0 for an
  /// empty plan), and mark the plan's other regions dirty. Launches of one pool are serialised
  /// from preparation to queueing, so no other launch can dirty or retire the buffer between.
  Status launchWith(const WorkspacePlan &plan, CUstream stream,
                    const std::function<Status(CUdeviceptr)> &launch);

  /// Bytes currently held (live buffers and retired ones not yet freed).
  uint64_t bytesHeld() const;

private:
  struct Retired {
    DeviceBuffer buffer;
    EventHandle done;
  };
  struct StreamSlot {
    DeviceBuffer buffer;
    DirtyRanges dirty;
  };
  void freeCompletedLocked();

  const DriverApi &api_;
  mutable std::mutex mutex_;
  std::map<CUstream, StreamSlot> slots_;
  std::vector<Retired> retired_;
};

} // namespace tilus::cuda
