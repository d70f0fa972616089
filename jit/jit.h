// The JIT: lowers a checked program to LLVM IR for NVPTX and emits PTX.
//
// Kernel ABI: an `.entry` named after the program, taking the program's parameters in order
// (pointers as 64-bit global addresses, scalars by their dtype widened to at least 32 bits),
// followed by one 64-bit workspace pointer when the program uses AllocateGlobal. The block has
// ProgramInfo::threads threads and ProgramInfo::sharedBytes of dynamic shared memory; the grid
// is the program's grid expressions evaluated on the host.
#pragma once

#include "loader/verified_module.h"

#include <string>

namespace tilus {

struct JitOptions {
  int smVersion = 90; // 80 -> sm_80, 90 -> sm_90a
  int optLevel = 3;
  /// The compiler version that goes into cache keys.
  static const char *compilerVersion();
};

struct PtxKernel {
  std::string ptx;
  std::string entryName;
  uint32_t threads = 0;
  int64_t sharedBytes = 0;
};

/// Compile one program of a verified module to PTX.
Expected<PtxKernel> compileToPtx(const VerifiedModule &module, size_t programIndex,
                                 const JitOptions &options = {});

/// The textual LLVM IR (for inspection and tests).
Expected<std::string> compileToLlvmIr(const VerifiedModule &module, size_t programIndex,
                                      const JitOptions &options = {});

} // namespace tilus
