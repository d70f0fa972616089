// Scalar expression operators (ISA section 4 "Scalars"): one table, TILUSVM_EXPR_OPS, in the
// X-macro style of the error codes (isa/status.h). Each row is
//   X(Name, Spelling, Arity, Kind)
//   Spelling: the name in IR dumps and diagnostics (exprOpName)
//   Arity:    the number of operands (0 for Const and Var)
//   Kind:     how the operator types and evaluates its operands (ExprOpKind below): the
//             evaluator (isa/scalar_eval.cpp), the checker's typing and the JIT's lowering
//             dispatch on it.
// The enum value is the row's position and is written to bytecode, so rows are only appended.
// Integer `/` and `%` truncate toward zero; CeilDiv rounds up. Shr is arithmetic for signed
// types. Comparisons and logical operators give bool.
#pragma once

#include <cstdint>

namespace tilus {

#define TILUSVM_EXPR_OPS(X)                                                                        \
  X(Const, "const", 0, Leaf)                                                                       \
  X(Var, "var", 0, Leaf)                                                                           \
  X(Add, "+", 2, Arithmetic)                                                                       \
  X(Sub, "-", 2, Arithmetic)                                                                       \
  X(Mul, "*", 2, Arithmetic)                                                                       \
  X(Div, "/", 2, Arithmetic)                                                                       \
  X(Mod, "%", 2, Arithmetic)                                                                       \
  X(Shl, "<<", 2, Arithmetic)                                                                      \
  X(Shr, ">>", 2, Arithmetic)                                                                      \
  X(BitAnd, "&", 2, Arithmetic)                                                                    \
  X(BitOr, "|", 2, Arithmetic)                                                                     \
  X(BitXor, "^", 2, Arithmetic)                                                                    \
  X(BitNot, "~", 1, Arithmetic)                                                                    \
  X(Neg, "neg", 1, Arithmetic)                                                                     \
  X(Eq, "==", 2, Comparison)                                                                       \
  X(Ne, "!=", 2, Comparison)                                                                       \
  X(Lt, "<", 2, Comparison)                                                                        \
  X(Le, "<=", 2, Comparison)                                                                       \
  X(Gt, ">", 2, Comparison)                                                                        \
  X(Ge, ">=", 2, Comparison)                                                                       \
  X(LogicalAnd, "and", 2, Logical)                                                                 \
  X(LogicalOr, "or", 2, Logical)                                                                   \
  X(LogicalNot, "not", 1, Logical)                                                                 \
  X(Select, "select", 3, Select)                                                                   \
  X(Min, "min", 2, Arithmetic)                                                                     \
  X(Max, "max", 2, Arithmetic)                                                                     \
  X(CeilDiv, "cdiv", 2, Arithmetic)                                                                \
  X(Cast, "cast", 1, Cast)

enum class ExprOp : uint8_t {
#define TILUSVM_X(Name, Spelling, Arity, Kind) Name,
  TILUSVM_EXPR_OPS(TILUSVM_X)
#undef TILUSVM_X
};

/// The case labels of every operator whose Kind is not Arithmetic, generated from the table: an
/// evaluator or lowerer of the arithmetic operators ends its switch over ExprOp with
///   TILUSVM_EXPR_OP_CASES_NOT_ARITHMETIC
///     break; // handled by the caller
/// so that a new non-arithmetic row needs no edit there and -Wswitch still reports a missing
/// arithmetic operator.
#define TILUSVM_EXPR_OP_CASES_NOT_ARITHMETIC TILUSVM_EXPR_OPS(TILUSVM_DETAIL_NOT_ARITHMETIC)
#define TILUSVM_DETAIL_NOT_ARITHMETIC(Name, Spelling, Arity, Kind)                                 \
  TILUSVM_DETAIL_NOT_ARITHMETIC_##Kind(Name)
#define TILUSVM_DETAIL_NOT_ARITHMETIC_Arithmetic(Name)
#define TILUSVM_DETAIL_NOT_ARITHMETIC_Leaf(Name) case ExprOp::Name:
#define TILUSVM_DETAIL_NOT_ARITHMETIC_Comparison(Name) case ExprOp::Name:
#define TILUSVM_DETAIL_NOT_ARITHMETIC_Logical(Name) case ExprOp::Name:
#define TILUSVM_DETAIL_NOT_ARITHMETIC_Select(Name) case ExprOp::Name:
#define TILUSVM_DETAIL_NOT_ARITHMETIC_Cast(Name) case ExprOp::Name:

/// How an operator treats its operands: Leaf (Const, Var: none); Arithmetic (computed in the
/// node's type); Comparison (compared in the operands' common type, gives bool); Logical
/// (operands tested for != 0, gives bool); Select (condition, then, else); Cast (converts
/// its operand from its own type).
enum class ExprOpKind : uint8_t { Leaf, Arithmetic, Comparison, Logical, Select, Cast };

namespace detail {
struct ExprOpRow {
  const char *spelling;
  int arity;
  ExprOpKind kind;
};
inline constexpr ExprOpRow kExprOpRows[] = {
#define TILUSVM_X(Name, Spelling, Arity, Kind) {Spelling, Arity, ExprOpKind::Kind},
    TILUSVM_EXPR_OPS(TILUSVM_X)
#undef TILUSVM_X
};
} // namespace detail

inline constexpr int kNumExprOps = int(sizeof(detail::kExprOpRows) / sizeof(detail::ExprOpRow));

/// The operator's spelling ("+", "min", "cdiv", ...).
constexpr const char *exprOpName(ExprOp op) { return detail::kExprOpRows[int(op)].spelling; }
/// Number of operands of an operator (0 for Const and Var).
constexpr int exprOpArity(ExprOp op) { return detail::kExprOpRows[int(op)].arity; }
constexpr ExprOpKind exprOpKind(ExprOp op) { return detail::kExprOpRows[int(op)].kind; }
constexpr bool isComparison(ExprOp op) { return exprOpKind(op) == ExprOpKind::Comparison; }
constexpr bool isLogical(ExprOp op) { return exprOpKind(op) == ExprOpKind::Logical; }

/// A comparison operator (precondition: isComparison(op)) on two ordered values.
template <class T> constexpr bool compareOrdered(ExprOp op, T x, T y) {
  if (op == ExprOp::Eq)
    return x == y;
  if (op == ExprOp::Ne)
    return x != y;
  if (op == ExprOp::Lt)
    return x < y;
  if (op == ExprOp::Le)
    return x <= y;
  if (op == ExprOp::Gt)
    return x > y;
  return x >= y;
}

} // namespace tilus
