// Typing rules of the mbarrier instructions and the async-proxy fence (docs/isa.md, "Hopper
// instructions"). An mbarrier is one u64 element of shared memory: the operand of MbarrierInit,
// MbarrierArrive and MbarrierWait is a shared tensor of dtype u64 with exactly one element
// (usually SliceShared(bars, offset=[i]) of an array of barriers). MbarrierInit's count is the
// number of MbarrierArrive executions that complete a phase; the hardware counts one arrival per
// warp, so count * warps must fit the mbarrier's 20-bit pending count.
#include "loader/checker_impl.h"

namespace tilus::detail {

bool ProgramChecker::checkMbarrierOperand(const Instruction &inst, ArgName which) {
  const VarType *s = tensorArg(inst, which, VarKind::Shared);
  if (!s)
    return false;
  std::string name = std::string(inst.spec().name) + " of " + varName(inst.arg(which).var);
  if (s->dtype != DataType::u(64))
    return fail(ErrorCode::Mbarrier,
                name + ": an mbarrier is a u64 element of shared memory, not " + s->dtype.name());
  if (shapeElements(s->shape) != 1)
    return fail(ErrorCode::Mbarrier, name + ": the operand has shape " + shapeString(s->shape) +
                                         "; an mbarrier operand has exactly one element "
                                         "(SliceShared(bars, offset=[i]) selects one)");
  return true;
}

bool ProgramChecker::visitMbarrierInit(const Instruction &inst, Results &) {
  if (!checkMbarrierOperand(inst))
    return false;
  int64_t count = inst.arg(ArgName::count).intValue;
  int64_t warps = int64_t(blockThreads_ / 32); // the block's warps, in a group too
  int64_t limit = kMbarrierMaxPending / (warps > 0 ? warps : 1);
  if (count < 1 || count > limit)
    return fail(ErrorCode::Mbarrier, "MbarrierInit count=" + std::to_string(count) +
                                         " outside [1, " + std::to_string(limit) +
                                         "]: the hardware counts count * warps (" +
                                         std::to_string(warps) + ") arrivals in 20 bits");
  return true;
}

bool ProgramChecker::visitMbarrierArrive(const Instruction &inst, Results &) {
  if (!checkMbarrierOperand(inst))
    return false;
  const Argument *tx = optionalArg(inst, ArgName::tx);
  if (!tx)
    return true;
  if (!checkInteger(tx->expr, "MbarrierArrive", "tx="))
    return false;
  std::optional<int64_t> c = constValue(tx->expr);
  if (c && (*c < 0 || *c > kMbarrierMaxPending))
    return fail(ErrorCode::Mbarrier, "MbarrierArrive tx=" + std::to_string(*c) + " outside [0, " +
                                         std::to_string(kMbarrierMaxPending) +
                                         "] transaction bytes");
  return true;
}

bool ProgramChecker::visitMbarrierWait(const Instruction &inst, Results &) {
  return checkMbarrierOperand(inst) &&
         checkInteger(inst.arg(ArgName::parity).expr, "MbarrierWait", "parity=");
}

bool ProgramChecker::visitFenceProxyAsync(const Instruction &, Results &) { return true; }

} // namespace tilus::detail
