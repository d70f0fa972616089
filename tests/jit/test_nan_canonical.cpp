// jit::dropUnseenNaNCanonicalizations on hand-built loops: a canonicalization inside a loop
// whose value is seen only after the loop (a loop-carried accumulator stored at the end) moves
// to the store (one select after the loop instead of one per iteration); one whose value is
// also seen inside the loop stays there. The stored value is in every case the canonicalized
// one, so the bits that reach memory are those the ISA defines. And on straight-line IR: a
// canonicalization before a PTX max with a number constant, whose result never depends on a
// NaN's payload, is dropped; one before a max of two variables stays. A kept canonicalization
// of a pair of 16-bit floats becomes one set.nan + lop3 statement on the pair's word.
#include "jit/nan_canonical.h"

#include "test_helpers.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace {

struct Loop {
  llvm::LLVMContext ctx;
  llvm::Module module{"nan", ctx};
  llvm::Function *f = nullptr;
  llvm::IRBuilder<> b{ctx};
  llvm::BasicBlock *entry = nullptr, *body = nullptr, *exit = nullptr;
  llvm::PHINode *acc = nullptr, *count = nullptr;
  llvm::Value *next = nullptr; // the canonicalized acc * x of the body

  /// for (i = 0; i < n; ++i) acc = canonicalize(acc * x); store acc (after the loop), and with
  /// storeInside also inside the loop.
  explicit Loop(bool storeInside) {
    auto *type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(1), b.getInt32Ty()}, false);
    f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "k", module);
    entry = llvm::BasicBlock::Create(ctx, "entry", f);
    body = llvm::BasicBlock::Create(ctx, "body", f);
    exit = llvm::BasicBlock::Create(ctx, "exit", f);
    b.SetInsertPoint(entry);
    llvm::Value *x = b.CreateLoad(b.getFloatTy(), f->getArg(0));
    b.CreateBr(body);
    b.SetInsertPoint(body);
    acc = b.CreatePHI(b.getFloatTy(), 2);
    count = b.CreatePHI(b.getInt32Ty(), 2);
    llvm::Value *product = b.CreateFMul(acc, x);
    next = b.CreateSelect(b.CreateFCmpUNO(product, product),
                          llvm::ConstantFP::getNaN(b.getFloatTy()), product);
    if (storeInside)
      b.CreateStore(next, f->getArg(0));
    llvm::Value *i1 = b.CreateAdd(count, b.getInt32(1));
    b.CreateCondBr(b.CreateICmpSLT(i1, f->getArg(1)), body, exit);
    acc->addIncoming(x, entry);
    acc->addIncoming(next, body);
    count->addIncoming(b.getInt32(0), entry);
    count->addIncoming(i1, body);
    b.SetInsertPoint(exit);
    b.CreateStore(next, f->getArg(0));
    b.CreateRetVoid();
  }

  static int selects(llvm::BasicBlock *block) {
    int n = 0;
    for (llvm::Instruction &i : *block)
      n += llvm::isa<llvm::SelectInst>(i);
    return n;
  }

  /// The value the exit block stores.
  llvm::Value *storedAfter() const {
    for (llvm::Instruction &i : *exit)
      if (auto *s = llvm::dyn_cast<llvm::StoreInst>(&i))
        return s->getValueOperand();
    return nullptr;
  }
};

/// Whether v is select(fcmp uno x, x), NaN, x) of the fmul x of the body.
bool canonicalOfProduct(llvm::Value *v) {
  auto *s = llvm::dyn_cast<llvm::SelectInst>(v);
  if (!s)
    return false;
  auto *nan = llvm::dyn_cast<llvm::ConstantFP>(s->getTrueValue());
  auto *cmp = llvm::dyn_cast<llvm::FCmpInst>(s->getCondition());
  auto *x = llvm::dyn_cast<llvm::BinaryOperator>(s->getFalseValue());
  return nan && nan->isNaN() && cmp && cmp->getPredicate() == llvm::FCmpInst::FCMP_UNO &&
         cmp->getOperand(0) == x && x && x->getOpcode() == llvm::Instruction::FMul;
}

} // namespace

TEST_CASE("a canonicalization in a loop whose value is seen after it moves to the seeing use") {
  Loop l(false);
  REQUIRE(Loop::selects(l.body) == 1);
  CHECK(tilus::jit::dropUnseenNaNCanonicalizations(*l.f) == 1);
  CHECK(Loop::selects(l.body) == 0);
  CHECK(Loop::selects(l.exit) == 1);
  CHECK(canonicalOfProduct(l.storedAfter()));
}

TEST_CASE("a canonicalization in a loop whose value is seen in the loop stays") {
  Loop l(true);
  CHECK(tilus::jit::dropUnseenNaNCanonicalizations(*l.f) == 0);
  CHECK(Loop::selects(l.body) == 1);
  // the store after the loop reads a canonical value: the loop's, or the product canonicalized
  // again after the loop (one select outside the loop, never one more inside it)
  llvm::Value *stored = l.storedAfter();
  CHECK((stored == l.next || canonicalOfProduct(stored)));
}

namespace {

/// A kernel `k(ptr addrspace(1))` of one block, the builder at its start.
struct Straight {
  llvm::LLVMContext ctx;
  llvm::Module module{"nan", ctx};
  llvm::IRBuilder<> b{ctx};
  llvm::Function *f = nullptr;

  Straight() {
    auto *type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(1)}, false);
    f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "k", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
  }
};

/// store bitcast<i32>(max.f32(canonicalize(x * x), other)), with other the constant 0.0 or x:
/// the inline max of emit_scalar.cpp, whose bits the store sees.
int droppedBeforeMax(bool constantOther) {
  Straight s;
  llvm::IRBuilder<> &b = s.b;
  llvm::Function *f = s.f;
  llvm::Value *x = b.CreateLoad(b.getFloatTy(), f->getArg(0));
  llvm::Value *product = b.CreateFMul(x, x);
  llvm::Value *canonical = b.CreateSelect(b.CreateFCmpUNO(product, product),
                                          llvm::ConstantFP::getNaN(b.getFloatTy()), product);
  auto *maxType = llvm::FunctionType::get(b.getFloatTy(), {b.getFloatTy(), b.getFloatTy()}, false);
  llvm::Value *other = constantOther ? llvm::ConstantFP::get(b.getFloatTy(), 0.0) : x;
  llvm::Value *m = b.CreateCall(
      llvm::InlineAsm::get(maxType, "max.f32 $0, $1, $2;", "=f,f,f", false), {canonical, other});
  b.CreateStore(b.CreateBitCast(m, b.getInt32Ty()), f->getArg(0));
  b.CreateRetVoid();
  return tilus::jit::dropUnseenNaNCanonicalizations(*f);
}

} // namespace

TEST_CASE("a canonicalization before a max with a number constant is dropped") {
  // max(NaN, 0.0) is 0.0 whatever the NaN's payload: the stored bits do not depend on it
  CHECK(droppedBeforeMax(true) == 1);
  // max(NaN, x) is x, or a NaN when x is one too: the canonicalization stays
  CHECK(droppedBeforeMax(false) == 0);
}

namespace {

/// store(select(fcmp uno p, p), <NaN, NaN>, p)) of a pair p of 16-bit floats loaded from memory
/// (half or bfloat), marked as Codegen::narrowPairs marks it, then lowerPairCanonicalizations at
/// sm; returns the number rewritten and the text of the inline PTX that replaced the select.
std::pair<size_t, std::string> lowerPair(bool bf16, int sm) {
  Straight s;
  llvm::IRBuilder<> &b = s.b;
  llvm::Function *f = s.f;
  llvm::Type *lane = bf16 ? b.getBFloatTy() : b.getHalfTy();
  auto *pairType = llvm::FixedVectorType::get(lane, 2);
  llvm::Value *p = b.CreateLoad(pairType, f->getArg(0));
  llvm::Constant *nan = llvm::ConstantVector::getSplat(
      llvm::ElementCount::getFixed(2),
      llvm::ConstantExpr::getBitCast(b.getInt16(bf16 ? 0x7FC0 : 0x7E00), lane));
  auto *select = llvm::cast<llvm::SelectInst>(b.CreateSelect(b.CreateFCmpUNO(p, p), nan, p));
  tilus::jit::markNaNCanonicalization(select);
  b.CreateStore(select, f->getArg(0));
  b.CreateRetVoid();
  size_t n = tilus::jit::lowerPairCanonicalizations(*f, sm);
  std::string text;
  for (llvm::Instruction &i : f->getEntryBlock())
    if (auto *call = llvm::dyn_cast<llvm::CallInst>(&i))
      if (auto *a = llvm::dyn_cast<llvm::InlineAsm>(call->getCalledOperand()))
        text = a->getAsmString();
  return {n, text};
}

} // namespace

TEST_CASE(
    "a kept canonicalization of a pair of 16-bit floats becomes set.nan and lop3 on its word") {
  // f16 on every target, bf16 from sm_90 (set.nan of bf16x2): the canonical NaN (0x7E00, 0x7FC0)
  // in both halves as the lop3's immediate, 0xB8 = (a & ~b) | (c & b) with b the NaN mask
  auto [n16, text16] = lowerPair(false, 80);
  CHECK(n16 == 1);
  CHECK(text16 == "{ .reg .b32 m; set.nan.u32.f16x2 m, $1, $1; lop3.b32 $0, $1, m, " +
                      std::to_string(0x7E007E00) + ", 0xB8; }");
  auto [nb, textb] = lowerPair(true, 90);
  CHECK(nb == 1);
  CHECK(textb == "{ .reg .b32 m; set.nan.u32.bf16x2 m, $1, $1; lop3.b32 $0, $1, m, " +
                     std::to_string(0x7FC07FC0) + ", 0xB8; }");
  // bf16 on sm_80 keeps the select (LLVM lowers it)
  CHECK(lowerPair(true, 80).first == 0);
  // the lut: lop3's immediate is its function of a = 0xF0, b = 0xCC, c = 0xAA (PTX ISA, lop3),
  // here (a & ~b) | (c & b): where a half's mask b is 0xFFFF its bits become c's, elsewhere a's
  auto f = [](uint32_t a, uint32_t b, uint32_t c) { return (a & ~b) | (c & b); };
  CHECK((f(0xF0, 0xCC, 0xAA) & 0xFF) == 0xB8);
  CHECK(f(0x3C00FC01u, 0x0000FFFFu, 0x7E007E00u) == 0x3C007E00u);
}

namespace {

/// c = canonicalize(x * x) in the entry block; if (flag) store bitcast<i32>(c) (the raw bits: a
/// split-K part), then, in the join block, the conversion of c to half canonicalized again (an
/// epilogue's Cast) stored; with seenOnBothPaths the join block stores c's bits as well. With
/// useInLoop the branch's store sits in a loop of its own (runs more often than c).
struct Branch {
  Straight s;
  llvm::BasicBlock *entry = nullptr, *then = nullptr, *join = nullptr;
  llvm::Value *product = nullptr;

  Branch(bool seenOnBothPaths, bool useInLoop) {
    llvm::IRBuilder<> &b = s.b;
    llvm::Function *f = s.f;
    entry = &f->getEntryBlock();
    then = llvm::BasicBlock::Create(s.ctx, "then", f);
    join = llvm::BasicBlock::Create(s.ctx, "join", f);
    llvm::Value *x = b.CreateLoad(b.getFloatTy(), f->getArg(0));
    product = b.CreateFMul(x, x);
    llvm::Value *c = b.CreateSelect(b.CreateFCmpUNO(product, product),
                                    llvm::ConstantFP::getNaN(b.getFloatTy()), product);
    llvm::Value *flag = b.CreateICmpEQ(b.CreateBitCast(x, b.getInt32Ty()), b.getInt32(0));
    b.CreateCondBr(flag, then, join);
    b.SetInsertPoint(then);
    if (useInLoop) {
      llvm::BasicBlock *loop = llvm::BasicBlock::Create(s.ctx, "loop", f);
      b.CreateBr(loop);
      b.SetInsertPoint(loop);
      llvm::PHINode *i = b.CreatePHI(b.getInt32Ty(), 2);
      b.CreateStore(b.CreateBitCast(c, b.getInt32Ty()), f->getArg(0));
      llvm::Value *i1 = b.CreateAdd(i, b.getInt32(1));
      b.CreateCondBr(b.CreateICmpSLT(i1, b.getInt32(4)), loop, join);
      i->addIncoming(b.getInt32(0), then);
      i->addIncoming(i1, loop);
    } else {
      b.CreateStore(b.CreateBitCast(c, b.getInt32Ty()), f->getArg(0));
      b.CreateBr(join);
    }
    b.SetInsertPoint(join);
    llvm::Value *h = b.CreateFPTrunc(c, b.getHalfTy());
    llvm::Value *hc =
        b.CreateSelect(b.CreateFCmpUNO(h, h), llvm::ConstantFP::getNaN(b.getHalfTy()), h);
    b.CreateStore(hc, f->getArg(0));
    if (seenOnBothPaths)
      b.CreateStore(b.CreateBitCast(c, b.getInt32Ty()), f->getArg(0));
    b.CreateRetVoid();
  }

  /// The canonicalizations (selects) of the product in a block.
  int canonicalizationsOfProduct(llvm::BasicBlock *block) const {
    int n = 0;
    for (llvm::Instruction &i : *block)
      if (auto *sel = llvm::dyn_cast<llvm::SelectInst>(&i))
        n += sel->getFalseValue() == product;
    return n;
  }

  /// The float value whose bits the first i32 store of `block` writes.
  llvm::Value *storedBits(llvm::BasicBlock *block) const {
    for (llvm::Instruction &i : *block)
      if (auto *st = llvm::dyn_cast<llvm::StoreInst>(&i))
        if (auto *cast = llvm::dyn_cast<llvm::BitCastInst>(st->getValueOperand()))
          return cast->getOperand(0);
    return nullptr;
  }
};

} // namespace

TEST_CASE("a canonicalization seen on one path only moves into that path") {
  Branch br(false, false);
  REQUIRE(br.canonicalizationsOfProduct(br.entry) == 1);
  tilus::jit::dropUnseenNaNCanonicalizations(*br.s.f);
  // the path that converts to half (canonicalized again there) no longer pays for it; the path
  // that stores the raw bits stores the product canonicalized
  CHECK(br.canonicalizationsOfProduct(br.entry) == 0);
  CHECK(br.canonicalizationsOfProduct(br.then) == 1);
  CHECK(canonicalOfProduct(br.storedBits(br.then)));
  for (llvm::Instruction &i : *br.join)
    if (auto *t = llvm::dyn_cast<llvm::FPTruncInst>(&i))
      CHECK(t->getOperand(0) == br.product);
}

TEST_CASE("a canonicalization seen on every path, or by a use in a loop of its own, stays") {
  Branch both(true, false);
  tilus::jit::dropUnseenNaNCanonicalizations(*both.s.f);
  CHECK(both.canonicalizationsOfProduct(both.entry) == 1);
  CHECK(both.canonicalizationsOfProduct(both.then) == 0);
  CHECK(canonicalOfProduct(both.storedBits(both.then)));
  CHECK(canonicalOfProduct(both.storedBits(both.join)));
  // a store in a loop that does not hold the canonicalization runs more often than it: moving
  // the canonicalization there would add work
  Branch loop(false, true);
  tilus::jit::dropUnseenNaNCanonicalizations(*loop.s.f);
  CHECK(loop.canonicalizationsOfProduct(loop.entry) == 1);
  for (llvm::BasicBlock &block : *loop.s.f)
    if (block.getName() == "loop")
      CHECK(canonicalOfProduct(loop.storedBits(&block)));
}
