// Pointer extents (loader/verified_module.h): elements of each pointer parameter that the
// program's ViewGlobals can touch, 1 + sum_d (shape_d - 1) * stride_d maximised over views,
// evaluated for concrete parameter values. Expected values are computed by hand.
#include "check_test_util.h"
#include "test_helpers.h"

#include <map>

using namespace tilus;
using namespace tilus::testing;

namespace {

VarId varNamed(const Program &p, const std::string &name) {
  for (VarId v = 0; v < p.vars.size(); ++v)
    if (p.vars[v].name == name)
      return v;
  FAIL("no variable " << name);
  return kNoId;
}

/// Extent of pointer `ptr` with scalar parameters set by name (i32 bit patterns).
int64_t extentOf(const VerifiedModule &m, size_t program, const std::string &ptr,
                 const std::map<std::string, int32_t> &params) {
  const Program &p = m.module.programs[program];
  VarId id = varNamed(p, ptr);
  for (const PointerExtent &e : m.programs[program].extents) {
    if (e.pointer != id)
      continue;
    REQUIRE(e.computable);
    return evaluateExtent(p, e, [&](VarId v) -> uint64_t {
      auto it = params.find(p.vars[v].name);
      REQUIRE(it != params.end());
      return uint64_t(uint32_t(it->second));
    });
  }
  FAIL("no extent for " << ptr);
  return -1;
}

} // namespace

TEST_CASE("vector_add with n = 1000 gives 1000 elements for each pointer") {
  AssembleOptions ao;
  Expected<Module> mod =
      assemble(readText(std::string(TILUSVM_SOURCE_DIR) + "/programs/vector_add.tasm"), ao);
  REQUIRE_OK(mod);
  Expected<VerifiedModule> m = checkModule(std::move(mod).value());
  REQUIRE_OK(m);
  REQUIRE(m->programs[0].extents.size() == 3);
  for (const char *ptr : {"x_ptr", "y_ptr", "z_ptr"}) {
    CAPTURE(ptr);
    CHECK(extentOf(*m, 0, ptr, {{"n", 1000}}) == 1000);
    CHECK(extentOf(*m, 0, ptr, {{"n", 1}}) == 1);
    CHECK(extentOf(*m, 0, ptr, {{"n", 0}}) == 0);
  }
  // One extent per pointer parameter, in parameter order.
  const Program &p = m->module.programs[0];
  CHECK(m->programs[0].extents[0].pointer == varNamed(p, "x_ptr"));
  CHECK(m->programs[0].extents[2].pointer == varNamed(p, "z_ptr"));
}

TEST_CASE("paper matmul extents: a_ptr is M*K, transformed B is K/16 * N/8 * 96 bytes") {
  AssembleOptions ao;
  ao.defines = {{"M", "64"}, {"N", "32"}, {"K", "48"}};
  Expected<Module> mod = assemble(
      readText(std::string(TILUSVM_SOURCE_DIR) + "/programs/paper_matmul_f16_i6.tasm"), ao);
  REQUIRE_OK(mod);
  Expected<VerifiedModule> m = checkModule(std::move(mod).value());
  REQUIRE_OK(m);
  size_t tb = m->module.programs[0].name == "transform_b" ? 0 : 1;
  size_t mm = 1 - tb;
  CHECK(extentOf(*m, mm, "a_ptr", {}) == 64 * 48);
  CHECK(extentOf(*m, mm, "c_ptr", {}) == 64 * 32);
  CHECK(extentOf(*m, mm, "transformed_b_ptr", {}) == (48 / 16) * (32 / 8) * 96);
  CHECK(extentOf(*m, tb, "b_ptr", {}) == 48 * 32);
  CHECK(extentOf(*m, tb, "transformed_b_ptr", {}) == (48 / 16) * (32 / 8) * 96);
}

TEST_CASE("extents: strides, several views, dtype conversion, empty and run-time views") {
  const char *src = R"(
def k<1>(i6* p, f32* q, f32* r, f32* unused, i32 n) threads=32:
    bi = BlockIndices()
    a = ViewGlobal(p, dtype=u8, shape=[96])
    b = ViewGlobal(q, shape=[4, 8], strides=[16, 1])
    c = ViewGlobal(q, shape=[n, 2])
    d = ViewGlobal(r, shape=[bi + 1])
)";
  Expected<VerifiedModule> m = checkSource(src);
  REQUIRE_OK(m);
  // 96 u8 = 768 bits = 128 i6 elements.
  CHECK(extentOf(*m, 0, "p", {{"n", 5}}) == 128);
  // max(1 + 3*16 + 7*1, 1 + (n-1)*2 + 1) = max(56, 2n).
  CHECK(extentOf(*m, 0, "q", {{"n", 100}}) == 200);
  CHECK(extentOf(*m, 0, "q", {{"n", 10}}) == 56);
  CHECK(extentOf(*m, 0, "q", {{"n", 0}}) == 56);
  CHECK(extentOf(*m, 0, "q", {{"n", -3}}) == 56);
  CHECK(extentOf(*m, 0, "unused", {}) == 0);
  // r's view depends on BlockIndices: not computable before launch.
  const Program &p = m->module.programs[0];
  for (const PointerExtent &e : m->programs[0].extents)
    if (e.pointer == varNamed(p, "r"))
      CHECK_FALSE(e.computable);
}

TEST_CASE("extents: a view without shape cannot be sized") {
  Expected<VerifiedModule> m = checkSource(R"(
def k<1>(f32* p) threads=32:
    g = ViewGlobal(p)
)");
  REQUIRE_OK(m);
  REQUIRE(m->programs[0].extents.size() == 1);
  CHECK_FALSE(m->programs[0].extents[0].computable);
}
