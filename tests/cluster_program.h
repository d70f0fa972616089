// Programs of thread-block clusters (docs/isa.md, "Thread-block clusters and TMA multicast"),
// shared by the interpreter tests (tests/vm_cpu/test_cluster.cpp) and the JIT differential tests
// (tests/jit/test_jit_gpu.cpp).
//
// kClusterPipe: clusters of C blocks; cluster j sums T tiles of x (16 x 32 f32 each, tile t of
// cluster j at rows (j T + t) 16) through S shared stages. Each block loads 16 / C rows of every
// tile by TmaLoadMulticast into the stage of every block of its cluster, so every block receives
// the whole tile; a stage is reloaded once every block of the cluster has released it (each
// block's `empty` barrier counts C arrivals, one from each block's MbarrierArriveCluster). Every
// block stores its sum: y[pid] = sum_t x tile (j T + t), the same in every block of a cluster.
//
// kClusterGroups: the same hand-over with warp specialisation inside each block: a producer
// group of one warp issues the multicast loads, a consumer group of 128 threads sums the tiles
// and releases the stages in every block of the cluster.
#pragma once

#include <string>

namespace tilus::testing {

/// A program of this header: the constants, the header with `threads`, the views, the stages and
/// their barriers (initialised before a ClusterSync()), then `body`.
inline std::string clusterProgram(const char *threads, const char *body) {
  return R"(
const C = 2
const T = 6
const S, TH = 2, )" +
         std::string(threads) + R"(
const R = 16 / C
def pipe<C * nc>(f32* x_ptr, f32* y_ptr, i32 nc) threads=TH cluster=C:
    pid = BlockIndices()
    rank = ClusterRank()
    j = pid / C
    gx = ViewGlobal(x_ptr, shape=[nc * T * 16, 32])
    gy = ViewGlobal(y_ptr, shape=[nc * C, 16, 32])
    st = AllocateShared(f32, shape=[S, 16, 32])
    full = AllocateShared(u64, shape=[S])
    empty = AllocateShared(u64, shape=[S])
    for s in range(S):
        MbarrierInit(SliceShared(full, offset=[s]), count=1)
        MbarrierInit(SliceShared(empty, offset=[s]), count=C)
    Synchronize()
    ClusterSync()
)" + std::string(body);
}

inline const std::string kClusterPipe = clusterProgram(
    "128", R"(    acc = AllocateRegister(f32, layout=spatial(16, 8).local(1, 4), init=0.0)
    for t in range(T):
        s = t % S
        MbarrierWait(SliceShared(empty, offset=[s]), parity=(t / S + 1) % 2)
        bar = SliceShared(full, offset=[s])
        MbarrierArrive(bar, tx=16 * 32 * 4)
        TmaLoadMulticast(SliceShared(st, offset=[s, rank * R:, 0:], shape=[R, 32]), gx, bar=bar, mask=(1 << C) - 1, offset=[(j * T + t) * 16 + rank * R:, 0:])
        MbarrierWait(bar, parity=t / S % 2)
        v = LoadShared(SliceShared(st, offset=[s, 0:, 0:]), layout=spatial(16, 8).local(1, 4))
        acc = Add(acc, v)
        for r in range(C):
            MbarrierArriveCluster(SliceShared(empty, offset=[s]), rank=r)
    StoreGlobal(acc, gy, offset=[pid, 0:, 0:])
    ClusterSync()
)");

inline const std::string kClusterGroups = clusterProgram("160", R"(    parallel:
        group(32):
            for t in range(T):
                s = t % S
                MbarrierWait(SliceShared(empty, offset=[s]), parity=(t / S + 1) % 2)
                bar = SliceShared(full, offset=[s])
                MbarrierArrive(bar, tx=16 * 32 * 4)
                TmaLoadMulticast(SliceShared(st, offset=[s, rank * R:, 0:], shape=[R, 32]), gx, bar=bar, mask=(1 << C) - 1, offset=[(j * T + t) * 16 + rank * R:, 0:])
        group(128):
            acc = AllocateRegister(f32, layout=spatial(16, 8).local(1, 4), init=0.0)
            for t in range(T):
                s = t % S
                MbarrierWait(SliceShared(full, offset=[s]), parity=t / S % 2)
                v = LoadShared(SliceShared(st, offset=[s, 0:, 0:]), layout=spatial(16, 8).local(1, 4))
                acc = Add(acc, v)
                for r in range(C):
                    MbarrierArriveCluster(SliceShared(empty, offset=[s]), rank=r)
            StoreGlobal(acc, gy, offset=[pid, 0:, 0:])
    ClusterSync()
)");

} // namespace tilus::testing
