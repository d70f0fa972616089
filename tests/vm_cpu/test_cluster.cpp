// Thread-block clusters on the CPU interpreter (docs/isa.md, "Thread-block clusters and TMA
// multicast"): the blocks of a cluster run as cooperative tasks, so multicast loads, arrivals at
// other blocks' barriers and ClusterSync() give the sums of a plain C++ reference (with and
// without thread groups, clusters of 2 and 4); ranks; the launch check of the grid; deadlocks at
// ClusterSync(); deliveries into a block whose barrier is not initialised or that has ended; a
// mask outside the cluster at run time; a block that reads a stage before the multicast lands.
#include "cluster_program.h"
#include "cpu_test_util.h"

using namespace cputest;
using tilus::testing::kClusterGroups;
using tilus::testing::kClusterPipe;

namespace {

constexpr int64_t kTiles = 6, kTile = 16 * 32;

/// y[pid] = sum of the cluster's tiles, with C blocks per cluster and nc clusters.
bool sumsMatch(const std::vector<float> &x, const std::vector<float> &y, int64_t c, int64_t nc) {
  for (int64_t pid = 0; pid < nc * c; ++pid)
    for (int64_t e = 0; e < kTile; ++e) {
      double want = 0;
      for (int64_t t = 0; t < kTiles; ++t)
        want += x[size_t(((pid / c) * kTiles + t) * kTile + e)];
      if (std::fabs(y[size_t(pid * kTile + e)] - want) > 1e-4 * (1 + std::fabs(want)))
        return false;
    }
  return true;
}

Status runPipe(const std::string &source, int64_t c, int64_t nc, std::vector<float> &y,
               bool checkSums = true) {
  std::vector<float> x(size_t(nc * kTiles * kTile));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = float(int(i % 89) - 44) * 0.125f;
  y.assign(size_t(nc * c * kTile), 0.0f);
  Status s = run(build(source, {{"C", std::to_string(c)}}),
                 {bufferArg(x), bufferArg(y), i32Arg(int32_t(nc))});
  if (s.ok() && checkSums)
    CHECK(sumsMatch(x, y, c, nc));
  return s;
}

} // namespace

TEST_CASE("clusters: multicast tiles and remote releases give every block its cluster's sums") {
  std::vector<float> y;
  for (int64_t c : {2, 4}) {
    CAPTURE(c);
    CHECK_OK(runPipe(kClusterPipe, c, 3, y));
    CHECK_OK(runPipe(kClusterGroups, c, 3, y));
  }
}

TEST_CASE("clusters: ClusterRank is the block's x index modulo the cluster size") {
  const char *src = R"(
def k<8, 2>(i32* y_ptr) threads=32 cluster=4:
    bx, by = BlockIndices()
    gy = ViewGlobal(y_ptr, shape=[2, 8])
    rank = ClusterRank()
    StoreScalar(gy, offset=[by, bx], value=rank)
    ClusterSync()
)";
  std::vector<int32_t> y(16, -1);
  CHECK_OK(run(build(src), {bufferArg(y)}));
  for (int i = 0; i < 16; ++i)
    CHECK(y[size_t(i)] == (i % 8) % 4);
}

TEST_CASE("clusters: a grid x extent that is not a multiple of the cluster fails the launch") {
  const char *src = R"(
def k<n>(i32 n) threads=32 cluster=2:
    ClusterSync()
)";
  VerifiedModule m = build(src);
  CHECK_OK(run(m, {i32Arg(4)}));
  Status s = run(m, {i32Arg(3)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"grid x extent 3 is not a multiple of cluster=2"}));
}

TEST_CASE("clusters: a ClusterSync() that another block never reaches is a deadlock") {
  const char *src = R"(
def k<2>() threads=32 cluster=2:
    rank = ClusterRank()
    if rank == 1:
        ClusterSync()
)";
  Status s = run(build(src), {});
  INFO(s.toString());
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"ClusterSync() never returns", "block (0, 0, 0) ended", "deadlock"}));
}

TEST_CASE("clusters: a delivery before the target initialised its barrier is an error") {
  // without the ClusterSync() after the initialisation, block 0 multicasts into block 1 first
  std::string src =
      replaceAll(kClusterPipe, "    Synchronize()\n    ClusterSync()\n", "    Synchronize()\n");
  std::vector<float> y;
  Status s = runPipe(src, 2, 1, y, false);
  INFO(s.toString());
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"TmaLoadMulticast", "block (1, 0, 0)", "MbarrierInit has not initialised"}));
}

TEST_CASE("clusters: a delivery into a block that has ended is an error") {
  // without the final ClusterSync(), block 1 ends while block 0 still releases stages in it
  std::string src = replaceAll(
      kClusterPipe, "    StoreGlobal(acc, gy, offset=[pid, 0:, 0:])\n    ClusterSync()\n",
      "    StoreGlobal(acc, gy, offset=[pid, 0:, 0:])\n");
  std::vector<float> y;
  Status s = runPipe(src, 2, 1, y, false);
  INFO(s.toString());
  CHECK(hasDiagnostic(s, ErrorCode::Runtime,
                      {"MbarrierArriveCluster delivers into block", "which has ended"}));
}

TEST_CASE("clusters: a multicast mask outside the cluster at run time is an error") {
  const char *src = R"(
def k<2>(f32* x_ptr, i32 mask) threads=32 cluster=2:
    gx = ViewGlobal(x_ptr, shape=[8])
    st = AllocateShared(f32, shape=[8])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    ClusterSync()
    MbarrierArrive(bar, tx=32)
    TmaLoadMulticast(st, gx, bar=bar, mask=mask)
    MbarrierWait(bar, parity=0)
    ClusterSync()
)";
  std::vector<float> x(8, 1.0f);
  VerifiedModule m = build(src);
  Status s = run(m, {bufferArg(x), i32Arg(4)});
  CHECK(hasDiagnostic(s, ErrorCode::Runtime, {"TmaLoadMulticast mask=4 outside [1, 3]"}));
}

TEST_CASE("clusters: reading a stage before the multicast into it has landed is a race") {
  // block 0's multicast is issued before the second ClusterSync(), but its data lands in block
  // 1 only at block 1's wait: block 1's read before that wait races with the copy
  const char *src = R"(
def k<2>(f32* x_ptr, f32* y_ptr) threads=32 cluster=2:
    gx = ViewGlobal(x_ptr, shape=[8])
    gy = ViewGlobal(y_ptr, shape=[2, 8])
    st = AllocateShared(f32, shape=[8])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    ClusterSync()
    rank = ClusterRank()
    MbarrierArrive(bar, tx=32)
    if rank == 0:
        TmaLoadMulticast(st, gx, bar=bar, mask=3)
    ClusterSync()
    if rank == 1:
        early = LoadShared(st, layout=spatial(8).replicate(4))
    MbarrierWait(bar, parity=0)
    v = LoadShared(st, layout=local(8).replicate(32))
    StoreGlobal(v, gy, offset=[rank, 0:])
    ClusterSync()
)";
  std::vector<float> x(8, 2.0f), y(16, 0.0f);
  Status s = run(build(src), {bufferArg(x), bufferArg(y)});
  INFO(s.toString());
  CHECK(hasDiagnostic(s, ErrorCode::Race, {"test.tasm:16:", "while TmaLoadMulticast at 13:9"}));
  CHECK(!hasDiagnostic(s, ErrorCode::Race, {"test.tasm:18:"}));
  // both blocks received the tile
  for (float v : y)
    CHECK(v == 2.0f);
}

TEST_CASE("clusters: a trap in one block abandons the others, whose waits report nothing") {
  // block 1's consumer group reads outside its shared tile; block 0 waits for block 1's
  // releases and must not hang or report a deadlock of its own
  std::string src = replaceAll(
      kClusterGroups, "                v = LoadShared(SliceShared(st, offset=[s, 0:, 0:]),",
      "                v = LoadShared(SliceShared(st, offset=[s + rank * S, 0:, 0:]),");
  std::vector<float> y;
  Status s = runPipe(src, 2, 1, y, false);
  INFO(s.toString());
  CHECK(hasDiagnostic(s, ErrorCode::OutOfBounds, {"block (1, 0, 0)"}));
  CHECK(!hasDiagnostic(s, ErrorCode::Runtime, {"deadlock"}));
  CHECK(!hasDiagnostic(s, ErrorCode::Runtime, {"abandoned"}));
  CHECK(s.diagnostics().size() == 1);
}
