// TmaLoad (docs/isa.md, "Tensor-memory-accelerator loads"), run for the whole block. The tile is
// read from global memory when the copy is issued (zeros outside the view, as CopyAsync), its
// transaction bytes (the whole box, ProgramInfo::tma) complete on the mbarrier at once, and the
// data waits beside the barrier: it is written into shared memory by the first MbarrierWait
// that returns after the phase completed (exec_control_mbarrier.cpp). In checked mode the
// destination is pending from the issue to that wait: any access by the block in between races
// with the copy.
#include "vm/cpu/exec.h"

#include <limits>

namespace tilus::cpu {

Status Exec::visitTmaLoad(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  int64_t address = 0, element = 0;
  TILUSVM_TRY(barrierAddress(b, index, ArgName::bar, address, element));
  if (b.race)
    b.race->sharedRead(b.shareds[inst.arg(ArgName::bar).var].root, element, -1);
  auto barrier = b.mbarriers.find(address);
  if (barrier == b.mbarriers.end())
    return b.fail(ErrorCode::Runtime, index,
                  "TmaLoad completes at the mbarrier at shared byte " + std::to_string(address) +
                      ", which MbarrierInit has not initialised");
  if (const Argument &offset = inst.arg(ArgName::offset); offset.present)
    for (size_t d = 0; d < offset.offsets.size(); ++d) {
      int64_t c = b.evalInt(offset.offsets[d].expr);
      if (c < std::numeric_limits<int32_t>::min() || c > std::numeric_limits<int32_t>::max())
        return b.fail(ErrorCode::Runtime, index,
                      "TmaLoad coordinate " + std::to_string(c) + " of dimension " +
                          std::to_string(d) + " is not a 32-bit signed integer");
      // the hardware reads rows from 16-byte boundaries (an illegal instruction otherwise)
      int64_t bytes = b.globals[inst.arg(ArgName::g).var].dtype.storageBits() / 8;
      if (d + 1 == offset.offsets.size() && (c * bytes) % 16 != 0)
        return b.fail(ErrorCode::Runtime, index,
                      "TmaLoad innermost coordinate " + std::to_string(c) + " (" +
                          std::to_string(c * bytes) +
                          " bytes) is not a multiple of 16 bytes, where the tensor memory "
                          "accelerator starts rows");
    }
  Expected<AsyncCopy> copy = readAsyncCopy(b, index);
  if (!copy.ok())
    return copy.takeStatus();
  barrier->second.inFlight.push_back(std::move(copy.value()));
  return completeTransaction(b, index, address, b.info.tma.at(index).bytes);
}

} // namespace tilus::cpu
