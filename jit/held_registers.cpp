#include "jit/held_registers.h"

#include "jit/codegen.h"

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
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tilus::jit {

namespace {

/// The fewest distinct magic exponents (C2) of one group of `or` masks that share one held
/// register K (Holder::holdOrMasks). With one held register per magic, ptxas at a 128-register
/// cap keeps many of them in uniform registers and copies one before every use (the a16wx u1
/// kernel at m = 16: ten magics, about 60 such copies per step); sharing K removed them (u1 at
/// m = 16 on an H200 79.4 -> 70.8 us, u5 with six magics 0-6 % faster), while for two to five
/// magics (u4, i4, u2) the rewrite changed ptxas's schedule for the worse (u4 and i4 at m = 16,
/// (28672, 8192), 6-7 % slower; docs/jit.md).
constexpr size_t kSharedMagics = 6;

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

  /// One mask of a loop: `(x & C1) | C2` or `(x & C1) ^ C2`.
  struct MaskUse {
    llvm::Instruction *inst;
    llvm::Value *x;
    uint32_t c1, c2;
    bool isXor;
  };

  /// The masks' second constants, made once in registers. `(x & C1) | C2` is also
  /// lop3(x, C1 | C2, K) with lut (a & b & c) | (b & ~c) for any K that holds the bits of C1
  /// outside C2 and none of C2 (each bit of the result is x where the immediate and K are both
  /// set, the immediate's bit where K is clear). The masks of one dequantisation differ only in
  /// where their field lies (C1, inside the mantissa) and in the magic exponent (C2, outside
  /// it), so one K, the union of their C1, serves them all: one held register instead of one
  /// per magic, for groups (formed greedily in program order) of kSharedMagics magics or more.
  /// The other `or` masks and the `xor` masks (whose C1 and C2 overlap: a sign flip) keep
  /// their C2 held, when a loop uses it four times or more.
  size_t holdMaskConstants() {
    using namespace llvm::PatternMatch;
    std::vector<MaskUse> masks;
    for (llvm::BasicBlock &bb : f_) {
      if (!li_.getLoopFor(&bb))
        continue;
      for (llvm::Instruction &i : bb) {
        llvm::Value *x = nullptr;
        const llvm::APInt *c1 = nullptr, *c2 = nullptr;
        // the constant is operand 1 (InstCombine's canonical order, which the patterns require)
        if (!i.getType()->isIntegerTy(32))
          continue;
        bool isOr = match(&i, m_Or(m_And(m_Value(x), m_APInt(c1)), m_APInt(c2)));
        if (!isOr && !match(&i, m_Xor(m_And(m_Value(x), m_APInt(c1)), m_APInt(c2))))
          continue;
        masks.push_back({&i, x, uint32_t(c1->getZExtValue()), uint32_t(c2->getZExtValue()), !isOr});
      }
    }
    size_t made = holdOrMasks(masks);
    std::map<uint32_t, std::vector<llvm::Instruction *>> uses;
    for (const MaskUse &m : masks)
      if (m.inst)
        uses[m.c2].push_back(m.inst);
    for (auto &[value, users] : uses) {
      if (users.size() < 4)
        continue;
      llvm::Value *&held = constants_[value];
      if (!held) {
        held = heldConstant(value);
        ++made;
      }
      for (llvm::Instruction *i : users)
        i->setOperand(1, held);
    }
    return made;
  }

  /// `value` made once at the entry, in a register that ptxas cannot see through.
  llvm::Value *heldConstant(uint32_t value) {
    llvm::Value *z = opaqueZero();
    llvm::IRBuilder<> b(llvm::cast<llvm::Instruction>(z)->getNextNode());
    return b.CreateAdd(b.getInt32(value), z, "held");
  }

  /// Rewrites the `or` masks of each group with kSharedMagics distinct C2 or more as lop3 with
  /// one held K and clears their `inst`; the others are left to one held C2 each.
  size_t holdOrMasks(std::vector<MaskUse> &masks) {
    struct Group {
      uint32_t k = 0;      // the union of C1 & ~C2
      uint32_t magics = 0; // the union of C2
      std::set<uint32_t> distinct;
      std::vector<MaskUse *> uses;
    };
    std::vector<Group> groups;
    for (MaskUse &m : masks) {
      if (m.isXor)
        continue;
      uint32_t field = m.c1 & ~m.c2;
      Group *g = nullptr;
      for (Group &h : groups)
        if ((h.k & m.c2) == 0 && (field & h.magics) == 0) {
          g = &h;
          break;
        }
      if (!g)
        g = &groups.emplace_back();
      g->k |= field;
      g->magics |= m.c2;
      g->distinct.insert(m.c2);
      g->uses.push_back(&m);
    }
    size_t made = 0;
    for (const Group &g : groups) {
      if (g.distinct.size() < kSharedMagics)
        continue;
      llvm::Value *k = heldConstant(g.k);
      ++made;
      for (MaskUse *m : g.uses) {
        // lut 0xC4 = (a & b & c) | (b & ~c) over a = 0xF0, b = 0xCC, c = 0xAA
        std::string text = "lop3.b32 $0, $1, " + std::to_string(m->c1 | m->c2) + ", $2, 0xC4;";
        llvm::IRBuilder<> b(m->inst);
        llvm::Value *r = pureAsm(b, b.getInt32Ty(), text, "=r,r,r", {m->x, k});
        m->inst->replaceAllUsesWith(r);
        m->inst->eraseFromParent();
        m->inst = nullptr;
      }
    }
    return made;
  }
};

} // namespace

size_t holdLoopInvariantRegisters(llvm::Function &f) { return Holder(f).run(); }

} // namespace tilus::jit
