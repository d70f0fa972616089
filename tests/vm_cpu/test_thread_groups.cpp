// Thread groups on the CPU interpreter (docs/isa.md, "Thread groups: warp specialisation"): a
// producer and a consumer group that hand tiles over through mbarriers run to the right result
// (each waits while the other makes progress), group-relative layouts and Synchronize(), a
// deadlock between groups named at its wait, a race between groups that no phase orders, and a
// group that ends with work in flight.
#include "cpu_test_util.h"

using namespace cputest;

namespace {

// Producer: 128 threads stage tile i of x into buf[i % S] once the consumer has released it;
// consumer: 64 threads wait for the tile, store 2x it (a Synchronize() of the consumer only
// between reading the tile and a shared exchange of their own) and release the stage.
const char *kPipe = R"(
const N = 1024
const S = 2
const BN = 256
def pipe<1>(f32* x_ptr, f32* y_ptr):
    gx = ViewGlobal(x_ptr, shape=[N])
    gy = ViewGlobal(y_ptr, shape=[N])
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
                v = LoadGlobal(gx, layout=spatial(128).local(2), offset=[i * BN:])
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
                StoreGlobal(u, gy, offset=[i * BN:])
                Synchronize()
)";

} // namespace

TEST_CASE("thread groups: a producer and a consumer hand four tiles over through two stages") {
  std::vector<float> x(1024), y(1024, 0.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(int(i % 97) - 48) * 0.25f;
  CHECK_OK(run(build(kPipe), {bufferArg(x), bufferArg(y)}));
  bool all = true;
  for (size_t i = 0; i < x.size(); ++i)
    all = all && y[i] == 2.0f * x[i];
  CHECK(all);
}

TEST_CASE("thread groups: groups waiting for each other's phases deadlock at the first wait") {
  // every barrier needs two arrivals per phase, but each stage gets one
  std::string src = replaceAll(kPipe, "count=1)", "count=2)");
  std::vector<float> x(1024, 1.0f), y(1024, 0.0f);
  Status s = run(build(src.c_str()), {bufferArg(x), bufferArg(y)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"MbarrierWait(parity=0) never returns", "deadlock"}));
  INFO(s.toString());
  CHECK(s.first().location.line == 27); // the consumer's wait: the producer waits too
}

TEST_CASE("thread groups: a shared access of one group races with another group's") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr):
    gx = ViewGlobal(x_ptr, shape=[128])
    gy = ViewGlobal(y_ptr, shape=[128])
    buf = AllocateShared(f32, shape=[128])
    parallel:
        group(64):
            v = LoadGlobal(gx, layout=spatial(64).local(2))
            StoreShared(v, buf)
            Synchronize()
            w = LoadShared(buf, layout=local(2).spatial(64))
            StoreGlobal(w, gy)
        group(64):
            u = LoadShared(buf, layout=spatial(64).local(2))
)";
  std::vector<float> x(128, 1.0f), y(128, 0.0f);
  Status s = run(build(src), {bufferArg(x), bufferArg(y)});
  // the first group's own read after its Synchronize() is ordered; the second group's is not
  CHECK(hasDiagnostic(s, ErrorCode::Race,
                      {"test.tasm:14:", "reads shared element", "of another thread group"}));
  CHECK(!hasDiagnostic(s, ErrorCode::Race, {"test.tasm:11:"}));
}

TEST_CASE("thread groups: a group that ends with a Wgmma in flight is an error") {
  const char *src = R"(
def k<1>() threads=256:
    sa = AllocateShared(f16, shape=[64, 16], layout=swizzle(row_major(64, 16), 1, 3, 3))
    sb = AllocateShared(f16, shape=[16, 64], layout=swizzle(row_major(16, 64), 3, 3, 3))
    parallel:
        group(128):
            acc = AllocateRegister(f32, layout=spatial(4, 1).local(1, 8).local(2, 1).spatial(8, 4).local(1, 2), init=0)
            WgmmaFence()
            Wgmma(sa, sb, acc, out=acc)
            WgmmaCommitGroup()
        group(128):
            pass
)";
  Status s = run(build(src), {});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"thread group 0", "Wgmma it issued is still in flight"}));
}
