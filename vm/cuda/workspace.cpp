// The global workspace: where AllocateGlobal tensors live on the device.
//
// The workspace outlives launches (AllocateGlobal with requires_clean promises zeroed memory
// across launches without a memset each time), yet must grow when a larger launch arrives
// while earlier kernels may still be reading the old buffer. Both needs are met per stream:
// growth retires the old buffer behind an event instead of freeing it, and a small interval
// set remembers which bytes another program may have dirtied, so clean regions are zeroed only
// when they could be dirty. See workspace.h for the plan's layout.
#include "vm/cuda/workspace.h"

#include "isa/convert.h"

#include <algorithm>

namespace tilus::cuda {
namespace {

constexpr uint64_t kMaxWorkspaceBytes = uint64_t(1) << 48;

bool dependsOnlyOnParams(const Program &program, ExprId id) {
  const ExprNode &node = program.expr(id);
  if (node.op == ExprOp::Var)
    return node.var < program.vars.size() && program.var(node.var).isParam;
  for (int i = 0; i < exprOpArity(node.op); ++i)
    if (!dependsOnlyOnParams(program, node.operands[i]))
      return false;
  return true;
}

uint64_t alignUp(uint64_t value, uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

Status regionError(const Program &program, uint32_t instruction, std::string message) {
  Location loc;
  loc.program = program.name;
  loc.instruction = instruction;
  if (instruction < program.instructions.size())
    loc.opcode = program.instructions[instruction].spec().name;
  return Status::error(ErrorCode::Runtime, std::move(message), std::move(loc));
}

} // namespace

Expected<WorkspacePlan> planWorkspace(const Program &program, const VarValueFn &paramValue) {
  WorkspacePlan plan;
  for (uint32_t index = 0; index < program.instructions.size(); ++index) {
    const Instruction &inst = program.instructions[index];
    if (inst.opcode != Opcode::AllocateGlobal)
      continue;
    const Argument &shape = inst.arg(ArgName::shape);
    const Argument &clean = inst.arg(ArgName::requires_clean);
    DataType dtype = inst.arg(ArgName::dtype).dtype;
    // elements * storageBits, kept below 2^48 * 8 bits so nothing overflows: each factor is
    // checked against the limit divided by the product so far before it is multiplied in, and
    // offsets and sums stay below 2^49.
    uint64_t bits = uint64_t(dtype.storageBits());
    for (size_t d = 0; d < shape.exprs.size(); ++d) {
      ExprId e = shape.exprs[d];
      if (!dependsOnlyOnParams(program, e))
        return regionError(program, index,
                           "AllocateGlobal shape dimension " + std::to_string(d) +
                               " depends on values other than parameters and constants");
      bool divisionByZero = false;
      int64_t extent =
          toInt64(evaluateExpr(program, e, paramValue, &divisionByZero), program.expr(e).dtype);
      if (divisionByZero)
        return regionError(program, index,
                           "AllocateGlobal shape dimension " + std::to_string(d) +
                               " divides by zero");
      if (extent < 0)
        return regionError(program, index,
                           "AllocateGlobal shape dimension " + std::to_string(d) + " is " +
                               std::to_string(extent));
      if (extent != 0 && bits > kMaxWorkspaceBytes * 8 / uint64_t(extent))
        return regionError(program, index, "AllocateGlobal needs more than 2^48 bytes");
      bits *= uint64_t(extent);
    }
    WorkspaceRegion region;
    region.instruction = index;
    region.offset = alignUp(plan.totalBytes, kWorkspaceAlignment);
    region.bytes = (bits + 7) / 8;
    region.requiresClean = clean.present && clean.intValue != 0;
    plan.totalBytes = region.offset + region.bytes;
    if (plan.totalBytes > kMaxWorkspaceBytes)
      return regionError(program, index, "the workspace needs more than 2^48 bytes");
    plan.regions.push_back(region);
  }
  return plan;
}

// ---- DirtyRanges -----------------------------------------------------------------------------

void DirtyRanges::add(uint64_t begin, uint64_t end) {
  if (begin >= end)
    return;
  std::vector<Range> merged;
  merged.reserve(ranges_.size() + 1);
  Range fresh{begin, end};
  bool placed = false;
  for (const Range &r : ranges_) {
    if (r.end < fresh.begin) {
      merged.push_back(r);
    } else if (fresh.end < r.begin) {
      if (!placed) {
        merged.push_back(fresh);
        placed = true;
      }
      merged.push_back(r);
    } else { // overlapping or touching: absorb
      fresh.begin = std::min(fresh.begin, r.begin);
      fresh.end = std::max(fresh.end, r.end);
    }
  }
  if (!placed)
    merged.push_back(fresh);
  ranges_ = std::move(merged);
}

std::vector<DirtyRanges::Range> DirtyRanges::takeClean(uint64_t begin, uint64_t end) {
  std::vector<Range> taken;
  if (begin >= end)
    return taken;
  std::vector<Range> kept;
  for (const Range &r : ranges_) {
    if (r.end <= begin || end <= r.begin) {
      kept.push_back(r);
      continue;
    }
    taken.push_back({std::max(r.begin, begin), std::min(r.end, end)});
    if (r.begin < begin)
      kept.push_back({r.begin, begin});
    if (end < r.end)
      kept.push_back({end, r.end});
  }
  ranges_ = std::move(kept);
  return taken;
}

std::vector<DirtyRanges::Range> DirtyRanges::overlapping(uint64_t begin, uint64_t end) const {
  std::vector<Range> found;
  if (begin >= end)
    return found;
  for (const Range &r : ranges_)
    if (r.begin < end && begin < r.end)
      found.push_back({std::max(r.begin, begin), std::min(r.end, end)});
  return found;
}

// ---- WorkspacePool ---------------------------------------------------------------------------

WorkspacePool::~WorkspacePool() {
  std::lock_guard lock(mutex_);
  for (Retired &r : retired_)
    api_.cuEventSynchronize(r.done.get());
  retired_.clear();
  slots_.clear();
  pinned_.clear();
}

void WorkspacePool::freeCompletedLocked() {
  std::erase_if(retired_,
                [&](Retired &r) { return api_.cuEventQuery(r.done.get()) == CUDA_SUCCESS; });
}

Status WorkspacePool::growLocked(StreamSlot &slot, uint64_t bytes, CUstream stream) {
  uint64_t grown = std::max(bytes, slot.buffer.bytes() + slot.buffer.bytes() / 2);
  grown = alignUp(grown, kWorkspaceAlignment);
  auto fresh = DeviceBuffer::allocate(api_, grown);
  if (!fresh.ok())
    return fresh.takeStatus();
  TILUSVM_TRY(TILUSVM_CU_CALL(api_, cuMemsetD8Async, fresh->address(), 0, size_t(grown), stream));
  if (slot.captured) {
    // Captured graphs keep this buffer's address: it lives as long as the pool.
    pinned_.push_back(std::move(slot.buffer));
  } else if (slot.buffer.bytes() != 0) {
    // Kernels queued on this stream may still use the old buffer: free it after them.
    auto done = EventHandle::create(api_, false);
    if (!done.ok())
      return done.takeStatus();
    TILUSVM_TRY(TILUSVM_CU_CALL(api_, cuEventRecord, done->get(), stream));
    retired_.push_back({std::move(slot.buffer), std::move(done.value())});
  }
  slot.buffer = std::move(fresh.value());
  slot.dirty.clear();
  slot.captured = false; // no graph has seen the new buffer
  slot.capturedDirty.clear();
  return Status::success();
}

Status WorkspacePool::reserve(CUstream stream, uint64_t bytes) {
  if (bytes == 0)
    return Status::success();
  std::lock_guard lock(mutex_);
  freeCompletedLocked();
  StreamSlot &slot = slots_[stream];
  if (slot.buffer.bytes() < bytes)
    TILUSVM_TRY(growLocked(slot, bytes, stream));
  return Status::success();
}

Status WorkspacePool::launchWith(const WorkspacePlan &plan, CUstream stream, bool capturing,
                                 const std::function<Status(CUdeviceptr)> &launch) {
  if (plan.totalBytes == 0)
    return launch(0);
  std::lock_guard lock(mutex_);
  if (capturing) {
    // Nothing that replay would have to redo: no allocation, no event query, no decision from
    // the dirty set (which describes the buffer now, not at replay).
    auto it = slots_.find(stream);
    uint64_t held = it == slots_.end() ? 0 : it->second.buffer.bytes();
    if (held < plan.totalBytes)
      return Status::error(ErrorCode::Usage,
                           "the launch needs " + std::to_string(plan.totalBytes) +
                               " bytes of workspace on this stream, which holds " +
                               std::to_string(held) + " (nothing is allocated during capture)");
    StreamSlot &slot = it->second;
    slot.captured = true;
    CUdeviceptr base = slot.buffer.address();
    for (const WorkspaceRegion &region : plan.regions) {
      if (region.requiresClean && region.bytes != 0)
        TILUSVM_TRY(TILUSVM_CU_CALL(api_, cuMemsetD8Async, base + region.offset, 0,
                                    size_t(region.bytes), stream));
      else if (!region.requiresClean)
        slot.capturedDirty.add(region.offset, region.offset + region.bytes);
    }
    return launch(base);
  }
  freeCompletedLocked();
  StreamSlot &slot = slots_[stream];
  if (slot.buffer.bytes() < plan.totalBytes)
    TILUSVM_TRY(growLocked(slot, plan.totalBytes, stream));
  CUdeviceptr base = slot.buffer.address();
  for (const WorkspaceRegion &region : plan.regions) {
    if (!region.requiresClean)
      continue;
    // Replays of captured graphs may have dirtied these bytes since anything was zeroed.
    for (const DirtyRanges::Range &r :
         slot.capturedDirty.overlapping(region.offset, region.offset + region.bytes))
      slot.dirty.add(r.begin, r.end);
    for (const DirtyRanges::Range &r :
         slot.dirty.takeClean(region.offset, region.offset + region.bytes))
      TILUSVM_TRY(TILUSVM_CU_CALL(api_, cuMemsetD8Async, base + r.begin, 0, size_t(r.end - r.begin),
                                  stream));
  }
  // Mark dirty before launching: even a failed launch may have queued work.
  for (const WorkspaceRegion &region : plan.regions)
    if (!region.requiresClean)
      slot.dirty.add(region.offset, region.offset + region.bytes);
  return launch(base);
}

uint64_t WorkspacePool::bytesHeld() const {
  std::lock_guard lock(mutex_);
  uint64_t total = 0;
  for (const auto &[stream, slot] : slots_)
    total += slot.buffer.bytes();
  for (const Retired &r : retired_)
    total += r.buffer.bytes();
  for (const DeviceBuffer &b : pinned_)
    total += b.bytes();
  return total;
}

uint64_t WorkspacePool::bytesOn(CUstream stream) const {
  std::lock_guard lock(mutex_);
  auto it = slots_.find(stream);
  return it == slots_.end() ? 0 : it->second.buffer.bytes();
}

Status zeroCleanRegions(const DriverApi &api, const WorkspacePlan &plan, CUdeviceptr base,
                        CUstream stream) {
  for (const WorkspaceRegion &region : plan.regions)
    if (region.requiresClean && region.bytes != 0)
      TILUSVM_TRY(TILUSVM_CU_CALL(api, cuMemsetD8Async, base + region.offset, 0,
                                  size_t(region.bytes), stream));
  return Status::success();
}

} // namespace tilus::cuda
