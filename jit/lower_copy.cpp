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
// "out-of-bounds reads as zero" rule. A chunk that starts below the valid range of its row
// (negative offsets) is copied element by element.
//
// Otherwise (sub-byte or bool elements, strided or misaligned data) every thread copies
// elements t, t + T, ... with ordinary bounds-checked loads and stores; they complete at once,
// which CopyAsyncWaitGroup/WaitAll and the required Synchronize() then cover trivially.
#include "jit/memory_util.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

namespace {

struct CopyPlan {
  std::vector<int64_t> shape; // tile shape (the shared view's)
  int64_t elements = 1;
  int vec = 1;        // elements per chunk
  int chunkBytes = 0; // 0: element path
};

/// Emits `body(index)` for index = tid + k * threads, k = 0.. while index < count: unrolled
/// when there are few iterations (and `unroll`), a loop that LLVM must not unroll otherwise
/// (the element fallback of a vector copy: rarely run, and unrolled it would hold many
/// addresses in registers across the caller's loop).
template <typename F> void forEachThreadItem(Codegen &cg, int64_t count, bool unroll, F &&body) {
  llvm::IRBuilder<> &b = cg.b;
  int64_t threads = int64_t(cg.info.threads);
  int64_t iterations = (count + threads - 1) / threads;
  llvm::Value *t = b.CreateZExt(cg.tid(), b.getInt64Ty());
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  if (unroll && iterations <= 16) {
    for (int64_t k = 0; k < iterations; ++k) {
      llvm::Value *index = b.CreateAdd(t, b.getInt64(uint64_t(k * threads)));
      if ((k + 1) * threads <= count) {
        body(index);
        continue;
      }
      llvm::BasicBlock *then = llvm::BasicBlock::Create(cg.ctx, "item", fn);
      llvm::BasicBlock *join = llvm::BasicBlock::Create(cg.ctx, "item.end", fn);
      b.CreateCondBr(b.CreateICmpSLT(index, b.getInt64(uint64_t(count))), then, join);
      b.SetInsertPoint(then);
      body(index);
      b.CreateBr(join);
      b.SetInsertPoint(join);
    }
    return;
  }
  llvm::BasicBlock *pre = b.GetInsertBlock();
  llvm::BasicBlock *header = llvm::BasicBlock::Create(cg.ctx, "items", fn);
  llvm::BasicBlock *bodyBlock = llvm::BasicBlock::Create(cg.ctx, "items.body", fn);
  llvm::BasicBlock *exit = llvm::BasicBlock::Create(cg.ctx, "items.end", fn);
  b.CreateBr(header);
  b.SetInsertPoint(header);
  llvm::PHINode *index = b.CreatePHI(b.getInt64Ty(), 2);
  index->addIncoming(t, pre);
  b.CreateCondBr(b.CreateICmpSLT(index, b.getInt64(uint64_t(count))), bodyBlock, exit);
  b.SetInsertPoint(bodyBlock);
  body(index);
  index->addIncoming(b.CreateAdd(index, b.getInt64(uint64_t(threads))), b.GetInsertBlock());
  llvm::BranchInst *back = b.CreateBr(header);
  if (!unroll) {
    llvm::LLVMContext &ctx = cg.ctx;
    llvm::MDNode *disable =
        llvm::MDNode::get(ctx, llvm::MDString::get(ctx, "llvm.loop.unroll.disable"));
    llvm::MDNode *loop = llvm::MDNode::getDistinct(ctx, {nullptr, disable});
    loop->replaceOperandWith(0, loop);
    back->setMetadata(llvm::LLVMContext::MD_loop, loop);
  }
  b.SetInsertPoint(exit);
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

Status Codegen::lowerCopyAsync(const Instruction &inst) {
  SharedView sview = readShared(inst.arg("s").var);
  GlobalView gview = readGlobal(inst.arg("g").var);
  GlobalTile g = globalTile(gview, inst.arg("offset"));
  if (g.lo.size() != sview.shape.size())
    return error(ErrorCode::OffsetRank, inst, "slice count differs from the shared tensor's rank");
  DataType t = g.dtype;
  if (t.storageBits() != sview.dtype.storageBits() || t.isFloat() != sview.dtype.isFloat())
    return error(ErrorCode::DtypeMismatch, inst, "CopyAsync between different dtypes");
  SharedTile s;
  s.root = sview.root;
  s.dtype = sview.dtype;
  s.origin = sview.origin;
  s.rootDim = sview.dims;
  CopyPlan plan;
  plan.shape = sview.shape;
  for (int64_t n : plan.shape)
    plan.elements *= n;
  size_t rank = plan.shape.size();
  if (plan.elements == 0)
    return Status::success();
  const SharedLayout &layout = *info.vars[s.root].sharedLayout;
  std::vector<int64_t> rootStrides = sharedLinearStrides(layout);
  int bits = t.storageBits();

  // Shared element offset of tile index x.
  auto sharedElem = [&](const std::vector<llvm::Value *> &x) {
    std::vector<llvm::Value *> coords = s.origin;
    for (size_t k = 0; k < rank; ++k) {
      size_t r = size_t(s.rootDim[k]);
      coords[r] = addFolded(b, coords[r], x[k]);
    }
    return sharedOffset(s.root, coords);
  };
  auto globalElem = [&](const std::vector<llvm::Value *> &x) {
    llvm::Value *e = g.base;
    for (size_t k = 0; k < rank; ++k)
      e = addFolded(b, e, mulFolded(b, x[k], g.stride[k]));
    return e;
  };
  auto inBoundsExcept = [&](const std::vector<llvm::Value *> &x, size_t skip) {
    llvm::Value *ok = g.valid;
    for (size_t k = 0; k < rank; ++k)
      if (k != skip)
        ok = b.CreateAnd(
            ok, b.CreateAnd(b.CreateICmpSGE(x[k], g.lo[k]), b.CreateICmpSLT(x[k], g.hi[k])));
    return ok;
  };
  llvm::Value *sharedRoot = sharedElementAddress(s.root, constI64(0), s.dtype);
  // The element path: used alone, or as the fallback of the vector path.
  auto copyElement = [&](const std::vector<llvm::Value *> &x) {
    llvm::Value *ok = inBoundsExcept(x, rank);
    llvm::Value *value = zeroOf(t);
    llvm::Function *fn = b.GetInsertBlock()->getParent();
    llvm::BasicBlock *from = b.GetInsertBlock();
    llvm::BasicBlock *then = llvm::BasicBlock::Create(ctx, "cp.ld", fn);
    llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx, "cp.st", fn);
    b.CreateCondBr(ok, then, join);
    b.SetInsertPoint(then);
    llvm::Value *loaded = loadElement(g.ptr, globalElem(x), t);
    llvm::BasicBlock *thenEnd = b.GetInsertBlock();
    b.CreateBr(join);
    b.SetInsertPoint(join);
    llvm::PHINode *phi = b.CreatePHI(elemType(t), 2);
    phi->addIncoming(loaded, thenEnd);
    phi->addIncoming(value, from);
    storeElement(sharedRoot, sharedElem(x), s.dtype, fromBits(toBits(phi, t), s.dtype));
  };
  auto elementPath = [&](bool unroll) {
    forEachThreadItem(*this, plan.elements, unroll,
                      [&](llvm::Value *e) { copyElement(unravel(b, e, plan.shape)); });
  };

  // Vector plan: the widest chunk that the static facts allow. Shared chunks must be
  // contiguous and aligned: for linear root layouts, a unit stride in the tile's last root
  // dimension, the other strides multiples of the chunk and a provably aligned origin; for
  // tiled and swizzled layouts, every chunk-sized run of that root dimension starting at a
  // multiple of the chunk contiguous and aligned (contiguousRuns) and the origin there a
  // provable multiple of the chunk.
  int rl = rank ? s.rootDim[rank - 1] : -1;
  bool linear = !rootStrides.empty();
  bool vectorOk =
      rank > 0 && bits % 8 == 0 && !t.isBool() && (!linear || rootStrides[size_t(rl)] == 1);
  if (vectorOk) {
    auto *stride = llvm::dyn_cast<llvm::ConstantInt>(g.stride[rank - 1]);
    vectorOk = stride && stride->isOne();
  }
  int bytes = bits / 8;
  if (vectorOk) {
    const llvm::DataLayout &dl = mod.getDataLayout();
    llvm::Value *originOffset = constI64(0);
    if (linear)
      for (size_t r = 0; r < rootStrides.size(); ++r)
        originOffset =
            addFolded(b, originOffset, mulFolded(b, s.origin[r], constI64(rootStrides[r])));
    else
      originOffset = s.origin[size_t(rl)];
    unsigned tz =
        std::min<unsigned>(llvm::computeKnownBits(originOffset, dl).countMinTrailingZeros(), 30);
    int64_t rootAlign = info.vars[s.root].sharedByteOffset;
    for (int chunk : {16, 8, 4}) {
      if (chunk % bytes != 0)
        continue;
      int v = chunk / bytes;
      bool fits = plan.shape[rank - 1] % v == 0 && (int64_t(bytes) << tz) % chunk == 0 &&
                  rootAlign % chunk == 0;
      if (linear) {
        for (size_t r = 0; r < rootStrides.size() && fits; ++r)
          if (int(r) != rl && (rootStrides[r] * bytes) % chunk != 0)
            fits = false;
      } else {
        fits = fits && contiguousRuns(s.root, rl, v);
      }
      if (fits) {
        plan.vec = v;
        plan.chunkBytes = chunk;
        break;
      }
    }
  }
  if (plan.chunkBytes == 0) {
    elementPath(true);
    return Status::success();
  }
  // Run-time test (block-uniform): every global chunk is aligned.
  int64_t chunk = plan.chunkBytes;
  llvm::Value *addr0 = b.CreateGEP(b.getInt8Ty(), g.ptr, b.CreateMul(g.base, constI64(bytes)));
  llvm::Value *aligned = b.CreateICmpEQ(
      b.CreateAnd(b.CreatePtrToInt(addr0, b.getInt64Ty()), constI64(chunk - 1)), constI64(0));
  for (size_t k = 0; k + 1 < rank; ++k)
    aligned = b.CreateAnd(
        aligned,
        b.CreateICmpEQ(b.CreateSRem(b.CreateMul(g.stride[k], constI64(bytes)), constI64(chunk)),
                       constI64(0)));
  llvm::Function *fn = b.GetInsertBlock()->getParent();
  llvm::BasicBlock *vecBlock = llvm::BasicBlock::Create(ctx, "cpasync", fn);
  llvm::BasicBlock *slowBlock = llvm::BasicBlock::Create(ctx, "cpasync.elem", fn);
  llvm::BasicBlock *join = llvm::BasicBlock::Create(ctx, "cpasync.end", fn);
  b.CreateCondBr(aligned, vecBlock, slowBlock);
  b.SetInsertPoint(slowBlock);
  elementPath(false);
  b.CreateBr(join);
  b.SetInsertPoint(vecBlock);
  std::vector<int64_t> chunkShape = plan.shape;
  chunkShape[rank - 1] /= plan.vec;
  // Inline PTX rather than the intrinsics: LLVM 19 cannot select those with the 32-bit shared
  // pointers the JIT uses (-nvptx-short-ptr).
  std::string asmText = std::string(chunk == 16 ? "cp.async.cg" : "cp.async.ca") +
                        ".shared.global [$0], [$1], " + std::to_string(chunk) + ", $2;";
  auto *asmType = llvm::FunctionType::get(b.getVoidTy(),
                                          {b.getInt32Ty(), b.getInt64Ty(), b.getInt32Ty()}, false);
  llvm::InlineAsm *cpAsync = llvm::InlineAsm::get(asmType, asmText, "r,l,r,~{memory}", true);
  forEachThreadItem(*this, plan.elements / plan.vec, true, [&](llvm::Value *c) {
    std::vector<llvm::Value *> x = unravel(b, c, chunkShape);
    x[rank - 1] = b.CreateMul(x[rank - 1], constI64(plan.vec));
    llvm::Value *last = x[rank - 1];
    llvm::Value *rowOk = inBoundsExcept(x, rank - 1);
    // In-bounds elements of the chunk: [lo, hi) of the row intersected with [last, last + vec).
    llvm::Value *count = callIntrinsic(llvm::Intrinsic::smin, {b.getInt64Ty()},
                                       {b.CreateSub(g.hi[rank - 1], last), constI64(plan.vec)});
    count = callIntrinsic(llvm::Intrinsic::smax, {b.getInt64Ty()}, {count, constI64(0)});
    count = b.CreateSelect(rowOk, count, constI64(0));
    llvm::Value *startsLow = b.CreateAnd(
        rowOk, b.CreateAnd(b.CreateICmpSLT(last, g.lo[rank - 1]),
                           b.CreateICmpSGT(b.CreateAdd(last, constI64(plan.vec)), g.lo[rank - 1])));
    llvm::Value *dst = sharedElementAddress(s.root, sharedElem(x), s.dtype);
    llvm::Value *src =
        b.CreateGEP(b.getInt8Ty(), g.ptr, b.CreateMul(globalElem(x), constI64(bytes)));
    src = b.CreateSelect(b.CreateICmpEQ(count, constI64(0)), g.ptr, src);
    llvm::BasicBlock *asyncBlock = llvm::BasicBlock::Create(ctx, "cp.chunk", fn);
    llvm::BasicBlock *partBlock = llvm::BasicBlock::Create(ctx, "cp.partial", fn);
    llvm::BasicBlock *done = llvm::BasicBlock::Create(ctx, "cp.chunk.end", fn);
    b.CreateCondBr(startsLow, partBlock, asyncBlock);
    b.SetInsertPoint(asyncBlock);
    llvm::Value *srcBytes = b.CreateTrunc(b.CreateMul(count, constI64(bytes)), b.getInt32Ty());
    b.CreateCall(cpAsync, {b.CreatePtrToInt(dst, b.getInt32Ty()),
                           b.CreatePtrToInt(src, b.getInt64Ty()), srcBytes});
    b.CreateBr(done);
    b.SetInsertPoint(partBlock);
    for (int j = 0; j < plan.vec; ++j) {
      std::vector<llvm::Value *> xe = x;
      xe[rank - 1] = b.CreateAdd(last, constI64(j));
      copyElement(xe);
    }
    b.CreateBr(done);
    b.SetInsertPoint(done);
  });
  b.CreateBr(join);
  b.SetInsertPoint(join);
  return Status::success();
}

Status Codegen::lowerCopyAsyncControl(const Instruction &inst) {
  switch (inst.opcode) {
  case Opcode::CopyAsyncCommitGroup:
    callIntrinsic(llvm::Intrinsic::nvvm_cp_async_commit_group, {}, {});
    return Status::success();
  case Opcode::CopyAsyncWaitGroup: {
    int64_t n = inst.arg("n").intValue;
    if (n < 0 || n > 7)
      n = n < 0 ? 0 : 7; // the hardware counts at most 7 pending groups; more waits less
    callIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_group, {}, {constI32(n)});
    return Status::success();
  }
  case Opcode::CopyAsyncWaitAll:
    callIntrinsic(llvm::Intrinsic::nvvm_cp_async_wait_all, {}, {});
    return Status::success();
  default:
    return error(ErrorCode::Runtime, inst, "not a CopyAsync group instruction");
  }
}

} // namespace tilus::jit
