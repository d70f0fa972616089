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
  g.rank = uint32_t(r);
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
  for (size_t d = 0; d + 1 < r; ++d) {
    __int128 bytes = __int128(strides[d]) * g.elementBytes;
    if (bytes <= 0 || bytes % 16 != 0 || bytes >= (__int128(1) << 40))
      return error("the stride of dimension " + std::to_string(d) + " (" +
                   std::to_string(strides[d]) + " elements of " + spec.dtype.name() +
                   ") is not a positive multiple of 16 bytes below 2^40");
  }
  for (size_t d = 0; d < r; ++d) {
    size_t inner = r - 1 - d;
    g.dims[inner] = uint64_t(extents[d]);
    g.strideBytes[inner] = uint64_t(strides[d]) * g.elementBytes;
    g.box[inner] = uint32_t(spec.box[d]);
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
