// Lowering of instruction calls, driven by the instruction table (isa/instructions.def): the
// table says which arguments an instruction takes, in which order, of which kind and whether
// they are required, so this file has one small function per argument kind and no knowledge of
// particular instructions.
//
// Order matters for bytecode determinism and for the disassembler's round trip. Nested calls
// (`Exp(Sub(x, m))`) are lowered first, in source order, each into a temporary `_t<N>`; then the
// call's own arguments are lowered in table order (not source order), so that keyword order in
// the source does not change the expression arena. The disassembler prints temporaries as
// statements of their own and arguments in table order, which rebuilds the same arena:
//
//   StoreGlobal(Div(e, s), gy, offset=[bi * 4:, 0:])
//     ->  _t0 = Div(e, s)                       instruction 0, var _t0
//         StoreGlobal(_t0, gy, offset=[...])    instruction 1, offset expressions after
#include "assembler/layout_expr.h"
#include "assembler/lowering.h"

#include <cassert>

namespace tilus::tasm {

namespace {

std::string argName(const InstructionSpec &spec, size_t index) {
  return std::string("argument '") + spec.args[index].name + "' of '" + spec.name + "'";
}

const char *kindText(VarKind k) {
  switch (k) {
  case VarKind::None:
  case VarKind::Scalar:
    return "scalar";
  case VarKind::Pointer:
    return "pointer";
  case VarKind::Register:
    return "register tensor";
  case VarKind::Shared:
    return "shared tensor";
  case VarKind::Global:
    return "global tensor";
  }
  return "?";
}

} // namespace

// Matches the written arguments to the table: positional first, then by keyword; `out=` aside.
Status ProgramLowering::matchArguments(const InstructionSpec &spec, const AstExpr &call,
                                       std::vector<const AstArg *> &slots,
                                       const AstArg *&outArg) const {
  std::string op = std::string("'") + spec.name + "'";
  slots.assign(spec.args.size(), nullptr);
  size_t positional = 0;
  for (const AstArg &a : call.args) {
    if (a.keyword.empty()) {
      if (positional >= spec.args.size())
        return error(ErrorCode::BadArgument, a.pos,
                     op + " takes at most " + std::to_string(spec.args.size()) +
                         " arguments, got " + std::to_string(call.args.size()));
      slots[positional++] = &a;
      continue;
    }
    if (a.keyword == "out") {
      if (outArg)
        return error(ErrorCode::BadArgument, a.pos, "out= is given twice");
      outArg = &a;
      continue;
    }
    int idx = spec.argIndex(a.keyword);
    if (idx < 0)
      return error(ErrorCode::BadArgument, a.pos, op + " has no argument '" + a.keyword + "'");
    if (slots[size_t(idx)])
      return error(ErrorCode::BadArgument, a.pos, argName(spec, size_t(idx)) + " is given twice");
    slots[size_t(idx)] = &a;
  }
  for (size_t k = 0; k < spec.args.size(); ++k)
    if (spec.args[k].required && !slots[k])
      return error(ErrorCode::BadArgument, call.pos,
                   op + " is missing required argument '" + spec.args[k].name + "'");
  if (outArg && !spec.allowsOut)
    return error(ErrorCode::BadArgument, outArg->pos, op + " does not accept out=");
  return Status::success();
}

Status ProgramLowering::instruction(const AstExpr &call, const std::vector<AstName> &targets,
                                    SrcPos stmtPos, std::vector<Stmt> &out, VarId *nestedResult) {
  const InstructionSpec *found = findInstruction(call.text);
  assert(found && "callers pass instruction calls only");
  const InstructionSpec &spec = *found;
  auto fail = [&](Status s) {
    declareAfterFailure(targets,
                        spec.resultKind == VarKind::None ? VarKind::Scalar : spec.resultKind);
    return s;
  };
  std::vector<const AstArg *> slots;
  const AstArg *outArg = nullptr;
  Status matched = matchArguments(spec, call, slots, outArg);
  if (!matched.ok())
    return fail(matched);
  // Nested instruction calls, in source order.
  std::vector<VarId> nested(spec.args.size(), kNoId);
  for (const AstArg &a : call.args) {
    for (size_t k = 0; k < spec.args.size(); ++k) {
      if (slots[k] != &a || spec.args[k].kind != ArgKind::Value || !isInstructionCall(*a.value))
        continue;
      Status st = instruction(*a.value, {}, a.value->pos, out, &nested[k]);
      if (!st.ok())
        return fail(st);
    }
  }
  // The call's own arguments, in table order.
  Instruction inst;
  inst.opcode = spec.opcode;
  inst.loc = loc(call.pos);
  inst.args.resize(spec.args.size());
  for (size_t k = 0; k < spec.args.size(); ++k) {
    if (!slots[k])
      continue;
    auto arg = argument(spec, k, *slots[k]->value, nested[k]);
    if (!arg)
      return fail(arg.takeStatus());
    inst.args[k] = std::move(*arg);
    inst.args[k].present = true;
  }
  Status st = results(spec, call, outArg, targets, nestedResult, inst);
  if (!st.ok())
    return fail(st);
  program_.instructions.push_back(std::move(inst));
  Stmt s;
  s.kind = StmtKind::Instruction;
  s.loc = loc(stmtPos);
  s.index = uint32_t(program_.instructions.size() - 1);
  out.push_back(std::move(s));
  return Status::success();
}

Status ProgramLowering::results(const InstructionSpec &spec, const AstExpr &call,
                                const AstArg *outArg, const std::vector<AstName> &targets,
                                VarId *nestedResult, Instruction &inst) {
  std::string op = std::string("'") + spec.name + "'";
  if (outArg) {
    if (!targets.empty())
      return error(ErrorCode::BadArgument, targets[0].pos,
                   "out= cannot be combined with assignment targets");
    const AstExpr &v = *outArg->value;
    if (v.kind != AstKind::Name)
      return error(ErrorCode::BadArgument, v.pos, "out= must name an existing register tensor");
    VarId id = scopes_.find(v.text);
    if (id == kNoId)
      return error(ErrorCode::UndefinedName, v.pos, "undefined name '" + v.text + "'");
    if (program_.vars[id].kind != VarKind::Register)
      return error(ErrorCode::BadArgument, v.pos,
                   "out= must name a register tensor, '" + v.text + "' is a " +
                       kindText(program_.vars[id].kind));
    inst.results = {id};
    inst.out = true;
    if (nestedResult)
      *nestedResult = id;
    return Status::success();
  }
  // The dtype of scalar results: LoadScalar's dtype=, i32 for BlockIndices; unused for tensors.
  DataType dtype = DataType::i32();
  if (spec.resultKind == VarKind::Scalar && inst.hasArg(ArgName::dtype) &&
      inst.arg(ArgName::dtype).present)
    dtype = inst.arg(ArgName::dtype).dtype;
  if (nestedResult) {
    if (spec.maxResults == 0)
      return error(ErrorCode::BadArgument, call.pos,
                   op + " returns no value and cannot be used as an argument");
    *nestedResult = scopes_.declareTemporary(spec.resultKind, dtype, call.pos);
    inst.results = {*nestedResult};
    return Status::success();
  }
  if (targets.empty()) {
    if (spec.minResults > 0)
      return error(ErrorCode::BadArgument, call.pos,
                   "the result of " + op + " is not used (assign it, or pass out=)");
    return Status::success();
  }
  if (spec.maxResults == 0)
    return error(ErrorCode::BadArgument, targets[0].pos, op + " returns no value");
  if (targets.size() < spec.minResults || targets.size() > spec.maxResults) {
    std::string range =
        spec.minResults == spec.maxResults
            ? std::to_string(spec.minResults)
            : std::to_string(spec.minResults) + " to " + std::to_string(spec.maxResults);
    return error(ErrorCode::BadArgument, targets[0].pos,
                 op + " returns " + range + (spec.maxResults == 1 ? " value" : " values") +
                     ", got " + std::to_string(targets.size()) + " targets");
  }
  for (const AstName &t : targets) {
    auto id = scopes_.bindTarget(t, spec.resultKind, dtype);
    if (!id)
      return id.takeStatus();
    inst.results.push_back(*id);
  }
  return Status::success();
}

Expected<Argument> ProgramLowering::valueArgument(const AstExpr &value, VarId nested) {
  Argument arg;
  VarId id = nested;
  if (id == kNoId && value.kind == AstKind::Name)
    id = scopes_.find(value.text);
  if (id != kNoId && program_.vars[id].kind != VarKind::Scalar) {
    arg.var = id;
    return arg;
  }
  if (nested != kNoId) {
    TypedExpr v;
    v.op = ExprOp::Var;
    v.var = nested;
    v.dtype = program_.vars[nested].dtype;
    arg.expr = emitExpr(program_, v);
    return arg;
  }
  auto e = buildScalar(value, exprContext());
  if (!e)
    return e.takeStatus();
  arg.expr = emitExpr(program_, *e);
  return arg;
}

Expected<Argument> ProgramLowering::argument(const InstructionSpec &spec, size_t index,
                                             const AstExpr &value, VarId nested) {
  Argument arg;
  ExprContext ctx = exprContext();
  std::string what = argName(spec, index);
  switch (spec.args[index].kind) {
  case ArgKind::Value:
    return valueArgument(value, nested);
  case ArgKind::Expr:
    return exprArgument(what, value);
  case ArgKind::Int: {
    auto v = buildIntConstant(value, ctx, ErrorCode::BadArgument, what);
    if (!v)
      return v.takeStatus();
    arg.intValue = *v;
    return arg;
  }
  case ArgKind::Bool:
    return boolArgument(what, value);
  case ArgKind::DType: {
    auto dt = buildType(value, ctx, ErrorCode::BadArgument, what + " must be a data type");
    if (!dt)
      return dt.takeStatus();
    arg.dtype = *dt;
    return arg;
  }
  case ArgKind::RegLayout: {
    auto l = buildRegisterLayout(value, ctx);
    if (!l)
      return l.takeStatus();
    arg.regLayout = std::move(*l);
    return arg;
  }
  case ArgKind::SharedLayout: {
    auto l = buildSharedLayout(value, ctx);
    if (!l)
      return l.takeStatus();
    arg.sharedLayout = std::move(*l);
    return arg;
  }
  case ArgKind::IntList:
  case ArgKind::ExprList:
  case ArgKind::Offset:
    return listArgument(spec, index, value);
  case ArgKind::ReduceOp: {
    std::optional<ReduceOp> op =
        value.kind == AstKind::Name ? parseReduceOp(value.text) : std::nullopt;
    if (!op)
      return error(ErrorCode::BadArgument, value.pos,
                   what + " must be one of sum, max, min, prod, any, all");
    arg.intValue = int64_t(*op);
    return arg;
  }
  case ArgKind::String:
    if (value.kind != AstKind::String)
      return error(ErrorCode::BadArgument, value.pos, what + " must be a string literal");
    arg.text = value.text;
    return arg;
  }
  return error(ErrorCode::BadArgument, value.pos, what + " has an unknown kind");
}

Expected<Argument> ProgramLowering::exprArgument(const std::string &what, const AstExpr &value) {
  VarId id = value.kind == AstKind::Name ? scopes_.find(value.text) : kNoId;
  if (id != kNoId && program_.vars[id].kind != VarKind::Scalar)
    return error(ErrorCode::BadArgument, value.pos,
                 what + " must be a scalar expression, got " + kindText(program_.vars[id].kind) +
                     " '" + value.text + "'");
  auto e = buildScalar(value, exprContext());
  if (!e)
    return e.takeStatus();
  Argument arg;
  arg.expr = emitExpr(program_, *e);
  return arg;
}

Expected<Argument> ProgramLowering::boolArgument(const std::string &what, const AstExpr &value) {
  auto e = buildScalar(value, exprContext());
  if (!e)
    return e.takeStatus();
  if (!e->isConst() || !e->dtype.isBool())
    return error(ErrorCode::BadArgument, value.pos, what + " must be True or False");
  Argument arg;
  arg.intValue = e->bits != 0 ? 1 : 0;
  return arg;
}

// IntList `[1, 2]`, ExprList `[m, k]`, Offset `[e, e:, ...]`.
Expected<Argument> ProgramLowering::listArgument(const InstructionSpec &spec, size_t index,
                                                 const AstExpr &value) {
  ArgKind kind = spec.args[index].kind;
  std::string what = argName(spec, index);
  if (value.kind != AstKind::List)
    return error(ErrorCode::BadArgument, value.pos, what + " must be a list [...]");
  Argument arg;
  ExprContext ctx = exprContext();
  for (const AstExprPtr &element : value.children) {
    bool slice = element->kind == AstKind::Slice;
    if (slice && kind != ArgKind::Offset)
      return error(ErrorCode::BadArgument, element->pos,
                   what + " cannot hold a slice 'e:' (only offsets can)");
    const AstExpr &e = slice ? *element->children[0] : *element;
    if (kind == ArgKind::IntList) {
      auto v = buildIntConstant(e, ctx, ErrorCode::BadArgument, "an entry of " + what);
      if (!v)
        return v.takeStatus();
      arg.ints.push_back(*v);
      continue;
    }
    auto t = buildScalar(e, ctx);
    if (!t)
      return t.takeStatus();
    ExprId id = emitExpr(program_, *t);
    if (kind == ArgKind::ExprList)
      arg.exprs.push_back(id);
    else
      arg.offsets.push_back(OffsetEntry{id, slice});
  }
  return arg;
}

} // namespace tilus::tasm
