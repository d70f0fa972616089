// CopyAsync and its group instructions.
//
// CopyAsync(s, g, offset) copies the tile of g shaped like s into s; which thread copies which
// element is the JIT's choice. The tile is cut into chunks of V consecutive elements of its
// last dimension and chunk c goes to thread c mod T.
//
// Fast path (cp.async): V * elementBytes is 16, 8 or 4 bytes; the global tile has unit stride
// in its last dimension (a constant), the shared chunks are contiguous and aligned (a linear
// root layout with unit stride there, or a tiled/swizzled one whose runs of V stay contiguous,
// with alignment proven from the known bits of the offsets),
// and at run time the global chunks are aligned (one block-uniform test of the pointer, the
// tile's origin and the other strides). Each chunk is one `cp.async.{cg,ca}.shared.global`
// whose src-size counts the chunk's in-bounds elements: a partial chunk at the end of a row and
// a chunk outside the tensor (src-size 0) are zero-filled by the hardware, exactly the
// "out-of-bounds reads as zero" rule. A chunk wholly below the valid range of its row is a
// src-size 0 copy like a chunk past the end; a tile in which a chunk can start below the valid
// range and reach into it (negative offsets that are not a multiple of the chunk: a
// block-uniform test) is copied element by element as a whole, so that the chunk path stays
// straight-line code (one cp.async per chunk, no branch). A tile whose every dimension is
// provably in range and that only the offsets' fixed dimensions can put outside the tensor (a
// page of a paged cache) is wholly inside or wholly outside: it takes the whole-tile path
// without a branch, each chunk's src-size the chunk or 0.
//
// Otherwise (sub-byte or bool elements, strided or misaligned data) every thread copies
// elements t, t + T, ... with ordinary bounds-checked loads and stores; they complete at once,
// which CopyAsyncWaitGroup/WaitAll and the required Synchronize() then cover trivially.
#include "jit/lowering.h"
#include "jit/memory_util.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/Support/KnownBits.h>

namespace tilus::jit {

namespace {

/// The chunk path of partial tiles (CopyLowering::vectorPath) is a loop when a thread copies at
/// least this many chunks: unrolled, the chunks' address terms are computed side by side, which
/// raised the register count of the matrix programs; one or two chunks stay straight-line code
/// (a loop of two raised it in others).
constexpr int64_t kRolledChunks = 3;

struct CopyPlan {
  std::vector<int64_t> shape; // tile shape (the shared view's)
  int64_t elements = 1;
  int vec = 1;        // elements per chunk
  int chunkBytes = 0; // 0: element path
};

/// Emits `body(index)` for index = start, start + step, ... while index < end, as one loop;
/// with `unroll` false LLVM must not unroll it.
template <typename F>
void rolledLoop(Codegen &cg, llvm::Value *start, int64_t step, int64_t end, bool unroll, F &&body) {
  llvm::IRBuilder<> &b = cg.b;
  auto test = [&](llvm::Value *index) { return b.CreateICmpSLT(index, b.getInt64(uint64_t(end))); };
  auto run = [&](llvm::Value *index, const Codegen::LoopTargets &) {
    body(index);
    return Status::success();
  };
  (void)cg.emitLoop("items", start, b.getInt64(uint64_t(step)), test, run, "", unroll);
}

/// Emits `body(index)` for index = tid + k * threads, k = 0.. while index < count: unrolled
/// when there are few iterations (and `unroll`), a loop that LLVM must not unroll otherwise
/// (the chunk path of partial tiles and the element fallback of a vector copy: rarely run, and
/// unrolled they would hold many addresses in registers across the caller's loop).
template <typename F> void forEachThreadItem(Codegen &cg, int64_t count, bool unroll, F &&body) {
  llvm::IRBuilder<> &b = cg.b;
  int64_t threads = cg.threads();
  int64_t iterations = (count + threads - 1) / threads;
  llvm::Value *t = b.CreateZExt(cg.tid(), b.getInt64Ty());
  if (unroll && iterations <= 16) {
    for (int64_t k = 0; k < iterations; ++k) {
      llvm::Value *index = b.CreateAdd(t, b.getInt64(uint64_t(k * threads)));
      if ((k + 1) * threads <= count) {
        body(index);
        continue;
      }
      cg.emitIf(b.CreateICmpSLT(index, b.getInt64(uint64_t(count))), "item", [&] { body(index); });
    }
    return;
  }
  if (!unroll) {
    // The thread index read afresh (a volatile asm stays in this block): otherwise LICM hoists
    // the rarely-run loop's per-thread start values out of the caller's loop, where they would
    // occupy registers across every iteration. In a thread group, the group's index.
    t = b.CreateZExt(cg.tidAfresh(), b.getInt64Ty());
  }
  rolledLoop(cg, t, threads, count, unroll, body);
}

/// Tile index of row-major element `linear` (i64 values).
std::vector<llvm::Value *> unravel(llvm::IRBuilder<> &b, llvm::Value *linear,
                                   const std::vector<int64_t> &shape) {
  std::vector<llvm::Value *> x(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    llvm::Value *n = b.getInt64(uint64_t(shape[d]));
    x[d] = d == 0 ? linear : b.CreateURem(linear, n);
    if (d > 0)
      linear = b.CreateUDiv(linear, n);
  }
  return x;
}

} // namespace

namespace {

/// One CopyAsync: the global and shared tiles and the copy plan.
class CopyLowering {
public:
  CopyLowering(Codegen &cg, MemoryLowering &memory, GlobalTile g, SharedTile s,
               std::vector<int64_t> shape)
      : cg_(cg), memory_(memory), b_(cg.b), g_(std::move(g)), s_(std::move(s)),
        rank_(shape.size()) {
    plan_.shape = std::move(shape);
    for (int64_t n : plan_.shape)
      plan_.elements *= n;
    t_ = g_.dtype;
    bytes_ = t_.storageBits() / 8;
  }

  void emit() {
    if (plan_.elements == 0)
      return;
    choosePlan();
    if (plan_.chunkBytes == 0) {
      elementPath(true);
      return;
    }
    // Run-time test (block-uniform): every global chunk is aligned and none starts below the
    // valid range of its row while reaching into it; otherwise element copies. Then a second
    // one: the whole tile in bounds. Then no chunk needs a bounds test or a src-size: the
    // interior tiles of a matrix program.
    llvm::Value *chunked = globalChunksAligned();
    if (llvm::Value *low = someChunkStartsLow())
      chunked = b_.CreateAnd(chunked, b_.CreateNot(low));
    cg_.emitIfElse(
        chunked, "cpasync",
        [&] {
          // A tile whose every dimension is provably in range is wholly inside or wholly outside
          // the tensor (a page of a paged cache, a head): one path whose chunks copy the whole
          // chunk or, by a src-size of 0, zeros, without a branch.
          llvm::Value *dims = dimsInBounds();
          if (isConstOne(dims) && !isConstOne(g_.valid)) {
            fullTilePath(g_.valid);
            return;
          }
          // otherwise: a second test, the whole tile in bounds
          cg_.emitIfElse(
              b_.CreateAnd(g_.valid, dims), "cpasync.full", [&] { fullTilePath(nullptr); },
              [&] { vectorPath(); });
        },
        [&] { elementPath(false); });
  }

private:
  /// Shared element offset of tile index x.
  llvm::Value *sharedElem(const std::vector<llvm::Value *> &x) {
    std::vector<llvm::Value *> coords = s_.origin;
    for (size_t k = 0; k < rank_; ++k) {
      size_t r = size_t(s_.dims[k]);
      coords[r] = addFolded(b_, coords[r], x[k]);
    }
    return cg_.sharedOffset(s_.root, coords);
  }

  /// Global element offset of tile index x, from the tile's origin `origin` (g_.offset unless
  /// given).
  llvm::Value *globalElem(const std::vector<llvm::Value *> &x, llvm::Value *origin = nullptr) {
    llvm::Value *e = origin ? origin : g_.offset;
    for (size_t k = 0; k < rank_; ++k)
      e = addFolded(b_, e, mulFolded(b_, x[k], g_.strides[k]));
    return e;
  }

  llvm::Value *inBoundsExcept(const std::vector<llvm::Value *> &x, size_t skip) {
    llvm::Value *ok = g_.valid;
    for (size_t k = 0; k < rank_; ++k)
      if (k != skip)
        ok = b_.CreateAnd(
            ok, b_.CreateAnd(b_.CreateICmpSGE(x[k], g_.lo[k]), b_.CreateICmpSLT(x[k], g_.hi[k])));
    return ok;
  }

  /// One element, synchronously: a bounds-checked load (0 outside) and a store.
  void copyElement(const std::vector<llvm::Value *> &x) {
    llvm::Value *ok = inBoundsExcept(x, rank_);
    llvm::Value *phi = cg_.emitIf(ok, "cp.ld", {cg_.zeroOf(t_)}, [&] {
      return std::vector<llvm::Value *>{cg_.loadElement(g_.ptr, globalElem(x), t_)};
    })[0];
    llvm::Value *root = cg_.sharedElementAddress(s_.root, cg_.constI64(0), s_.dtype);
    cg_.storeElement(root, sharedElem(x), s_.dtype, cg_.fromBits(cg_.toBits(phi, t_), s_.dtype));
  }

  void elementPath(bool unroll) {
    forEachThreadItem(cg_, plan_.elements, unroll,
                      [&](llvm::Value *e) { copyElement(unravel(b_, e, plan_.shape)); });
  }

  /// The widest chunk that the static facts allow. Shared chunks must be contiguous and
  /// aligned: for linear root layouts, a unit stride in the tile's last root dimension, the
  /// other strides multiples of the chunk and a provably aligned origin; for tiled and
  /// swizzled layouts, every chunk-sized run of that root dimension starting at a multiple of
  /// the chunk contiguous and aligned (contiguousRuns) and the origin there a provable multiple.
  void choosePlan() {
    std::vector<int64_t> rootStrides = cg_.info.vars[s_.root].sharedLayout->linearStrides();
    int rl = rank_ ? s_.dims[rank_ - 1] : -1;
    bool linear = !rootStrides.empty();
    if (rank_ == 0 || t_.storageBits() % 8 != 0 || t_.isBool() ||
        (linear && rootStrides[size_t(rl)] != 1))
      return;
    auto *stride = llvm::dyn_cast<llvm::ConstantInt>(g_.strides[rank_ - 1]);
    if (!stride || !stride->isOne())
      return;
    llvm::Value *originOffset = cg_.constI64(0);
    if (linear)
      for (size_t r = 0; r < rootStrides.size(); ++r)
        originOffset =
            addFolded(b_, originOffset, mulFolded(b_, s_.origin[r], cg_.constI64(rootStrides[r])));
    else
      originOffset = s_.origin[size_t(rl)];
    const llvm::DataLayout &dl = cg_.mod.getDataLayout();
    unsigned tz =
        std::min<unsigned>(llvm::computeKnownBits(originOffset, dl).countMinTrailingZeros(), 30);
    int64_t rootAlign = cg_.info.vars[s_.root].sharedByteOffset;
    for (int chunk : {16, 8, 4}) {
      if (chunk % bytes_ != 0)
        continue;
      int v = chunk / bytes_;
      bool fits = plan_.shape[rank_ - 1] % v == 0 && (int64_t(bytes_) << tz) % chunk == 0 &&
                  rootAlign % chunk == 0;
      if (linear) {
        for (size_t r = 0; r < rootStrides.size() && fits; ++r)
          if (int(r) != rl && (rootStrides[r] * bytes_) % chunk != 0)
            fits = false;
      } else {
        fits = fits && memory_.contiguousRuns(s_.root, rl, v);
      }
      if (fits) {
        plan_.vec = v;
        plan_.chunkBytes = chunk;
        return;
      }
    }
  }

  llvm::Value *globalChunksAligned() {
    int64_t chunk = plan_.chunkBytes;
    llvm::Value *addr0 =
        b_.CreateGEP(b_.getInt8Ty(), g_.ptr, b_.CreateMul(g_.offset, cg_.constI64(bytes_)));
    llvm::Value *aligned = alignedTest(b_, g_.ptr, addr0, g_.offset, bytes_, int(chunk));
    const llvm::DataLayout &dl = cg_.mod.getDataLayout();
    for (size_t k = 0; k + 1 < rank_; ++k) {
      llvm::Value *strideBytes = b_.CreateMul(g_.strides[k], cg_.constI64(bytes_));
      if ((uint64_t(1) << std::min(63u, trailingZeros(strideBytes, dl))) >= uint64_t(chunk))
        continue;
      aligned =
          b_.CreateAnd(aligned, b_.CreateICmpEQ(b_.CreateSRem(strideBytes, cg_.constI64(chunk)),
                                                cg_.constI64(0)));
    }
    return aligned;
  }

  /// Whether a chunk of the tile starts below the valid range of the last dimension and reaches
  /// into it (0 < lo < shape with lo not a multiple of the chunk: negative offsets, rare), which
  /// a cp.async with a src-size cannot copy; nullptr when no chunk can (lo <= 0 or a multiple,
  /// as the known bits show). Block-uniform: such tiles take the element path as a whole.
  llvm::Value *someChunkStartsLow() {
    llvm::Value *lo = g_.lo[rank_ - 1];
    const llvm::DataLayout &dl = cg_.mod.getDataLayout();
    int64_t vec = plan_.vec;
    if (!llvm::computeKnownBits(lo, dl).getSignedMaxValue().isStrictlyPositive() ||
        (int64_t(1) << std::min(trailingZeros(lo, dl), 62u)) % vec == 0)
      return nullptr;
    llvm::Value *inside = b_.CreateAnd(b_.CreateICmpSGT(lo, cg_.constI64(0)),
                                       b_.CreateICmpSLT(lo, cg_.constI64(plan_.shape[rank_ - 1])));
    llvm::Value *unaligned =
        b_.CreateICmpNE(b_.CreateAnd(lo, cg_.constI64(vec - 1)), cg_.constI64(0));
    return b_.CreateAnd(inside, unaligned);
  }

  /// Whether every tile index is in range of its dimension (lo <= 0 and shape <= hi everywhere);
  /// the dimensions that the offsets fix (g_.valid) aside.
  llvm::Value *dimsInBounds() {
    llvm::Value *ok = b_.getTrue();
    for (size_t k = 0; k < rank_; ++k) {
      ok = b_.CreateAnd(ok, b_.CreateICmpSLE(g_.lo[k], cg_.constI64(0)));
      ok = b_.CreateAnd(ok, b_.CreateICmpSGE(g_.hi[k], cg_.constI64(plan_.shape[k])));
    }
    return ok;
  }

  /// One full cp.async per chunk of a tile wholly in bounds. When the threads cover whole rows
  /// of chunks (T a multiple of the chunks in all but the first dimension), chunk tid + i T is
  /// chunk tid moved by i T / inner rows: its global address is the thread's first plus a
  /// step, and its shared offset the thread's first plus a shift where the layout allows it
  /// (sharedOffsetSplit), so the per-thread terms are computed once, outside any loop.
  /// With `inside` (a block-uniform i1), the tile lies wholly inside the tensor where it is true
  /// and wholly outside where it is false: every chunk then has the src-size `inside ? chunk :
  /// 0` (zeros outside), and where it is false the addresses start from the tensor's start
  /// instead of the tile's origin (which may lie anywhere), though a src-size of 0 reads nothing.
  void fullTilePath(llvm::Value *inside) {
    int64_t chunk = plan_.chunkBytes;
    int vec = plan_.vec;
    std::vector<int64_t> chunkShape = plan_.shape;
    chunkShape[rank_ - 1] /= vec;
    int64_t chunks = plan_.elements / vec;
    int64_t threads = cg_.threads();
    int64_t inner = 1;
    for (size_t k = 1; k < rank_; ++k)
      inner *= chunkShape[k];
    bool rows = rank_ > 1 && threads % inner == 0;
    // Otherwise, into a linear shared layout, a split dimension k >= 2 where chunk tid + i T is
    // still chunk tid moved by constants: the chunks of dimensions k.. (P of them) divide T and
    // T / P divides dimension k - 1, so adding i T carries nothing into the thread's digits
    // (the unravelled thread index and constant digits i T / P over dimensions 0..k-1), and
    // each chunk's addresses are the thread's first ones plus constants: no chunk needs a
    // division of its own (the decode attention's stages of 16-bit caches: 3-6 % less JIT time,
    // their loops 6-16 PTX instructions shorter). Swizzled stages keep the per-chunk path: in
    // their split form the u4 decode ran up to 9 % slower on an H200 (docs/jit.md).
    const std::vector<int64_t> rootStrides = cg_.info.vars[s_.root].sharedLayout->linearStrides();
    ChunkSplit split =
        !rows && !rootStrides.empty() ? chunkSplit(chunkShape, threads) : ChunkSplit{};
    std::string asmText = chunk == 16 ? "cp.async.cg" : "cp.async.ca";
    asmText += ".shared.global [$0], [$1], " + std::to_string(chunk) + (inside ? ", $2;" : ";");
    std::vector<llvm::Type *> operands{b_.getInt32Ty(), b_.getInt64Ty()};
    if (inside)
      operands.push_back(b_.getInt32Ty());
    auto *asmType = llvm::FunctionType::get(b_.getVoidTy(), operands, false);
    llvm::InlineAsm *cpAsync =
        llvm::InlineAsm::get(asmType, asmText, inside ? "r,l,r,~{memory}" : "r,l,~{memory}", true);
    llvm::Value *srcBytes =
        inside ? b_.CreateSelect(inside, b_.getInt32(uint32_t(chunk)), b_.getInt32(0)) : nullptr;
    llvm::Value *origin = inside ? b_.CreateSelect(inside, g_.offset, cg_.constI64(0)) : nullptr;
    llvm::Value *t = b_.CreateZExt(cg_.tid(), b_.getInt64Ty());
    std::vector<llvm::Value *> x0 = unravel(b_, t, chunkShape);
    x0[rank_ - 1] = b_.CreateMul(x0[rank_ - 1], cg_.constI64(vec));
    // the thread's first chunk in root coordinates, without the tile origin
    auto rootCoords = [&](const std::vector<llvm::Value *> &x) {
      std::vector<llvm::Value *> c(s_.origin.size(), cg_.constI64(0));
      for (size_t k = 0; k < rank_; ++k)
        c[size_t(s_.dims[k])] = addFolded(b_, c[size_t(s_.dims[k])], x[k]);
      return c;
    };
    std::vector<llvm::Value *> c0 = rootCoords(x0);
    llvm::Value *g0 = globalElem(x0, origin);
    // the thread's first chunk's shared address (split path), before any guarded chunk
    llvm::Value *firstDst =
        split.dim != 0 ? cg_.sharedElementAddress(s_.root, sharedElem(x0), s_.dtype) : nullptr;
    for (int64_t i = 0; i * threads < chunks; ++i) {
      auto chunk = [&] {
        llvm::Value *elem = nullptr, *dstAddr = nullptr;
        if (rows) {
          int64_t step = i * threads / inner; // rows of chunks in tile dimension 0
          elem = addFolded(b_, g0, mulFolded(b_, cg_.constI64(step), g_.strides[0]));
          std::vector<llvm::Value *> d = s_.origin;
          size_t r0 = size_t(s_.dims[0]);
          d[r0] = addFolded(b_, d[r0], cg_.constI64(step));
          dstAddr = sharedAddressSplit(cg_, s_.root, c0, d, s_.dtype);
          if (!dstAddr) {
            std::vector<llvm::Value *> c = c0;
            c[r0] = addFolded(b_, c[r0], cg_.constI64(step));
            dstAddr = sharedAddressSplit(cg_, s_.root, c, s_.origin, s_.dtype);
          }
          if (!dstAddr) {
            std::vector<llvm::Value *> x = x0;
            x[0] = addFolded(b_, x[0], cg_.constI64(step));
            dstAddr = cg_.sharedElementAddress(s_.root, sharedElem(x), s_.dtype);
          }
        } else if (split.dim != 0) {
          // the constant digits of i T / P over dimensions 0..split-1, and their offset in the
          // linear shared layout
          std::vector<int64_t> step = chunkStep(chunkShape, split, threads, i);
          int64_t delta = 0;
          elem = g0;
          for (size_t k = split.dim; k-- > 0;) {
            if (step[k] == 0)
              continue;
            elem = addFolded(b_, elem, mulFolded(b_, cg_.constI64(step[k]), g_.strides[k]));
            delta += step[k] * rootStrides[size_t(s_.dims[k])];
          }
          dstAddr =
              b_.CreateGEP(b_.getInt8Ty(), firstDst,
                           b_.getInt32(uint32_t(delta * int64_t(s_.dtype.storageBits() / 8))));
        } else {
          std::vector<llvm::Value *> x =
              unravel(b_, b_.CreateAdd(t, cg_.constI64(i * threads)), chunkShape);
          x[rank_ - 1] = b_.CreateMul(x[rank_ - 1], cg_.constI64(vec));
          elem = globalElem(x, origin);
          dstAddr = sharedAddressSplit(cg_, s_.root, rootCoords(x), s_.origin, s_.dtype);
          if (!dstAddr)
            dstAddr = cg_.sharedElementAddress(s_.root, sharedElem(x), s_.dtype);
        }
        llvm::Value *src =
            b_.CreateGEP(b_.getInt8Ty(), g_.ptr, b_.CreateMul(elem, cg_.constI64(bytes_)));
        std::vector<llvm::Value *> args{b_.CreatePtrToInt(dstAddr, b_.getInt32Ty()),
                                        b_.CreatePtrToInt(src, b_.getInt64Ty())};
        if (inside)
          args.push_back(srcBytes);
        b_.CreateCall(cpAsync, args);
      };
      if ((i + 1) * threads > chunks)
        cg_.emitIf(b_.CreateICmpULT(t, cg_.constI64(chunks - i * threads)), "cp.item", chunk);
      else
        chunk();
    }
  }

  /// One cp.async per chunk; src-size counts the chunk's in-bounds elements. With
  /// kRolledChunks or more chunks per thread, a loop over them that LLVM must not unroll:
  /// partial tiles (the edge blocks, a last k tile) are the rare case.
  void vectorPath() {
    int64_t chunk = plan_.chunkBytes;
    int vec = plan_.vec;
    std::vector<int64_t> chunkShape = plan_.shape;
    chunkShape[rank_ - 1] /= vec;
    // Inline PTX rather than the intrinsics: LLVM 19 cannot select those with the 32-bit shared
    // pointers the JIT uses (-nvptx-short-ptr).
    std::string asmText = chunk == 16 ? "cp.async.cg" : "cp.async.ca";
    asmText += ".shared.global [$0], [$1], ";
    asmText += std::to_string(chunk);
    asmText += ", $2;";
    auto *asmType = llvm::FunctionType::get(
        b_.getVoidTy(), {b_.getInt32Ty(), b_.getInt64Ty(), b_.getInt32Ty()}, false);
    llvm::InlineAsm *cpAsync = llvm::InlineAsm::get(asmType, asmText, "r,l,r,~{memory}", true);
    llvm::Value *lo = g_.lo[rank_ - 1], *hi = g_.hi[rank_ - 1];
    int64_t chunks = plan_.elements / vec;
    int64_t perThread = (chunks + cg_.threads() - 1) / cg_.threads();
    forEachThreadItem(cg_, chunks, perThread < kRolledChunks, [&](llvm::Value *c) {
      std::vector<llvm::Value *> x = unravel(b_, c, chunkShape);
      x[rank_ - 1] = b_.CreateMul(x[rank_ - 1], cg_.constI64(vec));
      llvm::Value *first = x[rank_ - 1];
      llvm::Value *rowOk = inBoundsExcept(x, rank_ - 1);
      // In-bounds elements: [lo, hi) of the row intersected with [first, first + vec).
      llvm::Value *count = cg_.callIntrinsic(llvm::Intrinsic::smin, {b_.getInt64Ty()},
                                             {b_.CreateSub(hi, first), cg_.constI64(vec)});
      count = cg_.callIntrinsic(llvm::Intrinsic::smax, {b_.getInt64Ty()}, {count, cg_.constI64(0)});
      // a chunk wholly below the valid range copies nothing (it is all out of bounds)
      llvm::Value *whollyBelow = b_.CreateICmpSLE(b_.CreateAdd(first, cg_.constI64(vec)), lo);
      count =
          b_.CreateSelect(b_.CreateAnd(rowOk, b_.CreateNot(whollyBelow)), count, cg_.constI64(0));
      llvm::Value *dst = cg_.sharedElementAddress(s_.root, sharedElem(x), s_.dtype);
      llvm::Value *src =
          b_.CreateGEP(b_.getInt8Ty(), g_.ptr, b_.CreateMul(globalElem(x), cg_.constI64(bytes_)));
      src = b_.CreateSelect(b_.CreateICmpEQ(count, cg_.constI64(0)), g_.ptr, src);
      llvm::Value *srcBytes =
          b_.CreateTrunc(b_.CreateMul(count, cg_.constI64(bytes_)), b_.getInt32Ty());
      b_.CreateCall(cpAsync, {b_.CreatePtrToInt(dst, b_.getInt32Ty()),
                              b_.CreatePtrToInt(src, b_.getInt64Ty()), srcBytes});
    });
  }

  Codegen &cg_;
  MemoryLowering &memory_;
  llvm::IRBuilder<> &b_;
  GlobalTile g_;
  SharedTile s_;
  size_t rank_;
  CopyPlan plan_;
  DataType t_;
  int bytes_ = 0;
};

} // namespace

Status MemoryLowering::visitCopyAsync(const Instruction &inst) {
  SharedView sview = cg.readShared(inst.arg(ArgName::s).var);
  GlobalView gview = cg.readGlobal(inst.arg(ArgName::g).var);
  GlobalTile g = cg.globalTile(gview, inst.arg(ArgName::offset));
  if (g.lo.size() != sview.shape.size())
    return cg.error(ErrorCode::OffsetRank, inst,
                    "slice count differs from the shared tensor's rank");
  DataType t = g.dtype;
  if (t.storageBits() != sview.dtype.storageBits() || t.isFloat() != sview.dtype.isFloat())
    return cg.error(ErrorCode::DtypeMismatch, inst, "CopyAsync between different dtypes");
  SharedTile s;
  s.root = sview.root;
  s.dtype = sview.dtype;
  s.origin = sview.origin;
  s.dims = sview.dims;
  CopyLowering(cg, *this, std::move(g), std::move(s), sview.shape).emit();
  return Status::success();
}

Status MemoryLowering::visitCopyAsyncCommitGroup(const Instruction &) {
  cg.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
  return Status::success();
}

Status MemoryLowering::visitCopyAsyncWaitGroup(const Instruction &inst) {
  int64_t n = inst.arg(ArgName::n).intValue;
  if (n < 0 || n > 7)
    n = n < 0 ? 0 : 7; // the hardware counts at most 7 pending groups; more waits less
  cg.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {cg.constI32(n)});
  return Status::success();
}

Status MemoryLowering::visitCopyAsyncWaitAll(const Instruction &) {
  cg.callIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_all, {}, {});
  return Status::success();
}

} // namespace tilus::jit
