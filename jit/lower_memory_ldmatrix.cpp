// LoadShared through ldmatrix: the fast path for the mma operand fragments of 16-bit types.
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
//
// Requirements: every matrix row is 8 contiguous, 16-byte aligned elements of shared memory.
// The root layout is checked once, exhaustively over its shape, for "every run of 8 along the
// tile's last root dimension that starts at a multiple of 8 is contiguous and starts at a
// multiple of 8" (row-major, padded strides that are multiples of 8, swizzles that leave the
// low 3 bits alone), and the row starts must provably lie at multiples of 8 in that dimension
// (known bits of the tile origin). Otherwise LoadShared takes its ordinary path.
#include "jit/codegen.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

namespace {

RegisterLayout chain(std::initializer_list<Expected<RegisterLayout>> parts) {
  std::optional<RegisterLayout> l;
  for (const Expected<RegisterLayout> &p : parts)
    l = l ? l->product(*p).value() : *p;
  return *l;
}

} // namespace

/// ldmatrix lowering of a LoadShared; false when it does not apply (nothing emitted then).
bool Codegen::tryLdmatrix(const SharedTile &tile, VarId result) {
  DataType t = tile.dtype;
  const RegisterLayout &layout = *info.vars[result].layout;
  if (t.storageBits() != 16 || t.isBool() || layout.rank() != 2 || info.threads % 32 != 0)
    return false;
  using L = RegisterLayout;
  static const RegisterLayout plain = chain({L::spatial({8, 4}), L::local({1, 2})});
  static const RegisterLayout trans = chain({L::columnSpatial({4, 8}), L::local({2, 1})});
  bool isTrans = false;
  std::optional<RegisterLayout> outer = layout.divideRight(plain);
  if (!outer) {
    outer = layout.divideRight(trans);
    isTrans = true;
  }
  if (!outer || outer->numThreads() * 32 != int64_t(info.threads))
    return false;
  int lastRoot = tile.rootDim[1];
  if (!contiguousRuns(tile.root, lastRoot, 8) || info.vars[tile.root].sharedByteOffset % 16 != 0)
    return false;
  const llvm::DataLayout &dl = mod.getDataLayout();
  if (llvm::computeKnownBits(tile.origin[size_t(lastRoot)], dl).countMinTrailingZeros() < 3)
    return false;

  LayoutMap o(*outer);
  llvm::Value *lane = b.CreateAnd(tid(), constI32(31));
  llvm::Value *warp = b.CreateLShr(tid(), constI32(5));
  // Thread part of the outer layout for this warp, in matrices.
  llvm::Value *w64 = b.CreateZExt(warp, b.getInt64Ty());
  llvm::Value *part[2] = {constI64(0), constI64(0)};
  for (const LayoutTerm &term : o.spatialTerms()) {
    if (term.dim < 0)
      continue;
    llvm::Value *coord = b.CreateURem(b.CreateUDiv(w64, constI64(term.div)), constI64(term.size));
    part[term.dim] = b.CreateAdd(part[term.dim], b.CreateMul(coord, constI64(term.stride)));
  }
  llvm::Value *row = b.CreateZExt(b.CreateAnd(lane, constI32(7)), b.getInt64Ty());
  llvm::Value *matrix = b.CreateLShr(lane, constI32(3)); // 0..3
  std::vector<llvm::Value *> slots(size_t(layout.numLocals()));
  for (int64_t first = 0; first < o.locals(); first += 4) {
    int count = int(std::min<int64_t>(4, o.locals() - first));
    int n = count == 3 ? 4 : count; // x1, x2 or x4 (a batch of 3 repeats its last matrix)
    // This lane's matrix within the batch, and that matrix's local part (in matrices).
    llvm::Value *locRow = constI64(o.localPart(first)[0]);
    llvm::Value *locCol = constI64(o.localPart(first)[1]);
    for (int j = 1; j < n; ++j) {
      int64_t slot = first + std::min(j, count - 1);
      llvm::Value *isJ = b.CreateICmpEQ(b.CreateAnd(matrix, constI32(n - 1)), constI32(j));
      locRow = b.CreateSelect(isJ, constI64(o.localPart(slot)[0]), locRow);
      locCol = b.CreateSelect(isJ, constI64(o.localPart(slot)[1]), locCol);
    }
    llvm::Value *tileRow = b.CreateAdd(b.CreateMul(b.CreateAdd(part[0], locRow), constI64(8)), row);
    llvm::Value *tileCol = b.CreateMul(b.CreateAdd(part[1], locCol), constI64(8));
    std::vector<llvm::Value *> coords = tile.origin;
    coords[size_t(tile.rootDim[0])] = b.CreateAdd(coords[size_t(tile.rootDim[0])], tileRow);
    coords[size_t(lastRoot)] = b.CreateAdd(coords[size_t(lastRoot)], tileCol);
    llvm::Value *addr = sharedElementAddress(tile.root, sharedOffset(tile.root, coords), t);
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
    llvm::Value *res = callIntrinsic(id, {addr->getType()}, {addr});
    for (int j = 0; j < count; ++j) {
      llvm::Value *reg = n == 1 ? res : b.CreateExtractValue(res, unsigned(j));
      llvm::Value *lo = b.CreateTrunc(reg, b.getInt16Ty());
      llvm::Value *hi = b.CreateTrunc(b.CreateLShr(reg, 16), b.getInt16Ty());
      slots[size_t((first + j) * 2)] = fromBits(lo, t);
      slots[size_t((first + j) * 2 + 1)] = fromBits(hi, t);
    }
  }
  writeRegister(result, slots);
  return true;
}

} // namespace tilus::jit
