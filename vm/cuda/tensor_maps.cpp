// The tensor maps of one launch (docs/isa.md, "Tensor-memory-accelerator loads"): for each
// ProgramInfo::tensorMaps entry, the geometry from the launch's arguments
// (loader/tensor_map.h, which also checks the hardware's requirements) encoded by the driver's
// cuTensorMapEncodeTiled. The kernel takes them by value after its other parameters.
#include "loader/tensor_map.h"
#include "vm/cuda/runtime.h"

namespace tilus::cuda {

namespace {

CUtensorMapDataType dataType(uint32_t bytes) {
  switch (bytes) {
  case 1:
    return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  case 2:
    return CU_TENSOR_MAP_DATA_TYPE_UINT16;
  case 4:
    return CU_TENSOR_MAP_DATA_TYPE_UINT32;
  default:
    return CU_TENSOR_MAP_DATA_TYPE_INT64;
  }
}

CUtensorMapSwizzle swizzle(uint32_t bytes) {
  switch (bytes) {
  case 32:
    return CU_TENSOR_MAP_SWIZZLE_32B;
  case 64:
    return CU_TENSOR_MAP_SWIZZLE_64B;
  case 128:
    return CU_TENSOR_MAP_SWIZZLE_128B;
  default:
    return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

} // namespace

Status encodeTensorMaps(const DriverApi &api, const Program &program, const ProgramInfo &info,
                        const KernelArgs &args, std::vector<CUtensorMap> &maps) {
  maps.assign(info.tensorMaps.size(), CUtensorMap{});
  if (info.tensorMaps.empty())
    return Status::success();
  if (!api.cuTensorMapEncodeTiled)
    return Status::error(ErrorCode::Cuda, "program `" + program.name +
                                              "` uses TmaLoad, whose tensor maps need a CUDA 12 "
                                              "driver (cuTensorMapEncodeTiled)");
  VarValueFn values = paramValues(program, args);
  for (size_t i = 0; i < info.tensorMaps.size(); ++i) {
    auto g = tensorMapGeometry(program, info.tensorMaps[i], values);
    if (!g.ok())
      return g.takeStatus();
    cuuint64_t dims[kMaxTensorMapRank], strides[kMaxTensorMapRank];
    cuuint32_t box[kMaxTensorMapRank], elementStrides[kMaxTensorMapRank];
    for (uint32_t d = 0; d < g->rank; ++d) {
      dims[d] = g->dims[d];
      box[d] = g->box[d];
      elementStrides[d] = 1;
      if (d > 0)
        strides[d - 1] = g->strideBytes[d];
    }
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuTensorMapEncodeTiled, &maps[i], dataType(g->elementBytes),
                                g->rank, reinterpret_cast<void *>(uintptr_t(g->address)), dims,
                                strides, box, elementStrides, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                swizzle(g->swizzleBytes), CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE));
  }
  return Status::success();
}

} // namespace tilus::cuda
