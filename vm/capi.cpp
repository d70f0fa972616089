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

#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <vector>

struct tilusvm_module_s {
  tilus::cuda::LoadedModule loaded;
  std::vector<std::vector<std::string>> paramDtypes; // [program][param], kept for out strings
};

struct tilusvm_runtime_s {
  std::unique_ptr<tilus::cuda::CudaRuntime> runtime;
};

namespace {

using tilus::ErrorCode;
using tilus::Status;

thread_local std::string tLastError;

int fail(int code, std::string message) {
  tLastError = std::move(message);
  return code;
}

int codeOf(const Status &status) {
  const tilus::Diagnostic &d = status.first();
  if (d.code == ErrorCode::Bytecode)
    return TILUSVM_ERROR_BYTECODE;
  if (d.code == ErrorCode::Io)
    return TILUSVM_ERROR_IO;
  if (d.code == ErrorCode::Usage)
    return TILUSVM_ERROR_INVALID_ARGUMENT;
  if (d.code == ErrorCode::Runtime || d.code == ErrorCode::Race)
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
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return fail(TILUSVM_ERROR_INTERNAL, "out of memory");
  } catch (const std::exception &e) {
    return fail(TILUSVM_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return fail(TILUSVM_ERROR_INTERNAL, "internal error: unknown exception");
  }
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

TILUSVM_API int tilusvm_module_destroy(tilusvm_module module) {
  return guarded([&]() -> int {
    delete module;
    return TILUSVM_OK;
  });
}

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
    if (!args && num_args != 0)
      return nullArgument("tilusvm_run_cpu", "args");
    size_t index = 0;
    if (int r = findProgram(module, program, index); r != TILUSVM_OK)
      return r;
    const tilus::VerifiedModule &verified = module->loaded.verified;
    tilus::KernelArgs kernelArgs = toKernelArgs(args, num_args);
    Status valid = tilus::cuda::validateArgs(verified.module.programs[index],
                                             verified.programs[index], kernelArgs);
    if (!valid.ok())
      return fail(TILUSVM_ERROR_INVALID_ARGUMENT, messageOf(valid));
    tilus::CpuRunOptions options;
    options.checked = checked != 0;
    Status ran = tilus::runOnCpu(verified, index, kernelArgs, options);
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

TILUSVM_API int tilusvm_runtime_destroy(tilusvm_runtime runtime) {
  return guarded([&]() -> int {
    delete runtime;
    return TILUSVM_OK;
  });
}

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
    if (!args && num_args != 0)
      return nullArgument("tilusvm_launch", "args");
    size_t index = 0;
    if (int r = findProgram(module, program, index); r != TILUSVM_OK)
      return r;
    const tilus::VerifiedModule &verified = module->loaded.verified;
    tilus::KernelArgs kernelArgs = toKernelArgs(args, num_args);
    Status valid = tilus::cuda::validateArgs(verified.module.programs[index],
                                             verified.programs[index], kernelArgs);
    if (!valid.ok())
      return fail(TILUSVM_ERROR_INVALID_ARGUMENT, messageOf(valid));
    Status launched =
        runtime->runtime->launch(module->loaded, index, kernelArgs, static_cast<CUstream>(stream));
    return launched.ok() ? TILUSVM_OK : failWith(launched);
  });
}

} // extern "C"
