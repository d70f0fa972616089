#include "jit/wgmma_zero_accumulator.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilus::jit {

namespace {

// The operands of lower_contraction_wgmma.cpp's asm: the fixed inputs (the A operand of each k
// step and atom, a descriptor or four registers; the B descriptor of each k step; the constant 1;
// scale-d, always the last fixed input, which only the first k step's wgmmas read), then the
// accumulator inputs, tied to the outputs: constraints "=f,...,=f,l,...,l,r,r,0,1,..." or
// "=f,...,=f,r,...,r,l,...,l,r,r,0,1,...".
bool isWgmma(const llvm::InlineAsm &a) {
  return a.getAsmString().find("wgmma.mma_async.") != std::string::npos;
}

/// The constraints of the outputs and fixed inputs ("=f,...,=f,l,l,r") and the number of fixed
/// inputs; nullopt unless the list is outputs, fixed inputs ending in scale-d ("r"), then only
/// tied inputs.
std::optional<std::pair<std::string, unsigned>> fixedOperands(const llvm::InlineAsm &a) {
  std::string constraints = a.getConstraintString();
  std::string kept;
  unsigned fixed = 0;
  bool tied = false, last = false;
  size_t start = 0;
  while (start <= constraints.size()) {
    size_t end = constraints.find(',', start);
    if (end == std::string::npos)
      end = constraints.size();
    std::string c = constraints.substr(start, end - start);
    start = end + 1;
    bool digits = !c.empty() && c.find_first_not_of("0123456789") == std::string::npos;
    if (!c.empty() && c[0] == '=') {
      if (fixed != 0 || tied)
        return std::nullopt;
    } else if (digits) {
      tied = true;
      continue;
    } else {
      if (tied)
        return std::nullopt;
      ++fixed;
      last = c == "r";
    }
    if (!kept.empty())
      kept += ',';
    kept += c;
  }
  if (fixed == 0 || !last || !tied)
    return std::nullopt;
  return std::pair<std::string, unsigned>{kept, fixed};
}

bool allPositiveZero(const llvm::CallInst &call, unsigned fixed) {
  if (call.arg_size() <= fixed)
    return false;
  for (unsigned k = fixed; k < call.arg_size(); ++k) {
    const auto *c = llvm::dyn_cast<llvm::ConstantFP>(call.getArgOperand(k));
    if (!c || !c->isZero() || c->isNegative())
      return false;
  }
  return true;
}

} // namespace

size_t foldZeroWgmmaAccumulators(llvm::Function &f) {
  std::vector<std::pair<llvm::CallInst *, std::pair<std::string, unsigned>>> calls;
  for (llvm::BasicBlock &bb : f)
    for (llvm::Instruction &i : bb)
      if (auto *call = llvm::dyn_cast<llvm::CallInst>(&i))
        if (const auto *a = llvm::dyn_cast<llvm::InlineAsm>(call->getCalledOperand()))
          if (isWgmma(*a))
            if (auto fixed = fixedOperands(*a); fixed && allPositiveZero(*call, fixed->second))
              calls.push_back({call, *fixed});
  for (auto &[call, fixed] : calls) {
    const auto *a = llvm::cast<llvm::InlineAsm>(call->getCalledOperand());
    llvm::IRBuilder<> b(call);
    std::vector<llvm::Type *> types;
    std::vector<llvm::Value *> args;
    for (unsigned k = 0; k < fixed.second; ++k) {
      llvm::Value *v =
          k + 1 == fixed.second ? llvm::cast<llvm::Value>(b.getInt32(0)) : call->getArgOperand(k);
      types.push_back(v->getType());
      args.push_back(v);
    }
    auto *type = llvm::FunctionType::get(call->getType(), types, false);
    llvm::InlineAsm *folded =
        llvm::InlineAsm::get(type, a->getAsmString(), fixed.first, a->hasSideEffects());
    llvm::CallInst *replacement = b.CreateCall(type, folded, args);
    call->replaceAllUsesWith(replacement);
    call->eraseFromParent();
  }
  return calls.size();
}

} // namespace tilus::jit
