// The instruction executors: one small function per instruction (or per family), each running
// one instruction for the whole block (ISA section 1: "as if one at a time"). They are the
// handlers of Exec, dispatched from isa/instructions.def by visitInstruction
// (isa/instruction_visitor.h) in exec_control.cpp, which also walks the statements and handles
// Synchronize and Exit. Each lives in the file of its family, exec_<family>.cpp
// (docs/contributing.md).
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
  static Status visitLoadScalar(BlockState &b, uint32_t index);
  static Status visitCopyAsync(BlockState &b, uint32_t index);
  static Status visitCopyAsyncCommitGroup(BlockState &b, uint32_t index);
  static Status visitCopyAsyncWaitGroup(BlockState &b, uint32_t index);
  static Status visitCopyAsyncWaitAll(BlockState &b, uint32_t index);

  // exec_elementwise.cpp: arithmetic, bitwise, comparison, unary and math rows, and Where
  static Status visitElementwise(BlockState &b, uint32_t index);
  static Status visitWhere(BlockState &b, uint32_t index) { return visitElementwise(b, index); }

  // exec_conversion.cpp: View, Permute; Cast and ConvertLayout (run by visitElementwise,
  // which stages their operand the same way)
  static Status visitCast(BlockState &b, uint32_t index);
  static Status visitView(BlockState &b, uint32_t index);
  static Status visitPermute(BlockState &b, uint32_t index);
  static Status visitConvertLayout(BlockState &b, uint32_t index);

  // exec_contraction.cpp
  static Status visitDot(BlockState &b, uint32_t index);
  static Status visitReduce(BlockState &b, uint32_t index);
  // exec_contraction_wgmma.cpp
  static Status visitWgmma(BlockState &b, uint32_t index);
  static Status visitWgmmaFence(BlockState &b, uint32_t index);
  static Status visitWgmmaCommitGroup(BlockState &b, uint32_t index);
  static Status visitWgmmaWaitGroup(BlockState &b, uint32_t index);

  // exec_control.cpp (Synchronize and Exit, which change the block's flow: ControlExec) and
  // exec_control_print.cpp
  static Status visitPrint(BlockState &b, uint32_t index);

  // exec_atomic.cpp: the atomic rows (AtomicAdd, AtomicMax, AtomicMin, AtomicExch, AtomicCas);
  // Fence orders nothing in an interpreter that runs every instruction one at a time
  static Status visitAtomic(BlockState &b, uint32_t index);
  static Status visitFence(BlockState &, uint32_t) { return Status::success(); }
  // exec_control_mbarrier.cpp: mbarriers and the async-proxy fence
  static Status visitMbarrierInit(BlockState &b, uint32_t index);
  static Status visitMbarrierArrive(BlockState &b, uint32_t index);
  static Status visitMbarrierWait(BlockState &b, uint32_t index);
  static Status visitFenceProxyAsync(BlockState &b, uint32_t index);
  /// Complete `bytes` transaction bytes on the mbarrier at shared byte address `address` (the
  /// end of an asynchronous copy); completes the phase when nothing else is pending.
  static Status completeTransaction(BlockState &b, uint32_t index, int64_t address, int64_t bytes);
};

} // namespace tilus::cpu
