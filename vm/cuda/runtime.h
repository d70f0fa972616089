// The CUDA runtime of Tilus VM (C++ interface; the C API in vm/include/tilusvm.h wraps it).
//
// A CudaRuntime owns one device: its primary context, the compiled-kernel cache (in memory,
// keyed like the on-disk cache of kernel_cache.h, which it fills and reads), and the workspace
// pool. launch() compiles a program on first use (JIT to PTX, loaded with the driver's PTX
// compiler), then queues it on the caller's stream: grid from the program's grid expressions
// evaluated on the host, block = ProgramInfo::threads, dynamic shared memory =
// PtxKernel::sharedBytes, arguments packed per the JIT ABI of jit/jit.h.
//
// Thread safety: every method may be called from many host threads at once. Each call makes
// the device's context current for its duration and restores the caller's.
//
// Several runtimes (one per device, each driven by its own host thread) share compiled code
// through the process-wide cache of process_cache.h: a kernel is compiled once per
// architecture, and each runtime loads it into its own context.
//
// Streams: a launch's stream must belong to the runtime's context (the device's primary
// context); a stream of another context is refused before anything is queued.
//
// CUDA graphs: a launch on a stream that is capturing (cuStreamGetCaptureInfo) never compiles,
// allocates, synchronises or decides from state that replay would see differently: it uses a
// kernel already compiled for its arguments (prepare()) and a workspace already large enough
// (prepare() with the arguments on that stream, or a caller-provided workspace), and zeroes
// requires_clean regions with memsets captured into the graph. Otherwise it fails with an
// error that says to prepare the kernel first. See workspace.h for the memory a graph keeps.
#pragma once

#include "isa/scalar_eval.h"
#include "jit/jit.h"
#include "loader/verified_module.h"
#include "vm/cuda/driver.h"
#include "vm/cuda/kernel_cache.h"
#include "vm/kernel_args.h"

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace tilus::cuda {

/// Every error of a launch that needs preparation it did not get (a kernel not compiled, or
/// a workspace too small, during capture or with lazy compilation off) says this, with code
/// `usage`; needsPrepare() recognises them.
inline constexpr const char *kPrepareFirst = "prepare the kernel";
bool needsPrepare(const Status &status);

/// Whether a CUDA driver and at least one device are present; the Status says why not
/// ("no CUDA driver (libcuda.so.1 not found)", "no CUDA device ...").
Status cudaAvailable();

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int computeCapability = 0; // major * 10 + minor
  int multiprocessors = 0;
  int64_t maxSharedPerBlockOptin = 0;
  uint64_t totalMemory = 0;
};

struct RuntimeOptions {
  /// Device ordinal; -1 picks $TILUSVM_DEVICE if set, else device 0.
  int device = -1;
  int optLevel = 3;
  /// Disk cache directory; nullopt uses defaultCacheDirectory(), "" disables the disk cache.
  std::optional<std::string> cacheDirectory;
  /// Log level in spdlog's numbering (0 trace, 1 debug, 2 info, 3 warn, 4 error, 5 critical,
  /// 6 off); -1 takes $TILUSVM_LOG_LEVEL, else warn.
  int logLevel = -1;
  /// Receives this runtime's log messages (level as above, message without a newline); calls
  /// are serialised. Empty: messages go to stderr.
  std::function<void(int level, const std::string &message)> logSink;
  /// True: a launch compiles its kernel when it is not compiled yet. False: only kernel() and
  /// prepare() compile, and a launch whose kernel is not compiled is an error.
  bool lazyCompile = true;
};

/// Per-launch choices.
struct LaunchOptions {
  /// A caller-provided workspace used instead of the runtime's own: a device address in the
  /// runtime's context, a multiple of kWorkspaceAlignment (256), at least workspaceSize()
  /// bytes, used by nothing else until the launch completes. 0: the runtime's workspace.
  CUdeviceptr workspace = 0;
  uint64_t workspaceBytes = 0;
};

/// A verified module together with its content hash (computed once, used by cache keys).
struct LoadedModule {
  VerifiedModule verified;
  uint64_t contentHash = 0;
  static LoadedModule from(VerifiedModule verified);
};

/// Where a launch goes: grid, block, dynamic shared memory.
struct LaunchGeometry {
  std::array<uint32_t, 3> grid = {1, 1, 1};
  uint32_t block = 0;
  /// False when some grid dimension is 0: nothing to run.
  bool empty() const { return grid[0] == 0 || grid[1] == 0 || grid[2] == 0; }
};

/// Parameter values as the scalar evaluator wants them (pointers give their address).
VarValueFn paramValues(const Program &program, const KernelArgs &args);

/// Check the arguments against the program: one per parameter; every pointer argument at
/// least as large as the extent of the parameter the program can touch (when computable) and
/// non-null when that extent is not empty.
Status validateArgs(const Program &program, const ProgramInfo &info, const KernelArgs &args);

/// Bytes of `elements` elements of `dtype` (sub-byte types packed).
uint64_t storageBytes(DataType dtype, int64_t elements);

/// Grid and block of a launch with these arguments (grid dimensions must fit CUDA's limits).
Expected<LaunchGeometry> launchGeometry(const Program &program, const ProgramInfo &info,
                                        const KernelArgs &args);

/// The launch-time specialisation of these arguments (jit/jit.h): pointers whose address is a
/// multiple of 16, integer scalars equal to 1 or multiples of 16. Empty when the runtime's
/// specialisation is off (TILUSVM_SPECIALIZE=0).
Specialization classifyArgs(const Program &program, const KernelArgs &args);

/// A parameter's value as the kernel receives it (JIT ABI): pointers as 64-bit addresses,
/// integers and bool sign- or zero-extended, floats as their bit pattern zero-extended.
/// The driver reads the low 4 or 8 bytes of the result (little-endian), per the PTX `.param`.
uint64_t kernelParamBits(const Variable &param, const KernelArg &arg);

/// The tensor maps of a launch of a program with TmaLoad (ProgramInfo::tensorMaps), encoded by
/// the driver from these arguments; a `runtime` error when the arguments break a tensor map's
/// requirements (loader/tensor_map.h) (tensor_maps.cpp).
Status encodeTensorMaps(const DriverApi &api, const Program &program, const ProgramInfo &info,
                        const KernelArgs &args, std::vector<CUtensorMap> &maps);

/// A compiled, loaded kernel (owned by the runtime's cache; valid while the runtime lives).
struct CompiledKernel {
  CUfunction function = nullptr;
  std::string entryName;
  uint32_t threads = 0;
  int64_t sharedBytes = 0;
  /// Registers per thread, as the driver loaded the kernel (CU_FUNC_ATTRIBUTE_NUM_REGS).
  int registers = 0;
  /// Local memory per thread in bytes (CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES): register spills and
  /// arrays that ptxas could not keep in registers; 0 for a kernel that lives in its registers.
  int localBytes = 0;
  std::string ptx;
  /// How this kernel was obtained the first time: "compiled", "disk" or "shared"
  /// (built by another runtime of the process, or earlier by this process).
  std::string origin;
  /// Its argument class (the unspecialised kernel: empty).
  Specialization specialization;
};

struct CacheStats {
  uint64_t compiles = 0;    // programs compiled by the JIT
  uint64_t memoryHits = 0;  // kernel() or a launch answered from the runtime's loaded kernels
  uint64_t diskHits = 0;    // loaded from the disk cache
  uint64_t diskCorrupt = 0; // disk entries rejected and recompiled
  uint64_t sharedHits = 0;  // code taken from the process-wide cache (another runtime built it)
};

/// The sums of every runtime's CacheStats since the process started.
CacheStats processCacheStats();

class CudaRuntime {
public:
  static Expected<std::unique_ptr<CudaRuntime>> create(const RuntimeOptions &options = {});
  ~CudaRuntime();
  CudaRuntime(const CudaRuntime &) = delete;
  CudaRuntime &operator=(const CudaRuntime &) = delete;

  const DeviceInfo &device() const;
  const DriverApi &api() const;
  CUcontext context() const;
  /// The JIT options used for this device (smVersion 90 on compute capability 9.0, else 80).
  JitOptions jitOptions() const;
  /// The cache key of one program on this device.
  KernelKey cacheKey(const LoadedModule &module, size_t programIndex,
                     const Specialization &specialization = {}) const;

  /// The compiled kernel of program `programIndex`, from the caches or compiled now; with a
  /// specialisation, the kernel that relies on it (launch() picks it from the arguments).
  Expected<const CompiledKernel *> kernel(const LoadedModule &module, size_t programIndex,
                                          const Specialization &specialization = {});

  /// A kernel of program `programIndex` that is already compiled in this runtime and correct
  /// for arguments of class `specialization`: the one of that class, else one whose every
  /// assumption the class satisfies (the unspecialised kernel satisfies any); nullptr if none.
  /// Never compiles.
  const CompiledKernel *readyKernel(const LoadedModule &module, size_t programIndex,
                                    const Specialization &specialization);

  /// Get a program ready for launches, graph capture included: compile the kernel for the
  /// class of `args` (the unspecialised kernel when `args` is null), and when the program uses
  /// a workspace, grow `stream`'s workspace to what `args` need. Not during capture on `stream`.
  Status prepare(const LoadedModule &module, size_t programIndex, const KernelArgs *args,
                 CUstream stream);

  /// Bytes of workspace a launch with these arguments needs (0 when the program has no
  /// AllocateGlobal); only the scalar arguments matter, and their count must match.
  Expected<uint64_t> workspaceSize(const LoadedModule &module, size_t programIndex,
                                   const KernelArgs &args) const;

  /// Queue one launch on `stream` (0 = the default stream). Pointer arguments are device
  /// addresses. Returns once the launch is queued; the caller synchronizes the stream.
  Status launch(const LoadedModule &module, size_t programIndex, const KernelArgs &args,
                CUstream stream, const LaunchOptions &options = {});

  /// Whether `stream` is capturing a CUDA graph (an invalidated capture counts).
  Expected<bool> capturing(CUstream stream) const;
  /// Ok when `stream` may carry this runtime's launches (the null and per-thread default
  /// streams, or a stream of the runtime's context); a `usage` error naming the stream's
  /// device otherwise.
  Status checkStream(CUstream stream) const;

  /// Launch `warmup` times, then `iterations` times, each timed with a pair of events on
  /// `stream`; returns the per-launch milliseconds.
  Expected<std::vector<double>> benchmark(const LoadedModule &module, size_t programIndex,
                                          const KernelArgs &args, CUstream stream, int warmup,
                                          int iterations);

  // Memory helpers for tools and tests (synchronous).
  Expected<DeviceBuffer> allocate(uint64_t bytes);
  Status copyToDevice(const DeviceBuffer &dst, const void *src, uint64_t bytes);
  Status copyToHost(void *dst, const DeviceBuffer &src, uint64_t bytes);
  Status synchronize(CUstream stream);

  CacheStats cacheStats() const;
  /// Bytes the workspace pool holds.
  uint64_t workspaceBytes() const;
  /// Bytes of `stream`'s workspace buffer.
  uint64_t workspaceBytesOn(CUstream stream) const;
  /// Whether launches compile on demand (RuntimeOptions::lazyCompile).
  bool lazyCompile() const;

private:
  CudaRuntime();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace tilus::cuda
