// vm-run: run one program of a bytecode module on the CPU interpreter or a CUDA device
// (ISA section 8; docs/vm-run.md).
//
// It is the kernel author's loop: make inputs (random, zeros or .npy files), run, save outputs
// as .npy, compare the GPU against the CPU reference interpreter (--check) and time launches
// (--bench). This file holds the command line and the orchestration; argument values live in
// run_args.h, the comparison rule in buffer_compare.h, the .npy format in npy.h.
//
// Exit status: 0 success; 1 a program error (load, check, run) or a failed --check; 2 a usage
// error (bad options, unknown names, bad argument values, buffers too small).
#include "isa/convert.h"
#include "isa/file_io.h"
#include "isa/host_memory.h"
#include "jit/jit.h"
#include "loader/checker.h"
#include "loader/loader.h"
#include "tools/buffer_compare.h"
#include "tools/npy.h"
#include "tools/run_args.h"
#include "tools/run_job.h"
#include "tools/tool_main.h"
#include "vm/cpu/interpreter.h"
#include "vm/cuda/runtime.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <map>

namespace {

using namespace tilus;
using nlohmann::json;
using run::Buffer;
using run::Job;

struct Options {
  std::string path;
  std::string kernel;
  std::string device = "auto";
  std::vector<std::string> args;
  std::vector<std::string> saves;
  bool check = false;
  bool bench = false;
  bool json = false;
  bool unchecked = false;
  int warmup = 10;
  int iterations = 0; // 0: 100 on cuda, 3 on cpu
  std::string maxMemoryText;
  uint64_t maxMemory = 0; // host bytes for buffers and workspaces
  std::string dumpDir;    // --dump-dir: where the kernel's LLVM IR and PTX are kept
};

int exitCodeOf(const Status &status) { return status.code() == ErrorCode::Usage ? 2 : 1; }

int report(const Status &status, const Options &options) {
  for (const Diagnostic &d : status.diagnostics()) {
    if (d.location.known())
      std::cerr << d.toString() << "\n";
    else if (d.code == ErrorCode::Usage)
      std::cerr << "vm-run: " << d.message << "\n";
    else
      std::cerr << "vm-run: error[" << errorCodeName(d.code) << "]: " << d.message << "\n";
  }
  if (options.json)
    std::cout << json{{"ok", false}, {"error", status.toString()}}.dump(2) << "\n";
  return exitCodeOf(status);
}

// ---- running ---------------------------------------------------------------------------------

using Results = std::vector<std::vector<uint8_t>>; // final contents, one per buffer

KernelArgs hostArgs(const Job &job, Results &data) {
  KernelArgs args = job.scalars;
  for (size_t b = 0; b < job.buffers.size(); ++b) {
    args[job.buffers[b].param].pointer = data[b].empty() ? nullptr : data[b].data();
    args[job.buffers[b].param].byteSize = data[b].size();
  }
  return args;
}

json benchJson(const std::string &device, const std::string &timer, int warmup,
               const std::vector<double> &ms) {
  return {{"device", device},
          {"timer", timer},
          {"warmup", warmup},
          {"iterations", ms.size()},
          {"median_ms", run::median(ms)},
          {"min_ms", ms.empty() ? 0 : *std::min_element(ms.begin(), ms.end())},
          {"max_ms", ms.empty() ? 0 : *std::max_element(ms.begin(), ms.end())}};
}

Expected<Results> runCpu(const Job &job, const Options &options, json *bench) {
  Results data;
  for (const Buffer &b : job.buffers)
    data.push_back(b.initial);
  KernelArgs args = hostArgs(job, data);
  CpuRunOptions cpu;
  cpu.checked = !options.unchecked;
  cpu.printStream = options.json ? &std::cerr : nullptr;
  cpu.maxMemoryBytes = options.maxMemory;
  TILUSVM_TRY(runOnCpu(job.module.verified, job.index, args, cpu));
  if (bench) {
    Results scratch = data; // timing runs must not change the saved results
    KernelArgs timed = hostArgs(job, scratch);
    std::vector<double> ms;
    int iterations = options.iterations > 0 ? options.iterations : 3;
    for (int i = 0; i < iterations; ++i) {
      auto start = std::chrono::steady_clock::now();
      TILUSVM_TRY(runOnCpu(job.module.verified, job.index, timed, cpu));
      ms.push_back(
          std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start)
              .count());
    }
    *bench = benchJson("cpu", "host", 0, ms);
    (*bench)["interpreter"] = cpu.checked ? "checked" : "unchecked";
  }
  return data;
}

Expected<std::vector<std::string>> dumpKernel(const Job &job, const std::string &dir,
                                              cuda::CudaRuntime *runtime,
                                              const cuda::CompiledKernel *kernel);

Expected<Results> runCuda(const Job &job, const Options &options, cuda::CudaRuntime &runtime,
                          json &out, json *bench, std::vector<std::string> *dumped) {
  auto uploaded = run::uploadArguments(job, runtime);
  if (!uploaded.ok())
    return uploaded.takeStatus();
  const KernelArgs &args = uploaded->args;
  const std::vector<cuda::DeviceBuffer> &device = uploaded->buffers;
  TILUSVM_TRY(runtime.launch(job.module, job.index, args, nullptr));
  TILUSVM_TRY(runtime.synchronize(nullptr));
  // the kernel the launch took (its argument class), as the driver loaded it
  auto kernel = runtime.kernel(job.module, job.index, cuda::classifyArgs(job.program(), args));
  if (!kernel.ok())
    return kernel.takeStatus();
  out["registers"] = (*kernel)->registers;
  out["local_bytes"] = (*kernel)->localBytes;
  if (dumped) {
    auto written = dumpKernel(job, options.dumpDir, &runtime, *kernel);
    if (!written.ok())
      return written.takeStatus();
    *dumped = std::move(written.value());
  }
  Results data;
  for (size_t i = 0; i < job.buffers.size(); ++i) {
    data.emplace_back(job.buffers[i].initial.size());
    TILUSVM_TRY(runtime.copyToHost(data.back().data(), device[i], data.back().size()));
  }
  if (bench) {
    int iterations = options.iterations > 0 ? options.iterations : 100;
    auto ms = runtime.benchmark(job.module, job.index, args, nullptr, options.warmup, iterations);
    if (!ms.ok())
      return ms.takeStatus();
    *bench = benchJson("cuda", "cuda-events", options.warmup, *ms);
  }
  return data;
}

// ---- reporting -------------------------------------------------------------------------------

std::string fmt(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", v);
  return text;
}

json compareAll(const Job &job, const Results &gpu, const Results &cpu, bool &ok) {
  json buffers = json::array();
  ok = true;
  for (size_t b = 0; b < job.buffers.size(); ++b) {
    const Buffer &buffer = job.buffers[b];
    bool written = gpu[b] != buffer.initial || cpu[b] != buffer.initial;
    run::BufferComparison c = run::compareBuffers(buffer.dtype, buffer.elements, gpu[b], cpu[b]);
    ok = ok && c.ok;
    buffers.push_back({{"name", buffer.name},
                       {"dtype", buffer.dtype.name()},
                       {"elements", buffer.elements},
                       {"written", written},
                       {"ok", c.ok},
                       {"exact", c.tolerance.exact},
                       {"rtol", c.tolerance.rtol},
                       {"mismatches", c.mismatches},
                       {"first_mismatch", c.firstMismatch},
                       {"max_abs_error", c.maxAbsError},
                       {"max_rel_error", c.maxRelError},
                       {"rel_l2_error", c.relL2Error}});
  }
  return buffers;
}

void printCheck(const json &buffers, bool ok) {
  for (const json &b : buffers) {
    std::cout << "check: " << b["name"].get<std::string>() << " " << b["dtype"].get<std::string>()
              << "[" << b["elements"].get<int64_t>() << "] ";
    if (!b["written"].get<bool>() && b["ok"].get<bool>()) {
      std::cout << "not written, equal\n";
      continue;
    }
    std::cout << (b["ok"].get<bool>() ? "ok" : "MISMATCH") << ": " << b["mismatches"].get<int64_t>()
              << " mismatches";
    if (b["exact"].get<bool>())
      std::cout << " (exact comparison)";
    else
      std::cout << ", max abs error " << fmt(b["max_abs_error"].get<double>()) << ", max rel error "
                << fmt(b["max_rel_error"].get<double>()) << ", rel l2 "
                << fmt(b["rel_l2_error"].get<double>()) << " (rtol " << fmt(b["rtol"].get<double>())
                << ")";
    if (b["first_mismatch"].get<int64_t>() >= 0)
      std::cout << ", first at element " << b["first_mismatch"].get<int64_t>();
    std::cout << "\n";
  }
  std::cout << "check " << (ok ? "passed" : "FAILED") << ": cuda vs cpu\n";
}

Status saveBuffers(const Job &job, const Results &data, json &saved) {
  for (const auto &[b, path] : job.saves) {
    const Buffer &buffer = job.buffers[b];
    std::string descr = npy::descrFor(buffer.dtype);
    int64_t count = buffer.dtype.isSubByte() ? int64_t(data[b].size()) : buffer.elements;
    TILUSVM_TRY(npy::writeFile(path, descr, {count}, data[b]));
    saved.push_back({{"name", buffer.name}, {"path", path}, {"descr", descr}, {"count", count}});
  }
  return Status::success();
}

json argsJson(const Job &job) {
  json out = json::array();
  const Program &program = job.program();
  for (size_t i = 0; i < program.params.size(); ++i) {
    const Variable &param = program.var(program.params[i]);
    if (param.kind != VarKind::Pointer)
      out.push_back({{"name", param.name},
                     {"dtype", param.dtype.name()},
                     {"kind", "scalar"},
                     {"value", job.scalarText[i]}});
  }
  for (const Buffer &b : job.buffers)
    out.push_back({{"name", b.name},
                   {"dtype", b.dtype.name()},
                   {"kind", "pointer"},
                   {"source", b.source},
                   {"elements", b.elements},
                   {"bytes", b.initial.size()}});
  return out;
}

void printHuman(const json &out, const Options &options) {
  const auto &grid = out["grid"];
  std::cout << out["kernel"].get<std::string>() << ": ran on " << out["device"].get<std::string>();
  if (out.contains("device_name"))
    std::cout << " (" << out["device_name"].get<std::string>() << ")";
  std::cout << ", grid " << grid[0] << "x" << grid[1] << "x" << grid[2];
  if (out["cluster"].get<uint32_t>() > 1)
    std::cout << " in clusters of " << out["cluster"];
  std::cout << ", " << out["threads"] << " threads";
  if (out.contains("registers")) {
    std::cout << ", " << out["registers"] << " registers";
    if (out["local_bytes"].get<int>() > 0)
      std::cout << " and " << out["local_bytes"] << " bytes of local memory";
    std::cout << " per thread";
  }
  std::cout << "\n";
  if (options.check)
    printCheck(out["check"]["buffers"], out["check"]["ok"].get<bool>());
  for (const json &s : out["saved"])
    std::cout << "saved " << s["name"].get<std::string>() << " to " << s["path"].get<std::string>()
              << "\n";
  if (out.contains("dumped"))
    for (const json &d : out["dumped"])
      std::cout << "kept " << d.get<std::string>() << "\n";
  if (options.bench) {
    const json &bench = out["bench"];
    bool cpu = bench["device"] == "cpu";
    std::cout << "bench: " << bench["device"].get<std::string>() << " median "
              << fmt(bench["median_ms"].get<double>()) << " ms, min "
              << fmt(bench["min_ms"].get<double>()) << " ms, max "
              << fmt(bench["max_ms"].get<double>()) << " ms over " << bench["iterations"]
              << (cpu ? " runs of the " + bench["interpreter"].get<std::string>() +
                            " CPU reference interpreter (host clock)"
                      : " launches (" + bench["timer"].get<std::string>() + ")")
              << "\n";
    if (cpu)
      std::cout << "bench: the interpreter is a reference, not a performance model of the GPU"
                << (bench["interpreter"] == "checked"
                        ? "; its race and bounds checks dominate (--unchecked times without them)"
                        : "")
                << "\n";
  }
}

// ---- --dump-dir ------------------------------------------------------------------------------

/// Keep the LLVM IR and PTX of the run's kernel in `dir`: on a GPU run, `kernel`, the one the
/// launch took (compiled or taken from the caches for this device and these arguments'
/// specialisation; its IR is compiled again with the same options); on a
/// CPU-only run, which compiles nothing, the unspecialised kernel for sm_90a. Files are named
/// PROGRAM.ARCH[.SPEC].ll and .ptx (SPEC: one letter per parameter, see jit/jit.h). Returns the
/// paths written.
Expected<std::vector<std::string>> dumpKernel(const Job &job, const std::string &dir,
                                              cuda::CudaRuntime *runtime,
                                              const cuda::CompiledKernel *kernel) {
  JitOptions options;
  std::string ptx;
  if (runtime) {
    options = runtime->jitOptions();
    options.specialization = kernel->specialization;
    ptx = kernel->ptx;
  } else {
    auto compiled = compileToPtx(job.module.verified, job.index, options);
    if (!compiled.ok())
      return compiled.takeStatus();
    ptx = compiled->ptx;
  }
  auto ir = compileToLlvmIr(job.module.verified, job.index, options);
  if (!ir.ok())
    return ir.takeStatus();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    return Status::error(ErrorCode::Io, "--dump-dir: cannot create directory " + dir +
                                            (ec ? ": " + ec.message() : ""));
  std::string spec = options.specialization.text();
  std::string base = (std::filesystem::path(dir) /
                      (job.program().name + (options.smVersion >= 90 ? ".sm_90a" : ".sm_80") +
                       (spec.empty() ? "" : "." + spec)))
                         .string();
  std::vector<std::string> written;
  for (const auto &[path, text] : {std::pair{base + ".ll", *ir}, std::pair{base + ".ptx", ptx}}) {
    TILUSVM_TRY(writeOutputFile(
        path, std::span(reinterpret_cast<const uint8_t *>(text.data()), text.size())));
    written.push_back(path);
  }
  return written;
}

// ---- main flow -------------------------------------------------------------------------------

struct DeviceChoice {
  bool cuda = false;
  bool cpu = false;
};

Expected<DeviceChoice> chooseDevices(const Options &options) {
  DeviceChoice choice;
  Status available = cuda::cudaAvailable();
  if (options.check) {
    if (!available.ok())
      return Status::error(ErrorCode::Cuda,
                           "--check runs on cuda and cpu: " + available.first().message);
    return DeviceChoice{true, true};
  }
  if (options.device == "cpu")
    return DeviceChoice{false, true};
  if (options.device == "cuda") {
    if (!available.ok())
      return available;
    return DeviceChoice{true, false};
  }
  if (available.ok())
    return DeviceChoice{true, false};
  std::cerr << "vm-run: " << available.first().message << "; running on the cpu interpreter\n";
  return DeviceChoice{false, true};
}

int runJob(Job &job, const Options &options) {
  auto devices = chooseDevices(options);
  if (!devices.ok())
    return report(devices.status(), options);
  const Program &program = job.program();
  auto geometry = cuda::launchGeometry(program, job.info(), job.scalars);
  if (!geometry.ok())
    return report(geometry.status(), options);
  json out = {{"program", options.path},       {"kernel", program.name},
              {"grid", geometry->grid},        {"cluster", program.cluster},
              {"threads", job.info().threads}, {"shared_bytes", job.info().sharedBytes},
              {"args", argsJson(job)}};
  json bench;
  Results gpu, cpu;
  std::vector<std::string> dumped;
  if (devices->cuda) {
    auto runtime = cuda::CudaRuntime::create();
    if (!runtime.ok())
      return report(runtime.status(), options);
    const cuda::DeviceInfo &info = (*runtime)->device();
    out["device"] = "cuda";
    out["device_name"] = info.name;
    out["compute_capability"] = info.computeCapability;
    auto ran = runCuda(job, options, **runtime, out, options.bench ? &bench : nullptr,
                       options.dumpDir.empty() ? nullptr : &dumped);
    if (!ran.ok())
      return report(ran.status(), options);
    gpu = std::move(ran.value());
  } else if (!options.dumpDir.empty()) {
    auto written = dumpKernel(job, options.dumpDir, nullptr, nullptr);
    if (!written.ok())
      return report(written.status(), options);
    dumped = std::move(written.value());
  }
  if (devices->cpu) {
    if (!devices->cuda)
      out["device"] = "cpu";
    auto ran = runCpu(job, options, options.bench && !devices->cuda ? &bench : nullptr);
    if (!ran.ok())
      return report(ran.status(), options);
    cpu = std::move(ran.value());
  }
  bool ok = true;
  if (options.check)
    out["check"] = {{"buffers", compareAll(job, gpu, cpu, ok)}, {"ok", ok}};
  json saved = json::array();
  if (Status s = saveBuffers(job, devices->cuda ? gpu : cpu, saved); !s.ok())
    return report(s, options);
  out["saved"] = saved;
  if (!options.dumpDir.empty())
    out["dumped"] = dumped;
  if (options.bench)
    out["bench"] = bench;
  out["ok"] = ok;
  if (options.json)
    std::cout << out.dump(2) << "\n";
  else
    printHuman(out, options);
  return ok ? 0 : 1;
}

} // namespace

static int runMain(int argc, char **argv) {
  Options options;
  CLI::App app{"vm-run: run a Tilus VM program on the CPU interpreter or a CUDA device"};
  app.add_option("program", options.path, "bytecode module (.tbc)")->required();
  app.add_option("--kernel", options.kernel, "program to run (default: the only one)");
  app.add_option("--device", options.device, "auto, cpu or cuda")
      ->check(CLI::IsMember({"auto", "cpu", "cuda"}));
  app.add_option("--arg", options.args, "NAME=VALUE for a parameter (see docs/vm-run.md)");
  app.add_option("--save", options.saves, "NAME=FILE.npy: write a buffer after the run");
  app.add_flag("--check", options.check, "run on cuda and cpu and compare every buffer");
  app.add_flag("--bench", options.bench, "time repeated launches and report the median");
  app.add_flag("--json", options.json, "print a machine-readable report");
  app.add_flag("--unchecked", options.unchecked, "cpu: no race, bounds or workspace checks");
  app.add_option("--warmup", options.warmup, "--bench: untimed launches first (cuda)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iters", options.iterations, "--bench: timed launches (100 cuda, 3 cpu)")
      ->check(CLI::Range(1, 1000000000));
  app.add_option("--dump-dir", options.dumpDir,
                 "keep the kernel's LLVM IR and PTX in this directory (PROGRAM.ARCH[.SPEC].ll, "
                 ".ptx)");
  app.add_option("--max-memory", options.maxMemoryText,
                 "host memory for buffers and workspaces, e.g. 8G (default: the available memory)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  if (options.maxMemoryText.empty()) {
    options.maxMemory = availableHostMemory();
  } else {
    auto bytes = run::parseByteSize(options.maxMemoryText);
    if (!bytes.ok())
      return report(run::usage("--max-memory: " + bytes.status().first().message), options);
    options.maxMemory = *bytes;
  }
  CheckOptions check;
  check.fileName = options.path;
  auto verified = loadModuleFile(options.path, check);
  if (!verified.ok())
    return report(verified.status(), options);
  Job job;
  job.module = cuda::LoadedModule::from(std::move(verified.value()));
  auto index = run::chooseProgram(job.module.verified.module, options.kernel);
  if (!index.ok())
    return report(index.status(), options);
  job.index = *index;
  job.maxHostBytes = options.maxMemory;
  job.hostCopies = 2 + uint64_t(options.check) + uint64_t(options.bench);
  if (Status s = run::buildArguments(job, options.args, options.saves); !s.ok())
    return report(s, options);
  return runJob(job, options);
}

/// The error boundary: nothing escapes as an exception or an abort.
int main(int argc, char **argv) {
  return tilus::tools::guardedMain(runMain, argc, argv, "vm-run",
                                   "error[runtime]: out of memory (see --max-memory)");
}
