// Lowering of a program's header and statements to the structured Program IR (docs/ir.md):
// parameters become the first variables, grid expressions the first expressions, and each
// statement becomes a Stmt in source order, with `for`/`if`/`while` bodies in scopes of their
// own. The assembler reports the errors it can see with a source position; typing of tensors
// (shapes, layouts) is left to the checker.
//
// Decisions where ISA section 4 is silent (also in docs/assembly.md):
//   - parameters and loop variables are read-only; assigning one is `update-type` (as in the
//     checker); assigning a constant is `redefined`;
//   - `threads=` takes an integer constant expression and is checked here (`threads`);
//   - `range()` arguments are integers; the loop variable has their promoted type and every
//     bound is converted to it; `range(n)` is start 0, step 1 of that type;
//   - `NAME: DTYPE = expr` converts the value to DTYPE.
#include "assembler/lowering.h"

#include "isa/convert.h"
#include "isa/scalar_eval.h"

namespace tilus::tasm {

bool ProgramLowering::isInstructionCall(const AstExpr &ast) {
  return ast.kind == AstKind::Call && findInstruction(ast.text) != nullptr;
}

ExprContext ProgramLowering::exprContext(bool inGrid) const {
  ExprContext ctx;
  ctx.fileName = file_;
  ctx.inGrid = inGrid;
  ctx.lookup = [this](const std::string &name) {
    NameMeaning m;
    VarId id = scopes_.find(name);
    if (id != kNoId) {
      const Variable &v = program_.vars[id];
      m.kind = NameMeaning::Kind::Variable;
      m.var = id;
      m.varKind = v.kind;
      m.dtype = v.dtype;
      m.isParam = v.isParam;
      return m;
    }
    if (const ConstValue *c = scopes_.findConstant(name)) {
      m.kind = c->isType ? NameMeaning::Kind::Type : NameMeaning::Kind::Constant;
      m.dtype = c->dtype;
      m.bits = c->bits;
    }
    return m;
  };
  return ctx;
}

Expected<DataType> ProgramLowering::typeName(const AstName &name) const {
  AstExpr e;
  e.kind = AstKind::Name;
  e.pos = name.pos;
  e.text = name.name;
  return buildType(e, exprContext(), ErrorCode::Syntax, "unknown data type '" + name.name + "'");
}

Status ProgramLowering::lower(const AstProgram &ast) {
  program_.name = ast.name.name;
  program_.loc = loc(ast.pos);
  scopes_.push(); // parameters
  TILUSVM_TRY(header(ast));
  scopes_.push(); // body
  Status errors;
  for (const AstStmt &s : ast.body) {
    Status st = statement(s, program_.body);
    errors.append(st);
  }
  return errors;
}

Status ProgramLowering::header(const AstProgram &ast) {
  Status errors;
  for (const AstParam &p : ast.params) {
    Expected<DataType> dt = typeName(p.dtype);
    if (!dt) {
      errors.append(dt.status());
      continue;
    }
    if (const ConstValue *c = scopes_.findConstant(p.name.name)) {
      errors.append(error(ErrorCode::Redefined, p.name.pos,
                          "parameter '" + p.name.name +
                              "' redefines the constant declared at line " +
                              std::to_string(c->pos.line)));
      continue;
    }
    VarId prev = scopes_.find(p.name.name);
    if (prev != kNoId) {
      errors.append(error(ErrorCode::Redefined, p.name.pos,
                          "parameter '" + p.name.name + "' is declared twice (first at column " +
                              std::to_string(scopes_.declaredAt(prev).column) + ")"));
      continue;
    }
    VarId id =
        scopes_.declare(p.name, p.pointer ? VarKind::Pointer : VarKind::Scalar, *dt, true, true);
    program_.params.push_back(id);
  }
  if (!errors.ok())
    return errors;
  ExprContext gridCtx = exprContext(true);
  for (const AstExprPtr &g : ast.grid) {
    auto e = buildScalar(*g, gridCtx);
    if (!e) {
      errors.append(e.status());
      continue;
    }
    if (!e->dtype.isInt()) {
      errors.append(error(ErrorCode::DtypeMismatch, g->pos,
                          "grid dimension must be an integer, got " + e->dtype.name()));
      continue;
    }
    program_.grid.push_back(emitExpr(program_, *e));
  }
  if (ast.threads) {
    auto t = buildIntConstant(*ast.threads, exprContext(), ErrorCode::Threads, "threads");
    if (!t) {
      errors.append(t.status());
    } else if (*t < 32 || *t > 1024 || *t % 32 != 0) {
      errors.append(
          error(ErrorCode::Threads, ast.threads->pos,
                "threads=" + std::to_string(*t) + " is not a multiple of 32 in [32, 1024]"));
    } else {
      program_.threads = uint32_t(*t);
    }
  } else if (decisions_ && decisions_->threads != 0) {
    program_.threads = decisions_->threads; // chosen by layout inference
  }
  // an integer constant attribute in [lo, hi] (`none`: what its lower bound means)
  auto attribute = [&](const AstExprPtr &e, ErrorCode code, const char *name, int64_t lo,
                       int64_t hi, const char *none, uint32_t &out) {
    if (!e)
      return;
    auto v = buildIntConstant(*e, exprContext(), code, name);
    if (!v)
      errors.append(v.status());
    else if (*v < lo || *v > hi)
      errors.append(error(code, e->pos,
                          std::string(name) + "=" + std::to_string(*v) + " is not in [" +
                              std::to_string(lo) + ", " + std::to_string(hi) + "] (" +
                              std::to_string(lo) + ": " + none + ")"));
    else
      out = uint32_t(*v);
  };
  attribute(ast.blocksPerSm, ErrorCode::Threads, "blocks_per_sm", 0, kMaxBlocksPerSm, "no request",
            program_.blocksPerSm);
  attribute(ast.cluster, ErrorCode::Cluster, "cluster", 1, kMaxClusterSize, "no cluster",
            program_.cluster);
  return errors;
}

Status ProgramLowering::statement(const AstStmt &s, std::vector<Stmt> &out) {
  switch (s.kind) {
  case AstStmtKind::Assign:
    return assignment(s, out);
  case AstStmtKind::Call:
    if (!isInstructionCall(*s.value)) {
      if (const AstMacro *m = findMacro(s.value->text))
        return expandMacro(s, *m, out);
      if (s.value->text == "min" || s.value->text == "max" || s.value->text == "cdiv" ||
          DataType::parse(s.value->text))
        return error(ErrorCode::UnknownInstruction, s.value->pos,
                     "'" + s.value->text +
                         "' is a scalar function, not an instruction; its "
                         "value must be assigned");
      return error(ErrorCode::UnknownInstruction, s.value->pos,
                   "unknown instruction '" + s.value->text + "'");
    }
    return instruction(*s.value, {}, s.pos, out, nullptr);
  case AstStmtKind::For:
    return forLoop(s, out);
  case AstStmtKind::If:
  case AstStmtKind::While:
    return conditional(s, out);
  case AstStmtKind::Break:
  case AstStmtKind::Continue: {
    bool isBreak = s.kind == AstStmtKind::Break;
    if (loopDepth_ == 0)
      return error(ErrorCode::BreakOutsideLoop, s.pos,
                   std::string("'") + (isBreak ? "break" : "continue") + "' outside a loop");
    Stmt st;
    st.kind = isBreak ? StmtKind::Break : StmtKind::Continue;
    st.loc = loc(s.pos);
    out.push_back(std::move(st));
    return Status::success();
  }
  case AstStmtKind::Return: {
    Instruction inst;
    inst.opcode = Opcode::Exit;
    inst.loc = loc(s.pos);
    // through push, as every instruction: the record for inference keeps one entry each
    push(std::move(inst), CallSite{}, s.pos, out, {}, false);
    return Status::success();
  }
  case AstStmtKind::Pass:
    return Status::success();
  case AstStmtKind::Assert:
    return assertion(s, out);
  case AstStmtKind::Specialize:
    return specialization(s, out);
  case AstStmtKind::Parallel:
    return parallel(s, out);
  case AstStmtKind::Group: // only inside a parallel statement (the parser)
    break;
  }
  return error(ErrorCode::Syntax, s.pos, "malformed statement");
}

void ProgramLowering::declareAfterFailure(const std::vector<AstName> &targets, VarKind kind) {
  for (const AstName &t : targets)
    if (scopes_.find(t.name) == kNoId && !scopes_.findConstant(t.name))
      (void)scopes_.bindTarget(t, kind, DataType::i32());
}

Status ProgramLowering::assignment(const AstStmt &s, std::vector<Stmt> &out) {
  if (s.value->kind == AstKind::Call && !isInstructionCall(*s.value) && findMacro(s.value->text)) {
    declareAfterFailure(s.targets, VarKind::Scalar);
    return error(ErrorCode::Macro, s.value->pos,
                 "macro '" + s.value->text +
                     "' expands to statements and has no value: call it on a line of its own");
  }
  if (isInstructionCall(*s.value)) {
    if (!s.annotation.name.empty())
      return error(ErrorCode::Syntax, s.annotation.pos,
                   "a type annotation applies only to scalar assignments");
    return instruction(*s.value, s.targets, s.pos, out, nullptr);
  }
  if (s.targets.size() != 1) {
    declareAfterFailure(s.targets, VarKind::Scalar);
    return error(ErrorCode::Syntax, s.targets[1].pos,
                 "assigning " + std::to_string(s.targets.size()) +
                     " targets needs an instruction that returns several values");
  }
  auto e = buildScalar(*s.value, exprContext());
  if (!e) {
    declareAfterFailure(s.targets, VarKind::Scalar);
    return e.takeStatus();
  }
  TypedExpr value = std::move(*e);
  if (!s.annotation.name.empty()) {
    Expected<DataType> dt = typeName(s.annotation);
    if (!dt) {
      declareAfterFailure(s.targets, VarKind::Scalar);
      return dt.takeStatus();
    }
    value = castTo(std::move(value), *dt);
  }
  auto var = scopes_.bindTarget(s.targets[0], VarKind::Scalar, value.dtype);
  if (!var)
    return var.takeStatus();
  Stmt st;
  st.kind = StmtKind::Assign;
  st.loc = loc(s.pos);
  st.var = *var;
  st.expr = emitExpr(program_, value);
  out.push_back(std::move(st));
  return Status::success();
}

// `assert COND, "message"` (docs/isa.md, "Preconditions"): a condition of constants only is
// checked here and leaves nothing in the program; one over scalar parameters becomes an Assert
// statement, which must come before every other statement of the body.
Status ProgramLowering::assertion(const AstStmt &s, std::vector<Stmt> &out) {
  ExprContext ctx = exprContext();
  ctx.inAssert = true;
  auto e = buildAssertCondition(*s.value, ctx);
  if (!e)
    return e.takeStatus();
  std::string message = s.message.empty() ? "" : ": " + s.message;
  if (e->isConst()) {
    if (e->bits != 0)
      return Status::success();
    return error(ErrorCode::Assert, s.pos, "assertion failed" + message);
  }
  bool first = &out == &program_.body;
  for (const Stmt &prev : out)
    first = first && prev.kind == StmtKind::Assert;
  if (!first)
    return error(ErrorCode::AssertExpr, s.pos,
                 "an assert over parameters must come before every other statement of the "
                 "program body (it is checked before the launch)");
  Stmt st;
  st.kind = StmtKind::Assert;
  st.loc = loc(s.pos);
  st.expr = emitExpr(program_, *e);
  st.text = s.message;
  out.push_back(std::move(st));
  return Status::success();
}

// `specialize NAME = COND` (docs/isa.md, "Launch-time specialisation"): a bool of constants and
// scalar parameters, assigned once, in the body's prefix after the asserts; the runtime computes
// it at launch and may compile the kernel for its value.
Status ProgramLowering::specialization(const AstStmt &s, std::vector<Stmt> &out) {
  auto fail = [&](ErrorCode code, SrcPos at, std::string message) {
    declareAfterFailure(s.targets, VarKind::Scalar);
    return error(code, at, std::move(message));
  };
  if (!expanding_.empty())
    return fail(ErrorCode::Macro, s.pos,
                "specialize inside macro '" + expanding_.back()->name.name +
                    "': a specialized value belongs to the program body's prefix");
  bool first = &out == &program_.body;
  for (const Stmt &prev : out)
    first = first && (prev.kind == StmtKind::Assert || prev.kind == StmtKind::Specialize);
  if (!first)
    return fail(ErrorCode::SpecializeExpr, s.pos,
                "specialize must come before every other statement of the program body but "
                "asserts (the runtime computes it before the launch)");
  if (scopes_.find(s.targets[0].name) != kNoId || scopes_.findConstant(s.targets[0].name))
    return fail(ErrorCode::SpecializeExpr, s.targets[0].pos,
                "'" + s.targets[0].name + "' is already defined; a specialized variable is new");
  ExprContext ctx = exprContext();
  ctx.inSpecialize = true;
  auto e = buildScalar(*s.value, ctx);
  if (!e) {
    declareAfterFailure(s.targets, VarKind::Scalar);
    return e.takeStatus();
  }
  if (!e->dtype.isBool())
    return fail(ErrorCode::DtypeMismatch, s.value->pos,
                "a specialized value must be bool (a comparison, `and`, `or`, `not`), got " +
                    e->dtype.name());
  auto var = scopes_.bindTarget(s.targets[0], VarKind::Scalar, e->dtype);
  if (!var)
    return var.takeStatus();
  scopes_.markSpecialized(*var);
  Stmt st;
  st.kind = StmtKind::Specialize;
  st.loc = loc(s.pos);
  st.var = *var;
  st.expr = emitExpr(program_, *e);
  out.push_back(std::move(st));
  return Status::success();
}

Status ProgramLowering::forLoop(const AstStmt &s, std::vector<Stmt> &out) {
  return forLoopWith(s, s.unroll.get(), out);
}

// `unroll` is the loop's hint (null: none). A hint `A if C else B` whose condition C does not
// fold to a constant (it reads a parameter: `UR1 if m == 1 else UR`) becomes two copies of the
// loop, `if C:` the one with hint A, else the one with B (each of A and B a constant or again
// such a choice; one loop where both are the same constant): the launch's specialisation of the
// parameter then keeps one of them (docs/isa.md, "Unroll hints").
Status ProgramLowering::forLoopWith(const AstStmt &s, const AstExpr *unroll,
                                    std::vector<Stmt> &out) {
  if (unroll && unroll->kind == AstKind::Ternary) {
    auto folded = buildScalar(*unroll->children[1], exprContext());
    auto a =
        buildIntConstant(*unroll->children[0], exprContext(), ErrorCode::BadArgument, "unroll");
    auto b =
        buildIntConstant(*unroll->children[2], exprContext(), ErrorCode::BadArgument, "unroll");
    if (a && b && *a == *b)
      return forLoopWith(s, unroll->children[0].get(), out); // the same hint either way: one loop
    if (folded && !folded->isConst()) {
      auto cond = condition(*unroll->children[1], "unroll= choice");
      if (!cond)
        return cond.takeStatus();
      Stmt st;
      st.kind = StmtKind::If;
      st.loc = loc(s.pos);
      st.expr = *cond;
      Status errors = forLoopWith(s, unroll->children[0].get(), st.body);
      errors.append(forLoopWith(s, unroll->children[2].get(), st.orelse));
      out.push_back(std::move(st));
      return errors;
    }
  }
  std::vector<TypedExpr> bounds;
  ExprContext ctx = exprContext();
  for (const AstExprPtr &a : s.rangeArgs) {
    auto e = buildScalar(*a, ctx);
    if (!e)
      return e.takeStatus();
    if (!e->dtype.isInt())
      return error(ErrorCode::DtypeMismatch, a->pos,
                   "range() arguments must be integers, got " + e->dtype.name());
    bounds.push_back(std::move(*e));
  }
  DataType t = bounds[0].dtype;
  for (size_t k = 1; k < bounds.size(); ++k) {
    std::optional<DataType> p = t == bounds[k].dtype ? t : promoteScalarTypes(t, bounds[k].dtype);
    if (!p || !p->isInt())
      return error(ErrorCode::DtypeMismatch, s.rangeArgs[k]->pos,
                   "range() arguments have incompatible types " + t.name() + " and " +
                       bounds[k].dtype.name());
    t = *p;
  }
  for (TypedExpr &b : bounds)
    b = castTo(std::move(b), t);
  Stmt st;
  st.kind = StmtKind::For;
  st.loc = loc(s.pos);
  TypedExpr zero = TypedExpr::constant(t, 0), one = TypedExpr::constant(t, 1);
  if (bounds.size() == 1) {
    st.stop = emitExpr(program_, bounds[0]);
    st.expr = emitExpr(program_, zero);
    st.step = emitExpr(program_, one);
  } else {
    st.expr = emitExpr(program_, bounds[0]);
    st.stop = emitExpr(program_, bounds[1]);
    st.step = emitExpr(program_, bounds.size() == 3 ? bounds[2] : one);
  }
  if (unroll) {
    auto u = buildIntConstant(*unroll, exprContext(), ErrorCode::BadArgument, "unroll");
    if (!u)
      return u.takeStatus();
    if (*u < 1 || *u > int64_t(kMaxUnroll))
      return error(ErrorCode::BadArgument, unroll->pos,
                   "unroll=" + std::to_string(*u) + " is not in [1, " + std::to_string(kMaxUnroll) +
                       "]");
    st.unroll = uint32_t(*u);
  }
  scopes_.push();
  auto var = declareIndex(s.loopVar, "loop variable", t);
  if (!var) {
    scopes_.pop();
    return var.takeStatus();
  }
  st.var = *var;
  ++loopDepth_;
  Status errors;
  for (const AstStmt &b : s.body)
    errors.append(statement(b, st.body));
  --loopDepth_;
  scopes_.pop();
  out.push_back(std::move(st));
  return errors;
}

Expected<VarId> ProgramLowering::declareIndex(const AstName &name, const char *what,
                                              DataType dtype) {
  if (const ConstValue *c = scopes_.findConstant(name.name))
    return error(ErrorCode::Redefined, name.pos,
                 std::string(what) + " '" + name.name +
                     "' redefines the constant declared at line " + std::to_string(c->pos.line));
  return scopes_.declare(name, VarKind::Scalar, dtype, true, false);
}

Expected<ExprId> ProgramLowering::condition(const AstExpr &cond, const char *what) {
  auto e = buildScalar(cond, exprContext());
  if (!e)
    return e.takeStatus();
  if (!e->dtype.isBool() && !e->dtype.isInt())
    return error(ErrorCode::DtypeMismatch, cond.pos,
                 std::string("condition of '") + what + "' must be bool or an integer, got " +
                     e->dtype.name());
  return emitExpr(program_, *e);
}

// parallel: its groups, each with constant thread count and registers, and a body in a scope
// of its own in which break and continue do not reach an enclosing loop (docs/isa.md, "Thread
// groups").
Status ProgramLowering::parallel(const AstStmt &s, std::vector<Stmt> &out) {
  Stmt st;
  st.kind = StmtKind::Parallel;
  st.loc = loc(s.pos);
  Status errors;
  for (const AstStmt &g : s.body) {
    Stmt group;
    group.kind = StmtKind::Group;
    group.loc = loc(g.pos);
    auto count = buildIntConstant(*g.value, exprContext(), ErrorCode::ThreadGroup, "group threads");
    if (!count)
      errors.append(count.status());
    else if (*count < 32 || *count > 1024 || *count % 32 != 0)
      errors.append(error(ErrorCode::ThreadGroup, g.value->pos,
                          "a group of " + std::to_string(*count) +
                              " threads; expected a multiple of 32 in [32, 1024]"));
    else
      group.threads = uint32_t(*count);
    if (g.regs) {
      auto regs = buildIntConstant(*g.regs, exprContext(), ErrorCode::ThreadGroup, "regs");
      if (!regs)
        errors.append(regs.status());
      else if (*regs < 24 || *regs > 256 || *regs % 8 != 0)
        errors.append(
            error(ErrorCode::ThreadGroup, g.regs->pos,
                  "regs=" + std::to_string(*regs) + " is not a multiple of 8 in [24, 256]"));
      else
        group.regs = uint32_t(*regs);
    }
    if (g.copies) {
      auto copies = buildIntConstant(*g.copies, exprContext(), ErrorCode::ThreadGroup, "copies");
      if (!copies)
        errors.append(copies.status());
      else if (*copies < 1 || *copies > int64_t(kMaxGroupCopies))
        errors.append(error(ErrorCode::ThreadGroup, g.copies->pos,
                            "copies=" + std::to_string(*copies) + " is not in [1, " +
                                std::to_string(kMaxGroupCopies) + "]"));
      else
        group.copies = uint32_t(*copies);
    }
    int loops = loopDepth_;
    loopDepth_ = 0;
    scopes_.push();
    if (!g.loopVar.name.empty()) {
      // the copy index: an i32 scalar of the group's scope, read-only like a loop variable
      auto var = declareIndex(g.loopVar, "group index", DataType::i32());
      if (!var) {
        errors.append(var.status());
      } else {
        group.var = *var;
        scopes_.markGroupIndex(group.var);
      }
    }
    for (const AstStmt &b : g.body)
      errors.append(statement(b, group.body));
    scopes_.pop();
    loopDepth_ = loops;
    st.body.push_back(std::move(group));
  }
  out.push_back(std::move(st));
  return errors;
}

// if/elif/else and while: a condition and one or two bodies, each in a scope of its own. An `if`
// whose condition folds to a constant is resolved here: only the taken body is lowered (in its
// scope, into the enclosing list), so the other may hold code that is invalid for these
// constants (`if is_signed(WT):`).
Status ProgramLowering::conditional(const AstStmt &s, std::vector<Stmt> &out) {
  bool isWhile = s.kind == AstStmtKind::While;
  if (!isWhile) {
    auto folded = buildScalar(*s.value, exprContext());
    if (folded && folded->isConst() && (folded->dtype.isBool() || folded->dtype.isInt())) {
      Status errors;
      scopes_.push();
      for (const AstStmt &b : folded->bits != 0 ? s.body : s.orelse)
        errors.append(statement(b, out));
      scopes_.pop();
      return errors;
    }
  }
  auto cond = condition(*s.value, isWhile ? "while" : "if");
  if (!cond)
    return cond.takeStatus();
  Stmt st;
  st.kind = isWhile ? StmtKind::While : StmtKind::If;
  st.loc = loc(s.pos);
  st.expr = *cond;
  Status errors;
  if (isWhile)
    ++loopDepth_;
  scopes_.push();
  for (const AstStmt &b : s.body)
    errors.append(statement(b, st.body));
  scopes_.pop();
  if (isWhile)
    --loopDepth_;
  scopes_.push();
  for (const AstStmt &b : s.orelse)
    errors.append(statement(b, st.orelse));
  scopes_.pop();
  out.push_back(std::move(st));
  return errors;
}

} // namespace tilus::tasm
