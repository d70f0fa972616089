// Every program under programs/gemm/ on the CPU interpreter against a plain C++ reference of the
// contract they share: matmul(AT* a_ptr, AT* b_ptr, CT* c_ptr, i32 m, i32 n, i32 k) computes
// C[m, n] = A[m, k] @ B[k, n], all row-major, for any m, n, k >= 1, with AT in {f16, bf16} and
// CT in {AT, f32}, and the FP8 cases (AT f8e4m3 or f8e5m2, CT f16, bf16 or f32) for the programs
// that declare FP8 in their header line "# AT in {...}" (without one a program is taken to support
// f16 and bf16). The inputs are multiples of 1/8 in [-2, 2] (exact in f16, bf16 and f8e4m3;
// multiples of 1/4 in [-2, 2] for f8e5m2), so every product and every partial sum up to the k used
// here is exact in f32: an f32 C must equal the reference exactly and a 16-bit C must be its
// correctly rounded value (round to nearest even).
#include "assembler/assembler.h"
#include "isa/scalar_eval.h"
#include "layout_strip.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#ifndef TILUSVM_SOURCE_DIR
#error "TILUSVM_SOURCE_DIR must point at the repository root"
#endif

namespace {

using namespace tilus;

/// f16 bits of v, rounded to nearest even (v is finite and within f16's normal range or 0).
uint16_t toF16(double v) {
  if (v == 0)
    return std::signbit(v) ? 0x8000 : 0;
  uint16_t sign = v < 0 ? 0x8000 : 0;
  double mag = std::fabs(v);
  int e = std::ilogb(mag);
  if (e < -14) // subnormal: multiples of 2^-24
    return uint16_t(sign | uint16_t(std::nearbyint(std::ldexp(mag, 24))));
  double frac = std::nearbyint(std::ldexp(mag, 10 - e)); // 1024..2048
  if (frac == 2048) {
    frac = 1024;
    ++e;
  }
  REQUIRE(e <= 15);
  return uint16_t(sign | ((e + 15) << 10) | (int(frac) - 1024));
}

/// bf16 bits of v, rounded to nearest even.
uint16_t toBf16(double v) {
  float f = float(v); // exact for the values of this test (f32 sums)
  REQUIRE(double(f) == v);
  uint32_t u;
  std::memcpy(&u, &f, 4);
  uint32_t rounded = u + 0x7FFF + ((u >> 16) & 1);
  return uint16_t(rounded >> 16);
}

/// OCP FP8 bits of v (f8e4m3: 3 mantissa bits, bias 7; f8e5m2: 2, bias 15); v must be exactly
/// representable and normal or 0.
uint8_t toFp8(double v, int mantissaBits, int bias) {
  if (v == 0)
    return 0;
  uint8_t sign = v < 0 ? 0x80 : 0;
  double mag = std::fabs(v);
  int e = std::ilogb(mag);
  double frac = std::ldexp(mag, mantissaBits - e) - std::ldexp(1.0, mantissaBits);
  REQUIRE(frac == std::floor(frac));
  REQUIRE(e + bias >= 1);
  return uint8_t(sign | ((e + bias) << mantissaBits) | int(frac));
}

std::string readFile(const std::filesystem::path &path) {
  std::ifstream in(path);
  REQUIRE(in.good());
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<std::filesystem::path> gemmPrograms() {
  std::vector<std::filesystem::path> files;
  for (const auto &entry :
       std::filesystem::directory_iterator(std::string(TILUSVM_SOURCE_DIR) + "/programs/gemm"))
    if (entry.path().extension() == ".tasm")
      files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  return files;
}

struct Shape {
  int64_t m, n, k;
};

/// The element types AT that the program declares in a header line "# AT in {f16, bf16, ...}";
/// f16 and bf16 when it has none.
std::vector<std::string> declaredTypes(const std::string &text) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    const std::string marker = "# AT in {";
    if (line.rfind(marker, 0) != 0)
      continue;
    size_t end = line.find('}');
    REQUIRE(end != std::string::npos);
    std::vector<std::string> types;
    std::istringstream list(line.substr(marker.size(), end - marker.size()));
    for (std::string t; std::getline(list, t, ',');) {
      t.erase(0, t.find_first_not_of(' '));
      t.erase(t.find_last_not_of(' ') + 1);
      types.push_back(t);
    }
    return types;
  }
  return {"f16", "bf16"};
}

/// The alignment that a program's preconditions require of n and k, declared in a header
/// line "# n and k: multiples of 8"; 1 when it has none.
int64_t declaredAlignment(const std::string &text) {
  const std::string marker = "# n and k: multiples of ";
  size_t at = text.find(marker);
  return at == std::string::npos ? 1 : std::stoll(text.substr(at + marker.size()));
}

/// The shapes a program accepts: n and k rounded up to its declared alignment.
std::vector<Shape> accepted(const std::filesystem::path &file, std::vector<Shape> shapes) {
  int64_t align = declaredAlignment(readFile(file));
  for (Shape &s : shapes) {
    s.n = (s.n + align - 1) / align * align;
    s.k = (s.k + align - 1) / align * align;
  }
  return shapes;
}

bool declares(const std::filesystem::path &file, const std::string &at) {
  std::vector<std::string> types = declaredTypes(readFile(file));
  return std::find(types.begin(), types.end(), at) != types.end();
}

void runGemm(const std::filesystem::path &file, const std::string &at, const std::string &ct,
             const std::vector<Shape> &shapes,
             const std::vector<std::pair<std::string, std::string>> &extra = {}) {
  INFO(file.filename().string() << " AT=" << at << " CT=" << ct);
  AssembleOptions options;
  options.fileName = "programs/gemm/" + file.filename().string();
  options.defines = {{"AT", at}, {"CT", ct}};
  for (const auto &[name, value] : extra) {
    INFO("-D " << name << "=" << value);
    options.defines[name] = value;
  }
  Expected<Module> module = assemble(testing::programUnderTest(readFile(file), options), options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  const VerifiedModule &vm = *verified;
  size_t index = vm.module.programs.size();
  for (size_t i = 0; i < vm.module.programs.size(); ++i)
    if (vm.module.programs[i].name == "matmul")
      index = i;
  REQUIRE(index < vm.module.programs.size());
  REQUIRE(vm.module.programs[index].params.size() == 6);

  const bool bf16 = at == "bf16";
  const bool e4m3 = at == "f8e4m3", e5m2 = at == "f8e5m2";
  const int aBytes1 = e4m3 || e5m2 ? 1 : 2;
  const int cBytes = ct == "f32" ? 4 : 2;
  for (const Shape &s : shapes) {
    INFO("m=" << s.m << " n=" << s.n << " k=" << s.k);
    std::mt19937 rng(unsigned(s.m * 1009 + s.n * 31 + s.k));
    std::vector<double> a(size_t(s.m * s.k)), b(size_t(s.k * s.n));
    std::vector<uint8_t> aBytes(a.size() * size_t(aBytes1)), bBytes(b.size() * size_t(aBytes1));
    auto fill = [&](std::vector<double> &v, std::vector<uint8_t> &bytes) {
      for (size_t i = 0; i < v.size(); ++i) {
        if (e5m2) {
          v[i] = double(int(rng() % 17) - 8) / 4.0;
          bytes[i] = toFp8(v[i], 2, 15);
        } else if (e4m3) {
          v[i] = double(int(rng() % 33) - 16) / 8.0;
          bytes[i] = toFp8(v[i], 3, 7);
        } else {
          v[i] = double(int(rng() % 33) - 16) / 8.0;
          uint16_t h = bf16 ? toBf16(v[i]) : toF16(v[i]);
          std::memcpy(&bytes[2 * i], &h, 2);
        }
      }
    };
    fill(a, aBytes);
    fill(b, bBytes);
    std::vector<uint8_t> c(size_t(s.m * s.n * cBytes), 0xAB);
    auto scalar = [](int64_t v) { return KernelArg{uint64_t(uint32_t(int32_t(v))), nullptr, 0}; };
    REQUIRE_OK(runOnCpu(vm, index,
                        {KernelArg{0, aBytes.data(), aBytes.size()},
                         KernelArg{0, bBytes.data(), bBytes.size()},
                         KernelArg{0, c.data(), c.size()}, scalar(s.m), scalar(s.n), scalar(s.k)}));
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = 0; j < s.n; ++j) {
        double want = 0;
        for (int64_t p = 0; p < s.k; ++p)
          want += a[size_t(i * s.k + p)] * b[size_t(p * s.n + j)];
        size_t e = size_t(i * s.n + j);
        INFO("C[" << i << ", " << j << "] expected " << want);
        if (cBytes == 4) {
          float got;
          std::memcpy(&got, &c[e * 4], 4);
          REQUIRE(double(got) == want);
        } else {
          uint16_t got;
          std::memcpy(&got, &c[e * 2], 2);
          REQUIRE(got == (ct == "bf16" ? toBf16(want) : toF16(want)));
        }
      }
  }
}

} // namespace

TEST_CASE("gemm: the reference's own rounding (f16, bf16) on hand-computed values") {
  CHECK(toF16(1.0) == 0x3C00);
  CHECK(toF16(-2.5) == 0xC100);
  CHECK(toF16(1.0 + 1.0 / 2048) == 0x3C00); // a tie rounds to even
  CHECK(toF16(1.0 + 3.0 / 2048) == 0x3C02); // a tie rounds to even (up)
  CHECK(toF16(2047.5) == 0x6800);           // 2048: the carry into the exponent
  CHECK(toBf16(1.0 + 1.0 / 256) == 0x3F80); // a tie rounds to even
  CHECK(toBf16(1.0 + 3.0 / 256) == 0x3F82);
  CHECK(toBf16(-3.0) == 0xC040);
  CHECK(toFp8(1.0, 3, 7) == 0x38);    // e4m3: exponent 7, mantissa 0
  CHECK(toFp8(-1.875, 3, 7) == 0xBF); // 1.111b
  CHECK(toFp8(0.125, 3, 7) == 0x20);  // 2^-3: exponent 4
  CHECK(toFp8(1.75, 2, 15) == 0x3F);  // e5m2: exponent 15, mantissa 11b
  CHECK(toFp8(-0.25, 2, 15) == 0xB4); // 2^-2: exponent 13
  CHECK(toFp8(2.0, 2, 15) == 0x40);
}

TEST_CASE("gemm: every program of programs/gemm that declares f16 or bf16, 16-bit and f32 C, "
          "ragged shapes") {
  std::vector<std::filesystem::path> files = gemmPrograms();
  REQUIRE(!files.empty());
  // one element; fewer rows, columns and k than one tile and one mma atom; several tiles with
  // partial ones at every edge (k not a multiple of the k step either)
  const std::vector<Shape> shapes = {{1, 1, 1}, {37, 45, 29}, {300, 130, 70}};
  for (const std::filesystem::path &file : files) {
    if (declares(file, "f16")) {
      runGemm(file, "f16", "f16", accepted(file, shapes));
      runGemm(file, "f16", "f32", accepted(file, {{300, 130, 70}}));
    }
    if (declares(file, "bf16")) {
      runGemm(file, "bf16", "bf16", accepted(file, {{37, 45, 29}, {300, 130, 70}}));
      runGemm(file, "bf16", "f32", accepted(file, {{1, 1, 1}, {37, 45, 29}}));
    }
  }
}

TEST_CASE("gemm: wgmma_tma.tasm's persistent tile loop with fewer blocks than output tiles") {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_tma.tasm";
  // SMS = 2: six tiles (3 x 2) on two blocks, three each, the loads of a block's next tile
  // issued during its previous one; SMS = 4: nine tiles (3 x 3, a partial tile at every edge)
  // in three rounds, so on three blocks of three tiles (the fewest blocks for three rounds); k of
  // one and of several k tiles
  runGemm(file, "f16", "f16", {{300, 264, 136}, {37, 48, 32}}, {{"SMS", "2"}});
  runGemm(file, "bf16", "f32", {{300, 520, 72}}, {{"SMS", "4"}});
  runGemm(file, "f16", "f16", {{300, 520, 200}}, {{"SMS", "4"}, {"PERSIST", "0"}});
}

TEST_CASE("gemm: wgmma_cluster.tasm's clusters of two blocks across a persistent tile loop") {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_cluster.tasm";
  // SMS = 4: two clusters for six cluster tiles (m = 600: three of 256 rows, the last block's
  // rows partly and wholly outside C; n = 264: two of 256 columns), three each, the B tiles
  // multicast by both blocks of each cluster; SMS = 2 with one cluster for two tiles; PERSIST = 0
  runGemm(file, "f16", "f16", {{600, 264, 136}, {37, 48, 32}}, {{"SMS", "4"}});
  runGemm(file, "bf16", "f32", {{300, 520, 72}}, {{"SMS", "2"}});
  runGemm(file, "f16", "f16", {{300, 264, 200}}, {{"PERSIST", "0"}});
}

TEST_CASE("gemm: wgmma_ws.tasm's split-K where the tiles leave blocks idle") {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_ws.tasm";
  // S = max(1, min(SPLITS, SMS / tiles, num_k / KMIN)) blocks per tile, each adding its part of
  // the k tiles into the workspace and the last one storing C. SMS = 8, KMIN = 1: four tiles
  // (2 x 2, partial at the edges) of 4 k tiles in S = 2 splits of two; one tile of 9 k tiles
  // (the last partial) in S = 8 splits of one or two; three tiles in S = 2 splits of 3 and 4
  // k tiles. The interpreter fails a launch that leaves the requires_clean workspace dirty.
  runGemm(file, "f16", "f16", {{200, 264, 200}, {37, 48, 520}}, {{"SMS", "8"}, {"KMIN", "1"}});
  runGemm(file, "bf16", "f32", {{300, 136, 440}}, {{"SMS", "6"}, {"KMIN", "3"}});
  // SPLITS = 3 caps S (one tile: min(3, 8, 9) = 3); SPLITS = 1: no split (the tiles loop on
  // two blocks as without split-K)
  runGemm(file, "f16", "f32", {{37, 48, 520}}, {{"SMS", "8"}, {"KMIN", "1"}, {"SPLITS", "3"}});
  runGemm(file, "f16", "f16", {{300, 264, 136}}, {{"SMS", "2"}, {"KMIN", "1"}, {"SPLITS", "1"}});
  // PERSIST = 0 (a block per tile and split, no cap): S = min(8, 8 / 1, 9) splits of one tile
  runGemm(file, "bf16", "bf16", {{37, 48, 520}}, {{"SMS", "8"}, {"KMIN", "1"}, {"PERSIST", "0"}});
  // BN = 128 (the tile for skinny shapes: six stages): 2 x 3 tiles in S = 2 splits of 4 and 5 k
  // tiles, the last row tile's 72 rows (160 of the 256 consumer threads hold rows of C, the
  // others skip their slots); f32 C (six stages beside the 32 KiB half tile)
  runGemm(file, "f16", "f16", {{200, 264, 520}}, {{"BN", "128"}, {"SMS", "12"}, {"KMIN", "1"}});
  runGemm(file, "bf16", "f32", {{37, 136, 200}}, {{"BN", "128"}, {"SMS", "4"}, {"KMIN", "1"}});
}

/// The grid of programs/gemm/wgmma_ws.tasm's `matmul` at m x n x k with the given -D constants.
int64_t wsGrid(const Shape &s, const std::vector<std::pair<std::string, std::string>> &extra = {}) {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_ws.tasm";
  AssembleOptions options;
  options.fileName = "programs/gemm/wgmma_ws.tasm";
  options.defines = {{"AT", "f16"}, {"CT", "f16"}};
  for (const auto &[name, value] : extra)
    options.defines[name] = value;
  Expected<Module> module = assemble(readFile(file), options);
  REQUIRE_OK(module);
  const Program *program = nullptr;
  for (const Program &p : module->programs)
    if (p.name == "matmul")
      program = &p;
  REQUIRE(program != nullptr);
  // a_ptr, b_ptr, c_ptr (16-byte aligned addresses), m, n, k
  const uint64_t values[6] = {0x10000,       0x20000,       0x30000,
                              uint64_t(s.m), uint64_t(s.n), uint64_t(s.k)};
  auto grid = evaluateGrid(*program, [&](VarId v) {
    for (size_t i = 0; i < program->params.size(); ++i)
      if (program->params[i] == v)
        return values[i];
    return uint64_t(0);
  });
  REQUIRE_OK(grid);
  CHECK((*grid)[1] == 1);
  CHECK((*grid)[2] == 1);
  return (*grid)[0];
}

TEST_CASE("gemm: wgmma_ws.tasm's persistent grid, the fewest blocks for its rounds of tiles") {
  // 128 x 256 tiles, SMS = 132: a grid of cdiv(tiles, cdiv(tiles, 132)) blocks where every tile
  // is whole (hand-computed), SMS with stream-K, one block per split where split-K shares tiles
  struct Case {
    Shape s;
    int64_t blocks;
  };
  const Case cases[] = {
      {{4096, 4096, 4096}, 128}, // 32 x 16 = 512 tiles, 4 rounds: 128 blocks of 4 (not 132)
      {{8192, 8192, 8192}, 128}, // 2048 tiles, 16 rounds: 128 of 16
      {{6144, 6144, 6144}, 128}, // 48 x 24 = 1152 tiles, 9 rounds: 128 of 9
      {{5000, 4096, 4096}, 128}, // 40 x 16 = 640 tiles (112 in a fifth round of 132): 128 of 5
      {{4096, 4096, 512}, 128},  // 512 tiles, 8 k tiles (no split-K, too short for stream-K)
      {{1000, 3000, 1232}, 96},  // 8 x 12 = 96 tiles, one round
      {{3072, 3072, 3072}, 132}, // 24 x 12 = 288 tiles, 24 in the last round: stream-K
      {{128, 8192, 8192}, 128},  // 32 tiles in S = min(8, 132 / 32, 128 / 8) = 4 splits
      {{4224, 4096, 4096}, 132}, // 33 x 16 = 528 tiles, exactly 4 rounds of 132
      {{4608, 4096, 4096}, 116}, // 36 x 16 = 576 tiles, 5 rounds: 112 blocks of 5, 4 of 4
  };
  for (const Case &c : cases) {
    INFO("m=" << c.s.m << " n=" << c.s.n << " k=" << c.s.k);
    CHECK(wsGrid(c.s) == c.blocks);
  }
  // small SMS on the interpreter: nine tiles (3 x 3, partial at the edges) on SMS = 8 take two
  // rounds, so 5 blocks, four with two tiles and one with one; twelve tiles (6 x 2) on SMS = 5
  // take three rounds: 4 blocks of three; PERSIST = 0: a block per tile
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_ws.tasm";
  CHECK(wsGrid({300, 520, 136}, {{"SMS", "8"}, {"STREAMK", "0"}}) == 5);
  CHECK(wsGrid({700, 264, 200}, {{"SMS", "5"}, {"STREAMK", "0"}}) == 4);
  CHECK(wsGrid({300, 520, 136}, {{"SMS", "8"}, {"PERSIST", "0"}}) == 9);
  runGemm(file, "f16", "f16", {{300, 520, 136}}, {{"SMS", "8"}, {"STREAMK", "0"}});
  runGemm(file, "bf16", "f32", {{700, 264, 200}}, {{"SMS", "5"}, {"STREAMK", "0"}});
}

TEST_CASE("gemm: wgmma_ws.tasm's stream-K where the last round of tiles leaves blocks idle") {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_ws.tasm";
  // More tiles than SMS blocks, not a multiple of SMS: the last SMS + tiles % SMS tiles' k tiles
  // in even ranges, one per block, a tile's two parts summed by the block that draws its second
  // ticket. SMS = 4, six tiles (3 x 2, partial at the edges) of 9 k tiles (the last partial):
  // all six shared out, 13 or 14 k tiles per block (tiles 1 and 4 in two parts, 4 + 5 k tiles);
  // SMS = 2, nine tiles of 3 k tiles: six whole tiles after tiles 0-2 in ranges of 4 and 5 k
  // tiles (tile 1 in two parts); SMS = 5, twelve tiles of 4 k tiles: five whole, seven shared
  // in ranges of 5 or 6 (f32 C, the last row tile of 60 rows)
  runGemm(file, "f16", "f16", {{300, 264, 520}}, {{"SMS", "4"}, {"SKMIN", "1"}, {"SKFILL", "1"}});
  runGemm(file, "f16", "f16", {{300, 520, 136}}, {{"SMS", "2"}, {"SKMIN", "1"}, {"SKFILL", "1"}});
  runGemm(file, "bf16", "f32", {{700, 264, 200}}, {{"SMS", "5"}, {"SKMIN", "1"}, {"SKFILL", "1"}});
  // the default SKFILL = 4: nine tiles (3 x 3) on eight blocks (one busy in the last round)
  // shared out, 3 k tiles each, in ranges of 3 or 4
  runGemm(file, "f16", "f16", {{300, 520, 136}}, {{"SMS", "8"}, {"SKMIN", "1"}});
  // SKMIN above num_k and STREAMK = 0: the same shape as whole tiles in rounds
  runGemm(file, "f16", "f16", {{300, 264, 520}}, {{"SMS", "4"}, {"SKMIN", "10"}, {"SKFILL", "1"}});
  runGemm(file, "bf16", "bf16", {{300, 264, 520}},
          {{"SMS", "4"}, {"SKMIN", "1"}, {"STREAMK", "0"}});
}

TEST_CASE("gemm: wgmma_fp8.tasm's producer and consumers across a persistent tile loop") {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_fp8.tasm";
  // SMS = 2: six tiles (3 x 2: m = 300, n = 264 on 256-column tiles) on two blocks, the
  // producer's stages running ahead into the block's next tile; k of one k tile (100) and of
  // three (300, the last partial); n = 263 takes the path of narrower accesses
  runGemm(file, "f8e4m3", "f16", {{300, 264, 300}, {300, 264, 100}, {300, 263, 300}},
          {{"SMS", "2"}});
  // n and k multiples of 16: A and B by TMA, B^T read from B's N-major stage into the wgmma's
  // register operand (m, n and k still leave partial tiles; k = 144: two k tiles, k = 16: one
  // short one)
  runGemm(file, "f8e4m3", "f16", {{300, 272, 304}, {37, 528, 144}, {130, 16, 16}}, {{"SMS", "2"}});
  runGemm(file, "f8e5m2", "f32", {{150, 512, 256}}, {{"SMS", "3"}});
  // the least stages the producer allows (3), and 16-bit AT (k tiles of 64) with SMS = 4 (nine
  // tiles in three rounds on three blocks)
  runGemm(file, "f8e5m2", "f32", {{300, 264, 300}}, {{"SMS", "2"}, {"STAGES", "3"}});
  runGemm(file, "bf16", "bf16", {{300, 520, 200}}, {{"SMS", "4"}});
  runGemm(file, "f16", "f32", {{300, 520, 72}}, {{"SMS", "4"}, {"PERSIST", "0"}});
}

TEST_CASE("gemm: wgmma_cluster.tasm's split-K where the cluster tiles leave blocks idle") {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_cluster.tasm";
  // S = max(1, min(SPLITS, SMS / (CL tiles), num_k / KMIN)) clusters per cluster tile (KMIN =
  // 1): SMS = 16, four cluster tiles of 256 x 256 (m = 300: the second row tile of the lower
  // cluster tile partly, of 44 rows) in S = 2 splits of 4 and 5 k tiles; one cluster tile in S = 8
  // splits whose second block's rows all lie past m = 37 (its slots empty, its part zero);
  // SPLITS = 1
  runGemm(file, "f16", "f16", {{300, 264, 520}}, {{"SMS", "16"}, {"KMIN", "1"}});
  runGemm(file, "bf16", "f32", {{37, 48, 520}}, {{"SMS", "16"}, {"KMIN", "1"}});
  runGemm(file, "f16", "f16", {{37, 48, 520}}, {{"SMS", "16"}, {"KMIN", "1"}, {"SPLITS", "1"}});
}

TEST_CASE("gemm: wgmma_fp8.tasm's split-K where the tiles leave blocks idle") {
  const std::filesystem::path file =
      std::filesystem::path(TILUSVM_SOURCE_DIR) / "programs/gemm/wgmma_fp8.tasm";
  // S = max(1, min(SPLITS, SMS / tiles, num_k / KMIN)) blocks per tile, each storing its f32
  // part into its own workspace slot and the last one summing them and storing C. SMS = 8,
  // KMIN = 1: four tiles (2 x 2) of 5 FP8 k tiles (128 each, the last partial) in S = 2 splits,
  // by TMA (n and k multiples of 16) and by cp.async and narrow loads (n odd); one tile of 9 k
  // tiles in S = 8 splits; 16-bit AT (64 per k tile) with rows of padding at m = 37 (the threads
  // without rows of C skip their slots); SPLITS = 1 and PERSIST = 0
  runGemm(file, "f8e4m3", "f16", {{200, 272, 528}, {200, 263, 528}}, {{"SMS", "8"}, {"KMIN", "1"}});
  runGemm(file, "f8e5m2", "f32", {{37, 48, 1040}}, {{"SMS", "8"}, {"KMIN", "1"}});
  runGemm(file, "bf16", "bf16", {{37, 136, 440}}, {{"SMS", "4"}, {"KMIN", "1"}});
  runGemm(file, "f8e4m3", "f16", {{37, 48, 1040}}, {{"SMS", "8"}, {"KMIN", "1"}, {"SPLITS", "1"}});
  runGemm(file, "f8e4m3", "bf16", {{37, 48, 1040}},
          {{"SMS", "8"}, {"KMIN", "1"}, {"PERSIST", "0"}});
}

TEST_CASE("gemm: a program that declares aligned n and k refuses other shapes at launch") {
  int programs = 0;
  for (const std::filesystem::path &file : gemmPrograms()) {
    if (declaredAlignment(readFile(file)) == 1)
      continue;
    ++programs;
    INFO(file.filename().string());
    AssembleOptions options;
    options.defines = {{"AT", "f16"}, {"CT", "f16"}};
    Expected<Module> module = assemble(readFile(file), options);
    REQUIRE_OK(module);
    Expected<VerifiedModule> vm = checkModule(std::move(module).value());
    REQUIRE_OK(vm);
    std::vector<uint16_t> a(64 * 64), b(64 * 64), c(64 * 64);
    auto scalar = [](int64_t v) { return KernelArg{uint64_t(uint32_t(int32_t(v))), nullptr, 0}; };
    for (auto [n, k] : {std::pair{64, 30}, std::pair{30, 64}}) {
      Status st =
          runOnCpu(*vm, 0,
                   {KernelArg{0, a.data(), a.size() * 2}, KernelArg{0, b.data(), b.size() * 2},
                    KernelArg{0, c.data(), c.size() * 2}, scalar(16), scalar(n), scalar(k)});
      CHECK(st.code() == ErrorCode::Assert);
    }
  }
  CHECK(programs >= 1); // programs/gemm/wgmma_tma.tasm
}

TEST_CASE(
    "gemm: the programs of programs/gemm that declare FP8, f8e4m3 and f8e5m2, ragged shapes") {
  // one element; fewer rows, columns and k than a tile and an atom (rows of an odd length: not
  // whole 32-bit words); several tiles in m, n and k with partial ones at every edge, rows of
  // whole words (n % 4 == 0) but not of 16 bytes, and rows of an odd length
  const std::vector<Shape> shapes = {{1, 1, 1}, {37, 45, 29}, {150, 264, 300}, {130, 301, 260}};
  int programs = 0;
  for (const std::filesystem::path &file : gemmPrograms()) {
    if (declares(file, "f8e4m3")) {
      ++programs;
      runGemm(file, "f8e4m3", "f16", shapes);
      runGemm(file, "f8e4m3", "f32", {{1, 1, 1}, {150, 264, 300}});
      runGemm(file, "f8e4m3", "bf16", {{37, 45, 29}, {130, 301, 260}});
    }
    if (declares(file, "f8e5m2")) {
      runGemm(file, "f8e5m2", "f16", {{37, 45, 29}, {150, 264, 300}});
      runGemm(file, "f8e5m2", "f32", {{1, 1, 1}, {130, 301, 260}});
    }
  }
  CHECK(programs >= 1); // programs/gemm/wgmma_fp8.tasm
}
