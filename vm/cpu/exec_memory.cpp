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

namespace tilus::cpu {

namespace {

std::string indexText(const std::vector<OffsetValue> &offsets, const int64_t *idx) {
  std::string s = "[";
  size_t k = 0;
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (d)
      s += ", ";
    s += std::to_string(offsets[d].start + (offsets[d].slice ? idx[k++] : 0));
  }
  return s + "]";
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string s = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    s += (d ? ", " : "") + std::to_string(shape[d]);
  return s + "]";
}

/// Whether the buffer under `view` holds the element at bit address `bit`.
inline bool inBuffer(const GlobalView &view, int64_t bit, int sb) {
  return bit >= 0 && uint64_t(bit) + uint64_t(sb) <= view.byteSize * 8;
}

/// Whether the buffer holds every element the tile can address (then no per-element test).
bool tileInBuffer(const GlobalView &view, const TileAccess &tile, int sb) {
  int64_t min = 0, max = 0;
  tile.offsetRange(min, max);
  return inBuffer(view, min * sb, sb) && inBuffer(view, max * sb, sb);
}

Status outsideBuffer(const BlockState &b, uint32_t index, const GlobalView &view, int64_t offset) {
  std::string buffer = view.buffer == kNoId ? std::string("the workspace")
                                            : "`" + b.program.var(view.buffer).name + "`";
  return b.fail(ErrorCode::Runtime, index,
                "element offset " + std::to_string(offset) + " of `" +
                    b.program.var(view.root).name + "` lies outside the " +
                    std::to_string(view.byteSize) + "-byte buffer of " + buffer);
}

uint64_t raceKey(const GlobalView &view, int64_t bit) {
  return uint64_t(reinterpret_cast<uintptr_t>(view.base)) * 8 + uint64_t(bit);
}

Status sharedOutOfBounds(const BlockState &b, uint32_t index, const SharedView &view,
                         const std::vector<OffsetValue> &offsets, const int64_t *idx,
                         const char *verb) {
  return b.fail(ErrorCode::OutOfBounds, index,
                std::string(b.program.instructions[index].spec().name) + " " + verb + " index " +
                    indexText(offsets, idx) + " outside shared tensor of shape " +
                    shapeText(view.shape) + " (allocation `" + b.program.var(view.root).name +
                    "`)");
}

/// Visit the valid elements of a shared tile; any invalid element traps.
template <typename F>
Status forEachSharedElement(const BlockState &b, uint32_t index, const SharedView &view,
                            const std::vector<OffsetValue> &offsets, const TileAccess &tile,
                            const char *verb, F &&f) {
  Status status;
  forEachTileElement(tile, [&](int64_t e, const int64_t *idx, bool valid, int64_t off) {
    if (!status.ok())
      return;
    if (!valid) {
      status = sharedOutOfBounds(b, index, view, offsets, idx, verb);
      return;
    }
    f(e, off);
  });
  return status;
}

/// Visit the elements of a global tile that lie inside the view: f(e, bit, offset). Elements
/// outside the view are skipped (loads read 0, stores are dropped); an element inside the view
/// but outside the argument buffer is an error (reported once, for the first such element).
template <typename F>
Status forEachGlobalElement(const BlockState &b, uint32_t index, const GlobalView &view,
                            const TileAccess &tile, F &&f) {
  int sb = view.dtype.storageBits();
  bool checkBuffer = !tileInBuffer(view, tile, sb);
  Status status;
  forEachTileElement(tile, [&](int64_t e, const int64_t *, bool valid, int64_t off) {
    int64_t bit = off * sb;
    if (!valid)
      return;
    if (checkBuffer && !inBuffer(view, bit, sb)) {
      if (status.ok())
        status = outsideBuffer(b, index, view, off);
      return;
    }
    f(e, bit, off);
  });
  return status;
}

/// Hand logical element values to every owner slot of the result.
void scatterToOwners(BlockState &b, VarId r, const std::vector<uint64_t> &logical) {
  const LayoutTable &table = *b.plan.varTables[r];
  std::vector<uint64_t> out = b.takeBuffer(size_t(table.numSlots()));
  for (size_t s = 0; s < out.size(); ++s)
    out[s] = logical[size_t(table.slotLinear[s])];
  b.setRegister(r, std::move(out));
}

int32_t ownerThread(const LayoutTable &table, int64_t e) {
  return int32_t(table.firstOwner(e) / table.locals);
}

} // namespace

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
