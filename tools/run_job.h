// One launch of one program as vm-run and tilus-tune prepare it (ISA section 8; docs/vm-run.md):
// the program chosen by name, its scalar arguments parsed from `--arg NAME=VALUE` and one host
// buffer per pointer parameter (from a .npy file, zeros or the deterministic random fill, sized
// by the program's extents when no shape is given).
#pragma once

#include "vm/cuda/runtime.h"

#include <string>
#include <utility>
#include <vector>

namespace tilus::run {

/// One pointer parameter's buffer: its initial contents and where they came from.
struct Buffer {
  size_t param = 0; // index into Program::params
  std::string name;
  DataType dtype;
  int64_t elements = 0;
  std::vector<uint8_t> initial;
  std::string source;
};

struct Job {
  cuda::LoadedModule module;
  size_t index = 0;
  KernelArgs scalars; // pointers left empty; filled per device
  std::vector<std::string> scalarText;
  std::vector<Buffer> buffers;
  std::vector<std::pair<size_t, std::string>> saves; // buffer index, path
  /// Host memory the buffers may take (vm-run --max-memory; 0: the host's available memory),
  /// and how many host copies of each the caller keeps (initial contents, results, ...): a
  /// buffer whose copies, with those of the buffers before it, exceed the limit is refused
  /// before it is allocated.
  uint64_t maxHostBytes = 0;
  uint64_t hostCopies = 2;
  uint64_t hostBytes = 0; // the buffers' bytes so far, one copy
  const Program &program() const { return module.verified.module.programs[index]; }
  const ProgramInfo &info() const { return module.verified.programs[index]; }
};

/// A `usage` error (exit status 2 in the tools).
Status usage(std::string message);

/// The index of the program called `name`, or of the only program when `name` is empty
/// (`usage` error otherwise, listing the module's programs).
Expected<size_t> chooseProgram(const Module &module, const std::string &name);

/// Parse `--arg NAME=VALUE` items into the job's scalars and buffers (a pointer without an
/// `--arg` gets `zeros`), and `--save NAME=FILE` items into its saves (their destinations are
/// checked now, before any run). Errors are `usage`.
Status buildArguments(Job &job, const std::vector<std::string> &args,
                      const std::vector<std::string> &saves);

/// Device buffers holding a job's initial buffer contents, and the launch arguments pointing at
/// them (valid while the buffers live).
struct DeviceArguments {
  std::vector<cuda::DeviceBuffer> buffers;
  KernelArgs args;
};
Expected<DeviceArguments> uploadArguments(const Job &job, cuda::CudaRuntime &runtime);

/// The median of `v` (mean of the middle two for an even count; 0 when empty).
double median(std::vector<double> v);

} // namespace tilus::run
