// CPU interpreter benchmark (not a test): the time of programs/matmul_f16_pipelined.tasm at
// 512 x 512 x 512 (unchecked and checked) and the elementwise throughput of
// programs/vector_add.tasm in elements per second. Prints the median of several runs.
//   bench_cpu [--workers N] [--repeat R] [--unchecked-only 1] [--only matmul|vector_add]
#include "assembler/assembler.h"
#include "loader/checker.h"
#include "vm/cpu/interpreter.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#ifndef TILUSVM_SOURCE_DIR
#error "TILUSVM_SOURCE_DIR must point at the repository root"
#endif

namespace {

using namespace tilus;

/// The repository root: $TILUSVM_SOURCE_DIR when set (a binary carried to another machine),
/// else the source directory it was built from.
std::string sourceDir() {
  const char *env = std::getenv("TILUSVM_SOURCE_DIR");
  return env && *env ? env : TILUSVM_SOURCE_DIR;
}

bool load(const std::string &relative, VerifiedModule &out) {
  std::ifstream in(sourceDir() + "/" + relative);
  if (!in.good()) {
    std::fprintf(stderr, "cannot open %s/%s\n", sourceDir().c_str(), relative.c_str());
    return false;
  }
  std::stringstream ss;
  ss << in.rdbuf();
  AssembleOptions options;
  options.fileName = relative;
  Expected<Module> module = assemble(ss.str(), options);
  if (!module) {
    std::fprintf(stderr, "%s\n", module.status().toString().c_str());
    return false;
  }
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  if (!verified) {
    std::fprintf(stderr, "%s\n", verified.status().toString().c_str());
    return false;
  }
  out = std::move(verified).value();
  return true;
}

template <typename T> KernelArg buffer(std::vector<T> &v) {
  KernelArg a;
  a.pointer = v.data();
  a.byteSize = v.size() * sizeof(T);
  return a;
}

KernelArg scalar(int32_t v) {
  KernelArg a;
  a.scalarBits = uint32_t(v);
  return a;
}

/// Median seconds of `repeat` runs; false if a run fails.
bool timeRuns(int repeat, const std::function<Status()> &fn, double &median) {
  std::vector<double> times;
  for (int r = 0; r < repeat; ++r) {
    auto start = std::chrono::steady_clock::now();
    Status s = fn();
    auto stop = std::chrono::steady_clock::now();
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.toString().c_str());
      return false;
    }
    times.push_back(std::chrono::duration<double>(stop - start).count());
  }
  std::sort(times.begin(), times.end());
  median = times[times.size() / 2];
  return true;
}

} // namespace

int main(int argc, char **argv) {
  int workers = 0, repeat = 5;
  bool uncheckedOnly = false;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--workers") == 0)
      workers = std::atoi(argv[i + 1]);
    else if (std::strcmp(argv[i], "--repeat") == 0)
      repeat = std::max(1, std::atoi(argv[i + 1]));
    else if (std::strcmp(argv[i], "--unchecked-only") == 0)
      uncheckedOnly = std::atoi(argv[i + 1]) != 0;
    else if (std::strcmp(argv[i], "--only") == 0)
      only = argv[i + 1];
  }
  VerifiedModule matmul, vadd;
  if (!load("programs/matmul_f16_pipelined.tasm", matmul) ||
      !load("programs/vector_add.tasm", vadd))
    return 1;
  const int32_t n = 512;
  std::vector<uint16_t> a(size_t(n * n), 0x3C00), b(size_t(n * n), 0x3800), c(size_t(n * n));
  KernelArgs margs = {buffer(a), buffer(b), buffer(c), scalar(n), scalar(n), scalar(n)};
  CpuRunOptions options;
  options.numWorkers = workers;
  double seconds = 0;
  std::printf("cpu interpreter benchmark (workers=%d, median of %d)\n", workers, repeat);
  std::vector<bool> modes = {false};
  if (!uncheckedOnly)
    modes.push_back(true);
  for (bool checked : modes) {
    if (only == "vector_add")
      break;
    options.checked = checked;
    if (!timeRuns(
            checked ? 1 : repeat, [&] { return runOnCpu(matmul, 0, margs, options); }, seconds))
      return 1;
    double flops = 2.0 * n * n * n;
    std::printf("matmul_f16_pipelined 512x512x512 %-9s %9.3f s  %8.3f GFLOP/s\n",
                checked ? "checked" : "unchecked", seconds, flops / seconds * 1e-9);
  }
  const int32_t elements = 1 << 24;
  std::vector<float> x(size_t(elements), 1.0f), y(size_t(elements), 2.0f),
      z(static_cast<size_t>(elements));
  KernelArgs vargs = {buffer(x), buffer(y), buffer(z), scalar(elements)};
  for (bool checked : modes) {
    if (only == "matmul")
      break;
    options.checked = checked;
    if (!timeRuns(checked ? 1 : repeat, [&] { return runOnCpu(vadd, 0, vargs, options); }, seconds))
      return 1;
    std::printf("vector_add n=%d %-9s %9.3f s  %8.3f Melements/s\n", elements,
                checked ? "checked" : "unchecked", seconds, elements / seconds * 1e-6);
  }
  return 0;
}
