// The CUDA driver API, opened at run time: nothing in Tilus VM links against libcuda.
//
// Every driver entry point the runtime uses is listed once in TILUSVM_CUDA_DRIVER_ENTRY_POINTS
// (or, when its plain name changed prototype in a later CUDA, with that version in
// TILUSVM_CUDA_DRIVER_VERSIONED_ENTRY_POINTS) below. cudaDriver() opens "libcuda.so.1" with dlopen,
// takes cuGetProcAddress (and cuDriverGetVersion) with dlsym, and resolves every other entry
// through cuGetProcAddress for the version min(driver, cuda.h), so that each pointer has exactly
// the prototype that cuda.h declares (cuMemAlloc resolves to cuMemAlloc_v2, and so on). A machine
// without the driver gets a Status that says so ("no CUDA driver (libcuda.so.1 not found)"), never
// a crash.
//
// Driver objects are owned by RAII, move-only handles: the primary context of a device, a
// loaded module, a device allocation, an event. Each remembers the context it was created in
// and makes it current while it frees the object, so a handle may be destroyed on any thread.
// Destructors ignore errors (there is nobody to report them to); every other call returns a
// Status.
#pragma once

#include "isa/status.h"

#include <cuda.h>

#include <cstdint>
#include <string>

namespace tilus::cuda {

// X(name): `name` as spelled in cuda.h; the macro there may map it to a versioned symbol
// (cuMemAlloc -> cuMemAlloc_v2), which is the prototype the member gets. Only entry points whose
// newest prototype up to cuda.h's CUDA_VERSION is the one cuda.h declares under `name` belong
// here; the others go to TILUSVM_CUDA_DRIVER_VERSIONED_ENTRY_POINTS.
#define TILUSVM_CUDA_DRIVER_ENTRY_POINTS(X)                                                        \
  X(cuInit)                                                                                        \
  X(cuGetErrorName)                                                                                \
  X(cuGetErrorString)                                                                              \
  X(cuDeviceGetCount)                                                                              \
  X(cuDeviceGet)                                                                                   \
  X(cuDeviceGetName)                                                                               \
  X(cuDeviceGetAttribute)                                                                          \
  X(cuDeviceTotalMem)                                                                              \
  X(cuDevicePrimaryCtxRetain)                                                                      \
  X(cuDevicePrimaryCtxRelease)                                                                     \
  X(cuDevicePrimaryCtxGetState)                                                                    \
  X(cuCtxPushCurrent)                                                                              \
  X(cuCtxPopCurrent)                                                                               \
  X(cuCtxGetCurrent)                                                                               \
  X(cuModuleLoadDataEx)                                                                            \
  X(cuModuleUnload)                                                                                \
  X(cuModuleGetFunction)                                                                           \
  X(cuFuncSetAttribute)                                                                            \
  X(cuFuncGetAttribute)                                                                            \
  X(cuMemAlloc)                                                                                    \
  X(cuMemFree)                                                                                     \
  X(cuMemcpyHtoD)                                                                                  \
  X(cuMemcpyHtoDAsync)                                                                             \
  X(cuMemcpyDtoH)                                                                                  \
  X(cuMemcpyDtoDAsync)                                                                             \
  X(cuMemsetD8)                                                                                    \
  X(cuMemsetD8Async)                                                                               \
  X(cuLaunchKernel)                                                                                \
  X(cuStreamCreate)                                                                                \
  X(cuStreamDestroy)                                                                               \
  X(cuStreamSynchronize)                                                                           \
  X(cuEventCreate)                                                                                 \
  X(cuEventDestroy)                                                                                \
  X(cuEventRecord)                                                                                 \
  X(cuEventQuery)                                                                                  \
  X(cuEventSynchronize)                                                                            \
  X(cuEventElapsedTime)                                                                            \
  X(cuStreamBeginCapture)                                                                          \
  X(cuStreamEndCapture)                                                                            \
  X(cuStreamIsCapturing)                                                                           \
  X(cuGraphLaunch)                                                                                 \
  X(cuGraphExecDestroy)                                                                            \
  X(cuGraphDestroy)

// X(name, version): entry points whose plain name a newer CUDA version gave another prototype
// (cuGetProcAddress("cuStreamGetCtx", 13000) is cuStreamGetCtx_v2, with a third parameter,
// while cuda.h declares the two-parameter cuStreamGetCtx). `version` is the CUDA version of the
// prototype that cuda.h declares under `name`; the entry is resolved for exactly that version,
// and only when the driver is at least that version: on an older driver (or one that does not
// resolve it) the member stays null and callers check it before calling.
#define TILUSVM_CUDA_DRIVER_VERSIONED_ENTRY_POINTS(X)                                              \
  X(cuCtxSynchronize, 2000)                                                                        \
  X(cuCtxGetDevice, 2000)                                                                          \
  X(cuCtxCreate, 12050)                                                                            \
  X(cuCtxDestroy, 4000)                                                                            \
  X(cuGraphInstantiateWithFlags, 11040)                                                            \
  X(cuStreamGetCtx, 9020)                                                                          \
  X(cuStreamGetCaptureInfo, 12030)                                                                 \
  X(cuTensorMapEncodeTiled, 12000)

/// The resolved driver: one function pointer per entry point.
struct DriverApi {
  int driverVersion = 0; // cuDriverGetVersion, e.g. 13000
#define TILUSVM_CUDA_MEMBER(name) decltype(&::name) name = nullptr;
#define TILUSVM_CUDA_VERSIONED_MEMBER(name, version) decltype(&::name) name = nullptr;
  TILUSVM_CUDA_DRIVER_ENTRY_POINTS(TILUSVM_CUDA_MEMBER)
  TILUSVM_CUDA_DRIVER_VERSIONED_ENTRY_POINTS(TILUSVM_CUDA_VERSIONED_MEMBER)
#undef TILUSVM_CUDA_VERSIONED_MEMBER
#undef TILUSVM_CUDA_MEMBER
};

/// The message given when libcuda.so.1 cannot be opened.
inline constexpr const char *kNoDriverMessage = "no CUDA driver (libcuda.so.1 not found)";

/// The driver, opened and initialised (cuInit) on first use; later calls return the same
/// object or the same error. Thread-safe.
Expected<const DriverApi *> cudaDriver();

/// A Status (code `cuda`) for a failed driver call: "cuModuleLoadData: CUDA_ERROR_INVALID_PTX
/// (a PTX JIT compilation failed)". Success gives an ok Status.
Status cudaStatus(CUresult result, const char *what);

/// The CUresult of the most recent driver call on this thread that failed through cudaStatus()
/// (CUDA_SUCCESS when none failed since resetLastCuResult()).
CUresult lastCuResult();
void resetLastCuResult();

/// The Status of one driver call: TILUSVM_CU_CALL(api, cuMemFree, ptr).
#define TILUSVM_CU_CALL(api, fn, ...) ::tilus::cuda::cudaStatus((api).fn(__VA_ARGS__), #fn)

/// The primary context of one device (retained on creation, released on destruction).
class PrimaryContext {
public:
  PrimaryContext() = default;
  static Expected<PrimaryContext> retain(const DriverApi &api, int ordinal);
  PrimaryContext(PrimaryContext &&other) noexcept { swap(other); }
  PrimaryContext &operator=(PrimaryContext other) noexcept {
    swap(other);
    return *this;
  }
  PrimaryContext(const PrimaryContext &) = delete;
  ~PrimaryContext();

  CUcontext get() const { return context_; }
  CUdevice device() const { return device_; }
  /// Whether the primary context is still active: false once it was reset or destroyed, or
  /// the driver is shutting down (then nothing may be called in it, not even a release).
  bool alive() const;
  /// Forget the context without releasing it (for a context that is no longer alive).
  void abandon() { context_ = nullptr; }

private:
  void swap(PrimaryContext &other) noexcept;
  const DriverApi *api_ = nullptr;
  CUdevice device_ = 0;
  CUcontext context_ = nullptr;
};

/// Makes a context current on this thread for the guard's lifetime (push / pop).
class [[nodiscard]] ContextGuard {
public:
  ContextGuard(const DriverApi &api, CUcontext context);
  ContextGuard(const ContextGuard &) = delete;
  ContextGuard &operator=(const ContextGuard &) = delete;
  ~ContextGuard();
  /// Whether the push succeeded (when it did not, status() says why).
  const Status &status() const { return status_; }

private:
  const DriverApi &api_;
  bool pushed_ = false;
  Status status_;
};

/// A loaded module (cuModuleUnload on destruction).
class ModuleHandle {
public:
  ModuleHandle() = default;
  /// Take ownership of `module`, loaded in the current context.
  static ModuleHandle adopt(const DriverApi &api, CUmodule module);
  ModuleHandle(ModuleHandle &&other) noexcept { swap(other); }
  ModuleHandle &operator=(ModuleHandle other) noexcept {
    swap(other);
    return *this;
  }
  ModuleHandle(const ModuleHandle &) = delete;
  ~ModuleHandle();

  CUmodule get() const { return module_; }

private:
  void swap(ModuleHandle &other) noexcept;
  const DriverApi *api_ = nullptr;
  CUcontext context_ = nullptr;
  CUmodule module_ = nullptr;
};

/// A device allocation of `bytes` bytes (cuMemFree on destruction).
class DeviceBuffer {
public:
  DeviceBuffer() = default;
  /// Allocate in the current context. A zero-byte request allocates nothing (address 0).
  static Expected<DeviceBuffer> allocate(const DriverApi &api, uint64_t bytes);
  DeviceBuffer(DeviceBuffer &&other) noexcept { swap(other); }
  DeviceBuffer &operator=(DeviceBuffer other) noexcept {
    swap(other);
    return *this;
  }
  DeviceBuffer(const DeviceBuffer &) = delete;
  ~DeviceBuffer();

  CUdeviceptr address() const { return address_; }
  uint64_t bytes() const { return bytes_; }

private:
  void swap(DeviceBuffer &other) noexcept;
  const DriverApi *api_ = nullptr;
  CUcontext context_ = nullptr;
  CUdeviceptr address_ = 0;
  uint64_t bytes_ = 0;
};

/// A CUDA event (cuEventDestroy on destruction).
class EventHandle {
public:
  EventHandle() = default;
  /// Create in the current context; `timing` = false creates CU_EVENT_DISABLE_TIMING events.
  static Expected<EventHandle> create(const DriverApi &api, bool timing);
  EventHandle(EventHandle &&other) noexcept { swap(other); }
  EventHandle &operator=(EventHandle other) noexcept {
    swap(other);
    return *this;
  }
  EventHandle(const EventHandle &) = delete;
  ~EventHandle();

  CUevent get() const { return event_; }

private:
  void swap(EventHandle &other) noexcept;
  const DriverApi *api_ = nullptr;
  CUcontext context_ = nullptr;
  CUevent event_ = nullptr;
};

} // namespace tilus::cuda
