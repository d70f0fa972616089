// Elementwise instructions (ISA section 5, "Computation on register tensors"): binary
// arithmetic, bitwise and comparison operators, Fma (one rounding: fmaf / fma), unary operators,
// math functions, Where, Cast and ConvertLayout.
//
// Every operand is first staged into an array parallel to the result's slots: a scalar is
// converted to the operand type and repeated, a tensor with the result's layout is used as is,
// any other tensor is gathered through the launch plan's precomputed slot map (broadcasting and
// layout differences resolved once per launch). The operator then runs as one loop over slots.
// Operator semantics are those of the scalar evaluator (applyScalarOp), so that a tensor
// operation and the same operation on scalars can never disagree; f32/f64 arithmetic and
// integer add/sub/mul/bitwise/comparisons have inlined loops with identical results.
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"

#include <cassert>
#include <cmath>
#include <functional>
#include <type_traits>

namespace tilus::cpu {

namespace {

struct Slots {
  const uint64_t *a = nullptr;
  const uint64_t *b = nullptr;
  uint64_t *d = nullptr;
  size_t n = 0;
};

/// Run `loop(f)` with the C++ operator of `op` on T when it has an inlined loop: + - * for
/// both, / for double (one rounding, as applyScalarOp), & | ^ for uint64_t (wrapping); false
/// for the other operators, which take applyScalarOp's path.
template <class T, class Loop> bool withFastOperator(ExprOp op, Loop &&loop) {
  if (op == ExprOp::Add)
    loop(std::plus<T>());
  else if (op == ExprOp::Sub)
    loop(std::minus<T>());
  else if (op == ExprOp::Mul)
    loop(std::multiplies<T>());
  else if constexpr (std::is_floating_point_v<T>) {
    if (op != ExprOp::Div)
      return false;
    loop(std::divides<T>());
  } else {
    if (op == ExprOp::BitAnd)
      loop(std::bit_and<T>());
    else if (op == ExprOp::BitOr)
      loop(std::bit_or<T>());
    else if (op == ExprOp::BitXor)
      loop(std::bit_xor<T>());
    else
      return false;
  }
  return true;
}

/// f32/f64 + - * / and comparisons, computed exactly as applyScalarOp does (one rounding from
/// double; NaN results canonical). Returns false for other operators.
bool floatBinaryFast(ExprOp op, DataType t, const Slots &s) {
  FloatKind kind = floatKind(t);
  if (kind != FloatKind::F32 && kind != FloatKind::F64)
    return false;
  if (isComparison(op)) {
    for (size_t i = 0; i < s.n; ++i)
      s.d[i] = compareOrdered(op, decodeFloat(s.a[i], t), decodeFloat(s.b[i], t)) ? 1 : 0;
    return true;
  }
  return withFastOperator<double>(op, [&](auto f) {
    for (size_t i = 0; i < s.n; ++i)
      s.d[i] = encodeFloat(f(decodeFloat(s.a[i], t), decodeFloat(s.b[i], t)), t);
  });
}

/// 8- to 64-bit integer + - * & | ^ and comparisons (wrapping; exactly applyScalarOp's results).
bool intBinaryFast(ExprOp op, DataType t, const Slots &s) {
  if (!t.isInt() || t.bits < 8)
    return false;
  uint64_t mask = bitMask(t.bits);
  if (isComparison(op)) {
    for (size_t i = 0; i < s.n; ++i)
      s.d[i] =
          (t.isSigned() ? compareOrdered(op, signExtend(s.a[i], t.bits), signExtend(s.b[i], t.bits))
                        : compareOrdered(op, s.a[i] & mask, s.b[i] & mask))
              ? 1
              : 0;
    return true;
  }
  return withFastOperator<uint64_t>(op, [&](auto f) {
    for (size_t i = 0; i < s.n; ++i)
      s.d[i] = f(s.a[i], s.b[i]) & mask;
  });
}

void binary(ExprOp op, DataType t, DataType resultType, const Slots &s) {
  if (floatBinaryFast(op, t, s) || intBinaryFast(op, t, s))
    return;
  for (size_t i = 0; i < s.n; ++i) {
    uint64_t operands[2] = {s.a[i], s.b[i]};
    s.d[i] = applyScalarOp(op, t, resultType, operands);
  }
}

uint64_t absBits(uint64_t x, DataType t) {
  if (t.isFloat()) {
    if (isNaN(x, t))
      return canonicalNaN(t);
    return x & ~(uint64_t(1) << (t.bits - 1));
  }
  if (t.isSigned() && signExtend(x, t.bits) < 0)
    return (uint64_t(0) - x) & bitMask(t.bits);
  return x;
}

double mathFunction(MathFn fn, double x) {
  switch (fn) {
  case MathFn::Exp:
    return std::exp(x);
  case MathFn::Exp2:
    return std::exp2(x);
  case MathFn::Log:
    return std::log(x);
  case MathFn::Log2:
    return std::log2(x);
  case MathFn::Sqrt:
    return std::sqrt(x);
  case MathFn::Rsqrt:
    return 1.0 / std::sqrt(x);
  case MathFn::Sin:
    return std::sin(x);
  case MathFn::Cos:
    return std::cos(x);
  case MathFn::Tanh:
    return std::tanh(x);
  case MathFn::Rcp:
    return 1.0 / x;
  case MathFn::None:
    break;
  }
  assert(false && "not a math function");
  return std::nan("");
}

/// A unary row: its scalar operator (Neg, Not), its math function (floats only), or Abs, the
/// one unary row with neither payload.
Status unary(BlockState &b, uint32_t index, DataType t, const Slots &s) {
  Opcode op = b.program.instructions[index].opcode;
  if (std::optional<ExprOp> e = scalarOpOf(op)) {
    for (size_t i = 0; i < s.n; ++i)
      s.d[i] = applyScalarOp(*e, t, t, &s.a[i]);
    return Status::success();
  }
  MathFn fn = mathFnOf(op);
  if (fn == MathFn::None) {
    for (size_t i = 0; i < s.n; ++i)
      s.d[i] = absBits(s.a[i], t);
    return Status::success();
  }
  if (!t.isFloat())
    return b.fail(ErrorCode::DtypeMismatch, index,
                  std::string(instructionSpec(op).name) + " is defined on floats, not " + t.name());
  for (size_t i = 0; i < s.n; ++i)
    s.d[i] = encodeFloat(mathFunction(fn, decodeFloat(s.a[i], t)), t);
  return Status::success();
}

void where(DataType condType, const uint64_t *c, const Slots &s) {
  for (size_t i = 0; i < s.n; ++i) {
    bool truth =
        condType.isBool() ? c[i] != 0 : convertBits(c[i], condType, DataType::boolean()) != 0;
    s.d[i] = truth ? s.a[i] : s.b[i];
  }
}

/// Fma: a * b + c rounded once (fmaf / fma, both correctly rounded; decodeFloat is exact and
/// encodeFloat of an f32 value rounds nothing), NaN results canonical as everywhere else. f32 and
/// f64 only (the checker's rule).
void fused(DataType t, const Slots &s, const uint64_t *c) {
  for (size_t i = 0; i < s.n; ++i) {
    double x = decodeFloat(s.a[i], t), y = decodeFloat(s.b[i], t), z = decodeFloat(c[i], t);
    s.d[i] = encodeFloat(t == DataType::f32() ? double(std::fma(float(x), float(y), float(z)))
                                              : std::fma(x, y, z),
                         t);
  }
}

void cast(DataType from, DataType to, const Slots &s) {
  if (from == to) {
    std::copy(s.a, s.a + s.n, s.d);
    return;
  }
  if (from == DataType::f32() && floatKind(to) != FloatKind::Other && to.isFloat()) {
    for (size_t i = 0; i < s.n; ++i)
      s.d[i] = encodeFloat(decodeFloat(s.a[i], from), to); // one rounding from an exact double
    return;
  }
  for (size_t i = 0; i < s.n; ++i)
    s.d[i] = convertBits(s.a[i], from, to);
}

/// The dtype of operand k: a tensor's own dtype, or for a scalar the type it converts to.
DataType operandType(const BlockState &b, const Instruction &inst,
                     const std::vector<const Argument *> &args, size_t k, DataType resultType) {
  const Argument &arg = *args[k];
  if (arg.isTensor())
    return b.info.vars[arg.var].dtype;
  InstructionCategory category = inst.spec().category;
  if (category == InstructionCategory::Comparison) {
    for (const Argument *other : args)
      if (other->isTensor())
        return b.info.vars[other->var].dtype;
    return b.program.expr(arg.expr).dtype;
  }
  if (category == InstructionCategory::Select)
    return k == 0 ? DataType::boolean() : resultType;
  if (category == InstructionCategory::Conversion)
    return b.program.expr(arg.expr).dtype;
  return resultType; // Arithmetic, Bitwise, Unary, Math (usesOperandMaps: only these are staged)
}

/// Stage operand k into an array parallel to the result slots.
Expected<const uint64_t *> stageOperand(BlockState &b, uint32_t index, const Argument &arg,
                                        const OperandMap &map, DataType type, size_t n, size_t k) {
  if (map.kind == OperandMap::Kind::Scalar) {
    uint64_t v = convertBits(b.eval(arg.expr), b.program.expr(arg.expr).dtype, type);
    b.scratch[k].assign(n, v);
    return b.scratch[k].data();
  }
  if (Status s = b.requireRegister(index, arg.var); !s.ok())
    return s;
  const std::vector<uint64_t> &src = b.regs[arg.var];
  if (map.kind == OperandMap::Kind::Identity)
    return src.data();
  b.scratch[k].resize(n);
  for (size_t s = 0; s < n; ++s)
    b.scratch[k][s] = src[size_t(map.slot[s])];
  return b.scratch[k].data();
}

} // namespace

Status Exec::visitElementwise(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  size_t n = size_t(b.plan.varTables[r]->numSlots());
  DataType resultType = b.info.vars[r].dtype;
  std::vector<const Argument *> args;
  for (size_t a = 0; a < inst.args.size(); ++a)
    if (inst.spec().args[a].kind == ArgKind::Value && inst.args[a].present)
      args.push_back(&inst.args[a]);
  const std::vector<OperandMap> &maps = b.plan.operandMaps[index];
  const uint64_t *staged[3] = {nullptr, nullptr, nullptr};
  DataType types[3];
  for (size_t k = 0; k < args.size() && k < 3; ++k) {
    types[k] = operandType(b, inst, args, k, resultType);
    Expected<const uint64_t *> p = stageOperand(b, index, *args[k], maps[k], types[k], n, k);
    if (!p)
      return p.takeStatus();
    staged[k] = *p;
  }
  std::vector<uint64_t> out = b.takeBuffer(n);
  Slots s{staged[0], staged[1], out.data(), n};
  switch (inst.spec().category) {
  case InstructionCategory::Arithmetic:
    if (inst.opcode == Opcode::Fma) {
      if (resultType != DataType::f32() && resultType != DataType::f64())
        return b.fail(ErrorCode::Runtime, index, "Fma is defined on f32 and f64");
      fused(resultType, s, staged[2]);
      break;
    }
    [[fallthrough]];
  case InstructionCategory::Bitwise:
  case InstructionCategory::Comparison:
    binary(*scalarOpOf(inst.opcode), types[0], resultType, s);
    break;
  case InstructionCategory::Unary:
  case InstructionCategory::Math:
    TILUSVM_TRY(unary(b, index, types[0], s));
    break;
  case InstructionCategory::Select:
    where(types[0], staged[0], Slots{staged[1], staged[2], out.data(), n});
    break;
  case InstructionCategory::Conversion:
    if (inst.opcode == Opcode::Cast)
      cast(types[0], resultType, s);
    else
      std::copy(s.a, s.a + n, out.data());
    break;
  case InstructionCategory::Indexing:
  case InstructionCategory::Creation:
  case InstructionCategory::Movement:
  case InstructionCategory::Contraction:
  case InstructionCategory::Control:
  case InstructionCategory::Atomic:
    return b.fail(ErrorCode::Runtime, index, "not an elementwise instruction");
  }
  b.setRegister(r, std::move(out));
  return Status::success();
}

Status Exec::visitWhere(BlockState &b, uint32_t index) { return visitElementwise(b, index); }

} // namespace tilus::cpu
