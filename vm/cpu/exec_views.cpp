// Tensor creation and memory views: BlockIndices, AllocateRegister, Iota, AllocateShared,
// AllocateGlobal, ViewGlobal, SliceGlobal and SliceShared. Views are evaluated when the
// instruction runs (their shapes, strides and offsets may depend on scalars of the block) and
// kept in the block state; loads, stores and copies then address memory through them.
#include "vm/cpu/exec.h"

#include "isa/convert.h"

namespace tilus::cpu {

namespace {

std::vector<int64_t> evalList(const BlockState &b, const std::vector<ExprId> &exprs) {
  std::vector<int64_t> values;
  values.reserve(exprs.size());
  for (ExprId e : exprs)
    values.push_back(b.evalInt(e));
  return values;
}

/// Coordinate `dim` of row-major element `linear` of `shape`.
int64_t coordinate(int64_t linear, const std::vector<int64_t> &shape, size_t dim) {
  for (size_t d = shape.size(); d-- > dim + 1;)
    linear /= shape[d];
  return linear % shape[dim];
}

} // namespace

Status Exec::visitBlockIndices(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  for (size_t k = 0; k < inst.results.size() && k < 3; ++k) {
    VarId r = inst.results[k];
    b.scalars[r] = fromInt64(b.index[k], b.program.var(r).dtype);
  }
  return Status::success();
}

Status Exec::visitAllocateRegister(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const LayoutTable &table = *b.plan.varTables[r];
  DataType dtype = inst.arg(ArgName::dtype).dtype;
  uint64_t value = 0;
  if (const Argument &init = inst.arg(ArgName::init); init.present)
    value = convertBits(b.eval(init.expr), b.program.expr(init.expr).dtype, dtype);
  std::vector<uint64_t> out = b.takeBuffer(size_t(table.numSlots()));
  std::fill(out.begin(), out.end(), value);
  b.setRegister(r, std::move(out));
  return Status::success();
}

Status Exec::visitIota(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const LayoutTable &table = *b.plan.varTables[r];
  const Argument &dtypeArg = inst.arg(ArgName::dtype);
  DataType dtype = dtypeArg.present ? dtypeArg.dtype : DataType::i32();
  int64_t dim = inst.arg(ArgName::dim).intValue;
  if (dim < 0 || size_t(dim) >= table.shape.size())
    return b.fail(ErrorCode::ReduceDim, index,
                  "Iota dimension " + std::to_string(dim) + " out of range for rank " +
                      std::to_string(table.shape.size()));
  std::vector<uint64_t> out = b.takeBuffer(size_t(table.numSlots()));
  for (size_t s = 0; s < out.size(); ++s)
    out[s] = fromInt64(coordinate(table.slotLinear[s], table.shape, size_t(dim)), dtype);
  b.setRegister(r, std::move(out));
  return Status::success();
}

Status Exec::visitAllocateShared(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const VarType &type = b.info.vars[r];
  if (!type.sharedLayout)
    return b.fail(ErrorCode::Runtime, index, "shared allocation without a layout");
  SharedView view;
  view.root = r;
  view.dtype = inst.arg(ArgName::dtype).dtype;
  view.layout = &*type.sharedLayout;
  view.byteOffset = type.sharedByteOffset;
  view.shape = view.layout->shape();
  view.origin.assign(view.shape.size(), 0);
  for (size_t d = 0; d < view.shape.size(); ++d)
    view.dims.push_back(int32_t(d));
  boundByShape(view);
  int64_t end = view.byteOffset + (view.layout->size() * view.dtype.storageBits() + 7) / 8;
  if (view.byteOffset < 0 || end > int64_t(b.shared.size()))
    return b.fail(ErrorCode::Runtime, index,
                  "shared allocation [" + std::to_string(view.byteOffset) + ", " +
                      std::to_string(end) + ") exceeds the block's " +
                      std::to_string(b.shared.size()) + " bytes of shared memory");
  b.shareds[r] = std::move(view);
  return Status::success();
}

Status Exec::visitAllocateGlobal(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  const WorkspaceRegion &region = b.plan.workspaceRegions[size_t(b.plan.workspaceRegionOf[index])];
  GlobalView view;
  view.base = b.plan.workspace.get() + region.byteOffset;
  view.byteSize = uint64_t(region.bytes);
  view.root = r;
  view.dtype = inst.arg(ArgName::dtype).dtype;
  view.shape = evalList(b, inst.arg(ArgName::shape).exprs);
  view.strides = rowMajorStrides(view.shape);
  boundByShape(view);
  b.globals[r] = std::move(view);
  return Status::success();
}

Status Exec::visitViewGlobal(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId r = inst.results[0];
  VarId ptr = inst.arg(ArgName::ptr).var;
  uint32_t k = ptr == kNoId ? kNoId : b.plan.paramIndex[ptr];
  if (k == kNoId)
    return b.fail(ErrorCode::Runtime, index,
                  "ViewGlobal of something other than a pointer parameter");
  const KernelArg &arg = (*b.plan.args)[k];
  GlobalView view;
  view.base = static_cast<uint8_t *>(arg.pointer);
  view.byteSize = arg.byteSize;
  view.root = r;
  view.buffer = ptr;
  const Argument &dtype = inst.arg(ArgName::dtype);
  view.dtype = dtype.present ? dtype.dtype : b.program.var(ptr).dtype;
  if (const Argument &shape = inst.arg(ArgName::shape); shape.present)
    view.shape = evalList(b, shape.exprs);
  else // the whole buffer, one-dimensional
    view.shape = {int64_t(arg.byteSize * 8 / uint64_t(view.dtype.storageBits()))};
  if (const Argument &strides = inst.arg(ArgName::strides); strides.present)
    view.strides = evalList(b, strides.exprs);
  else
    view.strides = rowMajorStrides(view.shape);
  if (view.strides.size() != view.shape.size())
    return b.fail(ErrorCode::ShapeMismatch, index,
                  "ViewGlobal has " + std::to_string(view.shape.size()) + " dimensions but " +
                      std::to_string(view.strides.size()) + " strides");
  boundByShape(view);
  b.globals[r] = std::move(view);
  return Status::success();
}

namespace {

/// SliceGlobal / SliceShared: `slice` (sliceGlobal / sliceShared, isa/view_rules.h) of the view
/// that argument `parentArg` names, at the offset= argument with the given shape= (empty: the
/// default), becomes the result's view in `views`.
template <class View, class Slice>
Status sliceView(BlockState &b, uint32_t index, std::vector<View> &views, ArgName parentArg,
                 const std::vector<int64_t> &shape, Slice slice) {
  const Instruction &inst = b.program.instructions[index];
  const View &parent = views[inst.arg(parentArg).var];
  Expected<View> view =
      slice(parent, b.offsets(inst.arg(ArgName::offset), parent.shape.size()), shape);
  if (!view)
    return b.fail(view.status().code(), index, view.status().first().message);
  views[inst.results[0]] = std::move(*view);
  return Status::success();
}

} // namespace

Status Exec::visitSliceGlobal(BlockState &b, uint32_t index) {
  const Argument &shape = b.program.instructions[index].arg(ArgName::shape);
  return sliceView(b, index, b.globals, ArgName::g,
                   shape.present ? evalList(b, shape.exprs) : std::vector<int64_t>(), sliceGlobal);
}

Status Exec::visitSliceShared(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  TILUSVM_TRY(b.requireShared(index, inst.arg(ArgName::s).var));
  const Argument &shape = inst.arg(ArgName::shape);
  return sliceView(b, index, b.shareds, ArgName::s,
                   shape.present ? shape.ints : std::vector<int64_t>(), sliceShared);
}

Status Exec::visitPermuteShared(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  TILUSVM_TRY(b.requireShared(index, inst.arg(ArgName::s).var));
  const SharedView &parent = b.shareds[inst.arg(ArgName::s).var];
  SharedView view = parent;
  const std::vector<int64_t> &dims = inst.arg(ArgName::dims).ints;
  for (size_t k = 0; k < dims.size(); ++k) {
    size_t d = size_t(dims[k]);
    view.dims[k] = parent.dims[d];
    view.shape[k] = parent.shape[d];
    view.lo[k] = parent.lo[d];
    view.hi[k] = parent.hi[d];
  }
  b.shareds[inst.results[0]] = std::move(view);
  return Status::success();
}

} // namespace tilus::cpu
