// Helpers shared by the memory lowerings (lower_memory.cpp, lower_memory_global.cpp,
// lower_memory_async.cpp): guarded execution, and the grouping of a thread's local slots into runs
// of consecutive elements that one vector access can move.
#pragma once

#include "jit/codegen.h"

namespace tilus::jit {

/// The offset in elements (i32) of the root coordinates `c` (i32, one per dimension) in
/// `layout`: SharedLayout::offset as IR. With constant coordinates the builder folds it to a
/// constant (the unit tests compare it with SharedLayout::offset over whole layouts).
llvm::Value *sharedLayoutOffset(llvm::IRBuilder<> &b, const SharedLayout &layout,
                                const std::vector<llvm::Value *> &c);

/// Runs `body` only when `cond` holds; returns the value it produced, or `otherwise`.
template <typename F>
llvm::Value *guarded(Codegen &cg, llvm::Value *cond, llvm::Value *otherwise, F &&body) {
  llvm::IRBuilder<> &b = cg.b;
  if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(cond)) {
    if (c->isOne())
      return body();
    return otherwise;
  }
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *from = b.GetInsertBlock();
  llvm::BasicBlock *then = llvm::BasicBlock::Create(cg.ctx, "inb", fn);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(cg.ctx, "inb.end", fn);
  b.CreateCondBr(cond, then, join);
  b.SetInsertPoint(then);
  llvm::Value *v = body();
  llvm::BasicBlock *thenEnd = b.GetInsertBlock();
  b.CreateBr(join);
  b.SetInsertPoint(join);
  if (!otherwise)
    return nullptr;
  llvm::PHINode *phi = b.CreatePHI(otherwise->getType(), 2);
  phi->addIncoming(v, thenEnd);
  phi->addIncoming(otherwise, from);
  return phi;
}

/// A run of local slots [first, first + count) whose elements are consecutive along tile
/// dimension `dim` (Loc advances by exactly 1 in `dim` and nowhere else).
struct SlotGroup {
  int64_t first = 0;
  int64_t count = 1;
  int dim = -1;
};

/// Split the slots into runs of consecutive elements along a dimension whose `unitStride` entry
/// is true: at each slot the widest power of two from `width` down to `minWidth` whose run is
/// aligned to its width in the tile; single slots otherwise.
std::vector<SlotGroup> groupSlots(const LayoutMap &map, int width, int minWidth,
                                  const std::vector<bool> &unitStride);
/// The narrowest group worth a vector access (4 bytes), in elements of `bytes` bytes.
int minVectorWidth(int bytes);
/// The widest vector (in elements, at most 16 bytes) worth trying.
int vectorWidth(int bytes, int64_t locals);
/// Whether v is the constant 1.
bool isConstOne(llvm::Value *v);

} // namespace tilus::jit
