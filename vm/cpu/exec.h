// The instruction executors: one small function per instruction family, each running one
// instruction for the whole block (ISA section 1: "as if one at a time"). The dispatcher over
// every Opcode and the statement walker are in exec_control.cpp.
#pragma once

#include "vm/cpu/block_state.h"

namespace tilus::cpu {

/// Run the block's body from the start.
Status runBlock(BlockState &b);

// exec_views.cpp: tensor creation and memory views
Status execBlockIndices(BlockState &b, uint32_t index);
Status execAllocateRegister(BlockState &b, uint32_t index);
Status execIota(BlockState &b, uint32_t index);
Status execAllocateShared(BlockState &b, uint32_t index);
Status execAllocateGlobal(BlockState &b, uint32_t index);
Status execViewGlobal(BlockState &b, uint32_t index);
Status execSliceGlobal(BlockState &b, uint32_t index);
Status execSliceShared(BlockState &b, uint32_t index);

// exec_movement.cpp: loads, stores and asynchronous copies
Status execLoadGlobal(BlockState &b, uint32_t index);
Status execLoadShared(BlockState &b, uint32_t index);
Status execStoreGlobal(BlockState &b, uint32_t index);
Status execStoreShared(BlockState &b, uint32_t index);
Status execCopyAsync(BlockState &b, uint32_t index);
Status execCopyAsyncCommitGroup(BlockState &b, uint32_t index);
Status execCopyAsyncWaitGroup(BlockState &b, uint32_t index);
Status execCopyAsyncWaitAll(BlockState &b, uint32_t index);

// exec_elementwise.cpp: arithmetic, bitwise, comparison, unary, math, Where, Cast,
// ConvertLayout
Status execElementwise(BlockState &b, uint32_t index);

// exec_compute.cpp: View, Permute, Dot, Reduce
Status execView(BlockState &b, uint32_t index);
Status execPermute(BlockState &b, uint32_t index);
Status execDot(BlockState &b, uint32_t index);
Status execReduce(BlockState &b, uint32_t index);

// exec_print.cpp
Status execPrint(BlockState &b, uint32_t index);

} // namespace tilus::cpu
