// The layout type checker's driver: one pass over each program, in program order.
//
// Why one pass: every rule of ISA section 6 is local to an instruction once the types of its
// operands are known, and types flow forward only (a variable is declared by its first write
// and keeps that type; later writes are updates that must not change it). So the checker walks
// the structured body once, keeping
//   - the derived VarType of every variable (ProgramInfo::vars),
//   - which variables are live (declared and in scope), for use-before-definition,
//   - which are poisoned (results of an instruction that failed), to avoid cascades,
// and hands each instruction to one small function per opcode, in the file of its family
// (check_views.cpp, check_memory.cpp, check_elementwise.cpp, check_conversion.cpp,
// check_contraction.cpp, check_control.cpp). This file holds what is common: diagnostics and their
// locations, scopes and statements, the structural validation of arguments and results,
// declarations and updates, and the module-level entry point. Scalar expressions, the program
// header and the scalar statements are in checker_scalars.cpp.
#include "isa/instruction_visitor.h"
#include "loader/checker_impl.h"

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

namespace {

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
    if (instruction >= 0 && size_t(instruction) < prog_.instructions.size())
      where.opcode = prog_.instructions[size_t(instruction)].spec().name;
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
  if (stmt.kind != StmtKind::Assert)
    assertsAllowed_ = false; // before any nested block is entered
  if (stmt.kind != StmtKind::Assert && stmt.kind != StmtKind::Specialize)
    specializeAllowed_ = false;
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
  case StmtKind::Assert:
    checkAssert(stmt);
    return;
  case StmtKind::Specialize:
    checkSpecialize(stmt);
    return;
  case StmtKind::Parallel:
    checkParallel(stmt);
    return;
  case StmtKind::Group:
    fail(ErrorCode::Bytecode, "group statement outside a parallel statement");
    return;
  }
  fail(ErrorCode::Bytecode, "unknown statement kind " + std::to_string(int(stmt.kind)));
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
    fail(ErrorCode::UpdateType, std::string(loopVar_[var] == 2   ? "group index "
                                            : loopVar_[var] == 3 ? "specialized variable "
                                                                 : "loop variable ") +
                                    varName(var) + " is read-only");
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
    declScope_[var] = scopes_.size() - 1;
    return;
  case VarState::Live:
    break;
  }
  if (declaredOutsideGroup(var)) {
    fail(ErrorCode::ThreadGroup, "assignment of " + varName(var) +
                                     ", declared outside the thread group (each group holds its "
                                     "own copy of the block's scalars and tensors)");
    return;
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
    declScope_[r] = scopes_.size() - 1;
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
  if (groupScope_ != std::string::npos && inst.opcode == Opcode::Exit) {
    fail(ErrorCode::ThreadGroup, "Exit() (or return) inside a thread group; a group ends at the "
                                 "end of its body");
    return;
  }
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
  for (size_t k = 0; k < spec.args.size(); ++k)
    if (!checkArgument(inst, k))
      return false;
  return checkResultSlots(inst);
}

bool ProgramChecker::checkArgument(const Instruction &inst, size_t k) {
  const InstructionSpec &spec = inst.spec();
  const ArgSpec &as = spec.args[k];
  const Argument &a = inst.args[k];
  if (!a.present) {
    if (as.required)
      return fail(ErrorCode::BadArgument,
                  std::string(spec.name) + " is missing required argument '" + as.name + "'");
    return true;
  }
  auto exprOk = [&](ExprId e) { return e < prog_.exprs.size(); };
  bool ok = true;
  switch (as.kind) {
  case ArgKind::Value:
    ok = (a.var != kNoId) != (a.expr != kNoId) &&
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
  case ArgKind::MemoryScope:
    ok = a.intValue >= 0 && a.intValue <= int64_t(MemoryScope::Gpu);
    break;
  case ArgKind::Eviction:
    ok = a.intValue >= 0 && a.intValue <= int64_t(Eviction::Last);
    break;
  }
  if (!ok)
    return fail(ErrorCode::Bytecode,
                std::string(spec.name) + " argument '" + as.name + "' is malformed");
  return true;
}

/// The result count within the table's bounds, out= only where allowed, and distinct result
/// variables of the table's result kind (a register tensor for out=).
bool ProgramChecker::checkResultSlots(const Instruction &inst) {
  const InstructionSpec &spec = inst.spec();
  const size_t n = inst.results.size();
  if (n < spec.minResults || n > spec.maxResults)
    return fail(ErrorCode::BadArgument,
                std::string(spec.name) + " gives " +
                    (spec.minResults == spec.maxResults ? std::to_string(spec.minResults)
                                                        : std::to_string(spec.minResults) + " to " +
                                                              std::to_string(spec.maxResults)) +
                    " results, not " + std::to_string(n));
  if (inst.out && (!spec.allowsOut || n != 1))
    return fail(ErrorCode::BadArgument, std::string(spec.name) + " does not accept out=");
  const VarKind want = inst.out ? VarKind::Register : spec.resultKind;
  for (size_t k = 0; k < n; ++k) {
    VarId r = inst.results[k];
    bool repeated =
        std::find(inst.results.begin(), inst.results.begin() + k, r) != inst.results.begin() + k;
    if (r >= prog_.vars.size() || prog_.vars[r].kind != want || repeated)
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
  return visitInstruction(inst.opcode, *this, inst, r);
}

bool ProgramChecker::visitInvalid(const Instruction &inst, Results &) {
  return fail(ErrorCode::Bytecode, "unknown opcode " + std::to_string(int(inst.opcode)));
}

// --- helpers shared by the per-instruction checks -----------------------------------------

bool ProgramChecker::checkInteger(ExprId id, const char *op, const char *what, int64_t entry) {
  if (isIntegerExpr(id))
    return true;
  return fail(ErrorCode::DtypeMismatch,
              std::string(op) + " " + what +
                  (entry >= 0 ? " entry " + std::to_string(entry) : std::string()) + " has type " +
                  exprTypeName(id) + "; expected an integer");
}

bool ProgramChecker::checkGroupCount(const Instruction &inst, std::optional<int64_t> max) {
  int64_t n = inst.arg(ArgName::n).intValue;
  std::string what = std::string(inst.spec().name) + " n=" + std::to_string(n);
  if (max && (n < 0 || n > *max))
    return fail(ErrorCode::BadArgument, what + " outside [0, " + std::to_string(*max) + "]");
  if (n < 0)
    return fail(ErrorCode::BadArgument, what + " must not be negative");
  return true;
}

const Argument *ProgramChecker::optionalArg(const Instruction &inst, ArgName name) const {
  int k = argPosition(inst.opcode, name);
  if (k < 0 || !inst.args[k].present)
    return nullptr;
  return &inst.args[k];
}

/// A layout argument as a tensor layout. A product of replicates only (`replicate(32)`) has
/// no rank of its own; as the layout of a tensor it is the rank-0 layout with the same threads
/// (what Reduce derives for a rank-0 result), so that the two compare equal.
const RegisterLayout *ProgramChecker::layoutArg(const Instruction &inst, ArgName name) {
  const Argument *a = optionalArg(inst, name);
  if (!a || !a->regLayout)
    return nullptr;
  const RegisterLayout &l = *a->regLayout;
  if (l.rank() >= 0)
    return &l;
  std::unique_ptr<RegisterLayout> &ranked = rankedLayouts_[&l];
  if (!ranked) {
    Expected<RegisterLayout> scalar = RegisterLayout::local({});
    Expected<RegisterLayout> p = scalar ? scalar->product(l) : scalar;
    ranked = std::make_unique<RegisterLayout>(p ? *p : l);
  }
  return ranked.get();
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

const VarType *ProgramChecker::tensorArg(const Instruction &inst, ArgName name, VarKind kind) {
  const Argument &a = inst.arg(name);
  VarKind got = a.var != kNoId ? info_.vars[a.var].kind : VarKind::Scalar;
  if (got != kind) {
    fail(ErrorCode::Scope, std::string(inst.spec().name) + " argument '" + argNameText(name) +
                               "' is " + kindName(got) +
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
  int64_t &need = groupScope_ != std::string::npos ? groupScratch_ : scratchBytes_;
  need = std::max(need, alignUp(bytes, 16));
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
  declScope_.assign(nv, 0);
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
