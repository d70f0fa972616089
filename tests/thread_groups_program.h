// A producer/consumer pipeline of thread groups (docs/isa.md, "Thread groups"): per block (B
// blocks, one row of x each), a producer group of 128 threads stages tile i of the row into
// buf[i % S] once the consumer group has released it (mbarrier `empty`), and a consumer group of
// 64 threads waits for the tile (`full`), releases the stage, exchanges 2x the tile through its
// own shared buffer between two of its own Synchronize()s and stores it to y: y = 2 x. The groups'
// layouts have their own thread counts; one group arrival is 6 warp arrivals on the GPU.
// Shared by the interpreter test (tests/vm_cpu/test_thread_groups.cpp) and the JIT differential
// test (tests/jit/test_jit_gpu.cpp).
#pragma once

namespace tilus::testing {

inline constexpr const char *kThreadGroupsPipe = R"(
const N = 4096
const S = 3
const BN = 256
const B = 4
def pipe<B>(f32* x_ptr, f32* y_ptr):
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[B, N])
    gy = ViewGlobal(y_ptr, shape=[B, N])
    buf = AllocateShared(f32, shape=[S, BN])
    mine = AllocateShared(f32, shape=[BN])
    full = AllocateShared(u64, shape=[S])
    empty = AllocateShared(u64, shape=[S])
    for s in range(S):
        MbarrierInit(SliceShared(full, offset=[s]), count=1)
        MbarrierInit(SliceShared(empty, offset=[s]), count=1)
    Synchronize()
    parallel:
        group(128):
            for i in range(N / BN):
                st = i % S
                MbarrierWait(SliceShared(empty, offset=[st]), parity=(i / S + 1) % 2)
                v = LoadGlobal(gx, layout=spatial(128).local(2), offset=[bi, i * BN:])
                StoreShared(v, SliceShared(buf, offset=[st, 0:]))
                MbarrierArrive(SliceShared(full, offset=[st]))
        group(64):
            for i in range(N / BN):
                st = i % S
                MbarrierWait(SliceShared(full, offset=[st]), parity=i / S % 2)
                w = LoadShared(SliceShared(buf, offset=[st, 0:]), layout=spatial(64).local(4))
                MbarrierArrive(SliceShared(empty, offset=[st]))
                StoreShared(Add(w, w), mine)
                Synchronize()
                u = LoadShared(mine, layout=local(4).spatial(64))
                StoreGlobal(u, gy, offset=[bi, i * BN:])
                Synchronize()
)";

} // namespace tilus::testing
