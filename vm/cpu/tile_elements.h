// Element loops over the tiles of global and shared tensors, shared by the instructions that
// access memory (exec_memory.cpp: loads, stores, copies; exec_atomic.cpp: atomics): bounds
// (global elements outside the view are skipped, shared ones trap), the argument buffer's
// extent, race-detector keys, and handing logical element values to every owner slot.
#pragma once

#include "vm/cpu/block_state.h"
#include "vm/cpu/elements.h"

namespace tilus::cpu {

inline std::string indexText(const std::vector<OffsetValue> &offsets, const int64_t *idx) {
  std::string s = "[";
  size_t k = 0;
  for (size_t d = 0; d < offsets.size(); ++d) {
    if (d)
      s += ", ";
    s += std::to_string(offsets[d].start + (offsets[d].slice ? idx[k++] : 0));
  }
  return s + "]";
}

inline std::string shapeText(const std::vector<int64_t> &shape) {
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
inline bool tileInBuffer(const GlobalView &view, const TileAccess &tile, int sb) {
  int64_t min = 0, max = 0;
  tile.offsetRange(min, max);
  return inBuffer(view, min * sb, sb) && inBuffer(view, max * sb, sb);
}

inline Status outsideBuffer(const BlockState &b, uint32_t index, const GlobalView &view,
                            int64_t offset) {
  std::string buffer = view.buffer == kNoId ? std::string("the workspace")
                                            : "`" + b.program.var(view.buffer).name + "`";
  return b.fail(ErrorCode::Runtime, index,
                "element offset " + std::to_string(offset) + " of `" +
                    b.program.var(view.root).name + "` lies outside the " +
                    std::to_string(view.byteSize) + "-byte buffer of " + buffer);
}

inline uint64_t raceKey(const GlobalView &view, int64_t bit) {
  return uint64_t(reinterpret_cast<uintptr_t>(view.base)) * 8 + uint64_t(bit);
}

inline Status sharedOutOfBounds(const BlockState &b, uint32_t index, const SharedView &view,
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

/// An element that an access touches: bit address `bit` in `memory` (the global buffer, or the
/// block's shared memory), holding a value of `dtype`.
struct ElementAt {
  uint8_t *memory;
  int64_t bit;
  DataType dtype;
  bool global;

  uint64_t read() const {
    return canonicalFromMemory(readBits(memory, bit, dtype.storageBits()), dtype);
  }
  /// Global memory is shared with the blocks running in parallel: a sub-byte element is written
  /// without disturbing its neighbours (writeBitsShared).
  void write(uint64_t value) const {
    if (global)
      writeBitsShared(memory, bit, dtype.storageBits(), value);
    else
      writeBits(memory, bit, dtype.storageBits(), value);
  }
};

/// How an access touches its elements, for the race detector.
enum class AccessKind : uint8_t { Read, Write, Atomic };

/// Visit the tile of `tileShape` that instruction `index` accesses in memory tensor `var` (a
/// global or shared tensor) at its offset= argument: f(e, ElementAt) for each element inside
/// the tensor (a global element outside the view is skipped; a shared one traps, the message
/// saying that the instruction `verb` it), after which the race detector hears of the access by
/// thread `thread(e)`.
template <typename Thread, typename F>
Status forEachAccessElement(BlockState &b, uint32_t index, VarId var,
                            const std::vector<int64_t> &tileShape, AccessKind kind,
                            const char *verb, Thread &&thread, F &&f) {
  const Argument &offset = b.program.instructions[index].arg(ArgName::offset);
  if (b.info.vars[var].kind == VarKind::Global) {
    const GlobalView &view = b.globals[var];
    Expected<TileAccess> tile = globalTile(view, b.offsets(offset, view.shape.size()), tileShape);
    if (!tile)
      return b.fail(tile.status().code(), index, tile.status().first().message);
    int sb = view.dtype.storageBits();
    return forEachGlobalElement(b, index, view, *tile, [&](int64_t e, int64_t bit, int64_t off) {
      f(e, ElementAt{view.base, bit, view.dtype, true});
      if (!b.race)
        return;
      switch (kind) {
      case AccessKind::Read:
        return b.race->globalRead(raceKey(view, bit), sb, view.root, off, thread(e));
      case AccessKind::Write:
        return b.race->globalWrite(raceKey(view, bit), sb, view.root, off, thread(e));
      case AccessKind::Atomic:
        return b.race->globalAtomic(raceKey(view, bit), sb, view.root, off, thread(e));
      }
    });
  }
  TILUSVM_TRY(b.requireShared(index, var));
  const SharedView &view = b.shareds[var];
  std::vector<OffsetValue> offsets = b.offsets(offset, view.shape.size());
  Expected<TileAccess> tile = sharedTile(view, offsets, tileShape);
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  int64_t base = view.byteOffset * 8;
  int sb = view.dtype.storageBits();
  return forEachSharedElement(b, index, view, offsets, *tile, verb, [&](int64_t e, int64_t off) {
    f(e, ElementAt{b.shared.data(), base + off * sb, view.dtype, false});
    if (!b.race)
      return;
    switch (kind) {
    case AccessKind::Read:
      return b.race->sharedRead(view.root, off, thread(e));
    case AccessKind::Write:
      return b.race->sharedWrite(view.root, off, thread(e));
    case AccessKind::Atomic:
      return b.race->sharedAtomic(view.root, off, thread(e));
    }
  });
}

/// Hand logical element values to every owner slot of the result.
inline void scatterToOwners(BlockState &b, VarId r, const std::vector<uint64_t> &logical) {
  const LayoutTable &table = *b.plan.varTables[r];
  std::vector<uint64_t> out = b.takeBuffer(size_t(table.numSlots()));
  for (size_t s = 0; s < out.size(); ++s)
    out[s] = logical[size_t(table.slotLinear[s])];
  b.setRegister(r, std::move(out));
}

inline int32_t ownerThread(const LayoutTable &table, int64_t e) {
  return int32_t(table.firstOwner(e) / table.locals);
}

} // namespace tilus::cpu
