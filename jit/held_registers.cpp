#include "jit/held_registers.h"

#include <llvm/Analysis/LoopInfo.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/PatternMatch.h>

#include <map>
#include <string>
#include <utility>
#include <vector>

namespace tilus::jit {

namespace {

/// The mma.sync calls: the NVVM intrinsics and the inline PTX of jit/lower_contraction_dot.cpp.
bool isMma(const llvm::CallInst &call) {
  if (const llvm::Function *f = call.getCalledFunction())
    return f->getName().starts_with("llvm.nvvm.mma.");
  if (const auto *a = llvm::dyn_cast<llvm::InlineAsm>(call.getCalledOperand()))
    return a->getAsmString().find("mma.sync.") != std::string::npos;
  return false;
}

/// A 32-bit operand register: i32, or a vector of two 16-bit values (A and B fragments; the
/// f32 accumulators are not repeated).
bool isOperandRegister(const llvm::Type *t) {
  if (t->isIntegerTy(32))
    return true;
  const auto *v = llvm::dyn_cast<llvm::FixedVectorType>(t);
  return v && v->getNumElements() == 2 && v->getElementType()->getPrimitiveSizeInBits() == 16;
}

class Holder {
public:
  explicit Holder(llvm::Function &f) : f_(f), dt_(f), li_(dt_) {}

  size_t run() {
    size_t made = separateRepeatedOperands();
    made += holdMaskConstants();
    return made;
  }

private:
  llvm::Function &f_;
  llvm::DominatorTree dt_;
  llvm::LoopInfo li_;
  llvm::Value *zero_ = nullptr;
  std::map<std::pair<llvm::Value *, unsigned>, llvm::Value *> copies_;
  std::map<uint32_t, llvm::Value *> constants_;

  /// Lane 0's lane index (0), read at the entry with one shuffle.
  llvm::Value *opaqueZero() {
    if (zero_)
      return zero_;
    llvm::IRBuilder<> b(&*f_.getEntryBlock().getFirstInsertionPt());
    llvm::Module *m = f_.getParent();
    llvm::Value *lane = b.CreateCall(
        llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::nvvm_read_ptx_sreg_laneid));
    zero_ =
        b.CreateCall(llvm::Intrinsic::getDeclaration(m, llvm::Intrinsic::nvvm_shfl_sync_idx_i32),
                     {b.getInt32(-1), lane, b.getInt32(0), b.getInt32(31)}, "zero");
    return zero_;
  }

  /// v + 0 (as i32 bits) before `at`, in v's type.
  llvm::Value *copy(llvm::Value *v, llvm::Instruction *at) {
    llvm::Value *z = opaqueZero();
    llvm::IRBuilder<> b(at);
    llvm::Value *bits = v->getType()->isIntegerTy(32) ? v : b.CreateBitCast(v, b.getInt32Ty());
    llvm::Value *sum = b.CreateAdd(bits, z, "held");
    return sum->getType() == v->getType() ? sum : b.CreateBitCast(sum, v->getType());
  }

  /// The outermost loop around `use` that does not contain v's definition (nullptr if none).
  llvm::Loop *invariantLoop(llvm::Value *v, llvm::Instruction *use) {
    llvm::Loop *loop = li_.getLoopFor(use->getParent());
    auto *def = llvm::dyn_cast<llvm::Instruction>(v);
    if (!loop || (def && loop->contains(def)))
      return nullptr;
    while (loop->getParentLoop() && !(def && loop->getParentLoop()->contains(def)))
      loop = loop->getParentLoop();
    return loop;
  }

  size_t separateRepeatedOperands() {
    size_t made = 0;
    std::vector<llvm::CallInst *> calls;
    for (llvm::BasicBlock &bb : f_)
      for (llvm::Instruction &i : bb)
        if (auto *call = llvm::dyn_cast<llvm::CallInst>(&i); call && isMma(*call))
          calls.push_back(call);
    for (llvm::CallInst *call : calls) {
      std::map<llvm::Value *, unsigned> seen;
      for (unsigned k = 0; k < call->arg_size(); ++k) {
        llvm::Value *v = call->getArgOperand(k);
        if (!isOperandRegister(v->getType()))
          continue;
        unsigned repeat = seen[v]++;
        if (repeat == 0)
          continue;
        llvm::Loop *loop = invariantLoop(v, call);
        llvm::BasicBlock *pre = loop ? loop->getLoopPreheader() : nullptr;
        if (!pre)
          continue;
        // one copy per value and repeat, shared by every mma of the loop
        llvm::Value *&held = copies_[{v, repeat}];
        if (!held || !dt_.dominates(held, call)) {
          held = copy(v, pre->getTerminator());
          ++made;
        }
        call->setArgOperand(k, held);
      }
    }
    return made;
  }

  size_t holdMaskConstants() {
    using namespace llvm::PatternMatch;
    std::map<uint32_t, std::vector<llvm::Instruction *>> uses;
    for (llvm::BasicBlock &bb : f_) {
      if (!li_.getLoopFor(&bb))
        continue;
      for (llvm::Instruction &i : bb) {
        llvm::Value *x = nullptr;
        const llvm::APInt *c1 = nullptr, *c2 = nullptr;
        // the constant is operand 1 (InstCombine's canonical order, which the patterns require)
        if (!i.getType()->isIntegerTy(32) ||
            !(match(&i, m_Or(m_And(m_Value(x), m_APInt(c1)), m_APInt(c2))) ||
              match(&i, m_Xor(m_And(m_Value(x), m_APInt(c1)), m_APInt(c2)))))
          continue;
        uses[uint32_t(c2->getZExtValue())].push_back(&i);
      }
    }
    size_t made = 0;
    for (auto &[value, users] : uses) {
      if (users.size() < 4)
        continue;
      llvm::Value *&held = constants_[value];
      if (!held) {
        llvm::Value *z = opaqueZero();
        llvm::IRBuilder<> b(llvm::cast<llvm::Instruction>(z)->getNextNode());
        held = b.CreateAdd(b.getInt32(value), z, "held");
        ++made;
      }
      for (llvm::Instruction *i : users)
        i->setOperand(1, held);
    }
    return made;
  }
};

} // namespace

size_t holdLoopInvariantRegisters(llvm::Function &f) { return Holder(f).run(); }

} // namespace tilus::jit
