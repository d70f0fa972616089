// The assembler: `.tasm` text (ISA section 4) to the in-memory Module, and back.
#pragma once

#include "isa/program.h"

#include <map>
#include <string>
#include <string_view>

namespace tilus {

struct AssembleOptions {
  /// Name used in diagnostics (FILE:LINE:COL) and kept as the module's source name.
  std::string fileName = "<input>";
  /// -D NAME=VALUE overrides of declared constants (overriding an undeclared name is an error).
  std::map<std::string, std::string> defines;
  /// Keep the source text in the module (for tilus-asm -g).
  bool keepSource = false;
};

/// Assemble a module. Errors carry FILE:LINE:COL and an ISA section 6 code (syntax,
/// undefined-name, redefined, unknown-instruction, bad-argument, break-outside-loop, ...).
/// The result is not yet checked: run the loader's checker on it.
Expected<Module> assemble(std::string_view source, const AssembleOptions &options = {});

/// Print a module as `.tasm` that assembles back to a module with identical bytecode.
std::string disassemble(const Module &module);

/// Parse a register layout expression such as "local(2, 1).spatial(8, 4).local(1, 2)"
/// (integer literals and arithmetic only; no names). Used by `tilus-asm layout`.
Expected<RegisterLayout> parseRegisterLayout(std::string_view text);

} // namespace tilus
