// The encoder of the programs and debug sections (docs/bytecode.md). It writes exactly the
// fields that the decoder reads, in the same order, and only the fields that are meaningful for
// each node (an ExprNode's operands per its arity, an argument's member per its ArgKind), so the
// encoding of a module is canonical: equal modules give equal bytes. Arguments are written from
// the instruction table's ArgSpecs, one small case per ArgKind, never per instruction.
#include "isa/bytecode_format.h"

namespace tilus::bytecode {

namespace {

void writeVariable(ByteWriter &w, const Variable &v) {
  w.str(v.name);
  w.u8(uint8_t(v.kind));
  w.u8(v.isParam ? 1 : 0);
  w.dtype(v.dtype);
}

void writeExpr(ByteWriter &w, const ExprNode &e) {
  w.u8(uint8_t(e.op));
  w.dtype(e.dtype);
  if (e.op == ExprOp::Const)
    return w.uleb(e.bits);
  if (e.op == ExprOp::Var)
    return w.uleb(e.var);
  for (int k = 0; k < exprOpArity(e.op); ++k)
    w.uleb(e.operands[k]);
}

void writeArgumentValue(ByteWriter &w, ArgKind kind, const Argument &a) {
  switch (kind) {
  case ArgKind::Value:
    assert((a.var != kNoId) != (a.expr != kNoId) && "a Value sets exactly one of var and expr");
    w.u8(a.var != kNoId ? 0 : 1);
    return w.uleb(a.var != kNoId ? a.var : a.expr);
  case ArgKind::Expr:
    return w.uleb(a.expr);
  case ArgKind::Int:
    return w.sleb(a.intValue);
  case ArgKind::Bool:
    return w.boolean(a.intValue != 0);
  case ArgKind::ReduceOp:
  case ArgKind::MemoryScope:
  case ArgKind::Eviction:
    return w.u8(uint8_t(a.intValue));
  case ArgKind::DType:
    return w.dtype(a.dtype);
  case ArgKind::RegLayout:
    assert(a.regLayout.has_value());
    return writeRegisterLayout(w, *a.regLayout);
  case ArgKind::SharedLayout:
    assert(a.sharedLayout.has_value());
    return writeSharedLayout(w, *a.sharedLayout);
  case ArgKind::IntList:
    w.uleb(a.ints.size());
    for (int64_t v : a.ints)
      w.sleb(v);
    return;
  case ArgKind::ExprList:
    w.uleb(a.exprs.size());
    for (ExprId id : a.exprs)
      w.uleb(id);
    return;
  case ArgKind::Offset:
    w.uleb(a.offsets.size());
    for (const OffsetEntry &o : a.offsets) {
      w.uleb(o.expr);
      w.boolean(o.slice);
    }
    return;
  case ArgKind::String:
    return w.str(a.text);
  }
}

void writeInstruction(ByteWriter &w, const Instruction &inst, uint32_t fields) {
  const InstructionSpec &spec = inst.spec();
  assert(inst.args.size() == spec.args.size() && "one Argument per ArgSpec");
  w.uleb(uint64_t(inst.opcode));
  w.uleb(inst.results.size());
  for (VarId v : inst.results)
    w.uleb(v);
  w.boolean(inst.out);
  for (size_t k = 0; k < spec.args.size(); ++k) {
    if (!argumentEncoded(inst.opcode, k, fields)) {
      assert(!inst.args[k].present && "programFieldFlags sets the flag of every argument used");
      continue;
    }
    w.boolean(inst.args[k].present);
    if (inst.args[k].present)
      writeArgumentValue(w, spec.args[k].kind, inst.args[k]);
  }
}

void writeBlock(ByteWriter &w, const std::vector<Stmt> &block);

void writeStmt(ByteWriter &w, const Stmt &s) {
  bool unrolled = s.kind == StmtKind::For && s.unroll != 0;
  bool copies = s.kind == StmtKind::Group && (s.copies != 1 || s.var != kNoId);
  w.u8(unrolled ? kStmtForUnroll : copies ? kStmtGroupCopies : uint8_t(s.kind));
  switch (s.kind) {
  case StmtKind::Instruction:
    return w.uleb(s.index);
  case StmtKind::Assign:
  case StmtKind::Specialize:
    w.uleb(s.var);
    return w.uleb(s.expr);
  case StmtKind::For:
    w.uleb(s.var);
    w.uleb(s.expr);
    w.uleb(s.stop);
    w.uleb(s.step);
    if (unrolled)
      w.uleb(s.unroll);
    return writeBlock(w, s.body);
  case StmtKind::If:
    w.uleb(s.expr);
    writeBlock(w, s.body);
    return writeBlock(w, s.orelse);
  case StmtKind::While:
    w.uleb(s.expr);
    return writeBlock(w, s.body);
  case StmtKind::Break:
  case StmtKind::Continue:
    return;
  case StmtKind::Assert:
    w.uleb(s.expr);
    return w.str(s.text);
  case StmtKind::Parallel:
    return writeBlock(w, s.body);
  case StmtKind::Group:
    w.uleb(s.threads);
    w.uleb(s.regs);
    if (copies) {
      w.uleb(s.copies);
      w.uleb(s.var == kNoId ? 0 : uint64_t(s.var) + 1);
    }
    return writeBlock(w, s.body);
  }
}

void writeBlock(ByteWriter &w, const std::vector<Stmt> &block) {
  w.uleb(block.size());
  for (const Stmt &s : block)
    writeStmt(w, s);
}

void writeProgram(ByteWriter &w, const Program &p, uint32_t fields) {
  for (size_t i = 0; i < p.params.size(); ++i)
    assert(p.params[i] == i && p.vars[i].isParam && "parameters are the first variables");
  w.str(p.name);
  w.uleb(p.threads);
  if (fields & kFlagBlocksPerSm)
    w.uleb(p.blocksPerSm);
  if (fields & kFlagCluster)
    w.uleb(p.cluster);
  w.uleb(p.vars.size());
  for (const Variable &v : p.vars)
    writeVariable(w, v);
  w.uleb(p.exprs.size());
  for (const ExprNode &e : p.exprs)
    writeExpr(w, e);
  w.uleb(p.grid.size());
  for (ExprId id : p.grid)
    w.uleb(id);
  w.uleb(p.instructions.size());
  for (const Instruction &inst : p.instructions)
    writeInstruction(w, inst, fields);
  writeBlock(w, p.body);
}

void writeLoc(ByteWriter &w, SourceLoc loc) {
  w.uleb(loc.line);
  w.uleb(loc.column);
}

/// Locations of the statements of `block` in pre-order (a statement, then its body, then its
/// orelse); returns how many were written.
uint64_t writeStmtLocs(ByteWriter &w, const std::vector<Stmt> &block) {
  uint64_t n = 0;
  for (const Stmt &s : block) {
    writeLoc(w, s.loc);
    n += 1 + writeStmtLocs(w, s.body) + writeStmtLocs(w, s.orelse);
  }
  return n;
}

} // namespace

uint32_t programFieldFlags(const Module &module) {
  uint32_t flags = 0;
  for (const Program &p : module.programs) {
    if (p.blocksPerSm != 0)
      flags |= kFlagBlocksPerSm;
    if (p.cluster != 1)
      flags |= kFlagCluster;
    for (const Instruction &inst : p.instructions)
      if (inst.opcode == Opcode::LoadGlobal && inst.arg(ArgName::evict).present)
        flags |= kFlagEviction;
  }
  return flags;
}

bool argumentEncoded(Opcode op, size_t k, uint32_t fields) {
  constexpr int kEvict = argPosition(Opcode::LoadGlobal, ArgName::evict);
  static_assert(kEvict >= 0, "LoadGlobal has an evict argument");
  return (fields & kFlagEviction) != 0 || op != Opcode::LoadGlobal || int(k) != kEvict;
}

void writeProgramsPayload(ByteWriter &w, const Module &module, uint32_t fields) {
  w.uleb(module.programs.size());
  for (const Program &p : module.programs)
    writeProgram(w, p, fields);
}

void writeDebugPayload(ByteWriter &w, const Module &module) {
  w.str(module.sourceName);
  w.str(module.sourceText);
  w.uleb(module.programs.size());
  for (const Program &p : module.programs) {
    writeLoc(w, p.loc);
    w.uleb(p.instructions.size());
    for (const Instruction &inst : p.instructions)
      writeLoc(w, inst.loc);
    ByteWriter locs;
    uint64_t n = writeStmtLocs(locs, p.body);
    w.uleb(n);
    w.bytes(locs.data());
  }
}

} // namespace tilus::bytecode
