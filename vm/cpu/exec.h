// The instruction executors: one small function per instruction (or per family), each running
// one instruction for the whole block (ISA section 1: "as if one at a time"). They are the
// handlers of Exec, dispatched from isa/instructions.def by visitInstruction
// (isa/instruction_visitor.h) in exec_control.cpp, which also walks the statements. Each lives
// in the file of its family, exec_<family>.cpp (docs/contributing.md).
#pragma once

#include "isa/instruction_visitor.h"
#include "vm/cpu/block_state.h"

namespace tilus::cpu {

/// Run the block's body from the start; then the checks of a block's end (TmaStores still in
/// flight: exec_memory_tma.cpp).
Status runBlock(BlockState &b);
/// Run a list of statements (a body) of the block's program (exec_control.cpp).
Status execBody(BlockState &b, const std::vector<Stmt> &body, Flow &flow);
/// Where statement `s` of the block's program is (its source position, when known).
Location statementLocation(const BlockState &b, const Stmt &s);
Status finishBlock(BlockState &b);

/// The interpreter's visitor over the instruction table: one handler visitNAME per row of
/// isa/instructions.def, declared here from the table, except the elementwise rows
/// (visitElementwise: their scalar operator or math function is the row's payload) and the
/// atomic ones (visitAtomic). Each runs instruction `index` of the block's program; each lives
/// in the file of its family, exec_<family>.cpp (docs/contributing.md).
struct Exec {
  /// The block's control flow after the instruction (Exit sets Flow::Exit).
  Flow &flow;

#define TILUSVM_HANDLERS_OWNED TILUSVM_PER_ROW
#define TILUSVM_HANDLER(Name) Status visit##Name(BlockState &b, uint32_t index)
#include "isa/instruction_handlers.def"

  // exec_elementwise.cpp: the rows of the elementwise family (Cast, ConvertLayout and Where
  // stage their operands the same way and run through it too)
  Status visitElementwise(BlockState &b, uint32_t index);
  // exec_atomic.cpp: AtomicAdd, AtomicMax, AtomicMin, AtomicExch, AtomicCas, AtomicStore; Fence
  // and AtomicLoad have their own
  Status visitAtomic(BlockState &b, uint32_t index);
  Status visitFence(BlockState &b, uint32_t index);
  Status visitAtomicLoad(BlockState &b, uint32_t index);
  // exec_control.cpp: an opcode outside the table
  Status visitInvalid(BlockState &b, uint32_t index);

  /// Complete `bytes` transaction bytes on the mbarrier at shared byte address `address` (the
  /// end of an asynchronous copy); completes the phase when nothing else is pending
  /// (exec_control_mbarrier.cpp).
  static Status completeTransaction(BlockState &b, uint32_t index, int64_t address, int64_t bytes);
  /// The byte address and root element of the one-element mbarrier view in argument `which`
  /// (exec_control_mbarrier.cpp).
  static Status barrierAddress(BlockState &b, uint32_t index, ArgName which, int64_t &address,
                               int64_t &element);
  /// The state of the initialised mbarrier in argument `which`, read by the block (checked
  /// mode); an error when MbarrierInit has not initialised it (exec_control_mbarrier.cpp).
  static Status useBarrier(BlockState &b, uint32_t index, ArgName which, int64_t &address,
                           MbarrierState *&state);

  /// The data of asynchronous copy `index` (CopyAsync, TmaLoad: argument s the destination,
  /// g the source, offset= the tile), read from global memory now; in checked mode and with
  /// `markPending` the block's destination becomes pending (exec_memory.cpp).
  static Expected<AsyncCopy> readAsyncCopy(BlockState &b, uint32_t index, bool markPending = true);
  /// One arrival (with `tx` transaction bytes expected first) at the mbarrier at shared byte
  /// `address` of block `target`, by instruction `index` of block `b` (the same block, or
  /// another of its cluster); completes the phase when nothing else is pending
  /// (exec_control_mbarrier.cpp).
  static Status arriveAt(BlockState &target, const BlockState &b, uint32_t index, int64_t address,
                         int64_t tx);
  /// The block of rank `rank` in b's cluster (b itself for its own rank), for a delivery by
  /// instruction `index`: an error when the rank is outside the cluster or the block has ended
  /// (exec_cluster.cpp).
  static Expected<BlockState *> clusterTarget(BlockState &b, uint32_t index, int64_t rank,
                                              const char *what);
  /// Write a copy's data into shared memory (in checked mode: its landing; `atBarrier`: at an
  /// mbarrier wait, which orders it before every later access).
  static void landCopy(BlockState &b, const AsyncCopy &copy, bool atBarrier = false);
};

} // namespace tilus::cpu
