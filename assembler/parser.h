// The `.tasm` parser: tokens to the syntax tree of assembler/ast.h (grammar of ISA section 4).
// Internal to the assembler. Every error has code `syntax` and the position of the offending
// token; parsing stops at the first one.
#pragma once

#include "assembler/ast.h"

namespace tilus::tasm {

Expected<AstModule> parseModule(const std::vector<Token> &tokens, const std::string &fileName);

/// One expression followed by the end of the input (for -D values and `tilus-asm layout`).
Expected<AstExprPtr> parseStandaloneExpr(const std::vector<Token> &tokens,
                                         const std::string &fileName);
/// The same from source text: tokenizes `text`, then parses one expression.
Expected<AstExprPtr> parseStandaloneText(std::string_view text, const std::string &fileName);

/// Whether `name` is a keyword of the language (not usable as a variable or constant name).
bool isKeyword(std::string_view name);

} // namespace tilus::tasm
