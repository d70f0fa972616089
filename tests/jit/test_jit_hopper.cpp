// The Hopper instructions in the JIT (docs/isa.md, "Hopper instructions"; docs/jit.md): the PTX
// forms they become on sm_90a, ptxas accepting them for sm_90a, and a clear `unsupported`
// error when the target is sm_80.
#include "cluster_program.h"
#include "jit/jit_test_util.h"
#include "loader/tensor_map.h"

using namespace tilus;
using namespace tilus::testing;
using tilus::testing::kClusterGroups;
using tilus::testing::kClusterPipe;

namespace {

/// The PTX statement that starts with `head` (up to its ';'), empty when there is none.
std::string statementAt(const std::string &ptx, const std::string &head) {
  size_t at = ptx.find(head);
  return at == std::string::npos ? std::string() : ptx.substr(at, ptx.find(';', at) - at);
}

std::string replaceAll(std::string s, const std::string &from, const std::string &to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
  return s;
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
  checkPtxasAccepts(k->ptx, 90);
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
  // the four k steps of the instruction are one inline-asm block: the first adds to the
  // accumulators by scale-d (p), the others always (t); one asm per instruction, not per k step
  size_t first = k->ptx.find("wgmma.mma_async.");
  REQUIRE(first != std::string::npos);
  size_t begin = k->ptx.rfind("// begin inline asm", first);
  size_t end = k->ptx.find("// end inline asm", first);
  REQUIRE(begin != std::string::npos);
  REQUIRE(end != std::string::npos);
  std::string block = k->ptx.substr(begin, end - begin);
  CHECK(occurrences(block, "wgmma.mma_async.sync.aligned.m64n128k16") == 4);
  CHECK(occurrences(block, ", p, 1, 1, 0, 1;") == 1);
  CHECK(occurrences(block, ", t, 1, 1, 0, 1;") == 3);
  CHECK(occurrences(k->ptx, "wgmma.mma_async.") == 4);
  CHECK(contains(k->ptx, "wgmma.fence.sync.aligned"));
  CHECK(contains(k->ptx, "wgmma.commit_group.sync.aligned"));
  CHECK(contains(k->ptx, "wgmma.wait_group.sync.aligned 0"));
  CHECK(contains(k->ptx, ".align 1024 .b8 tilus_smem[]"));
}

TEST_CASE("WgmmaWaitGroup(0): the accumulators are read after the wait, no wgmma serialised" *
          needsPtxas()) {
  // The JIT passes the accumulators on after the last wait as they are (no barrier of its own);
  // the backend keeps their reads after the wait asm, so ptxas issues every chain without
  // serialising it: no C7510-C7520 warning for the programs with the most accumulators read
  // after a wait (the epilogues of the warp-specialised and clustered GEMMs, the FP8 linear
  // layer, the attention's softmax and output)
  const std::string root = std::string(TILUSVM_SOURCE_DIR) + "/programs/";
  const std::pair<std::string, std::map<std::string, std::string>> programs[] = {
      {"gemm/wgmma_ws.tasm", {{"AT", "f16"}, {"CT", "f16"}}},
      {"gemm/wgmma_cluster.tasm", {{"AT", "bf16"}, {"CT", "bf16"}}},
      {"layers/linear_fp8.tasm", {}},
      {"attention/prefill.tasm", {}},
  };
  for (const auto &[file, defines] : programs) {
    INFO(file);
    VerifiedModule m = buildFile(root + file, defines);
    Expected<PtxKernel> k = compileFor(m, 90);
    REQUIRE_OK(k);
    CHECK(contains(k->ptx, "wgmma.wait_group.sync.aligned 0;"));
    std::string log = checkPtxasAccepts(k->ptx, 90);
    INFO(log);
    CHECK(!contains(log, "C751"));
    CHECK(!contains(log, "C7520"));
  }
}

TEST_CASE("Wgmma descriptors: the stage's address field plus a constant per k step and atom") {
  // PTX ISA, "Matrix Descriptor Format": bits 0-13 start address >> 4, 16-29 LBO >> 4, 32-45
  // SBO >> 4, 62-63 swizzle mode. Every descriptor of an operand is the field of the operand's
  // origin plus fixed bits plus startDelta / 16: those constants, in decimal, are in the PTX
  // (B: one per k step after the first; A: one per k step and warpgroup, chosen by a select)
  VerifiedModule m = buildSource(kWgmmaSource);
  const WgmmaPlan &plan = m.programs[0].wgmma.begin()->second;
  auto constant = [](const WgmmaDescriptor &d) {
    uint64_t v =
        (uint64_t(d.lbo >> 4) << 16) | (uint64_t(d.sbo >> 4) << 32) | (uint64_t(d.mode) << 62);
    return std::to_string(v + uint64_t(d.startDelta / 16));
  };
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  for (size_t i = 1; i < plan.b.size(); ++i) {
    CAPTURE(i);
    CHECK(contains(k->ptx, ", " + constant(plan.b[i]) + ";"));
  }
  for (size_t i = 0; i < plan.a.size(); ++i) {
    if (plan.a[i].startDelta == 0)
      continue; // the origin's own field, or-ed with the fixed bits
    CAPTURE(i);
    CHECK(contains(k->ptx, constant(plan.a[i])));
  }
  // no descriptor recomputes its start: one widened address field per operand between the fence
  // and the commit (A and B), not one per wgmma and warpgroup (12 here)
  size_t from = k->ptx.find("wgmma.fence.sync.aligned");
  size_t to = k->ptx.find("wgmma.commit_group.sync.aligned");
  REQUIRE(from != std::string::npos);
  REQUIRE(to != std::string::npos);
  std::string issue = k->ptx.substr(from, to - from);
  size_t widened = 0;
  for (size_t at = issue.find("cvt.u64.u32"); at != std::string::npos;
       at = issue.find("cvt.u64.u32", at + 1))
    ++widened;
  CHECK(widened == 2);
}

TEST_CASE("Wgmma: ptxas accepts the sm_90a kernel and the GEMM program" * needsPtxas()) {
  VerifiedModule m = buildSource(kWgmmaSource);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  checkPtxasAccepts(k->ptx, 90);
  for (const char *at : {"f16", "bf16"}) {
    VerifiedModule g = buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/gemm/wgmma.tasm",
                                 {{"AT", at}, {"CT", "f32"}});
    Expected<PtxKernel> gk = compileFor(g, 90);
    REQUIRE_OK(gk);
    CHECK(contains(gk->ptx,
                   std::string("wgmma.mma_async.sync.aligned.m64n256k16.f32.") + at + "." + at));
    std::string log = checkPtxasAccepts(gk->ptx, 90);
    // the k loop keeps one group in flight: ptxas must not serialise the wgmma pipeline
    CHECK(!contains(log, "C7514"));
  }
}

namespace {

// Wgmma with A in registers: a [128, 32] loaded into the A fragment of two warpgroups, B an
// N-major tile; then a second form with FP8 A (k32, four elements per register) and K-major B.
const char *kWgmmaRegisterASource = R"(
def k<1>(AT* a_ptr, AT* b_ptr, f32* c_ptr) threads=256:
    sb = AllocateShared(AT, shape=[32, 64], layout=swizzle(row_major(32, 64), 3, 3, 3))
    CopyAsync(sb, ViewGlobal(b_ptr, shape=[32, 64]))
    CopyAsyncWaitAll()
    FenceProxyAsync()
    Synchronize()
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[128, 32]), layout=spatial(2, 1).local(1, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 2))
    acc = AllocateRegister(f32, layout=spatial(2, 1).spatial(4, 1).local(1, 8).local(2, 1).spatial(8, 4).local(1, 2))
    WgmmaFence()
    Wgmma(a, sb, acc, out=acc)
    WgmmaCommitGroup()
    WgmmaWaitGroup(0)
    StoreGlobal(acc, ViewGlobal(c_ptr, shape=[128, 64]))
)";

const char *kWgmmaRegisterAFp8Source = R"(
def k<1>(f8e4m3* a_ptr, f8e5m2* b_ptr, f32* c_ptr) threads=128:
    sb = AllocateShared(f8e5m2, shape=[64, 16], layout=swizzle(column_major(64, 16), 2, 4, 3))
    CopyAsync(sb, ViewGlobal(b_ptr, shape=[64, 16]))
    CopyAsyncWaitAll()
    FenceProxyAsync()
    Synchronize()
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[64, 64]), layout=local(1, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 4))
    acc = AllocateRegister(f32, layout=spatial(4, 1).local(1, 2).local(2, 1).spatial(8, 4).local(1, 2), init=0.0)
    WgmmaFence()
    Wgmma(a, sb, acc, out=acc)
    WgmmaCommitGroup()
    WgmmaWaitGroup(0)
    StoreGlobal(acc, ViewGlobal(c_ptr, shape=[64, 16]))
)";

} // namespace

TEST_CASE("Wgmma with A in registers: the register-A form, four packed registers per k step") {
  for (const char *at : {"f16", "bf16"}) {
    VerifiedModule m = buildSource(replaceAll(kWgmmaRegisterASource, "AT", at));
    const WgmmaPlan &plan = m.programs[0].wgmma.begin()->second;
    CHECK(plan.registerA);
    CHECK(plan.a.empty());
    CHECK(plan.wgM == 2);
    CHECK(plan.ksteps == 2);
    CHECK(plan.transB);
    Expected<PtxKernel> k = compileFor(m, 90);
    REQUIRE_OK(k);
    // d: 32 f32; a: {r, r, r, r}; descriptor B; scale-d; imm-scale-a, imm-scale-b, imm-trans-b
    std::string head = std::string("wgmma.mma_async.sync.aligned.m64n64k16.f32.") + at + "." + at;
    std::string stmt = statementAt(k->ptx, head);
    REQUIRE(!stmt.empty());
    INFO(stmt);
    size_t close = stmt.find('}');
    REQUIRE(close != std::string::npos);
    std::string afterD = stmt.substr(close + 1); // ", {%r.., %r.., %r.., %r..}, %rd.., p, 1, 1, 1"
    CHECK(contains(afterD, "{%r"));
    CHECK(contains(afterD, "}, %rd"));
    CHECK(contains(afterD, "p, 1, 1, 1"));
    // two k16 steps: two wgmma per thread
    size_t count = 0;
    for (size_t p = k->ptx.find(head); p != std::string::npos; p = k->ptx.find(head, p + 1))
      ++count;
    CHECK(count == 2);
  }
  VerifiedModule f = buildSource(kWgmmaRegisterAFp8Source);
  CHECK(f.programs[0].wgmma.begin()->second.registerA);
  Expected<PtxKernel> k = compileFor(f, 90);
  REQUIRE_OK(k);
  std::string head = "wgmma.mma_async.sync.aligned.m64n16k32.f32.e4m3.e5m2";
  std::string stmt = statementAt(k->ptx, head);
  REQUIRE(!stmt.empty());
  INFO(stmt);
  // FP8: four A registers, no transpose operands
  CHECK(contains(stmt, "{%r"));
  CHECK(contains(stmt, "p, 1, 1"));
  CHECK(!contains(stmt, "p, 1, 1, "));
}

namespace {

// A register A operand computed in f32 and cast to f16 (the P V of attention): the cast's NaN
// canonicalization cannot be seen through the wgmma (a NaN element makes the D elements it
// reaches NaN, and the stored accumulators are canonicalized)
const char *kWgmmaCastASource = R"(
def k<1>(f32* a_ptr, f16* b_ptr, f32* c_ptr) threads=128:
    sb = AllocateShared(f16, shape=[32, 64], layout=swizzle(row_major(32, 64), 3, 3, 3))
    CopyAsync(sb, ViewGlobal(b_ptr, shape=[32, 64]))
    CopyAsyncWaitAll()
    FenceProxyAsync()
    Synchronize()
    x = LoadGlobal(ViewGlobal(a_ptr, shape=[64, 32]), layout=local(1, 2).spatial(4, 1).column_local(2, 2).spatial(8, 4).local(1, 2))
    acc = AllocateRegister(f32, layout=spatial(4, 1).local(1, 8).local(2, 1).spatial(8, 4).local(1, 2))
    WgmmaFence()
    Wgmma(Cast(Exp2(x), f16), sb, acc, out=acc)
    WgmmaCommitGroup()
    WgmmaWaitGroup(0)
    StoreGlobal(acc, ViewGlobal(c_ptr, shape=[64, 64]))
)";

} // namespace

TEST_CASE("Wgmma with A in registers: every A register is converted before one fence ahead of "
          "the wgmma chain, and a cast into A keeps no NaN canonicalization") {
  VerifiedModule m = buildSource(kWgmmaCastASource);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  const std::string &ptx = k->ptx;
  size_t first = ptx.find("wgmma.mma_async.");
  REQUIRE(first != std::string::npos);
  // the program's WgmmaFence and the JIT's fence of the packed registers, both before the first
  // wgmma; none between the two wgmma of the k steps
  auto before = [&](const char *needle) { // occurrences of needle, each before the first wgmma
    size_t n = 0;
    for (size_t p = ptx.find(needle); p != std::string::npos; p = ptx.find(needle, p + 1)) {
      CHECK(p < first);
      ++n;
    }
    return n;
  };
  CHECK(before("wgmma.fence.sync.aligned") == 2);
  // every A register is one pair conversion of the cast (cvt.rn.f16x2.f32, jit/emit_convert.cpp
  // narrowPairs), all eight before the fence; no mov packs one ("mov.b32 %r, {%rs, %rs}")
  CHECK(before("cvt.rn.f16x2.f32") == 8);
  CHECK(ptx.find(", {%rs") == std::string::npos);
  // the cast to f16 is not canonicalized; the f32 accumulators stored to memory are
  CHECK(!contains(ptx, "setp.nan.f16"));
  CHECK(!contains(ptx, "set.nan.u32.f16x2"));
  CHECK(contains(ptx, "setp.nan.f32"));
}

TEST_CASE("Wgmma with A in registers: ptxas accepts the sm_90a kernels" * needsPtxas()) {
  std::vector<std::string> sources = {replaceAll(kWgmmaRegisterASource, "AT", "f16"),
                                      replaceAll(kWgmmaRegisterASource, "AT", "bf16"),
                                      kWgmmaRegisterAFp8Source, kWgmmaCastASource};
  for (const std::string &src : sources) {
    VerifiedModule m = buildSource(src);
    Expected<PtxKernel> k = compileFor(m, 90);
    REQUIRE_OK(k);
    std::string log = checkPtxasAccepts(k->ptx, 90);
    CHECK(!contains(log, "C7514"));
    // no warpgroup.arrive injected before each wgmma (which serialises the chain)
    CHECK(!contains(log, "C7519"));
  }
}

TEST_CASE("Wgmma with A in registers is refused for sm_80") {
  VerifiedModule m = buildSource(replaceAll(kWgmmaRegisterASource, "AT", "f16"));
  Expected<PtxKernel> k = compileFor(m, 80);
  REQUIRE_FALSE(k.ok());
  CHECK(k.status().first().code == ErrorCode::Unsupported);
  CHECK(contains(k.status().first().message, "needs sm_90a (Hopper); the target is sm_80"));
}

namespace {

// TmaLoad of a swizzled A stage (one box) and a B tile of two 64-column panels (two boxes), at
// run-time coordinates; a 3-d strided view with a fixed entry (a box extent of 1).
const char *kTmaSource = R"(
def k<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr, i32 m, i32 n, i32 r0, i32 p) threads=128:
    ga = ViewGlobal(a_ptr, shape=[m, 64])
    gb = ViewGlobal(b_ptr, shape=[64, n])
    gc = ViewGlobal(c_ptr, shape=[4, m, 8], strides=[m * 8, 8, 1])
    sa = AllocateShared(f16, shape=[2, 64, 64], layout=swizzle(row_major(2, 64, 64), 3, 3, 3))
    sb = AllocateShared(f16, shape=[64, 128], layout=row_major(1, 2).swizzle(row_major(64, 64), 3, 3, 3))
    sc = AllocateShared(f32, shape=[16, 8])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=8192 + 16384 + 512)
    TmaLoad(SliceShared(sa, offset=[r0 % 2, 0:, 0:]), ga, bar=bar, offset=[r0:, 0:])
    TmaLoad(sb, gb, bar=bar)
    TmaLoad(sc, gc, bar=bar, offset=[p, r0:, 0:])
    MbarrierWait(bar, parity=0)
)";

} // namespace

TEST_CASE("TmaLoad: one cp.async.bulk.tensor per box by thread 0, tensor maps as grid "
          "constants" *
          needsPtxas()) {
  VerifiedModule m = buildSource(kTmaSource);
  // the checker's plan: three tensor maps (A 128-byte swizzled [64, 64]; B boxes of 64
  // columns; C [1, 16, 8] unswizzled), B's second box 64 columns to the right and 8 KiB on
  const ProgramInfo &info = m.programs[0];
  REQUIRE(info.tensorMaps.size() == 3);
  CHECK(info.tensorMaps[0].box == std::vector<int64_t>{64, 64});
  CHECK(info.tensorMaps[0].swizzleBytes == 128);
  CHECK(info.tensorMaps[1].box == std::vector<int64_t>{64, 64});
  CHECK(info.tensorMaps[2].box == std::vector<int64_t>{1, 16, 8});
  CHECK(info.tensorMaps[2].swizzleBytes == 0);
  size_t boxes = 0;
  for (const auto &[index, plan] : info.tma) {
    boxes += plan.boxes.size();
    if (plan.tensorMap == 1) {
      REQUIRE(plan.boxes.size() == 2);
      CHECK(plan.boxes[1].innerShift == 64);
      CHECK(plan.boxes[1].sharedDelta == 64 * 64 * 2);
      CHECK(plan.bytes == 64 * 128 * 2);
    }
  }
  CHECK(boxes == 4);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  CHECK(contains(k->ptx, ".param .align 64 .b8 k_param_7[128]"));
  CHECK(contains(k->ptx, ".param .align 64 .b8 k_param_9[128]"));
  CHECK(contains(k->ptx, "cvta.param.u64"));
  size_t copies = 0;
  for (size_t at = k->ptx.find("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
                               "complete_tx::bytes");
       at != std::string::npos; at = k->ptx.find("cp.async.bulk.tensor.2d", at + 1))
    ++copies;
  CHECK(copies == 3);
  CHECK(contains(k->ptx, "cp.async.bulk.tensor.3d.shared::cluster.global.tile"));
  checkPtxasAccepts(k->ptx, 90);
}

TEST_CASE("TmaLoad from views of rank 6 and 7: merged tensor-map dimensions, their geometry "
          "and PTX" *
          needsPtxas()) {
  // tests/conformance/ok_tma_merged_dims.tasm: a paged cache [pages, 2, 1, 2, 4, heads, 16]
  // read at (page, half 1, head) and a [2, 1, 2, 2, 2, 8] view read whole
  VerifiedModule m = buildSource(R"(
def k<1>(u32* c_ptr, u32* d_ptr, i32 pages, i32 heads, i32 p, i32 h) threads=32:
    gc = ViewGlobal(c_ptr, shape=[pages, 2, 1, 2, 4, heads, 16])
    gd = ViewGlobal(d_ptr, shape=[2, 1, 2, 2, 2, 8])
    sc = AllocateShared(u32, shape=[1, 2, 4, 16])
    sd = AllocateShared(u32, shape=[2, 1, 2, 2, 2, 8])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=512 + 1024)
    TmaLoad(sc, gc, bar=bar, offset=[p, 1, 0:, 0:, 0:, h, 0:])
    TmaLoad(sd, gd, bar=bar)
    MbarrierWait(bar, parity=0)
)");
  const ProgramInfo &info = m.programs[0];
  REQUIRE(info.tensorMaps.size() == 2);
  // dimensions 2 to 4 merge into 1 (coordinate x 8); the fixed page and head stay apart
  CHECK(info.tensorMaps[0].groups == std::vector<uint32_t>{1, 4, 1, 1});
  CHECK(info.tensorMaps[0].scales == std::vector<int64_t>{1, 8, 1, 1});
  CHECK(info.tensorMaps[0].box == std::vector<int64_t>{1, 8, 1, 16});
  // every inner dimension is whole: one dimension of 2 x 8 rows, then the rows
  CHECK(info.tensorMaps[1].groups == std::vector<uint32_t>{5, 1});
  CHECK(info.tensorMaps[1].scales == std::vector<int64_t>{8, 1});
  CHECK(info.tensorMaps[1].box == std::vector<int64_t>{16, 8});
  // the geometry at pages = 10, heads = 3 (innermost first): the merged dimension spans 16
  // slots, its stride is the slot's (3 heads x 16 words)
  const Program &prog = m.module.programs[0];
  auto values = [&](VarId v) -> uint64_t {
    const std::string &name = prog.var(v).name;
    return name == "pages" ? 10 : name == "heads" ? 3 : name == "c_ptr" ? 4096 : 8192;
  };
  Expected<TensorMapGeometry> g = tensorMapGeometry(prog, info.tensorMaps[0], values);
  REQUIRE_OK(g);
  CHECK(g->rank == 4);
  CHECK(g->dims[0] == 16);
  CHECK(g->dims[1] == 3);
  CHECK(g->dims[2] == 16);
  CHECK(g->dims[3] == 10);
  CHECK(g->strideBytes[1] == 16 * 4);
  CHECK(g->strideBytes[2] == 3 * 16 * 4);
  CHECK(g->strideBytes[3] == 16 * 3 * 16 * 4);
  CHECK(g->box[2] == 8);
  Expected<TensorMapGeometry> gd = tensorMapGeometry(prog, info.tensorMaps[1], values);
  REQUIRE_OK(gd);
  CHECK(gd->rank == 2);
  CHECK(gd->dims[1] == 16);
  CHECK(gd->strideBytes[1] == 8 * 4);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  CHECK(contains(k->ptx, "cp.async.bulk.tensor.4d.shared::cluster.global.tile"));
  CHECK(contains(k->ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.tile"));
  checkPtxasAccepts(k->ptx, 90);
}

TEST_CASE("TmaLoad: ptxas accepts the TMA GEMM program, f16 and bf16" * needsPtxas()) {
  for (const char *at : {"f16", "bf16"}) {
    VerifiedModule g = buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/gemm/wgmma_tma.tasm",
                                 {{"AT", at}, {"CT", at}});
    REQUIRE(g.programs[0].tensorMaps.size() == 3); // A, B and the C store
    Expected<PtxKernel> gk = compileFor(g, 90);
    REQUIRE_OK(gk);
    CHECK(contains(gk->ptx, "cp.async.bulk.tensor.2d"));
    std::string log = checkPtxasAccepts(gk->ptx, 90);
    CHECK(!contains(log, "C7514"));
  }
}

TEST_CASE("the FP8 GEMM reads B^T as words into the register-A wgmma, nothing serialised or "
          "spilled" *
          needsPtxas()) {
  // programs/gemm/wgmma_fp8.tasm (docs/jit.md, "FP8 GEMM on wgmma"): each consumer thread reads
  // its k tile of B^T as 32 words of B's N-major stage (4 consecutive n of one k row), regroups
  // the bytes in registers and issues two m64n128k32 atoms per k32 step with A in registers.
  // Compiled as the benchmarks' launches are (aligned pointers, m, n, k multiples of 16)
  VerifiedModule g =
      buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/gemm/wgmma_fp8.tasm", {});
  JitOptions options;
  options.smVersion = 90;
  options.specialization.params = {ParamFact::Aligned16,   ParamFact::Aligned16,
                                   ParamFact::Aligned16,   ParamFact::Divisible16,
                                   ParamFact::Divisible16, ParamFact::Divisible16};
  Expected<PtxKernel> k = compileToPtx(g, 0, options);
  REQUIRE_OK(k);
  // 32 word loads of B^T per k tile, each from a thread's address; the split-K epilogue's
  // ticket (a block-uniform scalar through shared memory) is read at fixed addresses
  size_t wordLoads = 0;
  std::istringstream lines(k->ptx);
  for (std::string line; std::getline(lines, line);)
    if (line.find("ld.shared.u32") != std::string::npos &&
        line.find("[tilus_smem+") == std::string::npos)
      ++wordLoads;
  CHECK(wordLoads == 32);
  CHECK(!contains(k->ptx, "ld.shared.u8"));
  CHECK(!contains(k->ptx, "ld.shared.b8"));
  // the register form: the A operand is a brace list of registers, not a descriptor
  CHECK(occurrences(k->ptx, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {") == 8);
  const std::string wgmma = statementAt(k->ptx, "wgmma.mma_async.sync.aligned.m64n128k32");
  INFO(wgmma);
  CHECK(occurrences(wgmma, "{") == 2); // the accumulator and the four A registers
  // the epilogue: C^T's four consecutive n of one m in a thread, reordered to adjacent slots,
  // rounded by pairs and stored as 8-byte groups (32 per thread and tile), no 2-byte stores
  CHECK(occurrences(k->ptx, "cvt.rn.f16x2.f32") == 64);
  CHECK(occurrences(k->ptx, "st.global.v2.b32") == 32);
  CHECK(!contains(k->ptx, "st.global.b16"));
  std::string log = checkPtxasAccepts(k->ptx, 90, "-v");
  CHECK(contains(log, " 0 bytes spill stores"));
  // no wgmma serialised (operand registers written in flight, or an injected arrive/wait)
  CHECK(!contains(log, "C7513"));
  CHECK(!contains(log, "C7514"));
  CHECK(!contains(log, "C7519"));
}

TEST_CASE("TmaStore: one bulk_group copy per box by thread 0, then its commit and wait" *
          needsPtxas()) {
  const char *src = R"(
def k<1>(f16* b_ptr, i32 n, i32 c0) threads=128:
    gb = ViewGlobal(b_ptr, shape=[64, n])
    sb = AllocateShared(f16, shape=[64, 128], layout=row_major(1, 2).swizzle(row_major(64, 64), 3, 3, 3))
    StoreShared(AllocateRegister(f16, layout=spatial(32, 4).local(2, 32), init=1.0), sb)
    FenceProxyAsync()
    Synchronize()
    TmaStore(sb, gb, offset=[0:, c0:])
    TmaStoreCommitGroup()
    TmaStoreWaitGroup(0)
)";
  VerifiedModule m = buildSource(src);
  REQUIRE(m.programs[0].tensorMaps.size() == 1);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  size_t copies = 0;
  const std::string form = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group";
  for (size_t at = k->ptx.find(form); at != std::string::npos; at = k->ptx.find(form, at + 1))
    ++copies;
  CHECK(copies == 2);
  CHECK(contains(k->ptx, "cp.async.bulk.commit_group;"));
  CHECK(contains(k->ptx, "cp.async.bulk.wait_group.read 0;"));
  checkPtxasAccepts(k->ptx, 90);
  REQUIRE_FALSE(compileFor(m, 80).ok());
}

TEST_CASE("PermuteShared: a TMA box written through a transposed view, read by wgmma as K-major "
          "B" *
          needsPtxas()) {
  VerifiedModule m =
      buildFile(std::string(TILUSVM_SOURCE_DIR) + "/tests/conformance/ok_permute_shared.tasm", {});
  // the box of the K tile is [32, 64] (the global order), 128-byte swizzled: one box
  const ProgramInfo &info = m.programs[0];
  REQUIRE(info.tensorMaps.size() == 2);
  CHECK(info.tensorMaps[1].box == std::vector<int64_t>{32, 64});
  CHECK(info.tensorMaps[1].swizzleBytes == 128);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  CHECK(contains(k->ptx, "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16"));
  checkPtxasAccepts(k->ptx, 90);
}

TEST_CASE("TmaLoad is refused for sm_80") {
  VerifiedModule m = buildSource(kTmaSource);
  Expected<PtxKernel> k = compileFor(m, 80);
  REQUIRE_FALSE(k.ok());
  CHECK(k.status().first().code == ErrorCode::Unsupported);
}

TEST_CASE("clusters: the kernel's cluster directives and the cluster instructions' PTX forms") {
  // tests/cluster_program.h, clusters of 2 blocks, with and without thread groups
  for (const std::string &source : {kClusterPipe, kClusterGroups}) {
    VerifiedModule m = buildSource(source);
    Expected<PtxKernel> k = compileFor(m, 90);
    REQUIRE_OK(k);
    // after .reqntid, before the body
    size_t reqntid = k->ptx.find(".reqntid"), body = k->ptx.find('{', reqntid);
    size_t directive = k->ptx.find(".explicitcluster\n.reqnctapercluster 2, 1, 1\n");
    CHECK(directive != std::string::npos);
    CHECK((reqntid < directive && directive < body));
    CHECK(contains(k->ptx, "%cluster_ctarank"));
    CHECK(contains(k->ptx, "barrier.cluster.arrive.release.aligned;"));
    CHECK(contains(k->ptx, "barrier.cluster.wait.acquire.aligned;"));
    CHECK(contains(statementAt(k->ptx, "cp.async.bulk.tensor.2d.shared::cluster.global.tile"),
                   ".multicast::cluster ["));
    CHECK(contains(k->ptx, "mapa.shared::cluster.u32"));
    CHECK(contains(k->ptx, "mbarrier.arrive.shared::cluster.b64 _,"));
  }
  // in the thread group of 128 of 160 threads, the group's first warp adds one arrival
  Expected<PtxKernel> g = compileFor(buildSource(kClusterGroups), 90);
  REQUIRE_OK(g);
  CHECK(contains(g->ptx, "@p mbarrier.arrive.shared::cluster.b64 _, [ra],"));
}

TEST_CASE("clusters: ptxas accepts the sm_90a kernels" * needsPtxas()) {
  for (const std::string &source : {kClusterPipe, kClusterGroups}) {
    Expected<PtxKernel> k = compileFor(buildSource(source), 90);
    REQUIRE_OK(k);
    checkPtxasAccepts(k->ptx, 90);
  }
}

TEST_CASE("clusters: without cluster= the rank is 0 and ClusterSync() is the block's barrier") {
  const char *src = R"(
def k<4>(i32* y_ptr) threads=64:
    pid = BlockIndices()
    rank = ClusterRank()
    ClusterSync()
    StoreScalar(ViewGlobal(y_ptr, shape=[4]), offset=[pid], value=rank + pid)
)";
  for (int sm : {80, 90}) {
    Expected<PtxKernel> k = compileFor(buildSource(src), sm);
    REQUIRE_OK(k);
    CHECK(!contains(k->ptx, "cluster"));
    CHECK(contains(k->ptx, "bar.sync"));
  }
}

TEST_CASE("clusters: cluster= is refused for sm_80 with an error at the program") {
  Expected<PtxKernel> k = compileFor(buildSource(kClusterPipe), 80);
  REQUIRE_FALSE(k.ok());
  const Diagnostic &d = k.status().first();
  CHECK(d.code == ErrorCode::Unsupported);
  CHECK(contains(d.message, "cluster=2 needs sm_90a (Hopper); the target is sm_80"));
  CHECK(d.location.line == 6); // the def
}
