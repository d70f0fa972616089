// Properties of the generated code that the JIT promises (docs/jit.md): the kernel ABI
// (entry name, parameters, .reqntid, dynamic shared memory), the fast paths (mma.sync for the
// paper matmul, cp.async for the pipelined one, vector loads, warp shuffles), cache-key
// versions, errors, and thread safety of concurrent compilations.
#include "jit/jit_test_util.h"

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

bool contains(const std::string &text, const std::string &what) {
  return text.find(what) != std::string::npos;
}

} // namespace

TEST_CASE("kernel ABI: entry name, parameters in order, reqntid, dynamic shared memory") {
  VerifiedModule m = buildFile(programPath("matmul_f16_pipelined.tasm"));
  PtxKernel k = ptxOf(m, "matmul_f16");
  CHECK(k.entryName == "matmul_f16");
  CHECK(k.threads == 128);
  CHECK(k.sharedBytes == m.programs[0].sharedBytes);
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

TEST_CASE("vector_add loads and stores two contiguous f32 per thread as one vector") {
  VerifiedModule m = buildFile(programPath("vector_add.tasm"));
  PtxKernel k = ptxOf(m, "vector_add");
  CHECK(contains(k.ptx, "ld.global.v2.b32"));
  CHECK(contains(k.ptx, "st.global.v2.b32"));
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

namespace {

std::string m16n8k32Source(const char *ab, const char *cd) {
  return std::string("def dot<1>(") + ab + "* a_ptr, " + ab + "* b_ptr, " + cd +
         "* c_ptr) threads=32:\n" +
         "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[16, 64]), layout=local(1, "
         "2).column_local(2, 2).spatial(8, 4).local(1, 4))\n" +
         "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[64, 8]), layout=local(2, 1).local(2, "
         "1).column_spatial(4, 8).local(4, 1))\n" +
         "    c = AllocateRegister(" + cd + ", layout=local(2, 1).spatial(8, 4).local(1, 2))\n" +
         "    StoreGlobal(Dot(a, b, c), ViewGlobal(c_ptr, shape=[16, 8]))\n";
}

} // namespace

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
  std::string log;
  for (int sm : {80, 90}) {
    bool ok = runPtxas(ptxOf(s8, "dot", sm).ptx, sm, log);
    INFO(log);
    CHECK(ok);
    ok = runPtxas(ptxOf(e4m3, "dot", sm).ptx, sm, log);
    INFO(log);
    CHECK(ok);
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
