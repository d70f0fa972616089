// Control and debugging: Synchronize (a block barrier) and Exit (the kernel returns; the rest of
// the current block of IR is dead). Print is in lower_control_print.cpp; the structured
// statements (for, if, while) are lowered by Codegen itself (codegen.cpp).
#include "jit/codegen.h"

namespace tilus::jit {

Status Codegen::visitSynchronize(const Instruction &) {
  barrier();
  return Status::success();
}

Status Codegen::visitExit(const Instruction &) {
  b.CreateRetVoid();
  startDeadBlock();
  return Status::success();
}

} // namespace tilus::jit
