// The parallel statement and its thread groups (docs/isa.md, "Thread groups: warp
// specialisation"): counts that partition the block, register re-allocation on whole
// warpgroups within the block's register file, and bodies checked as blocks of the group's
// threads that keep to their own variables.
#include "loader/checker_impl.h"

#include <algorithm>

namespace tilus::detail {

bool ProgramChecker::declaredOutsideGroup(VarId var) const {
  return groupScope_ != std::string::npos && var < declScope_.size() &&
         declScope_[var] < groupScope_;
}

void ProgramChecker::checkParallel(const Stmt &stmt) {
  const std::vector<Stmt> &groups = stmt.body;
  for (const Stmt &g : groups)
    if (g.kind != StmtKind::Group) {
      fail(ErrorCode::Bytecode, "a parallel statement holds a statement other than group");
      return;
    }
  bool counts = true; // the counts partition the block
  if (groupScope_ != std::string::npos) {
    fail(ErrorCode::ThreadGroup, "a parallel statement inside a thread group (groups do not nest)");
    counts = false;
  }
  // every copy of a group clause is a group (named barriers 1..15; 0 is the block's)
  uint64_t copies = 0;
  for (const Stmt &g : groups) {
    if (g.copies < 1 || g.copies > kMaxGroupCopies) {
      curLoc_ = g.loc;
      fail(ErrorCode::ThreadGroup, "copies=" + std::to_string(g.copies) + " is not in [1, " +
                                       std::to_string(kMaxGroupCopies) + "]");
      counts = false;
    }
    copies += g.copies;
  }
  curLoc_ = stmt.loc;
  if (groups.empty() || copies > kMaxGroupCopies) {
    fail(ErrorCode::ThreadGroup, "a parallel statement with " + std::to_string(copies) +
                                     " groups (copies counted); expected 1 to " +
                                     std::to_string(kMaxGroupCopies));
    counts = false;
  }
  uint64_t sum = 0;
  bool regs = false;
  for (const Stmt &g : groups) {
    sum += uint64_t(g.threads) * g.copies;
    regs = regs || g.regs != 0;
    if (g.threads < 32 || g.threads % 32 != 0) {
      curLoc_ = g.loc;
      fail(ErrorCode::ThreadGroup, "a group of " + std::to_string(g.threads) +
                                       " threads; expected a positive multiple of 32");
      counts = false;
    }
  }
  curLoc_ = stmt.loc;
  if (counts && sum != blockThreads_) {
    fail(ErrorCode::ThreadGroup, "the groups have " + std::to_string(sum) +
                                     " threads together but the block has " +
                                     std::to_string(blockThreads_));
    counts = false;
  }
  if (regs && counts) {
    // The registers per thread the block starts with (the kernel's .maxnreg) and its register
    // file, which regs= re-distributes among whole warpgroups.
    int64_t start = groupStartRegisters(blockThreads_, prog_.blocksPerSm);
    int64_t total = 0;
    for (const Stmt &g : groups) {
      curLoc_ = g.loc;
      if (g.threads % 128 != 0)
        fail(ErrorCode::ThreadGroup,
             "a group of " + std::to_string(g.threads) +
                 " threads in a parallel statement with regs=; register re-allocation works on "
                 "whole warpgroups (multiples of 128 threads)");
      if (g.regs != 0 && (g.regs < 24 || g.regs > 256 || g.regs % 8 != 0))
        fail(ErrorCode::ThreadGroup,
             "regs=" + std::to_string(g.regs) + " is not a multiple of 8 in [24, 256]");
      total += int64_t(g.threads) * int64_t(g.copies) * (g.regs != 0 ? int64_t(g.regs) : start);
    }
    curLoc_ = stmt.loc;
    if (total > int64_t(blockThreads_) * start)
      fail(ErrorCode::ThreadGroup,
           "the groups ask for " + std::to_string(total) + " registers but the block has " +
               std::to_string(int64_t(blockThreads_) * start) + " (" +
               std::to_string(blockThreads_) + " threads of " + std::to_string(start) + ")");
  }
  int64_t scratchEnd = 0; // the groups' scratch parts, one after the other
  for (const Stmt &g : groups) {
    curLoc_ = g.loc;
    uint32_t threads = threads_;
    size_t outer = groupScope_;
    int64_t outerScratch = groupScratch_;
    int loops = loopDepth_;
    groupScratch_ = 0;
    if (g.threads >= 32 && g.threads % 32 == 0)
      threads_ = g.threads;
    loopDepth_ = 0;
    groupScope_ = scopes_.size();
    openScope();
    if (g.var != kNoId) {
      // the copy index: a fresh i32 scalar of the group's scope, read-only
      if (g.var >= prog_.vars.size() || prog_.vars[g.var].kind != VarKind::Scalar ||
          state_[g.var] != VarState::Undeclared)
        fail(ErrorCode::Bytecode,
             "group index " + varName(g.var) + " is not a fresh scalar variable");
      else if (prog_.vars[g.var].dtype != DataType::i32())
        fail(ErrorCode::DtypeMismatch, "group index " + varName(g.var) + " has type " +
                                           prog_.vars[g.var].dtype.name() + "; expected i32");
      else
        writeVar(g.var, VarType{VarKind::Scalar, DataType::i32()}, true);
      if (g.var < prog_.vars.size())
        loopVar_[g.var] = 2;
    }
    checkBlock(g.body);
    closeScope();
    groupScope_ = outer;
    loopDepth_ = loops;
    threads_ = threads;
    // each copy its own part of the scratch area, one after the other
    info_.groupScratch.emplace_back(scratchEnd, groupScratch_);
    scratchEnd += groupScratch_ * int64_t(g.copies >= 1 ? g.copies : 1);
    groupScratch_ = outerScratch;
  }
  if (groupScope_ == std::string::npos)
    scratchBytes_ = std::max(scratchBytes_, scratchEnd);
}

} // namespace tilus::detail
