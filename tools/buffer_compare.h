// Comparing a buffer computed on one device with the same buffer computed on another
// (vm-run --check).
//
// The rule (docs/vm-run.md):
//  - bool and integer buffers (and every sub-byte integer) must match bit for bit;
//  - float buffers match element-wise when |a - e| <= rtol * (|e| + s), where e is the CPU
//    interpreter's (reference) value, a the other device's, and s the mean |e| over the
//    buffer's finite elements (so that values near zero, where the unspecified accumulation
//    order of Dot and Reduce shows most, are judged on the buffer's scale); NaN matches only
//    NaN and an infinity only the same infinity. rtol: f64 1e-9, f32 1e-5, f16 1e-2,
//    bf16 2e-2, and 2^-M (one unit in the last place at 1.0) for floats of 8 bits or fewer
//    with M mantissa bits.
#pragma once

#include "isa/dtype.h"

#include <cstdint>
#include <span>

namespace tilus::run {

struct Tolerance {
  bool exact = true;
  double rtol = 0;
};

Tolerance toleranceFor(DataType dtype);

struct BufferComparison {
  bool ok = true;
  Tolerance tolerance;
  int64_t elements = 0;
  int64_t mismatches = 0;
  int64_t firstMismatch = -1;
  double maxAbsError = 0;
  /// max |a - e| / |e| over elements with e != 0.
  double maxRelError = 0;
  /// ||a - e||_2 / ||e||_2 (0 when e is all zero and a equals it).
  double relL2Error = 0;
};

/// Compare `elements` elements of `dtype` (ISA section 2 packing) in `actual` against
/// `expected`.
BufferComparison compareBuffers(DataType dtype, int64_t elements, std::span<const uint8_t> actual,
                                std::span<const uint8_t> expected);

} // namespace tilus::run
