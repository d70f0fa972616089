// wgmma (docs/isa.md, "wgmma"), sm_90a only: Wgmma issues, per k step and per m64 atom of the
// calling thread's warpgroup, one wgmma.mma_async with its shared operands read through matrix
// descriptors (the checker's WgmmaPlan: mode, LBO, SBO and the start relative to the operand
// view's origin), accumulating in place into the thread's slots of c (the fragment layout puts
// atom r's registers at slots [r n / 2, (r + 1) n / 2) in PTX order). A register A operand is
// passed as four 32-bit registers per atom and k step, packed from the thread's slots of a (the
// A fragment layout puts register j of atom r, k step s at slots (r ksteps + s) 4e + j e + l,
// e = 32 / element bits, element l in bits [l bits, (l + 1) bits)). All of them are packed
// before the first wgmma and pass through one wgmma.fence (see visitWgmma). The instruction's
// wgmmas are one asm statement (visitWgmma): the accumulators as outputs, then the A operand of
// each k step and atom ("l" per descriptor, "r,r,r,r" per register A), the B descriptor of each
// k step ("l"), the constant 1 and scale-d ("r,r"), then the accumulators tied to the outputs.
//
// The accumulators are written by the tensor cores until wgmma.wait_group: the asm statements
// tie them as outputs to inputs, and their reads follow the WgmmaWaitGroup(0) in the program.
// In practice nothing moves a read above that volatile asm (the passes have no reason to move an
// arithmetic use above a call of its block, and NVPTX schedules each block's DAG in source
// order); should one, ptxas would still order it after the wgmma, by serialising the chain, and
// report that (C751x; tests/jit/test_jit_hopper.cpp checks the programs with the largest
// epilogues). An empty asm per accumulator register after the wait,
// which pinned the reads until then, cost about 11 % of the NVPTX backend for
// gemm/wgmma_ws.tasm and changed no cubin of programs/ or of the GPU tests (docs/jit.md).
#include "jit/lowering.h"

#include <llvm/IR/InlineAsm.h>

#include <algorithm>
#include <cassert>

namespace tilus::jit {

namespace {

/// The descriptor for warpgroup coordinate `coord` (one of `count`) among `descs[coord * stride +
/// offset]`, the start added to `origin` (i32, the shared::cta address of the operand view's
/// origin). The checker plans only starts that are 16-byte aligned, the origin among them (its
/// first atom), so every start lies a multiple of 16 bytes from the origin, and the start field is
/// the origin's field plus a constant: ((origin + delta) >> 4) & 0x3fff = ((origin >> 4) &
/// 0x3fff) + delta / 16, exact because shared::cta addresses are below 2^18 (at most 228 KiB on
/// sm_90), so neither side wraps and the sum does not carry into the bits above the field. The
/// descriptor is then one 64-bit add to a value computed once per origin (the pipeline stage) of
/// a constant chosen by the coordinate (a select chain that LLVM hoists out of the k loop),
/// instead of an add, shift, mask, widening and or per wgmma and warpgroup coordinate.
llvm::Value *descriptor(Codegen &cg, const std::vector<WgmmaDescriptor> &descs, int count,
                        int64_t stride, int64_t offset, llvm::Value *coord, llvm::Value *origin) {
  llvm::IRBuilder<> &b = cg.b;
  llvm::Value *result = nullptr;
  for (int i = count; i-- > 0;) {
    const WgmmaDescriptor &d = descs[size_t(i * stride + offset)];
    assert(d.startDelta % 16 == 0 && "the checker plans 16-byte aligned starts");
    uint64_t fixed = (uint64_t((d.lbo >> 4) & 0x3fff) << 16) |
                     (uint64_t((d.sbo >> 4) & 0x3fff) << 32) | (uint64_t(d.mode) << 62);
    llvm::Value *k = b.getInt64(fixed + uint64_t(d.startDelta / 16));
    result = result ? b.CreateSelect(b.CreateICmpEQ(coord, cg.constI32(i)), k, result) : k;
  }
  llvm::Value *field = b.CreateAnd(b.CreateLShr(origin, cg.constI32(4)), cg.constI32(0x3fff));
  return b.CreateAdd(b.CreateZExt(field, b.getInt64Ty()), result);
}

const char *ptxType(DataType t) {
  if (t == DataType::f16())
    return "f16";
  if (t == DataType::bf16())
    return "bf16";
  if (t == DataType::f8e4m3())
    return "e4m3";
  return "e5m2";
}

} // namespace

Status ContractionLowering::visitWgmma(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  auto it = info.wgmma.find(uint32_t(&inst - prog.instructions.data()));
  if (it == info.wgmma.end())
    return cg.error(ErrorCode::Jit, inst, "Wgmma without a checker plan");
  const WgmmaPlan &plan = it->second;
  VarId va = inst.arg(ArgName::a).var, vb = inst.arg(ArgName::b).var, vc = inst.arg(ArgName::c).var;
  DataType ta = info.vars[va].dtype, tb = info.vars[vb].dtype;
  bool fp8 = ta.storageBits() == 8;
  std::vector<llvm::Value *> slots = cg.readRegister(vc);
  llvm::Value *wg = b.CreateLShr(cg.tid(), cg.constI32(7));
  llvm::Value *wgI = b.CreateUDiv(wg, cg.constI32(plan.wgN));
  llvm::Value *wgJ = b.CreateURem(wg, cg.constI32(plan.wgN));
  llvm::Value *originA = plan.registerA ? nullptr : cg.sharedOriginAddress32(va);
  llvm::Value *originB = cg.sharedOriginAddress32(vb);
  int64_t perRegister = 32 / ta.storageBits(); // A elements per 32-bit register
  // A register operand: every 32-bit register of every atom and k step packed first, then one
  // wgmma.fence that takes and returns them all (tied), so that no register of any wgmma of this
  // instruction is written after the fence. Packing each register just before its wgmma (after
  // the program's WgmmaFence) makes ptxas insert a warpgroup.arrive before every wgmma and wait
  // for each one (C7519: a gsb0 wait per HGMMA, the chain serialised).
  std::vector<llvm::Value *> registersA;
  if (plan.registerA) {
    std::vector<llvm::Value *> slotsA = cg.readRegister(va);
    int64_t count = plan.tilesM * plan.ksteps * 4;
    for (int64_t i = 0; i < count; ++i)
      registersA.push_back(cg.packRegister32(slotsA, i * perRegister, perRegister, ta));
    std::string constraints;
    for (int64_t i = 0; i < count; ++i)
      constraints += i ? ",=r" : "=r";
    for (int64_t i = 0; i < count; ++i)
      constraints += "," + std::to_string(i);
    llvm::Type *ret =
        llvm::StructType::get(ctx, std::vector<llvm::Type *>(size_t(count), b.getInt32Ty()));
    llvm::Value *fenced = cg.volatileAsm(ret, "wgmma.fence.sync.aligned;", constraints, registersA);
    for (int64_t i = 0; i < count; ++i)
      registersA[size_t(i)] = b.CreateExtractValue(fenced, {unsigned(i)});
  }
  int64_t q = plan.n / 2;          // accumulator registers per atom
  int64_t total = plan.tilesM * q; // the asm's outputs: every atom's accumulators
  // One asm statement for the instruction's wgmmas, in the order (k step, atom) as separate
  // statements would issue them: its outputs are every atom's accumulators, its inputs the A
  // operand of each (k step, atom) (a descriptor, or four registers), the B descriptor of each k
  // step, the constant 1, scale-d (the last fixed input: jit/wgmma_zero_accumulator.cpp folds a
  // zero accumulator into it), then the accumulators tied to the outputs. The first k step adds
  // to the accumulators where scale-d is nonzero, the later ones always. One call with its
  // extracts per instruction instead of one per k step and atom: a quarter of the IR that LLVM
  // and the NVPTX backend handle for a k tile of 64 (four k steps); the PTX statements are the
  // same.
  int64_t fixedA = plan.registerA ? 4 : 1;
  int64_t firstA = total;                                       // A operands, (s, r) major
  int64_t firstB = firstA + plan.ksteps * plan.tilesM * fixedA; // B descriptors, per k step
  int64_t one = firstB + plan.ksteps;
  int64_t scale = one + 1;
  // imm-trans-a exists only for shared 16-bit A; imm-trans-b only for 16-bit types
  std::string transposes;
  if (!fp8) {
    transposes = plan.registerA ? ", " : ", 0, ";
    transposes += plan.transB ? "1" : "0";
  }
  // (appends: GCC 12 warns falsely about string literal + std::string)
  std::string text = "{\n.reg .pred p, t;\nsetp.ne.b32 p, $";
  text += std::to_string(scale);
  text += ", 0;\nsetp.ne.b32 t, $";
  text += std::to_string(one);
  text += ", 0;";
  for (int64_t s = 0; s < plan.ksteps; ++s)
    for (int64_t r = 0; r < plan.tilesM; ++r) {
      text += "\nwgmma.mma_async.sync.aligned.m64n" + std::to_string(plan.n) + "k" +
              std::to_string(plan.atomK) + ".f32." + ptxType(ta) + "." + ptxType(tb) + " {";
      for (int64_t j = 0; j < q; ++j) {
        text += j ? ", $" : "$";
        text += std::to_string(r * q + j);
      }
      text += "}, ";
      if (plan.registerA)
        text += "{";
      for (int64_t j = 0; j < fixedA; ++j) {
        text += j ? ", $" : "$";
        text += std::to_string(firstA + (s * plan.tilesM + r) * fixedA + j);
      }
      if (plan.registerA)
        text += "}";
      text += ", $" + std::to_string(firstB + s);
      text += s == 0 ? ", p, 1, 1" : ", t, 1, 1";
      text += transposes + ";";
    }
  text += "\n}";
  std::string constraints;
  for (int64_t r = 0; r < total; ++r)
    constraints += "=f,";
  for (int64_t i = 0; i < plan.ksteps * plan.tilesM * fixedA; ++i)
    constraints += plan.registerA ? "r," : "l,";
  for (int64_t s = 0; s < plan.ksteps; ++s)
    constraints += "l,";
  constraints += "r,r";
  for (int64_t r = 0; r < total; ++r) {
    constraints += ',';
    constraints += std::to_string(r);
  }
  std::vector<llvm::Value *> args;
  for (int64_t s = 0; s < plan.ksteps; ++s)
    for (int64_t r = 0; r < plan.tilesM; ++r) {
      if (plan.registerA)
        for (int64_t j = 0; j < 4; ++j)
          args.push_back(registersA[size_t((r * plan.ksteps + s) * 4 + j)]);
      else
        args.push_back(descriptor(cg, plan.a, plan.wgM, plan.tilesM * plan.ksteps,
                                  r * plan.ksteps + s, wgI, originA));
    }
  for (int64_t s = 0; s < plan.ksteps; ++s)
    args.push_back(descriptor(cg, plan.b, plan.wgN, plan.ksteps, s, wgJ, originB));
  args.push_back(cg.constI32(1));
  args.push_back(cg.constI32(1));
  for (int64_t j = 0; j < total; ++j)
    args.push_back(slots[size_t(j)]);
  std::vector<llvm::Type *> outTypes(size_t(total), b.getFloatTy());
  llvm::Value *out = cg.volatileAsm(llvm::StructType::get(ctx, outTypes), text, constraints, args);
  for (int64_t j = 0; j < total; ++j)
    slots[size_t(j)] = b.CreateExtractValue(out, {unsigned(j)});
  cg.writeRegister(inst.results[0], slots);
  if (std::find(wgmmaAccumulators_.begin(), wgmmaAccumulators_.end(), vc) ==
      wgmmaAccumulators_.end())
    wgmmaAccumulators_.push_back(vc);
  return Status::success();
}

Status ContractionLowering::visitWgmmaFence(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  cg.volatileAsm(b.getVoidTy(), "wgmma.fence.sync.aligned;", "~{memory}", {});
  return Status::success();
}

Status ContractionLowering::visitWgmmaCommitGroup(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  cg.volatileAsm(b.getVoidTy(), "wgmma.commit_group.sync.aligned;", "~{memory}", {});
  return Status::success();
}

Status ContractionLowering::visitWgmmaWaitGroup(const Instruction &inst) {
  TILUSVM_TRY(cg.requireHopper(inst));
  int64_t n = inst.arg(ArgName::n).intValue;
  // Only a wait for every group completes every accumulator; after a wait with groups still
  // in flight, touching their registers (even through an asm, which may become a copy) would
  // make ptxas serialise the wgmma pipeline (C7514).
  if (n != 0) {
    cg.volatileAsm(b.getVoidTy(), "wgmma.wait_group.sync.aligned " + std::to_string(n) + ";",
                   "~{memory}", {});
    return Status::success();
  }
  // After the last wait, a memory fence: without it ptxas 13 still reports C7514 and serialises
  // every wgmma of a loop that keeps a group in flight across its back edge (WgmmaWaitGroup(1)
  // in the loop, WgmmaWaitGroup(0) after it), although no accumulator is read before this wait;
  // with it the pipeline stays asynchronous. The fence orders only this thread's memory
  // accesses, once per WgmmaWaitGroup(0).
  cg.volatileAsm(b.getVoidTy(), "wgmma.wait_group.sync.aligned 0;\n\tfence.acq_rel.cta;",
                 "~{memory}", {});
  for (VarId v : wgmmaAccumulators_) {
    std::vector<llvm::Value *> slots = cg.readRegister(v);
    // the tensor cores' NaN is not the ISA's canonical NaN (dropped where it cannot be seen)
    for (llvm::Value *&s : slots)
      s = cg.canonicalizeNaN(s, DataType::f32());
    cg.writeRegister(v, slots);
  }
  return Status::success();
}

} // namespace tilus::jit
