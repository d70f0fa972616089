// The C API of libtilusvm (vm/include/tilusvm.h) over the C++ runtime.
//
// A C caller cannot catch C++ exceptions, and the library must never abort its host process,
// so every exported function is one error boundary: its body runs inside guarded(), which
// turns a failed Status into a status code plus the thread-local message, and any exception
// (std::bad_alloc included) into TILUSVM_ERROR_INTERNAL. Handles are plain heap objects
// holding the C++ values.
#include "vm/include/tilusvm.h"

#include "loader/loader.h"
#include "vm/capi_internal.h"
#include "vm/cpu/interpreter.h"
#include "vm/cuda/runtime.h"

#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

struct tilusvm_module_s {
  tilus::cuda::LoadedModule loaded;
  std::vector<std::vector<std::string>> paramDtypes; // [program][param], kept for out strings
};

struct tilusvm_runtime_s {
  std::unique_ptr<tilus::cuda::CudaRuntime> runtime;
};

struct tilusvm_kernel_s {
  tilusvm_runtime_s *runtime = nullptr;
  tilusvm_module_s *module = nullptr;
  size_t index = 0;
};

namespace {

using tilus::ErrorCode;
using tilus::Status;

thread_local std::string tLastError;
thread_local int tLastCuResult = 0;

int fail(int code, std::string message) {
  // A NUL byte (from an assert message or a string of a module) would end the message that
  // tilusvm_last_error() returns early, or leave it empty: it reads as the two characters \0.
  for (size_t at = message.find('\0'); at != std::string::npos; at = message.find('\0', at + 2))
    message.replace(at, 1, "\\0");
  tLastError = std::move(message);
  // Set by the driver layer when a call failed during this API call (reset on entry).
  tLastCuResult = code == TILUSVM_ERROR_CUDA || code == TILUSVM_ERROR_NO_DEVICE
                      ? int(tilus::cuda::lastCuResult())
                      : 0;
  return code;
}

int codeOf(const Status &status) {
  const tilus::Diagnostic &d = status.first();
  if (d.code == ErrorCode::Bytecode)
    return TILUSVM_ERROR_BYTECODE;
  if (d.code == ErrorCode::Io)
    return TILUSVM_ERROR_IO;
  if (d.code == ErrorCode::Usage)
    return tilus::cuda::needsPrepare(status) ? TILUSVM_ERROR_NOT_PREPARED
                                             : TILUSVM_ERROR_INVALID_ARGUMENT;
  if (d.code == ErrorCode::Runtime || d.code == ErrorCode::Race || d.code == ErrorCode::Assert)
    return TILUSVM_ERROR_RUNTIME;
  if (d.code == ErrorCode::Jit)
    return TILUSVM_ERROR_JIT;
  if (d.code == ErrorCode::Unsupported)
    return TILUSVM_ERROR_UNSUPPORTED;
  if (d.code == ErrorCode::Cuda) {
    if (d.message == tilus::cuda::kNoDriverMessage)
      return TILUSVM_ERROR_NO_DRIVER;
    if (d.message.rfind("no CUDA device", 0) == 0 ||
        d.message.find("CUDA_ERROR_NO_DEVICE") != std::string::npos)
      return TILUSVM_ERROR_NO_DEVICE;
    return TILUSVM_ERROR_CUDA;
  }
  return TILUSVM_ERROR_CHECK; // the ISA section 6 codes: the checker rejected the module
}

/// Diagnostics one per line; those without a location are just their message.
std::string messageOf(const Status &status) {
  std::string text;
  for (const tilus::Diagnostic &d : status.diagnostics()) {
    if (!text.empty())
      text += '\n';
    text += d.location.known() ? d.toString() : d.message;
  }
  return text;
}

int failWith(const Status &status) { return fail(codeOf(status), messageOf(status)); }

/// The one error boundary of an exported function.
template <typename Body> int guarded(Body &&body) noexcept {
  tilus::cuda::resetLastCuResult();
  return tilus::capi::errorBoundary(std::forward<Body>(body));
}

/// The destroy functions: frees a handle (NULL is allowed) inside the error boundary.
template <typename Handle> int destroyHandle(Handle handle) {
  return guarded([&]() -> int {
    delete handle;
    return TILUSVM_OK;
  });
}

int nullArgument(const char *function, const char *what) {
  return fail(TILUSVM_ERROR_INVALID_ARGUMENT, std::string(function) + ": " + what + " is NULL");
}

int adopt(tilus::Expected<tilus::VerifiedModule> verified, tilusvm_module *out) {
  if (!verified.ok())
    return failWith(verified.status());
  auto module = std::make_unique<tilusvm_module_s>();
  module->loaded = tilus::cuda::LoadedModule::from(std::move(verified.value()));
  for (const tilus::Program &program : module->loaded.verified.module.programs) {
    std::vector<std::string> dtypes;
    for (tilus::VarId id : program.params)
      dtypes.push_back(program.var(id).dtype.name());
    module->paramDtypes.push_back(std::move(dtypes));
  }
  *out = module.release();
  return TILUSVM_OK;
}

/// Set `index` to the program called `name`; a failure code when there is none.
int findProgram(tilusvm_module module, const char *name, size_t &index) {
  if (!name)
    return fail(TILUSVM_ERROR_INVALID_ARGUMENT, "program name is NULL");
  const auto &programs = module->loaded.verified.module.programs;
  for (size_t i = 0; i < programs.size(); ++i) {
    if (programs[i].name == name) {
      index = i;
      return TILUSVM_OK;
    }
  }
  std::string names;
  for (const auto &p : programs)
    names += (names.empty() ? "" : ", ") + p.name;
  return fail(TILUSVM_ERROR_NOT_FOUND,
              std::string("no program named ") + name + " (module has: " + names + ")");
}

tilus::KernelArgs toKernelArgs(const tilusvm_arg *args, size_t count) {
  tilus::KernelArgs out(count);
  for (size_t i = 0; i < count; ++i) {
    out[i].scalarBits = args[i].scalar_bits;
    out[i].pointer = args[i].pointer;
    out[i].byteSize = args[i].byte_size;
  }
  return out;
}

/// Check args against the program (INVALID_ARGUMENT with the reason) and convert them.
int checkedArgs(const tilus::cuda::LoadedModule &loaded, size_t index, const tilusvm_arg *args,
                size_t count, tilus::KernelArgs &out) {
  out = toKernelArgs(args, count);
  Status valid = tilus::cuda::validateArgs(loaded.verified.module.programs[index],
                                           loaded.verified.programs[index], out);
  return valid.ok() ? TILUSVM_OK : fail(TILUSVM_ERROR_INVALID_ARGUMENT, messageOf(valid));
}

/// The index of `program` in `module` and the checked arguments of a run of it: `function`'s
/// NULL-args error, then findProgram's, then checkedArgs'.
int findProgramArgs(const char *function, tilusvm_module module, const char *program,
                    const tilusvm_arg *args, size_t count, size_t &index, tilus::KernelArgs &out) {
  if (!args && count != 0)
    return nullArgument(function, "args");
  if (int r = findProgram(module, program, index); r != TILUSVM_OK)
    return r;
  return checkedArgs(module->loaded, index, args, count, out);
}

/// The size of version 1 of tilusvm_runtime_options (the struct only grows).
constexpr size_t kOptionsV1Size = offsetof(tilusvm_runtime_options, lazy_compile) + sizeof(int);

/// Copy of a caller's versioned struct: `size` bytes of it, the rest from `defaults`. Bytes past
/// what this library knows must be zero. Returns false (message set) on a bad size.
template <typename T>
int readVersioned(const T *in, size_t minSize, const T &defaults, T &out, const char *function) {
  size_t size = in->struct_size;
  if (size < minSize)
    return fail(TILUSVM_ERROR_INVALID_ARGUMENT,
                std::string(function) + ": struct_size is " + std::to_string(size) +
                    ", less than the " + std::to_string(minSize) +
                    " bytes of the oldest version (initialise it with sizeof or the _init "
                    "function)");
  if (size > sizeof(T)) {
    const unsigned char *bytes = reinterpret_cast<const unsigned char *>(in);
    for (size_t i = sizeof(T); i < size; ++i)
      if (bytes[i] != 0)
        return fail(TILUSVM_ERROR_UNSUPPORTED,
                    std::string(function) + ": the options set fields that this library " +
                        "version (" + TILUSVM_VERSION + ") does not know (struct_size " +
                        std::to_string(size) + ", known " + std::to_string(sizeof(T)) + ")");
  }
  out = defaults;
  std::memcpy(&out, in, std::min(size, sizeof(T)));
  out.struct_size = sizeof(T);
  return TILUSVM_OK;
}

tilusvm_runtime_options defaultOptions() {
  tilusvm_runtime_options options;
  std::memset(&options, 0, sizeof options);
  options.struct_size = sizeof options;
  options.device = -1;
  options.cache_dir = nullptr;
  options.log_level = TILUSVM_LOG_DEFAULT;
  options.log_callback = nullptr;
  options.log_user_data = nullptr;
  options.lazy_compile = 1;
  return options;
}

/// Write `stats` into the caller's struct, as many bytes as it says it has.
int writeStats(const tilus::cuda::CacheStats &cache, uint64_t workspaceBytes, tilusvm_stats *out,
               const char *function) {
  if (!out)
    return nullArgument(function, "out");
  size_t size = out->struct_size;
  if (size < sizeof(size_t))
    return fail(TILUSVM_ERROR_INVALID_ARGUMENT, std::string(function) + ": out->struct_size is " +
                                                    std::to_string(size) +
                                                    " (set it to sizeof(tilusvm_stats))");
  tilusvm_stats stats;
  std::memset(&stats, 0, sizeof stats);
  stats.struct_size = std::min(size, sizeof stats);
  stats.compiles = cache.compiles;
  stats.disk_hits = cache.diskHits;
  stats.shared_hits = cache.sharedHits;
  stats.memory_hits = cache.memoryHits;
  stats.disk_corrupt = cache.diskCorrupt;
  stats.workspace_bytes = workspaceBytes;
  std::memcpy(out, &stats, stats.struct_size);
  return TILUSVM_OK;
}

} // namespace

namespace tilus::capi {

int failWithMessage(int code, std::string message) { return fail(code, std::move(message)); }
int failWithStatus(const Status &status) { return failWith(status); }
int adoptModule(Expected<VerifiedModule> verified, tilusvm_module *out) {
  return adopt(std::move(verified), out);
}

} // namespace tilus::capi

extern "C" {

TILUSVM_API const char *tilusvm_last_error(void) { return tLastError.c_str(); }

TILUSVM_API const char *tilusvm_status_name(int status) {
  switch (status) {
  case TILUSVM_OK:
    return "TILUSVM_OK";
  case TILUSVM_ERROR_INVALID_ARGUMENT:
    return "TILUSVM_ERROR_INVALID_ARGUMENT";
  case TILUSVM_ERROR_NOT_FOUND:
    return "TILUSVM_ERROR_NOT_FOUND";
  case TILUSVM_ERROR_IO:
    return "TILUSVM_ERROR_IO";
  case TILUSVM_ERROR_BYTECODE:
    return "TILUSVM_ERROR_BYTECODE";
  case TILUSVM_ERROR_CHECK:
    return "TILUSVM_ERROR_CHECK";
  case TILUSVM_ERROR_NO_DRIVER:
    return "TILUSVM_ERROR_NO_DRIVER";
  case TILUSVM_ERROR_NO_DEVICE:
    return "TILUSVM_ERROR_NO_DEVICE";
  case TILUSVM_ERROR_CUDA:
    return "TILUSVM_ERROR_CUDA";
  case TILUSVM_ERROR_JIT:
    return "TILUSVM_ERROR_JIT";
  case TILUSVM_ERROR_RUNTIME:
    return "TILUSVM_ERROR_RUNTIME";
  case TILUSVM_ERROR_UNSUPPORTED:
    return "TILUSVM_ERROR_UNSUPPORTED";
  case TILUSVM_ERROR_INTERNAL:
    return "TILUSVM_ERROR_INTERNAL";
  case TILUSVM_ERROR_NOT_PREPARED:
    return "TILUSVM_ERROR_NOT_PREPARED";
  }
  return "TILUSVM_UNKNOWN_STATUS";
}

TILUSVM_API const char *tilusvm_version(void) { return TILUSVM_VERSION; }

TILUSVM_API int tilusvm_module_load(const void *bytes, size_t size, tilusvm_module *out) {
  return guarded([&]() -> int {
    if (!out)
      return nullArgument("tilusvm_module_load", "out");
    *out = nullptr;
    if (!bytes && size != 0)
      return nullArgument("tilusvm_module_load", "bytes");
    std::span<const uint8_t> span(static_cast<const uint8_t *>(bytes), size);
    return adopt(tilus::loadModule(span), out);
  });
}

TILUSVM_API int tilusvm_module_load_file(const char *path, tilusvm_module *out) {
  return guarded([&]() -> int {
    if (!out)
      return nullArgument("tilusvm_module_load_file", "out");
    *out = nullptr;
    if (!path)
      return nullArgument("tilusvm_module_load_file", "path");
    tilus::CheckOptions options;
    options.fileName = path;
    return adopt(tilus::loadModuleFile(path, options), out);
  });
}

TILUSVM_API int tilusvm_module_destroy(tilusvm_module module) { return destroyHandle(module); }

TILUSVM_API int tilusvm_module_program_count(tilusvm_module module, size_t *out) {
  return guarded([&]() -> int {
    if (!module || !out)
      return nullArgument("tilusvm_module_program_count", module ? "out" : "module");
    *out = module->loaded.verified.module.programs.size();
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_module_program_name(tilusvm_module module, size_t index, const char **out) {
  return guarded([&]() -> int {
    if (!module || !out)
      return nullArgument("tilusvm_module_program_name", module ? "out" : "module");
    const auto &programs = module->loaded.verified.module.programs;
    if (index >= programs.size())
      return fail(TILUSVM_ERROR_NOT_FOUND, "program index " + std::to_string(index) +
                                               " out of range (module has " +
                                               std::to_string(programs.size()) + ")");
    *out = programs[index].name.c_str();
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_module_find_program(tilusvm_module module, const char *name,
                                            size_t *out_index) {
  return guarded([&]() -> int {
    if (!module || !out_index)
      return nullArgument("tilusvm_module_find_program", module ? "out_index" : "module");
    return findProgram(module, name, *out_index);
  });
}

TILUSVM_API int tilusvm_program_param_count(tilusvm_module module, const char *program,
                                            size_t *out) {
  return guarded([&]() -> int {
    if (!module || !out)
      return nullArgument("tilusvm_program_param_count", module ? "out" : "module");
    size_t index = 0;
    if (int r = findProgram(module, program, index); r != TILUSVM_OK)
      return r;
    *out = module->loaded.verified.module.programs[index].params.size();
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_program_param(tilusvm_module module, const char *program, size_t index,
                                      const char **out_name, const char **out_dtype,
                                      int *out_is_pointer) {
  return guarded([&]() -> int {
    if (!module)
      return nullArgument("tilusvm_program_param", "module");
    size_t p = 0;
    if (int r = findProgram(module, program, p); r != TILUSVM_OK)
      return r;
    const tilus::Program &prog = module->loaded.verified.module.programs[p];
    if (index >= prog.params.size())
      return fail(TILUSVM_ERROR_NOT_FOUND, "parameter index " + std::to_string(index) +
                                               " out of range (" + prog.name + " has " +
                                               std::to_string(prog.params.size()) + ")");
    const tilus::Variable &var = prog.var(prog.params[index]);
    if (out_name)
      *out_name = var.name.c_str();
    if (out_dtype)
      *out_dtype = module->paramDtypes[p][index].c_str();
    if (out_is_pointer)
      *out_is_pointer = var.kind == tilus::VarKind::Pointer ? 1 : 0;
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_run_cpu(tilusvm_module module, const char *program, const tilusvm_arg *args,
                                size_t num_args, int checked) {
  return guarded([&]() -> int {
    if (!module)
      return nullArgument("tilusvm_run_cpu", "module");
    size_t index = 0;
    tilus::KernelArgs kernelArgs;
    if (int r =
            findProgramArgs("tilusvm_run_cpu", module, program, args, num_args, index, kernelArgs);
        r != TILUSVM_OK)
      return r;
    tilus::CpuRunOptions options;
    options.checked = checked != 0;
    Status ran = tilus::runOnCpu(module->loaded.verified, index, kernelArgs, options);
    return ran.ok() ? TILUSVM_OK : failWith(ran);
  });
}

TILUSVM_API int tilusvm_runtime_create(int device, tilusvm_runtime *out) {
  return guarded([&]() -> int {
    if (!out)
      return nullArgument("tilusvm_runtime_create", "out");
    *out = nullptr;
    tilus::cuda::RuntimeOptions options;
    options.device = device;
    auto runtime = tilus::cuda::CudaRuntime::create(options);
    if (!runtime.ok())
      return failWith(runtime.status());
    *out = new tilusvm_runtime_s{std::move(runtime.value())};
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_runtime_destroy(tilusvm_runtime runtime) { return destroyHandle(runtime); }

TILUSVM_API int tilusvm_runtime_device_name(tilusvm_runtime runtime, const char **out) {
  return guarded([&]() -> int {
    if (!runtime || !out)
      return nullArgument("tilusvm_runtime_device_name", runtime ? "out" : "runtime");
    *out = runtime->runtime->device().name.c_str();
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_runtime_compute_capability(tilusvm_runtime runtime, int *out) {
  return guarded([&]() -> int {
    if (!runtime || !out)
      return nullArgument("tilusvm_runtime_compute_capability", runtime ? "out" : "runtime");
    *out = runtime->runtime->device().computeCapability;
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_prepare(tilusvm_runtime runtime, tilusvm_module module,
                                const char *program) {
  return guarded([&]() -> int {
    if (!runtime || !module)
      return nullArgument("tilusvm_prepare", runtime ? "module" : "runtime");
    size_t index = 0;
    if (int r = findProgram(module, program, index); r != TILUSVM_OK)
      return r;
    auto kernel = runtime->runtime->kernel(module->loaded, index);
    return kernel.ok() ? TILUSVM_OK : failWith(kernel.status());
  });
}

TILUSVM_API int tilusvm_launch(tilusvm_runtime runtime, tilusvm_module module, const char *program,
                               const tilusvm_arg *args, size_t num_args, void *stream) {
  return guarded([&]() -> int {
    if (!runtime || !module)
      return nullArgument("tilusvm_launch", runtime ? "module" : "runtime");
    size_t index = 0;
    tilus::KernelArgs kernelArgs;
    if (int r =
            findProgramArgs("tilusvm_launch", module, program, args, num_args, index, kernelArgs);
        r != TILUSVM_OK)
      return r;
    Status launched =
        runtime->runtime->launch(module->loaded, index, kernelArgs, static_cast<CUstream>(stream));
    return launched.ok() ? TILUSVM_OK : failWith(launched);
  });
}

TILUSVM_API int tilusvm_last_cu_result(void) { return tLastCuResult; }

TILUSVM_API int tilusvm_runtime_options_init(tilusvm_runtime_options *options) {
  return guarded([&]() -> int {
    if (!options)
      return nullArgument("tilusvm_runtime_options_init", "options");
    *options = defaultOptions();
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_runtime_create_ex(const tilusvm_runtime_options *options,
                                          tilusvm_runtime *out) {
  return guarded([&]() -> int {
    if (!out)
      return nullArgument("tilusvm_runtime_create_ex", "out");
    *out = nullptr;
    if (!options)
      return nullArgument("tilusvm_runtime_create_ex", "options");
    tilusvm_runtime_options o;
    if (int r = readVersioned(options, kOptionsV1Size, defaultOptions(), o,
                              "tilusvm_runtime_create_ex");
        r != TILUSVM_OK)
      return r;
    if (o.log_level < TILUSVM_LOG_DEFAULT || o.log_level > TILUSVM_LOG_OFF)
      return fail(TILUSVM_ERROR_INVALID_ARGUMENT, "tilusvm_runtime_create_ex: log_level " +
                                                      std::to_string(o.log_level) +
                                                      " is not a tilusvm_log_level (-1 to 6)");
    if (o.lazy_compile != 0 && o.lazy_compile != 1)
      return fail(TILUSVM_ERROR_INVALID_ARGUMENT, "tilusvm_runtime_create_ex: lazy_compile is " +
                                                      std::to_string(o.lazy_compile) + " (0 or 1)");
    tilus::cuda::RuntimeOptions options2;
    options2.device = o.device;
    if (o.cache_dir)
      options2.cacheDirectory = std::string(o.cache_dir);
    options2.logLevel = o.log_level;
    if (o.log_callback) {
      tilusvm_log_callback callback = o.log_callback;
      void *user = o.log_user_data;
      options2.logSink = [callback, user](int level, const std::string &message) {
        callback(level, message.c_str(), user);
      };
    }
    options2.lazyCompile = o.lazy_compile != 0;
    auto runtime = tilus::cuda::CudaRuntime::create(options2);
    if (!runtime.ok())
      return failWith(runtime.status());
    *out = new tilusvm_runtime_s{std::move(runtime.value())};
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_kernel_get(tilusvm_runtime runtime, tilusvm_module module,
                                   const char *program, tilusvm_kernel *out) {
  return guarded([&]() -> int {
    if (!out)
      return nullArgument("tilusvm_kernel_get", "out");
    *out = nullptr;
    if (!runtime || !module)
      return nullArgument("tilusvm_kernel_get", runtime ? "module" : "runtime");
    size_t index = 0;
    if (int r = findProgram(module, program, index); r != TILUSVM_OK)
      return r;
    if (!runtime->runtime->lazyCompile()) {
      auto compiled = runtime->runtime->kernel(module->loaded, index);
      if (!compiled.ok())
        return failWith(compiled.status());
    }
    *out = new tilusvm_kernel_s{runtime, module, index};
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_kernel_destroy(tilusvm_kernel kernel) { return destroyHandle(kernel); }

TILUSVM_API int tilusvm_kernel_prepare(tilusvm_kernel kernel, const tilusvm_arg *args,
                                       size_t num_args, void *stream) {
  return guarded([&]() -> int {
    if (!kernel)
      return nullArgument("tilusvm_kernel_prepare", "kernel");
    tilus::cuda::CudaRuntime &rt = *kernel->runtime->runtime;
    const tilus::cuda::LoadedModule &loaded = kernel->module->loaded;
    size_t params = loaded.verified.module.programs[kernel->index].params.size();
    if (!args && num_args == 0 && params != 0) {
      Status prepared = rt.prepare(loaded, kernel->index, nullptr, static_cast<CUstream>(stream));
      return prepared.ok() ? TILUSVM_OK : failWith(prepared);
    }
    if (!args && num_args != 0)
      return nullArgument("tilusvm_kernel_prepare", "args");
    tilus::KernelArgs kernelArgs;
    if (int r = checkedArgs(loaded, kernel->index, args, num_args, kernelArgs); r != TILUSVM_OK)
      return r;
    Status prepared = rt.prepare(loaded, kernel->index, &kernelArgs, static_cast<CUstream>(stream));
    return prepared.ok() ? TILUSVM_OK : failWith(prepared);
  });
}

TILUSVM_API int tilusvm_kernel_workspace_size(tilusvm_kernel kernel, const tilusvm_arg *args,
                                              size_t num_args, uint64_t *out_bytes) {
  return guarded([&]() -> int {
    if (!kernel || !out_bytes)
      return nullArgument("tilusvm_kernel_workspace_size", kernel ? "out_bytes" : "kernel");
    if (!args && num_args != 0)
      return nullArgument("tilusvm_kernel_workspace_size", "args");
    auto bytes = kernel->runtime->runtime->workspaceSize(kernel->module->loaded, kernel->index,
                                                         toKernelArgs(args, num_args));
    if (!bytes.ok())
      return fail(TILUSVM_ERROR_INVALID_ARGUMENT, messageOf(bytes.status()));
    *out_bytes = *bytes;
    return TILUSVM_OK;
  });
}

TILUSVM_API int tilusvm_kernel_launch(tilusvm_kernel kernel, const tilusvm_arg *args,
                                      size_t num_args, void *stream, void *workspace,
                                      uint64_t workspace_bytes) {
  return guarded([&]() -> int {
    if (!kernel)
      return nullArgument("tilusvm_kernel_launch", "kernel");
    if (!args && num_args != 0)
      return nullArgument("tilusvm_kernel_launch", "args");
    tilus::KernelArgs kernelArgs;
    if (int r = checkedArgs(kernel->module->loaded, kernel->index, args, num_args, kernelArgs);
        r != TILUSVM_OK)
      return r;
    tilus::cuda::LaunchOptions options;
    options.workspace = CUdeviceptr(reinterpret_cast<uintptr_t>(workspace));
    options.workspaceBytes = workspace_bytes;
    Status launched = kernel->runtime->runtime->launch(
        kernel->module->loaded, kernel->index, kernelArgs, static_cast<CUstream>(stream), options);
    return launched.ok() ? TILUSVM_OK : failWith(launched);
  });
}

TILUSVM_API int tilusvm_runtime_get_stats(tilusvm_runtime runtime, tilusvm_stats *out) {
  return guarded([&]() -> int {
    if (!runtime)
      return nullArgument("tilusvm_runtime_get_stats", "runtime");
    return writeStats(runtime->runtime->cacheStats(), runtime->runtime->workspaceBytes(), out,
                      "tilusvm_runtime_get_stats");
  });
}

TILUSVM_API int tilusvm_process_get_stats(tilusvm_stats *out) {
  return guarded([&]() -> int {
    return writeStats(tilus::cuda::processCacheStats(), 0, out, "tilusvm_process_get_stats");
  });
}

} // extern "C"
