// Printing expressions for the disassembler. The contract is the round trip: printed text,
// re-assembled, must rebuild the same expression nodes with the same bit patterns, so that the
// bytecode is identical. Two things make that work:
//   - operators are parenthesised by precedence exactly where the parser would otherwise build a
//     different tree, and implicit conversions are explicit Cast nodes already (scalar_expr.cpp),
//     so printing them as `i64(x)` rebuilds them;
//   - a constant is printed as the simplest spelling that folds back to its exact dtype and
//     bits. Candidates are tried in order and each is checked by actually assembling it:
//       i32 5 -> "5"          i64 5 -> "i64(5)"        i64 2^40 -> "1099511627776"
//       f32 0.1f -> "0.1"     f64 0.1 -> "f64(0.1)"    f16 1.5 -> "f16(1.5)"
//       f32 +inf -> "(1.0 / 0.0)"     f32 NaN -> "(0.0 / 0.0)"
//     Float digits are the shortest that read back to the same value (%.{1..9}g for f32,
//     %.{1..17}g for f64). Folding only ever produces the canonical NaN (docs/types.md), and
//     conversions into 8-bit floats saturate; so another NaN pattern, or an f8e5m2 infinity, can
//     only come from bytecode this assembler did not write, and prints as the nearest spelling
//     (the canonical NaN, the saturated value).
#include "assembler/expr_printer.h"

#include "assembler/parser.h"
#include "assembler/scalar_expr.h"
#include "isa/convert.h"

#include <bit>
#include <cstdio>
#include <cstdlib>

namespace tilus::tasm {

std::string printInteger(int64_t value) {
  if (value == INT64_MIN)
    return "(-9223372036854775807 - 1)";
  std::string digits = std::to_string(value < 0 ? -value : value);
  return value < 0 ? digits.insert(0, 1, '-') : digits;
}

std::string quoteString(const std::string &text) {
  std::string out = "\"";
  static const char *kHex = "0123456789abcdef";
  for (char c : text) {
    unsigned char u = static_cast<unsigned char>(c);
    switch (c) {
    case '\\':
      out += "\\\\";
      break;
    case '"':
      out += "\\\"";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\t':
      out += "\\t";
      break;
    case '\r':
      out += "\\r";
      break;
    default:
      if (u < 0x20 || u == 0x7f) {
        out += "\\x";
        out += kHex[u >> 4];
        out += kHex[u & 15];
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}

namespace {

/// Whether `text` assembles to a constant of exactly `dtype` and `bits`.
bool reassemblesTo(const std::string &text, DataType dtype, uint64_t bits) {
  const std::string file = "<constant>";
  auto ast = parseStandaloneText(text, file);
  if (!ast)
    return false;
  ExprContext ctx;
  ctx.fileName = file;
  auto e = buildScalar(**ast, ctx);
  return e && e->isConst() && e->dtype == dtype && e->bits == bits;
}

/// Shortest %g spelling of `v` that reads back (strtof / strtod) to the same value, with a '.'
/// or an exponent so that it lexes as a float.
std::string floatDigits(double v, bool asF32) {
  char buf[64];
  std::string s;
  for (int p = 1; p <= 17; ++p) {
    std::snprintf(buf, sizeof buf, "%.*g", p, v);
    bool same =
        asF32 ? std::bit_cast<uint32_t>(std::strtof(buf, nullptr)) ==
                    std::bit_cast<uint32_t>(float(v))
              : std::bit_cast<uint64_t>(std::strtod(buf, nullptr)) == std::bit_cast<uint64_t>(v);
    if (same)
      break;
  }
  s = buf;
  if (s.find_first_of(".e") == std::string::npos)
    s += ".0";
  return s;
}

std::vector<std::string> floatCandidates(DataType dtype, uint64_t bits) {
  bool isF32 = dtype == DataType::f32(), isF64 = dtype == DataType::f64();
  std::string wrapOpen = isF32 ? "(" : dtype.name() + "(";
  if (isNaN(bits, dtype))
    return {wrapOpen + "0.0 / 0.0)"};
  if (isInf(bits, dtype))
    return {wrapOpen + "1.0 / 0.0)", wrapOpen + "-1.0 / 0.0)"};
  if (isF64)
    return {"f64(" + floatDigits(std::bit_cast<double>(bits), false) + ")"};
  uint64_t b32 = isF32 ? bits : convertBits(bits, dtype, DataType::f32());
  std::string digits = floatDigits(double(std::bit_cast<float>(uint32_t(b32))), true);
  if (isF32)
    return {digits};
  return {dtype.name() + "(" + digits + ")"};
}

std::vector<std::string> intCandidates(DataType dtype, uint64_t bits) {
  int64_t v = toInt64(bits, dtype);
  bool fitsI32 = v >= INT32_MIN && v <= INT32_MAX;
  if (dtype == DataType::i32() && v != INT32_MIN)
    return {printInteger(v)};
  if (dtype == DataType::i64() && !fitsI32)
    return {printInteger(v)};
  return {dtype.name() + "(" + printInteger(v) + ")"};
}

struct BinaryForm {
  const char *text;
  int prec;
};

BinaryForm binaryForm(ExprOp op) {
  switch (op) {
  case ExprOp::Add:
    return {"+", kPrecAdd};
  case ExprOp::Sub:
    return {"-", kPrecAdd};
  case ExprOp::Mul:
    return {"*", kPrecMul};
  case ExprOp::Div:
    return {"/", kPrecMul};
  case ExprOp::Mod:
    return {"%", kPrecMul};
  case ExprOp::Shl:
    return {"<<", kPrecShift};
  case ExprOp::Shr:
    return {">>", kPrecShift};
  case ExprOp::BitAnd:
    return {"&", kPrecBitAnd};
  case ExprOp::BitOr:
    return {"|", kPrecBitOr};
  case ExprOp::BitXor:
    return {"^", kPrecBitXor};
  case ExprOp::Eq:
    return {"==", kPrecCompare};
  case ExprOp::Ne:
    return {"!=", kPrecCompare};
  case ExprOp::Lt:
    return {"<", kPrecCompare};
  case ExprOp::Le:
    return {"<=", kPrecCompare};
  case ExprOp::Gt:
    return {">", kPrecCompare};
  case ExprOp::Ge:
    return {">=", kPrecCompare};
  case ExprOp::LogicalAnd:
    return {"and", kPrecAnd};
  case ExprOp::LogicalOr:
    return {"or", kPrecOr};
  case ExprOp::Const:
  case ExprOp::Var:
  case ExprOp::BitNot:
  case ExprOp::Neg:
  case ExprOp::LogicalNot:
  case ExprOp::Select:
  case ExprOp::Min:
  case ExprOp::Max:
  case ExprOp::CeilDiv:
  case ExprOp::Cast:
    break;
  }
  return {nullptr, kPrecAtom};
}

std::string printNode(const Program &p, const ExprNode &n, int &prec) {
  auto operand = [&](int k, int minPrec) { return printExpr(p, n.operands[k], minPrec); };
  prec = kPrecAtom;
  switch (n.op) {
  case ExprOp::Const:
    return printConst(n.dtype, n.bits, &prec);
  case ExprOp::Var:
    return n.var < p.vars.size() ? p.vars[n.var].name : "<var " + std::to_string(n.var) + ">";
  case ExprOp::Neg:
  case ExprOp::BitNot:
    prec = kPrecUnary;
    return operand(0, kPrecUnary).insert(0, 1, n.op == ExprOp::Neg ? '-' : '~');
  case ExprOp::LogicalNot:
    prec = kPrecNot;
    return "not " + operand(0, kPrecNot);
  case ExprOp::Select:
    prec = kPrecTernary;
    return operand(1, kPrecOr) + " if " + operand(0, kPrecOr) + " else " + operand(2, kPrecTernary);
  case ExprOp::Min:
  case ExprOp::Max:
  case ExprOp::CeilDiv:
    return std::string(n.op == ExprOp::Min   ? "min"
                       : n.op == ExprOp::Max ? "max"
                                             : "cdiv") +
           "(" + operand(0, kPrecTernary) + ", " + operand(1, kPrecTernary) + ")";
  case ExprOp::Cast:
    return n.dtype.name() + "(" + operand(0, kPrecTernary) + ")";
  case ExprOp::Add:
  case ExprOp::Sub:
  case ExprOp::Mul:
  case ExprOp::Div:
  case ExprOp::Mod:
  case ExprOp::Shl:
  case ExprOp::Shr:
  case ExprOp::BitAnd:
  case ExprOp::BitOr:
  case ExprOp::BitXor:
  case ExprOp::Eq:
  case ExprOp::Ne:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge:
  case ExprOp::LogicalAnd:
  case ExprOp::LogicalOr:
    break;
  }
  BinaryForm f = binaryForm(n.op);
  prec = f.prec;
  // Left-associative levels keep a same-level left operand bare; comparisons chain nowhere.
  int leftMin = f.prec == kPrecCompare ? f.prec + 1 : f.prec;
  return operand(0, leftMin) + " " + f.text + " " + operand(1, f.prec + 1);
}

} // namespace

std::string printConst(DataType dtype, uint64_t bits, int *prec) {
  std::vector<std::string> candidates;
  if (dtype.isBool())
    candidates = {bits ? "True" : "False"};
  else if (dtype.isInt())
    candidates = intCandidates(dtype, bits);
  else
    candidates = floatCandidates(dtype, bits);
  std::string chosen = candidates.front();
  for (const std::string &c : candidates) {
    if (reassemblesTo(c, dtype, bits)) {
      chosen = c;
      break;
    }
  }
  if (prec)
    *prec = chosen[0] == '-' ? kPrecUnary : kPrecAtom;
  return chosen;
}

std::string printExpr(const Program &program, ExprId id, int minPrec) {
  if (id >= program.exprs.size())
    return "<expr " + std::to_string(id) + ">";
  int prec = kPrecAtom;
  std::string s = printNode(program, program.exprs[id], prec);
  return prec < minPrec ? "(" + s + ")" : s;
}

} // namespace tilus::tasm
