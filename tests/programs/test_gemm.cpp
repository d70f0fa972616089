// Every program under programs/gemm/ on the CPU interpreter against a plain C++ reference of the
// contract they share: matmul(AT* a_ptr, AT* b_ptr, CT* c_ptr, i32 m, i32 n, i32 k) computes
// C[m, n] = A[m, k] @ B[k, n], all row-major, for any m, n, k >= 1, with AT in {f16, bf16} and
// CT in {AT, f32}. The inputs are multiples of 1/8 in [-2, 2] (exact in f16 and bf16), so every
// product and every partial sum up to the k used here is exact in f32: an f32 C must equal the
// reference exactly and a 16-bit C must be its correctly rounded value (round to nearest even).
#include "assembler/assembler.h"
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

void runGemm(const std::filesystem::path &file, const std::string &at, const std::string &ct,
             const std::vector<Shape> &shapes) {
  INFO(file.filename().string() << " AT=" << at << " CT=" << ct);
  AssembleOptions options;
  options.fileName = "programs/gemm/" + file.filename().string();
  options.defines = {{"AT", at}, {"CT", ct}};
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
  const int cBytes = ct == "f32" ? 4 : 2;
  for (const Shape &s : shapes) {
    INFO("m=" << s.m << " n=" << s.n << " k=" << s.k);
    std::mt19937 rng(unsigned(s.m * 1009 + s.n * 31 + s.k));
    std::vector<double> a(size_t(s.m * s.k)), b(size_t(s.k * s.n));
    std::vector<uint8_t> aBytes(a.size() * 2), bBytes(b.size() * 2);
    auto fill = [&](std::vector<double> &v, std::vector<uint8_t> &bytes) {
      for (size_t i = 0; i < v.size(); ++i) {
        v[i] = double(int(rng() % 33) - 16) / 8.0;
        uint16_t h = bf16 ? toBf16(v[i]) : toF16(v[i]);
        std::memcpy(&bytes[2 * i], &h, 2);
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
}

TEST_CASE("gemm: every program of programs/gemm, f16 and bf16, 16-bit and f32 C, ragged shapes") {
  std::vector<std::filesystem::path> files = gemmPrograms();
  REQUIRE(!files.empty());
  // one element; fewer rows, columns and k than one tile and one mma atom; several tiles with
  // partial ones at every edge (k not a multiple of the k step either)
  const std::vector<Shape> shapes = {{1, 1, 1}, {37, 45, 29}, {300, 130, 70}};
  for (const std::filesystem::path &file : files) {
    runGemm(file, "f16", "f16", shapes);
    runGemm(file, "bf16", "bf16", {{37, 45, 29}, {300, 130, 70}});
    runGemm(file, "f16", "f32", {{300, 130, 70}});
    runGemm(file, "bf16", "f32", {{1, 1, 1}, {37, 45, 29}});
  }
}
