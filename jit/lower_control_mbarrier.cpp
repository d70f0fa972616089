// Mbarriers and the async-proxy fence (docs/isa.md, "Hopper instructions"), sm_90a only.
//
// An mbarrier operand is one u64 element of shared memory; its 32-bit shared address goes to
// inline PTX. The ISA counts block arrivals (one per MbarrierArrive execution); the hardware
// counts one arrival per warp: lane 0 arrives after bar.warp.sync (which orders the warp's
// earlier accesses before the arrival), so MbarrierInit(count=C) initialises the barrier with
// C * warps. With tx=, thread 0's arrival also expects the transaction bytes
// (mbarrier.arrive.expect_tx). In a thread group of W_g of the block's W warps, lane 0 of every
// warp arrives and the group's first warp adds W - W_g arrivals (mbarrier.arrive with a count),
// so that a group's arrival counts as the block's. MbarrierWait polls mbarrier.try_wait.parity in
// every thread (the labels of the loop are local to the asm's braces, so the asm may appear many
// times). MbarrierArriveCluster arrives the same way at the barrier of the same address in
// another block of the cluster (mapa.shared::cluster, then mbarrier.arrive.shared::cluster).
#include "jit/lowering.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

namespace {

/// The 32-bit shared address of the mbarrier operand `s` of `inst`.
llvm::Value *barrierAddress(Codegen &cg, const Instruction &inst) {
  return cg.sharedOriginAddress32(inst.arg(ArgName::s).var);
}

} // namespace

Status ControlLowering::visitMbarrierInit(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  llvm::Value *addr = barrierAddress(cg, inst);
  int64_t count = inst.arg(ArgName::count).intValue * int64_t(info.threads / 32);
  cg.emitIf(b.CreateICmpEQ(cg.tid(), cg.constI32(0)), "mbarrier.init", [&] {
    cg.volatileAsm(cg.b.getVoidTy(), "mbarrier.init.shared::cta.b64 [$0], $1;", "r,r,~{memory}",
                   {addr, cg.constI32(count)});
  });
  return Status::success();
}

namespace {

/// One block (or group) arrival at the mbarrier at shared address `addr`, expecting `bytes`
/// transaction bytes first (null: none); with `rank`, at the barrier of that address in the
/// cluster's block of that rank (mapa, then the arrival there).
void emitArrive(Codegen &cg, const ProgramInfo &info, llvm::Value *addr, llvm::Value *bytes,
                llvm::Value *rank) {
  llvm::IRBuilder<> &b = cg.b;
  cg.callIntrinsic(llvm::Intrinsic::nvvm_bar_warp_sync, {}, {cg.constI32(-1)});
  llvm::Value *lane0 = b.CreateICmpEQ(b.CreateAnd(cg.tid(), cg.constI32(31)), cg.constI32(0));
  // lane 0 of every warp arrives; thread 0 (of the block, or of the group) expects the bytes
  // with its arrival and, in a group, adds the arrivals of the block's other warps
  int64_t extra = int64_t(info.threads / 32) - cg.threads() / 32; // 0 outside thread groups
  bool first = bytes || extra > 0;                                // thread 0 does more
  // the local arrivals' state result (st); a remote arrival has none (_)
  std::string text = std::string("{\n") + (first ? ".reg .pred p;\n" : "") +
                     (rank ? "" : ".reg .b64 st;\n") + (first ? "setp.eq.u32 p, $1, 0;\n" : "");
  std::string constraints = first ? "r,r" : "r";
  std::vector<llvm::Value *> args = {addr};
  if (first)
    args.push_back(cg.tid());
  if (rank) {
    // the same address in the target block: arrivals there (a release at the default .cta
    // scope, as pipelines of TMA stages need: docs/isa.md, "Ordering" of clusters)
    text += ".reg .b32 ra;\nmapa.shared::cluster.u32 ra, $0, $" + std::to_string(args.size()) +
            ";\nmbarrier.arrive.shared::cluster.b64 _, [ra];\n";
    constraints += ",r";
    args.push_back(rank);
    if (extra > 0) {
      text +=
          "@p mbarrier.arrive.shared::cluster.b64 _, [ra], $" + std::to_string(args.size()) + ";\n";
      constraints += ",r";
      args.push_back(cg.constI32(extra));
    }
  } else if (bytes) {
    text += "@p mbarrier.arrive.expect_tx.shared::cta.b64 st, [$0], $" +
            std::to_string(args.size()) + ";\n@!p mbarrier.arrive.shared::cta.b64 st, [$0];\n";
    constraints += ",r";
    args.push_back(bytes);
  } else {
    text += "mbarrier.arrive.shared::cta.b64 st, [$0];\n";
  }
  if (extra > 0 && !rank) {
    text += "@p mbarrier.arrive.shared::cta.b64 st, [$0], $" + std::to_string(args.size()) + ";\n";
    constraints += ",r";
    args.push_back(cg.constI32(extra));
  }
  cg.emitIf(lane0, "mbarrier.arrive", [&] {
    cg.volatileAsm(cg.b.getVoidTy(), text + "}", constraints + ",~{memory}", args);
  });
}

} // namespace

Status ControlLowering::visitMbarrierArrive(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  const Argument &tx = inst.arg(ArgName::tx);
  llvm::Value *bytes = tx.present ? b.CreateTrunc(cg.exprI64(tx.expr), b.getInt32Ty()) : nullptr;
  emitArrive(cg, info, barrierAddress(cg, inst), bytes, nullptr);
  return Status::success();
}

Status ControlLowering::visitMbarrierArriveCluster(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  llvm::Value *rank = b.CreateTrunc(cg.exprI64(inst.arg(ArgName::rank).expr), b.getInt32Ty());
  emitArrive(cg, info, barrierAddress(cg, inst), nullptr, rank);
  return Status::success();
}

Status ControlLowering::visitMbarrierWait(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  llvm::Value *addr = barrierAddress(cg, inst);
  llvm::Value *parity = b.CreateAnd(
      b.CreateTrunc(cg.exprI64(inst.arg(ArgName::parity).expr), b.getInt32Ty()), cg.constI32(1));
  cg.volatileAsm(cg.b.getVoidTy(),
                 "{\n.reg .pred done;\nTILUS_MBARRIER_WAIT:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [$0], $1;\n"
                 "@!done bra TILUS_MBARRIER_WAIT;\n}",
                 "r,r,~{memory}", {addr, parity});
  return Status::success();
}

Status ControlLowering::visitFenceProxyAsync(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  cg.volatileAsm(cg.b.getVoidTy(), "fence.proxy.async.shared::cta;", "~{memory}", {});
  return Status::success();
}

} // namespace tilus::jit
