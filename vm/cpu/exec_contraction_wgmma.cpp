// wgmma on the CPU (docs/isa.md, "wgmma"): Wgmma is a Dot of a shared or register A and a shared
// B that lands at the WgmmaWaitGroup covering it. The product is computed when the Wgmma is
// issued (the operands are read then, in double, rounded once to f32 like Dot); until the wait,
// the accumulator is pending: any instruction other than a further Wgmma into it that reads it
// is an error (BlockState::requireRegister); a register A stays "being read": an instruction
// that writes it, or reads it other than as the A operand of a further Wgmma, is an error
// (BlockState::checkWgmmaRegisterA); and the shared operands stay "being read": a write to them
// before the wait races (race detector). WgmmaFence has nothing to do on the CPU.
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"

namespace tilus::cpu {

namespace {

/// Logical elements (row-major) of a shared operand, recorded as reads of the whole block.
Status sharedOperand(BlockState &b, uint32_t index, VarId v, std::vector<double> &out,
                     std::vector<std::pair<VarId, int64_t>> &touched) {
  TILUSVM_TRY(b.requireShared(index, v));
  const SharedView &view = b.shareds[v];
  std::vector<OffsetValue> whole(view.shape.size(), OffsetValue{0, true});
  Expected<TileAccess> tile = sharedTile(view, whole, view.shape);
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  if (!tile->allValid())
    return b.fail(ErrorCode::OutOfBounds, index, "a Wgmma operand lies outside its shared tensor");
  int sb = view.dtype.storageBits();
  int64_t base = view.byteOffset * 8;
  out.assign(size_t(tile->elements()), 0.0);
  forEachTileElement(*tile, [&](int64_t e, const int64_t *, bool, int64_t off) {
    uint64_t raw = canonicalFromMemory(readBits(b.shared.data(), base + off * sb, sb), view.dtype);
    out[size_t(e)] = decodeFloat(raw, view.dtype);
    touched.emplace_back(view.root, off);
    if (b.race)
      b.race->sharedAsyncRead(view.root, off);
  });
  return Status::success();
}

/// Logical elements (row-major) of a register operand, each from its first owner.
Status registerOperand(BlockState &b, uint32_t index, VarId v, std::vector<double> &out) {
  TILUSVM_TRY(b.requireRegister(index, v));
  const LayoutTable &table = *b.plan.varTables[v];
  DataType t = b.info.vars[v].dtype;
  out.assign(size_t(table.elements), 0.0);
  for (int64_t e = 0; e < table.elements; ++e)
    out[size_t(e)] = decodeFloat(b.regs[v][size_t(table.firstOwner(e))], t);
  return Status::success();
}

} // namespace

Status Exec::visitWgmma(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId va = inst.arg(ArgName::a).var, vb = inst.arg(ArgName::b).var, vc = inst.arg(ArgName::c).var;
  const LayoutTable &tc = *b.plan.varTables[vc];
  if (b.regs[vc].size() != size_t(tc.numSlots()))
    return b.fail(ErrorCode::Runtime, index,
                  "register tensor `" + b.program.var(vc).name + "` is used before it is assigned");
  std::vector<double> fa, fb;
  std::vector<std::pair<VarId, int64_t>> touched;
  bool registerA = b.info.vars[va].kind == VarKind::Register;
  if (registerA)
    TILUSVM_TRY(registerOperand(b, index, va, fa));
  else
    TILUSVM_TRY(sharedOperand(b, index, va, fa, touched));
  TILUSVM_TRY(sharedOperand(b, index, vb, fb, touched));
  const std::vector<int64_t> &shapeA =
      registerA ? b.plan.varTables[va]->shape : b.shareds[va].shape;
  int64_t m = shapeA[0], k = shapeA[1], n = b.shareds[vb].shape[1];
  DataType dc = b.info.vars[vc].dtype;
  std::vector<uint64_t> &slots = b.regs[vc];
  // every owner of d[i, j] holds the same value: compute per element, write every slot
  std::vector<double> d(size_t(m * n));
  for (int64_t e = 0; e < m * n; ++e)
    d[size_t(e)] = decodeFloat(slots[size_t(tc.firstOwner(e))], dc);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t kk = 0; kk < k; ++kk) {
      double x = fa[size_t(i * k + kk)];
      if (x == 0.0)
        continue;
      for (int64_t j = 0; j < n; ++j)
        d[size_t(i * n + j)] += x * fb[size_t(kk * n + j)];
    }
  for (size_t s = 0; s < slots.size(); ++s)
    slots[s] = encodeFloat(d[size_t(tc.slotLinear[s])], dc);
  ++b.wgmmaPending[vc];
  b.wgmmaLast[vc] = index;
  if (registerA) {
    ++b.wgmmaReading[va];
    ++b.wgmmaRegisterReads;
    b.wgmmaReader[va] = index;
  }
  b.wgmmaUncommitted.push_back({vc, index, registerA ? va : kNoId, std::move(touched)});
  return Status::success();
}

Status Exec::visitWgmmaFence(BlockState &, uint32_t) { return Status::success(); }

Status Exec::visitWgmmaCommitGroup(BlockState &b, uint32_t) {
  b.wgmmaCommitted.push_back(std::move(b.wgmmaUncommitted));
  b.wgmmaUncommitted.clear();
  return Status::success();
}

Status Exec::visitWgmmaWaitGroup(BlockState &b, uint32_t index) {
  size_t n = size_t(b.program.instructions[index].arg(ArgName::n).intValue);
  while (b.wgmmaCommitted.size() > n) {
    for (const PendingWgmma &w : b.wgmmaCommitted.front()) {
      --b.wgmmaPending[w.accumulator];
      if (w.registerA != kNoId) {
        --b.wgmmaReading[w.registerA];
        --b.wgmmaRegisterReads;
      }
      if (b.race)
        for (const auto &[root, element] : w.operands)
          b.race->sharedAsyncReadEnd(root, element, w.instruction);
    }
    b.wgmmaCommitted.pop_front();
  }
  return Status::success();
}

} // namespace tilus::cpu
