// The lexer: tokens, indentation, literals, and its errors with their exact positions.
#include "assembler/lexer.h"
#include "test_helpers.h"

#include <string>
#include <vector>

namespace {

using namespace tilus;
using namespace tilus::tasm;

/// Tokens as compact strings: names and ops by text, others by a tag.
std::vector<std::string> lex(const std::string &text) {
  auto toks = tokenize(text, "f.tasm");
  REQUIRE_OK(toks);
  std::vector<std::string> out;
  for (const Token &t : *toks) {
    switch (t.kind) {
    case TokenKind::Name:
    case TokenKind::Op:
      out.push_back(t.text);
      break;
    case TokenKind::Int:
      out.push_back("int:" + std::to_string(t.intValue));
      break;
    case TokenKind::Float:
      out.push_back("float:" + t.text);
      break;
    case TokenKind::String:
      out.push_back("str:" + t.text);
      break;
    case TokenKind::Newline:
      out.push_back("NL");
      break;
    case TokenKind::Indent:
      out.push_back("IN");
      break;
    case TokenKind::Dedent:
      out.push_back("DE");
      break;
    case TokenKind::End:
      out.push_back("END");
      break;
    }
  }
  return out;
}

std::vector<std::string> v(std::initializer_list<const char *> items) {
  return std::vector<std::string>(items.begin(), items.end());
}

/// "line:col message" of a lexing error.
std::string lexError(const std::string &text) {
  auto toks = tokenize(text, "f.tasm");
  REQUIRE_FALSE(toks.ok());
  const Diagnostic &d = toks.status().first();
  CHECK(d.code == ErrorCode::Syntax);
  CHECK(d.location.file == "f.tasm");
  return std::to_string(d.location.line) + ":" + std::to_string(d.location.column) + " " +
         d.message;
}

TEST_CASE("indentation becomes INDENT and DEDENT tokens") {
  CHECK(lex("def f:\n    a\n    if b:\n        c\n    d\ne\n") ==
        v({"def", "f", ":",  "NL", "IN", "a",  "NL", "if", "b",  ":",  "NL",
           "IN",  "c", "NL", "DE", "d",  "NL", "DE", "e",  "NL", "END"}));
  // Several levels closed at once, and at the end of input without a final newline.
  CHECK(lex("a\n  b\n    c\nd") ==
        v({"a", "NL", "IN", "b", "NL", "IN", "c", "NL", "DE", "DE", "d", "NL", "END"}));
  CHECK(lex("a\n  b\n    c") ==
        v({"a", "NL", "IN", "b", "NL", "IN", "c", "NL", "DE", "DE", "END"}));
}

TEST_CASE("blank lines, comments and CRLF do not take part in indentation") {
  CHECK(lex("a  # comment\n\n      # indented comment\n\t\n  b\r\n\r\n  c\n") ==
        v({"a", "NL", "IN", "b", "NL", "c", "NL", "DE", "END"}));
  CHECK(lex("# only a comment") == v({"END"}));
  CHECK(lex("") == v({"END"}));
}

TEST_CASE("newlines inside brackets continue the line") {
  CHECK(lex("f(a,\n      b,\n  [c,\nd])\nx\n") ==
        v({"f", "(", "a", ",", "b", ",", "[", "c", ",", "d", "]", ")", "NL", "x", "NL", "END"}));
}

TEST_CASE("operators take the longest match") {
  CHECK(lex("a<<b>>c<=d>=e==f!=g<h>i=j") ==
        v({"a",  "<<", "b", ">>", "c", "<=", "d", ">=", "e",  "==", "f",
           "!=", "g",  "<", "h",  ">", "i",  "=", "j",  "NL", "END"}));
  CHECK(lex("+-*/%&|^~:,.()[]") == v({"+", "-", "*", "/", "%", "&", "|", "^", "~", ":", ",", ".",
                                      "(", ")", "[", "]", "NL", "END"}));
  // A tab between tokens is whitespace.
  CHECK(lex("a\t+ b") == v({"a", "+", "b", "NL", "END"}));
}

TEST_CASE("integer literals") {
  CHECK(lex("0 7 0x1F 0XfF 2147483648 9223372036854775807 0x7fffffffffffffff") ==
        v({"int:0", "int:7", "int:31", "int:255", "int:2147483648", "int:9223372036854775807",
           "int:9223372036854775807", "NL", "END"}));
}

TEST_CASE("float literals, and a dot before a name is an operator") {
  CHECK(lex("1.0 1. .5 1e-3 2E+10 3.25e2") == v({"float:1.0", "float:1.", "float:.5", "float:1e-3",
                                                 "float:2E+10", "float:3.25e2", "NL", "END"}));
  CHECK(lex("local(2).spatial(4)") ==
        v({"local", "(", "int:2", ")", ".", "spatial", "(", "int:4", ")", "NL", "END"}));
}

TEST_CASE("string literals and escapes") {
  CHECK(lex(R"("a b" 'c"d')") == v({"str:a b", "str:c\"d", "NL", "END"}));
  auto toks = tokenize(R"("q\"\\\n\t\r\x41\0'" '\'')", "f");
  REQUIRE_OK(toks);
  CHECK((*toks)[0].text == std::string("q\"\\\n\t\rA\0'", 9));
  CHECK((*toks)[1].text == "'");
}

TEST_CASE("token positions are 1-based line and byte column") {
  auto toks = tokenize("def f<1>():\n    x = 12 + y\n", "f");
  REQUIRE_OK(toks);
  auto at = [&](size_t k) {
    return std::to_string((*toks)[k].pos.line) + ":" + std::to_string((*toks)[k].pos.column);
  };
  CHECK((*toks)[0].text == "def");
  CHECK(at(0) == "1:1");
  CHECK(at(1) == "1:5"); // f
  CHECK(at(2) == "1:6"); // <
  size_t x = 0;
  while ((*toks)[x].text != "x")
    ++x;
  CHECK(at(x) == "2:5");
  CHECK(at(x + 2) == "2:9");  // 12
  CHECK(at(x + 4) == "2:14"); // y
}

TEST_CASE("lexer errors carry the position of the offending character") {
  CHECK(lexError("def f:\n\tx = 1\n") == "2:1 tab in indentation (indent with spaces)");
  CHECK(lexError("def f:\n  \tx = 1\n") == "2:3 tab in indentation (indent with spaces)");
  CHECK(lexError("a\n    b\n  c\n") ==
        "3:3 unindent to column 3 does not match any outer indentation level");
  CHECK(lexError("x = a $ b") == "1:7 unexpected character '$'");
  CHECK(lexError("x = a ! b") == "1:7 unexpected character '!'");
  CHECK(lexError("x = \"abc\ny\"") == "1:5 unterminated string literal");
  CHECK(lexError("x = 'a\\qb'") == "1:7 unknown escape sequence '\\q'");
  CHECK(lexError("x = '\\x4'") == "1:6 \\x escape needs two hexadecimal digits");
  CHECK(lexError("f(a,\n  b") == "1:2 '(' was never closed");
  CHECK(lexError("f(a]") == "1:4 closing ']' does not match '(' at line 1");
  CHECK(lexError("a)") == "1:2 unmatched ')'");
  CHECK(lexError("x = 9223372036854775808") ==
        "1:5 integer literal 9223372036854775808 does not fit in 64 bits");
  CHECK(lexError("x = 0x8000000000000000") ==
        "1:5 integer literal 0x8000000000000000 does not fit in 64 bits");
  CHECK(lexError("x = 12ab") == "1:5 invalid number literal '12a'");
  CHECK(lexError("x = 0x") == "1:5 invalid hexadecimal literal '0x'");
  CHECK(lexError("x = 1e+") == "1:5 malformed exponent in number literal");
}

} // namespace
