// Element loops over the tiles of global and shared tensors, shared by the instructions that
// access memory (exec_movement.cpp: loads, stores, copies; exec_atomic.cpp: atomics): bounds
// (global elements outside the view are skipped, shared ones trap), the argument buffer's
// extent, race-detector keys, and handing logical element values to every owner slot.
#pragma once

#include "vm/cpu/block_state.h"

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
