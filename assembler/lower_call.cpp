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
#include "isa/enum_names.h"

#include <cassert>

namespace tilus::tasm {

namespace {

std::string argName(const InstructionSpec &spec, size_t index) {
  return std::string("argument '") + spec.args[index].name + "' of '" + spec.name + "'";
}

/// What a variable of a kind is, in "must be ..., got ..." messages (None: a scalar expression).
constexpr EnumNames<VarKind, 6> kKindTexts{
    {"scalar", "scalar", "pointer", "register tensor", "shared tensor", "global tensor"}};

const char *kindText(VarKind k) { return kKindTexts.name(k); }

/// Instructions whose register layout may be left out for the assembler to infer.
bool layoutInferable(Opcode op) {
  return op == Opcode::AllocateRegister || op == Opcode::Iota || op == Opcode::LoadGlobal ||
         op == Opcode::LoadShared;
}

/// Instructions that take an assembler-only `shape=` (the tile's shape when the layout is left
/// out; AllocateRegister has a shape argument of its own).
bool takesTileShape(Opcode op) {
  return op == Opcode::Iota || op == Opcode::LoadGlobal || op == Opcode::LoadShared;
}

} // namespace

// Matches the written arguments to the table: positional first, then by keyword; `out=` aside.
Status ProgramLowering::matchArguments(const InstructionSpec &spec, const AstExpr &call,
                                       std::vector<const AstArg *> &slots, const AstArg *&outArg,
                                       const AstArg *&tileShape) const {
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
    if (idx < 0 && a.keyword == "shape" && takesTileShape(spec.opcode)) {
      if (tileShape)
        return error(ErrorCode::BadArgument, a.pos, "shape= is given twice");
      tileShape = &a;
      continue;
    }
    if (idx < 0)
      return error(ErrorCode::BadArgument, a.pos, op + " has no argument '" + a.keyword + "'");
    if (slots[size_t(idx)])
      return error(ErrorCode::BadArgument, a.pos, argName(spec, size_t(idx)) + " is given twice");
    slots[size_t(idx)] = &a;
  }
  for (size_t k = 0; k < spec.args.size(); ++k)
    if (spec.args[k].required && !slots[k] &&
        !(spec.args[k].kind == ArgKind::RegLayout && layoutInferable(spec.opcode)))
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
  const CallSite site{&call, lowered_[&call]++};
  std::vector<const AstArg *> slots;
  const AstArg *outArg = nullptr, *tileShape = nullptr;
  Status matched = matchArguments(spec, call, slots, outArg, tileShape);
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
  // ConvertLayouts that layout inference put around operands.
  if (decisions_) {
    for (size_t k = 0; k < spec.args.size(); ++k) {
      auto it = decisions_->conversions.find({site, k});
      if (it == decisions_->conversions.end() || !slots[k])
        continue;
      auto converted = conversion(*slots[k]->value, nested[k], it->second, out);
      if (!converted)
        return fail(converted.takeStatus());
      nested[k] = *converted;
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
  std::vector<int64_t> holeShape;
  bool hole = false;
  Status layout = layoutHole(spec, call, site, slots, tileShape, inst, holeShape, hole);
  if (!layout.ok())
    return fail(layout);
  Status st = results(spec, call, outArg, targets, nestedResult, inst);
  if (!st.ok())
    return fail(st);
  push(std::move(inst), site, stmtPos, out, std::move(holeShape), hole);
  return Status::success();
}

void ProgramLowering::push(Instruction inst, const CallSite &site, SrcPos stmtPos,
                           std::vector<Stmt> &out, std::vector<int64_t> holeShape, bool hole) {
  program_.instructions.push_back(std::move(inst));
  if (record_) {
    record_->calls.push_back(site);
    record_->holeShapes.push_back(std::move(holeShape));
    record_->holes.push_back(hole);
  }
  Stmt s;
  s.kind = StmtKind::Instruction;
  s.loc = loc(stmtPos);
  s.index = uint32_t(program_.instructions.size() - 1);
  out.push_back(std::move(s));
}

// The layout argument when layout inference may decide it (docs/layout-inference.md): a written
// layout stays; otherwise the decision of the second lowering, or (first lowering) a hole with
// the tile's shape. A layout and a shape= together must agree.
Status ProgramLowering::layoutHole(const InstructionSpec &spec, const AstExpr &call,
                                   const CallSite &site, const std::vector<const AstArg *> &slots,
                                   const AstArg *tileShape, Instruction &inst,
                                   std::vector<int64_t> &holeShape, bool &hole) {
  std::string op = std::string("'") + spec.name + "'";
  if (tileShape) {
    const AstExpr &v = *tileShape->value;
    if (v.kind != AstKind::List)
      return error(ErrorCode::BadArgument, v.pos, "shape= of " + op + " must be a list [...]");
    for (const AstExprPtr &e : v.children) {
      auto n = buildIntConstant(*e, exprContext(), ErrorCode::BadArgument,
                                "an entry of shape= of " + op);
      if (!n)
        return n.takeStatus();
      if (*n < 1)
        return error(ErrorCode::BadArgument, e->pos,
                     "shape= of " + op + " has a non-positive entry " + std::to_string(*n));
      holeShape.push_back(*n);
    }
  }
  int li = spec.argIndex("layout");
  if (li < 0)
    return Status::success();
  Argument &arg = inst.args[size_t(li)];
  if (slots[size_t(li)]) {
    if (tileShape && arg.regLayout && arg.regLayout->shape() != holeShape)
      return error(ErrorCode::LayoutShape, tileShape->pos,
                   "shape= of " + op + " differs from the shape of its layout");
    holeShape.clear();
    return Status::success();
  }
  if (spec.args[size_t(li)].kind == ArgKind::SharedLayout) {
    if (decisions_) {
      auto it = decisions_->sharedLayouts.find(site);
      if (it != decisions_->sharedLayouts.end()) {
        arg.sharedLayout = it->second;
        arg.present = true;
      }
    }
    hole = true;
    return Status::success();
  }
  if (decisions_) {
    auto it = decisions_->registerLayouts.find(site);
    if (it != decisions_->registerLayouts.end()) {
      arg.regLayout = it->second;
      arg.present = true;
      return Status::success();
    }
  }
  if (!layoutInferable(spec.opcode))
    return Status::success();
  bool allocateShape = spec.opcode == Opcode::AllocateRegister && inst.arg(ArgName::shape).present;
  if (holeShape.empty() && !allocateShape && spec.opcode != Opcode::LoadShared)
    return error(ErrorCode::BadArgument, call.pos,
                 op + " is missing required argument 'layout' (or shape=, to let the assembler "
                      "infer the layout)");
  hole = true;
  return Status::success();
}

Expected<VarId> ProgramLowering::conversion(const AstExpr &operand, VarId nested,
                                            const RegisterLayout &layout, std::vector<Stmt> &out) {
  VarId source = nested;
  if (source == kNoId && operand.kind == AstKind::Name)
    source = scopes_.find(operand.text);
  if (source == kNoId || program_.vars[source].kind != VarKind::Register)
    return error(ErrorCode::LayoutInfer, operand.pos,
                 "a ConvertLayout was planned for an operand that is not a register tensor");
  const InstructionSpec &spec = instructionSpec(Opcode::ConvertLayout);
  Instruction inst;
  inst.opcode = Opcode::ConvertLayout;
  inst.loc = loc(operand.pos);
  inst.args.resize(spec.args.size());
  Argument &a = inst.args[size_t(spec.argIndex("a"))];
  a.var = source;
  a.present = true;
  Argument &l = inst.args[size_t(spec.argIndex("layout"))];
  l.regLayout = layout;
  l.present = true;
  VarId temp = scopes_.declareTemporary(VarKind::Register, DataType::i32(), operand.pos);
  inst.results = {temp};
  push(std::move(inst), CallSite{&operand}, operand.pos, out, {},
       false); // second lowering only: not recorded
  return temp;
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
  // The argument with `field` set to what a builder gave, or the builder's error.
  auto built = [&arg](auto value, auto &field) -> Expected<Argument> {
    if (!value)
      return value.takeStatus();
    field = std::move(*value);
    return std::move(arg);
  };
  // The argument holding the enumerator that `parse` finds for a name, or the error that lists
  // the names.
  auto named = [&](auto parse, const char *names) -> Expected<Argument> {
    auto parsed = value.kind == AstKind::Name ? parse(value.text) : std::nullopt;
    if (!parsed)
      return error(ErrorCode::BadArgument, value.pos, what + " must be one of " + names);
    arg.intValue = int64_t(*parsed);
    return std::move(arg);
  };
  switch (spec.args[index].kind) {
  case ArgKind::Value:
    return valueArgument(value, nested);
  case ArgKind::Expr:
    return exprArgument(what, value);
  case ArgKind::Int:
    return built(buildIntConstant(value, ctx, ErrorCode::BadArgument, what), arg.intValue);
  case ArgKind::Bool:
    return boolArgument(what, value);
  case ArgKind::DType:
    return built(buildType(value, ctx, ErrorCode::BadArgument, what + " must be a data type"),
                 arg.dtype);
  case ArgKind::RegLayout:
    return built(buildRegisterLayout(value, ctx), arg.regLayout);
  case ArgKind::SharedLayout:
    return built(buildSharedLayout(value, ctx), arg.sharedLayout);
  case ArgKind::IntList:
  case ArgKind::ExprList:
  case ArgKind::Offset:
    return listArgument(spec, index, value);
  case ArgKind::ReduceOp:
    return named(parseReduceOp, "sum, max, min, prod, any, all");
  case ArgKind::MemoryScope:
    return named(parseMemoryScope, "block, gpu");
  case ArgKind::Eviction:
    return named(parseEviction, "normal, first, last");
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
