// Preconditions of a program (docs/isa.md, "Preconditions"): the `assert COND, "message"`
// statements that open its body, each a bool expression of constants and scalar parameters.
// They are checked on the host at every launch, before anything runs, by the CPU interpreter and
// the GPU runtime alike (evaluateGrid calls checkPreconditions first). A failed one is an error
// that names the program, the message, the condition and the values of the parameters it reads:
//
//   error[assert]: program `softmax`: precondition failed: N must be a multiple of 4:
//   `n % 4 == 0` with n = 10
#pragma once

#include "isa/program.h"
#include "isa/scalar_eval.h"
#include "isa/status.h"

#include <string>

namespace tilus {

/// Every Assert statement of `program` for the given parameter values: success, or one
/// ErrorCode::Assert error for the first that fails (located at the program; the message gives
/// the statement's line when the module has debug info). A condition computed with a
/// division by zero fails too (its value is not what the program meant).
Status checkPreconditions(const Program &program, const VarValueFn &varValue);

/// Expression `id` as readable infix text for diagnostics (parameter names, constant values,
/// parentheses around every operator below the root), e.g. `n % 4 == 0`.
std::string describeExpr(const Program &program, ExprId id);

} // namespace tilus
