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
//
// CUDA graphs: a launch inside stream capture (launchWith's `capturing`) never allocates, frees
// or decides from the current contents: the stream's buffer must already be large enough
// (reserve() it before capturing), every requires_clean region is zeroed by a memset captured
// into the graph (so each replay zeroes it again), and the capture's other regions stay dirty
// for ever after, because replays may write them at any time. A buffer that a captured launch
// used is pinned: growth replaces it but never frees it; it is freed with the pool, so graphs
// must not be replayed after their runtime is destroyed.
//
// A caller-provided workspace (zeroCleanRegions) holds nothing between launches as far as the
// runtime knows, so its requires_clean regions are zeroed on the stream before every launch.
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
  /// The dirty parts of [begin, end), which stay dirty.
  std::vector<Range> overlapping(uint64_t begin, uint64_t end) const;
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
  /// With `capturing` (the stream is capturing a CUDA graph) nothing is allocated: a buffer
  /// too small is an error (code `usage`), clean regions are zeroed unconditionally and the
  /// buffer is pinned (see the file comment).
  Status launchWith(const WorkspacePlan &plan, CUstream stream, bool capturing,
                    const std::function<Status(CUdeviceptr)> &launch);

  /// Grow `stream`'s buffer to at least `bytes` now (not during capture), so that captured
  /// launches needing up to `bytes` find it.
  Status reserve(CUstream stream, uint64_t bytes);

  /// Bytes currently held (live buffers, retired ones not yet freed, pinned ones).
  uint64_t bytesHeld() const;
  /// Bytes of `stream`'s buffer (0 when it has none).
  uint64_t bytesOn(CUstream stream) const;

private:
  struct Retired {
    DeviceBuffer buffer;
    EventHandle done;
  };
  struct StreamSlot {
    DeviceBuffer buffer;
    DirtyRanges dirty;
    bool captured = false;     // a captured launch used `buffer`: never free it early
    DirtyRanges capturedDirty; // what replays of captured launches may dirty at any time
  };
  void freeCompletedLocked();
  Status growLocked(StreamSlot &slot, uint64_t bytes, CUstream stream);

  const DriverApi &api_;
  mutable std::mutex mutex_;
  std::map<CUstream, StreamSlot> slots_;
  std::vector<Retired> retired_;
  std::vector<DeviceBuffer> pinned_; // replaced buffers that captured graphs may still use
};

/// For a caller-provided workspace at `base`: queue on `stream` the zeroing of every
/// requires_clean region of `plan` (captured as memset nodes when the stream is capturing).
Status zeroCleanRegions(const DriverApi &api, const WorkspacePlan &plan, CUdeviceptr base,
                        CUstream stream);

} // namespace tilus::cuda
