// End-to-end program tests on the CPU interpreter: assemble a program from programs/, check it,
// run it, and compare with a plain C++ reference written here (packing, decoding and the
// matrix product are re-implemented independently of the VM).
#include "assembler/assembler.h"
#include "layout_strip.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#ifndef TILUSVM_SOURCE_DIR
#error "TILUSVM_SOURCE_DIR must point at the repository root"
#endif

namespace {

using namespace tilus;

std::string readProgram(const std::string &relative) {
  std::ifstream in(std::string(TILUSVM_SOURCE_DIR) + "/" + relative);
  REQUIRE_MESSAGE(in.good(), "cannot open " << relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

VerifiedModule build(const std::string &relative, std::map<std::string, std::string> defines) {
  AssembleOptions options;
  options.fileName = relative;
  options.defines = std::move(defines);
  Expected<Module> module =
      assemble(testing::programUnderTest(readProgram(relative), options), options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  return std::move(verified).value();
}

size_t programIndex(const VerifiedModule &m, const std::string &name) {
  for (size_t i = 0; i < m.module.programs.size(); ++i)
    if (m.module.programs[i].name == name)
      return i;
  FAIL("no program " << name);
  return 0;
}

// ---- independent storage reference -------------------------------------------------------

// Writes the low `bits` bits of `value` at element `index` of a bit-packed array (ISA section 2:
// element k occupies stream bits [k*bits, (k+1)*bits), least significant bit first).
void putPacked(std::vector<uint8_t> &bytes, int64_t index, int bits, uint32_t value) {
  for (int b = 0; b < bits; ++b) {
    int64_t bit = index * bits + b;
    uint8_t mask = uint8_t(1u << (bit % 8));
    if ((value >> b) & 1u)
      bytes[size_t(bit / 8)] |= mask;
    else
      bytes[size_t(bit / 8)] &= uint8_t(~mask);
  }
}

// IEEE binary16 / bfloat16 decoding by the textbook formula.
double halfToDouble(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  double v = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}
double bf16ToDouble(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
// Encodes k/8 for |k| <= 16 exactly (no rounding needed for these values).
uint16_t eighthsToHalf(int k) {
  if (k == 0)
    return 0;
  uint16_t sign = k < 0 ? 0x8000 : 0;
  int mag = std::abs(k); // value = mag * 2^-3
  int e = 0;
  while ((mag >> e) > 1)
    ++e; // mag in [2^e, 2^(e+1))
  int man = (mag << (10 - e)) & 0x3ff;
  return uint16_t(sign | ((e - 3 + 15) << 10) | man);
}
uint16_t eighthsToBf16(int k) {
  float f = float(k) / 8.0f;
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return uint16_t(u >> 16); // exact: k/8 needs at most 5 significant bits
}

struct Matmul {
  int64_t m, n, k;
  std::vector<int> aEighths; // A[m, k] = aEighths / 8
  std::vector<int> b;        // B[k, n] integer weights
  std::vector<double> reference() const {
    std::vector<double> c(size_t(m * n), 0.0);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = 0;
        for (int64_t p = 0; p < k; ++p)
          s += aEighths[size_t(i * k + p)] / 8.0 * b[size_t(p * n + j)];
        c[size_t(i * n + j)] = s;
      }
    return c;
  }
};

Matmul randomMatmul(int64_t m, int64_t n, int64_t k, int weightMin, int weightMax, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> a(-16, 16), w(weightMin, weightMax);
  Matmul mm{m, n, k, {}, {}};
  for (int64_t i = 0; i < m * k; ++i)
    mm.aEighths.push_back(a(rng));
  for (int64_t i = 0; i < k * n; ++i)
    mm.b.push_back(w(rng));
  return mm;
}

std::vector<uint8_t> packWeights(const Matmul &mm, int bits) {
  std::vector<uint8_t> bytes(size_t((mm.k * mm.n * bits + 7) / 8), 0);
  for (int64_t i = 0; i < mm.k * mm.n; ++i)
    putPacked(bytes, i, bits, uint32_t(mm.b[size_t(i)]) & ((1u << bits) - 1));
  return bytes;
}

KernelArg hostArg(std::vector<uint8_t> &bytes) { return KernelArg{0, bytes.data(), bytes.size()}; }

// |out - ref| within half an ulp of a format with `significandBits` bits (plus one ulp slack
// for the f32 accumulation order, which is exact here: every partial sum is a multiple of 1/8
// below 2^15).
void checkClose(const std::vector<double> &out, const std::vector<double> &ref,
                int significandBits) {
  REQUIRE(out.size() == ref.size());
  for (size_t i = 0; i < ref.size(); ++i) {
    double tol = std::ldexp(std::fabs(ref[i]), -significandBits) + 1e-9;
    INFO("element " << i << ": got " << out[i] << ", expected " << ref[i]);
    REQUIRE(std::fabs(out[i] - ref[i]) <= tol);
  }
}

void runPaperStyle(const std::string &file, int64_t size) {
  std::string s = std::to_string(size);
  VerifiedModule vm = build(file, {{"M", s}, {"N", s}, {"K", s}});
  Matmul mm = randomMatmul(size, size, size, -32, 31, 7);
  std::vector<uint8_t> a(size_t(size * size * 2)), b = packWeights(mm, 6);
  for (int64_t i = 0; i < size * size; ++i) {
    uint16_t h = eighthsToHalf(mm.aEighths[size_t(i)]);
    std::memcpy(&a[size_t(i * 2)], &h, 2);
  }
  std::vector<uint8_t> transformed(size_t(size * size * 6 / 8), 0xAB),
      c(size_t(size * size * 2), 0xFF);
  REQUIRE_OK(runOnCpu(vm, programIndex(vm, "transform_b"), {hostArg(b), hostArg(transformed)}));
  REQUIRE_OK(
      runOnCpu(vm, programIndex(vm, "matmul"), {hostArg(a), hostArg(transformed), hostArg(c)}));
  std::vector<double> out;
  for (int64_t i = 0; i < size * size; ++i) {
    uint16_t h;
    std::memcpy(&h, &c[size_t(i * 2)], 2);
    out.push_back(halfToDouble(h));
  }
  checkClose(out, mm.reference(), 11);
}

// A version 1.0 .npy file (NumPy format spec): magic, version, header length, a header dict
// padded with spaces to a multiple of 64 bytes and ended by a newline, then the data.
void writeNpy(const std::string &path, const std::string &descr, const std::vector<uint8_t> &data,
              size_t count) {
  std::string header = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" +
                       std::to_string(count) + ",), }";
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::ofstream out(path, std::ios::binary);
  out.write("\x93NUMPY\x01\x00", 8);
  uint16_t len = uint16_t(header.size());
  out.write(reinterpret_cast<const char *>(&len), 2);
  out << header;
  out.write(reinterpret_cast<const char *>(data.data()), std::streamsize(data.size()));
}

std::vector<uint8_t> readNpyData(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  REQUIRE(bytes.size() >= 10);
  REQUIRE(std::memcmp(bytes.data(), "\x93NUMPY", 6) == 0);
  size_t headerLen = bytes[8] | (size_t(bytes[9]) << 8);
  return std::vector<uint8_t>(bytes.begin() + long(10 + headerLen), bytes.end());
}

int runTool(const std::string &command) {
  INFO(command);
  return std::system((command + " > /dev/null").c_str());
}

} // namespace

TEST_CASE("paper FP16 x INT6 matmul (M = N = K = 64) matches the C++ reference") {
  runPaperStyle("programs/paper_matmul_f16_i6.tasm", 64);
}

TEST_CASE("tilus-asm and vm-run: the paper matmul at M = N = K = 64 on the cpu") {
  const int64_t size = 64;
  std::string dir = "/tmp/tilusvm_paper_cli_" + std::to_string(getpid());
  REQUIRE(std::system(("mkdir -p " + dir).c_str()) == 0);
  Matmul mm = randomMatmul(size, size, size, -32, 31, 17);
  std::vector<uint8_t> a(size_t(size * size * 2));
  for (int64_t i = 0; i < size * size; ++i) {
    uint16_t h = eighthsToHalf(mm.aEighths[size_t(i)]);
    std::memcpy(&a[size_t(i * 2)], &h, 2);
  }
  std::vector<uint8_t> b = packWeights(mm, 6);
  writeNpy(dir + "/a.npy", "<f2", a, size_t(size * size));
  writeNpy(dir + "/b.npy", "|u1", b, b.size()); // sub-byte inputs travel as packed bytes
  std::string source = std::string(TILUSVM_SOURCE_DIR) + "/programs/paper_matmul_f16_i6.tasm";
#ifdef TILUSVM_STRIP_LAYOUTS
  // tilus-asm --strip-layouts writes the program without its performance-only layouts
  REQUIRE(runTool(std::string(TILUSVM_TILUS_ASM) + " --strip-layouts " + source +
                  " -D M=64 -D N=64 -D K=64 -o " + dir + "/stripped.tasm") == 0);
  source = dir + "/stripped.tasm";
#endif
  std::string tbc = dir + "/paper.tbc";
  REQUIRE(runTool(std::string(TILUSVM_TILUS_ASM) + " " + source + " -D M=64 -D N=64 -D K=64 -o " +
                  tbc) == 0);
  std::string run = std::string(TILUSVM_VM_RUN) + " " + tbc + " --device cpu";
  REQUIRE(runTool(run + " --kernel transform_b --arg b_ptr=@" + dir + "/b.npy" +
                  " --arg transformed_b_ptr=zeros --save transformed_b_ptr=" + dir + "/tb.npy") ==
          0);
  REQUIRE(runTool(run + " --kernel matmul --arg a_ptr=@" + dir +
                  "/a.npy --arg transformed_b_ptr=@" + dir +
                  "/tb.npy --arg c_ptr=zeros --save c_ptr=" + dir + "/c.npy") == 0);
  std::vector<uint8_t> c = readNpyData(dir + "/c.npy");
  REQUIRE(c.size() == size_t(size * size * 2));
  std::vector<double> out;
  for (int64_t i = 0; i < size * size; ++i) {
    uint16_t h;
    std::memcpy(&h, &c[size_t(i * 2)], 2);
    out.push_back(halfToDouble(h));
  }
  checkClose(out, mm.reference(), 11);
  std::system(("rm -rf " + dir).c_str());
}

TEST_CASE("variant: 16x16 warp tiles, FP16 x INT6") {
  runPaperStyle("programs/variants/matmul_f16_i6_16x16.tasm", 64);
}

TEST_CASE("variant: two warps with a replicated B fragment, BF16 x U4") {
  const int64_t M = 64, N = 32, K = 48;
  VerifiedModule vm =
      build("programs/variants/matmul_bf16_u4_2warps.tasm",
            {{"M", std::to_string(M)}, {"N", std::to_string(N)}, {"K", std::to_string(K)}});
  Matmul mm = randomMatmul(M, N, K, 0, 15, 11);
  std::vector<uint8_t> a(size_t(M * K * 2)), b = packWeights(mm, 4), c(size_t(M * N * 2), 0xFF);
  for (int64_t i = 0; i < M * K; ++i) {
    uint16_t h = eighthsToBf16(mm.aEighths[size_t(i)]);
    std::memcpy(&a[size_t(i * 2)], &h, 2);
  }
  REQUIRE_OK(runOnCpu(vm, 0, {hostArg(a), hostArg(b), hostArg(c)}));
  std::vector<double> out;
  for (int64_t i = 0; i < M * N; ++i) {
    uint16_t h;
    std::memcpy(&h, &c[size_t(i * 2)], 2);
    out.push_back(bf16ToDouble(h));
  }
  checkClose(out, mm.reference(), 8);
}

TEST_CASE("variant: per-thread Dot without tensor cores, F32 x U2") {
  const int64_t M = 32, N = 24, K = 32;
  VerifiedModule vm =
      build("programs/variants/matmul_f32_u2.tasm",
            {{"M", std::to_string(M)}, {"N", std::to_string(N)}, {"K", std::to_string(K)}});
  Matmul mm = randomMatmul(M, N, K, 0, 3, 13);
  std::vector<uint8_t> a(size_t(M * K * 4)), b = packWeights(mm, 2), c(size_t(M * N * 4), 0xFF);
  for (int64_t i = 0; i < M * K; ++i) {
    float f = float(mm.aEighths[size_t(i)]) / 8.0f;
    std::memcpy(&a[size_t(i * 4)], &f, 4);
  }
  REQUIRE_OK(runOnCpu(vm, 0, {hostArg(a), hostArg(b), hostArg(c)}));
  std::vector<double> out;
  for (int64_t i = 0; i < M * N; ++i) {
    float f;
    std::memcpy(&f, &c[size_t(i * 4)], 4);
    out.push_back(f);
  }
  checkClose(out, mm.reference(), 24);
}

// C = A @ B with both inputs multiples of 1/8 in [-2, 2] (exact in f16); every partial sum is a
// multiple of 1/64 of magnitude at most 4k (under 2^18 / 64 here), so the f32 accumulation is
// exact and only the final f16
// rounding remains.
std::vector<double> eighthsMatmulReference(const std::vector<int> &a, const std::vector<int> &b,
                                           int64_t m, int64_t n, int64_t k) {
  std::vector<double> c(size_t(m * n), 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < k; ++p)
        s += a[size_t(i * k + p)] / 8.0 * (b[size_t(p * n + j)] / 8.0);
      c[size_t(i * n + j)] = s;
    }
  return c;
}

TEST_CASE("matmul_f16_large_tile: partial 128x128 tiles (m = 150, n = 136, k = 72)") {
  const int64_t M = 150, N = 136, K = 72;
  VerifiedModule vm = build("programs/matmul_f16_large_tile.tasm", {});
  std::mt19937 rng(17);
  std::uniform_int_distribution<int> eighths(-16, 16);
  std::vector<int> ae, be;
  std::vector<uint8_t> a(size_t(M * K * 2)), b(size_t(K * N * 2)), c(size_t(M * N * 2), 0xFF);
  for (int64_t i = 0; i < M * K; ++i) {
    ae.push_back(eighths(rng));
    uint16_t h = eighthsToHalf(ae.back());
    std::memcpy(&a[size_t(i * 2)], &h, 2);
  }
  for (int64_t i = 0; i < K * N; ++i) {
    be.push_back(eighths(rng));
    uint16_t h = eighthsToHalf(be.back());
    std::memcpy(&b[size_t(i * 2)], &h, 2);
  }
  auto scalar = [](int64_t v) { return KernelArg{uint64_t(uint32_t(int32_t(v))), nullptr, 0}; };
  REQUIRE_OK(
      runOnCpu(vm, 0, {hostArg(a), hostArg(b), hostArg(c), scalar(M), scalar(N), scalar(K)}));
  std::vector<double> out;
  for (int64_t i = 0; i < M * N; ++i) {
    uint16_t h;
    std::memcpy(&h, &c[size_t(i * 2)], 2);
    out.push_back(halfToDouble(h));
  }
  checkClose(out, eighthsMatmulReference(ae, be, M, N, K), 11);
}
