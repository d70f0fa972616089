// Thread groups in the JIT (docs/isa.md, "Thread groups: warp specialisation"): each group is a
// range test on the thread index around its body, with its own named barrier for
// Synchronize(), group-relative thread indices, mbarrier arrivals that count as the block's,
// setmaxnreg on entry and exit with regs= (and .maxnreg on the kernel), refused for sm_80.
#include "jit/jit_test_util.h"

#include <regex>

using namespace tilus;
using namespace tilus::testing;

namespace {

// A group of 128 threads (4 warps) and one of 256 (8 warps): the block has 12 warps.
const char *kGroupsSource = R"(
def k<1>(f32* x_ptr, f32* y_ptr) threads=384:
    gx = ViewGlobal(x_ptr, shape=[256])
    gy = ViewGlobal(y_ptr, shape=[256])
    buf = AllocateShared(f32, shape=[256])
    full = AllocateShared(u64, shape=[1])
    MbarrierInit(full, count=1)
    Synchronize()
    parallel:
        group(128, regs=40):
            v = LoadGlobal(gx, layout=spatial(128).local(2))
            StoreShared(v, buf)
            MbarrierArrive(full)
        group(256, regs=232):
            MbarrierWait(full, parity=0)
            w = LoadShared(buf, layout=spatial(256))
            Synchronize()
            StoreGlobal(w, gy)
)";

} // namespace

TEST_CASE("thread groups: range tests, named barriers, register re-allocation on sm_90a") {
  VerifiedModule m = buildSource(kGroupsSource);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  // 65536 / 384 = 170 registers per thread, rounded down to 168: the file that regs= shares out
  CHECK(contains(k->ptx, ".maxnreg 168"));
  CHECK(occurrences(k->ptx, "setmaxnreg.dec.sync.aligned.u32 40;") == 1);
  // the producer gives its registers back at its end, the consumers theirs
  CHECK(occurrences(k->ptx, "setmaxnreg.inc.sync.aligned.u32 168;") == 1);
  CHECK(occurrences(k->ptx, "setmaxnreg.inc.sync.aligned.u32 232;") == 1);
  CHECK(occurrences(k->ptx, "setmaxnreg.dec.sync.aligned.u32 168;") == 1);
  // the second group's Synchronize() is named barrier 2 of its 256 threads
  CHECK(std::regex_search(k->ptx, std::regex(R"(barrier\.sync(\.aligned)?\s+2,\s*256;)")));
  // the block barriers before and after the groups (and after the initialisation)
  size_t blockBarriers = occurrences(k->ptx, "bar.sync \t0;");
  CHECK(blockBarriers >= 3);
  // one group arrival = 12 warp arrivals: lane 0 of each of the group's 4 warps, and 8 more
  // from its first warp (count 1 block arrival = 12 warp arrivals at init)
  bool counted = std::regex_search(
      k->ptx, std::regex(R"(@p mbarrier\.arrive\.shared::cta\.b64 st, \[%r\d+\], %r\d+;)"));
  CHECK(counted);
}

TEST_CASE("thread groups: two copies of a clause are groups of their own, the index a constant") {
  // a producer of 128 threads and two copies of 64: the copies are threads [128, 192) and
  // [192, 256), with named barriers 2 and 3; copy w stores to row w, the index a constant folded
  // into the address (no division of the thread index by 64)
  VerifiedModule m = buildSource(R"(
def k<1>(f32* y_ptr) threads=256:
    gy = ViewGlobal(y_ptr, shape=[2, 64])
    parallel:
        group(128):
            pass
        group(64, copies=2) as w:
            v = AllocateRegister(f32, layout=spatial(1, 64), init=1.0)
            Synchronize()
            StoreGlobal(v, gy, offset=[w:, 0:])
)");
  Expected<PtxKernel> k = compileFor(m, 80);
  REQUIRE_OK(k);
  for (int id : {2, 3})
    CHECK(std::regex_search(
        k->ptx, std::regex("barrier\\.sync(\\.aligned)?\\s+" + std::to_string(id) + ",\\s*64;")));
  CHECK(!std::regex_search(k->ptx, std::regex(R"(barrier\.sync(\.aligned)?\s+4,)")));
  CHECK(!contains(k->ptx, "div.u32"));
  CHECK(!contains(k->ptx, "rem.u32"));
  CHECK(occurrences(k->ptx, "st.global") == 2);
}

TEST_CASE("thread groups: three or more copies are one body, the index from the thread index") {
  // a producer of 128 threads and three copies of 64 (threads [128, 320)): one body, whose
  // copy index (tid - 128) / 64 picks the named barrier 2 + w and the row of the store; each
  // copy's Reduce stages through its own part of the scratch area (64 f32 slots)
  VerifiedModule m = buildSource(R"(
def k<1>(f32* y_ptr) threads=320:
    gy = ViewGlobal(y_ptr, shape=[3, 64])
    parallel:
        group(128):
            pass
        group(64, copies=3) as w:
            v = AllocateRegister(f32, layout=spatial(1, 64), init=1.0)
            r = Reduce(v, dim=1, op=sum, keepdim=True, layout=replicate(64).local(1, 1))
            Synchronize()
            StoreGlobal(Add(v, r), gy, offset=[w:, 0:])
)");
  Expected<PtxKernel> k = compileFor(m, 80);
  REQUIRE_OK(k);
  INFO(k->ptx);
  // the body once: one store, one group test; the barrier's number a register
  CHECK(occurrences(k->ptx, "st.global") == 1);
  CHECK(std::regex_search(k->ptx, std::regex(R"(barrier\.sync(\.aligned)?\s+%r\d+,\s*64;)")));
  CHECK(!std::regex_search(k->ptx, std::regex(R"(barrier\.sync(\.aligned)?\s+[2-9],)")));
  // each copy's Reduce stages its 64 f32 values (256 bytes): three parts of 256 bytes, where the
  // checker planned 512 per copy (8 bytes per element, the worst case of any element type)
  CHECK(k->sharedBytes == 3 * 256);
}

TEST_CASE("thread groups: copies of one warp as one body synchronise with bar.warp.sync") {
  VerifiedModule m = buildSource(R"(
def k<1>(f32* y_ptr) threads=128:
    gy = ViewGlobal(y_ptr, shape=[4, 32])
    s = AllocateShared(f32, shape=[4, 32])
    parallel:
        group(32, copies=4) as w:
            StoreShared(AllocateRegister(f32, layout=spatial(32), init=1.0), s, offset=[w, 0:])
            Synchronize()
            StoreGlobal(LoadShared(s, layout=spatial(32), offset=[w, 0:]), gy, offset=[w, 0:])
)");
  Expected<PtxKernel> k = compileFor(m, 80);
  REQUIRE_OK(k);
  INFO(k->ptx);
  CHECK(contains(k->ptx, "bar.warp.sync"));
  CHECK(!std::regex_search(k->ptx, std::regex(R"(barrier\.sync(\.aligned)?\s+%r)")));
}

TEST_CASE("thread groups: one group of the whole block is the block") {
  // Synchronize() is the block's barrier 0 (no named barrier 1): the threads read what others
  // wrote (row-major written, column-major read)
  VerifiedModule m = buildSource(R"(
def k<1>(f32* y_ptr) threads=64:
    gy = ViewGlobal(y_ptr, shape=[2, 32])
    s = AllocateShared(f32, shape=[2, 32])
    parallel:
        group(64):
            StoreShared(Iota(layout=spatial(2, 32), dim=1, dtype=f32), s)
            Synchronize()
            StoreGlobal(LoadShared(s, layout=column_spatial(2, 32)), gy)
)");
  Expected<PtxKernel> k = compileFor(m, 80);
  REQUIRE_OK(k);
  INFO(k->ptx);
  CHECK(!std::regex_search(k->ptx, std::regex(R"(barrier\.sync(\.aligned)?\s+1,)")));
  CHECK(occurrences(k->ptx, "bar.sync \t0;") == 3); // before, inside and after the group
}

TEST_CASE("thread groups: ptxas accepts the sm_90a kernel" * needsPtxas()) {
  VerifiedModule m = buildSource(kGroupsSource);
  Expected<PtxKernel> k = compileFor(m, 90);
  REQUIRE_OK(k);
  checkPtxasAccepts(k->ptx, 90);
}

TEST_CASE("thread groups without regs= compile for sm_80; with it they are refused") {
  const char *plain = R"(
def k<1>(f32* x_ptr) threads=64:
    gx = ViewGlobal(x_ptr, shape=[64])
    parallel:
        group(32):
            v = LoadGlobal(gx, layout=spatial(32), offset=[0:])
            Synchronize()
            StoreGlobal(Add(v, v), gx, offset=[0:])
        group(32):
            w = LoadGlobal(gx, layout=spatial(32), offset=[32:])
            StoreGlobal(Add(w, w), gx, offset=[32:])
)";
  VerifiedModule p = buildSource(plain);
  Expected<PtxKernel> k = compileFor(p, 80);
  REQUIRE_OK(k);
  CHECK(!contains(k->ptx, "setmaxnreg"));
  CHECK(!contains(k->ptx, ".maxnreg"));
  // group 0's barrier: named barrier 1 of its 32 threads
  CHECK(std::regex_search(k->ptx, std::regex(R"(barrier\.sync(\.aligned)?\s+1,\s*32;)")));
  VerifiedModule m = buildSource(R"(
def k<1>() threads=256:
    parallel:
        group(128, regs=40):
            pass
        group(128):
            pass
)");
  Expected<PtxKernel> refused = compileFor(m, 80);
  REQUIRE(!refused.ok());
  CHECK(refused.status().code() == ErrorCode::Unsupported);
  INFO(refused.status().toString());
  CHECK(contains(refused.status().toString(), "group(regs=) needs sm_90a"));
  CHECK(refused.status().first().location.line == 3);
}
