// Typing and constant folding of scalar expressions (ISA section 4 "Scalars", docs/ir.md).
//
// The builder walks the syntax tree once, bottom up. Each operator node gets its type from
// promoteScalarTypes (mixed i32/i64 is i64, an integer with a float is the float, bool promotes
// to i32); operands of another type are wrapped in explicit Cast nodes, so consumers never have
// to re-derive implicit conversions. When every operand of an operator is a constant, the node
// is folded right away by evaluating it with evaluateExpr / applyScalarOp (isa/scalar_eval.h),
// the functions the interpreter evaluates with, so a folded constant is bit-for-bit the value
// the program would compute at run time:
//
//   BM * 2 + n      (BM = 64, n: i64)   ->   Add:i64(Cast:i64(Const:i32 128), Var n)
//                                       ->   Add:i64(Const:i64 128, Var n)      (cast folded)
//
// Types are values of their own at assembly time (type constants, `const WT = u4`): a type
// expression is never emitted, it only selects types and folds into the type builtins
// (`bits(WT)`, `is_float(WT)`, ...) and type comparisons (`WT == u4`), which are constants.
//
// Literals: integers are i32 (i64 when they do not fit), floats f32, True/False bool. A float
// literal written directly inside `f64(...)` (optionally negated) is read as an f64, so that
// `f64(0.1)` is the double nearest 0.1 rather than the widened f32.
#include "assembler/scalar_expr.h"

#include "isa/convert.h"
#include "isa/scalar_eval.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace tilus::tasm {

DataType integerLiteralType(int64_t value) {
  return (value >= INT32_MIN && value <= INT32_MAX) ? DataType::i32() : DataType::i64();
}

TypedExpr castTo(TypedExpr e, DataType to) {
  if (e.dtype == to)
    return e;
  if (e.isConst()) {
    uint64_t bits = e.bits;
    return TypedExpr::constant(to, applyScalarOp(ExprOp::Cast, e.dtype, to, &bits));
  }
  TypedExpr c;
  c.op = ExprOp::Cast;
  c.dtype = to;
  c.operands.push_back(std::move(e));
  return c;
}

ExprId emitExpr(Program &program, const TypedExpr &e) {
  ExprNode node;
  node.op = e.op;
  node.dtype = e.dtype;
  node.bits = e.bits;
  node.var = e.var;
  for (size_t k = 0; k < e.operands.size(); ++k)
    node.operands[k] = emitExpr(program, e.operands[k]);
  program.exprs.push_back(node);
  return ExprId(program.exprs.size() - 1);
}

namespace {

enum class OpClass : uint8_t { Arith, Integer, Compare, Logical };

struct BinaryOpInfo {
  const char *text;
  ExprOp op;
  OpClass cls;
};

constexpr BinaryOpInfo kBinaryOps[] = {
    {"+", ExprOp::Add, OpClass::Arith},
    {"-", ExprOp::Sub, OpClass::Arith},
    {"*", ExprOp::Mul, OpClass::Arith},
    {"/", ExprOp::Div, OpClass::Arith},
    {"%", ExprOp::Mod, OpClass::Arith},
    {"<<", ExprOp::Shl, OpClass::Integer},
    {">>", ExprOp::Shr, OpClass::Integer},
    {"&", ExprOp::BitAnd, OpClass::Integer},
    {"|", ExprOp::BitOr, OpClass::Integer},
    {"^", ExprOp::BitXor, OpClass::Integer},
    {"==", ExprOp::Eq, OpClass::Compare},
    {"!=", ExprOp::Ne, OpClass::Compare},
    {"<", ExprOp::Lt, OpClass::Compare},
    {"<=", ExprOp::Le, OpClass::Compare},
    {">", ExprOp::Gt, OpClass::Compare},
    {">=", ExprOp::Ge, OpClass::Compare},
    {"and", ExprOp::LogicalAnd, OpClass::Logical},
    {"or", ExprOp::LogicalOr, OpClass::Logical},
    {"min", ExprOp::Min, OpClass::Arith},
    {"max", ExprOp::Max, OpClass::Arith},
    {"cdiv", ExprOp::CeilDiv, OpClass::Integer},
};

const BinaryOpInfo *findBinaryOp(std::string_view text) {
  for (const BinaryOpInfo &info : kBinaryOps)
    if (text == info.text)
      return &info;
  return nullptr;
}

/// An operator node, folded when all operands are constants. Folding evaluates the node with
/// evaluateExpr on a two-level arena, which is exactly what the interpreter computes.
TypedExpr makeOp(ExprOp op, DataType result, std::vector<TypedExpr> operands) {
  bool allConst = true;
  for (const TypedExpr &o : operands)
    allConst = allConst && o.isConst();
  if (allConst) {
    Program tmp;
    ExprNode node;
    node.op = op;
    node.dtype = result;
    for (size_t k = 0; k < operands.size(); ++k) {
      ExprNode leaf;
      leaf.dtype = operands[k].dtype;
      leaf.bits = operands[k].bits;
      tmp.exprs.push_back(leaf);
      node.operands[k] = ExprId(k);
    }
    tmp.exprs.push_back(node);
    uint64_t bits = evaluateExpr(tmp, ExprId(operands.size()), [](VarId) { return uint64_t(0); });
    return TypedExpr::constant(result, bits);
  }
  TypedExpr e;
  e.op = op;
  e.dtype = result;
  e.operands = std::move(operands);
  return e;
}

bool isCondition(DataType t) { return t.isBool() || t.isInt(); }

bool isTypeBuiltin(const std::string &f) {
  return f == "bits" || f == "is_float" || f == "is_int" || f == "is_signed" ||
         f == "exponent_bits" || f == "mantissa_bits";
}

class Builder {
public:
  explicit Builder(const ExprContext &ctx) : ctx_(ctx) {}

  Expected<TypedExpr> build(const AstExpr &ast);

private:
  /// Every child of `ast` built in order; the first error stops.
  Expected<std::vector<TypedExpr>> children(const AstExpr &ast);
  Status error(ErrorCode code, SrcPos at, std::string message) const {
    return Status::error(code, std::move(message), makeLocation(ctx_.fileName, at));
  }
  Expected<TypedExpr> name(const AstExpr &ast);
  Expected<TypedExpr> floatLiteral(const AstExpr &ast, bool asF64, bool negate);
  Expected<TypedExpr> unary(const AstExpr &ast);
  Expected<TypedExpr> binary(const BinaryOpInfo &info, SrcPos at, TypedExpr a, TypedExpr b);
  Expected<TypedExpr> ternary(const AstExpr &ast);
  Expected<TypedExpr> call(const AstExpr &ast);
  Expected<TypedExpr> cast(const AstExpr &ast, DataType to);
  Expected<TypedExpr> typeComparison(const AstExpr &ast);
  Expected<TypedExpr> typeBuiltin(const AstExpr &ast);

  const ExprContext &ctx_;
};

Expected<TypedExpr> Builder::build(const AstExpr &ast) {
  switch (ast.kind) {
  case AstKind::Name:
    return name(ast);
  case AstKind::Int: {
    DataType t = integerLiteralType(ast.intValue);
    return TypedExpr::constant(t, uint64_t(ast.intValue) & bitMask(t.bits));
  }
  case AstKind::Float:
    return floatLiteral(ast, false, false);
  case AstKind::Unary:
    return unary(ast);
  case AstKind::Binary: {
    if ((ast.text == "==" || ast.text == "!=") &&
        (isTypeExpr(*ast.children[0], ctx_) || isTypeExpr(*ast.children[1], ctx_)))
      return typeComparison(ast);
    auto ops = children(ast);
    if (!ops)
      return ops.takeStatus();
    return binary(*findBinaryOp(ast.text), ast.pos, std::move((*ops)[0]), std::move((*ops)[1]));
  }
  case AstKind::Ternary:
    return ternary(ast);
  case AstKind::Call:
    return call(ast);
  case AstKind::String:
    return error(ErrorCode::BadArgument, ast.pos, "a string is not a scalar expression");
  case AstKind::List:
  case AstKind::Slice:
    return error(ErrorCode::BadArgument, ast.pos, "a list is not a scalar expression");
  case AstKind::Dot:
    return error(ErrorCode::BadArgument, ast.pos, "a layout expression is not a scalar expression");
  }
  return error(ErrorCode::Syntax, ast.pos, "malformed expression");
}

Expected<TypedExpr> Builder::name(const AstExpr &ast) {
  if (ast.text == "True" || ast.text == "False")
    return TypedExpr::constant(DataType::boolean(), ast.text == "True" ? 1 : 0);
  NameMeaning m = ctx_.lookup ? ctx_.lookup(ast.text) : NameMeaning{};
  switch (m.kind) {
  case NameMeaning::Kind::None:
    if (DataType::parse(ast.text))
      return error(ErrorCode::DtypeMismatch, ast.pos,
                   "data type " + ast.text + " is not a value (bits(" + ast.text +
                       ") is its width)");
    return error(ErrorCode::UndefinedName, ast.pos, "undefined name '" + ast.text + "'");
  case NameMeaning::Kind::Constant:
    return TypedExpr::constant(m.dtype, m.bits);
  case NameMeaning::Kind::Type:
    return error(ErrorCode::DtypeMismatch, ast.pos,
                 "'" + ast.text + "' is a data type constant (" + m.dtype.name() +
                     "), not a value (bits(" + ast.text + ") is its width)");
  case NameMeaning::Kind::Variable:
    break;
  }
  if (ctx_.inAssert && !(m.varKind == VarKind::Scalar && m.isParam))
    return error(ErrorCode::AssertExpr, ast.pos,
                 "assert condition uses '" + ast.text +
                     "' (only constants and scalar parameters are allowed: an assert is checked "
                     "before the launch)");
  if (ctx_.inSpecialize && !(m.varKind == VarKind::Scalar && m.isParam))
    return error(ErrorCode::SpecializeExpr, ast.pos,
                 "specialized value uses '" + ast.text +
                     "' (only constants and scalar parameters are allowed: it is computed before "
                     "the launch)");
  switch (m.varKind) {
  case VarKind::Scalar: {
    TypedExpr e;
    e.op = ExprOp::Var;
    e.dtype = m.dtype;
    e.var = m.var;
    return e;
  }
  case VarKind::Pointer:
    if (ctx_.inGrid)
      return error(ErrorCode::GridExpr, ast.pos,
                   "grid dimension uses pointer parameter '" + ast.text +
                       "' (only constants and scalar parameters are allowed)");
    return error(ErrorCode::Scope, ast.pos,
                 "pointer '" + ast.text + "' cannot be used in a scalar expression");
  case VarKind::Register:
  case VarKind::Shared:
  case VarKind::Global:
  case VarKind::None:
    break;
  }
  const char *space = m.varKind == VarKind::Register ? "register"
                      : m.varKind == VarKind::Shared ? "shared"
                                                     : "global";
  return error(ErrorCode::Scope, ast.pos,
               std::string(space) + " tensor '" + ast.text +
                   "' cannot be used in a scalar expression");
}

Expected<TypedExpr> Builder::floatLiteral(const AstExpr &ast, bool asF64, bool negate) {
  errno = 0;
  if (asF64) {
    double v = std::strtod(ast.text.c_str(), nullptr);
    if (std::isinf(v))
      return error(ErrorCode::Syntax, ast.pos, "float literal " + ast.text + " overflows f64");
    return TypedExpr::constant(DataType::f64(), std::bit_cast<uint64_t>(negate ? -v : v));
  }
  float v = std::strtof(ast.text.c_str(), nullptr);
  if (std::isinf(v))
    return error(ErrorCode::Syntax, ast.pos,
                 "float literal " + ast.text + " overflows f32 (write f64(" + ast.text +
                     ") for an f64 constant)");
  return TypedExpr::constant(DataType::f32(), std::bit_cast<uint32_t>(negate ? -v : v));
}

Expected<TypedExpr> Builder::unary(const AstExpr &ast) {
  auto a = build(*ast.children[0]);
  if (!a)
    return a;
  DataType t = a->dtype;
  if (ast.text == "not") {
    if (!isCondition(t))
      return error(ErrorCode::DtypeMismatch, ast.pos,
                   "operand of 'not' must be bool or an integer, got " + t.name());
    return makeOp(ExprOp::LogicalNot, DataType::boolean(), {std::move(*a)});
  }
  if (ast.text == "~" && t.isFloat())
    return error(ErrorCode::DtypeMismatch, ast.pos,
                 "operand of '~' must be an integer, got " + t.name());
  TypedExpr operand = t.isBool() ? castTo(std::move(*a), DataType::i32()) : std::move(*a);
  if (ast.text == "+")
    return operand;
  DataType rt = operand.dtype;
  return makeOp(ast.text == "-" ? ExprOp::Neg : ExprOp::BitNot, rt, {std::move(operand)});
}

Expected<TypedExpr> Builder::binary(const BinaryOpInfo &info, SrcPos at, TypedExpr a, TypedExpr b) {
  DataType ta = a.dtype, tb = b.dtype;
  if (info.cls == OpClass::Logical && (!isCondition(ta) || !isCondition(tb)))
    return error(ErrorCode::DtypeMismatch, at,
                 std::string("operands of '") + info.text + "' must be bool or integers, got " +
                     ta.name() + " and " + tb.name());
  bool keepEqual = info.cls == OpClass::Compare || info.cls == OpClass::Logical;
  std::optional<DataType> common = (keepEqual && ta == tb) ? ta : promoteScalarTypes(ta, tb);
  if (!common)
    return error(ErrorCode::DtypeMismatch, at,
                 std::string("operands of '") + info.text + "' have incompatible types " +
                     ta.name() + " and " + tb.name());
  if (info.cls == OpClass::Integer && !common->isInt())
    return error(ErrorCode::DtypeMismatch, at,
                 std::string("'") + info.text + "' needs integer operands, got " + ta.name() +
                     " and " + tb.name());
  DataType result = keepEqual ? DataType::boolean() : *common;
  std::vector<TypedExpr> ops;
  ops.push_back(castTo(std::move(a), *common));
  ops.push_back(castTo(std::move(b), *common));
  // Integer `/`, `%` and `cdiv` by zero give 0 at run time (ISA section 5); written with
  // constants only it is a mistake, not a value (`<1 / 0>` would be a grid of no blocks).
  bool integerDivision =
      info.op == ExprOp::Div || info.op == ExprOp::Mod || info.op == ExprOp::CeilDiv;
  if (integerDivision && common->isInt() && ops[0].isConst() && ops[1].isConst() &&
      ops[1].bits == 0)
    return error(ErrorCode::DivisionByZero, at,
                 std::string("constant expression divides by zero ('") + info.text +
                     "' with a divisor of 0)");
  return makeOp(info.op, result, std::move(ops));
}

Expected<std::vector<TypedExpr>> Builder::children(const AstExpr &ast) {
  std::vector<TypedExpr> built;
  for (const AstExprPtr &child : ast.children) {
    auto e = build(*child);
    if (!e)
      return e.takeStatus();
    built.push_back(std::move(*e));
  }
  return built;
}

// `then if cond else other`: the children in source order.
Expected<TypedExpr> Builder::ternary(const AstExpr &ast) {
  auto built = children(ast);
  if (!built)
    return built.takeStatus();
  TypedExpr &then = (*built)[0], &cond = (*built)[1], &other = (*built)[2];
  if (!isCondition(cond.dtype))
    return error(ErrorCode::DtypeMismatch, ast.children[1]->pos,
                 "condition must be bool or an integer, got " + cond.dtype.name());
  DataType ta = then.dtype, tb = other.dtype;
  std::optional<DataType> common = ta == tb ? ta : promoteScalarTypes(ta, tb);
  if (!common)
    return error(ErrorCode::DtypeMismatch, ast.pos,
                 "branches of a conditional expression have incompatible types " + ta.name() +
                     " and " + tb.name());
  std::vector<TypedExpr> ops;
  ops.push_back(std::move(cond));
  ops.push_back(castTo(std::move(then), *common));
  ops.push_back(castTo(std::move(other), *common));
  return makeOp(ExprOp::Select, *common, std::move(ops));
}

Expected<TypedExpr> Builder::call(const AstExpr &ast) {
  const std::string &f = ast.text;
  const BinaryOpInfo *builtin =
      (f == "min" || f == "max" || f == "cdiv") ? findBinaryOp(f) : nullptr;
  if (isTypeBuiltin(f))
    return typeBuiltin(ast);
  std::optional<DataType> castType = DataType::parse(f);
  if (!builtin && !castType && ctx_.lookup) {
    NameMeaning m = ctx_.lookup(f);
    if (m.kind == NameMeaning::Kind::Type)
      castType = m.dtype;
  }
  if (!builtin && !castType) {
    if (findInstruction(f))
      return error(ErrorCode::BadArgument, ast.pos,
                   "instruction '" + f + "' cannot be used inside a scalar expression");
    return error(ErrorCode::UnknownInstruction, ast.pos,
                 "no instruction or builtin function named '" + f + "'");
  }
  size_t want = builtin ? 2 : 1;
  for (const AstArg &arg : ast.args)
    if (!arg.keyword.empty())
      return error(ErrorCode::BadArgument, arg.pos,
                   f + "() takes no keyword arguments, got '" + arg.keyword + "'");
  if (ast.args.size() != want)
    return error(ErrorCode::BadArgument, ast.pos,
                 f + "() takes " + std::to_string(want) + " argument" + (want == 1 ? "" : "s") +
                     ", got " + std::to_string(ast.args.size()));
  if (castType)
    return cast(*ast.args[0].value, *castType);
  auto a = build(*ast.args[0].value);
  if (!a)
    return a;
  auto b = build(*ast.args[1].value);
  if (!b)
    return b;
  return binary(*builtin, ast.pos, std::move(*a), std::move(*b));
}

Expected<TypedExpr> Builder::cast(const AstExpr &operand, DataType to) {
  if (to == DataType::f64()) {
    const AstExpr *lit = &operand;
    bool negate = false;
    if (lit->kind == AstKind::Unary && (lit->text == "-" || lit->text == "+") &&
        lit->children[0]->kind == AstKind::Float) {
      negate = lit->text == "-";
      lit = lit->children[0].get();
    }
    if (lit->kind == AstKind::Float)
      return floatLiteral(*lit, true, negate);
  }
  auto a = build(operand);
  if (!a)
    return a;
  return castTo(std::move(*a), to);
}

// `A == B` / `A != B` where one side is a type expression: both must be types; the result is a
// bool constant.
Expected<TypedExpr> Builder::typeComparison(const AstExpr &ast) {
  DataType types[2];
  for (int k = 0; k < 2; ++k) {
    const AstExpr &side = *ast.children[size_t(k)];
    auto t = buildType(side, ctx_, ErrorCode::DtypeMismatch,
                       "'" + ast.text + "' compares a data type with a value");
    if (!t)
      return t.takeStatus();
    types[k] = *t;
  }
  bool equal = types[0] == types[1];
  return TypedExpr::constant(DataType::boolean(), (ast.text == "==") == equal ? 1 : 0);
}

// bits(T) is_float(T) is_int(T) is_signed(T) exponent_bits(T) mantissa_bits(T): constants.
Expected<TypedExpr> Builder::typeBuiltin(const AstExpr &ast) {
  const std::string &f = ast.text;
  if (ast.args.size() != 1 || !ast.args[0].keyword.empty())
    return error(ErrorCode::BadArgument, ast.pos, f + "() takes one data type");
  auto t =
      buildType(*ast.args[0].value, ctx_, ErrorCode::DtypeMismatch, f + "() takes a data type");
  if (!t)
    return t.takeStatus();
  if (f == "bits")
    return TypedExpr::constant(DataType::i32(), uint64_t(t->storageBits()));
  if (f == "exponent_bits")
    return TypedExpr::constant(DataType::i32(), t->isFloat() ? t->exponent : 0);
  if (f == "mantissa_bits")
    return TypedExpr::constant(DataType::i32(), t->isFloat() ? t->mantissa : 0);
  bool value = f == "is_float" ? t->isFloat()
               : f == "is_int" ? t->isInt()
                               : t->isSigned() || t->isFloat(); // is_signed
  return TypedExpr::constant(DataType::boolean(), value ? 1 : 0);
}

uint32_t depthOf(const TypedExpr &e) {
  uint32_t d = 0;
  for (const TypedExpr &o : e.operands)
    d = std::max(d, depthOf(o));
  return d + 1;
}

} // namespace

Expected<TypedExpr> buildScalar(const AstExpr &ast, const ExprContext &ctx) {
  auto e = Builder(ctx).build(ast);
  if (!e)
    return e;
  uint32_t depth = depthOf(*e);
  if (depth > kMaxTypedExprDepth)
    return Status::error(ErrorCode::Syntax,
                         "expression too deep (" + std::to_string(depth) + " levels with its " +
                             "conversions; at most " + std::to_string(kMaxTypedExprDepth) + ")",
                         makeLocation(ctx.fileName, ast.pos));
  return e;
}

Expected<TypedExpr> buildAssertCondition(const AstExpr &ast, const ExprContext &ctx) {
  auto e = buildScalar(ast, ctx);
  if (e && !e->dtype.isBool())
    return Status::error(ErrorCode::DtypeMismatch,
                         "assert condition must be bool (a comparison, `and`, `or`, `not`), got " +
                             e->dtype.name(),
                         makeLocation(ctx.fileName, ast.pos));
  return e;
}

bool isTypeExpr(const AstExpr &ast, const ExprContext &ctx) {
  if (ast.kind == AstKind::Ternary)
    return isTypeExpr(*ast.children[0], ctx);
  if (ast.kind != AstKind::Name)
    return false;
  NameMeaning m = ctx.lookup ? ctx.lookup(ast.text) : NameMeaning{};
  if (m.kind == NameMeaning::Kind::Type)
    return true;
  return m.kind == NameMeaning::Kind::None && DataType::parse(ast.text).has_value();
}

Expected<DataType> buildType(const AstExpr &ast, const ExprContext &ctx, ErrorCode code,
                             const std::string &notType) {
  auto fail = [&](ErrorCode c, SrcPos at, std::string message) -> Expected<DataType> {
    return Status::error(c, std::move(message), makeLocation(ctx.fileName, at));
  };
  if (ast.kind == AstKind::Ternary) {
    auto cond = buildScalar(*ast.children[1], ctx);
    if (!cond)
      return cond.takeStatus();
    if (!cond->isConst() || !isCondition(cond->dtype))
      return fail(ErrorCode::BadArgument, ast.children[1]->pos,
                  "the condition of a choice between data types must be a bool or integer "
                  "constant");
    return buildType(*ast.children[cond->bits != 0 ? 0 : 2], ctx, code, notType);
  }
  if (ast.kind != AstKind::Name)
    return fail(code, ast.pos, notType);
  if (std::optional<DataType> t = DataType::parse(ast.text))
    return *t;
  NameMeaning m = ctx.lookup ? ctx.lookup(ast.text) : NameMeaning{};
  switch (m.kind) {
  case NameMeaning::Kind::Type:
    return m.dtype;
  case NameMeaning::Kind::Constant:
    return fail(ErrorCode::DtypeMismatch, ast.pos,
                "'" + ast.text + "' is a number constant (" + m.dtype.name() +
                    "), not a data type");
  case NameMeaning::Kind::Variable:
    return fail(ErrorCode::DtypeMismatch, ast.pos,
                "'" + ast.text + "' is a variable, not a data type");
  case NameMeaning::Kind::None:
    break;
  }
  return fail(code, ast.pos, notType);
}

Expected<int64_t> buildIntConstant(const AstExpr &ast, const ExprContext &ctx, ErrorCode code,
                                   const std::string &what) {
  auto e = buildScalar(ast, ctx);
  if (!e)
    return e.takeStatus();
  if (!e->isConst() || !e->dtype.isInt())
    return Status::error(code, what + " must be an integer constant",
                         makeLocation(ctx.fileName, ast.pos));
  return toInt64(e->bits, e->dtype);
}

bool isScalarBuiltin(const std::string &name) {
  return name == "min" || name == "max" || name == "cdiv" || isTypeBuiltin(name);
}

} // namespace tilus::tasm
