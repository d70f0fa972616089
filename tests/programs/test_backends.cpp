// Every conformance program that the checker accepts must run on both backends without an
// internal failure: the JIT compiles it to PTX for sm_80 and sm_90a (programs with Hopper
// instructions: sm_90a, and refused for sm_80) and ptxas accepts the PTX (a case skipped
// without ptxas), and the CPU interpreter runs it in checked mode on random inputs,
// finishing cleanly or with located race and trap reports; for some of them the buffers it
// leaves are compared with references computed here.
#include "assembler/assembler.h"
#include "isa/convert.h"
#include "jit/jit.h"
#include "jit/jit_test_util.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
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

/// The pointer buffers of one interpreter run, in parameter order, before and after it.
struct RunBuffers {
  std::vector<std::vector<uint8_t>> before, after;
  bool ok = false;
};

// Small scalar arguments (3) keep loops short; pointer buffers get the extent the checker
// derived (or 64 KiB where it depends on more than the parameters) plus 16 bytes, filled with
// random bytes.
RunBuffers runOnInterpreter(const VerifiedModule &vm, size_t index, std::mt19937 &rng) {
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
  RunBuffers run;
  run.before = buffers;
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
  run.ok = status.ok();
  run.after = std::move(buffers);
  return run;
}

// ---- independent references for some accepted conformance programs ------------------------
// Each computes, from the buffers before the run and the scalar arguments (all 3), what the
// program's first program must leave in every buffer, with plain C++.

float f32At(const std::vector<uint8_t> &b, size_t k) {
  float v;
  std::memcpy(&v, b.data() + 4 * k, 4);
  return v;
}

void setF32(std::vector<uint8_t> &b, size_t k, float v) { std::memcpy(b.data() + 4 * k, &v, 4); }

/// Compare buffers, treating any two f32 NaNs in buffers of f32 as equal.
void checkBuffers(const std::vector<std::vector<uint8_t>> &got,
                  const std::vector<std::vector<uint8_t>> &want, bool f32) {
  REQUIRE(got.size() == want.size());
  for (size_t p = 0; p < got.size(); ++p) {
    CAPTURE(p);
    REQUIRE(got[p].size() == want[p].size());
    int mismatches = 0;
    for (size_t k = 0; f32 && k + 4 <= got[p].size(); k += 4)
      if (std::memcmp(got[p].data() + k, want[p].data() + k, 4) != 0 &&
          !(std::isnan(f32At(got[p], k / 4)) && std::isnan(f32At(want[p], k / 4))) &&
          mismatches++ < 5)
        FAIL_CHECK("f32 element " << k / 4 << ": got " << f32At(got[p], k / 4) << ", want "
                                  << f32At(want[p], k / 4));
    for (size_t k = 0; !f32 && k < got[p].size(); ++k)
      if (got[p][k] != want[p][k] && mismatches++ < 5)
        FAIL_CHECK("byte " << k << ": got " << int(got[p][k]) << ", want " << int(want[p][k]));
    CHECK(mismatches == 0);
  }
}

using Reference = std::function<void(std::vector<std::vector<uint8_t>> &)>;

const std::map<std::string, Reference> &references() {
  static const std::map<std::string, Reference> table = {
      // y[i] = x[i] * alpha for i < n (the view's length); the rest of y untouched.
      {"ok_masked_vector.tasm",
       [](std::vector<std::vector<uint8_t>> &b) {
         for (size_t i = 0; i < 3; ++i)
           setF32(b[1], i, f32At(b[0], i) * 3.0f);
       }},
      // Stage 1 of the copies reads rows 16..31 of a 3-row tensor: zeros. They reach rows
      // 8..15 of the swizzled tile and are stored at rows m - 8 + 0..7 = -5..2: rows 0..2
      // become 0 (f16 +0), the rows before the tensor are dropped.
      {"ok_shared_pipeline.tasm",
       [](std::vector<std::vector<uint8_t>> &b) {
         std::fill(b[0].begin(), b[0].begin() + 3 * 64 * 2, uint8_t(0));
       }},
      // n = 3: i = 0 and 2 continue, i = 1 adds row 1 to acc; then acc += 0, 2, 4, 6 in turn;
      // acc goes to row 0 of the [8, 32] view.
      {"ok_control_flow.tasm",
       [](std::vector<std::vector<uint8_t>> &b) {
         for (size_t c = 0; c < 32; ++c) {
           float acc = 0.0f + f32At(b[0], 32 + c);
           for (int j = 0; j < 8; j += 2)
             acc = acc + float(j);
           setF32(b[0], c, acc);
         }
       }},
  };
  return table;
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

/// Whether the program uses a Hopper instruction (docs/isa.md section 10), which the JIT refuses
/// for sm_80.
bool usesHopper(const VerifiedModule &vm, size_t index) {
  for (const Instruction &inst : vm.module.programs[index].instructions) {
    std::string name = inst.spec().name;
    if (name.rfind("Mbarrier", 0) == 0 || name.rfind("Wgmma", 0) == 0 || name == "FenceProxyAsync")
      return true;
  }
  return false;
}

/// The targets a program compiles for: sm_80 and sm_90a, or sm_90a alone for Hopper programs
/// (whose sm_80 compilation must fail with `unsupported`).
std::vector<int> targets(const VerifiedModule &vm, size_t index) {
  if (!usesHopper(vm, index))
    return {80, 90};
  JitOptions jit;
  jit.smVersion = 80;
  Expected<PtxKernel> refused = compileToPtx(vm, index, jit);
  CHECK_FALSE(refused.ok());
  if (!refused.ok())
    CHECK(refused.status().first().code == ErrorCode::Unsupported);
  return {90};
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
  // Programs with an entry in references() must also leave the buffers it computes.
  std::vector<fs::path> files = acceptedConformancePrograms();
  REQUIRE(files.size() >= 5);
  std::mt19937 rng(2024);
  for (const fs::path &file : files) {
    SUBCASE(file.filename().string().c_str()) {
      VerifiedModule vm = checkedFile(file);
      for (size_t i = 0; i < vm.module.programs.size(); ++i) {
        INFO("program " << vm.module.programs[i].name);
        for (int sm : targets(vm, i))
          CHECK(compiled(vm, i, sm).entryName == vm.module.programs[i].name);
        RunBuffers run = runOnInterpreter(vm, i, rng);
        auto reference = references().find(file.filename().string());
        if (i == 0 && reference != references().end()) {
          REQUIRE(run.ok);
          std::vector<std::vector<uint8_t>> want = run.before;
          reference->second(want);
          checkBuffers(run.after, want, file.filename().string() != "ok_shared_pipeline.tasm");
        }
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
        for (int sm : targets(vm, i)) {
          std::string log;
          bool ok = tilus::testing::runPtxas(compiled(vm, i, sm).ptx, sm, log);
          INFO(vm.module.programs[i].name << " ptxas sm_" << sm << ": " << log);
          CHECK(ok);
        }
    }
  }
}
