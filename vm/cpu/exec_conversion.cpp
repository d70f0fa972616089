// The conversions of register tensors: View (bit reinterpretation of each thread's local
// slots) and Permute (free: the layout is permuted with the data). Cast and ConvertLayout stage
// their operand like the elementwise rows and run in exec_elementwise.cpp.
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"

#include <algorithm>

namespace tilus::cpu {

namespace {

uint64_t getBits(const std::vector<uint64_t> &words, int64_t at, int n) {
  size_t w = size_t(at >> 6);
  int shift = int(at & 63);
  uint64_t v = words[w] >> shift;
  if (shift + n > 64)
    v |= words[w + 1] << (64 - shift);
  return v & bitMask(n);
}

void putBits(std::vector<uint64_t> &words, int64_t at, int n, uint64_t v) {
  v &= bitMask(n);
  size_t w = size_t(at >> 6);
  int shift = int(at & 63);
  words[w] |= v << shift;
  if (shift + n > 64)
    words[w + 1] |= v >> (64 - shift);
}

} // namespace

Status Exec::visitView(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId a = inst.arg(ArgName::a).var, r = inst.results[0];
  const LayoutTable &at = *b.plan.varTables[a], &rt = *b.plan.varTables[r];
  DataType da = b.info.vars[a].dtype, dr = b.info.vars[r].dtype;
  int sa = da.storageBits(), sr = dr.storageBits();
  if (at.threads != rt.threads || at.locals * sa != rt.locals * sr)
    return b.fail(ErrorCode::ViewBits, index,
                  "View of " + std::to_string(at.locals * sa) + " bits per thread into " +
                      std::to_string(rt.locals * sr) + " bits per thread");
  TILUSVM_TRY(b.requireRegister(index, a));
  const std::vector<uint64_t> &src = b.regs[a];
  std::vector<uint64_t> out = b.takeBuffer(size_t(rt.numSlots()));
  std::vector<uint64_t> words(size_t((at.locals * sa + 63) / 64) + 1);
  for (int64_t t = 0; t < at.threads; ++t) {
    std::fill(words.begin(), words.end(), 0);
    for (int64_t i = 0; i < at.locals; ++i) // the thread's bits, element 0 least significant
      putBits(words, i * sa, sa, src[size_t(t * at.locals + i)]);
    for (int64_t j = 0; j < rt.locals; ++j)
      out[size_t(t * rt.locals + j)] = canonicalFromMemory(getBits(words, j * sr, sr), dr);
  }
  b.setRegister(r, std::move(out));
  return Status::success();
}

Status Exec::visitPermute(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId a = inst.arg(ArgName::a).var, r = inst.results[0];
  TILUSVM_TRY(b.requireRegister(index, a));
  const std::vector<uint64_t> &src = b.regs[a];
  if (src.size() != size_t(b.plan.varTables[r]->numSlots()))
    return b.fail(ErrorCode::Runtime, index,
                  "Permute of `" + b.program.var(a).name + "` changes the number of slots");
  // L'(t, i) is L(t, i) with its coordinates permuted: every slot keeps its value.
  std::vector<uint64_t> out = b.takeBuffer(src.size());
  std::copy(src.begin(), src.end(), out.begin());
  b.setRegister(r, std::move(out));
  return Status::success();
}

Status Exec::visitCast(BlockState &b, uint32_t index) { return visitElementwise(b, index); }

Status Exec::visitConvertLayout(BlockState &b, uint32_t index) {
  return visitElementwise(b, index);
}

} // namespace tilus::cpu
