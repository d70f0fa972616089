// TmaLoad (docs/isa.md, "Tensor-memory-accelerator loads"), sm_90a only: thread 0 issues one
// cp.async.bulk.tensor per box of the checker's plan (ProgramInfo::tma), each writing its box at
// a fixed distance from the destination view's origin and completing its bytes on the mbarrier.
// The tensor map is a kernel parameter (codegen.cpp); coordinates go innermost first.
#include "jit/lowering.h"

#include <llvm/IR/InlineAsm.h>

namespace tilus::jit {

namespace {

/// The 32-bit shared address of the origin of shared view `v`.
llvm::Value *sharedAddress(Codegen &cg, VarId v) {
  SharedView view = cg.readShared(v);
  llvm::Value *elem = cg.sharedOffset(view.root, view.origin);
  llvm::Value *ptr = cg.sharedElementAddress(view.root, elem, view.dtype);
  return cg.b.CreatePtrToInt(ptr, cg.b.getInt32Ty());
}

} // namespace

Status MemoryLowering::visitTmaLoad(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  auto it = info.tma.find(uint32_t(&inst - prog.instructions.data()));
  if (it == info.tma.end())
    return cg.error(ErrorCode::Jit, inst, "TmaLoad without a plan from the checker");
  const TmaPlan &plan = it->second;
  llvm::Value *dst = sharedAddress(cg, inst.arg(ArgName::s).var);
  llvm::Value *bar = sharedAddress(cg, inst.arg(ArgName::bar).var);
  llvm::Value *map = cg.tensorMap(plan.tensorMap);
  // coordinates, outermost first: every offset entry (fixed or slice), 0 without offset=
  const size_t rank = info.tensorMaps[plan.tensorMap].box.size();
  std::vector<llvm::Value *> coords;
  const Argument &offset = inst.arg(ArgName::offset);
  for (size_t d = 0; d < rank; ++d)
    coords.push_back(offset.present
                         ? b.CreateTrunc(cg.exprI64(offset.offsets[d].expr), b.getInt32Ty())
                         : cg.constI32(0));
  std::string text = "cp.async.bulk.tensor." + std::to_string(rank) +
                     "d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [$0], [$1, {";
  for (size_t d = 0; d < rank; ++d)
    text += (d ? ", $" : "$") + std::to_string(3 + d);
  text += "}], [$2];";
  std::string constraints = "r,l,r";
  for (size_t d = 0; d < rank; ++d)
    constraints += ",r";
  constraints += ",~{memory}";
  std::vector<llvm::Type *> types{b.getInt32Ty(), map->getType(), b.getInt32Ty()};
  for (size_t d = 0; d < rank; ++d)
    types.push_back(b.getInt32Ty());
  auto *asmType = llvm::FunctionType::get(b.getVoidTy(), types, false);
  llvm::InlineAsm *copy = llvm::InlineAsm::get(asmType, text, constraints, /*hasSideEffects=*/true);
  cg.emitIf(b.CreateICmpEQ(cg.tid(), cg.constI32(0)), "tma.load", [&] {
    for (const TmaPlan::Box &box : plan.boxes) {
      std::vector<llvm::Value *> args{b.CreateAdd(dst, cg.constI32(int32_t(box.sharedDelta))), map,
                                      bar};
      for (size_t d = rank; d-- > 0;) {
        llvm::Value *c = coords[d];
        if (d == rank - 1 && box.innerShift != 0)
          c = b.CreateAdd(c, cg.constI32(int32_t(box.innerShift)));
        args.push_back(c);
      }
      b.CreateCall(copy, args);
    }
  });
  return Status::success();
}

} // namespace tilus::jit
