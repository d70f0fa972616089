// Typing rules of TmaLoad and TmaStore (docs/isa.md, "Tensor-memory-accelerator loads" and
// "... stores"): TmaLoad(s, g, bar=b, offset=[..]) copies the tile of the tensor-map view g at
// the offset into the shared tensor s by the tensor memory accelerator, completing at the
// mbarrier b; TmaStore(s, g, offset=[..]) copies s into the tile of g in a bulk async-group.
//
// The global tensor must be something the runtime can describe with a tensor map before the launch:
// a ViewGlobal of a pointer parameter with a shape (and strides) over parameters and constants, an
// innermost stride of 1, rank 1 to 5, elements of 8 to 64 bits. The box is the tile's shape with
// a 1 at each fixed offset entry (extents up to 256). A view of higher rank is accepted when
// merging each inner dimension that the tile covers whole from 0 into the one outside it
// (mergeTensorMapDims) leaves at most 5: the tensor map then has the merged dimensions.
//
// The shared tile's layout must be what the hardware writes (or reads, for a store): a box lands
// densely and row-major at its start address B, element x at swz(B + rowmajor(box)(x) * bytes), swz
// being Swizzle<b, 4, 3> on byte addresses (b = 3, 2, 1 for the 128-, 64- and 32-byte modes) or the
// identity. A tile is one box, or for a swizzled mode boxes of one swizzle row (16 << b bytes)
// side by side along the innermost dimension. As for wgmma's descriptors, the decision is made
// on the addresses themselves, for every value the run-time parts of the view's origin can take,
// so the JIT issues every box at a fixed distance from the view's origin.
#include "loader/checker_impl.h"

namespace tilus::detail {

namespace {

constexpr size_t kMaxTmaRank = 5;
constexpr int64_t kMaxBoxExtent = 256;
constexpr size_t kMaxBoxes = 32;

/// A box decomposition of one swizzle mode: boxes along the innermost dimension of `width`
/// elements each.
struct Decomposition {
  int bits = 0; // swizzle: 3, 2, 1 or 0 (none)
  int64_t width = 0;
};

} // namespace

bool ProgramChecker::checkTensorMapView(const Instruction &inst, const VarType &g, VarId gVar,
                                        uint32_t &viewIndex) {
  std::string name = std::string(inst.spec().name) +
                     (inst.opcode != Opcode::TmaStore ? " from " : " into ") + varName(gVar);
  if (!g.slices.empty())
    return fail(ErrorCode::Tma, name + ": a tensor map describes a whole ViewGlobal; this is a "
                                       "SliceGlobal of one (put the slice's origin into the "
                                       "TmaLoad's offset= instead)");
  viewIndex = kNoId;
  for (const auto &[ptr, idx] : views_)
    if (prog_.instructions[idx].results[0] == g.root)
      viewIndex = idx;
  if (viewIndex == kNoId)
    return fail(ErrorCode::Tma, name + ": the source is not a ViewGlobal of a pointer parameter "
                                       "(a workspace tensor has no tensor map)");
  const Instruction &view = prog_.instructions[viewIndex];
  const Argument *shape = optionalArg(view, ArgName::shape);
  if (!shape)
    return fail(ErrorCode::Tma, name + ": its ViewGlobal has no shape=, which a tensor map needs");
  if (g.rank < 1)
    return fail(ErrorCode::Tma, name + ": rank 0; a tensor map has 1 to 5 dimensions");
  auto paramsOnly = [&](const std::vector<ExprId> &exprs, const char *what) {
    for (size_t d = 0; d < exprs.size(); ++d)
      if (!exprFacts_[exprs[d]].paramsOnly)
        return fail(ErrorCode::Tma, name + ": its ViewGlobal " + what + " entry " +
                                        std::to_string(d) +
                                        " depends on more than scalar parameters and constants, "
                                        "so no tensor map can be built before the launch");
    return true;
  };
  if (!paramsOnly(shape->exprs, "shape"))
    return false;
  if (const Argument *strides = optionalArg(view, ArgName::strides)) {
    if (!paramsOnly(strides->exprs, "strides"))
      return false;
    std::optional<int64_t> inner = constValue(strides->exprs.back());
    if (!inner || *inner != 1)
      return fail(ErrorCode::Tma, name + ": its innermost stride is not the constant 1; a "
                                         "tensor map reads rows of contiguous elements");
  }
  int bits = g.dtype.storageBits();
  if (bits != 8 && bits != 16 && bits != 32 && bits != 64)
    return fail(ErrorCode::Tma, name + ": elements of " + g.dtype.name() + " (" +
                                    std::to_string(bits) +
                                    " bits); a tensor map's elements are 8, 16, 32 or 64 bits "
                                    "wide (view sub-byte data as u8)");
  return true;
}

bool ProgramChecker::mergeTensorMapDims(const Instruction &inst, uint32_t viewIndex,
                                        const std::vector<int64_t> &box,
                                        std::vector<uint32_t> &groups,
                                        std::vector<int64_t> &scales) {
  const Instruction &view = prog_.instructions[viewIndex];
  const std::vector<ExprId> &shape = view.arg(ArgName::shape).exprs;
  const Argument *strides = optionalArg(view, ArgName::strides);
  const Argument *offset = optionalArg(inst, ArgName::offset);
  const size_t r = shape.size();
  groups.assign(r, 1);
  scales.assign(r, 1);
  if (r <= kMaxTmaRank)
    return true;
  // dimension d (neither the outermost nor the innermost) joins the one outside it when the tile
  // covers it whole from 0 (a constant extent, a slice entry starting at the constant 0) and the
  // strides nest (the view's default strides, or constants with stride[d - 1] = extent[d] *
  // stride[d]): the joined coordinate is then out of range exactly when the outer one is
  std::vector<bool> joins(r, false);
  std::string apart; // the inner dimensions that stay apart, for the message
  for (size_t d = 1; d + 1 < r; ++d) {
    std::optional<int64_t> extent = constValue(shape[d]);
    bool whole = extent && box[d] == *extent &&
                 (!offset || offset->offsets.empty() ||
                  (offset->offsets[d].slice && constValue(offset->offsets[d].expr) == 0));
    bool nest = true;
    if (strides) {
      std::optional<int64_t> outer = constValue(strides->exprs[d - 1]);
      std::optional<int64_t> inner = constValue(strides->exprs[d]);
      nest = extent && outer && inner && *outer == *extent * *inner;
    }
    joins[d] = whole && nest;
    if (!joins[d])
      apart += (apart.empty() ? "" : ", ") + std::to_string(d);
  }
  std::vector<uint32_t> merged;
  std::vector<int64_t> factors;
  for (size_t d = 0; d < r; ++d) {
    if (joins[d]) {
      merged.back() += 1;
      // saturated above the largest box extent (every joined extent is a box extent of at most
      // 256, and the merged box is checked against 256 below)
      factors.back() = std::min(factors.back() * *constValue(shape[d]), kMaxBoxExtent + 1);
    } else {
      merged.push_back(1);
      factors.push_back(1);
    }
  }
  if (merged.size() > kMaxTmaRank)
    return fail(ErrorCode::Tma,
                std::string(inst.spec().name) + " from " + varName(inst.arg(ArgName::g).var) +
                    ": rank " + std::to_string(r) + ", and " + std::to_string(merged.size()) +
                    " after merging the dimensions the tile covers whole; a tensor map has 1 to "
                    "5 (dimensions " +
                    apart +
                    " stay apart: an inner dimension merges into the one outside it only where "
                    "the tile covers it whole from 0, its extent a constant, and its stride "
                    "nests in that dimension's)");
  groups = std::move(merged);
  scales = std::move(factors);
  return true;
}

bool ProgramChecker::visitTmaLoad(const Instruction &inst, Results &) {
  return checkTransfer(inst, ArgName::s, VarKind::Shared, ArgName::g, VarKind::Global, true) &&
         checkMbarrierOperand(inst, ArgName::bar) && planTma(inst);
}

bool ProgramChecker::visitTmaStore(const Instruction &inst, Results &) {
  return checkTransfer(inst, ArgName::s, VarKind::Shared, ArgName::g, VarKind::Global, false) &&
         planTma(inst);
}

bool ProgramChecker::visitTmaStoreCommitGroup(const Instruction &, Results &) { return true; }

bool ProgramChecker::visitTmaStoreWaitGroup(const Instruction &inst, Results &) {
  return checkGroupCount(inst, std::nullopt);
}

bool ProgramChecker::planTma(const Instruction &inst) {
  const char *op = inst.spec().name;
  const char *into = inst.opcode != Opcode::TmaStore ? " into " : " from ";
  VarId sVar = inst.arg(ArgName::s).var, gVar = inst.arg(ArgName::g).var;
  const VarType &s = info_.vars[sVar];
  const VarType &g = info_.vars[gVar];
  uint32_t viewIndex = kNoId;
  if (!checkTensorMapView(inst, g, gVar, viewIndex))
    return false;
  // the box: the tile's extents, 1 at fixed offset entries
  std::vector<int64_t> box;
  const Argument *offset = optionalArg(inst, ArgName::offset);
  if (!offset)
    box = s.shape;
  else {
    size_t j = 0;
    for (const OffsetEntry &e : offset->offsets)
      box.push_back(e.slice ? s.shape[j++] : 1);
    // the box's rows run along the tensor's innermost dimension, which the tile must span
    if (!offset->offsets.empty() && !offset->offsets.back().slice)
      return fail(ErrorCode::Tma, std::string(op) + " offset: the last entry is a fixed index, "
                                                    "but a box's rows are along the innermost "
                                                    "dimension (make it a slice entry `e:`)");
  }
  for (size_t d = 0; d < box.size(); ++d)
    if (box[d] > kMaxBoxExtent)
      return fail(ErrorCode::Tma, std::string(op) + " box " + shapeString(box) + ": extent " +
                                      std::to_string(box[d]) + " of dimension " +
                                      std::to_string(d) + " exceeds 256");
  // the tensor map's dimensions: the view's, or above rank 5 groups of them
  std::vector<uint32_t> groups;
  std::vector<int64_t> scales;
  if (!mergeTensorMapDims(inst, viewIndex, box, groups, scales))
    return false;
  std::vector<int64_t> groupBox;
  for (size_t i = 0, d = 0; i < groups.size(); d += groups[i++]) {
    int64_t extent = box[d] * scales[i];
    if (extent > kMaxBoxExtent)
      return fail(ErrorCode::Tma, std::string(op) + " box " + shapeString(box) + ": dimensions " +
                                      std::to_string(d) + " to " +
                                      std::to_string(d + groups[i] - 1) +
                                      ", merged into one of the tensor map's, span " +
                                      std::to_string(extent) + " elements, more than 256");
    groupBox.push_back(extent);
  }
  // the shared layout: the first decomposition that gives every element its address
  SharedViewAddresses view;
  std::string why;
  if (!sharedViewAddresses(s, view, why))
    return fail(ErrorCode::Tma, op + (into + varName(sVar)) + ": " + why);
  const int64_t bytes = view.elemBytes;
  const int64_t inner = s.shape.empty() ? 1 : s.shape.back();
  std::vector<Decomposition> modes;
  for (int b : {3, 2, 1})
    modes.push_back({b, (int64_t(16) << b) / bytes});
  modes.push_back({0, inner});
  std::string reasons; // why each mode failed: "128-byte swizzle: ...; no swizzle: ..."
  auto reject = [&](const Decomposition &mode, const std::string &why) {
    reasons += (reasons.empty() ? "" : "; ") +
               (mode.bits ? std::to_string(16 << mode.bits) + "-byte swizzle: " : "no swizzle: ") +
               why;
  };
  for (const Decomposition &mode : modes) {
    int64_t rowBytes = mode.width * bytes;
    if (mode.width <= 0 || inner % mode.width != 0 || size_t(inner / mode.width) > kMaxBoxes) {
      reject(mode, "the innermost extent " + std::to_string(inner) +
                       " is not a multiple of its rows of " + std::to_string(mode.width) +
                       " elements (at most 32 rows)");
      continue;
    }
    if (mode.bits == 0 && rowBytes % 16 != 0) {
      reject(mode, "rows of " + std::to_string(rowBytes) + " bytes, not a multiple of 16");
      continue;
    }
    const int64_t boxes = inner / mode.width;
    const int64_t align = mode.bits == 0 ? 128 : 8 * (int64_t(16) << mode.bits);
    const int64_t mask = ((int64_t(1) << mode.bits) - 1) << 4;
    TmaPlan plan;
    std::string failure;
    // the tile's elements in row-major order, split into the boxes along the innermost dim
    int64_t elements = shapeElements(s.shape);
    std::vector<int64_t> tileBox = s.shape;
    if (!tileBox.empty())
      tileBox.back() = mode.width;
    int64_t boxElements = shapeElements(tileBox);
    for (size_t o = 0; o < view.origins.size() && failure.empty(); ++o) {
      std::vector<int64_t> zero(s.shape.size(), 0);
      int64_t originAddr = view.address(o, zero);
      for (int64_t p = 0; p < boxes && failure.empty(); ++p) {
        std::vector<int64_t> first(s.shape.size(), 0);
        if (!first.empty())
          first.back() = p * mode.width;
        int64_t start = elements > 0 ? view.address(o, first) : originAddr;
        if (o == 0)
          plan.boxes.push_back({start - originAddr, p * mode.width});
        else if (start - originAddr != plan.boxes[size_t(p)].sharedDelta) {
          failure = "box " + std::to_string(p) +
                    " is not at a fixed distance from the view's "
                    "origin for every stage";
          break;
        }
        if (start % align != 0) {
          failure = "box " + std::to_string(p) + " starts at shared byte " + std::to_string(start) +
                    ", not a multiple of " + std::to_string(align);
          break;
        }
        // element i of the box in row-major order is x (the box's columns shifted by p
        // widths), stepped like an odometer
        std::vector<int64_t> x(tileBox.size(), 0);
        if (!x.empty())
          x.back() = p * mode.width;
        for (int64_t i = 0; i < boxElements; ++i) {
          int64_t addr = start + i * bytes;
          addr ^= (addr >> 3) & mask;
          int64_t want = view.address(o, x);
          if (addr != want) {
            failure = "element " + shapeString(x) + " is at shared byte " + std::to_string(want) +
                      ", the box writes it at " + std::to_string(addr);
            break;
          }
          for (size_t d = x.size(); d-- > 0;) {
            int64_t low = d + 1 == x.size() ? p * mode.width : 0;
            if (++x[d] < low + tileBox[d])
              break;
            x[d] = low;
          }
        }
      }
    }
    if (!failure.empty()) {
      reject(mode, failure);
      continue;
    }
    // the tensor map: one per (view, box, swizzle)
    std::vector<int64_t> mapBox = groupBox;
    mapBox.back() = mode.width;
    int swizzleBytes = mode.bits ? 16 << mode.bits : 0;
    size_t mapIndex = 0;
    for (; mapIndex < info_.tensorMaps.size(); ++mapIndex) {
      const TensorMapSpec &m = info_.tensorMaps[mapIndex];
      if (m.view == viewIndex && m.box == mapBox && m.swizzleBytes == swizzleBytes &&
          m.dtype == g.dtype && m.groups == groups)
        break;
    }
    if (mapIndex == info_.tensorMaps.size()) {
      TensorMapSpec m;
      m.view = viewIndex;
      m.pointer = prog_.instructions[viewIndex].arg(ArgName::ptr).var;
      m.dtype = g.dtype;
      m.box = mapBox;
      m.swizzleBytes = swizzleBytes;
      m.groups = groups;
      m.scales = scales;
      info_.tensorMaps.push_back(std::move(m));
    }
    plan.tensorMap = uint32_t(mapIndex);
    plan.bytes = elements * bytes;
    info_.tma[uint32_t(curInstruction_)] = std::move(plan);
    return true;
  }
  return fail(ErrorCode::Tma, op + (into + varName(sVar)) + " (layout " +
                                  info_.vars[s.root].sharedLayout->toString() +
                                  "): the tensor memory accelerator writes no such layout (" +
                                  reasons + ")");
}

} // namespace tilus::detail
