// Typing rules of thread-block clusters (docs/isa.md, "Thread-block clusters and TMA
// multicast"): the header's cluster= (at most the portable cluster size, dividing a constant grid
// x extent), the block's rank, the cluster barrier (whole blocks only: not inside a thread
// group), the multicast TMA load (a TmaLoad with a mask of target ranks) and the arrival at
// another block's mbarrier (a rank in the cluster).
#include "loader/checker_impl.h"

#include <limits>
#include <optional>

namespace tilus::detail {

void ProgramChecker::checkClusterHeader() {
  const uint32_t c = prog_.cluster;
  if (c < 1 || c > kMaxClusterSize) {
    fail(ErrorCode::Cluster, "cluster=" + std::to_string(c) + " is not in [1, " +
                                 std::to_string(kMaxClusterSize) + "] (1: no cluster)");
    return;
  }
  if (c == 1 || prog_.grid.empty())
    return;
  std::optional<int64_t> x = constValue(prog_.grid[0]);
  if (x && *x % int64_t(c) != 0)
    fail(ErrorCode::Cluster, "the grid's x extent " + std::to_string(*x) +
                                 " is not a multiple of cluster=" + std::to_string(c) +
                                 " (clusters are consecutive blocks along x)");
}

bool ProgramChecker::visitClusterRank(const Instruction &, Results &r) {
  r[0] = VarType{VarKind::Scalar, DataType::i32()};
  return true;
}

bool ProgramChecker::visitClusterSync(const Instruction &, Results &) {
  if (groupScope_ != std::string::npos)
    return fail(ErrorCode::Cluster,
                "ClusterSync() inside a thread group: it is a barrier of every thread of the "
                "cluster's blocks (place it outside the parallel statement)");
  return true;
}

bool ProgramChecker::checkClusterOperand(const Instruction &inst, ArgName which, int64_t lo,
                                         int64_t hi, const std::string &range) {
  const char *what = which == ArgName::mask ? "mask=" : "rank=";
  ExprId e = inst.arg(which).expr;
  if (!checkInteger(e, inst.spec().name, what))
    return false;
  std::optional<int64_t> v = constValue(e);
  if (v && (*v < lo || *v > hi))
    return fail(ErrorCode::Cluster, std::string(inst.spec().name) + " " + what +
                                        std::to_string(*v) + " outside " + range +
                                        " for cluster=" + std::to_string(prog_.cluster));
  return true;
}

/// The header's cluster size when it is in range; otherwise (checkClusterHeader reports it)
/// nothing, and the mask and rank operands are checked for their type only: one diagnostic for
/// a bad header, and no shift by a huge or negative amount.
std::optional<int64_t> ProgramChecker::clusterForOperands() const {
  if (prog_.cluster < 1 || prog_.cluster > kMaxClusterSize)
    return std::nullopt;
  return int64_t(prog_.cluster);
}

bool ProgramChecker::visitTmaLoadMulticast(const Instruction &inst, Results &) {
  const std::optional<int64_t> c = clusterForOperands();
  const int64_t all = c ? (int64_t(1) << *c) - 1 : std::numeric_limits<int64_t>::max();
  return checkTransfer(inst, ArgName::s, VarKind::Shared, ArgName::g, VarKind::Global, true) &&
         checkMbarrierOperand(inst, ArgName::bar) &&
         checkClusterOperand(inst, ArgName::mask, c ? 1 : std::numeric_limits<int64_t>::min(), all,
                             "[1, " + std::to_string(all) + "]") &&
         planTma(inst);
}

bool ProgramChecker::visitMbarrierArriveCluster(const Instruction &inst, Results &) {
  const std::optional<int64_t> c = clusterForOperands();
  const int64_t last = c ? *c - 1 : std::numeric_limits<int64_t>::max();
  return checkMbarrierOperand(inst) &&
         checkClusterOperand(inst, ArgName::rank, c ? 0 : std::numeric_limits<int64_t>::min(), last,
                             "[0, " + std::to_string(last) + "]");
}

} // namespace tilus::detail
