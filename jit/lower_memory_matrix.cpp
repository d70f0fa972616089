// 8x8 matrix accesses of shared memory: LoadShared through ldmatrix (the fast path for the mma
// operand fragments of 16-bit types) and StoreShared through stmatrix (sm_90: accumulators
// rounded to 16 bits, stored into a shared tile for the epilogue's TMA or 16-byte stores).
//
// `ldmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16` loads up to four 8x8 matrices for a
// warp: lanes 8j..8j+7 give the addresses of the eight 16-byte rows of matrix j, and every lane
// receives, per matrix, one 32-bit register with two elements. Thread t of the warp receives
//   row t/4, columns 2(t%4) and 2(t%4)+1      -> the layout spatial(8, 4).local(1, 2)
//   with .trans: rows 2(t%4), 2(t%4)+1, col t/4 -> the layout column_spatial(4, 8).local(2, 1)
// (lower column/row first). So a register layout L = O . atom with one of these atoms and an
// outer layout O of one "thread" per warp is exactly a set of ldmatrix loads: outer slot io of
// warp w is the matrix at tile index 8 O(w, io), its two elements are the thread's slots
// 2 io and 2 io + 1. The A fragment column_local(2, 2).spatial(8, 4).local(1, 2) is one x4,
// the B fragment local(2, 1).column_spatial(4, 8).local(2, 1) one x2.trans.
// `stmatrix.sync.aligned.m8n8.x{1,2,4}[.trans].shared.b16` (sm_90) is its mirror image: the
// same lanes give the same row addresses, and each lane's registers are stored where ldmatrix
// would have loaded them from. The mma and wgmma accumulator layouts end in
// `.spatial(8, 4).local(1, 2)`, so a 16-bit C tile leaves its registers in one x4 per four
// matrices instead of one 4-byte store per pair (a quarter of the instructions, rows of 16
// bytes). Stores need a layout without replicated threads (each element stored once), and are
// made so only in kernels with Hopper instructions (wgmma or TMA): there the epilogues' IR and
// PTX shrink at the same speed (the Hopper GEMMs within 0.3 %), while in the mma.sync kernels,
// at their register limits, ptxas then needed more registers (programs/gemm/mma_sync.tasm 1 %
// slower, the prefill attention's mma.sync design 3-4 %; docs/jit.md, "Fast paths").
// Otherwise StoreShared takes its ordinary path.
//
// Requirements: every matrix row is 8 contiguous, 16-byte aligned elements of shared memory.
// The root layout is checked once, exhaustively over its shape, for "every run of 8 along the
// tile's last root dimension that starts at a multiple of 8 is contiguous and starts at a
// multiple of 8" (row-major, padded strides that are multiples of 8, swizzles that leave the
// low 3 bits alone), and the row starts must provably lie at multiples of 8 in that dimension
// (known bits of the tile origin). Otherwise LoadShared and StoreShared take their ordinary
// paths.
#include "jit/lowering.h"
#include "jit/memory_util.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <functional>

namespace tilus::jit {

/// The 8x8 matrices of a 16-bit register tile `layout` in shared tile `tile`, for ldmatrix and
/// stmatrix: calls `access(first, count, n, trans, addr)` for each batch of up to four matrices
/// (outer slots first .. first + count - 1, accessed as an x`n`, a batch of three repeating its
/// last matrix; `addr` the 32-bit-pointer row address of this lane); false (nothing emitted)
/// when the layouts do not allow it.
bool MemoryLowering::matrixAccesses(
    const SharedTile &tile, const RegisterLayout &layout,
    const std::function<void(int64_t, int, int, bool, llvm::Value *)> &access) {
  DataType t = tile.dtype;
  if (t.storageBits() != 16 || t.isBool() || layout.rank() != 2 || cg.threads() % 32 != 0)
    return false;
  using L = RegisterLayout;
  static const RegisterLayout plain = layoutChain({L::spatial({8, 4}), L::local({1, 2})});
  static const RegisterLayout trans = layoutChain({L::columnSpatial({4, 8}), L::local({2, 1})});
  bool isTrans = false;
  std::optional<RegisterLayout> outer = layout.divideRight(plain);
  if (!outer) {
    outer = layout.divideRight(trans);
    isTrans = true;
  }
  if (!outer || outer->numThreads() * 32 != cg.threads())
    return false;
  int lastRoot = tile.dims[1];
  if (!contiguousRuns(tile.root, lastRoot, 8) || info.vars[tile.root].sharedByteOffset % 16 != 0)
    return false;
  const llvm::DataLayout &dl = mod.getDataLayout();
  if (llvm::computeKnownBits(tile.origin[size_t(lastRoot)], dl).countMinTrailingZeros() < 3)
    return false;

  LayoutMap o(*outer);
  llvm::Value *lane = b.CreateAnd(cg.tid(), cg.constI32(31));
  llvm::Value *warp = b.CreateLShr(cg.tid(), cg.constI32(5));
  // Thread part of the outer layout for this warp, in matrices.
  llvm::Value *w64 = b.CreateZExt(warp, b.getInt64Ty());
  llvm::Value *part[2] = {cg.constI64(0), cg.constI64(0)};
  for (const LayoutTerm &term : o.spatialTerms()) {
    if (term.dim < 0)
      continue;
    llvm::Value *coord =
        b.CreateURem(b.CreateUDiv(w64, cg.constI64(term.div)), cg.constI64(term.size));
    part[term.dim] = b.CreateAdd(part[term.dim], b.CreateMul(coord, cg.constI64(term.stride)));
  }
  llvm::Value *row = b.CreateZExt(b.CreateAnd(lane, cg.constI32(7)), b.getInt64Ty());
  llvm::Value *matrix = b.CreateLShr(lane, cg.constI32(3)); // 0..3
  size_t rowRoot = size_t(tile.dims[0]);
  // The slot that lane j of a batch of `count` matrices starting at `first` addresses.
  auto slotOf = [&](int64_t first, int count, int j) { return first + std::min(j, count - 1); };
  // This lane's root coordinates of its matrix row in a batch, without the tile origin:
  // per-thread values that do not change in an enclosing loop.
  auto laneCoords = [&](int64_t first, int count, int n) {
    llvm::Value *locRow = cg.constI64(o.localPart(first)[0]);
    llvm::Value *locCol = cg.constI64(o.localPart(first)[1]);
    for (int j = 1; j < n; ++j) {
      int64_t slot = slotOf(first, count, j);
      llvm::Value *isJ = b.CreateICmpEQ(b.CreateAnd(matrix, cg.constI32(n - 1)), cg.constI32(j));
      locRow = b.CreateSelect(isJ, cg.constI64(o.localPart(slot)[0]), locRow);
      locCol = b.CreateSelect(isJ, cg.constI64(o.localPart(slot)[1]), locCol);
    }
    std::vector<llvm::Value *> c(tile.origin.size(), cg.constI64(0));
    c[rowRoot] = b.CreateAdd(b.CreateMul(b.CreateAdd(part[0], locRow), cg.constI64(8)), row);
    c[size_t(lastRoot)] = b.CreateMul(b.CreateAdd(part[1], locCol), cg.constI64(8));
    return c;
  };
  const int firstCount = int(std::min<int64_t>(4, o.locals()));
  const int firstN = firstCount == 3 ? 4 : firstCount;
  std::vector<llvm::Value *> firstCoords = laneCoords(0, firstCount, firstN);
  for (int64_t first = 0; first < o.locals(); first += 4) {
    int count = int(std::min<int64_t>(4, o.locals() - first));
    int n = count == 3 ? 4 : count; // x1, x2 or x4 (a batch of 3 repeats its last matrix)
    // The address is L(origin + lane part). Cheapest first: the first batch's lane part plus a
    // shift (the origin and a constant step from the first batch, when every lane steps
    // alike), which leaves one per-thread offset for all batches and an immediate per access;
    // else this batch's lane part plus the origin; else the whole sum through the layout.
    llvm::Value *addr = nullptr;
    if (count == firstCount && n == firstN) {
      int64_t dRow = o.localPart(first)[0] - o.localPart(0)[0];
      int64_t dCol = o.localPart(first)[1] - o.localPart(0)[1];
      bool uniform = true;
      for (int j = 1; j < n; ++j) {
        int64_t sj = slotOf(first, count, j), s0 = slotOf(0, firstCount, j);
        uniform = uniform && o.localPart(sj)[0] - o.localPart(s0)[0] == dRow &&
                  o.localPart(sj)[1] - o.localPart(s0)[1] == dCol;
      }
      if (uniform) {
        std::vector<llvm::Value *> d = tile.origin;
        d[rowRoot] = b.CreateAdd(d[rowRoot], cg.constI64(dRow * 8));
        d[size_t(lastRoot)] = b.CreateAdd(d[size_t(lastRoot)], cg.constI64(dCol * 8));
        addr = sharedAddressSplit(cg, tile.root, firstCoords, d, t);
      }
    }
    std::vector<llvm::Value *> coords;
    if (!addr) {
      coords = first == 0 ? firstCoords : laneCoords(first, count, n);
      addr = sharedAddressSplit(cg, tile.root, coords, tile.origin, t);
    }
    if (!addr) {
      for (size_t r = 0; r < coords.size(); ++r)
        coords[r] = b.CreateAdd(tile.origin[r], coords[r]);
      addr = cg.sharedElementAddress(tile.root, cg.sharedOffset(tile.root, coords), t);
    }
    access(first, count, n, isTrans, addr);
  }
  return true;
}

/// ldmatrix lowering of a LoadShared; false when it does not apply (nothing emitted then).
bool MemoryLowering::tryLdmatrix(const SharedTile &tile, VarId result) {
  DataType t = tile.dtype;
  const RegisterLayout &layout = *info.vars[result].layout;
  std::vector<llvm::Value *> slots(size_t(layout.numLocals()));
  bool done = matrixAccesses(
      tile, layout, [&](int64_t first, int count, int n, bool isTrans, llvm::Value *addr) {
        llvm::Intrinsic::ID id;
        if (n == 1)
          id = isTrans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x1_trans_b16
                       : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x1_b16;
        else if (n == 2)
          id = isTrans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_trans_b16
                       : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x2_b16;
        else
          id = isTrans ? llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_trans_b16
                       : llvm::Intrinsic::nvvm_ldmatrix_sync_aligned_m8n8_x4_b16;
        llvm::Value *res = cg.callIntrinsic(id, {addr->getType()}, {addr});
        for (int j = 0; j < count; ++j) {
          llvm::Value *reg = n == 1 ? res : b.CreateExtractValue(res, unsigned(j));
          llvm::Value *lo = b.CreateTrunc(reg, b.getInt16Ty());
          llvm::Value *hi = b.CreateTrunc(b.CreateLShr(reg, 16), b.getInt16Ty());
          slots[size_t((first + j) * 2)] = cg.fromBits(lo, t);
          slots[size_t((first + j) * 2 + 1)] = cg.fromBits(hi, t);
        }
      });
  if (done)
    cg.writeRegister(result, slots);
  return done;
}

/// stmatrix lowering of a StoreShared of register tensor `src` whose slots, converted to the
/// tile's type, are `slots`; false when it does not apply (nothing emitted then).
bool MemoryLowering::tryStmatrix(const SharedTile &tile, VarId src,
                                 const std::vector<llvm::Value *> &slots) {
  if (opts.smVersion < 90 || (info.wgmma.empty() && info.tma.empty() && !opts.stmatrixEverywhere))
    return false;
  for (const LayoutTerm &term : cg.layoutOf(src).spatialTerms())
    if (term.dim < 0) // replicated threads: each element must be stored once
      return false;
  DataType t = tile.dtype;
  return matrixAccesses(tile, *info.vars[src].layout,
                        [&](int64_t first, int count, int n, bool isTrans, llvm::Value *addr) {
                          std::vector<llvm::Value *> args{b.CreatePtrToInt(addr, b.getInt32Ty())};
                          std::string text = "stmatrix.sync.aligned.m8n8.x" + std::to_string(n) +
                                             (isTrans ? ".trans" : "") + ".shared.b16 [$0], {";
                          std::string constraints = "r";
                          for (int j = 0; j < n; ++j) {
                            int64_t m = first + std::min(j, count - 1);
                            args.push_back(cg.packRegister32(slots, m * 2, 2, t));
                            text += (j ? ", $" : "$") + std::to_string(j + 1);
                            constraints += ",r";
                          }
                          text += "};";
                          cg.volatileAsm(b.getVoidTy(), text, constraints + ",~{memory}", args);
                        });
}

} // namespace tilus::jit
