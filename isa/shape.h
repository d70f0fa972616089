// Arithmetic on shapes (lists of dimension sizes) shared by the layouts, the assembler and the
// tools.
#pragma once

#include <cstdint>
#include <functional>
#include <numeric>
#include <span>

namespace tilus {

/// The number of elements of a shape: the product of its sizes (1 for rank 0), unchecked.
inline int64_t productOf(std::span<const int64_t> shape) {
  return std::accumulate(shape.begin(), shape.end(), int64_t(1), std::multiplies<>());
}

} // namespace tilus
