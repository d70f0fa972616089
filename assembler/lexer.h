// The `.tasm` lexer (ISA section 4): text to tokens, with Python-style indentation turned into
// INDENT/DEDENT tokens. Internal to the assembler.
#pragma once

#include "isa/status.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace tilus::tasm {

/// A 1-based position in the source (columns count bytes).
struct SrcPos {
  uint32_t line = 0;
  uint32_t column = 0;
};

enum class TokenKind : uint8_t {
  Name,    // identifiers and keywords (the parser tells them apart)
  Int,     // decimal or 0x hex integer literal; intValue holds the value
  Float,   // float literal; text holds the spelling
  String,  // "..." or '...'; text holds the decoded bytes
  Op,      // operator or punctuation; text holds the spelling
  Newline, // end of a logical line
  Indent,
  Dedent,
  End,
};

struct Token {
  TokenKind kind = TokenKind::End;
  std::string text;
  int64_t intValue = 0;
  SrcPos pos;
};

/// Diagnostic location for a position in the named file.
Location makeLocation(const std::string &fileName, SrcPos pos);

/// Split `source` into tokens. Errors (code `syntax`): a tab in indentation, an unindent that
/// matches no outer level, an unexpected character, a malformed literal, unbalanced brackets.
Expected<std::vector<Token>> tokenize(std::string_view source, const std::string &fileName);

} // namespace tilus::tasm
