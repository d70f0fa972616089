// A bound on the size of a kernel's code, so that no program, however written, holds the JIT
// for minutes.
//
// The JIT emits straight-line code for every element a thread holds, so the IR of a program
// instruction grows with the elements of its register tensors per thread. A program whose
// layouts give every thread thousands of elements (a replicated tile, a shape that no thread
// count divides) is valid, and runs on the CPU interpreter, but its kernel would take LLVM
// minutes and gigabytes to compile: its passes grow faster than linearly with a basic block.
// The JIT refuses such a kernel with a located `unsupported` error instead, in two steps:
//
//  1. Before any IR is built: the register elements per thread that the program's instructions
//     touch, summed over the instructions (each once: loops are not unrolled), with a Dot's
//     result counted k times (k / 16 times where it lowers to mma atoms), at most the limit.
//  2. After the IR is built, before optimisation: the kernel's LLVM IR instructions, at most
//     the limit.
//
// The limit is 65,536 unless TILUSVM_JIT_MAX_IR sets another (0: none). The largest kernel of
// programs/ measures about 4,700 elements and 10,000 IR instructions; a kernel at the limit
// compiles in a few seconds (docs/jit.md, "Code size").
#pragma once

#include "isa/status.h"
#include "loader/verified_module.h"

#include <cstdint>
#include <string>

namespace tilus::jit {

struct CodeSize {
  int64_t elements = 0;    // step 1's measure, saturated at INT64_MAX / 2
  int64_t largest = 0;     // the largest single instruction's share of it
  int64_t largestAt = -1;  // that instruction's index in Program::instructions
  std::string largestWhat; // its opcode and the tensor that makes it large
};

/// Step 1's measure of `program` compiled for sm_`smVersion`.
CodeSize measureCodeSize(const Program &program, const ProgramInfo &info, int smVersion);

/// The limit in force: TILUSVM_JIT_MAX_IR when set (a non-negative integer; 0 means no limit),
/// else kDefaultMaxCode. A malformed value is a usage error.
constexpr int64_t kDefaultMaxCode = 65536;
Expected<int64_t> maxCode();

/// Step 1: success when `program` is within `limit` (0: always), else the located error.
Status checkCodeSize(const Program &program, const ProgramInfo &info, int smVersion, int64_t limit);

/// Step 2: success when `irInstructions` is within `limit` (0: always), else the error, located
/// at the instruction with the largest share of step 1's measure.
Status checkIrSize(const Program &program, const ProgramInfo &info, int smVersion,
                   int64_t irInstructions, int64_t limit);

} // namespace tilus::jit
