// jit::dropUnseenNaNCanonicalizations on hand-built loops: a canonicalization inside a loop
// whose value is seen only after the loop (a loop-carried accumulator stored at the end) moves
// to the store (one select after the loop instead of one per iteration); one whose value is
// also seen inside the loop stays there. The stored value is in every case the canonicalized
// one, so the bits that reach memory are those the ISA defines. And on straight-line IR: a
// canonicalization before a PTX max with a number constant, whose result never depends on a
// NaN's payload, is dropped; one before a max of two variables stays.
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

/// store bitcast<i32>(max.f32(canonicalize(x * x), other)), with other the constant 0.0 or x:
/// the inline max of emit_scalar.cpp, whose bits the store sees.
int droppedBeforeMax(bool constantOther) {
  llvm::LLVMContext ctx;
  llvm::Module module{"nan", ctx};
  llvm::IRBuilder<> b{ctx};
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {b.getPtrTy(1)}, false);
  llvm::Function *f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "k", module);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
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
