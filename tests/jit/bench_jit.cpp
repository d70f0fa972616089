// Timings of JIT-compiled programs on the GPU (device events, median of 20 launches after 3
// warm-ups), printed as a table: memory-bound programs in GB/s (bytes read + written), matrix
// products in TFLOP/s. Compare with a baseline measured in the same run on the same device
// (scripts: the device machine's PyTorch copy and matmul), never across machines.
// Usage: bench_jit [PROGRAMS_DIR]   (exits 0 with a message when there is no GPU)
#include "assembler/assembler.h"
#include "isa/convert.h"
#include "loader/checker.h"
#include "vm/cuda/runtime.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

using namespace tilus;

namespace {

std::string programsDir = std::string(TILUSVM_SOURCE_DIR) + "/programs";

std::string readText(const std::string &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Bench {
  std::string name;
  std::string source;
  std::map<std::string, std::string> defines;
  std::string program;
  std::vector<std::pair<std::string, uint64_t>> buffers; // pointer param -> bytes
  std::map<std::string, uint64_t> scalars;
  double work = 0; // bytes or flops
  bool flops = false;
};

int run(cuda::CudaRuntime &rt, const Bench &bench) {
  AssembleOptions options;
  options.defines = bench.defines;
  Expected<Module> module = assemble(bench.source, options);
  if (!module) {
    std::fprintf(stderr, "%s: %s\n", bench.name.c_str(), module.status().toString().c_str());
    return 1;
  }
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  if (!verified) {
    std::fprintf(stderr, "%s: %s\n", bench.name.c_str(), verified.status().toString().c_str());
    return 1;
  }
  cuda::LoadedModule loaded = cuda::LoadedModule::from(std::move(verified).value());
  size_t index = 0;
  const Program *program = nullptr;
  for (size_t i = 0; i < loaded.verified.module.programs.size(); ++i)
    if (bench.program.empty() || loaded.verified.module.programs[i].name == bench.program) {
      index = i;
      program = &loaded.verified.module.programs[i];
      break;
    }
  std::vector<cuda::DeviceBuffer> buffers;
  KernelArgs args;
  std::mt19937 rng(1);
  for (VarId p : program->params) {
    const Variable &v = program->var(p);
    KernelArg arg;
    if (v.kind == VarKind::Pointer) {
      uint64_t bytes = 0;
      for (const auto &[name, size] : bench.buffers)
        if (name == v.name)
          bytes = size;
      Expected<cuda::DeviceBuffer> b = rt.allocate(bytes);
      if (!b) {
        std::fprintf(stderr, "%s\n", b.status().toString().c_str());
        return 1;
      }
      // small random values (f16 / f32 / bytes alike: the low bits vary, exponents moderate)
      std::vector<uint16_t> host(bytes / 2 + 1);
      for (uint16_t &h : host)
        h = uint16_t(
            fromDouble(std::uniform_real_distribution<double>(-1, 1)(rng), DataType::f16()));
      (void)rt.copyToDevice(*b, host.data(), bytes);
      arg.pointer = reinterpret_cast<void *>(uintptr_t(b->address()));
      arg.byteSize = bytes;
      buffers.push_back(std::move(b).value());
    } else {
      arg.scalarBits = bench.scalars.at(v.name);
    }
    args.push_back(arg);
  }
  Expected<std::vector<double>> times = rt.benchmark(loaded, index, args, nullptr, 3, 20);
  if (!times) {
    std::fprintf(stderr, "%s: %s\n", bench.name.c_str(), times.status().toString().c_str());
    return 1;
  }
  std::vector<double> t = *times;
  std::sort(t.begin(), t.end());
  double ms = t[t.size() / 2];
  double rate = bench.work / (ms * 1e-3);
  std::printf("%-28s %10.4f ms  %10.1f %s\n", bench.name.c_str(), ms,
              bench.flops ? rate / 1e12 : rate / 1e9, bench.flops ? "TFLOP/s" : "GB/s");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc > 1)
    programsDir = argv[1];
  Status available = cuda::cudaAvailable();
  if (!available.ok()) {
    std::printf("bench_jit skipped: %s\n", available.first().message.c_str());
    return 0;
  }
  cuda::RuntimeOptions options;
  options.cacheDirectory = "";
  Expected<std::unique_ptr<cuda::CudaRuntime>> rt = cuda::CudaRuntime::create(options);
  if (!rt) {
    std::fprintf(stderr, "%s\n", rt.status().toString().c_str());
    return 1;
  }
  std::vector<Bench> benches;
  uint64_t n = uint64_t(1) << 26;
  benches.push_back({"vector_add f32 2^26",
                     readText(programsDir + "/vector_add.tasm"),
                     {},
                     "",
                     {{"x_ptr", 4 * n}, {"y_ptr", 4 * n}, {"z_ptr", 4 * n}},
                     {{"n", n}},
                     12.0 * double(n)});
  benches.push_back({"copy f32x4 2^26",
                     "def copy<cdiv(n, 1024)>(f32* x_ptr, f32* y_ptr, i32 n) threads=256:\n"
                     "    bi = BlockIndices()\n"
                     "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), "
                     "layout=spatial(256).local(4), offset=[bi * 1024:])\n"
                     "    StoreGlobal(x, ViewGlobal(y_ptr, shape=[n]), offset=[bi * 1024:])\n",
                     {},
                     "",
                     {{"x_ptr", 4 * n}, {"y_ptr", 4 * n}},
                     {{"n", n}},
                     8.0 * double(n)});
  uint64_t rows = 1 << 17;
  benches.push_back({"softmax f32 2^17x128",
                     readText(programsDir + "/softmax_rows.tasm"),
                     {},
                     "",
                     {{"x_ptr", 4 * rows * 128}, {"y_ptr", 4 * rows * 128}},
                     {{"m", rows}},
                     8.0 * double(rows) * 128});
  for (uint64_t s : {uint64_t(2048), uint64_t(4096)}) {
    benches.push_back({"pipelined f16 " + std::to_string(s) + "^3",
                       readText(programsDir + "/matmul_f16_pipelined.tasm"),
                       {},
                       "",
                       {{"a_ptr", 2 * s * s}, {"b_ptr", 2 * s * s}, {"c_ptr", 2 * s * s}},
                       {{"m", s}, {"n", s}, {"k", s}},
                       2.0 * double(s * s * s),
                       true});
  }
  std::string swizzled = readText(programsDir + "/matmul_f16_pipelined.tasm");
  for (const char *name : {"sa", "sb"}) {
    std::string from = std::string(name) + " = AllocateShared(f16, shape=[STAGES, ";
    size_t at = swizzled.find(from);
    if (at == std::string::npos)
      continue;
    size_t end = swizzled.find(")", at);
    std::string dims = swizzled.substr(at + from.size(), swizzled.find("]", at) - at - from.size());
    swizzled.replace(at, end - at + 1,
                     from + dims + "], layout=swizzle(row_major(STAGES, " + dims + "), 3, 3, 6))");
  }
  for (const char *stages : {"4", "6"}) {
    uint64_t s = 4096;
    benches.push_back({std::string("pipelined swz STAGES=") + stages + " 4096^3",
                       swizzled,
                       {{"STAGES", stages}},
                       "",
                       {{"a_ptr", 2 * s * s}, {"b_ptr", 2 * s * s}, {"c_ptr", 2 * s * s}},
                       {{"m", s}, {"n", s}, {"k", s}},
                       2.0 * double(s * s * s),
                       true});
  }
  for (uint64_t s : {uint64_t(2048), uint64_t(4096)}) {
    benches.push_back({"pipelined swizzled " + std::to_string(s) + "^3",
                       swizzled,
                       {},
                       "",
                       {{"a_ptr", 2 * s * s}, {"b_ptr", 2 * s * s}, {"c_ptr", 2 * s * s}},
                       {{"m", s}, {"n", s}, {"k", s}},
                       2.0 * double(s * s * s),
                       true});
  }
  std::string sz = "4096";
  benches.push_back({"paper f16xi6 4096^3",
                     readText(programsDir + "/paper_matmul_f16_i6.tasm"),
                     {{"M", sz}, {"N", sz}, {"K", sz}},
                     "matmul",
                     {{"a_ptr", 2ull * 4096 * 4096},
                      {"transformed_b_ptr", 4096ull * 4096 * 6 / 8},
                      {"c_ptr", 2ull * 4096 * 4096}},
                     {},
                     2.0 * 4096.0 * 4096.0 * 4096.0,
                     true});
  int failures = 0;
  for (const Bench &b : benches)
    failures += run(**rt, b);
  return failures == 0 ? 0 : 1;
}
