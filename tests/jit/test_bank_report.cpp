// The bank-conflict report of plain shared accesses (jit/bank_report.h): the wavefront count of
// one warp instruction against hand-computed cases, and the reports of a small program whose
// shared loads and stores follow the decode attention's key rows (a quarter-warp on rows r and
// r + 4 of 64 bytes), row-major and swizzled.
#include "jit/bank_report.h"
#include "jit_test_util.h"

#include <cstring>

namespace {

using namespace tilus;

std::vector<int64_t> lanes(int64_t n, const std::function<int64_t(int64_t)> &address) {
  std::vector<int64_t> a;
  for (int64_t i = 0; i < n; ++i)
    a.push_back(address(i));
  return a;
}

} // namespace

TEST_CASE("shared wavefronts of one warp instruction, by hand") {
  int64_t ideal = 0;
  // 32 consecutive words: one wavefront
  CHECK(jit::sharedWavefronts(lanes(32, [](int64_t i) { return 4 * i; }), 4, &ideal) == 1);
  CHECK(ideal == 1);
  // 32 words 128 bytes apart: all in bank 0, 32 wavefronts where one would do
  CHECK(jit::sharedWavefronts(lanes(32, [](int64_t i) { return 128 * i; }), 4, &ideal) == 32);
  CHECK(ideal == 1);
  // every lane the same word: one wavefront (a broadcast)
  CHECK(jit::sharedWavefronts(lanes(32, [](int64_t) { return 64; }), 4, &ideal) == 1);
  CHECK(ideal == 1);
  // 16 bytes per lane over 512 contiguous bytes: four quarter-warps, one wavefront each
  CHECK(jit::sharedWavefronts(lanes(32, [](int64_t i) { return 16 * i; }), 16, &ideal) == 4);
  CHECK(ideal == 4);
  // 16 bytes per lane, a quarter-warp on rows r and r + 4 of 64 bytes (lane 8 a + 4 c + t at
  // row 4 c + a, bytes 16 t): both rows on the same 16 banks, two wavefronts per quarter-warp
  auto rows = [](int64_t i) { return (4 * ((i / 4) % 2) + i / 8) * 64 + 16 * (i % 4); };
  CHECK(jit::sharedWavefronts(lanes(32, rows), 16, &ideal) == 8);
  CHECK(ideal == 4);
  // 8 bytes per lane: half-warps; 64 contiguous words then 2 wavefronts
  CHECK(jit::sharedWavefronts(lanes(32, [](int64_t i) { return 8 * i; }), 8, &ideal) == 2);
  CHECK(ideal == 2);
  // 2 bytes per lane: the whole warp in one phase; lanes 2 i and 2 i + 1 share a word
  CHECK(jit::sharedWavefronts(lanes(32, [](int64_t i) { return 2 * i; }), 2, &ideal) == 1);
  CHECK(ideal == 1);
  // absent lanes (negative addresses) take no part: 16 lanes 128 bytes apart, 16 wavefronts
  CHECK(jit::sharedWavefronts(lanes(32, [](int64_t i) { return i % 2 ? -1 : 64 * i; }), 4,
                              &ideal) == 16);
  CHECK(ideal == 1);
}

TEST_CASE("bank report of a program: rows r and r + 4 of 64 bytes, row-major and swizzled") {
  const char *source = R"(
def banks<1>(u32* p) threads=32:
    s = AllocateShared(u32, shape=[2, 4, 16]LAYOUT)
    StoreShared(AllocateRegister(u32, layout=spatial(1, 4, 1).spatial(2, 1, 1).spatial(1, 1, 4).local(1, 1, 4)), s)
    Synchronize()
    x = LoadShared(s, layout=spatial(1, 4, 1).spatial(2, 1, 1).spatial(1, 1, 4).local(1, 1, 4))
    StoreGlobal(x, ViewGlobal(p, shape=[2, 4, 16]))
)";
  for (bool swizzled : {false, true}) {
    CAPTURE(swizzled);
    std::string text = source;
    text.replace(text.find("LAYOUT"), std::strlen("LAYOUT"),
                 swizzled ? ", layout=swizzle(row_major(2, 4, 16), 2, 3, 2)" : "");
    VerifiedModule m = testing::buildSource(text);
    JitOptions options;
    options.reportSharedAccesses = true;
    Expected<PtxKernel> k = compileToPtx(m, 0, options);
    REQUIRE_OK(k);
    REQUIRE(k->sharedAccesses.size() == 2);
    const SharedAccessReport &store = k->sharedAccesses[0], &load = k->sharedAccesses[1];
    CHECK(std::string(store.opcode) == "StoreShared");
    CHECK(std::string(load.opcode) == "LoadShared");
    CHECK(store.instruction < load.instruction);
    for (const SharedAccessReport *r : {&store, &load}) {
      // one 16-byte access per lane: 512 bytes, four wavefronts without conflicts; the
      // row-major rows r and r + 4 share their banks (two per quarter-warp), the swizzle (the
      // upper two bits of a 16-byte chunk's place in its 128-byte line XORed with the low two
      // bits of the line) separates them
      CHECK(r->accesses == 1);
      CHECK(r->bytes == 16);
      CHECK(r->ideal == 4);
      CHECK(r->wavefronts == (swizzled ? 4 : 8));
    }
  }
  // without the option the kernel reports nothing and its code is the same
  std::string plain = source;
  plain.replace(plain.find("LAYOUT"), std::strlen("LAYOUT"), "");
  VerifiedModule m = testing::buildSource(plain);
  JitOptions with;
  with.reportSharedAccesses = true;
  Expected<PtxKernel> a = compileToPtx(m, 0, with), b = compileToPtx(m, 0, JitOptions{});
  REQUIRE_OK(a);
  REQUIRE_OK(b);
  CHECK(b->sharedAccesses.empty());
  CHECK(a->ptx == b->ptx);
}
