// The JIT: lowers a checked program to LLVM IR for NVPTX and emits PTX.
//
// Kernel ABI: an `.entry` named after the program, taking the program's parameters in order
// (pointers as 64-bit global addresses, scalars by their dtype widened to at least 32 bits),
// followed by one 64-bit workspace pointer when the program uses AllocateGlobal. The block has
// ProgramInfo::threads threads and PtxKernel::sharedBytes of dynamic shared memory (the
// program's allocations and the part of the checker's scratch area that the lowering uses, at
// most ProgramInfo::sharedBytes); the grid is the program's grid expressions evaluated on the
// host.
#pragma once

#include "loader/verified_module.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tilus {

/// What a launch guarantees about one parameter (launch-time specialisation, like Triton's
/// argument specialisation). The runtime classifies every launch's arguments, the class is part
/// of the kernel-cache key, and the JIT may rely on it: a pointer's address is a multiple of 16
/// bytes, an integer scalar is a multiple of 16 or equal to 1. No fact is the unspecialised
/// kernel, which is correct for every argument.
enum class ParamFact : uint8_t {
  None = 0,
  Aligned16 = 1,   // pointer: address % 16 == 0
  Divisible16 = 2, // integer scalar: value % 16 == 0 (zero included)
  One = 3,         // integer scalar: value == 1
  NotOne = 4,      // integer scalar: value != 1 (the launch classes give it where value is
                   // neither 1 nor a multiple of 16)
};

/// One fact per program parameter (empty: no specialisation), and the values of the program's
/// `specialize` statements (docs/isa.md, "Launch-time specialisation") at the launch, in order
/// (empty: computed in the kernel).
struct Specialization {
  std::vector<ParamFact> params;
  std::vector<bool> values;
  bool empty() const;
  /// Canonical spelling for cache keys: one letter per parameter ('-', 'a', 'd', '1', 'n'; none
  /// when every parameter is '-'), then with values '/' and one letter per value ('T', 'F');
  /// "" when empty().
  std::string text() const;
};

/// One plain LoadShared or StoreShared of a kernel as warp 0 issues it (jit/bank_report.h): its
/// vector groups are `accesses` warp instructions of at most `bytes` bytes per lane, taking
/// `wavefronts` shared-memory wavefronts where `ideal` would do without bank conflicts (both -1
/// for packed sub-byte types, which are not analysed).
struct SharedAccessReport {
  size_t instruction = 0; // index in Program::instructions
  const char *opcode = "";
  int64_t accesses = 0;
  int bytes = 0;
  int64_t wavefronts = 0;
  int64_t ideal = 0;
};

struct JitOptions {
  int smVersion = 90; // 80 -> sm_80, 90 -> sm_90a
  int optLevel = 3;
  Specialization specialization;
  /// Fill PtxKernel::sharedAccesses (TILUSVM_JIT_BANKS=1 also prints them); the code is the same.
  bool reportSharedAccesses = false;
  /// StoreShared of 16-bit mma fragments by stmatrix in every sm_90 kernel, not only in kernels
  /// with Hopper instructions (wgmma or TMA; jit/lower_memory_matrix.cpp): for tests.
  bool stmatrixEverywhere = false;
  /// The compiler version that goes into cache keys: the library version, a hash of the
  /// sources that decide the generated code (jit/source_hash.py) and the LLVM version.
  static const char *compilerVersion();
};

struct PtxKernel {
  std::string ptx;
  std::string entryName;
  uint32_t threads = 0;
  int64_t sharedBytes = 0;
  /// With JitOptions::reportSharedAccesses or TILUSVM_JIT_BANKS=1: one entry per plain shared
  /// access instruction of the program, in program order.
  std::vector<SharedAccessReport> sharedAccesses;
};

/// Compile one program of a verified module to PTX.
Expected<PtxKernel> compileToPtx(const VerifiedModule &module, size_t programIndex,
                                 const JitOptions &options = {});

/// The textual LLVM IR (for inspection and tests).
Expected<std::string> compileToLlvmIr(const VerifiedModule &module, size_t programIndex,
                                      const JitOptions &options = {});

} // namespace tilus
