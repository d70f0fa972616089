// The program IR: one in-memory representation of a module that every stage shares.
// The assembler and the bytecode decoder produce it; the checker (loader/) verifies it and
// derives types; the interpreter and the JIT consume only checked programs.
//
// A program has variables (parameters, scalars, tensors), an arena of scalar expressions, an
// arena of instructions and a structured body of statements (for / if / while / break /
// continue, scalar assignments and instructions). Control flow stays structured, as in the
// source: the JIT lowers it to LLVM branches, the interpreter walks it.
#pragma once

#include "isa/expr_op.h"
#include "isa/instruction.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tilus {

struct Variable {
  std::string name;
  VarKind kind = VarKind::Scalar;
  /// Element type for Scalar and Pointer variables (tensor types are derived by the checker).
  DataType dtype;
  /// Whether this variable is a program parameter.
  bool isParam = false;
};

struct ExprNode {
  ExprOp op = ExprOp::Const;
  DataType dtype;                               // type of the result
  uint32_t operands[3] = {kNoId, kNoId, kNoId}; // Select: cond, then, else
  uint64_t bits = 0;                            // Const: the value's bit pattern in dtype
  VarId var = kNoId;                            // Var: a Scalar or Pointer variable
};

enum class StmtKind : uint8_t {
  Instruction = 0, // instructions[index]
  Assign = 1,      // vars[var] = exprs[expr]   (scalar)
  For = 2,         // for var in range(expr, stop, step): body
  If = 3,          // if expr: body else: orelse
  While = 4,       // while expr: body
  Break = 5,
  Continue = 6,
  Assert = 7,      // precondition: exprs[expr] (bool, of constants and scalar parameters) with
                   // the message `text`; only as a prefix of the program body (docs/isa.md)
  Parallel = 8,    // parallel: body holds its Group statements, run concurrently
  Group = 9,       // group(threads, regs=regs, copies=copies) as var: body (only directly inside a
                   // Parallel); `copies` groups of `threads` threads run the body, var (kNoId:
                   // none) the copy's index
  Specialize = 12, // specialize vars[var] = exprs[expr] (bool, of constants and scalar
                   // parameters): an Assign whose value the runtime may fold into the kernel
                   // at launch; only in the prefix of the program body, after its asserts
                   // (docs/isa.md, "Launch-time specialisation")
};

struct Stmt {
  StmtKind kind = StmtKind::Instruction;
  SourceLoc loc;
  uint32_t index = kNoId; // Instruction: index into Program::instructions
  VarId var = kNoId;      // Assign target, For loop variable, Group copy index (kNoId: none)
  ExprId expr = kNoId;    // Assign value, If/While condition, For start
  ExprId stop = kNoId;    // For
  ExprId step = kNoId;    // For
  std::string text;       // Assert: the message (may be empty)
  uint32_t threads = 0;   // Group: its thread count
  uint32_t regs = 0;      // Group: registers per thread asked for (regs=); 0 without
  uint32_t copies = 1;    // Group: how many groups of `threads` run the body (copies=)
  uint32_t unroll = 0; // For: the unroll hint (unroll=U, 1..kMaxUnroll; 1: not unrolled); 0 without
  std::vector<Stmt> body;
  std::vector<Stmt> orelse; // If
};

/// Limits of blocks_per_sm= (the occupancy request of a program header): at most 32 resident
/// blocks and 2048 resident threads per multiprocessor (sm_80 and sm_90).
inline constexpr int64_t kMaxBlocksPerSm = 32;
inline constexpr int64_t kMaxThreadsPerSm = 2048;

/// The largest unroll hint of a for loop (`range(..., unroll=U)`; docs/isa.md, "Unroll hints").
inline constexpr uint32_t kMaxUnroll = 8;

/// The most groups of one parallel statement, copies counted (group(.., copies=C); docs/isa.md,
/// "Thread groups"): each group synchronises on a named barrier of its own, 1..15.
inline constexpr uint32_t kMaxGroupCopies = 15;

/// The largest cluster= (the portable cluster size of sm_90).
inline constexpr uint32_t kMaxClusterSize = 8;

/// The registers per thread that a block of `threads` starts with when its thread groups
/// re-allocate registers (group(N, regs=R); docs/isa.md, "Thread groups"): the register file of
/// one multiprocessor shared by the blocks_per_sm= blocks (at least one), in units of 8, at most
/// 256. The JIT compiles such a kernel with this .maxnreg; the checker bounds the groups' demand
/// by threads times it.
inline int64_t groupStartRegisters(uint32_t threads, uint32_t blocksPerSm) {
  int64_t blocks = blocksPerSm > 0 ? int64_t(blocksPerSm) : 1;
  int64_t perThread = 65536 / (int64_t(threads > 0 ? threads : 1) * blocks) / 8 * 8;
  return perThread < 256 ? perThread : 256;
}

/// Calls f on every statement of `body` and of the bodies nested in it, each before its own
/// nested ones (program order).
template <typename F> void forEachStmt(const std::vector<Stmt> &body, const F &f) {
  for (const Stmt &s : body) {
    f(s);
    forEachStmt(s.body, f);
    forEachStmt(s.orelse, f);
  }
}

/// Calls f on the root of every scalar expression an argument holds (its value, a list's
/// entries, an offset's entries).
template <typename F> void forEachArgumentExpr(const Argument &a, const F &f) {
  if (a.expr != kNoId)
    f(a.expr);
  for (ExprId e : a.exprs)
    f(e);
  for (const OffsetEntry &o : a.offsets)
    f(o.expr);
}

struct Program {
  std::string name;
  std::vector<VarId> params; // in declaration order
  std::vector<ExprId> grid;  // 1 to 3 expressions of constants and scalar parameters
  uint32_t threads = 0;      // 0: inferred from register layouts by the checker
  /// blocks_per_sm=: the occupancy the JIT asks the PTX compiler to allow for (registers per
  /// thread at most 65536 / (blocksPerSm x threads)); 0: no request. A performance hint only.
  uint32_t blocksPerSm = 0;
  /// cluster=: blocks per thread-block cluster along the grid's x dimension (docs/isa.md,
  /// "Thread-block clusters and TMA multicast"); 1: no cluster.
  uint32_t cluster = 1;
  SourceLoc loc; // of the `def`
  std::vector<Variable> vars;
  std::vector<ExprNode> exprs;
  std::vector<Instruction> instructions;
  std::vector<Stmt> body;

  const Variable &var(VarId id) const { return vars[id]; }
  const ExprNode &expr(ExprId id) const { return exprs[id]; }
  /// The Assert statements of the body (its prefix), in order.
  std::vector<const Stmt *> preconditions() const;
  /// The Specialize statements of the body (in its prefix, after the asserts), in order.
  std::vector<const Stmt *> specializations() const;
  /// Whether some thread group of the body asks for regs= (register re-allocation).
  bool reallocatesRegisters() const;
};

struct Module {
  std::vector<Program> programs;
  /// Debug info (tilus-asm -g): the source text and its file name; empty without.
  bool hasDebugInfo = false;
  std::string sourceName;
  std::string sourceText;

  /// The program called `name`, or nullptr.
  const Program *findProgram(std::string_view name) const;
};

} // namespace tilus
