// Scalar expressions and the operator semantics shared with elementwise instructions.
//
// The rules are those of isa/scalar_eval.h, which the interpreter uses for scalars and for
// every elementwise operator, so that a kernel and the interpreter agree bit for bit:
//   - integers wrap in their width; `/` and `%` truncate, a zero divisor gives 0, and a divisor
//     of -1 gives -x (wrapping) and 0, so INT_MIN / -1 never reaches the hardware;
//   - shift amounts that are negative or >= the width shift everything out (0, or the sign
//     fill for an arithmetic right shift);
//   - bool arithmetic acts on 0/1 and gives x != 0; BitNot on bool is logical not;
//   - f16 and bf16 are computed in f32 and rounded once (innocuous: 24 >= 2p + 2 bits), f32 and
//     f64 natively with IEEE rounding (PTX .rn, never contracted into fma); float `%` is the
//     exact fmod of the device library; NaN results are the canonical NaN of the type;
//   - float Min/Max are IEEE minNum/maxNum with -0 < +0.
// Each expression node converts its operands from their own types first (arithmetic: to the
// node's type; comparisons: to the promoted type of the two; logical operators: to bool).
#include "jit/codegen.h"

#include "isa/convert.h"
#include "isa/scalar_eval.h"

#include <llvm/IR/InlineAsm.h>

#include <cassert>
#include <string>

namespace tilus::jit {

namespace {

bool isNativeFloat(DataType t) {
  return t == DataType::f16() || t == DataType::bf16() || t == DataType::f32() ||
         t == DataType::f64();
}

} // namespace

llvm::Value *Codegen::truth(llvm::Value *v, DataType t) {
  return convert(v, t, DataType::boolean());
}

llvm::Value *Codegen::canonicalizeNaN(llvm::Value *v, DataType t) {
  if (!isNativeFloat(t))
    return v;
  llvm::Value *isNaN = b.CreateFCmpUNO(v, v);
  return b.CreateSelect(isNaN, constBits(t, canonicalNaN(t)), v);
}

llvm::Value *Codegen::exprI64(ExprId id) {
  return convert(emitExpr(id), prog.expr(id).dtype, DataType::i64());
}

llvm::Value *Codegen::scalarArg(const Argument &arg, DataType t) {
  return convert(emitExpr(arg.expr), prog.expr(arg.expr).dtype, t);
}

namespace {

/// The operand type of a comparison (isa/scalar_eval.cpp operandTypeOf).
DataType comparisonType(DataType a, DataType c) {
  if (std::optional<DataType> common = promoteScalarTypes(a, c))
    return *common;
  if (a == c)
    return a;
  return (a.isFloat() || c.isFloat()) ? DataType::f64() : DataType::i64();
}

} // namespace

llvm::Value *Codegen::emitExpr(ExprId id) {
  const ExprNode &node = prog.expr(id);
  DataType t = node.dtype;
  switch (node.op) {
  case ExprOp::Const:
    return constBits(t, node.bits);
  case ExprOp::Var:
    return convert(readScalar(node.var), prog.var(node.var).dtype, t);
  case ExprOp::Cast:
    return convert(emitExpr(node.operands[0]), prog.expr(node.operands[0]).dtype, t);
  case ExprOp::Select: {
    llvm::Value *cond = truth(emitExpr(node.operands[0]), prog.expr(node.operands[0]).dtype);
    llvm::Value *x = convert(emitExpr(node.operands[1]), prog.expr(node.operands[1]).dtype, t);
    llvm::Value *y = convert(emitExpr(node.operands[2]), prog.expr(node.operands[2]).dtype, t);
    return b.CreateSelect(cond, x, y);
  }
  case ExprOp::LogicalNot:
    return convert(
        b.CreateNot(truth(emitExpr(node.operands[0]), prog.expr(node.operands[0]).dtype)),
        DataType::boolean(), t);
  case ExprOp::LogicalAnd:
  case ExprOp::LogicalOr: {
    llvm::Value *x = truth(emitExpr(node.operands[0]), prog.expr(node.operands[0]).dtype);
    llvm::Value *y = truth(emitExpr(node.operands[1]), prog.expr(node.operands[1]).dtype);
    llvm::Value *r = node.op == ExprOp::LogicalAnd ? b.CreateAnd(x, y) : b.CreateOr(x, y);
    return convert(r, DataType::boolean(), t);
  }
  case ExprOp::Eq:
  case ExprOp::Ne:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge: {
    DataType ta = prog.expr(node.operands[0]).dtype, tb = prog.expr(node.operands[1]).dtype;
    DataType ct = comparisonType(ta, tb);
    llvm::Value *x = convert(emitExpr(node.operands[0]), ta, ct);
    llvm::Value *y = convert(emitExpr(node.operands[1]), tb, ct);
    return convert(applyOp(node.op, ct, x, y), DataType::boolean(), t);
  }
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
  case ExprOp::Min:
  case ExprOp::Max:
  case ExprOp::CeilDiv: {
    llvm::Value *x = convert(emitExpr(node.operands[0]), prog.expr(node.operands[0]).dtype, t);
    llvm::Value *y = convert(emitExpr(node.operands[1]), prog.expr(node.operands[1]).dtype, t);
    return applyOp(node.op, t, x, y);
  }
  case ExprOp::BitNot:
  case ExprOp::Neg: {
    llvm::Value *x = convert(emitExpr(node.operands[0]), prog.expr(node.operands[0]).dtype, t);
    return applyOp(node.op, t, x, nullptr);
  }
  }
  return llvm::UndefValue::get(elemType(t));
}

namespace {

/// Integer division with the ISA's guards (see the file comment). Op is Div, Mod or CeilDiv.
llvm::Value *intDivide(llvm::IRBuilder<> &b, ExprOp op, bool isSigned, llvm::Value *x,
                       llvm::Value *y) {
  llvm::Type *type = x->getType();
  llvm::Value *zero = llvm::ConstantInt::get(type, 0);
  llvm::Value *one = llvm::ConstantInt::get(type, 1);
  llvm::Value *isZero = b.CreateICmpEQ(y, zero);
  if (!isSigned) {
    llvm::Value *safe = b.CreateSelect(isZero, one, y);
    llvm::Value *q = b.CreateUDiv(x, safe);
    llvm::Value *r = b.CreateURem(x, safe);
    llvm::Value *result = op == ExprOp::Div ? q
                          : op == ExprOp::Mod
                              ? r
                              : b.CreateAdd(q, b.CreateZExt(b.CreateICmpNE(r, zero), type));
    return b.CreateSelect(isZero, zero, result);
  }
  llvm::Value *minusOne = llvm::ConstantInt::get(type, -1, true);
  llvm::Value *isMinusOne = b.CreateICmpEQ(y, minusOne);
  llvm::Value *safe = b.CreateSelect(b.CreateOr(isZero, isMinusOne), one, y);
  llvm::Value *q = b.CreateSDiv(x, safe);
  llvm::Value *r = b.CreateSRem(x, safe);
  llvm::Value *result;
  if (op == ExprOp::Div) {
    result = b.CreateSelect(isMinusOne, b.CreateNeg(x), q);
  } else if (op == ExprOp::Mod) {
    result = b.CreateSelect(isMinusOne, zero, r);
  } else { // CeilDiv: q + (r != 0 && signs equal)
    llvm::Value *sameSign = b.CreateICmpEQ(b.CreateICmpSLT(x, zero), b.CreateICmpSLT(y, zero));
    llvm::Value *bump = b.CreateZExt(b.CreateAnd(b.CreateICmpNE(r, zero), sameSign), type);
    result = b.CreateSelect(isMinusOne, b.CreateNeg(x), b.CreateAdd(q, bump));
  }
  return b.CreateSelect(isZero, zero, result);
}

llvm::Value *intShift(llvm::IRBuilder<> &b, ExprOp op, bool isSigned, unsigned bits, llvm::Value *x,
                      llvm::Value *y) {
  llvm::Type *type = x->getType();
  llvm::Value *width = llvm::ConstantInt::get(type, bits);
  // Negative amounts of signed types count as "at least the width": compare unsigned after
  // mapping them to the width.
  llvm::Value *tooFar = b.CreateICmpUGE(y, width);
  if (isSigned)
    tooFar = b.CreateOr(tooFar, b.CreateICmpSLT(y, llvm::ConstantInt::get(type, 0)));
  llvm::Value *amount = b.CreateSelect(tooFar, llvm::ConstantInt::get(type, 0), y);
  if (op == ExprOp::Shl)
    return b.CreateSelect(tooFar, llvm::ConstantInt::get(type, 0), b.CreateShl(x, amount));
  if (!isSigned)
    return b.CreateSelect(tooFar, llvm::ConstantInt::get(type, 0), b.CreateLShr(x, amount));
  llvm::Value *fill = b.CreateAShr(x, llvm::ConstantInt::get(type, bits - 1));
  return b.CreateSelect(tooFar, fill, b.CreateAShr(x, amount));
}

} // namespace

llvm::Value *Codegen::applyOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y) {
  if (isComparison(op))
    return compareOp(op, t, x, y);
  if (isLogical(op)) {
    llvm::Value *tx = truth(x, t);
    if (op == ExprOp::LogicalNot)
      return b.CreateNot(tx);
    llvm::Value *ty = truth(y, t);
    return op == ExprOp::LogicalAnd ? b.CreateAnd(tx, ty) : b.CreateOr(tx, ty);
  }
  if (t.isBool()) {
    if (op == ExprOp::BitNot)
      return b.CreateNot(x);
    DataType i64 = DataType::i64();
    llvm::Value *r = applyOp(op, i64, b.CreateZExt(x, b.getInt64Ty()),
                             y ? b.CreateZExt(y, b.getInt64Ty()) : nullptr);
    return b.CreateICmpNE(r, b.getInt64(0));
  }
  if (t.isFloat())
    return floatOp(op, t, x, y);
  return intOp(op, t, x, y);
}

llvm::Value *Codegen::compareOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y) {
  using P = llvm::CmpInst::Predicate;
  static_assert(int(ExprOp::Ne) == int(ExprOp::Eq) + 1 && int(ExprOp::Lt) == int(ExprOp::Eq) + 2 &&
                int(ExprOp::Le) == int(ExprOp::Eq) + 3 && int(ExprOp::Gt) == int(ExprOp::Eq) + 4 &&
                int(ExprOp::Ge) == int(ExprOp::Eq) + 5);
  assert(isComparison(op));
  size_t k = size_t(op) - size_t(ExprOp::Eq); // Eq, Ne, Lt, Le, Gt, Ge
  if (t.isFloat() && isNativeFloat(t)) {
    static constexpr P kFloat[] = {P::FCMP_OEQ, P::FCMP_UNE, P::FCMP_OLT,
                                   P::FCMP_OLE, P::FCMP_OGT, P::FCMP_OGE};
    return b.CreateFCmp(kFloat[k], x, y);
  }
  if (t.isFloat()) { // low-precision floats: compare exact values
    DataType f32 = DataType::f32();
    return applyOp(op, f32, convert(x, t, f32), convert(y, t, f32));
  }
  static constexpr P kSigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_SLT,
                                  P::ICMP_SLE, P::ICMP_SGT, P::ICMP_SGE};
  static constexpr P kUnsigned[] = {P::ICMP_EQ,  P::ICMP_NE,  P::ICMP_ULT,
                                    P::ICMP_ULE, P::ICMP_UGT, P::ICMP_UGE};
  return b.CreateICmp((t.isSigned() ? kSigned : kUnsigned)[k], x, y);
}

llvm::Value *Codegen::floatOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y) {
  if (!isNativeFloat(t))
    return llvm::UndefValue::get(elemType(t)); // no arithmetic on these (checker)
  switch (op) {
  case ExprOp::Shl:
  case ExprOp::Shr:
  case ExprOp::BitAnd:
  case ExprOp::BitOr:
  case ExprOp::BitXor:
  case ExprOp::BitNot: { // on the raw bits, unsigned
    DataType u = DataType::u(t.bits);
    return fromBits(applyOp(op, u, toBits(x, t), y ? toBits(y, t) : nullptr), t);
  }
  case ExprOp::Min:
  case ExprOp::Max: {
    bool isMax = op == ExprOp::Max;
    if (t == DataType::f32() || t == DataType::f64()) {
      // PTX `max`/`min` (without .NaN) are exactly this: the non-NaN operand when one is NaN,
      // NaN when both are, and +0 > -0 (PTX ISA, "Floating Point Instructions: max"). Inline
      // assembly, not llvm.maxnum (whose order of zeros LLVM leaves open and may fold either
      // way); without side effects, so it is still hoisted and merged like arithmetic.
      bool f32 = t == DataType::f32();
      std::string text =
          std::string(isMax ? "max" : "min") + (f32 ? ".f32" : ".f64") + " $0, $1, $2;";
      auto *type = llvm::FunctionType::get(x->getType(), {x->getType(), y->getType()}, false);
      llvm::CallInst *r =
          b.CreateCall(llvm::InlineAsm::get(type, text, f32 ? "=f,f,f" : "=d,d,d", false), {x, y});
      r->setDoesNotAccessMemory();
      r->setDoesNotThrow();
      auto number = [](llvm::Value *v) {
        auto *c = llvm::dyn_cast<llvm::ConstantFP>(v);
        return c && !c->isNaN();
      };
      return number(x) || number(y) ? r : canonicalizeNaN(r, t); // a number: never NaN
    }
    llvm::Value *xNaN = b.CreateFCmpUNO(x, x), *yNaN = b.CreateFCmpUNO(y, y);
    llvm::Value *eq = b.CreateFCmpOEQ(x, y);
    llvm::Value *xNeg =
        b.CreateICmpSLT(toBits(x, t), llvm::ConstantInt::get(b.getIntNTy(t.bits), 0));
    // equal values differ at most in the sign of zero: max takes the non-negative one
    llvm::Value *onEqual = isMax ? b.CreateSelect(xNeg, y, x) : b.CreateSelect(xNeg, x, y);
    llvm::Value *less = b.CreateFCmpOLT(x, y);
    llvm::Value *ordered = isMax ? b.CreateSelect(less, y, x) : b.CreateSelect(less, x, y);
    llvm::Value *r = b.CreateSelect(eq, onEqual, ordered);
    r = b.CreateSelect(yNaN, x, r);
    llvm::Value *bothNaN = b.CreateAnd(xNaN, yNaN);
    r = b.CreateSelect(xNaN, y, r);
    return b.CreateSelect(bothNaN, constBits(t, canonicalNaN(t)), r);
  }
  case ExprOp::Add:
  case ExprOp::Sub:
  case ExprOp::Mul:
  case ExprOp::Div:
  case ExprOp::Mod:
  case ExprOp::Neg:
  case ExprOp::CeilDiv:
    break; // arithmetic in the float type, below
  case ExprOp::Const:
  case ExprOp::Var:
  case ExprOp::Eq:
  case ExprOp::Ne:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge:
  case ExprOp::LogicalAnd:
  case ExprOp::LogicalOr:
  case ExprOp::LogicalNot:
  case ExprOp::Select:
  case ExprOp::Cast:
    return llvm::UndefValue::get(elemType(t)); // not arithmetic: applyOp handles these
  }
  bool narrow = t == DataType::f16() || t == DataType::bf16();
  DataType ct = narrow ? DataType::f32() : t;
  llvm::Value *cx = narrow ? b.CreateFPExt(x, b.getFloatTy()) : x;
  llvm::Value *cy = (narrow && y) ? b.CreateFPExt(y, b.getFloatTy()) : y;
  llvm::Value *r = nullptr;
  switch (op) {
  case ExprOp::Add:
    r = b.CreateFAdd(cx, cy);
    break;
  case ExprOp::Sub:
    r = b.CreateFSub(cx, cy);
    break;
  case ExprOp::Mul:
    r = b.CreateFMul(cx, cy);
    break;
  case ExprOp::Div:
    r = b.CreateFDiv(cx, cy);
    break;
  case ExprOp::Neg:
    r = b.CreateFNeg(cx);
    break;
  case ExprOp::Mod: {
    llvm::Value *dx = convert(x, t, DataType::f64()), *dy = convert(y, t, DataType::f64());
    return canonicalizeNaN(convert(callDevlib("tl_fmod", {dx, dy}), DataType::f64(), t), t);
  }
  case ExprOp::CeilDiv: {
    llvm::Value *q = b.CreateFDiv(cx, cy);
    if (narrow) // round the quotient into t first
      q = b.CreateFPExt(b.CreateFPTrunc(q, elemType(t)), b.getFloatTy());
    r = callIntrinsic(llvm::Intrinsic::ceil, {q->getType()}, {q});
    break;
  }
  case ExprOp::Shl:
  case ExprOp::Shr:
  case ExprOp::BitAnd:
  case ExprOp::BitOr:
  case ExprOp::BitXor:
  case ExprOp::BitNot:
  case ExprOp::Min:
  case ExprOp::Max:
  case ExprOp::Const:
  case ExprOp::Var:
  case ExprOp::Eq:
  case ExprOp::Ne:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge:
  case ExprOp::LogicalAnd:
  case ExprOp::LogicalOr:
  case ExprOp::LogicalNot:
  case ExprOp::Select:
  case ExprOp::Cast:
    return llvm::UndefValue::get(elemType(t)); // handled above, or not arithmetic
  }
  (void)ct;
  if (narrow)
    r = b.CreateFPTrunc(r, elemType(t));
  return canonicalizeNaN(r, t);
}

llvm::Value *Codegen::intOp(ExprOp op, DataType t, llvm::Value *x, llvm::Value *y) {
  // integers
  bool s = t.isSigned();
  switch (op) {
  case ExprOp::Add:
    return b.CreateAdd(x, y);
  case ExprOp::Sub:
    return b.CreateSub(x, y);
  case ExprOp::Mul:
    return b.CreateMul(x, y);
  case ExprOp::Div:
  case ExprOp::Mod:
  case ExprOp::CeilDiv:
    return intDivide(b, op, s, x, y);
  case ExprOp::Shl:
  case ExprOp::Shr:
    return intShift(b, op, s, t.bits, x, y);
  case ExprOp::BitAnd:
    return b.CreateAnd(x, y);
  case ExprOp::BitOr:
    return b.CreateOr(x, y);
  case ExprOp::BitXor:
    return b.CreateXor(x, y);
  case ExprOp::BitNot:
    return b.CreateNot(x);
  case ExprOp::Neg:
    return b.CreateNeg(x);
  case ExprOp::Min:
    return b.CreateSelect(s ? b.CreateICmpSLT(y, x) : b.CreateICmpULT(y, x), y, x);
  case ExprOp::Max:
    return b.CreateSelect(s ? b.CreateICmpSGT(y, x) : b.CreateICmpUGT(y, x), y, x);
  case ExprOp::Const:
  case ExprOp::Var:
  case ExprOp::Eq:
  case ExprOp::Ne:
  case ExprOp::Lt:
  case ExprOp::Le:
  case ExprOp::Gt:
  case ExprOp::Ge:
  case ExprOp::LogicalAnd:
  case ExprOp::LogicalOr:
  case ExprOp::LogicalNot:
  case ExprOp::Select:
  case ExprOp::Cast:
    return llvm::UndefValue::get(elemType(t)); // not arithmetic: applyOp handles these
  }
  return nullptr; // not reached: every ExprOp returns above (GCC's -Wreturn-type cannot tell)
}

} // namespace tilus::jit
