// Arguments of one launch, shared by the CPU interpreter and the CUDA runtime: one entry per
// program parameter, in declaration order.
#pragma once

#include <cstdint>
#include <vector>

namespace tilus {

struct KernelArg {
  /// Scalar parameters: the value's bit pattern in the parameter's dtype.
  uint64_t scalarBits = 0;
  /// Pointer parameters: host memory (CPU) or a device address (CUDA), and its size in bytes.
  void *pointer = nullptr;
  uint64_t byteSize = 0;
};

using KernelArgs = std::vector<KernelArg>;

} // namespace tilus
