// Canonical NaNs only where a NaN's bits can be seen (see nan_canonical.h).
#include "jit/nan_canonical.h"

#include <llvm/ADT/DenseMap.h>
#include <llvm/ADT/DenseSet.h>
#include <llvm/ADT/MapVector.h>
#include <llvm/Analysis/ConstantFolding.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/Transforms/Utils/PromoteMemToReg.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace tilus::jit {

namespace {

constexpr const char *kMarked = "tilus.nan.canonicalization";

/// `select(fcmp uno v, v), K, v)` with K a NaN constant: the form canonicalizeNaN emits; or a
/// select marked by markNaNCanonicalization.
bool isCanonicalization(const llvm::Instruction *i) {
  const auto *s = llvm::dyn_cast<llvm::SelectInst>(i);
  if (!s)
    return false;
  if (s->getMetadata(kMarked))
    return true;
  const auto *nan = llvm::dyn_cast<llvm::ConstantFP>(s->getTrueValue());
  const auto *cmp = llvm::dyn_cast<llvm::FCmpInst>(s->getCondition());
  const llvm::Value *v = s->getFalseValue();
  return nan && nan->isNaN() && cmp && cmp->getPredicate() == llvm::FCmpInst::FCMP_UNO &&
         cmp->getOperand(0) == v && cmp->getOperand(1) == v;
}

/// The float Max/Min of emit_scalar.cpp: inline PTX `max`/`min` (a NaN operand gives the other
/// one, two NaNs a NaN).
bool isPtxMinMax(const std::string &text) {
  for (const char *op : {"max.f32 ", "max.f64 ", "min.f32 ", "min.f64 "})
    if (text.rfind(op, 0) == 0)
      return true;
  return false;
}

/// Inline PTX whose result is the same for every NaN operand: the float -> integer `cvt.rzi`
/// (NaN gives 0), the FP8 pair conversions of Codegen::quantizeFp8, whose NaN codes are
/// replaced by the canonical code right after (emit_convert.cpp), and the PTX max/min of a
/// number constant (a NaN operand gives the constant: the result is never NaN).
bool hidesNaN(const llvm::Instruction *i) {
  const auto *call = llvm::dyn_cast<llvm::CallInst>(i);
  const auto *asmCallee =
      call ? llvm::dyn_cast<llvm::InlineAsm>(call->getCalledOperand()) : nullptr;
  if (!asmCallee)
    return false;
  const std::string &text = asmCallee->getAsmString();
  for (const char *op : {"cvt.rzi.", "cvt.rn.satfinite.e4m3x2.", "cvt.rn.satfinite.e5m2x2."})
    if (text.rfind(op, 0) == 0)
      return true;
  if (isPtxMinMax(text))
    for (const llvm::Value *arg : call->args())
      if (const auto *c = llvm::dyn_cast<llvm::ConstantFP>(arg); c && !c->isNaN())
        return true;
  return false;
}

/// An operation through which a NaN operand leaves a NaN, with a non-NaN result never depending
/// on the NaN's payload: float arithmetic and conversions, fused multiply-add, the exponential,
/// the reciprocal (`rcp.approx`), square root, absolute value and the PTX max/min, the device
/// library's math functions of one argument (NaN in, NaN out), the f16/bf16/f32 mma (a NaN in A, B
/// or C makes the D elements it reaches NaN), and the moves that carry its bits whole (select as
/// the value, bit casts between types of one width and element count, vector and aggregate element
/// moves, shfl.sync), the wgmma accumulator, and the 32-bit registers of a wgmma A operand (two
/// 16-bit elements bit cast into one, the fence that ties them, the wgmma that reads them).
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
    if (count(from) == count(to) && from->getScalarSizeInBits() == to->getScalarSizeInBits())
      return true;
    // two 16-bit elements packed into the 32-bit register of a wgmma A operand: each NaN keeps
    // its bits in its half (what the register reaches is decided by its own users)
    return count(from) == 2 && from->getScalarSizeInBits() == 16 && to->isIntegerTy(32);
  }
  default:
    break;
  }
  const auto *call = llvm::dyn_cast<llvm::CallInst>(i);
  if (!call)
    return false;
  if (const auto *asmCallee = llvm::dyn_cast<llvm::InlineAsm>(call->getCalledOperand())) {
    const std::string &text = asmCallee->getAsmString();
    if (isPtxMinMax(text) || text.rfind("rcp.approx.", 0) == 0)
      return true;
    // the pair conversions of Codegen::narrowPairs: a NaN operand gives a NaN half
    if (text.rfind("cvt.rn.f16x2.f32 ", 0) == 0 || text.rfind("cvt.rn.bf16x2.f32 ", 0) == 0)
      return true;
    // the wgmma accumulator (jit/lower_contraction_wgmma.cpp): a NaN in C makes the element of
    // D it is added to NaN
    if (operand->getType()->isFloatingPointTy() &&
        text.find("wgmma.mma_async.") != std::string::npos)
      return true;
    // a 32-bit register of a wgmma A operand: the wgmma (a NaN element of A makes the elements
    // of D it reaches NaN; the other i32 operand, scale-d, is a constant) and the wgmma.fence
    // that ties the registers before it (they leave as they came)
    if (operand->getType()->isIntegerTy(32) &&
        (text.find("wgmma.mma_async.") != std::string::npos || text == "wgmma.fence.sync.aligned;"))
      return true;
    return false;
  }
  switch (call->getIntrinsicID()) {
  case llvm::Intrinsic::sqrt:
  case llvm::Intrinsic::fabs:
  case llvm::Intrinsic::fma:
  case llvm::Intrinsic::nvvm_ex2_approx_f:
  case llvm::Intrinsic::nvvm_ex2_approx_ftz_f:
    return true;
  case llvm::Intrinsic::nvvm_shfl_sync_bfly_i32: // the value moves to another lane
    return call->getArgOperand(1) == operand;
  default:
    break;
  }
  const llvm::Function *callee = call->getCalledFunction();
  if (!callee)
    return false;
  llvm::StringRef name = callee->getName();
  for (const char *math :
       {"tl_expf", "tl_exp", "tl_exp2", "tl_log", "tl_log2", "tl_sin", "tl_cos", "tl_tanh"})
    if (name == math)
      return true;
  return name.starts_with("llvm.nvvm.mma.") && operand->getType()->isFPOrFPVectorTy();
}

bool isShared(const llvm::Value *pointer) {
  return pointer->getType()->isPointerTy() && pointer->getType()->getPointerAddressSpace() == 3;
}

/// Whether shared memory can be read other than by plain LLVM loads of addrspace(3): inline PTX
/// that touches shared memory (ldmatrix, wgmma, shared atomics, mbarriers; not the cp.async
/// copies, which only write it from global memory), LLVM atomics or memory intrinsics on it,
/// and shared pointers turned into generic ones.
bool sharedReadOpaquely(llvm::Function &f) {
  for (llvm::BasicBlock &block : f)
    for (llvm::Instruction &i : block) {
      if (const auto *call = llvm::dyn_cast<llvm::CallInst>(&i)) {
        if (const auto *a = llvm::dyn_cast<llvm::InlineAsm>(call->getCalledOperand())) {
          const std::string &text = a->getAsmString();
          bool copy = text.find("cp.async.ca.shared.global") != std::string::npos ||
                      text.find("cp.async.cg.shared.global") != std::string::npos;
          if (!copy && (text.find("shared") != std::string::npos ||
                        text.find("ldmatrix") != std::string::npos ||
                        text.find("wgmma") != std::string::npos))
            return true;
        } else if (llvm::isa<llvm::MemIntrinsic>(call)) {
          return true;
        }
      } else if (llvm::isa<llvm::AtomicRMWInst>(i) || llvm::isa<llvm::AtomicCmpXchgInst>(i)) {
        return true;
      } else if (const auto *cast = llvm::dyn_cast<llvm::AddrSpaceCastInst>(&i)) {
        if (isShared(cast->getPointerOperand()))
          return true;
      } else if (const auto *cast = llvm::dyn_cast<llvm::IntToPtrInst>(&i)) {
        if (!isShared(cast))
          return true;
      }
    }
  return false;
}

/// The canonicalizations whose NaN payload can be seen. A value's payload is seen when one of
/// its users is something other than a comparison, a canonicalization, a conversion that hides
/// NaNs (hidesNaN), a phi or an operation that passes a NaN on (passesNaN), or when it is one of
/// the latter two and its result's payload is seen. Shared memory is one more carrier when
/// plain loads are its only readers: a value stored there is seen when any shared load's result
/// is (every thread of the block runs the same loads; shared memory ends with the block).
/// Computed as a least fixed point over the values a NaN can travel through from the
/// canonicalizations (linear in their uses): forward, the carriers and the users that see;
/// backward, "seen" from each user to its operands. A phi cycle with nothing that sees stays
/// unseen (the greatest fixed point of "unseen").
class PayloadFlow {
public:
  explicit PayloadFlow(llvm::Function &f) {
    bool sharedCarries = !sharedReadOpaquely(f);
    const llvm::Value *shared = &f; // the node standing for all of shared memory
    std::vector<const llvm::Value *> sharedLoads;
    for (llvm::BasicBlock &block : f)
      for (llvm::Instruction &i : block)
        if (const auto *load = llvm::dyn_cast<llvm::LoadInst>(&i);
            load && isShared(load->getPointerOperand()))
          sharedLoads.push_back(load);
    std::vector<const llvm::Value *> work;
    auto reach = [&](const llvm::Value *v) {
      if (index.try_emplace(v, values.size()).second) {
        values.push_back(v);
        feeds.emplace_back();
        seen.push_back(false);
        work.push_back(v);
      }
    };
    for (llvm::BasicBlock &block : f)
      for (llvm::Instruction &i : block)
        if (isCanonicalization(&i))
          reach(&i);
    while (!work.empty()) {
      const llvm::Value *v = work.back();
      work.pop_back();
      if (v == shared) { // every shared load reads what the stores left
        for (const llvm::Value *load : sharedLoads) {
          reach(load);
          feeds[index[load]].push_back(index[shared]);
        }
        continue;
      }
      for (const llvm::User *u : v->users()) {
        const auto *i = llvm::dyn_cast<llvm::Instruction>(u);
        if (i && (llvm::isa<llvm::FCmpInst>(i) || isCanonicalization(i) || hidesNaN(i)))
          continue; // a comparison sees no payload; a canonicalization replaces it
        const auto *store = llvm::dyn_cast_or_null<llvm::StoreInst>(i);
        if (sharedCarries && store && store->getValueOperand() == v &&
            isShared(store->getPointerOperand())) {
          reach(shared);
          feeds[index[shared]].push_back(index[v]);
          continue;
        }
        if (i && (llvm::isa<llvm::PHINode>(i) || passesNaN(i, v))) {
          reach(i);
          feeds[index[i]].push_back(index[v]); // i seen -> v seen
        } else {
          seen[index[v]] = true;
          if (i)
            seeing.push_back({v, i});
        }
      }
    }
    for (size_t k = 0; k < values.size(); ++k)
      if (seen[k])
        work.push_back(values[k]);
    while (!work.empty()) {
      size_t k = index[work.back()];
      work.pop_back();
      for (size_t from : feeds[k])
        if (!seen[from]) {
          seen[from] = true;
          work.push_back(values[from]);
        }
    }
  }

  bool unseen(const llvm::Value *v) const {
    auto found = index.find(v);
    return found != index.end() && !seen[found->second];
  }

  /// The uses where a payload is seen: (value, the instruction that sees it).
  const std::vector<std::pair<const llvm::Value *, const llvm::Instruction *>> &seeingUses() const {
    return seeing;
  }

  /// Per value, the deepest loop nesting of a canonicalization whose value reaches it (a
  /// forward least fixed point over the carriers; 0 for values no canonicalization reaches).
  llvm::DenseMap<const llvm::Value *, unsigned> reachDepth(const llvm::LoopInfo &loops) const {
    std::vector<std::vector<size_t>> next(values.size());
    for (size_t k = 0; k < values.size(); ++k)
      for (size_t from : feeds[k])
        next[from].push_back(k);
    std::vector<unsigned> depth(values.size(), 0);
    std::vector<size_t> work;
    for (size_t k = 0; k < values.size(); ++k)
      if (const auto *i = llvm::dyn_cast<llvm::Instruction>(values[k]);
          i && isCanonicalization(i)) {
        depth[k] = loops.getLoopDepth(i->getParent());
        work.push_back(k);
      }
    while (!work.empty()) {
      size_t k = work.back();
      work.pop_back();
      for (size_t to : next[k])
        if (depth[to] < depth[k]) {
          depth[to] = depth[k];
          work.push_back(to);
        }
    }
    llvm::DenseMap<const llvm::Value *, unsigned> out;
    for (size_t k = 0; k < values.size(); ++k)
      out[values[k]] = depth[k];
    return out;
  }

private:
  std::vector<std::pair<const llvm::Value *, const llvm::Instruction *>> seeing;
  llvm::DenseMap<const llvm::Value *, size_t> index;
  std::vector<const llvm::Value *> values;
  std::vector<std::vector<size_t>> feeds; // per value: the operands whose payload it carries
  std::vector<bool> seen;
};

} // namespace

void markNaNCanonicalization(llvm::SelectInst *select) {
  select->setMetadata(kMarked, llvm::MDNode::get(select->getContext(), {}));
}

namespace {

/// Moves canonicalizations out of loops towards where their payload is seen: for each use that
/// sees a float value (or the float operand of a same-width bit cast that it sees) outside the
/// loop of some canonicalization reaching it, a canonicalization right before that use. The
/// value there is then canonical whatever reaches it, so the canonicalizations inside the loop
/// that were kept only for this use become unseen (a loop-carried accumulator published after
/// its loop: one pair per element after the loop instead of one per element and iteration).
/// Adds canonicalizations only at loop depths below those they make removable.
/// Also, a canonicalization whose payload is seen only through some of its uses, its other users
/// seeing none, moves to the nearest common dominator of those uses where that block runs no more
/// often than it (in its loop, or outside every loop that does not hold it): the paths that do
/// not see the payload lose it (accumulators after their k loop, stored as raw bits in a split-K
/// branch and converted to f16 for the epilogue: the canonicalizations only in that branch).
void sinkIntoSeeingUses(llvm::Function &f, const PayloadFlow &flow) {
  if (flow.seeingUses().empty())
    return;
  llvm::DominatorTree dt(f);
  llvm::LoopInfo loops(dt);
  llvm::DenseMap<const llvm::Value *, unsigned> depth = flow.reachDepth(loops);
  llvm::DenseMap<llvm::Type *, llvm::Constant *> nanOf; // the canonical NaN of each type
  for (llvm::BasicBlock &block : f)
    for (llvm::Instruction &i : block)
      if (isCanonicalization(&i))
        if (auto *c =
                llvm::dyn_cast<llvm::Constant>(llvm::cast<llvm::SelectInst>(&i)->getTrueValue()))
          nanOf.try_emplace(i.getType(), c);
  // the seeing uses of each float value, each as the instruction before which the value is
  // canonicalized: the use itself, or the same-width bit cast whose result it sees
  llvm::MapVector<llvm::Value *, std::vector<llvm::Instruction *>> byTarget;
  llvm::DenseSet<std::pair<llvm::Value *, llvm::Instruction *>> listed;
  for (auto [v, user] : flow.seeingUses()) {
    auto *at = const_cast<llvm::Instruction *>(user);
    auto *target = const_cast<llvm::Value *>(v);
    if (!target->getType()->isFPOrFPVectorTy()) {
      auto *cast = llvm::dyn_cast<llvm::BitCastInst>(target);
      if (!cast || !cast->getOperand(0)->getType()->isFPOrFPVectorTy())
        continue;
      target = cast->getOperand(0);
      at = cast;
    }
    if (listed.insert({target, at}).second)
      byTarget[target].push_back(at);
  }
  for (auto &[target, ats] : byTarget) {
    llvm::Constant *nan = nanOf.lookup(target->getType());
    if (!nan)
      continue;
    // a canonicalization seen only through some of its uses, its other users seeing no
    // payload: one canonicalization at the nearest common dominator of those uses when that
    // block is not the canonicalization's own and runs no more often (in its loop, or outside
    // every loop that does not hold it); the canonicalization itself then goes
    if (auto *c = llvm::dyn_cast<llvm::SelectInst>(target);
        c && isCanonicalization(c) &&
        std::none_of(ats.begin(), ats.end(),
                     [](const llvm::Instruction *at) { return llvm::isa<llvm::PHINode>(at); })) {
      bool othersUnseen = true;
      for (const llvm::User *u : c->users()) {
        const auto *i = llvm::dyn_cast<llvm::Instruction>(u);
        if (i && (std::find(ats.begin(), ats.end(), i) != ats.end() ||
                  llvm::isa<llvm::FCmpInst>(i) || isCanonicalization(i) || hidesNaN(i)))
          continue;
        if (!i || !(llvm::isa<llvm::PHINode>(i) || passesNaN(i, c)) || !flow.unseen(i))
          othersUnseen = false;
      }
      llvm::BasicBlock *block = ats.front()->getParent();
      for (llvm::Instruction *other : ats)
        block = dt.findNearestCommonDominator(block, other->getParent());
      const llvm::Loop *loop = block ? loops.getLoopFor(block) : nullptr;
      if (othersUnseen && block && block != c->getParent() &&
          (!loop || loop->contains(c->getParent()))) {
        llvm::IRBuilder<> b(block, block->getFirstInsertionPt());
        llvm::Value *raw = c->getFalseValue();
        auto *select =
            llvm::cast<llvm::SelectInst>(b.CreateSelect(b.CreateFCmpUNO(raw, raw), nan, raw));
        markNaNCanonicalization(select);
        for (llvm::Instruction *use : ats)
          use->replaceUsesOfWith(c, select);
        continue;
      }
    }
    // each use outside the loop of a canonicalization reaching it
    auto d = depth.find(target);
    if (d == depth.end())
      continue;
    for (llvm::Instruction *at : ats) {
      if (loops.getLoopDepth(at->getParent()) >= d->second || llvm::isa<llvm::PHINode>(at))
        continue;
      // a canonicalization used as it stands is canonicalized here from its operand instead
      llvm::Value *raw = target;
      if (const auto *i = llvm::dyn_cast<llvm::Instruction>(target); i && isCanonicalization(i))
        raw = llvm::cast<llvm::SelectInst>(target)->getFalseValue();
      llvm::IRBuilder<> b(at);
      llvm::Value *isNaN = b.CreateFCmpUNO(raw, raw);
      auto *select = llvm::cast<llvm::SelectInst>(b.CreateSelect(isNaN, nan, raw));
      markNaNCanonicalization(select);
      at->replaceUsesOfWith(target, select);
    }
  }
}

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
  sinkIntoSeeingUses(f, PayloadFlow(f));
  PayloadFlow flow(f);
  std::vector<llvm::SelectInst *> unseen;
  for (llvm::BasicBlock &block : f)
    for (llvm::Instruction &i : block)
      if (isCanonicalization(&i) && flow.unseen(&i))
        unseen.push_back(llvm::cast<llvm::SelectInst>(&i));
  for (llvm::SelectInst *s : unseen) {
    s->replaceAllUsesWith(s->getFalseValue());
    s->eraseFromParent();
  }
  return unseen.size();
}

size_t lowerPairCanonicalizations(llvm::Function &f, int smVersion) {
  std::vector<llvm::SelectInst *> pairs;
  for (llvm::BasicBlock &block : f)
    for (llvm::Instruction &i : block) {
      auto *s = llvm::dyn_cast<llvm::SelectInst>(&i);
      auto *type = s ? llvm::dyn_cast<llvm::FixedVectorType>(s->getType()) : nullptr;
      if (!type || type->getNumElements() != 2 || !isCanonicalization(s))
        continue;
      bool f16 = type->getElementType()->isHalfTy();
      bool bf16 = type->getElementType()->isBFloatTy() && smVersion >= 90;
      const auto *cmp = llvm::dyn_cast<llvm::FCmpInst>(s->getCondition());
      const llvm::Value *v = s->getFalseValue();
      if ((f16 || bf16) && cmp && cmp->getPredicate() == llvm::FCmpInst::FCMP_UNO &&
          cmp->getOperand(0) == v && cmp->getOperand(1) == v &&
          llvm::isa<llvm::Constant>(s->getTrueValue()))
        pairs.push_back(s);
    }
  for (llvm::SelectInst *s : pairs) {
    llvm::IRBuilder<> b(s);
    bool f16 = s->getType()->getScalarType()->isHalfTy();
    llvm::Type *i32 = b.getInt32Ty();
    llvm::Value *bits = b.CreateBitCast(s->getFalseValue(), i32);
    uint64_t nan = llvm::cast<llvm::ConstantInt>(
                       llvm::ConstantFoldCastOperand(llvm::Instruction::BitCast,
                                                     llvm::cast<llvm::Constant>(s->getTrueValue()),
                                                     i32, f.getDataLayout()))
                       ->getZExtValue();
    // PTX ISA, set: with a .u32 destination and .f16x2 (.bf16x2) operands each 16-bit half of
    // d is 0xFFFF where the comparison of its halves holds, 0 elsewhere; lop3 0xB8 is
    // (a & ~b) | (c & b): the pair where no NaN is, the canonical NaN where one is
    auto *type = llvm::FunctionType::get(i32, {i32}, false);
    std::string text = std::string("{ .reg .b32 m; set.nan.u32.") + (f16 ? "f16x2" : "bf16x2") +
                       " m, $1, $1; lop3.b32 $0, $1, m, " + std::to_string(nan) + ", 0xB8; }";
    llvm::CallInst *r = b.CreateCall(llvm::InlineAsm::get(type, text, "=r,r", false), {bits});
    r->setDoesNotAccessMemory();
    r->setDoesNotThrow();
    s->replaceAllUsesWith(b.CreateBitCast(r, s->getType()));
    llvm::Instruction *cond = llvm::dyn_cast<llvm::Instruction>(s->getCondition());
    s->eraseFromParent();
    if (cond && cond->use_empty())
      cond->eraseFromParent();
  }
  return pairs.size();
}

} // namespace tilus::jit
