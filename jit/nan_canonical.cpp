// Canonical NaNs only where a NaN's bits can be seen (see nan_canonical.h).
#include "jit/nan_canonical.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/Transforms/Utils/PromoteMemToReg.h>

#include <cstdint>
#include <vector>

namespace tilus::jit {

namespace {

/// `select(fcmp uno v, v), K, v)` with K a NaN constant: the form canonicalizeNaN emits.
bool isCanonicalization(const llvm::Instruction *i) {
  const auto *s = llvm::dyn_cast<llvm::SelectInst>(i);
  if (!s)
    return false;
  const auto *nan = llvm::dyn_cast<llvm::ConstantFP>(s->getTrueValue());
  const auto *cmp = llvm::dyn_cast<llvm::FCmpInst>(s->getCondition());
  const llvm::Value *v = s->getFalseValue();
  return nan && nan->isNaN() && cmp && cmp->getPredicate() == llvm::FCmpInst::FCMP_UNO &&
         cmp->getOperand(0) == v && cmp->getOperand(1) == v;
}

/// An operation through which a NaN operand leaves a NaN, with a non-NaN result never depending
/// on the NaN's payload: float arithmetic and conversions, the exponential, square root and the
/// PTX max/min, the f16/bf16/f32 mma (a NaN in A, B or C makes the D elements it reaches NaN),
/// and the moves that carry its bits whole (select as the value, bit casts between types of one
/// width and element count, vector and aggregate element moves, shfl.sync).
bool passesNaN(const llvm::Instruction *i, const llvm::Value *operand) {
  switch (i->getOpcode()) {
  case llvm::Instruction::FAdd:
  case llvm::Instruction::FSub:
  case llvm::Instruction::FMul:
  case llvm::Instruction::FDiv:
  case llvm::Instruction::FNeg:
  case llvm::Instruction::FPExt:
  case llvm::Instruction::FPTrunc:
  case llvm::Instruction::ExtractValue:
  case llvm::Instruction::InsertValue:
  case llvm::Instruction::ExtractElement:
  case llvm::Instruction::InsertElement:
  case llvm::Instruction::ShuffleVector:
    return true;
  case llvm::Instruction::Select: // the value passed, not the condition
    return llvm::cast<llvm::SelectInst>(i)->getCondition() != operand;
  case llvm::Instruction::BitCast: { // a NaN's bits stay one element
    llvm::Type *from = operand->getType(), *to = i->getType();
    auto count = [](llvm::Type *t) {
      auto *v = llvm::dyn_cast<llvm::FixedVectorType>(t);
      return v ? v->getNumElements() : 1u;
    };
    return count(from) == count(to) && from->getScalarSizeInBits() == to->getScalarSizeInBits();
  }
  default:
    break;
  }
  const auto *call = llvm::dyn_cast<llvm::CallInst>(i);
  if (!call)
    return false;
  if (const auto *asmCallee = llvm::dyn_cast<llvm::InlineAsm>(call->getCalledOperand())) {
    const std::string &text = asmCallee->getAsmString(); // exactly emit_scalar.cpp's
    for (const char *op : {"max.f32 ", "max.f64 ", "min.f32 ", "min.f64 "})
      if (text.rfind(op, 0) == 0)
        return true;
    return false;
  }
  switch (call->getIntrinsicID()) {
  case llvm::Intrinsic::sqrt:
  case llvm::Intrinsic::nvvm_ex2_approx_f:
  case llvm::Intrinsic::nvvm_ex2_approx_ftz_f:
    return true;
  case llvm::Intrinsic::nvvm_shfl_sync_bfly_i32: // the value moves to another lane
    return call->getArgOperand(1) == operand;
  default:
    break;
  }
  const llvm::Function *callee = call->getCalledFunction();
  return callee && callee->getName().starts_with("llvm.nvvm.mma.") &&
         operand->getType()->isFPOrFPVectorTy();
}

/// Whether the payload of a NaN in a value can be seen: a depth-first walk over its uses
/// through operations that pass a NaN on (passesNaN) and phis (loops: a value in progress is
/// assumed unseen, the greatest fixed point, so an answer that relied on such an assumption is kept
/// only for the value the walk started from; "seen" is always final). Bounded: past kBudget steps,
/// seen.
class PayloadWalk {
public:
  bool unseen(const llvm::Value *v) {
    steps = 0;
    bool assumed = false;
    return visit(v, assumed, 0);
  }

private:
  enum class State : uint8_t { InProgress, Seen, Unseen };
  static constexpr int kBudget = 4096;
  static constexpr int kDepth = 256;
  llvm::DenseMap<const llvm::Value *, State> state;
  int steps = 0;

  bool visit(const llvm::Value *v, bool &assumed, int depth) {
    auto found = state.find(v);
    if (found != state.end()) {
      if (found->second == State::InProgress)
        assumed = true;
      return found->second != State::Seen;
    }
    if (++steps > kBudget || depth > kDepth)
      return false;
    state[v] = State::InProgress;
    bool unseen = true, mine = false;
    for (const llvm::User *u : v->users()) {
      const auto *i = llvm::dyn_cast<llvm::Instruction>(u);
      if (!i)
        unseen = false;
      else if (llvm::isa<llvm::FCmpInst>(i) || isCanonicalization(i))
        continue; // a comparison sees no payload; a canonicalization replaces it
      else if (llvm::isa<llvm::PHINode>(i) || passesNaN(i, v))
        unseen = visit(i, mine, depth + 1);
      else
        unseen = false;
      if (!unseen)
        break;
    }
    if (!unseen)
      state[v] = State::Seen;
    else if (!mine)
      state[v] = State::Unseen;
    else
      state.erase(v); // unseen if the values in progress are: decided again when asked
    assumed = assumed || mine;
    return unseen;
  }
};

} // namespace

size_t dropUnseenNaNCanonicalizations(llvm::Function &f) {
  // values first in SSA form (Codegen keeps a variable assigned more than once in an alloca)
  std::vector<llvm::AllocaInst *> allocas;
  for (llvm::Instruction &i : f.getEntryBlock())
    if (auto *a = llvm::dyn_cast<llvm::AllocaInst>(&i); a && llvm::isAllocaPromotable(a))
      allocas.push_back(a);
  if (!allocas.empty()) {
    llvm::DominatorTree dt(f);
    llvm::PromoteMemToReg(allocas, dt);
  }
  PayloadWalk walk;
  std::vector<llvm::SelectInst *> unseen;
  for (llvm::BasicBlock &block : f)
    for (llvm::Instruction &i : block)
      if (isCanonicalization(&i) && walk.unseen(&i))
        unseen.push_back(llvm::cast<llvm::SelectInst>(&i));
  for (llvm::SelectInst *s : unseen) {
    s->replaceAllUsesWith(s->getFalseValue());
    s->eraseFromParent();
  }
  return unseen.size();
}

} // namespace tilus::jit
