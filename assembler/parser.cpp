// Recursive-descent parser for `.tasm` (ISA section 4). It knows the shape of the language only:
// which names exist, what an instruction's arguments mean and how expressions are typed is the
// lowering's job (assembler/lower_*.cpp). That split keeps this file a direct transcription of
// the grammar:
//
//   module     := (const_decl | 'assert' expr (',' STRING)? | macro | program)*
//   const_decl := 'const' NAME (',' NAME)* '=' expr (',' expr)*
//   macro      := 'macro' NAME '(' (NAME (',' NAME)*)? ')' ':' block
//   program    := 'def' NAME '<' grid_expr (',' grid_expr){0,2} '>' '(' params? ')'
//                 ('threads' '=' expr)? ':' block
//   statement  := NAME (',' NAME)* '=' expr | NAME ':' DTYPE '=' expr | call
//               | for | if | while | 'break' | 'continue' | 'return' | 'pass'
//               | 'assert' expr (',' STRING)? | 'specialize' NAME '=' expr
//
// Nesting is bounded so that hostile input cannot exhaust the stack of this parser or of the
// recursive passes after it: 200 levels of brackets, calls and unary operators, syntax trees
// 1024 levels deep (a long chain `a + a + ... + a` is a deep tree), 200 levels of blocks (an
// `elif` counts as a level: it is an `if` nested in the `else`). Typed expressions are further
// held to 1000 levels (scalar_expr.cpp). The bounds stay below the bytecode decoder's limits
// (expression depth 1024, statement depth 256), so whatever assembles also decodes, and the
// disassembly of it (at most 2 levels deeper, for constants like `i64(-5)`) parses again.
//
// Expressions follow Python's precedence, lowest first: `a if c else b`, `or`, `and`, `not`,
// one comparison (chains are rejected), `|`, `^`, `&`, shifts, `+ -`, `* / %`, unary `- + ~`,
// then postfix calls and `.` products. Grid expressions stop above comparisons so that the
// closing `>` of `def f<...>` is not read as an operator.
#include "assembler/parser.h"

#include <algorithm>
#include <array>

namespace tilus::tasm {

bool isKeyword(std::string_view name) {
  static constexpr std::array<std::string_view, 17> kKeywords = {
      "const",    "def",    "for",  "in",  "if", "elif", "else", "while", "break",
      "continue", "return", "pass", "and", "or", "not",  "True", "False"};
  for (std::string_view k : kKeywords)
    if (k == name)
      return true;
  return false;
}

namespace {

constexpr int kMaxNesting = 200;
constexpr uint32_t kMaxExprDepth = 1024;
constexpr int kMaxBlockDepth = 200;

/// Recomputes a node's depth from its children and arguments.
void updateDepth(AstExpr &e) {
  uint32_t d = 0;
  for (const AstExprPtr &c : e.children)
    d = std::max(d, c->depth);
  for (const AstArg &a : e.args)
    d = std::max(d, a.value->depth);
  e.depth = d + 1;
}

/// Counts one level of nesting for the lifetime of a parsing function.
class NestingGuard {
public:
  explicit NestingGuard(int &counter) : counter_(counter) { ++counter_; }
  ~NestingGuard() { --counter_; }
  NestingGuard(const NestingGuard &) = delete;
  NestingGuard &operator=(const NestingGuard &) = delete;

private:
  int &counter_;
};

class Parser {
public:
  Parser(const std::vector<Token> &tokens, const std::string &file) : toks_(tokens), file_(file) {}

  Expected<AstModule> module();
  Expected<AstExprPtr> standalone();

private:
  const Token &cur() const { return toks_[i_]; }
  const Token &next() const { return toks_[i_ + 1 < toks_.size() ? i_ + 1 : i_]; }
  void advance() {
    if (i_ + 1 < toks_.size())
      ++i_;
  }
  bool isOp(std::string_view op) const { return cur().kind == TokenKind::Op && cur().text == op; }
  bool isName(std::string_view n) const { return cur().kind == TokenKind::Name && cur().text == n; }
  bool isKind(TokenKind k) const { return cur().kind == k; }
  static std::string describe(const Token &t);
  Status error(std::string message) const { return errorAt(cur().pos, std::move(message)); }
  Status errorAt(SrcPos at, std::string message) const {
    return Status::error(ErrorCode::Syntax, std::move(message), makeLocation(file_, at));
  }
  Status expectOp(std::string_view op) {
    if (!isOp(op))
      return error("expected '" + std::string(op) + "', found " + describe(cur()));
    advance();
    return Status::success();
  }
  Status expectNewline() {
    if (!isKind(TokenKind::Newline))
      return error("expected end of line, found " + describe(cur()));
    advance();
    return Status::success();
  }
  Expected<AstName> name(const char *what);
  Status nameList(const char *what, std::vector<AstName> &out);

  Status constDecl(AstConst &out);
  Status macro(AstMacro &out);
  Status program(AstProgram &out);
  Status param(AstParam &out);
  Status block(std::vector<AstStmt> &out);
  Status statement(AstStmt &out);
  Status assignment(AstStmt &out);
  Status forStmt(AstStmt &out);
  Status ifStmt(AstStmt &out);
  Status whileStmt(AstStmt &out);
  Status parallelStmt(AstStmt &out);
  /// An error when blocks are nested deeper than kMaxBlockDepth.
  Status blockDepthLimit() const;
  /// ':' NEWLINE INDENT, the start of an indented block.
  Status blockStart();
  Status assertStmt(AstStmt &out);
  Status specializeStmt(AstStmt &out);
  Status assignedValue(AstStmt &out);

  Expected<AstExprPtr> expr() { return ternary(); }
  Expected<AstExprPtr> ternary();
  Expected<AstExprPtr> logicalOr();
  Expected<AstExprPtr> logicalAnd();
  Expected<AstExprPtr> keywordChain(const char *keyword, Expected<AstExprPtr> (Parser::*operand)());
  Expected<AstExprPtr> logicalNot();
  Expected<AstExprPtr> comparison();
  Expected<AstExprPtr> binaryLevel(int level);
  Expected<AstExprPtr> factor();
  Expected<AstExprPtr> postfix();
  Expected<AstExprPtr> primary();
  Status callArgs(AstExpr &call);
  Expected<AstExprPtr> list();

  Status tooDeep() const {
    return error("expression nested too deeply (more than " + std::to_string(kMaxNesting) +
                 " levels)");
  }
  Status tooLong(const AstExpr &e) const {
    if (e.depth <= kMaxExprDepth)
      return Status::success();
    return error("expression too deep (more than " + std::to_string(kMaxExprDepth) + " levels)");
  }

  const std::vector<Token> &toks_;
  const std::string &file_;
  size_t i_ = 0;
  int nesting_ = 0;
  int blockDepth_ = 0;
};

AstExprPtr makeNode(AstKind kind, SrcPos pos, std::string text = {}) {
  auto e = std::make_unique<AstExpr>();
  e->kind = kind;
  e->pos = pos;
  e->text = std::move(text);
  return e;
}

std::string Parser::describe(const Token &t) {
  switch (t.kind) {
  case TokenKind::Name:
  case TokenKind::Op:
  case TokenKind::Int:
  case TokenKind::Float:
    return "'" + t.text + "'";
  case TokenKind::String:
    return "a string";
  case TokenKind::Newline:
    return "end of line";
  case TokenKind::Indent:
    return "an indented block";
  case TokenKind::Dedent:
    return "the end of the block";
  case TokenKind::End:
    return "end of input";
  }
  return "?";
}

Expected<AstName> Parser::name(const char *what) {
  if (!isKind(TokenKind::Name))
    return error(std::string("expected ") + what + ", found " + describe(cur()));
  if (isKeyword(cur().text))
    return error(std::string("expected ") + what + ", found keyword '" + cur().text + "'");
  AstName n{cur().text, cur().pos};
  advance();
  return n;
}

Expected<AstModule> Parser::module() {
  AstModule m;
  while (!isKind(TokenKind::End)) {
    if (isKind(TokenKind::Indent))
      return error("unexpected indent");
    AstItem item;
    if (isName("const")) {
      item.isConst = true;
      TILUSVM_TRY(constDecl(item.constDecl));
    } else if (isName("def")) {
      TILUSVM_TRY(program(item.program));
    } else if (isName("macro") && next().kind == TokenKind::Name) {
      // `macro` is not a reserved word: at module level only a definition starts with it
      item.isMacro = true;
      TILUSVM_TRY(macro(item.macro));
    } else if (isName("assert")) {
      item.isAssert = true;
      item.assertion.pos = cur().pos;
      TILUSVM_TRY(assertStmt(item.assertion));
    } else {
      return error("expected 'const', 'assert', 'macro' or 'def' at module level, found " +
                   describe(cur()));
    }
    m.items.push_back(std::move(item));
  }
  return m;
}

Expected<AstExprPtr> Parser::standalone() {
  auto e = expr();
  if (!e)
    return e;
  while (isKind(TokenKind::Newline))
    advance();
  if (!isKind(TokenKind::End))
    return error("unexpected " + describe(cur()) + " after the expression");
  return e;
}

/// `NAME (, NAME)*`, appended to `out`; `what` names them in the error.
Status Parser::nameList(const char *what, std::vector<AstName> &out) {
  do {
    auto n = name(what);
    if (!n)
      return n.takeStatus();
    out.push_back(*n);
    if (!isOp(","))
      break;
    advance();
  } while (true);
  return Status::success();
}

Status Parser::constDecl(AstConst &out) {
  out.pos = cur().pos;
  advance(); // const
  TILUSVM_TRY(nameList("a constant name", out.names));
  SrcPos eqPos = cur().pos;
  TILUSVM_TRY(expectOp("="));
  do {
    auto e = expr();
    if (!e)
      return e.takeStatus();
    out.values.push_back(std::move(*e));
    if (!isOp(","))
      break;
    advance();
  } while (true);
  if (out.names.size() != out.values.size())
    return errorAt(eqPos, std::to_string(out.names.size()) + " constant names but " +
                              std::to_string(out.values.size()) + " values");
  return expectNewline();
}

Status Parser::macro(AstMacro &out) {
  out.pos = cur().pos;
  advance(); // macro
  auto n = name("a macro name");
  if (!n)
    return n.takeStatus();
  out.name = *n;
  TILUSVM_TRY(expectOp("("));
  if (!isOp(")"))
    TILUSVM_TRY(nameList("a macro parameter", out.params));
  TILUSVM_TRY(expectOp(")"));
  return block(out.body);
}

Status Parser::program(AstProgram &out) {
  out.pos = cur().pos;
  advance(); // def
  auto n = name("a program name");
  if (!n)
    return n.takeStatus();
  out.name = *n;
  TILUSVM_TRY(expectOp("<"));
  do {
    if (out.grid.size() == 3)
      return error("a grid has at most 3 dimensions");
    auto e = binaryLevel(0);
    if (!e)
      return e.takeStatus();
    out.grid.push_back(std::move(*e));
    if (!isOp(","))
      break;
    advance();
  } while (true);
  TILUSVM_TRY(expectOp(">"));
  TILUSVM_TRY(expectOp("("));
  while (!isOp(")")) {
    AstParam p;
    TILUSVM_TRY(param(p));
    out.params.push_back(std::move(p));
    if (!isOp(","))
      break;
    advance();
  }
  TILUSVM_TRY(expectOp(")"));
  // the header's attributes, each at most once, in any order
  while (isName("threads") || isName("blocks_per_sm") || isName("cluster")) {
    std::string attribute = cur().text;
    AstExprPtr &slot = attribute == "threads"         ? out.threads
                       : attribute == "blocks_per_sm" ? out.blocksPerSm
                                                      : out.cluster;
    if (slot)
      return error(attribute + "= is given twice");
    advance();
    TILUSVM_TRY(expectOp("="));
    auto e = expr();
    if (!e)
      return e.takeStatus();
    slot = std::move(*e);
  }
  return block(out.body);
}

Status Parser::param(AstParam &out) {
  auto dt = name("a parameter type");
  if (!dt)
    return dt.takeStatus();
  out.dtype = *dt;
  if (isOp("*")) {
    out.pointer = true;
    advance();
  }
  auto n = name("a parameter name");
  if (!n)
    return n.takeStatus();
  out.name = *n;
  return Status::success();
}

Status Parser::blockDepthLimit() const {
  if (blockDepth_ > kMaxBlockDepth)
    return error("blocks nested too deeply (more than " + std::to_string(kMaxBlockDepth) +
                 " levels)");
  return Status::success();
}

Status Parser::blockStart() {
  TILUSVM_TRY(expectOp(":"));
  if (!isKind(TokenKind::Newline))
    return error("expected end of line after ':', found " + describe(cur()) +
                 " (a block starts on the next line)");
  advance();
  if (!isKind(TokenKind::Indent))
    return error("expected an indented block, found " + describe(cur()));
  advance();
  return Status::success();
}

Status Parser::block(std::vector<AstStmt> &out) {
  NestingGuard guard(blockDepth_);
  TILUSVM_TRY(blockDepthLimit());
  TILUSVM_TRY(blockStart());
  while (!isKind(TokenKind::Dedent) && !isKind(TokenKind::End)) {
    AstStmt s;
    TILUSVM_TRY(statement(s));
    out.push_back(std::move(s));
  }
  advance(); // Dedent
  return Status::success();
}

Status Parser::statement(AstStmt &out) {
  out.pos = cur().pos;
  if (isKind(TokenKind::Indent))
    return error("unexpected indent");
  if (isKind(TokenKind::Name)) {
    const std::string &w = cur().text;
    if (w == "for")
      return forStmt(out);
    if (w == "if")
      return ifStmt(out);
    if (w == "while")
      return whileStmt(out);
    if (w == "parallel" && next().kind == TokenKind::Op && next().text == ":")
      return parallelStmt(out);
    if (w == "break" || w == "continue" || w == "pass" || w == "return") {
      out.kind = w == "break"      ? AstStmtKind::Break
                 : w == "continue" ? AstStmtKind::Continue
                 : w == "pass"     ? AstStmtKind::Pass
                                   : AstStmtKind::Return;
      advance();
      if (out.kind == AstStmtKind::Return && !isKind(TokenKind::Newline))
        return error("'return' takes no value");
      return expectNewline();
    }
    if (w == "assert" && !(next().kind == TokenKind::Op &&
                           (next().text == "=" || next().text == "," || next().text == ":")))
      return assertStmt(out);
    if (w == "specialize" && next().kind == TokenKind::Name)
      return specializeStmt(out);
    if (w == "const")
      return error("'const' is only allowed at module level");
    if (w == "def")
      return error("'def' is only allowed at module level");
    if (w == "elif" || w == "else")
      return error("'" + w + "' without a matching 'if'");
    if (next().kind == TokenKind::Op &&
        (next().text == "=" || next().text == "," || next().text == ":"))
      return assignment(out);
  }
  auto e = expr();
  if (!e)
    return e.takeStatus();
  if ((*e)->kind != AstKind::Call)
    return errorAt(out.pos, "expected an instruction call or an assignment");
  out.kind = AstStmtKind::Call;
  out.value = std::move(*e);
  return expectNewline();
}

Status Parser::assignment(AstStmt &out) {
  out.kind = AstStmtKind::Assign;
  TILUSVM_TRY(nameList("an assignment target", out.targets));
  if (isOp(":")) {
    if (out.targets.size() != 1)
      return error("a type annotation needs a single target");
    advance();
    auto dt = name("a data type");
    if (!dt)
      return dt.takeStatus();
    out.annotation = *dt;
  }
  return assignedValue(out);
}

// '=' expr NEWLINE: the value of an assignment or a specialize statement.
Status Parser::assignedValue(AstStmt &out) {
  TILUSVM_TRY(expectOp("="));
  auto e = expr();
  if (!e)
    return e.takeStatus();
  out.value = std::move(*e);
  return expectNewline();
}

Status Parser::forStmt(AstStmt &out) {
  out.kind = AstStmtKind::For;
  advance(); // for
  auto v = name("a loop variable");
  if (!v)
    return v.takeStatus();
  out.loopVar = *v;
  if (!isName("in"))
    return error("expected 'in', found " + describe(cur()));
  advance();
  if (!isName("range"))
    return error("for loops iterate over range(...), found " + describe(cur()));
  SrcPos rangePos = cur().pos;
  advance();
  TILUSVM_TRY(expectOp("("));
  while (!isOp(")")) {
    // the unroll hint, last: unroll=U (docs/isa.md, "Unroll hints")
    if (isKind(TokenKind::Name) && next().kind == TokenKind::Op && next().text == "=") {
      if (cur().text != "unroll")
        return error("range() takes no keyword argument '" + cur().text + "' (only unroll=)");
      advance();
      advance();
      auto u = expr();
      if (!u)
        return u.takeStatus();
      out.unroll = std::move(*u);
      if (isOp(","))
        advance();
      if (!isOp(")"))
        return error("unroll= is the last argument of range(), found " + describe(cur()));
      break;
    }
    auto e = expr();
    if (!e)
      return e.takeStatus();
    out.rangeArgs.push_back(std::move(*e));
    if (!isOp(","))
      break;
    advance();
  }
  TILUSVM_TRY(expectOp(")"));
  if (out.rangeArgs.empty() || out.rangeArgs.size() > 3)
    return errorAt(rangePos,
                   "range() takes 1 to 3 arguments, got " + std::to_string(out.rangeArgs.size()));
  return block(out.body);
}

Status Parser::ifStmt(AstStmt &out) {
  out.kind = AstStmtKind::If;
  advance(); // if / elif
  auto c = expr();
  if (!c)
    return c.takeStatus();
  out.value = std::move(*c);
  TILUSVM_TRY(block(out.body));
  if (isName("elif")) {
    NestingGuard guard(blockDepth_);
    TILUSVM_TRY(blockDepthLimit());
    AstStmt nested;
    nested.pos = cur().pos;
    TILUSVM_TRY(ifStmt(nested));
    out.orelse.push_back(std::move(nested));
  } else if (isName("else")) {
    advance();
    TILUSVM_TRY(block(out.orelse));
  }
  return Status::success();
}

// 'assert' expr [',' STRING]: a precondition (docs/isa.md). `assert` is not a reserved word: a
// statement that starts with it and is not an assignment is an assert.
Status Parser::assertStmt(AstStmt &out) {
  out.kind = AstStmtKind::Assert;
  advance(); // assert
  auto c = expr();
  if (!c)
    return c.takeStatus();
  out.value = std::move(*c);
  if (isOp(",")) {
    advance();
    SrcPos at = cur().pos;
    auto m = expr();
    if (!m)
      return m.takeStatus();
    if ((*m)->kind != AstKind::String)
      return errorAt(at, "the message of an assert must be a string literal");
    out.message = (*m)->text;
  }
  return expectNewline();
}

// 'specialize' NAME '=' expr: a value the runtime may fold into the kernel at launch (docs/isa.md,
// "Launch-time specialisation"). `specialize` is not a reserved word: only a statement that
// starts with it followed by a name is one.
Status Parser::specializeStmt(AstStmt &out) {
  out.kind = AstStmtKind::Specialize;
  advance(); // specialize
  auto target = name("the specialized variable");
  if (!target)
    return target.takeStatus();
  out.targets.push_back(*target);
  return assignedValue(out);
}

// 'parallel' ':' NEWLINE INDENT group+ DEDENT, each group
// 'group' '(' COUNT (',' ('regs' | 'copies') '=' E)* ')' ('as' NAME)? ':' block (docs/isa.md,
// "Thread groups").
Status Parser::parallelStmt(AstStmt &out) {
  out.kind = AstStmtKind::Parallel;
  advance(); // parallel
  NestingGuard guard(blockDepth_);
  TILUSVM_TRY(blockDepthLimit());
  TILUSVM_TRY(blockStart());
  while (!isKind(TokenKind::Dedent) && !isKind(TokenKind::End)) {
    AstStmt g;
    g.pos = cur().pos;
    g.kind = AstStmtKind::Group;
    if (!isName("group"))
      return error("expected 'group(THREADS[, regs=R][, copies=C]):' in a parallel statement, "
                   "found " +
                   describe(cur()));
    advance();
    TILUSVM_TRY(expectOp("("));
    auto count = expr();
    if (!count)
      return count.takeStatus();
    g.value = std::move(*count);
    while (isOp(",")) {
      advance();
      bool regs = isName("regs"), copies = isName("copies");
      if (!regs && !copies)
        return error("expected 'regs=' or 'copies=' in group(...), found " + describe(cur()));
      AstExprPtr &slot = regs ? g.regs : g.copies;
      if (slot)
        return error(std::string("'") + (regs ? "regs" : "copies") +
                     "=' given twice in group(...)");
      advance();
      TILUSVM_TRY(expectOp("="));
      auto value = expr();
      if (!value)
        return value.takeStatus();
      slot = std::move(*value);
    }
    TILUSVM_TRY(expectOp(")"));
    if (isName("as")) {
      advance();
      auto v = name("the copy index after 'as'");
      if (!v)
        return v.takeStatus();
      g.loopVar = *v;
    }
    TILUSVM_TRY(block(g.body));
    out.body.push_back(std::move(g));
  }
  advance(); // Dedent
  return Status::success();
}

Status Parser::whileStmt(AstStmt &out) {
  out.kind = AstStmtKind::While;
  advance(); // while
  auto c = expr();
  if (!c)
    return c.takeStatus();
  out.value = std::move(*c);
  return block(out.body);
}

Expected<AstExprPtr> Parser::ternary() {
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting)
    return tooDeep();
  auto then = logicalOr();
  if (!then)
    return then;
  TILUSVM_TRY(tooLong(**then));
  if (!isName("if"))
    return then;
  SrcPos at = cur().pos;
  advance();
  auto cond = logicalOr();
  if (!cond)
    return cond;
  if (!isName("else"))
    return error("expected 'else' in conditional expression, found " + describe(cur()));
  advance();
  auto other = ternary();
  if (!other)
    return other;
  auto node = makeNode(AstKind::Ternary, at);
  node->children.push_back(std::move(*then));
  node->children.push_back(std::move(*cond));
  node->children.push_back(std::move(*other));
  updateDepth(*node);
  TILUSVM_TRY(tooLong(*node));
  return node;
}

AstExprPtr makeBinary(std::string op, SrcPos at, AstExprPtr a, AstExprPtr b) {
  auto node = makeNode(AstKind::Binary, at, std::move(op));
  node->children.push_back(std::move(a));
  node->children.push_back(std::move(b));
  updateDepth(*node);
  return node;
}

/// A left-associative chain `operand (keyword operand)*` of `or` or `and`.
Expected<AstExprPtr> Parser::keywordChain(const char *keyword,
                                          Expected<AstExprPtr> (Parser::*operand)()) {
  auto lhs = (this->*operand)();
  while (lhs && isName(keyword)) {
    SrcPos at = cur().pos;
    advance();
    auto rhs = (this->*operand)();
    if (!rhs)
      return rhs;
    lhs = makeBinary(keyword, at, std::move(*lhs), std::move(*rhs));
    TILUSVM_TRY(tooLong(**lhs));
  }
  return lhs;
}

Expected<AstExprPtr> Parser::logicalOr() { return keywordChain("or", &Parser::logicalAnd); }

Expected<AstExprPtr> Parser::logicalAnd() { return keywordChain("and", &Parser::logicalNot); }

Expected<AstExprPtr> Parser::logicalNot() {
  if (!isName("not"))
    return comparison();
  SrcPos at = cur().pos;
  advance();
  NestingGuard guard(nesting_);
  if (nesting_ > kMaxNesting)
    return tooDeep();
  auto operand = logicalNot();
  if (!operand)
    return operand;
  auto node = makeNode(AstKind::Unary, at, "not");
  node->children.push_back(std::move(*operand));
  updateDepth(*node);
  return node;
}

bool isComparisonOp(const Token &t) {
  if (t.kind != TokenKind::Op)
    return false;
  return t.text == "==" || t.text == "!=" || t.text == "<" || t.text == "<=" || t.text == ">" ||
         t.text == ">=";
}

Expected<AstExprPtr> Parser::comparison() {
  auto lhs = binaryLevel(0);
  if (!lhs || !isComparisonOp(cur()))
    return lhs;
  std::string op = cur().text;
  SrcPos at = cur().pos;
  advance();
  auto rhs = binaryLevel(0);
  if (!rhs)
    return rhs;
  if (isComparisonOp(cur()))
    return error("chained comparisons are not supported (combine them with 'and')");
  return makeBinary(op, at, std::move(*lhs), std::move(*rhs));
}

// Left-associative binary levels from `|` (0) to `* / %` (5).
Expected<AstExprPtr> Parser::binaryLevel(int level) {
  static const std::vector<std::vector<std::string_view>> kLevels = {
      {"|"}, {"^"}, {"&"}, {"<<", ">>"}, {"+", "-"}, {"*", "/", "%"}};
  if (level == int(kLevels.size()))
    return factor();
  auto lhs = binaryLevel(level + 1);
  while (lhs && isKind(TokenKind::Op)) {
    bool match = false;
    for (std::string_view op : kLevels[size_t(level)])
      match = match || cur().text == op;
    if (!match)
      break;
    std::string op = cur().text;
    SrcPos at = cur().pos;
    advance();
    auto rhs = binaryLevel(level + 1);
    if (!rhs)
      return rhs;
    lhs = makeBinary(op, at, std::move(*lhs), std::move(*rhs));
    TILUSVM_TRY(tooLong(**lhs));
  }
  return lhs;
}

Expected<AstExprPtr> Parser::factor() {
  if (isOp("-") || isOp("+") || isOp("~")) {
    std::string op = cur().text;
    SrcPos at = cur().pos;
    advance();
    NestingGuard guard(nesting_);
    if (nesting_ > kMaxNesting)
      return tooDeep();
    auto operand = factor();
    if (!operand)
      return operand;
    auto node = makeNode(AstKind::Unary, at, op);
    node->children.push_back(std::move(*operand));
    updateDepth(*node);
    TILUSVM_TRY(tooLong(*node));
    return node;
  }
  return postfix();
}

Expected<AstExprPtr> Parser::postfix() {
  auto lhs = primary();
  while (lhs && isOp(".")) {
    SrcPos at = cur().pos;
    advance();
    Expected<AstExprPtr> rhs = Status::error(ErrorCode::Syntax, "unreachable");
    if (isOp("(")) {
      advance();
      rhs = expr();
      if (!rhs)
        return rhs;
      TILUSVM_TRY(expectOp(")"));
    } else if (isKind(TokenKind::Name) && !isKeyword(cur().text)) {
      rhs = primary();
      if (!rhs)
        return rhs;
    } else {
      return error("expected a name after '.', found " + describe(cur()));
    }
    auto node = makeNode(AstKind::Dot, at);
    node->children.push_back(std::move(*lhs));
    node->children.push_back(std::move(*rhs));
    updateDepth(*node);
    TILUSVM_TRY(tooLong(*node));
    lhs = std::move(node);
  }
  return lhs;
}

Expected<AstExprPtr> Parser::primary() {
  const Token &t = cur();
  switch (t.kind) {
  case TokenKind::Name: {
    if (isKeyword(t.text) && t.text != "True" && t.text != "False")
      return error("expected an expression, found keyword '" + t.text + "'");
    auto node = makeNode(AstKind::Name, t.pos, t.text);
    advance();
    if (!isOp("(") || node->text == "True" || node->text == "False")
      return node;
    node->kind = AstKind::Call;
    TILUSVM_TRY(callArgs(*node));
    updateDepth(*node);
    return node;
  }
  case TokenKind::Int: {
    auto node = makeNode(AstKind::Int, t.pos, t.text);
    node->intValue = t.intValue;
    advance();
    return node;
  }
  case TokenKind::Float: {
    auto node = makeNode(AstKind::Float, t.pos, t.text);
    advance();
    return node;
  }
  case TokenKind::String: {
    auto node = makeNode(AstKind::String, t.pos, t.text);
    advance();
    return node;
  }
  case TokenKind::Op:
    if (t.text == "(") {
      advance();
      auto inner = expr();
      if (!inner)
        return inner;
      TILUSVM_TRY(expectOp(")"));
      return inner;
    }
    if (t.text == "[")
      return list();
    break;
  case TokenKind::Newline:
  case TokenKind::Indent:
  case TokenKind::Dedent:
  case TokenKind::End:
    break;
  }
  return error("expected an expression, found " + describe(t));
}

// '(' [arg (',' arg)* [',']] ')' with positional arguments before keyword arguments.
Status Parser::callArgs(AstExpr &call) {
  TILUSVM_TRY(expectOp("("));
  bool sawKeyword = false;
  while (!isOp(")")) {
    AstArg arg;
    arg.pos = cur().pos;
    if (isKind(TokenKind::Name) && next().kind == TokenKind::Op && next().text == "=") {
      arg.keyword = cur().text;
      advance();
      advance();
      sawKeyword = true;
    } else if (sawKeyword) {
      return error("positional argument after keyword argument");
    }
    auto v = expr();
    if (!v)
      return v.takeStatus();
    arg.value = std::move(*v);
    call.args.push_back(std::move(arg));
    if (!isOp(","))
      break;
    advance();
  }
  return expectOp(")");
}

// '[' [elem (',' elem)* [',']] ']' where elem := expr [':'].
Expected<AstExprPtr> Parser::list() {
  auto node = makeNode(AstKind::List, cur().pos);
  advance(); // [
  while (!isOp("]")) {
    auto e = expr();
    if (!e)
      return e;
    if (isOp(":")) {
      auto slice = makeNode(AstKind::Slice, (*e)->pos);
      advance();
      slice->children.push_back(std::move(*e));
      updateDepth(*slice);
      node->children.push_back(std::move(slice));
    } else {
      node->children.push_back(std::move(*e));
    }
    if (!isOp(","))
      break;
    advance();
  }
  TILUSVM_TRY(expectOp("]"));
  updateDepth(*node);
  return node;
}

} // namespace

Expected<AstModule> parseModule(const std::vector<Token> &tokens, const std::string &fileName) {
  return Parser(tokens, fileName).module();
}

Expected<AstExprPtr> parseStandaloneExpr(const std::vector<Token> &tokens,
                                         const std::string &fileName) {
  return Parser(tokens, fileName).standalone();
}

Expected<AstExprPtr> parseStandaloneText(std::string_view text, const std::string &fileName) {
  auto tokens = tokenize(text, fileName);
  if (!tokens)
    return tokens.takeStatus();
  return parseStandaloneExpr(*tokens, fileName);
}

} // namespace tilus::tasm
