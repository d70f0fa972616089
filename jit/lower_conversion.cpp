// The conversions of register tensors: Cast (dtype conversion slot by slot, with the packed
// dequantisation fast paths of emit_dequant.cpp and the paired FP8, f16 and bf16 conversions
// of emit_convert.cpp), View, Permute (free: the slots are the same)
// and ConvertLayout (through the scratch area of shared memory).
//
// ConvertLayout: when every thread already owns the elements it needs in the new layout (the
// elementwise ownership rule) the conversion is a renaming of registers. Otherwise the source
// goes through the scratch area of shared memory (ProgramInfo::scratchByteOffset): the primary
// owners write every element at its row-major index, a barrier, every thread reads the elements
// of its new slots, and a second barrier frees the scratch area for the next user.
//
// View reinterprets the thread's bit stream (ISA section 2 packing): output slot j is bits
// [j * sr, (j + 1) * sr) of the concatenated input slots, assembled with shifts at compile time;
// a 32-bit slot of 8- or 16-bit slots that an earlier View or load cut from 32-bit words is one
// byte permute of at most two of those words (pack_bytes.h) where it can be.
#include "jit/lowering.h"

#include "jit/pack_bytes.h"

#include "isa/convert.h"

namespace tilus::jit {

Status ConversionLowering::visitCast(const Instruction &inst) {
  VarId r = inst.results[0];
  const Argument &a = inst.arg(ArgName::a);
  DataType rt = info.vars[r].dtype;
  DataType from = a.isTensor() ? info.vars[a.var].dtype : prog.expr(a.expr).dtype;
  Expected<std::vector<llvm::Value *>> xs = cg.operandSlots(inst, a, cg.layoutOf(r), from);
  if (!xs)
    return xs.takeStatus();
  if (std::optional<std::vector<llvm::Value *>> fast = cg.dequantize(*xs, from, rt)) {
    cg.writeRegister(r, *fast);
    return Status::success();
  }
  if (std::optional<std::vector<llvm::Value *>> fast = cg.quantizeFp8(*xs, from, rt)) {
    cg.writeRegister(r, *fast);
    return Status::success();
  }
  if (std::optional<std::vector<llvm::Value *>> fast = cg.narrowPairs(*xs, from, rt)) {
    cg.writeRegister(r, *fast);
    return Status::success();
  }
  std::vector<llvm::Value *> out;
  for (llvm::Value *x : *xs)
    out.push_back(cg.convert(x, from, rt));
  cg.writeRegister(r, out);
  return Status::success();
}

std::optional<std::vector<llvm::Value *>>
ConversionLowering::packedView(const std::vector<llvm::Value *> &in, DataType da, DataType dr) {
  int sa = da.storageBits();
  if (dr.storageBits() != 32 || dr.isBool() || da.isBool() || (sa != 8 && sa != 16) ||
      da.bits != sa)
    return std::nullopt;
  // the bytes of every input slot, in order (an unused byte or a failed word is dead code)
  std::vector<llvm::Value *> bytes;
  for (llvm::Value *x : in) {
    llvm::Value *bits = cg.toBits(x, da);
    for (int at = 0; at < sa; at += 8)
      bytes.push_back(b.CreateTrunc(at ? b.CreateLShr(bits, uint64_t(at)) : bits, b.getInt8Ty()));
  }
  std::optional<std::vector<llvm::Value *>> words = packTracedWords(b, bytes, 0, bytes.size());
  if (!words)
    return std::nullopt;
  for (llvm::Value *&w : *words)
    w = cg.fromBits(w, dr);
  return words;
}

Status ConversionLowering::visitView(const Instruction &inst) {
  VarId a = inst.arg(ArgName::a).var, r = inst.results[0];
  if (a == kNoId)
    return cg.error(ErrorCode::Scope, inst, "View of something other than a register tensor");
  DataType da = info.vars[a].dtype, dr = info.vars[r].dtype;
  int64_t na = info.vars[a].layout->numLocals(), nr = info.vars[r].layout->numLocals();
  int sa = da.storageBits(), sr = dr.storageBits();
  if (na * sa != nr * sr)
    return cg.error(ErrorCode::ViewBits, inst,
                    "View of " + std::to_string(na * sa) + " bits per thread into " +
                        std::to_string(nr * sr));
  std::vector<llvm::Value *> in = cg.readRegister(a);
  if (sa == sr && !da.isBool() && !dr.isBool()) { // slot j is slot j, its bits reinterpreted
    std::vector<llvm::Value *> out(in.size());
    for (size_t k = 0; k < in.size(); ++k)
      out[k] = da == dr ? in[k] : cg.fromBits(cg.toBits(in[k], da), dr);
    cg.writeRegister(r, out);
    return Status::success();
  }
  if (std::optional<std::vector<llvm::Value *>> words = packedView(in, da, dr)) {
    cg.writeRegister(r, *words);
    return Status::success();
  }
  std::vector<llvm::Value *> inBits(in.size());
  for (size_t k = 0; k < in.size(); ++k) {
    llvm::Value *bits = da.isBool() ? b.CreateZExt(in[k], b.getInt8Ty()) : cg.toBits(in[k], da);
    inBits[k] = b.CreateZExtOrTrunc(bits, b.getInt64Ty());
  }
  std::vector<llvm::Value *> out(static_cast<size_t>(nr));
  for (int64_t j = 0; j < nr; ++j) {
    int64_t lo = j * sr, hi = lo + sr;
    llvm::Value *v = nullptr;
    int64_t top = 0; // the assembled bits lie below bit `top`
    for (int64_t k = lo / sa; k < na && k * sa < hi; ++k) {
      int64_t pos = k * sa - lo; // where input k's bit 0 lands in output j
      llvm::Value *piece = inBits[size_t(k)];
      if (pos >= 64 || pos <= -64)
        continue;
      if (pos > 0)
        piece = b.CreateShl(piece, uint64_t(pos));
      else if (pos < 0)
        piece = b.CreateLShr(piece, uint64_t(-pos));
      top = std::max(top, std::min<int64_t>(64, pos + sa));
      v = v ? b.CreateOr(v, piece) : piece;
    }
    if (!v)
      v = cg.constI64(0);
    // the bits above the slot are cleared, where a piece reaches them and the truncation to
    // the result's bits below does not
    if (top > sr && (dr.isBool() || dr.bits != sr))
      v = b.CreateAnd(v, cg.constI64(int64_t(bitMask(sr))));
    if (dr.isBool()) {
      out[size_t(j)] = b.CreateICmpNE(v, cg.constI64(0));
      continue;
    }
    out[size_t(j)] = cg.fromBits(b.CreateTrunc(v, b.getIntNTy(dr.bits)), dr);
  }
  cg.writeRegister(r, out);
  return Status::success();
}

Status ConversionLowering::visitPermute(const Instruction &inst) {
  VarId a = inst.arg(ArgName::a).var;
  if (a == kNoId)
    return cg.error(ErrorCode::Scope, inst, "Permute of something other than a register tensor");
  cg.writeRegister(inst.results[0], cg.readRegister(a));
  return Status::success();
}

Status ConversionLowering::visitConvertLayout(const Instruction &inst) {
  VarId a = inst.arg(ArgName::a).var, r = inst.results[0];
  if (a == kNoId)
    return cg.error(ErrorCode::Scope, inst,
                    "ConvertLayout of something other than a register tensor");
  const LayoutMap &result = cg.layoutOf(r);
  const LayoutMap &source = cg.layoutOf(a);
  DataType t = info.vars[a].dtype;
  bool local = true;
  for (const SlotSource &src : *cg.slotSources(result, source))
    local = local && src.ok;
  if (local) {
    Expected<std::vector<llvm::Value *>> slots =
        cg.operandSlots(inst, inst.arg(ArgName::a), result, t);
    if (!slots)
      return slots.takeStatus();
    cg.writeRegister(r, *slots);
    return Status::success();
  }
  int elemBytes = scratchElementBytes(t);
  TILUSVM_TRY(cg.requireScratch(inst, source.shape(), elemBytes, "the conversion needs"));
  cg.stageToScratch(a, cg.readRegister(a), 0, elemBytes);
  cg.barrier();
  std::vector<llvm::Value *> out = cg.loadScratchSlots(result, elemBytes, t);
  cg.barrier();
  cg.writeRegister(r, out);
  return Status::success();
}

} // namespace tilus::jit
