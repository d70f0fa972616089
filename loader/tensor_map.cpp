// Tensor-map geometry at launch (loader/tensor_map.h).
#include "loader/tensor_map.h"

#include "loader/checker_impl.h"

namespace tilus {

Expected<TensorMapGeometry> tensorMapGeometry(const Program &program, const TensorMapSpec &spec,
                                              const VarValueFn &values) {
  const Instruction &view = program.instructions[spec.view];
  const Variable &pointer = program.var(spec.pointer);
  auto error = [&](const std::string &what) -> Status {
    Location loc; // the ViewGlobal's instruction (its line is in the message)
    loc.program = program.name;
    loc.instruction = int64_t(spec.view);
    loc.opcode = "ViewGlobal";
    std::string site = view.loc.line != 0 ? " (ViewGlobal at " + std::to_string(view.loc.line) +
                                                ":" + std::to_string(view.loc.column) + ")"
                                          : "";
    return Status::error(ErrorCode::Runtime,
                         "program `" + program.name + "`: the tensor map of " + pointer.name +
                             site + " for TmaLoad: " + what,
                         std::move(loc));
  };
  auto value = [&](ExprId e) {
    return detail::integerValue(evaluateExpr(program, e, values), program.exprs[e].dtype);
  };
  const std::vector<ExprId> &shape = view.arg(ArgName::shape).exprs;
  const Argument &stridesArg = view.arg(ArgName::strides);
  const size_t r = shape.size();
  TensorMapGeometry g;
  g.rank = uint32_t(spec.box.size());
  g.elementBytes = uint32_t(spec.dtype.storageBits() / 8);
  g.swizzleBytes = uint32_t(spec.swizzleBytes);
  g.address = values(spec.pointer);
  if (g.address % 16 != 0)
    return error("the address " + std::to_string(g.address) + " is not a multiple of 16 bytes");
  std::vector<int64_t> extents(r), strides(r);
  for (size_t d = 0; d < r; ++d) {
    extents[d] = value(shape[d]);
    if (extents[d] < 1 || extents[d] > (int64_t(1) << 32))
      return error("extent " + std::to_string(extents[d]) + " of dimension " + std::to_string(d) +
                   " outside [1, 2^32]");
  }
  if (stridesArg.present) {
    for (size_t d = 0; d < r; ++d)
      strides[d] = value(stridesArg.exprs[d]);
  } else {
    __int128 s = 1;
    for (size_t d = r; d-- > 0;) {
      strides[d] = s > (__int128(1) << 62) ? (int64_t(1) << 62) : int64_t(s);
      s *= extents[d];
    }
  }
  // the tensor map's dimensions: groups of the view's (checker: mergeTensorMapDims), each with
  // the product of their extents and the stride of its innermost one
  std::vector<int64_t> mapExtents, mapStrides, strideDims; // strideDims: whose stride it takes
  for (size_t i = 0, d = 0; i < spec.groups.size(); d += spec.groups[i++]) {
    __int128 extent = 1; // each factor at most 2^32: checked after every product
    for (size_t k = d; k < d + spec.groups[i] && extent <= (__int128(1) << 32); ++k)
      extent *= extents[k];
    if (extent > (__int128(1) << 32))
      return error("dimensions " + std::to_string(d) + " to " +
                   std::to_string(d + spec.groups[i] - 1) +
                   ", merged into one of the tensor "
                   "map's, span more than 2^32 elements");
    mapExtents.push_back(int64_t(extent));
    mapStrides.push_back(strides[d + spec.groups[i] - 1]);
    strideDims.push_back(int64_t(d + spec.groups[i] - 1));
  }
  const size_t mr = mapExtents.size();
  for (size_t i = 0; i + 1 < mr; ++i) {
    __int128 bytes = __int128(mapStrides[i]) * g.elementBytes;
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (__int128(1) << 40))
      return error("the stride of dimension " + std::to_string(strideDims[i]) + " (" +
                   std::to_string(mapStrides[i]) + " elements of " + spec.dtype.name() +
                   ") is not a positive multiple of 16 bytes below 2^40");
  }
  for (size_t i = 0; i < mr; ++i) {
    size_t inner = mr - 1 - i;
    g.dims[inner] = uint64_t(mapExtents[i]);
    g.strideBytes[inner] = uint64_t(mapStrides[i]) * g.elementBytes;
    g.box[inner] = uint32_t(spec.box[i]);
  }
  return g;
}

Status checkTensorMaps(const Program &program, const ProgramInfo &info, const VarValueFn &values) {
  for (const TensorMapSpec &spec : info.tensorMaps) {
    auto g = tensorMapGeometry(program, spec, values);
    if (!g.ok())
      return g.takeStatus();
  }
  return Status::success();
}

} // namespace tilus
