// The atomics (AtomicAdd, AtomicMax, AtomicMin, AtomicExch, AtomicCas, AtomicStore, AtomicLoad)
// and Fence as inline PTX (docs/isa.md, "Atomics", "AtomicLoad and AtomicStore"; docs/jit.md).
//
// Slot (t, i) of r addresses tile index S(t) + Loc(i) as a store does; only the primary owner
// of each element (layout_map.h) applies it, so replicated elements are updated once. Global
// elements are predicated on the bounds of the view (outside: no update, old value 0), shared
// ones are not (the checker and the ISA rule out-of-bounds shared accesses). Each element is
// one `atom` (with a result) or `red` (without), `.relaxed` at `.gpu` scope for global memory;
// ordering with other memory accesses is the program's business (Fence). On sm_90, AtomicAdd
// without a result of consecutive f32 (2 or 4) or f16/bf16 (2 to 8) slots along a unit-stride
// dimension is one vector `red.global.add.v4.f32` (`.noftz.v8.f16`...) when the group is in
// bounds and aligned; other groups take a branch to the element path. With a result, the old
// values of a replicated (or out= re-laid) tensor go through the scratch area from the primary
// owners to every owner, as ConvertLayout does. AtomicStore and AtomicLoad of 32-bit elements in
// global memory are the stores and loads of StoreGlobal and LoadGlobal made relaxed
// (jit/global_access.h: vector groups of `st.relaxed.gpu.global.v4.b32`..., each word one
// element's access); otherwise AtomicStore is one `st.relaxed.gpu.global` per element
// (`st.relaxed.cta.shared` in shared memory) from its primary owner, AtomicLoad one
// `ld.relaxed.gpu.global` (`ld.relaxed.cta.shared`) per slot of the result, by every owner
// (outside a global view: 0).
//
// Fence(scope=block|gpu) is `fence.acq_rel.cta` / `fence.acq_rel.gpu`.
#include "jit/global_access.h"
#include "jit/lowering.h"
#include "jit/memory_util.h"

#include <llvm/IR/InlineAsm.h>

#include <string>

namespace tilus::jit {

namespace {

/// The PTX operation and type of an atomic row on elements of type t ("add.f32", "cas.b64").
std::string ptxOperation(Opcode op, DataType t) {
  int bits = t.storageBits();
  if (op == Opcode::AtomicExch)
    return bits == 64 ? "exch.b64" : "exch.b32";
  if (op == Opcode::AtomicCas)
    return bits == 64 ? "cas.b64" : "cas.b32";
  std::string name = op == Opcode::AtomicAdd ? "add" : op == Opcode::AtomicMax ? "max" : "min";
  if (t == DataType::f16())
    return name + ".noftz.f16";
  if (t == DataType::bf16())
    return name + ".noftz.bf16";
  if (t.isFloat())
    return name + (bits == 64 ? ".f64" : ".f32");
  // Two's-complement addition is the same for both signs; max and min are not.
  bool sign = t.isSigned() && op != Opcode::AtomicAdd;
  return name + (sign ? ".s" : ".u") + std::to_string(bits);
}

/// "$k", the k-th operand of an inline-asm string (appends: GCC 12 warns falsely about
/// `"x" + std::string` chains, bug 105329).
std::string operandRef(size_t k) {
  std::string s = "$";
  s.append(std::to_string(k));
  return s;
}

/// The inline-asm constraint of one register of type t.
const char *constraintOf(DataType t) {
  if (t.storageBits() == 16)
    return "h";
  if (t == DataType::f32())
    return "f";
  if (t == DataType::f64())
    return "d";
  return t.storageBits() == 64 ? "l" : "r";
}

/// The value as the asm operand of its constraint (16-bit types as their bits).
llvm::Value *asmValue(Codegen &cg, llvm::Value *v, DataType t) {
  if (t.storageBits() == 16)
    return cg.toBits(v, t);
  return v;
}

llvm::Value *fromAsmValue(Codegen &cg, llvm::Value *v, DataType t) {
  if (t.storageBits() == 16)
    return cg.fromBits(v, t);
  return v;
}

/// One predicated atomic at `addr` (i64 generic/global address, or i32 shared address):
/// `@p atom.<space>.<operation> d, [addr], (c, )v`, d = 0 when p is false; without a result,
/// `@p red...` where red exists (add, max, min). Returns d (or nullptr without a result).
llvm::Value *emitAtomic(Codegen &cg, Opcode op, DataType t, bool global, llvm::Value *addr,
                        llvm::Value *pred, llvm::Value *value, llvm::Value *compare, bool wantOld) {
  llvm::IRBuilder<> &b = cg.b;
  // red has add, min and max only: exch and cas always take atom (the reply unused).
  const bool load = op == Opcode::AtomicLoad, store = op == Opcode::AtomicStore;
  const bool reply = wantOld || load || op == Opcode::AtomicExch || op == Opcode::AtomicCas;
  bool always = llvm::isa<llvm::ConstantInt>(pred) && llvm::cast<llvm::ConstantInt>(pred)->isOne();
  std::string space = global            ? "relaxed.gpu.global."
                      : (load || store) ? "relaxed.cta.shared."
                                        : "shared.";
  // ld and st move the bits (appended: GCC 12 warns falsely, -Wrestrict, on "b" + to_string)
  std::string operation = "b";
  if (load || store)
    operation.append(std::to_string(t.storageBits()));
  else
    operation = ptxOperation(op, t);
  const char *reg = constraintOf(t);
  std::string constraints, text;
  std::vector<llvm::Type *> params;
  std::vector<llvm::Value *> args;
  size_t n = 0;
  auto operand = [&](llvm::Value *v, const char *c) {
    if (!constraints.empty())
      constraints += ",";
    constraints += c;
    params.push_back(v->getType());
    args.push_back(v);
    return operandRef(n++);
  };
  std::string dest;
  if (reply) {
    constraints = std::string("=") + reg;
    dest = operandRef(n++);
  }
  std::string a = operand(addr, global ? "l" : "r");
  std::string c = compare ? operand(asmValue(cg, compare, t), reg) : "";
  std::string v = value ? operand(asmValue(cg, value, t), reg) : "";
  std::string p = always ? "" : operand(b.CreateZExt(pred, b.getInt32Ty()), "r");
  std::string body = load    ? "ld." + space + operation + " " + dest + ", [" + a + "];"
                     : store ? "st." + space + operation + " [" + a + "], " + v + ";"
                     : reply ? "atom." + space + operation + " " + dest + ", [" + a + "], " +
                                   (compare ? c + ", " : "") + v + ";"
                             : "red." + space + operation + " [" + a + "], " + v + ";";
  if (always) {
    text = body;
  } else {
    std::string zero;
    if (reply)
      zero = std::string(t.storageBits() == 16   ? "mov.b16 "
                         : t.storageBits() == 64 ? "mov.b64 "
                                                 : "mov.b32 ") +
             dest + ", 0; ";
    text = "{ .reg .pred p; setp.ne.b32 p, " + p + ", 0; " + zero + "@p " + body + " }";
  }
  constraints += ",~{memory}";
  llvm::Type *ret = !reply                  ? b.getVoidTy()
                    : t.storageBits() == 16 ? b.getInt16Ty()
                                            : cg.elemType(t);
  auto *type = llvm::FunctionType::get(ret, params, false);
  llvm::Value *r = b.CreateCall(llvm::InlineAsm::get(type, text, constraints, true), args);
  return reply && (wantOld || load) ? fromAsmValue(cg, r, t) : nullptr;
}

/// `@p red.relaxed.gpu.global.add(.noftz).vN.<type> [addr], {v..}` (sm_90, PTX 8.1).
void emitVectorAdd(Codegen &cg, DataType t, llvm::Value *addr, llvm::Value *pred,
                   const std::vector<llvm::Value *> &values) {
  llvm::IRBuilder<> &b = cg.b;
  std::string prefix = t == DataType::f32() ? "" : "noftz.";
  std::string element = t == DataType::f32() ? "f32" : t == DataType::f16() ? "f16" : "bf16";
  std::string constraints = "r,l";
  std::vector<llvm::Type *> params = {b.getInt32Ty(), b.getInt64Ty()};
  std::vector<llvm::Value *> args = {b.CreateZExt(pred, b.getInt32Ty()), addr};
  std::string regs;
  for (size_t j = 0; j < values.size(); ++j) {
    regs.append(j ? ", " : "").append(operandRef(2 + j));
    llvm::Value *v = asmValue(cg, values[j], t);
    constraints += std::string(",") + constraintOf(t);
    params.push_back(v->getType());
    args.push_back(v);
  }
  std::string text = "{ .reg .pred p; setp.ne.b32 p, $0, 0; @p red.relaxed.gpu.global.add." +
                     prefix + "v" + std::to_string(values.size()) + "." + element + " [$1], {" +
                     regs + "}; }";
  constraints += ",~{memory}";
  auto *fnType = llvm::FunctionType::get(b.getVoidTy(), params, false);
  b.CreateCall(llvm::InlineAsm::get(fnType, text, constraints, true), args);
}

/// The widest vector of `red.global.add` for elements of t (sm_90), 1 when there is none.
int vectorAddWidth(DataType t) {
  if (t == DataType::f32())
    return 4;
  if (t == DataType::f16() || t == DataType::bf16())
    return 8;
  return 1;
}

/// The addresses and bounds tests of the slots of a register layout over a global tile, as a
/// store addresses them: slot (t, i) is tile index S(t) + Loc(i). The dimensions without local
/// terms (every slot's index 0 there) are tested once, in `fixedIn` with `valid`; each slot adds
/// only the tests of the others.
struct GlobalSlots {
  Codegen &cg;
  const LayoutMap &map;
  GlobalTile tile;
  int es;
  llvm::Value *valid;
  llvm::Value *threadBase = nullptr;
  std::vector<llvm::Value *> lo, hi;
  std::vector<bool> varies;
  llvm::Value *fixedIn = nullptr;

  GlobalSlots(Codegen &c, const LayoutMap &m, GlobalTile t, int elementBytes, llvm::Value *v)
      : cg(c), map(m), tile(std::move(t)), es(elementBytes), valid(v) {
    llvm::IRBuilder<> &b = cg.b;
    const int rank = map.rank();
    const std::vector<llvm::Value *> &s = cg.threadPart(map);
    threadBase = tile.offset;
    for (int k = 0; k < rank; ++k) {
      threadBase = addFolded(b, threadBase, mulFolded(b, s[size_t(k)], tile.strides[size_t(k)]));
      lo.push_back(b.CreateSub(tile.lo[size_t(k)], s[size_t(k)]));
      hi.push_back(b.CreateSub(tile.hi[size_t(k)], s[size_t(k)]));
    }
    varies.assign(size_t(rank), false);
    for (const LayoutTerm &term : map.localTerms())
      varies[size_t(term.dim)] = true;
    std::vector<int64_t> zero(size_t(rank), 0);
    fixedIn = valid;
    for (int k = 0; k < rank; ++k)
      if (!varies[size_t(k)])
        fixedIn = b.CreateAnd(fixedIn, inDim(zero.data(), k));
  }

  llvm::Value *inDim(const int64_t *loc, int k) {
    llvm::IRBuilder<> &b = cg.b;
    llvm::Value *c = cg.constI64(loc[k]);
    return b.CreateAnd(b.CreateICmpSLE(lo[size_t(k)], c), b.CreateICmpSGT(hi[size_t(k)], c));
  }

  llvm::Value *address(const int64_t *loc) {
    llvm::IRBuilder<> &b = cg.b;
    llvm::Value *e = threadBase;
    for (int k = 0; k < map.rank(); ++k)
      if (loc[k] != 0)
        e = addFolded(b, e, mulFolded(b, cg.constI64(loc[k]), tile.strides[size_t(k)]));
    llvm::Value *p = b.CreateGEP(b.getInt8Ty(), tile.ptr, b.CreateMul(e, cg.constI64(es)));
    return b.CreatePtrToInt(p, b.getInt64Ty());
  }

  /// The slot at `loc` lies inside the view (and `valid` holds).
  llvm::Value *inBounds(const int64_t *loc) {
    llvm::Value *ok = fixedIn;
    for (int k = 0; k < map.rank(); ++k)
      if (varies[size_t(k)])
        ok = cg.b.CreateAnd(ok, inDim(loc, k));
    return ok;
  }
};

/// The shared address (i32) of slot `loc` of a thread whose part of the layout is `s`, in the
/// shared tile (a store's addressing).
llvm::Value *sharedSlotAddress(Codegen &cg, const SharedTile &tile,
                               const std::vector<llvm::Value *> &s, const int64_t *loc, int rank,
                               DataType t) {
  std::vector<llvm::Value *> coords = tile.origin;
  for (int k = 0; k < rank; ++k) {
    size_t r = size_t(tile.dims[size_t(k)]);
    coords[r] = addFolded(cg.b, coords[r], addFolded(cg.b, s[size_t(k)], cg.constI64(loc[k])));
  }
  llvm::Value *addr = cg.sharedElementAddress(tile.root, cg.sharedOffset(tile.root, coords), t);
  return cg.b.CreatePtrToInt(addr, cg.b.getInt32Ty());
}

} // namespace

Status AtomicLowering::visitAtomic(const Instruction &inst) {
  VarId src = inst.arg(ArgName::r).var;
  VarId dst = inst.arg(ArgName::dst).var;
  if (src == kNoId || dst == kNoId)
    return cg.error(ErrorCode::Scope, inst, "atomic operands are not tensors");
  const LayoutMap &map = cg.layoutOf(src);
  std::vector<llvm::Value *> values = cg.readRegister(src);
  std::vector<llvm::Value *> compares;
  if (inst.hasArg(ArgName::cmp))
    compares = cg.readRegister(inst.arg(ArgName::cmp).var);
  const bool global = info.vars[dst].kind == VarKind::Global;
  const DataType t = info.vars[dst].dtype;
  const bool wantOld = !inst.results.empty();
  const int es = t.storageBits() / 8;
  // 32-bit elements into global memory: the stores of StoreGlobal, relaxed (vector groups)
  if (global && inst.opcode == Opcode::AtomicStore && es == 4)
    return lowerStoreGlobal(cg, inst, src, dst, inst.arg(ArgName::offset), true);
  const int rank = map.rank();
  const std::vector<llvm::Value *> &s = cg.threadPart(map);
  std::vector<llvm::Value *> olds(size_t(map.locals()), cg.zeroOf(t));
  llvm::Value *primary = cg.isPrimary(map);

  if (global) {
    GlobalTile tile = cg.globalTile(cg.readGlobal(dst), inst.arg(ArgName::offset));
    if (int(tile.lo.size()) != rank)
      return cg.error(ErrorCode::OffsetRank, inst, "slice count differs from the register rank");
    GlobalSlots slots(cg, map, tile, es, b.CreateAnd(tile.valid, primary));
    auto element = [&](int64_t i) {
      const int64_t *loc = map.localPart(i);
      llvm::Value *old =
          emitAtomic(cg, inst.opcode, t, true, slots.address(loc), slots.inBounds(loc),
                     values[size_t(i)], compares.empty() ? nullptr : compares[size_t(i)], wantOld);
      if (wantOld)
        olds[size_t(i)] = old;
    };
    int width = (opts.smVersion >= 90 && inst.opcode == Opcode::AtomicAdd && !wantOld)
                    ? vectorAddWidth(t)
                    : 1;
    std::vector<bool> unit(size_t(rank), false);
    for (int k = 0; k < rank; ++k)
      unit[size_t(k)] = isConstOne(tile.strides[size_t(k)]);
    for (const SlotGroup &g : groupSlots(map, width, 2, unit)) {
      if (g.count == 1) {
        element(g.first);
        continue;
      }
      // One vector when the whole group is in bounds and aligned; otherwise (normally not
      // taken) the elements one by one.
      const int64_t *first = map.localPart(g.first);
      const int64_t *last = map.localPart(g.first + g.count - 1);
      llvm::Value *addr = slots.address(first);
      llvm::Value *aligned =
          b.CreateICmpEQ(b.CreateAnd(addr, cg.constI64(es * g.count - 1)), cg.constI64(0));
      llvm::Value *othersIn = slots.valid;
      for (int k = 0; k < rank; ++k)
        if (k != g.dim)
          othersIn = b.CreateAnd(othersIn, slots.inDim(first, k));
      llvm::Value *runIn = b.CreateAnd(slots.inDim(first, g.dim), slots.inDim(last, g.dim));
      llvm::Value *fast = b.CreateAnd(othersIn, b.CreateAnd(runIn, aligned));
      emitVectorAdd(
          cg, t, addr, fast,
          std::vector<llvm::Value *>(values.begin() + g.first, values.begin() + g.first + g.count));
      llvm::Value *slow = b.CreateAnd(othersIn, b.CreateNot(b.CreateAnd(runIn, aligned)));
      cg.emitIf(slow, "red.elem", [&] {
        for (int64_t j = 0; j < g.count; ++j)
          element(g.first + j);
      });
    }
  } else {
    SharedView view = cg.readShared(dst);
    SharedTile tile = cg.sharedTile(view, inst.arg(ArgName::offset));
    if (int(tile.dims.size()) != rank)
      return cg.error(ErrorCode::OffsetRank, inst, "slice count differs from the register rank");
    for (int64_t i = 0; i < map.locals(); ++i) {
      llvm::Value *addr = sharedSlotAddress(cg, tile, s, map.localPart(i), rank, t);
      llvm::Value *old = emitAtomic(cg, inst.opcode, t, false, addr, primary, values[size_t(i)],
                                    compares.empty() ? nullptr : compares[size_t(i)], wantOld);
      if (wantOld)
        olds[size_t(i)] = old;
    }
  }
  if (!wantOld)
    return Status::success();
  VarId res = inst.results[0];
  const LayoutMap &rmap = cg.layoutOf(res);
  if (!info.vars[src].layout->isReplicated() && &rmap == &map) {
    cg.writeRegister(res, olds);
    return Status::success();
  }
  // Only the primary owners hold the old values: hand them to every owner of the result.
  TILUSVM_TRY(cg.requireScratch(inst, map.shape(), es, "the old values need"));
  cg.barrier(); // the scratch area may still be read by an earlier exchange
  cg.stageToScratch(src, olds, 0, es);
  cg.barrier();
  std::vector<llvm::Value *> out = cg.loadScratchSlots(rmap, es, t);
  cg.barrier();
  cg.writeRegister(res, out);
  return Status::success();
}

Status AtomicLowering::visitAtomicLoad(const Instruction &inst) {
  VarId src = inst.arg(ArgName::x).var;
  if (src == kNoId || inst.results.empty())
    return cg.error(ErrorCode::Scope, inst, "AtomicLoad operands are not tensors");
  VarId res = inst.results[0];
  const LayoutMap &map = cg.layoutOf(res);
  const DataType t = info.vars[src].dtype;
  const int es = t.storageBits() / 8;
  const int rank = map.rank();
  // 32-bit elements from global memory: the loads of LoadGlobal, relaxed (vector groups)
  if (info.vars[src].kind == VarKind::Global && es == 4)
    return lowerLoadGlobal(cg, inst, res, src, inst.arg(ArgName::offset), true);
  std::vector<llvm::Value *> values(size_t(map.locals()), cg.zeroOf(t));
  if (info.vars[src].kind == VarKind::Global) {
    GlobalTile tile = cg.globalTile(cg.readGlobal(src), inst.arg(ArgName::offset));
    if (int(tile.lo.size()) != rank)
      return cg.error(ErrorCode::OffsetRank, inst, "slice count differs from the layout's rank");
    // every owner reads its slots (a replicated element is read by each of its owners)
    GlobalSlots slots(cg, map, tile, es, tile.valid);
    for (int64_t i = 0; i < map.locals(); ++i) {
      const int64_t *loc = map.localPart(i);
      values[size_t(i)] = emitAtomic(cg, inst.opcode, t, true, slots.address(loc),
                                     slots.inBounds(loc), nullptr, nullptr, true);
    }
  } else {
    SharedView view = cg.readShared(src);
    SharedTile tile = cg.sharedTile(view, inst.arg(ArgName::offset));
    if (int(tile.dims.size()) != rank)
      return cg.error(ErrorCode::OffsetRank, inst, "slice count differs from the layout's rank");
    const std::vector<llvm::Value *> &s = cg.threadPart(map);
    for (int64_t i = 0; i < map.locals(); ++i)
      values[size_t(i)] = emitAtomic(cg, inst.opcode, t, false,
                                     sharedSlotAddress(cg, tile, s, map.localPart(i), rank, t),
                                     b.getTrue(), nullptr, nullptr, true);
  }
  cg.writeRegister(res, values);
  return Status::success();
}

Status AtomicLowering::visitFence(const Instruction &inst) {
  auto scope = MemoryScope(inst.arg(ArgName::scope).intValue);
  std::string text = scope == MemoryScope::Gpu ? "fence.acq_rel.gpu;" : "fence.acq_rel.cta;";
  auto *type = llvm::FunctionType::get(b.getVoidTy(), {}, false);
  b.CreateCall(llvm::InlineAsm::get(type, text, "~{memory}", true), {});
  return Status::success();
}

} // namespace tilus::jit
