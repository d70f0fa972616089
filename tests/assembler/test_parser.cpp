// The parser: tree shapes (precedence, associativity, statements) against hand-written
// S-expressions, and syntax errors with their positions.
#include "asm_test_util.h"

#include "assembler/parser.h"

namespace {

using namespace tilus;
using namespace tilus::tasm;
using namespace tilus::testing;

/// An S-expression of a syntax tree, e.g. "(+ a (* b 2))".
std::string show(const AstExpr &e) {
  auto kids = [&](std::string head) {
    std::string s = "(" + head;
    for (const AstExprPtr &c : e.children) {
      s += ' ';
      s += show(*c);
    }
    return s + ")";
  };
  switch (e.kind) {
  case AstKind::Name:
    return e.text;
  case AstKind::Int:
    return std::to_string(e.intValue);
  case AstKind::Float:
    return e.text + "f";
  case AstKind::String:
    return "'" + e.text + "'";
  case AstKind::Unary:
  case AstKind::Binary:
    return kids(e.text);
  case AstKind::Ternary:
    return kids("?");
  case AstKind::Dot:
    return kids(".");
  case AstKind::List:
    return kids("list");
  case AstKind::Slice:
    return kids("slice");
  case AstKind::Call: {
    std::string s = "(call " + e.text;
    for (const AstArg &a : e.args)
      s += " " + (a.keyword.empty() ? "" : a.keyword + "=") + show(*a.value);
    return s + ")";
  }
  }
  return "?";
}

std::string expr(const std::string &text) {
  auto toks = tokenize(text, "e");
  REQUIRE_OK(toks);
  auto ast = parseStandaloneExpr(*toks, "e");
  REQUIRE_OK(ast);
  return show(**ast);
}

AstModule parse(const std::string &text) {
  auto toks = tokenize(text, "p.tasm");
  REQUIRE_OK(toks);
  auto m = parseModule(*toks, "p.tasm");
  REQUIRE_OK(m);
  return std::move(*m);
}

/// "line:col message" of the syntax error in `text`.
std::string syntaxError(const std::string &text) {
  auto toks = tokenize(text, "p.tasm");
  REQUIRE_OK(toks);
  auto m = parseModule(*toks, "p.tasm");
  REQUIRE_FALSE(m.ok());
  const Diagnostic &d = m.status().first();
  CHECK(d.code == ErrorCode::Syntax);
  return std::to_string(d.location.line) + ":" + std::to_string(d.location.column) + " " +
         d.message;
}

TEST_CASE("every example program parses") {
  for (const std::string &path : examplePrograms()) {
    CAPTURE(path);
    auto toks = tokenize(readSourceFile(path), path);
    REQUIRE_OK(toks);
    CHECK_OK(parseModule(*toks, path));
  }
}

TEST_CASE("operator precedence follows Python") {
  CHECK(expr("a + b * c") == "(+ a (* b c))");
  CHECK(expr("a - b - c") == "(- (- a b) c)");
  CHECK(expr("a / b % c * d") == "(* (% (/ a b) c) d)");
  CHECK(expr("-a * b") == "(* (- a) b)");
  CHECK(expr("- - a") == "(- (- a))");
  CHECK(expr("~a + +b") == "(+ (~ a) (+ b))");
  CHECK(expr("a | b ^ c & d << e + f") == "(| a (^ b (& c (<< d (+ e f)))))");
  CHECK(expr("a >> 1 << 2") == "(<< (>> a 1) 2)");
  CHECK(expr("a < b + 1") == "(< a (+ b 1))");
  CHECK(expr("not a == b") == "(not (== a b))");
  CHECK(expr("a and b or c and not d") == "(or (and a b) (and c (not d)))");
  CHECK(expr("x if a or b else y if c else z") == "(? x (or a b) (? y c z))");
  CHECK(expr("(a + b) * c") == "(* (+ a b) c)");
  CHECK(expr("True and False") == "(and True False)");
}

TEST_CASE("calls, lists, slices, layouts and literals") {
  CHECK(expr("min(a, cdiv(b, 2))") == "(call min a (call cdiv b 2))");
  CHECK(expr("f(a, b=1, c=[x, y:],)") == "(call f a b=1 c=(list x (slice y)))");
  CHECK(expr("[]") == "(list)");
  CHECK(expr("[a * 2:, 0:, i]") == "(list (slice (* a 2)) (slice 0) i)");
  CHECK(expr("local(2, 1).spatial(8, 4).local(1, 2)") ==
        "(. (. (call local 2 1) (call spatial 8 4)) (call local 1 2))");
  CHECK(expr("row_major(2, 2).(row_major(4, 4).row_major(8, 8))") ==
        "(. (call row_major 2 2) (. (call row_major 4 4) (call row_major 8 8)))");
  CHECK(expr("Print(x, \"hi\")") == "(call Print x 'hi')");
  CHECK(expr("1.5 + .5e1 + 0x10") == "(+ (+ 1.5f .5e1f) 16)");
}

TEST_CASE("module structure: constants, header, parameters, statements") {
  AstModule m = parse(R"(const A, B = 1, A + 2
const C = 3
def k<A, B * 2, C>(f16* p, i32 n) threads=32 * 4:
    x, y = BlockIndices()
    z: i64 = 5
    Synchronize()
    for i in range(1, n, 2):
        if i:
            break
        elif n:
            continue
        else:
            pass
    while n > 0:
        return
def q<1>():
    pass
)");
  REQUIRE(m.items.size() == 4);
  REQUIRE(m.items[0].isConst);
  const AstConst &c = m.items[0].constDecl;
  REQUIRE(c.names.size() == 2);
  CHECK(c.names[1].name == "B");
  CHECK(show(*c.values[1]) == "(+ A 2)");
  const AstProgram &k = m.items[2].program;
  CHECK(k.name.name == "k");
  CHECK(k.pos.line == 3);
  CHECK(k.pos.column == 1);
  REQUIRE(k.grid.size() == 3);
  CHECK(show(*k.grid[1]) == "(* B 2)");
  REQUIRE(k.params.size() == 2);
  CHECK(k.params[0].pointer);
  CHECK(k.params[0].dtype.name == "f16");
  CHECK(k.params[0].name.name == "p");
  CHECK_FALSE(k.params[1].pointer);
  REQUIRE(k.threads);
  CHECK(show(*k.threads) == "(* 32 4)");
  REQUIRE(k.body.size() == 5);
  CHECK(k.body[0].kind == AstStmtKind::Assign);
  CHECK(k.body[0].targets.size() == 2);
  CHECK(k.body[1].annotation.name == "i64");
  CHECK(k.body[2].kind == AstStmtKind::Call);
  const AstStmt &f = k.body[3];
  CHECK(f.kind == AstStmtKind::For);
  CHECK(f.loopVar.name == "i");
  CHECK(f.rangeArgs.size() == 3);
  REQUIRE(f.body.size() == 1);
  const AstStmt &i = f.body[0];
  CHECK(i.kind == AstStmtKind::If);
  CHECK(i.body[0].kind == AstStmtKind::Break);
  REQUIRE(i.orelse.size() == 1); // elif: an If as the only statement of orelse
  CHECK(i.orelse[0].kind == AstStmtKind::If);
  CHECK(i.orelse[0].body[0].kind == AstStmtKind::Continue);
  CHECK(i.orelse[0].orelse[0].kind == AstStmtKind::Pass);
  CHECK(k.body[4].kind == AstStmtKind::While);
  CHECK(k.body[4].body[0].kind == AstStmtKind::Return);
  CHECK(m.items[3].program.params.empty());
  CHECK_FALSE(m.items[3].program.threads);
}

TEST_CASE("syntax errors point at the offending token") {
  CHECK(syntaxError("x = 1\n") ==
        "1:1 expected 'const', 'assert', 'macro' or 'def' at module level, found 'x'");
  CHECK(syntaxError("  const A = 1\n") == "1:3 unexpected indent");
  CHECK(syntaxError("const A, B = 1\n") == "1:12 2 constant names but 1 values");
  CHECK(syntaxError("def k<1, 2, 3, 4>():\n    pass\n") == "1:16 a grid has at most 3 dimensions");
  CHECK(syntaxError("def k(i32 n):\n    pass\n") == "1:6 expected '<', found '('");
  CHECK(syntaxError("def k<1>(i32):\n    pass\n") == "1:13 expected a parameter name, found ')'");
  CHECK(syntaxError("def k<1>()\n    pass\n") == "1:11 expected ':', found end of line");
  CHECK(syntaxError("def k<1>(): pass\n") ==
        "1:13 expected end of line after ':', found 'pass' (a block starts on the next line)");
  CHECK(syntaxError("def k<1>():\npass\n") == "2:1 expected an indented block, found 'pass'");
  CHECK(syntaxError("def k<1>():\n    return 1\n") == "2:12 'return' takes no value");
  CHECK(syntaxError("def k<1>():\n    else:\n        pass\n") ==
        "2:5 'else' without a matching 'if'");
  CHECK(syntaxError("def k<1>():\n    const A = 1\n") ==
        "2:5 'const' is only allowed at module level");
  CHECK(syntaxError("def k<1>():\n    def q<1>():\n        pass\n") ==
        "2:5 'def' is only allowed at module level");
  CHECK(syntaxError("def k<1>():\n    x + 1\n") ==
        "2:5 expected an instruction call or an assignment");
  CHECK(syntaxError("def k<1>():\n    x = a < b < c\n") ==
        "2:15 chained comparisons are not supported (combine them with 'and')");
  CHECK(syntaxError("def k<1>():\n    f(a=1, b)\n") ==
        "2:12 positional argument after keyword argument");
  CHECK(syntaxError("def k<1>():\n    for i in xs:\n        pass\n") ==
        "2:14 for loops iterate over range(...), found 'xs'");
  CHECK(syntaxError("def k<1>():\n    for i in range(1, 2, 3, 4):\n        pass\n") ==
        "2:14 range() takes 1 to 3 arguments, got 4");
  CHECK(syntaxError("def k<1>():\n    if = 3\n") == "2:8 expected an expression, found '='");
  CHECK(syntaxError("def k<1>():\n    x = y if z\n") ==
        "2:15 expected 'else' in conditional expression, found end of line");
  CHECK(syntaxError("def k<1>():\n    x = a.+b\n") == "2:11 expected a name after '.', found '+'");
  CHECK(syntaxError("def k<1>():\n    x = a.1\n") == "2:10 expected end of line, found '.1'");
  CHECK(syntaxError("def k<1>():\n    x = 1 2\n") == "2:11 expected end of line, found '2'");
  CHECK(syntaxError("def k<1>():\n    a, b: i32 = 1\n") ==
        "2:9 a type annotation needs a single target");
  CHECK(syntaxError("def for<1>():\n    pass\n") ==
        "1:5 expected a program name, found keyword 'for'");
}

} // namespace

namespace {

using namespace tilus;
using namespace tilus::testing;

std::string repeat(const std::string &s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k)
    out += s;
  return out;
}

TEST_CASE("nesting is bounded: deep input is an error, never a stack overflow") {
  auto deepParens =
      asmText("def k<1>():\n    x = " + repeat("(", 100000) + "1" + repeat(")", 100000) + "\n");
  CHECK_ERROR(deepParens, ErrorCode::Syntax);
  CHECK(deepParens.status().first().message ==
        "expression nested too deeply (more than 200 levels)");
  CHECK_ERROR(asmText("def k<1>():\n    x = " + repeat("-", 100000) + "1\n"), ErrorCode::Syntax);
  CHECK_ERROR(asmText("def k<1>():\n    x = " + repeat("not ", 100000) + "1\n"), ErrorCode::Syntax);
  CHECK_ERROR(asmText("def k<1>():\n    x = f(" + repeat("[", 100000) + "\n"), ErrorCode::Syntax);
  auto chain = asmText("def k<1>(i32 n):\n    x = n" + repeat(" + n", 100000) + "\n");
  CHECK_ERROR(chain, ErrorCode::Syntax);
  CHECK(chain.status().first().message == "expression too deep (more than 1024 levels)");
  // The typed tree (with its conversions) is held to 1000 levels.
  auto typedDeep = asmText("def k<1>(i32 n):\n    x = n" + repeat(" + n", 1005) + "\n");
  CHECK_ERROR(typedDeep, ErrorCode::Syntax);
  CHECK(typedDeep.status().first().message ==
        "expression too deep (1006 levels with its conversions; at most 1000)");
  CHECK_ERROR(
      asmText("def k<1>(i32 n):\n    x = " + repeat("-", 150) + "(n" + repeat(" + n", 990) + ")\n"),
      ErrorCode::Syntax);
  CHECK_ERROR(parseRegisterLayout("local(1)" + repeat(".local(1)", 5000)), ErrorCode::Syntax);
  // Within the bounds everything assembles.
  CHECK_OK(asmText("def k<1>(i32 n):\n    x = n" + repeat(" + n", 900) + "\n"));
  CHECK_OK(asmText("def k<1>():\n    x = " + repeat("(", 150) + "1" + repeat(")", 150) + "\n"));
  std::string nested = "def k<1>(i32 n):\n";
  for (int d = 1; d <= 150; ++d)
    nested += std::string(size_t(d) * 4, ' ') + "if n:\n";
  nested += std::string(151 * 4, ' ') + "pass\n";
  CHECK_OK(asmText(nested));
  std::string tooNested = "def k<1>(i32 n):\n";
  for (int d = 1; d <= 250; ++d)
    tooNested += std::string(size_t(d), ' ') + "if n:\n";
  tooNested += std::string(251, ' ') + "pass\n";
  auto t = asmText(tooNested);
  CHECK_ERROR(t, ErrorCode::Syntax);
  CHECK(t.status().first().message == "blocks nested too deeply (more than 200 levels)");
  std::string elifs = "def k<1>(i32 n):\n    if n == 0:\n        pass\n";
  for (int k = 1; k < 1000; ++k)
    elifs += "    elif n == " + std::to_string(k) + ":\n        pass\n";
  CHECK_ERROR(asmText(elifs), ErrorCode::Syntax);
}

} // namespace
