// Evaluation of scalar expressions (ISA section 4 "Scalars") on concrete values.
//
// Values are bit patterns in the node's dtype (see isa/convert.h). Integer arithmetic wraps in
// the node's width; `/` and `%` truncate toward zero and division by zero yields 0; CeilDiv is
// ceiling division; Shr is arithmetic for signed types; shifts by >= width give 0 (or the sign
// fill for Shr of a negative value). Float arithmetic is IEEE in the node's type. Cast converts
// by the rules of section 2.
#pragma once

#include "isa/program.h"

#include <cstdint>
#include <functional>

namespace tilus {

/// Value of a variable (Scalar or Pointer) as a bit pattern of its dtype (pointers: address).
using VarValueFn = std::function<uint64_t(VarId)>;

/// Evaluate expression `id` of `program`. Precondition: the expression is well formed
/// (operands exist and are evaluated before use; checked by the loader).
uint64_t evaluateExpr(const Program &program, ExprId id, const VarValueFn &varValue);

/// Apply one operator to operand bit patterns (used by the evaluator, the assembler's
/// constant folder and the interpreter). `operandType` is the operands' common type (for
/// Cast: the source type); `resultType` the node's type.
uint64_t applyScalarOp(ExprOp op, DataType operandType, DataType resultType, const uint64_t *operands);

/// The result type of a binary arithmetic operator on two operand types (ISA section 4: mixed
/// i32/i64 is done in i64; int with float gives the float; bool promotes to i32), or nullopt
/// when the combination is not allowed.
std::optional<DataType> promoteScalarTypes(DataType a, DataType b);

} // namespace tilus
