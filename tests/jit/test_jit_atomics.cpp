// The PTX of the atomics and of Fence (jit/lower_atomic.cpp, docs/jit.md): `red` without a
// result, `atom` with one, relaxed at gpu scope in global memory, vectors of f32 / f16 adds on
// sm_90 (PTX 8.1), the operation and type of every allowed row, AtomicLoad and AtomicStore as
// relaxed `ld` / `st`, and ptxas accepting all of it.
#include "jit/jit_test_util.h"

#include <regex>
#include <string>

using namespace tilus;
using namespace tilus::testing;

namespace {

PtxKernel ptxOf(const VerifiedModule &m, int sm) {
  JitOptions options;
  options.smVersion = sm;
  Expected<PtxKernel> k = compileToPtx(m, 0, options);
  REQUIRE_OK(k);
  return *k;
}

/// One program with every atomic row that type t allows (integers: all; floats: add and, for
/// f32 and f64, exch) on global and shared memory.
std::string everyAtomic(const std::string &t, bool integer, bool exch = true) {
  std::string s = "def k<1>(" + t + "* p, " + t + "* q) threads=32:\n" +
                  "    g = ViewGlobal(p, shape=[64])\n" + "    s = AllocateShared(" + t +
                  ", shape=[64])\n" + "    x = LoadGlobal(ViewGlobal(q, shape=[64]), " +
                  "layout=spatial(32).local(2))\n";
  s += "    AtomicAdd(g, x)\n";
  s += "    StoreGlobal(AtomicAdd(g, x), ViewGlobal(q, shape=[64]))\n";
  s += "    AtomicAdd(s, x)\n";
  if (integer) {
    s += "    AtomicMax(g, x)\n";
    s += "    AtomicMin(s, x)\n";
    s += "    StoreGlobal(AtomicCas(g, x, x), ViewGlobal(q, shape=[64]))\n";
    s += "    AtomicCas(s, x, x)\n";
  }
  if (exch) { // the types of AtomicExch are those of AtomicLoad and AtomicStore too
    s += "    StoreGlobal(AtomicExch(s, x), ViewGlobal(q, shape=[64]))\n";
    s += "    AtomicExch(g, x)\n";
    s += "    AtomicStore(g, x)\n";
    s += "    AtomicStore(s, x)\n";
    s += "    StoreGlobal(AtomicLoad(g, layout=spatial(32).local(2)), ViewGlobal(q, shape=[64]))\n";
    s += "    StoreGlobal(AtomicLoad(s, layout=spatial(32).local(2)), ViewGlobal(q, shape=[64]))\n";
  }
  s += "    Fence(scope=gpu)\n";
  s += "    Fence(scope=block)\n";
  return s;
}

} // namespace

TEST_CASE("atomics: red without a result, atom with one, relaxed at gpu scope") {
  VerifiedModule m = buildSource(everyAtomic("i32", true));
  for (int sm : {80, 90}) {
    std::string ptx = ptxOf(m, sm).ptx;
    CHECK(contains(ptx, "red.relaxed.gpu.global.add.u32"));
    CHECK(contains(ptx, "atom.relaxed.gpu.global.add.u32"));
    CHECK(contains(ptx, "atom.shared.add.u32") == false); // no result: red
    CHECK(contains(ptx, "red.shared.add.u32"));
    CHECK(contains(ptx, "red.relaxed.gpu.global.max.s32"));
    CHECK(contains(ptx, "red.shared.min.s32"));
    CHECK(contains(ptx, "atom.relaxed.gpu.global.cas.b32"));
    CHECK(contains(ptx, "atom.shared.exch.b32"));
    CHECK(contains(ptx, "fence.acq_rel.gpu"));
    CHECK(contains(ptx, "fence.acq_rel.cta"));
  }
  VerifiedModule u = buildSource(everyAtomic("u64", true));
  std::string ptx = ptxOf(u, 90).ptx;
  CHECK(contains(ptx, "red.relaxed.gpu.global.max.u64"));
  CHECK(contains(ptx, "atom.relaxed.gpu.global.cas.b64"));
}

TEST_CASE("AtomicLoad and AtomicStore: relaxed ld and st, gpu scope in global memory, cta in "
          "shared memory, predicated on the bounds of the view") {
  for (const char *t : {"u64", "f32"}) {
    VerifiedModule m = buildSource(everyAtomic(t, std::string(t) == "u64"));
    std::string bits = std::string(t) == "u64" ? "b64" : "b32";
    for (int sm : {80, 90}) {
      std::string ptx = ptxOf(m, sm).ptx;
      INFO(t << " sm_" << sm);
      CHECK(contains(ptx, "st.relaxed.gpu.global." + bits));
      CHECK(contains(ptx, "st.relaxed.cta.shared." + bits));
      CHECK(contains(ptx, "ld.relaxed.gpu.global." + bits));
      CHECK(contains(ptx, "ld.relaxed.cta.shared." + bits));
      CHECK_FALSE(contains(ptx, "atom.relaxed.gpu.global.add." + bits)); // no atomic unit
    }
  }
  // a tile that may leave the view: each element's load and store is predicated, and an element
  // outside reads 0
  VerifiedModule e = buildSource("def k<1>(u32* p, i32 n) threads=32:\n"
                                 "    g = ViewGlobal(p, shape=[n])\n"
                                 "    x = AtomicLoad(g, layout=spatial(32), offset=[1:])\n"
                                 "    AtomicStore(g, x)\n");
  std::string ptx = ptxOf(e, 90).ptx;
  CHECK(std::regex_search(
      ptx, std::regex(R"(mov\.b32 %r\d+, 0; @%p\d+ ld\.relaxed\.gpu\.global\.b32 )")));
  CHECK(std::regex_search(ptx, std::regex(R"(@%p\d+ st\.relaxed\.gpu\.global\.b32 )")));
}

namespace {

/// A kernel that reads a tile of p (`AtomicLoad` in `layout` at `from`) and writes it back at
/// `to` (`AtomicStore`).
std::string relaxedCopy(const std::string &type, const std::string &layout, const std::string &from,
                        const std::string &to) {
  return "def k<1>(" + type + "* p, i32 n) threads=32:\n    g = ViewGlobal(p, shape=[n])\n" +
         "    x = AtomicLoad(g, layout=" + layout + ", offset=[" + from + "])\n" +
         "    AtomicStore(g, x, offset=[" + to + "])\n";
}

} // namespace

TEST_CASE("AtomicLoad and AtomicStore: consecutive 32-bit elements in one vector access, each "
          "word one relaxed access; 64-bit elements one access each") {
  // four consecutive f32 slots per thread along the unit-stride dimension: one 16-byte relaxed
  // access when in bounds and aligned (offset 1: not provably), the elements one by one (each
  // predicated on its bounds) otherwise
  std::string ptx =
      ptxOf(buildSource(relaxedCopy("f32", "spatial(32).local(4)", "1:", "3:")), 90).ptx;
  CHECK(contains(ptx, "ld.relaxed.gpu.global.v4.b32 {"));
  CHECK(contains(ptx, "st.relaxed.gpu.global.v4.b32 ["));
  CHECK(std::regex_search(ptx, std::regex(R"(@%p\d+ ld\.relaxed\.gpu\.global\.b32 )")));
  CHECK(std::regex_search(ptx, std::regex(R"(@%p\d+ st\.relaxed\.gpu\.global\.b32 )")));
  CHECK_FALSE(contains(ptx, "ld.global"));
  CHECK_FALSE(contains(ptx, "st.global"));
  // u64: a pair of 32-bit words would be two accesses of one element, so each element is one
  // b64 access
  std::string ptx64 =
      ptxOf(buildSource(relaxedCopy("u64", "spatial(32).local(2)", "0:", "0:")), 90).ptx;
  CHECK(contains(ptx64, "ld.relaxed.gpu.global.b64"));
  CHECK(contains(ptx64, "st.relaxed.gpu.global.b64"));
  CHECK_FALSE(contains(ptx64, ".v2.b32"));
  CHECK_FALSE(contains(ptx64, ".v4.b32"));
}

TEST_CASE("atomics: f32 and f16 adds of consecutive slots are vectors on sm_90 (PTX 8.1)") {
  VerifiedModule f = buildSource(everyAtomic("f32", false));
  PtxKernel k90 = ptxOf(f, 90);
  CHECK(contains(k90.ptx, ".version 8.1"));
  CHECK(contains(k90.ptx, "red.relaxed.gpu.global.add.v2.f32"));
  CHECK(contains(k90.ptx, "atom.relaxed.gpu.global.add.f32")); // with a result: per element
  PtxKernel k80 = ptxOf(f, 80);
  CHECK_FALSE(contains(k80.ptx, ".v2.f32"));
  CHECK(contains(k80.ptx, "red.relaxed.gpu.global.add.f32"));
  VerifiedModule h = buildSource(everyAtomic("f16", false, false));
  CHECK(contains(ptxOf(h, 90).ptx, "red.relaxed.gpu.global.add.noftz.v2.f16"));
  CHECK(contains(ptxOf(h, 80).ptx, "red.relaxed.gpu.global.add.noftz.f16"));
  // 4 consecutive f32 per thread: one v4
  VerifiedModule v4 =
      buildSource("def k<1>(f32* p) threads=32:\n"
                  "    x = AllocateRegister(f32, layout=spatial(32).local(4), init=1.0)\n"
                  "    AtomicAdd(ViewGlobal(p, shape=[128]), x)\n");
  CHECK(contains(ptxOf(v4, 90).ptx, "red.relaxed.gpu.global.add.v4.f32"));
  // no global f32 add: the PTX version stays 8.0
  VerifiedModule i = buildSource(everyAtomic("i32", true));
  CHECK(contains(ptxOf(i, 90).ptx, ".version 8.0"));
}

TEST_CASE("atomics: ptxas accepts every row and type on sm_80 and sm_90a" * needsPtxas()) {
  struct Row {
    const char *type;
    bool integer, exch;
  };
  const Row rows[] = {{"i32", true, true},   {"u32", true, true},   {"i64", true, true},
                      {"u64", true, true},   {"f32", false, true},  {"f64", false, true},
                      {"f16", false, false}, {"bf16", false, false}};
  for (const Row &r : rows) {
    VerifiedModule m = buildSource(everyAtomic(r.type, r.integer, r.exch));
    for (int sm : {80, 90}) {
      if (sm == 80 && std::string(r.type) == "bf16")
        continue; // atomic-dtype on sm_80 (the checker's target is sm_90 here)
      INFO(r.type << " sm_" << sm);
      checkPtxasAccepts(ptxOf(m, sm).ptx, sm);
    }
  }
  // a replicated operand with a result: the old values go through shared memory
  VerifiedModule t = buildSource(
      "def k<4>(i32* c, i32* o) threads=64:\n"
      "    b = BlockIndices()\n"
      "    one = AllocateRegister(i32, layout=replicate(64), init=1)\n"
      "    t = AtomicAdd(ViewGlobal(c, shape=[4]), one, offset=[b])\n"
      "    StoreGlobal(Add(Iota(layout=spatial(64), dim=0), t), ViewGlobal(o, shape=[256]), "
      "offset=[b * 64:])\n");
  for (int sm : {80, 90})
    checkPtxasAccepts(ptxOf(t, sm).ptx, sm);
  // relaxed vector accesses of 32-bit elements (16 and 8 bytes) and their element paths
  for (const char *layout : {"spatial(32).local(4)", "spatial(32).local(2)"}) {
    VerifiedModule v = buildSource(relaxedCopy("f32", layout, "1:", "5:"));
    for (int sm : {80, 90})
      checkPtxasAccepts(ptxOf(v, sm).ptx, sm);
  }
}
