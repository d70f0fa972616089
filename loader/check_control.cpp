// Typing rules of control and debugging (ISA section 5, "Control and debugging"): Print reads a
// scalar, a register tensor or a shared tensor; Synchronize and Exit take no arguments and have
// no rules of their own.
#include "loader/checker_impl.h"

namespace tilus::detail {

bool ProgramChecker::visitPrint(const Instruction &inst, Results &) {
  const Argument &x = inst.arg(ArgName::x);
  if (x.var == kNoId)
    return true;
  VarKind k = info_.vars[x.var].kind;
  if (k == VarKind::Register || k == VarKind::Shared)
    return true;
  return fail(ErrorCode::Scope, "Print of " + varName(x.var) +
                                    ": expected a scalar, a register tensor or a shared tensor");
}

bool ProgramChecker::visitSynchronize(const Instruction &, Results &) { return true; }

bool ProgramChecker::visitExit(const Instruction &, Results &) { return true; }

} // namespace tilus::detail
