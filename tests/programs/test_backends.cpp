// Every conformance program that the checker accepts must run on both backends without an
// internal failure: the JIT compiles it to PTX for sm_80 and sm_90a (and ptxas accepts the PTX:
// a case skipped without ptxas), and the CPU interpreter runs it in checked mode on random inputs,
// finishing cleanly or with located race and trap reports.
#include "assembler/assembler.h"
#include "isa/convert.h"
#include "jit/jit.h"
#include "jit/jit_test_util.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using namespace tilus;
namespace fs = std::filesystem;

std::string readText(const fs::path &path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> acceptedConformancePrograms() {
  std::vector<fs::path> files;
  for (const auto &entry :
       fs::directory_iterator(fs::path(TILUSVM_SOURCE_DIR) / "tests/conformance"))
    if (entry.path().extension() == ".tasm" &&
        readText(entry.path()).find("# expect: ok") != std::string::npos)
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

// Small scalar arguments keep loops short; pointer buffers get the extent the checker derived
// (or 64 KiB where it depends on more than the parameters), filled with random bytes.
void runOnInterpreter(const VerifiedModule &vm, size_t index, std::mt19937 &rng) {
  const Program &program = vm.module.programs[index];
  const ProgramInfo &info = vm.programs[index];
  std::vector<std::vector<uint8_t>> buffers;
  KernelArgs args;
  auto scalarValue = [&](VarId id) -> uint64_t { return fromInt64(3, program.vars[id].dtype); };
  size_t pointerIndex = 0;
  for (VarId id : program.params) {
    const Variable &v = program.vars[id];
    if (v.kind != VarKind::Pointer) {
      args.push_back(KernelArg{scalarValue(id), nullptr, 0});
      continue;
    }
    int64_t bytes = 1 << 16;
    if (pointerIndex < info.extents.size() && info.extents[pointerIndex].computable) {
      int64_t elements = evaluateExtent(program, info.extents[pointerIndex], scalarValue);
      bytes = (elements * v.dtype.storageBits() + 7) / 8 + 16;
    }
    ++pointerIndex;
    buffers.emplace_back(size_t(bytes));
    for (uint8_t &b : buffers.back())
      b = uint8_t(rng());
    args.push_back(KernelArg{0, buffers.back().data(), buffers.back().size()});
  }
  std::ostringstream printed;
  CpuRunOptions options;
  options.checked = true;
  options.printStream = &printed;
  // Type-correct programs may still race or trap at run time (ISA section 1): those are
  // reports with a location, not internal failures.
  Status status = runOnCpu(vm, index, args, options);
  for (const Diagnostic &d : status.diagnostics()) {
    INFO(d.toString());
    CHECK((d.code == ErrorCode::Race || d.code == ErrorCode::Runtime));
    CHECK(d.location.known());
  }
}

VerifiedModule checkedFile(const fs::path &file) {
  AssembleOptions options;
  options.fileName = file.string();
  Expected<Module> module = assemble(readText(file), options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> vm = checkModule(std::move(module).value());
  REQUIRE_OK(vm);
  return std::move(vm).value();
}

PtxKernel compiled(const VerifiedModule &vm, size_t index, int sm) {
  JitOptions jit;
  jit.smVersion = sm;
  Expected<PtxKernel> kernel = compileToPtx(vm, index, jit);
  REQUIRE_OK(kernel);
  return std::move(kernel).value();
}

} // namespace

TEST_CASE("accepted conformance programs compile with the JIT and run on the interpreter") {
  std::vector<fs::path> files = acceptedConformancePrograms();
  REQUIRE(files.size() >= 5);
  std::mt19937 rng(2024);
  for (const fs::path &file : files) {
    SUBCASE(file.filename().string().c_str()) {
      VerifiedModule vm = checkedFile(file);
      for (size_t i = 0; i < vm.module.programs.size(); ++i) {
        INFO("program " << vm.module.programs[i].name);
        for (int sm : {80, 90})
          CHECK(compiled(vm, i, sm).entryName == vm.module.programs[i].name);
        runOnInterpreter(vm, i, rng);
      }
    }
  }
}

TEST_CASE("ptxas accepts the JIT's PTX of every accepted conformance program" *
          tilus::testing::needsPtxas()) {
  for (const fs::path &file : acceptedConformancePrograms()) {
    SUBCASE(file.filename().string().c_str()) {
      VerifiedModule vm = checkedFile(file);
      for (size_t i = 0; i < vm.module.programs.size(); ++i)
        for (int sm : {80, 90}) {
          std::string log;
          bool ok = tilus::testing::runPtxas(compiled(vm, i, sm).ptx, sm, log);
          INFO(vm.module.programs[i].name << " ptxas sm_" << sm << ": " << log);
          CHECK(ok);
        }
    }
  }
}
