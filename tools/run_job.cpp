// vm-run's and tilus-tune's launch preparation (tools/run_job.h).
#include "tools/run_job.h"

#include "isa/file_io.h"
#include "isa/host_memory.h"
#include "loader/checker.h"
#include "tools/npy.h"
#include "tools/run_args.h"

#include <algorithm>
#include <map>

namespace tilus::run {

Status usage(std::string message) { return Status::error(ErrorCode::Usage, std::move(message)); }

Expected<size_t> chooseProgram(const Module &module, const std::string &name) {
  std::string names;
  for (const Program &p : module.programs)
    names += (names.empty() ? "" : ", ") + p.name;
  if (!name.empty()) {
    for (size_t i = 0; i < module.programs.size(); ++i)
      if (module.programs[i].name == name)
        return i;
    return usage("no program named " + name + " (module has: " + names + ")");
  }
  if (module.programs.size() == 1)
    return size_t(0);
  return usage("module has " + std::to_string(module.programs.size()) +
               " programs; choose one with --kernel NAME (" + names + ")");
}

namespace {

Expected<std::map<std::string, std::string>>
collectAssignments(const std::vector<std::string> &items, const Program &program, const char *flag,
                   bool pointersOnly) {
  std::map<std::string, std::string> out;
  for (const std::string &item : items) {
    auto kv = run::splitAssignment(item);
    if (!kv.ok())
      return usage(std::string(flag) + " " + kv.status().first().message);
    const auto &[name, value] = *kv;
    auto it = std::find_if(program.params.begin(), program.params.end(),
                           [&](VarId id) { return program.var(id).name == name; });
    if (it == program.params.end())
      return usage(std::string(flag) + " " + name + ": " + program.name +
                   " has no parameter named " + name);
    if (pointersOnly && program.var(*it).kind != VarKind::Pointer)
      return usage(std::string(flag) + " " + name + ": not a pointer parameter");
    if (!out.emplace(name, value).second)
      return usage(std::string(flag) + " " + name + " given twice");
  }
  return out;
}

/// Elements the program can touch through pointer parameter `id`, if computable.
std::optional<int64_t> extentOf(const Job &job, VarId id) {
  for (const PointerExtent &extent : job.info().extents) {
    if (extent.pointer != id)
      continue;
    if (!extent.computable)
      return std::nullopt;
    return evaluateExtent(job.program(), extent, cuda::paramValues(job.program(), job.scalars));
  }
  return int64_t(0); // never viewed: nothing to touch
}

Status loadFileBuffer(Buffer &buffer, const std::string &path, uint64_t maxBytes) {
  auto array = npy::readFile(path, maxBytes);
  if (!array.ok())
    return usage(buffer.name + ": " + array.status().first().message);
  std::string want = npy::descrFor(buffer.dtype);
  std::string have = npy::normalizeDescr(array->descr);
  if (have.size() == 3 && have[0] == '>')
    have[0] = '<'; // big-endian items are byte-swapped (cOrderLittleEndian)
  if (have != want)
    return usage(buffer.name + ": " + path + " holds '" + array->descr + "'; a " +
                 buffer.dtype.name() + " buffer reads '" + want + "'");
  auto data = npy::cOrderLittleEndian(*array);
  if (!data.ok())
    return usage(data.status().first().message);
  buffer.initial = std::move(data.value());
  buffer.elements = int64_t(buffer.initial.size() * 8 / size_t(buffer.dtype.storageBits()));
  buffer.source = "@" + path;
  return Status::success();
}

Status makeBuffer(Job &job, Buffer &buffer, const std::string &value) {
  auto spec = run::parseBufferSpec(value);
  if (!spec.ok())
    return usage(buffer.name + ": " + spec.status().first().message);
  VarId id = job.program().params[buffer.param];
  std::optional<int64_t> extent = extentOf(job, id);
  if (extent && *extent > run::kMaxBufferElements)
    return usage(buffer.name + ": the program can touch " +
                 (*extent == INT64_MAX ? std::string("2^63 or more") : std::to_string(*extent)) +
                 " elements, more than the 2^40 a buffer may have");
  const uint64_t maxBytes = job.maxHostBytes ? job.maxHostBytes : availableHostMemory();
  const uint64_t copies = std::max<uint64_t>(job.hostCopies, 1);
  const uint64_t budget = maxBytes / copies;
  auto refuse = [&](uint64_t bytes) {
    return usage(buffer.name + ": a buffer of " + std::to_string(bytes) + " bytes" +
                 (job.hostBytes
                      ? " (after " + std::to_string(job.hostBytes) + " bytes of other buffers)"
                      : std::string()) +
                 " does not fit in --max-memory " + std::to_string(maxBytes) + " bytes with its " +
                 std::to_string(copies) + " host copies");
  };
  if (spec->kind == run::BufferSpec::Kind::File) {
    TILUSVM_TRY(loadFileBuffer(buffer, spec->path, budget - std::min(budget, job.hostBytes)));
    if (job.hostBytes + buffer.initial.size() > budget)
      return refuse(buffer.initial.size());
  } else {
    if (spec->explicitShape()) {
      if (*spec->dtype != buffer.dtype)
        return usage(buffer.name + " is " + buffer.dtype.name() + ", the value says " +
                     spec->dtype->name());
      buffer.elements = spec->explicitElements();
    } else if (extent) {
      buffer.elements = *extent;
    } else {
      return usage(buffer.name +
                   ": the program's views of it depend on run-time values; give "
                   "its size as zeros:" +
                   buffer.dtype.name() + "[n] or rand:" + buffer.dtype.name() + "[n]:SEED");
    }
    uint64_t bytes = cuda::storageBytes(buffer.dtype, buffer.elements);
    if (bytes > budget || job.hostBytes + bytes > budget)
      return refuse(bytes);
    buffer.initial.assign(bytes, 0);
    if (spec->kind == run::BufferSpec::Kind::Rand)
      run::fillRandom(buffer.initial, buffer.dtype, buffer.elements, spec->seed);
    buffer.source = value;
  }
  if (extent && buffer.elements < *extent)
    return usage(buffer.name + " has " + std::to_string(buffer.elements) + " elements; the " +
                 "program can touch " + std::to_string(*extent));
  job.hostBytes += buffer.initial.size();
  return Status::success();
}

} // namespace

Status buildArguments(Job &job, const std::vector<std::string> &args,
                      const std::vector<std::string> &saveItems) {
  const Program &program = job.program();
  auto values = collectAssignments(args, program, "--arg", false);
  if (!values.ok())
    return values.status();
  job.scalars.assign(program.params.size(), KernelArg{});
  job.scalarText.assign(program.params.size(), "");
  for (size_t i = 0; i < program.params.size(); ++i) { // scalars first: extents need them
    const Variable &param = program.var(program.params[i]);
    if (param.kind == VarKind::Pointer)
      continue;
    auto it = values->find(param.name);
    if (it == values->end())
      return usage("missing --arg " + param.name + "=VALUE for scalar parameter " +
                   param.dtype.name() + " " + param.name);
    auto bits = run::parseScalar(it->second, param.dtype);
    if (!bits.ok())
      return usage(param.name + ": " + bits.status().first().message);
    job.scalars[i].scalarBits = *bits;
    job.scalarText[i] = it->second;
  }
  for (size_t i = 0; i < program.params.size(); ++i) {
    const Variable &param = program.var(program.params[i]);
    if (param.kind != VarKind::Pointer)
      continue;
    Buffer buffer;
    buffer.param = i;
    buffer.name = param.name;
    buffer.dtype = param.dtype;
    auto it = values->find(param.name);
    TILUSVM_TRY(makeBuffer(job, buffer, it == values->end() ? "zeros" : it->second));
    job.buffers.push_back(std::move(buffer));
  }
  auto saves = collectAssignments(saveItems, program, "--save", true);
  if (!saves.ok())
    return saves.status();
  for (const auto &[name, path] : *saves) {
    // Checked now, so that a mistyped destination fails before a long run, not after it.
    if (Status s = checkOutputPath(path); !s.ok())
      return usage("--save " + name + ": " + s.first().toString());
    for (size_t b = 0; b < job.buffers.size(); ++b)
      if (job.buffers[b].name == name)
        job.saves.emplace_back(b, path);
  }
  return Status::success();
}

Expected<DeviceArguments> uploadArguments(const Job &job, cuda::CudaRuntime &runtime) {
  DeviceArguments out;
  out.args = job.scalars;
  for (const Buffer &b : job.buffers) {
    auto buffer = runtime.allocate(b.initial.size());
    if (!buffer.ok())
      return buffer.takeStatus();
    TILUSVM_TRY(runtime.copyToDevice(*buffer, b.initial.data(), b.initial.size()));
    out.args[b.param].pointer = reinterpret_cast<void *>(uintptr_t(buffer->address()));
    out.args[b.param].byteSize = b.initial.size();
    out.buffers.push_back(std::move(buffer.value()));
  }
  return out;
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

} // namespace tilus::run
