// TmaLoad and TmaStore (docs/isa.md, "Tensor-memory-accelerator loads" and "... stores"), run
// for the whole block. The tile is
// read from global memory when the copy is issued (zeros outside the view, as CopyAsync), its
// transaction bytes (the whole box, ProgramInfo::tma) complete on the mbarrier at once, and the
// data waits beside the barrier: it is written into shared memory by the first MbarrierWait
// that returns after the phase completed (exec_control_mbarrier.cpp). In checked mode the
// destination is pending from the issue to that wait: any access by the block in between races
// with the copy.
//
// A TmaStore reads its source when issued and writes global memory at the TmaStoreWaitGroup
// that covers its group; in checked mode the source is read by the copy until then (a write
// races with it) and by thread 0 at the wait. A block must not end with stores in flight.
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"
#include "vm/cpu/tile_elements.h"

#include <limits>

namespace tilus::cpu {

namespace {

/// The coordinates of a TMA copy as the hardware takes them (one per tensor-map dimension: a
/// dimension that merges view dimensions takes its first one's offset times the others'
/// extents): 32-bit signed integers (not negative for a store, an illegal instruction on the
/// GPU), the innermost one on a 16-byte boundary.
Status checkCoordinates(const BlockState &b, uint32_t index, const std::vector<OffsetValue> &at,
                        DataType dtype, bool store) {
  const char *op = store ? "TmaStore" : "TmaLoad";
  const TensorMapSpec &spec = b.info.tensorMaps[b.info.tma.at(index).tensorMap];
  for (size_t i = 0, d = 0; i < spec.groups.size() && d < at.size(); d += spec.groups[i++]) {
    __int128 c = __int128(at[d].start) * spec.scales[i];
    if (c < (store ? 0 : std::numeric_limits<int32_t>::min()) ||
        c > std::numeric_limits<int32_t>::max())
      return b.fail(ErrorCode::Runtime, index,
                    std::string(op) + " coordinate " + std::to_string(at[d].start) +
                        (spec.scales[i] != 1 ? " x " + std::to_string(spec.scales[i]) +
                                                   " (its dimension merged with the next " +
                                                   std::to_string(spec.groups[i] - 1) + ")"
                                             : "") +
                        " of dimension " + std::to_string(d) +
                        (store ? " is outside [0, 2^31): a store's box starts inside the tensor's "
                                 "index range (an illegal instruction on the GPU)"
                               : " is not a 32-bit signed integer"));
  }
  int64_t bytes = dtype.storageBits() / 8;
  if (!at.empty() && (at.back().start * bytes) % 16 != 0)
    return b.fail(ErrorCode::Runtime, index,
                  std::string(op) + " innermost coordinate " + std::to_string(at.back().start) +
                      " (" + std::to_string(at.back().start * bytes) +
                      " bytes) is not a multiple of 16 bytes, where the tensor memory "
                      "accelerator starts rows");
  return Status::success();
}

} // namespace

Status Exec::visitTmaLoad(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  int64_t address = 0;
  MbarrierState *barrier = nullptr;
  TILUSVM_TRY(useBarrier(b, index, ArgName::bar, address, barrier));
  const GlobalView &src = b.globals[inst.arg(ArgName::g).var];
  TILUSVM_TRY(checkCoordinates(b, index, b.offsets(inst.arg(ArgName::offset), src.shape.size()),
                               src.dtype, false));
  Expected<AsyncCopy> copy = readAsyncCopy(b, index);
  if (!copy.ok())
    return copy.takeStatus();
  barrier->inFlight.push_back(std::move(copy.value()));
  return completeTransaction(b, index, address, b.info.tma.at(index).bytes);
}

Status Exec::visitTmaLoadMulticast(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  const int64_t c = int64_t(b.program.cluster);
  int64_t mask = b.evalInt(inst.arg(ArgName::mask).expr);
  if (mask < 1 || mask >= (int64_t(1) << c))
    return b.fail(ErrorCode::Runtime, index,
                  "TmaLoadMulticast mask=" + std::to_string(mask) + " outside [1, " +
                      std::to_string((int64_t(1) << c) - 1) + "] for cluster=" + std::to_string(c));
  int64_t address = 0, element = 0;
  TILUSVM_TRY(barrierAddress(b, index, ArgName::bar, address, element));
  const GlobalView &src = b.globals[inst.arg(ArgName::g).var];
  TILUSVM_TRY(checkCoordinates(b, index, b.offsets(inst.arg(ArgName::offset), src.shape.size()),
                               src.dtype, false));
  // read once; each target gets the data beside its barrier and the bytes on it, as its own
  // TmaLoad would (the same shared byte addresses in every block of the cluster)
  Expected<AsyncCopy> copy = readAsyncCopy(b, index, /*markPending=*/false);
  if (!copy.ok())
    return copy.takeStatus();
  for (int64_t rank = 0; rank < c; ++rank) {
    if (((mask >> rank) & 1) == 0)
      continue;
    Expected<BlockState *> target = clusterTarget(b, index, rank, "TmaLoadMulticast");
    if (!target)
      return target.takeStatus();
    BlockState &t = **target;
    if (t.race)
      for (int64_t e : copy->elements) {
        if (&t == &b)
          t.race->sharedCopyIssue(copy->root, e);
        else // ordered after the target's earlier accesses by other blocks' barriers
          t.race->sharedRemoteCopyIssue(copy->root, e, index);
      }
    auto it = t.mbarriers.find(address);
    if (it == t.mbarriers.end())
      return b.fail(ErrorCode::Runtime, index,
                    "TmaLoadMulticast completes on the mbarrier at shared byte " +
                        std::to_string(address) + " of " + t.blockText() +
                        ", which MbarrierInit has not initialised there (initialise it, then "
                        "ClusterSync(), before other blocks use it)");
    it->second.inFlight.push_back(*copy);
    TILUSVM_TRY(completeTransaction(t, index, address, b.info.tma.at(index).bytes));
  }
  return Status::success();
}

} // namespace tilus::cpu

namespace tilus::cpu {

namespace {

/// Write one store's values to global memory (its group's wait).
void landStore(BlockState &b, const PendingTmaStore &store) {
  const int bits = store.global.dtype.storageBits();
  for (size_t e = 0; e < store.values.size(); ++e) {
    writeBits(store.global.base, store.bitAddrs[e], bits, store.values[e]);
    if (b.race)
      b.race->globalWrite(raceKey(store.global, store.bitAddrs[e]), bits, store.global.root,
                          store.offsets[e], -1);
  }
  if (b.race)
    for (int64_t element : store.sharedElements) {
      b.race->sharedAsyncReadEnd(store.sharedRoot, element, store.instruction);
      b.race->sharedRead(store.sharedRoot, element, 0); // thread 0 waited
    }
}

} // namespace

Status Exec::visitTmaStore(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  TILUSVM_TRY(b.requireShared(index, inst.arg(ArgName::s).var));
  const SharedView &src = b.shareds[inst.arg(ArgName::s).var];
  const GlobalView &dst = b.globals[inst.arg(ArgName::g).var];
  std::vector<OffsetValue> offsets = b.offsets(inst.arg(ArgName::offset), dst.shape.size());
  TILUSVM_TRY(checkCoordinates(b, index, offsets, dst.dtype, true));
  std::vector<OffsetValue> whole(src.shape.size(), OffsetValue{0, true});
  Expected<TileAccess> srcTile = sharedTile(src, whole, src.shape);
  Expected<TileAccess> dstTile = globalTile(dst, offsets, src.shape);
  if (!srcTile)
    return b.fail(srcTile.status().code(), index, srcTile.status().first().message);
  if (!dstTile)
    return b.fail(dstTile.status().code(), index, dstTile.status().first().message);
  PendingTmaStore store;
  store.instruction = index;
  store.sharedRoot = src.root;
  store.global = dst;
  const int sb = src.dtype.storageBits();
  std::vector<uint64_t> values(size_t(srcTile->elements()), 0);
  int64_t base = src.byteOffset * 8;
  TILUSVM_TRY(
      forEachSharedElement(b, index, src, whole, *srcTile, "reads", [&](int64_t e, int64_t off) {
        values[size_t(e)] = readBits(b.shared.data(), base + off * sb, sb);
        store.sharedElements.push_back(off);
        if (b.race)
          b.race->sharedAsyncRead(src.root, off);
      }));
  TILUSVM_TRY(
      forEachGlobalElement(b, index, dst, *dstTile, [&](int64_t e, int64_t bit, int64_t off) {
        store.bitAddrs.push_back(bit);
        store.offsets.push_back(off);
        store.values.push_back(values[size_t(e)]);
      }));
  b.tmaStoreUncommitted.push_back(std::move(store));
  return Status::success();
}

Status Exec::visitTmaStoreCommitGroup(BlockState &b, uint32_t) {
  b.tmaStoreCommitted.push_back(std::move(b.tmaStoreUncommitted));
  b.tmaStoreUncommitted.clear();
  return Status::success();
}

Status Exec::visitTmaStoreWaitGroup(BlockState &b, uint32_t index) {
  int64_t n = b.program.instructions[index].arg(ArgName::n).intValue;
  while (!b.tmaStoreCommitted.empty() && int64_t(b.tmaStoreCommitted.size()) > n) {
    for (const PendingTmaStore &store : b.tmaStoreCommitted.front())
      landStore(b, store);
    b.tmaStoreCommitted.pop_front();
  }
  return Status::success();
}

Status finishBlock(BlockState &b) {
  const PendingTmaStore *open = !b.tmaStoreCommitted.empty() ? &b.tmaStoreCommitted.front().front()
                                : !b.tmaStoreUncommitted.empty() ? &b.tmaStoreUncommitted.front()
                                                                 : nullptr;
  if (!open)
    return Status::success();
  return b.fail(
      ErrorCode::Runtime, open->instruction,
      std::string("the block ends while this TmaStore may still read its shared "
                  "source: ") +
          (b.tmaStoreCommitted.empty() ? "commit its group (TmaStoreCommitGroup) and " : "") +
          "wait for it (TmaStoreWaitGroup(0)) before the end");
}

} // namespace tilus::cpu
