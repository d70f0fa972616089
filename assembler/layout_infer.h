// Layout inference (docs/layout-inference.md): the layouts a program leaves out, chosen from the
// layouts it writes and the rules of layout_rules.h. Internal to the assembler.
//
// The assembler lowers a program once with its holes (layout arguments left absent, the tile
// shapes of `shape=` kept aside), runs inferLayouts on that IR, and lowers the same syntax tree
// again with the decisions: every hole filled as if the layout had been written, a
// `ConvertLayout` nested around each operand that needs one, `threads=` set. So the bytecode has
// every layout explicit and is exactly what the program with those layouts written by hand
// assembles to.
#pragma once

#include "assembler/assembler.h"
#include "assembler/ast.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tilus::tasm {

/// One lowering of a call: the call and how many times it was lowered before in the program.
/// A call is lowered more than once in a macro body expanded twice (docs/isa.md, "Macros"), whose
/// expansions may need different layouts, and in a loop whose unroll hint is a choice by a
/// parameter (two copies of its body); both lowerings of a program meet the same call sites in
/// the same order.
struct CallSite {
  const AstExpr *call = nullptr;
  uint32_t occurrence = 0;
  friend auto operator<=>(const CallSite &, const CallSite &) = default;
};

/// What the first lowering of a program records for inference, per instruction of its IR.
struct InferInput {
  /// The call site each instruction was lowered from.
  std::vector<CallSite> calls;
  /// The tile shape a hole's `shape=` gives (empty: none given).
  std::vector<std::vector<int64_t>> holeShapes;
  /// Whether the instruction's layout argument was left out and must be inferred (register
  /// layouts of AllocateRegister, Iota, LoadGlobal, LoadShared; shared layouts of
  /// AllocateShared).
  std::vector<bool> holes;
};

/// What the second lowering applies.
struct LayoutDecisions {
  std::map<CallSite, RegisterLayout> registerLayouts; // layout= of these call sites
  std::map<CallSite, SharedLayout> sharedLayouts;     // layout= of these AllocateShared
  /// ConvertLayout(operand, layout=L) around argument `slot` (table position) of the call site.
  std::map<std::pair<CallSite, size_t>, RegisterLayout> conversions;
  uint32_t threads = 0; // set when the program does not write threads=
};

/// A written layout annotation that only chooses speed (docs/layout-inference.md).
struct PerformanceLayout {
  const AstExpr *call;
  Opcode opcode;
  std::vector<int64_t> shape; // the layout's shape (register layouts)
};

/// The written layouts of a fully lowered `program` that are performance-only: those of
/// AllocateRegister, Iota, LoadGlobal, LoadShared, AllocateShared, Reduce and the elementwise
/// instructions, except where the tensor's layout class feeds a View; each call once, and only
/// where every instruction lowered from it qualifies.
std::vector<PerformanceLayout> performanceOnlyLayouts(const Program &program,
                                                      const InferInput &input);

/// `source` without the `layout=` arguments of `layouts` (keyword arguments only), with
/// `shape=[...]` added where the layout gave a tile's shape that nothing else gives.
std::string removeLayoutArguments(std::string_view source,
                                  const std::vector<PerformanceLayout> &layouts);

/// Infer the layouts of `program` (lowered with holes). `candidate` selects a variant where
/// several layouts satisfy the constraints (0: the preferred one). Errors are
/// `layout-infer`, located at the instruction whose constraints conflict.
Expected<LayoutDecisions> inferLayouts(const Program &program, const InferInput &input,
                                       const std::string &fileName, int64_t candidate,
                                       LayoutReport *report);

} // namespace tilus::tasm
