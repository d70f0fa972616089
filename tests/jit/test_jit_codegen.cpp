// Properties of the generated code that the JIT promises (docs/jit.md): the kernel ABI
// (entry name, parameters, .reqntid, dynamic shared memory), the fast paths (mma.sync for the
// paper matmul, cp.async for the pipelined one, vector loads, warp shuffles, ex2.approx for
// the exponentials where it meets the ISA's 2 ulp), cache-key versions, errors, and thread
// safety of concurrent compilations.
#include "byte_transpose_program.h"
#include "jit/jit_test_util.h"
#include "tests/jit/exact_rounding.h"
#include "view_repack_program.h"

#include <cmath>
#include <cstdlib>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

using namespace tilus;
using namespace tilus::testing;

namespace {

std::string programPath(const char *name) {
  return std::string(TILUSVM_SOURCE_DIR) + "/programs/" + name;
}

PtxKernel ptxOf(const VerifiedModule &m, const std::string &program, int sm = 90) {
  for (size_t p = 0; p < m.module.programs.size(); ++p) {
    if (m.module.programs[p].name != program)
      continue;
    JitOptions options;
    options.smVersion = sm;
    Expected<PtxKernel> k = compileToPtx(m, p, options);
    REQUIRE_OK(k);
    return *k;
  }
  FAIL("no program " << program);
  return {};
}

/// Occurrences of the instruction `op` under a predicate guard (`@%p12 op` or, inside an asm
/// statement's own scope, `@p op`).
size_t guarded(const std::string &text, const std::string &op) {
  size_t n = 0;
  for (size_t at = text.find(" " + op); at != std::string::npos; at = text.find(" " + op, at + 1)) {
    size_t guard = text.rfind('@', at);
    if (guard != std::string::npos && at - guard <= 8 && text.find_first_of(" ;\n", guard) == at)
      ++n;
  }
  return n;
}

/// Exp2(x) and Exp(x) of a tensor of type T.
VerifiedModule exponentials(const std::string &T) {
  return buildSource(
      "def m<1>(" + T + "* x_ptr, " + T + "* y_ptr) threads=32:\n" +
      "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32).local(2))\n" +
      "    g = ViewGlobal(y_ptr, shape=[2, 64])\n" +
      "    StoreGlobal(Exp2(x), g, offset=[0, 0:])\n" +
      "    StoreGlobal(Exp(x), g, offset=[1, 0:])\n");
}

} // namespace

TEST_CASE("dynamic shared memory: the allocations and the scratch bytes the lowering stages") {
  // a ConvertLayout that moves data stages its 64 f32 (256 bytes) after the 100-byte allocation
  // (the scratch area starts at 128); the kernel ABI case below has a planned area left unused
  VerifiedModule m =
      buildSource("def k<1>(f32* x_ptr, f32* y_ptr) threads=32:\n"
                  "    s = AllocateShared(u8, shape=[100])\n"
                  "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32).local(2))\n"
                  "    y = ConvertLayout(x, layout=local(2).spatial(32))\n"
                  "    StoreGlobal(y, ViewGlobal(y_ptr, shape=[64]))\n");
  CHECK(m.programs[0].scratchByteOffset == 128);
  CHECK(ptxOf(m, "k").sharedBytes == 128 + 256);
}

TEST_CASE("kernel ABI: entry name, parameters in order, reqntid, dynamic shared memory") {
  VerifiedModule m = buildFile(programPath("matmul_f16_pipelined.tasm"));
  PtxKernel k = ptxOf(m, "matmul_f16");
  CHECK(k.entryName == "matmul_f16");
  CHECK(k.threads == 128);
  // its Dot becomes mma.sync and stages nothing: the allocations without the scratch area
  // that the checker planned for a Dot on the scratch path
  CHECK(m.programs[0].scratchBytes > 0);
  CHECK(k.sharedBytes == m.programs[0].scratchByteOffset);
  CHECK(contains(k.ptx, ".reqntid 128"));
  CHECK(contains(k.ptx, ".extern .shared .align 16 .b8 tilus_smem[]"));
  // three pointers (u64) then three i32 scalars, in declaration order
  size_t entry = k.ptx.find(".entry matmul_f16(");
  REQUIRE(entry != std::string::npos);
  std::string params = k.ptx.substr(entry, k.ptx.find(')', entry) - entry);
  CHECK(contains(params, "matmul_f16_param_0"));
  bool pointerParam = contains(params, ".param .u64 .ptr .global .align 1 matmul_f16_param_0") ||
                      contains(params, ".param .u64 matmul_f16_param_0");
  CHECK(pointerParam);
  CHECK(contains(params, ".param .u32 matmul_f16_param_5"));
  CHECK_FALSE(contains(params, "matmul_f16_param_6"));
}

TEST_CASE("the paper matmul uses mma.sync m16n8k16 with f32 accumulation") {
  VerifiedModule m =
      buildFile(programPath("paper_matmul_f16_i6.tasm"), {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  for (int sm : {80, 90}) {
    PtxKernel k = ptxOf(m, "matmul", sm);
    CHECK(contains(k.ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
  }
}

TEST_CASE("the pipelined matmul uses cp.async with zero fill and mma.sync") {
  VerifiedModule m = buildFile(programPath("matmul_f16_pipelined.tasm"));
  PtxKernel k = ptxOf(m, "matmul_f16");
  CHECK(contains(k.ptx, "cp.async.cg.shared.global"));
  CHECK(contains(k.ptx, "cp.async.commit_group"));
  CHECK(contains(k.ptx, "cp.async.wait_group 1"));
  CHECK(contains(k.ptx, "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"));
  CHECK(contains(k.ptx, "bar.sync \t0"));
  // the A fragments (16x16) come in by ldmatrix.x4, the B fragments transposed
  CHECK(contains(k.ptx, "ldmatrix.sync.aligned.m8n8.x4.shared.b16"));
  CHECK(contains(k.ptx, "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16"));
}

TEST_CASE("StoreShared of mma fragments of 16-bit types is stmatrix on sm_90a, x4 and x2.trans" *
          needsPtxas()) {
  // a C-like layout (two x4 per warp), a B-like one (x2.trans), three matrices (an x4 that
  // repeats the last one), and a replicated layout (each element stored once: the ordinary path)
  struct Case {
    const char *layout;
    int rows, cols, threads;
    const char *expect;
  };
  const Case cases[] = {
      {"spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)", 64, 64, 128,
       "stmatrix.sync.aligned.m8n8.x4.shared.b16"},
      {"local(2, 1).column_spatial(4, 8).local(2, 1)", 16, 8, 32,
       "stmatrix.sync.aligned.m8n8.x2.trans.shared.b16"},
      {"local(3, 1).spatial(8, 4).local(1, 2)", 24, 8, 32,
       "stmatrix.sync.aligned.m8n8.x4.shared.b16"},
      {"replicate(2).spatial(1, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)", 32, 64, 128,
       nullptr},
  };
  for (const Case &c : cases) {
    std::string layout = c.layout;
    CAPTURE(layout);
    std::string rows = std::to_string(c.rows), cols = std::to_string(c.cols);
    std::string at = std::to_string(64 - c.rows) + ":, " + std::to_string(64 - c.cols) + ":";
    VerifiedModule m = buildSource(
        "def st<1>(f16* x_ptr, f16* y_ptr) threads=" + std::to_string(c.threads) + ":\n" +
        "    s = AllocateShared(f16, shape=[64, 64], layout=swizzle(row_major(64, 64), 3, 3, "
        "3))\n" +
        "    f = LoadGlobal(ViewGlobal(x_ptr, shape=[" + rows + ", " + cols +
        "]), layout=" + c.layout + ")\n" + "    StoreShared(f, s, offset=[" + at +
        "])\n    Synchronize()\n" + "    g = LoadShared(s, layout=spatial(" +
        std::to_string(c.threads / 4) + ", 4).local(" + std::to_string(64 / (c.threads / 4)) +
        ", 16))\n" + "    StoreGlobal(g, ViewGlobal(y_ptr, shape=[64, 64]))\n");
    JitOptions options;
    options.stmatrixEverywhere = true;
    options.smVersion = 80;
    Expected<PtxKernel> k80 = compileToPtx(m, 0, options);
    REQUIRE_OK(k80);
    CHECK_FALSE(contains(k80->ptx, "stmatrix")); // sm_90 and later only
    options.smVersion = 90;
    Expected<PtxKernel> k90 = compileToPtx(m, 0, options);
    REQUIRE_OK(k90);
    if (c.expect) {
      CHECK(contains(k90->ptx, c.expect));
      CHECK_FALSE(contains(k90->ptx, "st.shared")); // the fragment leaves by stmatrix alone
    } else {
      CHECK_FALSE(contains(k90->ptx, "stmatrix"));
    }
    checkPtxasAccepts(k90->ptx, 90);
    // by default only kernels with Hopper instructions (wgmma, TMA) store by stmatrix
    CHECK_FALSE(contains(ptxOf(m, "st", 90).ptx, "stmatrix"));
  }
  // the Hopper GEMMs' epilogues: the rounded accumulators leave by stmatrix.x4; the mma.sync
  // GEMM's keep their 4-byte stores
  CHECK(contains(ptxOf(buildFile(programPath("gemm/wgmma_tma.tasm")), "matmul", 90).ptx,
                 "stmatrix.sync.aligned.m8n8.x4.shared.b16"));
  CHECK_FALSE(
      contains(ptxOf(buildFile(programPath("gemm/mma_sync.tasm")), "matmul", 90).ptx, "stmatrix"));
}

TEST_CASE("vector_add loads and stores two contiguous f32 per thread as one vector") {
  VerifiedModule m = buildFile(programPath("vector_add.tasm"));
  PtxKernel k = ptxOf(m, "vector_add");
  CHECK(contains(k.ptx, "ld.global.v2.b32"));
  CHECK(contains(k.ptx, "st.global.v2.b32"));
}

TEST_CASE("Fma is one fma.rn per element (f32 and f64), with no separate mul and add") {
  // ok_fma.tasm: 32 f32 elements per block in three Fma (one beside an Add), 32 f64 in one
  VerifiedModule m = buildFile(std::string(TILUSVM_SOURCE_DIR) + "/tests/conformance/ok_fma.tasm");
  for (int sm : {80, 90}) {
    PtxKernel k = ptxOf(m, "k", sm);
    CHECK(occurrences(k.ptx, "fma.rn.f32") == 3);
    CHECK(occurrences(k.ptx, "fma.rn.f64") == 1);
    CHECK_FALSE(contains(k.ptx, "mul.rn.f32"));
    CHECK_FALSE(contains(k.ptx, "mul.rn.f64"));
  }
}

TEST_CASE("blocks_per_sm= becomes .minnctapersm beside .reqntid; 0 and absent give none") {
  VerifiedModule m =
      buildFile(std::string(TILUSVM_SOURCE_DIR) + "/tests/conformance/ok_blocks_per_sm.tasm");
  for (int sm : {80, 90}) {
    PtxKernel one = ptxOf(m, "one_warp", sm);
    CHECK(contains(one.ptx, ".reqntid 32, 1, 1"));
    CHECK(occurrences(one.ptx, ".minnctapersm 16") == 1);
    PtxKernel big = ptxOf(m, "big", sm);
    CHECK(contains(big.ptx, ".reqntid 1024, 1, 1"));
    CHECK(occurrences(big.ptx, ".minnctapersm 2") == 1);
    CHECK_FALSE(contains(ptxOf(m, "inferred", sm).ptx, ".minnctapersm"));
  }
  CHECK_FALSE(contains(ptxOf(buildFile(programPath("vector_add.tasm")), "vector_add").ptx,
                       ".minnctapersm"));
}

TEST_CASE("softmax reduces each row with warp shuffles, not shared memory") {
  VerifiedModule m = buildFile(programPath("softmax_rows.tasm"));
  PtxKernel k = ptxOf(m, "softmax");
  CHECK(contains(k.ptx, "shfl.sync.bfly.b32"));
  CHECK_FALSE(contains(k.ptx, "st.shared"));
}

TEST_CASE("compilerVersion names the TILUSVM and LLVM versions") {
  std::string v = JitOptions::compilerVersion();
  CHECK(contains(v, TILUSVM_VERSION));
  CHECK(contains(v, TILUSVM_LLVM_VERSION));
}

TEST_CASE("errors: unknown target and program index") {
  VerifiedModule m = buildFile(programPath("vector_add.tasm"));
  JitOptions options;
  options.smVersion = 70;
  CHECK_ERROR(compileToPtx(m, 0, options), ErrorCode::Unsupported);
  CHECK_ERROR(compileToPtx(m, 5), ErrorCode::Usage);
}

TEST_CASE("concurrent compilations give identical PTX") {
  VerifiedModule m = buildFile(programPath("matmul_f16_pipelined.tasm"));
  std::string reference = ptxOf(m, "matmul_f16").ptx;
  std::vector<std::string> results(4);
  std::vector<std::thread> threads;
  for (size_t k = 0; k < results.size(); ++k)
    threads.emplace_back([&, k] {
      Expected<PtxKernel> r = compileToPtx(m, 0);
      if (r)
        results[k] = r->ptx;
    });
  for (std::thread &t : threads)
    t.join();
  for (const std::string &r : results)
    CHECK(r == reference);
}

TEST_CASE("LLVM IR is available for inspection") {
  VerifiedModule m = buildFile(programPath("vector_add.tasm"));
  Expected<std::string> ir = compileToLlvmIr(m, 0);
  REQUIRE_OK(ir);
  CHECK(contains(*ir, "define ptx_kernel void @vector_add("));
  CHECK(contains(*ir, "!\"reqntidx\", i32 128"));
}

TEST_CASE("m16n8k32 atoms: s8 mma on both targets, e4m3 mma on sm_90a (PTX 8.4)") {
  VerifiedModule s8 = buildSource(m16n8k32Source("i8", "i32"));
  for (int sm : {80, 90}) {
    PtxKernel k = ptxOf(s8, "dot", sm);
    CHECK(contains(k.ptx, "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32"));
  }
  VerifiedModule e4m3 = buildSource(m16n8k32Source("f8e4m3", "f32"));
  PtxKernel k90 = ptxOf(e4m3, "dot", 90);
  CHECK(contains(k90.ptx, "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32"));
  CHECK(contains(k90.ptx, ".version 8.4"));
  PtxKernel k80 = ptxOf(e4m3, "dot", 80); // no FP8 tensor cores: through shared memory
  CHECK_FALSE(contains(k80.ptx, "mma.sync"));
}

TEST_CASE("m16n8k32 atoms: ptxas accepts the s8 and e4m3 kernels" * needsPtxas()) {
  VerifiedModule s8 = buildSource(m16n8k32Source("i8", "i32"));
  VerifiedModule e4m3 = buildSource(m16n8k32Source("f8e4m3", "f32"));
  for (int sm : {80, 90}) {
    checkPtxasAccepts(ptxOf(s8, "dot", sm).ptx, sm);
    checkPtxasAccepts(ptxOf(e4m3, "dot", sm).ptx, sm);
  }
}

TEST_CASE("16-byte per-thread chunks become ld.global.v4 / st.global.v4") {
  VerifiedModule m =
      buildSource("def copy<cdiv(n, 1024)>(f32* x_ptr, f32* y_ptr, i32 n) threads=256:\n"
                  "    bi = BlockIndices()\n"
                  "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=spatial(256).local(4), "
                  "offset=[bi * 1024:])\n"
                  "    StoreGlobal(x, ViewGlobal(y_ptr, shape=[n]), offset=[bi * 1024:])\n");
  PtxKernel k = ptxOf(m, "copy");
  CHECK(contains(k.ptx, "ld.global.v4.b32"));
  CHECK(contains(k.ptx, "st.global.v4.b32"));
  // a strided layout (consecutive slots 256 elements apart) cannot be vectorised
  VerifiedModule s =
      buildSource("def copy<cdiv(n, 1024)>(f32* x_ptr, f32* y_ptr, i32 n) threads=256:\n"
                  "    bi = BlockIndices()\n"
                  "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=local(4).spatial(256), "
                  "offset=[bi * 1024:])\n"
                  "    StoreGlobal(x, ViewGlobal(y_ptr, shape=[n]), offset=[bi * 1024:])\n");
  PtxKernel ks = ptxOf(s, "copy");
  CHECK_FALSE(contains(ks.ptx, "ld.global.v"));
}

TEST_CASE("LoadGlobal's eviction hints become L1 eviction priorities of its ld.global") {
  // f32 chunks of 16 bytes (the vector path and, for partial chunks, the grouped element path)
  // and u4 runs (packed accesses); `normal` and no hint give the same PTX
  auto copy = [](const std::string &t, int locals, const std::string &hint) {
    std::string tile = std::to_string(256 * locals);
    return ptxOf(buildSource("def copy<cdiv(n, " + tile + ")>(" + t + "* x_ptr, " + t +
                             "* y_ptr, i32 n) threads=256:\n    bi = BlockIndices()\n"
                             "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=spatial(256)"
                             ".local(" +
                             std::to_string(locals) + "), offset=[bi * " + tile + ":]" + hint +
                             ")\n    StoreGlobal(x, ViewGlobal(y_ptr, shape=[n]), "
                             "offset=[bi * " +
                             tile + ":])\n"),
                 "copy")
        .ptx;
  };
  for (auto [t, locals] : {std::pair<std::string, int>{"f32", 4}, {"f32", 16}, {"u4", 32}}) {
    INFO(t << " x " << locals);
    std::string first = copy(t, locals, ", evict=first");
    std::string last = copy(t, locals, ", evict=last");
    std::string plain = copy(t, locals, "");
    CHECK(contains(first, "ld.global.L1::evict_first.v4.b32"));
    CHECK_FALSE(contains(first, "ld.global.v"));
    CHECK(contains(last, "ld.global.L1::evict_last.v4.b32"));
    CHECK_FALSE(contains(plain, "L1::"));
    CHECK(copy(t, locals, ", evict=normal") == plain);
    // stores carry no hint
    CHECK(contains(first, "st.global.v4.b32"));
    if (locals == 16) // sixteen slots: the element paths are inline PTX, with the hint too
      CHECK(contains(first, "ld.global.L1::evict_first.b32"));
  }
}

TEST_CASE("LoadGlobal's eviction hints: ptxas accepts them on sm_80 and sm_90a" * needsPtxas()) {
  VerifiedModule m = buildSource(
      "def copy<cdiv(n, 1024)>(f32* x_ptr, f32* y_ptr, i32 n) threads=256:\n"
      "    bi = BlockIndices()\n"
      "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=spatial(256).local(4), "
      "offset=[bi * 1024:], evict=first)\n"
      "    y = LoadGlobal(ViewGlobal(y_ptr, shape=[n]), layout=spatial(256).local(4), "
      "offset=[bi * 1024:], evict=last)\n"
      "    StoreGlobal(Add(x, y), ViewGlobal(y_ptr, shape=[n]), offset=[bi * 1024:])\n");
  for (int sm : {80, 90}) {
    PtxKernel k = ptxOf(m, "copy", sm);
    checkPtxasAccepts(k.ptx, sm);
  }
}

namespace {

/// A copy of a 1-D tensor of type T through registers of layout LAYOUT (per thread `locals`
/// elements), one block per 256 * locals elements.
VerifiedModule packedCopy(const std::string &t, const std::string &layout, int locals) {
  std::string tile = std::to_string(256 * locals);
  return buildSource("def copy<cdiv(n, " + tile + ")>(" + t + "* x_ptr, " + t +
                     "* y_ptr, i32 n) threads=256:\n" + "    bi = BlockIndices()\n" +
                     "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=" + layout +
                     ", offset=[bi * " + tile + ":])\n" +
                     "    StoreGlobal(x, ViewGlobal(y_ptr, shape=[n]), offset=[bi * " + tile +
                     ":])\n");
}

/// A global -> shared -> global round trip of a [32, 64] tile of type T, 16 consecutive
/// elements per thread.
VerifiedModule packedShared(const std::string &t) {
  return buildSource("def sh<1>(" + t + "* x_ptr, " + t + "* y_ptr) threads=128:\n" +
                     "    s = AllocateShared(" + t + ", shape=[32, 64])\n" +
                     "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[32, 64]), layout=spatial(32, "
                     "4).local(1, 16))\n" +
                     "    StoreShared(x, s)\n" + "    Synchronize()\n" +
                     "    y = LoadShared(s, layout=spatial(32, 4).local(1, 16))\n" +
                     "    StoreGlobal(y, ViewGlobal(y_ptr, shape=[32, 64]))\n");
}

} // namespace

TEST_CASE("sub-byte tiles load and store whole bytes with vector accesses") {
  // 32 consecutive u4 per thread are 16 bytes: one predicated ld.global.v4.b32 (the element
  // path behind it reads plain 32-bit words and stores with atomics)
  std::string u4 = ptxOf(packedCopy("u4", "spatial(256).local(32)", 32), "copy").ptx;
  CHECK(guarded(u4, "ld.global.v4.b32") == 1);
  CHECK(guarded(u4, "st.global.v4.b32") == 1);
  CHECK(guarded(u4, "ld.global") == 1);
  // f4e2m1 is packed the same way
  std::string f4 = ptxOf(packedCopy("f4e2m1", "spatial(256).local(32)", 32), "copy").ptx;
  CHECK(guarded(f4, "ld.global.v4.b32") == 1);
  CHECK(guarded(f4, "st.global.v4.b32") == 1);
  // u2 x 64 and u1 x 128 are 16 bytes too
  std::string u2 = ptxOf(packedCopy("u2", "spatial(256).local(64)", 64), "copy").ptx;
  CHECK(guarded(u2, "ld.global.v4.b32") == 1);
  CHECK(guarded(u2, "st.global.v4.b32") == 1);
  std::string u1 = ptxOf(packedCopy("u1", "spatial(256).local(128)", 128), "copy").ptx;
  CHECK(guarded(u1, "ld.global.v4.b32") == 1);
  CHECK(guarded(u1, "st.global.v4.b32") == 1);
  // u3 x 128 = 48 bytes and f6e3m2 x 64 = 48 bytes: three 16-byte accesses each
  std::string u3 = ptxOf(packedCopy("u3", "spatial(256).local(128)", 128), "copy").ptx;
  CHECK(guarded(u3, "ld.global.v4.b32") == 3);
  CHECK(guarded(u3, "st.global.v4.b32") == 3);
  std::string f6 = ptxOf(packedCopy("f6e3m2", "spatial(256).local(64)", 64), "copy").ptx;
  CHECK(guarded(f6, "ld.global.v4.b32") == 3);
  CHECK(guarded(f6, "st.global.v4.b32") == 3);
  // u3 x 32 = 12 bytes: three 4-byte accesses; i7 x 8 = 7 bytes: seven single bytes
  std::string u3w = ptxOf(packedCopy("u3", "spatial(256).local(32)", 32), "copy").ptx;
  CHECK(guarded(u3w, "ld.global.b32") == 3);
  CHECK(guarded(u3w, "st.global.b32") == 3);
  CHECK_FALSE(contains(u3w, "ld.global.v"));
  std::string i7 = ptxOf(packedCopy("i7", "spatial(256).local(8)", 8), "copy").ptx;
  CHECK(guarded(i7, "ld.global.u8") == 7);
  CHECK(guarded(i7, "st.global.u8") == 7);
  // shared memory: 16 consecutive u4 of a row-major tile are one 8-byte access
  std::string sh = ptxOf(packedShared("u4"), "sh").ptx;
  CHECK(occurrences(sh, "ld.shared.v2.u32") == 1);
  CHECK(occurrences(sh, "st.shared.v2.u32") == 1);
  CHECK_FALSE(contains(sh, "atom.shared"));
}

TEST_CASE("sub-byte tiles that do not cover whole bytes of one thread stay element by element") {
  // consecutive slots 256 elements apart: no run. Each u4 (within one byte) is loaded as its
  // byte by one predicated 1-byte access (0 outside the tile) and stored by two predicated
  // reductions on its aligned word (clear the element's bits, set them), without a branch
  std::string strided = ptxOf(packedCopy("u4", "local(32).spatial(256)", 32), "copy").ptx;
  CHECK(guarded(strided, "ld.global.u8") == 32);
  CHECK_FALSE(guarded(strided, "st.global") > 0);
  CHECK(guarded(strided, "red.relaxed.gpu.global.and.b32") == 32);
  CHECK(guarded(strided, "red.relaxed.gpu.global.or.b32") == 32);
  CHECK_FALSE(contains(strided, "atom.global"));
  // the slots' offsets from the thread's first element are constants (128 bytes apart), so
  // every byte and word is the thread's address plus an immediate: one masking of the thread's
  // byte address for the loads and one of its word address for the stores, not one per slot
  CHECK(occurrences(strided, "and.b64") == 2);
  CHECK(occurrences(strided, "add.s64") >= 62);
  // 4 consecutive u3 are 12 bits: they share bytes with the neighbouring thread's elements,
  // and a u3 may straddle two words: each is loaded from the words of its first and last bit
  // (two predicated 4-byte loads, the same word unless it straddles) and stored by two pairs of
  // reductions on them, without a branch
  std::string u3 = ptxOf(packedCopy("u3", "spatial(256).local(4)", 4), "copy").ptx;
  CHECK(guarded(u3, "ld.global.b32") == 8);
  CHECK_FALSE(guarded(u3, "st.global") > 0);
  CHECK(guarded(u3, "red.relaxed.gpu.global.and.b32") == 8);
  CHECK(guarded(u3, "red.relaxed.gpu.global.or.b32") == 8);
  CHECK_FALSE(contains(u3, "atom.global"));
  CHECK_FALSE(contains(u3, "bra"));
  // a single u4 per thread: half a byte, loaded by one predicated access
  std::string one = ptxOf(packedCopy("u4", "spatial(256)", 1), "copy").ptx;
  CHECK(guarded(one, "ld.global.u8") == 1);
  CHECK_FALSE(guarded(one, "st.global") > 0);
}

TEST_CASE("sub-byte vector accesses: ptxas accepts the kernels" * needsPtxas()) {
  std::vector<std::string> ptx = {
      ptxOf(packedCopy("u4", "spatial(256).local(32)", 32), "copy").ptx,
      ptxOf(packedCopy("u3", "spatial(256).local(128)", 128), "copy").ptx,
      ptxOf(packedCopy("i7", "spatial(256).local(8)", 8), "copy").ptx,
      ptxOf(packedCopy("u1", "spatial(256).local(16)", 16), "copy").ptx,
      ptxOf(packedShared("u4"), "sh").ptx,
      ptxOf(packedShared("u3"), "sh").ptx,
  };
  for (const std::string &p : ptx) {
    checkPtxasAccepts(p, 90);
  }
}

TEST_CASE("element paths of wide tiles are one inline-PTX statement per vector group") {
  // 32 consecutive f16 per thread: four 16-byte groups, each a predicated ld.global.v4.b32 with
  // its element path (misaligned or cut groups) behind it as one asm statement: eight bounds
  // tests (setp.le / setp.gt.and against the group's element indices) and predicated
  // ld.global.b16 (jit/lower_memory_global.cpp asmLoadElements, asmStoreElements)
  std::string wide = ptxOf(packedCopy("f16", "spatial(256).local(32)", 32), "copy").ptx;
  CHECK(guarded(wide, "ld.global.v4.b32") == 4);
  CHECK(guarded(wide, "st.global.v4.b32") == 4);
  CHECK(occurrences(wide, "setp.gt.and.s32") == 64);
  CHECK(guarded(wide, "ld.global.b16") == 32);
  CHECK(guarded(wide, "st.global.b16") == 32);
  for (int k = 0; k < 32; ++k) // the element index of each test is an immediate
    CHECK(contains(wide, ", " + std::to_string(k) + ", q;"));
  // 8-byte elements: 16 groups of two
  std::string f64 = ptxOf(packedCopy("f64", "spatial(256).local(32)", 32), "copy").ptx;
  CHECK(guarded(f64, "ld.global.b64") == 32);
  CHECK(guarded(f64, "st.global.b64") == 32);
  CHECK(occurrences(f64, "setp.gt.and.s32") == 64);
  // below 16 grouped slots per instruction the element code stays LLVM IR
  std::string narrow = ptxOf(packedCopy("f16", "spatial(256).local(8)", 8), "copy").ptx;
  CHECK(guarded(narrow, "ld.global.v4.b32") == 1);
  CHECK_FALSE(contains(narrow, "setp.gt.and.s32"));
  // a bound known at compile time is decided there: every thread's tile (a replicated layout)
  // starts at the view's lower bound 0, so only the upper bound n is tested
  VerifiedModule fixed = buildSource(
      "def copy<1>(f16* x_ptr, f16* y_ptr, i32 n) threads=32:\n"
      "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=replicate(32).local(32))\n"
      "    StoreGlobal(x, ViewGlobal(y_ptr, shape=[n]))\n");
  std::string f = ptxOf(fixed, "copy").ptx;
  CHECK(guarded(f, "ld.global.b16") == 32);
  CHECK_FALSE(contains(f, "setp.gt.and.s32"));
  CHECK(occurrences(f, "setp.gt.s32 p, ") == 64);
}

TEST_CASE("element paths of wide tiles: ptxas accepts the kernels" * needsPtxas()) {
  for (const char *t : {"u8", "bool", "f16", "bf16", "f32", "i64", "f64"}) {
    CAPTURE(t);
    for (int sm : {80, 90}) {
      checkPtxasAccepts(ptxOf(packedCopy(t, "spatial(256).local(32)", 32), "copy", sm).ptx, sm);
    }
  }
}

namespace {

/// A kernel that loads four 32-bit words per thread, views them as 32 codes of type `t` in
/// `layout` (of `shape`), reorders them within the thread to `reorder` (none if empty) and
/// stores their Cast to f16.
VerifiedModule dequantKernel(const std::string &t, const std::string &shape,
                             const std::string &layout, const std::string &reorder = "") {
  std::string src = "def dq<1>(u32* a_ptr, f16* h_ptr) threads=32:\n"
                    "    w = LoadGlobal(ViewGlobal(a_ptr, shape=[32, 4]), "
                    "layout=spatial(32, 1).local(1, 4))\n"
                    "    a = View(w, dtype=" +
                    t + ", layout=" + layout + ")\n";
  if (!reorder.empty())
    src += "    a = ConvertLayout(a, layout=" + reorder + ")\n";
  src += "    StoreGlobal(Cast(a, f16), ViewGlobal(h_ptr, shape=" + shape + "))\n";
  return buildSource(src);
}

/// dequantKernel whose codes, `groups` x 2 x 4 per thread, are reordered within the thread so
/// that codes i and i + 4 of each group of eight are side by side (the pairs of an in-lane
/// ConvertLayout).
VerifiedModule pairedKernel(const std::string &t, int groups) {
  std::string g = std::to_string(groups);
  return dequantKernel(t, "[32, " + g + ", 2, 4]", "spatial(32, 1, 1, 1).local(1, " + g + ", 2, 4)",
                       "spatial(32, 1, 1, 1).local(1, " + g + ", 1, 4).local(1, 1, 2, 1)");
}

} // namespace

TEST_CASE("integer dequantisation reads two codes per prmt, mask and add.rn.f16x2") {
  // 32 u4 codes from four loaded words into f16: each pair of codes is one prmt of its word
  // (which also places each half's magic exponent: 1024 for the code at bit 0, 64 for the code
  // at bit 4), one mask and one packed subtraction of an immediate pair, no fma with a scale
  // (jit/emit_dequant_pairs.cpp); no per-code bit-field extracts or shifts remain
  const std::string rows = "[32, 32]", lanes = "spatial(32, 1).local(1, 32)";
  PtxKernel k = ptxOf(dequantKernel("u4", rows, lanes), "dq");
  CHECK(occurrences(k.ptx, "prmt.b32") == 16);
  CHECK(occurrences(k.ptx, "add.rn.f16x2") == 16);
  CHECK_FALSE(contains(k.ptx, "fma.rn.f16x2"));
  // the prmt's second operand holds the two magic exponent bytes: 0x64 (1024.0), 0x54 (64.0)
  CHECK(contains(k.ptx, ", 21604;"));
  CHECK_FALSE(contains(k.ptx, "bfe."));
  CHECK_FALSE(contains(k.ptx, "cvt.rn.f16.u"));
  // signed codes: the sign bias is folded into the same mask (an xor), still one sub per pair
  PtxKernel ks = ptxOf(dequantKernel("i4", rows, lanes), "dq");
  CHECK(occurrences(ks.ptx, "prmt.b32") == 16);
  CHECK(occurrences(ks.ptx, "add.rn.f16x2") == 16);
  CHECK_FALSE(contains(ks.ptx, "fma.rn.f16x2"));
  // generic floats: one prmt, one shift right and one mul.f16x2 per pair (plus one shift per
  // word that brings its even codes to the top of their bytes)
  PtxKernel kf = ptxOf(dequantKernel("f4e2m1", rows, lanes), "dq");
  CHECK(occurrences(kf.ptx, "prmt.b32") == 16);
  CHECK(occurrences(kf.ptx, "mul.rn.f16x2") == 16);
  CHECK(occurrences(kf.ptx, "shr.u32") == 16);
  CHECK_FALSE(contains(kf.ptx, "bfe."));
}

TEST_CASE("View packs 16- and 8-bit slots cut from words into words by prmt") {
  // the u16 halves of two words per result word: one prmt each (4); the byte transpose: two
  // pair steps per half of the bytes and one merge per word (8 after common subexpressions,
  // pack_bytes.h); no or assembles the words of b and c
  std::string src = tilus::testing::kViewRepack;
  // b and c only: the f16 loads and the computed halves take the shift-and-or path
  std::string bc = src.substr(0, src.find("    h = LoadGlobal"));
  std::string bOnly = bc.substr(0, bc.find("    y = ConvertLayout"));
  PtxKernel kb = ptxOf(buildSource(bOnly), "repack");
  CHECK(occurrences(kb.ptx, "prmt.b32") == 4);
  CHECK_FALSE(contains(kb.ptx, "or.b32"));
  PtxKernel kc = ptxOf(buildSource(bc), "repack");
  CHECK(occurrences(kc.ptx, "prmt.b32") == 12);
  CHECK_FALSE(contains(kc.ptx, "or.b32"));
  // the whole program (computed halves too) compiles
  PtxKernel ka = ptxOf(buildSource(src), "repack");
  CHECK(occurrences(ka.ptx, "prmt.b32") >= 12);
}

TEST_CASE("integer dequantisation of pairs at the same place of a word's halves needs no prmt") {
  // codes i and i + 4 of each word of u4 codes side by side (an in-lane ConvertLayout): each
  // pair is read in place (codes 0, 1 with 4, 5: bits 0 and 4 of each half) or after one shift
  // right by 8 of its word (codes 2, 3 with 6, 7), so per word one shr, four masks and four
  // packed subtractions, and no prmt (jit/emit_dequant_pairs.cpp)
  for (const char *t : {"u4", "i4"}) {
    CAPTURE(t);
    PtxKernel k = ptxOf(pairedKernel(t, 4), "dq");
    CHECK(occurrences(k.ptx, "prmt.b32") == 0);
    CHECK(occurrences(k.ptx, "shr.u32") == 4);
    CHECK(occurrences(k.ptx, "add.rn.f16x2") == 16);
    CHECK_FALSE(contains(k.ptx, "bfe."));
  }
}

TEST_CASE("generic float pairs at the same place of a word's halves need no prmt") {
  // the same in-lane order with f4e2m1: codes i and i + 4 of a word at bits q and 16 + q; one
  // shift left by 12 - q puts both at the tops of bytes 1 and 3, so the pair takes two masks
  // and one mul.f16x2 without a prmt (jit/emit_dequant_pairs.cpp)
  PtxKernel k = ptxOf(pairedKernel("f4e2m1", 4), "dq");
  CHECK(occurrences(k.ptx, "prmt.b32") == 0);
  CHECK(occurrences(k.ptx, "mul.rn.f16x2") == 16);
  CHECK_FALSE(contains(k.ptx, "bfe."));
}

TEST_CASE("a Cast of generic float pairs times 2^-(15 - bias) is the codes' bits: no mul.f16x2") {
  // the pair path reads the codes' bits as f16, the values times 2^-(15 - bias), and multiplies
  // by 2^(15 - bias); a Mul of the Cast by exactly the inverse takes the bits as they are
  // (Codegen::unscaledDequant), either operand order; any other factor is a real product
  auto kernel = [](const std::string &t, const std::string &mul) {
    return buildSource(
        "def dq<1>(u32* a_ptr, f16* h_ptr) threads=32:\n"
        "    w = LoadGlobal(ViewGlobal(a_ptr, shape=[32, 4]), layout=spatial(32, 1).local(1, 4))\n"
        "    a = View(w, dtype=" +
        t +
        ", layout=spatial(32, 1, 1, 1).local(1, 4, 2, 4))\n"
        "    p = ConvertLayout(a, layout=spatial(32, 1, 1, 1).local(1, 4, 1, 4).local(1, 1, 2, "
        "1))\n"
        "    StoreGlobal(" +
        mul + ", ViewGlobal(h_ptr, shape=[32, 4, 2, 4]))\n");
  };
  // f4e2m1: bias 1, 2^-14; f4e1m2: bias 0, 2^-15
  for (auto [type, factor] :
       {std::pair{"f4e2m1", "0.00006103515625"}, {"f4e1m2", "0.000030517578125"}}) {
    std::string t = type;
    CAPTURE(t);
    PtxKernel k = ptxOf(kernel(t, std::string("Mul(Cast(p, f16), ") + factor + ")"), "dq");
    CHECK(occurrences(k.ptx, "mul.rn.f16") == 0);
    PtxKernel swapped = ptxOf(kernel(t, std::string("Mul(") + factor + ", Cast(p, f16))"), "dq");
    CHECK(occurrences(swapped.ptx, "mul.rn.f16") == 0);
  }
  // 2^-13 is not f4e2m1's inverse: the pair's product stays, and the Mul is one more per code
  PtxKernel other = ptxOf(kernel("f4e2m1", "Mul(Cast(p, f16), 0.0001220703125)"), "dq");
  CHECK(occurrences(other.ptx, "mul.rn.f16x2") == 16);
  CHECK(occurrences(other.ptx, "mul.rn.f16") > 16);
  // programs/quant/a16wx.tasm multiplies its generic float weights by 2^-WX in f16: no product
  // per pair in its decode kernel (u4 has none either way)
  const std::string root = std::string(TILUSVM_SOURCE_DIR) + "/programs/";
  for (std::string wt : {"f4e2m1", "f6e3m2", "f3e1m1", "f7e4m2"}) {
    CAPTURE(wt);
    PtxKernel a = ptxOf(
        buildFile(root + "quant/a16wx.tasm", {{"WT", wt}, {"N", "8192"}, {"K", "8192"}}), "matmul");
    CHECK(occurrences(a.ptx, "mul.rn.f16") == 0);
  }
}

TEST_CASE("OCP FP8 pairs into f16 on sm_90: one cvt, their bytes gathered by one prmt") {
  // 32 f8e4m3 codes per thread from four words. Pairs of adjacent codes (bytes 0, 1 or 2, 3 of
  // a word) are a half of the word as it stands: no prmt and no byte arithmetic
  const std::string rows = "[32, 16]", lanes = "spatial(32, 1).local(1, 16)";
  for (const char *t : {"f8e4m3", "f8e5m2"}) {
    CAPTURE(t);
    PtxKernel k = ptxOf(dequantKernel(t, rows, lanes), "dq");
    CHECK(occurrences(k.ptx, std::string("cvt.rn.f16x2.") + (t[3] == '4' ? "e4m3x2" : "e5m2x2")) ==
          8);
    CHECK(occurrences(k.ptx, "prmt.b32") == 0);
    CHECK_FALSE(contains(k.ptx, "and.b16"));
    CHECK_FALSE(contains(k.ptx, "or.b16"));
  }
  // pairs of codes from two words (byte i of word 0 with byte i of word 1, as V's pairs of two
  // keys in programs/attention/decode_paged.tasm): one prmt per pair selects the two bytes
  // (selector i | (4 + i) << 4), instead of a shift, a mask and an or of each byte
  PtxKernel x = ptxOf(pairedKernel("f8e4m3", 2), "dq");
  CHECK(occurrences(x.ptx, "cvt.rn.f16x2.e4m3x2") == 8);
  CHECK(occurrences(x.ptx, "prmt.b32") == 8);
  for (int i = 0; i < 4; ++i)
    CHECK(contains(x.ptx, ", " + std::to_string(i | ((4 + i) << 4)) + ";"));
  CHECK_FALSE(contains(x.ptx, "and.b16"));
  CHECK_FALSE(contains(x.ptx, "or.b16"));
  // the library's decode program: V's 32 pairs of a stage, one prmt each
  const std::string root = std::string(TILUSVM_SOURCE_DIR) + "/programs/";
  PtxKernel d =
      ptxOf(buildFile(root + "attention/decode_paged.tasm", {{"KT", "f8e4m3"}}), "decode");
  CHECK(occurrences(d.ptx, "prmt.b32") == 32);
  CHECK_FALSE(contains(d.ptx, "or.b16"));
}

namespace {

/// The matmul of programs/quant/a16wx.tasm at N = K = 8192 with `defines`, its decode loop as
/// written (UR = UR1 = 1: one copy of it, rolled).
PtxKernel a16wxRolled(std::map<std::string, std::string> defines) {
  defines.insert({{"N", "8192"}, {"K", "8192"}, {"UR", "1"}, {"UR1", "1"}});
  return ptxOf(buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/quant/a16wx.tasm", defines),
               "matmul");
}

} // namespace

TEST_CASE("the library's low-bit programs dequantise 1-, 2- and 4-bit codes in place") {
  // programs/quant/a16wx.tasm packs u1, u2, u4, i4 and 4-bit float codes, and programs/attention/
  // decode_paged.tasm reads 4-bit keys, so that each f16 pair of codes lies at the same place of
  // a word's two halves: their weights and keys need no prmt (V's pairs span two keys: a decode
  // stage of 32 keys takes one prmt per word of two keys' 16-bit halves, 16 for its 64 pairs per
  // lane as f16 subnormals, 32 with the JIT's Cast, SUBV = 0). u3 into f16 too, in groups of
  // three words (its constant OD); u3 into bf16 keeps the JIT's Cast, one prmt per pair
  const std::string root = std::string(TILUSVM_SOURCE_DIR) + "/programs/";
  for (const char *wt : {"u1", "u2", "u4", "i4", "f4e2m1", "u3"}) {
    for (const char *at : {"f16", "bf16"}) {
      CAPTURE(wt);
      CAPTURE(at);
      // unrolled, each copy of the body has its own prmt; unspecialised, the kernel holds both
      // decode bodies (row tiles of BM and of BMN, the launch-time specialisation `narrow`),
      // each with its 64
      PtxKernel k = a16wxRolled({{"WT", wt}, {"AT", at}});
      bool permutes = std::string(wt) == "u3" && std::string(at) == "bf16";
      CHECK(occurrences(k.ptx, "prmt.b32") == (permutes ? 2 * 64 : 0));
    }
  }
  PtxKernel d = ptxOf(buildFile(root + "attention/decode_paged.tasm", {{"KT", "u4"}}), "decode");
  CHECK(occurrences(d.ptx, "prmt.b32") == 16);
  PtxKernel dc = ptxOf(
      buildFile(root + "attention/decode_paged.tasm", {{"KT", "u4"}, {"SUBV", "0"}}), "decode");
  CHECK(occurrences(dc.ptx, "prmt.b32") == 32);
  // 4-bit float keys in place too: only V's 64 pairs per lane of a stage take a prmt each
  PtxKernel f =
      ptxOf(buildFile(root + "attention/decode_paged.tasm", {{"KT", "f4e2m1"}}), "decode");
  CHECK(occurrences(f.ptx, "prmt.b32") == 64);
}

TEST_CASE("the library's decode kernel reads unsigned integers of 1 to 5 bits as f16 subnormals") {
  // programs/quant/a16wx.tasm (its constant SN): each pair masked in place is the f16 pair of
  // its codes times a power of two, so the decode loop has no f16 arithmetic at all; with magic
  // exponents (SN = 0: the JIT's Cast for u1, u2 and u4, the program's own masks for u3 and u5
  // in their groups of words) each of the 64 pairs of a lane's step takes one add.rn.f16x2 (the
  // magic's subtraction), in each of the kernel's two decode bodies (row tiles of BM and BMN)
  for (const char *wt : {"u1", "u2", "u3", "u4", "u5"}) {
    for (const char *sn : {"0", "1"}) {
      CAPTURE(wt);
      CAPTURE(sn);
      PtxKernel k = a16wxRolled({{"WT", wt}, {"SN", sn}});
      CHECK(occurrences(k.ptx, "add.rn.f16x2") == (sn[0] == '1' ? 0 : 2 * 64));
      CHECK(occurrences(k.ptx, "sub.rn.f16x2") == 0);
      CHECK(occurrences(k.ptx, "fma.rn.f16x2") == 0);
    }
  }
}

namespace {

/// The register lists of the A operands of every mma.sync in `ptx`.
std::vector<std::vector<std::string>> mmaAOperands(const std::string &ptx) {
  std::vector<std::vector<std::string>> out;
  for (size_t at = ptx.find("mma.sync."); at != std::string::npos;
       at = ptx.find("mma.sync.", at + 1)) {
    size_t d = ptx.find('{', at), a = ptx.find('{', ptx.find('}', d)), end = ptx.find('}', a);
    std::vector<std::string> regs;
    std::stringstream list(ptx.substr(a + 1, end - a - 1));
    for (std::string r; std::getline(list, r, ',');)
      regs.push_back(r.substr(r.find_first_not_of(" \t\n")));
    out.push_back(regs);
  }
  return out;
}

/// Compiles with TILUSVM_JIT_HOLD set to `hold` ("" for unset).
PtxKernel ptxWithHold(const VerifiedModule &m, const std::string &program, const char *hold) {
  if (*hold)
    setenv("TILUSVM_JIT_HOLD", hold, 1);
  PtxKernel k = ptxOf(m, program);
  unsetenv("TILUSVM_JIT_HOLD");
  return k;
}

} // namespace

TEST_CASE("held registers: loop-invariant mma operand repeats and lop3 constants") {
  // jit/held_registers.h: ptxas re-creates a value that an mma takes in two registers of one
  // operand (decode_paged.tasm's Q rows 8 + g repeat rows g) with a move before every mma, and
  // splits `(x & C1) | C2` into two lop3 (one immediate each). After optimisation the repeats
  // of a loop-invariant value become copies made before the loop, and the second constant of
  // such masks, used four times or more in loops, is made once in a register at the entry;
  // both through an add of an opaque zero (a shuffle of lane 0's lane index).
  VerifiedModule dec =
      buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/attention/decode_paged.tasm");
  auto repeats = [](const PtxKernel &k) {
    int n = 0;
    for (const std::vector<std::string> &regs : mmaAOperands(k.ptx)) {
      std::set<std::string> distinct(regs.begin(), regs.end());
      n += distinct.size() != regs.size();
    }
    return n;
  };
  PtxKernel held = ptxWithHold(dec, "decode", "");
  CHECK(mmaAOperands(held.ptx).size() >= 16);
  CHECK(repeats(held) == 0);
  CHECK(contains(held.ptx, "shfl.sync.idx.b32"));
  PtxKernel plain = ptxWithHold(dec, "decode", "0");
  CHECK(repeats(plain) > 0);
  CHECK_FALSE(contains(plain.ptx, "shfl.sync.idx.b32"));
  // a loop dequantising u4 pairs in place: the magic numbers 0x64006400 (1677747200) and
  // 0x54005400 (1409307648) once each at the entry instead of in every mask
  VerifiedModule q =
      buildSource("def dq<1>(u32* a_ptr, f16* h_ptr) threads=32:\n"
                  "    g = ViewGlobal(h_ptr, shape=[4, 32, 4, 2, 4])\n"
                  "    for i in range(4):\n"
                  "        w = LoadGlobal(ViewGlobal(a_ptr, shape=[4, 32, 4]), layout=spatial(32, "
                  "1).local(1, 4), offset=[i, 0:, 0:])\n"
                  "        a = View(w, dtype=u4, layout=spatial(32, 1, 1, 1).local(1, 4, 2, 4))\n"
                  "        p = ConvertLayout(a, layout=spatial(32, 1, 1, 1).local(1, 4, 1, "
                  "4).local(1, 1, 2, 1))\n"
                  "        StoreGlobal(Cast(p, f16), g, offset=[i, 0:, 0:, 0:, 0:])\n");
  PtxKernel mq = ptxWithHold(q, "dq", "");
  CHECK(occurrences(mq.ptx, "1677747200") == 1);
  CHECK(occurrences(mq.ptx, "1409307648") == 1);
  PtxKernel pq = ptxWithHold(q, "dq", "0");
  CHECK(occurrences(pq.ptx, "1677747200") >= 8);
}

namespace {

/// The masks `and.b32 d, x, C1; or.b32 e, d, C2;` (immediates) of `ptx`, as (C1, C2).
std::vector<std::pair<uint32_t, uint32_t>> orMasks(const std::string &ptx) {
  std::map<std::string, uint32_t> anded; // register -> C1
  std::vector<std::pair<uint32_t, uint32_t>> out;
  std::stringstream lines(ptx);
  for (std::string line; std::getline(lines, line);) {
    std::stringstream in(line);
    std::string op, d, x, c;
    in >> op >> d >> x >> c;
    if ((op != "and.b32" && op != "or.b32") || c.size() < 2 || !std::isdigit(uint8_t(c[0])))
      continue;
    d.pop_back(); // the commas and the semicolon
    x.pop_back();
    uint32_t v = uint32_t(std::stoll(c.substr(0, c.size() - 1)));
    if (op == "and.b32")
      anded[d] = v;
    else if (op == "or.b32" && anded.count(x))
      out.emplace_back(anded[x], v);
  }
  return out;
}

/// lop3's result for lut `lut` (ta = 0xF0, tb = 0xCC, tc = 0xAA), bit by bit.
uint32_t lop3(uint32_t a, uint32_t b, uint32_t c, uint32_t lut) {
  uint32_t r = 0;
  for (int i = 0; i < 32; ++i) {
    uint32_t index = ((a >> i) & 1) << 2 | ((b >> i) & 1) << 1 | ((c >> i) & 1);
    r |= ((lut >> index) & 1) << i;
  }
  return r;
}

} // namespace

TEST_CASE("held registers: the ten magic exponents of u1 pairs share one held mask register") {
  // jit/held_registers.h: the u1 pairs of a16wx.tasm mask ten fields with ten magic exponents;
  // instead of ten held magics, each `(x & C1) | C2` becomes one lop3 of the immediate C1 | C2
  // and one held register K with the fields' bits, (a & b & c) | (b & ~c). Checked against
  // the masks of the same kernel without held registers, bit by bit (x all zeros and all ones:
  // every bit of both forms is a function of x's bit alone)
  // (the loop as written, UR = 1: unrolled twice, the copy of the body that LLVM puts outside the
  // loop for odd trip counts runs once and keeps its immediates; the unrolled loop's masks are
  // checked in "the decode loop of a16wx: no register copies ...")
  // (SN = 0: the JIT's Cast, whose magics these are; by default a16wx reads u1 as subnormals)
  VerifiedModule q = buildFile(
      std::string(TILUSVM_SOURCE_DIR) + "/programs/quant/a16wx.tasm",
      {{"WT", "u1"}, {"N", "8192"}, {"K", "8192"}, {"UR", "1"}, {"UR1", "1"}, {"SN", "0"}});
  std::vector<std::pair<uint32_t, uint32_t>> masks = orMasks(ptxWithHold(q, "matmul", "0").ptx);
  REQUIRE(masks.size() >= 64);
  std::set<uint32_t> magics;
  for (auto [c1, c2] : masks)
    magics.insert(c2);
  CHECK(magics.size() == 10);
  std::string held = ptxWithHold(q, "matmul", "").ptx;
  CHECK(orMasks(held).empty());
  std::set<std::string> ks;
  std::set<uint32_t> immediates;
  std::stringstream lines(held);
  for (std::string line; std::getline(lines, line);) {
    std::stringstream in(line);
    std::string op, d, x, b, k, lut;
    in >> op >> d >> x >> b >> k >> lut;
    if (op != "lop3.b32")
      continue;
    CHECK(lut == "0xC4;");
    ks.insert(k);
    immediates.insert(uint32_t(std::stoll(b.substr(0, b.size() - 1))));
  }
  REQUIRE(ks.size() == 1);
  CHECK(immediates.size() == magics.size());
  // K: made once at the entry, the opaque zero plus a constant
  std::string kr = ks.begin()->substr(0, ks.begin()->size() - 1);
  size_t at = held.find("add.s32 \t" + kr + ",");
  REQUIRE(at != std::string::npos);
  std::string def = held.substr(at, held.find('\n', at) - at);
  uint32_t k = uint32_t(std::stoll(def.substr(def.rfind(' ') + 1)));
  CHECK(occurrences(held, "add.s32 \t" + kr + ",") == 1);
  for (auto [c1, c2] : masks) {
    CAPTURE(c1);
    CAPTURE(c2);
    CHECK(immediates.count(c1 | c2) == 1);
    for (uint32_t x : {0u, ~0u})
      CHECK(lop3(x, c1 | c2, k, 0xC4) == ((x & c1) | c2));
  }
  // two magics (u4) keep one held register each (the test above): no lop3 of its own (the
  // epilogue's NaN fix-ups of f16 pairs are lop3s inside one-line statements)
  VerifiedModule q4 = buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/quant/a16wx.tasm",
                                {{"WT", "u4"}, {"N", "8192"}, {"K", "8192"}, {"SN", "0"}});
  CHECK_FALSE(contains(ptxWithHold(q4, "matmul", "").ptx, "\tlop3.b32"));
}

TEST_CASE("exponentials: ex2.approx for Exp2 of f32, f16, bf16 and Exp of f16, bf16") {
  // jit/lower_elementwise.cpp fastExp2: the non-ftz f32 instruction where subnormal results
  // matter (f32, bf16), the ftz one for f16; Exp of f32 and everything of f64 stay exact
  for (int sm : {80, 90}) {
    CAPTURE(sm);
    std::string f16 = ptxOf(exponentials("f16"), "m", sm).ptx;
    CHECK(occurrences(f16, "ex2.approx.ftz.f32") == 4); // 2 slots x (Exp2, Exp)
    CHECK_FALSE(contains(f16, "ex2.approx.f32"));
    CHECK(contains(f16, "cvt.rn.f16.f32"));
    std::string bf16 = ptxOf(exponentials("bf16"), "m", sm).ptx;
    CHECK(occurrences(bf16, "ex2.approx.f32") == 4);
    CHECK_FALSE(contains(bf16, "ex2.approx.ftz"));
    std::string f32 = ptxOf(exponentials("f32"), "m", sm).ptx;
    CHECK(occurrences(f32, "ex2.approx.f32") == 2); // Exp2 only
    CHECK_FALSE(contains(f32, "ex2.approx.ftz"));
    std::string f64 = ptxOf(exponentials("f64"), "m", sm).ptx;
    CHECK_FALSE(contains(f64, "ex2.approx"));
  }
}

TEST_CASE("exponentials: ptxas accepts the ex2.approx kernels" * needsPtxas()) {
  for (const char *t : {"f16", "bf16", "f32"})
    for (int sm : {80, 90}) {
      CAPTURE(t);
      checkPtxasAccepts(ptxOf(exponentials(t), "m", sm).ptx, sm);
    }
}

TEST_CASE("exponentials: correct rounding into f16, bf16 and f32 (the test reference)") {
  DataType f16 = DataType::f16(), bf16 = DataType::bf16(), f32 = DataType::f32();
  CHECK(roundInto(65519.99L, f16) == 65504.0L);
  CHECK(std::isinf(roundInto(65520.0L, f16)));          // the overflow midpoint, even
  CHECK(roundInto(std::ldexp(1.0L, -25), f16) == 0.0L); // half the smallest subnormal
  CHECK(roundInto(std::ldexp(1.0L, -25) * 1.001L, f16) == std::ldexp(1.0L, -24));
  CHECK(roundInto(1.0L + std::ldexp(1.0L, -11), f16) == 1.0L); // a tie to even
  CHECK(roundInto(1.0L + 3 * std::ldexp(1.0L, -11), f16) == 1.0L + std::ldexp(1.0L, -9));
  CHECK(roundInto(std::ldexp(1.5L, -134), bf16) == std::ldexp(1.0L, -133));
  CHECK(roundInto(std::ldexp(3.0L, -150), f32) == std::ldexp(1.0L, -148));
  CHECK(std::isinf(roundInto(std::ldexp(1.0L, 128) * (1 - std::ldexp(1.0L, -25)), f32)));
  CHECK(roundInto(std::ldexp(1.0L, 128) * (1 - std::ldexp(1.0L, -24)), f32) ==
        (long double)0x1.fffffep127f);
  CHECK(codesApart(1.0L, 1.0L + std::ldexp(1.0L, -10), f16) == 1);
  CHECK(codesApart(1.0L, 1.0L - std::ldexp(1.0L, -11), f16) == 1); // across the binade
  CHECK(codesApart(std::ldexp(1.0L, -24), 0.0L, f16) == 1);
  CHECK(codesApart(65504.0L, INFINITY, f16) == INFINITY);
  CHECK(codesApart(NAN, NAN, f16) == 0);
}

TEST_CASE("exponentials: ex2.approx.f32's 2 ulp gives f16 and bf16 Exp2 and Exp within 1 ulp, "
          "every input") {
  // The bound of jit/lower_elementwise.cpp fastExp2, over every f16 and bf16 code: the exponent
  // s is computed as the kernel does (x, or the f32 product x * f32(log2 e)); ex2.approx.f32 may
  // return any f32 within 2 ulp of the correctly rounded 2^s (PTX ISA), flushed below 2^-126
  // for f16 (.ftz); each of those, rounded into the type, must be within 1 ulp of the correctly
  // rounded exact result, overflow included.
  const float log2e = 0x1.715476p+0f;
  const long double minNormal32 = std::ldexp(1.0L, -126);
  for (DataType t : {DataType::f16(), DataType::bf16()})
    for (bool exp : {false, true}) {
      CAPTURE(t.name());
      CAPTURE(exp);
      double worst = 0;
      int bad = 0;
      for (uint64_t code = 0; code < 65536; ++code) {
        double x = toDouble(code, t);
        if (std::isnan(x))
          continue;
        float s = exp ? float(x) * log2e : float(x);
        float c32 = float(roundInto(exp2l((long double)s), DataType::f32()));
        long double want = roundInto(exp ? expl((long double)x) : exp2l((long double)x), t);
        std::vector<float> candidates = {c32};
        float up = c32, down = c32;
        for (int k = 0; k < 2; ++k) {
          up = std::isinf(up) ? up : std::nextafter(up, INFINITY);
          down = down == 0.0f ? down : std::nextafter(down, 0.0f);
          candidates.push_back(up);
          candidates.push_back(down);
        }
        for (float v : candidates) {
          if (t == DataType::f16() && v < minNormal32)
            v = 0.0f; // .ftz
          double apart = codesApart(roundInto(v, t), want, t);
          worst = std::max(worst, apart);
          if (apart > 1 && bad++ < 5)
            FAIL_CHECK("x = " << x << ", f32 result " << v << ": " << apart << " ulp");
        }
      }
      std::string what = std::string(t.name()) + (exp ? " Exp" : " Exp2");
      MESSAGE(what << ": at most " << worst << " ulp");
      CHECK(bad == 0);
    }
}

TEST_CASE("float Max and Min of f32 and f64 are PTX max/min") {
  // jit/emit_scalar.cpp: one max/min (+0 > -0, the number when one operand is NaN) and the
  // canonical NaN select, which a non-NaN constant operand makes unnecessary
  VerifiedModule m = buildSource(
      "def m<1>(f32* x_ptr, f32* y_ptr, f64* d_ptr) threads=32:\n"
      "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32).local(2))\n"
      "    g = ViewGlobal(y_ptr, shape=[3, 64])\n"
      "    StoreGlobal(Max(x, 1.0), g, offset=[0, 0:])\n"
      "    StoreGlobal(Min(x, -0.0), g, offset=[1, 0:])\n"
      "    StoreGlobal(Reduce(x, dim=0, op=max, keepdim=True), ViewGlobal(y_ptr, shape=[1]))\n"
      "    d = Cast(x, f64)\n"
      "    StoreGlobal(Max(d, Min(d, 2.0)), ViewGlobal(d_ptr, shape=[64]))\n");
  for (int sm : {80, 90}) {
    std::string ptx = ptxOf(m, "m", sm).ptx;
    CHECK(occurrences(ptx, "max.f32") >= 2 + 5 + 1); // 2 slots, the shuffle tree, the pair
    CHECK(occurrences(ptx, "min.f32") == 2);
    CHECK(occurrences(ptx, "max.f64") == 2);
    CHECK(occurrences(ptx, "min.f64") == 2);
    // one canonical NaN select, the stored Reduce's: none with a number constant, none inside
    // the Reduce (jit/nan_canonical.h)
    CHECK(occurrences(ptx, "setp.nan.f32") == 1);
    CHECK(occurrences(ptx, "setp.nan.f64") == 2); // Max(d, Min(d, 2.0)), stored
  }
}

TEST_CASE("float Max and Min: ptxas accepts PTX max/min" * needsPtxas()) {
  VerifiedModule m =
      buildSource("def m<1>(f32* x_ptr, f64* d_ptr) threads=32:\n"
                  "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32).local(2))\n"
                  "    StoreGlobal(Max(x, Min(x, 3.0)), ViewGlobal(x_ptr, shape=[64]))\n"
                  "    d = LoadGlobal(ViewGlobal(d_ptr, shape=[64]), layout=spatial(32).local(2))\n"
                  "    StoreGlobal(Min(d, Max(d, 3.0)), ViewGlobal(d_ptr, shape=[64]))\n");
  for (int sm : {80, 90}) {
    checkPtxasAccepts(ptxOf(m, "m", sm).ptx, sm);
  }
}

TEST_CASE("canonical NaNs only where a NaN's bits can be seen") {
  // jit/nan_canonical.h: a float operation's canonical NaN select goes when its value only
  // reaches other float operations that are canonicalized, comparisons and shuffles; it stays
  // before a store, a View (bits) and an integer use
  auto nanSelects = [](const std::string &body) {
    VerifiedModule m =
        buildSource("def m<1>(f32* x_ptr, f32* y_ptr, u32* u_ptr, i32 n) threads=32:\n"
                    "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[32]), layout=spatial(32))\n"
                    "    gy = ViewGlobal(y_ptr, shape=[32])\n"
                    "    gu = ViewGlobal(u_ptr, shape=[32])\n" +
                    body);
    return occurrences(ptxOf(m, "m").ptx, "setp.nan.f32");
  };
  CHECK(nanSelects("    StoreGlobal(Exp2(Sub(Mul(x, 3.0), x)), gy)\n") == 1);
  CHECK(nanSelects("    t = Mul(x, 3.0)\n"
                   "    StoreGlobal(t, gy)\n"
                   "    StoreGlobal(Exp2(t), gy)\n") == 2);
  CHECK(nanSelects("    t = Mul(x, 3.0)\n"
                   "    StoreGlobal(View(Add(t, x), dtype=u32), gu)\n") == 1);
  CHECK(nanSelects("    t = Where(Gt(x, 0.0), Mul(x, 3.0), Sub(x, 1.0))\n"
                   "    StoreGlobal(Reduce(Add(t, x), dim=0, op=sum, keepdim=True), gy)\n") == 1);
  CHECK(nanSelects("    t = Mul(x, 3.0)\n"
                   "    StoreGlobal(Cast(Gt(t, 1.0), u32), gu)\n") == 0);
  // through the phis of an if: stored as it is (both selects stay) or through a Sub (one)
  const char *branch = "    t = Add(x, 1.0)\n"
                       "    if n > 0:\n"
                       "        t = Mul(t, 2.0)\n";
  CHECK(nanSelects(std::string(branch) + "    StoreGlobal(t, gy)\n") == 2);
  CHECK(nanSelects(std::string(branch) + "    StoreGlobal(Sub(t, 3.0), gy)\n") == 1);
  // around a loop (which LLVM unrolls): the Add's select stays, in every copy of the body,
  // when the loop's result is stored or viewed as it is; through a Sub only the Sub's stays
  const char *loop = "    acc = AllocateRegister(f32, layout=spatial(32), init=0.0)\n"
                     "    for i in range(n):\n"
                     "        acc = Add(Mul(acc, 0.5), x)\n";
  CHECK(nanSelects(std::string(loop) + "    StoreGlobal(acc, gy)\n") >= 1);
  CHECK(nanSelects(std::string(loop) + "    StoreGlobal(Sub(acc, 1.0), gy)\n") == 1);
  CHECK(nanSelects(std::string(loop) + "    StoreGlobal(View(acc, dtype=u32), gu)\n") >= 1);
}

namespace {

/// A kernel storing Cast(x, T) of `locals` f32 slots per thread, or Cast(x, T) + 1 (the
/// conversion's NaNs then unseen: the Add canonicalizes its own).
VerifiedModule narrowing(const std::string &T, int locals, bool add) {
  std::string cast = "Cast(x, " + T + ")";
  return buildSource("def m<1>(f32* x_ptr, " + T + "* y_ptr) threads=32:\n" +
                     "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[" + std::to_string(32 * locals) +
                     "]), layout=spatial(32).local(" + std::to_string(locals) + "))\n" +
                     "    StoreGlobal(" + (add ? "Add(" + cast + ", 1.0)" : cast) +
                     ", ViewGlobal(y_ptr, shape=[" + std::to_string(32 * locals) + "]))\n");
}

} // namespace

TEST_CASE("f32 into f16 and bf16 two slots at a time: cvt.rn.f16x2.f32, one NaN fix-up per pair") {
  // jit/emit_convert.cpp narrowPairs and nan_canonical.h lowerPairCanonicalizations: a pair of
  // slots is one pair conversion, its stored NaNs made canonical by set.nan + lop3 on the pair
  // (no setp.nan / selp per element); an odd last slot takes the scalar conversion
  for (int sm : {80, 90}) {
    std::string ptx = ptxOf(narrowing("f16", 4, false), "m", sm).ptx;
    CHECK(occurrences(ptx, "cvt.rn.f16x2.f32") == 2);
    CHECK(occurrences(ptx, "set.nan.u32.f16x2") == 2);
    CHECK(occurrences(ptx, "lop3.b32") == 2);
    CHECK(occurrences(ptx, "setp.nan") == 0);
    CHECK(occurrences(ptx, "cvt.rn.f16.f32") == 0);
    std::string odd = ptxOf(narrowing("f16", 3, false), "m", sm).ptx;
    CHECK(occurrences(odd, "cvt.rn.f16x2.f32") == 1);
    CHECK(occurrences(odd, "cvt.rn.f16.f32") == 1);
    CHECK(occurrences(odd, "setp.nan.f16") == 1);
    // the Add's result is canonicalized, so the conversion's NaN fix-up goes; the Add, two
    // slots at a time (arithmeticPairs), keeps its own: one set.nan per pair
    std::string added = ptxOf(narrowing("f16", 4, true), "m", sm).ptx;
    CHECK(occurrences(added, "cvt.rn.f16x2.f32") == 2);
    CHECK(occurrences(added, "add.rn.f16x2") == 2);
    CHECK(occurrences(added, "set.nan.u32") == 2);
    CHECK(occurrences(added, "setp.nan") == 0);
  }
  // bf16: the pair's set.nan needs sm_90; on sm_80 each slot keeps the scalar conversion
  std::string bf90 = ptxOf(narrowing("bf16", 4, false), "m", 90).ptx;
  CHECK(occurrences(bf90, "cvt.rn.bf16x2.f32") == 2);
  CHECK(occurrences(bf90, "set.nan.u32.bf16x2") == 2);
  CHECK(occurrences(bf90, "setp.nan") == 0);
  std::string bf80 = ptxOf(narrowing("bf16", 4, false), "m", 80).ptx;
  CHECK(occurrences(bf80, "cvt.rn.bf16x2.f32") == 0);
  CHECK(occurrences(bf80, "cvt.rn.bf16.f32") == 4);
}

TEST_CASE("f32 into f16 and bf16 two slots at a time: ptxas accepts the kernels" * needsPtxas()) {
  for (int sm : {80, 90}) {
    checkPtxasAccepts(ptxOf(narrowing("f16", 4, false), "m", sm).ptx, sm);
    checkPtxasAccepts(ptxOf(narrowing("f16", 3, true), "m", sm).ptx, sm);
    checkPtxasAccepts(ptxOf(narrowing("bf16", 4, false), "m", sm).ptx, sm);
  }
}

TEST_CASE("f16 Add, Sub and Mul two slots at a time: one f16x2 operation per 32-bit register") {
  // jit/emit_convert.cpp arithmeticPairs: a word's two halves viewed as f16 and shifted by a
  // constant stay one register (no scalar add.rn.f16 on its halves); a pair of constants is one
  // register of constants; TILUSVM_JIT_PAIRS=0 computes slot by slot
  const char *src = "def m<1>(u32* x_ptr, f16* y_ptr, f16* z_ptr) threads=32:\n"
                    "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[32, 4]), layout=spatial(32, "
                    "1).local(1, 4))\n"
                    "    h = View(Or(And(x, 0x00070007), 0x64006400), dtype=f16, "
                    "layout=spatial(32, 1, 1).local(1, 4, 2))\n"
                    "    StoreGlobal(Sub(h, 1024.0), ViewGlobal(y_ptr, shape=[32, 4, 2]))\n"
                    "    StoreGlobal(Mul(Add(h, h), h), ViewGlobal(z_ptr, shape=[32, 4, 2]))\n";
  VerifiedModule m = buildSource(src);
  std::string ptx = ptxOf(m, "m").ptx;
  CHECK(occurrences(ptx, "add.rn.f16x2") + occurrences(ptx, "sub.rn.f16x2") == 8);
  CHECK(occurrences(ptx, "mul.rn.f16x2") == 4);
  CHECK(occurrences(ptx, "add.rn.f16 ") + occurrences(ptx, "sub.rn.f16 ") == 0);
  CHECK(occurrences(ptx, "mul.rn.f16 ") == 0);
  setenv("TILUSVM_JIT_PAIRS", "0", 1);
  std::string scalar = ptxOf(m, "m").ptx;
  unsetenv("TILUSVM_JIT_PAIRS");
  CHECK(occurrences(scalar, "f16x2 ") == 0);
}

TEST_CASE("bytes stored to shared memory from loaded words are packed by prmt, two per word") {
  // tests/byte_transpose_program.h: a 4 x 4 (transpose4) and 8 x 4 (transpose8) byte transpose
  // per thread, 16 and 32 stored words: two prmt per word (pair steps shared by the words of a
  // transpose, jit/pack_bytes.h) and no per-byte bit-field inserts; words stored as they were
  // loaded (rows) need no permute at all
  VerifiedModule m = buildSource(kByteTransposes);
  for (auto [index, words, store] : {std::tuple{size_t(0), size_t(16), "st.shared.u32"},
                                     std::tuple{size_t(1), size_t(32), "st.shared.v2.u32"},
                                     std::tuple{size_t(2), size_t(0), "st.shared.v4.u32"}}) {
    INFO("kernel " << m.module.programs[index].name);
    JitOptions options;
    Expected<PtxKernel> k = compileToPtx(m, index, options);
    REQUIRE_OK(k);
    CHECK(occurrences(k->ptx, "prmt.b32") == 2 * words);
    CHECK(!contains(k->ptx, "bfi.b32"));
    CHECK(contains(k->ptx, store));
  }
}

TEST_CASE("a vector group no bound can cut has no element path once alignment is proven") {
  // words of B viewed as [k, n / 4]: with n divisible by 16 (the launch's specialisation) the
  // bound n / 4 is a multiple of the 4-word groups, so a group is in or out as a whole, and with
  // the pointer aligned the per-word element path (ld.global.b32) is gone; unspecialised, n / 4
  // may cut a group and the element path stays
  const char *src = R"(
def k<1>(u32* w_ptr, f32* out_ptr, i32 k, i32 n) threads=128:
    w = LoadGlobal(ViewGlobal(w_ptr, shape=[k, n / 4]), layout=column_spatial(16, 8).local(8, 4))
    StoreGlobal(Cast(w, f32), ViewGlobal(out_ptr, shape=[128, 32]))
)";
  VerifiedModule m = buildSource(src);
  JitOptions plain, spec;
  spec.specialization.params = {ParamFact::Aligned16, ParamFact::Aligned16, ParamFact::Divisible16,
                                ParamFact::Divisible16};
  Expected<PtxKernel> a = compileToPtx(m, 0, plain), b = compileToPtx(m, 0, spec);
  REQUIRE_OK(a);
  REQUIRE_OK(b);
  CHECK(occurrences(a->ptx, "ld.global.v4.b32") == 8);
  CHECK(contains(a->ptx, "ld.global.b32"));
  CHECK(occurrences(b->ptx, "ld.global.v4.b32") == 8);
  CHECK(!contains(b->ptx, "ld.global.b32"));
  // nor is it built: the IR before optimisation has no element-path block for those groups
  // (their test is the constant false), where unspecialised each group has one
  plain.optLevel = 0;
  spec.optLevel = 0;
  Expected<std::string> irA = compileToLlvmIr(m, 0, plain), irB = compileToLlvmIr(m, 0, spec);
  REQUIRE_OK(irA);
  REQUIRE_OK(irB);
  CHECK(occurrences(*irA, "\nldg.elem.end") == 8);
  CHECK(occurrences(*irB, "\nldg.elem") == 0);
}

TEST_CASE("a copied tile that only its page can put outside the tensor copies in one path, "
          "zero-filled by src-size") {
  // a page of 16 x 32 f32 picked by a loaded number: the page's dimensions are whole, so the
  // tile is wholly inside or wholly outside the cache. Its 128 chunks of 16 bytes, four per
  // thread, are four cp.async with a src-size (16 or 0), without a branch between a whole-tile
  // path and a per-chunk path (which added a fifth cp.async, the chunk path's loop)
  const char *src = R"(
def k<1>(f32* cache, i32* tbl, f32* out_ptr, i32 num_pages) threads=32:
    page = LoadScalar(ViewGlobal(tbl, shape=[1]), offset=[0], dtype=i32)
    s = AllocateShared(f32, shape=[16, 32])
    CopyAsync(s, ViewGlobal(cache, shape=[num_pages, 16, 32]), offset=[page, 0:, 0:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitAll()
    Synchronize()
    x = LoadShared(s, layout=spatial(4, 8).local(4, 4))
    StoreGlobal(x, ViewGlobal(out_ptr, shape=[16, 32]))
)";
  VerifiedModule m = buildSource(src);
  JitOptions spec;
  spec.specialization.params = {ParamFact::Aligned16, ParamFact::Aligned16, ParamFact::Aligned16,
                                ParamFact::None};
  Expected<PtxKernel> k = compileToPtx(m, 0, spec);
  REQUIRE_OK(k);
  std::regex zfill(R"(cp\.async\.cg\.shared\.global \[%r\d+\], \[%rd\d+\], 16, %r\d+;)");
  auto copies = std::distance(std::sregex_iterator(k->ptx.begin(), k->ptx.end(), zfill),
                              std::sregex_iterator());
  CHECK(copies == 4);
  CHECK(occurrences(k->ptx, "cp.async.cg.shared.global") == 4);
}

TEST_CASE("tiles at b * T of a view of extent m, on a grid of cdiv(m, T) blocks, have no bounds "
          "tests where the launch makes m a multiple of 16") {
  // block b loads and stores rows [16 b, 16 b + 16) of an [m, 64] view: with m divisible by 16
  // (the launch class) every row of every block's tile is below m, so no load or store is
  // predicated on a comparison with m (Codegen::boundProvenTiles); unspecialised, m may cut
  // the last tile and the tests stay. The proof needs every piece: the view's extent and the
  // grid's numerator the same parameter, the grid's divisor the slice's step, and a tile no
  // taller than the step
  auto source = [](const std::string &grid, const std::string &rows, const std::string &start,
                   const std::string &layout) {
    return "def k<" + grid +
           ">(f16* x_ptr, f16* y_ptr, i32 m, i32 q) threads=32:\n"
           "    b = BlockIndices()\n"
           "    t = LoadGlobal(ViewGlobal(x_ptr, shape=[" +
           rows + ", 64]), layout=" + layout + ", offset=[" + start +
           ":, 0:])\n"
           "    StoreGlobal(t, ViewGlobal(y_ptr, shape=[" +
           rows + ", 64]), offset=[" + start + ":, 0:])\n";
  };
  const std::string rows16 = "spatial(16, 2).local(1, 32)", rows32 = "spatial(16, 2).local(2, 32)";
  JitOptions plain, spec;
  spec.specialization.params = {ParamFact::Aligned16, ParamFact::Aligned16, ParamFact::Divisible16,
                                ParamFact::Divisible16};
  auto setps = [](const VerifiedModule &m, const JitOptions &o) {
    Expected<PtxKernel> k = compileToPtx(m, 0, o);
    REQUIRE_OK(k);
    return occurrences(k->ptx, "setp.");
  };
  VerifiedModule proven = buildSource(source("cdiv(m, 16)", "m", "b * 16", rows16));
  CHECK(setps(proven, spec) == 0);
  CHECK(setps(proven, plain) > 0);
  CHECK(setps(buildSource(source("cdiv(m, 16)", "m", "16 * b", rows16)), spec) == 0);
  CHECK(setps(buildSource(source("cdiv(m, 8)", "m", "b * 8", "spatial(8, 4).local(1, 16)")),
              spec) == 0);
  // not proven: a tile taller than the step, another extent, another divisor, a step that
  // does not divide 16
  CHECK(setps(buildSource(source("cdiv(m, 16)", "m", "b * 16", rows32)), spec) > 0);
  CHECK(setps(buildSource(source("cdiv(m, 16)", "q", "b * 16", rows16)), spec) > 0);
  CHECK(setps(buildSource(source("cdiv(m, 32)", "m", "b * 16", rows16)), spec) > 0);
  CHECK(setps(buildSource(source("cdiv(m, 48)", "m", "b * 48", "spatial(16, 2).local(3, 32)")),
              spec) > 0);
  // nor with m = 1 (the launch class of one row) or without a class for m
  JitOptions one = spec, none = spec;
  one.specialization.params[2] = ParamFact::One;
  none.specialization.params[2] = ParamFact::None;
  CHECK(setps(proven, one) > 0);
  CHECK(setps(proven, none) > 0);
}

TEST_CASE("for loops with an unroll hint are unrolled exactly that many times") {
  // one load per iteration: unroll=U gives U loads in the loop and, the trip count n being
  // unknown, one more in the remainder (none at U = 1: the loop as written); without a hint
  // LLVM decides (it unrolls this short loop four times)
  // the kernel's PTX, with `extra` after the load in the loop's body
  auto ptx = [](const char *hint, const char *extra = "") {
    std::string src =
        std::string("def k<1>(f32* x_ptr, f32* y_ptr, i32 n) threads=32:\n"
                    "    g = ViewGlobal(x_ptr, shape=[n, 32])\n"
                    "    acc = AllocateRegister(f32, layout=spatial(32), init=0.0)\n"
                    "    for i in range(n") +
        hint +
        "):\n"
        "        acc = Add(acc, LoadGlobal(g, layout=spatial(32), offset=[i, 0:]))\n" +
        extra + "    StoreGlobal(acc, ViewGlobal(y_ptr, shape=[32]))\n";
    VerifiedModule m = buildSource(src);
    JitOptions options;
    Expected<PtxKernel> k = compileToPtx(m, 0, options);
    REQUIRE_OK(k);
    return k->ptx;
  };
  auto loads = [&](const char *hint) { return occurrences(ptx(hint), "ld.global"); };
  CHECK(loads(", unroll=1") == 1);
  CHECK(loads(", unroll=2") == 3);
  CHECK(loads(", unroll=3") == 4);
  CHECK(loads(", unroll=8") == 9);
  CHECK(loads("") == 5);
  // a barrier in a loop of run-time trip count: LLVM keeps the loop rolled (no remainder may
  // hold a convergent operation), hint or not (docs/isa.md, "Unroll hints")
  std::string barrier = ptx(", unroll=4", "        Synchronize()\n");
  CHECK(occurrences(barrier, "ld.global") == 1);
  CHECK(occurrences(barrier, "bar.sync") == 1);
}

/// The lines of the longest loop of `ptx`: from a label to the last backward branch to it.
static std::vector<std::string> longestLoop(const std::string &ptx) {
  std::vector<std::string> lines;
  std::istringstream in(ptx);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  std::map<std::string, size_t> labels;
  size_t from = 0, to = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    if (!lines[i].empty() && lines[i][0] == '$' && lines[i].back() == ':')
      labels[lines[i].substr(0, lines[i].size() - 1)] = i;
    size_t bra = lines[i].find("bra");
    size_t dollar = lines[i].find('$', bra == std::string::npos ? 0 : bra);
    if (bra == std::string::npos || dollar == std::string::npos)
      continue;
    std::string label = lines[i].substr(dollar, lines[i].find(';', dollar) - dollar);
    auto at = labels.find(label);
    if (at != labels.end() && i - at->second > to - from)
      from = at->second, to = i;
  }
  return {lines.begin() + long(from), lines.begin() + long(to)};
}

TEST_CASE("the decode loop of a16wx for m = 1: its own unroll hint, alone in the kernel of the "
          "launch class of m = 1") {
  // u5 unrolls its decode loop four times at m = 1 (UR1) and not at all otherwise (UR): the
  // program holds both loops (`unroll=UR1 if m == 1 else UR`). A launch with m = 1 compiles only
  // the first: its step's mmas four times (one block per tile at m = 1 here: 64 steps, no
  // remainder); m a multiple of 16 only the second (once); without the launch's facts both, the
  // first with a remainder for trip counts that four does not divide (4 + 1 + 1 copies: two
  // blocks per tile for m > 8, SPLITW = 2, make the trip count a run-time value there; with one,
  // the default, every body but the narrow one walks all 64 steps and the remainder goes)
  VerifiedModule m =
      buildFile(programPath("quant/a16wx.tasm"),
                {{"WT", "u5"}, {"K", "8192"}, {"N", "57344"}, {"G", "128"}, {"SPLITW", "2"}});
  size_t index = 0;
  while (m.module.programs[index].name != "matmul")
    ++index;
  auto mmas = [&](ParamFact mFact, bool specialise, bool narrow = false) {
    JitOptions options;
    if (specialise) {
      options.specialization.params = {ParamFact::Aligned16, ParamFact::Aligned16,
                                       ParamFact::Aligned16, ParamFact::Aligned16,
                                       ParamFact::Aligned16, mFact};
      options.specialization.values = {narrow}; // `specialize narrow = ... 1 < m <= BMN`
    }
    Expected<PtxKernel> k = compileToPtx(m, index, options);
    REQUIRE_OK(k);
    return occurrences(k->ptx, "mma.sync.aligned");
  };
  size_t one = mmas(ParamFact::One, true), sixteen = mmas(ParamFact::Divisible16, true),
         other = mmas(ParamFact::NotOne, true), any = mmas(ParamFact::None, false);
  REQUIRE(sixteen > 0);
  CHECK(one == 4 * sixteen);
  // the class of m neither 1 nor a multiple of 16 (m != 1 assumed): the second loop only
  CHECK(other == sixteen);
  // 1 < m <= 8 (`narrow`): the decode body with a row tile of BMN = 8 rows, one n8 mma per atom
  // and k16 step instead of two (once: UR = 1 for u5)
  CHECK(mmas(ParamFact::NotOne, true, true) == sixteen / 2);
  // without the launch's facts all three loops, and the narrow body's
  CHECK(any == 6 * sixteen + sixteen / 2);
}

TEST_CASE("the decode loop of a16wx: no register copies of the prefetch ring where it is "
          "unrolled twice") {
  // programs/quant/a16wx.tasm unrolls its decode loop twice (UR) for 1- to 3-bit integers and
  // 4-bit floats into f16, so that the ring of prefetched weight words and the next step's
  // activations alternate between two sets of registers: the unrolled loop has no copy between
  // registers, where the loop of UR = 1 has one per word of the ring and of the activations.
  // No `or` with an immediate in either (u1 and u3 are f16 subnormals, SN: no magics; f4e2m1's
  // masks keep their held registers)
  const std::regex copy(R"(\s*mov\.u32\s+%r\d+, %r\d+;)");
  const std::regex orImmediate(R"(\s*or\.b32\s+%r\d+, %r\d+, -?\d+;)");
  for (const char *wt : {"u1", "u3", "f4e2m1"}) {
    INFO(wt);
    auto loop = [&](const char *ur) {
      VerifiedModule m =
          buildFile(programPath("quant/a16wx.tasm"),
                    {{"WT", wt}, {"K", "8192"}, {"N", "57344"}, {"G", "128"}, {"UR", ur}});
      size_t index = 0;
      while (m.module.programs[index].name != "matmul")
        ++index;
      JitOptions options;
      options.specialization.params = {ParamFact::Aligned16, ParamFact::Aligned16,
                                       ParamFact::Aligned16, ParamFact::Aligned16,
                                       ParamFact::Aligned16, ParamFact::Divisible16};
      Expected<PtxKernel> k = compileToPtx(m, index, options);
      REQUIRE_OK(k);
      return longestLoop(k->ptx);
    };
    auto count = [](const std::vector<std::string> &lines, const std::regex &re) {
      return std::count_if(lines.begin(), lines.end(),
                           [&](const std::string &l) { return std::regex_match(l, re); });
    };
    std::vector<std::string> once = loop("1"), twice = loop("2");
    CHECK(twice.size() > once.size() * 3 / 2);
    CHECK(count(once, copy) >= 32);
    CHECK(count(twice, copy) == 0);
    CHECK(count(once, orImmediate) == 0);
    CHECK(count(twice, orImmediate) == 0);
  }
}

TEST_CASE("a kernel compiled for the values of its specialize statements folds them") {
  // `specialize whole = ...` at launch: with its value in the class the branch on it folds
  // (the atomic path for T, the plain store for F); without, both stay, chosen at run time
  const char *src = R"(
def k<1>(f32* p, i32* q, i32 n) threads=32:
    specialize whole = n >= 4096
    v = LoadGlobal(ViewGlobal(p, shape=[n]), layout=spatial(32))
    if whole:
        AtomicAdd(ViewGlobal(q, shape=[n]), Cast(v, i32))
    else:
        StoreGlobal(v, ViewGlobal(p, shape=[n]), offset=[32:])
)";
  VerifiedModule m = buildSource(src);
  JitOptions plain, yes, no;
  yes.specialization.values = {true};
  no.specialization.values = {false};
  Expected<PtxKernel> a = compileToPtx(m, 0, plain), t = compileToPtx(m, 0, yes),
                      f = compileToPtx(m, 0, no);
  REQUIRE_OK(a);
  REQUIRE_OK(t);
  REQUIRE_OK(f);
  auto atomics = [](const PtxKernel &k) { return occurrences(k.ptx, ".global.add"); };
  auto stores = [](const PtxKernel &k) { return occurrences(k.ptx, "st.global"); };
  CHECK(atomics(*a) > 0);
  CHECK(stores(*a) > 0);
  CHECK(contains(a->ptx, "4096"));
  CHECK(atomics(*t) > 0);
  CHECK(stores(*t) == 0);
  CHECK(!contains(t->ptx, "4096"));
  CHECK(atomics(*f) == 0);
  CHECK(stores(*f) > 0);
  CHECK(!contains(f->ptx, "4096"));
  // only the side that runs is built: the IR before optimisation, as the code-size limit
  // reports it when it refuses the kernel (jit/code_size.h), loses the other side's tens of
  // instructions (the specialised value in place of the comparison alone would be one less)
  setenv("TILUSVM_JIT_MAX_IR", "12", 1);
  auto irBefore = [&](const JitOptions &o) -> long {
    Expected<PtxKernel> k = compileToPtx(m, 0, o);
    if (k.ok())
      return -1;
    const std::string &message = k.status().diagnostics().front().message;
    std::smatch found;
    if (!std::regex_search(message, found, std::regex(R"(: ([\d,]+) LLVM IR instructions)")))
      return -1;
    std::string digits = std::regex_replace(found[1].str(), std::regex(","), "");
    return std::stol(digits);
  };
  long both = irBefore(plain), onlyAtomic = irBefore(yes), onlyStore = irBefore(no);
  unsetenv("TILUSVM_JIT_MAX_IR");
  INFO("IR before optimisation: ", both, " unspecialised, ", onlyAtomic, " T, ", onlyStore, " F");
  REQUIRE(both > 0);
  REQUIRE(onlyAtomic > 0);
  REQUIRE(onlyStore > 0);
  CHECK(onlyAtomic < both - 10);
  CHECK(onlyStore < both - 10);
  // a class with fewer values than the program's specialize statements is refused
  Expected<PtxKernel> two = compileToPtx(
      buildSource("def k<1>(f32* p, i32 n) threads=32:\n    specialize a = n > 1\n"
                  "    specialize b = n > 2\n    g = ViewGlobal(p, shape=[n])\n"
                  "    if a and b:\n        StoreGlobal(LoadGlobal(g, layout=spatial(32)), g)\n"),
      0, yes);
  CHECK_FALSE(two.ok());
}
