// Operands of the register-tensor instructions, parallel to the result's local slots.
//
// Operands are matched to result slots at compile time (gatherSlots): a thread that owns a
// result element owns the broadcast operand element (checker rule layout-mismatch), so the
// operand value is one of the thread's own registers. When the operand slot is the same for
// every thread the register is used directly; otherwise (rare: e.g. a replicated operand with
// more locals than the result) the slot index is computed from the thread index and a short
// select chain picks the register.
#include "jit/codegen.h"

#include <set>

namespace tilus::jit {

namespace {

/// The operand's local slot for result slot i as a run-time value (see gatherSlots).
llvm::Value *runtimeSlot(Codegen &cg, const LayoutMap &result, int64_t i,
                         const LayoutMap &operand) {
  llvm::IRBuilder<> &b = cg.b;
  const std::vector<llvm::Value *> &s = cg.threadPart(result);
  std::vector<llvm::Value *> x(size_t(result.rank()));
  for (int d = 0; d < result.rank(); ++d)
    x[size_t(d)] = b.CreateAdd(s[size_t(d)], b.getInt64(uint64_t(result.localPart(i)[d])));
  // broadcast (right-aligned; size-1 dimensions read index 0)
  size_t r = x.size(), o = operand.shape().size();
  std::vector<llvm::Value *> y(o);
  for (size_t k = 0; k < o; ++k)
    y[k] = operand.shape()[k] == 1 ? b.getInt64(0) : x[r - o + k];
  llvm::Value *slot = b.getInt64(0);
  for (const LayoutTerm &term : operand.localTerms()) {
    llvm::Value *digit =
        b.CreateURem(b.CreateUDiv(y[size_t(term.dim)], b.getInt64(uint64_t(term.stride))),
                     b.getInt64(uint64_t(term.size)));
    slot = b.CreateAdd(slot, b.CreateMul(digit, b.getInt64(uint64_t(term.div))));
  }
  return slot;
}

llvm::Value *selectByIndex(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &values,
                           llvm::Value *index, const std::vector<int64_t> &perThread) {
  std::set<int64_t> candidates(perThread.begin(), perThread.end());
  llvm::Value *v = values[size_t(*candidates.begin())];
  for (int64_t c : candidates)
    if (c != *candidates.begin())
      v = b.CreateSelect(b.CreateICmpEQ(index, b.getInt64(uint64_t(c))), values[size_t(c)], v);
  return v;
}

} // namespace

Expected<std::vector<llvm::Value *>> Codegen::operandSlots(const Instruction &inst,
                                                           const Argument &arg,
                                                           const LayoutMap &result, DataType t) {
  std::vector<llvm::Value *> out(size_t(result.locals()));
  if (!arg.isTensor()) {
    llvm::Value *v = scalarArg(arg, t);
    std::fill(out.begin(), out.end(), v);
    return out;
  }
  const VarType &type = info.vars[arg.var];
  if (type.kind != VarKind::Register)
    return error(ErrorCode::Scope, inst,
                 "operand `" + prog.var(arg.var).name + "` is not a register tensor");
  std::vector<llvm::Value *> values = readRegister(arg.var);
  for (llvm::Value *&v : values)
    v = convert(v, type.dtype, t);
  const LayoutMap &operand = layoutOf(arg.var);
  std::shared_ptr<const std::vector<SlotSource>> sources = slotSources(result, operand);
  for (int64_t i = 0; i < result.locals(); ++i) {
    const SlotSource &src = (*sources)[size_t(i)];
    if (!src.ok)
      return error(ErrorCode::LayoutMismatch, inst,
                   "operand `" + prog.var(arg.var).name + "` is not owned by the result's threads");
    out[size_t(i)] = src.uniform ? values[size_t(src.slot)]
                                 : selectByIndex(b, values, runtimeSlot(*this, result, i, operand),
                                                 src.perThread);
  }
  return out;
}

} // namespace tilus::jit
