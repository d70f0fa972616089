// Macro expansion (docs/isa.md, "Macros"). A call statement `NAME(a, b, ..)` whose name is a
// macro defined at module level lowers the macro's body in its place, as if it were written
// there inside an `if True:` block: names visible at the call are visible in the body (an
// assignment to one updates it), names first assigned in the body end with the expansion, and
// each parameter is a constant whose value is its argument's (a number, a bool or a data type,
// evaluated at the call). The bytecode holds only the expanded statements.
#include "assembler/lowering.h"

namespace tilus::tasm {

namespace {

/// Expansions nested deeper than this are refused (a macro that calls another, ...).
constexpr size_t kMaxMacroDepth = 16;

/// `status` with "(in macro 'NAME' expanded at line L)" added to each message, so that an error
/// in a body expanded several times says which expansion it comes from.
Status withExpansion(const Status &status, const AstMacro &macro, SrcPos callPos) {
  Status out;
  for (Diagnostic d : status.diagnostics()) {
    d.message += " (in macro '" + macro.name.name + "' expanded at line " +
                 std::to_string(callPos.line) + ")";
    out.append(std::move(d));
  }
  return out;
}

} // namespace

const AstMacro *ProgramLowering::findMacro(const std::string &name) const {
  auto it = macros_.find(name);
  return it == macros_.end() ? nullptr : it->second;
}

Status ProgramLowering::expandMacro(const AstStmt &s, const AstMacro &macro,
                                    std::vector<Stmt> &out) {
  const AstExpr &call = *s.value;
  const std::string &name = macro.name.name;
  for (size_t k = 0; k < expanding_.size(); ++k) {
    if (expanding_[k] != &macro)
      continue;
    std::string chain;
    for (size_t j = k; j < expanding_.size(); ++j)
      chain += expanding_[j]->name.name + " -> ";
    return error(ErrorCode::Macro, call.pos,
                 "macro '" + name + "' expands itself (" + chain + name + ")");
  }
  if (expanding_.size() >= kMaxMacroDepth)
    return error(ErrorCode::Macro, call.pos,
                 "macro expansions nested more than " + std::to_string(kMaxMacroDepth) + " deep");
  if (call.args.size() != macro.params.size())
    return error(ErrorCode::Macro, call.pos,
                 "macro '" + name + "' takes " + std::to_string(macro.params.size()) + " argument" +
                     (macro.params.size() == 1 ? "" : "s") + ", got " +
                     std::to_string(call.args.size()));

  // The arguments, evaluated here (they may use the parameters of an enclosing expansion).
  Status errors;
  ConstTable params;
  ExprContext ctx = exprContext();
  for (size_t k = 0; k < call.args.size(); ++k) {
    const AstArg &a = call.args[k];
    const AstName &p = macro.params[k];
    std::string which =
        "argument " + std::to_string(k + 1) + " of macro '" + name + "' (" + p.name + ")";
    if (!a.keyword.empty()) {
      errors.append(error(ErrorCode::Macro, a.pos,
                          which + " is given by keyword; macro arguments are positional"));
      continue;
    }
    if (isTypeExpr(*a.value, ctx)) {
      auto t = buildType(*a.value, ctx, ErrorCode::Macro, which + " must be a data type");
      if (!t)
        errors.append(t.status());
      else
        params.emplace(p.name, ConstValue{*t, 0, p.pos, true});
      continue;
    }
    auto e = buildScalar(*a.value, ctx);
    if (!e) {
      errors.append(e.status());
      continue;
    }
    if (!e->isConst()) {
      errors.append(error(ErrorCode::Macro, a.value->pos,
                          which +
                              " must be a constant (numbers, bools, data types and the constants "
                              "and macro parameters of them), not a value known only at run "
                              "time"));
      continue;
    }
    params.emplace(p.name, ConstValue{e->dtype, e->bits, p.pos});
  }
  // A parameter must not be hidden by a variable visible at the call (variables win over
  // constants in name lookup) nor hide a module constant; it may hide a parameter of an
  // enclosing expansion.
  for (const AstName &p : macro.params) {
    VarId v = scopes_.find(p.name);
    if (v != kNoId)
      errors.append(error(ErrorCode::Macro, call.pos,
                          "parameter '" + p.name + "' of macro '" + name + "' (line " +
                              std::to_string(p.pos.line) +
                              ") is the name of a variable visible here (declared at line " +
                              std::to_string(scopes_.declaredAt(v).line) + "); rename one"));
    else if (const ConstValue *c = scopes_.findModuleConstant(p.name))
      errors.append(error(ErrorCode::Macro, p.pos,
                          "parameter '" + p.name + "' of macro '" + name +
                              "' is the name of the constant declared at line " +
                              std::to_string(c->pos.line)));
  }
  if (!errors.ok())
    return errors;

  expanding_.push_back(&macro);
  scopes_.push();
  scopes_.pushConstants(params);
  Status body;
  for (const AstStmt &b : macro.body)
    body.append(statement(b, out));
  scopes_.popConstants();
  scopes_.pop();
  expanding_.pop_back();
  return withExpansion(body, macro, call.pos);
}

} // namespace tilus::tasm
