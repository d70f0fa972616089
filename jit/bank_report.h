// Shared-memory bank conflicts of the plain LoadShared and StoreShared accesses that the JIT
// emits (jit/lower_memory.cpp): for warp 0, each vector group of the register layout is one warp
// instruction, and its lanes' byte addresses decide how many shared-memory wavefronts it takes.
// Reported per program instruction by TILUSVM_JIT_BANKS=1 and JitOptions::reportSharedAccesses
// (docs/jit.md, "Shared-memory bank conflicts"); the code generated is the same either way.
#pragma once

#include "isa/dtype.h"
#include "isa/shared_layout.h"
#include "jit/jit.h"
#include "jit/layout_map.h"
#include "jit/memory_util.h"

#include <cstdint>
#include <vector>

namespace tilus::jit {

/// Wavefronts of one warp instruction whose lane `i` accesses `bytes` bytes at byte address
/// `addresses[i]` (a negative address: the lane does not take part). The hardware serves 128 bytes
/// per wavefront: 16-byte accesses in quarter-warps, 8-byte ones in half-warps, 4 bytes and less
/// in one phase of the whole warp; within a phase, a bank (4-byte word address mod 32) holding
/// k distinct words takes k wavefronts (lanes reading the same word share it). `ideal` gets the
/// wavefronts the same words would take without conflicts (ceil(distinct words / 32) per phase).
int64_t sharedWavefronts(const std::vector<int64_t> &addresses, int bytes, int64_t *ideal);

/// The report of one plain shared access: the root's layout and byte offset, the element type,
/// the tile's origin in root coordinates (0 where it is not a constant: the conflicts of a
/// pipeline stage's offset are those of stage 0 when its stride passes through the swizzles),
/// the tile's dims in the root, the register layout and its vector groups; with `primaryOnly`
/// (stores) only the lanes that own their elements take part. An access of a packed sub-byte
/// type gets wavefronts = ideal = -1 (not analysed).
SharedAccessReport analyseSharedAccess(const SharedLayout &root, int64_t rootByteOffset, DataType t,
                                       const std::vector<int64_t> &origin,
                                       const std::vector<int32_t> &dims, const LayoutMap &map,
                                       const std::vector<SlotGroup> &groups, bool primaryOnly);

} // namespace tilus::jit
