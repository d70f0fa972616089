// The tensor maps of a launch (docs/isa.md, "Tensor-memory-accelerator loads"): what the
// runtime passes to cuTensorMapEncodeTiled for each ProgramInfo::tensorMaps entry, computed from
// the launch's parameter values, and the requirements the hardware places on it. The CPU
// interpreter checks the same requirements, so both refuse the same launches.
#pragma once

#include "isa/scalar_eval.h"
#include "loader/verified_module.h"

#include <array>
#include <cstdint>

namespace tilus {

inline constexpr size_t kMaxTensorMapRank = 5;

/// One tensor map's geometry, innermost dimension first (the driver's order).
struct TensorMapGeometry {
  uint64_t address = 0;
  uint32_t rank = 0;
  std::array<uint64_t, kMaxTensorMapRank> dims{};        // elements
  std::array<uint64_t, kMaxTensorMapRank> strideBytes{}; // strideBytes[d] for d >= 1
  std::array<uint32_t, kMaxTensorMapRank> box{};
  uint32_t elementBytes = 0;
  uint32_t swizzleBytes = 0; // 0, 32, 64 or 128
};

/// The geometry of tensor map `spec` for a launch whose parameters have the values `values`;
/// an error (code runtime, located at the view) when a requirement does not hold: the address
/// a multiple of 16, every extent in [1, 2^32], every stride but the innermost a multiple of
/// 16 bytes below 2^40.
Expected<TensorMapGeometry> tensorMapGeometry(const Program &program, const TensorMapSpec &spec,
                                              const VarValueFn &values);

/// tensorMapGeometry of every tensor map of the program; the first failure.
Status checkTensorMaps(const Program &program, const ProgramInfo &info, const VarValueFn &values);

} // namespace tilus
