// Opening the CUDA driver at run time and owning its objects.
//
// Tilus VM must build and run on machines without a GPU, so libcuda is never linked: the one
// table in driver.h names every entry point, and this file resolves it once with dlopen +
// cuGetProcAddress. The RAII handles here are the only places that free driver objects.
#include "vm/cuda/driver.h"

#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <optional>
#include <utility>

namespace tilus::cuda {
namespace {

using GetProcAddressFn = CUresult(CUDAAPI *)(const char *, void **, int, cuuint64_t,
                                             CUdriverProcAddressQueryResult *);
using GetProcAddressV1Fn = CUresult(CUDAAPI *)(const char *, void **, int, cuuint64_t);
using DriverGetVersionFn = CUresult(CUDAAPI *)(int *);

Status driverError(std::string message) {
  return Status::error(ErrorCode::Cuda, std::move(message));
}

/// The driver once it is open (published after cuInit succeeded).
std::atomic<const DriverApi *> gOpenDriver{nullptr};

thread_local CUresult tLastCuResult = CUDA_SUCCESS;
/// What cuInit returned when it failed (every later cudaDriver() call reports it again).
CUresult gInitResult = CUDA_SUCCESS;

Status formatError(const DriverApi *api, CUresult result, const char *what) {
  const char *name = nullptr;
  const char *text = nullptr;
  if (api) {
    api->cuGetErrorName(result, &name);
    api->cuGetErrorString(result, &text);
  }
  std::string message = std::string(what) + ": ";
  message += name ? std::string(name) : "CUDA error " + std::to_string(int(result));
  if (text)
    message += std::string(" (") + text + ")";
  return driverError(std::move(message));
}

/// Resolve one symbol through cuGetProcAddress (v2 when the driver has it, else v1).
Status resolve(GetProcAddressFn getV2, GetProcAddressV1Fn getV1, int version, const char *name,
               void **out) {
  CUresult result = CUDA_SUCCESS;
  if (getV2) {
    CUdriverProcAddressQueryResult query = CU_GET_PROC_ADDRESS_SUCCESS;
    result = getV2(name, out, version, CU_GET_PROC_ADDRESS_DEFAULT, &query);
    if (result == CUDA_SUCCESS && query != CU_GET_PROC_ADDRESS_SUCCESS)
      return driverError(std::string("the CUDA driver has no entry point ") + name +
                         " for version " + std::to_string(version));
  } else {
    result = getV1(name, out, version, CU_GET_PROC_ADDRESS_DEFAULT);
  }
  if (result != CUDA_SUCCESS || *out == nullptr)
    return driverError(std::string("the CUDA driver has no entry point ") + name + " (error " +
                       std::to_string(int(result)) + ")");
  return Status::success();
}

Expected<DriverApi> openDriver() {
  // RTLD_NODELETE: the driver stays loaded for the life of the process, as CUDA expects.
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
  if (!handle)
    return driverError(kNoDriverMessage);
  auto getV2 = reinterpret_cast<GetProcAddressFn>(dlsym(handle, "cuGetProcAddress_v2"));
  auto getV1 = reinterpret_cast<GetProcAddressV1Fn>(dlsym(handle, "cuGetProcAddress"));
  auto getVersion = reinterpret_cast<DriverGetVersionFn>(dlsym(handle, "cuDriverGetVersion"));
  if ((!getV2 && !getV1) || !getVersion)
    return driverError("libcuda.so.1 has no cuGetProcAddress (driver older than CUDA 11.3)");
  DriverApi api;
  if (CUresult r = getVersion(&api.driverVersion); r != CUDA_SUCCESS)
    return driverError("cuDriverGetVersion failed (error " + std::to_string(int(r)) + ")");
  if (api.driverVersion < 11030)
    return driverError("CUDA driver version " + std::to_string(api.driverVersion) +
                       " is older than the 11030 that Tilus VM needs");
  // Ask for the prototypes of the cuda.h we were built with, or older where the driver is.
  int version = std::min(api.driverVersion, CUDA_VERSION);
#define TILUSVM_CUDA_RESOLVE(name)                                                                 \
  TILUSVM_TRY(resolve(getV2, getV1, version, #name, reinterpret_cast<void **>(&api.name)));
  TILUSVM_CUDA_DRIVER_ENTRY_POINTS(TILUSVM_CUDA_RESOLVE)
#undef TILUSVM_CUDA_RESOLVE
  // Exactly the version whose prototype cuda.h declares; left null on older drivers or when
  // the driver does not resolve it (callers check).
#define TILUSVM_CUDA_RESOLVE_VERSIONED(name, since)                                                \
  if (api.driverVersion >= (since) &&                                                              \
      !resolve(getV2, getV1, (since), #name, reinterpret_cast<void **>(&api.name)).ok())           \
    api.name = nullptr;
  TILUSVM_CUDA_DRIVER_VERSIONED_ENTRY_POINTS(TILUSVM_CUDA_RESOLVE_VERSIONED)
#undef TILUSVM_CUDA_RESOLVE_VERSIONED
  if (CUresult r = api.cuInit(0); r != CUDA_SUCCESS) {
    gInitResult = r;
    return formatError(&api, r, "cuInit");
  }
  return api;
}

} // namespace

Expected<const DriverApi *> cudaDriver() {
  // Never destroyed: handles that outlive static destruction may still call the driver.
  static std::once_flag once;
  static Expected<DriverApi> *loaded = nullptr;
  std::call_once(once, [] {
    loaded = new Expected<DriverApi>(openDriver());
    if (loaded->ok())
      gOpenDriver.store(&loaded->value());
  });
  if (!loaded->ok()) {
    if (gInitResult != CUDA_SUCCESS) // written before call_once returned, read-only since
      tLastCuResult = gInitResult;
    return loaded->status();
  }
  return &loaded->value();
}

Status cudaStatus(CUresult result, const char *what) {
  if (result == CUDA_SUCCESS)
    return Status::success();
  tLastCuResult = result;
  return formatError(gOpenDriver.load(), result, what);
}

CUresult lastCuResult() { return tLastCuResult; }

void resetLastCuResult() { tLastCuResult = CUDA_SUCCESS; }

// ---- PrimaryContext --------------------------------------------------------------------------

Expected<PrimaryContext> PrimaryContext::retain(const DriverApi &api, int ordinal) {
  PrimaryContext context;
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDeviceGet, &context.device_, ordinal));
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuDevicePrimaryCtxRetain, &context.context_, context.device_));
  context.api_ = &api;
  return context;
}

bool PrimaryContext::alive() const {
  if (!api_ || !context_)
    return false;
  unsigned flags = 0;
  int active = 0;
  return api_->cuDevicePrimaryCtxGetState(device_, &flags, &active) == CUDA_SUCCESS && active;
}

PrimaryContext::~PrimaryContext() {
  if (api_ && context_)
    api_->cuDevicePrimaryCtxRelease(device_);
}

void PrimaryContext::swap(PrimaryContext &other) noexcept {
  std::swap(api_, other.api_);
  std::swap(device_, other.device_);
  std::swap(context_, other.context_);
}

// ---- ContextGuard ----------------------------------------------------------------------------

ContextGuard::ContextGuard(const DriverApi &api, CUcontext context) : api_(api) {
  status_ = TILUSVM_CU_CALL(api_, cuCtxPushCurrent, context);
  pushed_ = status_.ok();
}

ContextGuard::~ContextGuard() {
  if (pushed_) {
    CUcontext popped = nullptr;
    api_.cuCtxPopCurrent(&popped);
  }
}

// ---- ModuleHandle ----------------------------------------------------------------------------

ModuleHandle ModuleHandle::adopt(const DriverApi &api, CUmodule module) {
  ModuleHandle handle;
  handle.api_ = &api;
  handle.module_ = module;
  api.cuCtxGetCurrent(&handle.context_);
  return handle;
}

ModuleHandle::~ModuleHandle() {
  if (!api_ || !module_)
    return;
  ContextGuard guard(*api_, context_);
  api_->cuModuleUnload(module_);
}

void ModuleHandle::swap(ModuleHandle &other) noexcept {
  std::swap(api_, other.api_);
  std::swap(context_, other.context_);
  std::swap(module_, other.module_);
}

// ---- DeviceBuffer ----------------------------------------------------------------------------

Expected<DeviceBuffer> DeviceBuffer::allocate(const DriverApi &api, uint64_t bytes) {
  DeviceBuffer buffer;
  buffer.api_ = &api;
  if (bytes == 0)
    return buffer;
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuMemAlloc, &buffer.address_, size_t(bytes)));
  buffer.bytes_ = bytes;
  api.cuCtxGetCurrent(&buffer.context_);
  return buffer;
}

DeviceBuffer::~DeviceBuffer() {
  if (!api_ || !address_)
    return;
  ContextGuard guard(*api_, context_);
  api_->cuMemFree(address_);
}

void DeviceBuffer::swap(DeviceBuffer &other) noexcept {
  std::swap(api_, other.api_);
  std::swap(context_, other.context_);
  std::swap(address_, other.address_);
  std::swap(bytes_, other.bytes_);
}

// ---- EventHandle -----------------------------------------------------------------------------

Expected<EventHandle> EventHandle::create(const DriverApi &api, bool timing) {
  EventHandle event;
  unsigned flags = timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING;
  TILUSVM_TRY(TILUSVM_CU_CALL(api, cuEventCreate, &event.event_, flags));
  event.api_ = &api;
  api.cuCtxGetCurrent(&event.context_);
  return event;
}

EventHandle::~EventHandle() {
  if (!api_ || !event_)
    return;
  ContextGuard guard(*api_, context_);
  api_->cuEventDestroy(event_);
}

void EventHandle::swap(EventHandle &other) noexcept {
  std::swap(api_, other.api_);
  std::swap(context_, other.context_);
  std::swap(event_, other.event_);
}

} // namespace tilus::cuda
