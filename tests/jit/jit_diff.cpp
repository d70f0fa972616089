// Differential testing of the JIT against the CPU interpreter (see jit_diff.h).
#include "jit_diff.h"

#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "isa/convert.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"
#include "vm/cuda/runtime.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <unistd.h>

namespace tilus::jitdiff {

namespace {

/// Element k of a bit-packed array (ISA section 2: bits [k N, (k + 1) N), LSB first).
void putElement(std::vector<uint8_t> &bytes, int64_t k, int n, uint64_t value) {
  for (int b = 0; b < n; ++b) {
    int64_t bit = k * n + b;
    uint8_t mask = uint8_t(1u << (bit % 8));
    if ((value >> b) & 1)
      bytes[size_t(bit / 8)] |= mask;
    else
      bytes[size_t(bit / 8)] &= uint8_t(~mask);
  }
}

std::vector<uint64_t> specialValues(DataType t) {
  std::vector<uint64_t> out = {0, 1, bitMask(t.bits)};
  if (t.isInt()) {
    out.push_back(uint64_t(1) << (t.bits - 1)); // signed min
    out.push_back(bitMask(t.bits - 1));         // signed max
    out.push_back(2);
    out.push_back(uint64_t(t.bits)); // a shift by the width
    out.push_back(uint64_t(t.bits - 1));
  }
  if (t.isFloat()) {
    uint64_t sign = uint64_t(1) << (t.bits - 1);
    out.push_back(sign); // -0
    out.push_back(fromDouble(1.0, t));
    out.push_back(fromDouble(-1.0, t));
    out.push_back(fromDouble(INFINITY, t));
    out.push_back(fromDouble(-INFINITY, t));
    out.push_back(fromDouble(NAN, t));
    out.push_back(maxFinite(t));
    out.push_back(maxFinite(t) | sign);
    out.push_back(1); // smallest subnormal
    out.push_back(fromDouble(0.5, t));
    out.push_back(fromDouble(2.5, t));
  }
  return out;
}

std::vector<uint8_t> makeBuffer(const BufferSpec &spec, uint64_t seed) {
  int n = spec.dtype.storageBits();
  std::vector<uint8_t> bytes(size_t((spec.elements * n + 7) / 8) + 1, 0);
  std::mt19937_64 rng(seed);
  for (uint8_t &b : bytes)
    b = uint8_t(rng());
  if (spec.fill == Fill::Random)
    return bytes;
  if (spec.fill == Fill::Zero) {
    std::fill(bytes.begin(), bytes.end(), 0);
    return bytes;
  }
  DataType t = spec.dtype;
  REQUIRE((spec.fill != Fill::Given || spec.given.size() == size_t(spec.elements)));
  std::vector<uint64_t> specials = specialValues(t);
  for (int64_t k = 0; k < spec.elements; ++k) {
    uint64_t v = 0;
    double r = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
    switch (spec.fill) {
    case Fill::Special:
      if (k % 3 != 0)
        continue;
      v = specials[size_t(rng() % specials.size())];
      break;
    case Fill::Moderate:
      v = t.isFloat() ? fromDouble(r * 16.0 - 8.0, t) : fromInt64(int64_t(rng() % 41) - 20, t);
      break;
    case Fill::Positive:
      v = t.isFloat() ? fromDouble(r * 16.0 + 1e-3, t) : fromInt64(int64_t(rng() % 40) + 1, t);
      break;
    case Fill::Index:
      v = t.isFloat() ? fromDouble(double(k), t) : fromInt64(k, t);
      break;
    case Fill::Codes:
      v = uint64_t(k) & bitMask(t.bits);
      break;
    case Fill::Given:
      v = spec.given[size_t(k)];
      break;
    case Fill::Random:
    case Fill::Zero:
      break;
    }
    if (t.isBool())
      v &= 1;
    putElement(bytes, k, n, v);
  }
  return bytes;
}

struct Prepared {
  VerifiedModule module;
  size_t program = 0;
  std::vector<std::vector<uint8_t>> inputs; // per BufferSpec
  KernelArgs args;                          // scalars filled, pointers per run
  std::vector<int> bufferOfParam;           // per parameter: BufferSpec index or -1
};

Prepared prepare(const Case &c) {
  Prepared p;
  AssembleOptions options;
  options.fileName = c.name + ".tasm";
  options.defines = c.defines;
  Expected<Module> module = assemble(c.source, options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  p.module = std::move(verified).value();
  if (!c.program.empty()) {
    bool found = false;
    for (size_t i = 0; i < p.module.module.programs.size(); ++i)
      if (p.module.module.programs[i].name == c.program) {
        p.program = i;
        found = true;
      }
    REQUIRE_MESSAGE(found, "no program " << c.program);
  }
  const Program &prog = p.module.module.programs[p.program];
  for (size_t k = 0; k < c.buffers.size(); ++k)
    p.inputs.push_back(
        makeBuffer(c.buffers[k], std::hash<std::string>()(c.name + c.buffers[k].param)));
  for (VarId param : prog.params) {
    const Variable &v = prog.var(param);
    KernelArg arg;
    int buffer = -1;
    if (v.kind == VarKind::Pointer) {
      for (size_t k = 0; k < c.buffers.size(); ++k)
        if (c.buffers[k].param == v.name)
          buffer = int(k);
      REQUIRE_MESSAGE(buffer >= 0, "no buffer for pointer parameter " << v.name);
    } else {
      auto it = c.scalars.find(v.name);
      REQUIRE_MESSAGE(it != c.scalars.end(), "no value for scalar parameter " << v.name);
      arg.scalarBits = it->second;
    }
    p.args.push_back(arg);
    p.bufferOfParam.push_back(buffer);
  }
  return p;
}

cuda::CudaRuntime *gpuRuntime(std::string &why) {
  static std::string reason;
  static cuda::CudaRuntime *runtime = []() -> cuda::CudaRuntime * {
    Status available = cuda::cudaAvailable();
    if (!available.ok()) {
      reason = available.first().message;
      return nullptr;
    }
    cuda::RuntimeOptions options;
    // No disk cache (every kernel is compiled by this JIT), unless TILUSVM_DIFF_CACHE_DIR names
    // one: mutation testing installs a JIT mutant's kernels there (tests/jit/mutant_kernels).
    const char *cache = std::getenv("TILUSVM_DIFF_CACHE_DIR");
    options.cacheDirectory = cache ? cache : "";
    auto created = cuda::CudaRuntime::create(options);
    if (!created) {
      reason = created.status().toString();
      return nullptr;
    }
    return created.value().release();
  }();
  why = reason;
  return runtime;
}

/// Run `f` with the process's stdout redirected to a file; returns what was written.
template <typename F> std::string captureStdout(F &&f) {
  std::fflush(stdout);
  char path[] = "/tmp/tilus_jitdiff_XXXXXX";
  int fd = mkstemp(path);
  int saved = dup(1);
  dup2(fd, 1);
  f();
  std::fflush(stdout);
  dup2(saved, 1);
  close(saved);
  close(fd);
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::remove(path);
  return ss.str();
}

double ulpsApart(uint64_t x, uint64_t y, DataType t) {
  double a = toDouble(x, t), b = toDouble(y, t);
  if (std::isnan(a) || std::isnan(b))
    return (std::isnan(a) && std::isnan(b)) ? 0.0 : INFINITY;
  if (a == b)
    return 0.0;
  if (std::isinf(a) || std::isinf(b))
    return INFINITY;
  int bias = (1 << (t.exponent - 1)) - 1;
  int e = 0;
  std::frexp(b, &e);
  int unitExp = std::max(e - 1, 1 - bias) - t.mantissa;
  return std::fabs(a - b) / std::ldexp(1.0, unitExp);
}

void compareBuffer(const std::string &name, const BufferSpec &spec, const std::vector<uint8_t> &cpu,
                   const std::vector<uint8_t> &gpu) {
  DataType t = spec.dtype;
  int n = t.storageBits();
  int reported = 0;
  bool tolerant = t.isFloat() && (spec.ulps > 0 || spec.rel > 0);
  for (int64_t k = 0; k < spec.elements; ++k) {
    uint64_t want = getElement(cpu, k, n), got = getElement(gpu, k, n);
    if (want == got)
      continue;
    bool ok = false;
    if (tolerant) {
      if (spec.rel > 0) {
        double a = toDouble(got, t), b = toDouble(want, t);
        ok =
            (std::isnan(a) && std::isnan(b)) || std::fabs(a - b) <= spec.rel * (std::fabs(b) + 1.0);
      } else {
        ok = ulpsApart(got, want, t) <= spec.ulps;
      }
    }
    if (!ok && reported++ < 5)
      FAIL_CHECK(name << ": buffer " << spec.param << " element " << k << " cpu 0x" << std::hex
                      << want << " gpu 0x" << got << std::dec << " (" << toDouble(want, t) << " vs "
                      << toDouble(got, t) << ")");
  }
  CHECK_MESSAGE(reported == 0, name << ": " << reported << "+ mismatches in " << spec.param);
}

} // namespace

uint64_t getElement(const std::vector<uint8_t> &bytes, int64_t k, int n) {
  uint64_t v = 0;
  for (int b = 0; b < n; ++b) {
    int64_t bit = k * n + b;
    v |= uint64_t((bytes[size_t(bit / 8)] >> (bit % 8)) & 1) << b;
  }
  return v;
}

namespace {
Sides currentSides = Sides::Both;
} // namespace

SidesScope::SidesScope(Sides sides) : saved(currentSides) { currentSides = sides; }
SidesScope::~SidesScope() { currentSides = saved; }

void runCase(const Case &c) {
  INFO("case " << c.name);
  Prepared p = prepare(c);
  if (const char *dir = std::getenv("TILUSVM_DIFF_RECORD_DIR")) {
    // The module as bytecode, named by its content hash (tests/jit/mutant_kernels compiles it).
    char name[32];
    std::snprintf(name, sizeof name, "%016llx.tbc",
                  static_cast<unsigned long long>(moduleContentHash(p.module.module)));
    std::vector<uint8_t> bytes = encodeModule(p.module.module);
    std::ofstream(std::string(dir) + "/" + name, std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
  }
  // CPU reference
  std::vector<std::vector<uint8_t>> cpu = p.inputs;
  KernelArgs cpuArgs = p.args;
  for (size_t k = 0; k < cpuArgs.size(); ++k)
    if (p.bufferOfParam[k] >= 0) {
      std::vector<uint8_t> &buffer = cpu[size_t(p.bufferOfParam[k])];
      cpuArgs[k].pointer = buffer.data();
      cpuArgs[k].byteSize = buffer.size();
    }
  std::stringstream cpuPrint;
  CpuRunOptions options;
  options.printStream = &cpuPrint;
  options.numWorkers = 1;
  REQUIRE_OK(runOnCpu(p.module, p.program, cpuArgs, options));
  if (c.check)
    c.check("interpreter", cpu);
  if (currentSides == Sides::Interpreter)
    return;
  std::string why;
  cuda::CudaRuntime *rt = gpuRuntime(why);
  REQUIRE_MESSAGE(rt, "no CUDA runtime for a GPU case: " << why);
  // GPU
  cuda::LoadedModule loaded = cuda::LoadedModule::from(p.module);
  std::vector<cuda::DeviceBuffer> device;
  KernelArgs gpuArgs = p.args;
  for (const std::vector<uint8_t> &input : p.inputs) {
    Expected<cuda::DeviceBuffer> b = rt->allocate(input.size());
    REQUIRE_OK(b);
    REQUIRE_OK(rt->copyToDevice(*b, input.data(), input.size()));
    device.push_back(std::move(b).value());
  }
  for (size_t k = 0; k < gpuArgs.size(); ++k)
    if (p.bufferOfParam[k] >= 0) {
      const cuda::DeviceBuffer &b = device[size_t(p.bufferOfParam[k])];
      gpuArgs[k].pointer = reinterpret_cast<void *>(uintptr_t(b.address()));
      gpuArgs[k].byteSize = b.bytes();
    }
  Status launched;
  std::string gpuPrint = captureStdout([&] {
    for (int i = 0; i < c.launches && launched.ok(); ++i)
      launched = rt->launch(loaded, p.program, gpuArgs, nullptr);
    if (launched.ok())
      launched = rt->synchronize(nullptr);
  });
  REQUIRE_OK(launched);
  std::vector<std::vector<uint8_t>> gpu;
  for (size_t k = 0; k < c.buffers.size(); ++k) {
    gpu.emplace_back(p.inputs[k].size());
    REQUIRE_OK(rt->copyToHost(gpu[k].data(), device[k], gpu[k].size()));
  }
  if (c.check)
    c.check("gpu", gpu);
  for (size_t k = 0; k < c.buffers.size(); ++k)
    compareBuffer(c.name, c.buffers[k], cpu[k], gpu[k]);
  if (c.comparePrint)
    CHECK_MESSAGE(gpuPrint == cpuPrint.str(), c.name << ": Print text differs\ncpu:\n"
                                                     << cpuPrint.str() << "gpu:\n"
                                                     << gpuPrint);
}

} // namespace tilus::jitdiff
