// Helpers shared by the JIT tests: build a verified module from a file or a source text, and
// assemble PTX with ptxas (TILUSVM_PTXAS, set by the build when the CUDA toolkit has it). Cases
// that assemble PTX are declared `TEST_CASE("..." * needsPtxas())`: skipped without ptxas.
#pragma once

#include "assembler/assembler.h"
#include "jit/jit.h"
#include "loader/checker.h"
#include "skip.h"
#include "test_helpers.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>

namespace tilus::testing {

inline std::string readFileText(const std::string &path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline VerifiedModule buildSource(const std::string &source,
                                  const std::map<std::string, std::string> &defines = {},
                                  const std::string &name = "test.tasm") {
  AssembleOptions options;
  options.fileName = name;
  options.defines = defines;
  Expected<Module> module = assemble(source, options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  return std::move(verified).value();
}

inline VerifiedModule buildFile(const std::string &path,
                                const std::map<std::string, std::string> &defines = {}) {
  return buildSource(readFileText(path), defines, path);
}

inline bool ptxasAvailable() {
#ifdef TILUSVM_PTXAS
  return access(TILUSVM_PTXAS, X_OK) == 0;
#else
  return false;
#endif
}

/// Skip unless ptxas is available.
inline SkipUnless needsPtxas() {
#ifdef TILUSVM_PTXAS
  static const std::string reason = std::string("ptxas not executable: ") + TILUSVM_PTXAS;
#else
  static const std::string reason = "ptxas not found by the build (no CUDA toolkit)";
#endif
  return {ptxasAvailable(), reason.c_str()};
}

/// Assemble `ptx` for sm_80 or sm_90a; true when ptxas accepts it. Only in cases declared with
/// needsPtxas(): without ptxas this fails the case. `flags`: more ptxas options (e.g. "-v").
inline bool runPtxas(const std::string &ptx, int sm, std::string &log,
                     const std::string &flags = "") {
  REQUIRE_MESSAGE(ptxasAvailable(), "runPtxas in a case not declared needsPtxas()");
#ifdef TILUSVM_PTXAS
  char ptxPath[] = "/tmp/tilus_jit_XXXXXX";
  int fd = mkstemp(ptxPath);
  REQUIRE(fd >= 0);
  FILE *f = fdopen(fd, "w");
  std::fwrite(ptx.data(), 1, ptx.size(), f);
  std::fclose(f);
  std::string logPath = std::string(ptxPath) + ".log";
  std::string cmd = std::string(TILUSVM_PTXAS) + " -arch=" + (sm == 90 ? "sm_90a" : "sm_80") + " " +
                    flags + " " + ptxPath + " -o /dev/null > " + logPath + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(logPath);
  std::stringstream ss;
  ss << in.rdbuf();
  log = ss.str();
  std::remove(ptxPath);
  std::remove(logPath.c_str());
  return rc == 0;
#else
  (void)ptx;
  (void)sm;
  (void)log;
  (void)flags;
  return false;
#endif
}

/// Checks that ptxas assembles `ptx` for sm_80 or sm_90a (its log in the failure message) and
/// returns the log (for its warnings). Only in cases declared with needsPtxas().
inline std::string checkPtxasAccepts(const std::string &ptx, int sm,
                                     const std::string &flags = "") {
  std::string log;
  bool ok = runPtxas(ptx, sm, log, flags);
  INFO(log);
  CHECK(ok);
  return log;
}

/// Compile program 0 of `m` to PTX for sm_80 (80) or sm_90a (90).
inline Expected<PtxKernel> compileFor(const VerifiedModule &m, int sm) {
  JitOptions options;
  options.smVersion = sm;
  return compileToPtx(m, 0, options);
}

inline bool contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

/// How often `what` occurs in `text` (overlapping occurrences counted).
inline size_t occurrences(const std::string &text, const std::string &what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

/// A Dot of one m16n8k32 atom per warp (32 threads): a [16, 64] (32 elements per thread), b
/// [64, 8] (16), c and d [16, 8] (4), in the atom's fragment layouts; `ab` and `cd` the types.
inline std::string m16n8k32Source(const char *ab, const char *cd) {
  return std::string("def dot<1>(") + ab + "* a_ptr, " + ab + "* b_ptr, " + cd +
         "* c_ptr) threads=32:\n" +
         "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[16, 64]), layout=local(1, "
         "2).column_local(2, 2).spatial(8, 4).local(1, 4))\n" +
         "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[64, 8]), layout=local(2, 1).local(2, "
         "1).column_spatial(4, 8).local(4, 1))\n" +
         "    c = AllocateRegister(" + cd + ", layout=local(2, 1).spatial(8, 4).local(1, 2))\n" +
         "    StoreGlobal(Dot(a, b, c), ViewGlobal(c_ptr, shape=[16, 8]))\n";
}

} // namespace tilus::testing
