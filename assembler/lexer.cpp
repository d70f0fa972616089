// The `.tasm` lexer. The language is indentation-structured like Python, so the lexer does the
// one context-sensitive job of the front end: it measures the indentation of every logical line
// and emits INDENT/DEDENT tokens against a stack of open levels, which leaves the parser a plain
// recursive descent over tokens. Newlines inside brackets are whitespace (line continuation);
// blank and comment-only lines are skipped. Tabs in the indentation of a code line are an error
// (ISA section 4); elsewhere a tab is ordinary whitespace.
//
//   def f<1>(i32 n):       Name def, Name f, Op <, Int 1, Op >, Op (, Name i32, Name n, Op ),
//       x = n + 1          Op :, Newline, Indent, Name x, Op =, Name n, Op +, Int 1, Newline,
//                          Dedent, End
#include "assembler/lexer.h"

#include <cctype>

namespace tilus::tasm {

Location makeLocation(const std::string &fileName, SrcPos pos) {
  Location loc;
  loc.file = fileName;
  loc.line = pos.line;
  loc.column = pos.column;
  return loc;
}

namespace {

bool isNameStart(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool isNameChar(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool isDigit(char c) { return c >= '0' && c <= '9'; }
bool isHexDigit(char c) { return std::isxdigit(static_cast<unsigned char>(c)) != 0; }

class Lexer {
public:
  Lexer(std::string_view src, const std::string &file) : src_(src), file_(file) {}

  Expected<std::vector<Token>> run();

private:
  char peek(size_t ahead = 0) const {
    return pos_ + ahead < src_.size() ? src_[pos_ + ahead] : '\0';
  }
  bool atEnd() const { return pos_ >= src_.size(); }
  void advance() {
    ++pos_;
    ++col_;
  }
  SrcPos here() const { return {line_, col_}; }
  Status error(SrcPos at, std::string message) const {
    return Status::error(ErrorCode::Syntax, std::move(message), makeLocation(file_, at));
  }
  void push(TokenKind kind, std::string text, SrcPos at, int64_t value = 0) {
    tokens_.push_back(Token{kind, std::move(text), value, at});
  }
  bool atNewline() const { return peek() == '\n' || peek() == '\r'; }
  void consumeNewline() {
    if (peek() == '\r' && peek(1) == '\n')
      ++pos_;
    ++pos_;
    ++line_;
    col_ = 1;
  }
  void skipToLineEnd() {
    while (!atEnd() && !atNewline())
      advance();
  }

  Status lineStart(bool &skipLine);
  Status lexToken();
  Status lexNumber();
  Status lexHex();
  Status lexString();
  Status lexOperator();

  std::string_view src_;
  const std::string &file_;
  size_t pos_ = 0;
  uint32_t line_ = 1;
  uint32_t col_ = 1;
  std::vector<Token> tokens_;
  std::vector<uint32_t> indents_{0};
  struct Open {
    char c;
    SrcPos pos;
  };
  std::vector<Open> brackets_;
};

// Measures the indentation of a new logical line and emits INDENT/DEDENT; sets `skipLine` for
// blank and comment-only lines, which do not take part in indentation.
Status Lexer::lineStart(bool &skipLine) {
  uint32_t width = 0;
  std::optional<SrcPos> tab;
  while (peek() == ' ' || peek() == '\t') {
    if (peek() == '\t' && !tab)
      tab = here();
    ++width;
    advance();
  }
  skipLine = atEnd() || atNewline() || peek() == '#';
  if (skipLine)
    return Status::success();
  if (tab)
    return error(*tab, "tab in indentation (indent with spaces)");
  if (width > indents_.back()) {
    indents_.push_back(width);
    push(TokenKind::Indent, "", here());
    return Status::success();
  }
  while (width < indents_.back()) {
    indents_.pop_back();
    push(TokenKind::Dedent, "", here());
  }
  if (width != indents_.back())
    return error(here(), "unindent to column " + std::to_string(width + 1) +
                             " does not match any outer indentation level");
  return Status::success();
}

Expected<std::vector<Token>> Lexer::run() {
  bool lineStartPending = true;
  while (!atEnd()) {
    if (lineStartPending && brackets_.empty()) {
      bool skipLine = false;
      TILUSVM_TRY(lineStart(skipLine));
      if (skipLine) {
        skipToLineEnd();
        if (!atEnd())
          consumeNewline();
        continue;
      }
    }
    lineStartPending = false;
    char c = peek();
    if (c == ' ' || c == '\t') {
      advance();
      continue;
    }
    if (c == '#') {
      skipToLineEnd();
      continue;
    }
    if (atNewline()) {
      if (brackets_.empty()) {
        push(TokenKind::Newline, "", here());
        lineStartPending = true;
      }
      consumeNewline();
      continue;
    }
    TILUSVM_TRY(lexToken());
  }
  if (!brackets_.empty())
    return error(brackets_.back().pos,
                 std::string("'") + brackets_.back().c + "' was never closed");
  if (!tokens_.empty() && tokens_.back().kind != TokenKind::Newline &&
      tokens_.back().kind != TokenKind::Dedent)
    push(TokenKind::Newline, "", here());
  while (indents_.size() > 1) {
    indents_.pop_back();
    push(TokenKind::Dedent, "", here());
  }
  push(TokenKind::End, "", here());
  return std::move(tokens_);
}

Status Lexer::lexToken() {
  char c = peek();
  if (isNameStart(c)) {
    SrcPos at = here();
    size_t start = pos_;
    while (isNameChar(peek()))
      advance();
    push(TokenKind::Name, std::string(src_.substr(start, pos_ - start)), at);
    return Status::success();
  }
  if (isDigit(c) || (c == '.' && isDigit(peek(1))))
    return lexNumber();
  if (c == '"' || c == '\'')
    return lexString();
  return lexOperator();
}

// Integers: decimal or 0x hex, at most 2^63 - 1. Floats: digits with a fraction and/or an
// exponent ("1.0", "1.", ".5", "1e-3"). A '.' followed by a letter is not part of the number.
Status Lexer::lexNumber() {
  SrcPos at = here();
  size_t start = pos_;
  if (peek() == '0' && (peek(1) == 'x' || peek(1) == 'X'))
    return lexHex();
  bool isFloat = false;
  while (isDigit(peek()))
    advance();
  if (peek() == '.' && !isNameStart(peek(1))) {
    isFloat = true;
    advance();
    while (isDigit(peek()))
      advance();
  }
  if (peek() == 'e' || peek() == 'E') {
    size_t k = 1;
    if (peek(k) == '+' || peek(k) == '-')
      ++k;
    if (!isDigit(peek(k)))
      return error(at, "malformed exponent in number literal");
    isFloat = true;
    for (size_t i = 0; i < k; ++i)
      advance();
    while (isDigit(peek()))
      advance();
  }
  std::string text(src_.substr(start, pos_ - start));
  if (isNameChar(peek()))
    return error(at, "invalid number literal '" + text + std::string(1, peek()) + "'");
  if (isFloat) {
    push(TokenKind::Float, text, at);
    return Status::success();
  }
  uint64_t value = 0;
  for (char d : text) {
    uint64_t digit = uint64_t(d - '0');
    if (value > (uint64_t(INT64_MAX) - digit) / 10)
      return error(at, "integer literal " + text + " does not fit in 64 bits");
    value = value * 10 + digit;
  }
  push(TokenKind::Int, text, at, int64_t(value));
  return Status::success();
}

Status Lexer::lexHex() {
  SrcPos at = here();
  size_t start = pos_;
  advance();
  advance();
  uint64_t value = 0;
  bool any = false, overflow = false;
  while (isHexDigit(peek())) {
    char h = peek();
    int d = isDigit(h) ? h - '0' : (std::tolower(static_cast<unsigned char>(h)) - 'a' + 10);
    if (value > (uint64_t(INT64_MAX) - uint64_t(d)) / 16)
      overflow = true;
    value = value * 16 + uint64_t(d);
    any = true;
    advance();
  }
  std::string text(src_.substr(start, pos_ - start));
  if (!any || isNameChar(peek()))
    return error(at, "invalid hexadecimal literal '" + text + "'");
  if (overflow)
    return error(at, "integer literal " + text + " does not fit in 64 bits");
  push(TokenKind::Int, text, at, int64_t(value));
  return Status::success();
}

// Escapes: \\ \' \" \n \t \r \0 \xHH. Strings end on the same line.
Status Lexer::lexString() {
  SrcPos at = here();
  char quote = peek();
  advance();
  std::string text;
  while (true) {
    if (atEnd() || atNewline())
      return error(at, "unterminated string literal");
    char c = peek();
    if (c == quote) {
      advance();
      break;
    }
    if (c != '\\') {
      text += c;
      advance();
      continue;
    }
    SrcPos escAt = here();
    advance();
    char e = peek();
    switch (e) {
    case '\\':
      text += '\\';
      break;
    case '\'':
      text += '\'';
      break;
    case '"':
      text += '"';
      break;
    case 'n':
      text += '\n';
      break;
    case 't':
      text += '\t';
      break;
    case 'r':
      text += '\r';
      break;
    case '0':
      text += '\0';
      break;
    case 'x': {
      if (!isHexDigit(peek(1)) || !isHexDigit(peek(2)))
        return error(escAt, "\\x escape needs two hexadecimal digits");
      text += char(std::stoi(std::string(src_.substr(pos_ + 1, 2)), nullptr, 16));
      advance();
      advance();
      break;
    }
    default:
      return error(escAt, std::string("unknown escape sequence '\\") + e + "'");
    }
    advance();
  }
  push(TokenKind::String, text, at);
  return Status::success();
}

Status Lexer::lexOperator() {
  SrcPos at = here();
  static const char *kTwoChar[] = {"<<", ">>", "<=", ">=", "==", "!="};
  for (const char *op : kTwoChar) {
    if (peek() == op[0] && peek(1) == op[1]) {
      advance();
      advance();
      push(TokenKind::Op, op, at);
      return Status::success();
    }
  }
  char c = peek();
  static const std::string_view kSingle = "+-*/%&|^~<>=:,.()[]";
  if (kSingle.find(c) == std::string_view::npos) {
    if (std::isprint(static_cast<unsigned char>(c)))
      return error(at, std::string("unexpected character '") + c + "'");
    return error(at, "unexpected byte 0x" +
                         std::string(1, "0123456789abcdef"[(unsigned char)c >> 4]) +
                         std::string(1, "0123456789abcdef"[(unsigned char)c & 15]));
  }
  if (c == '(' || c == '[') {
    brackets_.push_back({c, at});
  } else if (c == ')' || c == ']') {
    char open = c == ')' ? '(' : '[';
    if (brackets_.empty())
      return error(at, std::string("unmatched '") + c + "'");
    if (brackets_.back().c != open)
      return error(at, std::string("closing '") + c + "' does not match '" + brackets_.back().c +
                           "' at line " + std::to_string(brackets_.back().pos.line));
    brackets_.pop_back();
  }
  advance();
  push(TokenKind::Op, std::string(1, c), at);
  return Status::success();
}

} // namespace

Expected<std::vector<Token>> tokenize(std::string_view source, const std::string &fileName) {
  return Lexer(source, fileName).run();
}

} // namespace tilus::tasm
