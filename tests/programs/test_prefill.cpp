// programs/attention/prefill.tasm on the CPU interpreter against a plain C++ reference of its
// contract: o = softmax(scale * q k^T [masked]) v per (batch, head) in double precision, q and o
// [batch, seq_q, heads, HD], k and v [batch, seq_k, kv_heads, HD], grouped-query attention (head
// h reads kv head h / (heads / kv_heads)), the causal mask aligned to the bottom right (query i
// sees keys j <= i + seq_k - seq_q) and o = 0 for a row that sees no key. Sizes are ragged (not
// multiples of the 64-row and 64-key tiles), one query row, more and fewer queries than keys,
// several key tiles (the pipeline, the unmasked fast path and the diagonal tiles), GQA ratios 1,
// 2 and 8, HD 64 and 128, f16 and bf16.
#include "assembler/assembler.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef TILUSVM_SOURCE_DIR
#error "TILUSVM_SOURCE_DIR must point at the repository root"
#endif

namespace {

using namespace tilus;

/// f16 bits of a multiple of 1/64 in [-1, 1] (exact in f16).
uint16_t toF16(double v) {
  if (v == 0)
    return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  double mag = std::fabs(v);
  int e = std::ilogb(mag);
  double frac = std::ldexp(mag, 10 - e); // 1024..2047, exact for these values
  REQUIRE(frac == std::floor(frac));
  return uint16_t(sign | ((e + 15) << 10) | (int(frac) - 1024));
}

/// bf16 bits of a multiple of 1/64 in [-1, 1] (exact in bf16: at most 7 significant bits).
uint16_t toBf16(double v) {
  float f = float(v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  REQUIRE((u & 0xFFFF) == 0);
  return uint16_t(u >> 16);
}

/// The value of f16 bits (every class: zero, subnormal, normal, inf, NaN).
double fromF16(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v = exp == 0    ? std::ldexp(man, -24)
             : exp == 31 ? (man ? NAN : INFINITY)
                         : std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

double fromBf16(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return double(f);
}

std::string readFile(const std::string &path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

struct Case {
  int64_t batch, seqQ, seqK, heads, kvHeads;
};

void runPrefill(const std::string &at, int hd, bool causal, const std::vector<Case> &cases,
                const std::map<std::string, std::string> &tuning = {}) {
  INFO("AT=" << at << " HD=" << hd << " CAUSAL=" << causal
             << " tuning constants: " << tuning.size());
  AssembleOptions options;
  options.fileName = "programs/attention/prefill.tasm";
  options.defines = {{"AT", at}, {"HD", std::to_string(hd)}, {"CAUSAL", causal ? "1" : "0"}};
  for (const auto &[name, value] : tuning)
    options.defines[name] = value;
  Expected<Module> module = assemble(
      readFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/attention/prefill.tasm"), options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  const VerifiedModule &vm = *verified;
  size_t index = vm.module.programs.size();
  for (size_t i = 0; i < vm.module.programs.size(); ++i)
    if (vm.module.programs[i].name == "attention")
      index = i;
  REQUIRE(index < vm.module.programs.size());
  REQUIRE(vm.module.programs[index].params.size() == 10);

  const bool bf16 = at == "bf16";
  // P is rounded to AT before P V and o is rounded to AT: a few ulp of AT
  const double tol = bf16 ? 2.5e-2 : 4e-3;
  for (const Case &c : cases) {
    INFO("batch=" << c.batch << " seq_q=" << c.seqQ << " seq_k=" << c.seqK << " heads=" << c.heads
                  << " kv_heads=" << c.kvHeads);
    std::mt19937 rng(unsigned(c.seqQ * 7919 + c.seqK * 131 + c.heads * 17 + hd));
    const size_t qElems = size_t(c.batch * c.seqQ * c.heads * hd);
    const size_t kElems = size_t(c.batch * c.seqK * c.kvHeads * hd);
    std::vector<double> q(qElems), k(kElems), v(kElems);
    std::vector<uint8_t> qBytes(qElems * 2), kBytes(kElems * 2), vBytes(kElems * 2);
    auto fill = [&](std::vector<double> &x, std::vector<uint8_t> &bytes) {
      for (size_t i = 0; i < x.size(); ++i) {
        x[i] = double(int(rng() % 129) - 64) / 64.0;
        uint16_t h = bf16 ? toBf16(x[i]) : toF16(x[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
      }
    };
    fill(q, qBytes);
    fill(k, kBytes);
    fill(v, vBytes);
    std::vector<uint8_t> o(qElems * 2, 0xAB);
    // a scale larger than 1 / sqrt(HD) makes the softmax peaked, so the weights matter
    const float scale = 2.0f / std::sqrt(float(hd));
    uint32_t scaleBits;
    std::memcpy(&scaleBits, &scale, 4);
    auto scalar = [](int64_t x) { return KernelArg{uint64_t(uint32_t(int32_t(x))), nullptr, 0}; };
    REQUIRE_OK(runOnCpu(
        vm, index,
        {KernelArg{0, qBytes.data(), qBytes.size()}, KernelArg{0, kBytes.data(), kBytes.size()},
         KernelArg{0, vBytes.data(), vBytes.size()}, KernelArg{0, o.data(), o.size()},
         scalar(c.batch), scalar(c.seqQ), scalar(c.seqK), scalar(c.heads), scalar(c.kvHeads),
         KernelArg{scaleBits, nullptr, 0}}));
    const int64_t group = c.heads / c.kvHeads;
    int64_t emptyRows = 0;
    for (int64_t b = 0; b < c.batch; ++b)
      for (int64_t h = 0; h < c.heads; ++h) {
        const int64_t kvh = h / group;
        for (int64_t i = 0; i < c.seqQ; ++i) {
          const int64_t last = causal ? std::min(c.seqK - 1, i + c.seqK - c.seqQ) : c.seqK - 1;
          std::vector<double> want(size_t(hd), 0.0);
          if (last >= 0) {
            std::vector<double> s(size_t(last + 1));
            double mx = -INFINITY;
            for (int64_t j = 0; j <= last; ++j) {
              double dot = 0;
              for (int d = 0; d < hd; ++d)
                dot += q[size_t(((b * c.seqQ + i) * c.heads + h) * hd + d)] *
                       k[size_t(((b * c.seqK + j) * c.kvHeads + kvh) * hd + d)];
              s[size_t(j)] = double(scale) * dot;
              mx = std::max(mx, s[size_t(j)]);
            }
            double sum = 0;
            for (double &x : s)
              sum += (x = std::exp(x - mx));
            for (int64_t j = 0; j <= last; ++j)
              for (int d = 0; d < hd; ++d)
                want[size_t(d)] +=
                    s[size_t(j)] / sum * v[size_t(((b * c.seqK + j) * c.kvHeads + kvh) * hd + d)];
          } else {
            ++emptyRows;
          }
          for (int d = 0; d < hd; ++d) {
            size_t e = size_t(((b * c.seqQ + i) * c.heads + h) * hd + d);
            uint16_t bits;
            std::memcpy(&bits, &o[2 * e], 2);
            double got = bf16 ? fromBf16(bits) : fromF16(bits);
            INFO("o[" << b << ", " << i << ", " << h << ", " << d << "] expected "
                      << want[size_t(d)] << " got " << got);
            if (last < 0)
              REQUIRE(bits == 0); // a row that sees no key is +0 exactly
            else
              REQUIRE(std::fabs(got - want[size_t(d)]) <= tol * (1 + std::fabs(want[size_t(d)])));
          }
        }
      }
    if (causal && c.seqQ > c.seqK)
      CHECK(emptyRows == c.batch * c.heads * (c.seqQ - c.seqK));
  }
}

} // namespace

TEST_CASE("prefill: the reference's own conversions on hand-computed values") {
  CHECK(toF16(1.0) == 0x3C00);
  CHECK(toF16(-0.015625) == 0xA400);
  CHECK(toBf16(-0.5) == 0xBF00);
  CHECK(fromF16(0x3C00) == 1.0);
  CHECK(fromF16(0x0001) == std::ldexp(1.0, -24));
  CHECK(fromF16(0xC100) == -2.5);
  CHECK(fromBf16(0x3F80) == 1.0);
  CHECK(fromBf16(0xC040) == -3.0);
}

// Both designs of the program: the wgmma and TMA one (HOPPER=1, the default: two warpgroups of 64
// query rows, key tiles of 128, two TMA stages of K and V, P V of tile j - 1 behind S of tile j)
// and the mma.sync one (HOPPER=0).
const std::map<std::string, std::string> kDesigns[] = {{}, {{"HOPPER", "0"}}};

TEST_CASE("prefill: full attention, f16 and bf16, HD 64 and 128, ragged, GQA 1 and 2") {
  for (const auto &design : kDesigns) {
    // ragged single tiles; one query row over three key tiles; several query and key tiles
    runPrefill("f16", 64, false, {{2, 37, 53, 2, 1}, {1, 1, 130, 1, 1}, {1, 130, 70, 1, 1}},
               design);
    runPrefill("bf16", 128, false, {{1, 37, 53, 2, 2}}, design);
    runPrefill("f16", 128, false, {{1, 1, 1, 1, 1}}, design);
    runPrefill("bf16", 64, false, {{1, 65, 64, 2, 1}}, design);
  }
}

TEST_CASE("prefill: causal attention, bottom-right mask, fewer and more queries than keys") {
  for (const auto &design : kDesigns) {
    // seq_q < seq_k: every row sees the first seq_k - seq_q keys and more
    runPrefill("f16", 128, true, {{1, 37, 53, 2, 1}}, design);
    // seq_q = 1 sees every key (three key tiles, the last partial)
    runPrefill("bf16", 64, true, {{1, 1, 130, 2, 2}}, design);
    // several query and key tiles: tiles below the diagonal unmasked, diagonal tiles masked,
    // tiles above it skipped
    runPrefill("f16", 64, true, {{1, 150, 150, 1, 1}}, design);
    // seq_q > seq_k: the first seq_q - seq_k rows see no key and are 0; GQA ratio 8
    runPrefill("bf16", 64, true, {{1, 70, 45, 8, 1}}, design);
    runPrefill("f16", 128, true, {{1, 20, 9, 1, 1}}, design);
  }
}

TEST_CASE(
    "prefill: the wgmma design over several 128-key tiles (stages reused, loads in the loop)") {
  // four and five key tiles, the last partial: K tile j + 2 and V tile j + 1 loaded into the
  // stages that S of tile j and P V of tile j - 1 have released; three query tiles
  runPrefill("f16", 128, false, {{1, 300, 520, 4, 1}});
  runPrefill("bf16", 64, false, {{2, 129, 400, 2, 2}});
  // causal over three query tiles: the skipped, the unmasked and the diagonal key tiles, and
  // seq_q > seq_k (the first 40 rows see no key), GQA ratio 8
  runPrefill("f16", 128, true, {{1, 300, 300, 2, 2}});
  runPrefill("bf16", 64, true, {{1, 300, 260, 8, 1}});
}

TEST_CASE("prefill: tuning constants (two m16 atoms per warp, 16-key tiles, two warps)") {
  runPrefill("f16", 128, true, {{1, 150, 150, 2, 1}}, {{"HOPPER", "0"}, {"MW", "2"}, {"BN", "16"}});
  runPrefill("bf16", 64, false, {{1, 33, 100, 2, 2}}, {{"HOPPER", "0"}, {"MW", "2"}, {"W", "2"}});
  runPrefill("f16", 64, true, {{1, 100, 90, 1, 1}}, {{"HOPPER", "0"}, {"W", "4"}, {"BN", "32"}});
  // the wgmma design with 64-key tiles at HD 128 and 128-key tiles at HD 64 (the defaults are
  // the other way round)
  runPrefill("f16", 128, true, {{1, 200, 300, 2, 1}}, {{"BN", "64"}});
  runPrefill("bf16", 64, false, {{1, 130, 300, 2, 2}}, {{"BN", "128"}});
}
