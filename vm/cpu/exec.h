// The instruction executors: one small function per instruction (or per family), each running
// one instruction for the whole block (ISA section 1: "as if one at a time"). They are the
// handlers of Exec, dispatched from isa/instructions.def by visitInstruction
// (isa/instruction_visitor.h) in exec_control.cpp, which also walks the statements and handles
// Synchronize and Exit.
#pragma once

#include "vm/cpu/block_state.h"

namespace tilus::cpu {

/// Run the block's body from the start.
Status runBlock(BlockState &b);

/// The instruction handlers: visitNAME for one row of isa/instructions.def, visitElementwise
/// for the family of elementwise rows (their scalar operator or math function is the row's
/// payload); each runs instruction `index` of the block's program.
struct Exec {
  // exec_views.cpp: tensor creation and memory views
  static Status visitBlockIndices(BlockState &b, uint32_t index);
  static Status visitAllocateRegister(BlockState &b, uint32_t index);
  static Status visitIota(BlockState &b, uint32_t index);
  static Status visitAllocateShared(BlockState &b, uint32_t index);
  static Status visitAllocateGlobal(BlockState &b, uint32_t index);
  static Status visitViewGlobal(BlockState &b, uint32_t index);
  static Status visitSliceGlobal(BlockState &b, uint32_t index);
  static Status visitSliceShared(BlockState &b, uint32_t index);

  // exec_memory.cpp: loads, stores and asynchronous copies
  static Status visitLoadGlobal(BlockState &b, uint32_t index);
  static Status visitLoadShared(BlockState &b, uint32_t index);
  static Status visitStoreGlobal(BlockState &b, uint32_t index);
  static Status visitStoreShared(BlockState &b, uint32_t index);
  static Status visitCopyAsync(BlockState &b, uint32_t index);
  static Status visitCopyAsyncCommitGroup(BlockState &b, uint32_t index);
  static Status visitCopyAsyncWaitGroup(BlockState &b, uint32_t index);
  static Status visitCopyAsyncWaitAll(BlockState &b, uint32_t index);

  // exec_elementwise.cpp: arithmetic, bitwise, comparison, unary and math rows; Where, Cast
  // and ConvertLayout stage their operands the same way
  static Status visitElementwise(BlockState &b, uint32_t index);
  static Status visitWhere(BlockState &b, uint32_t index) { return visitElementwise(b, index); }
  static Status visitCast(BlockState &b, uint32_t index) { return visitElementwise(b, index); }
  static Status visitConvertLayout(BlockState &b, uint32_t index) {
    return visitElementwise(b, index);
  }

  // exec_contraction.cpp: View, Permute, Dot, Reduce
  static Status visitView(BlockState &b, uint32_t index);
  static Status visitPermute(BlockState &b, uint32_t index);
  static Status visitDot(BlockState &b, uint32_t index);
  static Status visitReduce(BlockState &b, uint32_t index);

  // exec_control_print.cpp
  static Status visitPrint(BlockState &b, uint32_t index);
};

} // namespace tilus::cpu
