#include "isa/program.h"

namespace tilus {

const char *exprOpName(ExprOp op) {
  switch (op) {
  case ExprOp::Const:
    return "const";
  case ExprOp::Var:
    return "var";
  case ExprOp::Add:
    return "+";
  case ExprOp::Sub:
    return "-";
  case ExprOp::Mul:
    return "*";
  case ExprOp::Div:
    return "/";
  case ExprOp::Mod:
    return "%";
  case ExprOp::Shl:
    return "<<";
  case ExprOp::Shr:
    return ">>";
  case ExprOp::BitAnd:
    return "&";
  case ExprOp::BitOr:
    return "|";
  case ExprOp::BitXor:
    return "^";
  case ExprOp::BitNot:
    return "~";
  case ExprOp::Neg:
    return "neg";
  case ExprOp::Eq:
    return "==";
  case ExprOp::Ne:
    return "!=";
  case ExprOp::Lt:
    return "<";
  case ExprOp::Le:
    return "<=";
  case ExprOp::Gt:
    return ">";
  case ExprOp::Ge:
    return ">=";
  case ExprOp::LogicalAnd:
    return "and";
  case ExprOp::LogicalOr:
    return "or";
  case ExprOp::LogicalNot:
    return "not";
  case ExprOp::Select:
    return "select";
  case ExprOp::Min:
    return "min";
  case ExprOp::Max:
    return "max";
  case ExprOp::CeilDiv:
    return "cdiv";
  case ExprOp::Cast:
    return "cast";
  }
  return "?";
}

int exprOpArity(ExprOp op) {
  switch (op) {
  case ExprOp::Const:
  case ExprOp::Var:
    return 0;
  case ExprOp::BitNot:
  case ExprOp::Neg:
  case ExprOp::LogicalNot:
  case ExprOp::Cast:
    return 1;
  case ExprOp::Select:
    return 3;
  case ExprOp::Add:
  case ExprOp::Sub:
  case ExprOp::Mul:
  case ExprOp::Div:
  case ExprOp::Mod:
  case ExprOp::Shl:
  case ExprOp::Shr:
  case ExprOp::BitAnd:
  case ExprOp::BitOr:
  case ExprOp::BitXor:
  case ExprOp::Eq:
  case ExprOp::Ne:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge:
  case ExprOp::LogicalAnd:
  case ExprOp::LogicalOr:
  case ExprOp::Min:
  case ExprOp::Max:
  case ExprOp::CeilDiv:
    return 2;
  }
  return 0;
}

const Program *Module::findProgram(std::string_view name) const {
  for (const Program &p : programs)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace tilus
