// Scalar expressions: typing (ISA section 4 "Scalars"), constant folding and emission into a
// program's post-order expression arena. Internal to the assembler.
#pragma once

#include "assembler/ast.h"
#include "isa/program.h"

#include <functional>
#include <string>

namespace tilus::tasm {

/// A typed scalar expression tree. Folded: an operator whose operands are all constants is a
/// single Const. Implicit conversions are explicit Cast nodes, so every operand of an operator
/// has the operator's operand type (for Select: the result type, the condition aside).
struct TypedExpr {
  ExprOp op = ExprOp::Const;
  DataType dtype;
  uint64_t bits = 0; // Const
  VarId var = kNoId; // Var
  std::vector<TypedExpr> operands;

  bool isConst() const { return op == ExprOp::Const; }
  static TypedExpr constant(DataType dtype, uint64_t bits) {
    TypedExpr e;
    e.dtype = dtype;
    e.bits = bits;
    return e;
  }
};

/// What a name denotes where an expression is built.
struct NameMeaning {
  enum class Kind : uint8_t { None, Constant, Type, Variable } kind = Kind::None;
  DataType dtype;    // Constant and Variable (Scalar and Pointer); Type: the type itself
  uint64_t bits = 0; // Constant
  VarId var = kNoId; // Variable
  VarKind varKind = VarKind::Scalar;
  bool isParam = false; // Variable: a program parameter
};
using NameLookup = std::function<NameMeaning(const std::string &)>;

struct ExprContext {
  std::string fileName;
  NameLookup lookup;
  /// In a grid expression a pointer parameter is a `grid-expr` error rather than `scope`.
  bool inGrid = false;
  /// In an assert's condition only constants and scalar parameters may appear (`assert-expr`).
  bool inAssert = false;
  bool inSpecialize = false; // a specialize value: constants and scalar parameters only
};

/// Deepest typed expression tree the assembler produces (below the decoder's limit of 1024).
inline constexpr uint32_t kMaxTypedExprDepth = 1000;

/// Type and fold `ast` as a scalar expression. Errors: undefined-name, scope (a tensor or
/// pointer used as a scalar), grid-expr, dtype-mismatch, bad-argument, unknown-instruction,
/// syntax (a float literal out of range, a tree deeper than kMaxTypedExprDepth).
Expected<TypedExpr> buildScalar(const AstExpr &ast, const ExprContext &ctx);

/// buildScalar of an assert's condition, which must be bool (`dtype-mismatch` otherwise).
Expected<TypedExpr> buildAssertCondition(const AstExpr &ast, const ExprContext &ctx);

/// Whether `ast` is a type expression where a value or a type may stand (a constant's value, an
/// operand of `==`/`!=`): a type constant, a data type name that no constant or variable
/// shadows, or `T1 if c else T2` whose first branch is one.
bool isTypeExpr(const AstExpr &ast, const ExprContext &ctx);

/// Evaluate a type expression: a data type name (which wins over any constant or variable of the
/// same name), a type constant, or `T1 if c else T2` with a constant condition `c`. A number
/// constant or a variable is `dtype-mismatch`; any other name or expression is `code` with the
/// message `notType`.
Expected<DataType> buildType(const AstExpr &ast, const ExprContext &ctx, ErrorCode code,
                             const std::string &notType);

/// Whether `name` is a function of scalar expressions: min, max, cdiv or a type builtin (bits,
/// is_float, is_int, is_signed, exponent_bits, mantissa_bits).
bool isScalarBuiltin(const std::string &name);

/// `e` converted to `to` (folded when `e` is constant; unchanged when already of type `to`).
TypedExpr castTo(TypedExpr e, DataType to);

/// An expression that must fold to an integer constant; otherwise `code` with the message
/// "<what> must be an integer constant".
Expected<int64_t> buildIntConstant(const AstExpr &ast, const ExprContext &ctx, ErrorCode code,
                                   const std::string &what);

/// Append `e` to `program.exprs` in post-order; returns the id of its root.
ExprId emitExpr(Program &program, const TypedExpr &e);

/// The type of an integer literal: i32 when it fits, i64 otherwise.
DataType integerLiteralType(int64_t value);

} // namespace tilus::tasm
