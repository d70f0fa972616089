// The CUDA runtime: one device, its kernel cache and workspace, and launches.
//
// This is where a verified program becomes running GPU code. The expensive step (the JIT to
// PTX, then the driver's PTX compiler) happens once per kernel key: concurrent callers asking
// for the same key wait for one compilation, different keys compile in parallel, and the PTX
// goes to the disk cache so that the next process skips the JIT (the driver caches its own
// step).
// A launch then only evaluates the grid on the host, packs the parameters and queues the
// kernel on the caller's stream. Compiled code is shared with the other runtimes of the process
// (process_cache.h), so a process driving several GPUs of one architecture compiles each kernel
// once; each runtime loads it into its own context.
#include "vm/cuda/runtime.h"

#include "isa/bytecode.h"
#include "vm/cuda/process_cache.h"
#include "vm/cuda/workspace.h"

#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <unordered_map>

namespace tilus::cuda {
namespace {

constexpr int64_t kDefaultSharedLimit = 48 * 1024;

/// The process's stderr logger (runtimes without a log sink share its sink).
std::shared_ptr<spdlog::logger> stderrLogger() {
  static std::shared_ptr<spdlog::logger> logger = [] {
    auto existing = spdlog::get("vm.cuda");
    if (existing)
      return existing;
    auto created = spdlog::stderr_color_mt("vm.cuda");
    const char *level = std::getenv("TILUSVM_LOG_LEVEL");
    created->set_level(level ? spdlog::level::from_str(level) : spdlog::level::warn);
    return created;
  }();
  return logger;
}

/// A spdlog sink that hands each message to a caller's function.
class FunctionSink : public spdlog::sinks::base_sink<std::mutex> {
public:
  explicit FunctionSink(std::function<void(int, const std::string &)> fn) : fn_(std::move(fn)) {}

protected:
  void sink_it_(const spdlog::details::log_msg &msg) override {
    fn_(int(msg.level), std::string(msg.payload.data(), msg.payload.size()));
  }
  void flush_() override {}

private:
  std::function<void(int, const std::string &)> fn_;
};

/// One runtime's logger: its own level, and the caller's sink or the shared stderr one.
std::shared_ptr<spdlog::logger> makeLogger(const RuntimeOptions &options) {
  std::shared_ptr<spdlog::logger> shared = stderrLogger();
  if (options.logLevel < 0 && !options.logSink)
    return shared;
  std::shared_ptr<spdlog::logger> logger;
  if (options.logSink)
    logger = std::make_shared<spdlog::logger>("vm.cuda",
                                              std::make_shared<FunctionSink>(options.logSink));
  else
    logger =
        std::make_shared<spdlog::logger>("vm.cuda", shared->sinks().begin(), shared->sinks().end());
  int level = options.logLevel;
  if (level < 0 || level > int(spdlog::level::off))
    logger->set_level(shared->level());
  else
    logger->set_level(spdlog::level::level_enum(level));
  return logger;
}

enum class Counter { Compiles, MemoryHits, DiskHits, DiskCorrupt, SharedHits };
constexpr size_t kCounters = 5;
std::array<std::atomic<uint64_t>, kCounters> gProcessCounters{};

uint64_t &field(CacheStats &stats, Counter counter) {
  switch (counter) {
  case Counter::Compiles:
    return stats.compiles;
  case Counter::MemoryHits:
    return stats.memoryHits;
  case Counter::DiskHits:
    return stats.diskHits;
  case Counter::DiskCorrupt:
    return stats.diskCorrupt;
  case Counter::SharedHits:
    return stats.sharedHits;
  }
  return stats.compiles;
}

/// Whether a kernel that relies on `kernel` is correct for arguments of class `args`: every
/// fact the kernel assumes holds for the arguments.
bool satisfies(const Specialization &args, const Specialization &kernel) {
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    ParamFact need = kernel.params[i];
    ParamFact have = i < args.params.size() ? args.params[i] : ParamFact::None;
    if (need != ParamFact::None && need != have)
      return false;
  }
  return true;
}

std::string className(const Specialization &specialization) {
  return specialization.empty() ? "unspecialised" : "class '" + specialization.text() + "'";
}

int pickDevice(int requested) {
  if (requested >= 0)
    return requested;
  if (const char *env = std::getenv("TILUSVM_DEVICE"); env && *env)
    return std::atoi(env);
  return 0;
}

Expected<DeviceInfo> queryDevice(const DriverApi &api, CUdevice device, int ordinal) {
  DeviceInfo info;
  info.ordinal = ordinal;
  char name[256] = {};
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceGetName, name, int(sizeof name - 1), device));
  info.name = name;
  int major = 0, minor = 0, sms = 0, shared = 0;
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceGetAttribute, &major,
                              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device));
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceGetAttribute, &minor,
                              CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device));
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceGetAttribute, &sms,
                              CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device));
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceGetAttribute, &shared,
                              CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device));
  size_t total = 0;
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceTotalMem, &total, device));
  info.computeCapability = major * 10 + minor;
  info.multiprocessors = sms;
  info.maxSharedPerBlockOptin = shared;
  info.totalMemory = total;
  return info;
}

} // namespace

bool needsPrepare(const Status &status) {
  return !status.ok() && status.code() == ErrorCode::Usage &&
         status.first().message.find(kPrepareFirst) != std::string::npos;
}

Status cudaAvailable() {
  auto driver = cudaDriver();
  if (!driver.ok())
    return driver.status();
  int count = 0;
  TILUSVM_TRY(TILUSVM_CU_CALL(**driver, cuDeviceGetCount, &count));
  if (count == 0)
    return Status::error(ErrorCode::Cuda, "no CUDA device (the driver reports 0 devices)");
  return Status::success();
}

LoadedModule LoadedModule::from(VerifiedModule verified) {
  LoadedModule loaded;
  loaded.contentHash = moduleContentHash(verified.module);
  loaded.verified = std::move(verified);
  return loaded;
}

// ---- CudaRuntime::Impl -----------------------------------------------------------------------

struct CudaRuntime::Impl {
  struct Slot {
    std::mutex mutex;
    std::atomic<bool> ready{false}; // set (release) once module and kernel are complete
    ModuleHandle module;
    CompiledKernel kernel;
  };

  const DriverApi *api = nullptr;
  PrimaryContext context; // declared first: released last
  DeviceInfo device;
  int optLevel = 3;
  bool lazyCompile = true;
  std::shared_ptr<spdlog::logger> logger;
  DiskCache disk{""};
  std::unique_ptr<WorkspacePool> workspace;
  mutable std::mutex cacheMutex;
  std::unordered_map<std::string, std::shared_ptr<Slot>> kernels; // by key text
  /// Ready kernels of each program, by the key text of its unspecialised kernel.
  std::unordered_map<std::string, std::vector<std::shared_ptr<Slot>>> variants;
  mutable std::mutex statsMutex;
  CacheStats stats;
  /// Per stream this runtime launched on: an event recorded after its last launch. Destroying
  /// the runtime waits for these only, not for the whole device (other work of the process,
  /// on other streams, is none of its business).
  std::mutex launchedMutex;
  std::map<CUstream, EventHandle> launched;

  /// A copy of `bytes` `direction` ("into", "out of") a buffer of `capacity` bytes: a runtime
  /// error when it does not fit, nothing for 0 bytes, else `copyBytes()` in the context.
  template <typename CopyBytes>
  Status copy(uint64_t bytes, uint64_t capacity, const char *direction, CopyBytes &&copyBytes) {
    if (bytes > capacity)
      return Status::error(ErrorCode::Runtime, "copy of " + std::to_string(bytes) + " bytes " +
                                                   direction + " a buffer of " +
                                                   std::to_string(capacity));
    if (bytes == 0)
      return Status::success();
    ContextGuard guard(*api, context.get());
    TILUSVM_TRY(guard.status());
    return copyBytes();
  }

  ~Impl() {
    if (!api || !context.get())
      return;
    if (!context.alive()) {
      // The context was reset or destroyed (or the driver is shutting down): everything this
      // runtime held died with it, and any call in it would fail. Forget, do not free.
      (void)workspace.release();
      (void)new std::unordered_map<std::string, std::shared_ptr<Slot>>(std::move(kernels));
      (void)new std::unordered_map<std::string, std::vector<std::shared_ptr<Slot>>>(
          std::move(variants));
      (void)new std::map<CUstream, EventHandle>(std::move(launched));
      context.abandon();
      return;
    }
    ContextGuard guard(*api, context.get());
    for (auto &[stream, event] : launched)
      api->cuEventSynchronize(event.get());
    launched.clear();
    workspace.reset();
    variants.clear();
    kernels.clear();
  }

  /// Record that work was queued on `stream` (the context is current).
  Status noteLaunch(CUstream stream) {
    std::lock_guard lock(launchedMutex);
    auto it = launched.find(stream);
    if (it == launched.end()) {
      auto event = EventHandle::create(*api, false);
      if (!event.ok())
        return event.takeStatus();
      it = launched.emplace(stream, std::move(event.value())).first;
    }
    return TILUSVM_CU_CALL(*api, cuEventRecord, it->second.get(), stream);
  }

  void count(Counter counter) {
    {
      std::lock_guard lock(statsMutex);
      ++field(stats, counter);
    }
    gProcessCounters[size_t(counter)].fetch_add(1, std::memory_order_relaxed);
  }

  /// Loads PTX into the current context with the driver's PTX compiler (cuModuleLoadDataEx),
  /// which compiles a whole program, as `ptxas` without `-c`. (The linker interface, cuLink*,
  /// compiles PTX as relocatable code whatever its options, which costs registers: the a16wx
  /// decode kernel took 104 and 156 registers per thread that way instead of 65 and 96.) The
  /// driver keeps its own cache of compiled PTX (CUDA_CACHE_PATH), so a second load of the
  /// same PTX, in this process or another, does not compile again.
  Status loadPtx(Slot &slot, const std::string &ptx) {
    char log[8192] = {};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof log))};
    CUmodule module = nullptr;
    CUresult loaded = api->cuModuleLoadDataEx(&module, ptx.c_str(), 2, options, values);
    if (loaded != CUDA_SUCCESS) {
      Status status = cudaStatus(loaded, "cuModuleLoadDataEx");
      log[sizeof log - 1] = '\0';
      if (log[0] == '\0')
        return status;
      return Status::error(ErrorCode::Cuda, status.first().message + ": " + log);
    }
    slot.module = ModuleHandle::adopt(*api, module);
    return Status::success();
  }

  Expected<ProcessKernelCache::Code> build(const LoadedModule &loaded, size_t index,
                                           const KernelKey &key,
                                           const Specialization &specialization, Slot &slot);
  Status obtain(const LoadedModule &loaded, size_t index, const KernelKey &key,
                const std::string &keyText, const Specialization &specialization, Slot &slot);
  Status finish(const ProgramInfo &info, Slot &slot);
};

// Runs once per key in the process (ProcessKernelCache), in the context of the runtime that
// asked first; leaves the code loaded in `slot` for that runtime.
Expected<ProcessKernelCache::Code> CudaRuntime::Impl::build(const LoadedModule &loaded,
                                                            size_t index, const KernelKey &key,
                                                            const Specialization &specialization,
                                                            Slot &slot) {
  DiskCache::Lookup hit = disk.load(key);
  if (hit.corrupt) {
    count(Counter::DiskCorrupt);
    logger->warn("disk cache entry {} rejected ({}); recompiling", disk.entryPath(key), hit.reason);
  }
  if (hit.kernel) {
    CachedKernel &cached = *hit.kernel;
    if (loadPtx(slot, cached.ptx).ok()) {
      count(Counter::DiskHits);
      return ProcessKernelCache::Code{std::move(cached), "disk"};
    }
    logger->warn("cached PTX for {} did not load; recompiling", key.program);
  }
  // compileToPtx is thread-safe (a fresh LLVMContext per compilation), so different kernels
  // compile in parallel.
  JitOptions options;
  options.smVersion = key.ptxTarget;
  options.optLevel = optLevel;
  options.specialization = specialization;
  Expected<PtxKernel> ptx = compileToPtx(loaded.verified, index, options);
  if (!ptx.ok())
    return ptx.takeStatus();
  count(Counter::Compiles);
  auto loadStart = std::chrono::steady_clock::now();
  TILUSVM_TRY(loadPtx(slot, ptx->ptx));
  // TILUSVM_JIT_TIMING=1: the driver's PTX load (its compilation to SASS) beside the JIT's line
  // (jit/jit.cpp)
  if (const char *timing = std::getenv("TILUSVM_JIT_TIMING");
      timing && *timing && std::string(timing) != "0")
    std::fprintf(
        stderr, "jit: %s sm_%d: driver PTX load %.1f ms (wall)\n", ptx->entryName.c_str(),
        key.ptxTarget,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - loadStart)
            .count());
  CachedKernel entry{ptx->entryName, ptx->threads, ptx->sharedBytes, std::move(ptx->ptx)};
  if (Status s = disk.store(key, entry); !s.ok())
    logger->debug("disk cache store failed: {}", s.toString());
  return ProcessKernelCache::Code{std::move(entry), "compiled"};
}

Status CudaRuntime::Impl::obtain(const LoadedModule &loaded, size_t index, const KernelKey &key,
                                 const std::string &keyText, const Specialization &specialization,
                                 Slot &slot) {
  auto result = ProcessKernelCache::instance().getOrBuild(
      keyText, [&] { return build(loaded, index, key, specialization, slot); });
  if (!result.ok())
    return result.takeStatus();
  const ProcessKernelCache::Code &code = *result->code;
  CompiledKernel &kernel = slot.kernel;
  kernel.entryName = code.kernel.entryName;
  kernel.threads = code.kernel.threads;
  kernel.sharedBytes = code.kernel.sharedBytes;
  kernel.ptx = code.kernel.ptx;
  kernel.specialization = specialization;
  if (result->built) { // build() loaded it here
    kernel.origin = code.origin;
    return Status::success();
  }
  count(Counter::SharedHits);
  kernel.origin = "shared";
  return loadPtx(slot, code.kernel.ptx);
}

Status CudaRuntime::Impl::finish(const ProgramInfo &info, Slot &slot) {
  CompiledKernel &kernel = slot.kernel;
  if (kernel.threads != info.threads)
    return Status::error(ErrorCode::Jit,
                         "kernel " + kernel.entryName + " has " + std::to_string(kernel.threads) +
                             " threads per block, the program " + std::to_string(info.threads));
  if (kernel.sharedBytes > device.maxSharedPerBlockOptin)
    return Status::error(ErrorCode::Cuda, "kernel " + kernel.entryName + " needs " +
                                              std::to_string(kernel.sharedBytes) +
                                              " bytes of shared memory; device " + device.name +
                                              " allows " +
                                              std::to_string(device.maxSharedPerBlockOptin));
  TILUSVM_TRY(TILUSVM_CU_CALL(*api, cuModuleGetFunction, &kernel.function, slot.module.get(),
                              kernel.entryName.c_str()));
  TILUSVM_TRY(TILUSVM_CU_CALL(*api, cuFuncGetAttribute, &kernel.registers,
                              CU_FUNC_ATTRIBUTE_NUM_REGS, kernel.function));
  TILUSVM_TRY(TILUSVM_CU_CALL(*api, cuFuncGetAttribute, &kernel.localBytes,
                              CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, kernel.function));
  if (kernel.sharedBytes > kDefaultSharedLimit)
    TILUSVM_TRY(TILUSVM_CU_CALL(*api, cuFuncSetAttribute, kernel.function,
                                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                int(kernel.sharedBytes)));
  return Status::success();
}

// ---- CudaRuntime -----------------------------------------------------------------------------

CudaRuntime::CudaRuntime() : impl_(std::make_unique<Impl>()) {}
CudaRuntime::~CudaRuntime() = default;

Expected<std::unique_ptr<CudaRuntime>> CudaRuntime::create(const RuntimeOptions &options) {
  // A malformed cap is the caller's configuration error, reported before anything else.
  Expected<uint64_t> cacheCap = cacheMaxBytesFromEnvironment();
  if (!cacheCap.ok())
    return cacheCap.takeStatus();
  auto driver = cudaDriver();
  if (!driver.ok())
    return driver.status();
  const DriverApi &api = **driver;
  int count = 0;
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceGetCount, &count));
  int ordinal = pickDevice(options.device);
  if (ordinal < 0 || ordinal >= count)
    return Status::error(ErrorCode::Cuda, "CUDA device " + std::to_string(ordinal) +
                                              " does not exist (" + std::to_string(count) +
                                              " devices)");
  std::unique_ptr<CudaRuntime> runtime(new CudaRuntime());
  Impl &impl = *runtime->impl_;
  auto context = PrimaryContext::retain(api, ordinal);
  if (!context.ok())
    return context.takeStatus();
  auto info = queryDevice(api, context->device(), ordinal);
  if (!info.ok())
    return info.takeStatus();
  if (info->computeCapability < 80)
    return Status::error(ErrorCode::Unsupported,
                         "device " + info->name + " has compute capability " +
                             std::to_string(info->computeCapability / 10) + "." +
                             std::to_string(info->computeCapability % 10) +
                             "; Tilus VM needs 8.0 or newer");
  impl.api = &api;
  impl.context = std::move(context.value());
  impl.device = std::move(info.value());
  impl.optLevel = options.optLevel;
  impl.lazyCompile = options.lazyCompile;
  impl.logger = makeLogger(options);
  std::optional<std::string> dir =
      options.cacheDirectory ? options.cacheDirectory : defaultCacheDirectory();
  impl.disk = DiskCache(dir.value_or(""), *cacheCap);
  impl.workspace = std::make_unique<WorkspacePool>(api);
  return runtime;
}

const DeviceInfo &CudaRuntime::device() const { return impl_->device; }
const DriverApi &CudaRuntime::api() const { return *impl_->api; }
CUcontext CudaRuntime::context() const { return impl_->context.get(); }

JitOptions CudaRuntime::jitOptions() const {
  JitOptions options;
  options.smVersion = impl_->device.computeCapability == 90 ? 90 : 80;
  options.optLevel = impl_->optLevel;
  return options;
}

KernelKey CudaRuntime::cacheKey(const LoadedModule &module, size_t programIndex,
                                const Specialization &specialization) const {
  KernelKey key;
  key.moduleHash = module.contentHash;
  key.program = module.verified.module.programs[programIndex].name;
  key.compilerVersion = JitOptions::compilerVersion();
  key.ptxTarget = jitOptions().smVersion;
  key.deviceArch = impl_->device.computeCapability;
  key.optLevel = impl_->optLevel;
  key.driverVersion = impl_->api->driverVersion;
  key.specialization = specialization.text();
  return key;
}

Expected<const CompiledKernel *> CudaRuntime::kernel(const LoadedModule &module,
                                                     size_t programIndex,
                                                     const Specialization &specialization) {
  if (programIndex >= module.verified.module.programs.size())
    return Status::error(ErrorCode::Usage,
                         "program index " + std::to_string(programIndex) + " out of range");
  KernelKey key = cacheKey(module, programIndex, specialization);
  std::string text = key.text();
  std::shared_ptr<Impl::Slot> slot;
  {
    std::lock_guard lock(impl_->cacheMutex);
    auto &entry = impl_->kernels[text];
    if (!entry)
      entry = std::make_shared<Impl::Slot>();
    slot = entry;
  }
  std::lock_guard slotLock(slot->mutex);
  if (slot->ready.load(std::memory_order_acquire)) {
    impl_->count(Counter::MemoryHits);
    return &slot->kernel;
  }
  ContextGuard guard(*impl_->api, impl_->context.get());
  TILUSVM_TRY(guard.status());
  Status built = impl_->obtain(module, programIndex, key, text, specialization, *slot);
  if (built.ok())
    built = impl_->finish(module.verified.programs[programIndex], *slot);
  if (!built.ok()) {
    slot->module = ModuleHandle();
    slot->kernel = CompiledKernel();
    std::lock_guard lock(impl_->cacheMutex);
    auto it = impl_->kernels.find(text);
    if (it != impl_->kernels.end() && it->second == slot)
      impl_->kernels.erase(it);
    return built;
  }
  impl_->logger->debug("kernel {} ready ({}, {})", slot->kernel.entryName, slot->kernel.origin,
                       className(specialization));
  slot->ready.store(true, std::memory_order_release);
  std::lock_guard lock(impl_->cacheMutex);
  impl_->variants[cacheKey(module, programIndex).text()].push_back(slot);
  return &slot->kernel;
}

const CompiledKernel *CudaRuntime::readyKernel(const LoadedModule &module, size_t programIndex,
                                               const Specialization &specialization) {
  if (programIndex >= module.verified.module.programs.size())
    return nullptr;
  std::string exact = cacheKey(module, programIndex, specialization).text();
  std::string general = cacheKey(module, programIndex).text();
  const CompiledKernel *found = nullptr;
  {
    std::lock_guard lock(impl_->cacheMutex);
    auto it = impl_->kernels.find(exact);
    if (it != impl_->kernels.end() && it->second->ready.load(std::memory_order_acquire)) {
      found = &it->second->kernel;
    } else if (auto v = impl_->variants.find(general); v != impl_->variants.end()) {
      for (const std::shared_ptr<Impl::Slot> &slot : v->second)
        if (satisfies(specialization, slot->kernel.specialization)) {
          found = &slot->kernel;
          break;
        }
    }
  }
  if (found)
    impl_->count(Counter::MemoryHits);
  return found;
}

Expected<bool> CudaRuntime::capturing(CUstream stream) const {
  const DriverApi &api = *impl_->api;
  ContextGuard guard(api, impl_->context.get());
  TILUSVM_TRY(guard.status());
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (api.cuStreamGetCaptureInfo)
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuStreamGetCaptureInfo, stream, &status, nullptr, nullptr,
                                nullptr, nullptr, nullptr));
  else // drivers before 12.3: the same answer, without the capture's details
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuStreamIsCapturing, stream, &status));
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

Status CudaRuntime::checkStream(CUstream stream) const {
  const DriverApi &api = *impl_->api;
  if (stream == nullptr || stream == CU_STREAM_LEGACY || stream == CU_STREAM_PER_THREAD ||
      !api.cuStreamGetCtx)
    return Status::success(); // the default streams of whatever context is current: ours
  CUcontext owner = nullptr;
  CUresult queried = api.cuStreamGetCtx(stream, &owner);
  if (queried != CUDA_SUCCESS)
    return Status::error(ErrorCode::Cuda,
                         "the launch's stream cannot be used: " +
                             cudaStatus(queried, "cuStreamGetCtx").first().message);
  if (owner == impl_->context.get())
    return Status::success();
  std::string whose = "another CUDA context";
  if (api.cuCtxGetDevice) {
    ContextGuard guard(api, owner);
    CUdevice device = 0;
    if (guard.status().ok() && api.cuCtxGetDevice(&device) == CUDA_SUCCESS)
      whose = "a CUDA context of device " + std::to_string(int(device)) +
              (int(device) == impl_->device.ordinal ? " other than its primary context" : "");
  }
  return Status::error(ErrorCode::Usage,
                       "the stream belongs to " + whose + ", but this runtime runs on device " +
                           std::to_string(impl_->device.ordinal) + " (" + impl_->device.name +
                           ") in its primary context: launch on a stream created on device " +
                           std::to_string(impl_->device.ordinal) +
                           " with its primary context current");
}

Expected<uint64_t> CudaRuntime::workspaceSize(const LoadedModule &module, size_t programIndex,
                                              const KernelArgs &args) const {
  if (programIndex >= module.verified.module.programs.size())
    return Status::error(ErrorCode::Usage,
                         "program index " + std::to_string(programIndex) + " out of range");
  const Program &program = module.verified.module.programs[programIndex];
  if (args.size() != program.params.size())
    return Status::error(ErrorCode::Usage, program.name + " takes " +
                                               std::to_string(program.params.size()) +
                                               " arguments, got " + std::to_string(args.size()));
  if (!module.verified.programs[programIndex].usesWorkspace)
    return uint64_t(0);
  auto plan = planWorkspace(program, paramValues(program, args));
  if (!plan.ok())
    return plan.takeStatus();
  return plan->totalBytes;
}

Status CudaRuntime::prepare(const LoadedModule &module, size_t programIndex, const KernelArgs *args,
                            CUstream stream) {
  if (programIndex >= module.verified.module.programs.size())
    return Status::error(ErrorCode::Usage,
                         "program index " + std::to_string(programIndex) + " out of range");
  if (!args)
    return kernel(module, programIndex).status();
  const Program &program = module.verified.module.programs[programIndex];
  const ProgramInfo &info = module.verified.programs[programIndex];
  TILUSVM_TRY(validateArgs(program, info, *args));
  ContextGuard guard(*impl_->api, impl_->context.get());
  TILUSVM_TRY(guard.status());
  TILUSVM_TRY(checkStream(stream));
  auto capture = capturing(stream);
  if (!capture.ok())
    return capture.takeStatus();
  if (*capture)
    return Status::error(ErrorCode::Usage,
                         "cannot prepare " + program.name +
                             " on a stream that is capturing a CUDA graph: prepare before "
                             "beginning the capture");
  TILUSVM_TRY(kernel(module, programIndex, classifyArgs(program, *args)).status());
  if (!info.usesWorkspace)
    return Status::success();
  auto plan = planWorkspace(program, paramValues(program, *args));
  if (!plan.ok())
    return plan.takeStatus();
  return impl_->workspace->reserve(stream, plan->totalBytes);
}

Status CudaRuntime::launch(const LoadedModule &module, size_t programIndex, const KernelArgs &args,
                           CUstream stream, const LaunchOptions &options) {
  if (programIndex >= module.verified.module.programs.size())
    return Status::error(ErrorCode::Usage,
                         "program index " + std::to_string(programIndex) + " out of range");
  const Program &program = module.verified.module.programs[programIndex];
  const ProgramInfo &info = module.verified.programs[programIndex];
  TILUSVM_TRY(validateArgs(program, info, args));
  auto geometry = launchGeometry(program, info, args);
  if (!geometry.ok())
    return geometry.takeStatus();
  if (geometry->empty())
    return Status::success();
  ContextGuard guard(*impl_->api, impl_->context.get());
  TILUSVM_TRY(guard.status());
  TILUSVM_TRY(checkStream(stream));
  auto capture = capturing(stream);
  if (!capture.ok())
    return capture.takeStatus();
  const bool inCapture = *capture;
  Specialization specialization = classifyArgs(program, args);
  const CompiledKernel *k = nullptr;
  if (inCapture || !impl_->lazyCompile) {
    k = readyKernel(module, programIndex, specialization);
    if (!k)
      return Status::error(
          ErrorCode::Usage,
          inCapture
              ? "cannot launch " + program.name +
                    " during CUDA graph capture: its kernel for these arguments (" +
                    className(specialization) +
                    ") is not compiled in this runtime, and a captured launch never compiles; " +
                    std::string(kPrepareFirst) +
                    " before capturing (tilusvm_kernel_prepare or CudaRuntime::prepare with "
                    "arguments like the launch's)"
              : "cannot launch " + program.name + ": its kernel for these arguments (" +
                    className(specialization) +
                    ") is not compiled, and this runtime compiles only when asked (lazy "
                    "compilation is off); " +
                    std::string(kPrepareFirst) +
                    " first (tilusvm_kernel_get, tilusvm_kernel_prepare or CudaRuntime::prepare)");
  } else {
    auto compiled = kernel(module, programIndex, specialization);
    if (!compiled.ok())
      return compiled.takeStatus();
    k = *compiled;
  }
  WorkspacePlan plan;
  if (info.usesWorkspace) {
    auto planned = planWorkspace(program, paramValues(program, args));
    if (!planned.ok())
      return planned.takeStatus();
    plan = std::move(planned.value());
  }
  std::vector<CUtensorMap> tensorMaps;
  TILUSVM_TRY(encodeTensorMaps(*impl_->api, program, info, args, tensorMaps));
  auto queue = [&](CUdeviceptr workspace) -> Status {
    std::vector<uint64_t> storage;
    storage.reserve(program.params.size() + 1);
    for (size_t i = 0; i < program.params.size(); ++i)
      storage.push_back(kernelParamBits(program.var(program.params[i]), args[i]));
    if (info.usesWorkspace)
      storage.push_back(uint64_t(workspace));
    std::vector<void *> params;
    for (uint64_t &slot : storage)
      params.push_back(&slot);
    for (CUtensorMap &map : tensorMaps)
      params.push_back(&map);
    const LaunchGeometry &g = *geometry;
    TILUSVM_TRY(TILUSVM_CU_CALL(*impl_->api, cuLaunchKernel, k->function, g.grid[0], g.grid[1],
                                g.grid[2], k->threads, 1, 1, unsigned(k->sharedBytes), stream,
                                params.data(), nullptr));
    // Not during capture: an event recorded into a graph cannot be waited on later.
    return inCapture ? Status::success() : impl_->noteLaunch(stream);
  };
  if (options.workspace != 0 && plan.totalBytes != 0) {
    if (options.workspace % kWorkspaceAlignment != 0)
      return Status::error(ErrorCode::Usage, "the workspace passed to " + program.name +
                                                 " is not aligned to " +
                                                 std::to_string(kWorkspaceAlignment) + " bytes");
    if (options.workspaceBytes < plan.totalBytes)
      return Status::error(ErrorCode::Usage, "the workspace passed to " + program.name + " has " +
                                                 std::to_string(options.workspaceBytes) +
                                                 " bytes; the launch needs " +
                                                 std::to_string(plan.totalBytes));
    TILUSVM_TRY(zeroCleanRegions(*impl_->api, plan, options.workspace, stream));
    return queue(options.workspace);
  }
  if (inCapture && plan.totalBytes != 0) {
    uint64_t held = impl_->workspace->bytesOn(stream);
    if (held < plan.totalBytes)
      return Status::error(
          ErrorCode::Usage,
          "cannot launch " + program.name + " during CUDA graph capture: it needs " +
              std::to_string(plan.totalBytes) + " bytes of workspace and this stream's holds " +
              std::to_string(held) + " (nothing is allocated during capture); " + kPrepareFirst +
              " with the launch's arguments on this stream before capturing "
              "(tilusvm_kernel_prepare or CudaRuntime::prepare), or pass a workspace of your own");
  }
  return impl_->workspace->launchWith(plan, stream, inCapture, queue);
}

Expected<std::vector<double>> CudaRuntime::benchmark(const LoadedModule &module,
                                                     size_t programIndex, const KernelArgs &args,
                                                     CUstream stream, int warmup, int iterations) {
  const DriverApi &api = *impl_->api;
  ContextGuard guard(api, impl_->context.get());
  TILUSVM_TRY(guard.status());
  for (int i = 0; i < warmup; ++i)
    TILUSVM_TRY(launch(module, programIndex, args, stream));
  std::vector<EventHandle> events;
  for (int i = 0; i < 2 * iterations; ++i) {
    auto event = EventHandle::create(api, true);
    if (!event.ok())
      return event.takeStatus();
    events.push_back(std::move(event.value()));
  }
  for (int i = 0; i < iterations; ++i) {
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuEventRecord, events[2 * i].get(), stream));
    TILUSVM_TRY(launch(module, programIndex, args, stream));
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuEventRecord, events[2 * i + 1].get(), stream));
  }
  std::vector<double> times;
  for (int i = 0; i < iterations; ++i) {
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuEventSynchronize, events[2 * i + 1].get()));
    float ms = 0;
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuEventElapsedTime, &ms, events[2 * i].get(),
                                events[2 * i + 1].get()));
    times.push_back(ms);
  }
  return times;
}

Expected<DeviceBuffer> CudaRuntime::allocate(uint64_t bytes) {
  ContextGuard guard(*impl_->api, impl_->context.get());
  TILUSVM_TRY(guard.status());
  return DeviceBuffer::allocate(*impl_->api, bytes);
}

Status CudaRuntime::copyToDevice(const DeviceBuffer &dst, const void *src, uint64_t bytes) {
  return impl_->copy(bytes, dst.bytes(), "into", [&] {
    return TILUSVM_CU_CALL(*impl_->api, cuMemcpyHtoD, dst.address(), src, size_t(bytes));
  });
}

Status CudaRuntime::copyToHost(void *dst, const DeviceBuffer &src, uint64_t bytes) {
  return impl_->copy(bytes, src.bytes(), "out of", [&] {
    return TILUSVM_CU_CALL(*impl_->api, cuMemcpyDtoH, dst, src.address(), size_t(bytes));
  });
}

Status CudaRuntime::synchronize(CUstream stream) {
  ContextGuard guard(*impl_->api, impl_->context.get());
  TILUSVM_TRY(guard.status());
  return TILUSVM_CU_CALL(*impl_->api, cuStreamSynchronize, stream);
}

CacheStats CudaRuntime::cacheStats() const {
  std::lock_guard lock(impl_->statsMutex);
  return impl_->stats;
}

uint64_t CudaRuntime::workspaceBytes() const { return impl_->workspace->bytesHeld(); }

uint64_t CudaRuntime::workspaceBytesOn(CUstream stream) const {
  return impl_->workspace->bytesOn(stream);
}

bool CudaRuntime::lazyCompile() const { return impl_->lazyCompile; }

CacheStats processCacheStats() {
  CacheStats stats;
  for (Counter c : {Counter::Compiles, Counter::MemoryHits, Counter::DiskHits, Counter::DiskCorrupt,
                    Counter::SharedHits})
    field(stats, c) = gProcessCounters[size_t(c)].load(std::memory_order_relaxed);
  return stats;
}

} // namespace tilus::cuda
