// The layout type checker's driver: one pass over each program, in program order.
//
// Why one pass: every rule of ISA section 6 is local to an instruction once the types of its
// operands are known, and types flow forward only (a variable is declared by its first write
// and keeps that type; later writes are updates that must not change it). So the checker walks
// the structured body once, keeping
//   - the derived VarType of every variable (ProgramInfo::vars),
//   - which variables are live (declared and in scope), for use-before-definition,
//   - which are poisoned (results of an instruction that failed), to avoid cascades,
// and hands each instruction to one small function per opcode (check_compute.cpp,
// check_memory.cpp, check_dot.cpp). This file holds what is common: diagnostics and their
// locations, scalar expressions, scopes and statements, the structural validation of arguments
// and results, declarations and updates, and the module-level entry point.
#include "loader/checker_impl.h"

#include "isa/convert.h"
#include "isa/scalar_eval.h"

#include <algorithm>
#include <limits>
#include <unordered_set>

namespace tilus {
namespace detail {

std::string counted(int64_t n, const char *singular, const char *plural) {
  return std::to_string(n) + " " + (n == 1 ? singular : plural);
}

std::string shapeString(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t shapeElements(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d <= 0)
      return 0;
    if (n > std::numeric_limits<int64_t>::max() / d)
      return std::numeric_limits<int64_t>::max();
    n *= d;
  }
  return n;
}

std::vector<int64_t> unravelIndex(int64_t linear, const std::vector<int64_t> &shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = linear % shape[d];
    linear /= shape[d];
  }
  return index;
}

std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b) {
  size_t rank = std::max(a.size(), b.size());
  std::vector<int64_t> out(rank, 1);
  for (size_t i = 0; i < rank; ++i) {
    int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1)
      return std::nullopt;
    out[rank - 1 - i] = da == 1 ? db : da;
  }
  return out;
}

VarType registerType(DataType dtype, const RegisterLayout &layout) {
  VarType t;
  t.kind = VarKind::Register;
  t.dtype = dtype;
  t.shape = layout.shape();
  t.rank = t.shape.size();
  t.layout = layout;
  return t;
}

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
  switch (n.op) {
  case ExprOp::Const:
    return n.dtype.valid() ? "" : "constant of an invalid type";
  case ExprOp::Var:
    return "";
  case ExprOp::Add:
  case ExprOp::Sub:
  case ExprOp::Mul:
  case ExprOp::Div:
  case ExprOp::Mod:
  case ExprOp::Min:
  case ExprOp::Max:
    return promoted(ty(0), ty(1));
  case ExprOp::CeilDiv:
  case ExprOp::Shl:
  case ExprOp::Shr:
  case ExprOp::BitAnd:
  case ExprOp::BitOr:
  case ExprOp::BitXor: {
    std::string e = needInts(2);
    return e.empty() ? promoted(ty(0), ty(1)) : e;
  }
  case ExprOp::BitNot: {
    std::string e = needInts(1);
    if (!e.empty() || n.dtype == ty(0))
      return e;
    return promoted(ty(0), ty(0));
  }
  case ExprOp::Neg:
    return n.dtype == ty(0) ? "" : promoted(ty(0), ty(0));
  case ExprOp::Eq:
  case ExprOp::Ne:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge: {
    if (!promoteScalarTypes(ty(0), ty(1)))
      return std::string("cannot compare ") + ty(0).name() + " with " + ty(1).name();
    return expect(DataType::boolean());
  }
  case ExprOp::LogicalAnd:
  case ExprOp::LogicalOr: {
    std::string e = needInts(2);
    return e.empty() ? expect(DataType::boolean()) : e;
  }
  case ExprOp::LogicalNot: {
    std::string e = needInts(1);
    return e.empty() ? expect(DataType::boolean()) : e;
  }
  case ExprOp::Select: {
    if (!isCondType(ty(0)))
      return std::string("condition of 'a if c else b' has type ") + ty(0).name() +
             "; expected bool or an integer";
    if (ty(1) == ty(2) && n.dtype == ty(1))
      return "";
    return promoted(ty(1), ty(2));
  }
  case ExprOp::Cast:
    return n.dtype.valid() ? "" : "cast to an invalid type";
  }
  return "unknown operator";
}

template <typename F> void forEachStmt(const std::vector<Stmt> &body, const F &f) {
  for (const Stmt &s : body) {
    f(s);
    forEachStmt(s.body, f);
    forEachStmt(s.orelse, f);
  }
}

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

} // namespace

ProgramChecker::ProgramChecker(const Module &module, size_t programIndex,
                               const CheckOptions &options, LayoutOracle &oracle,
                               std::vector<SortedDiagnostic> &diagnostics)
    : module_(module), prog_(module.programs[programIndex]), programIndex_(programIndex),
      options_(options), oracle_(oracle), diagnostics_(diagnostics),
      firstDiagnostic_(diagnostics.size()) {}

// --- diagnostics --------------------------------------------------------------------------

void ProgramChecker::report(ErrorCode code, std::string message, SourceLoc loc,
                            int64_t instruction) {
  Location where;
  if (loc.line != 0) {
    where.file = !options_.fileName.empty()    ? options_.fileName
                 : !module_.sourceName.empty() ? module_.sourceName
                                               : std::string("<input>");
    where.line = loc.line;
    where.column = loc.column;
  } else {
    where.program = prog_.name;
    where.instruction = instruction;
  }
  SortedDiagnostic d;
  d.program = programIndex_;
  d.line = loc.line;
  d.column = loc.column;
  d.instruction = instruction;
  d.sequence = diagnostics_.size();
  d.diagnostic = Diagnostic{code, std::move(message), std::move(where)};
  diagnostics_.push_back(std::move(d));
}

bool ProgramChecker::fail(ErrorCode code, std::string message) {
  report(code, std::move(message), curLoc_, curInstruction_);
  return false;
}

std::string ProgramChecker::varName(VarId var) const {
  if (var >= prog_.vars.size())
    return "%" + std::to_string(var);
  const std::string &n = prog_.vars[var].name;
  return "'" + (n.empty() ? "%" + std::to_string(var) : n) + "'";
}

std::string ProgramChecker::exprTypeName(ExprId id) const { return prog_.exprs[id].dtype.name(); }

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
  for (size_t id = 0; id < n; ++id) {
    const ExprNode &node = prog_.exprs[id];
    ExprFacts &f = exprFacts_[id];
    int arity = exprOpArity(node.op);
    bool structural = true;
    for (int k = 0; k < arity; ++k) {
      uint32_t op = node.operands[k];
      if (op >= id) {
        f.error = "expression " + std::to_string(id) + " uses operand " + std::to_string(op) +
                  " that does not precede it";
        f.errorCode = ErrorCode::Bytecode;
        structural = false;
        break;
      }
      if (used[op]++) {
        f.error = "expression " + std::to_string(op) + " is used twice; expressions are trees";
        f.errorCode = ErrorCode::Bytecode;
        structural = false;
        break;
      }
    }
    if (!structural)
      continue;
    f.constant = node.op == ExprOp::Const;
    f.paramsOnly = f.constant;
    if (node.op == ExprOp::Var) {
      if (node.var >= prog_.vars.size()) {
        f.error = "expression " + std::to_string(id) + " names variable " +
                  std::to_string(node.var) + " of " + std::to_string(prog_.vars.size());
        f.errorCode = ErrorCode::Bytecode;
        continue;
      }
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
      continue;
    }
    if (arity > 0) {
      f.constant = f.paramsOnly = true;
      for (int k = 0; k < arity; ++k) {
        f.constant = f.constant && exprFacts_[node.operands[k]].constant;
        f.paramsOnly = f.paramsOnly && exprFacts_[node.operands[k]].paramsOnly;
      }
    }
    f.error = nodeTypeError(prog_, node);
    if (node.op == ExprOp::Const && f.error.empty())
      f.value = integerValue(node.bits, node.dtype);
  }
  // Roots count too: a node used by two statements (or twice by one) is not a tree. Marking it
  // keeps every use-site walk linear (no subtree is walked twice).
  auto root = [&](ExprId e) {
    if (e >= n || !used[e]++)
      return;
    exprFacts_[e].error =
        "expression " + std::to_string(e) + " is used twice; expressions are trees";
    exprFacts_[e].errorCode = ErrorCode::Bytecode;
  };
  for (ExprId g : prog_.grid)
    root(g);
  for (const Instruction &inst : prog_.instructions)
    for (const Argument &a : inst.args) {
      if (!a.present)
        continue;
      if (a.expr != kNoId)
        root(a.expr);
      for (ExprId e : a.exprs)
        root(e);
      for (const OffsetEntry &o : a.offsets)
        root(o.expr);
    }
  forEachStmt(prog_.body, [&](const Stmt &st) {
    switch (st.kind) {
    case StmtKind::For:
      root(st.stop);
      root(st.step);
      [[fallthrough]];
    case StmtKind::Assign:
    case StmtKind::If:
    case StmtKind::While:
      root(st.expr);
      return;
    case StmtKind::Instruction:
    case StmtKind::Break:
    case StmtKind::Continue:
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
}

/// Without threads=, the block size is the thread count of the first register layout in
/// program order (every other layout must agree: checkLayoutThreads). A program without any
/// register layout runs one warp.
uint32_t ProgramChecker::inferThreads() {
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

// --- scopes and statements ----------------------------------------------------------------

void ProgramChecker::openScope() { scopes_.emplace_back(); }

void ProgramChecker::closeScope() {
  for (VarId v : scopes_.back())
    state_[v] = VarState::Dead;
  scopes_.pop_back();
}

void ProgramChecker::checkBlock(const std::vector<Stmt> &body) {
  for (const Stmt &s : body)
    checkStmt(s);
}

void ProgramChecker::checkStmt(const Stmt &stmt) {
  curLoc_ = stmt.loc;
  curInstruction_ = -1;
  switch (stmt.kind) {
  case StmtKind::Instruction:
    checkInstructionStmt(stmt);
    return;
  case StmtKind::Assign:
    checkAssign(stmt);
    return;
  case StmtKind::For:
    checkFor(stmt);
    return;
  case StmtKind::If:
    checkCondition(stmt, "if");
    openScope();
    checkBlock(stmt.body);
    closeScope();
    openScope();
    checkBlock(stmt.orelse);
    closeScope();
    return;
  case StmtKind::While:
    checkCondition(stmt, "while");
    ++loopDepth_;
    openScope();
    checkBlock(stmt.body);
    closeScope();
    --loopDepth_;
    return;
  case StmtKind::Break:
  case StmtKind::Continue:
    if (loopDepth_ == 0)
      fail(ErrorCode::BreakOutsideLoop,
           std::string(stmt.kind == StmtKind::Break ? "break" : "continue") + " outside a loop");
    return;
  }
  fail(ErrorCode::Bytecode, "unknown statement kind " + std::to_string(int(stmt.kind)));
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

// --- declarations and updates -------------------------------------------------------------

namespace {

/// Why `now` is not exactly `declared` (empty when equal).
std::string typeDifference(const VarType &declared, const VarType &now) {
  if (declared.kind != now.kind)
    return "its kind";
  if (declared.kind == VarKind::Shared || declared.kind == VarKind::Global)
    return "the memory it views (views of shared and global memory cannot be updated)";
  if (declared.dtype != now.dtype)
    return std::string("its dtype from ") + declared.dtype.name() + " to " + now.dtype.name();
  if (declared.shape != now.shape || declared.rank != now.rank)
    return "its shape from " + shapeString(declared.shape) + " to " + shapeString(now.shape);
  if (declared.layout != now.layout)
    return "its layout from " + (declared.layout ? declared.layout->toString() : "none") + " to " +
           (now.layout ? now.layout->toString() : "none");
  return "";
}

} // namespace

void ProgramChecker::writeVar(VarId var, VarType type, bool scalarAssign) {
  const Variable &v = prog_.vars[var];
  if (loopVar_[var]) {
    fail(ErrorCode::UpdateType, "loop variable " + varName(var) + " is read-only");
    return;
  }
  switch (state_[var]) {
  case VarState::Dead:
    fail(ErrorCode::UndefinedName,
         varName(var) + " is assigned outside the scope of its definition");
    return;
  case VarState::Undeclared:
    if (v.kind != type.kind) {
      fail(ErrorCode::Bytecode, "variable " + varName(var) + " has the wrong kind for its " +
                                    "defining " + (scalarAssign ? "assignment" : "instruction"));
      poisoned_[var] = 1;
    } else if (v.kind == VarKind::Scalar && v.dtype != type.dtype) {
      fail(ErrorCode::DtypeMismatch, "variable " + varName(var) + " is declared " + v.dtype.name() +
                                         " but assigned " + type.dtype.name());
      poisoned_[var] = 1;
    }
    info_.vars[var] = std::move(type);
    state_[var] = VarState::Live;
    scopes_.back().push_back(var);
    return;
  case VarState::Live:
    break;
  }
  if (poisoned_[var])
    return;
  std::string diff = typeDifference(info_.vars[var], type);
  if (!diff.empty())
    fail(ErrorCode::UpdateType, "update of " + varName(var) + " changes " + diff);
}

void ProgramChecker::poisonResults(const Instruction &inst) {
  if (inst.out)
    return;
  for (VarId r : inst.results) {
    if (r >= prog_.vars.size() || state_[r] != VarState::Undeclared)
      continue;
    state_[r] = VarState::Live;
    poisoned_[r] = 1;
    info_.vars[r].kind = prog_.vars[r].kind;
    scopes_.back().push_back(r);
  }
}

void ProgramChecker::commitResults(const Instruction &inst, Results &results) {
  if (inst.out)
    return;
  for (size_t k = 0; k < inst.results.size(); ++k)
    writeVar(inst.results[k], std::move(results[k]), false);
}

// --- instructions -------------------------------------------------------------------------

void ProgramChecker::checkInstructionStmt(const Stmt &stmt) {
  if (stmt.index >= prog_.instructions.size() || instructionSeen_[stmt.index]) {
    fail(ErrorCode::Bytecode, "statement names instruction " + std::to_string(stmt.index) +
                                  " that does not exist or is already used");
    return;
  }
  instructionSeen_[stmt.index] = 1;
  const Instruction &inst = prog_.instructions[stmt.index];
  curInstruction_ = stmt.index;
  curLoc_ = inst.loc.line != 0 ? inst.loc : stmt.loc;
  bool poisoned = false;
  if (!checkStructure(inst)) {
    poisonResults(inst);
    return;
  }
  if (!checkReads(inst, poisoned) || poisoned || !checkLayoutThreads(inst)) {
    poisonResults(inst);
    return;
  }
  Results results(inst.results.size());
  if (!dispatch(inst, results) || (inst.out && !checkOut(inst, results[0]))) {
    poisonResults(inst);
    return;
  }
  commitResults(inst, results);
}

/// Argument and result shapes that the decoder may not have enforced (and that a hand-built
/// module may break): one argument per ArgSpec, required ones present, ids in range.
bool ProgramChecker::checkStructure(const Instruction &inst) {
  if (size_t(inst.opcode) >= numOpcodes())
    return fail(ErrorCode::Bytecode, "unknown opcode " + std::to_string(int(inst.opcode)));
  const InstructionSpec &spec = inst.spec();
  if (inst.args.size() != spec.args.size())
    return fail(ErrorCode::Bytecode, std::string(spec.name) + " has " +
                                         std::to_string(inst.args.size()) + " argument slots; " +
                                         "expected " + std::to_string(spec.args.size()));
  auto exprOk = [&](ExprId e) { return e < prog_.exprs.size(); };
  for (size_t k = 0; k < spec.args.size(); ++k) {
    const ArgSpec &as = spec.args[k];
    const Argument &a = inst.args[k];
    if (!a.present) {
      if (as.required)
        return fail(ErrorCode::BadArgument,
                    std::string(spec.name) + " is missing required argument '" + as.name + "'");
      continue;
    }
    bool ok = true;
    switch (as.kind) {
    case ArgKind::Value:
      ok =
          (a.var != kNoId) != (a.expr != kNoId) &&
          (a.var == kNoId ? exprOk(a.expr)
                          : a.var < prog_.vars.size() && prog_.vars[a.var].kind != VarKind::Scalar);
      break;
    case ArgKind::Expr:
      ok = exprOk(a.expr);
      break;
    case ArgKind::Int:
    case ArgKind::String:
    case ArgKind::IntList:
      break;
    case ArgKind::Bool:
      ok = a.intValue == 0 || a.intValue == 1;
      break;
    case ArgKind::DType:
      ok = a.dtype.valid();
      break;
    case ArgKind::RegLayout:
      ok = a.regLayout.has_value();
      break;
    case ArgKind::SharedLayout:
      ok = a.sharedLayout.has_value();
      break;
    case ArgKind::ExprList:
      ok = std::all_of(a.exprs.begin(), a.exprs.end(), exprOk);
      break;
    case ArgKind::Offset:
      ok = std::all_of(a.offsets.begin(), a.offsets.end(),
                       [&](const OffsetEntry &o) { return exprOk(o.expr); });
      break;
    case ArgKind::ReduceOp:
      ok = a.intValue >= 0 && a.intValue <= int64_t(ReduceOp::All);
      break;
    }
    if (!ok)
      return fail(ErrorCode::Bytecode,
                  std::string(spec.name) + " argument '" + as.name + "' is malformed");
  }
  size_t n = inst.results.size();
  if (n < spec.minResults || n > spec.maxResults)
    return fail(ErrorCode::BadArgument,
                std::string(spec.name) + " gives " +
                    (spec.minResults == spec.maxResults ? std::to_string(spec.minResults)
                                                        : std::to_string(spec.minResults) + " to " +
                                                              std::to_string(spec.maxResults)) +
                    " results, not " + std::to_string(n));
  if (inst.out && (!spec.allowsOut || n != 1))
    return fail(ErrorCode::BadArgument, std::string(spec.name) + " does not accept out=");
  for (size_t k = 0; k < n; ++k) {
    VarId r = inst.results[k];
    VarKind want = inst.out ? VarKind::Register : spec.resultKind;
    bool repeated =
        std::find(inst.results.begin(), inst.results.begin() + k, r) != inst.results.begin() + k;
    if (r >= prog_.vars.size() || prog_.vars[r].kind != want || repeated ||
        (prog_.vars[r].isParam && !inst.out))
      return fail(ErrorCode::Bytecode, std::string(spec.name) + " result " + varName(r) +
                                           " is not a distinct variable of the result's kind");
  }
  return true;
}

bool ProgramChecker::checkReads(const Instruction &inst, bool &poisoned) {
  for (const Argument &a : inst.args) {
    if (!a.present)
      continue;
    if (a.var != kNoId && !checkVarRead(a.var, poisoned))
      return false;
    if (a.expr != kNoId && !checkExprUse(a.expr, poisoned))
      return false;
    for (ExprId e : a.exprs)
      if (!checkExprUse(e, poisoned))
        return false;
    for (const OffsetEntry &o : a.offsets)
      if (!checkExprUse(o.expr, poisoned))
        return false;
  }
  if (inst.out && !checkVarRead(inst.results[0], poisoned))
    return false;
  return true;
}

bool ProgramChecker::checkLayoutThreads(const Instruction &inst) {
  const InstructionSpec &spec = inst.spec();
  for (size_t k = 0; k < inst.args.size(); ++k) {
    const Argument &a = inst.args[k];
    if (!a.present || !a.regLayout || a.regLayout->numThreads() == int64_t(threads_))
      continue;
    return fail(ErrorCode::LayoutThreads,
                std::string(spec.name) + " " + spec.args[k].name + "=" + a.regLayout->toString() +
                    " has " + std::to_string(a.regLayout->numThreads()) +
                    " threads but the block has " + std::to_string(threads_));
  }
  return true;
}

bool ProgramChecker::dispatch(const Instruction &inst, Results &r) {
  switch (inst.opcode) {
  case Opcode::BlockIndices:
    return checkBlockIndices(inst, r);
  case Opcode::AllocateRegister:
    return checkAllocateRegister(inst, r);
  case Opcode::Iota:
    return checkIota(inst, r);
  case Opcode::AllocateShared:
    return checkAllocateShared(inst, r);
  case Opcode::AllocateGlobal:
    return checkAllocateGlobal(inst, r);
  case Opcode::ViewGlobal:
    return checkViewGlobal(inst, r);
  case Opcode::SliceGlobal:
    return checkSliceGlobal(inst, r);
  case Opcode::SliceShared:
    return checkSliceShared(inst, r);
  case Opcode::LoadGlobal:
    return checkLoadGlobal(inst, r);
  case Opcode::LoadShared:
    return checkLoadShared(inst, r);
  case Opcode::StoreGlobal:
    return checkStoreGlobal(inst);
  case Opcode::StoreShared:
    return checkStoreShared(inst);
  case Opcode::CopyAsync:
    return checkCopyAsync(inst);
  case Opcode::CopyAsyncWaitGroup:
    return checkCopyAsyncWaitGroup(inst);
  case Opcode::CopyAsyncCommitGroup:
  case Opcode::CopyAsyncWaitAll:
  case Opcode::Synchronize:
  case Opcode::Exit:
    return true;
  case Opcode::Add:
  case Opcode::Sub:
  case Opcode::Mul:
  case Opcode::Div:
  case Opcode::Mod:
  case Opcode::Max:
  case Opcode::Min:
  case Opcode::And:
  case Opcode::Or:
  case Opcode::Xor:
  case Opcode::Shl:
  case Opcode::Shr:
  case Opcode::Eq:
  case Opcode::Ne:
  case Opcode::Lt:
  case Opcode::Le:
  case Opcode::Gt:
  case Opcode::Ge:
  case Opcode::Neg:
  case Opcode::Abs:
  case Opcode::Not:
  case Opcode::Exp:
  case Opcode::Exp2:
  case Opcode::Log:
  case Opcode::Log2:
  case Opcode::Sqrt:
  case Opcode::Rsqrt:
  case Opcode::Sin:
  case Opcode::Cos:
  case Opcode::Tanh:
    return checkElementwise(inst, r);
  case Opcode::Where:
    return checkWhere(inst, r);
  case Opcode::Cast:
    return checkCast(inst, r);
  case Opcode::View:
    return checkView(inst, r);
  case Opcode::Permute:
    return checkPermute(inst, r);
  case Opcode::ConvertLayout:
    return checkConvertLayout(inst, r);
  case Opcode::Dot:
    return checkDot(inst, r);
  case Opcode::Reduce:
    return checkReduce(inst, r);
  case Opcode::Print:
    return checkPrint(inst);
  }
  return fail(ErrorCode::Bytecode, "unknown opcode " + std::to_string(int(inst.opcode)));
}

// --- helpers shared by the per-instruction checks -----------------------------------------

const Argument *ProgramChecker::optionalArg(const Instruction &inst, const char *name) const {
  int k = inst.spec().argIndex(name);
  if (k < 0 || !inst.args[k].present)
    return nullptr;
  return &inst.args[k];
}

const RegisterLayout *ProgramChecker::layoutArg(const Instruction &inst, const char *name) const {
  const Argument *a = optionalArg(inst, name);
  return a && a->regLayout ? &*a->regLayout : nullptr;
}

namespace {
const char *kindName(VarKind k) {
  switch (k) {
  case VarKind::None:
    return "nothing";
  case VarKind::Scalar:
    return "a scalar";
  case VarKind::Pointer:
    return "a pointer";
  case VarKind::Register:
    return "a register tensor";
  case VarKind::Shared:
    return "a shared tensor";
  case VarKind::Global:
    return "a global tensor";
  }
  return "?";
}
} // namespace

const VarType *ProgramChecker::tensorArg(const Instruction &inst, const char *name, VarKind kind) {
  const Argument &a = inst.arg(name);
  VarKind got = a.var != kNoId ? info_.vars[a.var].kind : VarKind::Scalar;
  if (got != kind) {
    fail(ErrorCode::Scope, std::string(inst.spec().name) + " argument '" + name + "' is " +
                               kindName(got) +
                               (a.var != kNoId ? " (" + varName(a.var) + ")" : std::string()) +
                               "; expected " + kindName(kind));
    return nullptr;
  }
  return &info_.vars[a.var];
}

const VarType *ProgramChecker::outTarget(const Instruction &inst) const {
  return inst.out ? &info_.vars[inst.results[0]] : nullptr;
}

bool ProgramChecker::checkLayoutShape(const RegisterLayout &layout,
                                      const std::vector<int64_t> &shape, const char *what) {
  if (layout.shape() == shape)
    return true;
  return fail(ErrorCode::LayoutShape, std::string(what) + " " + layout.toString() + " has shape " +
                                          shapeString(layout.shape()) +
                                          " but the tensor has shape " + shapeString(shape));
}

bool ProgramChecker::checkCover(const RegisterLayout &result, const RegisterLayout &operand,
                                const char *operandName, const char *resultName) {
  std::optional<CoverFailure> f = oracle_.cover(result, operand);
  if (!f)
    return true;
  std::vector<int64_t> ri = unravelIndex(f->resultIndex, result.shape());
  std::vector<int64_t> oi = unravelIndex(f->operandIndex, operand.shape());
  return fail(ErrorCode::LayoutMismatch,
              std::string(operandName) + " layout " + operand.toString() + " does not cover " +
                  resultName + " layout " + result.toString() + ": thread " +
                  std::to_string(f->thread) + " holds " + resultName + shapeString(ri) +
                  " but not " + operandName + shapeString(oi));
}

/// out=NAME: the target keeps its type; the computed value must fit it (same dtype and shape)
/// and the target's owners must hold what the instruction computed (the cover rule).
bool ProgramChecker::checkOut(const Instruction &inst, const VarType &computed) {
  const VarType &target = info_.vars[inst.results[0]];
  std::string name = "out=" + prog_.vars[inst.results[0]].name;
  if (target.dtype != computed.dtype)
    return fail(ErrorCode::DtypeMismatch, std::string(inst.spec().name) + " gives " +
                                              computed.dtype.name() + " but " + name + " is " +
                                              target.dtype.name());
  if (target.shape != computed.shape)
    return fail(ErrorCode::ShapeMismatch, std::string(inst.spec().name) + " gives shape " +
                                              shapeString(computed.shape) + " but " + name +
                                              " has shape " + shapeString(target.shape));
  return checkCover(*target.layout, *computed.layout, "result", "target");
}

void ProgramChecker::noteScratch(int64_t bytes) {
  scratchBytes_ = std::max(scratchBytes_, alignUp(bytes, 16));
}

void ProgramChecker::finishSharedPlan() {
  info_.scratchByteOffset = alignUp(sharedEnd_, 128);
  info_.scratchBytes = scratchBytes_;
  info_.sharedBytes = scratchBytes_ > 0 ? info_.scratchByteOffset + scratchBytes_ : sharedEnd_;
  if (info_.sharedBytes > options_.target.maxSharedBytes && !capacityReported_) {
    curLoc_ = prog_.loc;
    curInstruction_ = -1;
    fail(ErrorCode::SharedCapacity,
         "the block needs " + std::to_string(info_.sharedBytes) + " bytes of shared memory (" +
             std::to_string(sharedEnd_) + " allocated, " + std::to_string(scratchBytes_) +
             " scratch) but sm_" + std::to_string(options_.target.smVersion) + " allows " +
             std::to_string(options_.target.maxSharedBytes));
  }
}

ProgramInfo ProgramChecker::run() {
  const size_t nv = prog_.vars.size();
  info_.vars.assign(nv, VarType{});
  state_.assign(nv, VarState::Undeclared);
  poisoned_.assign(nv, 0);
  loopVar_.assign(nv, 0);
  instructionSeen_.assign(prog_.instructions.size(), 0);
  analyseExprs();
  checkHeader();
  openScope();
  for (VarId p : prog_.params)
    if (p < nv)
      scopes_.back().push_back(p);
  openScope();
  checkBlock(prog_.body);
  closeScope();
  closeScope();
  for (size_t idx = 0; idx < prog_.instructions.size(); ++idx)
    if (!instructionSeen_[idx])
      report(ErrorCode::Bytecode,
             "instruction " + std::to_string(idx) + " is not reached by any statement",
             prog_.instructions[idx].loc, int64_t(idx));
  finishSharedPlan();
  collectExtents();
  return std::move(info_);
}

} // namespace detail

Expected<VerifiedModule> checkModule(Module module, const CheckOptions &options) {
  std::vector<detail::SortedDiagnostic> diagnostics;
  detail::LayoutOracle oracle;
  std::vector<ProgramInfo> infos;
  std::unordered_set<std::string> names;
  for (size_t p = 0; p < module.programs.size(); ++p) {
    detail::ProgramChecker checker(module, p, options, oracle, diagnostics);
    infos.push_back(checker.run());
    if (!names.insert(module.programs[p].name).second) {
      Location loc;
      const Program &prog = module.programs[p];
      if (prog.loc.line != 0) {
        loc.file = options.fileName.empty() ? module.sourceName : options.fileName;
        loc.line = prog.loc.line;
        loc.column = prog.loc.column;
      } else {
        loc.program = prog.name;
      }
      diagnostics.push_back(
          {p, prog.loc.line, prog.loc.column, -1, diagnostics.size(),
           Diagnostic{ErrorCode::Redefined, "program '" + prog.name + "' is defined twice", loc}});
    }
  }
  if (diagnostics.empty())
    return VerifiedModule{std::move(module), std::move(infos)};
  std::stable_sort(diagnostics.begin(), diagnostics.end(),
                   [](const detail::SortedDiagnostic &a, const detail::SortedDiagnostic &b) {
                     if (a.program != b.program)
                       return a.program < b.program;
                     if (a.line != b.line)
                       return a.line < b.line;
                     if (a.column != b.column)
                       return a.column < b.column;
                     return a.sequence < b.sequence;
                   });
  Status status;
  for (detail::SortedDiagnostic &d : diagnostics)
    status.append(std::move(d.diagnostic));
  return status;
}

} // namespace tilus
