// Typing rules of data movement (ISA sections 4 "Offsets" and 5 "Data movement"): loads,
// stores and asynchronous copies between register, shared and global tensors; provable shared
// out-of-bounds.
//
// Shared tensors have static shapes, so accesses whose constant offsets, or whose tile lengths
// alone, leave the tensor are rejected here (out-of-bounds); global tensors have run-time
// shapes and read zeros / drop writes outside them, so only the offset's structure is checked.
//
// Offsets (checkAccess): one entry per dimension of the memory tensor (offset-rank); a fixed
// entry `e` selects index e, a slice entry `e:` takes its length from the next dimension of the
// tile (the register tensor, or the shared tensor for CopyAsync), so the number of slice
// entries equals the tile's rank (offset-rank). Example: LoadShared(sa [3, 64, 32],
// layout=<[64, 32]>, offset=[stage, 0:, 0:]) is in bounds for every stage in [0, 3); a
// constant stage 3 is provably out of bounds.
#include "loader/checker_impl.h"

#include "isa/view_rules.h"

namespace tilus::detail {

bool ProgramChecker::checkAccess(const Instruction &inst, const VarType &memory, VarId memoryVar,
                                 const std::vector<int64_t> &tileShape, const char *tileName) {
  // Messages are built only on failure: this runs for every load, store and copy.
  const bool shared = memory.kind == VarKind::Shared;
  auto op = [&] { return std::string(inst.spec().name); };
  auto memoryName = [&] {
    return std::string(shared ? "shared tensor " : "global tensor ") + varName(memoryVar);
  };
  auto dimWords = [&](size_t d) {
    return "dimension " + std::to_string(d) + " (length " + std::to_string(memory.shape[d]) +
           ") of " + memoryName();
  };
  const Argument *offset = optionalArg(inst, ArgName::offset);
  if (!offset) { // every dimension a slice from 0
    if (offsetRank(memory.rank, memory.rank, memory.rank, tileShape.size()) != OffsetRank::Holds)
      return fail(ErrorCode::OffsetRank, op() + " without offset=: " + memoryName() + " has rank " +
                                             std::to_string(memory.rank) + " and " + tileName +
                                             " rank " + std::to_string(tileShape.size()));
    for (size_t d = 0; shared && d < tileShape.size(); ++d)
      if (tileShape[d] > memory.shape[d])
        return fail(ErrorCode::OutOfBounds, op() + ": " + tileName + " length " +
                                                std::to_string(tileShape[d]) + " exceeds " +
                                                dimWords(d));
    return true;
  }
  const std::vector<OffsetEntry> &entries = offset->offsets;
  size_t slices = sliceEntries(entries);
  switch (offsetRank(entries.size(), slices, memory.rank, tileShape.size())) {
  case OffsetRank::Holds:
    break;
  case OffsetRank::EntryCount:
    return fail(ErrorCode::OffsetRank,
                op() + " offset has " + counted(int64_t(entries.size()), "entry", "entries") +
                    " but " + memoryName() + " has rank " + std::to_string(memory.rank));
  case OffsetRank::SliceCount:
    return fail(ErrorCode::OffsetRank,
                op() + " offset has " + counted(int64_t(slices), "slice entry", "slice entries") +
                    " but " + tileName + " has rank " + std::to_string(tileShape.size()));
  }
  size_t j = 0;
  for (size_t d = 0; d < entries.size(); ++d) {
    const OffsetEntry &e = entries[d];
    if (!checkInteger(e.expr, inst.spec().name, "offset", int64_t(d)))
      return false;
    int64_t len = e.slice ? tileShape[j++] : 1;
    if (!shared)
      continue;
    if (len > memory.shape[d])
      return fail(ErrorCode::OutOfBounds, op() + ": " + tileName + " length " +
                                              std::to_string(len) + " exceeds " + dimWords(d));
    std::optional<int64_t> c = constValue(e.expr);
    if (c && (*c < 0 || *c > memory.shape[d] - len))
      return fail(ErrorCode::OutOfBounds, op() + ": " +
                                              (e.slice ? "indices [" + std::to_string(*c) + ", " +
                                                             std::to_string(*c + len) + ")"
                                                       : "index " + std::to_string(*c)) +
                                              " outside " + dimWords(d));
  }
  return true;
}

bool ProgramChecker::checkLoad(const Instruction &inst, ArgName memory, VarKind kind, Results &r) {
  const VarType *m = tensorArg(inst, memory, kind);
  if (!m)
    return false;
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (!checkAccess(inst, *m, inst.arg(memory).var, layout.shape(), "the layout"))
    return false;
  r[0] = registerType(m->dtype, layout);
  return true;
}

bool ProgramChecker::visitLoadGlobal(const Instruction &inst, Results &r) {
  return checkLoad(inst, ArgName::g, VarKind::Global, r);
}

bool ProgramChecker::visitLoadShared(const Instruction &inst, Results &r) {
  return checkLoad(inst, ArgName::s, VarKind::Shared, r);
}

bool ProgramChecker::checkTransfer(const Instruction &inst, ArgName tile, VarKind tileKind,
                                   ArgName memory, VarKind memoryKind, bool memoryIsSource) {
  const VarType *t = tensorArg(inst, tile, tileKind);
  const VarType *m = t ? tensorArg(inst, memory, memoryKind) : nullptr;
  if (!m)
    return false;
  if (t->dtype != m->dtype) {
    DataType from = memoryIsSource ? m->dtype : t->dtype, to = memoryIsSource ? t->dtype : m->dtype;
    return fail(ErrorCode::DtypeMismatch, std::string(inst.spec().name) + " of " + from.name() +
                                              " into " + to.name() +
                                              " memory: dtypes must agree (Cast first)");
  }
  return checkAccess(inst, *m, inst.arg(memory).var, t->shape,
                     tileKind == VarKind::Shared ? "the shared tensor" : "the register tensor");
}

bool ProgramChecker::visitStoreGlobal(const Instruction &inst, Results &) {
  return checkTransfer(inst, ArgName::r, VarKind::Register, ArgName::g, VarKind::Global, false);
}

bool ProgramChecker::visitStoreShared(const Instruction &inst, Results &) {
  return checkTransfer(inst, ArgName::r, VarKind::Register, ArgName::s, VarKind::Shared, false);
}

bool ProgramChecker::visitCopyAsync(const Instruction &inst, Results &) {
  return checkTransfer(inst, ArgName::s, VarKind::Shared, ArgName::g, VarKind::Global, true);
}

/// The global or shared tensor of LoadScalar / StoreScalar (argument `which`) whose offset has
/// one fixed index per entry; nullptr after a failure (`op` and `relation` start the message:
/// "LoadScalar" "of", "StoreScalar" "into").
const VarType *ProgramChecker::scalarElement(const Instruction &inst, ArgName which, const char *op,
                                             const char *relation) {
  const Argument &x = inst.arg(which);
  VarKind kind = x.var != kNoId ? info_.vars[x.var].kind : VarKind::Scalar;
  if (kind != VarKind::Global && kind != VarKind::Shared) {
    fail(ErrorCode::Scope, std::string(op) + " " + relation + " " +
                               (x.var != kNoId ? varName(x.var) : std::string("a scalar")) +
                               ": expected a global or shared tensor");
    return nullptr;
  }
  for (const OffsetEntry &e : inst.arg(ArgName::offset).offsets)
    if (e.slice) {
      fail(ErrorCode::OffsetRank,
           std::string(op) + " offset entries must be fixed indices `e`, not slices `e:`");
      return nullptr;
    }
  return &info_.vars[x.var];
}

/// LoadScalar (docs/isa.md): one element of a global or shared tensor, every offset entry a
/// fixed index, converted to a scalar type. The result depends on memory, so it is neither
/// constant nor parameter-only (ExprFacts): it never takes part in a bounds proof or a grid.
bool ProgramChecker::visitLoadScalar(const Instruction &inst, Results &r) {
  const VarType *memory = scalarElement(inst, ArgName::x, "LoadScalar", "of");
  if (!memory)
    return false;
  DataType dtype = inst.arg(ArgName::dtype).dtype;
  if (!dtype.isArithmetic())
    return fail(ErrorCode::DtypeMismatch, std::string("LoadScalar dtype=") + dtype.name() +
                                              ": a scalar is bool, an 8- to 64-bit integer or "
                                              "f16, bf16, f32, f64");
  if (!checkAccess(inst, *memory, inst.arg(ArgName::x).var, {}, "the scalar"))
    return false;
  r[0] = VarType{VarKind::Scalar, dtype};
  return true;
}

/// StoreScalar (docs/isa.md): one element of a global or shared tensor of at least 8 bits, every
/// offset entry a fixed index, written with a scalar expression's value.
bool ProgramChecker::visitStoreScalar(const Instruction &inst, Results &) {
  const VarType *memory = scalarElement(inst, ArgName::dst, "StoreScalar", "into");
  if (!memory)
    return false;
  VarId dst = inst.arg(ArgName::dst).var;
  if (memory->dtype.storageBits() < 8)
    return fail(ErrorCode::DtypeMismatch,
                "StoreScalar into " + varName(dst) + " of " + memory->dtype.name() +
                    ": a sub-byte element shares its byte with its neighbours; use StoreGlobal "
                    "or StoreShared of a tile");
  return checkAccess(inst, *memory, dst, {}, "the scalar");
}

bool ProgramChecker::visitCopyAsyncWaitGroup(const Instruction &inst, Results &) {
  return checkGroupCount(inst, std::nullopt);
}

bool ProgramChecker::visitCopyAsyncCommitGroup(const Instruction &, Results &) { return true; }

bool ProgramChecker::visitCopyAsyncWaitAll(const Instruction &, Results &) { return true; }

} // namespace tilus::detail
