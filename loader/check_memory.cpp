// Typing rules of memory tensors and data movement (ISA sections 3.2, 3.3, 4 "Offsets" and 5
// "Data movement"): allocations and views of shared and global memory, slices, loads, stores
// and asynchronous copies; the block's shared-memory plan; provable shared out-of-bounds.
//
// A memory tensor is a view: VarType::root is the AllocateShared / ViewGlobal / AllocateGlobal
// result, VarType::slices the SliceShared / SliceGlobal chain. Shared tensors have static
// shapes, so accesses whose constant offsets, or whose tile lengths alone, leave the tensor are
// rejected here (out-of-bounds); global tensors have run-time shapes and read zeros / drop
// writes outside them, so only the offset's structure is checked.
//
// Offsets (checkAccess): one entry per dimension of the memory tensor (offset-rank); a fixed
// entry `e` selects index e, a slice entry `e:` takes its length from the next dimension of the
// tile (the register tensor, or the shared tensor for CopyAsync), so the number of slice
// entries equals the tile's rank (offset-rank). Example: LoadShared(sa [3, 64, 32],
// layout=<[64, 32]>, offset=[stage, 0:, 0:]) is in bounds for every stage in [0, 3); a
// constant stage 3 is provably out of bounds.
#include "loader/checker_impl.h"

#include <limits>

namespace tilus::detail {

namespace {

int64_t alignUp(int64_t value, int64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Bytes of `elements` elements of `dtype`, bit-packed, saturating.
int64_t storageBytes(int64_t elements, DataType dtype) {
  int64_t bits = dtype.storageBits();
  if (elements > (std::numeric_limits<int64_t>::max() - 7) / bits)
    return std::numeric_limits<int64_t>::max();
  return (elements * bits + 7) / 8;
}

} // namespace

bool ProgramChecker::checkIntExprs(const std::vector<ExprId> &exprs, const char *what) {
  for (size_t k = 0; k < exprs.size(); ++k)
    if (!isIntegerExpr(exprs[k]))
      return fail(ErrorCode::DtypeMismatch, std::string(what) + " entry " + std::to_string(k) +
                                                " has type " + exprTypeName(exprs[k]) +
                                                "; expected an integer");
  return true;
}

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
  if (!offset) {
    if (memory.rank != tileShape.size())
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
  if (entries.size() != memory.rank)
    return fail(ErrorCode::OffsetRank,
                op() + " offset has " + counted(int64_t(entries.size()), "entry", "entries") +
                    " but " + memoryName() + " has rank " + std::to_string(memory.rank));
  size_t slices = 0;
  for (const OffsetEntry &e : entries)
    slices += e.slice ? 1 : 0;
  if (slices != tileShape.size())
    return fail(ErrorCode::OffsetRank,
                op() + " offset has " + counted(int64_t(slices), "slice entry", "slice entries") +
                    " but " + tileName + " has rank " + std::to_string(tileShape.size()));
  size_t j = 0;
  for (size_t d = 0; d < entries.size(); ++d) {
    const OffsetEntry &e = entries[d];
    if (!isIntegerExpr(e.expr))
      return fail(ErrorCode::DtypeMismatch, op() + " offset entry " + std::to_string(d) +
                                                " has type " + exprTypeName(e.expr) +
                                                "; expected an integer");
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

bool ProgramChecker::visitAllocateShared(const Instruction &inst, Results &r) {
  DataType dtype = inst.arg(ArgName::dtype).dtype;
  const std::vector<int64_t> &shape = inst.arg(ArgName::shape).ints;
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] <= 0)
      return fail(ErrorCode::BadArgument, "AllocateShared shape=" + shapeString(shape) +
                                              " has a non-positive dimension " + std::to_string(d));
  const int64_t limit = options_.target.maxSharedBytes;
  auto tooBig = [&](int64_t bytes) {
    capacityReported_ = true;
    return fail(ErrorCode::SharedCapacity, "AllocateShared of " + std::string(dtype.name()) +
                                               shapeString(shape) + " needs " +
                                               std::to_string(bytes) + " bytes but sm_" +
                                               std::to_string(options_.target.smVersion) +
                                               " allows " + std::to_string(limit) + " per block");
  };
  if (storageBytes(shapeElements(shape), dtype) > limit)
    return tooBig(storageBytes(shapeElements(shape), dtype));
  SharedLayout layout;
  if (const Argument *la = optionalArg(inst, ArgName::layout)) {
    if (la->sharedLayout->shape() != shape)
      return fail(ErrorCode::LayoutShape, "shared layout " + la->sharedLayout->toString() +
                                              " has shape " +
                                              shapeString(la->sharedLayout->shape()) +
                                              " but the tensor has shape " + shapeString(shape));
    if (storageBytes(la->sharedLayout->size(), dtype) > limit)
      return tooBig(storageBytes(la->sharedLayout->size(), dtype));
    if (!la->sharedLayout->isInjective())
      return fail(ErrorCode::LayoutInvalid, "shared layout " + la->sharedLayout->toString() +
                                                " maps two indices to one offset");
    layout = *la->sharedLayout;
  } else {
    Expected<SharedLayout> rm = SharedLayout::rowMajor(shape);
    if (!rm)
      return fail(rm.status().code(), rm.status().first().message);
    layout = *rm;
  }
  VarType t;
  t.kind = VarKind::Shared;
  t.dtype = dtype;
  t.shape = shape;
  t.rank = shape.size();
  t.root = inst.results[0];
  t.sharedByteOffset = alignUp(sharedEnd_, 128);
  sharedEnd_ = t.sharedByteOffset + storageBytes(layout.size(), dtype);
  t.sharedLayout = std::move(layout);
  r[0] = std::move(t);
  return true;
}

bool ProgramChecker::visitAllocateGlobal(const Instruction &inst, Results &r) {
  const std::vector<ExprId> &shape = inst.arg(ArgName::shape).exprs;
  if (!checkIntExprs(shape, "AllocateGlobal shape"))
    return false;
  info_.usesWorkspace = true;
  VarType t;
  t.kind = VarKind::Global;
  t.dtype = inst.arg(ArgName::dtype).dtype;
  t.rank = shape.size();
  t.root = inst.results[0];
  r[0] = std::move(t);
  return true;
}

bool ProgramChecker::visitViewGlobal(const Instruction &inst, Results &r) {
  const Argument &ptr = inst.arg(ArgName::ptr);
  if (ptr.var == kNoId || info_.vars[ptr.var].kind != VarKind::Pointer)
    return fail(ErrorCode::Scope,
                "ViewGlobal of " + (ptr.var == kNoId ? std::string("a scalar") : varName(ptr.var)) +
                    ": expected a pointer parameter");
  const Argument *dt = optionalArg(inst, ArgName::dtype);
  const Argument *shape = optionalArg(inst, ArgName::shape);
  const Argument *strides = optionalArg(inst, ArgName::strides);
  if (strides && !shape)
    return fail(ErrorCode::BadArgument, "ViewGlobal strides= needs shape=");
  if (strides && strides->exprs.size() != shape->exprs.size())
    return fail(ErrorCode::ShapeMismatch,
                "ViewGlobal strides has " +
                    counted(int64_t(strides->exprs.size()), "entry", "entries") +
                    " but shape has " + std::to_string(shape->exprs.size()));
  if ((shape && !checkIntExprs(shape->exprs, "ViewGlobal shape")) ||
      (strides && !checkIntExprs(strides->exprs, "ViewGlobal strides")))
    return false;
  views_.emplace_back(ptr.var, uint32_t(curInstruction_));
  VarType t;
  t.kind = VarKind::Global;
  t.dtype = dt ? dt->dtype : info_.vars[ptr.var].dtype;
  t.rank = shape ? shape->exprs.size() : 1;
  t.root = inst.results[0];
  r[0] = std::move(t);
  return true;
}

bool ProgramChecker::visitSliceGlobal(const Instruction &inst, Results &r) {
  const VarType *g = tensorArg(inst, ArgName::g, VarKind::Global);
  if (!g)
    return false;
  const std::vector<OffsetEntry> &entries = inst.arg(ArgName::offset).offsets;
  if (entries.size() != g->rank)
    return fail(ErrorCode::OffsetRank,
                "SliceGlobal offset has " + counted(int64_t(entries.size()), "entry", "entries") +
                    " but the global tensor has rank " + std::to_string(g->rank));
  size_t slices = 0;
  for (size_t d = 0; d < entries.size(); ++d) {
    slices += entries[d].slice ? 1 : 0;
    if (!isIntegerExpr(entries[d].expr))
      return fail(ErrorCode::DtypeMismatch, "SliceGlobal offset entry " + std::to_string(d) +
                                                " has type " + exprTypeName(entries[d].expr) +
                                                "; expected an integer");
  }
  if (const Argument *shape = optionalArg(inst, ArgName::shape)) {
    if (shape->exprs.size() != slices)
      return fail(
          ErrorCode::OffsetRank,
          "SliceGlobal shape has " + counted(int64_t(shape->exprs.size()), "entry", "entries") +
              " but the offset has " + counted(int64_t(slices), "slice entry", "slice entries"));
    if (!checkIntExprs(shape->exprs, "SliceGlobal shape"))
      return false;
  }
  VarType t = *g;
  t.rank = slices;
  t.slices.push_back(uint32_t(curInstruction_));
  r[0] = std::move(t);
  return true;
}

/// One offset entry of SliceShared: bounds of a constant start, and for a slice entry its
/// length (from shape= or the remaining extent), appended to `shape`.
bool ProgramChecker::checkSharedSliceEntry(const VarType &s, size_t d, const OffsetEntry &e,
                                           const Argument *shapeArg, std::vector<int64_t> &shape) {
  if (!isIntegerExpr(e.expr))
    return fail(ErrorCode::DtypeMismatch, "SliceShared offset entry " + std::to_string(d) +
                                              " has type " + exprTypeName(e.expr) +
                                              "; expected an integer");
  const int64_t dim = s.shape[d];
  std::optional<int64_t> c = constValue(e.expr);
  auto where = [&] {
    return " of dimension " + std::to_string(d) + " (length " + std::to_string(dim) + ")";
  };
  if (c && (*c < 0 || *c >= dim))
    return fail(ErrorCode::OutOfBounds,
                "SliceShared offset " + std::to_string(*c) + " is outside" + where());
  if (!e.slice)
    return true;
  int64_t len = 0;
  if (shapeArg) {
    len = shapeArg->ints[shape.size()];
    if (len <= 0)
      return fail(ErrorCode::BadArgument, "SliceShared shape entry " +
                                              std::to_string(shape.size()) + " is " +
                                              std::to_string(len) + "; must be positive");
  } else if (c) {
    len = dim - *c;
  } else {
    return fail(ErrorCode::BadArgument,
                "SliceShared slice" + where() + " starts at a run-time offset; give shape=");
  }
  if (len > dim || (c && *c + len > dim))
    return fail(ErrorCode::OutOfBounds, "SliceShared slice of length " + std::to_string(len) +
                                            (c ? " at " + std::to_string(*c) : std::string()) +
                                            " leaves" + where());
  shape.push_back(len);
  return true;
}

bool ProgramChecker::visitSliceShared(const Instruction &inst, Results &r) {
  const VarType *s = tensorArg(inst, ArgName::s, VarKind::Shared);
  if (!s)
    return false;
  const std::vector<OffsetEntry> &entries = inst.arg(ArgName::offset).offsets;
  const Argument *shapeArg = optionalArg(inst, ArgName::shape);
  if (entries.size() != s->rank)
    return fail(ErrorCode::OffsetRank,
                "SliceShared offset has " + counted(int64_t(entries.size()), "entry", "entries") +
                    " but the shared tensor has rank " + std::to_string(s->rank));
  size_t slices = 0;
  for (const OffsetEntry &e : entries)
    slices += e.slice ? 1 : 0;
  if (shapeArg && shapeArg->ints.size() != slices)
    return fail(
        ErrorCode::OffsetRank,
        "SliceShared shape has " + counted(int64_t(shapeArg->ints.size()), "entry", "entries") +
            " but the offset has " + counted(int64_t(slices), "slice entry", "slice entries"));
  std::vector<int64_t> shape;
  for (size_t d = 0; d < entries.size(); ++d)
    if (!checkSharedSliceEntry(*s, d, entries[d], shapeArg, shape))
      return false;
  VarType t = *s;
  t.shape = shape;
  t.rank = shape.size();
  t.slices.push_back(uint32_t(curInstruction_));
  t.sharedLayout.reset();
  t.sharedByteOffset = 0;
  r[0] = std::move(t);
  return true;
}

bool ProgramChecker::visitLoadGlobal(const Instruction &inst, Results &r) {
  const VarType *g = tensorArg(inst, ArgName::g, VarKind::Global);
  if (!g)
    return false;
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (!checkAccess(inst, *g, inst.arg(ArgName::g).var, layout.shape(), "the layout"))
    return false;
  r[0] = registerType(g->dtype, layout);
  return true;
}

bool ProgramChecker::visitLoadShared(const Instruction &inst, Results &r) {
  const VarType *s = tensorArg(inst, ArgName::s, VarKind::Shared);
  if (!s)
    return false;
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (!checkAccess(inst, *s, inst.arg(ArgName::s).var, layout.shape(), "the layout"))
    return false;
  r[0] = registerType(s->dtype, layout);
  return true;
}

namespace {
std::string dtypePair(const char *op, DataType a, DataType b) {
  return std::string(op) + " of " + a.name() + " into " + b.name() +
         " memory: dtypes must agree (Cast first)";
}
} // namespace

bool ProgramChecker::visitStoreGlobal(const Instruction &inst, Results &) {
  const VarType *reg = tensorArg(inst, ArgName::r, VarKind::Register);
  const VarType *g = reg ? tensorArg(inst, ArgName::g, VarKind::Global) : nullptr;
  if (!g)
    return false;
  if (reg->dtype != g->dtype)
    return fail(ErrorCode::DtypeMismatch, dtypePair("StoreGlobal", reg->dtype, g->dtype));
  return checkAccess(inst, *g, inst.arg(ArgName::g).var, reg->shape, "the register tensor");
}

bool ProgramChecker::visitStoreShared(const Instruction &inst, Results &) {
  const VarType *reg = tensorArg(inst, ArgName::r, VarKind::Register);
  const VarType *s = reg ? tensorArg(inst, ArgName::s, VarKind::Shared) : nullptr;
  if (!s)
    return false;
  if (reg->dtype != s->dtype)
    return fail(ErrorCode::DtypeMismatch, dtypePair("StoreShared", reg->dtype, s->dtype));
  return checkAccess(inst, *s, inst.arg(ArgName::s).var, reg->shape, "the register tensor");
}

bool ProgramChecker::visitCopyAsync(const Instruction &inst, Results &) {
  const VarType *s = tensorArg(inst, ArgName::s, VarKind::Shared);
  const VarType *g = s ? tensorArg(inst, ArgName::g, VarKind::Global) : nullptr;
  if (!g)
    return false;
  if (s->dtype != g->dtype)
    return fail(ErrorCode::DtypeMismatch, dtypePair("CopyAsync", g->dtype, s->dtype));
  return checkAccess(inst, *g, inst.arg(ArgName::g).var, s->shape, "the shared tensor");
}

bool ProgramChecker::visitCopyAsyncWaitGroup(const Instruction &inst, Results &) {
  int64_t n = inst.arg(ArgName::n).intValue;
  if (n < 0)
    return fail(ErrorCode::BadArgument,
                "CopyAsyncWaitGroup n=" + std::to_string(n) + " must not be negative");
  return true;
}

} // namespace tilus::detail
