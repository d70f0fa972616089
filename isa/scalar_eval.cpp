// Scalar expression semantics (ISA section 4 "Scalars"), shared by every stage that needs a
// value: the assembler folds constants with applyScalarOp, the checker evaluates grids and
// shapes, and the interpreter evaluates scalar statements and applies elementwise operators.
// Having one implementation means that folding at assembly time and evaluating at run time can
// never disagree.
//
// Integers wrap in their width; `/` and `%` truncate toward zero and give 0 for a zero divisor.
// Floats narrower than f64 are computed in double and rounded once into their type: for + - * /
// a 53-bit intermediate is at least 2p + 2 bits for p <= 24, so that single extra rounding is
// innocuous and the result is the correctly rounded one. A NaN result is the canonical NaN of
// its type (isa/convert.h), so results never depend on the host's NaN propagation.
#include "isa/scalar_eval.h"

#include "isa/convert.h"
#include "isa/precondition.h"

#include <bit>
#include <cassert>
#include <cmath>
#include <vector>

namespace tilus {

namespace {

bool truth(uint64_t bits, DataType type) {
  return convertBits(bits, type, DataType::boolean()) != 0;
}

bool compare(ExprOp op, DataType t, uint64_t x, uint64_t y) {
  if (t.isFloat())
    return compareOrdered(op, toDouble(x, t), toDouble(y, t)); // exact; NaN unordered
  if (t.isSigned())
    return compareOrdered(op, signExtend(x, t.bits), signExtend(y, t.bits));
  return compareOrdered(op, x & bitMask(t.bits), y & bitMask(t.bits));
}

/// Shift amount of an integer operand; negative amounts count as "at least the width".
uint64_t shiftAmount(uint64_t y, DataType t) {
  if (t.isSigned() && signExtend(y, t.bits) < 0)
    return ~uint64_t(0);
  return y & bitMask(t.bits);
}

uint64_t intDivide(ExprOp op, DataType t, uint64_t x, uint64_t y) {
  if (!t.isSigned()) {
    uint64_t ux = x & bitMask(t.bits), uy = y & bitMask(t.bits);
    if (uy == 0)
      return 0;
    if (op == ExprOp::Div)
      return ux / uy;
    if (op == ExprOp::Mod)
      return ux % uy;
    return ux / uy + (ux % uy != 0);
  }
  int64_t sx = signExtend(x, t.bits), sy = signExtend(y, t.bits);
  if (sy == 0)
    return 0;
  if (sy == -1) // avoids INT64_MIN / -1; the quotient -x wraps like every other result
    return op == ExprOp::Mod ? 0 : uint64_t(0) - uint64_t(sx);
  int64_t q = sx / sy, r = sx % sy;
  if (op == ExprOp::Div)
    return uint64_t(q);
  if (op == ExprOp::Mod)
    return uint64_t(r);
  return uint64_t(q + (r != 0 && (sx < 0) == (sy < 0))); // CeilDiv
}

uint64_t intShift(ExprOp op, DataType t, uint64_t x, uint64_t y) {
  uint64_t amount = shiftAmount(y, t);
  if (op == ExprOp::Shl)
    return amount >= t.bits ? 0 : x << amount;
  if (!t.isSigned())
    return amount >= t.bits ? 0 : (x & bitMask(t.bits)) >> amount;
  int64_t sx = signExtend(x, t.bits);
  if (amount >= t.bits)
    return sx < 0 ? ~uint64_t(0) : 0;
  return uint64_t(sx >> amount);
}

/// An arithmetic or bitwise operator on integers of type t (also the raw bits of floats for
/// the bitwise operators); the result is masked to the width by the caller.
uint64_t intOp(ExprOp op, DataType t, uint64_t x, uint64_t y) {
  switch (op) {
  case ExprOp::Add:
    return x + y;
  case ExprOp::Sub:
    return x - y;
  case ExprOp::Mul:
    return x * y;
  case ExprOp::Div:
  case ExprOp::Mod:
  case ExprOp::CeilDiv:
    return intDivide(op, t, x, y);
  case ExprOp::Shl:
  case ExprOp::Shr:
    return intShift(op, t, x, y);
  case ExprOp::BitAnd:
    return x & y;
  case ExprOp::BitOr:
    return x | y;
  case ExprOp::BitXor:
    return x ^ y;
  case ExprOp::BitNot:
    return ~x;
  case ExprOp::Neg:
    return uint64_t(0) - x;
  case ExprOp::Min:
    return compare(ExprOp::Lt, t, y, x) ? y : x;
  case ExprOp::Max:
    return compare(ExprOp::Gt, t, y, x) ? y : x;
    TILUSVM_EXPR_OP_CASES_NOT_ARITHMETIC
    break; // not arithmetic: applyScalarOp handles these
  }
  assert(false && "not an arithmetic operator");
  return 0;
}

/// A double result rounded once into float type t, NaN made canonical.
uint64_t roundResult(double r, DataType t) {
  if (std::isnan(r))
    return canonicalNaN(t);
  return fromDouble(r, t);
}

/// IEEE 754 minNum/maxNum: a NaN operand yields the other operand, and -0 < +0.
uint64_t floatMinMax(bool isMax, DataType t, uint64_t x, uint64_t y) {
  double fx = toDouble(x, t), fy = toDouble(y, t);
  if (std::isnan(fx))
    return std::isnan(fy) ? canonicalNaN(t) : y;
  if (std::isnan(fy))
    return x;
  if (fx == fy) // equal values differ at most in the sign of zero
    return (std::signbit(fx) != isMax) ? x : y;
  return (fx < fy) != isMax ? x : y;
}

uint64_t floatOp(ExprOp op, DataType t, uint64_t x, uint64_t y) {
  double fx = toDouble(x, t), fy = toDouble(y, t);
  switch (op) {
  case ExprOp::Add:
    return roundResult(fx + fy, t);
  case ExprOp::Sub:
    return roundResult(fx - fy, t);
  case ExprOp::Mul:
    return roundResult(fx * fy, t);
  case ExprOp::Div:
    return roundResult(fx / fy, t);
  case ExprOp::Mod:
    return roundResult(std::fmod(fx, fy), t); // exact
  case ExprOp::CeilDiv:                       // ceiling of the quotient rounded into t
    return roundResult(std::ceil(toDouble(roundResult(fx / fy, t), t)), t);
  case ExprOp::Neg:
    return roundResult(-fx, t);
  case ExprOp::Min:
    return floatMinMax(false, t, x, y);
  case ExprOp::Max:
    return floatMinMax(true, t, x, y);
  case ExprOp::Shl:
  case ExprOp::Shr:
  case ExprOp::BitAnd:
  case ExprOp::BitOr:
  case ExprOp::BitXor:
  case ExprOp::BitNot:
    return intOp(op, DataType::u(t.bits), x, y); // on the raw bits
    TILUSVM_EXPR_OP_CASES_NOT_ARITHMETIC
    break; // not arithmetic: applyScalarOp handles these
  }
  assert(false && "not an arithmetic operator");
  return 0;
}

/// Arithmetic on bool operands: on the values 0 and 1 as i64, then != 0; `not` is logical.
uint64_t boolOp(ExprOp op, uint64_t x, uint64_t y) {
  x &= 1;
  y &= 1;
  if (op == ExprOp::BitNot)
    return x ^ 1;
  return intOp(op, DataType::i64(), x, y) != 0;
}

uint64_t arithmetic(ExprOp op, DataType t, const uint64_t *operands) {
  uint64_t x = operands[0];
  uint64_t y = exprOpArity(op) >= 2 ? operands[1] : 0;
  if (t.isBool())
    return boolOp(op, x, y);
  if (t.isFloat())
    return floatOp(op, t, x, y) & bitMask(t.bits);
  return intOp(op, t, x, y) & bitMask(t.bits);
}

uint64_t logical(ExprOp op, DataType t, const uint64_t *operands) {
  bool x = truth(operands[0], t);
  if (op == ExprOp::LogicalNot)
    return !x;
  bool y = truth(operands[1], t);
  return op == ExprOp::LogicalAnd ? (x && y) : (x || y);
}

} // namespace

uint64_t applyScalarOp(ExprOp op, DataType operandType, DataType resultType,
                       const uint64_t *operands) {
  DataType boolType = DataType::boolean();
  switch (exprOpKind(op)) {
  case ExprOpKind::Leaf:
    assert(false && "Const and Var are not operators");
    return 0;
  case ExprOpKind::Cast:
    return convertBits(operands[0], operandType, resultType);
  case ExprOpKind::Select:
    return (operands[0] != 0 ? operands[1] : operands[2]) & bitMask(resultType.bits);
  case ExprOpKind::Comparison:
    return convertBits(compare(op, operandType, operands[0], operands[1]), boolType, resultType);
  case ExprOpKind::Logical:
    return convertBits(logical(op, operandType, operands), boolType, resultType);
  case ExprOpKind::Arithmetic:
    return convertBits(arithmetic(op, operandType, operands), operandType, resultType);
  }
  return 0;
}

std::optional<DataType> promoteScalarTypes(DataType a, DataType b) {
  if (!a.valid() || !b.valid() || !a.isArithmetic() || !b.isArithmetic())
    return std::nullopt;
  if (a.isBool())
    a = DataType::i32();
  if (b.isBool())
    b = DataType::i32();
  if (a == b)
    return a;
  if (a.isFloat() && b.isFloat()) // f16 with bf16 meets in f32
    return (a == DataType::f64() || b == DataType::f64()) ? DataType::f64() : DataType::f32();
  if (a.isFloat())
    return a;
  if (b.isFloat())
    return b;
  if (a.isSigned() == b.isSigned())
    return a.bits >= b.bits ? a : b;
  DataType s = a.isSigned() ? a : b;
  DataType u = a.isSigned() ? b : a;
  return u.bits >= s.bits ? u : s; // C's usual arithmetic conversions
}

namespace {

uint64_t leafValue(const Program &program, const ExprNode &node, const VarValueFn &varValue) {
  if (node.op == ExprOp::Const)
    return node.bits & bitMask(node.dtype.bits);
  const Variable &var = program.var(node.var);
  uint64_t value = varValue(node.var);
  if (var.kind == VarKind::Pointer)
    return value; // an address, not a value of the pointee type
  return convertBits(value, var.dtype, node.dtype);
}

/// The type operands are converted to before `node`'s operator applies to them.
DataType operandTypeOf(const Program &program, const ExprNode &node) {
  if (node.op == ExprOp::Cast)
    return program.expr(node.operands[0]).dtype;
  if (isLogical(node.op))
    return DataType::boolean();
  if (!isComparison(node.op))
    return node.dtype; // arithmetic is done in the node's type
  DataType a = program.expr(node.operands[0]).dtype;
  DataType b = program.expr(node.operands[1]).dtype;
  if (std::optional<DataType> common = promoteScalarTypes(a, b))
    return *common;
  if (a == b)
    return a;
  return (a.isFloat() || b.isFloat()) ? DataType::f64() : DataType::i64();
}

/// Apply `node`'s operator to operand values given in their own node types.
uint64_t applyNode(const Program &program, const ExprNode &node, const uint64_t *raw) {
  int arity = exprOpArity(node.op);
  uint64_t converted[3] = {0, 0, 0};
  if (node.op == ExprOp::Select) {
    const ExprNode &cond = program.expr(node.operands[0]);
    converted[0] = truth(raw[0], cond.dtype);
    for (int k = 1; k < 3; ++k)
      converted[k] = convertBits(raw[k], program.expr(node.operands[k]).dtype, node.dtype);
    return applyScalarOp(node.op, node.dtype, node.dtype, converted);
  }
  DataType operandType = operandTypeOf(program, node);
  for (int k = 0; k < arity; ++k) {
    DataType own = program.expr(node.operands[k]).dtype;
    converted[k] = node.op == ExprOp::Cast ? raw[k] : convertBits(raw[k], own, operandType);
  }
  return applyScalarOp(node.op, operandType, node.dtype, converted);
}

struct Frame {
  ExprId id;
  int next; // next operand to evaluate
};

/// Work stacks reused across calls; each call works above the sizes it found, so a nested call
/// (from inside a VarValueFn) leaves the outer call's entries alone.
struct EvalStacks {
  std::vector<Frame> frames;
  std::vector<uint64_t> values;
};
thread_local EvalStacks evalStacks;

/// Whether `node` is a division whose divisor (raw[1], in its own node type) is zero.
bool dividesByZero(const Program &program, const ExprNode &node, const uint64_t *raw) {
  if (node.op != ExprOp::Div && node.op != ExprOp::Mod && node.op != ExprOp::CeilDiv)
    return false;
  DataType own = program.expr(node.operands[1]).dtype;
  DataType t = operandTypeOf(program, node);
  uint64_t divisor = convertBits(raw[1], own, t) & bitMask(t.bits);
  return t.isFloat() ? toDouble(divisor, t) == 0.0 : divisor == 0;
}

} // namespace

uint64_t evaluateExpr(const Program &program, ExprId id, const VarValueFn &varValue,
                      bool *divisionByZero) {
  if (divisionByZero)
    *divisionByZero = false;
  const ExprNode &root = program.expr(id);
  if (exprOpArity(root.op) == 0)
    return leafValue(program, root, varValue);
  // Iterative post-order walk, so that deep expressions cannot exhaust the native stack.
  EvalStacks &s = evalStacks;
  size_t frameBase = s.frames.size();
  size_t valueBase = s.values.size();
  s.frames.push_back({id, 0});
  while (s.frames.size() > frameBase) {
    Frame frame = s.frames.back();
    const ExprNode &node = program.expr(frame.id);
    int arity = exprOpArity(node.op);
    if (frame.next < arity) {
      ExprId child = node.operands[frame.next];
      s.frames.back().next++;
      const ExprNode &childNode = program.expr(child);
      if (exprOpArity(childNode.op) == 0) {
        uint64_t value = leafValue(program, childNode, varValue);
        s.values.push_back(value);
      } else {
        s.frames.push_back({child, 0});
      }
      continue;
    }
    size_t first = s.values.size() - size_t(arity);
    if (divisionByZero && dividesByZero(program, node, s.values.data() + first))
      *divisionByZero = true;
    uint64_t result = applyNode(program, node, s.values.data() + first);
    s.values.resize(first);
    s.values.push_back(result);
    s.frames.pop_back();
  }
  uint64_t result = s.values.back();
  s.values.resize(valueBase);
  return result;
}

Expected<std::array<int64_t, 3>> evaluateGrid(const Program &program, const VarValueFn &varValue) {
  Location loc;
  loc.program = program.name;
  auto fail = [&](std::string message) {
    return Status::error(ErrorCode::Runtime, "program `" + program.name + "`: " + message, loc);
  };
  TILUSVM_TRY(checkPreconditions(program, varValue));
  if (program.grid.empty() || program.grid.size() > 3)
    return fail("has " + std::to_string(program.grid.size()) + " grid dimensions, expected 1 to 3");
  std::array<int64_t, 3> grid = {1, 1, 1};
  for (size_t d = 0; d < program.grid.size(); ++d) {
    ExprId e = program.grid[d];
    DataType t = program.expr(e).dtype;
    bool divisionByZero = false;
    uint64_t bits = evaluateExpr(program, e, varValue, &divisionByZero);
    std::string which = "grid dimension " + std::to_string(d);
    if (divisionByZero)
      return fail(which + " divides by zero");
    int64_t n = 0;
    if (t.isFloat()) {
      double v = toDouble(bits, t);
      if (!(v >= 1 && v <= double(kMaxGridDims[d])) || v != std::floor(v))
        return fail(which + " is " + std::to_string(v) + ", not an integer in [1, " +
                    std::to_string(kMaxGridDims[d]) + "]");
      n = int64_t(v);
    } else {
      n = toInt64(bits, t);
    }
    if (n == 0)
      return fail(which + " is 0: a launch of no blocks would run nothing");
    if (n < 1 || n > kMaxGridDims[d])
      return fail(which + " is " + std::to_string(n) + ", outside [1, " +
                  std::to_string(kMaxGridDims[d]) + "]");
    grid[d] = n;
  }
  // clusters are cluster= consecutive blocks along x (docs/isa.md, "Thread-block clusters")
  if (program.cluster > 1 && grid[0] % int64_t(program.cluster) != 0)
    return fail("grid x extent " + std::to_string(grid[0]) +
                " is not a multiple of cluster=" + std::to_string(program.cluster));
  return grid;
}

} // namespace tilus
