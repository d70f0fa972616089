#include "jit/wgmma_zero_accumulator.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>

#include <string>
#include <vector>

namespace tilus::jit {

namespace {

// The operands of lower_contraction_wgmma.cpp's asm: descriptor A, descriptor B, scale-d, then
// the accumulator inputs, tied to the outputs; constraints "=f,...,=f,l,l,r,0,1,...".
constexpr unsigned kFixedOperands = 3;

bool isWgmma(const llvm::InlineAsm &a) {
  return a.getAsmString().find("wgmma.mma_async.") != std::string::npos;
}

bool allPositiveZero(const llvm::CallInst &call) {
  if (call.arg_size() <= kFixedOperands)
    return false;
  for (unsigned k = kFixedOperands; k < call.arg_size(); ++k) {
    const auto *c = llvm::dyn_cast<llvm::ConstantFP>(call.getArgOperand(k));
    if (!c || !c->isZero() || c->isNegative())
      return false;
  }
  return true;
}

} // namespace

size_t foldZeroWgmmaAccumulators(llvm::Function &f) {
  std::vector<llvm::CallInst *> calls;
  for (llvm::BasicBlock &bb : f)
    for (llvm::Instruction &i : bb)
      if (auto *call = llvm::dyn_cast<llvm::CallInst>(&i))
        if (const auto *a = llvm::dyn_cast<llvm::InlineAsm>(call->getCalledOperand()))
          if (isWgmma(*a) && allPositiveZero(*call))
            calls.push_back(call);
  for (llvm::CallInst *call : calls) {
    const auto *a = llvm::cast<llvm::InlineAsm>(call->getCalledOperand());
    std::string constraints = a->getConstraintString();
    size_t fixed = constraints.find("l,l,r");
    if (fixed == std::string::npos)
      continue;
    constraints.resize(fixed + 5);
    llvm::IRBuilder<> b(call);
    std::vector<llvm::Type *> types;
    std::vector<llvm::Value *> args;
    for (unsigned k = 0; k < kFixedOperands; ++k) {
      llvm::Value *v = k == 2 ? llvm::cast<llvm::Value>(b.getInt32(0)) : call->getArgOperand(k);
      types.push_back(v->getType());
      args.push_back(v);
    }
    auto *type = llvm::FunctionType::get(call->getType(), types, false);
    llvm::InlineAsm *folded =
        llvm::InlineAsm::get(type, a->getAsmString(), constraints, a->hasSideEffects());
    llvm::CallInst *replacement = b.CreateCall(type, folded, args);
    call->replaceAllUsesWith(replacement);
    call->eraseFromParent();
  }
  return calls.size();
}

} // namespace tilus::jit
