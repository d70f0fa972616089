// The decoder of the programs and debug sections (docs/bytecode.md). It rebuilds the IR and
// validates its structure so that every later stage can index without checking: ids in range,
// expression operands below their user (a post-order arena of trees, depth-bounded), Var nodes
// naming Scalar variables, one Argument per ArgSpec with presence and members matching the
// spec's kind, result counts within the table's bounds, every instruction referenced by exactly
// one statement, statements nested no deeper than the limit. Typing is the checker's business.
//
// Reads go through a sticky-error ByteReader: the first failure is kept with its offset, later
// reads return zero, and loops stop as soon as the reader has failed.
#include "isa/bytecode_format.h"

#include <algorithm>
#include <string>

namespace tilus::bytecode {

namespace {

/// A name for diagnostics: printable ASCII kept, other bytes as \xNN, at most 48 characters.
std::string quoted(std::string_view s) {
  static const char *kHex = "0123456789abcdef";
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 48; ++i) {
    uint8_t c = uint8_t(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '"' && c != '\\') {
      out += char(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out + (s.size() > 48 ? "...\"" : "\"");
}

class ProgramReader {
public:
  ProgramReader(ByteReader &r, const BytecodeLimits &limits, DecodeBudget &budget, Program &p,
                uint32_t index, uint32_t fields)
      : r_(r), limits_(limits), budget_(budget), p_(p), where_("program " + std::to_string(index)),
        fields_(fields) {}

  void read();

private:
  void readName();
  void readVars();
  void readVar(uint32_t index);
  void readExprs();
  void readExpr(uint32_t index, std::vector<uint8_t> &used, std::vector<uint32_t> &depth);
  void readGrid();
  void readInstructions();
  void readInstruction(Instruction &inst);
  void readArgument(ArgKind kind, Argument &a);
  /// `groups`: the block of a Parallel, whose statements are its Groups.
  void readBlock(std::vector<Stmt> &block, uint32_t depth, bool groups = false);
  void readStmt(Stmt &s, uint32_t depth);
  void readInstructionStmt(Stmt &s);
  /// An index below `count` (`items` names what it indexes in the error), 0 on an error.
  uint32_t index(const char *what, size_t count, const char *items);
  VarId varId(const char *what);
  ExprId exprId(const char *what);
  int64_t enumByte(size_t at, const char *what, int last);
  void context(const std::string &what) { r_.setContext(where_ + " " + what); }
  bool charge(uint64_t bytes) { return chargeMemory(r_, limits_, budget_, bytes); }

  ByteReader &r_;
  const BytecodeLimits &limits_;
  DecodeBudget &budget_;
  Program &p_;
  std::string where_;
  std::vector<uint8_t> referenced_; // per instruction: referenced by a statement
  uint64_t stmts_ = 0;
  bool inAssertPrefix_ = true;     // no statement other than Assert read yet
  bool inSpecializePrefix_ = true; // no statement other than Assert and Specialize read yet
  bool groupAllowed_ = false;      // the next statement is a direct child of a Parallel
  uint32_t fields_; // the optional fields the file's programs carry (kFlagBlocksPerSm, ..)
};

void ProgramReader::read() {
  readName();
  p_.threads = r_.u32("threads");
  if (fields_ & kFlagBlocksPerSm)
    p_.blocksPerSm = r_.u32("blocks_per_sm");
  if (fields_ & kFlagCluster)
    p_.cluster = r_.u32("cluster");
  readVars();
  readExprs();
  readGrid();
  readInstructions();
  context("body");
  readBlock(p_.body, 1);
  for (size_t i = 0; i < referenced_.size() && r_.ok(); ++i)
    if (!referenced_[i])
      r_.fail("instruction " + std::to_string(i) + " is not referenced by any statement");
}

void ProgramReader::readName() {
  r_.setContext(where_);
  size_t at = r_.offset();
  p_.name = r_.str("program name", limits_.maxNameBytes);
  if (r_.ok() && !isIdentifier(p_.name))
    r_.failAt(at, "program name " + quoted(p_.name) + " is not an identifier");
  where_ += " (" + p_.name + ")";
}

void ProgramReader::readVars() {
  context("variables");
  // name (>= 2 bytes), kind, flags, dtype (4 bytes)
  uint32_t n = r_.count("variable", limits_.maxVars, 8);
  if (!charge(uint64_t(n) * sizeof(Variable)))
    return;
  p_.vars.reserve(n);
  for (uint32_t i = 0; i < n && r_.ok(); ++i)
    readVar(i);
}

void ProgramReader::readVar(uint32_t index) {
  context("variable " + std::to_string(index));
  size_t at = r_.offset();
  Variable v;
  v.name = r_.str("variable name", limits_.maxNameBytes);
  charge(v.name.size());
  if (r_.ok() && !isIdentifier(v.name))
    r_.failAt(at, "variable name " + quoted(v.name) + " is not an identifier");
  at = r_.offset();
  uint8_t kind = r_.u8("variable kind");
  if (r_.ok() && (kind < uint8_t(VarKind::Scalar) || kind > uint8_t(VarKind::Global)))
    r_.failAt(at, "variable kind " + std::to_string(kind) + " is not one of 1..5");
  v.kind = VarKind(kind);
  at = r_.offset();
  uint8_t flags = r_.u8("variable flags");
  if (r_.ok() && flags > 1)
    r_.failAt(at, "variable flags " + std::to_string(flags) + " has unknown bits");
  v.isParam = flags == 1;
  v.dtype = r_.dtype("variable dtype");
  if (!r_.ok())
    return;
  if (v.isParam) {
    if (p_.params.size() != index)
      return r_.failAt(at, "parameter follows a non-parameter variable");
    if (v.kind != VarKind::Scalar && v.kind != VarKind::Pointer)
      return r_.failAt(at, "parameter kind " + std::to_string(kind) + " is not Scalar or Pointer");
    p_.params.push_back(index);
  }
  p_.vars.push_back(std::move(v));
}

void ProgramReader::readExprs() {
  context("expressions");
  // op, dtype (4 bytes), at least one byte of payload
  uint32_t n = r_.count("expression", limits_.maxExprs, 6);
  if (!charge(uint64_t(n) * (sizeof(ExprNode) + sizeof(uint8_t) + sizeof(uint32_t))))
    return;
  p_.exprs.reserve(n);
  std::vector<uint8_t> used(n, 0);   // whether a node is already some node's operand
  std::vector<uint32_t> depth(n, 0); // longest operand chain below and including the node
  for (uint32_t i = 0; i < n && r_.ok(); ++i)
    readExpr(i, used, depth);
}

void ProgramReader::readExpr(uint32_t index, std::vector<uint8_t> &used,
                             std::vector<uint32_t> &depth) {
  context("expression " + std::to_string(index));
  size_t at = r_.offset();
  ExprNode e;
  uint8_t op = r_.u8("expression op");
  if (r_.ok() && op > uint8_t(ExprOp::Cast))
    r_.failAt(at, "expression op " + std::to_string(op) + " is not one of 0.." +
                      std::to_string(int(ExprOp::Cast)));
  e.op = ExprOp(op);
  e.dtype = r_.dtype("expression dtype");
  if (!r_.ok())
    return;
  at = r_.offset();
  depth[index] = 1;
  if (e.op == ExprOp::Const) {
    e.bits = r_.uleb("constant bits");
    if (r_.ok() && e.dtype.bits < 64 && (e.bits >> e.dtype.bits) != 0)
      r_.failAt(at, "constant bits " + std::to_string(e.bits) + " do not fit " + e.dtype.name());
  } else if (e.op == ExprOp::Var) {
    e.var = varId("expression variable");
    if (r_.ok() && p_.vars[e.var].kind != VarKind::Scalar)
      r_.failAt(at, "expression refers to variable " + std::to_string(e.var) +
                        ", which is not a Scalar");
  }
  for (int k = 0; k < exprOpArity(e.op) && r_.ok(); ++k) {
    at = r_.offset();
    uint32_t id = r_.u32("operand");
    if (r_.ok() && id >= index)
      r_.failAt(at, "operand " + std::to_string(k) + " refers to expression " + std::to_string(id) +
                        ", must be below " + std::to_string(index));
    else if (r_.ok() && used[id])
      r_.failAt(at, "operand " + std::to_string(k) + " reuses expression " + std::to_string(id) +
                        " (expressions are trees)");
    if (!r_.ok())
      return;
    used[id] = 1;
    e.operands[k] = id;
    depth[index] = std::max(depth[index], depth[id] + 1);
  }
  if (depth[index] > limits_.maxExprDepth)
    return r_.failAt(at, "expression depth " + std::to_string(depth[index]) + " exceeds limit " +
                             std::to_string(limits_.maxExprDepth));
  p_.exprs.push_back(e);
}

void ProgramReader::readGrid() {
  context("grid");
  size_t at = r_.offset();
  uint32_t n = r_.count("grid dimension", 3);
  if (r_.ok() && n == 0)
    r_.failAt(at, "grid has 0 dimensions, must have 1 to 3");
  for (uint32_t k = 0; k < n && r_.ok(); ++k)
    p_.grid.push_back(exprId("grid expression"));
}

void ProgramReader::readInstructions() {
  context("instructions");
  // opcode, result count, out flag
  uint32_t n = r_.count("instruction", limits_.maxInstructions, 3);
  if (!charge(uint64_t(n) * (sizeof(Instruction) + 1)))
    return;
  p_.instructions.resize(n);
  referenced_.assign(n, 0);
  for (uint32_t i = 0; i < n && r_.ok(); ++i) {
    context("instruction " + std::to_string(i));
    readInstruction(p_.instructions[i]);
  }
}

void ProgramReader::readInstruction(Instruction &inst) {
  size_t at = r_.offset();
  inst.opcode = Opcode(r_.bounded("opcode", numOpcodes() - 1));
  if (!r_.ok())
    return;
  const InstructionSpec &spec = inst.spec();
  context("instruction " + std::to_string(&inst - p_.instructions.data()) + " (" + spec.name + ")");
  at = r_.offset();
  uint32_t nResults = r_.count("result", spec.maxResults);
  charge(nResults * sizeof(VarId) + spec.args.size() * sizeof(Argument));
  if (r_.ok() && nResults < spec.minResults)
    r_.failAt(at, "result count " + std::to_string(nResults) + " is below " +
                      std::to_string(int(spec.minResults)));
  for (uint32_t k = 0; k < nResults && r_.ok(); ++k)
    inst.results.push_back(varId("result"));
  at = r_.offset();
  inst.out = r_.boolean("out flag");
  if (r_.ok() && inst.out && !spec.allowsOut)
    r_.failAt(at, "out= is not allowed for this instruction");
  inst.args.resize(spec.args.size());
  for (size_t k = 0; k < spec.args.size() && r_.ok(); ++k) {
    at = r_.offset();
    Argument &a = inst.args[k];
    if (!argumentEncoded(inst.opcode, k, fields_))
      continue; // absent: the file's programs do not carry it (header flag kFlagEviction)
    a.present = r_.boolean("argument presence");
    if (r_.ok() && !a.present && spec.args[k].required)
      r_.failAt(at, std::string("missing required argument '") + spec.args[k].name + "'");
    if (a.present && r_.ok())
      readArgument(spec.args[k].kind, a);
  }
}

/// A one-byte enumerator of at most `last`; `what` names it in the error.
int64_t ProgramReader::enumByte(size_t at, const char *what, int last) {
  int64_t value = r_.u8(what);
  if (r_.ok() && value > last)
    r_.failAt(at,
              std::string(what) + " " + std::to_string(value) + " exceeds " + std::to_string(last));
  return value;
}

void ProgramReader::readArgument(ArgKind kind, Argument &a) {
  size_t at = r_.offset();
  switch (kind) {
  case ArgKind::Value: {
    uint8_t tag = r_.u8("value tag");
    if (r_.ok() && tag > 1)
      return r_.failAt(at, "value tag " + std::to_string(tag) +
                               " is not 0 (variable) or 1 "
                               "(expression)");
    if (tag == 0)
      a.var = varId("value variable");
    else
      a.expr = exprId("value expression");
    return;
  }
  case ArgKind::Expr:
    a.expr = exprId("expression argument");
    return;
  case ArgKind::Int:
    a.intValue = r_.sleb("integer argument");
    return;
  case ArgKind::Bool:
    a.intValue = r_.boolean("bool argument") ? 1 : 0;
    return;
  case ArgKind::ReduceOp:
    a.intValue = enumByte(at, "reduce op", int(ReduceOp::All));
    return;
  case ArgKind::MemoryScope:
    a.intValue = enumByte(at, "memory scope", int(MemoryScope::Gpu));
    return;
  case ArgKind::Eviction:
    a.intValue = enumByte(at, "eviction priority", int(Eviction::Last));
    return;
  case ArgKind::DType:
    a.dtype = r_.dtype("dtype argument");
    return;
  case ArgKind::RegLayout:
    a.regLayout = readRegisterLayout(r_, limits_, budget_);
    return;
  case ArgKind::SharedLayout:
    a.sharedLayout = readSharedLayout(r_, limits_, budget_);
    return;
  case ArgKind::IntList: {
    uint32_t n = r_.count("integer list entry", limits_.maxListLength);
    charge(uint64_t(n) * sizeof(int64_t));
    for (uint32_t k = 0; k < n && r_.ok(); ++k)
      a.ints.push_back(r_.sleb("integer list entry"));
    return;
  }
  case ArgKind::ExprList: {
    uint32_t n = r_.count("expression list entry", limits_.maxListLength);
    charge(uint64_t(n) * sizeof(ExprId));
    for (uint32_t k = 0; k < n && r_.ok(); ++k)
      a.exprs.push_back(exprId("expression list entry"));
    return;
  }
  case ArgKind::Offset: {
    uint32_t n = r_.count("offset entry", limits_.maxListLength, 2);
    charge(uint64_t(n) * sizeof(OffsetEntry));
    for (uint32_t k = 0; k < n && r_.ok(); ++k) {
      OffsetEntry o;
      o.expr = exprId("offset expression");
      o.slice = r_.boolean("offset slice flag");
      a.offsets.push_back(o);
    }
    return;
  }
  case ArgKind::String:
    a.text = r_.str("string argument", limits_.maxStringBytes);
    charge(a.text.size());
    if (r_.ok() && !isValidUtf8(a.text))
      r_.failAt(at, "string argument is not valid UTF-8");
    return;
  }
}

void ProgramReader::readBlock(std::vector<Stmt> &block, uint32_t depth, bool groups) {
  size_t at = r_.offset();
  uint32_t n = r_.count("statement", limits_.maxStmts);
  charge(uint64_t(n) * sizeof(Stmt));
  stmts_ += n;
  if (r_.ok() && stmts_ > limits_.maxStmts)
    r_.failAt(at, "statements of the program exceed limit " + std::to_string(limits_.maxStmts));
  if (r_.ok() && n > 0 && depth > limits_.maxStmtDepth)
    r_.failAt(at, "statements nested " + std::to_string(depth) + " deep exceed limit " +
                      std::to_string(limits_.maxStmtDepth));
  if (!r_.ok())
    return;
  block.resize(n);
  for (uint32_t k = 0; k < n && r_.ok(); ++k) {
    groupAllowed_ = groups;
    readStmt(block[k], depth);
  }
}

void ProgramReader::readStmt(Stmt &s, uint32_t depth) {
  size_t at = r_.offset();
  uint8_t kind = r_.u8("statement kind");
  if (r_.ok() && kind > kStmtSpecialize)
    return r_.failAt(at, "statement kind " + std::to_string(kind) + " is not one of 0..12");
  bool unrolled = kind == kStmtForUnroll;
  if (unrolled)
    kind = uint8_t(StmtKind::For);
  bool copies = kind == kStmtGroupCopies;
  if (copies)
    kind = uint8_t(StmtKind::Group);
  // A Group only directly inside a Parallel, and a Parallel holds only Groups.
  bool groupAllowed = groupAllowed_;
  groupAllowed_ = false;
  if (r_.ok() && (kind == uint8_t(StmtKind::Group)) != groupAllowed)
    return r_.failAt(at, groupAllowed ? "a parallel statement holds a statement other than group"
                                      : "group statement outside a parallel statement");
  s.kind = StmtKind(kind);
  if (!r_.ok())
    return;
  // Asserts are preconditions: only at the top level, before every other statement.
  if (s.kind == StmtKind::Assert && !inAssertPrefix_)
    return r_.failAt(at, depth > 1 ? "assert statement nested in another statement (asserts "
                                     "are only allowed at the top of the program body)"
                                   : "assert statement after a statement other than assert "
                                     "(asserts come first in the program body)");
  // Specialize statements: at the top level, after the asserts, before every other statement.
  if (s.kind == StmtKind::Specialize && !inSpecializePrefix_)
    return r_.failAt(at, depth > 1 ? "specialize statement nested in another statement "
                                     "(specialize statements are only allowed at the top of "
                                     "the program body)"
                                   : "specialize statement after a statement other than assert "
                                     "or specialize (they come first in the program body)");
  if (s.kind != StmtKind::Assert)
    inAssertPrefix_ = false;
  if (s.kind != StmtKind::Assert && s.kind != StmtKind::Specialize)
    inSpecializePrefix_ = false;
  switch (s.kind) {
  case StmtKind::Instruction:
    return readInstructionStmt(s);
  case StmtKind::Assign:
    s.var = varId("assignment target");
    s.expr = exprId("assigned expression");
    return;
  case StmtKind::Specialize:
    s.var = varId("specialized variable");
    s.expr = exprId("specialized expression");
    return;
  case StmtKind::For:
    s.var = varId("loop variable");
    s.expr = exprId("loop start");
    s.stop = exprId("loop stop");
    s.step = exprId("loop step");
    if (unrolled) {
      size_t unrollAt = r_.offset();
      s.unroll = r_.u32("loop unroll hint");
      if (r_.ok() && (s.unroll < 1 || s.unroll > kMaxUnroll))
        return r_.failAt(unrollAt, "loop unroll hint " + std::to_string(s.unroll) +
                                       " is not in 1.." + std::to_string(kMaxUnroll));
    }
    return readBlock(s.body, depth + 1);
  case StmtKind::If:
    s.expr = exprId("if condition");
    readBlock(s.body, depth + 1);
    return readBlock(s.orelse, depth + 1);
  case StmtKind::While:
    s.expr = exprId("while condition");
    return readBlock(s.body, depth + 1);
  case StmtKind::Break:
  case StmtKind::Continue:
    return;
  case StmtKind::Parallel:
    readBlock(s.body, depth + 1, /*groups=*/true);
    if (r_.ok() && s.body.empty())
      r_.failAt(at, "parallel statement without groups");
    return;
  case StmtKind::Group:
    s.threads = r_.u32("group thread count");
    s.regs = r_.u32("group registers");
    if (copies) {
      size_t copiesAt = r_.offset();
      s.copies = r_.u32("group copies");
      if (r_.ok() && (s.copies < 1 || s.copies > kMaxGroupCopies))
        return r_.failAt(copiesAt, "group copies " + std::to_string(s.copies) + " is not in 1.." +
                                       std::to_string(kMaxGroupCopies));
      size_t varAt = r_.offset();
      uint32_t var = r_.u32("group index variable");
      if (r_.ok() && var != 0) {
        if (var - 1 >= p_.vars.size())
          return r_.failAt(varAt, "group index variable " + std::to_string(var - 1) +
                                      " is not a variable of the program");
        s.var = var - 1;
      }
    }
    return readBlock(s.body, depth + 1);
  case StmtKind::Assert: {
    s.expr = exprId("assert condition");
    size_t textAt = r_.offset();
    s.text = r_.str("assert message", limits_.maxStringBytes);
    charge(s.text.size());
    if (r_.ok() && !isValidUtf8(s.text))
      r_.failAt(textAt, "assert message is not valid UTF-8");
    return;
  }
  }
}

void ProgramReader::readInstructionStmt(Stmt &s) {
  size_t at = r_.offset();
  s.index = r_.u32("instruction index");
  if (!r_.ok())
    return;
  if (s.index >= p_.instructions.size())
    return r_.failAt(at, "instruction index " + std::to_string(s.index) + " is out of range (" +
                             std::to_string(p_.instructions.size()) + " instructions)");
  if (referenced_[s.index])
    return r_.failAt(at, "instruction " + std::to_string(s.index) +
                             " is referenced by more than one statement");
  referenced_[s.index] = 1;
}

uint32_t ProgramReader::index(const char *what, size_t count, const char *items) {
  size_t at = r_.offset();
  uint32_t id = r_.u32(what);
  if (r_.ok() && id >= count)
    r_.failAt(at, std::string(what) + " " + std::to_string(id) + " is out of range (" +
                      std::to_string(count) + " " + items + ")");
  return r_.ok() ? id : 0;
}

VarId ProgramReader::varId(const char *what) { return index(what, p_.vars.size(), "variables"); }

ExprId ProgramReader::exprId(const char *what) {
  return index(what, p_.exprs.size(), "expressions");
}

SourceLoc readLoc(ByteReader &r) {
  SourceLoc loc;
  loc.line = r.u32("line");
  loc.column = r.u32("column");
  return loc;
}

/// Statement locations in pre-order; the structure was validated by the programs section, so
/// the recursion is bounded by maxStmtDepth.
void readStmtLocs(ByteReader &r, std::vector<Stmt> &block) {
  for (Stmt &s : block) {
    if (!r.ok())
      return;
    s.loc = readLoc(r);
    readStmtLocs(r, s.body);
    readStmtLocs(r, s.orelse);
  }
}

uint64_t countStmts(const std::vector<Stmt> &block) {
  uint64_t n = 0;
  for (const Stmt &s : block)
    n += 1 + countStmts(s.body) + countStmts(s.orelse);
  return n;
}

void readProgramLocs(ByteReader &r, Program &p) {
  p.loc = readLoc(r);
  size_t at = r.offset();
  uint64_t n = r.uleb("instruction location count");
  if (r.ok() && n != p.instructions.size())
    return r.failAt(at, "instruction location count " + std::to_string(n) + " differs from " +
                            std::to_string(p.instructions.size()) + " instructions");
  for (Instruction &inst : p.instructions) {
    if (!r.ok())
      return;
    inst.loc = readLoc(r);
  }
  at = r.offset();
  n = r.uleb("statement location count");
  uint64_t stmts = countStmts(p.body);
  if (r.ok() && n != stmts)
    return r.failAt(at, "statement location count " + std::to_string(n) + " differs from " +
                            std::to_string(stmts) + " statements");
  readStmtLocs(r, p.body);
}

} // namespace

void readProgramsPayload(ByteReader &r, const BytecodeLimits &limits, Module &module,
                         uint32_t fields) {
  // name (>= 2 bytes), threads, variable count, expression count, grid (>= 2 bytes),
  // instruction count, statement count
  uint32_t n = r.count("program", limits.maxPrograms, 8);
  DecodeBudget budget;
  if (!chargeMemory(r, limits, budget, uint64_t(n) * sizeof(Program)))
    return;
  module.programs.resize(n);
  for (uint32_t i = 0; i < n && r.ok(); ++i)
    ProgramReader(r, limits, budget, module.programs[i], i, fields).read();
  // The encoder sets a field's header flag exactly when the module needs it (programFieldFlags),
  // so a file with a flag that its programs do not need would not re-encode to its own bytes.
  if (!r.ok())
    return;
  r.setContext("programs section");
  const uint32_t needed = programFieldFlags(module);
  if ((fields & kFlagBlocksPerSm) && !(needed & kFlagBlocksPerSm))
    r.fail("header flag bit 1 (blocks_per_sm fields) is set but every program's blocks_per_sm "
           "is 0 (the flag is set only when some program's is not)");
  else if ((fields & kFlagCluster) && !(needed & kFlagCluster))
    r.fail("header flag bit 2 (cluster fields) is set but every program's cluster is 1 (the "
           "flag is set only when some program's is not)");
  else if ((fields & kFlagEviction) && !(needed & kFlagEviction))
    r.fail("header flag bit 3 (LoadGlobal evict arguments) is set but no LoadGlobal has one "
           "(the flag is set only when some LoadGlobal has)");
}

bool chargeMemory(ByteReader &r, const BytecodeLimits &limits, DecodeBudget &budget,
                  uint64_t bytes) {
  if (!r.ok())
    return false;
  budget.memoryBytes += bytes; // each charge is far below 2^40: no overflow
  if (budget.memoryBytes <= limits.maxDecodedBytes)
    return true;
  r.fail("decoded module needs more than " + std::to_string(limits.maxDecodedBytes) +
         " bytes of memory (maxDecodedBytes)");
  return false;
}

void readDebugPayload(ByteReader &r, const BytecodeLimits &limits, Module &module) {
  r.setContext("debug section");
  size_t nameAt = r.offset();
  module.sourceName = r.str("source name", limits.maxStringBytes);
  // No file system has a NUL byte in a file name, and every diagnostic with a location begins
  // with this name: one there would end the message for C callers (tilusvm_last_error).
  if (r.ok() && module.sourceName.find('\0') != std::string::npos)
    return r.failAt(nameAt, "source name " + quoted(module.sourceName) + " contains a NUL byte");
  module.sourceText = r.str("source text", limits.maxSourceBytes);
  size_t at = r.offset();
  uint64_t n = r.uleb("program count");
  if (r.ok() && n != module.programs.size())
    return r.failAt(at, "program count " + std::to_string(n) + " differs from " +
                            std::to_string(module.programs.size()) + " programs");
  for (size_t i = 0; i < module.programs.size() && r.ok(); ++i) {
    r.setContext("debug section program " + std::to_string(i));
    readProgramLocs(r, module.programs[i]);
  }
}

} // namespace tilus::bytecode
