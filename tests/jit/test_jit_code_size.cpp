// The JIT's bound on a kernel's code (jit/code_size.h): the measure of register elements per
// thread against hand-counted values, and the refusal, located, of kernels beyond the limit.
#include "jit/code_size.h"
#include "jit_test_util.h"

#include <cstdlib>
#include <doctest/doctest.h>

using namespace tilus;
using namespace tilus::testing;

namespace {

// Instructions: 0 ViewGlobal, 1 LoadGlobal (x: 4 per thread), 2 Add (y, x, x: 12),
// 3 ViewGlobal, 4 StoreGlobal (y: 4). The measure: 4 + 12 + 4 = 20.
const char *kSmall =
    "def m<1>(f32* x_ptr, f32* y_ptr) threads=32:\n"
    "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[128]), layout=spatial(32).local(4))\n"
    "    y = Add(x, x)\n"
    "    StoreGlobal(y, ViewGlobal(y_ptr, shape=[128]))\n";

// After the slow unit of the JIT fuzzer (N = 828): N = 827 and ROWS = 5 share no factor with 128
// threads, so layout inference replicates the [5, 827] tile in every thread (4,135 elements
// each).
const char *kReplicated = "const N = 827\n"
                          "const ROWS = 5\n"
                          "def softmax<cdiv(m, ROWS)>(f32* x_ptr, f32* y_ptr, i32 m) threads=128:\n"
                          "    bi = BlockIndices()\n"
                          "    gx = ViewGlobal(x_ptr, shape=[m, N])\n"
                          "    gy = ViewGlobal(y_ptr, shape=[m, N])\n"
                          "    x = LoadGlobal(gx, shape=[ROWS, N], offset=[bi * ROWS:, 0:])\n"
                          "    mx = Reduce(x, dim=1, op=max, keepdim=True)\n"
                          "    e = Exp(Sub(x, mx))\n"
                          "    s = Reduce(e, dim=0, op=sum, keepdim=True)\n"
                          "    StoreGlobal(Div(e, s), gy, offset=[bi * ROWS:, 5:])\n";

/// Sets TILUSVM_JIT_MAX_IR for the lifetime of the object (unset when `value` is null).
struct MaxIr {
  explicit MaxIr(const char *value) {
    if (value)
      setenv("TILUSVM_JIT_MAX_IR", value, 1);
    else
      unsetenv("TILUSVM_JIT_MAX_IR");
  }
  ~MaxIr() { unsetenv("TILUSVM_JIT_MAX_IR"); }
};

} // namespace

TEST_CASE("code size: every register operand and result counts its elements per thread") {
  VerifiedModule v = buildSource(kSmall);
  jit::CodeSize size = jit::measureCodeSize(v.module.programs[0], v.programs[0], 90);
  CHECK(size.elements == 20);
  CHECK(size.largest == 12);
  CHECK(size.largestAt == 2);
  CHECK(size.largestWhat.find("Add (`y`: ") == 0);
  CHECK(size.largestWhat.find("4 elements per thread") != std::string::npos);
}

TEST_CASE("code size: a Dot counts its result k times, k / 16 times on mma atoms") {
  // loads 32 + 16, AllocateRegister 4, Dot (a 32, b 16, c 4, d 4 x t), StoreGlobal 4
  VerifiedModule v = buildSource(m16n8k32Source("f8e4m3", "f32")); // k = 64
  // sm_90a has the e4m3 mma atom: t = 64 / 16 = 4
  CHECK(jit::measureCodeSize(v.module.programs[0], v.programs[0], 90).elements ==
        32 + 16 + 4 + (32 + 16 + 4 + 4 * 4) + 4);
  // sm_80 has none: a multiply-add per result element and k, t = 64
  jit::CodeSize scalar = jit::measureCodeSize(v.module.programs[0], v.programs[0], 80);
  CHECK(scalar.elements == 32 + 16 + 4 + (32 + 16 + 4 + 4 * 64) + 4);
  CHECK(scalar.largestAt == 5); // ViewGlobal, LoadGlobal, ViewGlobal, LoadGlobal, Alloc, Dot
  CHECK(scalar.largestWhat.find("times 64") != std::string::npos);
}

TEST_CASE("code size: beyond the limit the JIT refuses the kernel, located") {
  VerifiedModule v = buildSource(kSmall);
  SUBCASE("the measure above the limit: refused before any IR is built") {
    MaxIr limit("19");
    Expected<PtxKernel> k = compileToPtx(v, 0);
    CHECK_ERROR(k, ErrorCode::Unsupported);
    const Diagnostic &d = k.status().diagnostics().front();
    CHECK(d.message.find("touch 20 register elements per thread (limit 19)") != std::string::npos);
    CHECK(d.location.line == 3); // the Add
    CHECK(d.location.instruction == 2);
    CHECK(d.location.program == "m");
  }
  SUBCASE("the measure within it, the IR beyond it: refused after building the IR") {
    MaxIr limit("20");
    Expected<PtxKernel> k = compileToPtx(v, 0);
    CHECK_ERROR(k, ErrorCode::Unsupported);
    CHECK(k.status().diagnostics().front().message.find(
              "LLVM IR instructions before optimisation (limit 20)") != std::string::npos);
  }
  SUBCASE("0: no limit") {
    MaxIr limit("0");
    CHECK_OK(compileToPtx(v, 0));
  }
  SUBCASE("unset: the default, far above this kernel") {
    MaxIr limit(nullptr);
    CHECK_OK(compileToPtx(v, 0));
  }
  SUBCASE("a malformed limit is a usage error") {
    for (const char *bad : {"abc", "-1", "1e6", "99999999999999999999"}) {
      MaxIr limit(bad);
      CHECK_ERROR(compileToPtx(v, 0), ErrorCode::Usage);
    }
  }
}

TEST_CASE("code size: a tile replicated in every thread is refused by the default limit") {
  VerifiedModule v = buildSource(kReplicated);
  MaxIr limit(nullptr);
  Expected<PtxKernel> k = compileToPtx(v, 0);
  CHECK_ERROR(k, ErrorCode::Unsupported);
  const Diagnostic &d = k.status().diagnostics().front();
  CHECK(d.message.find("limit 65,536") != std::string::npos);
  CHECK(d.message.find("local(5, 827).replicate(128), 4,135 elements per thread") !=
        std::string::npos);
  CHECK(d.location.line == 11); // Div: three tensors of 4,135 elements, the largest share
  // the fuzzer's N = 828: 828 = 4 x 207, so the tile is spread over four threads (1,035 elements
  // each) and the kernel is within the limit (measured, not compiled here: about a second)
  std::string spread = kReplicated;
  spread.replace(spread.find("827"), 3, "828");
  VerifiedModule s = buildSource(spread);
  jit::CodeSize size = jit::measureCodeSize(s.module.programs[0], s.programs[0], 90);
  CHECK(size.largestWhat.find("1,035 elements per thread") != std::string::npos);
  CHECK(size.elements < jit::kDefaultMaxCode / 4);
  // every kernel of programs/ stays far below the default (the largest about 4,700)
  for (const char *path : {"programs/attention/decode_paged.tasm", "programs/gemm/mma_sync.tasm"}) {
    VerifiedModule p = buildFile(std::string(TILUSVM_SOURCE_DIR) + "/" + path);
    CHECK(jit::measureCodeSize(p.module.programs[0], p.programs[0], 90).elements <
          jit::kDefaultMaxCode / 8);
  }
}
