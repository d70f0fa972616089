// Shared helpers of the GPU tests: one runtime for the whole run (with a private disk cache
// directory), loading programs from programs/, and device arrays.
#pragma once

#include "isa/convert.h"
#include "vm/cuda/runtime.h"

#include "test_helpers.h"

#include <cstring>
#include <map>
#include <string>
#include <vector>

namespace gpu {

/// A fresh directory under the system temp dir, unique to this process.
std::string scratchDirectory(const std::string &name);

/// The runtime every test shares (device 0 or $TILUSVM_DEVICE; disk cache in a scratch dir).
tilus::cuda::CudaRuntime &runtime();

/// Assemble and check program file programs/NAME (found via $TILUSVM_PROGRAMS_DIR, ./programs
/// or the source tree), with -D overrides.
tilus::cuda::LoadedModule loadProgramFile(const std::string &name,
                                          const std::map<std::string, std::string> &defines = {});
/// Assemble and check program text.
tilus::cuda::LoadedModule loadProgramText(const std::string &text);

size_t programIndex(const tilus::cuda::LoadedModule &module, const std::string &name);

/// A device buffer filled from / read back to host vectors.
struct DeviceArray {
  tilus::cuda::DeviceBuffer buffer;

  template <typename T> static DeviceArray from(const std::vector<T> &host) {
    DeviceArray a;
    auto b = runtime().allocate(host.size() * sizeof(T));
    REQUIRE_OK(b);
    a.buffer = std::move(b.value());
    REQUIRE_OK(runtime().copyToDevice(a.buffer, host.data(), host.size() * sizeof(T)));
    return a;
  }
  template <typename T> std::vector<T> to() const {
    std::vector<T> host(buffer.bytes() / sizeof(T));
    REQUIRE_OK(runtime().copyToHost(host.data(), buffer, host.size() * sizeof(T)));
    return host;
  }
  tilus::KernelArg arg() const {
    tilus::KernelArg a;
    a.pointer = reinterpret_cast<void *>(uintptr_t(buffer.address()));
    a.byteSize = buffer.bytes();
    return a;
  }
};

inline tilus::KernelArg scalar(uint64_t bits) {
  tilus::KernelArg a;
  a.scalarBits = bits;
  return a;
}

/// Uniform values in [-1, 1) from a simple LCG, as bit patterns of `dtype`.
std::vector<uint16_t> randomHalves(size_t count, uint32_t seed);
std::vector<float> randomFloats(size_t count, uint32_t seed);

inline double halfToDouble(uint16_t bits) { return tilus::toDouble(bits, tilus::DataType::f16()); }

} // namespace gpu
