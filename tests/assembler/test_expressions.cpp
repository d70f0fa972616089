// Scalar expressions: literal types, i32/i64 promotion, explicit casts in the IR, constant
// folding against hand-computed values (C semantics), constants and -D overrides.
#include "asm_test_util.h"

#include <bit>
#include <cstdio>
#include <cstring>

namespace {

using namespace tilus;
using namespace tilus::testing;

/// The IR expression tree as an S-expression with types, e.g. "(+:i64 (cast:i64 m) n)",
/// constants as "i32:5" (integers, signed value) or "f32#3fc00000" (floats, bit pattern).
std::string tree(const Program &p, ExprId id) {
  const ExprNode &n = p.exprs[id];
  std::string t = n.dtype.name();
  if (n.op == ExprOp::Const) {
    if (n.dtype.isFloat()) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%llx", (unsigned long long)n.bits);
      return t + "#" + buf;
    }
    int64_t v = n.dtype.isSigned() && n.dtype.bits < 64 && (n.bits >> (n.dtype.bits - 1)) & 1
                    ? int64_t(n.bits) - (int64_t(1) << n.dtype.bits)
                    : int64_t(n.bits);
    return t + ":" + std::to_string(v);
  }
  if (n.op == ExprOp::Var)
    return p.vars[n.var].name;
  std::string s = std::string("(") + exprOpName(n.op) + ":" + t;
  for (int k = 0; k < exprOpArity(n.op); ++k) {
    CHECK(n.operands[k] < id); // post-order
    s += ' ';
    s += tree(p, n.operands[k]);
  }
  return s + ")";
}

/// The expression assigned to `x` in `def k<1>(PARAMS): x = EXPR`.
std::string typed(const std::string &expr, const std::string &params = "i32 m, i64 n",
                  const std::string &consts = "") {
  Program p = asmProgram(consts + "\ndef k<1>(" + params + "):\n    x = " + expr + "\n");
  REQUIRE(p.body.size() == 1);
  REQUIRE(p.body[0].kind == StmtKind::Assign);
  CHECK(p.vars[p.body[0].var].dtype == p.exprs[p.body[0].expr].dtype);
  // The arena holds exactly this tree (nothing left over from folding).
  CHECK(p.body[0].expr + 1 == p.exprs.size());
  return tree(p, p.body[0].expr);
}

std::string f32bits(float f) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "f32#%x", std::bit_cast<uint32_t>(f));
  return buf;
}

std::string f64bits(double d) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "f64#%llx", (unsigned long long)std::bit_cast<uint64_t>(d));
  return buf;
}

ErrorCode errorOf(const std::string &expr, const std::string &params = "i32 m, i64 n") {
  auto m = asmText("def k<1>(" + params + "):\n    x = " + expr + "\n");
  REQUIRE_FALSE(m.ok());
  return m.status().code();
}

TEST_CASE("literal types: integers i32 or i64 by value, floats f32, True/False bool") {
  CHECK(typed("5") == "i32:5");
  CHECK(typed("2147483647") == "i32:2147483647");
  CHECK(typed("2147483648") == "i64:2147483648");
  CHECK(typed("0x7fffffff") == "i32:2147483647");
  CHECK(typed("0x80000000") == "i64:2147483648");
  CHECK(typed("-5") == "i32:-5");
  CHECK(typed("-2147483648") == "i64:-2147483648"); // negation of an i64 literal
  CHECK(typed("1.5") == "f32#3fc00000");
  CHECK(typed("0.1") == f32bits(0.1f));
  CHECK(typed("1e-3") == f32bits(1e-3f));
  CHECK(typed(".5") == f32bits(0.5f));
  CHECK(typed("-0.0") == "f32#80000000");
  CHECK(typed("True") == "bool:1");
  CHECK(typed("False") == "bool:0");
}

TEST_CASE("mixed i32/i64 arithmetic is i64, with explicit casts in the IR") {
  CHECK(typed("m + 1") == "(+:i32 m i32:1)");
  CHECK(typed("n + 1") == "(+:i64 n i64:1)"); // the cast of the literal is folded
  CHECK(typed("m + n") == "(+:i64 (cast:i64 m) n)");
  CHECK(typed("n * m - 2") == "(-:i64 (*:i64 n (cast:i64 m)) i64:2)");
  CHECK(typed("m < n") == "(<:bool (cast:i64 m) n)");
  CHECK(typed("m == 3") == "(==:bool m i32:3)");
  CHECK(typed("m + 2147483648") == "(+:i64 (cast:i64 m) i64:2147483648)");
  CHECK(typed("m / 2 % 3") == "(%:i32 (/:i32 m i32:2) i32:3)");
  CHECK(typed("min(m, n)") == "(min:i64 (cast:i64 m) n)");
  CHECK(typed("max(m, 4)") == "(max:i32 m i32:4)");
  CHECK(typed("cdiv(n, 64)") == "(cdiv:i64 n i64:64)");
  CHECK(typed("m << 2 | m >> 1 & ~m ^ 1") ==
        "(|:i32 (<<:i32 m i32:2) (^:i32 (&:i32 (>>:i32 m i32:1) (~:i32 m)) i32:1))");
  CHECK(typed("-m") == "(neg:i32 m)");
  CHECK(typed("+m") == "m");
}

TEST_CASE("floats, casts, conditions and logical operators") {
  CHECK(typed("f + 1", "f32 f") == "(+:f32 f f32#3f800000)");
  CHECK(typed("f + m", "f32 f, i32 m") == "(+:f32 f (cast:f32 m))");
  CHECK(typed("h + 1.5", "f16 h") == "(+:f32 (cast:f32 h) f32#3fc00000)");
  CHECK(typed("d * 0.5", "f64 d") == "(*:f64 d f64#3fe0000000000000)");
  CHECK(typed("h + b", "f16 h, bf16 b") == "(+:f32 (cast:f32 h) (cast:f32 b))");
  CHECK(typed("i64(m)") == "(cast:i64 m)");
  CHECK(typed("f16(m)") == "(cast:f16 m)");
  CHECK(typed("i32(m)") == "m"); // a cast to the same type is no node
  CHECK(typed("m if n > 0 else 7") == "(select:i32 (>:bool n i64:0) m i32:7)");
  CHECK(typed("m if n else n") == "(select:i64 n (cast:i64 m) n)");
  CHECK(typed("m and n") == "(and:bool (cast:i64 m) n)");
  CHECK(typed("not m or m > 1") == "(or:bool (not:bool m) (>:bool m i32:1))");
  CHECK(typed("b and b", "bool b") == "(and:bool b b)");
  CHECK(typed("b + 1", "bool b") == "(+:i32 (cast:i32 b) i32:1)");
  CHECK(typed("-b", "bool b") == "(neg:i32 (cast:i32 b))");
}

TEST_CASE("constant folding matches C integer semantics and IEEE floats") {
  CHECK(typed("3 * 4 + 1") == "i32:13");
  CHECK(typed("-7 / 2") == "i32:-3");
  CHECK(typed("-7 % 2") == "i32:-1");
  CHECK(typed("7 % -2") == "i32:1");
  // An integer division of constants by zero is an error, not the run-time value 0; with a
  // variable operand it stays the defined run-time operation.
  CHECK(errorOf("7 / 0") == ErrorCode::DivisionByZero);
  CHECK(errorOf("7 % (2 - 2)") == ErrorCode::DivisionByZero);
  CHECK(errorOf("cdiv(i64(7), 0)") == ErrorCode::DivisionByZero);
  CHECK(typed("m / 0") == "(/:i32 m i32:0)");
  CHECK(typed("7.0 / 0.0") == f32bits(1.0f / 0.0f));
  CHECK(typed("cdiv(7, 2)") == "i32:4");
  CHECK(typed("cdiv(-7, 2)") == "i32:-3");
  CHECK(typed("cdiv(-7, -2)") == "i32:4");
  CHECK(typed("2147483647 + 1") == "i32:-2147483648");
  CHECK(typed("1 << 31") == "i32:-2147483648");
  CHECK(typed("1 << 32") == "i32:0");
  CHECK(typed("-8 >> 1") == "i32:-4");
  CHECK(typed("i64(1) << 40") == "i64:1099511627776");
  CHECK(typed("0xff & 0x0f | 0x100 ^ 1") == "i32:271");
  CHECK(typed("~0") == "i32:-1");
  CHECK(typed("min(3, -4) + max(3, -4)") == "i32:-1");
  CHECK(typed("3 < 4") == "bool:1");
  CHECK(typed("3 < 4 and 4 < 3") == "bool:0");
  CHECK(typed("not 0") == "bool:1");
  CHECK(typed("10 if 2 > 1 else 20") == "i32:10");
  CHECK(typed("10 if 0 else i64(20)") == "i64:20");
  CHECK(typed("1.0 / 3.0") == f32bits(1.0f / 3.0f));
  CHECK(typed("0.1 + 0.2") == f32bits(0.1f + 0.2f));
  CHECK(typed("1.0 / 0.0") == "f32#7f800000");
  CHECK(typed("0.0 / 0.0") == "f32#7fc00000"); // the canonical NaN (docs/types.md)
  CHECK(typed("7.5 % 2.0") == f32bits(1.5f));
  CHECK(typed("2 * 1.5") == f32bits(3.0f));
  // Folding stops at the first non-constant operand; constant subtrees still fold.
  CHECK(typed("m * (2 + 3)") == "(*:i32 m i32:5)");
  CHECK(typed("(2 + 3) * m + 4 * 4") == "(+:i32 (*:i32 i32:5 m) i32:16)");
}

TEST_CASE("constant casts follow ISA section 2 conversions") {
  CHECK(typed("i64(5)") == "i64:5");
  CHECK(typed("i32(2.7)") == "i32:2");
  CHECK(typed("i32(-2.7)") == "i32:-2");
  CHECK(typed("i32(1e20)") == "i32:2147483647"); // saturates
  CHECK(typed("u8(300)") == "u8:44");
  CHECK(typed("i6(300)") == "i6:-20");
  CHECK(typed("u8(-1)") == "u8:255");
  CHECK(typed("bool(5)") == "bool:1");
  CHECK(typed("bool(0.0)") == "bool:0");
  CHECK(typed("f32(3)") == f32bits(3.0f));
  CHECK(typed("f16(1.5)") == "f16#3e00");
  CHECK(typed("f16(65520.0)") == "f16#7c00");    // overflow to inf
  CHECK(typed("f8e4m3(1000.0)") == "f8e4m3#7e"); // saturates to 448
  CHECK(typed("i32(f32(16777217))") == "i32:16777216");
}

TEST_CASE("a float literal written inside f64(...) is read as an f64") {
  CHECK(typed("f64(0.1)") == f64bits(0.1));
  CHECK(typed("f64(-0.1)") == f64bits(-0.1));
  CHECK(typed("f64(+2.5)") == f64bits(2.5));
  CHECK(typed("f64(1e300)") == f64bits(1e300));
  CHECK(typed("f64(-0.0)") == "f64#8000000000000000");
  // Anything else is an f32 converted to f64.
  CHECK(typed("f64(0.1 + 0.0)") == f64bits(double(0.1f)));
  CHECK(typed("f64(0.1) + 0.1") == f64bits(0.1 + double(0.1f)));
}

TEST_CASE("module constants: tuples, earlier constants, floats") {
  const char *consts = "const A, B = 3, 4\nconst C = A * B + 1\nconst S = 0.5\nconst L = 1 << 40";
  CHECK(typed("C", "i32 m", consts) == "i32:13");
  CHECK(typed("m * C", "i32 m", consts) == "(*:i32 m i32:13)");
  CHECK(typed("S * 2.0", "i32 m", consts) == f32bits(1.0f));
  CHECK(typed("A + i64(L)", "i32 m", consts) == "i64:3"); // 1 << 40 wraps to 0 in i32
  // Values are evaluated before names are bound: B cannot see A of the same declaration.
  auto m = asmText("const A, B = 1, A\n");
  CHECK_ERROR(m, ErrorCode::UndefinedName);
  CHECK(firstWhere(m.status()) == "t.tasm:1:17");
}

TEST_CASE("-D overrides replace the declared value, and later constants see it") {
  const char *src = "const A = 4\nconst B = A * 2\ndef k<1>():\n    x = B\n";
  auto value = [&](std::map<std::string, std::string> d) {
    auto m = asmText(src, d);
    REQUIRE_OK(m);
    const Program &p = m->programs[0];
    return tree(p, p.body[0].expr);
  };
  CHECK(value({}) == "i32:8");
  CHECK(value({{"A", "10"}}) == "i32:20");
  CHECK(value({{"A", " -3 "}}) == "i32:-6");
  CHECK(value({{"A", "0x10 * 2"}}) == "i32:64");
  CHECK(value({{"A", "4294967296"}}) == "i64:8589934592");
  CHECK(value({{"A", "1.5"}}) == f32bits(3.0f));
  CHECK(value({{"B", "7"}}) == "i32:7");

  auto undeclared = asmText(src, {{"Q", "1"}});
  CHECK_ERROR(undeclared, ErrorCode::UndefinedName);
  CHECK(undeclared.status().first().message == "-D Q: no constant named 'Q' is declared");
  CHECK(undeclared.status().first().location.toString() == "t.tasm");

  auto badName = asmText(src, {{"A", "N"}});
  CHECK_ERROR(badName, ErrorCode::UndefinedName);
  CHECK(badName.status().first().toString() ==
        "-D A:1:1: error[undefined-name]: undefined name 'N'");
  auto badSyntax = asmText(src, {{"A", "1 +"}});
  CHECK_ERROR(badSyntax, ErrorCode::Syntax);
  CHECK(badSyntax.status().first().location.file == "-D A");
}

TEST_CASE("typing errors") {
  CHECK(errorOf("1.0 << 2") == ErrorCode::DtypeMismatch);
  CHECK(errorOf("f & 1", "f32 f") == ErrorCode::DtypeMismatch);
  CHECK(errorOf("~f", "f32 f") == ErrorCode::DtypeMismatch);
  CHECK(errorOf("not f", "f32 f") == ErrorCode::DtypeMismatch);
  CHECK(errorOf("f and m", "f32 f, i32 m") == ErrorCode::DtypeMismatch);
  CHECK(errorOf("1 if f else 2", "f32 f") == ErrorCode::DtypeMismatch);
  CHECK(errorOf("cdiv(f, 2.0)", "f32 f") == ErrorCode::DtypeMismatch);
  CHECK(errorOf("w + 1", "i6 w") == ErrorCode::DtypeMismatch); // sub-byte: cast first
  CHECK(typed("i32(w) + 1", "i6 w") == "(+:i32 (cast:i32 w) i32:1)");
}

} // namespace
