// A program with pipeline stages as rows of one 2-D shared tile, sliced at run-time origins that
// the checker knows to be multiples of the stage height (docs/checker.md): four TMA loads of 32
// rows x 128 columns into slices at (t + r) % 4 * 32 rows, LoadShared of rows 64.. into
// out_ptr [64, 128], and a TMA store of the 64 rows at r % 2 * 64 into back_ptr [64, 128].
// Shared by the interpreter test (tests/vm_cpu/test_tma.cpp) and the JIT differential test
// (tests/jit/test_jit_gpu.cpp).
#pragma once

namespace tilus::testing {

inline constexpr const char *kStageRowsProgram = R"(
def k<1>(f16* a_ptr, f16* out_ptr, f16* back_ptr, i32 r) threads=128:
    ga = ViewGlobal(a_ptr, shape=[128, 128])
    s = AllocateShared(f16, shape=[128, 128], layout=row_major(1, 2).swizzle(row_major(128, 64), 3, 3, 3))
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=32768)
    for t in range(4):
        TmaLoad(SliceShared(s, offset=[(t + r) % 4 * 32:, 0:], shape=[32, 128]), ga, bar=bar, offset=[t * 32:, 0:])
    MbarrierWait(bar, parity=0)
    x = LoadShared(SliceShared(s, offset=[64:, 0:], shape=[64, 128]), layout=spatial(32, 4).local(2, 32))
    StoreGlobal(x, ViewGlobal(out_ptr, shape=[64, 128]))
    Synchronize()
    TmaStore(SliceShared(s, offset=[r % 2 * 64:, 0:], shape=[64, 128]), ViewGlobal(back_ptr, shape=[64, 128]))
    TmaStoreCommitGroup()
    TmaStoreWaitGroup(0)
)";

} // namespace tilus::testing
