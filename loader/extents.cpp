// Pointer extents: how many elements of each pointer parameter a program can touch, so that
// vm-run can size buffers ("without an explicit size a buffer gets the extent that the
// program's ViewGlobals of that pointer imply", ISA section 8) and the runtime can reject
// buffers that are too small.
//
// A ViewGlobal with shape s and strides st (default row-major) touches element offsets
// sum_d x_d * st_d for 0 <= x_d < s_d, so its extent is 1 + sum_d (s_d - 1) * st_d (0 when a
// dimension is empty); the pointer's extent is the maximum over its views. Shapes and strides
// are scalar expressions; the checker records them (collectExtents) and marks the extent
// computable when they use only constants and scalar parameters, and evaluateExtent computes
// it for concrete parameter values at launch.
//
// Example: vector_add's ViewGlobal(x_ptr, shape=[n]) with n = 1000 gives 1 + 999 * 1 = 1000.
// A view whose dtype differs from the pointer's counts in its own elements and is converted to
// the pointer's: ViewGlobal(b_ptr /*i6* */, dtype=u8, shape=[96]) touches 768 bits, 128 i6.
#include "loader/checker_impl.h"

#include "isa/scalar_eval.h"

#include <limits>

namespace tilus {

namespace detail {

void ProgramChecker::collectExtents() {
  for (VarId p : prog_.params) {
    if (p >= prog_.vars.size() || prog_.vars[p].kind != VarKind::Pointer)
      continue;
    PointerExtent extent;
    extent.pointer = p;
    for (const auto &[ptr, idx] : views_) {
      if (ptr != p)
        continue;
      const Instruction &inst = prog_.instructions[idx];
      const Argument *shape = optionalArg(inst, ArgName::shape);
      const Argument *strides = optionalArg(inst, ArgName::strides);
      const Argument *dtype = optionalArg(inst, ArgName::dtype);
      if (!shape) {
        extent.computable = false;
        continue;
      }
      PointerExtent::View view;
      view.shape = shape->exprs;
      if (strides)
        view.strides = strides->exprs;
      view.dtype = dtype ? dtype->dtype : prog_.vars[p].dtype;
      view.instruction = idx;
      for (ExprId e : view.shape)
        extent.computable = extent.computable && exprFacts_[e].paramsOnly;
      for (ExprId e : view.strides)
        extent.computable = extent.computable && exprFacts_[e].paramsOnly;
      extent.views.push_back(std::move(view));
    }
    info_.extents.push_back(std::move(extent));
  }
}

} // namespace detail

namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

int64_t saturate(__int128 v) { return v > __int128(kMax) ? kMax : int64_t(v); }

/// Elements one view touches, in the view's own dtype.
int64_t viewElements(const Program &program, const PointerExtent::View &view,
                     const std::function<uint64_t(VarId)> &paramValue) {
  auto value = [&](ExprId e) {
    return detail::integerValue(evaluateExpr(program, e, paramValue), program.exprs[e].dtype);
  };
  const size_t r = view.shape.size();
  std::vector<int64_t> shape(r), strides(r);
  for (size_t d = 0; d < r; ++d) {
    shape[d] = value(view.shape[d]);
    if (shape[d] <= 0)
      return 0;
  }
  if (!view.strides.empty()) {
    for (size_t d = 0; d < r; ++d)
      strides[d] = value(view.strides[d]);
  } else {
    __int128 s = 1;
    for (size_t d = r; d-- > 0;) {
      strides[d] = saturate(s);
      s = std::min<__int128>(s * shape[d], __int128(kMax));
    }
  }
  __int128 last = 0;
  for (size_t d = 0; d < r; ++d)
    if (strides[d] > 0) // negative strides reach below the pointer: not an extent
      last += __int128(shape[d] - 1) * strides[d];
  return saturate(last + 1);
}

} // namespace

int64_t evaluateExtent(const Program &program, const PointerExtent &extent,
                       const std::function<uint64_t(VarId)> &paramValue) {
  const DataType pointerType = program.vars[extent.pointer].dtype;
  int64_t best = 0;
  for (const PointerExtent::View &view : extent.views) {
    int64_t elements = viewElements(program, view, paramValue);
    if (view.dtype != pointerType) {
      __int128 bits = __int128(elements) * view.dtype.storageBits();
      int64_t per = pointerType.storageBits();
      elements = saturate((bits + per - 1) / per);
    }
    best = std::max(best, elements);
  }
  return best;
}

} // namespace tilus
