// The statement walker and the instruction dispatcher: structured control flow (for, if,
// while, break, continue, return/Exit) over block-uniform scalars, scalar assignments, and
// the dispatch generated from isa/instructions.def that hands an instruction to its handler.
// Synchronize() advances the race detector's epoch; on the CPU everything else about it is
// implicit, because the block's threads execute each instruction together. A parallel
// statement runs its thread groups as cooperative tasks (group_scheduler.h).
#include "vm/cpu/exec.h"

#include "isa/convert.h"
#include "vm/cpu/group_scheduler.h"

namespace tilus::cpu {

Location statementLocation(const BlockState &b, const Stmt &s) {
  Location loc;
  loc.program = b.program.name;
  if (s.loc.line != 0) {
    loc.file = b.plan.module->sourceName;
    loc.line = s.loc.line;
    loc.column = s.loc.column;
  }
  return loc;
}

namespace {

bool truthy(uint64_t bits, DataType type) {
  return convertBits(bits, type, DataType::boolean()) != 0;
}

Status executeInstruction(BlockState &b, uint32_t index, Flow &flow) {
  if (b.race)
    b.race->beginInstruction(index);
  TILUSVM_TRY(b.checkWgmmaRegisterA(index));
  return visitInstruction(b.program.instructions[index].opcode, Exec{flow}, b, index);
}

/// Run a loop body once; true when the loop must stop (break, or exit of the block).
Status loopBody(BlockState &b, const Stmt &s, Flow &flow, bool &stop) {
  TILUSVM_TRY(execBody(b, s.body, flow));
  stop = flow == Flow::Break || flow == Flow::Exit;
  if (flow == Flow::Break || flow == Flow::Continue)
    flow = Flow::Normal;
  return Status::success();
}

Status execFor(BlockState &b, const Stmt &s, Flow &flow) {
  int64_t start = b.evalInt(s.expr);
  int64_t stop = b.evalInt(s.stop);
  int64_t step = s.step == kNoId ? 1 : b.evalInt(s.step);
  if (step == 0)
    return Status::error(ErrorCode::Runtime, b.blockText() + ": range() step is 0",
                         statementLocation(b, s));
  DataType type = b.program.var(s.var).dtype;
  bool done = false;
  for (int64_t i = start; !done && (step > 0 ? i < stop : i > stop); i += step) {
    b.scalars[s.var] = fromInt64(i, type);
    TILUSVM_TRY(loopBody(b, s, flow, done));
  }
  return Status::success();
}

Status execWhile(BlockState &b, const Stmt &s, Flow &flow) {
  DataType type = b.program.expr(s.expr).dtype;
  bool done = false;
  while (!done && truthy(b.eval(s.expr), type))
    TILUSVM_TRY(loopBody(b, s, flow, done));
  return Status::success();
}

Status execStatement(BlockState &b, const Stmt &s, Flow &flow) {
  switch (s.kind) {
  case StmtKind::Instruction:
    return executeInstruction(b, s.index, flow);
  case StmtKind::Assign:
  case StmtKind::Specialize: { // the value as computed; a kernel specialised at launch agrees
    DataType from = b.program.expr(s.expr).dtype, to = b.program.var(s.var).dtype;
    uint64_t bits = b.eval(s.expr);
    b.scalars[s.var] = from == to ? bits : convertBits(bits, from, to);
    return Status::success();
  }
  case StmtKind::For:
    return execFor(b, s, flow);
  case StmtKind::If:
    return execBody(b, truthy(b.eval(s.expr), b.program.expr(s.expr).dtype) ? s.body : s.orelse,
                    flow);
  case StmtKind::While:
    return execWhile(b, s, flow);
  case StmtKind::Break:
    flow = Flow::Break;
    return Status::success();
  case StmtKind::Continue:
    flow = Flow::Continue;
    return Status::success();
  case StmtKind::Assert: // a precondition, checked before the launch (evaluateGrid)
    return Status::success();
  case StmtKind::Parallel: {
    // the groups run as cooperative tasks (group_scheduler.h); then the block goes on as after
    // a Synchronize()
    GroupScheduler groups(b, s);
    b.groups = &groups;
    Status status = groups.run();
    b.groups = nullptr;
    TILUSVM_TRY(status);
    if (b.race)
      b.race->synchronize();
    return Status::success();
  }
  case StmtKind::Group: // only inside a Parallel (the checker)
    return Status::error(ErrorCode::Bytecode, "group statement outside a parallel statement",
                         statementLocation(b, s));
  }
  return Status::success();
}

} // namespace

Status execBody(BlockState &b, const std::vector<Stmt> &body, Flow &flow) {
  for (const Stmt &s : body) {
    TILUSVM_TRY(execStatement(b, s, flow));
    if (flow != Flow::Normal)
      return Status::success();
  }
  return Status::success();
}

Status Exec::visitSynchronize(BlockState &b, uint32_t) {
  if (b.race) // inside a thread group, a barrier of the group only
    b.race->synchronizeGroup();
  return Status::success();
}

Status Exec::visitExit(BlockState &, uint32_t) {
  flow = Flow::Exit;
  return Status::success();
}

Status Exec::visitInvalid(BlockState &b, uint32_t index) {
  return b.fail(ErrorCode::Runtime, index, "unknown opcode");
}

Status runBlock(BlockState &b) {
  Flow flow = Flow::Normal;
  TILUSVM_TRY(execBody(b, b.program.body, flow));
  return finishBlock(b);
}

} // namespace tilus::cpu
