// Host-side facts of one launch: parameter values, argument checks, grid and block, and the
// kernel parameter bits of the JIT ABI.
//
// These are kept apart from the driver calls in runtime.cpp because they are pure functions of
// the program and the arguments: the tests exercise them on machines without a GPU, and the
// CPU path (vm-run, the C API) uses the same argument checks as the GPU path.
#include "isa/convert.h"
#include "isa/scalar_eval.h"
#include "loader/checker.h"
#include "vm/cuda/runtime.h"

#include <cstdlib>

#include <limits>

namespace tilus::cuda {
namespace {

Status argError(const Program &program, std::string message) {
  Location loc;
  loc.program = program.name;
  return Status::error(ErrorCode::Runtime, std::move(message), std::move(loc));
}

int paramIndexOf(const Program &program, VarId id) {
  for (size_t i = 0; i < program.params.size(); ++i)
    if (program.params[i] == id)
      return int(i);
  return -1;
}

} // namespace

uint64_t storageBytes(DataType dtype, int64_t elements) {
  if (elements <= 0)
    return 0;
  // elements * bits / 8 without overflow for elements < 2^63 and bits <= 64.
  uint64_t n = uint64_t(elements);
  uint64_t bits = uint64_t(dtype.storageBits());
  return (n / 8) * bits + ((n % 8) * bits + 7) / 8;
}

VarValueFn paramValues(const Program &program, const KernelArgs &args) {
  return [&program, &args](VarId id) -> uint64_t {
    int index = paramIndexOf(program, id);
    if (index < 0 || size_t(index) >= args.size())
      return 0;
    const KernelArg &arg = args[size_t(index)];
    if (program.var(id).kind == VarKind::Pointer)
      return uint64_t(reinterpret_cast<uintptr_t>(arg.pointer));
    return arg.scalarBits & bitMask(program.var(id).dtype.bits);
  };
}

Status validateArgs(const Program &program, const ProgramInfo &info, const KernelArgs &args) {
  if (args.size() != program.params.size())
    return argError(program, "program " + program.name + " takes " +
                                 std::to_string(program.params.size()) + " arguments, got " +
                                 std::to_string(args.size()));
  VarValueFn values = paramValues(program, args);
  for (const PointerExtent &extent : info.extents) {
    if (!extent.computable)
      continue;
    int index = paramIndexOf(program, extent.pointer);
    if (index < 0)
      continue;
    const Variable &param = program.var(extent.pointer);
    int64_t elements = evaluateExtent(program, extent, values);
    uint64_t needed = storageBytes(param.dtype, elements);
    const KernelArg &arg = args[size_t(index)];
    if (arg.byteSize < needed)
      return argError(program, "argument " + param.name + " holds " + std::to_string(arg.byteSize) +
                                   " bytes; the program can touch " + std::to_string(needed) +
                                   " bytes (" + std::to_string(elements) + " " +
                                   param.dtype.name() + " elements)");
    if (needed > 0 && arg.pointer == nullptr)
      return argError(program, "argument " + param.name + " is a null pointer");
  }
  return Status::success();
}

Expected<LaunchGeometry> launchGeometry(const Program &program, const ProgramInfo &info,
                                        const KernelArgs &args) {
  LaunchGeometry geometry;
  geometry.block = info.threads;
  auto grid = evaluateGrid(program, paramValues(program, args));
  if (!grid.ok())
    return grid.status();
  for (size_t d = 0; d < 3; ++d)
    geometry.grid[d] = uint32_t((*grid)[d]);
  return geometry;
}

Specialization classifyArgs(const Program &program, const KernelArgs &args) {
  if (const char *env = std::getenv("TILUSVM_SPECIALIZE"); env && std::string(env) == "0")
    return {};
  Specialization s;
  s.params.assign(program.params.size(), ParamFact::None);
  for (size_t i = 0; i < program.params.size() && i < args.size(); ++i) {
    const Variable &param = program.var(program.params[i]);
    if (param.kind == VarKind::Pointer) {
      if (reinterpret_cast<uintptr_t>(args[i].pointer) % 16 == 0)
        s.params[i] = ParamFact::Aligned16;
      continue;
    }
    DataType t = param.dtype;
    if (t.isFloat() || t.isBool())
      continue;
    int64_t v = toInt64(args[i].scalarBits & bitMask(t.bits), t);
    if (v == 1)
      s.params[i] = ParamFact::One;
    else if (v % 16 == 0)
      s.params[i] = ParamFact::Divisible16;
    else
      s.params[i] = ParamFact::NotOne;
  }
  // the program's specialize statements, computed here as the kernel would compute them
  // (docs/isa.md, "Launch-time specialisation")
  if (args.size() == program.params.size()) {
    VarValueFn values = paramValues(program, args);
    for (const Stmt *st : program.specializations())
      s.values.push_back(evaluateExpr(program, st->expr, values) != 0);
  }
  if (s.empty())
    s.params.clear();
  return s;
}

uint64_t kernelParamBits(const Variable &param, const KernelArg &arg) {
  if (param.kind == VarKind::Pointer)
    return uint64_t(reinterpret_cast<uintptr_t>(arg.pointer));
  DataType dtype = param.dtype;
  uint64_t bits = arg.scalarBits & bitMask(dtype.bits);
  if (dtype.isFloat())
    return bits;
  return uint64_t(toInt64(bits, dtype)); // sign-extends signed types, zero-extends the rest
}

} // namespace tilus::cuda
