// IR passes around the wgmma inline PTX (jit/lower_contraction_wgmma.cpp), on hand-built LLVM
// functions: jit::foldZeroWgmmaAccumulators turns a wgmma whose accumulator inputs are all +0.0
// into the same instruction with scale-d 0 and no accumulator inputs (with A from descriptors
// or from registers), and leaves every other wgmma alone; jit::dropUnseenNaNCanonicalizations
// treats the wgmma accumulator as a float use (a NaN going in leaves a NaN whatever its payload),
// so a canonicalization whose value only feeds the next wgmma is dropped, and one whose value
// reaches memory is kept.
#include "jit/nan_canonical.h"
#include "jit/wgmma_zero_accumulator.h"

#include "test_helpers.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <string>
#include <vector>

namespace {

constexpr int kQ = 4; // accumulator registers of the asm (m64n8: 4 per thread)

struct Fixture {
  llvm::LLVMContext ctx;
  llvm::Module module{"wgmma", ctx};
  llvm::Function *f = nullptr;
  llvm::IRBuilder<> b{ctx};

  Fixture() {
    auto *type = llvm::FunctionType::get(b.getVoidTy(), {b.getInt64Ty(), b.getPtrTy(1)}, false);
    f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "k", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
  }

  // The lowering's form for one atom and two k steps: "=f" x kQ; the A descriptor of each k
  // step, the B descriptor of each, the constant 1, scale-d ("l,l,l,l,r,r"); then the tied
  // accumulator inputs. The first wgmma adds to the accumulators where scale-d is nonzero.
  llvm::CallInst *wgmma(const std::vector<llvm::Value *> &acc) {
    std::string constraints;
    for (int r = 0; r < kQ; ++r)
      constraints += "=f,";
    constraints += "l,l,l,l,r,r";
    for (int r = 0; r < kQ; ++r) { // appends: GCC 12 warns falsely about "," + std::string
      constraints += ',';
      constraints += std::to_string(r);
    }
    std::vector<llvm::Type *> outs(kQ, b.getFloatTy());
    std::vector<llvm::Type *> ins(4, b.getInt64Ty());
    ins.push_back(b.getInt32Ty());
    ins.push_back(b.getInt32Ty());
    for (int r = 0; r < kQ; ++r)
      ins.push_back(b.getFloatTy());
    auto *type = llvm::FunctionType::get(llvm::StructType::get(ctx, outs), ins, false);
    std::string text =
        "{\n.reg .pred p, t;\nsetp.ne.b32 p, $9, 0;\nsetp.ne.b32 t, $8, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {$0, $1, $2, $3}, $4, $6, "
        "p, 1, 1, 0, 0;\nwgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {$0, $1, "
        "$2, $3}, $5, $7, t, 1, 1, 0, 0;\n}";
    auto *asmValue = llvm::InlineAsm::get(type, text, constraints, true);
    std::vector<llvm::Value *> args(4, f->getArg(0));
    args.push_back(b.getInt32(1));
    args.push_back(b.getInt32(1));
    args.insert(args.end(), acc.begin(), acc.end());
    return b.CreateCall(type, asmValue, args);
  }

  // The register-A form for one atom and one k step: "=f" x kQ, "r,r,r,r,l,r,r" (four A
  // registers, descriptor B, the constant 1, scale-d), then the tied accumulator inputs.
  llvm::CallInst *wgmmaRegisterA(const std::vector<llvm::Value *> &acc) {
    std::string constraints;
    for (int r = 0; r < kQ; ++r)
      constraints += "=f,";
    constraints += "r,r,r,r,l,r,r";
    for (int r = 0; r < kQ; ++r) {
      constraints += ',';
      constraints += std::to_string(r);
    }
    std::vector<llvm::Type *> outs(kQ, b.getFloatTy());
    std::vector<llvm::Type *> ins(4, b.getInt32Ty());
    ins.push_back(b.getInt64Ty());
    ins.push_back(b.getInt32Ty());
    ins.push_back(b.getInt32Ty());
    for (int r = 0; r < kQ; ++r)
      ins.push_back(b.getFloatTy());
    auto *type = llvm::FunctionType::get(llvm::StructType::get(ctx, outs), ins, false);
    std::string text =
        "{\n.reg .pred p, t;\nsetp.ne.b32 p, $10, 0;\nsetp.ne.b32 t, $9, 0;\nwgmma.mma_async."
        "sync.aligned.m64n8k16.f32.f16.f16 {$0, $1, $2, $3}, {$4, $5, $6, $7}, $8, p, 1, 1, 0;\n}";
    auto *asmValue = llvm::InlineAsm::get(type, text, constraints, true);
    llvm::Value *word = b.CreateTrunc(f->getArg(0), b.getInt32Ty());
    std::vector<llvm::Value *> args = {word,         word,          word,         word,
                                       f->getArg(0), b.getInt32(1), b.getInt32(1)};
    args.insert(args.end(), acc.begin(), acc.end());
    return b.CreateCall(type, asmValue, args);
  }

  std::vector<llvm::Value *> results(llvm::Value *call) {
    std::vector<llvm::Value *> out;
    for (unsigned r = 0; r < kQ; ++r)
      out.push_back(b.CreateExtractValue(call, {r}));
    return out;
  }

  std::vector<llvm::CallInst *> wgmmas() {
    std::vector<llvm::CallInst *> out;
    for (llvm::Instruction &i : f->getEntryBlock())
      if (auto *call = llvm::dyn_cast<llvm::CallInst>(&i))
        if (llvm::isa<llvm::InlineAsm>(call->getCalledOperand()))
          out.push_back(call);
    return out;
  }

  void store(const std::vector<llvm::Value *> &values) {
    for (size_t r = 0; r < values.size(); ++r)
      b.CreateStore(values[r], b.CreateConstGEP1_64(b.getFloatTy(), f->getArg(1), r));
  }
};

std::string constraintsOf(const llvm::CallInst *call) {
  return llvm::cast<llvm::InlineAsm>(call->getCalledOperand())->getConstraintString();
}

} // namespace

TEST_CASE("foldZeroWgmmaAccumulators: +0 accumulators become scale-d 0 without inputs") {
  Fixture x;
  llvm::Value *zero = llvm::ConstantFP::get(x.b.getFloatTy(), 0.0);
  llvm::Value *negZero = llvm::ConstantFP::get(x.b.getFloatTy(), -0.0);
  llvm::Value *one = llvm::ConstantFP::get(x.b.getFloatTy(), 1.0);
  llvm::CallInst *first = x.wgmma({zero, zero, zero, zero});
  llvm::CallInst *chained = x.wgmma(x.results(first));             // reads the first one's results
  llvm::CallInst *negative = x.wgmma({zero, negZero, zero, zero}); // -0.0 + A B may differ
  llvm::CallInst *mixed = x.wgmma({zero, zero, one, zero});
  x.store(x.results(chained));
  x.store(x.results(negative));
  x.store(x.results(mixed));
  x.b.CreateRetVoid();
  (void)first;
  CHECK(tilus::jit::foldZeroWgmmaAccumulators(*x.f) == 1);
  std::vector<llvm::CallInst *> calls = x.wgmmas();
  REQUIRE(calls.size() == 4);
  // the folded one: the descriptors and the constant 1 kept, scale-d 0, no accumulator
  // operands, the same text
  CHECK(calls[0]->arg_size() == 6);
  auto *scale = llvm::dyn_cast<llvm::ConstantInt>(calls[0]->getArgOperand(5));
  REQUIRE(scale != nullptr);
  CHECK(scale->isZero());
  CHECK(llvm::cast<llvm::ConstantInt>(calls[0]->getArgOperand(4))->isOne());
  CHECK(constraintsOf(calls[0]) == "=f,=f,=f,=f,l,l,l,l,r,r");
  CHECK(llvm::cast<llvm::InlineAsm>(calls[0]->getCalledOperand())
            ->getAsmString()
            .find("wgmma.mma_async.sync.aligned.m64n8k16") != std::string::npos);
  // the chained one now reads the folded one's results; the others are untouched
  for (unsigned r = 0; r < kQ; ++r) {
    auto *e = llvm::dyn_cast<llvm::ExtractValueInst>(calls[1]->getArgOperand(6 + r));
    REQUIRE(e != nullptr);
    CHECK(e->getAggregateOperand() == calls[0]);
  }
  for (size_t k : {size_t(1), size_t(2), size_t(3)}) {
    CHECK(calls[k]->arg_size() == 6 + kQ);
    CHECK(llvm::cast<llvm::ConstantInt>(calls[k]->getArgOperand(5))->isOne());
  }
}

TEST_CASE("foldZeroWgmmaAccumulators: the register-A form folds the same way") {
  Fixture x;
  llvm::Value *zero = llvm::ConstantFP::get(x.b.getFloatTy(), 0.0);
  llvm::Value *one = llvm::ConstantFP::get(x.b.getFloatTy(), 1.0);
  llvm::CallInst *first = x.wgmmaRegisterA({zero, zero, zero, zero});
  llvm::CallInst *chained = x.wgmmaRegisterA(x.results(first));
  llvm::CallInst *mixed = x.wgmmaRegisterA({zero, one, zero, zero});
  x.store(x.results(chained));
  x.store(x.results(mixed));
  x.b.CreateRetVoid();
  (void)first;
  CHECK(tilus::jit::foldZeroWgmmaAccumulators(*x.f) == 1);
  std::vector<llvm::CallInst *> calls = x.wgmmas();
  REQUIRE(calls.size() == 3);
  // the folded one: the four A registers, descriptor B and the constant 1 kept, scale-d 0, no
  // accumulators
  CHECK(calls[0]->arg_size() == 7);
  CHECK(constraintsOf(calls[0]) == "=f,=f,=f,=f,r,r,r,r,l,r,r");
  for (unsigned k = 0; k < 4; ++k)
    CHECK(calls[0]->getArgOperand(k)->getType()->isIntegerTy(32));
  CHECK(calls[0]->getArgOperand(4) == x.f->getArg(0));
  auto *scale = llvm::dyn_cast<llvm::ConstantInt>(calls[0]->getArgOperand(6));
  REQUIRE(scale != nullptr);
  CHECK(scale->isZero());
  for (size_t k : {size_t(1), size_t(2)}) {
    CHECK(calls[k]->arg_size() == 7 + kQ);
    CHECK(llvm::cast<llvm::ConstantInt>(calls[k]->getArgOperand(6))->isOne());
  }
}

TEST_CASE("NaN canonicalizations that only feed a wgmma accumulator are dropped") {
  Fixture x;
  // v = canonicalize(a * b): into the wgmma only (dropped), and into memory too (kept)
  llvm::Value *a = x.b.CreateLoad(x.b.getFloatTy(), x.f->getArg(1));
  auto canonical = [&](llvm::Value *v) {
    llvm::Value *isNaN = x.b.CreateFCmpUNO(v, v);
    return x.b.CreateSelect(isNaN, llvm::ConstantFP::getNaN(x.b.getFloatTy()), v);
  };
  llvm::Value *onlyWgmma = canonical(x.b.CreateFMul(a, a));
  llvm::Value *alsoStored = canonical(x.b.CreateFAdd(a, a));
  llvm::CallInst *mma = x.wgmma({onlyWgmma, onlyWgmma, alsoStored, onlyWgmma});
  std::vector<llvm::Value *> r = x.results(mma);
  // the results canonicalized again before they are stored, as the lowering's wait does
  std::vector<llvm::Value *> stored;
  for (llvm::Value *v : r)
    stored.push_back(canonical(v));
  stored.push_back(alsoStored);
  x.store(stored);
  x.b.CreateRetVoid();
  CHECK(tilus::jit::dropUnseenNaNCanonicalizations(*x.f) == 1);
  std::vector<llvm::CallInst *> calls = x.wgmmas();
  REQUIRE(calls.size() == 1);
  CHECK(llvm::isa<llvm::BinaryOperator>(calls[0]->getArgOperand(6))); // the fmul, unwrapped
  CHECK(llvm::isa<llvm::SelectInst>(calls[0]->getArgOperand(8)));     // kept: it reaches memory
}
