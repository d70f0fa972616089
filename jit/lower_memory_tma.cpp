// TmaLoad and TmaStore (docs/isa.md, "Tensor-memory-accelerator loads" and "... stores"),
// sm_90a only: thread 0 issues one cp.async.bulk.tensor per box of the checker's plan
// (ProgramInfo::tma), each box at a fixed distance from the shared view's origin; a load
// completes its bytes on the mbarrier, a store joins thread 0's bulk async-group, which
// TmaStoreCommitGroup closes and TmaStoreWaitGroup waits for (until its sources are read). The
// tensor map is a kernel parameter (codegen.cpp); coordinates go innermost first.
// TmaLoadMulticast is a load with `.multicast::cluster` and a 16-bit mask of the cluster's
// target blocks (docs/isa.md, "Thread-block clusters and TMA multicast").
#include "jit/lowering.h"

#include <llvm/IR/InlineAsm.h>

namespace tilus::jit {

namespace {} // namespace

namespace {

/// Thread 0 issues one cp.async.bulk.tensor per box of the TmaLoad / TmaStore `inst`: `load`
/// whether the shared address and the mbarrier come as in a load ([dst], [tmap, {..}], [bar])
/// or as in a store ([tmap, {..}], [src]); a load with a `mask` (TmaLoadMulticast) writes into
/// the blocks of the cluster that the mask's bits select.
Status issueBoxes(Codegen &cg, const Instruction &inst, const ProgramInfo &info,
                  const Program &prog, bool load, llvm::Value *mask = nullptr) {
  llvm::IRBuilder<> &b = cg.b;
  auto it = info.tma.find(uint32_t(&inst - prog.instructions.data()));
  if (it == info.tma.end())
    return cg.error(ErrorCode::Jit, inst,
                    std::string(inst.spec().name) + " without a plan from the checker");
  const TmaPlan &plan = it->second;
  llvm::Value *shared = cg.sharedOriginAddress32(inst.arg(ArgName::s).var);
  llvm::Value *bar = load ? cg.sharedOriginAddress32(inst.arg(ArgName::bar).var) : nullptr;
  llvm::Value *map = cg.tensorMap(plan.tensorMap);
  // coordinates, outermost first: every offset entry (fixed or slice), 0 without offset=; a
  // tensor-map dimension that merges view dimensions takes its first one's entry times the
  // extents of the others (whose entries are 0)
  const TensorMapSpec &spec = info.tensorMaps[plan.tensorMap];
  const size_t rank = spec.box.size();
  std::vector<llvm::Value *> coords;
  const Argument &offset = inst.arg(ArgName::offset);
  for (size_t i = 0, d = 0; i < rank; d += spec.groups[i++]) {
    llvm::Value *c = offset.present
                         ? b.CreateTrunc(cg.exprI64(offset.offsets[d].expr), b.getInt32Ty())
                         : cg.constI32(0);
    if (spec.scales[i] != 1)
      c = b.CreateMul(c, cg.constI32(int32_t(spec.scales[i])));
    coords.push_back(c);
  }
  // operands: $0 shared address, $1 tensor map, ($2 mbarrier), then the coordinates, then the
  // multicast mask
  const size_t first = load ? 3 : 2;
  std::string list = "{";
  for (size_t d = 0; d < rank; ++d)
    list += (d ? ", $" : "$") + std::to_string(first + d);
  list += "}";
  std::string dims = std::to_string(rank) + "d";
  std::string text = load ? "cp.async.bulk.tensor." + dims +
                                ".shared::cluster.global.tile.mbarrier::complete_tx::bytes" +
                                (mask ? ".multicast::cluster" : "") + " [$0], [$1, " + list +
                                "], [$2]" + (mask ? ", $" + std::to_string(first + rank) : "") + ";"
                          : "cp.async.bulk.tensor." + dims +
                                ".global.shared::cta.tile.bulk_group [$1, " + list + "], [$0];";
  std::string constraints = load ? "r,l,r" : "r,l";
  std::vector<llvm::Type *> types{b.getInt32Ty(), map->getType()};
  if (load)
    types.push_back(b.getInt32Ty());
  for (size_t d = 0; d < rank; ++d) {
    constraints += ",r";
    types.push_back(b.getInt32Ty());
  }
  if (mask) {
    constraints += ",h";
    types.push_back(b.getInt16Ty());
  }
  constraints += ",~{memory}";
  auto *asmType = llvm::FunctionType::get(b.getVoidTy(), types, false);
  llvm::InlineAsm *copy = llvm::InlineAsm::get(asmType, text, constraints, /*hasSideEffects=*/true);
  cg.emitIf(b.CreateICmpEQ(cg.tid(), cg.constI32(0)), load ? "tma.load" : "tma.store", [&] {
    for (const TmaPlan::Box &box : plan.boxes) {
      std::vector<llvm::Value *> args{b.CreateAdd(shared, cg.constI32(int32_t(box.sharedDelta))),
                                      map};
      if (load)
        args.push_back(bar);
      for (size_t d = rank; d-- > 0;) {
        llvm::Value *c = coords[d];
        if (d == rank - 1 && box.innerShift != 0)
          c = b.CreateAdd(c, cg.constI32(int32_t(box.innerShift)));
        args.push_back(c);
      }
      if (mask)
        args.push_back(mask);
      b.CreateCall(copy, args);
    }
  });
  return Status::success();
}

/// `text` (no operands) as inline PTX executed by thread 0.
void threadZero(Codegen &cg, const std::string &text, const char *name) {
  auto *type = llvm::FunctionType::get(cg.b.getVoidTy(), {}, false);
  llvm::InlineAsm *op = llvm::InlineAsm::get(type, text, "~{memory}", /*hasSideEffects=*/true);
  cg.emitIf(cg.b.CreateICmpEQ(cg.tid(), cg.constI32(0)), name, [&] { cg.b.CreateCall(op, {}); });
}

} // namespace

Status MemoryLowering::visitTmaLoad(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  return issueBoxes(cg, inst, info, prog, true);
}

Status MemoryLowering::visitTmaLoadMulticast(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  llvm::Value *mask = b.CreateTrunc(cg.exprI64(inst.arg(ArgName::mask).expr), b.getInt16Ty());
  return issueBoxes(cg, inst, info, prog, true, mask);
}

Status MemoryLowering::visitTmaStore(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  return issueBoxes(cg, inst, info, prog, false);
}

Status MemoryLowering::visitTmaStoreCommitGroup(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  threadZero(cg, "cp.async.bulk.commit_group;", "tma.commit");
  return Status::success();
}

Status MemoryLowering::visitTmaStoreWaitGroup(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  threadZero(cg,
             "cp.async.bulk.wait_group.read " + std::to_string(inst.arg(ArgName::n).intValue) + ";",
             "tma.wait");
  return Status::success();
}

} // namespace tilus::jit
