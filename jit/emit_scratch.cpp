// The scratch area of shared memory (ProgramInfo::scratchByteOffset), through which
// ConvertLayout, Reduce, Dot and the atomics move values between threads: a register tensor is
// staged row-major, one slot of scratchElementBytes per element, by its primary owners.
#include "jit/codegen.h"

namespace tilus::jit {

llvm::Value *Codegen::scratchBase() {
  llvm::Value *base = b.CreateGEP(b.getInt8Ty(), sharedBase(),
                                  constI64(info.scratchByteOffset + group_.scratchOffset));
  if (group_.copyScratch != nullptr)
    base = b.CreateGEP(b.getInt8Ty(), base, group_.copyScratch);
  return base;
}

Codegen::ScratchSlots Codegen::scratchSlots(const LayoutMap &map, int64_t byteOffset,
                                            int elemBytes) {
  // sum_d (S_d + Loc_d(i)) stride_d: the thread's part once, each slot's a constant offset
  const std::vector<llvm::Value *> &s = threadPart(map);
  std::vector<int64_t> strides = rowMajorStrides(map.shape());
  llvm::Value *threadLinear = constI64(0);
  for (int d = 0; d < map.rank(); ++d)
    threadLinear =
        addFolded(b, threadLinear, mulFolded(b, s[size_t(d)], constI64(strides[size_t(d)])));
  ScratchSlots out{scratchAddress(threadLinear, byteOffset, elemBytes), {}};
  for (int64_t i = 0; i < map.locals(); ++i) {
    int64_t c = 0;
    for (int d = 0; d < map.rank(); ++d)
      c += map.localPart(i)[d] * strides[size_t(d)];
    out.offsets.push_back(c * elemBytes);
  }
  return out;
}

void Codegen::stageToScratch(VarId v, const std::vector<llvm::Value *> &slots, int64_t byteOffset,
                             int elemBytes) {
  const LayoutMap &map = layoutOf(v);
  DataType t = info.vars[v].dtype;
  int64_t elements = 1;
  for (int64_t n : map.shape())
    elements *= n;
  scratchUsed_ = std::max(scratchUsed_, group_.scratchOffset + byteOffset + elements * elemBytes);
  groupScratchUsed_ = std::max(groupScratchUsed_, byteOffset + elements * elemBytes);
  emitIf(isPrimary(map), "stage", [&] {
    ScratchSlots at = scratchSlots(map, byteOffset, elemBytes);
    for (int64_t i = 0; i < map.locals(); ++i) {
      llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), at.first, constI64(at.offsets[size_t(i)]));
      llvm::Value *value = slots[size_t(i)];
      if (t.isBool() || t.isSubByte())
        value = b.CreateZExt(toBits(value, t), b.getInt8Ty());
      b.CreateAlignedStore(value, addr, llvm::Align(uint64_t(elemBytes)));
    }
  });
}

llvm::Value *Codegen::scratchAddress(llvm::Value *linear, int64_t byteOffset, int elemBytes) {
  llvm::Value *base = b.CreateGEP(b.getInt8Ty(), scratchBase(), constI64(byteOffset));
  return b.CreateGEP(b.getInt8Ty(), base, mulFolded(b, linear, constI64(elemBytes)));
}

llvm::Value *Codegen::loadScratchAt(llvm::Value *addr, int elemBytes, DataType t) {
  if (t.isBool() || t.isSubByte()) {
    llvm::Value *byte = b.CreateAlignedLoad(b.getInt8Ty(), addr, llvm::Align(1));
    if (t.isBool())
      return b.CreateICmpNE(byte, b.getInt8(0));
    return fromBits(b.CreateTrunc(byte, b.getIntNTy(t.bits)), t);
  }
  return b.CreateAlignedLoad(elemType(t), addr, llvm::Align(uint64_t(elemBytes)));
}

llvm::Value *Codegen::loadScratchElement(llvm::Value *linear, int64_t byteOffset, int elemBytes,
                                         DataType t) {
  return loadScratchAt(scratchAddress(linear, byteOffset, elemBytes), elemBytes, t);
}

std::vector<llvm::Value *> Codegen::loadScratchSlots(const LayoutMap &map, int elemBytes,
                                                     DataType t) {
  ScratchSlots at = scratchSlots(map, 0, elemBytes);
  std::vector<llvm::Value *> out(size_t(map.locals()));
  for (int64_t i = 0; i < map.locals(); ++i)
    out[size_t(i)] = loadScratchAt(
        b.CreateGEP(b.getInt8Ty(), at.first, constI64(at.offsets[size_t(i)])), elemBytes, t);
  return out;
}

Status Codegen::requireScratch(const Instruction &inst, const std::vector<int64_t> &shape,
                               int elemBytes, const std::string &need) {
  int64_t elements = 1;
  for (int64_t n : shape)
    elements *= n;
  if (elements * elemBytes <= scratchLimit())
    return Status::success();
  return error(ErrorCode::Runtime, inst,
               "scratch area of " + std::to_string(scratchLimit()) + " bytes is smaller than the " +
                   std::to_string(elements * elemBytes) + " bytes " + need);
}

} // namespace tilus::jit
