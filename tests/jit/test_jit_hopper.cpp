// The Hopper instructions in the JIT (docs/isa.md, "Hopper instructions"; docs/jit.md): the PTX
// forms they become on sm_90a, ptxas accepting them for sm_90a, and a clear `unsupported`
// error when the target is sm_80.
#include "jit/jit_test_util.h"

using namespace tilus;
using namespace tilus::testing;

namespace {

Expected<PtxKernel> compileFor(const VerifiedModule &m, int sm) {
  JitOptions options;
  options.smVersion = sm;
  return compileToPtx(m, 0, options);
}

bool contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

const char *kMbarrierSource = R"(
def k<1>(i32* out_ptr) threads=128:
    g = ViewGlobal(out_ptr, shape=[128])
    bars = AllocateShared(u64, shape=[2])
    for i in range(2):
        MbarrierInit(SliceShared(bars, offset=[i]), count=2)
    Synchronize()
    for it in range(4):
        bar = SliceShared(bars, offset=[it % 2])
        MbarrierArrive(bar)
        MbarrierArrive(bar, tx=0)
        MbarrierWait(bar, parity=it / 2 % 2)
    FenceProxyAsync()
    StoreGlobal(Iota(layout=spatial(128), dim=0), g)
)";

} // namespace

TEST_CASE("mbarriers and the async-proxy fence become their PTX forms on sm_90a") {
  VerifiedModule m = buildSource(kMbarrierSource);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  // count 2 block arrivals = 2 * 4 warp arrivals
  CHECK(contains(k->ptx, "mbarrier.init.shared::cta.b64"));
  CHECK(contains(k->ptx, "mbarrier.arrive.shared::cta.b64"));
  CHECK(contains(k->ptx, "mbarrier.arrive.expect_tx.shared::cta.b64"));
  CHECK(contains(k->ptx, "mbarrier.try_wait.parity.shared::cta.b64"));
  CHECK(contains(k->ptx, "fence.proxy.async.shared::cta"));
  CHECK(contains(k->ptx, "bar.warp.sync"));
}

TEST_CASE("mbarriers: ptxas accepts the sm_90a kernel" * needsPtxas()) {
  VerifiedModule m = buildSource(kMbarrierSource);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  std::string log;
  bool ok = runPtxas(k->ptx, 90, log);
  INFO(log);
  CHECK(ok);
}

TEST_CASE("Hopper instructions are refused for sm_80 with a located error") {
  VerifiedModule m = buildSource(kMbarrierSource);
  Expected<PtxKernel> k = compileFor(m, 80);
  REQUIRE_FALSE(k.ok());
  const Diagnostic &d = k.status().first();
  CHECK(d.code == ErrorCode::Unsupported);
  CHECK(contains(d.message, "MbarrierInit needs sm_90a (Hopper); the target is sm_80"));
  CHECK(d.location.line == 6);
}

namespace {

const char *kWgmmaSource = R"(
def k<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr, i32 s) threads=256:
    sa = AllocateShared(f16, shape=[2, 128, 64], layout=swizzle(row_major(2, 128, 64), 3, 3, 3))
    sb = AllocateShared(f16, shape=[2, 64, 128], layout=row_major(2, 1, 2).swizzle(row_major(1, 64, 64), 3, 3, 3))
    CopyAsync(SliceShared(sa, offset=[s % 2, 0:, 0:]), ViewGlobal(a_ptr, shape=[128, 64]))
    CopyAsync(SliceShared(sb, offset=[s % 2, 0:, 0:]), ViewGlobal(b_ptr, shape=[64, 128]))
    CopyAsyncWaitAll()
    FenceProxyAsync()
    Synchronize()
    acc = AllocateRegister(f32, layout=spatial(2, 1).spatial(4, 1).local(1, 16).local(2, 1).spatial(8, 4).local(1, 2))
    WgmmaFence()
    Wgmma(SliceShared(sa, offset=[s % 2, 0:, 0:]), SliceShared(sb, offset=[s % 2, 0:, 0:]), acc, out=acc)
    WgmmaCommitGroup()
    WgmmaWaitGroup(0)
    StoreGlobal(acc, ViewGlobal(c_ptr, shape=[128, 128]))
)";

} // namespace

TEST_CASE("Wgmma: four m64n128k16 per warpgroup with descriptors, fence, commit and wait") {
  VerifiedModule m = buildSource(kWgmmaSource);
  const WgmmaPlan &plan = m.programs[0].wgmma.begin()->second;
  // two warpgroups along M, n = 128, four k16 steps; A K-major 128-byte swizzle (SBO = 8 rows of
  // 128 bytes), B N-major: LBO = one panel of 64 x 64 f16, SBO = 8 rows of 128 bytes
  CHECK(plan.wgM == 2);
  CHECK(plan.wgN == 1);
  CHECK(plan.n == 128);
  CHECK(plan.ksteps == 4);
  CHECK(plan.transB);
  REQUIRE(plan.a.size() == 8);
  CHECK(plan.a[0].mode == 1);
  CHECK(plan.a[0].sbo == 1024);
  CHECK(plan.a[1].startDelta == 32);       // k16 further along the 128-byte row
  CHECK(plan.a[4].startDelta == 64 * 128); // the second warpgroup's rows
  REQUIRE(plan.b.size() == 4);
  CHECK(plan.b[0].mode == 1);
  CHECK(plan.b[0].lbo == 64 * 64 * 2);
  CHECK(plan.b[0].sbo == 1024);
  CHECK(plan.b[1].startDelta == 16 * 128); // 16 rows of the panel further
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  CHECK(contains(k->ptx, "wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16"));
  CHECK(contains(k->ptx, "p, 1, 1, 0, 1;"));
  CHECK(contains(k->ptx, "wgmma.fence.sync.aligned"));
  CHECK(contains(k->ptx, "wgmma.commit_group.sync.aligned"));
  CHECK(contains(k->ptx, "wgmma.wait_group.sync.aligned 0"));
  CHECK(contains(k->ptx, ".align 1024 .b8 tilus_smem[]"));
}

TEST_CASE("Wgmma: ptxas accepts the sm_90a kernel and the GEMM program" * needsPtxas()) {
  VerifiedModule m = buildSource(kWgmmaSource);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  std::string log;
  bool ok = runPtxas(k->ptx, 90, log);
  INFO(log);
  CHECK(ok);
  for (const char *at : {"f16", "bf16"}) {
    VerifiedModule g = buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/gemm/wgmma.tasm",
                                 {{"AT", at}, {"CT", "f32"}});
    Expected<PtxKernel> gk = compileFor(g, 90);
    REQUIRE_OK(gk);
    CHECK(contains(gk->ptx,
                   std::string("wgmma.mma_async.sync.aligned.m64n256k16.f32.") + at + "." + at));
    ok = runPtxas(gk->ptx, 90, log);
    INFO(log);
    CHECK(ok);
    // the k loop keeps one group in flight: ptxas must not serialise the wgmma pipeline
    CHECK(!contains(log, "C7514"));
  }
}
