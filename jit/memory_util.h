// Helpers shared by the memory lowerings (lower_memory.cpp, lower_memory_global.cpp,
// lower_memory_async.cpp): guarded execution, and the grouping of a thread's local slots into runs
// of consecutive elements that one vector access can move.
#pragma once

#include "jit/codegen.h"

namespace tilus::jit {

/// sum c_d * strides_d (i32; `c` i32 per dimension): the offset of a linear shared layout.
llvm::Value *linearOffset(llvm::IRBuilder<> &b, const std::vector<int64_t> &strides,
                          const std::vector<llvm::Value *> &c);

/// The offset in elements (i32) of the root coordinates `c` (i32, one per dimension) in
/// `layout`: SharedLayout::offset as IR. With constant coordinates the builder folds it to a
/// constant (the unit tests compare it with SharedLayout::offset over whole layouts).
llvm::Value *sharedLayoutOffset(llvm::IRBuilder<> &b, const SharedLayout &layout,
                                const std::vector<llvm::Value *> &c);

/// L(c + d) - L(c) as IR (i32, `d` i32 per dimension) when it is the same for every c: the
/// linear parts of the layout contribute d_k * stride_k, a swizzle lets the shift through when
/// it is provably (known bits) a multiple of 2^(base + shift + bits), a tiling when every d_k is
/// a constant multiple of the inner tile's extent. nullptr when that cannot be shown.
llvm::Value *sharedLayoutShift(llvm::IRBuilder<> &b, const llvm::DataLayout &dl,
                               const SharedLayout &layout, const std::vector<llvm::Value *> &d);

/// The element offset (i64) of root coordinates c + d, computed as L(c) + (L(c + d) - L(c))
/// when sharedLayoutShift proves the difference independent of c: then L(c) depends on c alone
/// (for example only on the thread index, so LICM takes it out of a k loop) and d (a pipeline
/// stage, a constant step) costs one add. nullptr when that cannot be shown (what it emitted
/// is then dead).
llvm::Value *sharedOffsetSplit(Codegen &cg, VarId root, const std::vector<llvm::Value *> &c,
                               const std::vector<llvm::Value *> &d);

/// The address of root coordinates c + d of byte-sized elements of type t as sharedOffsetSplit
/// splits it: the per-thread address of c (hoistable) plus the shift in bytes; nullptr when the
/// split cannot be shown.
llvm::Value *sharedAddressSplit(Codegen &cg, VarId root, const std::vector<llvm::Value *> &c,
                                const std::vector<llvm::Value *> &d, DataType t);

/// The number of low bits of an integer (an offset, a bound) that are provably zero. Unlike
/// computeKnownBits alone, this follows sums, products and shifts to any depth (offsets are built
/// from block indices, loop variables, strides and layout terms several levels deep), and
/// extensions, selects, min/max and divisions and shifts right by 2^s of values with at least s
/// zero bits (the clamped extents of views such as [k, n / 4]).
unsigned trailingZeros(llvm::Value *v, const llvm::DataLayout &dl, int depth = 0);

/// "ptr + elem * es is a multiple of `bytes`" (a power of two): the constant true when the
/// pointer's alignment (a kernel parameter specialised as 16-byte aligned, jit.h) and the
/// offset's zero low bits prove it, otherwise a run-time test of `addr`.
llvm::Value *alignedTest(llvm::IRBuilder<> &b, llvm::Value *ptr, llvm::Value *addr,
                         llvm::Value *elem, int es, int bytes);

/// Runs `body` only when `cond` holds; returns the value it produced, or `otherwise`.
template <typename F>
llvm::Value *guarded(Codegen &cg, llvm::Value *cond, llvm::Value *otherwise, F &&body) {
  if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(cond)) {
    if (c->isOne())
      return body();
    return otherwise;
  }
  if (!otherwise) {
    cg.emitIf(cond, "inb", [&] { body(); });
    return nullptr;
  }
  return cg.emitIf(cond, "inb", {otherwise}, [&] { return std::vector<llvm::Value *>{body()}; })[0];
}

/// A run of local slots [first, first + count) whose elements are consecutive along tile
/// dimension `dim` (Loc advances by exactly 1 in `dim` and nowhere else).
struct SlotGroup {
  int64_t first = 0;
  int64_t count = 1;
  int dim = -1;
};

/// Split the slots into runs of consecutive elements along a dimension whose `unitStride` entry
/// is true: at each slot the widest power of two from `width` down to `minWidth` whose run is
/// aligned to its width in the tile; single slots otherwise.
std::vector<SlotGroup> groupSlots(const LayoutMap &map, int width, int minWidth,
                                  const std::vector<bool> &unitStride);
/// The narrowest group worth a vector access (4 bytes), in elements of `bytes` bytes.
int minVectorWidth(int bytes);
/// The widest vector (in elements, at most 16 bytes) worth trying.
int vectorWidth(int bytes, int64_t locals);
/// Whether v is the constant 1.
bool isConstOne(llvm::Value *v);

/// Chunks of a tile of shape `chunks` (row-major) copied by T threads, chunk t + i T by thread t.
/// A split at dimension `dim` >= 2: the chunks of dimensions dim.. (`inner` of them) divide T and
/// T / inner divides dimension dim - 1, so that unravelling t + i T carries nothing into the
/// digits of t: chunk t + i T is chunk t moved by chunkStep(.., i), digits of dimensions
/// 0..dim-1 only (lower_memory_async.cpp). `dim` 0: no such split.
struct ChunkSplit {
  size_t dim = 0;
  int64_t inner = 1;
};
ChunkSplit chunkSplit(const std::vector<int64_t> &chunks, int64_t threads);
/// The constant digits (dimensions 0..split.dim-1) by which chunk t + i T lies from chunk t.
std::vector<int64_t> chunkStep(const std::vector<int64_t> &chunks, const ChunkSplit &split,
                               int64_t threads, int64_t i);

/// A run of consecutive bit-packed elements (N < 8 bits) that starts on a byte boundary and
/// covers whole bytes (lower_memory_packed.cpp): `bytes` in all, moved as accesses of `unit`
/// bytes (the largest power of two dividing `bytes`, at most 16).
struct PackedRun {
  int bytes = 0;
  int unit = 0;
};
/// The run of `count` elements of `bits` bits (count * bits a multiple of 8).
PackedRun packedRun(int bits, int64_t count);
/// The narrowest run of whole bytes, in elements of `bits` bits: 8 / (the largest power of two
/// dividing bits).
int packedMinWidth(int bits);
/// The widest run worth grouping: at most `locals` elements and at most 16 bytes times the odd
/// part of `bits` (so at most that many accesses: a u4 run of 32, a u3 run of 128 = 3 x 16 bytes).
int packedMaxWidth(int bits, int64_t locals);
/// The `count` elements (iN, N = bits) of a run from its bytes given as `pieces`: i32 values that
/// hold `pieceBits` (8, 16 or 32) bits each, in address order (little-endian).
std::vector<llvm::Value *> unpackRun(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &pieces,
                                     int pieceBits, int bits, int64_t count);
/// The inverse: the elements (iN) packed into i32 pieces of `pieceBits` bits each.
std::vector<llvm::Value *> packRun(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &values,
                                   int pieceBits, int bits);

} // namespace tilus::jit
