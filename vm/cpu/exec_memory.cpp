// Data movement between memory and registers: LoadGlobal, StoreGlobal, LoadShared,
// StoreShared, LoadScalar (one element into a block-uniform scalar), StoreScalar (a scalar into
// one element, written by thread 0), and the asynchronous
// copies (CopyAsync, commit, wait).
//
// Loads read each logical element of the tile once and hand it to every owner slot; stores
// write each logical element once, from its first owner (replicated owners hold equal values).
// Global elements outside the view read as 0 and stores to them are dropped; shared elements
// outside the view trap. A CopyAsync reads global memory when issued and its data lands in
// shared memory only at the wait that covers its group, so a program that reads the
// destination early sees the old contents (and checked mode reports the race).
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"
#include "vm/cpu/tile_elements.h"

namespace tilus::cpu {

namespace {

/// LoadGlobal / LoadShared: the tile of the memory tensor that argument `memory` names, in the
/// result's layout.
Status load(BlockState &b, uint32_t index, ArgName memory) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const LayoutTable &table = *b.plan.varTables[r];
  DataType resultType = b.info.vars[r].dtype;
  std::vector<uint64_t> &logical = b.scratch[0];
  logical.assign(size_t(table.elements), 0);
  TILUSVM_TRY(forEachAccessElement(
      b, index, inst.arg(memory).var, table.shape, AccessKind::Read, "reads",
      [&](int64_t e) { return ownerThread(table, e); },
      [&](int64_t e, const ElementAt &at) {
        uint64_t v = at.read();
        logical[size_t(e)] = at.dtype == resultType ? v : convertBits(v, at.dtype, resultType);
      }));
  scatterToOwners(b, r, logical);
  return Status::success();
}

/// StoreGlobal / StoreShared: register tensor r into the tile of the memory tensor that
/// argument `memory` names, each element from its first owner.
Status store(BlockState &b, uint32_t index, ArgName memory) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.arg(ArgName::r).var;
  TILUSVM_TRY(b.requireRegister(index, r));
  const LayoutTable &table = *b.plan.varTables[r];
  const std::vector<uint64_t> &slots = b.regs[r];
  DataType valueType = b.info.vars[r].dtype;
  return forEachAccessElement(
      b, index, inst.arg(memory).var, table.shape, AccessKind::Write, "writes",
      [&](int64_t e) { return ownerThread(table, e); },
      [&](int64_t e, const ElementAt &at) {
        uint64_t v = slots[size_t(table.firstOwner(e))];
        at.write(at.dtype == valueType ? v : convertBits(v, valueType, at.dtype));
      });
}

} // namespace

Status Exec::visitLoadGlobal(BlockState &b, uint32_t index) { return load(b, index, ArgName::g); }

Status Exec::visitLoadShared(BlockState &b, uint32_t index) { return load(b, index, ArgName::s); }

Status Exec::visitStoreGlobal(BlockState &b, uint32_t index) { return store(b, index, ArgName::g); }

Status Exec::visitStoreShared(BlockState &b, uint32_t index) { return store(b, index, ArgName::s); }

Status Exec::visitLoadScalar(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  DataType resultType = b.program.var(r).dtype;
  uint64_t value = 0; // a global element outside the tensor reads as 0
  DataType dtype = resultType;
  TILUSVM_TRY(forEachAccessElement(
      b, index, inst.arg(ArgName::x).var, {}, AccessKind::Read, "reads", [](int64_t) { return -1; },
      [&](int64_t, const ElementAt &at) {
        value = at.read();
        dtype = at.dtype;
      }));
  b.scalars[r] = dtype == resultType ? value : convertBits(value, dtype, resultType);
  return Status::success();
}

Status Exec::visitStoreScalar(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  ExprId value = inst.arg(ArgName::value).expr;
  DataType valueType = b.program.expr(value).dtype;
  uint64_t v = b.eval(value);
  // written once, by thread 0 (a global element outside the tensor is not written)
  return forEachAccessElement(
      b, index, inst.arg(ArgName::dst).var, {}, AccessKind::Write, "writes",
      [](int64_t) { return 0; },
      [&](int64_t, const ElementAt &at) {
        at.write(at.dtype == valueType ? v : convertBits(v, valueType, at.dtype));
      });
}

Expected<AsyncCopy> Exec::readAsyncCopy(BlockState &b, uint32_t index, bool markPending) {
  const Instruction &inst = b.program.instructions[index];
  TILUSVM_TRY(b.requireShared(index, inst.arg(ArgName::s).var));
  const SharedView &dst = b.shareds[inst.arg(ArgName::s).var];
  const GlobalView &src = b.globals[inst.arg(ArgName::g).var];
  std::vector<OffsetValue> whole(dst.shape.size(), OffsetValue{0, true});
  Expected<TileAccess> dstTile = sharedTile(dst, whole, dst.shape);
  Expected<TileAccess> srcTile =
      globalTile(src, b.offsets(inst.arg(ArgName::offset), src.shape.size()), dst.shape);
  if (!dstTile)
    return b.fail(dstTile.status().code(), index, dstTile.status().first().message);
  if (!srcTile)
    return b.fail(srcTile.status().code(), index, srcTile.status().first().message);
  AsyncCopy copy;
  copy.instruction = index;
  copy.root = dst.root;
  copy.storageBits = dst.dtype.storageBits();
  size_t n = size_t(dstTile->elements());
  copy.bitAddrs.resize(n);
  copy.elements.resize(n);
  copy.values.assign(n, 0);
  int64_t base = dst.byteOffset * 8;
  TILUSVM_TRY(
      forEachSharedElement(b, index, dst, whole, *dstTile, "writes", [&](int64_t e, int64_t off) {
        copy.bitAddrs[size_t(e)] = base + off * copy.storageBits;
        copy.elements[size_t(e)] = off;
        if (b.race && markPending)
          b.race->sharedCopyIssue(dst.root, off);
      }));
  int sb = src.dtype.storageBits();
  bool same = src.dtype == dst.dtype;
  Status status =
      forEachGlobalElement(b, index, src, *srcTile, [&](int64_t e, int64_t bit, int64_t off) {
        uint64_t v = canonicalFromMemory(readBits(src.base, bit, sb), src.dtype);
        copy.values[size_t(e)] = same ? v : convertBits(v, src.dtype, dst.dtype);
        if (b.race)
          b.race->globalRead(raceKey(src, bit), sb, src.root, off, -1);
      });
  TILUSVM_TRY(status);
  return copy;
}

Status Exec::visitCopyAsync(BlockState &b, uint32_t index) {
  Expected<AsyncCopy> copy = readAsyncCopy(b, index);
  if (!copy.ok())
    return copy.takeStatus();
  b.uncommitted.push_back(std::move(copy.value()));
  return Status::success();
}

void Exec::landCopy(BlockState &b, const AsyncCopy &copy, bool atBarrier) {
  for (size_t e = 0; e < copy.values.size(); ++e) {
    writeBits(b.shared.data(), copy.bitAddrs[e], copy.storageBits, copy.values[e]);
    if (b.race)
      b.race->sharedCopyLand(copy.root, copy.elements[e], copy.instruction, atBarrier);
  }
}

namespace {

void landOldestGroup(BlockState &b) {
  for (const AsyncCopy &copy : b.committed.front())
    Exec::landCopy(b, copy);
  b.committed.pop_front();
}

} // namespace

Status Exec::visitCopyAsyncCommitGroup(BlockState &b, uint32_t) {
  b.committed.push_back(std::move(b.uncommitted));
  b.uncommitted.clear();
  return Status::success();
}

Status Exec::visitCopyAsyncWaitGroup(BlockState &b, uint32_t index) {
  int64_t n = b.program.instructions[index].arg(ArgName::n).intValue;
  while (!b.committed.empty() && int64_t(b.committed.size()) > n)
    landOldestGroup(b);
  return Status::success();
}

Status Exec::visitCopyAsyncWaitAll(BlockState &b, uint32_t) {
  while (!b.committed.empty())
    landOldestGroup(b);
  for (const AsyncCopy &copy : b.uncommitted)
    Exec::landCopy(b, copy);
  b.uncommitted.clear();
  return Status::success();
}

} // namespace tilus::cpu
