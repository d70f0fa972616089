// Typing rules of the elementwise instructions on register tensors (ISA section 5,
// "Computation on register tensors"): the arithmetic (Fma among them, f32 and f64 only),
// bitwise, comparison, unary and math rows (one family handler, visitElementwise) and Where.
//
// The elementwise rule in one place (elementwiseResult):
//   shape  = numpy broadcast of the tensor operands' shapes            (shape-mismatch)
//   layout = out= target's, else layout=, else the first operand whose shape is the result's
//   every tensor operand must be covered by the result layout:          (layout-mismatch)
//     each owner thread of result[e] owns operand[broadcast(e)]
// Example: Sub(x, mx) with x in spatial(4, 32).local(1, 4) ([4, 128]) and mx the keepdim Reduce
// spatial(4, 1).replicate(32) ([4, 1]): result layout is x's; thread t owns x[t/32, 4(t%32)+i],
// whose broadcast source mx[t/32, 0] thread t owns as a replica, so the operands fit.
#include "loader/checker_impl.h"

#include "isa/scalar_eval.h"

namespace tilus::detail {

/// The dtype rule of an elementwise opcode, given its operands' common dtype.
bool ProgramChecker::checkElementwiseDtype(const Instruction &inst, DataType dtype) {
  const InstructionSpec &spec = inst.spec();
  std::string what = std::string(spec.name) + " on " + dtype.name() + " tensors";
  bool bitwise = spec.category == InstructionCategory::Bitwise || inst.opcode == Opcode::Not;
  if (bitwise && dtype.isFloat())
    return fail(ErrorCode::DtypeMismatch, what + ": bitwise operators need integers or bool");
  if (!dtype.isArithmetic())
    return fail(ErrorCode::SubbyteArith, what + ": arithmetic is defined for " + kArithmeticTypes);
  if (spec.category == InstructionCategory::Math && !dtype.isFloat())
    return fail(ErrorCode::DtypeMismatch, what + ": expected f16, bf16, f32 or f64");
  if (inst.opcode == Opcode::Fma && dtype != DataType::f32() && dtype != DataType::f64())
    return fail(ErrorCode::DtypeMismatch, what + ": expected f32 or f64");
  return true;
}

bool ProgramChecker::elementwiseResult(const Instruction &inst,
                                       const std::vector<const VarType *> &ops,
                                       const std::vector<const char *> &names, DataType resultType,
                                       Results &r) {
  const std::string op = inst.spec().name;
  std::vector<int64_t> shape = ops[0]->shape;
  for (size_t k = 1; k < ops.size(); ++k) {
    std::optional<std::vector<int64_t>> b = broadcastShapes(shape, ops[k]->shape);
    if (!b)
      return fail(ErrorCode::ShapeMismatch,
                  op + " operand " + names[k] + " of shape " + shapeString(ops[k]->shape) +
                      " does not broadcast with shape " + shapeString(shape));
    shape = *b;
  }
  const RegisterLayout *layout = nullptr;
  const RegisterLayout *given = layoutArg(inst, ArgName::layout);
  if (const VarType *target = outTarget(inst)) {
    std::string name = "out=" + prog_.vars[inst.results[0]].name;
    if (target->dtype != resultType)
      return fail(ErrorCode::DtypeMismatch, op + " gives " + resultType.name() + " but " + name +
                                                " is " + target->dtype.name());
    if (target->shape != shape)
      return fail(ErrorCode::ShapeMismatch, op + " gives shape " + shapeString(shape) + " but " +
                                                name + " has shape " + shapeString(target->shape));
    if (given && *given != *target->layout)
      return fail(ErrorCode::LayoutMismatch, op + " layout=" + given->toString() + " differs " +
                                                 "from " + name + "'s layout " +
                                                 target->layout->toString());
    layout = &*target->layout;
  } else if (given) {
    if (!checkLayoutShape(*given, shape, "layout="))
      return false;
    layout = given;
  } else {
    for (const VarType *t : ops)
      if (t->shape == shape) {
        layout = &*t->layout;
        break;
      }
    if (!layout)
      return fail(ErrorCode::BadArgument, "no operand of " + op + " has the result shape " +
                                              shapeString(shape) + "; give layout=");
  }
  for (size_t k = 0; k < ops.size(); ++k)
    if (!checkCover(*layout, *ops[k]->layout, names[k], "result"))
      return false;
  r[0] = registerType(resultType, *layout);
  return true;
}

bool ProgramChecker::visitElementwise(const Instruction &inst, Results &r) {
  const InstructionSpec &spec = inst.spec();
  std::vector<const VarType *> ops;
  std::vector<const char *> names;
  for (size_t k = 0; k < spec.args.size(); ++k) {
    const Argument &a = inst.args[k];
    if (spec.args[k].kind != ArgKind::Value || a.var == kNoId)
      continue; // a scalar operand is converted to the tensor's dtype
    const VarType &t = info_.vars[a.var];
    if (t.kind != VarKind::Register)
      return fail(ErrorCode::Scope, std::string(spec.name) + " operand " + spec.args[k].name +
                                        " (" + varName(a.var) +
                                        ") is not a register tensor or a scalar");
    if (!ops.empty() && t.dtype != ops[0]->dtype)
      return fail(ErrorCode::DtypeMismatch, std::string(spec.name) + " operands have dtypes " +
                                                ops[0]->dtype.name() + " and " + t.dtype.name());
    ops.push_back(&t);
    names.push_back(spec.args[k].name);
  }
  if (ops.empty())
    return fail(ErrorCode::BadArgument,
                std::string(spec.name) + " needs at least one register tensor operand");
  if (!checkElementwiseDtype(inst, ops[0]->dtype))
    return false;
  DataType rt =
      spec.category == InstructionCategory::Comparison ? DataType::boolean() : ops[0]->dtype;
  return elementwiseResult(inst, ops, names, rt, r);
}

bool ProgramChecker::visitWhere(const Instruction &inst, Results &r) {
  std::vector<const VarType *> ops;
  std::vector<const char *> names;
  std::optional<DataType> valueType;
  for (ArgName argName : {ArgName::c, ArgName::a, ArgName::b}) {
    const Argument &a = inst.arg(argName);
    const char *name = argNameText(argName);
    bool cond = argName == ArgName::c;
    DataType t = a.var != kNoId ? info_.vars[a.var].dtype : prog_.exprs[a.expr].dtype;
    if (a.var != kNoId) {
      if (info_.vars[a.var].kind != VarKind::Register)
        return fail(ErrorCode::Scope, std::string("Where operand ") + name + " (" + varName(a.var) +
                                          ") is not a register tensor or a " + "scalar");
      ops.push_back(&info_.vars[a.var]);
      names.push_back(name);
    }
    if (cond) {
      if (!t.isBool() && !t.isInt())
        return fail(ErrorCode::DtypeMismatch, std::string("Where condition has type ") + t.name() +
                                                  "; expected bool or an integer");
      if (a.var != kNoId && !t.isArithmetic())
        return fail(ErrorCode::SubbyteArith, std::string("Where condition of type ") + t.name() +
                                                 ": Cast sub-byte tensors first");
      continue;
    }
    if (a.var == kNoId)
      continue;
    if (valueType && *valueType != t)
      return fail(ErrorCode::DtypeMismatch, std::string("Where operands have dtypes ") +
                                                valueType->name() + " and " + t.name());
    valueType = t;
  }
  if (ops.empty())
    return fail(ErrorCode::BadArgument, "Where needs at least one register tensor operand");
  if (!valueType) {
    valueType = promoteScalarTypes(prog_.exprs[inst.arg(ArgName::a).expr].dtype,
                                   prog_.exprs[inst.arg(ArgName::b).expr].dtype);
    if (!valueType)
      return fail(ErrorCode::DtypeMismatch, "Where operands a and b have no common type");
  }
  if (!valueType->isArithmetic())
    return fail(ErrorCode::SubbyteArith, std::string("Where on ") + valueType->name() +
                                             " tensors: defined for " + kArithmeticTypes);
  return elementwiseResult(inst, ops, names, *valueType, r);
}

} // namespace tilus::detail
