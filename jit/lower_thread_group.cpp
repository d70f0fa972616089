// The parallel statement (docs/isa.md, "Thread groups: warp specialisation"): each group is a
// warp-uniform `if (B <= tid < B + COUNT)` around its body, lowered as a block of COUNT threads
// (thread index tid - B, its own named barrier and its own part of the scratch area); with
// regs= the group re-allocates its registers (setmaxnreg) on entry and gives them back on exit.
// The copies of a clause (copies=C) are C such groups. Up to kCopiesLoweredApart copies, the body
// is lowered once for each with its copy index a constant (the index then folds into addresses
// and tests as a constant does: with the index computed from the thread index,
// programs/gemm/wgmma_ws.tasm ran 1 % slower on an H200 at 4096^3). More copies are one body for
// all, so that the kernel's code and its compile time do not grow with C: the copy index is
// (tid - B) / COUNT, warp-uniform since COUNT is a multiple of 32, and selects the copy's named
// barrier and its part of the scratch area.
// A block barrier precedes the groups (the code before may use the scratch area that the groups
// share out) and joins them after.
#include "jit/codegen.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

namespace {

/// Clauses of at most this many copies are lowered once per copy, the index a constant.
constexpr uint32_t kCopiesLoweredApart = 2;

void setMaxRegisters(llvm::IRBuilder<> &b, int64_t from, int64_t to) {
  if (from == to)
    return;
  std::string text = std::string("setmaxnreg.") + (to > from ? "inc" : "dec") +
                     ".sync.aligned.u32 " + std::to_string(to) + ";";
  auto *type = llvm::FunctionType::get(b.getVoidTy(), false);
  b.CreateCall(llvm::InlineAsm::get(type, text, "~{memory}", /*hasSideEffects=*/true), {});
}

} // namespace

Status Codegen::lowerParallel(const Stmt &s) {
  bool regs = false;
  for (const Stmt &g : s.body)
    regs = regs || g.regs != 0;
  if (regs && opts.smVersion < 90) {
    Location loc;
    loc.program = prog.name;
    loc.line = s.loc.line;
    loc.column = s.loc.column;
    return Status::error(ErrorCode::Unsupported,
                         "group(regs=) needs sm_90a (Hopper, setmaxnreg); the target is sm_" +
                             std::to_string(opts.smVersion),
                         loc);
  }
  int64_t start = groupStartRegisters(info.threads, prog.blocksPerSm);
  barrier();
  llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx, "parallel.end", fn_);
  int64_t begin = 0;
  int barrierId = 1;
  for (const Stmt &g : s.body) {
    const std::pair<int64_t, int64_t> &scratch = info.groupScratch[groupsLowered_++];
    const uint32_t copies = std::max<uint32_t>(g.copies, 1);
    const bool oneBody = copies > kCopiesLoweredApart;
    for (uint32_t copy = 0; copy < (oneBody ? 1 : copies); ++copy) {
      // the group's thread index, computed once in the prologue like the block's
      llvm::IRBuilder<> pb(entry_->getTerminator());
      llvm::Value *rel = pb.CreateSub(tid_, pb.getInt32(uint32_t(begin)), "group.tid");
      llvm::Value *local = rel;
      llvm::Value *index = nullptr;
      int64_t span = int64_t(g.threads);
      if (oneBody) {
        // one body for every copy: the copy index and the thread index within the copy
        span *= int64_t(copies);
        index = pb.CreateUDiv(rel, pb.getInt32(g.threads), "group.copy");
        local = pb.CreateSub(rel, pb.CreateMul(index, pb.getInt32(g.threads)), "group.copy.tid");
      }
      // a group of the whole block (one clause) needs no test
      llvm::Value *mine = begin == 0 && span == int64_t(info.threads)
                              ? b.getTrue()
                              : b.CreateICmpULT(rel, constI32(span));
      llvm::BasicBlock *body = llvm::BasicBlock::Create(ctx, "group", fn_);
      llvm::BasicBlock *next = llvm::BasicBlock::Create(ctx, "group.next", fn_);
      b.CreateCondBr(mine, body, next);
      b.SetInsertPoint(body);

      GroupContext outer = group_;
      llvm::Value *outerTid = tid_;
      std::map<const LayoutMap *, std::vector<llvm::Value *>> outerParts;
      std::map<const LayoutMap *, llvm::Value *> outerPrimary;
      outerParts.swap(threadPartCache_);
      outerPrimary.swap(primaryCache_);
      // copy c of a clause: the next named barrier, the c-th part of the clause's scratch
      group_ = GroupContext{int64_t(g.threads), barrierId,
                            scratch.first + int64_t(copy) * scratch.second, scratch.second};
      barrierId += oneBody ? int(copies) : 1;
      // one body: copy c's scratch part at c times the bytes that the body stages at most
      // (a placeholder until the body is lowered; the checker's plan is the worst case of every
      // instruction, e.g. a Dot that might not become mma)
      llvm::Instruction *stride = nullptr;
      groupScratchUsed_ = 0;
      if (oneBody) {
        stride = llvm::BinaryOperator::CreateAdd(b.getInt32(0), b.getInt32(0),
                                                 "group.scratch.stride", b.GetInsertBlock());
        group_.copyIndex = index;
        group_.copyScratch =
            b.CreateZExt(b.CreateMul(index, stride), b.getInt64Ty(), "group.scratch");
      }
      tid_ = local;
      if (g.var != kNoId)
        writeScalar(g.var, oneBody ? index : constI32(int64_t(copy)));
      int64_t want = g.regs != 0 ? int64_t(g.regs) : start;
      if (regs)
        setMaxRegisters(b, start, want);
      Status status = lowerBody(g.body);
      if (status.ok() && regs)
        setMaxRegisters(b, want, start);
      if (stride != nullptr) {
        int64_t used = (groupScratchUsed_ + 15) / 16 * 16;
        stride->replaceAllUsesWith(b.getInt32(uint32_t(used)));
        stride->eraseFromParent();
        scratchUsed_ = std::max(scratchUsed_, group_.scratchOffset + int64_t(copies) * used);
      }
      tid_ = outerTid;
      group_ = outer;
      threadPartCache_.swap(outerParts);
      primaryCache_.swap(outerPrimary);
      TILUSVM_TRY(status);
      b.CreateBr(next);
      b.SetInsertPoint(next);
      begin += span;
    }
  }
  b.CreateBr(join);
  b.SetInsertPoint(join);
  barrier();
  return Status::success();
}

} // namespace tilus::jit
