// libFuzzer entry point for the JIT on untrusted programs (built and run by scripts/fuzz.sh
// --target jit with clang++-19 -fsanitize=fuzzer,address,undefined; LLVM itself is not
// instrumented). The input is `.tasm` text, mutated from the assembler's seeds
// (tests/fuzz/corpus-asm: programs/ and the passing conformance programs): every module that
// assembles and that the checker accepts is compiled, each program (at most four) for sm_80
// and sm_90a.
//
// Properties beyond "no crash, no hang, no leak":
//   - the JIT verifies its LLVM IR and traps LLVM fatal errors (jit/fatal_error.h); for a
//     checked program either is a JIT bug, so "is invalid" and "LLVM fatal error" fail here;
//   - any other failure is `jit` or `unsupported` with a message;
//   - a compiled kernel is an `.entry` named as the JIT reports, with the program's threads.
#include "assembler/assembler.h"
#include "jit/jit.h"
#include "loader/checker.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void failure(const char *what, const std::string &detail) {
  std::fprintf(stderr, "fuzz_jit: %s\n%s\n", what, detail.c_str());
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tilus;
  std::string_view source(reinterpret_cast<const char *>(data), size);
  Expected<Module> module = assemble(source);
  if (!module)
    return 0;
  Expected<VerifiedModule> checked = checkModule(std::move(*module));
  if (!checked)
    return 0;
  for (size_t p = 0; p < checked->module.programs.size() && p < 4; ++p) {
    for (int sm : {80, 90}) {
      JitOptions options;
      options.smVersion = sm;
      Expected<PtxKernel> kernel = compileToPtx(*checked, p, options);
      if (!kernel) {
        const Status &s = kernel.status();
        std::string text = s.toString();
        if (text.find("is invalid") != std::string::npos ||
            text.find("LLVM fatal error") != std::string::npos)
          failure("the JIT failed on a checked program", text);
        if (s.code() != ErrorCode::Jit && s.code() != ErrorCode::Unsupported)
          failure("a JIT failure with a code other than jit or unsupported", text);
        if (s.diagnostics().empty() || s.diagnostics()[0].message.empty())
          failure("a JIT failure without a message", text);
        continue;
      }
      if (kernel->ptx.find(".entry " + kernel->entryName) == std::string::npos)
        failure("the PTX has no .entry of the reported name", kernel->entryName);
      if (kernel->threads != checked->programs[p].threads)
        failure("the kernel's threads differ from the checker's", kernel->entryName);
    }
  }
  return 0;
}
