// Every program of the library (programs/) passes the checker, with the derived facts that the
// interpreter and the JIT rely on computed by hand here: threads, the shared-memory plan
// (allocations 128-aligned in program order, then the scratch area of loader/verified_module.h)
// and the types of representative variables.
#include "check_test_util.h"
#include "test_helpers.h"

#include <filesystem>

using namespace tilus;
using namespace tilus::testing;

namespace {

Expected<VerifiedModule> checkProgramFile(const std::string &relative,
                                          std::map<std::string, std::string> defines = {}) {
  AssembleOptions ao;
  ao.fileName = relative;
  ao.defines = std::move(defines);
  Expected<Module> module =
      assemble(readText(std::string(TILUSVM_SOURCE_DIR) + "/" + relative), ao);
  if (!module)
    return module.takeStatus();
  CheckOptions co;
  co.fileName = relative;
  return checkModule(std::move(module).value(), co);
}

} // namespace

TEST_CASE("every program in programs/ passes the checker") {
  namespace fs = std::filesystem;
  int count = 0;
  for (const fs::directory_entry &e :
       fs::recursive_directory_iterator(std::string(TILUSVM_SOURCE_DIR) + "/programs")) {
    if (e.path().extension() != ".tasm")
      continue;
    std::string rel = fs::relative(e.path(), TILUSVM_SOURCE_DIR).string();
    CAPTURE(rel);
    CHECK_OK(checkProgramFile(rel));
    ++count;
  }
  CHECK(count >= 4);
}

TEST_CASE("vector_add: 128 threads, no shared memory, register types") {
  Expected<VerifiedModule> m = checkProgramFile("programs/vector_add.tasm");
  REQUIRE_OK(m);
  const ProgramInfo &info = programInfo(*m, "vector_add");
  CHECK(info.threads == 128);
  CHECK(info.sharedBytes == 0);
  CHECK(info.scratchBytes == 0);
  CHECK_FALSE(info.usesWorkspace);
  const VarType &x = varType(*m, "vector_add", "x");
  CHECK(x.kind == VarKind::Register);
  CHECK(x.dtype == DataType::f32());
  CHECK(x.shape == std::vector<int64_t>{256});
  CHECK(*x.layout == layoutOf("spatial(128).local(2)"));
  const VarType &gx = varType(*m, "vector_add", "gx");
  CHECK(gx.kind == VarKind::Global);
  CHECK(gx.rank == 1);
  CHECK(gx.root != kNoId);
  CHECK(m->module.programs[0].vars[gx.root].name == "gx");
  const VarType &n = varType(*m, "vector_add", "n");
  CHECK(n.kind == VarKind::Scalar);
  CHECK(n.dtype == DataType::i32());
}

TEST_CASE("softmax: Reduce layouts and the reduce scratch area") {
  Expected<VerifiedModule> m = checkProgramFile("programs/softmax_rows.tasm");
  REQUIRE_OK(m);
  const ProgramInfo &info = programInfo(*m, "softmax");
  CHECK(info.threads == 128);
  // Both Reduces stay within warps (one row per warp): shuffles, no scratch area.
  CHECK(info.scratchBytes == 0);
  CHECK(info.sharedBytes == 0);
  // ISA section 5: Reduce over dim 1 of spatial(4, 32).local(1, 4) with keepdim.
  const VarType &mx = varType(*m, "softmax", "mx");
  CHECK(mx.shape == std::vector<int64_t>{4, 1});
  CHECK(*mx.layout == layoutOf("spatial(4, 1).replicate(32)"));
  // e = Exp(Sub(x, mx)) keeps x's layout.
  CHECK(*varType(*m, "softmax", "e").layout == layoutOf("spatial(4, 32).local(1, 4)"));
}

TEST_CASE("paper matmul: one warp, Dot scratch, View to u8") {
  Expected<VerifiedModule> m = checkProgramFile("programs/paper_matmul_f16_i6.tasm");
  REQUIRE_OK(m);
  const ProgramInfo &tb = programInfo(*m, "transform_b");
  CHECK(tb.threads == 32);
  CHECK(tb.sharedBytes == 0);
  const ProgramInfo &mm = programInfo(*m, "matmul");
  CHECK(mm.threads == 32);
  // Dot scratch: a [16, 16] f16 + b [16, 8] f16 = 512 + 256 bytes.
  CHECK(mm.scratchBytes == 768);
  CHECK(mm.sharedBytes == 768);
  const VarType &b1 = varType(*m, "matmul", "b1");
  CHECK(b1.dtype == DataType::i(6));
  CHECK(b1.shape == std::vector<int64_t>{16, 8});
  // `acc = Cast(acc, f16)` in the same scope declares a new f16 acc.
  const VarType &acc = varType(*m, "matmul", "acc");
  CHECK(acc.dtype == DataType::f16());
  CHECK(*acc.layout == layoutOf("local(2, 1).spatial(8, 4).local(1, 2)"));
  const VarType &b = varType(*m, "transform_b", "b");
  CHECK(b.dtype == DataType::u(8));
  CHECK(b.shape == std::vector<int64_t>{96});
}

TEST_CASE("pipelined matmul: shared plan and mma atoms with warp-level outer layouts") {
  Expected<VerifiedModule> m = checkProgramFile("programs/matmul_f16_pipelined.tasm");
  REQUIRE_OK(m);
  const ProgramInfo &info = programInfo(*m, "matmul_f16");
  CHECK(info.threads == 128);
  const VarType &sa = varType(*m, "matmul_f16", "sa");
  const VarType &sb = varType(*m, "matmul_f16", "sb");
  // sa: 3 * 64 * 32 f16 = 12288 bytes at 0; sb: 12288 bytes at 12288 (128-aligned already).
  CHECK(sa.sharedByteOffset == 0);
  CHECK(sb.sharedByteOffset == 12288);
  REQUIRE(sa.sharedLayout.has_value());
  CHECK(sa.sharedLayout->size() == 3 * 64 * 32);
  // Dot scratch: a [64, 32] f16 + b [32, 64] f16 = 4096 + 4096, after the allocations.
  CHECK(info.scratchByteOffset == 24576);
  CHECK(info.scratchBytes == 8192);
  CHECK(info.sharedBytes == 32768);
  CHECK(varType(*m, "matmul_f16", "acc").shape == std::vector<int64_t>{64, 64});
}

TEST_CASE("program variants: threads and Dot scratch") {
  struct Case {
    const char *file;
    uint32_t threads;
    int64_t sharedBytes;
  };
  // Dot scratch = M*K*bytes(a) + K*N*bytes(b), rounded up to 16.
  const Case cases[] = {
      {"programs/variants/matmul_bf16_u4_2warps.tasm", 64, 32 * 16 * 2 + 16 * 8 * 2},
      {"programs/variants/matmul_f16_i6_16x16.tasm", 32, 16 * 16 * 2 + 16 * 16 * 2},
      {"programs/variants/matmul_f32_u2.tasm", 32, 16 * 16 * 4 + 16 * 8 * 4},
  };
  for (const Case &c : cases) {
    CAPTURE(c.file);
    std::string path = std::string(TILUSVM_SOURCE_DIR) + "/" + c.file;
    if (!std::filesystem::exists(path))
      continue;
    Expected<VerifiedModule> m = checkProgramFile(c.file);
    REQUIRE_OK(m);
    const ProgramInfo &info = programInfo(*m, "matmul");
    CHECK(info.threads == c.threads);
    CHECK(info.sharedBytes == c.sharedBytes);
  }
}
