// The atomics (AtomicAdd, AtomicMax, AtomicMin, AtomicExch, AtomicCas, AtomicStore, AtomicLoad)
// and Fence (docs/isa.md, "Atomics", "AtomicLoad and AtomicStore").
//
// An atomic instruction visits the elements of its tile in row-major order of the register
// tensor r; for each element inside the memory tensor it reads the old value, combines it with
// r's element (held by its first owner: replicas hold equal values) and writes the new value,
// once per element however many threads own it. The optional result receives the old values
// (0 for elements outside a global view), handed to every owner. On global memory the whole
// instruction runs under the launch's atomic lock, so the read-modify-writes of blocks running
// in parallel on host threads never interleave: every element's updates happen one at a time,
// in the order in which the blocks' instructions take the lock. AtomicStore is such an update
// whose new value is r's element; AtomicLoad reads each element of its tile once under the lock
// and hands it to every owner, as LoadGlobal does. All of them are atomic accesses to the race
// detector (they never race with each other). The interpreter runs every instruction as if
// sequentially consistent, so Fence has nothing to do here.
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"
#include "vm/cpu/tile_elements.h"

#include <cmath>
#include <mutex>

namespace tilus::cpu {

namespace {

/// f32 subnormals flushed to zero of the same sign (global f32 atomic adds, docs/isa.md).
uint64_t flushSubnormal(uint64_t bits) {
  return (bits & 0x7F800000u) == 0 ? bits & 0x80000000u : bits;
}

/// The new value of one element: `old` combined with the operand `v` (and `cmp` for Cas).
uint64_t combine(Opcode op, DataType t, bool global, uint64_t old, uint64_t v, uint64_t cmp) {
  if (op == Opcode::AtomicExch || op == Opcode::AtomicStore)
    return v;
  if (op == Opcode::AtomicCas)
    return old == cmp ? v : old;
  ExprOp scalar = op == Opcode::AtomicAdd   ? ExprOp::Add
                  : op == Opcode::AtomicMax ? ExprOp::Max
                                            : ExprOp::Min;
  bool ftz = global && op == Opcode::AtomicAdd && t == DataType::f32();
  uint64_t operands[2] = {ftz ? flushSubnormal(old) : old, ftz ? flushSubnormal(v) : v};
  uint64_t sum = applyScalarOp(scalar, t, t, operands);
  return ftz ? flushSubnormal(sum) : sum;
}

/// The launch's atomic lock, held when `memory` is global (shared memory belongs to the block).
std::unique_lock<std::mutex> atomicLock(BlockState &b, VarId memory) {
  std::unique_lock<std::mutex> lock(b.plan.atomicMutex, std::defer_lock);
  if (b.info.vars[memory].kind == VarKind::Global)
    lock.lock();
  return lock;
}

} // namespace

Status Exec::visitAtomic(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.arg(ArgName::r).var;
  TILUSVM_TRY(b.requireRegister(index, r));
  const LayoutTable &table = *b.plan.varTables[r];
  const std::vector<uint64_t> &values = b.regs[r];
  const std::vector<uint64_t> *compares = nullptr;
  if (inst.hasArg(ArgName::cmp)) {
    VarId c = inst.arg(ArgName::cmp).var;
    TILUSVM_TRY(b.requireRegister(index, c));
    compares = &b.regs[c];
  }
  const bool wantOld = !inst.results.empty();
  std::vector<uint64_t> &logical = b.scratch[0];
  logical.assign(wantOld ? size_t(table.elements) : 0, 0);
  const Opcode op = inst.opcode;
  VarId dst = inst.arg(ArgName::dst).var;
  std::unique_lock<std::mutex> lock = atomicLock(b, dst);
  TILUSVM_TRY(forEachAccessElement(
      b, index, dst, table.shape, AccessKind::Atomic, "updates",
      [&](int64_t e) { return ownerThread(table, e); },
      [&](int64_t e, const ElementAt &at) {
        int32_t slot = table.firstOwner(e);
        uint64_t old = at.read();
        uint64_t v = values[size_t(slot)];
        uint64_t c = compares ? (*compares)[size_t(slot)] : 0;
        writeBits(at.memory, at.bit, at.dtype.storageBits(),
                  combine(op, at.dtype, at.global, old, v, c));
        if (wantOld)
          logical[size_t(e)] = old;
      }));
  if (wantOld)
    scatterToOwners(b, inst.results[0], logical);
  return Status::success();
}

Status Exec::visitAtomicLoad(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const LayoutTable &table = *b.plan.varTables[r];
  std::vector<uint64_t> &logical = b.scratch[0];
  logical.assign(size_t(table.elements), 0);
  VarId x = inst.arg(ArgName::x).var;
  std::unique_lock<std::mutex> lock = atomicLock(b, x);
  TILUSVM_TRY(forEachAccessElement(
      b, index, x, table.shape, AccessKind::Atomic, "reads",
      [&](int64_t e) { return ownerThread(table, e); },
      [&](int64_t e, const ElementAt &at) { logical[size_t(e)] = at.read(); }));
  scatterToOwners(b, r, logical);
  return Status::success();
}

Status Exec::visitFence(BlockState &, uint32_t) {
  // Orders nothing in an interpreter that runs every instruction one at a time.
  return Status::success();
}

} // namespace tilus::cpu
