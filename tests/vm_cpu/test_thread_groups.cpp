// Thread groups on the CPU interpreter (docs/isa.md, "Thread groups: warp specialisation"): a
// producer and a consumer group that hand tiles over through mbarriers run to the right result
// (each waits while the other makes progress), group-relative layouts and Synchronize(), a
// deadlock between groups named at its wait, a race between groups that no phase orders, and a
// group that ends with work in flight.
#include "cpu_test_util.h"
#include "thread_groups_program.h"

#include <algorithm>

using namespace cputest;
using tilus::testing::kThreadGroupsPipe;

namespace {

/// The line of the first occurrence of `what` in `source` (1-based).
uint32_t lineOf(const std::string &source, const std::string &what) {
  size_t at = source.find(what);
  REQUIRE(at != std::string::npos);
  return uint32_t(std::count(source.begin(), source.begin() + long(at), '\n') + 1);
}

} // namespace

TEST_CASE("thread groups: a producer and a consumer hand 16 tiles over through 3 stages") {
  std::vector<float> x(4 * 4096), y(4 * 4096, 0.0f);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(int(i % 97) - 48) * 0.25f;
  CHECK_OK(run(build(kThreadGroupsPipe), {bufferArg(x), bufferArg(y)}));
  bool all = true;
  for (size_t i = 0; i < x.size(); ++i)
    all = all && y[i] == 2.0f * x[i];
  CHECK(all);
}

TEST_CASE("thread groups: groups waiting for each other's phases deadlock at the first wait") {
  // every barrier needs two arrivals per phase, but each stage gets one
  std::string src = replaceAll(kThreadGroupsPipe, "count=1)", "count=2)");
  std::vector<float> x(4 * 4096, 1.0f), y(4 * 4096, 0.0f);
  Status s = run(build(src.c_str()), {bufferArg(x), bufferArg(y)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"MbarrierWait(parity=0) never returns", "deadlock"}));
  INFO(s.toString());
  // the consumer's wait (the producer waits too)
  CHECK(s.first().location.line == lineOf(src, "MbarrierWait(SliceShared(full"));
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
  // threads are named in the block: the second group's first thread is the block's thread 64
  CHECK(hasDiagnostic(s, ErrorCode::Race, {"test.tasm:14:", "(thread 64) reads", "(thread 0)"}));
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

TEST_CASE("thread groups: the copies of a clause run one body with their own index and variables") {
  // three copies of 32 threads and one group of 32: copy w writes 10 w + 1 + its thread index
  // into row w (its index, its own register tensors and scalars, its own Synchronize), the
  // plain group 7 into row 3. The copies interleave: each waits at an mbarrier that the next
  // copy completes (copy 2's by the plain group), so their variables live across the others'
  // runs.
  const char *src = R"(
def k<1>(i32* y_ptr) threads=128:
    gy = ViewGlobal(y_ptr, shape=[4, 32])
    bars = AllocateShared(u64, shape=[3])
    for i in range(3):
        MbarrierInit(SliceShared(bars, offset=[i]), count=1)
    Synchronize()
    parallel:
        group(32, copies=3) as w:
            base = w * 10 + 1
            x = Add(Iota(layout=spatial(1, 32), dim=1), AllocateRegister(i32, layout=spatial(1, 32), init=base))
            if w > 0:
                MbarrierArrive(SliceShared(bars, offset=[w - 1]))
            MbarrierWait(SliceShared(bars, offset=[w]), parity=0)
            Synchronize()
            StoreGlobal(x, gy, offset=[w:, 0:])
        group(32):
            MbarrierArrive(SliceShared(bars, offset=[2]))
            StoreGlobal(AllocateRegister(i32, layout=spatial(1, 32), init=7), gy, offset=[3:, 0:])
)";
  std::vector<int32_t> y(4 * 32, -1);
  CHECK_OK(run(build(src), {bufferArg(y)}));
  bool all = true;
  for (int r = 0; r < 4; ++r)
    for (int t = 0; t < 32; ++t)
      all = all && y[size_t(r * 32 + t)] == (r < 3 ? 10 * r + 1 + t : 7);
  CHECK(all);
}

TEST_CASE("thread groups: the copies of a clause race with each other like distinct groups") {
  // both copies write the same shared elements, each ordered only by its own Synchronize()
  const char *src = R"(
def k<1>(f32* y_ptr) threads=64:
    gy = ViewGlobal(y_ptr, shape=[32])
    buf = AllocateShared(f32, shape=[32])
    parallel:
        group(32, copies=2) as w:
            StoreShared(AllocateRegister(f32, layout=spatial(32), init=1.0), buf)
            Synchronize()
            StoreGlobal(LoadShared(buf, layout=spatial(32)), gy)
)";
  std::vector<float> y(32, 0.0f);
  Status s = run(build(src), {bufferArg(y)});
  CHECK(hasDiagnostic(s, ErrorCode::Race, {"test.tasm:7:", "of another thread group"}));
}

TEST_CASE("thread groups: without threads=, the block has the threads of every copy") {
  // two copies of 32 threads: a block of 64, copy w writes w + 5 into row w
  const char *src = R"(
def k<1>(i32* y_ptr):
    gy = ViewGlobal(y_ptr, shape=[2, 32])
    parallel:
        group(32, copies=2) as w:
            StoreGlobal(AllocateRegister(i32, layout=spatial(1, 32), init=w + 5), gy, offset=[w:, 0:])
)";
  VerifiedModule m = build(src);
  CHECK(m.programs[0].threads == 64);
  std::vector<int32_t> y(64, -1);
  CHECK_OK(run(m, {bufferArg(y)}));
  bool all = true;
  for (int r = 0; r < 2; ++r)
    for (int t = 0; t < 32; ++t)
      all = all && y[size_t(r * 32 + t)] == r + 5;
  CHECK(all);
}
