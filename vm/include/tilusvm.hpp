// The C++ API of libtilusvm: a header-only layer over the C API (tilusvm.h).
//
// Handles are RAII and move-only; a failed call throws tilusvm::Error, which carries the C
// status code and the library's message. (Inside Tilus VM errors are values; this header is
// for applications, where an exception at the API boundary is the idiomatic C++ failure.)
//
//   tilusvm::Runtime runtime;                       // device 0, or $TILUSVM_DEVICE
//   tilusvm::Module module = tilusvm::Module::loadFile("kernels.tbc");
//   runtime.launch(module, "vector_add",
//                  {tilusvm::Arg::pointer(x, n * 4), tilusvm::Arg::pointer(y, n * 4),
//                   tilusvm::Arg::pointer(z, n * 4), tilusvm::Arg::i32(n)},
//                  stream);
#pragma once

#include "tilusvm.h"

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace tilusvm {

class Error : public std::runtime_error {
public:
  Error(int status, const std::string &message) : std::runtime_error(message), status_(status) {}
  /// A tilusvm_status value.
  int status() const { return status_; }

private:
  int status_;
};

/// Throw an Error for a failed status (with the thread's last error message).
inline void check(int status) {
  if (status != TILUSVM_OK)
    throw Error(status, std::string(tilusvm_status_name(status)) + ": " + tilusvm_last_error());
}

/// Launch arguments: factories that put a value's bit pattern into a tilusvm_arg.
struct Arg {
  static tilusvm_arg pointer(const void *address, uint64_t bytes) {
    return {0, const_cast<void *>(address), bytes};
  }
  /// A device address given as an integer (CUdeviceptr).
  static tilusvm_arg device(uint64_t address, uint64_t bytes) {
    return {0, reinterpret_cast<void *>(static_cast<uintptr_t>(address)), bytes};
  }
  static tilusvm_arg i32(int32_t v) { return {uint64_t(uint32_t(v)), nullptr, 0}; }
  static tilusvm_arg i64(int64_t v) { return {uint64_t(v), nullptr, 0}; }
  static tilusvm_arg u32(uint32_t v) { return {v, nullptr, 0}; }
  static tilusvm_arg u64(uint64_t v) { return {v, nullptr, 0}; }
  static tilusvm_arg boolean(bool v) { return {v ? 1u : 0u, nullptr, 0}; }
  static tilusvm_arg f32(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return {bits, nullptr, 0};
  }
  static tilusvm_arg f64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return {bits, nullptr, 0};
  }
  /// Any other scalar dtype: its bit pattern (e.g. an f16 as its 16 bits).
  static tilusvm_arg bits(uint64_t pattern) { return {pattern, nullptr, 0}; }
};

struct ParamInfo {
  std::string name;
  std::string dtype;
  bool isPointer = false;
};

class Module {
public:
  static Module load(const void *bytes, size_t size) {
    tilusvm_module m = nullptr;
    check(tilusvm_module_load(bytes, size, &m));
    return Module(m);
  }
  static Module loadFile(const std::string &path) {
    tilusvm_module m = nullptr;
    check(tilusvm_module_load_file(path.c_str(), &m));
    return Module(m);
  }
  Module(Module &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Module &operator=(Module &&other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  Module(const Module &) = delete;
  Module &operator=(const Module &) = delete;
  ~Module() { tilusvm_module_destroy(handle_); }

  tilusvm_module handle() const { return handle_; }

  std::vector<std::string> programNames() const {
    size_t count = 0;
    check(tilusvm_module_program_count(handle_, &count));
    std::vector<std::string> names;
    for (size_t i = 0; i < count; ++i) {
      const char *name = nullptr;
      check(tilusvm_module_program_name(handle_, i, &name));
      names.emplace_back(name);
    }
    return names;
  }

  std::vector<ParamInfo> params(const std::string &program) const {
    size_t count = 0;
    check(tilusvm_program_param_count(handle_, program.c_str(), &count));
    std::vector<ParamInfo> out;
    for (size_t i = 0; i < count; ++i) {
      const char *name = nullptr, *dtype = nullptr;
      int isPointer = 0;
      check(tilusvm_program_param(handle_, program.c_str(), i, &name, &dtype, &isPointer));
      out.push_back({name, dtype, isPointer != 0});
    }
    return out;
  }

  /// Run on the CPU reference interpreter (pointer arguments are host memory).
  void runOnCpu(const std::string &program, const std::vector<tilusvm_arg> &args,
                bool checked = true) const {
    check(tilusvm_run_cpu(handle_, program.c_str(), args.data(), args.size(), checked ? 1 : 0));
  }

private:
  explicit Module(tilusvm_module handle) : handle_(handle) {}
  tilusvm_module handle_ = nullptr;
};

/// Runtime options (tilusvm_runtime_options with its defaults filled in).
inline tilusvm_runtime_options runtimeOptions() {
  tilusvm_runtime_options options;
  check(tilusvm_runtime_options_init(&options));
  return options;
}

class Runtime {
public:
  /// Open device `device` (-1: $TILUSVM_DEVICE or device 0).
  explicit Runtime(int device = -1) { check(tilusvm_runtime_create(device, &handle_)); }
  /// Open a device with options (start from runtimeOptions()).
  explicit Runtime(const tilusvm_runtime_options &options) {
    check(tilusvm_runtime_create_ex(&options, &handle_));
  }
  Runtime(Runtime &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Runtime &operator=(Runtime &&other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  Runtime(const Runtime &) = delete;
  Runtime &operator=(const Runtime &) = delete;
  ~Runtime() { tilusvm_runtime_destroy(handle_); }

  tilusvm_runtime handle() const { return handle_; }

  std::string deviceName() const {
    const char *name = nullptr;
    check(tilusvm_runtime_device_name(handle_, &name));
    return name;
  }
  int computeCapability() const {
    int cc = 0;
    check(tilusvm_runtime_compute_capability(handle_, &cc));
    return cc;
  }
  void prepare(const Module &module, const std::string &program) {
    check(tilusvm_prepare(handle_, module.handle(), program.c_str()));
  }
  /// Queue a launch on `stream` (a CUstream; nullptr = default stream).
  void launch(const Module &module, const std::string &program,
              const std::vector<tilusvm_arg> &args, void *stream = nullptr) {
    check(tilusvm_launch(handle_, module.handle(), program.c_str(), args.data(), args.size(),
                         stream));
  }

  /// This runtime's counters.
  tilusvm_stats stats() const {
    tilusvm_stats s;
    s.struct_size = sizeof s;
    check(tilusvm_runtime_get_stats(handle_, &s));
    return s;
  }

private:
  tilusvm_runtime handle_ = nullptr;
};

/// A kernel handle: one program of a module bound to a runtime (both must outlive it).
class Kernel {
public:
  Kernel(const Runtime &runtime, const Module &module, const std::string &program) {
    check(tilusvm_kernel_get(runtime.handle(), module.handle(), program.c_str(), &handle_));
  }
  Kernel(Kernel &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
  Kernel &operator=(Kernel &&other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;
  ~Kernel() { tilusvm_kernel_destroy(handle_); }

  tilusvm_kernel handle() const { return handle_; }

  /// Compile for arguments like `args` and size `stream`'s workspace (before graph capture).
  void prepare(const std::vector<tilusvm_arg> &args, void *stream = nullptr) {
    check(tilusvm_kernel_prepare(handle_, args.data(), args.size(), stream));
  }
  /// Bytes of workspace a launch with these arguments needs.
  uint64_t workspaceSize(const std::vector<tilusvm_arg> &args) const {
    uint64_t bytes = 0;
    check(tilusvm_kernel_workspace_size(handle_, args.data(), args.size(), &bytes));
    return bytes;
  }
  /// Queue a launch on `stream`; `workspace` (a device address) replaces the runtime's.
  void launch(const std::vector<tilusvm_arg> &args, void *stream = nullptr,
              void *workspace = nullptr, uint64_t workspaceBytes = 0) {
    check(tilusvm_kernel_launch(handle_, args.data(), args.size(), stream, workspace,
                                workspaceBytes));
  }

private:
  tilusvm_kernel handle_ = nullptr;
};

} // namespace tilusvm
