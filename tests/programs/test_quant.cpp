// programs/quant/a16wx.tasm on the CPU interpreter against a plain C++ reference of its
// contract: C[m, N] = A[m, K] @ ((W - Z) * S) for every weight type of 1 to 8 bits, f16 and
// bf16 activations, group-wise scales, zero points, m not a multiple of the tile, m = 1; and
// unpack(pack(W)) == W bit for bit. Weight codes are decoded here by the textbook formulas of
// ISA section 2, independently of isa/convert.
#include "assembler/assembler.h"
#include "layout_strip.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"
#include "vm_cpu/cpu_test_util.h"

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

struct WeightType {
  std::string name;
  bool isFloat;
  bool isSigned; // integers
  int e, m;      // floats: exponent and mantissa bits
  int bits;
};

WeightType intType(const std::string &name, bool isSigned, int bits) {
  return {name, false, isSigned, 0, 0, bits};
}
WeightType floatType(const std::string &name, int e, int m) {
  return {name, true, true, e, m, 1 + e + m};
}

/// The value of a code, or NaN for the codes that encode NaN or infinity.
double decode(const WeightType &t, uint32_t code) {
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

uint32_t getPacked(const std::vector<uint8_t> &bytes, int64_t index, int bits) {
  uint32_t v = 0;
  for (int b = 0; b < bits; ++b) {
    int64_t bit = index * bits + b;
    v |= uint32_t((bytes[size_t(bit / 8)] >> (bit % 8)) & 1) << b;
  }
  return v;
}

void putPacked(std::vector<uint8_t> &bytes, int64_t index, int bits, uint32_t value) {
  for (int b = 0; b < bits; ++b) {
    int64_t bit = index * bits + b;
    uint8_t mask = uint8_t(1u << (bit % 8));
    bytes[size_t(bit / 8)] = ((value >> b) & 1u) ? uint8_t(bytes[size_t(bit / 8)] | mask)
                                                 : uint8_t(bytes[size_t(bit / 8)] & ~mask);
  }
}

/// Exact encodings of the test's values (k / 2^s with few significant bits) in f16 and bf16.
uint16_t encode(double v, bool bf16) {
  if (bf16) {
    float f = float(v);
    uint32_t u;
    std::memcpy(&u, &f, 4);
    REQUIRE((u & 0xFFFF) == 0); // exact
    return uint16_t(u >> 16);
  }
  if (v == 0)
    return 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  double mag = std::fabs(v);
  int e = std::ilogb(mag);
  REQUIRE(e >= -14);
  REQUIRE(e <= 15);
  double frac = std::ldexp(mag, 10 - e) - 1024; // 10 mantissa bits
  REQUIRE(frac == std::floor(frac));
  return uint16_t(sign | ((e + 15) << 10) | int(frac));
}

double decode16(uint16_t h, bool bf16) {
  if (bf16) {
    uint32_t u = uint32_t(h) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
  int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

std::string readProgram() {
  std::ifstream in(std::string(TILUSVM_SOURCE_DIR) + "/programs/quant/a16wx.tasm");
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t programIndex(const VerifiedModule &m, const std::string &name) {
  for (size_t i = 0; i < m.module.programs.size(); ++i)
    if (m.module.programs[i].name == name)
      return i;
  FAIL("no program " << name);
  return 0;
}

/// programs/quant/a16wx.tasm assembled with `defines` and checked.
VerifiedModule buildProgram(const std::map<std::string, std::string> &defines) {
  AssembleOptions options;
  options.fileName = "programs/quant/a16wx.tasm";
  options.defines = defines;
  Expected<Module> module = assemble(testing::programUnderTest(readProgram(), options), options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  return std::move(verified).value();
}

KernelArg hostArg(std::vector<uint8_t> &bytes) { return KernelArg{0, bytes.data(), bytes.size()}; }

struct Config {
  WeightType wt;
  bool bf16 = false;
  int64_t n = 32, k = 256, g = 128, m = 5;
  bool zero = false;
  std::map<std::string, std::string> tuning;
};

void runConfig(const Config &c) {
  const WeightType &t = c.wt;
  std::string at = c.bf16 ? "bf16" : "f16";
  INFO("WT=" << t.name << " AT=" << at << " N=" << c.n << " K=" << c.k << " G=" << c.g
             << " m=" << c.m << " ZERO=" << c.zero);
  std::map<std::string, std::string> defines = {
      {"AT", c.bf16 ? "bf16" : "f16"}, {"WT", t.name},
      {"N", std::to_string(c.n)},      {"K", std::to_string(c.k)},
      {"G", std::to_string(c.g)},      {"ZERO", c.zero ? "1" : "0"}};
  for (const auto &[name, value] : c.tuning)
    defines[name] = value;
  const VerifiedModule vm = buildProgram(defines);

  std::mt19937 rng(unsigned(t.bits * 131 + c.m * 7 + c.g + (c.bf16 ? 1 : 0)));
  const int64_t n = c.n, k = c.k, m = c.m, groups = k / c.g;
  // weights: random codes, NaN and infinity codes replaced by zero
  std::vector<uint32_t> codes(size_t(k * n));
  std::vector<uint8_t> w(size_t((k * n * t.bits + 7) / 8), 0);
  for (int64_t i = 0; i < k * n; ++i) {
    uint32_t code = uint32_t(rng()) & ((1u << t.bits) - 1);
    if (std::isnan(decode(t, code)))
      code = 0;
    codes[size_t(i)] = code;
    putPacked(w, i, t.bits, code);
  }
  // activations k/8 in [-2, 2]; scales (8 + j) / 128; zero points small integers
  std::vector<double> a(size_t(m * k)), s(size_t(groups * n)), z(size_t(groups * n), 0.0);
  std::vector<uint8_t> aBytes(size_t(m * k * 2)), sBytes(size_t(groups * n * 2)),
      zBytes(size_t(groups * n * 2), 0);
  for (int64_t i = 0; i < m * k; ++i) {
    a[size_t(i)] = double(int(rng() % 33) - 16) / 8.0;
    uint16_t h = encode(a[size_t(i)], c.bf16);
    std::memcpy(&aBytes[size_t(2 * i)], &h, 2);
  }
  for (int64_t i = 0; i < groups * n; ++i) {
    s[size_t(i)] = double(8 + int(rng() % 8)) / 128.0;
    uint16_t h = encode(s[size_t(i)], c.bf16);
    std::memcpy(&sBytes[size_t(2 * i)], &h, 2);
    if (c.zero) {
      z[size_t(i)] = double(int(rng() % 7) - 3);
      h = encode(z[size_t(i)], c.bf16);
      std::memcpy(&zBytes[size_t(2 * i)], &h, 2);
    }
  }

  // pack, then unpack must give the codes back
  std::vector<uint8_t> wq(size_t(k * n * t.bits / 8), 0xCD);
  REQUIRE_OK(runOnCpu(vm, programIndex(vm, "pack"), {hostArg(w), hostArg(wq)}));
  std::vector<uint8_t> back(w.size(), 0x5A);
  REQUIRE_OK(runOnCpu(vm, programIndex(vm, "unpack"), {hostArg(wq), hostArg(back)}));
  for (int64_t i = 0; i < k * n; ++i) {
    INFO("weight " << i);
    REQUIRE(getPacked(back, i, t.bits) == codes[size_t(i)]);
  }

  // matmul against C = A @ ((W - Z) * S)
  std::vector<uint8_t> cBytes(size_t(m * n * 2), 0xFF);
  uint64_t mBits = uint64_t(uint32_t(int32_t(m)));
  std::vector<uint8_t> zArg = c.zero ? zBytes : std::vector<uint8_t>(2, 0);
  REQUIRE_OK(runOnCpu(vm, programIndex(vm, "matmul"),
                      {hostArg(aBytes), hostArg(wq), hostArg(sBytes), hostArg(zArg),
                       hostArg(cBytes), KernelArg{mBits, nullptr, 0}}));
  double maxRef = 0;
  std::vector<double> ref(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p) {
        size_t gi = size_t((p / c.g) * n + j);
        sum += a[size_t(i * k + p)] * (decode(t, codes[size_t(p * n + j)]) - z[gi]) * s[gi];
      }
      ref[size_t(i * n + j)] = sum;
      maxRef = std::max(maxRef, std::fabs(sum));
    }
  int significand = c.bf16 ? 8 : 11;
  for (int64_t i = 0; i < m * n; ++i) {
    uint16_t h;
    std::memcpy(&h, &cBytes[size_t(2 * i)], 2);
    double got = decode16(h, c.bf16), want = ref[size_t(i)];
    // one rounding to AT, plus f32 accumulation error over K terms
    double tol = std::ldexp(std::fabs(want), -significand) + maxRef * 1e-5 + 1e-6;
    INFO("C element " << i << ": got " << got << ", expected " << want);
    REQUIRE(std::fabs(got - want) <= tol);
  }
}

std::vector<WeightType> allWeightTypes() {
  std::vector<WeightType> types;
  for (int b = 1; b <= 8; ++b)
    types.push_back(intType(std::string("u").append(std::to_string(b)), false, b));
  for (int b = 2; b <= 8; ++b)
    types.push_back(intType(std::string("i").append(std::to_string(b)), true, b));
  types.push_back(floatType("f8e4m3", 4, 3));
  types.push_back(floatType("f8e5m2", 5, 2));
  for (auto [e, m] :
       {std::pair{1, 1}, {2, 1}, {2, 2}, {3, 2}, {2, 3}, {3, 3}, {4, 1}, {3, 4}, {4, 2}, {2, 5}}) {
    std::string name = "f";
    name.append(std::to_string(1 + e + m)).append("e").append(std::to_string(e));
    name.append("m").append(std::to_string(m));
    types.push_back(floatType(name, e, m));
  }
  return types;
}

} // namespace

TEST_CASE("a16wx: every weight type, f16 activations, G = 128, m = 5") {
  for (const WeightType &t : allWeightTypes())
    runConfig(Config{t});
}

TEST_CASE("a16wx: 1 < m <= 8 take the decode body of BMN = 8 rows, other m that of BM = 16") {
  // `specialize narrow = NARROW == 1 and m > 1 and m <= BMN`: m = 2 and 8 run the narrow copy of
  // the decode body, m = 9 and 12 the row tile of 16 (ragged), every weight type; NARROW = 0
  // takes the tile of 16 rows for every m
  for (const WeightType &t : allWeightTypes()) {
    runConfig(Config{t, false, 32, 256, 128, 8});
    runConfig(Config{t, false, 32, 256, 128, 12});
  }
  WeightType u4 = intType("u4", false, 4), i6 = intType("i6", true, 6);
  runConfig(Config{u4, true, 32, 256, 128, 2, true});
  runConfig(Config{i6, false, 32, 256, 128, 9, true});
  runConfig(Config{u4, false, 32, 256, 128, 2, false, {{"NARROW", "0"}}});
  runConfig(Config{i6, true, 64, 256, 128, 6, true, {{"NARROW", "0"}, {"WARPS", "2"}}});
}

TEST_CASE("a16wx: bf16 activations, zero points, one scale per column") {
  for (const char *name : {"u4", "i4", "u8", "i8", "u2"}) {
    bool isSigned = name[0] == 'i';
    WeightType t = intType(name, isSigned, name[1] - '0');
    runConfig(Config{t, true, 32, 256, 128, 5, true});
    runConfig(Config{t, false, 32, 256, 256, 3, true});
  }
  runConfig(Config{floatType("f4e2m1", 2, 1), true});
  runConfig(Config{floatType("f8e4m3", 4, 3), true});
}

TEST_CASE(
    "a16wx: generic float weights into f16, with zero points (weights at 2^-WX, scales at 2^WX)") {
  // E <= 4 exponent bits into f16: the decode loop multiplies the dequantised weights by 2^-WX
  // (WX = 15 - bias: 15 for E = 1, 14 for E = 2, 12 for E = 3, 8 for E = 4) and the f32 scales
  // by 2^WX, the zero points by 2^-WX; C must be the formula's whatever the split of K
  const std::map<std::string, std::string> split2 = {{"KS", "2"}, {"SPLITK", "2"}},
                                           split4 = {{"KS", "2"}, {"SPLIT1", "4"}};
  runConfig(Config{floatType("f4e2m1", 2, 1), false, 32, 256, 128, 5, true});
  runConfig(Config{floatType("f6e3m2", 3, 2), false, 32, 256, 256, 3, true});
  runConfig(Config{floatType("f3e1m1", 1, 1), false, 32, 256, 64, 16, true, split2});
  runConfig(Config{floatType("f7e4m2", 4, 2), false, 32, 256, 128, 1, true, split4});
  runConfig(Config{floatType("f5e2m2", 2, 2), false, 32, 256, 128, 9, true, {{"PD", "2"}}});
}

TEST_CASE("a16wx: m = 1, m past one row tile, other tile constants, several warps") {
  WeightType u4 = intType("u4", false, 4), i6 = intType("i6", true, 6);
  runConfig(Config{u4, false, 32, 256, 128, 1});
  runConfig(Config{u4, false, 32, 256, 128, 17});
  runConfig(Config{i6, false, 64, 512, 256, 9, false, {{"AN", "2"}, {"KS", "4"}, {"BM", "8"}}});
  runConfig(Config{intType("u3", false, 3), false, 48, 256, 64, 2, false, {{"KS", "4"}}});
  // several warps per block sharing the activations (replicated layouts through View)
  runConfig(Config{u4, false, 64, 256, 128, 5, true, {{"WARPS", "4"}}});
  runConfig(Config{i6, true, 64, 256, 256, 17, false, {{"WARPS", "2"}, {"AN", "2"}}});
}

TEST_CASE(
    "a16wx: the prefill kernel (PREFILL = 1: wgmma, weights dequantised into its register A)") {
  // 128 columns per block, tiles of 64 k, groups of 64 to 256, m within one 128-row tile and
  // past it, zero points, bf16; every family of weight types
  const std::map<std::string, std::string> prefill = {{"PREFILL", "1"}};
  for (const WeightType &t :
       {intType("u1", false, 1), intType("u2", false, 2), intType("u3", false, 3),
        intType("u4", false, 4), intType("i4", true, 4), intType("u5", false, 5),
        intType("i6", true, 6), intType("u7", false, 7), intType("i8", true, 8),
        floatType("f4e2m1", 2, 1), floatType("f6e3m2", 3, 2), floatType("f8e4m3", 4, 3),
        floatType("f8e5m2", 5, 2)})
    runConfig(Config{t, false, 128, 256, 128, 5, false, prefill});
  WeightType u4 = intType("u4", false, 4);
  runConfig(Config{u4, false, 256, 256, 64, 130, false, prefill});
  runConfig(Config{u4, true, 128, 192, 64, 1, true, prefill});
  runConfig(Config{intType("u8", false, 8), false, 128, 512, 256, 7, true, prefill});
  runConfig(Config{intType("i4", true, 4), true, 128, 256, 256, 3, true, prefill});
  // the copies by cp.async instead of TMA (PTMA = 0): a thread's codes of an odd width are not
  // whole 16-byte chunks (tiles of 64 k: 12 or 20 bytes, copied as 4-byte chunks; of 128 k, as
  // in the loop above: 8-byte chunks)
  runConfig(Config{intType("u3", false, 3), false, 128, 256, 64, 5, false, prefill});
  runConfig(Config{intType("u5", false, 5), true, 128, 192, 64, 130, true, prefill});
  // narrow row tiles (BM = 16 and 64: wgmma m64n16k16 and m64n64k16): m of one tile, past one
  // and of one row
  const std::map<std::string, std::string> bm16 = {{"PREFILL", "1"}, {"BM", "16"}};
  runConfig(Config{u4, false, 128, 256, 128, 16, false, bm16});
  runConfig(Config{floatType("f4e2m1", 2, 1), true, 256, 192, 64, 21, false, bm16});
  runConfig(Config{intType("u8", false, 8), false, 128, 256, 128, 1, false, bm16});
  runConfig(Config{
      intType("i6", true, 6), false, 128, 256, 128, 70, false, {{"PREFILL", "1"}, {"BM", "64"}}});
  // zero points need BM = 128 (their row sums are a wgmma with the activation tile as its A
  // operand): a narrower tile with ZERO = 1 is refused at assembly, with the reason
  AssembleOptions options;
  options.defines = {{"PREFILL", "1"}, {"BM", "16"}, {"ZERO", "1"}, {"N", "128"}, {"K", "256"}};
  Expected<Module> refused = assemble(readProgram(), options);
  REQUIRE_FALSE(refused.ok());
  CHECK(refused.status().first().code == ErrorCode::Assert);
  CHECK(refused.status().first().message.find("zero points need BM = 128") != std::string::npos);
}

TEST_CASE("a16wx: split-K (SPLITK blocks per tile, atomics and a ticket) for every family") {
  // KS = 2: steps of 32 values of k, so K = 256 has 8 steps to split. Every run also checks,
  // in checked mode, that the workspace is zero again afterwards (requires_clean) and that
  // the atomics and the ticket race with nothing.
  const std::map<std::string, std::string> split2 = {{"KS", "2"}, {"SPLITK", "2"}};
  const std::map<std::string, std::string> split4 = {{"KS", "2"}, {"SPLITK", "4"}};
  const std::map<std::string, std::string> split8 = {{"KS", "2"}, {"SPLITK", "8"}};
  WeightType u4 = intType("u4", false, 4), i6 = intType("i6", true, 6);
  for (const WeightType &t :
       {u4, intType("i4", true, 4), intType("u1", false, 1), intType("u3", false, 3), i6,
        intType("u8", false, 8), floatType("f4e2m1", 2, 1), floatType("f6e3m2", 3, 2),
        floatType("f8e4m3", 4, 3), floatType("f8e5m2", 5, 2)})
    runConfig(Config{t, false, 32, 256, 128, 1, false, split4});
  // ragged m (one tile of 16 rows, 5 or 16 of them used), bf16, zero points, G = K and groups
  // that a split cuts in the middle (G = 128, K / SPLITK = 64; G = 32 with SPLITK = 2)
  runConfig(Config{u4, false, 32, 256, 128, 5, false, split2});
  // 8-bit weights as their default takes them where the tiles fill the GPU (steps of 32 k,
  // two blocks per tile), at m = 16 and a ragged m, with zero points
  for (const WeightType &t : {intType("u8", false, 8), intType("i8", true, 8),
                              floatType("f8e4m3", 4, 3), floatType("f8e5m2", 5, 2)}) {
    runConfig(Config{t, false, 64, 256, 128, 16, false, split2});
    runConfig(Config{t, true, 64, 256, 64, 11, true, split2});
  }
  // m = 1 takes SPLIT1 blocks per tile, other m <= SPLITM take SPLITK (here one: the kernel
  // has the workspace for m = 1 and stores directly otherwise)
  const std::map<std::string, std::string> split1Only = {
      {"KS", "2"}, {"SPLITK", "1"}, {"SPLIT1", "4"}};
  const std::map<std::string, std::string> split1And2 = {
      {"KS", "2"}, {"SPLITK", "2"}, {"SPLIT1", "8"}};
  for (int64_t m : {1, 5})
    runConfig(Config{u4, false, 32, 256, 128, m, false, split1Only});
  for (int64_t m : {1, 3})
    runConfig(Config{i6, true, 32, 256, 64, m, true, split1And2});
  runConfig(Config{u4, true, 32, 256, 256, 16, true, split8});
  // ranges of unequal steps (8 steps in 3 ranges: 2, 3, 3; in 5: 1, 2, 1, 2, 2), one group
  // cut by a range (G = 64, two steps)
  const std::map<std::string, std::string> split3 = {{"KS", "2"}, {"SPLITK", "3"}};
  const std::map<std::string, std::string> split5 = {{"KS", "2"}, {"SPLITK", "5"}, {"SPLIT1", "5"}};
  for (const WeightType &t : {u4, i6, floatType("f8e4m3", 4, 3)})
    runConfig(Config{t, false, 32, 256, 64, 3, false, split3});
  runConfig(Config{u4, true, 64, 256, 64, 1, true, split5});
  runConfig(Config{i6, false, 32, 256, 128, 9, true, split5});
  runConfig(Config{i6, false, 48, 256, 32, 3, true, split2});
  runConfig(Config{i6, true, 32, 256, 64, 7, false, split4});
  // 1 < m <= BMN take SPLITK blocks per tile (the decode body of 8 rows), BMN < m <= SPLITM
  // SPLITW (the body of 16 rows): three and two ranges of the 8 steps, or one (no split for
  // m > 8, the store without the workspace); m = 1 SPLIT1. A grid that did not match its
  // body's ranges would leave steps out or count them twice
  for (const char *w : {"2", "1"}) {
    INFO("SPLITW=" << w);
    const std::map<std::string, std::string> splitW = {
        {"KS", "2"}, {"SPLITK", "3"}, {"SPLITW", w}, {"SPLIT1", "4"}};
    for (int64_t m : {1, 5, 8, 9, 16})
      runConfig(Config{u4, false, 32, 256, 64, m, true, splitW});
    runConfig(Config{floatType("f6e3m2", 3, 2), false, 32, 256, 128, 12, false, splitW});
  }
  // BO = 1: the SPLITW blocks of a tile numbered one after another (4 tiles in 3 ranges, 3
  // tiles in 2); m = 1 and 1 < m <= 8 keep the grid's order. A block that took its tile and
  // its range from different orders would leave steps out and count others twice
  for (auto [n, w] : {std::pair{int64_t{128}, "3"}, std::pair{int64_t{96}, "2"}}) {
    INFO("BO=1 SPLITW=" << w);
    const std::map<std::string, std::string> ordered = {
        {"KS", "2"}, {"SPLITK", "3"}, {"SPLITW", w}, {"SPLIT1", "4"}, {"BO", "1"}};
    for (int64_t m : {1, 5, 9, 16})
      runConfig(Config{u4, false, n, 256, 64, m, true, ordered});
    runConfig(Config{floatType("f6e3m2", 3, 2), false, n, 256, 128, 12, false, ordered});
  }
  // the 16-row body without a workspace (SPLITW = SPLIT1 = 1, as u4 and u5 take where their
  // tiles fill the GPU) beside the 8-row body with one
  const std::map<std::string, std::string> narrowOnly = {
      {"KS", "2"}, {"SPLITK", "3"}, {"SPLITW", "1"}, {"SPLIT1", "1"}};
  for (int64_t m : {1, 6, 16})
    runConfig(Config{u4, false, 32, 256, 128, m, true, narrowOnly});
  // m past SPLITM: no split (one block per tile), the same program
  runConfig(Config{u4, false, 32, 256, 128, 17, false, split4});
  // BM = 8 (two row tiles under SPLITM), several warps, two atoms per warp
  runConfig(Config{u4,
                   false,
                   64,
                   256,
                   128,
                   13,
                   false,
                   {{"KS", "2"}, {"SPLITK", "4"}, {"BM", "8"}, {"WARPS", "2"}}});
  runConfig(Config{intType("i8", true, 8),
                   false,
                   64,
                   512,
                   128,
                   2,
                   true,
                   {{"KS", "4"}, {"SPLITK", "2"}, {"AN", "2"}}});
}

TEST_CASE("a16wx: launches with m = 1 take the decode loop of their own unroll hint (UR1)") {
  // the program holds two copies of the decode loop where UR1 differs from UR (integers of 1, 3
  // and 5 bits, u8, 4-bit floats into f16, ...): m = 1 and m > 1 each run one, over 11 steps of K
  // (22 for u8)
  for (const WeightType &t :
       {intType("u5", false, 5), intType("u1", false, 1), intType("u8", false, 8),
        floatType("f4e2m1", 2, 1), intType("i3", true, 3)})
    for (int64_t m : {1, 2})
      runConfig(Config{t, false, 32, 1408, 128, m, true});
  const std::string source = readProgram();
  auto constant = [&source](const std::map<std::string, std::string> &defines, const char *name) {
    return cputest::programConstant(source, defines, name, "a16wx.tasm");
  };
  // (u2 at N = 57344 keeps two steps of weights in flight, PD = 2, and twice; with one, four)
  for (auto [wt, at, ur, ur1] :
       {std::tuple{"u1", "f16", 2, 4}, std::tuple{"u3", "f16", 2, 4}, std::tuple{"i3", "f16", 2, 4},
        std::tuple{"u5", "f16", 1, 4}, std::tuple{"i5", "f16", 1, 4}, std::tuple{"i2", "f16", 2, 4},
        std::tuple{"f4e2m1", "f16", 2, 4}, std::tuple{"u8", "f16", 1, 2},
        std::tuple{"u2", "f16", 2, 2}, std::tuple{"u4", "f16", 1, 1}, std::tuple{"u6", "f16", 1, 1},
        std::tuple{"i7", "f16", 1, 1}, std::tuple{"f4e2m1", "bf16", 1, 1},
        std::tuple{"f6e3m2", "f16", 1, 1}, std::tuple{"f3e1m1", "f16", 1, 1},
        std::tuple{"i8", "f16", 1, 1}}) {
    INFO("WT=" << wt << " AT=" << at);
    CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", wt}, {"AT", at}}, "UR") == ur);
    CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", wt}, {"AT", at}}, "UR1") == ur1);
  }
  CHECK(constant({{"N", "8192"}, {"K", "28672"}, {"WT", "u2"}}, "UR1") == 4);
}

TEST_CASE("a16wx: weights loaded PD steps ahead of the step that uses them") {
  // the ring of prefetched steps (PD = 2, 3): K = 256 has 8 steps of KS = 2; split-K ranges
  // of one to three steps (shorter than the ring: its later loads read past the range or past
  // K, are zero or another range's, and are never used), m = 1 and ragged m, zero points
  WeightType u2 = intType("u2", false, 2), i6 = intType("i6", true, 6);
  for (const char *pd : {"2", "3"}) {
    runConfig(Config{u2, false, 32, 256, 128, 5, true, {{"PD", pd}}});
    runConfig(Config{i6, true, 32, 256, 64, 1, false, {{"PD", pd}, {"KS", "2"}, {"SPLIT1", "5"}}});
    runConfig(Config{intType("u4", false, 4),
                     false,
                     64,
                     256,
                     64,
                     9,
                     true,
                     {{"PD", pd}, {"KS", "2"}, {"SPLITK", "3"}}});
    runConfig(Config{floatType("f4e2m1", 2, 1),
                     true,
                     32,
                     256,
                     128,
                     16,
                     false,
                     {{"PD", pd}, {"KS", "2"}, {"SPLITK", "8"}}});
  }
}

TEST_CASE("a16wx: a warp's step of packed weights lies as [NC chunks][32 lanes][LC bytes]") {
  // Each lane's LB bytes of a step are NC chunks of LC bytes, and chunk c of the 32 lanes lies
  // together, so that every load instruction of a warp reads 32 LC contiguous bytes. Checked
  // against the same program with LC = LB (each lane's bytes together, lanes LB bytes apart):
  // the byte (tile, step, lane, c LC + i) moves from tile * 32 LB + step * STEPB + lane * LB +
  // c LC + i to tile * 32 LB + step * STEPB + (c * 32 + lane) * LC + i, and nothing else moves.
  const std::string source = readProgram();
  auto constant = [&source](const std::map<std::string, std::string> &defines, const char *name) {
    return int64_t(cputest::programConstant(source, defines, name, "a16wx.tasm"));
  };
  // 16-byte chunks for every type at the Llama-70B shapes (one load instruction: 512 bytes)
  for (const char *wt :
       {"u1", "u2", "u3", "u4", "i4", "u5", "i6", "u8", "f4e2m1", "f6e3m2", "f8e4m3"})
    for (auto [k, n] : {std::pair{"8192", "57344"}, {"8192", "10240"}, {"28672", "8192"}}) {
      INFO("WT=" << wt << " K=" << k << " N=" << n);
      std::map<std::string, std::string> d = {{"WT", wt}, {"K", k}, {"N", n}};
      CHECK(constant(d, "LC") == 16);
      CHECK(constant(d, "NC") * 16 == constant(d, "LB"));
    }
  struct Case {
    WeightType wt;
    int64_t n, k;
    std::map<std::string, std::string> tuning;
    int64_t lc; // the chunk the program must choose
  };
  for (const Case &c :
       {Case{intType("u4", false, 4), 64, 256, {}, 16},           // LB 64: four chunks
        Case{intType("i6", true, 6), 64, 256, {}, 16},            // LB 96: six
        Case{intType("u8", false, 8), 64, 256, {}, 16},           // LB 64 (KS = 4)
        Case{intType("u3", false, 3), 48, 256, {{"KS", "4"}}, 4}, // one atom, LB 12: 4-byte chunks
        Case{floatType("f5e2m2", 2, 2), 32, 256, {{"KS", "2"}}, 4}}) { // LB 20
    const WeightType &t = c.wt;
    std::map<std::string, std::string> defines = {
        {"WT", t.name}, {"N", std::to_string(c.n)}, {"K", std::to_string(c.k)}, {"G", "128"}};
    for (const auto &[name, value] : c.tuning)
      defines[name] = value;
    const int64_t lb = constant(defines, "LB"), stepb = constant(defines, "STEPB");
    INFO("WT=" << t.name << " LB=" << lb);
    REQUIRE(constant(defines, "LC") == c.lc);
    REQUIRE(lb % c.lc == 0);
    std::mt19937 rng(unsigned(t.bits * 17 + c.n));
    std::vector<uint8_t> w(size_t(c.k * c.n * t.bits / 8));
    for (uint8_t &b : w)
      b = uint8_t(rng());
    auto pack = [&](const std::map<std::string, std::string> &d) {
      const VerifiedModule packer = buildProgram(d);
      std::vector<uint8_t> in = w, out(w.size(), 0xCD);
      REQUIRE_OK(runOnCpu(packer, programIndex(packer, "pack"), {hostArg(in), hostArg(out)}));
      return out;
    };
    std::vector<uint8_t> chunked = pack(defines);
    std::map<std::string, std::string> together = defines;
    together["LC"] = std::to_string(lb);
    std::vector<uint8_t> lanes = pack(together);
    // [K / KC steps][N / (16 AN) tiles][32 lanes][LB bytes] either way, STEPB bytes a step
    const int64_t steps = int64_t(w.size()) / stepb, tiles = stepb / (32 * lb);
    REQUIRE(steps * stepb == int64_t(w.size()));
    REQUIRE(tiles * 32 * lb == stepb);
    int64_t checked = 0;
    for (int64_t step = 0; step < steps; ++step)
      for (int64_t tile = 0; tile < tiles; ++tile)
        for (int64_t lane = 0; lane < 32; ++lane)
          for (int64_t byte = 0; byte < lb; ++byte) {
            int64_t base = tile * 32 * lb + step * stepb;
            int64_t from = base + lane * lb + byte;
            int64_t to = base + (byte / c.lc * 32 + lane) * c.lc + byte % c.lc;
            INFO("step " << step << " tile " << tile << " lane " << lane << " byte " << byte);
            REQUIRE(chunked[size_t(to)] == lanes[size_t(from)]);
            ++checked;
          }
    CHECK(checked == int64_t(w.size()));
  }
  // the matmul reads what pack writes either way (LC = LB is the layout of one chunk per lane)
  runConfig(Config{intType("u4", false, 4), false, 64, 256, 128, 5, true, {{"LC", "64"}}});
}

TEST_CASE("a16wx: the split-K default for few column tiles, and preconditions") {
  const std::string source = readProgram();
  auto constant = [&source](const std::map<std::string, std::string> &defines, const char *name) {
    return cputest::programConstant(source, defines, name, "a16wx.tasm");
  };
  // Llama-70B shapes (two atoms per warp by default: 32 rows of N per warp). The split is the
  // most blocks per tile, up to 8, with at most 2048 blocks: N = 57344 has 1792 column tiles (no
  // split), N = 28672 896 (two), N = 10240 320 (six), N = 8192 256 (eight)
  CHECK(constant({{"N", "57344"}, {"K", "8192"}}, "AN") == 2);
  // (4-bit integers, the default u4, i6, u1, u3, u5 and floats narrower than 8 bits take two
  // there for m > 1, other types one)
  CHECK(constant({{"N", "57344"}, {"K", "8192"}}, "SPLITK") == 2);
  // ... and u2 there keeps two steps of weights in flight (PD), everything else one
  for (auto [wt, splitk, pd] :
       {std::tuple{"i4", 2, 1}, std::tuple{"u1", 2, 1}, std::tuple{"u3", 2, 1},
        std::tuple{"u5", 2, 1}, std::tuple{"u2", 1, 2}, std::tuple{"i2", 1, 1},
        std::tuple{"i3", 1, 1}, std::tuple{"u7", 1, 1}, std::tuple{"i6", 2, 1},
        std::tuple{"f4e2m1", 2, 1}, std::tuple{"f5e2m2", 2, 1}, std::tuple{"f7e3m3", 2, 1},
        std::tuple{"f3e1m1", 2, 1}, std::tuple{"u8", 2, 1}, std::tuple{"f8e4m3", 2, 1},
        std::tuple{"f8e5m2", 2, 1}, std::tuple{"i8", 2, 1}}) {
    INFO("WT=" << wt);
    CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", wt}}, "SPLITK") == splitk);
    CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", wt}}, "PD") == pd);
  }
  CHECK(constant({{"N", "8192"}, {"K", "28672"}, {"WT", "u2"}}, "PD") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}}, "PD") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "2048"}, {"WT", "u4"}}, "SPLITK") == 1);
  CHECK(constant({{"N", "8192"}, {"K", "8192"}}, "SPLITK") == 8);
  CHECK(constant({{"N", "10240"}, {"K", "8192"}}, "SPLITK") == 6);
  CHECK(constant({{"N", "8192"}, {"K", "28672"}}, "SPLITK") == 8);
  CHECK(constant({{"N", "10240"}, {"K", "28672"}}, "SPLITK") == 6);
  CHECK(constant({{"N", "28672"}, {"K", "8192"}}, "SPLITK") == 2);
  // fewer tiles than SMs: eight splits however short the walks (32 tiles, 32 steps of K; 16
  // tiles, 8 steps)
  CHECK(constant({{"N", "1024"}, {"K", "4096"}}, "SPLITK") == 8);
  CHECK(constant({{"N", "512"}, {"K", "1024"}}, "SPLITK") == 8);
  // one atom only where N is not a multiple of 32 (or in the prefill kernel), two for every
  // weight type otherwise; 8-bit weights take steps of 4 x 16 k (KS = 4), or 2 x 16 k where
  // their tiles alone fill the GPU (more than 1024 tiles: N = 57344), the rest 8
  CHECK(constant({{"N", "1040"}, {"K", "4096"}}, "AN") == 1);
  CHECK(constant({{"N", "1040"}, {"K", "4096"}, {"WT", "i7"}}, "AN") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"PREFILL", "1"}}, "AN") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u5"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "i6"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "i7"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u8"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f8e4m3"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f4e2m1"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f3e1m1"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f5e2m2"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f6e3m2"}}, "AN") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f7e3m3"}}, "AN") == 2);
  // the occupancy request: 16 blocks per SM for every weight narrower than 8 bits
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u4"}}, "OCC") == 16);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f6e3m2"}}, "OCC") == 16);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u8"}}, "OCC") == 0);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f8e4m3"}}, "OCC") == 0);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"PREFILL", "1"}}, "OCC") == 0);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u8"}}, "KS") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f8e5m2"}}, "KS") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u8"}, {"AN", "1"}}, "KS") == 2);
  CHECK(constant({{"N", "32768"}, {"K", "8192"}, {"WT", "u8"}}, "KS") == 4);
  CHECK(constant({{"N", "28672"}, {"K", "8192"}, {"WT", "f8e4m3"}}, "KS") == 4);
  CHECK(constant({{"N", "8192"}, {"K", "28672"}, {"WT", "i8"}}, "KS") == 4);
  CHECK(constant({{"N", "57344"}, {"K", "512"}, {"WT", "u8"}}, "KS") == 4);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u8"}, {"PREFILL", "1"}}, "KS") == 8);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "i6"}}, "KS") == 8);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u4"}}, "KS") == 8);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f8e4m3"}}, "SPLITK") == 2);
  CHECK(constant({{"N", "28672"}, {"K", "8192"}, {"WT", "f8e4m3"}}, "SPLITK") == 2);
  // one atom per warp: 3584 column tiles at N = 57344 (no split), 512 at N = 8192 (four), 640
  // at N = 10240 (three)
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"AN", "1"}}, "SPLITK") == 1);
  CHECK(constant({{"N", "8192"}, {"K", "8192"}, {"AN", "1"}}, "SPLITK") == 4);
  CHECK(constant({{"N", "10240"}, {"K", "8192"}, {"WT", "i6"}, {"AN", "1"}}, "SPLITK") == 3);
  CHECK(constant({{"N", "10240"}, {"K", "8192"}, {"WT", "i6"}}, "SPLITK") == 6);
  // several warps per block: fewer, larger tiles (N = 8192, 4 warps: 64 tiles, fewer than the
  // SMs: eight splits)
  CHECK(constant({{"N", "8192"}, {"K", "8192"}, {"WARPS", "4"}}, "SPLITK") == 8);
  CHECK(constant({{"N", "8192"}, {"K", "28672"}, {"WARPS", "4"}}, "SPLITK") == 8);
  // m = 1 at N = 57344 (where the tiles fill the GPU): two blocks per tile for every weight type
  // but the 4- and 5-bit integers and u6 (one); where SPLITK splits by its rule, the same
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u1"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u2"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u3"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "i4"}}, "SPLIT1") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u4"}}, "SPLIT1") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u8"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u5"}}, "SPLIT1") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "i6"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u6"}}, "SPLIT1") == 1);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f6e3m2"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "u7"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "f4e2m1"}}, "SPLIT1") == 2);
  CHECK(constant({{"N", "57344"}, {"K", "8192"}, {"WT", "i6"}}, "SPLITK") == 2);
  CHECK(constant({{"N", "8192"}, {"K", "8192"}, {"WT", "u5"}}, "SPLIT1") == 8);
  // BMN < m <= SPLITM there: one block per tile where the decode loop places the pairs itself
  // (f16 subnormals, f4e2m1 and f6e3m2 with rearranged bits), SPLITK (two) for the JIT's
  // dequantisation (i4, i6, u8, and u4 into bf16); 1 < m <= BMN keep SPLITK
  for (auto [wt, at, w] :
       {std::tuple{"u1", "f16", 1}, std::tuple{"u3", "f16", 1}, std::tuple{"u4", "f16", 1},
        std::tuple{"u5", "f16", 1}, std::tuple{"f4e2m1", "f16", 1}, std::tuple{"f6e3m2", "f16", 1},
        std::tuple{"i4", "f16", 2}, std::tuple{"i6", "f16", 2}, std::tuple{"u8", "f16", 2},
        std::tuple{"u4", "bf16", 2}}) {
    INFO("WT=" << wt << " AT=" << at);
    std::map<std::string, std::string> d = {{"N", "57344"}, {"K", "8192"}, {"WT", wt}, {"AT", at}};
    CHECK(constant(d, "SPLITW") == w);
    CHECK(constant(d, "SPLITK") == 2);
  }
  // the 16-row body's blocks in the order of their tiles where its ranges (SPLITW) are at least
  // 4 of at least 16 steps (K = 28672: 224 steps in 8 ranges), but for i6; not with 8 ranges of
  // 8 steps (K = 8192) or 1 (N = 57344). The edges: N = 16384 has 512 tiles, so 4 ranges, of 16
  // steps at K = 8192 and of 15 at K = 7936; N = 20480 (640 tiles) 3 ranges, however long
  for (auto [wt, n, k, splitw, bo] :
       {std::tuple{"u4", "8192", "28672", 8, 1}, std::tuple{"f6e3m2", "8192", "28672", 8, 1},
        std::tuple{"u8", "8192", "28672", 8, 1}, std::tuple{"i6", "8192", "28672", 8, 0},
        std::tuple{"u4", "8192", "8192", 8, 0}, std::tuple{"u4", "57344", "8192", 1, 0},
        std::tuple{"u4", "16384", "8192", 4, 1}, std::tuple{"u4", "16384", "7936", 4, 0},
        std::tuple{"u4", "20480", "28672", 3, 0}}) {
    INFO("WT=" << wt << " N=" << n << " K=" << k);
    CHECK(constant({{"N", n}, {"K", k}, {"WT", wt}}, "SPLITW") == splitw);
    CHECK(constant({{"N", n}, {"K", k}, {"WT", wt}}, "BO") == bo);
  }
  // elsewhere SPLITW is SPLITK, an explicit one too
  CHECK(constant({{"N", "8192"}, {"K", "8192"}, {"WT", "u5"}}, "SPLITW") == 8);
  CHECK(constant({{"N", "64"}, {"K", "256"}, {"KS", "2"}, {"SPLITK", "3"}}, "SPLITW") == 3);
  // ... but not below 32 steps of K (16 per block)
  CHECK(constant({{"N", "57344"}, {"K", "2048"}, {"WT", "u5"}}, "SPLIT1") == 1);
  // no more blocks than steps of K (two steps of 128 here)
  CHECK(constant({{"N", "1024"}, {"K", "256"}}, "SPLITK") == 2);
  // an explicit SPLITK must be 1 to the steps of K (8 steps of 32 here; 3 is fine)
  CHECK(constant({{"N", "64"}, {"K", "256"}, {"KS", "2"}, {"SPLITK", "3"}}, "SPLITK") == 3);
  for (std::string bad : {"9", "16", "0", "-2"}) {
    INFO("SPLITK=" << bad);
    AssembleOptions options;
    options.defines = {{"N", "64"}, {"K", "256"}, {"KS", "2"}, {"SPLITK", bad}};
    Expected<Module> module = assemble(readProgram(), options);
    REQUIRE_FALSE(module.ok());
    CHECK(module.status().first().code == ErrorCode::Assert);
    CHECK(module.status().first().message.find("SPLITK is 1 to the") != std::string::npos);
  }
  // a chunk of the packed weights must divide a lane's bytes of a step (LB = 64 for u4 here)
  for (std::string bad : {"3", "48", "128"}) {
    INFO("LC=" << bad);
    AssembleOptions options;
    options.defines = {{"LC", bad}};
    Expected<Module> module = assemble(readProgram(), options);
    REQUIRE_FALSE(module.ok());
    CHECK(module.status().first().code == ErrorCode::Assert);
    CHECK(module.status().first().message.find("LC divides") != std::string::npos);
  }
}
