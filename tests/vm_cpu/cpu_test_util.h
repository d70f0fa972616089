// Helpers for the CPU interpreter tests: assemble and check a program from text, bind host
// buffers and scalars as kernel arguments, run, and independent reference codecs (IEEE half
// and bfloat16 by the textbook formulas, bit packing of ISA section 2) that share no code with
// the VM.
#pragma once

#include "assembler/assembler.h"
#include "layout_strip.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#ifndef TILUSVM_SOURCE_DIR
#error "TILUSVM_SOURCE_DIR must point at the repository root"
#endif

namespace cputest {

using namespace tilus;

inline std::string readSource(const std::string &relative) {
  std::ifstream in(std::string(TILUSVM_SOURCE_DIR) + "/" + relative);
  REQUIRE_MESSAGE(in.good(), "cannot open " << relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

inline std::string replaceAll(std::string s, const std::string &from, const std::string &to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
  return s;
}

inline VerifiedModule build(const std::string &source,
                            std::map<std::string, std::string> defines = {},
                            const std::string &fileName = "test.tasm") {
  AssembleOptions options;
  options.fileName = fileName;
  options.defines = std::move(defines);
  options.keepSource = true; // diagnostics then name the file
  Expected<Module> module = assemble(testing::programUnderTest(source, options), options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  return std::move(verified).value();
}

inline size_t programIndex(const VerifiedModule &m, const std::string &name) {
  for (size_t i = 0; i < m.module.programs.size(); ++i)
    if (m.module.programs[i].name == name)
      return i;
  FAIL("no program " << name);
  return 0;
}

template <typename T> KernelArg bufferArg(std::vector<T> &v) {
  KernelArg a;
  a.pointer = v.data();
  a.byteSize = v.size() * sizeof(T);
  return a;
}

inline KernelArg i32Arg(int32_t v) {
  KernelArg a;
  a.scalarBits = uint64_t(uint32_t(v));
  return a;
}

inline KernelArg f32Arg(float v) {
  KernelArg a;
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  a.scalarBits = bits;
  return a;
}

inline CpuRunOptions options(bool checked = true, int workers = 0, std::ostream *out = nullptr) {
  CpuRunOptions o;
  o.checked = checked;
  o.numWorkers = workers;
  o.printStream = out;
  return o;
}

/// Run the module's only (or named) program.
inline Status run(const VerifiedModule &m, const KernelArgs &args,
                  const CpuRunOptions &o = options(), const std::string &name = "") {
  return runOnCpu(m, name.empty() ? 0 : programIndex(m, name), args, o);
}

/// The value of `expr`, an i32 constant expression of `source` (its constants, `bits(T)`, ...)
/// under `defines`, read by a probe kernel appended to the source and run on the interpreter:
/// for tests of the tuning rules of the library's programs.
inline int32_t programConstant(const std::string &source,
                               std::map<std::string, std::string> defines, const std::string &expr,
                               const std::string &fileName = "test.tasm") {
  std::string text = source +
                     "\ndef probe<1>(i32* out) threads=32:\n"
                     "    StoreGlobal(AllocateRegister(i32, layout=replicate(32), init=" +
                     expr + "), ViewGlobal(out, shape=[1]), offset=[0])\n";
  VerifiedModule m = build(text, std::move(defines), fileName);
  std::vector<int32_t> out(1, -1);
  REQUIRE_OK(run(m, {bufferArg(out)}, options(), "probe"));
  return out[0];
}

// ---- independent references ----------------------------------------------------------------

inline double halfToDouble(uint16_t h) {
  int sign = h >> 15, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 31)
    return man ? NAN : (sign ? -INFINITY : INFINITY);
  double v = exp == 0 ? std::ldexp(man, -24) : std::ldexp(1024 + man, exp - 25);
  return sign ? -v : v;
}

/// Round to nearest even into an IEEE-style binary format with E exponent and M mantissa bits
/// (textbook: scale to an integer significand, round, renormalise; overflow gives inf).
inline uint32_t doubleToIeee(double v, int E, int M) {
  uint32_t sign = std::signbit(v) ? 1u << (E + M) : 0;
  uint32_t expAllOnes = ((1u << E) - 1) << M;
  if (std::isnan(v))
    return expAllOnes | (1u << (M - 1));
  v = std::fabs(v);
  if (std::isinf(v))
    return sign | expAllOnes;
  int bias = (1 << (E - 1)) - 1, minExp = 1 - bias;
  if (v < std::ldexp(1.0, minExp)) // subnormal: units of 2^(minExp - M)
    return sign | uint32_t(std::nearbyint(std::ldexp(v, M - minExp)));
  int e;
  std::frexp(v, &e); // v = m * 2^e, m in [0.5, 1)
  int exponent = e - 1;
  double r = std::nearbyint(std::ldexp(v, M - exponent)); // in [2^M, 2^(M+1)]
  if (r == std::ldexp(1.0, M + 1)) {
    r = std::ldexp(1.0, M);
    ++exponent;
  }
  if (exponent + bias >= (1 << E) - 1)
    return sign | expAllOnes;
  return sign | uint32_t(exponent + bias) << M | (uint32_t(r) - (1u << M));
}

inline uint16_t doubleToHalf(double v) { return uint16_t(doubleToIeee(v, 5, 10)); }
inline uint16_t doubleToBf16(double v) { return uint16_t(doubleToIeee(v, 8, 7)); }

inline double bf16ToDouble(uint16_t h) {
  uint32_t u = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

/// Element k of a bit-packed array (ISA section 2), by single bits.
inline uint32_t getPacked(const std::vector<uint8_t> &bytes, int64_t k, int bits) {
  uint32_t v = 0;
  for (int b = 0; b < bits; ++b) {
    int64_t bit = k * bits + b;
    v |= uint32_t((bytes[size_t(bit / 8)] >> (bit % 8)) & 1) << b;
  }
  return v;
}

inline void putPacked(std::vector<uint8_t> &bytes, int64_t k, int bits, uint32_t value) {
  for (int b = 0; b < bits; ++b) {
    int64_t bit = k * bits + b;
    uint8_t mask = uint8_t(1u << (bit % 8));
    if ((value >> b) & 1u)
      bytes[size_t(bit / 8)] |= mask;
    else
      bytes[size_t(bit / 8)] &= uint8_t(~mask);
  }
}

/// Whether any diagnostic has `code` and contains every one of `parts`.
inline bool hasDiagnostic(const Status &s, ErrorCode code, const std::vector<std::string> &parts) {
  for (const Diagnostic &d : s.diagnostics()) {
    if (d.code != code)
      continue;
    std::string text = d.toString();
    bool all = true;
    for (const std::string &p : parts)
      all = all && text.find(p) != std::string::npos;
    if (all)
      return true;
  }
  return false;
}

} // namespace cputest
