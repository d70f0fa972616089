// Every program of programs/ (the paper program also at the test size -D M=64 -D N=64 -D K=64)
// compiled to PTX for sm_80 and sm_90a, and every PTX assembled by ptxas for its target: the
// generated code must be valid for the real assembler, not only for LLVM. Without ptxas the
// assembling cases are skipped (the compilation is still checked by its own cases).
#include "jit/jit_test_util.h"

#include <filesystem>

using namespace tilus;
using namespace tilus::testing;

namespace {

std::vector<std::string> programFiles() {
  std::vector<std::string> files;
  for (const auto &entry :
       std::filesystem::recursive_directory_iterator(std::string(TILUSVM_SOURCE_DIR) + "/programs"))
    if (entry.is_regular_file() && entry.path().extension() == ".tasm")
      files.push_back(entry.path().string());
  std::sort(files.begin(), files.end());
  return files;
}

void compileAll(const std::string &path, const std::map<std::string, std::string> &defines,
                bool assemble) {
  VerifiedModule module = buildFile(path, defines);
  for (size_t p = 0; p < module.module.programs.size(); ++p) {
    for (int sm : {80, 90}) {
      INFO(path << " program " << module.module.programs[p].name << " sm_" << sm);
      JitOptions options;
      options.smVersion = sm;
      Expected<PtxKernel> kernel = compileToPtx(module, p, options);
      REQUIRE_OK(kernel);
      CHECK(kernel->entryName == module.module.programs[p].name);
      CHECK(kernel->ptx.find(".entry " + kernel->entryName) != std::string::npos);
      if (!assemble)
        continue;
      std::string log;
      bool ok = runPtxas(kernel->ptx, sm, log);
      INFO(log);
      CHECK(ok);
    }
  }
}

} // namespace

TEST_CASE("every program compiles to PTX (sm_80, sm_90a)") {
  std::vector<std::string> files = programFiles();
  REQUIRE(files.size() >= 4);
  for (const std::string &path : files) {
    SUBCASE(path.c_str()) { compileAll(path, {}, false); }
  }
}

TEST_CASE("every program's PTX is accepted by ptxas (sm_80, sm_90a)" * needsPtxas()) {
  std::vector<std::string> files = programFiles();
  REQUIRE(files.size() >= 4);
  for (const std::string &path : files) {
    SUBCASE(path.c_str()) { compileAll(path, {}, true); }
  }
}

TEST_CASE("the paper program at the test size compiles and assembles" * needsPtxas()) {
  compileAll(std::string(TILUSVM_SOURCE_DIR) + "/programs/paper_matmul_f16_i6.tasm",
             {{"M", "64"}, {"N", "64"}, {"K", "64"}}, true);
}
