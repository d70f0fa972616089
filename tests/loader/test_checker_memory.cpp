// Checker rules on memory tensors: scopes, offsets (offset-rank), provable shared
// out-of-bounds, slices, the shared-memory plan (128-aligned allocations in program order,
// then the scratch area) and shared-capacity. Expected offsets and sizes are computed by hand.
#include "check_test_util.h"
#include "test_helpers.h"

using namespace tilus;
using namespace tilus::testing;

namespace {
const char *kParams = "f32* p, f16* h, i32 n";
// s: shared f32 [4, 32]; g: global f32 [4, 32].
const char *kMem = "    g = ViewGlobal(p, shape=[4, 32])\n"
                   "    s = AllocateShared(f32, shape=[4, 32])\n";
} // namespace

TEST_CASE("scope: operands in the wrong memory space") {
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = LoadGlobal(s, layout=spatial(32), offset=[0, 0:])\n"),
              ErrorCode::Scope, 4);
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = LoadShared(g, layout=spatial(32), offset=[0, 0:])\n"),
              ErrorCode::Scope, 4);
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = LoadShared(s, layout=spatial(32), offset=[0, 0:])\n"
                                  "    StoreGlobal(x, s, offset=[0, 0:])\n"),
              ErrorCode::Scope, 5);
  expectError(kernel(kParams, "    g = ViewGlobal(n, shape=[4])\n"), ErrorCode::Scope, 2);
  expectError(kernel(kParams, "    x = AllocateRegister(f32, layout=spatial(32))\n"
                              "    g = ViewGlobal(x, shape=[4])\n"),
              ErrorCode::Scope, 3);
  expectError(kernel(kParams, std::string(kMem) + "    CopyAsync(g, s)\n"), ErrorCode::Scope, 4);
  expectError(kernel(kParams, std::string(kMem) + "    t = SliceShared(g, offset=[0, 0:])\n"),
              ErrorCode::Scope, 4);
}

TEST_CASE("loads and stores: types, offsets and offset-rank") {
  Expected<VerifiedModule> m = checkSource(kernel(
      kParams, std::string(kMem) +
                   "    x = LoadGlobal(g, layout=spatial(32), offset=[n, 0:])\n"
                   "    StoreShared(x, s, offset=[1, 0:])\n"
                   "    y = LoadShared(s, layout=spatial(4, 8).local(1, 4))\n"
                   "    StoreGlobal(y, g)\n"
                   "    z = LoadGlobal(g, layout=spatial(4, 8).local(1, 4), offset=[0:, 0:])\n"));
  REQUIRE_OK(m);
  const VarType &x = varType(*m, "k", "x");
  CHECK(x.dtype == DataType::f32());
  CHECK(x.shape == std::vector<int64_t>{32});
  CHECK(varType(*m, "k", "y").shape == std::vector<int64_t>{4, 32});
  // One entry per dimension of the memory tensor.
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = LoadGlobal(g, layout=spatial(32), offset=[0:])\n"),
              ErrorCode::OffsetRank, 4);
  // One slice entry per dimension of the register tensor.
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = LoadGlobal(g, layout=spatial(32), offset=[0:, 0:])\n"),
              ErrorCode::OffsetRank, 4);
  // Omitted offset: ranks must agree.
  expectError(kernel(kParams, std::string(kMem) + "    x = LoadGlobal(g, layout=spatial(32))\n"),
              ErrorCode::OffsetRank, 4);
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = AllocateRegister(f32, layout=spatial(32))\n"
                                  "    StoreShared(x, s, offset=[0, 0, 0:])\n"),
              ErrorCode::OffsetRank, 5);
  // Offsets are integers.
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = LoadGlobal(g, layout=spatial(32), offset=[1.5, 0:])\n"),
              ErrorCode::DtypeMismatch, 4);
  // Stores do not convert.
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = AllocateRegister(f16, layout=spatial(32))\n"
                                  "    StoreGlobal(x, g, offset=[0, 0:])\n"),
              ErrorCode::DtypeMismatch, 5);
}

TEST_CASE("out-of-bounds: provable shared accesses outside the tensor") {
  auto load = [](const std::string &rest) {
    return kernel(kParams, std::string(kMem) + "    x = LoadShared(s, " + rest + ")\n");
  };
  CHECK_OK(checkSource(load("layout=spatial(32), offset=[3, 0:]")));
  CHECK_OK(checkSource(load("layout=spatial(32), offset=[n, 0:]"))); // unknown: run time
  CHECK_OK(checkSource(load("layout=spatial(16).replicate(2), offset=[0, 16:]")));
  expectError(load("layout=spatial(32), offset=[4, 0:]"), ErrorCode::OutOfBounds, 4);
  expectError(load("layout=spatial(32), offset=[-1, 0:]"), ErrorCode::OutOfBounds, 4);
  expectError(load("layout=spatial(32), offset=[0, 1:]"), ErrorCode::OutOfBounds, 4);
  expectError(load("layout=spatial(16).replicate(2), offset=[0, 17:]"), ErrorCode::OutOfBounds, 4);
  // A 64-long tile does not fit a 32-long dimension wherever it starts.
  expectError(load("layout=spatial(32).local(2), offset=[n, n:]"), ErrorCode::OutOfBounds, 4);
  expectError(load("layout=spatial(8, 4).local(1, 16)"), ErrorCode::OutOfBounds, 4);
  expectError(kernel(kParams, std::string(kMem) +
                                  "    x = AllocateRegister(f32, layout=spatial(32))\n"
                                  "    StoreShared(x, s, offset=[2 + 2, 0:])\n"),
              ErrorCode::OutOfBounds, 5);
  // Global accesses outside the shape read zeros: never an error.
  CHECK_OK(checkSource(
      kernel(kParams, std::string(kMem) +
                          "    x = LoadGlobal(g, layout=spatial(32), offset=[100, 90:])\n")));
}

TEST_CASE("SliceShared and SliceGlobal") {
  Expected<VerifiedModule> m =
      checkSource(kernel(kParams, "    s = AllocateShared(f16, shape=[3, 64, 32])\n"
                                  "    t = SliceShared(s, offset=[n, 0:, 0:])\n"
                                  "    u = SliceShared(t, offset=[16:, 8], shape=[32])\n"
                                  "    w = SliceShared(s, offset=[1:, 0, 4:])\n"
                                  "    g = ViewGlobal(h, shape=[n, n, 8])\n"
                                  "    gs = SliceGlobal(g, offset=[0, n:, 0:], shape=[16, 8])\n"
                                  "    gt = SliceGlobal(gs, offset=[0:, 3])\n"));
  REQUIRE_OK(m);
  const Program &prog = m->module.programs[0];
  const VarType &s = varType(*m, "k", "s");
  const VarType &t = varType(*m, "k", "t");
  const VarType &u = varType(*m, "k", "u");
  CHECK(t.shape == std::vector<int64_t>{64, 32});
  CHECK(u.shape == std::vector<int64_t>{32});
  CHECK(varType(*m, "k", "w").shape == std::vector<int64_t>{2, 28});
  CHECK(prog.vars[u.root].name == "s");
  CHECK(u.slices.size() == 2);
  CHECK(t.slices.size() == 1);
  CHECK(s.slices.empty());
  CHECK(u.slices[0] == t.slices[0]);
  CHECK(prog.instructions[u.slices[1]].opcode == Opcode::SliceShared);
  CHECK(varType(*m, "k", "gs").rank == 2);
  CHECK(varType(*m, "k", "gt").rank == 1);
  CHECK(prog.vars[varType(*m, "k", "gt").root].name == "g");
  std::string sh = "    s = AllocateShared(f16, shape=[3, 64, 32])\n";
  expectError(kernel(kParams, sh + "    t = SliceShared(s, offset=[3, 0:, 0:])\n"),
              ErrorCode::OutOfBounds, 3);
  expectError(kernel(kParams, sh + "    t = SliceShared(s, offset=[0, 0:, 16:], shape=[64, 32])\n"),
              ErrorCode::OutOfBounds, 3);
  expectError(kernel(kParams, sh + "    t = SliceShared(s, offset=[0, 0:, 0:], shape=[65, 32])\n"),
              ErrorCode::OutOfBounds, 3);
  expectError(kernel(kParams, sh + "    t = SliceShared(s, offset=[0, n:, 0:])\n"),
              ErrorCode::BadArgument, 3);
  expectError(kernel(kParams, sh + "    t = SliceShared(s, offset=[0, 0:])\n"),
              ErrorCode::OffsetRank, 3);
  expectError(kernel(kParams, sh + "    t = SliceShared(s, offset=[0, 0:, 0:], shape=[4])\n"),
              ErrorCode::OffsetRank, 3);
  std::string gl = "    g = ViewGlobal(h, shape=[n, n, 8])\n";
  expectError(kernel(kParams, gl + "    t = SliceGlobal(g, offset=[0, 0:])\n"),
              ErrorCode::OffsetRank, 3);
  expectError(kernel(kParams, gl + "    t = SliceGlobal(g, offset=[0, 0:, 0], shape=[4, 4])\n"),
              ErrorCode::OffsetRank, 3);
}

TEST_CASE("CopyAsync and its wait instructions") {
  CHECK_OK(checkSource(
      kernel(kParams, "    g = ViewGlobal(h, shape=[n, 64])\n"
                      "    s = AllocateShared(f16, shape=[2, 16, 64])\n"
                      "    CopyAsync(SliceShared(s, offset=[1, 0:, 0:]), g, offset=[n:, 0:])\n"
                      "    CopyAsyncCommitGroup()\n"
                      "    CopyAsyncWaitGroup(0)\n"
                      "    CopyAsyncWaitAll()\n"
                      "    Synchronize()\n")));
  expectError(kernel(kParams, "    g = ViewGlobal(p, shape=[16, 64])\n"
                              "    s = AllocateShared(f16, shape=[16, 64])\n"
                              "    CopyAsync(s, g)\n"),
              ErrorCode::DtypeMismatch, 4);
  expectError(kernel(kParams, "    g = ViewGlobal(h, shape=[16, 64])\n"
                              "    s = AllocateShared(f16, shape=[16, 64])\n"
                              "    CopyAsync(s, g, offset=[0:])\n"),
              ErrorCode::OffsetRank, 4);
}

TEST_CASE("shared plan: 128-aligned allocations (1024 with a swizzle) in program order, "
          "bit-packed sizes") {
  Expected<VerifiedModule> m = checkSource(kernel(
      kParams,
      "    a = AllocateShared(f32, shape=[3, 5])\n" // 60 bytes at 0
      "    b = AllocateShared(i4, shape=[3, 5])\n"  // 60 bits: 8 bytes at 128
      "    c = AllocateShared(f16, shape=[4], layout=strided([4], [2]))\n" // 7 elements: 14 at 256
      "    d = AllocateShared(u8, shape=[8, 8], layout=swizzle(row_major(8, 8), 1, 3, 3))\n"));
  REQUIRE_OK(m);
  CHECK(varType(*m, "k", "a").sharedByteOffset == 0);
  CHECK(varType(*m, "k", "b").sharedByteOffset == 128);
  CHECK(varType(*m, "k", "c").sharedByteOffset == 256);
  CHECK(varType(*m, "k", "d").sharedByteOffset == 1024); // swizzled: a multiple of 1024
  CHECK(varType(*m, "k", "c").sharedLayout->size() == 7);
  const ProgramInfo &info = m->programs[0];
  CHECK(info.sharedBytes == 1024 + 64);
  CHECK(info.scratchBytes == 0);
  // An allocation inside a loop is still one allocation.
  Expected<VerifiedModule> loop = checkSource(
      kernel(kParams, "    for i in range(4):\n        a = AllocateShared(f32, shape=[8])\n"
                      "    b = AllocateShared(f32, shape=[8])\n"));
  REQUIRE_OK(loop);
  CHECK(varType(*loop, "k", "b").sharedByteOffset == 128);
  CHECK(loop->programs[0].sharedBytes == 160);
  // Scratch follows the allocations at the next 128-byte boundary.
  Expected<VerifiedModule> scratch =
      checkSource(kernel(kParams, "    a = AllocateShared(f32, shape=[3])\n"
                                  "    x = AllocateRegister(f32, layout=spatial(32).local(3))\n"
                                  "    y = ConvertLayout(x, layout=local(3).spatial(32))\n"));
  REQUIRE_OK(scratch);
  CHECK(scratch->programs[0].scratchByteOffset == 128);
  CHECK(scratch->programs[0].scratchBytes == 96 * 4);
  CHECK(scratch->programs[0].sharedBytes == 128 + 384);
}

TEST_CASE("shared layouts: shape and injectivity") {
  expectError(
      kernel(kParams, "    s = AllocateShared(f32, shape=[4, 8], layout=row_major(8, 4))\n"),
      ErrorCode::LayoutShape, 2);
  expectError(kernel(kParams,
                     "    s = AllocateShared(f32, shape=[2, 2], layout=strided([2, 2], [1, 1]))\n"),
              ErrorCode::LayoutInvalid, 2);
  expectError(kernel(kParams, "    s = AllocateShared(f32, shape=[4, 0])\n"),
              ErrorCode::BadArgument, 2);
}

TEST_CASE("shared-capacity: allocations plus scratch within the target's limit") {
  // 200,000 bytes: within sm_90's 232,448, beyond sm_80's 166,912.
  std::string big = kernel(kParams, "    s = AllocateShared(f32, shape=[50000])\n");
  CHECK_OK(checkSource(big));
  CheckOptions sm80;
  sm80.target = Target::sm80();
  CHECK_ERROR(checkSource(big, sm80), ErrorCode::SharedCapacity);
  expectError(kernel(kParams, "    s = AllocateShared(f32, shape=[60000])\n"),
              ErrorCode::SharedCapacity, 2);
  // Two allocations of 120,000 bytes: 120,064 + 120,000 in all.
  expectError(kernel(kParams, "    a = AllocateShared(f32, shape=[30000])\n"
                              "    b = AllocateShared(f32, shape=[30000])\n"),
              ErrorCode::SharedCapacity, 1);
  // 231,200 bytes fit; with 4,096 bytes of ConvertLayout scratch at 231,296 they do not.
  std::string nearly = "    a = AllocateShared(f32, shape=[57800])\n"
                       "    x = AllocateRegister(f32, layout=spatial(32).local(32))\n";
  CHECK_OK(checkSource(kernel(kParams, nearly)));
  expectError(kernel(kParams, nearly + "    y = ConvertLayout(x, layout=local(32).spatial(32))\n"),
              ErrorCode::SharedCapacity, 1);
}

TEST_CASE("AllocateGlobal uses the workspace") {
  Expected<VerifiedModule> m =
      checkSource(kernel(kParams, "    w = AllocateGlobal(f32, shape=[n, 4], requires_clean=True)\n"
                                  "    x = LoadGlobal(w, layout=spatial(32), offset=[0:, 0])\n"));
  REQUIRE_OK(m);
  CHECK(m->programs[0].usesWorkspace);
  CHECK(varType(*m, "k", "w").rank == 2);
  expectError(kernel(kParams, "    w = AllocateGlobal(f32, shape=[1.5])\n"),
              ErrorCode::DtypeMismatch, 2);
}

TEST_CASE("ViewGlobal: dtype, shape and strides") {
  Expected<VerifiedModule> m = checkSource(
      kernel(kParams, "    g = ViewGlobal(p, dtype=u8, shape=[n, 8], strides=[16, 1])\n"));
  REQUIRE_OK(m);
  CHECK(varType(*m, "k", "g").dtype == DataType::u(8));
  CHECK(varType(*m, "k", "g").rank == 2);
  expectError(kernel(kParams, "    g = ViewGlobal(p, shape=[n, 8], strides=[1])\n"),
              ErrorCode::ShapeMismatch, 2);
  expectError(kernel(kParams, "    g = ViewGlobal(p, strides=[1])\n"), ErrorCode::BadArgument, 2);
  expectError(kernel(kParams, "    g = ViewGlobal(p, shape=[2.5])\n"), ErrorCode::DtypeMismatch, 2);
}

TEST_CASE("views of memory cannot be updated") {
  expectError(kernel(kParams, "    g = ViewGlobal(p, shape=[n])\n"
                              "    for i in range(2):\n"
                              "        g = ViewGlobal(p, shape=[n])\n"),
              ErrorCode::UpdateType, 4);
}
