// The layout type checker: every rule of ISA section 6, one pass over each program with one
// small function per instruction. A module that passes becomes a VerifiedModule; the
// interpreter and the JIT accept nothing else.
#pragma once

#include "isa/program.h"
#include "loader/verified_module.h"

#include <functional>
#include <string>

namespace tilus {

struct Target {
  int smVersion = 90;                  // 80 or 90 (sm_90a)
  int64_t maxSharedBytes = 227 * 1024; // per block, opt-in limit of the target
  static Target sm80() { return {80, 163 * 1024}; }
  static Target sm90() { return {90, 227 * 1024}; }
};

struct CheckOptions {
  Target target = Target::sm90();
  /// File name used in diagnostics when the module has debug info.
  std::string fileName;
};

/// Check every program of the module. On failure the Status holds every diagnostic found
/// (ordered by location), each with its ISA section 6 code.
Expected<VerifiedModule> checkModule(Module module, const CheckOptions &options = {});

/// Pointer extent in elements for concrete scalar parameter values (by parameter VarId).
/// Precondition: extent.computable.
int64_t evaluateExtent(const Program &program, const PointerExtent &extent,
                       const std::function<uint64_t(VarId)> &paramValue);

} // namespace tilus
