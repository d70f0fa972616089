// Scalars in the checker: the typing of scalar expressions, the program header (parameters,
// grid, threads) and the statements that carry scalars (assignments, conditions, ranges).
//
// Expressions live in an arena (docs/ir.md). analyseExprs makes one pass over it: it checks
// that operands precede their node and that every node is used once (expressions are trees,
// so walking one from its use site is linear), types each node against its operands
// (promoteScalarTypes), and records which nodes are constant or depend on scalar parameters
// only (for grid dimensions, shared bounds and pointer extents). A node's typing error is
// reported at the statement or instruction that uses it, so it carries that location.
#include "loader/checker_impl.h"

#include "isa/convert.h"
#include "isa/scalar_eval.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace tilus::detail {

int64_t integerValue(uint64_t bits, DataType type) {
  if (type.isBool())
    return int64_t(bits & 1);
  if (type.isSigned())
    return signExtend(bits, type.bits);
  if (type.bits < 64)
    return int64_t(bits & ((uint64_t(1) << type.bits) - 1));
  return bits > uint64_t(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                              : int64_t(bits);
}

namespace {

bool isCondType(DataType t) { return t.isBool() || t.isInt(); }

/// The typing rule of one expression node given its operands' types (docs/ir.md, "Scalar
/// expressions"); empty when well typed.
std::string nodeTypeError(const Program &prog, const ExprNode &n) {
  auto ty = [&](int k) { return prog.exprs[n.operands[k]].dtype; };
  auto expect = [&](DataType want) -> std::string {
    if (n.dtype == want)
      return "";
    return std::string("operator '") + exprOpName(n.op) + "' gives " + want.name() +
           " but the expression is typed " + n.dtype.name();
  };
  auto promoted = [&](DataType a, DataType b) -> std::string {
    std::optional<DataType> p = promoteScalarTypes(a, b);
    if (!p)
      return std::string("operator '") + exprOpName(n.op) + "' is not defined on " + a.name() +
             " and " + b.name();
    return expect(*p);
  };
  auto needInts = [&](int count) -> std::string {
    for (int k = 0; k < count; ++k)
      if (!isCondType(ty(k)))
        return std::string("operator '") + exprOpName(n.op) + "' needs integer operands, got " +
               ty(k).name();
    return "";
  };
  switch (exprOpKind(n.op)) {
  case ExprOpKind::Leaf:
    return n.op == ExprOp::Var || n.dtype.valid() ? "" : "constant of an invalid type";
  case ExprOpKind::Arithmetic:
    if (n.op == ExprOp::Neg)
      return n.dtype == ty(0) ? "" : promoted(ty(0), ty(0));
    if (n.op == ExprOp::BitNot) {
      std::string e = needInts(1);
      if (!e.empty() || n.dtype == ty(0))
        return e;
      return promoted(ty(0), ty(0));
    }
    if (n.op == ExprOp::CeilDiv || n.op == ExprOp::Shl || n.op == ExprOp::Shr ||
        n.op == ExprOp::BitAnd || n.op == ExprOp::BitOr || n.op == ExprOp::BitXor) {
      std::string e = needInts(2);
      return e.empty() ? promoted(ty(0), ty(1)) : e;
    }
    return promoted(ty(0), ty(1)); // + - * / % min max
  case ExprOpKind::Comparison:
    if (!promoteScalarTypes(ty(0), ty(1)))
      return std::string("cannot compare ") + ty(0).name() + " with " + ty(1).name();
    return expect(DataType::boolean());
  case ExprOpKind::Logical: {
    std::string e = needInts(exprOpArity(n.op));
    return e.empty() ? expect(DataType::boolean()) : e;
  }
  case ExprOpKind::Select:
    if (!isCondType(ty(0)))
      return std::string("condition of 'a if c else b' has type ") + ty(0).name() +
             "; expected bool or an integer";
    if (ty(1) == ty(2) && n.dtype == ty(1))
      return "";
    return promoted(ty(1), ty(2));
  case ExprOpKind::Cast:
    return n.dtype.valid() ? "" : "cast to an invalid type";
  }
  return "unknown operator";
}

} // namespace

std::string ProgramChecker::exprTypeName(ExprId id) const { return prog_.exprs[id].dtype.name(); }

ProgramChecker::KnownMultiple ProgramChecker::knownMultiple(ExprId id) const {
  static constexpr int64_t kTop = int64_t(1) << 30;
  auto make = [](int64_t multiple, int64_t residue) {
    multiple = std::clamp<int64_t>(multiple, 1, kTop);
    return KnownMultiple{multiple, ((residue % multiple) + multiple) % multiple};
  };
  // the largest power of two (up to 2^30) that divides r (2^30 for 0)
  auto twos = [](int64_t r) { return int64_t(1) << std::min(30, std::countr_zero(uint64_t(r))); };
  if (id >= prog_.exprs.size() || id >= exprFacts_.size() || !exprFacts_[id].error.empty())
    return {};
  const ExprNode &n = prog_.exprs[id];
  if (!n.dtype.isInt())
    return {};
  if (std::optional<int64_t> c = constValue(id))
    return make(kTop, *c % kTop);
  auto operand = [&](int k) { return knownMultiple(n.operands[k]); };
  switch (n.op) {
  case ExprOp::Add:
  case ExprOp::Sub: {
    KnownMultiple a = operand(0), b = operand(1);
    int64_t m = std::min(a.multiple, b.multiple);
    return make(m, n.op == ExprOp::Add ? a.residue + b.residue : a.residue - b.residue);
  }
  case ExprOp::Neg: {
    KnownMultiple a = operand(0);
    return make(a.multiple, -a.residue);
  }
  case ExprOp::Mul: {
    // (ra + ka ma)(rb + kb mb) = ra rb + ra kb mb + rb ka ma + ka kb ma mb
    KnownMultiple a = operand(0), b = operand(1);
    int64_t m = std::min({twos(a.residue) * b.multiple, twos(b.residue) * a.multiple,
                          a.multiple * b.multiple, kTop});
    return make(m, (a.residue % m) * (b.residue % m));
  }
  case ExprOp::Shl: {
    std::optional<int64_t> k = constValue(n.operands[1]);
    if (!k || *k < 0 || *k > 30)
      return {};
    KnownMultiple a = operand(0);
    int64_t scale = int64_t(1) << *k;
    return make(std::min(a.multiple * scale, kTop), (a.residue % kTop) * scale);
  }
  case ExprOp::Cast: {
    // between integer types of at least 32 bits the low 32 bits, and so every residue modulo
    // a power of two up to 2^30, stay
    const ExprNode &from = prog_.exprs[n.operands[0]];
    if (from.dtype.isInt() && from.dtype.bits >= 32 && n.dtype.bits >= 32)
      return operand(0);
    return {};
  }
  default:
    return {};
  }
}

std::optional<int64_t> ProgramChecker::constValue(ExprId id) const {
  const ExprFacts &f = exprFacts_[id];
  if (!f.constant || !f.error.empty())
    return std::nullopt;
  if (f.value)
    return f.value;
  const ExprNode &n = prog_.exprs[id];
  if (!n.dtype.isInt() && !n.dtype.isBool())
    return std::nullopt;
  uint64_t bits = evaluateExpr(prog_, id, [](VarId) -> uint64_t { return 0; });
  return integerValue(bits, n.dtype);
}

bool ProgramChecker::isIntegerExpr(ExprId id) const { return prog_.exprs[id].dtype.isInt(); }

// --- scalar expressions -------------------------------------------------------------------

/// One pass over the arena: arity, post-order, tree shape and per-node typing. The use sites
/// report a node's typing error at their own location (checkExprUse).
void ProgramChecker::analyseExprs() {
  const size_t n = prog_.exprs.size();
  exprFacts_.assign(n, ExprFacts{});
  std::vector<uint8_t> used(n, 0);
  for (size_t id = 0; id < n; ++id)
    analyseNode(ExprId(id), used);
  markRootUses(used);
}

void ProgramChecker::analyseNode(ExprId id, std::vector<uint8_t> &used) {
  const ExprNode &node = prog_.exprs[id];
  ExprFacts &f = exprFacts_[id];
  auto structural = [&](std::string message) {
    f.error = std::move(message);
    f.errorCode = ErrorCode::Bytecode;
  };
  const int arity = exprOpArity(node.op);
  for (int k = 0; k < arity; ++k) {
    uint32_t op = node.operands[k];
    if (op >= id)
      return structural("expression " + std::to_string(id) + " uses operand " + std::to_string(op) +
                        " that does not precede it");
    if (used[op]++)
      return structural("expression " + std::to_string(op) +
                        " is used twice; expressions are trees");
  }
  if (node.op == ExprOp::Var) {
    if (node.var >= prog_.vars.size())
      return structural("expression " + std::to_string(id) + " names variable " +
                        std::to_string(node.var) + " of " + std::to_string(prog_.vars.size()));
    const Variable &v = prog_.vars[node.var];
    f.paramsOnly = v.isParam && v.kind == VarKind::Scalar;
    if (v.kind != VarKind::Scalar) {
      f.error = "variable " + varName(node.var) + " is not a scalar and cannot be used in a " +
                "scalar expression";
      f.errorCode = ErrorCode::Scope;
    } else if (v.dtype != node.dtype) {
      f.error = "reference to " + varName(node.var) + " is typed " + node.dtype.name() +
                " but the variable is " + v.dtype.name();
    }
    return;
  }
  f.constant = f.paramsOnly = true; // Const, or an operator over operands that all are
  for (int k = 0; k < arity; ++k) {
    f.constant = f.constant && exprFacts_[node.operands[k]].constant;
    f.paramsOnly = f.paramsOnly && exprFacts_[node.operands[k]].paramsOnly;
  }
  f.error = nodeTypeError(prog_, node);
  if (node.op == ExprOp::Const && f.error.empty())
    f.value = integerValue(node.bits, node.dtype);
}

/// Roots count too: a node used by two statements (or twice by one) is not a tree. Marking it
/// keeps every use-site walk linear (no subtree is walked twice).
void ProgramChecker::markRootUses(std::vector<uint8_t> &used) {
  auto root = [&](ExprId e) {
    if (e >= used.size() || !used[e]++)
      return;
    exprFacts_[e].error =
        "expression " + std::to_string(e) + " is used twice; expressions are trees";
    exprFacts_[e].errorCode = ErrorCode::Bytecode;
  };
  for (ExprId g : prog_.grid)
    root(g);
  for (const Instruction &inst : prog_.instructions)
    for (const Argument &a : inst.args) {
      if (a.present)
        forEachArgumentExpr(a, root);
    }
  forEachStmt(prog_.body, [&](const Stmt &st) {
    switch (st.kind) {
    case StmtKind::For:
      root(st.stop);
      root(st.step);
      [[fallthrough]];
    case StmtKind::Assign:
    case StmtKind::Specialize:
    case StmtKind::If:
    case StmtKind::While:
    case StmtKind::Assert:
      root(st.expr);
      return;
    case StmtKind::Instruction:
    case StmtKind::Break:
    case StmtKind::Continue:
    case StmtKind::Parallel:
    case StmtKind::Group:
      return;
    }
  });
}

bool ProgramChecker::checkVarRead(VarId var, bool &poisoned) {
  switch (state_[var]) {
  case VarState::Undeclared:
    return fail(ErrorCode::UndefinedName, varName(var) + " is used before its definition");
  case VarState::Dead:
    return fail(ErrorCode::UndefinedName,
                varName(var) + " is used outside the scope of its definition");
  case VarState::Live:
    break;
  }
  if (info_.vars[var].kind == VarKind::Register && declaredOutsideGroup(var))
    return fail(ErrorCode::ThreadGroup,
                "register tensor " + varName(var) +
                    " is declared outside the thread group (its layout spans the whole block); "
                    "a group uses only its own register tensors");
  if (poisoned_[var])
    poisoned = true;
  return true;
}

/// Walks the tree rooted at `id`: typing errors of its nodes and liveness of its variables.
bool ProgramChecker::checkExprUse(ExprId id, bool &poisoned) {
  std::vector<ExprId> &stack = exprStack_;
  stack.assign(1, id);
  while (!stack.empty()) {
    ExprId e = stack.back();
    stack.pop_back();
    const ExprFacts &f = exprFacts_[e];
    if (!f.error.empty())
      return fail(f.errorCode, f.error);
    const ExprNode &n = prog_.exprs[e];
    if (n.op == ExprOp::Var && !checkVarRead(n.var, poisoned))
      return false;
    for (int k = 0; k < exprOpArity(n.op); ++k)
      stack.push_back(n.operands[k]);
  }
  return true;
}

// --- header: parameters, grid, threads ----------------------------------------------------

void ProgramChecker::checkHeader() {
  curLoc_ = prog_.loc;
  curInstruction_ = -1;
  std::vector<uint8_t> isParam(prog_.vars.size(), 0);
  for (VarId p : prog_.params) {
    if (p >= prog_.vars.size() || isParam[p] || !prog_.vars[p].isParam ||
        (prog_.vars[p].kind != VarKind::Scalar && prog_.vars[p].kind != VarKind::Pointer)) {
      fail(ErrorCode::Bytecode, "parameter list names variable " + std::to_string(p) +
                                    " that is not a distinct scalar or pointer parameter");
      continue;
    }
    isParam[p] = 1;
    state_[p] = VarState::Live;
    const Variable &v = prog_.vars[p];
    info_.vars[p].kind = v.kind;
    info_.vars[p].dtype = v.dtype;
  }
  for (VarId v = 0; v < prog_.vars.size(); ++v)
    if (prog_.vars[v].isParam && !isParam[v])
      fail(ErrorCode::Bytecode, "variable " + varName(v) + " is marked as a parameter but is " +
                                    "not in the parameter list");
  if (prog_.grid.empty() || prog_.grid.size() > 3)
    fail(ErrorCode::GridExpr, "the grid has " +
                                  counted(int64_t(prog_.grid.size()), "dimension", "dimensions") +
                                  "; expected 1 to 3");
  for (size_t d = 0; d < prog_.grid.size(); ++d) {
    ExprId g = prog_.grid[d];
    bool poisoned = false;
    if (g >= prog_.exprs.size()) {
      fail(ErrorCode::Bytecode, "grid dimension " + std::to_string(d) + " names no expression");
      continue;
    }
    if (!exprFacts_[g].paramsOnly && exprFacts_[g].errorCode != ErrorCode::Bytecode) {
      fail(ErrorCode::GridExpr, "grid dimension " + std::to_string(d) +
                                    " uses something other than constants and scalar parameters");
      continue;
    }
    if (!checkExprUse(g, poisoned))
      continue;
    if (!isIntegerExpr(g))
      fail(ErrorCode::DtypeMismatch, "grid dimension " + std::to_string(d) + " has type " +
                                         exprTypeName(g) + "; expected an integer");
  }
  threads_ = prog_.threads != 0 ? prog_.threads : inferThreads();
  if (prog_.threads != 0 && (threads_ % 32 != 0 || threads_ < 32 || threads_ > 1024))
    fail(ErrorCode::Threads,
         "threads=" + std::to_string(threads_) + " is not a multiple of 32 in [32, 1024]");
  info_.threads = threads_;
  blockThreads_ = threads_;
  if (prog_.blocksPerSm > kMaxBlocksPerSm ||
      int64_t(prog_.blocksPerSm) * threads_ > kMaxThreadsPerSm)
    fail(ErrorCode::Threads, "blocks_per_sm=" + std::to_string(prog_.blocksPerSm) + " blocks of " +
                                 std::to_string(threads_) + " threads exceed what one SM holds (" +
                                 std::to_string(kMaxBlocksPerSm) + " blocks, " +
                                 std::to_string(kMaxThreadsPerSm) + " threads)");
  checkClusterHeader();
}

namespace {

/// The first parallel statement of `body` in program order, or nullptr.
const Stmt *firstParallel(const std::vector<Stmt> &body) {
  for (const Stmt &s : body) {
    if (s.kind == StmtKind::Parallel)
      return &s;
    if (const Stmt *p = firstParallel(s.body))
      return p;
    if (const Stmt *p = firstParallel(s.orelse))
      return p;
  }
  return nullptr;
}

} // namespace

/// Without threads=, the block size is the sum of the group counts of the first parallel
/// statement, or else the thread count of the first register layout in program order (every
/// other layout must agree: checkLayoutThreads). A program without any register layout runs one
/// warp.
uint32_t ProgramChecker::inferThreads() {
  if (const Stmt *par = firstParallel(prog_.body)) {
    uint64_t sum = 0;
    for (const Stmt &g : par->body)
      sum += uint64_t(g.threads) * g.copies; // copies counted
    if (sum % 32 != 0 || sum < 32 || sum > 1024)
      report(ErrorCode::Threads,
             "threads inferred from the groups of the parallel statement would be " +
                 std::to_string(sum) + ", not a multiple of 32 in [32, 1024]; give threads=",
             par->loc, -1);
    return uint32_t(std::min<uint64_t>(sum, 1024));
  }
  for (size_t idx = 0; idx < prog_.instructions.size(); ++idx) {
    const Instruction &inst = prog_.instructions[idx];
    for (const Argument &a : inst.args) {
      if (!a.present || !a.regLayout)
        continue;
      int64_t t = a.regLayout->numThreads();
      if (t % 32 != 0 || t < 32 || t > 1024) {
        report(ErrorCode::Threads,
               "threads inferred from layout " + a.regLayout->toString() + " would be " +
                   std::to_string(t) + ", not a multiple of 32 in [32, 1024]; give threads=",
               inst.loc, int64_t(idx));
      }
      return uint32_t(std::min<int64_t>(t, std::numeric_limits<uint32_t>::max()));
    }
  }
  return 32;
}

void ProgramChecker::checkCondition(const Stmt &stmt, const char *what) {
  bool poisoned = false;
  if (stmt.expr >= prog_.exprs.size()) {
    fail(ErrorCode::Bytecode, std::string(what) + " condition names no expression");
    return;
  }
  if (!checkExprUse(stmt.expr, poisoned) || poisoned)
    return;
  DataType t = prog_.exprs[stmt.expr].dtype;
  if (!isCondType(t))
    fail(ErrorCode::DtypeMismatch,
         std::string(what) + " condition has type " + t.name() + "; expected bool or an integer");
}

// Whether expression `e` (of an assert or a specialize statement) uses only constants and
// scalar parameters, as the host computes it before the launch; else `code` about `what`.
bool ProgramChecker::paramsOnly(ExprId e, ErrorCode code, const char *what) {
  if (exprFacts_[e].paramsOnly || exprFacts_[e].errorCode == ErrorCode::Bytecode)
    return true;
  fail(code, std::string(what) + " uses something other than constants and scalar parameters");
  return false;
}

// A precondition (docs/isa.md, "Preconditions"): at the top of the body, a bool expression of
// constants and scalar parameters, so that it can be evaluated before the launch.
void ProgramChecker::checkAssert(const Stmt &stmt) {
  if (!assertsAllowed_) {
    fail(ErrorCode::AssertExpr, "assert after another statement or inside a block; asserts are "
                                "preconditions and come first in the program body");
    return;
  }
  if (stmt.expr >= prog_.exprs.size()) {
    fail(ErrorCode::Bytecode, "assert condition names no expression");
    return;
  }
  if (!paramsOnly(stmt.expr, ErrorCode::AssertExpr, "assert condition"))
    return;
  bool poisoned = false;
  if (!checkExprUse(stmt.expr, poisoned) || poisoned)
    return;
  DataType t = prog_.exprs[stmt.expr].dtype;
  if (!t.isBool())
    fail(ErrorCode::DtypeMismatch, "assert condition has type " + t.name() + "; expected bool");
}

// `specialize NAME = COND` (docs/isa.md, "Launch-time specialisation"): an assignment of a bool
// of constants and scalar parameters, in the body's prefix after the asserts, so that the
// runtime can compute it before the launch.
void ProgramChecker::checkSpecialize(const Stmt &stmt) {
  if (!specializeAllowed_) {
    fail(ErrorCode::SpecializeExpr,
         "specialize after a statement other than assert or specialize, or inside a block; it "
         "comes first in the program body (after the asserts)");
    return;
  }
  if (stmt.var >= prog_.vars.size() || stmt.expr >= prog_.exprs.size()) {
    fail(ErrorCode::Bytecode, "specialize names no variable or no expression");
    return;
  }
  if (!paramsOnly(stmt.expr, ErrorCode::SpecializeExpr, "specialized value"))
    return;
  if (state_[stmt.var] != VarState::Undeclared) {
    fail(ErrorCode::SpecializeExpr,
         "specialized variable " + varName(stmt.var) + " is assigned more than once");
    return;
  }
  bool poisoned = false;
  if (checkExprUse(stmt.expr, poisoned) && !poisoned && !prog_.exprs[stmt.expr].dtype.isBool())
    fail(ErrorCode::DtypeMismatch,
         "specialized value has type " + prog_.exprs[stmt.expr].dtype.name() + "; expected bool");
  checkAssign(stmt);
  loopVar_[stmt.var] = 3; // read-only: the JIT may have folded its value
}

void ProgramChecker::checkAssign(const Stmt &stmt) {
  if (stmt.var >= prog_.vars.size() || stmt.expr >= prog_.exprs.size()) {
    fail(ErrorCode::Bytecode, "assignment names no variable or no expression");
    return;
  }
  bool poisoned = false;
  bool ok = checkExprUse(stmt.expr, poisoned);
  if (!ok || poisoned) {
    // Declare the target anyway (poisoned) so that its readers stay quiet.
    if (state_[stmt.var] == VarState::Undeclared) {
      state_[stmt.var] = VarState::Live;
      poisoned_[stmt.var] = 1;
      info_.vars[stmt.var] = VarType{prog_.vars[stmt.var].kind, prog_.vars[stmt.var].dtype};
      scopes_.back().push_back(stmt.var);
      declScope_[stmt.var] = scopes_.size() - 1;
    }
    return;
  }
  VarType t;
  t.kind = VarKind::Scalar;
  t.dtype = prog_.exprs[stmt.expr].dtype;
  writeVar(stmt.var, std::move(t), true);
}

void ProgramChecker::checkFor(const Stmt &stmt) {
  ExprId parts[3] = {stmt.expr, stmt.stop, stmt.step};
  const char *names[3] = {"start", "stop", "step"};
  for (int k = 0; k < 3; ++k) {
    bool poisoned = false;
    if (parts[k] >= prog_.exprs.size()) {
      fail(ErrorCode::Bytecode, std::string("for loop ") + names[k] + " names no expression");
      continue;
    }
    if (checkExprUse(parts[k], poisoned) && !poisoned && !isIntegerExpr(parts[k]))
      fail(ErrorCode::DtypeMismatch, std::string("range ") + names[k] + " has type " +
                                         exprTypeName(parts[k]) + "; expected an integer");
  }
  // the unroll hint (docs/isa.md, "Unroll hints"): the decoder and the assembler keep it in
  // range; a module built in memory may not
  if (stmt.unroll > kMaxUnroll)
    fail(ErrorCode::BadArgument, "unroll=" + std::to_string(stmt.unroll) + " is not in [1, " +
                                     std::to_string(kMaxUnroll) + "]");
  openScope();
  if (stmt.var >= prog_.vars.size() || prog_.vars[stmt.var].kind != VarKind::Scalar ||
      state_[stmt.var] != VarState::Undeclared) {
    fail(ErrorCode::Bytecode,
         "for loop variable " + varName(stmt.var) + " is not a fresh scalar variable");
  } else if (!prog_.vars[stmt.var].dtype.isInt()) {
    fail(ErrorCode::DtypeMismatch, "loop variable " + varName(stmt.var) + " has type " +
                                       prog_.vars[stmt.var].dtype.name() + "; expected an integer");
    writeVar(stmt.var, VarType{VarKind::Scalar, prog_.vars[stmt.var].dtype}, true);
  } else {
    writeVar(stmt.var, VarType{VarKind::Scalar, prog_.vars[stmt.var].dtype}, true);
  }
  if (stmt.var < prog_.vars.size())
    loopVar_[stmt.var] = 1;
  ++loopDepth_;
  checkBlock(stmt.body);
  --loopDepth_;
  closeScope();
}

} // namespace tilus::detail
