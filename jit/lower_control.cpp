// Control and debugging: Synchronize (a block barrier) and Exit (the kernel returns; the rest of
// the current block of IR is dead). Print is in lower_control_print.cpp; the structured
// statements (for, if, while) are lowered by the core itself (codegen.cpp).
#include "jit/lowering.h"

namespace tilus::jit {

Status ControlLowering::visitSynchronize(const Instruction &) {
  cg.barrier();
  return Status::success();
}

Status ControlLowering::visitExit(const Instruction &) {
  b.CreateRetVoid();
  cg.startDeadBlock();
  return Status::success();
}

} // namespace tilus::jit
