// Reduce (ContractionLowering; Dot is in lower_contraction_dot.cpp, wgmma in
// lower_contraction_wgmma.cpp).
//
// Reduce: when the reduced dimension is spread over lanes of one warp only (its thread modes
// have power-of-two sizes and strides below 32), each thread first combines its own slots, then
// butterfly shuffles (shfl.sync.bfly) combine the lanes: every lane ends with the full result,
// which is what the derived result layout (thread modes of the reduced dimension become
// replication) asks for. Otherwise the operand is staged in the scratch area and every thread
// reduces its result elements from there.
// Accumulation (the order is unspecified, ISA section 5): f16/bf16/f32 in f32, f64 in f64,
// integers wrapping in their type, bool sum/prod as or/and; max/min with applyOp's IEEE
// maxNum/minNum; any/all on truth values, giving 0 or 1 in the operand's type.
#include "jit/lowering.h"

#include <llvm/IR/IntrinsicsNVPTX.h>

#include <unordered_map>

namespace tilus::jit {

// ---- Reduce -------------------------------------------------------------------------------------

namespace {

struct Accumulator {
  DataType type; // accumulation type
  ReduceOp op;
};

Accumulator accumulatorFor(ReduceOp op, DataType t) {
  if (op == ReduceOp::Any || op == ReduceOp::All)
    return {DataType::boolean(), op};
  if (t == DataType::f16() || t == DataType::bf16())
    return {(op == ReduceOp::Sum || op == ReduceOp::Prod) ? DataType::f32() : t, op};
  return {t, op};
}

} // namespace

namespace {

llvm::Value *combine(Codegen &cg, const Accumulator &acc, llvm::Value *x, llvm::Value *y) {
  llvm::IRBuilder<> &b = cg.b;
  DataType t = acc.type;
  switch (acc.op) {
  case ReduceOp::Any:
    return b.CreateOr(x, y);
  case ReduceOp::All:
    return b.CreateAnd(x, y);
  case ReduceOp::Max:
    return cg.applyOp(ExprOp::Max, t, x, y);
  case ReduceOp::Min:
    return cg.applyOp(ExprOp::Min, t, x, y);
  case ReduceOp::Sum:
    if (t.isBool())
      return b.CreateOr(x, y);
    return t.isFloat() ? b.CreateFAdd(x, y) : b.CreateAdd(x, y);
  case ReduceOp::Prod:
    if (t.isBool())
      return b.CreateAnd(x, y);
    return t.isFloat() ? b.CreateFMul(x, y) : b.CreateMul(x, y);
  }
  return x;
}

/// A value of the operand type as an accumulator value.
llvm::Value *toAcc(Codegen &cg, const Accumulator &acc, llvm::Value *v, DataType t) {
  if (acc.op == ReduceOp::Any || acc.op == ReduceOp::All)
    return cg.truth(v, t);
  return cg.convert(v, t, acc.type);
}

llvm::Value *fromAcc(Codegen &cg, const Accumulator &acc, llvm::Value *v, DataType t) {
  if (acc.op == ReduceOp::Any || acc.op == ReduceOp::All)
    return cg.convert(v, DataType::boolean(), t);
  return cg.canonicalizeNaN(cg.convert(v, acc.type, t), t);
}

/// shfl.sync.bfly of a value of any accumulator type.
llvm::Value *shuffleXor(Codegen &cg, llvm::Value *v, DataType t, int mask) {
  llvm::IRBuilder<> &b = cg.b;
  llvm::Value *full = b.getInt32(0xFFFFFFFFu);
  auto shfl32 = [&](llvm::Value *x) {
    return cg.callIntrinsic(llvm::Intrinsic::nvvm_shfl_sync_bfly_i32, {},
                            {full, x, b.getInt32(uint32_t(mask)), b.getInt32(0x1F)});
  };
  llvm::Value *bits = t.isBool() ? b.CreateZExt(v, b.getInt32Ty()) : cg.toBits(v, t);
  if (t.bits > 32) {
    llvm::Value *lo = shfl32(b.CreateTrunc(bits, b.getInt32Ty()));
    llvm::Value *hi = shfl32(b.CreateTrunc(b.CreateLShr(bits, 32), b.getInt32Ty()));
    llvm::Value *w = b.CreateOr(b.CreateZExt(lo, b.getInt64Ty()),
                                b.CreateShl(b.CreateZExt(hi, b.getInt64Ty()), 32));
    return cg.fromBits(b.CreateTrunc(w, b.getIntNTy(t.bits)), t);
  }
  llvm::Value *r = shfl32(b.CreateZExtOrTrunc(bits, b.getInt32Ty()));
  if (t.isBool())
    return b.CreateICmpNE(r, b.getInt32(0));
  return cg.fromBits(b.CreateTrunc(r, b.getIntNTy(t.bits)), t);
}

bool isPowerOfTwo(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

/// Index x of the operand without dimension `dim` (or with it set to 0 when keepDim).
std::vector<int64_t> reducedIndex(const int64_t *x, int rank, int dim, bool keepDim) {
  std::vector<int64_t> out;
  for (int d = 0; d < rank; ++d) {
    if (d == dim) {
      if (keepDim)
        out.push_back(0);
      continue;
    }
    out.push_back(x[d]);
  }
  return out;
}

} // namespace

Status ContractionLowering::visitReduce(const Instruction &inst) {
  VarId a = inst.arg(ArgName::a).var, r = inst.results[0];
  if (a == kNoId)
    return cg.error(ErrorCode::Scope, inst, "Reduce of something other than a register tensor");
  const LayoutMap &source = cg.layoutOf(a);
  const LayoutMap &result = cg.layoutOf(r);
  int dim = int(inst.arg(ArgName::dim).intValue);
  bool keepDim = inst.arg(ArgName::keepdim).present && inst.arg(ArgName::keepdim).intValue != 0;
  if (dim < 0 || dim >= source.rank())
    return cg.error(ErrorCode::ReduceDim, inst,
                    "Reduce dimension " + std::to_string(dim) + " out of range");
  DataType t = info.vars[a].dtype;
  DataType rt = info.vars[r].dtype;
  Accumulator acc = accumulatorFor(ReduceOp(inst.arg(ArgName::op).intValue), t);
  std::vector<llvm::Value *> in = cg.readRegister(a);

  // Shuffle path: the reduced dimension's thread modes stay within a warp.
  bool shuffle = source.threads() == result.threads();
  std::vector<int> masks;
  for (const LayoutTerm &term : source.spatialTerms()) {
    if (term.dim != dim)
      continue;
    if (!isPowerOfTwo(term.div) || !isPowerOfTwo(term.size) || term.div * term.size > 32)
      shuffle = false;
    for (int64_t m = term.div; m < term.div * term.size; m *= 2)
      masks.push_back(int(m));
  }
  // Which of its own slots each result slot combines; must not depend on the thread.
  std::vector<std::vector<int64_t>> parts(size_t(result.locals()));
  if (shuffle) {
    // Per thread: the result slots by the row-major index they hold, then each source slot
    // joins the result slots that hold its reduced index (linear in slots, not quadratic).
    std::vector<int64_t> x(size_t(source.rank())), y(size_t(result.rank()) + 1);
    std::unordered_map<int64_t, std::vector<int64_t>> slotsAt;
    std::vector<std::vector<int64_t>> mine(size_t(result.locals()));
    for (int64_t t = 0; t < source.threads() && shuffle; ++t) {
      slotsAt.clear();
      for (int64_t i = 0; i < result.locals(); ++i) {
        result.apply(t, i, y.data());
        slotsAt[result.linear(y.data())].push_back(i);
        mine[size_t(i)].clear();
      }
      for (int64_t j = 0; j < source.locals(); ++j) {
        source.apply(t, j, x.data());
        std::vector<int64_t> red = reducedIndex(x.data(), source.rank(), dim, keepDim);
        auto found = slotsAt.find(result.linear(red.data()));
        if (found != slotsAt.end())
          for (int64_t i : found->second)
            mine[size_t(i)].push_back(j);
      }
      for (int64_t i = 0; i < result.locals() && shuffle; ++i) {
        if (mine[size_t(i)].empty() || (t > 0 && mine[size_t(i)] != parts[size_t(i)]))
          shuffle = false;
        parts[size_t(i)] = mine[size_t(i)];
      }
    }
  }
  if (shuffle) {
    std::vector<llvm::Value *> out(size_t(result.locals()));
    for (int64_t i = 0; i < result.locals(); ++i) {
      const std::vector<int64_t> &mine = parts[size_t(i)];
      llvm::Value *v = toAcc(cg, acc, in[size_t(mine[0])], t);
      for (size_t k = 1; k < mine.size(); ++k)
        v = combine(cg, acc, v, toAcc(cg, acc, in[size_t(mine[k])], t));
      for (int mask : masks)
        v = combine(cg, acc, v, shuffleXor(cg, v, acc.type, mask));
      out[size_t(i)] = fromAcc(cg, acc, v, rt);
    }
    cg.writeRegister(r, out);
    return Status::success();
  }

  // Scratch path.
  int elemBytes = scratchElementBytes(t);
  TILUSVM_TRY(cg.requireScratch(inst, source.shape(), elemBytes, "the reduction needs"));
  cg.stageToScratch(a, in, 0, elemBytes);
  cg.barrier();
  std::vector<int64_t> strides = rowMajorStrides(source.shape());
  int64_t length = source.shape()[size_t(dim)];
  const std::vector<llvm::Value *> &s = cg.threadPart(result);
  // Row-major offset of the first element (index 0 along dim) of result element (t, i):
  // sum over the kept dimensions of (S(t) + Loc(i)) times the source's stride, the thread's
  // part once and each slot's as a constant.
  std::vector<std::pair<int, int>> kept; // (source dimension, result dimension)
  for (int d = 0, rd = 0; d < source.rank(); ++d) {
    if (d == dim) {
      rd += keepDim ? 1 : 0;
      continue;
    }
    kept.emplace_back(d, rd++);
  }
  llvm::Value *threadLinear = cg.constI64(0);
  for (auto [d, rd] : kept)
    threadLinear =
        addFolded(b, threadLinear, mulFolded(b, s[size_t(rd)], cg.constI64(strides[size_t(d)])));
  llvm::Value *threadFirst = cg.scratchAddress(threadLinear, 0, elemBytes);
  std::vector<llvm::Value *> out(size_t(result.locals()));
  for (int64_t i = 0; i < result.locals(); ++i) {
    int64_t c = 0;
    for (auto [d, rd] : kept)
      c += result.localPart(i)[rd] * strides[size_t(d)];
    int64_t step = strides[size_t(dim)];
    auto element = [&](int64_t j) { // element j along dim, a constant offset from threadFirst
      llvm::Value *addr =
          b.CreateGEP(b.getInt8Ty(), threadFirst, cg.constI64((c + j * step) * elemBytes));
      return toAcc(cg, acc, cg.loadScratchAt(addr, elemBytes, t), t);
    };
    llvm::Value *first = element(0);
    if (length <= 16) {
      llvm::Value *v = first;
      for (int64_t j = 1; j < length; ++j)
        v = combine(cg, acc, v, element(j));
      out[size_t(i)] = fromAcc(cg, acc, v, rt);
      continue;
    }
    llvm::Value *base = addFolded(b, threadLinear, cg.constI64(c));
    auto loopElement = [&](llvm::Value *j, const std::vector<llvm::Value *> &v) {
      llvm::Value *e = b.CreateAdd(base, b.CreateMul(j, cg.constI64(step)));
      return std::vector<llvm::Value *>{
          combine(cg, acc, v[0], toAcc(cg, acc, cg.loadScratchElement(e, 0, elemBytes, t), t))};
    };
    llvm::Value *last = cg.emitCountedLoop("reduce", cg.constI64(1), cg.constI64(length), 1,
                                           {first}, loopElement)[0];
    out[size_t(i)] = fromAcc(cg, acc, last, rt);
  }
  cg.barrier();
  cg.writeRegister(r, out);
  return Status::success();
}

} // namespace tilus::jit
