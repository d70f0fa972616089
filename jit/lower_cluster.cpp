// Thread-block clusters (docs/isa.md, "Thread-block clusters and TMA multicast"): the block's
// rank (%cluster_ctarank) and the cluster barrier (barrier.cluster arrive with release, wait with
// acquire, in every thread). Without cluster= the rank is 0 and ClusterSync() is the block's
// barrier, on any target. The kernel's .reqnctapercluster is added to the PTX (jit.cpp), the
// multicast load is in lower_memory_tma.cpp and the arrival at another block's mbarrier in
// lower_control_mbarrier.cpp.
#include "jit/lowering.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

Status ViewLowering::visitClusterRank(const Instruction &inst) {
  VarId v = inst.results[0];
  llvm::Value *rank = cg.constI32(0);
  if (prog.cluster > 1) {
    auto *call = llvm::cast<llvm::CallInst>(
        cg.callIntrinsic(llvm::Intrinsic::nvvm_read_ptx_sreg_cluster_ctarank, {}, {}));
    call->addRangeRetAttr(llvm::ConstantRange(llvm::APInt(32, 0), llvm::APInt(32, prog.cluster)));
    rank = call;
  }
  cg.writeScalar(v, cg.convert(rank, DataType::i32(), prog.var(v).dtype));
  return Status::success();
}

Status ControlLowering::visitClusterSync(const Instruction &) {
  if (prog.cluster <= 1) {
    cg.barrier(); // a cluster of one block
    return Status::success();
  }
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {}, false);
  b.CreateCall(llvm::InlineAsm::get(type,
                                    "barrier.cluster.arrive.release.aligned;\n"
                                    "barrier.cluster.wait.acquire.aligned;",
                                    "~{memory}", /*hasSideEffects=*/true),
               {});
  return Status::success();
}

} // namespace tilus::jit
