// The syntax tree of a `.tasm` module, as parsed and before any name is resolved. Internal to
// the assembler: the parser builds it, the lowering (names, types, arguments by the instruction
// table) turns it into the Program IR of isa/program.h.
//
// One expression grammar serves scalar expressions, instruction calls, layout expressions and
// argument lists; what an expression means is decided by where it appears (the ArgKind of the
// argument it is given to).
#pragma once

#include "assembler/lexer.h"

#include <memory>
#include <string>
#include <vector>

namespace tilus::tasm {

enum class AstKind : uint8_t {
  Name,    // text
  Int,     // intValue (text: the spelling)
  Float,   // text: the spelling
  String,  // text: the decoded bytes
  Unary,   // text: "-", "+", "~", "not"; children[0]
  Binary,  // text: the operator ("+", "<<", "==", "and", ...); children[0], children[1]
  Ternary, // children: then, condition, else  (`a if c else b`)
  Call,    // text: callee name; args
  Dot,     // children[0] '.' children[1]  (layout products and tilings; the right-hand side
           // is a name, a call, or a parenthesised expression)
  List,    // children: elements  (`[a, b:, c]`)
  Slice,   // children[0] followed by ':' (only as a list element)
};

struct AstExpr;
using AstExprPtr = std::unique_ptr<AstExpr>;

struct AstArg {
  std::string keyword; // empty for a positional argument
  SrcPos pos;          // of the keyword, or of the value
  AstExprPtr value;
};

struct AstExpr {
  AstKind kind = AstKind::Name;
  SrcPos pos;
  std::string text;
  int64_t intValue = 0;
  uint32_t depth = 1; // height of the tree below (and including) this node
  std::vector<AstExprPtr> children;
  std::vector<AstArg> args;
};

struct AstName {
  std::string name;
  SrcPos pos;
};

enum class AstStmtKind : uint8_t {
  Assign,
  Call,
  For,
  If,
  While,
  Break,
  Continue,
  Return,
  Pass,
  Assert,
  Specialize, // targets[0] = value (docs/isa.md, "Launch-time specialisation")
  Parallel,   // body: its Group clauses
  Group       // value: the thread count; regs, copies: regs=, copies= (null when absent);
              // loopVar: the copy index after `as` (empty name when absent); body
};

struct AstStmt {
  AstStmtKind kind = AstStmtKind::Pass;
  SrcPos pos;
  std::vector<AstName> targets;      // Assign
  AstName annotation;                // Assign `NAME: DTYPE = expr` (empty name when absent)
  AstExprPtr value;                  // Assign/Call: the right-hand side or the call; If/While: cond
                                     // Assert: the condition
  std::string message;               // Assert: the message (empty when omitted)
  AstName loopVar;                   // For
  std::vector<AstExprPtr> rangeArgs; // For: 1 to 3
  AstExprPtr unroll;                 // For: unroll=, null when absent
  std::vector<AstStmt> body;
  std::vector<AstStmt> orelse; // If; `elif` is an If as the only statement of orelse
  AstExprPtr regs;             // Group: regs=, null when absent
  AstExprPtr copies;           // Group: copies=, null when absent
};

struct AstConst {
  SrcPos pos;
  std::vector<AstName> names;
  std::vector<AstExprPtr> values;
};

struct AstParam {
  AstName dtype;
  bool pointer = false;
  AstName name;
};

struct AstProgram {
  SrcPos pos; // of `def`
  AstName name;
  std::vector<AstExprPtr> grid;
  std::vector<AstParam> params;
  AstExprPtr threads;     // null when omitted
  AstExprPtr blocksPerSm; // blocks_per_sm=, null when omitted
  AstExprPtr cluster;     // cluster=, null when omitted
  std::vector<AstStmt> body;
};

/// `macro NAME(P, ...):` (docs/isa.md, "Macros"): a block of statements that a call statement
/// `NAME(args)` in a program body expands in place, with each parameter bound to the constant
/// value of its argument.
struct AstMacro {
  SrcPos pos; // of `macro`
  AstName name;
  std::vector<AstName> params;
  std::vector<AstStmt> body;
};

struct AstItem {
  bool isConst = false;
  bool isAssert = false; // a module-level assert over constants
  bool isMacro = false;
  AstConst constDecl;
  AstStmt assertion;
  AstMacro macro;
  AstProgram program;
};

struct AstModule {
  std::vector<AstItem> items;
};

} // namespace tilus::tasm
