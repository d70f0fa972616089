// programs/attention/ on the CPU interpreter against plain C++ references of their contracts:
// decode_paged.tasm (paged KV cache in f16, bf16, f8e4m3 and 4- to 8-bit integer and float
// types with per-tensor scales; sequence lengths of 1 and ragged ones; GQA ratios 1 and 8;
// shuffled block tables; the sequence split over blocks, SPLITS, with empty splits, and
// none). Cache codes are decoded
// here by the textbook formulas of ISA section 2, independently of isa/convert.
#include "vm_cpu/cpu_test_util.h"

#include <algorithm>
#include <numeric>
#include <random>

using namespace cputest;

namespace {

struct CacheType {
  std::string name;
  bool isFloat;
  bool isSigned;
  int e, m; // floats
  int bits;
};

CacheType intType(const std::string &name, bool isSigned, int bits) {
  return {name, false, isSigned, 0, 0, bits};
}
CacheType floatType(const std::string &name, int e, int m) {
  return {name, true, true, e, m, 1 + e + m};
}

/// The value of a code, or NaN for a code that encodes NaN or infinity.
double decodeCode(const CacheType &t, uint32_t code) {
  if (t.name == "f16")
    return halfToDouble(uint16_t(code));
  if (t.name == "bf16")
    return bf16ToDouble(uint16_t(code));
  if (!t.isFloat) {
    if (t.isSigned && (code >> (t.bits - 1)) & 1u)
      return double(int64_t(code) - (int64_t(1) << t.bits));
    return double(code);
  }
  int sign = (code >> (t.e + t.m)) & 1;
  int exp = int((code >> t.m) & ((1u << t.e) - 1));
  int man = int(code & ((1u << t.m) - 1));
  int bias = (1 << (t.e - 1)) - 1;
  if (t.name == "f8e4m3" && exp == 15 && man == 7)
    return NAN;
  if (t.name == "f8e5m2" && exp == 31)
    return NAN;
  double v =
      exp == 0 ? std::ldexp(man, 1 - bias - t.m) : std::ldexp((1 << t.m) + man, exp - bias - t.m);
  return sign ? -v : v;
}

/// A random finite code of `t` of moderate magnitude (|value| <= 4 for 16-bit floats).
uint32_t randomCode(const CacheType &t, std::mt19937 &rng) {
  if (t.name == "f16" || t.name == "bf16") {
    std::uniform_real_distribution<double> d(-2, 2);
    return t.name == "f16" ? doubleToHalf(d(rng)) : doubleToBf16(d(rng));
  }
  for (;;) {
    uint32_t code = uint32_t(rng()) & ((1u << t.bits) - 1);
    double v = decodeCode(t, code);
    if (std::isfinite(v) && std::fabs(v) <= 64)
      return code;
  }
}

void putCode(std::vector<uint8_t> &bytes, int64_t k, int bits, uint32_t code) {
  if (bits == 16) {
    bytes[size_t(2 * k)] = uint8_t(code);
    bytes[size_t(2 * k + 1)] = uint8_t(code >> 8);
    return;
  }
  putPacked(bytes, k, bits, code);
}

struct DecodeShape {
  int batch, heads, kvHeads, numPages, maxPages;
  std::vector<int32_t> seqLens;
};

/// Runs decode `launches` times (o reset to NaN before each; the launches before the last with q
/// negated) and checks o of the last launch against the reference. q is drawn from [qLow, 1]; the
/// scores are scaled by `scale` (0: 1 / sqrt(hd)).
void checkDecode(bool bf16, const CacheType &kt, int hd, int page, const DecodeShape &sh,
                 uint32_t seed, const std::map<std::string, std::string> &tuning = {},
                 int launches = 1, float scale = 0, double qLow = -1) {
  CAPTURE(kt.name);
  CAPTURE(bf16);
  CAPTURE(hd);
  CAPTURE(page);
  CAPTURE(sh.heads);
  CAPTURE(sh.kvHeads);
  std::map<std::string, std::string> defines = {{"AT", bf16 ? "bf16" : "f16"},
                                                {"KT", kt.name},
                                                {"HD", std::to_string(hd)},
                                                {"PAGE", std::to_string(page)}};
  defines.insert(tuning.begin(), tuning.end());
  CAPTURE(tuning.size());
  VerifiedModule mod =
      build(readSource("programs/attention/decode_paged.tasm"), defines, "decode_paged.tasm");
  std::mt19937 rng(seed);
  const int B = sh.batch, H = sh.heads, KV = sh.kvHeads, G = H / KV;
  // q in AT
  std::vector<uint16_t> q(static_cast<size_t>(B * H * hd));
  std::uniform_real_distribution<double> qd(qLow, 1);
  for (uint16_t &x : q)
    x = bf16 ? doubleToBf16(qd(rng)) : doubleToHalf(qd(rng));
  // caches: codes, bit-packed
  int64_t elems = int64_t(sh.numPages) * page * KV * hd;
  std::vector<uint8_t> kc(size_t((elems * kt.bits + 7) / 8)), vc(kc.size());
  std::vector<double> kval(static_cast<size_t>(elems)), vval(static_cast<size_t>(elems));
  for (int64_t e = 0; e < elems; ++e) {
    uint32_t a = randomCode(kt, rng), b = randomCode(kt, rng);
    putCode(kc, e, kt.bits, a);
    putCode(vc, e, kt.bits, b);
    kval[size_t(e)] = decodeCode(kt, a);
    vval[size_t(e)] = decodeCode(kt, b);
  }
  // block table: a shuffled assignment of distinct pages; unused entries hold junk
  std::vector<int32_t> perm(static_cast<size_t>(sh.numPages));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> table(size_t(B * sh.maxPages), 1 << 20);
  size_t next = 0;
  for (int b = 0; b < B; ++b) {
    int pages = (sh.seqLens[size_t(b)] + page - 1) / page;
    for (int j = 0; j < pages; ++j)
      table[size_t(b * sh.maxPages + j)] = perm[next++ % perm.size()];
  }
  std::vector<int32_t> lens = sh.seqLens;
  std::vector<uint16_t> o;
  if (scale == 0)
    scale = float(1.0 / std::sqrt(double(hd)));
  const bool narrow = kt.bits <= 8;
  // unit roundoff of the type of the softmax weights in the P V product
  const double pUnit = kt.name == "bf16" ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11);
  // a 16-bit cache of the other type than AT takes q rounded to its own type
  const bool qToCache = !narrow && kt.name != std::string(bf16 ? "bf16" : "f16");
  const float kScale = narrow ? 0.0625f : 1.0f, vScale = narrow ? 0.125f : 1.0f;
  // the launches before the last one take -q, so that a last launch that read their partials
  // from the workspace (instead of its own) would fail the check
  std::vector<uint16_t> negated(q);
  for (uint16_t &x : negated)
    x ^= 0x8000;
  for (int launch = 0; launch < launches; ++launch) {
    CAPTURE(launch);
    o.assign(size_t(B * H * hd), 0x7e00);
    std::vector<uint16_t> &qNow = launch + 1 < launches ? negated : q;
    REQUIRE_OK(
        run(mod, {bufferArg(qNow), bufferArg(kc), bufferArg(vc), bufferArg(table), bufferArg(lens),
                  bufferArg(o), i32Arg(B), i32Arg(H), i32Arg(KV), i32Arg(sh.numPages),
                  i32Arg(sh.maxPages), f32Arg(scale), f32Arg(kScale), f32Arg(vScale)}));
  }
  auto at = [&](uint16_t x) { return bf16 ? bf16ToDouble(x) : halfToDouble(x); };
  auto qValue = [&](uint16_t x) {
    double v = at(x);
    if (!qToCache)
      return v;
    return bf16 ? halfToDouble(doubleToHalf(v)) : bf16ToDouble(doubleToBf16(v));
  };
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      int kvh = h / G, n = lens[size_t(b)];
      std::vector<double> s(static_cast<size_t>(n));
      double mx = -INFINITY;
      for (int j = 0; j < n; ++j) {
        int pg = table[size_t(b * sh.maxPages + j / page)];
        int64_t base = ((int64_t(pg) * page + j % page) * KV + kvh) * hd;
        double dot = 0;
        for (int d = 0; d < hd; ++d)
          dot += qValue(q[size_t((b * H + h) * hd + d)]) * kval[size_t(base + d)] * kScale;
        s[size_t(j)] = dot * scale;
        mx = std::max(mx, s[size_t(j)]);
      }
      double l = 0;
      std::vector<double> out(size_t(hd), 0.0), absOut(size_t(hd), 0.0);
      for (int j = 0; j < n; ++j) {
        double p = std::exp(s[size_t(j)] - mx);
        l += p;
        int pg = table[size_t(b * sh.maxPages + j / page)];
        int64_t base = ((int64_t(pg) * page + j % page) * KV + kvh) * hd;
        for (int d = 0; d < hd; ++d) {
          out[size_t(d)] += p * vval[size_t(base + d)] * vScale;
          absOut[size_t(d)] += p * std::fabs(vval[size_t(base + d)] * vScale);
        }
      }
      double vmax = 0;
      for (int64_t e = 0; e < elems; ++e)
        vmax = std::max(vmax, std::fabs(vval[size_t(e)] * vScale));
      for (int d = 0; d < hd; ++d) {
        double want = out[size_t(d)] / l, got = at(o[size_t((b * H + h) * hd + d)]);
        CAPTURE(b);
        CAPTURE(h);
        CAPTURE(d);
        // the contract rounds each weight p_j to PT (f16 for caches of at most 8 bits, else
        // AT) before its product with v_j: at most a relative unit roundoff of each term
        CHECK(std::fabs(got - want) <= (bf16 ? 8e-3 : 1e-3) * (std::fabs(want) + 1e-2 * vmax) +
                                           pUnit * absOut[size_t(d)] / l);
      }
    }
}

} // namespace

TEST_CASE("decode_paged.tasm: f16 cache, GQA 8 and 1, seq_lens of 1 and ragged, shuffled pages") {
  CacheType f16{"f16", true, true, 5, 10, 16};
  checkDecode(false, f16, 64, 16, {2, 8, 1, 12, 6, {1, 77}}, 1);     // ratio 8
  checkDecode(false, f16, 64, 16, {3, 2, 2, 12, 5, {33, 1, 64}}, 2); // ratio 1
  checkDecode(true, CacheType{"bf16", true, true, 8, 7, 16}, 128, 16, {2, 16, 2, 10, 5, {70, 5}},
              3);
  // 16-bit caches of the other type: q rounded to the cache's type
  checkDecode(true, f16, 64, 16, {2, 8, 2, 10, 5, {70, 5}}, 24);
  checkDecode(false, CacheType{"bf16", true, true, 8, 7, 16}, 64, 16, {2, 8, 1, 10, 5, {33, 80}},
              25);
}

TEST_CASE("decode_paged.tasm: f8e4m3 and 4- to 8-bit integer and float caches with scales") {
  const DecodeShape sh{2, 8, 1, 10, 5, {45, 1}};
  checkDecode(false, floatType("f8e4m3", 4, 3), 64, 16, sh, 4);
  checkDecode(false, intType("u4", false, 4), 64, 16, sh, 5);
  checkDecode(false, intType("i8", true, 8), 64, 16, sh, 6);
  checkDecode(false, floatType("f4e2m1", 2, 1), 64, 16, sh, 7);
  checkDecode(false, floatType("f6e3m2", 3, 2), 128, 16, sh, 8);
  checkDecode(true, intType("i5", true, 5), 64, 8, {2, 4, 4, 14, 7, {50, 3}}, 9);
  // rows of 80 and 112 bytes (5- and 7-bit codes at HD 128) move as 16-bit units
  checkDecode(false, intType("i7", true, 7), 128, 16, {2, 8, 1, 10, 5, {45, 1}}, 30);
  checkDecode(false, floatType("f5e2m2", 2, 2), 128, 16, {2, 8, 1, 10, 5, {33, 70}}, 31);
}

TEST_CASE("decode_paged.tasm: tuning constants, pages larger and smaller than a stage, "
          "groups of more than 16 heads") {
  // KS 32: two pages of 16 per stage, two k16 tiles of the P V mma; a two-stage pipeline
  checkDecode(false, intType("u8", false, 8), 64, 16, {2, 8, 1, 10, 5, {61, 16}}, 10,
              {{"KS", "32"}, {"STAGES", "2"}});
  // PAGE 32, KS 16: each stage copies half a page
  checkDecode(false, floatType("f8e4m3", 4, 3), 128, 32, {1, 4, 2, 6, 3, {90}}, 11,
              {{"STAGES", "4"}});
  // PAGE 8, KS 32 (the default for 4-bit caches): four pages per stage
  checkDecode(true, intType("u4", false, 4), 64, 8, {2, 8, 2, 30, 12, {1, 93}}, 18);
  // KS 16 and four stages for a 4-bit cache (the default of 6-bit integer, 7-bit and FP8
  // caches)
  checkDecode(false, intType("i4", true, 4), 128, 16, {2, 8, 2, 10, 5, {45, 1}}, 28,
              {{"KS", "16"}, {"STAGES", "4"}});
  // PAGE 48 under a 4-bit cache: 32 would not meet the page, so stages of 16 keys (a third of a
  // page each)
  checkDecode(false, intType("u4", false, 4), 64, 48, {2, 8, 1, 4, 3, {100, 7}}, 29);
  // groups of 32 and 24 query heads per kv head: two row tiles of 16 per kv head (the second
  // of the 24 has 8 rows)
  CacheType f16{"f16", true, true, 5, 10, 16};
  checkDecode(false, f16, 64, 16, {2, 32, 1, 10, 5, {50, 7}}, 19);
  checkDecode(false, intType("i4", true, 4), 128, 16, {1, 48, 2, 6, 6, {70}}, 20);
  // the stages of 128-byte rows (8-bit codes at HD 128) under a nest of two swizzles (the
  // default) and row-major (SWZ8 = 0); f8e4m3 in stages of 16 keys, i8 in stages of 32 (two
  // pages of 16)
  checkDecode(false, floatType("f8e4m3", 4, 3), 128, 16, {2, 8, 2, 10, 5, {45, 17}}, 30);
  checkDecode(true, intType("i8", true, 8), 128, 16, {2, 8, 1, 10, 5, {61, 1}}, 31);
  checkDecode(false, floatType("f8e4m3", 4, 3), 128, 16, {2, 8, 2, 10, 5, {45, 17}}, 32,
              {{"SWZ8", "0"}});
  // u4 at HD 128 (four 16-bit halves per lane and V row as subnormals), ragged, and with the
  // JIT's Cast and the per-stage mask (SUBV = 0, MASKB = 0)
  checkDecode(false, intType("u4", false, 4), 128, 16, {2, 8, 2, 10, 5, {77, 3}}, 33);
  checkDecode(false, intType("u4", false, 4), 128, 16, {2, 8, 2, 10, 5, {77, 3}}, 34,
              {{"SUBV", "0"}, {"MASKB", "0"}});
  // an occupancy request and two splits per combination step (a hint: the same results)
  checkDecode(false, intType("u4", false, 4), 128, 16, {2, 8, 2, 10, 5, {77, 3}}, 35,
              {{"OCC", "12"}, {"CQ", "2"}, {"SPLITS", "4"}});
  // four stage buffers for three stages in flight
  checkDecode(false, intType("u4", false, 4), 64, 16, {2, 8, 1, 10, 5, {77, 3}}, 36,
              {{"RING", "4"}});
  // the stages by cp.async (TMA = 0) in the key order that keeps their loads free of bank
  // conflicts: each block's own rows; and the kv head pair's rows copied together (PAIRKV, the
  // default for u4 at HD 128 from PAIRMIN stages per block without TMA): three kv heads, so the
  // last pair's second head lies outside the cache (zeros). One block per sequence (SPLITS 1)
  // and PAIRMIN 2: the 3 stages of seq 77 copy the pairs, the 1 stage of seq 3 its own rows;
  // PAIRMIN 0: every block copies the pairs
  checkDecode(false, intType("u4", false, 4), 128, 16, {2, 8, 2, 10, 5, {77, 3}}, 39,
              {{"TMA", "0"}});
  checkDecode(false, intType("u4", false, 4), 128, 16, {2, 6, 3, 10, 5, {77, 3}}, 37,
              {{"TMA", "0"}, {"SPLITS", "1"}, {"PAIRMIN", "2"}});
  checkDecode(false, intType("u4", false, 4), 128, 16, {2, 4, 2, 10, 5, {70, 33}}, 38,
              {{"TMA", "0"}, {"PAIRMIN", "0"}});
  // a page of 48 slots in three copies of 16 (the tensor map's merged coordinate of the part,
  // times 16) and a stage of 32 keys over four pages of 8, by the tensor memory accelerator
  checkDecode(false, intType("i4", true, 4), 128, 48, {2, 8, 2, 10, 5, {100, 7}}, 40);
  checkDecode(false, floatType("f4e2m1", 2, 1), 128, 8, {2, 8, 2, 24, 10, {45, 77}}, 41);
}

TEST_CASE("decode_paged.tasm: the default tuning assembles for every cache type, page and head "
          "dimension") {
  // the defaults depend on KT, PAGE and HD (stages of 32 keys only where 32 meets the page and
  // HD <= 128; 16-bit units for rows of 5- and 7-bit codes; two splits per combine step above
  // HD 128): every combination must still meet the program's assertions and the checker
  const std::string source = readSource("programs/attention/decode_paged.tasm");
  for (const char *kt : {"u4", "i4", "f4e2m1", "i5", "u5", "f5e2m2", "u6", "i6", "f6e3m2", "f6e2m3",
                         "i7", "u7", "f7e3m3", "u8", "i8", "f8e4m3", "f8e5m2", "f16", "bf16"})
    for (int page : {8, 16, 32, 48, 64})
      for (int hd : {64, 128, 256}) {
        CAPTURE(kt);
        CAPTURE(page);
        CAPTURE(hd);
        build(source, {{"KT", kt}, {"PAGE", std::to_string(page)}, {"HD", std::to_string(hd)}},
              "decode_paged.tasm");
      }
}

TEST_CASE("decode_paged.tasm: the default tuning per cache type, page and head dimension") {
  // a constant of decode_paged.tasm under the given -D values
  const std::string source = readSource("programs/attention/decode_paged.tasm");
  auto constant = [&source](std::map<std::string, std::string> defines, const char *expr) {
    return programConstant(source, std::move(defines), expr, "decode_paged.tasm");
  };
  // stages of 32 keys in three pipeline stages for 4- and 5-bit caches, 6-bit floats and 8-bit
  // integers at HD <= 128 where 32 meets the page (two for the 4-bit caches, whose stages come
  // by the tensor memory accelerator); 16 keys in four stages (three for 16-bit caches and for
  // 8-bit floats at HD <= 128) otherwise
  for (const char *kt :
       {"u4", "i4", "f4e2m1", "i5", "u5", "f5e2m2", "f5e3m1", "f6e3m2", "f6e2m3", "u8", "i8"}) {
    CAPTURE(kt);
    CHECK(constant({{"KT", kt}}, "KS") == 32);
    const bool fourBit =
        std::string(kt) == "u4" || std::string(kt) == "i4" || std::string(kt) == "f4e2m1";
    CHECK(constant({{"KT", kt}}, "STAGES") == (fourBit ? 2 : 3));
    CHECK(constant({{"KT", kt}, {"TMA", "0"}}, "STAGES") == 3);
    CHECK(constant({{"KT", kt}, {"HD", "64"}}, "KS") == 32);
    CHECK(constant({{"KT", kt}, {"PAGE", "8"}}, "KS") == 32);
    CHECK(constant({{"KT", kt}, {"PAGE", "64"}}, "KS") == 32);
    CHECK(constant({{"KT", kt}, {"PAGE", "48"}}, "KS") == 16);
    CHECK(constant({{"KT", kt}, {"HD", "256"}}, "KS") == 16);
  }
  for (const char *kt : {"u6", "i6", "u7", "i7", "f7e3m3"}) {
    CAPTURE(kt);
    CHECK(constant({{"KT", kt}}, "KS") == 16);
    CHECK(constant({{"KT", kt}}, "STAGES") == 4);
  }
  for (const char *kt : {"f8e4m3", "f8e5m2"}) {
    CAPTURE(kt);
    CHECK(constant({{"KT", kt}}, "KS") == 16);
    CHECK(constant({{"KT", kt}}, "STAGES") == 3);
    CHECK(constant({{"KT", kt}, {"HD", "256"}}, "STAGES") == 4);
  }
  CHECK(constant({{"KT", "f16"}}, "KS") == 16);
  CHECK(constant({{"KT", "bf16"}}, "STAGES") == 3);
  // the unit of a row: 32-bit words, else 16-bit (rows of 80 and 112 bytes), else bytes
  CHECK(constant({{"KT", "u4"}}, "bits(WB)") == 32);
  CHECK(constant({{"KT", "i5"}}, "bits(WB)") == 16);
  CHECK(constant({{"KT", "i7"}}, "bits(WB)") == 16);
  CHECK(constant({{"KT", "i5"}, {"HD", "64"}}, "bits(WB)") == 8);
  CHECK(constant({{"KT", "i5"}, {"HD", "256"}}, "bits(WB)") == 32);
  // keys read in place (PW = 2) for every 4-bit cache whose lanes hold whole words of codes
  CHECK(constant({{"KT", "u4"}}, "PW") == 2);
  CHECK(constant({{"KT", "f4e2m1"}}, "PW") == 2);
  CHECK(constant({{"KT", "u8"}}, "PW") == 1);
  CHECK(constant({{"KT", "u4"}, {"HD", "80"}}, "PW") == 1);
  // block partials combined per step by the last block of a pair: four, two above HD 128
  CHECK(constant({{"KT", "u4"}}, "CQ") == 2);
  CHECK(constant({{"KT", "u4"}, {"TMA", "0"}}, "CQ") == 4);
  CHECK(constant({{"KT", "u5"}}, "CQ") == 4);
  CHECK(constant({{"KT", "u4"}, {"HD", "64"}}, "STAGES") == 2);
  CHECK(constant({{"KT", "u4"}, {"HD", "256"}}, "STAGES") == 4);
  CHECK(constant({{"KT", "u4"}, {"PAGE", "48"}}, "STAGES") == 4);
  CHECK(constant({{"KT", "u4"}, {"HD", "256"}}, "CQ") == 2);
  // warps per block: eight for 8-bit float caches where their stages and planned scratch fit in
  // 224 KiB, else one
  CHECK(constant({{"KT", "f8e4m3"}}, "WARPS") == 8);
  CHECK(constant({{"KT", "f8e5m2"}, {"HD", "64"}}, "WARPS") == 8);
  CHECK(constant({{"KT", "f8e4m3"}, {"HD", "256"}}, "WARPS") == 1);
  CHECK(constant({{"KT", "u4"}, {"HD", "64"}}, "WARPS") == 1);
  CHECK(constant({{"KT", "i4"}}, "WARPS") == 1);
  CHECK(constant({{"KT", "u8"}}, "WARPS") == 1);
  CHECK(constant({{"KT", "f16"}}, "WARPS") == 1);
  // a warp's partial o^T in its first K stages where they hold it exactly, else a buffer
  CHECK(constant({{"KT", "f8e4m3"}}, "NPS") == 2);
  CHECK(constant({{"KT", "f16"}}, "NPS") == 1);
  CHECK(constant({{"KT", "u4"}}, "NPS") == 2);
  CHECK(constant({{"KT", "u4"}, {"TMA", "0"}}, "NPS") == 1);
  CHECK(constant({{"KT", "u4"}}, "PO") == 0);
  CHECK(constant({{"KT", "i5"}}, "PO") == 1);
  CHECK(constant({{"KT", "u6"}}, "PO") == 1);
  // the stages swizzled where rows are 16 words (64 bytes): 4-bit codes at HD 128, 8-bit at 64
  CHECK(constant({{"KT", "u4"}}, "SWZ") == 2);
  CHECK(constant({{"KT", "f4e2m1"}}, "SWZ") == 2);
  CHECK(constant({{"KT", "i8"}, {"HD", "64"}}, "SWZ") == 2);
  CHECK(constant({{"KT", "u4"}, {"HD", "64"}}, "SWZ") == 0);
  CHECK(constant({{"KT", "f16"}}, "SWZ") == 0);
  CHECK(constant({{"KT", "i6"}}, "SWZ") == 0);
  // 128-byte rows (8-bit codes at HD 128): the nest of two swizzles, row-major with SWZ8 = 0
  CHECK(constant({{"KT", "f8e4m3"}}, "SWZ") == 2);
  CHECK(constant({{"KT", "f8e4m3"}}, "SWZI") == 1);
  CHECK(constant({{"KT", "u8"}}, "SWZI") == 1);
  CHECK(constant({{"KT", "f8e4m3"}, {"SWZ8", "0"}}, "SWZ") == 0);
  CHECK(constant({{"KT", "f8e4m3"}, {"SWZ8", "0"}}, "SWZI") == 0);
  CHECK(constant({{"KT", "u4"}}, "SWZI") == 0);
  CHECK(constant({{"KT", "f16"}}, "SWZI") == 0);
  // u4 values as f16 subnormals where a lane's part of a V row is whole words; the scores
  // masked in a branch for caches of at most 8 bits
  CHECK(constant({{"KT", "u4"}}, "SUBV") == 1);
  CHECK(constant({{"KT", "u4"}, {"AT", "bf16"}, {"HD", "64"}}, "SUBV") == 1);
  CHECK(constant({{"KT", "i4"}}, "SUBV") == 0);
  CHECK(constant({{"KT", "u8"}}, "SUBV") == 0);
  CHECK(constant({{"KT", "u4"}, {"HD", "32"}}, "SUBV") == 0);
  // 4-bit caches whose rows are whole words: the stages by the tensor memory accelerator, swizzled
  // as it writes them (by rows of 32, 64 or 128 bytes), the keys in their natural order
  for (const char *kt : {"u4", "i4", "f4e2m1"}) {
    CAPTURE(kt);
    CHECK(constant({{"KT", kt}}, "TMA") == 1);
    CHECK(constant({{"KT", kt}}, "TSW") == 2);
    CHECK(constant({{"KT", kt}}, "SD") == 2);
    CHECK(constant({{"KT", kt}}, "SE") == 2);
    CHECK(constant({{"KT", kt}}, "SF") == 3);
    CHECK(constant({{"KT", kt}}, "SA") == 0);
    CHECK(constant({{"KT", kt}}, "PIA") == 1);
    CHECK(constant({{"KT", kt}}, "PIB") == 2);
  }
  CHECK(constant({{"KT", "u4"}, {"HD", "64"}}, "TSW") == 1);
  CHECK(constant({{"KT", "u4"}, {"HD", "256"}}, "TSW") == 3);
  CHECK(constant({{"KT", "u4"}, {"HD", "32"}}, "TMA") == 0);
  CHECK(constant({{"KT", "u4"}, {"TMA", "0"}}, "PIA") == 4);
  CHECK(constant({{"KT", "u4"}, {"TMA", "0"}}, "PIB") == 1);
  for (const char *kt : {"u5", "i8", "f8e4m3", "f16", "bf16"}) {
    CAPTURE(kt);
    CHECK(constant({{"KT", kt}}, "TMA") == 0);
  }
  // without them (TMA = 0), the kv head pair's rows in one copy for u4 rows of 64 bytes (HD
  // 128), from 256 stages
  CHECK(constant({{"KT", "u4"}}, "PAIRKV") == 0);
  CHECK(constant({{"KT", "u4"}, {"TMA", "0"}}, "PAIRKV") == 1);
  CHECK(constant({{"KT", "u4"}}, "PAIRMIN") == 256);
  CHECK(constant({{"KT", "u4"}, {"HD", "64"}, {"TMA", "0"}}, "PAIRKV") == 0);
  CHECK(constant({{"KT", "u4"}, {"HD", "256"}, {"TMA", "0"}}, "PAIRKV") == 0);
  CHECK(constant({{"KT", "u4"}, {"SUBV", "0"}, {"TMA", "0"}}, "PAIRKV") == 0);
  CHECK(constant({{"KT", "i4"}, {"TMA", "0"}}, "PAIRKV") == 0);
  CHECK(constant({{"KT", "f8e4m3"}}, "PAIRKV") == 0);
  CHECK(constant({{"KT", "u4"}}, "MASKB") == 1);
  CHECK(constant({{"KT", "f8e4m3"}}, "MASKB") == 1);
  CHECK(constant({{"KT", "f16"}}, "MASKB") == 0);
  CHECK(constant({{"KT", "bf16"}}, "MASKB") == 0);
}

TEST_CASE("decode_paged.tasm: the sequence split over blocks (SPLITS), empty splits, no split") {
  // Every run is in checked mode: the partials' AtomicStore and AtomicLoad, the fences and the
  // ticket race with nothing, the requires_clean tickets are zero again after each launch, and a
  // second launch on other inputs reads only its own partials (the first's are still there).
  CacheType f16{"f16", true, true, 5, 10, 16};
  // KS 32 (two pages per stage); max_pages 20 gives min(SPLITS, 10) blocks per (b, y). SPLITS 3:
  // the 10 stages of seq 300 split 4 + 4 + 2; seq 1 has one stage, two empty splits; seq 40
  // (2 stages: fewer than SPLITS) one empty; each launched twice
  checkDecode(false, f16, 64, 16, {3, 8, 1, 60, 20, {300, 1, 40}}, 12,
              {{"SPLITS", "3"}, {"KS", "32"}}, 2);
  // SPLITS 32 capped at cdiv(max_pages * PAGE, KS) = 20 splits; groups of 8 (one row tile)
  checkDecode(false, intType("u4", false, 4), 64, 16, {2, 16, 2, 40, 20, {17, 301}}, 13,
              {{"SPLITS", "32"}}, 2);
  // HD 128: 7 splits of one or more stages each, sequences of 1, 16 and 100 keys
  checkDecode(true, floatType("f8e4m3", 4, 3), 128, 16, {3, 4, 1, 24, 8, {1, 16, 100}}, 14,
              {{"SPLITS", "7"}}, 2);
  // max_pages of one stage: a single split (no workspace traffic) under SPLITS > 1
  checkDecode(false, f16, 64, 16, {2, 2, 2, 4, 1, {16, 9}}, 15, {{"SPLITS", "4"}});
  // BLOCKS 4 with 3 x 1 (b, y) pairs: max(1, 4 / 3) = 1 split under SPLITS > 1
  checkDecode(false, f16, 64, 16, {3, 8, 1, 60, 20, {300, 1, 40}}, 21, {{"BLOCKS", "4"}}, 2);
  // SPLITS 4 reached (ns = SPLITS): every slot of the workspace in use
  checkDecode(false, f16, 64, 16, {2, 8, 1, 40, 20, {300, 17}}, 23, {{"SPLITS", "4"}}, 2);
  // two splits combined per step (CQ 2, the default above HD 128): 7 splits, the last step with
  // one; and HD 256 itself, 3 splits
  checkDecode(false, f16, 64, 16, {3, 4, 1, 24, 8, {1, 16, 100}}, 32,
              {{"SPLITS", "7"}, {"CQ", "2"}}, 2);
  checkDecode(false, intType("u4", false, 4), 256, 16, {2, 8, 1, 12, 6, {90, 37}}, 33,
              {{"SPLITS", "3"}}, 2);
  // groups of 32 heads (two row tiles per kv head), split over 5 blocks
  checkDecode(false, intType("u4", false, 4), 64, 16, {2, 32, 1, 40, 20, {200, 33}}, 22,
              {{"SPLITS", "5"}}, 2);
  // every score far below zero (u4 keys are at least 0, q at least 0.5, the scale -100): the
  // combination reads the zero slots past the last split (groups of four splits per step) and
  // must not take their maxima of 0 as the largest; G = 5 (an odd group: a word of two heads
  // half past it)
  checkDecode(false, intType("u4", false, 4), 64, 16, {2, 10, 2, 40, 20, {300, 100}}, 26,
              {{"SPLITS", "3"}}, 2, -100.0f, 0.5);
  checkDecode(false, f16, 64, 16, {2, 10, 2, 40, 20, {300, 100}}, 27, {{"SPLITS", "6"}});
  // blocks of eight warps (f8e4m3 at HD 128): 32 splits of each of the 2 x 2 pairs (max_pages
  // 40: 40 stages of 16 keys), so four blocks per pair, whose partials the last of them combines
  // from the workspace (one step of four); sequences of 600 keys, 1 and 333 (empty splits, and
  // blocks whose eight warps have no keys)
  checkDecode(false, floatType("f8e4m3", 4, 3), 128, 16, {2, 4, 2, 90, 40, {600, 333}}, 40, {}, 2);
  checkDecode(false, floatType("f8e4m3", 4, 3), 128, 16, {3, 8, 1, 90, 40, {1, 600, 333}}, 41, {},
              2);
  // eight-warp blocks holding several pairs: BLOCKS 16 over 8 pairs, two splits each, four pairs
  // per block (the last block of the 12 pairs of the second case half empty: no stores)
  checkDecode(false, floatType("f8e4m3", 4, 3), 128, 16, {2, 16, 4, 40, 20, {300, 17}}, 42,
              {{"BLOCKS", "16"}}, 2);
  checkDecode(false, floatType("f8e4m3", 4, 3), 128, 16, {3, 8, 4, 60, 20, {300, 1, 40}}, 43,
              {{"BLOCKS", "24"}}, 2);
  // eight-warp blocks of a cache whose partials go through a buffer of their own (i5 at HD 64:
  // PO = 1): 16 splits of each of 2 x 2 pairs (20 stages of 32 keys), two blocks per pair
  checkDecode(false, intType("i5", true, 5), 64, 16, {2, 8, 2, 90, 40, {600, 17}}, 45,
              {{"WARPS", "8"}}, 2);
  // blocks of two warps of 16-bit caches (WARPS 2; the default is one): 7 splits become 6
  checkDecode(true, f16, 128, 16, {2, 8, 2, 40, 20, {300, 17}}, 44,
              {{"SPLITS", "7"}, {"WARPS", "2"}}, 2);
  // SPLITS 1: the program without workspace
  checkDecode(false, f16, 64, 16, {2, 8, 1, 12, 6, {1, 77}}, 16, {{"SPLITS", "1"}});
  checkDecode(false, intType("i8", true, 8), 128, 16, {1, 8, 8, 6, 6, {90}}, 17, {{"SPLITS", "1"}});
}
