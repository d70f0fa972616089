// Scalar expression semantics (ISA section 4), against plain C++ references written here:
// exhaustive 8-bit operand domains for the integer operators, the compiler's _Float16 and the
// host's float/double arithmetic for floats, and hand-computed expression trees.
#include "isa/convert.h"
#include "isa/scalar_eval.h"

#include <doctest/doctest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>

using namespace tilus;

namespace {

const DataType kI8 = DataType::i(8), kU8 = DataType::u(8), kI32 = DataType::i32(),
               kU32 = DataType::u(32), kI64 = DataType::i64(), kU64 = DataType::u(64),
               kBool = DataType::boolean(), kF16 = DataType::f16(), kBF16 = DataType::bf16(),
               kF32 = DataType::f32(), kF64 = DataType::f64();

uint64_t apply(ExprOp op, DataType t, uint64_t a, uint64_t b = 0) {
  uint64_t operands[3] = {a, b, 0};
  return applyScalarOp(op, t, t, operands);
}

bool cmp(ExprOp op, DataType t, uint64_t a, uint64_t b) {
  uint64_t operands[3] = {a, b, 0};
  return applyScalarOp(op, t, kBool, operands) == 1;
}

uint64_t i32(int32_t v) { return uint32_t(v); }
uint64_t i64(int64_t v) { return uint64_t(v); }
uint64_t f32(float v) { return std::bit_cast<uint32_t>(v); }
uint64_t f64(double v) { return std::bit_cast<uint64_t>(v); }
uint64_t hbits(_Float16 h) {
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
_Float16 halfOf(uint64_t bits) {
  uint16_t b = uint16_t(bits);
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return h;
}

/// The low 8 bits of an integer, as a pattern.
uint64_t low8(int64_t v) { return uint64_t(v) & 0xFF; }

struct Rng {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
};

/// Builds a Program's expression arena in post-order.
struct ExprBuilder {
  Program program;
  VarId scalar(const char *name, DataType t, VarKind kind = VarKind::Scalar) {
    program.vars.push_back({name, kind, t, false});
    return VarId(program.vars.size() - 1);
  }
  ExprId push(ExprNode node) {
    program.exprs.push_back(node);
    return ExprId(program.exprs.size() - 1);
  }
  ExprId constant(DataType t, uint64_t bits) {
    ExprNode n;
    n.op = ExprOp::Const;
    n.dtype = t;
    n.bits = bits;
    return push(n);
  }
  ExprId var(VarId v) {
    ExprNode n;
    n.op = ExprOp::Var;
    n.dtype = program.vars[v].dtype;
    n.var = v;
    return push(n);
  }
  ExprId op(ExprOp o, DataType t, ExprId a, ExprId b = kNoId, ExprId c = kNoId) {
    ExprNode n;
    n.op = o;
    n.dtype = t;
    n.operands[0] = a;
    n.operands[1] = b;
    n.operands[2] = c;
    return push(n);
  }
};

} // namespace

TEST_CASE("scalar: i8 arithmetic over every operand pair") {
  for (int a = -128; a <= 127; ++a)
    for (int b = -128; b <= 127; ++b) {
      uint64_t x = low8(a), y = low8(b);
      INFO(a << " " << b);
      CHECK(apply(ExprOp::Add, kI8, x, y) == low8(a + b));
      CHECK(apply(ExprOp::Sub, kI8, x, y) == low8(a - b));
      CHECK(apply(ExprOp::Mul, kI8, x, y) == low8(a * b));
      CHECK(apply(ExprOp::Div, kI8, x, y) == (b == 0 ? 0 : low8(a / b))); // -128/-1 wraps
      CHECK(apply(ExprOp::Mod, kI8, x, y) == (b == 0 ? 0 : low8(a % b)));
      int64_t ceil = b == 0 ? 0 : int64_t(std::ceil(double(a) / double(b)));
      CHECK(apply(ExprOp::CeilDiv, kI8, x, y) == low8(ceil));
      CHECK(apply(ExprOp::Min, kI8, x, y) == low8(std::min(a, b)));
      CHECK(apply(ExprOp::Max, kI8, x, y) == low8(std::max(a, b)));
      CHECK(apply(ExprOp::BitAnd, kI8, x, y) == low8(a & b));
      CHECK(apply(ExprOp::BitXor, kI8, x, y) == low8(a ^ b));
      CHECK(cmp(ExprOp::Lt, kI8, x, y) == (a < b));
      CHECK(cmp(ExprOp::Ge, kI8, x, y) == (a >= b));
      CHECK(cmp(ExprOp::Eq, kI8, x, y) == (a == b));
      // Shifts: amounts outside [0, 8) shift everything out.
      int64_t shl = (b < 0 || b >= 8) ? 0 : int64_t(a) * (int64_t(1) << b);
      int64_t shr =
          (b < 0 || b >= 8) ? (a < 0 ? -1 : 0) : int64_t(std::floor(double(a) / double(1 << b)));
      CHECK(apply(ExprOp::Shl, kI8, x, y) == low8(shl));
      CHECK(apply(ExprOp::Shr, kI8, x, y) == low8(shr));
    }
  for (int a = -128; a <= 127; ++a) {
    CHECK(apply(ExprOp::Neg, kI8, low8(a)) == low8(-a));
    CHECK(apply(ExprOp::BitNot, kI8, low8(a)) == low8(~a));
  }
}

TEST_CASE("scalar: u8 arithmetic over every operand pair") {
  for (unsigned a = 0; a <= 255; ++a)
    for (unsigned b = 0; b <= 255; ++b) {
      INFO(a << " " << b);
      CHECK(apply(ExprOp::Add, kU8, a, b) == low8(a + b));
      CHECK(apply(ExprOp::Sub, kU8, a, b) == low8(int64_t(a) - int64_t(b)));
      CHECK(apply(ExprOp::Mul, kU8, a, b) == low8(a * b));
      CHECK(apply(ExprOp::Div, kU8, a, b) == (b == 0 ? 0 : a / b));
      CHECK(apply(ExprOp::Mod, kU8, a, b) == (b == 0 ? 0 : a % b));
      CHECK(apply(ExprOp::CeilDiv, kU8, a, b) == (b == 0 ? 0 : (a + b - 1) / b));
      CHECK(apply(ExprOp::Min, kU8, a, b) == std::min(a, b));
      CHECK(apply(ExprOp::Max, kU8, a, b) == std::max(a, b));
      CHECK(cmp(ExprOp::Lt, kU8, a, b) == (a < b));
      CHECK(cmp(ExprOp::Ne, kU8, a, b) == (a != b));
      CHECK(apply(ExprOp::Shl, kU8, a, b) == (b >= 8 ? 0 : low8(a << b)));
      CHECK(apply(ExprOp::Shr, kU8, a, b) == (b >= 8 ? 0 : a >> b));
      CHECK(apply(ExprOp::BitOr, kU8, a, b) == (a | b));
    }
}

TEST_CASE("scalar: i32, u32 and i64 hand-computed cases") {
  CHECK(apply(ExprOp::Div, kI32, i32(-7), i32(2)) == i32(-3));
  CHECK(apply(ExprOp::Mod, kI32, i32(-7), i32(2)) == i32(-1));
  CHECK(apply(ExprOp::Div, kI32, i32(7), i32(-2)) == i32(-3));
  CHECK(apply(ExprOp::Mod, kI32, i32(7), i32(-2)) == i32(1));
  CHECK(apply(ExprOp::Div, kI32, i32(-7), i32(-2)) == i32(3));
  CHECK(apply(ExprOp::Mod, kI32, i32(-7), i32(-2)) == i32(-1));
  CHECK(apply(ExprOp::Div, kI32, i32(5), i32(0)) == 0);
  CHECK(apply(ExprOp::Mod, kI32, i32(5), i32(0)) == 0);
  CHECK(apply(ExprOp::CeilDiv, kI32, i32(5), i32(0)) == 0);
  CHECK(apply(ExprOp::Div, kI32, i32(INT32_MIN), i32(-1)) == i32(INT32_MIN));
  CHECK(apply(ExprOp::Mod, kI32, i32(INT32_MIN), i32(-1)) == 0);
  CHECK(apply(ExprOp::Div, kI64, i64(INT64_MIN), i64(-1)) == i64(INT64_MIN));
  CHECK(apply(ExprOp::Mod, kI64, i64(INT64_MIN), i64(-1)) == 0);
  CHECK(apply(ExprOp::CeilDiv, kI64, i64(INT64_MIN), i64(-1)) == i64(INT64_MIN));
  CHECK(apply(ExprOp::CeilDiv, kI32, i32(7), i32(2)) == i32(4));
  CHECK(apply(ExprOp::CeilDiv, kI32, i32(-7), i32(2)) == i32(-3));
  CHECK(apply(ExprOp::CeilDiv, kI32, i32(7), i32(-2)) == i32(-3));
  CHECK(apply(ExprOp::CeilDiv, kI32, i32(-7), i32(-2)) == i32(4));
  CHECK(apply(ExprOp::CeilDiv, kI32, i32(6), i32(3)) == i32(2));
  CHECK(apply(ExprOp::CeilDiv, kI32, i32(0), i32(3)) == 0);
  CHECK(apply(ExprOp::CeilDiv, kU32, 7, 2) == 4);
  CHECK(apply(ExprOp::CeilDiv, kU32, 0xFFFFFFFF, 2) == 0x80000000);
  CHECK(apply(ExprOp::Div, kU32, 0xFFFFFFFF, 2) == 0x7FFFFFFF);
  CHECK(apply(ExprOp::Div, kU64, ~uint64_t(0), 3) == 0x5555555555555555);
  CHECK(apply(ExprOp::Add, kI32, i32(INT32_MAX), i32(1)) == i32(INT32_MIN));
  CHECK(apply(ExprOp::Mul, kI32, i32(65536), i32(65536)) == 0);
  CHECK(apply(ExprOp::Mul, kI64, i64(1) << 32, i64(1) << 31) == i64(INT64_MIN));
  CHECK(apply(ExprOp::Shl, kI32, i32(1), i32(31)) == 0x80000000);
  CHECK(apply(ExprOp::Shl, kI32, i32(1), i32(32)) == 0);
  CHECK(apply(ExprOp::Shl, kI32, i32(1), i32(-1)) == 0);
  CHECK(apply(ExprOp::Shr, kI32, i32(-8), i32(1)) == i32(-4));
  CHECK(apply(ExprOp::Shr, kI32, i32(-8), i32(40)) == i32(-1));
  CHECK(apply(ExprOp::Shr, kI32, i32(8), i32(40)) == 0);
  CHECK(apply(ExprOp::Shr, kU32, 0x80000000, 31) == 1);
  CHECK(apply(ExprOp::Shr, kI64, i64(INT64_MIN), i64(63)) == ~uint64_t(0));
  CHECK(apply(ExprOp::Shl, kI64, i64(3), i64(62)) == (uint64_t(3) << 62));
  // 64-bit shifts by the width and beyond (a C++ shift by 64 would be undefined)
  CHECK(apply(ExprOp::Shl, kI64, i64(3), i64(64)) == 0);
  CHECK(apply(ExprOp::Shl, kU64, 3, 64) == 0);
  CHECK(apply(ExprOp::Shl, kU64, 3, 65) == 0);
  CHECK(apply(ExprOp::Shr, kU64, ~uint64_t(0), 64) == 0);
  CHECK(apply(ExprOp::Shr, kI64, i64(-8), i64(64)) == ~uint64_t(0));
  CHECK(apply(ExprOp::Shr, kI64, i64(8), i64(64)) == 0);
  CHECK(apply(ExprOp::Neg, kI32, i32(INT32_MIN)) == i32(INT32_MIN));
  CHECK(apply(ExprOp::Neg, kU32, 1) == 0xFFFFFFFF);
  CHECK(apply(ExprOp::Min, kI32, i32(-1), i32(1)) == i32(-1));
  CHECK(apply(ExprOp::Min, kU32, 0xFFFFFFFF, 1) == 1);
  CHECK(apply(ExprOp::Max, kI64, i64(-5), i64(-9)) == i64(-5));
  CHECK(cmp(ExprOp::Lt, kI32, i32(-1), 0));
  CHECK_FALSE(cmp(ExprOp::Lt, kU32, 0xFFFFFFFF, 0));
  CHECK(cmp(ExprOp::Gt, kU64, ~uint64_t(0), 1));
  CHECK_FALSE(cmp(ExprOp::Gt, kI64, ~uint64_t(0), 1));
}

TEST_CASE("scalar: bool operands") {
  CHECK(apply(ExprOp::Add, kBool, 1, 1) == 1);
  CHECK(apply(ExprOp::Add, kBool, 0, 0) == 0);
  CHECK(apply(ExprOp::Mul, kBool, 1, 0) == 0);
  CHECK(apply(ExprOp::Sub, kBool, 0, 1) == 1);
  CHECK(apply(ExprOp::Sub, kBool, 1, 1) == 0);
  CHECK(apply(ExprOp::BitNot, kBool, 1) == 0);
  CHECK(apply(ExprOp::BitNot, kBool, 0) == 1);
  CHECK(apply(ExprOp::BitXor, kBool, 1, 1) == 0);
  CHECK(apply(ExprOp::Div, kBool, 1, 0) == 0);
  CHECK(apply(ExprOp::Max, kBool, 0, 1) == 1);
  CHECK(cmp(ExprOp::Lt, kBool, 0, 1));
}

TEST_CASE("scalar: logical operators, Select and Cast") {
  uint64_t ops[3] = {i32(2), i32(4), 0};
  CHECK(applyScalarOp(ExprOp::LogicalAnd, kI32, kBool, ops) == 1);
  ops[1] = 0;
  CHECK(applyScalarOp(ExprOp::LogicalAnd, kI32, kBool, ops) == 0);
  CHECK(applyScalarOp(ExprOp::LogicalOr, kI32, kBool, ops) == 1);
  uint64_t zero[3] = {0, 0, 0};
  CHECK(applyScalarOp(ExprOp::LogicalNot, kI32, kBool, zero) == 1);
  CHECK(applyScalarOp(ExprOp::LogicalOr, kI32, kBool, zero) == 0);
  uint64_t floats[3] = {f32(-0.0f), f32(std::numeric_limits<float>::quiet_NaN()), 0};
  CHECK(applyScalarOp(ExprOp::LogicalNot, kF32, kBool, floats) == 1); // -0 is false
  CHECK(applyScalarOp(ExprOp::LogicalAnd, kF32, kBool, floats) == 0);
  CHECK(applyScalarOp(ExprOp::LogicalOr, kF32, kBool, floats) == 1); // NaN is true
  uint64_t sel[3] = {1, i64(-5), i64(7)};
  CHECK(applyScalarOp(ExprOp::Select, kI64, kI64, sel) == i64(-5));
  sel[0] = 0;
  CHECK(applyScalarOp(ExprOp::Select, kI64, kI64, sel) == i64(7));
  uint64_t cast[3] = {i32(-3), 0, 0};
  CHECK(applyScalarOp(ExprOp::Cast, kI32, kF32, cast) == f32(-3.0f));
  CHECK(applyScalarOp(ExprOp::Cast, kI32, kU8, cast) == 0xFD);
  CHECK(applyScalarOp(ExprOp::Cast, kI32, kI64, cast) == i64(-3));
  uint64_t wide[3] = {i32(-1), i32(1), 0};
  CHECK(applyScalarOp(ExprOp::Add, kI32, kI64, wide) == 0); // computed in i32, then widened
  CHECK(applyScalarOp(ExprOp::Lt, kI32, kI32, wide) == 1);  // bool converted to the result
}

TEST_CASE("scalar: float arithmetic") {
  const float inf = std::numeric_limits<float>::infinity();
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(apply(ExprOp::Div, kF32, f32(1), f32(0)) == f32(inf));
  CHECK(apply(ExprOp::Div, kF32, f32(-1), f32(0)) == f32(-inf));
  CHECK(apply(ExprOp::Div, kF32, f32(0), f32(0)) == 0x7FC00000); // canonical NaN
  CHECK(apply(ExprOp::Sub, kF64, f64(INFINITY), f64(INFINITY)) == 0x7FF8000000000000);
  CHECK(apply(ExprOp::Mod, kF32, f32(-7.5f), f32(2)) == f32(-1.5f));
  CHECK(apply(ExprOp::Mod, kF64, f64(7.5), f64(-2)) == f64(1.5));
  CHECK(apply(ExprOp::CeilDiv, kF32, f32(7), f32(2)) == f32(4));
  CHECK(apply(ExprOp::CeilDiv, kF32, f32(-7), f32(2)) == f32(-3));
  CHECK(apply(ExprOp::Neg, kF32, f32(0)) == f32(-0.0f));
  CHECK(apply(ExprOp::Neg, kF16, 0x3C00) == 0xBC00);
  CHECK(apply(ExprOp::Min, kF32, f32(nan), f32(2)) == f32(2));
  CHECK(apply(ExprOp::Max, kF32, f32(3), f32(nan)) == f32(3));
  CHECK(apply(ExprOp::Min, kF32, f32(nan), f32(nan)) == 0x7FC00000);
  CHECK(apply(ExprOp::Min, kF32, f32(0.0f), f32(-0.0f)) == f32(-0.0f));
  CHECK(apply(ExprOp::Min, kF32, f32(-0.0f), f32(0.0f)) == f32(-0.0f));
  CHECK(apply(ExprOp::Max, kF32, f32(-0.0f), f32(0.0f)) == f32(0.0f));
  CHECK(apply(ExprOp::Max, kF32, f32(0.0f), f32(-0.0f)) == f32(0.0f));
  CHECK(apply(ExprOp::Max, kF16, 0x3C00, 0xC000) == 0x3C00);
  CHECK_FALSE(cmp(ExprOp::Eq, kF32, f32(nan), f32(nan)));
  CHECK(cmp(ExprOp::Ne, kF32, f32(nan), f32(nan)));
  CHECK_FALSE(cmp(ExprOp::Lt, kF32, f32(nan), f32(1)));
  CHECK_FALSE(cmp(ExprOp::Ge, kF32, f32(nan), f32(1)));
  CHECK(cmp(ExprOp::Eq, kF32, f32(0.0f), f32(-0.0f)));
  CHECK(cmp(ExprOp::Lt, kF16, 0xBC00, 0x3C00));
  // f16: 1 + 2^-11 is a tie -> 1; 65504 + 16 is the overflow midpoint -> inf.
  CHECK(apply(ExprOp::Add, kF16, 0x3C00, 0x1000) == 0x3C00);
  CHECK(apply(ExprOp::Add, kF16, 0x7BFF, 0x4C00) == 0x7C00);
  CHECK(apply(ExprOp::Add, kBF16, 0x3F80, 0x3B80) == 0x3F80); // bf16 1 + 2^-8: tie -> 1
  CHECK(apply(ExprOp::Add, kBF16, 0x3F81, 0x3B80) == 0x3F82); // tie -> even (up)
  CHECK(apply(ExprOp::Mul, kBF16, 0x7F7F, 0x4000) == 0x7F80); // overflow to inf
}

TEST_CASE("scalar: f16, f32 and f64 arithmetic match the host's IEEE arithmetic") {
  Rng rng{1};
  const ExprOp ops[4] = {ExprOp::Add, ExprOp::Sub, ExprOp::Mul, ExprOp::Div};
  for (int k = 0; k < 200000; ++k) {
    uint64_t ha = rng.next() & 0xFFFF, hb = rng.next() & 0xFFFF;
    uint64_t fa = rng.next() & 0xFFFFFFFF, fb = rng.next() & 0xFFFFFFFF;
    uint64_t da = rng.next(), db = rng.next();
    _Float16 x = halfOf(ha), y = halfOf(hb);
    float fx = std::bit_cast<float>(uint32_t(fa)), fy = std::bit_cast<float>(uint32_t(fb));
    double dx = std::bit_cast<double>(da), dy = std::bit_cast<double>(db);
    ExprOp op = ops[k % 4];
    _Float16 h = op == ExprOp::Add   ? x + y
                 : op == ExprOp::Sub ? x - y
                 : op == ExprOp::Mul ? x * y
                                     : x / y;
    float f = op == ExprOp::Add   ? fx + fy
              : op == ExprOp::Sub ? fx - fy
              : op == ExprOp::Mul ? fx * fy
                                  : fx / fy;
    double d = op == ExprOp::Add   ? dx + dy
               : op == ExprOp::Sub ? dx - dy
               : op == ExprOp::Mul ? dx * dy
                                   : dx / dy;
    INFO(k);
    CHECK(apply(op, kF16, ha, hb) == (h != h ? 0x7E00 : hbits(h)));
    CHECK(apply(op, kF32, fa, fb) == (f != f ? 0x7FC00000 : f32(f)));
    CHECK(apply(op, kF64, da, db) == (d != d ? 0x7FF8000000000000 : f64(d)));
  }
}

TEST_CASE("scalar: promoteScalarTypes") {
  auto p = [](DataType a, DataType b) { return promoteScalarTypes(a, b); };
  CHECK(p(kI32, kI64) == kI64);
  CHECK(p(kI64, kI32) == kI64);
  CHECK(p(kI32, kI32) == kI32);
  CHECK(p(kBool, kBool) == kI32);
  CHECK(p(kBool, kI64) == kI64);
  CHECK(p(kBool, kF16) == kF16);
  CHECK(p(kI32, kF16) == kF16);
  CHECK(p(kI64, kF32) == kF32);
  CHECK(p(kF16, kBF16) == kF32);
  CHECK(p(kF16, kF32) == kF32);
  CHECK(p(kF32, kF64) == kF64);
  CHECK(p(kBF16, kBF16) == kBF16);
  CHECK(p(kU32, kI32) == kU32);
  CHECK(p(kU32, kI64) == kI64);
  CHECK(p(kU64, kI64) == kU64);
  CHECK(p(kU8, kI32) == kI32);
  CHECK(p(kI8, kU8) == kU8);
  CHECK(p(kI8, DataType::i(16)) == DataType::i(16));
  CHECK_FALSE(p(DataType::f8e4m3(), kF32).has_value());
  CHECK_FALSE(p(DataType::i(6), kI32).has_value());
  CHECK_FALSE(p(kI32, DataType::u(1)).has_value());
  CHECK_FALSE(p(kI32, DataType{TypeKind::Int, 12, 0, 0}).has_value());
}

TEST_CASE("scalar: evaluateExpr on hand-built trees") {
  ExprBuilder b;
  VarId x = b.scalar("x", kI32);
  VarId y = b.scalar("y", kI64);
  VarId flag = b.scalar("flag", kBool);
  VarId h = b.scalar("h", kF16);
  VarId ptr = b.scalar("p", kF16, VarKind::Pointer);
  std::map<VarId, uint64_t> values = {
      {x, i32(-10)}, {y, i64(1) << 40}, {flag, 1}, {h, 0x3C00}, {ptr, 0xDEAD0000}};
  VarValueFn value = [&](VarId v) { return values.at(v); };
  const Program &p = b.program;

  // (x + 3) / -2 with x = -10: -7 / -2 = 3 (truncating)
  ExprId e1 = b.op(ExprOp::Div, kI32, b.op(ExprOp::Add, kI32, b.var(x), b.constant(kI32, 3)),
                   b.constant(kI32, i32(-2)));
  CHECK(evaluateExpr(p, e1, value) == 3);
  // x % 4 and cdiv(x, 4): -2 and -2
  CHECK(evaluateExpr(p, b.op(ExprOp::Mod, kI32, b.var(x), b.constant(kI32, 4)), value) == i32(-2));
  CHECK(evaluateExpr(p, b.op(ExprOp::CeilDiv, kI32, b.var(x), b.constant(kI32, 4)), value) ==
        i32(-2));
  // x + y in i64: the i32 operand is sign-extended
  CHECK(evaluateExpr(p, b.op(ExprOp::Add, kI64, b.var(x), b.var(y)), value) ==
        i64((int64_t(1) << 40) - 10));
  // x < 0 compared after promotion to i64 (not as a u32 pattern)
  ExprId lt = b.op(ExprOp::Lt, kBool, b.var(x), b.constant(kI64, 0));
  CHECK(evaluateExpr(p, lt, value) == 1);
  // 10 if x < 0 else 20, with i32 branches in an i64 node
  ExprId sel = b.op(ExprOp::Select, kI64, b.op(ExprOp::Lt, kBool, b.var(x), b.constant(kI32, 0)),
                    b.constant(kI32, 10), b.constant(kI32, i32(-20)));
  CHECK(evaluateExpr(p, sel, value) == 10);
  values[x] = i32(5);
  CHECK(evaluateExpr(p, sel, value) == i64(-20));
  // x and flag; not x
  CHECK(evaluateExpr(p, b.op(ExprOp::LogicalAnd, kBool, b.var(x), b.var(flag)), value) == 1);
  CHECK(evaluateExpr(p, b.op(ExprOp::LogicalNot, kBool, b.var(x)), value) == 0);
  // f32(x), x = 5; i64 -> f32 cast of 2^40
  CHECK(evaluateExpr(p, b.op(ExprOp::Cast, kF32, b.var(x)), value) == f32(5.0f));
  CHECK(evaluateExpr(p, b.op(ExprOp::Cast, kF32, b.var(y)), value) == 0x53800000);
  // h + 0.5 in f16 (1.5 = 0x3E00); comparison of f16 with an i32 is done in f16
  CHECK(evaluateExpr(p, b.op(ExprOp::Add, kF16, b.var(h), b.constant(kF16, 0x3800)), value) ==
        0x3E00);
  CHECK(evaluateExpr(p, b.op(ExprOp::Eq, kBool, b.var(h), b.constant(kI32, 1)), value) == 1);
  // -8 >> 1 (arithmetic), ~x
  CHECK(evaluateExpr(p, b.op(ExprOp::Shr, kI32, b.constant(kI32, i32(-8)), b.constant(kI32, 1)),
                     value) == i32(-4));
  CHECK(evaluateExpr(p, b.op(ExprOp::BitNot, kI32, b.var(x)), value) == i32(-6));
  // leaves: a pointer is its address; a constant is masked to its type
  CHECK(evaluateExpr(p, b.var(ptr), value) == 0xDEAD0000);
  CHECK(evaluateExpr(p, b.constant(kI32, 0x1FFFFFFFF), value) == 0xFFFFFFFF);
  CHECK(evaluateExpr(p, b.op(ExprOp::Add, kI64, b.constant(kI32, 0xFFFFFFFF), b.constant(kI64, 1)),
                     value) == 0);
  CHECK(evaluateExpr(p, b.op(ExprOp::Min, kI64, b.var(y), b.var(x)), value) == 5);
}

TEST_CASE("scalar: evaluateExpr is iterative and re-entrant") {
  ExprBuilder b;
  constexpr int64_t kDepth = 300000; // far beyond what recursion on the native stack survives
  ExprId acc = b.constant(kI64, 0);
  for (int64_t k = 1; k <= kDepth; ++k)
    acc = b.op(ExprOp::Add, kI64, acc, b.constant(kI64, uint64_t(k)));
  VarValueFn none = [](VarId) -> uint64_t { return 0; };
  CHECK(evaluateExpr(b.program, acc, none) == uint64_t(kDepth * (kDepth + 1) / 2));

  // A variable whose value is itself computed by evaluateExpr, from inside an evaluation.
  ExprBuilder c;
  VarId v = c.scalar("v", kI32);
  ExprId inner = c.op(ExprOp::Mul, kI32, c.constant(kI32, 6), c.constant(kI32, 7));
  ExprId outer =
      c.op(ExprOp::Sub, kI32, c.op(ExprOp::Add, kI32, c.var(v), c.constant(kI32, 1)), c.var(v));
  ExprId outer2 = c.op(ExprOp::Mul, kI32, outer, c.var(v));
  VarValueFn nested = [&](VarId) { return evaluateExpr(c.program, inner, none); };
  CHECK(evaluateExpr(c.program, outer2, nested) == 42); // ((42 + 1) - 42) * 42
}
