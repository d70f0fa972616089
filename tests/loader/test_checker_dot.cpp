// Dot rules: shapes, the dtype table of ISA section 5, and the two layout rules (per-thread,
// or division by an mma atom with warp-level outer layouts). The atoms themselves are checked
// element by element against the fragment formulas of ISA section 3.1 (m16n8k16) and of the
// PTX ISA's mma.m16n8k32 fragment tables.
#include "check_test_util.h"
#include "loader/checker_impl.h"
#include "test_helpers.h"

using namespace tilus;
using namespace tilus::testing;

namespace {

using Formula = std::vector<int64_t> (*)(int64_t t, int64_t i);

void checkFragment(const RegisterLayout &l, std::vector<int64_t> shape, int64_t locals, Formula f) {
  REQUIRE(l.shape() == shape);
  REQUIRE(l.numThreads() == 32);
  REQUIRE(l.numLocals() == locals);
  for (int64_t t = 0; t < 32; ++t)
    for (int64_t i = 0; i < locals; ++i) {
      CAPTURE(t);
      CAPTURE(i);
      CHECK(l.apply(t, i) == f(t, i));
    }
}

/// A kernel computing one Dot with the given dtypes and layouts.
std::string dotKernel(const std::string &ab, const std::string &cd, const std::string &la,
                      const std::string &lb, const std::string &lc, int threads = 32) {
  return "def k<1>() threads=" + std::to_string(threads) + ":\n" + "    a = AllocateRegister(" +
         ab + ", layout=" + la + ")\n" + "    b = AllocateRegister(" + ab + ", layout=" + lb +
         ")\n" + "    c = AllocateRegister(" + cd + ", layout=" + lc + ")\n" +
         "    d = Dot(a, b, c)\n";
}

const char *kA16 = "column_local(2, 2).spatial(8, 4).local(1, 2)";
const char *kB16 = "local(2, 1).column_spatial(4, 8).local(2, 1)";
const char *kC = "local(2, 1).spatial(8, 4).local(1, 2)";
const char *kA32 = "column_local(2, 2).spatial(8, 4).local(1, 4)";
const char *kB32 = "local(2, 1).column_spatial(4, 8).local(4, 1)";

} // namespace

TEST_CASE("mma atoms match the fragment formulas") {
  const detail::MmaAtom *k16 = detail::mmaAtomFor(DataType::f16());
  REQUIRE(k16 != nullptr);
  CHECK(detail::mmaAtomFor(DataType::bf16()) == k16);
  checkFragment(k16->a, {16, 16}, 8, [](int64_t t, int64_t i) {
    return std::vector<int64_t>{t / 4 + 8 * ((i / 2) % 2), 2 * (t % 4) + i % 2 + 8 * (i / 4)};
  });
  checkFragment(k16->b, {16, 8}, 4, [](int64_t t, int64_t i) {
    return std::vector<int64_t>{8 * (i / 2) + 2 * (t % 4) + i % 2, t / 4};
  });
  checkFragment(k16->c, {16, 8}, 4, [](int64_t t, int64_t i) {
    return std::vector<int64_t>{t / 4 + 8 * (i / 2), 2 * (t % 4) + i % 2};
  });
  // PTX ISA, mma.m16n8k32 with .s8/.u8/.e4m3/.e5m2: groupID = lane / 4,
  // threadID_in_group = lane % 4; A: row = groupID (+8 for a_i with 4 <= i < 8 or i >= 12),
  // col = 4 * threadID_in_group + (i & 3) (+16 for i >= 8); B: row = 4 * threadID_in_group +
  // (i & 3) (+16 for i >= 4), col = groupID.
  const detail::MmaAtom *k32 = detail::mmaAtomFor(DataType::i(8));
  REQUIRE(k32 != nullptr);
  for (DataType t : {DataType::u(8), DataType::f8e4m3(), DataType::f8e5m2()})
    CHECK(detail::mmaAtomFor(t) == k32);
  checkFragment(k32->a, {16, 32}, 16, [](int64_t t, int64_t i) {
    int64_t row = t / 4 + (((i >= 4 && i < 8) || i >= 12) ? 8 : 0);
    int64_t col = 4 * (t % 4) + (i & 3) + (i >= 8 ? 16 : 0);
    return std::vector<int64_t>{row, col};
  });
  checkFragment(k32->b, {32, 8}, 8, [](int64_t t, int64_t i) {
    return std::vector<int64_t>{4 * (t % 4) + (i & 3) + (i >= 4 ? 16 : 0), t / 4};
  });
  CHECK(k32->c == k16->c);
  CHECK(detail::mmaAtomFor(DataType::f32()) == nullptr);
  CHECK(detail::mmaAtomFor(DataType::f64()) == nullptr);
}

TEST_CASE("Dot with mma atoms: one warp and several") {
  Expected<VerifiedModule> m = checkSource(dotKernel("i8", "i32", kA32, kB32, kC));
  REQUIRE_OK(m);
  const VarType &d = varType(*m, "k", "d");
  CHECK(d.dtype == DataType::i32());
  CHECK(*d.layout == layoutOf(kC));
  // Scratch: a [16, 32] + b [32, 8] bytes.
  CHECK(m->programs[0].scratchBytes == 16 * 32 + 32 * 8);
  CHECK_OK(checkSource(dotKernel("u8", "i32", kA32, kB32, kC)));
  CHECK_OK(checkSource(dotKernel("f8e4m3", "f32", kA32, kB32, kC)));
  CHECK_OK(checkSource(dotKernel("f16", "f16", kA16, kB16, kC)));
  CHECK_OK(checkSource(dotKernel("bf16", "f32", kA16, kB16, kC)));
  // Two warps split M; both hold the same B fragment.
  CHECK_OK(checkSource(dotKernel("i8", "i32", std::string("spatial(2, 1).") + kA32,
                                 std::string("replicate(2).") + kB32,
                                 std::string("spatial(2, 1).") + kC, 64)));
  // The pipelined matmul's four warps.
  CHECK_OK(checkSource(dotKernel("f16", "f32",
                                 std::string("spatial(2, 1).replicate(2).local(2, 2).") + kA16,
                                 std::string("replicate(2).spatial(1, 2).local(2, 4).") + kB16,
                                 std::string("spatial(2, 2).local(2, 4).") + kC, 128)));
}

TEST_CASE("dot-layout: neither rule holds") {
  // Warp 1 holds acc tile rows 0-1 but A tile rows 2-3.
  Expected<VerifiedModule> warp = checkSource(
      dotKernel("f16", "f32", std::string("replicate(2).spatial(2, 1).local(2, 2).") + kA16,
                std::string("replicate(2).spatial(1, 2).local(2, 4).") + kB16,
                std::string("spatial(2, 2).local(2, 4).") + kC, 128));
  REQUIRE_FALSE(warp.ok());
  CHECK(warp.status().code() == ErrorCode::DotLayout);
  CHECK(warp.status().first().location.line == 5);
  CHECK(warp.status().first().message.find("warp") != std::string::npos);
  // The C fragment in a different thread order does not divide by the atom.
  expectError(dotKernel("f16", "f32", kA16, kB16, "spatial(8, 4).local(2, 2)"),
              ErrorCode::DotLayout, 5);
  // f32 has no atom; thread t holds c row t but only column t % 8 of b.
  Expected<VerifiedModule> pt = checkSource(dotKernel("f32", "f32", "spatial(32, 1).local(1, 16)",
                                                      "replicate(4).spatial(1, 8).local(16, 1)",
                                                      "spatial(32, 1).local(1, 8)"));
  REQUIRE_FALSE(pt.ok());
  CHECK(pt.status().code() == ErrorCode::DotLayout);
  CHECK(pt.status().first().message.find("thread 0 owns d[0, 0] but not b[0, 1]") ==
        std::string::npos);
  CHECK(pt.status().first().message.find("thread 0 owns d[0, 1] but not b[0, 1]") !=
        std::string::npos);
}

TEST_CASE("Dot per-thread rule: every thread holds whole rows of a and columns of b") {
  CHECK_OK(checkSource(dotKernel("f32", "f32", "spatial(32, 1).local(1, 16)",
                                 "local(16, 8).replicate(32)", "spatial(32, 1).local(1, 8)")));
  CHECK_OK(
      checkSource(dotKernel("f64", "f64", "local(4, 4).replicate(32)", "local(4, 4).replicate(32)",
                            "spatial(4, 1).replicate(8).local(1, 4)")));
  // The f32 x u2 variant's layouts.
  CHECK_OK(checkSource(dotKernel("f32", "f32", "spatial(4, 1).replicate(8).local(4, 16)",
                                 "replicate(4).spatial(1, 8).local(16, 1)",
                                 "spatial(4, 8).local(4, 1)")));
}

TEST_CASE("dot-shape and dot-dtype") {
  expectError(dotKernel("f16", "f32", kA16, "spatial(8, 4).local(1, 2)", kC), ErrorCode::DotShape,
              5);
  expectError(dotKernel("f16", "f32", "spatial(32).local(8)", kB16, kC), ErrorCode::DotShape, 5);
  expectError(dotKernel("f16", "f32", kA16, kB16, "spatial(8, 4).local(2, 4)"), ErrorCode::DotShape,
              5);
  expectError(dotKernel("f16", "i32", kA16, kB16, kC), ErrorCode::DotDtype, 5);
  expectError(dotKernel("bf16", "f16", kA16, kB16, kC), ErrorCode::DotDtype, 5);
  expectError(dotKernel("i8", "f32", kA32, kB32, kC), ErrorCode::DotDtype, 5);
  expectError(dotKernel("i32", "i32", kA16, kB16, kC), ErrorCode::DotDtype, 5);
  expectError("def k<1>() threads=32:\n"
              "    a = AllocateRegister(f16, layout=" +
                  std::string(kA16) +
                  ")\n"
                  "    b = AllocateRegister(bf16, layout=" +
                  kB16 +
                  ")\n"
                  "    c = AllocateRegister(f32, layout=" +
                  kC +
                  ")\n"
                  "    d = Dot(a, b, c)\n",
              ErrorCode::DotDtype, 5);
}

TEST_CASE("Dot out=: the target has c's dtype and shape") {
  std::string base = dotKernel("f16", "f32", kA16, kB16, kC);
  CHECK_OK(checkSource(base + "    e = AllocateRegister(f32, layout=" + kC +
                       ")\n"
                       "    Dot(a, b, c, out=e)\n"));
  expectError(base + "    e = AllocateRegister(f16, layout=" + kC +
                  ")\n"
                  "    Dot(a, b, c, out=e)\n",
              ErrorCode::DtypeMismatch, 7);
  expectError(base + "    e = AllocateRegister(f32, layout=local(2, 2).spatial(8, 4).local(1, 2))\n"
                     "    Dot(a, b, c, out=e)\n",
              ErrorCode::ShapeMismatch, 7);
  // The target's layout takes d's place in the layout rule.
  expectError(base + "    e = AllocateRegister(f32, layout=spatial(8, 4).local(2, 2))\n"
                     "    Dot(a, b, c, out=e)\n",
              ErrorCode::DotLayout, 7);
}
