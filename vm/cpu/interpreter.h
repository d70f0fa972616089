// The CPU reference interpreter: runs a checked program exactly as ISA section 5 specifies.
//
// Register tensors live as per-thread local slots (bit patterns), so View is the exact bit
// reinterpretation of section 2. Blocks run in parallel on host threads. In checked mode the
// interpreter also reports data races (section 1), out-of-bounds shared accesses and dirty
// requires_clean workspaces, with the instruction's location and the block and threads involved.
#pragma once

#include "loader/verified_module.h"
#include "vm/kernel_args.h"

#include <cstdint>
#include <ostream>

namespace tilus {

struct CpuRunOptions {
  /// Race, bounds and workspace checks (vm-run --device cpu uses it by default).
  bool checked = true;
  /// Host threads running blocks; 0 = all cores.
  int numWorkers = 0;
  /// Where Print writes (default std::cout).
  std::ostream *printStream = nullptr;
  /// The most bytes the run may allocate for AllocateGlobal workspaces; a larger workspace is
  /// an error before anything runs. 0: the host's available memory (isa/host_memory.h).
  uint64_t maxMemoryBytes = 0;
};

/// Run program `programIndex` of the module on the grid its grid expressions give for `args`.
/// Pointer arguments are host memory of at least the size the checker's extents require.
Status runOnCpu(const VerifiedModule &module, size_t programIndex, const KernelArgs &args,
                const CpuRunOptions &options = {});

} // namespace tilus
