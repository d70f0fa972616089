// Checking a program's preconditions at launch (see isa/precondition.h).
#include "isa/precondition.h"

#include "isa/convert.h"

#include <set>
#include <sstream>

namespace tilus {

namespace {

std::string constantText(DataType t, uint64_t bits) {
  if (t.isBool())
    return bits != 0 ? "True" : "False";
  if (t.isFloat()) {
    std::ostringstream out;
    out.precision(17);
    out << toDouble(bits, t);
    return out.str();
  }
  if (t.isSigned())
    return std::to_string(toInt64(bits, t));
  return std::to_string(bits & bitMask(t.bits));
}

/// Iterative (expressions may be 1024 deep): a stack of (node, next operand) frames.
std::string describe(const Program &program, ExprId root) {
  struct Frame {
    ExprId id;
    int next = 0;
    std::vector<std::string> parts;
  };
  std::vector<Frame> stack;
  stack.push_back({root, 0, {}});
  std::string result;
  while (!stack.empty()) {
    Frame &f = stack.back();
    const ExprNode &n = program.expr(f.id);
    int arity = exprOpArity(n.op);
    if (f.next < arity) {
      ExprId child = n.operands[f.next++];
      stack.push_back({child, 0, {}});
      continue;
    }
    std::string text;
    const std::vector<std::string> &p = f.parts;
    switch (exprOpKind(n.op)) {
    case ExprOpKind::Leaf:
      text = n.op == ExprOp::Var ? program.var(n.var).name : constantText(n.dtype, n.bits);
      break;
    case ExprOpKind::Cast:
      text = n.dtype.name() + "(" + p[0] + ")";
      break;
    case ExprOpKind::Select:
      text = p[1] + " if " + p[0] + " else " + p[2];
      break;
    case ExprOpKind::Arithmetic:
    case ExprOpKind::Comparison:
    case ExprOpKind::Logical:
      if (n.op == ExprOp::Min || n.op == ExprOp::Max || n.op == ExprOp::CeilDiv)
        text = std::string(exprOpName(n.op)) + "(" + p[0] + ", " + p[1] + ")";
      else if (n.op == ExprOp::Neg)
        text = "-" + p[0];
      else if (n.op == ExprOp::LogicalNot)
        text = "not " + p[0];
      else if (arity == 1)
        text = std::string(exprOpName(n.op)) + p[0];
      else
        text = p[0] + " " + exprOpName(n.op) + " " + p[1];
      break;
    }
    bool leaf = arity == 0 || exprOpKind(n.op) == ExprOpKind::Cast || n.op == ExprOp::Min ||
                n.op == ExprOp::Max || n.op == ExprOp::CeilDiv;
    stack.pop_back();
    if (stack.empty())
      result = std::move(text);
    else
      stack.back().parts.push_back(leaf ? text : "(" + text + ")");
  }
  return result;
}

/// "n = 10, k = 4096": the scalar parameters that expression `id` reads, in parameter order.
std::string parameterValues(const Program &program, ExprId id, const VarValueFn &varValue) {
  std::set<VarId> used;
  std::vector<ExprId> work = {id};
  while (!work.empty()) {
    const ExprNode &n = program.expr(work.back());
    work.pop_back();
    if (n.op == ExprOp::Var)
      used.insert(n.var);
    for (int k = 0; k < exprOpArity(n.op); ++k)
      work.push_back(n.operands[k]);
  }
  std::string out;
  for (VarId v : program.params) {
    if (!used.count(v))
      continue;
    const Variable &var = program.var(v);
    out += (out.empty() ? "" : ", ") + var.name + " = " + constantText(var.dtype, varValue(v));
  }
  return out;
}

} // namespace

std::string describeExpr(const Program &program, ExprId id) { return describe(program, id); }

Status checkPreconditions(const Program &program, const VarValueFn &varValue) {
  for (const Stmt *s : program.preconditions()) {
    bool divisionByZero = false;
    uint64_t bits = evaluateExpr(program, s->expr, varValue, &divisionByZero);
    if (bits != 0 && !divisionByZero)
      continue;
    Location loc;
    loc.program = program.name;
    std::string values = parameterValues(program, s->expr, varValue);
    return Status::error(
        ErrorCode::Assert,
        "program `" + program.name + "`: precondition failed" +
            (s->text.empty() ? "" : ": " + s->text) + ": `" + describe(program, s->expr) + "`" +
            (values.empty() ? "" : " with " + values) +
            (divisionByZero ? " (a division by zero)" : "") +
            (s->loc.line != 0 ? " (assert at line " + std::to_string(s->loc.line) + ")" : ""),
        loc);
  }
  return Status::success();
}

} // namespace tilus
