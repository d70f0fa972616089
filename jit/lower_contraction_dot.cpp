// Dot: d[m, n] = c[m, n] + sum_k a[m, k] b[k, n].
//
// Three lowerings, tried in order:
//  1. mma.sync when a, b and d divide by the tensor-core atoms of their dtype (the checker's
//     atoms, loader/check_contraction.cpp; they are exactly the PTX fragment orders):
//        m16n8k16 (f16 -> f32|f16, bf16 -> f32):
//          A column_local(2, 2).spatial(8, 4).local(1, 2), B local(2, 1).column_spatial(4,
//          8).local(2, 1)
//        m16n8k32 (i8|u8 -> i32; f8e4m3|f8e5m2 -> f32 on sm_90, by inline PTX):
//          A column_local(2, 2).spatial(8, 4).local(1, 4), B local(2, 1).column_spatial(4,
//          8).local(4, 1)
//        C local(2, 1).spatial(8, 4).local(1, 2)
//     register j of a fragment holds its slots [j p, (j + 1) p) (p elements per 32-bit register,
//     lowest index in the lowest bits), the outer layouts (one "thread" per warp) let every
//     warp own, for each of its C tiles, the A and B tiles along k, and the outer slots do not
//     depend on the warp. Each warp then issues one mma per (C tile, k tile). An f16 result is
//     accumulated in f32 (m16n8k16 f32 variant) and rounded once per Dot, like the other paths.
//  2. Per thread, when every thread owns c[m, n], a[m, k] and b[k, n] for each of its d[m, n]
//     (at slots that do not depend on the thread): fused multiply-adds in registers.
//  3. Otherwise a and b are staged in the scratch area (the checker plans M*K + K*N elements),
//     and every thread computes its d elements from there (FP8 Dots on sm_80 come here).
// Paths 2 and 3 accumulate f16, bf16, f32 and FP8 products in f32 with fma (products of these
// are exact in f32), f64 in f64, integers in the (wrapping) result type; the result is rounded
// once into d's type. The accumulation order is unspecified by the ISA.
#include "jit/lowering.h"

#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

#include <map>

namespace tilus::jit {

namespace {

/// One mma.sync shape: its fragments (as layouts), how many elements share a 32-bit operand
/// register, and the instruction (an intrinsic, or inline PTX where LLVM has none).
struct MmaKind {
  RegisterLayout atomA, atomB, atomC;
  int perReg = 2; // elements per 32-bit A/B register
  DataType acc;   // accumulator element type (f32 or i32)
  llvm::Intrinsic::ID id = llvm::Intrinsic::not_intrinsic;
  std::string ptx; // when id is not_intrinsic: the instruction
};

std::optional<MmaKind> mmaKindFor(DataType ab, DataType cd, int smVersion) {
  using L = RegisterLayout;
  MmaKind k;
  bool k16 = ab == DataType::f16() || ab == DataType::bf16();
  if (k16) {
    k.atomA = layoutChain({L::columnLocal({2, 2}), L::spatial({8, 4}), L::local({1, 2})});
    k.atomB = layoutChain({L::local({2, 1}), L::columnSpatial({4, 8}), L::local({2, 1})});
    k.perReg = 2;
  } else {
    k.atomA = layoutChain({L::columnLocal({2, 2}), L::spatial({8, 4}), L::local({1, 4})});
    k.atomB = layoutChain({L::local({2, 1}), L::columnSpatial({4, 8}), L::local({4, 1})});
    k.perReg = 4;
  }
  k.atomC = layoutChain({L::local({2, 1}), L::spatial({8, 4}), L::local({1, 2})});
  k.acc = DataType::f32();
  if (ab == DataType::f16() && (cd == DataType::f32() || cd == DataType::f16()))
    k.id = llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_f32_f32; // f16 results: f32 accumulation
  else if (ab == DataType::bf16() && cd == DataType::f32())
    k.id = llvm::Intrinsic::nvvm_mma_m16n8k16_row_col_bf16;
  else if (ab == DataType::i(8) && cd == DataType::i32())
    k.id = llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_s8;
  else if (ab == DataType::u(8) && cd == DataType::i32())
    k.id = llvm::Intrinsic::nvvm_mma_m16n8k32_row_col_u8;
  else if ((ab == DataType::f8e4m3() || ab == DataType::f8e5m2()) && cd == DataType::f32() &&
           smVersion >= 90) {
    std::string t = ab == DataType::f8e4m3() ? "e4m3" : "e5m2";
    k.ptx = "mma.sync.aligned.m16n8k32.row.col.f32." + t + "." + t +
            ".f32 {$0, $1, $2, $3}, {$4, $5, $6, $7}, {$8, $9}, {$10, $11, $12, $13};";
  } else {
    return std::nullopt;
  }
  if (!cd.isFloat())
    k.acc = DataType::i32();
  return k;
}

struct MmaPlan {
  MmaKind kind;
  // For each outer C slot oc and each k tile: the outer A and B slots.
  std::vector<std::vector<std::pair<int64_t, int64_t>>> steps;
  int64_t outerC = 0;
};

std::optional<MmaPlan> planMma(const RegisterLayout &la, const RegisterLayout &lb,
                               const RegisterLayout &ld, DataType da, DataType db, DataType dd,
                               int64_t threads, int smVersion) {
  if (da != db || threads % 32 != 0)
    return std::nullopt;
  std::optional<MmaKind> kind = mmaKindFor(da, dd, smVersion);
  if (!kind)
    return std::nullopt;
  MmaPlan plan{*kind, {}, 0};
  std::optional<RegisterLayout> oa = la.divideRight(kind->atomA);
  std::optional<RegisterLayout> ob = lb.divideRight(kind->atomB);
  std::optional<RegisterLayout> od = ld.divideRight(kind->atomC);
  if (!oa || !ob || !od)
    return std::nullopt;
  LayoutMap ma(*oa), mb(*ob), md(*od);
  int64_t warps = threads / 32;
  if (ma.threads() != warps || mb.threads() != warps || md.threads() != warps)
    return std::nullopt;
  if (ma.rank() != 2 || mb.rank() != 2 || md.rank() != 2)
    return std::nullopt;
  int64_t kTiles = ma.shape()[1];
  if (mb.shape()[0] != kTiles)
    return std::nullopt;
  plan.outerC = md.locals();
  plan.steps.resize(size_t(md.locals()));
  int64_t x[2];
  for (int64_t oc = 0; oc < md.locals(); ++oc) {
    for (int64_t w = 0; w < warps; ++w) {
      md.apply(w, oc, x);
      for (int64_t k = 0; k < kTiles; ++k) {
        int64_t ai[2] = {x[0], k}, bi[2] = {k, x[1]};
        if (!ma.owns(w, ai) || !mb.owns(w, bi))
          return std::nullopt;
        std::pair<int64_t, int64_t> slots{ma.localSlotOf(ai), mb.localSlotOf(bi)};
        if (w == 0)
          plan.steps[size_t(oc)].push_back(slots);
        else if (plan.steps[size_t(oc)][size_t(k)] != slots)
          return std::nullopt;
      }
    }
  }
  return plan;
}

/// Pack consecutive elements (lowest index in the lowest bits) into one 32-bit operand register
/// of type `type` (i32, or a vector such as <2 x half>).
llvm::Value *packRegister(Codegen &cg, llvm::Type *type, const std::vector<llvm::Value *> &elems,
                          DataType t) {
  llvm::IRBuilder<> &b = cg.b;
  if (elems.size() > 1 && !elems[0]->getType()->isIntegerTy()) {
    // Floats (f16, bf16 pairs): build the vector lane by lane, so that elements that were
    // extracted from a packed value (emit_dequant.cpp) fold back into it.
    llvm::Type *vec = llvm::FixedVectorType::get(elems[0]->getType(), unsigned(elems.size()));
    llvm::Value *v = llvm::PoisonValue::get(vec);
    for (size_t j = 0; j < elems.size(); ++j)
      v = b.CreateInsertElement(v, elems[j], uint64_t(j));
    return v->getType() == type ? v : b.CreateBitCast(v, type);
  }
  llvm::Value *word = b.getInt32(0);
  int bits = 32 / int(elems.size());
  for (size_t j = 0; j < elems.size(); ++j) {
    llvm::Value *v = b.CreateZExt(cg.toBits(elems[j], t), b.getInt32Ty());
    word = b.CreateOr(word, b.CreateShl(v, uint64_t(j) * uint64_t(bits)));
  }
  return word->getType() == type ? word : b.CreateBitCast(word, type);
}

/// The accumulation type of paths 2 and 3.
DataType accumulationType(DataType dd) {
  if (dd.isFloat())
    return dd == DataType::f64() ? DataType::f64() : DataType::f32();
  return dd;
}

} // namespace

namespace {

llvm::Value *multiplyAdd(Codegen &cg, DataType acc, llvm::Value *sum, llvm::Value *x,
                         llvm::Value *y) {
  if (acc.isFloat())
    return cg.callIntrinsic(llvm::Intrinsic::fma, {sum->getType()}, {x, y, sum});
  return cg.b.CreateAdd(sum, cg.b.CreateMul(x, y));
}

} // namespace

namespace {

/// The operands of one Dot, read once.
struct DotOperands {
  const VarType *ta, *tb, *td;
  const LayoutMap *ma, *mb, *md;
  DataType dd;
  int64_t kDim;
  std::vector<llvm::Value *> a, b, c; // c gathered into d's slots
};

/// Path 1: one mma per (outer C tile, k tile).
std::vector<llvm::Value *> dotMma(Codegen &cg, const DotOperands &op, const MmaPlan &plan) {
  llvm::IRBuilder<> &b = cg.b;
  const MmaKind &kind = plan.kind;
  int perReg = kind.perReg;
  int aSlots = 4 * perReg, bSlots = 2 * perReg;
  llvm::Type *accType = cg.elemType(kind.acc);
  llvm::FunctionType *ft;
  llvm::Value *callee;
  if (kind.id != llvm::Intrinsic::not_intrinsic) {
    llvm::Function *f = llvm::Intrinsic::getDeclaration(&cg.mod, kind.id);
    ft = f->getFunctionType();
    callee = f;
  } else {
    std::vector<llvm::Type *> params(6, b.getInt32Ty());
    params.insert(params.end(), 4, accType);
    llvm::Type *ret = llvm::StructType::get(cg.ctx, std::vector<llvm::Type *>(4, accType));
    ft = llvm::FunctionType::get(ret, params, false);
    callee = llvm::InlineAsm::get(ft, kind.ptx, "=f,=f,=f,=f,r,r,r,r,r,r,f,f,f,f", false);
  }
  // Accumulators in the mma's type; f16 results are rounded once at the end.
  std::vector<llvm::Value *> out;
  for (llvm::Value *v : op.c)
    out.push_back(cg.convert(v, op.dd, kind.acc));
  auto slice = [](const std::vector<llvm::Value *> &v, int64_t first, int n) {
    return std::vector<llvm::Value *>(v.begin() + first, v.begin() + first + n);
  };
  // Each operand register is packed once and shared by every mma that reads it (an A fragment
  // feeds every n tile, a B fragment every m tile).
  std::map<int64_t, llvm::Value *> packedA, packedB; // by first slot
  auto packed = [&](std::map<int64_t, llvm::Value *> &cache, const std::vector<llvm::Value *> &v,
                    int64_t first, unsigned p, DataType t) {
    llvm::Value *&reg = cache[first];
    if (!reg)
      reg = packRegister(cg, ft->getParamType(p), slice(v, first, perReg), t);
    return reg;
  };
  for (int64_t oc = 0; oc < plan.outerC; ++oc) {
    for (const auto &[sa, sb] : plan.steps[size_t(oc)]) {
      std::vector<llvm::Value *> args;
      unsigned p = 0;
      for (int j = 0; j < 4; ++j, ++p)
        args.push_back(packed(packedA, op.a, sa * aSlots + j * perReg, p, op.ta->dtype));
      for (int j = 0; j < 2; ++j, ++p)
        args.push_back(packed(packedB, op.b, sb * bSlots + j * perReg, p, op.tb->dtype));
      for (int j = 0; j < 4; ++j)
        args.push_back(out[size_t(oc * 4 + j)]);
      llvm::Value *res = b.CreateCall(ft, callee, args);
      for (unsigned j = 0; j < 4; ++j)
        out[size_t(oc * 4 + j)] = b.CreateExtractValue(res, j);
    }
  }
  // the tensor cores' NaN (f32 0x7FFFFFFF) is not the ISA's canonical NaN: canonicalized once
  // per result (jit/nan_canonical.h drops it where the NaN's bits cannot be seen)
  for (llvm::Value *&v : out)
    v = cg.canonicalizeNaN(cg.convert(v, kind.acc, op.dd), op.dd);
  return out;
}

/// Path 2: the a and b slots of every (d slot, k) when they are the same in every thread.
std::optional<std::vector<std::vector<std::pair<int64_t, int64_t>>>>
planPerThread(const DotOperands &op) {
  const LayoutMap &ma = *op.ma, &mb = *op.mb, &md = *op.md;
  std::vector<std::vector<std::pair<int64_t, int64_t>>> steps(size_t(md.locals()));
  int64_t x[2];
  for (int64_t t = 0; t < md.threads(); ++t) {
    for (int64_t i = 0; i < md.locals(); ++i) {
      md.apply(t, i, x);
      for (int64_t k = 0; k < op.kDim; ++k) {
        int64_t ai[2] = {x[0], k}, bi[2] = {k, x[1]};
        if (t >= ma.threads() || t >= mb.threads() || !ma.owns(t, ai) || !mb.owns(t, bi))
          return std::nullopt;
        std::pair<int64_t, int64_t> s{ma.localSlotOf(ai), mb.localSlotOf(bi)};
        if (t == 0)
          steps[size_t(i)].push_back(s);
        else if (steps[size_t(i)][size_t(k)] != s)
          return std::nullopt;
      }
    }
  }
  return steps;
}

std::vector<llvm::Value *>
dotPerThread(Codegen &cg, const DotOperands &op,
             const std::vector<std::vector<std::pair<int64_t, int64_t>>> &steps) {
  DataType acc = accumulationType(op.dd);
  std::vector<llvm::Value *> out(op.c.size());
  for (size_t i = 0; i < out.size(); ++i) {
    llvm::Value *sum = cg.convert(op.c[i], op.dd, acc);
    for (const auto &[sa, sb] : steps[i])
      sum = multiplyAdd(cg, acc, sum, cg.convert(op.a[size_t(sa)], op.ta->dtype, acc),
                        cg.convert(op.b[size_t(sb)], op.tb->dtype, acc));
    out[i] = cg.convert(sum, acc, op.dd);
  }
  return out;
}

/// Path 3: a and b staged row-major in the scratch area; each thread reduces over k.
Expected<std::vector<llvm::Value *>> dotScratch(Codegen &cg, const Instruction &inst,
                                                const DotOperands &op, VarId va, VarId vb) {
  llvm::IRBuilder<> &b = cg.b;
  DataType acc = accumulationType(op.dd);
  DataType da = op.ta->dtype, db = op.tb->dtype;
  int bytesA = da.storageBits() % 8 == 0 ? da.storageBits() / 8 : 1;
  int bytesB = db.storageBits() % 8 == 0 ? db.storageBits() / 8 : 1;
  int64_t kDim = op.kDim, nDim = op.mb->shape()[1];
  int64_t offsetB = op.ma->shape()[0] * kDim * bytesA;
  if (offsetB + kDim * nDim * bytesB > cg.scratchLimit())
    return cg.error(ErrorCode::Runtime, inst,
                    "scratch area of " + std::to_string(cg.scratchLimit()) +
                        " bytes is too small for Dot");
  cg.stageToScratch(va, op.a, 0, bytesA);
  cg.stageToScratch(vb, op.b, offsetB, bytesB);
  cg.barrier();
  const LayoutMap &md = *op.md;
  const std::vector<llvm::Value *> &s = cg.threadPart(md);
  std::vector<llvm::Value *> out(size_t(md.locals()));
  for (int64_t i = 0; i < md.locals(); ++i) {
    llvm::Value *m = addFolded(b, s[0], cg.constI64(md.localPart(i)[0]));
    llvm::Value *n = addFolded(b, s[1], cg.constI64(md.localPart(i)[1]));
    llvm::Value *rowA = b.CreateMul(m, cg.constI64(kDim));
    llvm::Value *sum = cg.convert(op.c[size_t(i)], op.dd, acc);
    auto step = [&](llvm::Value *sumIn, llvm::Value *k) {
      llvm::Value *x = cg.loadScratchElement(b.CreateAdd(rowA, k), 0, bytesA, da);
      llvm::Value *y = cg.loadScratchElement(b.CreateAdd(b.CreateMul(k, cg.constI64(nDim)), n),
                                             offsetB, bytesB, db);
      return multiplyAdd(cg, acc, sumIn, cg.convert(x, da, acc), cg.convert(y, db, acc));
    };
    if (kDim <= 16) {
      for (int64_t k = 0; k < kDim; ++k)
        sum = step(sum, cg.constI64(k));
      out[size_t(i)] = cg.convert(sum, acc, op.dd);
      continue;
    }
    llvm::Value *last =
        cg.emitCountedLoop("dot.k", cg.constI64(0), cg.constI64(kDim), 1, {sum},
                           [&](llvm::Value *k, const std::vector<llvm::Value *> &c) {
                             return std::vector<llvm::Value *>{step(c[0], k)};
                           })[0];
    out[size_t(i)] = cg.convert(last, acc, op.dd);
  }
  cg.barrier();
  return out;
}

} // namespace

bool dotUsesMma(const VarType &a, const VarType &b, const VarType &d, int64_t threads,
                int smVersion) {
  return a.layout && b.layout && d.layout &&
         planMma(*a.layout, *b.layout, *d.layout, a.dtype, b.dtype, d.dtype, threads, smVersion)
             .has_value();
}

Status ContractionLowering::visitDot(const Instruction &inst) {
  VarId va = inst.arg(ArgName::a).var, vb = inst.arg(ArgName::b).var, vc = inst.arg(ArgName::c).var;
  VarId vd = inst.results[0];
  if (va == kNoId || vb == kNoId || vc == kNoId)
    return cg.error(ErrorCode::Scope, inst, "Dot operands must be register tensors");
  DotOperands op;
  op.ta = &info.vars[va];
  op.tb = &info.vars[vb];
  op.td = &info.vars[vd];
  op.ma = &cg.layoutOf(va);
  op.mb = &cg.layoutOf(vb);
  op.md = &cg.layoutOf(vd);
  if (op.ma->rank() != 2 || op.mb->rank() != 2 || op.md->rank() != 2)
    return cg.error(ErrorCode::DotShape, inst, "Dot operands must have rank 2");
  op.kDim = op.ma->shape()[1];
  op.dd = op.td->dtype;
  Expected<std::vector<llvm::Value *>> c =
      cg.operandSlots(inst, inst.arg(ArgName::c), *op.md, op.dd);
  if (!c)
    return c.takeStatus();
  op.c = std::move(*c);
  op.a = cg.readRegister(va);
  op.b = cg.readRegister(vb);
  if (std::optional<MmaPlan> plan =
          planMma(*op.ta->layout, *op.tb->layout, *op.td->layout, op.ta->dtype, op.tb->dtype, op.dd,
                  cg.threads(), opts.smVersion)) {
    cg.writeRegister(vd, dotMma(cg, op, *plan));
    return Status::success();
  }
  if (auto steps = planPerThread(op)) {
    cg.writeRegister(vd, dotPerThread(cg, op, *steps));
    return Status::success();
  }
  Expected<std::vector<llvm::Value *>> out = dotScratch(cg, inst, op, va, vb);
  if (!out)
    return out.takeStatus();
  cg.writeRegister(vd, *out);
  return Status::success();
}

} // namespace tilus::jit
