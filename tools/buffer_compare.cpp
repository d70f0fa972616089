// The comparison rule of vm-run --check (see buffer_compare.h for the rule itself).
//
// The GPU and the CPU interpreter must agree exactly wherever the ISA fixes the result
// (integers, bitwise results, conversions) and within a stated tolerance where it does not
// (float math within 2 ulp, unspecified accumulation order). Keeping the rule in one small
// function makes it testable on hand-made buffers and documented in one place.
#include "tools/buffer_compare.h"

#include "isa/convert.h"
#include "tools/run_args.h"

#include <cmath>
#include <limits>

namespace tilus::run {

Tolerance toleranceFor(DataType dtype) {
  if (!dtype.isFloat())
    return {true, 0};
  if (dtype == DataType::f64())
    return {false, 1e-9};
  if (dtype == DataType::f32())
    return {false, 1e-5};
  if (dtype == DataType::f16())
    return {false, 1e-2};
  if (dtype == DataType::bf16())
    return {false, 2e-2};
  return {false, std::ldexp(1.0, -int(dtype.mantissa))};
}

BufferComparison compareBuffers(DataType dtype, int64_t elements, std::span<const uint8_t> actual,
                                std::span<const uint8_t> expected) {
  BufferComparison result;
  result.tolerance = toleranceFor(dtype);
  result.elements = elements;
  auto mismatch = [&](int64_t k) {
    ++result.mismatches;
    if (result.firstMismatch < 0)
      result.firstMismatch = k;
  };
  // Scale: mean |e| over finite reference elements (floats only).
  double scale = 0;
  if (!result.tolerance.exact) {
    double sum = 0;
    int64_t finite = 0;
    for (int64_t k = 0; k < elements; ++k) {
      double e = toDouble(readElement(expected, dtype, k), dtype);
      if (std::isfinite(e)) {
        sum += std::fabs(e);
        ++finite;
      }
    }
    scale = finite ? sum / double(finite) : 0;
  }
  double diffSquares = 0, refSquares = 0;
  for (int64_t k = 0; k < elements; ++k) {
    uint64_t aBits = readElement(actual, dtype, k);
    uint64_t eBits = readElement(expected, dtype, k);
    double a = toDouble(aBits, dtype);
    double e = toDouble(eBits, dtype);
    if (result.tolerance.exact) {
      if (aBits != eBits)
        mismatch(k);
    } else if (std::isnan(a) || std::isnan(e)) {
      if (std::isnan(a) != std::isnan(e))
        mismatch(k);
      continue;
    } else if (std::isinf(a) || std::isinf(e)) {
      if (a != e)
        mismatch(k);
      continue;
    } else if (std::fabs(a - e) > result.tolerance.rtol * (std::fabs(e) + scale)) {
      mismatch(k);
    }
    double diff = std::fabs(a - e);
    result.maxAbsError = std::max(result.maxAbsError, diff);
    if (e != 0)
      result.maxRelError = std::max(result.maxRelError, diff / std::fabs(e));
    diffSquares += diff * diff;
    refSquares += e * e;
  }
  if (refSquares > 0)
    result.relL2Error = std::sqrt(diffSquares / refSquares);
  else if (diffSquares > 0)
    result.relL2Error = std::numeric_limits<double>::infinity();
  result.ok = result.mismatches == 0;
  return result;
}

} // namespace tilus::run
