// The assembler: `.tasm` text (ISA section 4) to the in-memory Module, and back.
#pragma once

#include "isa/program.h"

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace tilus {

/// What layout inference decided in a module (docs/layout-inference.md).
struct LayoutReport {
  /// One line per inferred layout: "FILE:LINE:COL: NAME = Instr: LAYOUT  [rule: why]".
  std::vector<std::string> lines;
  /// One note per ConvertLayout inserted to resolve a conflict, in the diagnostic format with
  /// `note[layout-infer]`.
  std::vector<std::string> notes;
  /// How many variants the choices of this module allow (the product over the choice points of
  /// every program, saturating at 2^20); 1 when nothing was inferred or nothing was left open.
  int64_t candidates = 1;
};

struct AssembleOptions {
  /// Name used in diagnostics (FILE:LINE:COL) and kept as the module's source name.
  std::string fileName = "<input>";
  /// -D NAME=VALUE overrides of declared constants (overriding an undeclared name is an error).
  std::map<std::string, std::string> defines;
  /// Keep the source text in the module (for tilus-asm -g).
  bool keepSource = false;
  /// Layout inference (docs/layout-inference.md): which variant to take where several layouts
  /// satisfy the constraints (tilus-asm --layout-candidates); 0 is the preferred one.
  int64_t layoutCandidate = 0;
  /// When set, receives what layout inference decided and why (tilus-asm --explain-layouts).
  LayoutReport *layoutReport = nullptr;
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

/// The source with every performance-only layout annotation removed (docs/layout-inference.md,
/// "Which annotations carry meaning"): `layout=` of AllocateRegister, Iota, LoadGlobal,
/// LoadShared, AllocateShared, Reduce and the elementwise instructions, unless the tensor feeds a
/// View (directly or through Cast, elementwise instructions and updates), in which case its
/// layout decides which bits mean which elements. A removed layout that gave a tile's shape is
/// replaced by `shape=[...]` (numbers, for these `defines`). Used by the tests and by
/// `tilus-asm --strip-layouts`.
Expected<std::string> stripPerformanceLayouts(std::string_view source,
                                              const AssembleOptions &options = {});

} // namespace tilus
