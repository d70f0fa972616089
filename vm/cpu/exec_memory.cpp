// Data movement between memory and registers: LoadGlobal, StoreGlobal, LoadShared,
// StoreShared, LoadScalar (one element into a block-uniform scalar), and the asynchronous
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

Status Exec::visitLoadGlobal(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const LayoutTable &table = *b.plan.varTables[r];
  const GlobalView &view = b.globals[inst.arg(ArgName::g).var];
  DataType dtype = view.dtype, resultType = b.info.vars[r].dtype;
  Expected<TileAccess> tile =
      globalTile(view, b.offsets(inst.arg(ArgName::offset), view.shape.size()), table.shape);
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  std::vector<uint64_t> &logical = b.scratch[0];
  logical.assign(size_t(table.elements), 0);
  int sb = dtype.storageBits();
  bool same = dtype == resultType;
  Status status =
      forEachGlobalElement(b, index, view, *tile, [&](int64_t e, int64_t bit, int64_t off) {
        uint64_t v = canonicalFromMemory(readBits(view.base, bit, sb), dtype);
        logical[size_t(e)] = same ? v : convertBits(v, dtype, resultType);
        if (b.race)
          b.race->globalRead(raceKey(view, bit), sb, view.root, off, ownerThread(table, e));
      });
  TILUSVM_TRY(status);
  scatterToOwners(b, r, logical);
  return Status::success();
}

Status Exec::visitStoreGlobal(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.arg(ArgName::r).var;
  TILUSVM_TRY(b.requireRegister(index, r));
  const LayoutTable &table = *b.plan.varTables[r];
  const std::vector<uint64_t> &slots = b.regs[r];
  const GlobalView &view = b.globals[inst.arg(ArgName::g).var];
  DataType dtype = view.dtype, valueType = b.info.vars[r].dtype;
  Expected<TileAccess> tile =
      globalTile(view, b.offsets(inst.arg(ArgName::offset), view.shape.size()), table.shape);
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  int sb = dtype.storageBits();
  bool same = dtype == valueType;
  return forEachGlobalElement(b, index, view, *tile, [&](int64_t e, int64_t bit, int64_t off) {
    uint64_t v = slots[size_t(table.firstOwner(e))];
    writeBitsShared(view.base, bit, sb, same ? v : convertBits(v, valueType, dtype));
    if (b.race)
      b.race->globalWrite(raceKey(view, bit), sb, view.root, off, ownerThread(table, e));
  });
}

Status Exec::visitLoadShared(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const LayoutTable &table = *b.plan.varTables[r];
  TILUSVM_TRY(b.requireShared(index, inst.arg(ArgName::s).var));
  const SharedView &view = b.shareds[inst.arg(ArgName::s).var];
  DataType dtype = view.dtype, resultType = b.info.vars[r].dtype;
  std::vector<OffsetValue> offsets = b.offsets(inst.arg(ArgName::offset), view.shape.size());
  Expected<TileAccess> tile = sharedTile(view, offsets, table.shape);
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  std::vector<uint64_t> &logical = b.scratch[0];
  logical.assign(size_t(table.elements), 0);
  int sb = dtype.storageBits();
  int64_t base = view.byteOffset * 8;
  TILUSVM_TRY(
      forEachSharedElement(b, index, view, offsets, *tile, "reads", [&](int64_t e, int64_t off) {
        uint64_t v = canonicalFromMemory(readBits(b.shared.data(), base + off * sb, sb), dtype);
        logical[size_t(e)] = dtype == resultType ? v : convertBits(v, dtype, resultType);
        if (b.race)
          b.race->sharedRead(view.root, off, ownerThread(table, e));
      }));
  scatterToOwners(b, r, logical);
  return Status::success();
}

Status Exec::visitStoreShared(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.arg(ArgName::r).var;
  TILUSVM_TRY(b.requireRegister(index, r));
  TILUSVM_TRY(b.requireShared(index, inst.arg(ArgName::s).var));
  const LayoutTable &table = *b.plan.varTables[r];
  const std::vector<uint64_t> &slots = b.regs[r];
  const SharedView &view = b.shareds[inst.arg(ArgName::s).var];
  DataType dtype = view.dtype, valueType = b.info.vars[r].dtype;
  std::vector<OffsetValue> offsets = b.offsets(inst.arg(ArgName::offset), view.shape.size());
  Expected<TileAccess> tile = sharedTile(view, offsets, table.shape);
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  int sb = dtype.storageBits();
  int64_t base = view.byteOffset * 8;
  return forEachSharedElement(
      b, index, view, offsets, *tile, "writes", [&](int64_t e, int64_t off) {
        uint64_t v = slots[size_t(table.firstOwner(e))];
        writeBits(b.shared.data(), base + off * sb, sb,
                  dtype == valueType ? v : convertBits(v, valueType, dtype));
        if (b.race)
          b.race->sharedWrite(view.root, off, ownerThread(table, e));
      });
}

Status Exec::visitLoadScalar(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId x = inst.arg(ArgName::x).var;
  VarId r = inst.results[0];
  DataType resultType = b.program.var(r).dtype;
  uint64_t value = 0; // a global element outside the tensor reads as 0
  DataType dtype = resultType;
  if (b.info.vars[x].kind == VarKind::Shared) {
    TILUSVM_TRY(b.requireShared(index, x));
    const SharedView &view = b.shareds[x];
    dtype = view.dtype;
    std::vector<OffsetValue> offsets = b.offsets(inst.arg(ArgName::offset), view.shape.size());
    Expected<TileAccess> tile = sharedTile(view, offsets, {});
    if (!tile)
      return b.fail(tile.status().code(), index, tile.status().first().message);
    int sb = dtype.storageBits();
    int64_t base = view.byteOffset * 8;
    TILUSVM_TRY(
        forEachSharedElement(b, index, view, offsets, *tile, "reads", [&](int64_t, int64_t off) {
          value = canonicalFromMemory(readBits(b.shared.data(), base + off * sb, sb), dtype);
          if (b.race)
            b.race->sharedRead(view.root, off, -1);
        }));
  } else {
    const GlobalView &view = b.globals[x];
    dtype = view.dtype;
    Expected<TileAccess> tile =
        globalTile(view, b.offsets(inst.arg(ArgName::offset), view.shape.size()), {});
    if (!tile)
      return b.fail(tile.status().code(), index, tile.status().first().message);
    int sb = dtype.storageBits();
    TILUSVM_TRY(forEachGlobalElement(b, index, view, *tile, [&](int64_t, int64_t bit, int64_t off) {
      value = canonicalFromMemory(readBits(view.base, bit, sb), dtype);
      if (b.race)
        b.race->globalRead(raceKey(view, bit), sb, view.root, off, -1);
    }));
  }
  b.scalars[r] = dtype == resultType ? value : convertBits(value, dtype, resultType);
  return Status::success();
}

Status Exec::visitCopyAsync(BlockState &b, uint32_t index) {
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
        if (b.race)
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
  b.uncommitted.push_back(std::move(copy));
  return Status::success();
}

namespace {

void land(BlockState &b, const AsyncCopy &copy) {
  for (size_t e = 0; e < copy.values.size(); ++e) {
    writeBits(b.shared.data(), copy.bitAddrs[e], copy.storageBits, copy.values[e]);
    if (b.race)
      b.race->sharedCopyLand(copy.root, copy.elements[e], copy.instruction);
  }
}

void landOldestGroup(BlockState &b) {
  for (const AsyncCopy &copy : b.committed.front())
    land(b, copy);
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
    land(b, copy);
  b.uncommitted.clear();
  return Status::success();
}

} // namespace tilus::cpu
