// libFuzzer entry point for the assembler: the input is .tasm source text (built and run by
// scripts/fuzz.sh --target asm with clang++-19 -fsanitize=fuzzer,address,undefined).
//
// Beyond "no crash, no hang, no leak", on every input:
//   - a rejected source has at least one diagnostic;
// and on every source that assembles and checks:
//   - its bytecode decodes, or is refused with the `bytecode` code (tilus-asm then reports it:
//     whatever tilus-asm writes also decodes);
//   - the disassembly of the decoded module assembles and checks again to the same bytecode.
#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "loader/checker.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void failure(const char *what) {
  std::fprintf(stderr, "fuzz_asm: %s\n", what);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tilus;
  std::string_view source(reinterpret_cast<const char *>(data), size);
  Expected<Module> module = assemble(source);
  if (!module) {
    if (module.status().diagnostics().empty())
      failure("a rejected source has no diagnostic");
    return 0;
  }
  Expected<VerifiedModule> checked = checkModule(std::move(*module));
  if (!checked) {
    if (checked.status().diagnostics().empty())
      failure("a module the checker rejects has no diagnostic");
    return 0;
  }
  std::vector<uint8_t> bytes = encodeModule(checked->module);
  Expected<Module> decoded = decodeModule(bytes);
  if (!decoded) {
    if (decoded.status().code() != ErrorCode::Bytecode)
      failure("assembled bytecode is refused with a code other than `bytecode`");
    return 0;
  }
  std::string text = disassemble(*decoded);
  Expected<Module> again = assemble(text);
  if (!again)
    failure("the disassembly of an accepted module does not assemble");
  Expected<VerifiedModule> againChecked = checkModule(std::move(*again));
  if (!againChecked)
    failure("the disassembly of an accepted module does not check");
  if (encodeModule(againChecked->module) != bytes)
    failure("the disassembly assembles to different bytecode");
  return 0;
}
