// Typing rules of tensor creation and memory views (ISA sections 3.2, 3.3, 4 "Offsets" and 5
// "Indexing and tensor creation"): BlockIndices, AllocateRegister, Iota, allocations and views
// of shared and global memory and their slices; the block's shared-memory plan.
//
// A memory tensor is a view: VarType::root is the AllocateShared / ViewGlobal / AllocateGlobal
// result, VarType::slices the SliceShared / SliceGlobal chain. Shared tensors have static
// shapes, so slices whose constant starts leave the tensor are rejected here (out-of-bounds);
// global tensors have run-time shapes, so only the structure of their slices is checked.
#include "loader/checker_impl.h"

#include "isa/view_rules.h"

#include <limits>

namespace tilus::detail {

namespace {

bool containsSwizzle(const SharedLayout &layout) {
  if (layout.kind() == SharedLayout::Kind::Swizzle)
    return true;
  for (const auto &child : layout.children())
    if (containsSwizzle(*child))
      return true;
  return false;
}

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

bool ProgramChecker::visitBlockIndices(const Instruction &inst, Results &r) {
  if (inst.results.size() > prog_.grid.size())
    return fail(ErrorCode::BadArgument,
                "BlockIndices gives " + counted(int64_t(inst.results.size()), "index", "indices") +
                    " but the grid has " +
                    counted(int64_t(prog_.grid.size()), "dimension", "dimensions"));
  for (VarType &t : r)
    t = VarType{VarKind::Scalar, DataType::i32()};
  return true;
}

bool ProgramChecker::visitAllocateRegister(const Instruction &inst, Results &r) {
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (const Argument *shape = optionalArg(inst, ArgName::shape))
    if (!checkLayoutShape(layout, shape->ints, "layout"))
      return false;
  r[0] = registerType(inst.arg(ArgName::dtype).dtype, layout);
  return true;
}

bool ProgramChecker::visitIota(const Instruction &inst, Results &r) {
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  int64_t dim = inst.arg(ArgName::dim).intValue;
  int64_t rank = int64_t(layout.shape().size());
  if (dim < 0 || dim >= rank)
    return fail(ErrorCode::BadArgument, "Iota dim=" + std::to_string(dim) +
                                            " is out of range for rank " + std::to_string(rank));
  const Argument *dt = optionalArg(inst, ArgName::dtype);
  DataType dtype = dt ? dt->dtype : DataType::i32();
  if (!dtype.isArithmetic() || dtype.isBool())
    return fail(ErrorCode::DtypeMismatch, std::string("Iota of ") + dtype.name() +
                                              ": expected an 8- to 64-bit integer or f16, bf16, "
                                              "f32, f64");
  r[0] = registerType(dtype, layout);
  return true;
}

bool ProgramChecker::checkIntExprs(const std::vector<ExprId> &exprs, const char *op,
                                   const char *what) {
  for (size_t k = 0; k < exprs.size(); ++k)
    if (!checkInteger(exprs[k], op, what, int64_t(k)))
      return false;
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
  // Swizzled layouts start on a 1024-byte boundary, so that the swizzle of element offsets is
  // also the hardware's swizzle of addresses (wgmma descriptors, docs/isa.md "wgmma").
  t.sharedByteOffset = alignUp(sharedEnd_, containsSwizzle(layout) ? 1024 : 128);
  sharedEnd_ = t.sharedByteOffset + storageBytes(layout.size(), dtype);
  t.sharedLayout = std::move(layout);
  r[0] = std::move(t);
  return true;
}

bool ProgramChecker::visitAllocateGlobal(const Instruction &inst, Results &r) {
  const std::vector<ExprId> &shape = inst.arg(ArgName::shape).exprs;
  if (!checkIntExprs(shape, "AllocateGlobal", "shape"))
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
  if ((shape && !checkIntExprs(shape->exprs, "ViewGlobal", "shape")) ||
      (strides && !checkIntExprs(strides->exprs, "ViewGlobal", "strides")))
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

bool ProgramChecker::checkSliceRank(const Instruction &inst, const VarType &parent,
                                    size_t sliceDims) {
  const std::vector<OffsetEntry> &entries = inst.arg(ArgName::offset).offsets;
  size_t slices = sliceEntries(entries);
  std::string op = inst.spec().name;
  switch (offsetRank(entries.size(), slices, parent.rank, sliceDims)) {
  case OffsetRank::Holds:
    return true;
  case OffsetRank::EntryCount:
    return fail(ErrorCode::OffsetRank,
                op + " offset has " + counted(int64_t(entries.size()), "entry", "entries") +
                    " but the " + (parent.kind == VarKind::Shared ? "shared" : "global") +
                    " tensor has rank " + std::to_string(parent.rank));
  case OffsetRank::SliceCount:
    return fail(ErrorCode::OffsetRank,
                op + " shape has " + counted(int64_t(sliceDims), "entry", "entries") +
                    " but the offset has " +
                    counted(int64_t(slices), "slice entry", "slice entries"));
  }
  return true;
}

bool ProgramChecker::visitSliceGlobal(const Instruction &inst, Results &r) {
  const VarType *g = tensorArg(inst, ArgName::g, VarKind::Global);
  if (!g)
    return false;
  const std::vector<OffsetEntry> &entries = inst.arg(ArgName::offset).offsets;
  if (!checkSliceRank(inst, *g, kAnySliceCount))
    return false;
  for (size_t d = 0; d < entries.size(); ++d)
    if (!checkInteger(entries[d].expr, "SliceGlobal", "offset", int64_t(d)))
      return false;
  if (const Argument *shape = optionalArg(inst, ArgName::shape))
    if (!checkSliceRank(inst, *g, shape->exprs.size()) ||
        !checkIntExprs(shape->exprs, "SliceGlobal", "shape"))
      return false;
  VarType t = *g;
  t.rank = sliceEntries(entries);
  t.slices.push_back(uint32_t(curInstruction_));
  r[0] = std::move(t);
  return true;
}

/// One offset entry of SliceShared: bounds of a constant start, and for a slice entry its
/// length (from shape= or the remaining extent), appended to `shape`.
bool ProgramChecker::checkSharedSliceEntry(const VarType &s, size_t d, const OffsetEntry &e,
                                           const Argument *shapeArg, std::vector<int64_t> &shape) {
  if (!checkInteger(e.expr, "SliceShared", "offset", int64_t(d)))
    return false;
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
  if (!checkSliceRank(inst, *s, shapeArg ? shapeArg->ints.size() : kAnySliceCount))
    return false;
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

/// PermuteShared (docs/isa.md, "PermuteShared"): the view's dimension i is s's dims[i].
bool ProgramChecker::visitPermuteShared(const Instruction &inst, Results &r) {
  const VarType *s = tensorArg(inst, ArgName::s, VarKind::Shared);
  if (!s)
    return false;
  const std::vector<int64_t> &dims = inst.arg(ArgName::dims).ints;
  if (!isPermutation(dims, s->rank))
    return fail(ErrorCode::BadArgument, "PermuteShared dims=" + shapeString(dims) +
                                            " is not a permutation of the " +
                                            std::to_string(s->rank) + " dimensions of " +
                                            varName(inst.arg(ArgName::s).var));
  VarType t = *s;
  for (size_t k = 0; k < dims.size(); ++k)
    t.shape[k] = s->shape[size_t(dims[k])];
  t.slices.push_back(uint32_t(curInstruction_));
  t.sharedLayout.reset();
  t.sharedByteOffset = 0;
  r[0] = std::move(t);
  return true;
}

} // namespace tilus::detail
