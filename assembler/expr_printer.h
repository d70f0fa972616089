// Printing scalar expressions and constants as `.tasm` text that re-assembles to the same
// expression nodes and bit patterns. Internal to the assembler (used by the disassembler).
#pragma once

#include "isa/program.h"

#include <string>

namespace tilus::tasm {

/// Precedence levels of the expression grammar, loosest first.
enum Prec : int {
  kPrecTernary = 0,
  kPrecOr,
  kPrecAnd,
  kPrecNot,
  kPrecCompare,
  kPrecBitOr,
  kPrecBitXor,
  kPrecBitAnd,
  kPrecShift,
  kPrecAdd,
  kPrecMul,
  kPrecUnary,
  kPrecAtom,
};

/// Expression `id` of `program`, parenthesised as needed to bind at least as tightly as
/// `minPrec`.
std::string printExpr(const Program &program, ExprId id, int minPrec = kPrecTernary);

/// A constant whose re-assembly gives exactly `dtype` and `bits` (e.g. "5", "i64(5)", "0.1",
/// "f64(0.1)", "f16(1.5)", "(1.0 / 0.0)"); `prec` receives its precedence.
std::string printConst(DataType dtype, uint64_t bits, int *prec = nullptr);

/// An integer as an expression that folds to that i64/i32 value ("-5", "(-9223372036854775807 -
/// 1)").
std::string printInteger(int64_t value);

/// A string literal with escapes that the lexer reads back to the same bytes.
std::string quoteString(const std::string &text);

} // namespace tilus::tasm
