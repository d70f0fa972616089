// Typing rules of the instructions that compute on register tensors (ISA section 5,
// "Indexing and tensor creation" for registers and "Computation on register tensors"):
// creation (BlockIndices, AllocateRegister, Iota), elementwise operators and Where, Cast,
// View, Permute, ConvertLayout, Reduce, and Print.
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

namespace {

const char *kArithmeticTypes =
    "bool, 8- to 64-bit integers and f16, bf16, f32, f64 (Cast sub-byte and FP8 tensors first)";

} // namespace

bool ProgramChecker::visitBlockIndices(const Instruction &inst, Results &r) {
  if (inst.results.size() > prog_.grid.size())
    return fail(ErrorCode::BadArgument,
                "BlockIndices gives " + counted(int64_t(inst.results.size()), "index", "indices") +
                    " but the grid has " +
                    counted(int64_t(prog_.grid.size()), "dimension", "dimensions"));
  for (VarType &t : r)
    t = VarType{VarKind::Scalar, DataType::i32()};
  return true;
}

bool ProgramChecker::visitAllocateRegister(const Instruction &inst, Results &r) {
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (const Argument *shape = optionalArg(inst, ArgName::shape))
    if (!checkLayoutShape(layout, shape->ints, "layout"))
      return false;
  r[0] = registerType(inst.arg(ArgName::dtype).dtype, layout);
  return true;
}

bool ProgramChecker::visitIota(const Instruction &inst, Results &r) {
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  int64_t dim = inst.arg(ArgName::dim).intValue;
  int64_t rank = int64_t(layout.shape().size());
  if (dim < 0 || dim >= rank)
    return fail(ErrorCode::BadArgument, "Iota dim=" + std::to_string(dim) +
                                            " is out of range for rank " + std::to_string(rank));
  const Argument *dt = optionalArg(inst, ArgName::dtype);
  DataType dtype = dt ? dt->dtype : DataType::i32();
  if (!dtype.isArithmetic() || dtype.isBool())
    return fail(ErrorCode::DtypeMismatch, std::string("Iota of ") + dtype.name() +
                                              ": expected an 8- to 64-bit integer or f16, bf16, "
                                              "f32, f64");
  r[0] = registerType(dtype, layout);
  return true;
}

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

bool ProgramChecker::visitCast(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  r[0] = registerType(inst.arg(ArgName::dtype).dtype, *a->layout);
  return true;
}

/// View reinterprets each thread's local bits: the bits per thread (locals x storage bits) and
/// the thread count must stay, and both layouts must replicate alike (the same threads are
/// replicas of each other), so that replicas keep holding equal values.
bool ProgramChecker::visitView(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  const Argument *dt = optionalArg(inst, ArgName::dtype);
  DataType to = dt ? dt->dtype : a->dtype;
  const RegisterLayout &from = *a->layout;
  const RegisterLayout *given = layoutArg(inst, ArgName::layout);
  const RegisterLayout &layout = given ? *given : from;
  if (layout.numThreads() != from.numThreads())
    return fail(ErrorCode::ViewBits, "View changes the thread count from " +
                                         std::to_string(from.numThreads()) + " to " +
                                         std::to_string(layout.numThreads()));
  int64_t bitsFrom = from.numLocals() * a->dtype.storageBits();
  int64_t bitsTo = layout.numLocals() * to.storageBits();
  if (bitsFrom != bitsTo)
    return fail(ErrorCode::ViewBits, "View changes bits per thread from " +
                                         std::to_string(bitsFrom) + " to " +
                                         std::to_string(bitsTo));
  // Replicas must stay replicas: threads that hold the same bits before (the same elements at
  // the same slots) must hold the same elements after, and no others.
  for (int64_t t = 0; (from.isReplicated() || layout.isReplicated()) && t < from.numThreads();
       ++t) {
    int64_t before = from.replicaRoot(t), after = layout.replicaRoot(t);
    if (before == after)
      continue;
    if (before != t)
      return fail(ErrorCode::ViewReplicated,
                  "View of " + varName(inst.arg(ArgName::a).var) + " whose layout " +
                      from.toString() + " replicates thread " + std::to_string(before) +
                      " in thread " + std::to_string(t) + " into " + layout.toString() +
                      ", where they hold different elements");
    return fail(ErrorCode::ViewReplicated,
                "View to " + layout.toString() + ", which replicates thread " +
                    std::to_string(after) + " in thread " + std::to_string(t) + ", of " +
                    from.toString() + ", where they hold different elements");
  }
  r[0] = registerType(to, layout);
  return true;
}

bool ProgramChecker::visitPermute(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  const std::vector<int64_t> &dims = inst.arg(ArgName::dims).ints;
  std::vector<uint8_t> seen(a->rank, 0);
  bool ok = dims.size() == a->rank;
  for (size_t k = 0; ok && k < dims.size(); ++k) {
    ok = dims[k] >= 0 && dims[k] < int64_t(a->rank) && !seen[dims[k]];
    if (ok)
      seen[dims[k]] = 1;
  }
  if (!ok)
    return fail(ErrorCode::BadArgument, "Permute dims=" + shapeString(dims) +
                                            " is not a permutation of the " +
                                            std::to_string(a->rank) + " dimensions");
  Expected<RegisterLayout> p = a->layout->permute(dims);
  if (!p)
    return fail(p.status().code(), p.status().first().message);
  r[0] = registerType(a->dtype, *p);
  return true;
}

bool ProgramChecker::visitConvertLayout(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (!checkLayoutShape(layout, a->shape, "ConvertLayout layout="))
    return false;
  int64_t bytes = std::max(1, a->dtype.storageBits() / 8);
  noteScratch(shapeElements(a->shape) * bytes);
  r[0] = registerType(a->dtype, layout);
  return true;
}

bool ProgramChecker::visitReduce(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  int64_t dim = inst.arg(ArgName::dim).intValue;
  if (dim < 0 || dim >= int64_t(a->rank))
    return fail(ErrorCode::ReduceDim, "Reduce dim=" + std::to_string(dim) +
                                          " is out of range for rank " + std::to_string(a->rank));
  auto op = ReduceOp(inst.arg(ArgName::op).intValue);
  std::string what = std::string("Reduce op=") + reduceOpName(op) + " on " + a->dtype.name();
  if (!a->dtype.isArithmetic())
    return fail(ErrorCode::SubbyteArith, what + ": defined for " + kArithmeticTypes);
  if ((op == ReduceOp::Any || op == ReduceOp::All) && a->dtype.isFloat())
    return fail(ErrorCode::DtypeMismatch, what + ": any and all need bool or integers");
  const Argument *keep = optionalArg(inst, ArgName::keepdim);
  Expected<RegisterLayout> derived = a->layout->reduce(int(dim), keep && keep->intValue != 0);
  if (!derived)
    return fail(derived.status().code(), derived.status().first().message);
  if (const RegisterLayout *given = layoutArg(inst, ArgName::layout)) {
    if (!checkLayoutShape(*given, derived->shape(), "Reduce layout="))
      return false;
    if (*given != *derived)
      return fail(ErrorCode::LayoutMismatch, "Reduce layout=" + given->toString() +
                                                 " differs from the derived layout " +
                                                 derived->toString());
  }
  noteScratch(shapeElements(a->shape) * 8);
  r[0] = registerType(a->dtype, *derived);
  return true;
}

bool ProgramChecker::visitPrint(const Instruction &inst, Results &) {
  const Argument &x = inst.arg(ArgName::x);
  if (x.var == kNoId)
    return true;
  VarKind k = info_.vars[x.var].kind;
  if (k == VarKind::Register || k == VarKind::Shared)
    return true;
  return fail(ErrorCode::Scope, "Print of " + varName(x.var) +
                                    ": expected a scalar, a register tensor or a shared tensor");
}

} // namespace tilus::detail
