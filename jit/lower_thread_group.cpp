// The parallel statement (docs/isa.md, "Thread groups: warp specialisation"): each group is a
// warp-uniform `if (B <= tid < B + COUNT)` around its body, lowered as a block of COUNT threads
// (thread index tid - B, its own named barrier and its own part of the scratch area); with
// regs= the group re-allocates its registers (setmaxnreg) on entry and gives them back on exit.
// The copies of a clause (copies=C) are C such groups, the body lowered once for each with its
// copy index a constant (the index then folds into addresses and tests as a constant does: with
// the index computed from the thread index, programs/gemm/wgmma_ws.tasm ran 1 % slower on an
// H200 at 4096^3).
// A block barrier precedes the groups (the code before may use the scratch area that the groups
// share out) and joins them after.
#include "jit/codegen.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

namespace {

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
    for (uint32_t copy = 0; copy < std::max<uint32_t>(g.copies, 1); ++copy) {
      // the group's thread index, computed once in the prologue like the block's
      llvm::IRBuilder<> pb(entry_->getTerminator());
      llvm::Value *local = pb.CreateSub(tid_, pb.getInt32(uint32_t(begin)), "group.tid");
      llvm::Value *mine = b.CreateICmpULT(local, constI32(int64_t(g.threads)));
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
      group_ = GroupContext{int64_t(g.threads), barrierId++,
                            scratch.first + int64_t(copy) * scratch.second, scratch.second};
      tid_ = local;
      if (g.var != kNoId)
        writeScalar(g.var, constI32(int64_t(copy)));
      int64_t want = g.regs != 0 ? int64_t(g.regs) : start;
      if (regs)
        setMaxRegisters(b, start, want);
      Status status = lowerBody(g.body);
      if (status.ok() && regs)
        setMaxRegisters(b, want, start);
      tid_ = outerTid;
      group_ = outer;
      threadPartCache_.swap(outerParts);
      primaryCache_.swap(outerPrimary);
      TILUSVM_TRY(status);
      b.CreateBr(next);
      b.SetInsertPoint(next);
      begin += int64_t(g.threads);
    }
  }
  b.CreateBr(join);
  b.SetInsertPoint(join);
  barrier();
  return Status::success();
}

} // namespace tilus::jit
