// Evaluation of scalar expressions (ISA section 4 "Scalars") on concrete values.
//
// Values are bit patterns in the node's dtype (see isa/convert.h). Integer arithmetic wraps in
// the node's width; `/` and `%` truncate toward zero and division by zero yields 0; CeilDiv is
// ceiling division; Shr is arithmetic for signed types; shifts by >= width give 0 (or the sign
// fill for Shr of a negative value). Float arithmetic is IEEE in the node's type. Cast converts
// by the rules of section 2.
#pragma once

#include "isa/program.h"
#include "isa/status.h"

#include <array>
#include <cstdint>
#include <functional>
#include <optional>

namespace tilus {

/// Value of a variable (Scalar or Pointer) as a bit pattern of its dtype (pointers: address).
using VarValueFn = std::function<uint64_t(VarId)>;

/// Evaluate expression `id` of `program`. Precondition: the expression is well formed
/// (operands exist and are evaluated before use; checked by the loader). Each operand is
/// converted from its own node type: arithmetic operands to the node's type, comparison
/// operands to promoteScalarTypes of the two, logical operands and the Select condition to
/// bool, Select's branches to the node's type. A Var of a Scalar variable is converted from
/// the variable's dtype to the node's; a Pointer variable's value is returned as is.
/// Iterative: the depth of an expression does not consume native stack. When
/// `divisionByZero` is given, it is set to whether any `/`, `%` or `cdiv` of the evaluation had
/// a zero divisor (its result, 0, is then not the quotient the program meant).
uint64_t evaluateExpr(const Program &program, ExprId id, const VarValueFn &varValue,
                      bool *divisionByZero = nullptr);

/// The largest grid dimensions a launch may have (CUDA's: x < 2^31, y and z <= 65535); the
/// interpreter enforces the same, so that whatever runs on the CPU can run on a GPU.
constexpr std::array<int64_t, 3> kMaxGridDims = {int64_t(2147483647), 65535, 65535};

/// The grid of `program` for the given parameter values, one entry per dimension (missing
/// dimensions are 1). Every dimension must be in [1, kMaxGridDims[d]]: a grid of zero blocks is
/// an error, not an empty run, and so is a negative dimension, one beyond the limit, one of a
/// non-integer value and one computed with a division by zero (ErrorCode::Runtime, located at
/// the program). Before the grid, the program's preconditions are checked (checkPreconditions in
/// isa/precondition.h; ErrorCode::Assert), so that every launch path checks them. With
/// cluster= above 1 the x extent must be a multiple of it (ErrorCode::Runtime).
/// Docs: docs/runtime.md, "Launch".
Expected<std::array<int64_t, 3>> evaluateGrid(const Program &program, const VarValueFn &varValue);

/// Apply one operator to operand bit patterns (used by the evaluator, the assembler's
/// constant folder and the interpreter). `operandType` is the operands' common type (for
/// Cast: the source type); `resultType` the node's type. Arithmetic is computed in
/// `operandType` and then converted to `resultType`; comparisons and logical operators
/// (operands tested for != 0 in `operandType`) give a bool converted to `resultType`. Select:
/// operands[0] is the condition (any non-zero pattern is true), operands[1] and [2] are
/// already in `resultType`. On bool operands arithmetic acts on 0/1 and gives `x != 0`
/// (Add is or, Mul is and) and BitNot is logical not. Float Min/Max follow IEEE minNum/maxNum
/// (a NaN operand yields the other one; -0 < +0); float CeilDiv is the ceiling of the rounded
/// quotient; bitwise operators on floats act on the bit patterns. Shift amounts that are
/// negative or >= the width shift everything out. Docs: docs/types.md.
uint64_t applyScalarOp(ExprOp op, DataType operandType, DataType resultType,
                       const uint64_t *operands);

/// The result type of a binary arithmetic operator on two operand types (ISA section 4: mixed
/// i32/i64 is done in i64; int with float gives the float; bool promotes to i32), or nullopt
/// when the combination is not allowed (a type that is not arithmetic: sub-byte, FP8).
/// Equal types stay; two floats meet in the wider one (f16 with bf16 in f32); two integers of
/// one signedness in the wider one; mixed signedness follows C: the unsigned type if it is at
/// least as wide, else the signed one (u32 with i32 is u32, u32 with i64 is i64).
std::optional<DataType> promoteScalarTypes(DataType a, DataType b);

} // namespace tilus
