// The JIT against the CPU interpreter, instruction family by instruction family (see
// jit_diff.h): arithmetic and comparisons of every arithmetic dtype on special values, every
// conversion between a broad set of types, math within 2 ulp, View, scalar expressions,
// control flow, bounds of global views and slices, packed sub-byte stores from many threads,
// shared layouts, CopyAsync, ConvertLayout, Reduce, Dot, Print, the workspace, and the
// library's programs. Results must be bit-identical unless the ISA leaves the rounding open.
#include "byte_transpose_program.h"
#include "exact_rounding.h"
#include "jit_diff.h"
#include "view_repack_program.h"

#include "cluster_program.h"
#include "stage_rows_program.h"
#include "test_helpers.h"
#include "thread_groups_program.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <tuple>

using namespace tilus;
using namespace tilus::jitdiff;
using tilus::testing::codesApart;
using tilus::testing::roundInto;

namespace {

std::string name(DataType t) { return t.name(); }

const std::vector<DataType> kArithmetic = {
    DataType::boolean(), DataType::i(8),  DataType::i(16), DataType::i(32), DataType::i(64),
    DataType::u(8),      DataType::u(16), DataType::u(32), DataType::u(64), DataType::f16(),
    DataType::bf16(),    DataType::f32(), DataType::f64()};

Case binaryCase(DataType t) {
  std::vector<std::string> ops = {"Add", "Sub", "Mul", "Div", "Mod", "Max", "Min"};
  if (!t.isFloat())
    for (const char *op : {"And", "Or", "Xor", "Shl", "Shr"})
      ops.push_back(op);
  std::vector<std::string> unary = {"Neg", "Abs"};
  if (!t.isFloat())
    unary.push_back("Not");
  const char *cmps[] = {"Eq", "Ne", "Lt", "Le", "Gt", "Ge"};
  std::string T = name(t);
  size_t total = ops.size() + unary.size() + 2;
  std::stringstream s;
  s << "def binops<1>(" << T << "* a_ptr, " << T << "* b_ptr, " << T
    << "* c_ptr, bool* d_ptr) threads=128:\n"
    << "    ga = ViewGlobal(a_ptr, shape=[256])\n"
    << "    gb = ViewGlobal(b_ptr, shape=[256])\n"
    << "    gc = ViewGlobal(c_ptr, shape=[" << total << ", 256])\n"
    << "    gd = ViewGlobal(d_ptr, shape=[6, 256])\n"
    << "    a = LoadGlobal(ga, layout=spatial(128).local(2))\n"
    << "    b = LoadGlobal(gb, layout=local(2).spatial(128))\n"
    << "    b = ConvertLayout(b, layout=spatial(128).local(2))\n";
  size_t row = 0;
  for (const std::string &op : ops)
    s << "    StoreGlobal(" << op << "(a, b), gc, offset=[" << row++ << ", 0:])\n";
  for (const std::string &op : unary)
    s << "    StoreGlobal(" << op << "(a), gc, offset=[" << row++ << ", 0:])\n";
  s << "    StoreGlobal(Add(a, 3), gc, offset=[" << row++ << ", 0:])\n";
  s << "    StoreGlobal(Mul(b, 2), gc, offset=[" << row++ << ", 0:])\n";
  for (int k = 0; k < 6; ++k)
    s << "    StoreGlobal(" << cmps[k] << "(a, b), gd, offset=[" << k << ", 0:])\n";
  Case c;
  c.name = "binops_" + T;
  c.source = s.str();
  c.buffers = {{"a_ptr", t, 256, Fill::Special},
               {"b_ptr", t, 256, Fill::Special},
               {"c_ptr", t, int64_t(total * 256), Fill::Zero},
               {"d_ptr", DataType::boolean(), 6 * 256, Fill::Zero}};
  return c;
}

const std::vector<DataType> kCastTypes = {
    DataType::boolean(), DataType::i(8),    DataType::u(8),     DataType::i(16),
    DataType::u(16),     DataType::i(32),   DataType::u(32),    DataType::i(64),
    DataType::u(64),     DataType::f16(),   DataType::bf16(),   DataType::f32(),
    DataType::f64(),     DataType::i(4),    DataType::u(3),     DataType::i(6),
    DataType::u(1),      DataType::i(2),    DataType::f8e4m3(), DataType::f8e5m2(),
    DataType::f(2, 1),   DataType::f(3, 2), DataType::f(2, 3),  DataType::f(1, 1),
    DataType::f(2, 2),   DataType::f(3, 3), DataType::f(3, 4),  DataType::f(6, 1)};

Case castCase(DataType from, Fill fill) {
  std::stringstream s;
  s << "def casts<1>(" << name(from) << "* a_ptr";
  for (size_t k = 0; k < kCastTypes.size(); ++k)
    s << ", " << name(kCastTypes[k]) << "* o" << k;
  s << ") threads=64:\n"
    << "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[256]), layout=spatial(64).local(4))\n";
  for (size_t k = 0; k < kCastTypes.size(); ++k)
    s << "    StoreGlobal(Cast(a, " << name(kCastTypes[k]) << "), ViewGlobal(o" << k
      << ", shape=[256]))\n";
  Case c;
  c.name = "casts_from_" + name(from) + (fill == Fill::Moderate ? "_moderate" : "");
  c.source = s.str();
  c.buffers = {{"a_ptr", from, 256, fill}};
  for (size_t k = 0; k < kCastTypes.size(); ++k)
    c.buffers.push_back({"o" + std::to_string(k), kCastTypes[k], 256, Fill::Zero});
  return c;
}

Case mathCase(DataType t, Fill fill) {
  const char *ops[] = {"Exp", "Exp2", "Log", "Log2", "Sqrt", "Rsqrt", "Sin", "Cos", "Tanh", "Rcp"};
  std::string T = name(t);
  std::stringstream s;
  s << "def math<1>(" << T << "* x_ptr, " << T << "* y_ptr) threads=128:\n"
    << "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[512]), layout=spatial(128).local(4))\n"
    << "    gy = ViewGlobal(y_ptr, shape=[10, 512])\n";
  for (int k = 0; k < 10; ++k)
    s << "    StoreGlobal(" << ops[k] << "(x), gy, offset=[" << k << ", 0:])\n";
  Case c;
  c.name = "math_" + T + (fill == Fill::Special ? "_special" : "");
  c.source = s.str();
  c.buffers = {{"x_ptr", t, 512, fill}, {"y_ptr", t, 10 * 512, Fill::Zero, 2.0}};
  return c;
}

std::string hex(long double v) {
  std::ostringstream s;
  s << std::hexfloat << double(v);
  return s.str();
}

/// The f32 inputs of the Exp2 sweep: every input with a subnormal result (x in [-150, -126)) and
/// those around it, every input in [127, 128] and just above, every f32 in [1, 1 + 2^-7), every
/// 4099th bit pattern (all signs, magnitudes, infinities and NaNs), and the special values.
std::vector<uint64_t> exp2SweepF32() {
  std::vector<uint64_t> codes;
  auto range = [&](float from, float to) { // every f32 of one sign between from and to
    uint32_t a = std::bit_cast<uint32_t>(from), b = std::bit_cast<uint32_t>(to);
    for (uint32_t u = std::min(a, b); u <= std::max(a, b); ++u)
      codes.push_back(u);
  };
  range(-125.5f, -150.5f);
  range(127.0f, 128.001f);
  range(1.0f, 1.0078125f);
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099)
    codes.push_back(u);
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 128.0f, -149.0f, -150.0f, -126.0f,
                  0x1p-149f, -0x1p-149f, 0x1p-126f, 0x1.fffffep127f, -0x1.fffffep127f})
    codes.push_back(std::bit_cast<uint32_t>(x));
  return codes;
}

/// A math function of one argument in a sweep: its assembly name, its value in long double, and
/// the most ulp its GPU result may lie from the correctly rounded one.
struct SweepOp {
  std::string name;
  long double (*fn)(long double);
  double gpuUlps;
};

/// Each op of every given input, checked against the correctly rounded result of long double
/// libm on each side: within the op's `gpuUlps` on the GPU (the ISA's 2 ulp; 1 where
/// jit/lower_elementwise.cpp proves it), within 1 in the interpreter (f64 math rounded once).
Case sweepCase(DataType t, std::vector<uint64_t> codes, std::vector<SweepOp> ops) {
  std::string T = name(t);
  int64_t n = int64_t(codes.size());
  std::stringstream s;
  s << "def sweep<cdiv(n, 1024)>(" << T << "* x_ptr";
  for (size_t k = 0; k < ops.size(); ++k)
    s << ", " << T << "* y" << k;
  s << ", i32 n) threads=256:\n"
    << "    bi = BlockIndices()\n"
    << "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=spatial(256).local(4), "
       "offset=[bi * 1024:])\n";
  for (size_t k = 0; k < ops.size(); ++k)
    s << "    StoreGlobal(" << ops[k].name << "(x), ViewGlobal(y" << k
      << ", shape=[n]), offset=[bi * 1024:])\n";
  Case c;
  c.name = "sweep_" + ops[0].name + "_" + T;
  c.source = s.str();
  c.scalars = {{"n", uint64_t(n)}};
  c.buffers = {{"x_ptr", t, n, Fill::Given, 0, 0, codes}};
  for (size_t k = 0; k < ops.size(); ++k)
    c.buffers.push_back({"y" + std::to_string(k), t, n, Fill::Zero, 2.0});
  c.check = [t, codes, ops](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    size_t bytes = size_t(t.bits / 8);
    for (size_t which = 0; which < ops.size(); ++which) {
      double bound = std::string(side) == "gpu" ? ops[which].gpuUlps : 1.0;
      std::string what = std::string(side) + " " + ops[which].name + " " + t.name();
      const std::vector<uint8_t> &out = buffers[1 + which];
      double worst = 0;
      long double worstInput = 0;
      int64_t bad = 0;
      for (size_t k = 0; k < codes.size(); ++k) {
        long double x = toDouble(codes[k], t);
        long double want = roundInto(ops[which].fn(x), t);
        uint64_t bits = 0;
        std::memcpy(&bits, out.data() + k * bytes, bytes);
        double got = toDouble(bits, t);
        double apart = codesApart(got, want, t);
        if (apart > worst) {
          worst = apart;
          worstInput = x;
        }
        if (apart > bound && bad++ < 5)
          FAIL_CHECK(what << " of " << hex(x) << " is " << hex(got) << ", correctly rounded "
                          << hex(want) << ": " << apart << " ulp apart");
      }
      MESSAGE(what << " over " << codes.size() << " inputs: at most " << worst
                   << " ulp from the correctly rounded result (input " << hex(worstInput) << ")");
      CHECK_MESSAGE(bad == 0, what << ": " << bad << " results beyond " << bound << " ulp");
    }
  };
  return c;
}

/// Exp2 (and for f16 and bf16 Exp) of every given input (sweepCase).
Case expSweepCase(DataType t, std::vector<uint64_t> codes, bool withExp, double gpuUlps,
                  double gpuExpUlps = 0) {
  std::vector<SweepOp> ops = {{"Exp2", [](long double x) { return exp2l(x); }, gpuUlps}};
  if (withExp)
    ops.push_back(
        {"Exp", [](long double x) { return expl(x); }, gpuExpUlps > 0 ? gpuExpUlps : gpuUlps});
  return sweepCase(t, std::move(codes), std::move(ops));
}

/// Rcp of every given input (sweepCase).
Case rcpSweepCase(DataType t, std::vector<uint64_t> codes, double gpuUlps) {
  return sweepCase(t, std::move(codes), {{"Rcp", [](long double x) { return 1.0L / x; }, gpuUlps}});
}

/// Max and Min of every pair of a list of special values of t (zeros of both signs, NaNs with
/// several payloads, infinities, subnormals), against IEEE maxNum/minNum with -0 < +0 and the
/// canonical NaN (ISA section 5) computed here.
Case maxMinCase(DataType t) {
  uint64_t sign = uint64_t(1) << (t.bits - 1);
  uint64_t quiet = uint64_t(1) << (t.mantissa - 1);
  uint64_t inf = fromDouble(INFINITY, t);
  std::vector<uint64_t> specials = {0,
                                    sign,
                                    1,
                                    1 | sign,
                                    inf,
                                    inf | sign,
                                    inf | quiet,
                                    inf | quiet | 1,
                                    inf | 1,
                                    sign | inf | quiet | 3,
                                    fromDouble(1.0, t),
                                    fromDouble(-1.0, t),
                                    maxFinite(t),
                                    maxFinite(t) | sign,
                                    fromDouble(0.5, t)};
  std::vector<uint64_t> a, b;
  for (uint64_t x : specials)
    for (uint64_t y : specials) {
      a.push_back(x);
      b.push_back(y);
    }
  int64_t n = int64_t(a.size());
  std::string T = name(t);
  Case c;
  c.name = "maxmin_" + T;
  c.source = "def maxmin<1>(" + T + "* a_ptr, " + T + "* b_ptr, " + T + "* c_ptr) threads=32:\n" +
             "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[" + std::to_string(n) +
             "]), layout=local(" + std::to_string((n + 31) / 32) + ").spatial(32))\n" +
             "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[" + std::to_string(n) +
             "]), layout=local(" + std::to_string((n + 31) / 32) + ").spatial(32))\n" +
             "    gc = ViewGlobal(c_ptr, shape=[2, " + std::to_string(n) + "])\n" +
             "    StoreGlobal(Max(a, b), gc, offset=[0, 0:])\n" +
             "    StoreGlobal(Min(a, b), gc, offset=[1, 0:])\n";
  c.buffers = {{"a_ptr", t, n, Fill::Given, 0, 0, a},
               {"b_ptr", t, n, Fill::Given, 0, 0, b},
               {"c_ptr", t, 2 * n, Fill::Zero}};
  c.check = [t, a, b](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    size_t bytes = size_t(t.storageBits() / 8);
    for (int isMin = 0; isMin < 2; ++isMin)
      for (size_t k = 0; k < a.size(); ++k) {
        double x = toDouble(a[k], t), y = toDouble(b[k], t);
        uint64_t want = 0;
        if (std::isnan(x) && std::isnan(y))
          want = canonicalNaN(t);
        else if (std::isnan(x) || std::isnan(y))
          want = std::isnan(x) ? b[k] : a[k];
        else if (x == y) // equal: differ at most in the sign of zero; -0 < +0
          want = (std::signbit(x) == (isMin == 1)) ? a[k] : b[k];
        else
          want = ((x < y) == (isMin == 1)) ? a[k] : b[k];
        uint64_t got = 0;
        std::memcpy(&got, buffers[2].data() + (size_t(isMin) * a.size() + k) * bytes, bytes);
        if (got != want) {
          std::ostringstream s;
          s << side << (isMin ? " Min(0x" : " Max(0x") << std::hex << a[k] << ", 0x" << b[k]
            << ") = 0x" << got << ", want 0x" << want;
          FAIL_CHECK(s.str());
        }
      }
  };
  return c;
}

/// f32 inputs at every rounding decision of the conversions into f8e4m3, f8e5m2 and the
/// integers: every f16 value widened; for each FP8 type every value, every midpoint between
/// neighbouring values (0 and the least subnormal included) and the f32 on either side of each,
/// both signs; the overflow thresholds (max, the midpoint above it, twice it) with their
/// neighbours; integers from -300 to 300 and the edges of 16 and 32-bit ranges with the f32 on
/// either side and the halves between them; f32 subnormals, zeros, infinities and NaNs of
/// several payloads and both signs.
std::vector<uint64_t> conversionBoundariesF32() {
  std::vector<uint64_t> codes;
  auto around = [&](float x) {
    for (float v : {x, -x}) {
      uint32_t u = std::bit_cast<uint32_t>(v);
      codes.push_back(u);
      if ((u & 0x7FFFFFFFu) != 0)
        codes.push_back(u - 1);
      if ((u & 0x7FFFFFFFu) < 0x7F800000u)
        codes.push_back(u + 1);
    }
  };
  for (uint64_t h = 0; h < 65536; ++h)
    codes.push_back(std::bit_cast<uint32_t>(float(toDouble(h, DataType::f16()))));
  for (DataType t : {DataType::f8e4m3(), DataType::f8e5m2()}) {
    double previous = 0;
    for (uint64_t c = 0; c < 128; ++c) { // the non-negative codes in increasing order
      double v = toDouble(c, t);
      if (std::isnan(v) || std::isinf(v))
        break;
      around(float(v));
      around(float((previous + v) / 2)); // exact in f32: at most 5 significant bits
      previous = v;
    }
    double max = toDouble(maxFinite(t), t);
    double step = max - toDouble(maxFinite(t) - 1, t);
    for (double v : {max + step / 2, max + step, 2 * max, 1e30})
      around(float(v));
  }
  for (int k = -300; k <= 300; ++k) {
    around(float(k));
    around(float(k) + 0.5f);
  }
  for (double v : {32767.0, 32768.0, 65535.0, 65536.0, 2147483648.0, 4294967296.0, 1e10})
    around(float(v));
  for (uint32_t u : {0x00000001u, 0x00400000u, 0x007FFFFFu, 0x00800000u, 0x7F7FFFFFu})
    around(std::bit_cast<float>(u));
  for (uint32_t u : {0x00000000u, 0x80000000u, 0x7F800000u, 0xFF800000u, 0x7FC00000u, 0xFFC00000u,
                     0x7F800001u, 0xFF800001u, 0x7FBFFFFFu, 0xFFFFFFFFu, 0x7FC12345u})
    codes.push_back(u);
  return codes;
}

/// Cast of every given input of `from` into each of `targets`, `locals` slots per thread (4:
/// pairs of slots; 3: a lone last slot too), bit for bit against the interpreter.
Case conversionCase(const std::string &name, DataType from, const std::vector<uint64_t> &codes,
                    const std::vector<DataType> &targets, int locals) {
  int64_t n = int64_t(codes.size()), block = 256 * locals;
  std::stringstream s;
  s << "def convert<cdiv(n, " << block << ")>(" << from.name() << "* x_ptr";
  for (size_t k = 0; k < targets.size(); ++k)
    s << ", " << targets[k].name() << "* o" << k;
  s << ", i32 n) threads=256:\n"
    << "    bi = BlockIndices()\n"
    << "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=spatial(256).local(" << locals
    << "), offset=[bi * " << block << ":])\n";
  for (size_t k = 0; k < targets.size(); ++k)
    s << "    StoreGlobal(Cast(x, " << targets[k].name() << "), ViewGlobal(o" << k
      << ", shape=[n]), offset=[bi * " << block << ":])\n";
  Case c;
  c.name = name;
  c.source = s.str();
  c.scalars = {{"n", uint64_t(n)}};
  c.buffers = {{"x_ptr", from, n, Fill::Given, 0, 0, codes}};
  for (size_t k = 0; k < targets.size(); ++k)
    c.buffers.push_back({"o" + std::to_string(k), targets[k], n, Fill::Zero});
  return c;
}

} // namespace

DIFF_CASE("elementwise arithmetic and comparisons of every arithmetic dtype") {
  for (DataType t : kArithmetic)
    runCase(binaryCase(t));
}

DIFF_CASE("Cast between all pairs of a broad set of types") {
  for (DataType from : kCastTypes) {
    runCase(castCase(from, Fill::Random));
    if (from.isFloat())
      runCase(castCase(from, Fill::Moderate));
  }
}

DIFF_CASE("f32/f16/bf16 into FP8 and integers at every rounding boundary") {
  // sm_90: cvt.rn.satfinite.{e4m3x2,e5m2x2} with the canonical NaN fix-up (jit/emit_convert.cpp
  // quantizeFp8); every target: cvt.rzi saturating float -> integer (NaN -> 0). Bit for bit
  // against the interpreter (isa/convert.h), which rounds once from the exact value.
  const std::vector<DataType> targets = {DataType::f8e4m3(), DataType::f8e5m2(), DataType::i(8),
                                         DataType::u(8),     DataType::i(16),    DataType::u(16),
                                         DataType::i(32),    DataType::u(32),    DataType::i(4),
                                         DataType::u(3),     DataType::u(1),     DataType::i(2)};
  std::vector<uint64_t> f32 = conversionBoundariesF32();
  runCase(conversionCase("convert_f32_pairs", DataType::f32(), f32, targets, 4));
  runCase(conversionCase("convert_f32_odd", DataType::f32(), f32, targets, 3));
  std::vector<uint64_t> every16(65536);
  for (uint64_t u = 0; u < every16.size(); ++u)
    every16[u] = u;
  runCase(conversionCase("convert_f16", DataType::f16(), every16, targets, 4));
  runCase(conversionCase("convert_f16_odd", DataType::f16(), every16, targets, 3));
  runCase(conversionCase("convert_bf16", DataType::bf16(), every16, targets, 4));
}

/// The f32 inputs of the f16 / bf16 rounding case: every 65521st bit pattern (all signs,
/// magnitudes, infinities and NaNs), the midpoints between neighbouring values of both targets
/// near 1, their largest finite value and their smallest subnormal (each with its f32 neighbours:
/// ties to even, overflow to infinity, underflow to zero), and NaNs of both signs and several
/// payloads.
std::vector<uint64_t> narrowingInputs() {
  std::vector<uint64_t> codes;
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 65521)
    codes.push_back(u);
  auto around = [&](float x) {
    codes.push_back(std::bit_cast<uint32_t>(std::nextafter(x, -INFINITY)));
    codes.push_back(std::bit_cast<uint32_t>(x));
    codes.push_back(std::bit_cast<uint32_t>(std::nextafter(x, INFINITY)));
  };
  for (float sign : {1.0f, -1.0f}) {
    // f16 (11-bit significands): midpoints at 1 + (2k + 1) 2^-11, at the top (65504 + 16 rounds
    // to infinity) and below the smallest subnormal (2^-25: ties to 0)
    for (int k = 0; k < 4; ++k)
      around(sign * (1.0f + float(2 * k + 1) * 0x1p-11f));
    around(sign * 65520.0f);
    around(sign * 0x1p-25f);
    around(sign * 0x3p-25f);
    // bf16 (8-bit significands) likewise
    for (int k = 0; k < 4; ++k)
      around(sign * (1.0f + float(2 * k + 1) * 0x1p-8f));
    around(sign * 0x1.ffp127f);
    around(sign * 0x1p-134f);
    around(sign * 0x3p-134f);
  }
  for (uint32_t nan : {0x7FC00000u, 0xFFC00000u, 0x7F800001u, 0xFF800001u, 0x7FFFFFFFu, 0xFFFFFFFFu,
                       0x7FA00000u, 0x7F802000u})
    codes.push_back(nan);
  while (codes.size() % 1024 != 0) // whole blocks of 256 threads x 4
    codes.push_back(std::bit_cast<uint32_t>(-0.0f));
  return codes;
}

DIFF_CASE("f32 into f16 and bf16 two at a time: pair conversions, canonical NaNs") {
  // Cast(f32 -> f16 / bf16) of four slots per thread: jit/emit_convert.cpp narrowPairs (one
  // cvt.rn.f16x2.f32 per pair, the kept NaN fix-up as set.nan + lop3 on the pair); every result
  // against rounding to nearest even computed here (exact_rounding.h), signed zeros and the
  // canonical NaNs 0x7E00 / 0x7FC0 (docs/types.md) included
  std::vector<uint64_t> codes = narrowingInputs();
  int64_t n = int64_t(codes.size());
  Case c;
  c.name = "narrow_pairs";
  c.source = "def narrow<cdiv(n, 1024)>(f32* x_ptr, f16* h_ptr, bf16* b_ptr, i32 n) threads=256:\n"
             "    bi = BlockIndices()\n"
             "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[n]), layout=spatial(256).local(4), "
             "offset=[bi * 1024:])\n"
             "    StoreGlobal(Cast(x, f16), ViewGlobal(h_ptr, shape=[n]), offset=[bi * 1024:])\n"
             "    StoreGlobal(Cast(x, bf16), ViewGlobal(b_ptr, shape=[n]), offset=[bi * 1024:])\n";
  c.scalars = {{"n", uint64_t(n)}};
  c.buffers = {{"x_ptr", DataType::f32(), n, Fill::Given, 0, 0, codes},
               {"h_ptr", DataType::f16(), n, Fill::Zero},
               {"b_ptr", DataType::bf16(), n, Fill::Zero}};
  c.check = [codes](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    for (auto [which, t, nan] : {std::tuple{1, DataType::f16(), uint16_t(0x7E00)},
                                 std::tuple{2, DataType::bf16(), uint16_t(0x7FC0)}}) {
      int64_t bad = 0;
      for (size_t k = 0; k < codes.size(); ++k) {
        float x = std::bit_cast<float>(uint32_t(codes[k]));
        uint16_t got = 0;
        std::memcpy(&got, buffers[size_t(which)].data() + 2 * k, 2);
        bool ok;
        if (std::isnan(x)) {
          ok = got == nan;
        } else {
          long double want = roundInto(x, t);
          long double value = toDouble(got, t);
          ok = value == want && std::signbit(double(value)) == std::signbit(x);
        }
        if (!ok && bad++ < 5) {
          std::ostringstream what;
          what << side << " " << t.name() << " of f32 0x" << std::hex << codes[k] << " is 0x"
               << got;
          FAIL_CHECK(what.str());
        }
      }
      std::string summary =
          std::string(side) + " " + t.name() + ": " + std::to_string(bad) + " wrong results";
      CHECK_MESSAGE(bad == 0, summary);
    }
  };
  runCase(c);
}

DIFF_CASE("f16 Add, Sub and Mul two slots at a time (add/sub/mul.rn.f16x2): every code") {
  // jit/emit_convert.cpp arithmeticPairs: four slots per thread, two pairs; a runs through every
  // f16 code twice, b through pseudo-random codes; each result against the exact operation
  // rounded to nearest even here (exact_rounding.h), signed zeros and the canonical NaN 0x7E00,
  // and a product by a constant (a pair of constants as the second operand)
  int64_t n = 2 * 65536;
  std::vector<uint64_t> a(static_cast<size_t>(n)), b(static_cast<size_t>(n));
  uint32_t state = 12345;
  for (int64_t k = 0; k < n; ++k) {
    state = state * 1664525u + 1013904223u;
    a[size_t(k)] = uint64_t(k) & 0xFFFF;
    b[size_t(k)] = state >> 16;
  }
  Case c;
  c.name = "f16_pairs";
  c.source = "def pairs<cdiv(n, 1024)>(f16* a_ptr, f16* b_ptr, f16* s_ptr, f16* d_ptr, f16* p_ptr, "
             "f16* q_ptr, i32 n) threads=256:\n"
             "    bi = BlockIndices()\n"
             "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[n]), layout=spatial(256).local(4), "
             "offset=[bi * 1024:])\n"
             "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[n]), layout=spatial(256).local(4), "
             "offset=[bi * 1024:])\n"
             "    StoreGlobal(Add(a, b), ViewGlobal(s_ptr, shape=[n]), offset=[bi * 1024:])\n"
             "    StoreGlobal(Sub(a, b), ViewGlobal(d_ptr, shape=[n]), offset=[bi * 1024:])\n"
             "    StoreGlobal(Mul(a, b), ViewGlobal(p_ptr, shape=[n]), offset=[bi * 1024:])\n"
             "    StoreGlobal(Mul(a, 0.3), ViewGlobal(q_ptr, shape=[n]), offset=[bi * 1024:])\n";
  c.scalars = {{"n", uint64_t(n)}};
  c.buffers = {{"a_ptr", DataType::f16(), n, Fill::Given, 0, 0, a},
               {"b_ptr", DataType::f16(), n, Fill::Given, 0, 0, b},
               {"s_ptr", DataType::f16(), n, Fill::Zero},
               {"d_ptr", DataType::f16(), n, Fill::Zero},
               {"p_ptr", DataType::f16(), n, Fill::Zero},
               {"q_ptr", DataType::f16(), n, Fill::Zero}};
  c.check = [a, b](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    DataType h = DataType::f16();
    // the scalar 0.3 is rounded to the tensor's dtype first (docs/isa.md)
    long double third = toDouble(uint64_t(0x34CD), h);
    int64_t bad = 0;
    for (size_t k = 0; k < a.size(); ++k) {
      long double x = toDouble(a[k], h), y = toDouble(b[k], h);
      long double exact[4] = {x + y, x - y, x * y, x * third};
      for (int op = 0; op < 4; ++op) {
        uint16_t got = 0;
        std::memcpy(&got, buffers[size_t(2 + op)].data() + 2 * k, 2);
        long double v = exact[op];
        bool ok;
        if (std::isnan(double(v))) {
          ok = got == 0x7E00;
        } else {
          long double want = roundInto(v, h);
          long double value = toDouble(got, h);
          // a zero result: the sign of the exact zero (x - x is +0 under rounding to nearest)
          bool sign = v == 0 ? (op == 0   ? std::signbit(double(x)) && std::signbit(double(y))
                                : op == 1 ? std::signbit(double(x)) && !std::signbit(double(y))
                                          : std::signbit(double(v)))
                             : std::signbit(double(v));
          if (op >= 2 && v == 0)
            sign = std::signbit(double(x)) != std::signbit(double(op == 2 ? y : third));
          ok = value == want && std::signbit(double(value)) == sign;
        }
        if (!ok && bad++ < 5) {
          std::ostringstream what;
          what << side << " op " << op << " of 0x" << std::hex << a[k] << ", 0x" << b[k] << " is 0x"
               << got;
          FAIL_CHECK(what.str());
        }
      }
    }
    std::string summary = std::string(side) + ": " + std::to_string(bad) + " wrong results";
    CHECK_MESSAGE(bad == 0, summary);
  };
  runCase(c);
}

DIFF_CASE("FP8 weights with NaN codes through the dequantisation into mma.sync") {
  // Cast(f8e4m3 / f8e5m2 -> f16) feeding only a Dot: jit/nan_canonical.cpp drops the NaN select
  // of the dequantisation there; the NaNs must still reach the results as the canonical NaN
  for (DataType t : {DataType::f8e4m3(), DataType::f8e5m2()}) {
    Case c;
    c.name = "dequant_mma_" + t.name();
    c.source = "def dequant_mma<1>(" + t.name() +
               "* a_ptr, f16* b_ptr, f32* c_ptr, f32* d_ptr) threads=32:\n"
               "    a = Cast(LoadGlobal(ViewGlobal(a_ptr, shape=[16, 64]), layout=local(1, 4)"
               ".column_local(2, 2).spatial(8, 4).local(1, 2)), f16)\n"
               "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[64, 8]), layout=local(4, 1)"
               ".local(2, 1).column_spatial(4, 8).local(2, 1))\n"
               "    c = LoadGlobal(ViewGlobal(c_ptr, shape=[16, 8]), layout=local(2, 1)"
               ".spatial(8, 4).local(1, 2))\n"
               "    StoreGlobal(Dot(a, b, c), ViewGlobal(d_ptr, shape=[16, 8]))\n";
    // codes k mod 256 row by row: the NaN codes fall in some rows only
    c.buffers = {{"a_ptr", t, 16 * 64, Fill::Codes},
                 {"b_ptr", DataType::f16(), 64 * 8, Fill::Moderate},
                 {"c_ptr", DataType::f32(), 16 * 8, Fill::Moderate},
                 {"d_ptr", DataType::f32(), 16 * 8, Fill::Zero, 0, 1e-5}};
    c.check = [t](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
      // a row of D is NaN exactly when its row of A has a NaN code (or an infinity meets a
      // zero product of the other sign, which Moderate b never gives with e4m3); every NaN
      // is the canonical 0x7FC00000
      int nanRows = 0;
      for (int i = 0; i < 16; ++i) {
        bool nanCode = false;
        for (int k = 0; k < 64; ++k)
          nanCode = nanCode || std::isnan(toDouble(buffers[0][size_t(i * 64 + k)], t));
        for (int j = 0; j < 8; ++j) {
          uint32_t bits = 0;
          std::memcpy(&bits, buffers[3].data() + size_t(i * 8 + j) * 4, 4);
          float v = std::bit_cast<float>(bits);
          if (std::isnan(v) && bits != 0x7FC00000u)
            FAIL_CHECK(side << " row " << i << ": NaN 0x" << std::hex << bits);
          if (nanCode && !std::isnan(v))
            FAIL_CHECK(side << " row " << i << " has a NaN weight but gives " << v);
        }
        nanRows += nanCode;
      }
      CHECK(nanRows > 0);
    };
    runCase(c);
  }
}

namespace {

/// The types with a two-lane dequantisation into f16: u1-u8, i2-i8 and every generic float
/// with E <= 4 (OCP FP8 is added where a case covers it).
std::vector<DataType> dequantisableTypes() {
  std::vector<DataType> types;
  for (int n = 1; n <= 8; ++n)
    types.push_back(DataType::u(n));
  for (int n = 2; n <= 8; ++n)
    types.push_back(DataType::i(n));
  for (int e = 1; e <= 4; ++e)
    for (int m = 1; e + m + 1 <= 8; ++m)
      types.push_back(DataType::f(e, m));
  return types;
}

} // namespace

DIFF_CASE("fast dequantisation to f16 and bf16 over every code of every low-bit type") {
  // Cast of packed low-bit integers, generic floats (E <= 4) and OCP FP8 (NaN codes included)
  // to f16, bf16 and f32 (through f16) takes the two-lane path of
  // jit/emit_dequant.cpp; every code of every such type, in several register layouts (pairs
  // of slots from one byte, from two bytes, odd slot counts), must give isa/convert's result.
  std::vector<DataType> types = dequantisableTypes();
  types.push_back(DataType::f8e5m2()); // f16 fast path; bf16 generic
  for (DataType t : types) {
    std::string T = name(t);
    Case c;
    c.name = "dequant_" + T;
    c.source = "def dequant<1>(" + T +
               "* a_ptr, f16* h_ptr, bf16* b_ptr, f16* o_ptr, f32* f_ptr) threads=32:\n"
               "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[256]), layout=spatial(32).local(8))\n"
               "    StoreGlobal(Cast(a, f16), ViewGlobal(h_ptr, shape=[256]))\n"
               "    StoreGlobal(Cast(a, bf16), ViewGlobal(b_ptr, shape=[256]))\n"
               "    StoreGlobal(Cast(a, f32), ViewGlobal(f_ptr, shape=[256]))\n"
               "    o = LoadGlobal(ViewGlobal(a_ptr, shape=[96]), layout=spatial(32).local(3))\n"
               "    StoreGlobal(Cast(o, f16), ViewGlobal(o_ptr, shape=[96]))\n";
    c.buffers = {{"a_ptr", t, 256, Fill::Codes},
                 {"h_ptr", DataType::f16(), 256, Fill::Zero},
                 {"b_ptr", DataType::bf16(), 256, Fill::Zero},
                 {"o_ptr", DataType::f16(), 96, Fill::Zero},
                 {"f_ptr", DataType::f32(), 256, Fill::Zero}};
    runCase(c);
  }
}

DIFF_CASE("dequantisation of codes read in place from loaded and carried words") {
  // jit/emit_dequant_pairs.cpp traces each code to the word or byte it lies in and reads a
  // pair with one prmt (integers: one mask and one fma; floats: a shift, masks and one mul),
  // at whatever bit offset the code has there; 32 codes per thread from n 32-bit words (every
  // offset mod 8 for odd n), from 4n bytes, and from words carried through a loop (the roots
  // are then loop values) must all give isa/convert's result in f16, bf16 and f32.
  std::vector<DataType> types = dequantisableTypes();
  for (DataType t : types) {
    std::string T = name(t), N = std::to_string(t.bits), B = std::to_string(4 * t.bits);
    Case c;
    c.name = "dequant_words_" + T;
    c.source =
        "def dequant<1>(u32* a_ptr, f16* h_ptr, bf16* b_ptr, f32* f_ptr, f16* y_ptr, f16* l_ptr) "
        "threads=32:\n"
        "    w = LoadGlobal(ViewGlobal(a_ptr, shape=[32, " +
        N + "]), layout=spatial(32, 1).local(1, " + N +
        "))\n"
        "    a = View(w, dtype=" +
        T +
        ", layout=spatial(32, 1).local(1, 32))\n"
        "    StoreGlobal(Cast(a, f16), ViewGlobal(h_ptr, shape=[32, 32]))\n"
        "    StoreGlobal(Cast(a, bf16), ViewGlobal(b_ptr, shape=[32, 32]))\n"
        "    StoreGlobal(Cast(a, f32), ViewGlobal(f_ptr, shape=[32, 32]))\n"
        "    yb = View(w, dtype=u8, layout=spatial(32, 1).local(1, " +
        B +
        "))\n"
        "    StoreGlobal(Cast(View(yb, dtype=" +
        T +
        ", layout=spatial(32, 1).local(1, 32)), f16), ViewGlobal(y_ptr, shape=[32, 32]))\n"
        "    gl = ViewGlobal(l_ptr, shape=[4, 32, 32])\n"
        "    cur = Cast(w, u32)\n"
        "    for i in range(4):\n"
        "        StoreGlobal(Cast(View(cur, dtype=" +
        T +
        ", layout=spatial(32, 1).local(1, 32)), f16), gl, offset=[i, 0:, 0:])\n"
        "        cur = Add(cur, 2654435769)\n";
    c.buffers = {{"a_ptr", DataType::u(32), 32 * int64_t(t.bits), Fill::Random},
                 {"h_ptr", DataType::f16(), 1024, Fill::Zero},
                 {"b_ptr", DataType::bf16(), 1024, Fill::Zero},
                 {"f_ptr", DataType::f32(), 1024, Fill::Zero},
                 {"y_ptr", DataType::f16(), 1024, Fill::Zero},
                 {"l_ptr", DataType::f16(), 4096, Fill::Zero}};
    runCase(c);
  }
}

DIFF_CASE("dequantisation of pairs at the same place of a word's two halves") {
  // Pairs whose two codes lie at bit q and q + 16 of one word (codes i and i + 16 / n of a
  // word of n-bit codes, put side by side by an in-lane ConvertLayout) are read in place or
  // after one shift of the word, without a prmt (jit/emit_dequant_pairs.cpp); every such pair
  // of every code (the buffer holds each code in turn), for every type whose codes divide a
  // 16-bit half, must give isa/convert's result in f16, bf16 and f32.
  // (OCP FP8: the pair's two bytes i and i + 2 of a word, gathered by one prmt for the hardware
  // conversion into f16. Generic floats of 4 and 8 bits: one shift of the word puts both codes
  // at the tops of bytes 1 and 3, no prmt.)
  std::vector<DataType> halves;
  for (int n : {1, 2, 4, 8}) {
    halves.push_back(DataType::u(n));
    if (n > 1)
      halves.push_back(DataType::i(n));
  }
  halves.push_back(DataType::f8e4m3());
  halves.push_back(DataType::f8e5m2());
  for (DataType t : dequantisableTypes())
    if (t.isFloat() && (t.bits == 4 || t.bits == 8))
      halves.push_back(t);
  for (DataType t : halves) {
    int n = t.bits;
    std::string T = name(t), N = std::to_string(n), C = std::to_string(16 / n);
    Case c;
    c.name = "dequant_halves_" + T;
    c.source = "def dequant<1>(" + T +
               "* a_ptr, f16* h_ptr, bf16* b_ptr, f32* f_ptr) threads=32:\n"
               "    w = LoadGlobal(ViewGlobal(a_ptr, dtype=u32, shape=[32, " +
               N + "]), layout=spatial(32, 1).local(1, " + N +
               "))\n"
               "    a = View(w, dtype=" +
               T + ", layout=spatial(32, 1, 1, 1).local(1, " + N + ", 2, " + C +
               "))\n"
               "    p = ConvertLayout(a, layout=spatial(32, 1, 1, 1).local(1, " +
               N + ", 1, " + C +
               ").local(1, 1, 2, 1))\n"
               "    StoreGlobal(Cast(p, f16), ViewGlobal(h_ptr, shape=[32, " +
               N + ", 2, " + C +
               "]))\n"
               "    StoreGlobal(Cast(p, bf16), ViewGlobal(b_ptr, shape=[32, " +
               N + ", 2, " + C +
               "]))\n"
               "    StoreGlobal(Cast(p, f32), ViewGlobal(f_ptr, shape=[32, " +
               N + ", 2, " + C + "]))\n";
    c.buffers = {{"a_ptr", t, 1024, Fill::Codes},
                 {"h_ptr", DataType::f16(), 1024, Fill::Zero},
                 {"b_ptr", DataType::bf16(), 1024, Fill::Zero},
                 {"f_ptr", DataType::f32(), 1024, Fill::Zero}};
    runCase(c);
  }
}

DIFF_CASE("generic float codes into f16 times 2^-(15 - bias): their bits, exact through an mma") {
  // Mul(Cast(codes, f16), 2^-(15 - bias)) takes the codes' bits as they are (the pair path
  // without its product, Codegen::unscaledDequant), f16 subnormals for the smallest codes
  // (f4e2m1's 0.5 is 2^-15); every code, stored and summed by an mma with ones as its B operand
  // (exact in f32 whatever the order), must give the interpreter's result: the tensor cores
  // take the subnormal operands as they are, as programs/quant/a16wx.tasm needs
  for (DataType t : dequantisableTypes()) {
    if (!t.isFloat() || t.floatStyle() != FloatStyle::Finite)
      continue;
    std::string T = name(t), N = std::to_string(t.bits);
    std::string wx = std::to_string(15 - ((1 << (t.exponent - 1)) - 1));
    Case c;
    c.name = "dequant_unscaled_" + T;
    c.source = "def dequant<1>(" + T +
               "* a_ptr, f16* h_ptr, f32* d_ptr) threads=32:\n"
               "    w = LoadGlobal(ViewGlobal(a_ptr, dtype=u8, shape=[32, " +
               N + "]), layout=spatial(32, 1).local(1, " + N +
               "))\n"
               "    a = View(w, dtype=" +
               T +
               ", layout=spatial(1, 1).local(1, 1).column_local(2, 2).spatial(8, 4).local(1, 2))\n"
               "    h = Mul(Cast(a, f16), 1.0 / (1 << " +
               wx +
               "))\n"
               "    StoreGlobal(h, ViewGlobal(h_ptr, shape=[16, 16]))\n"
               "    ones = AllocateRegister(f16, layout=column_local(1, 1).local(2, 1)"
               ".column_spatial(4, 8).local(2, 1), init=1.0)\n"
               "    d = AllocateRegister(f32, layout=local(1, 1).local(2, 1).spatial(8, 4)"
               ".local(1, 2), init=0.0)\n"
               "    Dot(h, ones, d, out=d)\n"
               "    StoreGlobal(d, ViewGlobal(d_ptr, shape=[16, 8]))\n";
    c.buffers = {{"a_ptr", t, 256, Fill::Codes},
                 {"h_ptr", DataType::f16(), 256, Fill::Zero},
                 {"d_ptr", DataType::f32(), 128, Fill::Zero}};
    runCase(c);
  }
}

DIFF_CASE("tiles at b * 16 of a view of m rows on cdiv(m, 16) blocks, with and without bounds") {
  // with m a multiple of 16 (the launch class) the JIT drops the bounds tests of every block's
  // tile (Codegen::boundProvenTiles); at m = 40 the last block's tile is cut by m. Both must
  // load and store exactly the interpreter's elements (rows below m; the rest stays zero)
  for (uint64_t m : {48, 40, 16}) {
    Case c;
    c.name = "proven_tiles_m" + std::to_string(m);
    c.source = "def k<cdiv(m, 16)>(f16* x_ptr, f16* y_ptr, i32 m) threads=32:\n"
               "    b = BlockIndices()\n"
               "    t = LoadGlobal(ViewGlobal(x_ptr, shape=[m, 64]), layout=spatial(16, 2)"
               ".local(1, 32), offset=[b * 16:, 0:])\n"
               "    StoreGlobal(Add(t, 1.0), ViewGlobal(y_ptr, shape=[m, 64]), offset=[16 * b:, "
               "0:])\n";
    c.scalars = {{"m", m}};
    c.buffers = {{"x_ptr", DataType::f16(), 48 * 64, Fill::Moderate},
                 {"y_ptr", DataType::f16(), 48 * 64, Fill::Zero}};
    runCase(c);
  }
}

DIFF_CASE("for loops with unroll hints, at trip counts that the hint does not divide") {
  // unroll=U: U copies of the body and a remainder for the last n mod U iterations, with a
  // continue in the body; the sum over the odd rows i < n but row 9 of an i32 buffer, exact
  for (int u : {1, 2, 3, 8})
    for (uint64_t n : {1, 2, 9, 14, 31}) {
      Case c;
      c.name = "unroll_" + std::to_string(u) + "_n" + std::to_string(n);
      c.source = "def k<1>(i32* x_ptr, i32* y_ptr, i32 n) threads=32:\n"
                 "    g = ViewGlobal(x_ptr, shape=[n, 32])\n"
                 "    acc = AllocateRegister(i32, layout=spatial(32), init=0)\n"
                 "    for i in range(1, n, 2, unroll=" +
                 std::to_string(u) +
                 "):\n"
                 "        if i == 9:\n"
                 "            continue\n"
                 "        acc = Add(acc, LoadGlobal(g, layout=spatial(32), offset=[i, 0:]))\n"
                 "    StoreGlobal(acc, ViewGlobal(y_ptr, shape=[32]))\n";
      c.scalars = {{"n", n}};
      c.buffers = {{"x_ptr", DataType::i32(), 32 * 32, Fill::Moderate},
                   {"y_ptr", DataType::i32(), 32, Fill::Zero}};
      c.check = [n](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
        for (int t = 0; t < 32; ++t) {
          int32_t want = 0;
          for (uint64_t i = 1; i < n; i += 2)
            if (i != 9) {
              int32_t x = 0;
              std::memcpy(&x, buffers[0].data() + (i * 32 + uint64_t(t)) * 4, 4);
              want += x;
            }
          int32_t got = 0;
          std::memcpy(&got, buffers[1].data() + size_t(t) * 4, 4);
          if (got != want)
            FAIL_CHECK(side << " lane " << t << ": " << got << ", expected " << want);
        }
      };
      runCase(c);
    }
}

DIFF_CASE("dequantisation in a loop, where the masks' constants are held in registers") {
  // jit/held_registers.h: in loops, the second constant of `(x & C1) | C2` is held in a
  // register, and six or more magics of one field (u1: ten, u5: six) share one held register as
  // lop3(x, C1 | C2, K); a run-time trip count keeps the loop. Words of n-bit codes (the buffer
  // holds every code in turn), and for the types whose codes divide a 16-bit half their in-place
  // pairs, must give isa/convert's result
  for (DataType t : dequantisableTypes()) {
    int n = t.bits;
    std::string T = name(t), N = std::to_string(n), C = std::to_string(16 / n);
    bool halves = 16 % n == 0;
    Case c;
    c.name = "dequant_loop_" + T;
    c.source = "def dequant<1>(" + T +
               "* a_ptr, f16* h_ptr, bf16* b_ptr, f32* f_ptr, f16* q_ptr, i32 n) threads=32:\n"
               "    for i in range(n):\n"
               "        w = LoadGlobal(ViewGlobal(a_ptr, dtype=u32, shape=[n, 32, " +
               N + "]), layout=spatial(32, 1).local(1, " + N +
               "), offset=[i, 0:, 0:])\n"
               "        a = View(w, dtype=" +
               T +
               ", layout=spatial(32, 1).local(1, 32))\n"
               "        StoreGlobal(Cast(a, f16), ViewGlobal(h_ptr, shape=[n, 32, 32]), "
               "offset=[i, 0:, 0:])\n"
               "        StoreGlobal(Cast(a, bf16), ViewGlobal(b_ptr, shape=[n, 32, 32]), "
               "offset=[i, 0:, 0:])\n"
               "        StoreGlobal(Cast(a, f32), ViewGlobal(f_ptr, shape=[n, 32, 32]), "
               "offset=[i, 0:, 0:])\n";
    if (halves)
      c.source += "        h = View(w, dtype=" + T + ", layout=spatial(32, 1, 1, 1).local(1, " + N +
                  ", 2, " + C +
                  "))\n"
                  "        p = ConvertLayout(h, layout=spatial(32, 1, 1, 1).local(1, " +
                  N + ", 1, " + C +
                  ").local(1, 1, 2, 1))\n"
                  "        StoreGlobal(Cast(p, f16), ViewGlobal(q_ptr, shape=[n, 32, " +
                  N + ", 2, " + C + "]), offset=[i, 0:, 0:, 0:, 0:])\n";
    c.buffers = {{"a_ptr", t, 4096, Fill::Codes}, // every code in turn
                 {"h_ptr", DataType::f16(), 4096, Fill::Zero},
                 {"b_ptr", DataType::bf16(), 4096, Fill::Zero},
                 {"f_ptr", DataType::f32(), 4096, Fill::Zero},
                 {"q_ptr", DataType::f16(), 4096, Fill::Zero}};
    c.scalars = {{"n", 4}};
    runCase(c);
  }
}

DIFF_CASE("OCP FP8 pairs of two words' bytes into f16: one prmt and one cvt per pair") {
  // byte i of word 2a with byte i of word 2a + 1 (an in-lane ConvertLayout puts them side by
  // side, as V's two keys in programs/attention/decode_paged.tasm): the pair's operand of the
  // hardware conversion is one prmt of the two words (jit/emit_dequant.cpp); every code (the
  // buffer holds each in turn, NaNs included) must give isa/convert's result
  for (DataType t : {DataType::f8e4m3(), DataType::f8e5m2()}) {
    std::string T = name(t);
    Case c;
    c.name = "dequant_fp8_words_" + T;
    c.source = "def dequant<1>(" + T +
               "* a_ptr, f16* h_ptr, f32* f_ptr) threads=32:\n"
               "    w = LoadGlobal(ViewGlobal(a_ptr, dtype=u32, shape=[32, 8]), "
               "layout=spatial(32, 1).local(1, 8))\n"
               "    a = View(w, dtype=" +
               T +
               ", layout=spatial(32, 1, 1, 1).local(1, 4, 2, 4))\n"
               "    p = ConvertLayout(a, layout=spatial(32, 1, 1, 1).local(1, 4, 1, 4).local(1, "
               "1, 2, 1))\n"
               "    StoreGlobal(Cast(p, f16), ViewGlobal(h_ptr, shape=[32, 4, 2, 4]))\n"
               "    StoreGlobal(Cast(p, f32), ViewGlobal(f_ptr, shape=[32, 4, 2, 4]))\n";
    c.buffers = {{"a_ptr", t, 1024, Fill::Codes},
                 {"h_ptr", DataType::f16(), 1024, Fill::Zero},
                 {"f_ptr", DataType::f32(), 1024, Fill::Zero}};
    runCase(c);
  }
}

DIFF_CASE("chains of float operations on NaNs of any payload give canonical NaNs") {
  // jit/nan_canonical.h drops the canonical NaN selects whose NaN only reaches other float
  // operations; every result that is stored, viewed as bits, reduced across lanes or fed to
  // an mma must still be bit for bit the interpreter's
  for (DataType t : {DataType::f16(), DataType::bf16(), DataType::f32(), DataType::f64()}) {
    std::string T = name(t), U = "u" + std::to_string(t.bits);
    Case c;
    c.name = "nan_chains_" + T;
    c.source = "def chains<1>(" + T + "* a_ptr, " + T + "* b_ptr, " + T + "* c_ptr, " + U +
               "* u_ptr, i32 n) threads=32:\n"
               "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[256]), layout=local(8).spatial(32))\n"
               "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[256]), layout=local(8).spatial(32))\n"
               "    gc = ViewGlobal(c_ptr, shape=[8, 256])\n"
               "    StoreGlobal(Max(Add(a, b), Mul(a, 2.0)), gc, offset=[0, 0:])\n"
               "    StoreGlobal(Div(Sub(Mul(a, b), a), Add(b, 1.0)), gc, offset=[1, 0:])\n"
               "    w = Where(Gt(a, b), Add(a, 1.0), Neg(b))\n"
               "    StoreGlobal(Mul(w, b), gc, offset=[2, 0:])\n"
               "    StoreGlobal(Reduce(Mul(a, b), dim=0, op=sum, keepdim=True), gc, "
               "offset=[3, 0:])\n"
               "    StoreGlobal(Min(Sqrt(Add(a, b)), Sub(a, b)), gc, offset=[4, 0:])\n"
               "    StoreGlobal(Cast(Cast(Mul(a, b), f32), " +
               T +
               "), gc, offset=[5, 0:])\n"
               "    StoreGlobal(View(Mul(Add(a, b), b), dtype=" +
               U +
               "), ViewGlobal(u_ptr, shape=[256]))\n"
               "    acc = Mul(a, 0.0)\n"
               "    for i in range(n):\n"
               "        acc = Add(Mul(acc, b), a)\n"
               "    StoreGlobal(acc, gc, offset=[6, 0:])\n"
               "    StoreGlobal(Sub(acc, b), gc, offset=[7, 0:])\n";
    c.scalars = {{"n", 3}};
    for (Fill fill : {Fill::Special, Fill::Random}) {
      c.buffers = {{"a_ptr", t, 256, fill},
                   {"b_ptr", t, 256, fill},
                   {"c_ptr", t, 8 * 256, Fill::Zero},
                   {"u_ptr", DataType::u(t.bits), 256, Fill::Zero}};
      c.name = "nan_chains_" + T + (fill == Fill::Special ? "_special" : "_random");
      runCase(c);
    }
  }
}

DIFF_CASE("Fma of f32 and f64: one rounding, special values, broadcast and scalar operands") {
  // fma.rn on the GPU against fmaf / fma in the interpreter, bit for bit: random bit patterns
  // (subnormals, NaNs of any payload, infinities) and special values; a broadcast column and
  // scalar operands; an Fma chain in a loop
  for (DataType t : {DataType::f32(), DataType::f64()}) {
    std::string T = name(t);
    Case c;
    c.source =
        "def fma<1>(" + T + "* a_ptr, " + T + "* b_ptr, " + T + "* c_ptr, " + T +
        "* d_ptr, i32 n) threads=32:\n"
        "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[8, 32]), layout=local(8, 1).spatial(1, 32))\n"
        "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[8, 32]), layout=local(8, 1).spatial(1, 32))\n"
        "    c = LoadGlobal(ViewGlobal(c_ptr, shape=[8, 32]), layout=local(8, 1).spatial(1, 32))\n"
        "    s = LoadGlobal(ViewGlobal(c_ptr, shape=[8, 1]), layout=local(8, 1).replicate(32))\n"
        "    gd = ViewGlobal(d_ptr, shape=[4, 8, 32])\n"
        "    StoreGlobal(Fma(a, b, c), gd, offset=[0, 0:, 0:])\n"
        "    StoreGlobal(Fma(a, s, b), gd, offset=[1, 0:, 0:])\n"
        "    StoreGlobal(Fma(a, 3.0, -0.5), gd, offset=[2, 0:, 0:])\n"
        "    acc = Mul(a, 0.0)\n"
        "    for i in range(n):\n"
        "        acc = Fma(acc, b, a)\n"
        "    StoreGlobal(acc, gd, offset=[3, 0:, 0:])\n";
    c.scalars = {{"n", 3}};
    for (Fill fill : {Fill::Special, Fill::Random, Fill::Moderate}) {
      c.buffers = {{"a_ptr", t, 256, fill},
                   {"b_ptr", t, 256, fill},
                   {"c_ptr", t, 256, fill},
                   {"d_ptr", t, 4 * 256, Fill::Zero}};
      c.name = "fma_" + T + "_" + std::to_string(int(fill));
      runCase(c);
    }
  }
}

DIFF_CASE("NaNs through shared memory: parked values, scratch reductions and layout changes") {
  // jit/nan_canonical.cpp treats shared memory as a carrier when only plain loads read it: a
  // NaN parked there may keep its payload when every load of it leads to a canonicalization,
  // and must be canonical as soon as one load's value is stored (second program)
  for (DataType t : {DataType::f16(), DataType::f32(), DataType::f64()}) {
    std::string T = name(t);
    for (bool raw : {false, true}) {
      Case c;
      c.name = "nan_shared_" + T + (raw ? "_raw" : "");
      c.source = "def parked<1>(" + T + "* a_ptr, " + T + "* b_ptr, " + T +
                 "* c_ptr) threads=64:\n"
                 "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[256]), layout=spatial(64).local(4))\n"
                 "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[256]), layout=spatial(64).local(4))\n"
                 "    gc = ViewGlobal(c_ptr, shape=[4, 256])\n"
                 "    sh = AllocateShared(" +
                 T +
                 ", shape=[256])\n"
                 "    StoreShared(Mul(a, b), sh)\n"
                 "    Synchronize()\n"
                 "    p = LoadShared(sh, layout=local(4).spatial(64))\n"
                 "    StoreGlobal(Add(p, 1.0), gc, offset=[0, 0:])\n"
                 "    StoreGlobal(Reduce(Sub(a, b), dim=0, op=max, keepdim=True), gc, "
                 "offset=[1, 0:])\n"
                 "    StoreGlobal(ConvertLayout(Div(a, b), layout=local(4).spatial(64)), gc, "
                 "offset=[2, 0:])\n" +
                 (raw ? "    StoreGlobal(p, gc, offset=[3, 0:])\n" : "");
      c.buffers = {{"a_ptr", t, 256, Fill::Special},
                   {"b_ptr", t, 256, Fill::Special},
                   {"c_ptr", t, 4 * 256, Fill::Zero}};
      runCase(c);
    }
  }
}

DIFF_CASE("float Max and Min of every pair of special values (-0 < +0, NaN payloads)") {
  // f32 and f64 lower to PTX max/min (jit/emit_scalar.cpp), f16 and bf16 to compares and selects
  for (DataType t : {DataType::f16(), DataType::bf16(), DataType::f32(), DataType::f64()})
    runCase(maxMinCase(t));
}

DIFF_CASE("math functions within 2 ulp, special values") {
  for (DataType t : {DataType::f16(), DataType::bf16(), DataType::f32(), DataType::f64()}) {
    runCase(mathCase(t, Fill::Moderate));
    runCase(mathCase(t, Fill::Special));
  }
  // the ex2.approx lowering (jit/lower_elementwise.cpp fastExp2): every f16 and bf16 input,
  // a dense f32 sweep
  std::vector<uint64_t> every16(65536);
  for (uint64_t u = 0; u < every16.size(); ++u)
    every16[u] = u;
  runCase(expSweepCase(DataType::f16(), every16, true, 1.0));
  runCase(expSweepCase(DataType::bf16(), every16, true, 1.0));
  runCase(expSweepCase(DataType::f32(), exp2SweepF32(), false, 2.0));
  // Exp of f32 (the device library's branchless tl_expf, within 0.976 ulp of exp: so within 1
  // ulp of the correctly rounded result): every input with a subnormal result, the overflow
  // threshold, the neighbourhood of the host's worst case, every 4099th pattern
  std::vector<uint64_t> expCodes;
  auto range = [&](float from, float to) {
    for (uint32_t u = std::bit_cast<uint32_t>(from); u <= std::bit_cast<uint32_t>(to); ++u)
      expCodes.push_back(u);
  };
  range(-0x1.5cp+6f, -0x1.ap+6f);          // -87 .. -104
  range(0x1.6p+6f, 0x1.64p+6f);            // 88 .. 89
  range(-0x1.86ed5ep+5f, -0x1.86fd5ep+5f); // around -48.87
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099)
    expCodes.push_back(u);
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 89.0f, -104.0f, 88.72283f, 0x1p-149f,
                  -0x1p-149f, 0x1p-25f, -0x1p-25f, 0x1p-24f, -0x1p-24f})
    expCodes.push_back(std::bit_cast<uint32_t>(x));
  runCase(expSweepCase(DataType::f32(), expCodes, true, 2.0, 1.0));
  // Rcp (jit/lower_elementwise.cpp fastRcp: rcp.approx.f32, 1 ulp; f16 and bf16 through it, 1
  // ulp; f64 the IEEE division): every f16 and bf16 input; f32 inputs with subnormal results
  // (|x| in [2^126, 2^128)) and around 1, subnormal inputs from 2^-128 (reciprocal past the
  // largest f32) to 2^-126, every 4099th pattern and the special values
  runCase(rcpSweepCase(DataType::f16(), every16, 1.0));
  runCase(rcpSweepCase(DataType::bf16(), every16, 1.0));
  std::vector<uint64_t> rcpCodes;
  auto every = [&](float from, float to, uint32_t step) {
    for (uint32_t u = std::bit_cast<uint32_t>(from); u <= std::bit_cast<uint32_t>(to); u += step)
      rcpCodes.push_back(u);
  };
  every(0x1p126f, 0x1.fffffep127f, 61); // subnormal results, every 61st
  every(-0x1p126f, -0x1.fffffep127f, 61);
  every(0x1p-1f, 0x1p1f, 61);      // around 1
  every(0x1p-128f, 0x1p-126f, 13); // subnormal inputs, their reciprocals finite or not
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099)
    rcpCodes.push_back(u);
  for (float x : {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 0x1p-149f, -0x1p-149f, 0x1p-127f,
                  0x1.fffffep127f, -0x1.fffffep127f, 3.0f, -3.0f})
    rcpCodes.push_back(std::bit_cast<uint32_t>(x));
  runCase(rcpSweepCase(DataType::f32(), rcpCodes, 1.0));
  runCase(rcpSweepCase(DataType::f64(),
                       {std::bit_cast<uint64_t>(3.0), std::bit_cast<uint64_t>(-0.0),
                        std::bit_cast<uint64_t>(1e-310), std::bit_cast<uint64_t>(7.0)},
                       0.5));
}

DIFF_CASE("View between packed types") {
  Case c;
  c.name = "view";
  c.source = R"(
def view<1>(i6* a_ptr, u8* b_ptr, f16* c_ptr, u32* d_ptr, bool* e_ptr, u8* f_ptr, i4* g_ptr, u32* h_ptr) threads=32:
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[16, 8]), layout=local(2, 1).column_spatial(4, 8).local(2, 1))
    StoreGlobal(View(a, dtype=u8, layout=local(3).spatial(32)), ViewGlobal(b_ptr, shape=[96]))
    h = LoadGlobal(ViewGlobal(c_ptr, shape=[64]), layout=spatial(32).local(2))
    StoreGlobal(View(h, dtype=u32, layout=spatial(32)), ViewGlobal(d_ptr, shape=[32]))
    e = LoadGlobal(ViewGlobal(e_ptr, shape=[128]), layout=spatial(32).local(4))
    StoreGlobal(View(e, dtype=u8, layout=spatial(32).local(4)), ViewGlobal(f_ptr, shape=[128]))
    q = LoadGlobal(ViewGlobal(g_ptr, shape=[256]), layout=spatial(32).local(8))
    StoreGlobal(View(q, dtype=u32, layout=spatial(32)), ViewGlobal(h_ptr, shape=[32]))
)";
  c.buffers = {{"a_ptr", DataType::i(6), 128, Fill::Random},
               {"b_ptr", DataType::u(8), 96, Fill::Zero},
               {"c_ptr", DataType::f16(), 64, Fill::Random},
               {"d_ptr", DataType::u(32), 32, Fill::Zero},
               {"e_ptr", DataType::boolean(), 128, Fill::Moderate},
               {"f_ptr", DataType::u(8), 128, Fill::Zero},
               {"g_ptr", DataType::i(4), 256, Fill::Random},
               {"h_ptr", DataType::u(32), 32, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("View of 16- and 8-bit slots cut from words, regrouped, into words (prmt)") {
  // view_repack_program.h: words of halves and bytes cut from words, f16 values, computed halves
  Case c;
  c.name = "repack";
  c.source = tilus::testing::kViewRepack;
  c.buffers = {
      {"a_ptr", DataType::u(32), 128, Fill::Random}, {"b_ptr", DataType::u(32), 128, Fill::Zero},
      {"c_ptr", DataType::u(32), 128, Fill::Zero},   {"h_ptr", DataType::f16(), 256, Fill::Random},
      {"d_ptr", DataType::u(32), 128, Fill::Zero},   {"e_ptr", DataType::u(32), 128, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("scalar expressions") {
  Case c;
  c.name = "scalars";
  c.source = R"(
def scalars<1>(i64* out_ptr, f32* fout_ptr, i32 x, i32 y, u32 u, f32 f, i64 w) threads=32:
    g = ViewGlobal(out_ptr, shape=[32])
    gf = ViewGlobal(fout_ptr, shape=[8])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=x / y), g, offset=[0:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=x % y), g, offset=[1:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=cdiv(x, y)), g, offset=[2:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=x << y), g, offset=[3:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=x >> (y & 7)), g, offset=[4:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=min(x, y) * max(x, y)), g, offset=[5:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=i64(x) * w), g, offset=[6:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=u / 3 + u % 7), g, offset=[7:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=(x if x > y else y) - (1 if x == y else 0)), g, offset=[8:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=i32(f * 3.5) + i32(-f)), g, offset=[9:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=~x ^ y), g, offset=[10:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=1 if (x > 0 and y < 0) or not (x == 3) else 2), g, offset=[11:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=cdiv(w, 4) + w / -3), g, offset=[12:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=u >> 31), g, offset=[13:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=i32(u) >> 31), g, offset=[14:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=x / 0 + x % 0), g, offset=[15:])
    StoreGlobal(AllocateRegister(i64, layout=spatial(1).replicate(32), init=w >> 70), g, offset=[16:])
    StoreGlobal(AllocateRegister(f32, layout=spatial(1).replicate(32), init=f / 3.0), gf, offset=[0:])
    StoreGlobal(AllocateRegister(f32, layout=spatial(1).replicate(32), init=f % 1.5), gf, offset=[1:])
    StoreGlobal(AllocateRegister(f32, layout=spatial(1).replicate(32), init=f * f - 1.0 / f), gf, offset=[2:])
    StoreGlobal(AllocateRegister(f32, layout=spatial(1).replicate(32), init=max(f, -f)), gf, offset=[3:])
    StoreGlobal(AllocateRegister(f32, layout=spatial(1).replicate(32), init=f32(w) + f32(u)), gf, offset=[4:])
)";
  c.scalars = {{"x", uint32_t(-123457)},
               {"y", 5},
               {"u", 0xF0000007u},
               {"f", std::bit_cast<uint32_t>(-7.3f)},
               {"w", uint64_t(-98765432123ll)}};
  c.buffers = {{"out_ptr", DataType::i64(), 32, Fill::Zero},
               {"fout_ptr", DataType::f32(), 8, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("control flow (for with negative step, continue, break, while, early return)") {
  const char *source = R"(
def flow<2>(i32* out_ptr, i32 n) threads=32:
    bi = BlockIndices()
    g = ViewGlobal(out_ptr, shape=[2, 64])
    s = 0
    for i in range(n, 0, -3):
        if i % 2 == 0:
            continue
        s = s + i
        if s > 100:
            break
    k = 0
    while k < n:
        k = k + 7
        if k == 14:
            k = k + 1
    t = 0
    for j in range(0, 4):
        for j2 in range(j):
            t = t + j * 10 + j2
    acc = AllocateRegister(i32, layout=spatial(32), init=s * 10000 + k * 100 + t)
    StoreGlobal(acc, g, offset=[bi, 0:])
    if bi == 1:
        return
    StoreGlobal(Add(acc, 1), g, offset=[bi, 32:])
)";
  for (int n : {0, 7, 40, 1000}) {
    Case c;
    c.name = "flow_" + std::to_string(n);
    c.source = source;
    c.scalars = {{"n", uint64_t(n)}};
    c.buffers = {{"out_ptr", DataType::i32(), 128, Fill::Zero}};
    runCase(c);
  }
}

DIFF_CASE("global bounds, strides, slices and replicated stores") {
  Case c;
  c.name = "bounds";
  c.source = R"(
def bounds<cdiv(m, 16), cdiv(n, 32)>(f32* x_ptr, f32* y_ptr, f32* t_ptr, f32* s_ptr, f32* r_ptr, f32* w_ptr, i32 m, i32 n) threads=128:
    bi, bj = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[m, n])
    gy = ViewGlobal(y_ptr, shape=[m, n])
    x = LoadGlobal(gx, layout=spatial(16, 8).local(1, 4), offset=[bi * 16:, bj * 32:])
    StoreGlobal(Add(x, 1.0), gy, offset=[bi * 16:, bj * 32:])
    gt = ViewGlobal(t_ptr, shape=[n, m], strides=[1, n])
    xt = LoadGlobal(gt, layout=spatial(8, 16).local(4, 1), offset=[bj * 32 - 3:, bi * 16 + 1:])
    StoreGlobal(Permute(xt, dims=[1, 0]), ViewGlobal(s_ptr, shape=[m, n]), offset=[bi * 16:, bj * 32:])
    sub = SliceGlobal(gx, offset=[bi * 16 + 2:, 5:], shape=[20, 100])
    r = LoadGlobal(sub, layout=replicate(2).spatial(8, 8).local(2, 4), offset=[0:, bj * 32:])
    StoreGlobal(r, ViewGlobal(r_ptr, shape=[m, n]), offset=[bi * 16:, bj * 32:])
    row = SliceGlobal(gx, offset=[m - 1 - bi, 0:])
    v = LoadGlobal(row, layout=spatial(128).local(1), offset=[bj * 32 - 50:])
    StoreGlobal(v, ViewGlobal(w_ptr, shape=[cdiv(m, 16), cdiv(n, 32), 128]), offset=[bi, bj, 0:])
)";
  c.scalars = {{"m", 37}, {"n", 45}};
  int64_t mn = 37 * 45;
  c.buffers = {{"x_ptr", DataType::f32(), mn, Fill::Moderate},
               {"y_ptr", DataType::f32(), mn, Fill::Zero},
               {"t_ptr", DataType::f32(), mn, Fill::Moderate},
               {"s_ptr", DataType::f32(), mn, Fill::Zero},
               {"r_ptr", DataType::f32(), mn, Fill::Zero},
               {"w_ptr", DataType::f32(), 3 * 2 * 128, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("bounds of LoadGlobal, StoreGlobal and CopyAsync: fixed indices and tiles below, at "
          "and past the extent, partly and wholly outside, negative starts") {
  // Each block takes one start: fixed rows bi - 3 in [-3, 6], tiles [2, 16] at (bi - 4,
  // 6 bj - 20) for rows in [-4, 5] and columns in [-20, 34], against a [4, 32] view. VIEW is a
  // view that ends before its 8 x 32 buffer, or a slice with data of its parent around it.
  const char *source = R"(
def load_fixed<10>(i32* x_ptr, i32* y_ptr) threads=32:
    bi = BlockIndices()
    t = LoadGlobal(VIEW, layout=spatial(32), offset=[bi - 3, 0:])
    StoreGlobal(t, ViewGlobal(y_ptr, shape=[10, 32]), offset=[bi, 0:])

def load_tile<10, 10>(i32* x_ptr, i32* y_ptr) threads=32:
    bi, bj = BlockIndices()
    t = LoadGlobal(VIEW, layout=spatial(2, 16), offset=[bi - 4:, bj * 6 - 20:])
    StoreGlobal(t, ViewGlobal(y_ptr, shape=[10, 10, 2, 16]), offset=[bi, bj, 0:, 0:])

def copy_fixed<10>(i32* x_ptr, i32* y_ptr) threads=32:
    bi = BlockIndices()
    s = AllocateShared(i32, shape=[32])
    CopyAsync(s, VIEW, offset=[bi - 3, 0:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitAll()
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(32)), ViewGlobal(y_ptr, shape=[10, 32]), offset=[bi, 0:])

def copy_tile<10, 10>(i32* x_ptr, i32* y_ptr) threads=32:
    bi, bj = BlockIndices()
    s = AllocateShared(i32, shape=[2, 16])
    CopyAsync(s, VIEW, offset=[bi - 4:, bj * 6 - 20:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitAll()
    Synchronize()
    t = LoadShared(s, layout=spatial(2, 16))
    StoreGlobal(t, ViewGlobal(y_ptr, shape=[10, 10, 2, 16]), offset=[bi, bj, 0:, 0:])

def store_fixed<10>(i32* v_ptr, i32* z_ptr) threads=32:
    bi = BlockIndices()
    region = SliceGlobal(ViewGlobal(z_ptr, shape=[10, 8, 32]), offset=[bi, FIRST:, 0:], shape=[4, 32])
    v = LoadGlobal(ViewGlobal(v_ptr, shape=[32]), layout=spatial(32))
    StoreGlobal(v, region, offset=[bi - 3, 0:])

def store_tile<10, 10>(i32* v_ptr, i32* z_ptr) threads=32:
    bi, bj = BlockIndices()
    region = SliceGlobal(ViewGlobal(z_ptr, shape=[100, 8, 32]), offset=[bi * 10 + bj, FIRST:, 0:], shape=[4, 32])
    v = LoadGlobal(ViewGlobal(v_ptr, shape=[2, 16]), layout=spatial(2, 16))
    StoreGlobal(v, region, offset=[bi - 4:, bj * 6 - 20:])
)";
  const std::pair<const char *, const char *> views[] = {
      {"view", "ViewGlobal(x_ptr, shape=[4, 32])"},
      {"slice", "SliceGlobal(ViewGlobal(x_ptr, shape=[8, 32]), offset=[2:, 0:], shape=[4, 32])"},
  };
  for (const auto &[variant, view] : views) {
    std::string text = source;
    for (size_t at = text.find("VIEW"); at != std::string::npos; at = text.find("VIEW", at))
      text.replace(at, 4, view);
    for (size_t at = text.find("FIRST"); at != std::string::npos; at = text.find("FIRST", at))
      text.replace(at, 5, std::string(variant) == "view" ? "0" : "2");
    for (const char *program : {"load_fixed", "load_tile", "copy_fixed", "copy_tile"}) {
      Case c;
      c.name = std::string("bounds_") + program + "_" + variant;
      c.source = text;
      c.program = program;
      c.buffers = {{"x_ptr", DataType::i(32), 8 * 32, Fill::Index},
                   {"y_ptr", DataType::i(32), 10 * 10 * 32, Fill::Random}};
      runCase(c);
    }
    for (const char *program : {"store_fixed", "store_tile"}) {
      Case c;
      c.name = std::string("bounds_") + program + "_" + variant;
      c.source = text;
      c.program = program;
      c.buffers = {{"v_ptr", DataType::i(32), 32, Fill::Index},
                   {"z_ptr", DataType::i(32), 100 * 8 * 32, Fill::Random}};
      runCase(c);
    }
  }
}

DIFF_CASE("element paths of wide tiles: ragged and misaligned rows of 1-, 2-, 4- and 8-byte "
          "elements") {
  // 32 consecutive elements per thread, at least 16 slots of vector groups per instruction: the
  // element paths of misaligned and cut groups are one inline-PTX statement per group
  // (jit/lower_memory_global.cpp asmLoadElements, asmStoreElements). The views start at element
  // o of their buffers (o odd: every group misaligned) and hold n elements (cut groups at the
  // end); block 0's tile starts 8 elements below the view (a lower bound inside groups) and the
  // last block lies past the end. y outside the view keeps its random contents.
  const char *source = R"(
const T = u8
def copy<cdiv(n + 8, 1024) + 1>(T* x_ptr, T* y_ptr, i32 n, i32 o) threads=32:
    bi = BlockIndices()
    gx = SliceGlobal(ViewGlobal(x_ptr, shape=[2112]), offset=[o:], shape=[n])
    gy = SliceGlobal(ViewGlobal(y_ptr, shape=[2112]), offset=[o:], shape=[n])
    t = LoadGlobal(gx, layout=spatial(32).local(32), offset=[bi * 1024 - 8:])
    StoreGlobal(t, gy, offset=[bi * 1024 - 8:])
)";
  const std::pair<int64_t, int64_t> shapes[] = {{1500, 0}, {2001, 3}, {17, 1}, {2040, 2}};
  for (const char *t : {"u8", "bool", "f16", "f32", "f64"}) {
    DataType dtype = *DataType::parse(t);
    size_t bytes = size_t(dtype.storageBits() / 8);
    for (const auto &[n, o] : shapes) {
      Case c;
      c.name =
          std::string("element_paths_") + t + "_" + std::to_string(n) + "_" + std::to_string(o);
      c.source = source;
      c.defines = {{"T", t}};
      c.scalars = {{"n", uint64_t(n)}, {"o", uint64_t(o)}};
      Fill fill = dtype.isBool() ? Fill::Index : Fill::Random;
      c.buffers = {{"x_ptr", dtype, 2112, fill}, {"y_ptr", dtype, 2112, Fill::Random}};
      c.check = [n, o, bytes, dtype](const char *side,
                                     const std::vector<std::vector<uint8_t>> &buffers) {
        int64_t bad = 0;
        for (int64_t k = o; k < o + n; ++k) {
          const uint8_t *x = buffers[0].data() + size_t(k) * bytes;
          const uint8_t *y = buffers[1].data() + size_t(k) * bytes;
          bool same = dtype.isBool() ? *y == (*x != 0) : std::memcmp(x, y, bytes) == 0;
          if (!same && bad++ < 5)
            FAIL_CHECK(side << " " << dtype.name() << ": element " << k << " not copied");
        }
      };
      runCase(c);
    }
  }
}

DIFF_CASE("packed sub-byte loads and stores shared by many threads") {
  Case c;
  c.name = "packed";
  c.source = R"(
def packed<4>(i3* a_ptr, u5* b_ptr, f4e2m1* c_ptr, i3* d_ptr, u5* e_ptr, f4e2m1* f_ptr, i32* g_ptr) threads=64:
    bi = BlockIndices()
    ga = ViewGlobal(a_ptr, shape=[4, 255])
    a = LoadGlobal(ga, layout=spatial(64).local(4), offset=[bi, 0:])
    b0 = LoadGlobal(ViewGlobal(b_ptr, shape=[4, 256]), layout=local(4).spatial(64), offset=[bi, 0:])
    b = ConvertLayout(b0, layout=spatial(64).local(4))
    f = LoadGlobal(ViewGlobal(c_ptr, shape=[4, 256]), layout=spatial(64).local(4), offset=[bi, 0:])
    StoreGlobal(Cast(Add(Cast(a, i32), 1), i3), ViewGlobal(d_ptr, shape=[4, 255]), offset=[bi, 0:])
    StoreGlobal(b, ViewGlobal(e_ptr, shape=[4, 256]), offset=[bi, 0:])
    StoreGlobal(Cast(Mul(Cast(f, f32), 0.75), f4e2m1), ViewGlobal(f_ptr, shape=[4, 256]), offset=[bi, 0:])
    StoreGlobal(Add(Cast(a, i32), Cast(b, i32)), ViewGlobal(g_ptr, shape=[4, 256]), offset=[bi, 0:])
)";
  c.buffers = {{"a_ptr", DataType::i(3), 4 * 255, Fill::Random},
               {"b_ptr", DataType::u(5), 1024, Fill::Random},
               {"c_ptr", DataType::f(2, 1), 1024, Fill::Random},
               {"d_ptr", DataType::i(3), 4 * 255, Fill::Random},
               {"e_ptr", DataType::u(5), 1024, Fill::Random},
               {"f_ptr", DataType::f(2, 1), 1024, Fill::Random},
               {"g_ptr", DataType::i32(), 1024, Fill::Zero}};
  runCase(c);
}

/// `count` random codes of `bits` bits.
std::vector<uint64_t> randomCodes(int64_t count, int bits, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> out(static_cast<size_t>(count));
  for (uint64_t &v : out)
    v = rng() & ((uint64_t(1) << bits) - 1);
  return out;
}

/// `text` with every `key` replaced by `value`.
std::string substitute(std::string text, const std::string &key, const std::string &value) {
  for (size_t at = text.find(key); at != std::string::npos; at = text.find(key, at + 1))
    text.replace(at, key.size(), value);
  return text;
}

/// The case's buffers `names`, each `count` random codes of type t (seeds `seed` on), and the
/// codes they start with.
std::vector<std::vector<uint64_t>> givenCodes(Case &c, const std::vector<std::string> &names,
                                              DataType t, int64_t count, uint64_t &seed) {
  std::vector<std::vector<uint64_t>> given;
  for (const std::string &name : names) {
    given.push_back(randomCodes(count, t.bits, seed++));
    c.buffers.push_back({name, t, count, Fill::Given, 0, 0, given.back()});
  }
  return given;
}

/// Compares element k of an output buffer with the reference `want(k)` for k below `elements`,
/// reporting the first few differences.
void checkPacked(const char *side, const std::string &what, const std::vector<uint8_t> &out,
                 int bits, int64_t elements, const std::function<uint64_t(int64_t)> &want) {
  int64_t bad = 0;
  for (int64_t k = 0; k < elements; ++k) {
    uint64_t got = getElement(out, k, bits), expect = want(k);
    if (got != expect && bad++ < 5)
      FAIL_CHECK(side << " " << what << "[" << k << "] = " << got << ", expected " << expect);
  }
  CHECK_MESSAGE(bad == 0, side << " " << what << ": " << bad << " elements differ");
}

// Sub-byte elements of 1 to 7 bits one by one (no run of whole bytes): each thread's
// elements lie at constant offsets from its first one, here 37 r + 3 c of a strided view (rows
// 37 elements apart, every third element of a row), so their bits fall into several classes
// modulo a byte and a word (u1: offsets 0 and 4 of a byte; u2 and u4: 0 and 8 / 16 of a word;
// u3 and wider: several, some straddling two words) and the JIT addresses each from its class's
// byte or word; the row stride given at run time
// (`s`, no constant offsets) takes each element's own address. Rows start before the view
// (`shift`) and run past m, columns past 11: what falls outside reads as 0 and is not written,
// and the elements between the view's stay as they were.
DIFF_CASE("sub-byte elements one by one: constant offsets in classes, ragged strided views") {
  const char *source = R"(
def strided<cdiv(m, 8) + 1>(DT* x_ptr, DT* y_ptr, DT* z_ptr, i32 m, i32 s, i32 shift) threads=32:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[m, 11], strides=[37, 3])
    x = LoadGlobal(gx, layout=local(2, 3).spatial(4, 8), offset=[bi * 8 - shift:, 0:])
    StoreGlobal(x, ViewGlobal(y_ptr, shape=[m, 11], strides=[37, 3]), offset=[bi * 8:, 0:])
    gs = ViewGlobal(x_ptr, shape=[m, 11], strides=[s, 3])
    w = LoadGlobal(gs, layout=local(2, 3).spatial(4, 8), offset=[bi * 8 - shift:, 0:])
    StoreGlobal(w, ViewGlobal(z_ptr, shape=[m, 11], strides=[s, 3]), offset=[bi * 8:, 0:])
)";
  uint64_t seed = 77;
  for (const char *dtype : {"u1", "i2", "u3", "u4", "f4e2m1", "i5", "f6e3m2", "i7"}) {
    DataType t = *DataType::parse(dtype);
    int bits = t.bits;
    const int64_t m = 21, all = 37 * m + 40;
    for (int64_t shift : {0, 3}) {
      Case c;
      c.name = std::string("subbyte_strided_") + dtype + "_" + std::to_string(shift);
      c.source = substitute(source, "DT", dtype);
      c.scalars = {{"m", uint64_t(m)}, {"s", uint64_t(37)}, {"shift", uint64_t(shift)}};
      std::vector<std::vector<uint64_t>> given =
          givenCodes(c, {"x_ptr", "y_ptr", "z_ptr"}, t, all, seed);
      c.check = [given, bits, m, shift, all](const char *side,
                                             const std::vector<std::vector<uint8_t>> &buffers) {
        // element k of y and z: row r = k / 37, column c = (k % 37) / 3 of the view when
        // k % 37 is a multiple of 3 below 33 and r < m; it holds x's row r - shift (0 above
        // row 0), the rest keeps its value
        for (size_t b : {size_t(1), size_t(2)})
          checkPacked(side, b == 1 ? "y" : "z", buffers[b], bits, all, [&](int64_t k) {
            int64_t r = k / 37, o = k % 37;
            if (r >= m || o % 3 != 0 || o / 3 >= 11)
              return given[b][size_t(k)];
            return r - shift >= 0 ? given[0][size_t((r - shift) * 37 + o)] : uint64_t(0);
          });
      };
      runCase(c);
    }
  }
}

// The vector paths of sub-byte tiles (runs of whole bytes, lower_memory_packed.cpp) at every
// width from 1 to 7 bits, against a plain reference as well as the interpreter. 1-D: runs of
// 32, 8 and 128 (replicated four times: several 16-byte accesses per run, stored by the
// primary owner) elements per thread at offsets shifted by 0, 1 and 8 elements (aligned runs,
// runs that do not start on a byte, runs on bytes but misaligned for their access), a length
// that ends inside the last tile; stores to shifted offsets drop what falls outside and leave
// every element around the view (the extra elements of each buffer) alone. 2-D: a ragged
// [37, n] tensor (rows of 301 elements start at odd bit offsets) through shared memory of three
// layouts (row-major: vector runs of 16 and 32; tiled with rows of 16 contiguous elements and
// swizzled: runs of 16, element by element for 32).
DIFF_CASE("sub-byte vector loads and stores: widths 1-7, ragged and misaligned tiles, shared") {
  const char *source1 = R"(
def vec1<cdiv(n, 2048)>(DT* x_ptr, DT* y_ptr, DT* z_ptr, DT* w_ptr, DT* v_ptr, DT* q_ptr, i32 n, i32 shift) threads=64:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(64).local(32), offset=[bi * 2048:])
    StoreGlobal(x, ViewGlobal(y_ptr, shape=[n]), offset=[bi * 2048:])
    u = LoadGlobal(gx, layout=spatial(64).local(32), offset=[bi * 2048 + shift:])
    StoreGlobal(u, ViewGlobal(z_ptr, shape=[n]), offset=[bi * 2048:])
    StoreGlobal(x, ViewGlobal(w_ptr, shape=[n]), offset=[bi * 2048 + shift:])
    e = LoadGlobal(gx, layout=local(4).spatial(64).local(8), offset=[bi * 2048 + shift:])
    StoreGlobal(e, ViewGlobal(v_ptr, shape=[n]), offset=[bi * 2048 + shift:])
    q = LoadGlobal(gx, layout=replicate(4).spatial(16).local(128), offset=[bi * 2048 + shift:])
    StoreGlobal(q, ViewGlobal(q_ptr, shape=[n]), offset=[bi * 2048 + shift:])
)";
  const char *source2 = R"(
def tile2<cdiv(m, 16), cdiv(n, 128)>(DT* x_ptr, DT* y_ptr, DT* s_ptr, i32 m, i32 n) threads=64:
    bi, bj = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[m, n])
    x = LoadGlobal(gx, layout=spatial(8, 8).local(2, 16), offset=[bi * 16:, bj * 128:])
    StoreGlobal(x, ViewGlobal(y_ptr, shape=[m, n]), offset=[bi * 16:, bj * 128:])
    s = AllocateShared(DT, shape=[16, 128], layout=SLAYOUT)
    StoreShared(x, s)
    Synchronize()
    r = LoadShared(s, layout=spatial(16, 4).local(1, 32))
    StoreGlobal(r, ViewGlobal(s_ptr, shape=[m, n]), offset=[bi * 16:, bj * 128:])
)";
  const int64_t extra = 100; // elements of each buffer past the view
  uint64_t seed = 1;
  for (const char *dtype : {"u1", "i2", "u3", "u4", "f4e2m1", "i5", "f6e3m2", "u6", "i7"}) {
    DataType t = *DataType::parse(dtype);
    int bits = t.bits;
    int64_t n = 3 * 2048 - 45;
    for (int64_t shift : {0, 1, 8}) {
      Case c;
      c.name = std::string("subbyte_vec1_") + dtype + "_" + std::to_string(shift);
      c.source = substitute(source1, "DT", dtype);
      c.scalars = {{"n", uint64_t(n)}, {"shift", uint64_t(shift)}};
      std::vector<std::vector<uint64_t>> given =
          givenCodes(c, {"x_ptr", "y_ptr", "z_ptr", "w_ptr", "v_ptr", "q_ptr"}, t, n + extra, seed);
      c.check = [given, bits, n, shift](const char *side,
                                        const std::vector<std::vector<uint8_t>> &buffers) {
        const std::vector<uint64_t> &x = given[0];
        int64_t all = n + extra;
        checkPacked(side, "y", buffers[1], bits, all,
                    [&](int64_t k) { return k < n ? x[size_t(k)] : given[1][size_t(k)]; });
        checkPacked(side, "z", buffers[2], bits, all, [&](int64_t k) {
          if (k >= n)
            return given[2][size_t(k)];
          return k + shift < n ? x[size_t(k + shift)] : 0;
        });
        checkPacked(side, "w", buffers[3], bits, all, [&](int64_t k) {
          return k >= shift && k < n ? x[size_t(k - shift)] : given[3][size_t(k)];
        });
        for (size_t b : {size_t(4), size_t(5)})
          checkPacked(side, b == 4 ? "v" : "q", buffers[b], bits, all, [&](int64_t k) {
            return k >= shift && k < n ? x[size_t(k)] : given[b][size_t(k)];
          });
      };
      runCase(c);
    }
    const char *layouts[] = {"row_major(16, 128)", "row_major(16, 8).row_major(1, 16)",
                             "swizzle(row_major(16, 128), 2, 4, 3)"};
    int which = 0;
    for (const char *layout : layouts) {
      for (int64_t cols : {301, 256}) {
        int64_t rows = 37, all = rows * cols + extra;
        Case c;
        c.name = std::string("subbyte_tile2_") + dtype + "_" + std::to_string(which) + "_" +
                 std::to_string(cols);
        c.source = substitute(substitute(source2, "DT", dtype), "SLAYOUT", layout);
        c.scalars = {{"m", uint64_t(rows)}, {"n", uint64_t(cols)}};
        std::vector<std::vector<uint64_t>> given =
            givenCodes(c, {"x_ptr", "y_ptr", "s_ptr"}, t, all, seed);
        c.check = [given, bits, rows, cols, all](const char *side,
                                                 const std::vector<std::vector<uint8_t>> &buffers) {
          for (int b = 1; b <= 2; ++b)
            checkPacked(side, b == 1 ? "y" : "s", buffers[size_t(b)], bits, all, [&](int64_t k) {
              return k < rows * cols ? given[0][size_t(k)] : given[size_t(b)][size_t(k)];
            });
        };
        runCase(c);
      }
      ++which;
    }
  }
}

DIFF_CASE("shared layouts (row/column major, strided, tiled, swizzled, packed)") {
  const char *layouts[] = {"row_major(32, 64)",
                           "column_major(32, 64)",
                           "strided([32, 64], [65, 1])",
                           "row_major(4, 8).row_major(8, 8)",
                           "swizzle(row_major(32, 64), 3, 3, 4)",
                           "swizzle(row_major(4, 2).column_major(8, 32), 2, 1, 5)"};
  int k = 0;
  for (const char *layout : layouts) {
    for (const char *dtype : {"f16", "f32", "u4"}) {
      std::stringstream s;
      s << "def shared<1>(" << dtype << "* x_ptr, " << dtype << "* y_ptr) threads=128:\n"
        << "    s = AllocateShared(" << dtype << ", shape=[32, 64], layout=" << layout << ")\n"
        << "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[32, 64]), layout=spatial(4, 32).local(8, "
           "2))\n"
        << "    StoreShared(x, s)\n"
        << "    Synchronize()\n"
        << "    y = LoadShared(s, layout=local(2, 2).spatial(16, 8).local(1, 4))\n"
        << "    StoreGlobal(y, ViewGlobal(y_ptr, shape=[32, 64]))\n"
        << "    t = SliceShared(s, offset=[3, 8:], shape=[32])\n"
        << "    z = LoadShared(t, layout=spatial(32).replicate(4))\n"
        << "    Synchronize()\n"
        << "    StoreShared(z, s, offset=[5, 16:])\n"
        << "    Synchronize()\n"
        << "    w = LoadShared(s, layout=spatial(4, 32).local(8, 2))\n"
        << "    StoreGlobal(w, ViewGlobal(y_ptr, shape=[32, 64]))\n";
      DataType t = *DataType::parse(dtype);
      Case c;
      c.name = "shared_" + std::to_string(k++) + "_" + dtype;
      c.source = s.str();
      c.buffers = {{"x_ptr", t, 32 * 64, Fill::Random}, {"y_ptr", t, 32 * 64, Fill::Zero}};
      runCase(c);
    }
  }
}

namespace {

/// Runs `source`, a program `frag(bf16* x_ptr, bf16* y_ptr, i32 r0, i32 c0)` with two SHIFT
/// placeholders in its offsets, for a fragment of rows x cols at the bottom right of a 64 x 64
/// tile (r0, c0 in units of 8), at column shifts 0 and 3: offsets known to be multiples of 8
/// take the 8x8 matrix path (ldmatrix, stmatrix), a shift of 3 the ordinary one.
void runFragmentShifts(const std::string &source, const std::string &name, int rows, int cols) {
  Case c;
  int c0 = 64 - cols;
  c.scalars = {{"r0", uint64_t((64 - rows) / 8)}, {"c0", uint64_t(c0 / 8)}};
  c.buffers = {{"x_ptr", DataType::bf16(), 64 * 64, Fill::Random},
               {"y_ptr", DataType::bf16(), 64 * 64, Fill::Zero}};
  for (int shift : {0, 3}) {
    if (shift > c0)
      continue;
    c.source = source;
    c.source.replace(c.source.find("SHIFT"), 5, std::to_string(shift));
    c.source.replace(c.source.find("SHIFT"), 5, std::to_string(shift));
    c.name = name + std::to_string(shift);
    runCase(c);
  }
}

} // namespace

DIFF_CASE("LoadShared of mma fragments (ldmatrix x1/x2/x4, .trans) from several layouts") {
  const char *sharedLayouts[] = {
      "row_major(64, 64)", "strided([64, 64], [72, 1])", "strided([64, 64], [65, 1])",
      "swizzle(row_major(64, 64), 3, 3, 3)", "swizzle(row_major(64, 64), 2, 4, 6)"};
  struct Frag {
    const char *layout;
    int rows, cols;
  };
  const Frag regLayouts[] = {
      {"column_local(2, 2).spatial(8, 4).local(1, 2)", 16, 16},                    // A, x4
      {"local(2, 1).column_spatial(4, 8).local(2, 1)", 16, 8},                     // B, x2.trans
      {"spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)", 64, 64}, // C-like, x4 x2
      {"spatial(2, 1).replicate(2).local(2, 2).column_local(2, 2).spatial(8, 4).local(1, 2)", 64,
       32},
      {"replicate(2).spatial(1, 2).local(2, 4).local(2, 1).column_spatial(4, 8).local(2, 1)", 32,
       64},
      {"local(3, 1).spatial(8, 4).local(1, 2)", 24, 8}, // 3 matrices
  };
  int k = 0;
  for (const char *sl : sharedLayouts) {
    for (const Frag &frag : regLayouts) {
      const char *rl = frag.layout;
      std::string text =
          std::string("def frag<1>(bf16* x_ptr, bf16* y_ptr, i32 r0, i32 c0) threads=THREADS:\n") +
          "    s = AllocateShared(bf16, shape=[64, 64], layout=" + sl + ")\n" +
          "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[64, 64]), layout=spatial(THREADS / 4, "
          "4).local(64 / (THREADS / 4), 16))\n" +
          "    StoreShared(x, s)\n" + "    Synchronize()\n" + "    f = LoadShared(s, layout=" + rl +
          ", offset=[r0 * 8:, c0 * 8 - SHIFT:])\n" +
          "    StoreGlobal(f, ViewGlobal(y_ptr, shape=[64, 64]), offset=[r0 * 8:, c0 * 8 - "
          "SHIFT:])\n";
      std::string layout = rl;
      int threads = layout.find("spatial(2, 2)") != std::string::npos ||
                            layout.find("replicate(2)") != std::string::npos
                        ? 128
                        : 32;
      if (layout.find("spatial(2, 1).replicate(2)") != std::string::npos)
        threads = 128;
      for (size_t p = text.find("THREADS"); p != std::string::npos; p = text.find("THREADS"))
        text.replace(p, 7, std::to_string(threads));
      runFragmentShifts(text, "ldmatrix_" + std::to_string(++k) + "_", frag.rows, frag.cols);
    }
  }
}

DIFF_CASE("StoreShared of mma fragments (stmatrix x1/x2/x4, .trans) into several layouts") {
  // stmatrix is taken in kernels with Hopper instructions: the tile leaves by TmaStore (row-major
  // and 128-byte swizzled tiles); padded tiles, and every tile through LoadShared and
  // StoreGlobal, take the ordinary path
  struct Shared {
    const char *layout;
    bool tma;
  };
  const Shared sharedLayouts[] = {{"row_major(64, 64)", true},
                                  {"swizzle(row_major(64, 64), 3, 3, 3)", true},
                                  {"strided([64, 64], [72, 1])", false},
                                  {"strided([64, 64], [65, 1])", false}};
  struct Frag {
    const char *layout;
    int rows, cols;
  };
  const Frag regLayouts[] = {
      {"column_local(2, 2).spatial(8, 4).local(1, 2)", 16, 16},                    // x4
      {"local(2, 1).column_spatial(4, 8).local(2, 1)", 16, 8},                     // x2.trans
      {"spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)", 64, 64}, // x4 x2
      {"spatial(2, 1).replicate(2).local(2, 2).column_local(2, 2).spatial(8, 4).local(1, 2)", 64,
       32},                                             // replicated: the ordinary path
      {"local(3, 1).spatial(8, 4).local(1, 2)", 24, 8}, // 3 matrices
      {"local(1, 1).spatial(8, 4).local(1, 2)", 8, 8},  // x1
  };
  int k = 0;
  for (const Shared &sl : sharedLayouts) {
    for (const Frag &frag : regLayouts) {
      for (bool tma : {false, true}) {
        if (tma && !sl.tma)
          continue;
        std::string layout = frag.layout;
        int threads = layout.find("spatial(2, ") != std::string::npos ? 128 : 32;
        std::string whole = "spatial(" + std::to_string(threads / 4) + ", 4).local(" +
                            std::to_string(64 / (threads / 4)) + ", 16)";
        // y (zeros) into the tile first, then the fragment at (r0 * 8, c0 * 8 - SHIFT), then
        // the whole tile back to y: every element the fragment does not cover stays 0
        std::string text =
            std::string("def frag<1>(bf16* x_ptr, bf16* y_ptr, i32 r0, i32 c0) threads=") +
            std::to_string(threads) + ":\n" +
            "    s = AllocateShared(bf16, shape=[64, 64], layout=" + sl.layout + ")\n" +
            "    z = LoadGlobal(ViewGlobal(y_ptr, shape=[64, 64]), layout=" + whole + ")\n" +
            "    StoreShared(z, s)\n" + "    Synchronize()\n" +
            "    f = LoadGlobal(ViewGlobal(x_ptr, shape=[64, 64]), layout=" + frag.layout +
            ", offset=[r0 * 8:, c0 * 8 - SHIFT:])\n" +
            "    StoreShared(f, s, offset=[r0 * 8:, c0 * 8 - SHIFT:])\n";
        if (tma)
          text += "    FenceProxyAsync()\n    Synchronize()\n"
                  "    TmaStore(s, ViewGlobal(y_ptr, shape=[64, 64]), offset=[0:, 0:])\n"
                  "    TmaStoreCommitGroup()\n    TmaStoreWaitGroup(0)\n";
        else
          text += "    Synchronize()\n    w = LoadShared(s, layout=" + whole + ")\n" +
                  "    StoreGlobal(w, ViewGlobal(y_ptr, shape=[64, 64]))\n";
        runFragmentShifts(text, "stmatrix_" + std::to_string(k) + (tma ? "_tma_" : "_"), frag.rows,
                          frag.cols);
      }
      ++k;
    }
  }
}

DIFF_CASE("CopyAsync (cp.async chunks, partial and misaligned tiles, packed types)") {
  const char *source = R"(
def copy<cdiv(m, 32), cdiv(n, 64)>(DT* x_ptr, DT* y_ptr, DT* w_ptr, i32 m, i32 n, i32 shift) threads=128:
    bi, bj = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[m, n])
    s = AllocateShared(DT, shape=[2, 32, 64])
    CopyAsync(SliceShared(s, offset=[1, 0:, 0:]), gx, offset=[bi * 32:, bj * 64 + shift:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitGroup(0)
    Synchronize()
    y = LoadShared(s, layout=spatial(32, 4).local(1, 16), offset=[1, 0:, 0:])
    StoreGlobal(y, ViewGlobal(y_ptr, shape=[m, n]), offset=[bi * 32:, bj * 64:])
    CopyAsync(SliceShared(s, offset=[0, 0:, 0:]), gx, offset=[bi * 32 - 1:, bj * 64 - 3:])
    CopyAsyncWaitAll()
    Synchronize()
    z = LoadShared(s, layout=spatial(32, 4).local(1, 16), offset=[0, 0:, 0:])
    StoreGlobal(z, ViewGlobal(w_ptr, shape=[m, n]), offset=[bi * 32:, bj * 64:])
)";
  for (const char *dtype : {"f16", "f32", "u8", "f64", "u4", "bool"}) {
    for (int shift : {0, 1, 8}) {
      for (auto [m, n] : {std::pair{64, 128}, std::pair{45, 77}}) {
        Case c;
        c.name =
            std::string("copy_") + dtype + "_" + std::to_string(shift) + "_" + std::to_string(m);
        c.source = source;
        std::string text = source;
        for (size_t p = text.find("DT"); p != std::string::npos; p = text.find("DT", p + 1))
          text.replace(p, 2, dtype);
        c.source = text;
        c.scalars = {{"m", uint64_t(m)}, {"n", uint64_t(n)}, {"shift", uint64_t(shift)}};
        DataType t = *DataType::parse(dtype);
        c.buffers = {{"x_ptr", t, m * n, Fill::Moderate},
                     {"y_ptr", t, m * n, Fill::Zero},
                     {"w_ptr", t, m * n, Fill::Zero}};
        runCase(c);
      }
    }
  }
}

DIFF_CASE("CopyAsync of tiles whose chunks the threads cover by constant steps of a split "
          "dimension (page rows of a paged cache), into linear and swizzled stages") {
  // A block copies the rows of kv head 1 of three pages (a block table's entries) into three
  // stages of a ring, loads each stage back and stores it. The tiles' 16-byte chunks are more
  // per row than a 32-thread block covers, but the threads' chunks of dimensions k.. divide 32
  // (the JIT's split path: chunk tid + 32 i is chunk tid moved by constants); the stage index
  // and the pages are run-time values. Reference: the gather itself, in plain C++.
  struct Shape {
    std::vector<int> dims; // the tile in u32 words, the last dimension contiguous
    const char *layout;    // the shared layout of [3, dims...], "" for row-major
  };
  const std::vector<Shape> shapes = {
      {{2, 2, 4, 1, 64}, ""}, {{2, 2, 4, 1, 64}, "swizzle(row_major(3, 2, 2, 4, 1, 64), 3, 2, 3)"},
      {{4, 4, 2, 32}, ""},    {{4, 4, 2, 32}, "swizzle(row_major(3, 4, 4, 2, 32), 2, 2, 3)"},
      {{3, 8, 32}, ""},
  };
  const int kvHeads = 2, pages = 5, blocks = 4;
  for (size_t si = 0; si < shapes.size(); ++si) {
    const std::vector<int> &d = shapes[si].dims;
    size_t r = d.size();
    int64_t tile = 1;
    for (int v : d)
      tile *= v;
    auto list = [&](const std::vector<std::string> &items) {
      std::string out;
      for (size_t k = 0; k < items.size(); ++k)
        out += (k ? ", " : "") + items[k];
      return out;
    };
    std::vector<std::string> dims, gdims, full, gofs, ones, local;
    for (size_t k = 0; k < r; ++k) {
      dims.push_back(std::to_string(d[k]));
      full.push_back("0:");
      if (k + 1 == r) {
        gdims.push_back(std::to_string(kvHeads));
        gofs.push_back("1");
      }
      gdims.push_back(std::to_string(d[k]));
      gofs.push_back("0:");
      ones.push_back(k + 1 == r ? "32" : "1");
      local.push_back(k + 1 == r ? std::to_string(d[k] / 32) : std::to_string(d[k]));
    }
    std::string layout = shapes[si].layout[0] ? std::string(", layout=") + shapes[si].layout : "";
    std::string src = "def copy<" + std::to_string(blocks) +
                      ">(u32* x_ptr, i32* tbl, u32* y_ptr, i32 num_pages) threads=32:\n"
                      "    bi = BlockIndices()\n"
                      "    g = ViewGlobal(x_ptr, shape=[num_pages, " +
                      list(gdims) +
                      "])\n"
                      "    gt = ViewGlobal(tbl, shape=[" +
                      std::to_string(blocks) +
                      ", 3])\n"
                      "    s = AllocateShared(u32, shape=[3, " +
                      list(dims) + "]" + layout +
                      ")\n"
                      "    for st in range(3):\n"
                      "        page = LoadScalar(gt, offset=[bi, st], dtype=i32)\n"
                      "        CopyAsync(SliceShared(s, offset=[st, " +
                      list(full) + "]), g, offset=[page, " + list(gofs) +
                      "])\n"
                      "    CopyAsyncCommitGroup()\n"
                      "    CopyAsyncWaitAll()\n"
                      "    Synchronize()\n"
                      "    gy = ViewGlobal(y_ptr, shape=[" +
                      std::to_string(blocks) + ", 3, " + list(dims) +
                      "])\n"
                      "    for st in range(3):\n"
                      "        y = LoadShared(s, layout=local(" +
                      list(local) + ").spatial(" + list(ones) + "), offset=[st, " + list(full) +
                      "])\n"
                      "        StoreGlobal(y, gy, offset=[bi, st, " +
                      list(full) + "])\n";
    Case c;
    c.name = "copy_split_" + std::to_string(si);
    c.source = src;
    c.scalars = {{"num_pages", uint64_t(pages)}};
    std::vector<uint64_t> table;
    for (int b = 0; b < blocks; ++b)
      for (int st = 0; st < 3; ++st)
        table.push_back(uint64_t((b * 3 + st * 2 + 1) % pages));
    int64_t pageWords = tile * kvHeads;
    c.buffers = {{"x_ptr", DataType::u(32), pages * pageWords, Fill::Index},
                 {"tbl", DataType::i32(), blocks * 3, Fill::Given, 0, 0, table},
                 {"y_ptr", DataType::u(32), blocks * 3 * tile, Fill::Zero}};
    c.check = [=](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
      const auto *y = reinterpret_cast<const uint32_t *>(buffers[2].data());
      int64_t inner = d[r - 1], rowsPerTile = tile / inner;
      int64_t bad = 0;
      for (int b = 0; b < blocks; ++b)
        for (int st = 0; st < 3; ++st)
          for (int64_t row = 0; row < rowsPerTile; ++row)
            for (int64_t w = 0; w < inner; ++w) {
              int64_t page = int64_t(table[size_t(b * 3 + st)]);
              // element (page, row..., head 1, w) of the cache: rows of kvHeads * inner words
              uint32_t want = uint32_t(page * pageWords + row * kvHeads * inner + inner + w);
              if (y[(b * 3 + st) * tile + row * inner + w] != want)
                ++bad;
            }
      std::string what = std::string(side) + ": " + std::to_string(bad) + " words differ";
      CHECK_MESSAGE(bad == 0, what);
    };
    runCase(c);
  }
}

DIFF_CASE("ConvertLayout and Reduce (warp shuffles and shared memory)") {
  for (const char *dtype : {"f32", "i32", "f16", "u8", "bool", "f64", "bf16"}) {
    std::stringstream s;
    s << "def red<1>(" << dtype << "* x_ptr, " << dtype << "* y_ptr, " << dtype << "* z_ptr, "
      << dtype << "* c_ptr, " << dtype << "* k_ptr) threads=128:\n"
      << "    x = LoadGlobal(ViewGlobal(x_ptr, shape=[4, 128]), layout=spatial(4, 32).local(1, "
         "4))\n"
      << "    gy = ViewGlobal(y_ptr, shape=[6, 4])\n"
      << "    gz = ViewGlobal(z_ptr, shape=[6, 128])\n";
    const char *ops[] = {"sum", "max", "min", "prod", "any", "all"};
    DataType t = *DataType::parse(dtype);
    for (int k = 0; k < (t.isFloat() ? 4 : 6); ++k) {
      s << "    StoreGlobal(Reduce(x, dim=1, op=" << ops[k] << "), gy, offset=[" << k << ", 0:])\n";
      s << "    StoreGlobal(Reduce(x, dim=0, op=" << ops[k] << "), gz, offset=[" << k << ", 0:])\n";
    }
    s << "    StoreGlobal(ConvertLayout(x, layout=local(4, 1).spatial(1, 128)), ViewGlobal(c_ptr, "
         "shape=[4, 128]))\n";
    // keepdim results broadcast back over the reduced dimension (both paths)
    s << "    m0 = Reduce(x, dim=0, op=max, keepdim=True)\n"
      << "    m1 = Reduce(x, dim=1, op=min, keepdim=True)\n"
      << "    gk = ViewGlobal(k_ptr, shape=[2, 4, 128])\n";
    if (t == DataType::boolean()) {
      s << "    StoreGlobal(Or(x, m0), gk, offset=[0, 0:, 0:])\n"
        << "    StoreGlobal(And(x, m1), gk, offset=[1, 0:, 0:])\n";
    } else {
      s << "    StoreGlobal(Sub(x, m0), gk, offset=[0, 0:, 0:])\n"
        << "    StoreGlobal(Max(x, m1), gk, offset=[1, 0:, 0:])\n";
    }
    Case c;
    c.name = std::string("reduce_") + dtype;
    c.source = s.str();
    bool isFloat = t.isFloat();
    c.buffers = {{"x_ptr", t, 512, isFloat ? Fill::Moderate : Fill::Random},
                 {"y_ptr", t, 24, Fill::Zero, 0, isFloat ? 1e-5 : 0},
                 {"z_ptr", t, 6 * 128, Fill::Zero, 0, isFloat ? 1e-5 : 0},
                 {"c_ptr", t, 512, Fill::Zero},
                 {"k_ptr", t, 1024, Fill::Zero}};
    if (t == DataType::f16() || t == DataType::bf16()) {
      c.buffers[1].rel = 1e-2;
      c.buffers[2].rel = 1e-2;
    }
    runCase(c);
  }
}

DIFF_CASE("Dot through mma.sync, per thread and through shared memory") {
  struct DotSpec {
    const char *name, *ab, *cd, *la, *lb, *lc;
    int m, n, k, threads;
  };
  const DotSpec specs[] = {
      {"mma_f16_f32", "f16", "f32", "column_local(2, 2).spatial(8, 4).local(1, 2)",
       "local(2, 1).column_spatial(4, 8).local(2, 1)", "local(2, 1).spatial(8, 4).local(1, 2)", 16,
       8, 16, 32},
      {"mma_f16_f16", "f16", "f16", "local(1, 2).column_local(2, 2).spatial(8, 4).local(1, 2)",
       "local(2, 2).local(2, 1).column_spatial(4, 8).local(2, 1)",
       "local(1, 2).local(2, 1).spatial(8, 4).local(1, 2)", 16, 16, 64, 32},
      {"mma_bf16", "bf16", "f32", "spatial(2, 1).column_local(2, 2).spatial(8, 4).local(1, 2)",
       "replicate(2).local(2, 1).column_spatial(4, 8).local(2, 1)",
       "spatial(2, 1).local(2, 1).spatial(8, 4).local(1, 2)", 32, 8, 16, 64},
      {"mma_i8", "i8", "i32", "column_local(2, 2).spatial(8, 4).local(1, 4)",
       "local(2, 1).column_spatial(4, 8).local(4, 1)", "local(2, 1).spatial(8, 4).local(1, 2)", 16,
       8, 32, 32},
      {"mma_e4m3", "f8e4m3", "f32", "column_local(2, 2).spatial(8, 4).local(1, 4)",
       "local(2, 1).column_spatial(4, 8).local(4, 1)", "local(2, 1).spatial(8, 4).local(1, 2)", 16,
       8, 32, 32},
      {"thread_f32", "f32", "f32", "spatial(4, 1).replicate(8).local(4, 16)",
       "replicate(4).spatial(1, 8).local(16, 1)", "spatial(4, 8).local(4, 1)", 16, 8, 16, 32},
      {"thread_f64", "f64", "f64", "spatial(4, 1).replicate(8).local(4, 16)",
       "replicate(4).spatial(1, 8).local(16, 1)", "spatial(4, 8).local(4, 1)", 16, 8, 16, 32},
  };
  for (const DotSpec &d : specs) {
    std::stringstream s;
    s << "def dot<1>(" << d.ab << "* a_ptr, " << d.ab << "* b_ptr, " << d.cd << "* c_ptr, " << d.cd
      << "* d_ptr) threads=" << d.threads << ":\n"
      << "    a = LoadGlobal(ViewGlobal(a_ptr, shape=[" << d.m << ", " << d.k
      << "]), layout=" << d.la << ")\n"
      << "    b = LoadGlobal(ViewGlobal(b_ptr, shape=[" << d.k << ", " << d.n
      << "]), layout=" << d.lb << ")\n"
      << "    gc = ViewGlobal(c_ptr, shape=[" << d.m << ", " << d.n << "])\n"
      << "    c = LoadGlobal(gc, layout=" << d.lc << ")\n"
      << "    StoreGlobal(Dot(a, b, c), ViewGlobal(d_ptr, shape=[" << d.m << ", " << d.n << "]))\n";
    DataType ab = *DataType::parse(d.ab), cd = *DataType::parse(d.cd);
    Case c;
    c.name = std::string("dot_") + d.name;
    c.source = s.str();
    c.buffers = {{"a_ptr", ab, d.m * d.k, Fill::Moderate},
                 {"b_ptr", ab, d.k * d.n, Fill::Moderate},
                 {"c_ptr", cd, d.m * d.n, Fill::Moderate},
                 {"d_ptr", cd, d.m * d.n, Fill::Zero, 0, cd == DataType::f16() ? 2e-3 : 1e-5}};
    runCase(c);
  }
}

DIFF_CASE("Iota, Where, AllocateRegister, BlockIndices on a 3-D grid, workspace") {
  Case c;
  c.name = "misc";
  c.source = R"(
def misc<2, 3, 4>(i32* o_ptr, f32* f_ptr) threads=64:
    bx, by, bz = BlockIndices()
    i = Iota(layout=spatial(8, 8).local(1, 2), dim=1)
    j = Iota(layout=spatial(8, 8).local(1, 2), dim=0, dtype=f32)
    w = AllocateGlobal(i32, shape=[2, 3, 4, 8, 16])
    v = Where(Lt(i, 7), Add(i, bx * 100 + by * 10 + bz), -1)
    StoreGlobal(v, w, offset=[bx, by, bz, 0:, 0:])
    Synchronize()
    back = LoadGlobal(w, layout=spatial(8, 8).local(1, 2), offset=[bx, by, bz, 0:, 0:])
    StoreGlobal(back, ViewGlobal(o_ptr, shape=[2, 3, 4, 8, 16]), offset=[bx, by, bz, 0:, 0:])
    z = AllocateRegister(f32, layout=spatial(8, 8).local(1, 2), init=2.5)
    StoreGlobal(Where(Gt(j, 3.0), j, z), ViewGlobal(f_ptr, shape=[2, 3, 4, 8, 16]), offset=[bx, by, bz, 0:, 0:])
)";
  c.buffers = {{"o_ptr", DataType::i32(), 24 * 128, Fill::Zero},
               {"f_ptr", DataType::f32(), 24 * 128, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("LoadScalar: table walks, out-of-bounds indices, conversions, shared sources") {
  // Random table entries: taken modulo 80 they index rows 0..79 of a 64-row view, so some
  // pages are outside (and read 0); the lengths bound loops and choose branches.
  Case c;
  c.name = "load_scalar";
  c.source = R"(
def walk<8>(i32* table, i32* lens, f32* data, u4* q_ptr, f16* h_ptr, f32* out) threads=64:
    b = BlockIndices()
    gt = ViewGlobal(table, shape=[8, 16])
    gd = ViewGlobal(data, shape=[64, 64])
    go = ViewGlobal(out, shape=[8, 5, 64])
    n = LoadScalar(ViewGlobal(lens, shape=[8]), offset=[b], dtype=i32)
    n = (n % 17 + 17) % 17
    acc = AllocateRegister(f32, layout=spatial(64), init=0.0)
    for j in range(n):
        raw = LoadScalar(gt, offset=[b, j], dtype=i64)
        page = (raw % 80 + 80) % 80
        x = LoadGlobal(gd, layout=spatial(64), offset=[page, 0:])
        if raw % 3 == 0:
            acc = Add(acc, x)
        else:
            acc = Sub(acc, Mul(x, 0.5))
    StoreGlobal(acc, go, offset=[b, 0, 0:])
    q = LoadScalar(ViewGlobal(q_ptr, shape=[37]), offset=[b * 5 % 37], dtype=f32)
    h = LoadScalar(ViewGlobal(h_ptr, shape=[8]), offset=[b], dtype=f32)
    hi = LoadScalar(ViewGlobal(h_ptr, shape=[8]), offset=[b], dtype=i16)
    oob = LoadScalar(gd, offset=[64 + b, b], dtype=f32)
    s = AllocateShared(f32, shape=[64])
    StoreShared(acc, s)
    Synchronize()
    sv = LoadScalar(s, offset=[(b * 7 + n) % 64], dtype=f32)
    i = Iota(layout=spatial(64), dim=0, dtype=f32)
    StoreGlobal(Add(i, q), go, offset=[b, 1, 0:])
    StoreGlobal(Add(i, h), go, offset=[b, 2, 0:])
    StoreGlobal(Add(i, f32(hi) + oob), go, offset=[b, 3, 0:])
    StoreGlobal(Add(i, sv), go, offset=[b, 4, 0:])
)";
  c.buffers = {{"table", DataType::i32(), 8 * 16, Fill::Random},
               {"lens", DataType::i32(), 8, Fill::Random},
               {"data", DataType::f32(), 64 * 64, Fill::Moderate},
               {"q_ptr", DataType::u(4), 37, Fill::Random},
               {"h_ptr", DataType::f16(), 8, Fill::Moderate},
               {"out", DataType::f32(), 8 * 5 * 64, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("StoreScalar: global and shared elements, conversions, indices outside the view") {
  // Block b writes counts[b], a converted f16 and a u8 (the low 8 bits) per block, an element of
  // a view slice that is outside the view for some blocks (not written), and an element of
  // shared memory read back by every thread.
  Case c;
  c.name = "store_scalar";
  c.source = R"(
def put<8>(i32* counts, f16* h_ptr, u8* flags, f32* data, f32* out) threads=64:
    b = BlockIndices()
    x = LoadScalar(ViewGlobal(data, shape=[8]), offset=[b], dtype=f32)
    StoreScalar(ViewGlobal(counts, shape=[8]), offset=[b], value=b * 1000 - 3)
    StoreScalar(ViewGlobal(h_ptr, shape=[8]), offset=[b], value=x * 3.0)
    StoreScalar(ViewGlobal(flags, shape=[8]), offset=[b], value=b * 77 + 200)
    StoreScalar(SliceGlobal(ViewGlobal(counts, shape=[12]), offset=[8:]), offset=[b - 2], value=b)
    s = AllocateShared(f32, shape=[4])
    StoreScalar(s, offset=[b % 4], value=x + 1.0)
    Synchronize()
    v = LoadShared(SliceShared(s, offset=[b % 4:], shape=[1]), layout=local(1).replicate(64))
    i = Iota(layout=spatial(64), dim=0, dtype=f32)
    StoreGlobal(Add(i, v), ViewGlobal(out, shape=[8, 64]), offset=[b, 0:])
)";
  c.buffers = {{"counts", DataType::i32(), 12, Fill::Zero},
               {"h_ptr", DataType::f16(), 8, Fill::Zero},
               {"flags", DataType::u(8), 8, Fill::Zero},
               {"data", DataType::f32(), 8, Fill::Moderate},
               {"out", DataType::f32(), 8 * 64, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("Print gives the interpreter's text") {
  Case c;
  c.name = "print";
  c.comparePrint = true;
  c.source = R"(
def show<1>(f32* x_ptr, i16 n) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[2, 4]), layout=spatial(2, 4).replicate(4))
    Print(n, msg="n is")
    Print(n * 3)
    Print(x, msg="x 100%")
    b = Lt(x, 0.5)
    Print(b)
    Print(Cast(x, i8))
    s = AllocateShared(f16, shape=[2, 4])
    StoreShared(Cast(x, f16), s)
    Synchronize()
    Print(s, msg="shared")
    y = LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32).local(2))
    Print(y)
)";
  c.scalars = {{"n", uint64_t(uint16_t(-12))}};
  c.buffers = {{"x_ptr", DataType::f32(), 64, Fill::Special}};
  runCase(c);
}

namespace {

std::string programText(const std::string &relative) {
  const char *root = std::getenv("TILUSVM_SOURCE_ROOT"); // where the build tree moved
  std::ifstream in(std::string(root ? root : TILUSVM_SOURCE_DIR) + "/programs/" + relative);
  REQUIRE_MESSAGE(in.good(), "cannot open " << relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace

namespace {

void libraryPrograms();

/// Sets an environment variable for the scope, restoring the previous value after.
class EnvScope {
public:
  EnvScope(const char *name, const char *value) : name_(name) {
    if (const char *old = std::getenv(name))
      old_ = old;
    setenv(name, value, 1);
  }
  ~EnvScope() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }
  EnvScope(const EnvScope &) = delete;
  EnvScope &operator=(const EnvScope &) = delete;

private:
  const char *name_;
  std::optional<std::string> old_;
};

} // namespace

DIFF_CASE("the library's programs") { libraryPrograms(); }

namespace {

/// The sizes and scales of one decode_paged.tasm case.
struct DecodeShape {
  const char *at, *kt;
  int hd, page, batch, heads, kvHeads, numPages, maxPages;
  float scale, kScale, vScale;
};

/// decode_paged.tasm at `sh` with extra -D constants: caches of numPages pages filled with
/// `cacheFill`, block_table[b, j] = b * maxPages + j, the given seq_lens buffer, o compared
/// with a relative tolerance of 2 % (bf16) or 1 %, `launches` launches on one workspace.
Case decodeCase(const std::string &name, const DecodeShape &sh,
                const std::map<std::string, std::string> &extra, Fill cacheFill,
                const BufferSpec &seqLens, int launches) {
  Case c{name, programText("attention/decode_paged.tasm")};
  c.defines = {{"AT", sh.at},
               {"KT", sh.kt},
               {"HD", std::to_string(sh.hd)},
               {"PAGE", std::to_string(sh.page)}};
  c.defines.insert(extra.begin(), extra.end());
  const DataType at = *DataType::parse(sh.at), kt = *DataType::parse(sh.kt);
  const int64_t q = int64_t(sh.batch) * sh.heads * sh.hd;
  const int64_t cache = int64_t(sh.numPages) * sh.page * sh.kvHeads * sh.hd;
  c.scalars = {{"batch", uint64_t(sh.batch)},
               {"heads", uint64_t(sh.heads)},
               {"kv_heads", uint64_t(sh.kvHeads)},
               {"num_pages", uint64_t(sh.numPages)},
               {"max_pages", uint64_t(sh.maxPages)},
               {"scale", std::bit_cast<uint32_t>(sh.scale)},
               {"k_scale", std::bit_cast<uint32_t>(sh.kScale)},
               {"v_scale", std::bit_cast<uint32_t>(sh.vScale)}};
  c.buffers = {{"q_ptr", at, q, Fill::Moderate},
               {"k_cache", kt, cache, cacheFill},
               {"v_cache", kt, cache, cacheFill},
               {"block_table", DataType::i32(), int64_t(sh.batch) * sh.maxPages, Fill::Index},
               seqLens,
               {"o_ptr", at, q, Fill::Zero, 0, at == DataType::bf16() ? 2e-2 : 1e-2}};
  c.launches = launches;
  return c;
}

} // namespace

DIFF_CASE("the attention and layer programs (programs/attention, programs/layers)") {
  const DataType f16 = DataType::f16(), bf16 = DataType::bf16(), i32 = DataType::i32(),
                 f32 = DataType::f32();
  for (const char *kt : {"f16", "f8e4m3", "u4", "f4e2m1", "u5", "i7"}) {
    // block_table[b, j] = b * 3 + j (distinct pages), seq_lens in [1, 40], 3 pages of 16 each;
    // min(SPLITS, max_pages) = 2 splits: three launches, the tickets clean after each
    DecodeShape sh{"f16", kt, 128, 16, 4, 16, 2, 12, 3, 0.088f, 0.5f, 0.25f};
    runCase(decodeCase(std::string("decode_paged_") + kt, sh, {}, Fill::Moderate,
                       {"seq_lens", i32, 4, Fill::Positive}, 3));
  }
  {
    // a 4-bit cache in stages of 16 keys (its default is 32 in three stages)
    DecodeShape sh{"f16", "u4", 128, 16, 4, 16, 2, 12, 3, 0.088f, 0.5f, 0.25f};
    runCase(decodeCase("decode_paged_u4_ks16", sh, {{"KS", "16"}, {"STAGES", "4"}}, Fill::Moderate,
                       {"seq_lens", i32, 4, Fill::Positive}, 3));
  }
  for (auto [at, kt] : {std::pair{"f16", "bf16"}, std::pair{"bf16", "f16"}}) {
    // a 16-bit cache of the other type than the activations (q rounded to it)
    DecodeShape sh{at, kt, 128, 16, 4, 16, 2, 12, 3, 0.088f, 0.5f, 0.25f};
    runCase(decodeCase(std::string("decode_paged_") + at + "_" + kt, sh, {}, Fill::Moderate,
                       {"seq_lens", i32, 4, Fill::Positive}, 1));
  }
  {
    // an 8-bit float cache in blocks of eight warps with 32 splits per (b, kv head) (40 pages of
    // 16: 40 stages): four blocks per pair combine their warps in shared memory, then the last
    // of them the four block partials from the workspace; 600, 333, 1 and 16 keys
    DecodeShape sh{"f16", "f8e4m3", 128, 16, 4, 8, 1, 160, 40, 0.088f, 0.5f, 0.25f};
    runCase(decodeCase("decode_paged_f8e4m3_warps8_splits32", sh, {}, Fill::Moderate,
                       {"seq_lens", i32, 4, Fill::Given, 0, 0, {600, 333, 1, 16}}, 2));
  }
  for (const char *kt : {"f16", "u4"}) {
    // the sequence split over SPLITS = 4 blocks per (b, kv head): 200 keys (13 pages, split
    // 4 + 4 + 4 + 1), 77 (2 + 2 + 1 + 0), 1 and 16 (one page, three empty splits); block_table
    // [b, j] = b * 13 + j. Three launches on the same workspace.
    DecodeShape sh{"f16", kt, 128, 16, 4, 16, 2, 52, 13, 0.088f, 0.5f, 0.25f};
    runCase(decodeCase(std::string("decode_paged_splits4_") + kt, sh, {{"SPLITS", "4"}},
                       Fill::Moderate, {"seq_lens", i32, 4, Fill::Given, 0, 0, {200, 77, 1, 16}},
                       3));
  }
  for (const char *tuning : {"", "KS=32"}) {
    // bf16 activations over an i5 cache (5-bit codes: rows of 40 bytes, moved as bytes), HD 64,
    // pages of 8 keys (two or four per stage), groups of 24 query heads (three blocks of 8 per
    // kv head), sequences of 1, 40 and 77 keys split over 3 blocks; block_table[b, j] = b * 10 + j
    DecodeShape sh{"bf16", "i5", 64, 8, 3, 24, 1, 30, 10, 0.125f, 0.25f, 0.5f};
    std::map<std::string, std::string> extra = {{"SPLITS", "3"}};
    if (*tuning)
      extra["KS"] = "32";
    runCase(decodeCase(std::string("decode_paged_bf16_i5_") + (*tuning ? tuning : "default"), sh,
                       extra, Fill::Random, {"seq_lens", i32, 3, Fill::Given, 0, 0, {1, 40, 77}},
                       2));
  }
  {
    // u4 by cp.async (TMA = 0) with the kv head pair's rows in one copy (PAIRKV) from 2 stages
    // per block: three kv heads (the last pair's second head lies outside the cache: zeros), one
    // block per sequence: 200 keys (7 stages) and 77 (3) copy the pairs, 1 and 16 (one stage)
    // their own rows
    DecodeShape sh{"f16", "u4", 128, 16, 4, 6, 3, 52, 13, 0.088f, 0.5f, 0.25f};
    runCase(decodeCase("decode_paged_u4_pairs", sh,
                       {{"TMA", "0"}, {"SPLITS", "1"}, {"PAIRMIN", "2"}}, Fill::Moderate,
                       {"seq_lens", i32, 4, Fill::Given, 0, 0, {200, 77, 1, 16}}, 2));
  }
  {
    // i4 over pages of 48 keys, each a third of a page per stage of 16 by the tensor memory
    // accelerator (the tensor map's merged slot coordinate: the third times 16); 200 keys (5
    // pages), 77, 1 and 48, split over SPLITS = 2 blocks; block_table[b, j] = b * 5 + j
    DecodeShape sh{"f16", "i4", 128, 48, 4, 16, 2, 20, 5, 0.088f, 0.5f, 0.25f};
    runCase(decodeCase("decode_paged_i4_page48", sh, {{"SPLITS", "2"}}, Fill::Moderate,
                       {"seq_lens", i32, 4, Fill::Given, 0, 0, {200, 77, 1, 48}}, 2));
  }
  {
    // HD 256: two splits combined per step (CQ = 2); sequences of 200, 1 and 77 keys (up to 13
    // pages of 16) split over SPLITS = 3 blocks
    DecodeShape sh{"f16", "u4", 256, 16, 3, 8, 1, 39, 13, 0.0625f, 0.5f, 0.25f};
    runCase(decodeCase("decode_paged_u4_hd256", sh, {{"SPLITS", "3"}}, Fill::Moderate,
                       {"seq_lens", i32, 3, Fill::Given, 0, 0, {200, 1, 77}}, 2));
  }
  // prefill: the wgmma and TMA design (the default) and the mma.sync design; the wgmma design
  // also over several 128-key tiles (stages reused by loads in the loop) at HD 128, bf16
  for (const char *hopper : {"1", "0"})
    for (const char *causal : {"0", "1"}) {
      Case c{std::string("prefill_hopper") + hopper + "_causal" + causal,
             programText("attention/prefill.tasm")};
      c.defines = {{"AT", "f16"}, {"HD", "64"}, {"CAUSAL", causal}, {"HOPPER", hopper}};
      c.scalars = {{"batch", 1}, {"seq_q", 70},   {"seq_k", 90},
                   {"heads", 4}, {"kv_heads", 2}, {"scale", std::bit_cast<uint32_t>(0.125f)}};
      c.buffers = {{"q_ptr", f16, 70 * 4 * 64, Fill::Moderate},
                   {"k_ptr", f16, 90 * 2 * 64, Fill::Moderate},
                   {"v_ptr", f16, 90 * 2 * 64, Fill::Moderate},
                   {"o_ptr", f16, 70 * 4 * 64, Fill::Zero, 0, 2e-2}};
      runCase(c);
    }
  for (const char *causal : {"0", "1"}) {
    Case c{std::string("prefill_bf16_hd128_long_causal") + causal,
           programText("attention/prefill.tasm")};
    c.defines = {{"AT", "bf16"}, {"HD", "128"}, {"CAUSAL", causal}};
    c.scalars = {{"batch", 2}, {"seq_q", 300},  {"seq_k", 520},
                 {"heads", 8}, {"kv_heads", 1}, {"scale", std::bit_cast<uint32_t>(0.09f)}};
    c.buffers = {{"q_ptr", bf16, 2 * 300 * 8 * 128, Fill::Moderate},
                 {"k_ptr", bf16, 2 * 520 * 128, Fill::Moderate},
                 {"v_ptr", bf16, 2 * 520 * 128, Fill::Moderate},
                 {"o_ptr", bf16, 2 * 300 * 8 * 128, Fill::Zero, 0, 5e-2}};
    runCase(c);
  }
  {
    Case c{"rmsnorm", programText("layers/rmsnorm.tasm")};
    c.defines = {{"AT", "f16"}, {"N", "1000"}, {"T", "64"}};
    c.scalars = {{"m", 5}, {"eps", std::bit_cast<uint32_t>(1e-5f)}};
    c.buffers = {{"x_ptr", f16, 5000, Fill::Moderate},
                 {"r_ptr", f16, 5000, Fill::Moderate},
                 {"w_ptr", f16, 1000, Fill::Moderate},
                 {"y_ptr", f16, 5000, Fill::Zero, 0, 5e-3}};
    runCase(c);
  }
  for (const char *style : {"0", "1"}) {
    Case c{std::string("rotary_style") + style, programText("layers/rotary.tasm")};
    c.defines = {{"AT", "f16"}, {"HD", "128"}, {"STYLE", style}};
    c.scalars = {{"tokens", 5}, {"heads", 12}, {"kv_heads", 4}, {"max_pos", 8}};
    c.buffers = {{"pos_ptr", i32, 5, Fill::Index},
                 {"q_ptr", f16, 5 * 12 * 128, Fill::Moderate, 0, 1e-3},
                 {"k_ptr", f16, 5 * 4 * 128, Fill::Moderate, 0, 1e-3},
                 {"cs_ptr", f32, 8 * 128, Fill::Moderate}};
    runCase(c);
  }
  {
    Case c{"swiglu_quant", programText("layers/swiglu_quant.tasm")};
    c.defines = {{"AT", "f16"}, {"QT", "f8e4m3"}, {"N", "2048"}, {"T", "128"}};
    c.scalars = {{"m", 3}};
    c.buffers = {{"x_ptr", f16, 3 * 4096, Fill::Moderate},
                 {"q_ptr", DataType::f8e4m3(), 3 * 2048, Fill::Zero, 0, 0.13},
                 {"s_ptr", f32, 3, Fill::Zero, 0, 1e-5}};
    runCase(c);
    // bf16, a row of two chunks per thread that ends inside the second (N = 1000, T = 64)
    Case r{"swiglu_quant_ragged", programText("layers/swiglu_quant.tasm")};
    r.defines = {{"AT", "bf16"}, {"QT", "f8e4m3"}, {"N", "1000"}, {"T", "64"}};
    r.scalars = {{"m", 5}};
    r.buffers = {{"x_ptr", DataType::bf16(), 5 * 2000, Fill::Moderate},
                 {"q_ptr", DataType::f8e4m3(), 5 * 1000, Fill::Zero, 0, 0.13},
                 {"s_ptr", f32, 5, Fill::Zero, 0, 1e-5}};
    runCase(r);
    // i8 (round half to even: a code apart next to a tie), bf16, the pipelined design with
    // NB = 2 blocks of 4 and 3 rows through the cp.async double buffer, then the chunked one
    for (const char *staged : {"2", "1"}) {
      Case q{std::string("swiglu_quant_i8_staged") + staged,
             programText("layers/swiglu_quant.tasm")};
      q.defines = {{"AT", "bf16"}, {"QT", "i8"}, {"N", "1000"},
                   {"T", "64"},    {"NB", "2"},  {"STAGED", staged}};
      q.scalars = {{"m", 7}};
      q.buffers = {{"x_ptr", DataType::bf16(), 7 * 2000, Fill::Moderate},
                   {"q_ptr", DataType::i(8), 7 * 1000, Fill::Zero, 0, 1.0},
                   {"s_ptr", f32, 7, Fill::Zero, 0, 1e-5}};
      runCase(q);
    }
  }
}

DIFF_CASE("the library's programs through unspecialised kernels (TILUSVM_SPECIALIZE=0)") {
  // the kernels that assume nothing about the arguments must compute the same results
  EnvScope off("TILUSVM_SPECIALIZE", "0");
  libraryPrograms();
}

namespace {

/// programs/quant/a16wx.tasm with the defines `d` (WT, AT, N, K, G set): pack random codes,
/// then matmul of m rows with scales and zero points, `launches` times in a row (a split-K
/// workspace left dirty by one launch shows in the next), JIT against the interpreter.
void a16wxCases(const std::string &name, const std::map<std::string, std::string> &d, int64_t m,
                int launches) {
  DataType w = *DataType::parse(d.at("WT")), a = *DataType::parse(d.at("AT"));
  int64_t n = std::stoll(d.at("N")), k = std::stoll(d.at("K")), groups = k / std::stoll(d.at("G"));
  int64_t wbytes = n * k * w.storageBits() / 8;
  Case p{name + "_pack", programText("quant/a16wx.tasm"), "pack", d};
  p.buffers = {{"w_ptr", w, n * k, Fill::Random}, {"wq_ptr", DataType::u(8), wbytes, Fill::Zero}};
  runCase(p);
  Case c{name, programText("quant/a16wx.tasm"), "matmul", d};
  c.scalars = {{"m", uint64_t(m)}};
  c.launches = launches;
  c.buffers = {{"a_ptr", a, m * k, Fill::Moderate},
               {"wq_ptr", DataType::u(8), wbytes, Fill::Moderate},
               {"s_ptr", a, groups * n, Fill::Positive},
               {"z_ptr", a, groups * n, Fill::Moderate},
               {"c_ptr", a, m * n, Fill::Zero, 0, 1e-2}};
  runCase(c);
}

void libraryPrograms() {
  {
    Case c{"vector_add", programText("vector_add.tasm")};
    c.scalars = {{"n", 1000}};
    c.buffers = {{"x_ptr", DataType::f32(), 1000, Fill::Random},
                 {"y_ptr", DataType::f32(), 1000, Fill::Random},
                 {"z_ptr", DataType::f32(), 1000, Fill::Zero}};
    runCase(c);
  }
  {
    Case c{"softmax", programText("softmax_rows.tasm")};
    c.scalars = {{"m", 37}};
    c.buffers = {{"x_ptr", DataType::f32(), 37 * 128, Fill::Moderate},
                 {"y_ptr", DataType::f32(), 37 * 128, Fill::Zero, 0, 1e-6}};
    runCase(c);
  }
  std::string swizzled = programText("matmul_f16_pipelined.tasm");
  for (const char *name : {"sa", "sb"}) {
    // the same program with conflict-free swizzled shared tiles (cp.async and ldmatrix paths)
    std::string from = std::string(name) + " = AllocateShared(f16, shape=[STAGES, ";
    size_t at = swizzled.find(from);
    REQUIRE(at != std::string::npos);
    size_t end = swizzled.find(")", at);
    std::string dims = swizzled.substr(at + from.size(), swizzled.find("]", at) - at - from.size());
    swizzled.replace(at, end - at + 1,
                     from + dims + "], layout=swizzle(row_major(STAGES, " + dims + "), 3, 3, 6))");
  }
  for (auto [m, n, k, text] :
       {std::tuple{64, 64, 64, programText("matmul_f16_pipelined.tasm")},
        std::tuple{100, 72, 40, programText("matmul_f16_pipelined.tasm")},
        std::tuple{100, 72, 40, swizzled}, std::tuple{128, 64, 96, swizzled}}) {
    Case c{"pipelined_" + std::to_string(m) + "_" + std::to_string(k), text};
    c.scalars = {{"m", uint64_t(m)}, {"n", uint64_t(n)}, {"k", uint64_t(k)}};
    c.buffers = {{"a_ptr", DataType::f16(), m * k, Fill::Moderate},
                 {"b_ptr", DataType::f16(), k * n, Fill::Moderate},
                 {"c_ptr", DataType::f16(), m * n, Fill::Zero, 0, 2e-3}};
    runCase(c);
  }
  {
    std::map<std::string, std::string> sizes = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
    Case t{"paper_transform", programText("paper_matmul_f16_i6.tasm"), "transform_b", sizes};
    t.buffers = {{"b_ptr", DataType::i(6), 64 * 64, Fill::Random},
                 {"transformed_b_ptr", DataType::u(8), 64 * 64 * 6 / 8, Fill::Zero}};
    runCase(t);
    Case c{"paper_matmul", programText("paper_matmul_f16_i6.tasm"), "matmul", sizes};
    c.buffers = {{"a_ptr", DataType::f16(), 64 * 64, Fill::Moderate},
                 {"transformed_b_ptr", DataType::u(8), 64 * 64 * 6 / 8, Fill::Random},
                 {"c_ptr", DataType::f16(), 64 * 64, Fill::Zero, 0, 2e-3}};
    runCase(c);
  }
  {
    Case c{"bf16_u4", programText("variants/matmul_bf16_u4_2warps.tasm")};
    c.buffers = {{"a_ptr", DataType::bf16(), 256 * 256, Fill::Moderate},
                 {"b_ptr", DataType::u(4), 256 * 256, Fill::Random},
                 {"c_ptr", DataType::bf16(), 256 * 256, Fill::Zero, 0, 1e-2}};
    runCase(c);
  }
  for (auto [wt, at, m] :
       {std::tuple{"u4", "f16", 5}, std::tuple{"i6", "bf16", 16}, std::tuple{"f4e2m1", "bf16", 1},
        std::tuple{"u3", "f16", 17}, std::tuple{"f8e4m3", "bf16", 3}, std::tuple{"u2", "f16", 7},
        std::tuple{"u1", "bf16", 2}, std::tuple{"u1", "f16", 9}, std::tuple{"u5", "f16", 3},
        std::tuple{"f4e2m1", "f16", 16}, std::tuple{"f6e3m2", "f16", 3},
        std::tuple{"u4", "bf16", 8}, std::tuple{"i6", "f16", 2}}) {
    // the low-bit GEMM: pack, then matmul with scales and zero points (u4, u2, u1 and f4e2m1:
    // codes packed for in-place pairs; f4e2m1 into bf16 and f16, also in the split-K case;
    // generic floats into f16 take their weights at 2^-WX and the scales at 2^WX; unsigned
    // integers of 1 to 5 bits into f16 are f16 subnormals, each row's scale times its power of
    // two (SN); 1 < m <= 8 the decode body of BMN = 8 rows, m = 8 its last)
    std::map<std::string, std::string> d = {{"WT", wt},   {"AT", at},   {"N", "64"},
                                            {"K", "256"}, {"G", "128"}, {"ZERO", "1"}};
    if (std::string(wt) == "u4" || std::string(wt) == "u3") // warps sharing the activations
      d["WARPS"] = std::string(wt) == "u4" ? "4" : "2";
    a16wxCases(std::string("a16wx_") + wt, d, m, 1);
  }
  for (const char *wt : {"u5", "u3", "f4e2m1", "u8", "u1", "i3", "i5", "i2"}) {
    // m = 1 takes the loop of its own unroll hint (UR1: four times, twice for u8), over 11
    // steps of K (22 for u8, in steps of 64), which the hint does not divide; m = 2 the other
    // loop of the same kernel
    std::map<std::string, std::string> d = {{"WT", wt},    {"AT", "f16"}, {"N", "64"},
                                            {"K", "1408"}, {"G", "128"},  {"ZERO", "1"}};
    a16wxCases(std::string("a16wx_ur1_") + wt, d, 1, 1);
    a16wxCases(std::string("a16wx_ur1_") + wt + "_m2", d, 2, 1);
  }
  for (auto [wt, at, m, splitk] :
       {std::tuple{"u4", "f16", 1, "4"}, std::tuple{"i6", "bf16", 13, "2"},
        std::tuple{"f8e4m3", "f16", 16, "8"}, std::tuple{"u8", "f16", 16, "2"},
        std::tuple{"u4", "f16", 40, "4"}, std::tuple{"f4e2m1", "f16", 5, "3"}}) {
    // split-K: SPLITK blocks per tile of C combine f32 partial sums with AtomicAdd in a
    // requires_clean workspace, the last block (by ticket) rounds and stores; m = 40 is past
    // SPLITM (one block per tile, same kernel). KS = 2: 8 steps of K to split (SPLITK = 3:
    // ranges of 2, 3 and 3 steps). Three launches:
    // each must leave the workspace zeroed for the next (a dirty one adds stale sums).
    std::map<std::string, std::string> d = {{"WT", wt},   {"AT", at},        {"N", "64"},
                                            {"K", "256"}, {"G", "64"},       {"ZERO", "1"},
                                            {"KS", "2"},  {"SPLITK", splitk}};
    if (m == 13)
      d["BM"] = "8";                         // two row tiles under SPLITM
    if (m == 1 && std::string(wt) == "u4") { // m = 1 takes SPLIT1 (here 4) instead of SPLITK
      d["SPLITK"] = "1";
      d["SPLIT1"] = splitk;
    }
    a16wxCases(std::string("a16wx_splitk") + splitk + "_" + wt + "_m" + std::to_string(m), d, m, 3);
  }
  for (auto [wt, pd, m, splitk] : {std::tuple{"u2", "2", 16, "1"}, std::tuple{"u1", "3", 1, "3"},
                                   std::tuple{"i6", "2", 7, "5"}}) {
    // the weights PD steps ahead (a ring of registers), alone and with split-K ranges of one
    // to three steps (KS = 2: 8 steps), shorter than the ring
    std::map<std::string, std::string> d = {
        {"WT", wt},    {"AT", "f16"}, {"N", "64"},        {"K", "256"},       {"G", "128"},
        {"ZERO", "1"}, {"KS", "2"},   {"SPLITK", splitk}, {"SPLIT1", splitk}, {"PD", pd}};
    a16wxCases(std::string("a16wx_pd") + pd + "_" + wt + "_m" + std::to_string(m), d, m, 3);
  }
  for (auto [wt, at, m, zero] :
       {std::tuple{"u4", "f16", 5, "0"}, std::tuple{"i6", "bf16", 130, "1"},
        std::tuple{"f8e4m3", "f16", 64, "1"}, std::tuple{"u3", "f16", 200, "0"},
        std::tuple{"u1", "bf16", 1, "1"}}) {
    // the prefill kernel: wgmma on activation tiles and weights dequantised into its register
    // A operand (its own packed layout), m within one 128-row tile and past it, with and without
    // zero points (their group sums by a second n = 8 wgmma with a tile of ones)
    std::map<std::string, std::string> d = {{"WT", wt},      {"AT", at},  {"N", "256"},
                                            {"K", "256"},    {"G", "64"}, {"ZERO", zero},
                                            {"PREFILL", "1"}};
    a16wxCases(std::string("a16wx_prefill_") + wt + "_m" + std::to_string(m), d, m, 1);
  }
  for (auto [wt, bm, m] :
       {std::tuple{"u4", "16", 16}, std::tuple{"f4e2m1", "16", 21}, std::tuple{"i6", "64", 70}}) {
    // the prefill kernel on narrow row tiles (wgmma m64n16k16, m64n64k16)
    std::map<std::string, std::string> d = {{"WT", wt},   {"AT", "f16"}, {"N", "256"},
                                            {"K", "256"}, {"G", "64"},   {"PREFILL", "1"},
                                            {"BM", bm}};
    a16wxCases(std::string("a16wx_prefill_bm") + bm + "_" + wt + "_m" + std::to_string(m), d, m, 1);
  }
  {
    Case c{"f32_u2", programText("variants/matmul_f32_u2.tasm")};
    c.buffers = {{"a_ptr", DataType::f32(), 128 * 128, Fill::Moderate},
                 {"b_ptr", DataType::u(2), 128 * 128, Fill::Random},
                 {"c_ptr", DataType::f32(), 128 * 128, Fill::Zero, 0, 5e-4}};
    runCase(c);
  }
}

} // namespace

// Hopper instructions (sm_90a; on the H100 the runtime compiles for sm_90a): mbarrier phases
// around a data exchange through shared memory, and the wgmma GEMM at a ragged shape.
DIFF_CASE("mbarriers: arrivals and waits of both parities order a shared exchange") {
  Case c;
  c.name = "mbarrier";
  c.source = R"(
def k<1>(f32* x_ptr, f32* y_ptr) threads=128:
    bars = AllocateShared(u64, shape=[2])
    s = AllocateShared(f32, shape=[128])
    for i in range(2):
        MbarrierInit(SliceShared(bars, offset=[i]), count=1)
    Synchronize()
    acc = AllocateRegister(f32, layout=replicate(128).local(128), init=0.0)
    for it in range(6):
        x = LoadGlobal(ViewGlobal(x_ptr, shape=[6, 128]), layout=spatial(128), offset=[it, 0:])
        StoreShared(x, s)
        bar = SliceShared(bars, offset=[it % 2])
        MbarrierArrive(bar)
        MbarrierWait(bar, parity=it / 2 % 2)
        # every thread reads what every warp stored before its arrival
        acc = Add(acc, LoadShared(s, layout=replicate(128).local(128)))
        Synchronize()
    StoreGlobal(acc, ViewGlobal(y_ptr, shape=[128]))
)";
  c.buffers = {{"x_ptr", DataType::f32(), 6 * 128, Fill::Moderate},
               {"y_ptr", DataType::f32(), 128, Fill::Zero, 0, 1e-6}};
  runCase(c);
}

namespace {

/// `matmul(a_ptr, b_ptr, c_ptr, m, n, k)` of programs/gemm/PROGRAM.tasm with AT and CT on values
/// of moderate magnitude (the inputs follow from the case's name), C compared to within `rel`.
Case moderateGemmCase(const std::string &name, const std::string &program, const std::string &at,
                      const std::string &ct, int m, int n, int k, double rel) {
  Case c;
  c.name = name;
  c.source = programText("gemm/" + program + ".tasm");
  c.defines = {{"AT", at}, {"CT", ct}};
  c.scalars = {{"m", m}, {"n", n}, {"k", k}};
  DataType t = *DataType::parse(at), tc = *DataType::parse(ct);
  c.buffers = {{"a_ptr", t, int64_t(m) * k, Fill::Moderate},
               {"b_ptr", t, int64_t(k) * n, Fill::Moderate},
               {"c_ptr", tc, int64_t(m) * n, Fill::Zero, 0, rel}};
  return c;
}

} // namespace

DIFF_CASE("wgmma GEMM (programs/gemm/wgmma.tasm) at a ragged shape, f16 and bf16") {
  for (const char *at : {"f16", "bf16"})
    runCase(
        moderateGemmCase(std::string("wgmma_gemm_") + at, "wgmma", at, "f32", 200, 136, 200, 1e-4));
}

DIFF_CASE("GEMMs of programs/gemm with n and k multiples of 16: the specialised kernels") {
  // the runtime launches kernels specialised for n % 16 == k % 16 == 0 and aligned pointers:
  // vector groups that no bound can cut lose their element paths (lower_memory_global.cpp);
  // m = 200 and n = 272 still leave partial tiles at the edges, k = 208 a partial k tile. f32 C:
  // the tensor cores' f32 sums of 208 products differ from the interpreter's by up to about
  // 1.5e-4 near cancellation (measured on the H200: one element of 54400, 0.288416 against
  // 0.288264)
  for (const char *program : {"mma_sync", "wgmma"})
    for (const char *at : {"f16", "bf16"})
      runCase(moderateGemmCase(std::string(program) + "_specialised_" + at, program, at, "f32", 200,
                               272, 208, 3e-4));
}

DIFF_CASE("TmaLoad: swizzled stages, 64-column panels and a strided 3-d view, ragged edges") {
  // every tile partly outside its view (zeros), then each stored back through registers
  Case c;
  c.name = "tma_tiles";
  c.source = R"(
def k<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr, f16* oa_ptr, f16* ob_ptr, f32* oc_ptr, i32 m, i32 n) threads=128:
    ga = ViewGlobal(a_ptr, shape=[m, 64])
    gb = ViewGlobal(b_ptr, shape=[64, n])
    gc = ViewGlobal(c_ptr, shape=[3, m, 8], strides=[m * 8, 8, 1])
    sa = AllocateShared(f16, shape=[2, 64, 64], layout=swizzle(row_major(2, 64, 64), 3, 3, 3))
    sb = AllocateShared(f16, shape=[64, 128], layout=row_major(1, 2).swizzle(row_major(64, 64), 3, 3, 3))
    sc = AllocateShared(f32, shape=[16, 8])
    bars = AllocateShared(u64, shape=[2])
    MbarrierInit(SliceShared(bars, offset=[0]), count=1)
    MbarrierInit(SliceShared(bars, offset=[1]), count=1)
    Synchronize()
    for s in range(2):
        bar = SliceShared(bars, offset=[s])
        MbarrierArrive(bar, tx=8192)
        TmaLoad(SliceShared(sa, offset=[s, 0:, 0:]), ga, bar=bar, offset=[s * 40 - 8:, 0:])
    bar = SliceShared(bars, offset=[0])
    MbarrierWait(bar, parity=0)
    MbarrierWait(SliceShared(bars, offset=[1]), parity=0)
    TmaLoad(sb, gb, bar=bar, offset=[0:, n - 104:])
    TmaLoad(sc, gc, bar=bar, offset=[2, m - 10:, 0:])
    MbarrierArrive(bar, tx=16384 + 512)
    MbarrierWait(bar, parity=1)
    goa = ViewGlobal(oa_ptr, shape=[2, 64, 64])
    for s in range(2):
        StoreGlobal(LoadShared(sa, layout=spatial(32, 4).local(2, 16), offset=[s, 0:, 0:]), goa, offset=[s, 0:, 0:])
    StoreGlobal(LoadShared(sb, layout=spatial(32, 4).local(2, 32)), ViewGlobal(ob_ptr, shape=[64, 128]))
    StoreGlobal(LoadShared(sc, layout=spatial(16, 8).local(1, 1)), ViewGlobal(oc_ptr, shape=[16, 8]))
)";
  c.scalars = {{"m", 72}, {"n", 120}};
  c.buffers = {{"a_ptr", DataType::f16(), 72 * 64, Fill::Moderate},
               {"b_ptr", DataType::f16(), 64 * 120, Fill::Moderate},
               {"c_ptr", DataType::f32(), 3 * 72 * 8, Fill::Moderate},
               {"oa_ptr", DataType::f16(), 2 * 64 * 64, Fill::Zero, 0, 0},
               {"ob_ptr", DataType::f16(), 64 * 128, Fill::Zero, 0, 0},
               {"oc_ptr", DataType::f32(), 16 * 8, Fill::Zero, 0, 0}};
  runCase(c);
}

DIFF_CASE("TmaLoad and TmaStore: views of rank 6 and 7 whose inner dimensions merge") {
  // a paged cache [pages, 2, 1, 2, 4, heads, 16] (a tensor map of rank 4: dimensions 2 to 4
  // merge into 1, whose coordinate is scaled by 8); pages before the first and past the last, a
  // head past the last and halves 0 and 1; then a stage stored into a view of rank 6
  Case c;
  c.name = "tma_merged_dims";
  c.source = R"(
def k<4, 1>(u32* c_ptr, u32* o_ptr, u32* d_ptr, i32 pages, i32 heads) threads=32:
    x, y = BlockIndices()
    gc = ViewGlobal(c_ptr, shape=[pages, 2, 1, 2, 4, heads, 16])
    go = ViewGlobal(o_ptr, shape=[4, 4, 1, 2, 4, 16])
    gd = ViewGlobal(d_ptr, shape=[4, 2, 2, 4, 2, 16])
    s = AllocateShared(u32, shape=[4, 1, 2, 4, 16])
    bars = AllocateShared(u64, shape=[4])
    for i in range(4):
        MbarrierInit(SliceShared(bars, offset=[i]), count=1)
    Synchronize()
    for i in range(4):
        bar = SliceShared(bars, offset=[i])
        MbarrierArrive(bar, tx=512)
        TmaLoad(SliceShared(s, offset=[i, 0:, 0:, 0:, 0:]), gc, bar=bar, offset=[x * 2 + i - 2, i % 2, 0:, 0:, 0:, (x + i) % (heads + 1), 0:])
    for i in range(4):
        MbarrierWait(SliceShared(bars, offset=[i]), parity=0)
    StoreGlobal(LoadShared(s, layout=local(4, 1, 2, 1, 1).spatial(1, 1, 1, 4, 8).local(1, 1, 1, 1, 2)), go, offset=[x, 0:, 0:, 0:, 0:, 0:])
    FenceProxyAsync()
    Synchronize()
    TmaStore(SliceShared(s, offset=[x % 4, 0, 0:, 0:, 0:]), gd, offset=[x, 1, 0:, 0:, x % 2, 0:])
    TmaStoreCommitGroup()
    TmaStoreWaitGroup(0)
)";
  c.scalars = {{"pages", 5}, {"heads", 3}};
  c.buffers = {{"c_ptr", DataType::u(32), 5 * 2 * 8 * 3 * 16, Fill::Moderate},
               {"o_ptr", DataType::u(32), 4 * 4 * 8 * 16, Fill::Zero, 0, 0},
               {"d_ptr", DataType::u(32), 4 * 2 * 8 * 2 * 16, Fill::Moderate}};
  runCase(c);
}

DIFF_CASE("TmaStore: a paneled and a plain tile stored with ragged edges") {
  // out is prefilled; the stores leave every element outside the view and the tiles alone
  Case c;
  c.name = "tma_store";
  c.source = R"(
def k<1>(f16* in_ptr, f16* out_ptr, f32* o32_ptr, i32 m, i32 n) threads=128:
    sb = AllocateShared(f16, shape=[64, 128], layout=row_major(1, 2).swizzle(row_major(64, 64), 3, 3, 3))
    sc = AllocateShared(f32, shape=[32, 8])
    StoreShared(LoadGlobal(ViewGlobal(in_ptr, shape=[64, 128]), layout=spatial(32, 4).local(2, 32)), sb)
    StoreShared(Cast(LoadGlobal(ViewGlobal(in_ptr, shape=[32, 8]), layout=spatial(32, 4).local(1, 2)), f32), sc)
    FenceProxyAsync()
    Synchronize()
    TmaStore(sb, ViewGlobal(out_ptr, shape=[m, n]), offset=[m - 40:, n - 72:])
    TmaStoreCommitGroup()
    TmaStore(sc, ViewGlobal(o32_ptr, shape=[m, 8]), offset=[m - 8:, 0:])
    TmaStoreCommitGroup()
    TmaStoreWaitGroup(0)
)";
  c.scalars = {{"m", 72}, {"n", 120}};
  c.buffers = {{"in_ptr", DataType::f16(), 64 * 128, Fill::Moderate},
               {"out_ptr", DataType::f16(), 72 * 120, Fill::Moderate, 0, 0},
               {"o32_ptr", DataType::f32(), 72 * 8, Fill::Moderate, 0, 0}};
  runCase(c);
}

DIFF_CASE("PermuteShared: S = Q K^T with K loaded by TMA through a transposed view") {
  // tests/conformance/ok_permute_shared.tasm: Q [64, 64], K [32, 64] -> S [64, 32] in f32
  Case c;
  c.name = "permute_shared_qkt";
  c.source = programText("../tests/conformance/ok_permute_shared.tasm");
  c.buffers = {{"q_ptr", DataType::f16(), 64 * 64, Fill::Moderate},
               {"k_ptr", DataType::f16(), 32 * 64, Fill::Moderate},
               {"s_ptr", DataType::f32(), 64 * 32, Fill::Zero, 0, 1e-4}};
  runCase(c);
}

namespace {

/// A TMA GEMM of programs/gemm/ (`matmul` taking n and k multiples of 8) at a ragged m: f16 and
/// bf16 into f32 (the TMA store of 32-column panels, to within `f32Tolerance`) and into AT
/// (64-column panels; the sums round once to AT, where a different f32 summation order may move
/// a result by one unit).
void raggedTmaGemmCases(const std::string &program, double f32Tolerance) {
  for (const char *at : {"f16", "bf16"})
    for (const char *ct : {"f32", at})
      runCase(moderateGemmCase(program + "_gemm_" + at + "_" + ct, program, at, ct, 200, 264, 200,
                               std::string(ct) == "f32" ? f32Tolerance : 1e-2));
}

/// The persistent tile loop with fewer blocks than tiles: SMS = 2 blocks walk 3 x 3 tiles (the
/// loads of a block's next tile in flight across its epilogue), the last column of tiles without
/// its second half (n = 520: columns 512..519 only).
void persistentTmaGemmCase(const std::string &program) {
  Case c =
      moderateGemmCase(program + "_gemm_persistent", program, "f16", "f16", 300, 520, 136, 1e-2);
  c.defines["SMS"] = "2";
  runCase(c);
}

} // namespace

DIFF_CASE("wgmma GEMM with TMA loads and stores (programs/gemm/wgmma_tma.tasm), ragged m") {
  raggedTmaGemmCases("wgmma_tma", 1e-4);
  // stages as rows of one 2-D tile, sliced at run-time multiples of the stage height (TMA loads
  // into them, LoadShared and a TMA store out of them; tests/vm_cpu/test_tma.cpp)
  for (int r : {0, 3}) {
    Case s;
    s.name = "tma_stage_rows_" + std::to_string(r);
    s.source = tilus::testing::kStageRowsProgram;
    s.scalars = {{"r", r}};
    s.buffers = {{"a_ptr", DataType::f16(), 128 * 128, Fill::Moderate},
                 {"out_ptr", DataType::f16(), 64 * 128, Fill::Zero, 0, 0.0},
                 {"back_ptr", DataType::f16(), 64 * 128, Fill::Zero, 0, 0.0}};
    runCase(s);
  }
  persistentTmaGemmCase("wgmma_tma");
}

DIFF_CASE("warp-specialised wgmma GEMM (programs/gemm/wgmma_ws.tasm): thread groups, ragged m") {
  // a producer warpgroup loads by TMA, two consumer warpgroups compute (docs/isa.md, "Thread
  // groups"). f32 C: the tensor cores' f32 sums of 200 products differ from the interpreter's by
  // up to about 1.2e-4 here (measured: one element of 52800 at 1.19e-4 on the H200)
  raggedTmaGemmCases("wgmma_ws", 3e-4);
  persistentTmaGemmCase("wgmma_ws");
  // split-K (KMIN = 1): with SMS = 8 four tiles in two splits of 8 and 9 k tiles, and one tile
  // in eight splits of one or two; with BN = 128 (six stages) and SMS = 12 six tiles in two
  // splits. Stream-K (SKMIN = 1, SKFILL = 1): with SMS = 4 six tiles of 9 k tiles shared out in
  // ranges of 13 and 14 k tiles (two tiles in two parts); with SMS = 5 five whole tiles after
  // seven shared out. f32 parts summed in slot order: f32 C within 1.5e-3 where sums of 520
  // products nearly cancel
  struct WsCase {
    std::string name;
    const char *at, *ct;
    int m, n, k;
    double rel;
    const char *defines; // NAME=VALUE, space-separated
  };
  const WsCase cases[] = {
      {"split_bn256_f16", "f16", "f16", 200, 264, 1080, 1e-2, "SMS=8 KMIN=1 BN=256"},
      {"split_bn256_f32", "f16", "f32", 37, 48, 520, 1.5e-3, "SMS=8 KMIN=1 BN=256"},
      {"split_bn128_f16", "f16", "f16", 200, 264, 1080, 1e-2, "SMS=12 KMIN=1 BN=128"},
      {"streamk_f16_f16", "f16", "f16", 300, 264, 520, 1e-2, "SMS=4 SKMIN=1 SKFILL=1"},
      {"streamk_bf16_f32", "bf16", "f32", 700, 264, 200, 1.5e-3, "SMS=5 SKMIN=1 SKFILL=1"},
  };
  for (const WsCase &w : cases) {
    Case c = moderateGemmCase("wgmma_ws_" + w.name, "wgmma_ws", w.at, w.ct, w.m, w.n, w.k, w.rel);
    std::istringstream defines(w.defines);
    for (std::string d; defines >> d;)
      c.defines[d.substr(0, d.find('='))] = d.substr(d.find('=') + 1);
    runCase(c);
  }
}

DIFF_CASE("wgmma GEMM in clusters (programs/gemm/wgmma_cluster.tasm): B multicast, ragged m") {
  // clusters of two blocks share each B tile by TmaLoadMulticast and release each stage in both
  // blocks (docs/isa.md, "Thread-block clusters and TMA multicast"); SMS = 2: one cluster for
  // every cluster tile of the persistent loop
  raggedTmaGemmCases("wgmma_cluster", 3e-4);
  persistentTmaGemmCase("wgmma_cluster");
  // split-K (SMS = 16, KMIN = 1): four cluster tiles in two splits; one cluster tile in eight
  // splits whose second block's rows all lie past m (f32 parts summed in slot order)
  for (auto [ct, m, n, k, rel] :
       {std::tuple{"f16", 300, 264, 1080, 1e-2}, std::tuple{"f32", 37, 48, 520, 1.5e-3}}) {
    Case c = moderateGemmCase(std::string("wgmma_cluster_split_") + ct, "wgmma_cluster", "f16", ct,
                              m, n, k, rel);
    c.defines["SMS"] = "16";
    c.defines["KMIN"] = "1";
    runCase(c);
  }
}

DIFF_CASE("byte transposes: bytes of loaded words stored to shared memory by prmt, bit for bit") {
  // tests/byte_transpose_program.h (jit/pack_bytes.h packs each stored word)
  for (auto [kernel, rows] :
       {std::pair{"transpose4", 16}, std::pair{"transpose8", 32}, std::pair{"rows", 16}}) {
    Case c;
    c.name = std::string("bytes_") + kernel;
    c.source = tilus::testing::kByteTransposes;
    c.program = kernel;
    c.buffers = {{"w_ptr", DataType::u(32), int64_t(rows) * 32, Fill::Random},
                 {"out_ptr", DataType::u(8), int64_t(rows) * 128, Fill::Zero}};
    runCase(c);
  }
}

namespace {

/// `count` codes of t holding integers in [-4, 4]: with FP8 inputs every partial sum of up to
/// 512 products is an integer of magnitude at most 2^13, exact in the FP8 tensor cores' 14
/// significant bits and in the interpreter's f32, so GEMM results compare bit for bit.
std::vector<uint64_t> smallIntegers(DataType t, int64_t count, std::mt19937 &rng) {
  std::vector<uint64_t> bits(static_cast<size_t>(count));
  for (uint64_t &b : bits)
    b = tilus::fromDouble(double(int(rng() % 9) - 4), t);
  return bits;
}

/// A GEMM-shaped case on integer inputs: AT operands of m x k and k x n elements, a CT output of
/// m x n, the tuning constant SMS (blocks of the persistent grid).
struct ExactGemm {
  const char *at, *ct;
  int m, n, k;
  int sms;
};

/// The case of program `path` (under programs/) for `s`, its pointer parameters named `ptrs`
/// (the two operands, then the output), scalars m, n and k.
Case exactGemmCase(const std::string &prefix, const std::string &path, const ExactGemm &s,
                   const std::array<const char *, 3> &ptrs, std::mt19937 &rng) {
  Case c;
  c.name = prefix + s.at + "_" + s.ct + "_" + std::to_string(s.m) + "x" + std::to_string(s.n) +
           "x" + std::to_string(s.k) + "_sms" + std::to_string(s.sms);
  c.source = programText(path);
  c.defines = {{"AT", s.at}, {"CT", s.ct}, {"SMS", std::to_string(s.sms)}};
  c.scalars = {{"m", s.m}, {"n", s.n}, {"k", s.k}};
  DataType t = *DataType::parse(s.at), tc = *DataType::parse(s.ct);
  int64_t as = int64_t(s.m) * s.k, bs = int64_t(s.k) * s.n;
  c.buffers = {{ptrs[0], t, as, Fill::Given, 0, 0, smallIntegers(t, as, rng)},
               {ptrs[1], t, bs, Fill::Given, 0, 0, smallIntegers(t, bs, rng)},
               {ptrs[2], tc, int64_t(s.m) * s.n, Fill::Zero}};
  return c;
}

} // namespace

DIFF_CASE("FP8 wgmma GEMM (programs/gemm/wgmma_fp8.tasm): B^T as the register operand") {
  // the producer group copies A and B by TMA (n and k multiples of 16: 200 x 272 x 208, and bf16
  // at 200 x 264 x 200), or A by cp.async and B by narrow accesses (the other shapes, n odd
  // included); the two consumer warpgroups read B^T from B's N-major stages into the FP8 wgmma's
  // register A operand (C^T = B^T A^T; 16-bit types read B transposed by the wgmma itself); one
  // block per tile and SMS = 2 blocks walking 3 x 2 tiles (the producer running ahead into the
  // next tile). The FP8 tensor cores add with about 14 significant bits (measured on the H200:
  // errors up to 1.8e-4 of sum |a b| at k = 260 for random values), hence the integer inputs and
  // the bit-for-bit comparison
  std::mt19937 rng(12);
  for (ExactGemm s :
       {ExactGemm{"f8e4m3", "f16", 200, 264, 300, 132}, ExactGemm{"f8e4m3", "f32", 37, 45, 29, 132},
        ExactGemm{"f8e5m2", "bf16", 300, 263, 200, 2}, ExactGemm{"f8e4m3", "f32", 300, 512, 260, 2},
        ExactGemm{"f8e4m3", "f16", 200, 272, 208, 2}, ExactGemm{"bf16", "f32", 200, 264, 200, 132}})
    runCase(exactGemmCase("wgmma_fp8_gemm_", "gemm/wgmma_fp8.tasm", s, {"a_ptr", "b_ptr", "c_ptr"},
                          rng));
  // split-K (SMS = 8, KMIN = 1): four tiles in two splits by TMA and by cp.async (n odd), one
  // tile in eight splits (f32 parts in workspace slots, summed in slot order by the last block)
  for (ExactGemm s :
       {ExactGemm{"f8e4m3", "f16", 200, 272, 528, 8}, ExactGemm{"f8e4m3", "f32", 200, 263, 528, 8},
        ExactGemm{"f8e5m2", "bf16", 37, 48, 1040, 8}}) {
    Case c = exactGemmCase("wgmma_fp8_split_", "gemm/wgmma_fp8.tasm", s,
                           {"a_ptr", "b_ptr", "c_ptr"}, rng);
    c.defines["KMIN"] = "1";
    runCase(c);
  }
}

DIFF_CASE("FP8 linear layer (programs/layers/linear_fp8.tasm): y = scale x w^T, bit for bit") {
  // both operands K-major by TMA, two consumer warpgroups, y stored by TMA; one block per tile
  // and SMS = 2 blocks walking 3 x 3 tiles, FP8 and bf16 inputs, f16, f32 and bf16 outputs
  std::mt19937 rng(21);
  for (ExactGemm s :
       {ExactGemm{"f8e4m3", "f16", 200, 272, 208, 132},
        ExactGemm{"f8e5m2", "f32", 37, 264, 144, 132},
        ExactGemm{"f8e4m3", "bf16", 300, 520, 272, 2}, ExactGemm{"bf16", "f32", 130, 264, 72, 2}}) {
    Case c =
        exactGemmCase("linear_fp8_", "layers/linear_fp8.tasm", s, {"x_ptr", "w_ptr", "y_ptr"}, rng);
    c.scalars["scale"] = std::bit_cast<uint32_t>(0.5f);
    runCase(c);
  }
  // split-K (KMIN = 1): with SMS = 8 four tiles in two splits of one and two k tiles, and one
  // tile in eight splits of one or two; with BN = 128 (six stages) and SMS = 12 six tiles in two
  // splits (f32 parts in workspace slots, summed by the last block)
  for (auto [s, bn] : {std::pair{ExactGemm{"f8e4m3", "f16", 200, 264, 272, 8}, "256"},
                       std::pair{ExactGemm{"f8e4m3", "f32", 37, 48, 1040, 8}, "256"},
                       std::pair{ExactGemm{"f8e4m3", "bf16", 200, 264, 1040, 12}, "128"}}) {
    Case c = exactGemmCase(std::string("linear_fp8_split_bn") + bn + "_", "layers/linear_fp8.tasm",
                           s, {"x_ptr", "w_ptr", "y_ptr"}, rng);
    c.defines["KMIN"] = "1";
    c.defines["BN"] = bn;
    c.scalars["scale"] = std::bit_cast<uint32_t>(0.5f);
    runCase(c);
  }
}

DIFF_CASE("thread groups: a producer and a consumer group hand tiles over through mbarriers") {
  // tests/thread_groups_program.h: groups of 128 and 64 threads, each with its own named barrier
  Case c;
  c.name = "thread_groups_pipe";
  c.source = tilus::testing::kThreadGroupsPipe;
  c.buffers = {{"x_ptr", DataType::f32(), 4 * 4096, Fill::Moderate},
               {"y_ptr", DataType::f32(), 4 * 4096, Fill::Zero, 0, 0.0}};
  runCase(c);
}

DIFF_CASE("thread groups: the copies of a clause, each with its own index and named barrier") {
  // tests/conformance/ok_thread_group_copies.tasm: a producer group and two copies of a consumer
  // group of 64 threads, each copy on its half of every staged tile and its own shared rows
  Case c;
  c.name = "thread_group_copies";
  c.source = programText("../tests/conformance/ok_thread_group_copies.tasm");
  c.buffers = {{"x_ptr", DataType::f32(), 1024, Fill::Moderate},
               {"y_ptr", DataType::f32(), 1024, Fill::Zero, 0, 0.0}};
  runCase(c);
}

DIFF_CASE("thread groups: four copies of a clause lowered as one body, the index from the "
          "thread index") {
  // tests/conformance/ok_thread_group_copies_four.tasm: copy w of four consumer copies of 64
  // threads writes its quarter of each staged tile plus (w + 1) times the quarter's maximum (a
  // Reduce through the copy's part of the scratch area), through its own shared rows
  Case c;
  c.name = "thread_group_copies_four";
  c.source = programText("../tests/conformance/ok_thread_group_copies_four.tasm");
  c.buffers = {{"x_ptr", DataType::f32(), 2048, Fill::Moderate},
               {"y_ptr", DataType::f32(), 2048, Fill::Zero, 0, 0.0}};
  c.check = [](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    const float *x = reinterpret_cast<const float *>(buffers[0].data());
    const float *y = reinterpret_cast<const float *>(buffers[1].data());
    int64_t bad = 0;
    for (int64_t i = 0; i < 4; ++i)
      for (int64_t w = 0; w < 4; ++w) {
        const int64_t at = i * 512 + w * 128;
        float top = x[at];
        for (int64_t e = 1; e < 128; ++e)
          top = std::max(top, x[at + e]);
        for (int64_t e = 0; e < 128; ++e) {
          double want = double(x[at + e] + top * float(w + 1));
          bad += std::fabs(y[at + e] - want) > 1e-4 * (1 + std::fabs(want));
        }
      }
    INFO(side);
    CHECK(bad == 0);
  };
  runCase(c);
}

DIFF_CASE("thread groups: partial CopyAsync tiles in copies of a clause, by the copy's threads") {
  // C copies of one warp after a group of 32 threads: copy w copies the tile of rows [w / 2 * 2,
  // + 2) of x (nh = 3 rows: the second copy pair's second row lies outside, zeros) into its own
  // part of a swizzled shared tensor, in chunks that its 32 threads share out (the chunk path
  // of partial tiles), and stores it. C = 2 lowers each copy on its own, C = 4 one body for all
  for (const char *copies : {"2", "4"}) {
    Case c;
    c.name = std::string("thread_group_partial_copies") + copies;
    c.source = R"(
const C = 4
def k<1>(u32* x_ptr, u32* y_ptr, i32 nh) threads=32 * (C + 1):
    gx = ViewGlobal(x_ptr, shape=[2, 2, 4, nh, 16])
    gy = ViewGlobal(y_ptr, shape=[C, 2, 2, 4, 2, 16])
    s = AllocateShared(u32, shape=[C, 2, 2, 4, 2, 16], layout=swizzle(swizzle(row_major(C, 2, 2, 4, 2, 16), 2, 3, 2), 1, 4, 3))
    parallel:
        group(32):
            pass
        group(32, copies=C) as w:
            CopyAsync(SliceShared(s, offset=[w, 0:, 0:, 0:, 0:, 0:]), gx, offset=[0:, 0:, 0:, w / 2 * 2:, 0:])
            CopyAsyncWaitAll()
            Synchronize()
            v = LoadShared(s, layout=local(2, 2, 1, 2, 2).spatial(1, 1, 4, 1, 8), offset=[w, 0:, 0:, 0:, 0:, 0:])
            StoreGlobal(v, gy, offset=[w, 0:, 0:, 0:, 0:, 0:])
)";
    c.defines = {{"C", copies}};
    const int64_t nc = std::stoll(copies);
    c.scalars = {{"nh", 3}};
    c.buffers = {{"x_ptr", DataType::u(32), 2 * 2 * 4 * 3 * 16, Fill::Moderate},
                 {"y_ptr", DataType::u(32), nc * 2 * 2 * 4 * 2 * 16, Fill::Zero}};
    c.check = [nc](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
      const uint32_t *x = reinterpret_cast<const uint32_t *>(buffers[0].data());
      const uint32_t *y = reinterpret_cast<const uint32_t *>(buffers[1].data());
      int64_t bad = 0;
      for (int64_t w = 0; w < nc; ++w)
        for (int64_t a = 0; a < 16; ++a) // the [2, 2, 4] leading index
          for (int64_t r = 0; r < 2; ++r)
            for (int64_t e = 0; e < 16; ++e) {
              int64_t row = w / 2 * 2 + r;
              uint32_t want = row < 3 ? x[(a * 3 + row) * 16 + e] : 0;
              bad += y[((w * 16 + a) * 2 + r) * 16 + e] != want;
            }
      INFO(side);
      CHECK(bad == 0);
    };
    runCase(c);
  }
}

namespace {

/// A cluster program of tests/cluster_program.h (C blocks per cluster, T tiles of 16 x 32 f32
/// per cluster) at nc clusters, checked against the plain sums on both sides.
void clusterCase(const char *name, const std::string &source, int64_t c) {
  const int64_t t = 6, nc = 5, tile = 16 * 32;
  Case k;
  k.name = name;
  k.source = source;
  k.defines = {{"C", std::to_string(c)}};
  k.scalars = {{"nc", uint64_t(nc)}};
  k.buffers = {{"x_ptr", DataType::f32(), nc * t * tile, Fill::Moderate},
               {"y_ptr", DataType::f32(), nc * c * tile, Fill::Zero, 0, 0.0}};
  k.check = [=](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    const float *x = reinterpret_cast<const float *>(buffers[0].data());
    const float *y = reinterpret_cast<const float *>(buffers[1].data());
    int64_t bad = 0;
    for (int64_t pid = 0; pid < nc * c; ++pid)
      for (int64_t e = 0; e < tile; ++e) {
        double want = 0;
        for (int64_t i = 0; i < t; ++i)
          want += x[((pid / c) * t + i) * tile + e];
        bad += std::fabs(y[pid * tile + e] - want) > 1e-4 * (1 + std::fabs(want));
      }
    INFO(side);
    CHECK(bad == 0);
  };
  runCase(k);
}

} // namespace

DIFF_CASE("clusters: blocks multicast their halves of each tile into both blocks' stages") {
  // tests/cluster_program.h: TmaLoadMulticast, MbarrierArriveCluster to every rank, ClusterSync
  clusterCase("cluster_pipe", tilus::testing::kClusterPipe, 2);
}

DIFF_CASE("clusters: warp-specialised blocks of a cluster of 4 share every tile") {
  clusterCase("cluster_groups", tilus::testing::kClusterGroups, 4);
}

DIFF_CASE("clusters: eight blocks, the portable cluster size, each loading two rows per tile") {
  clusterCase("cluster_pipe_8", tilus::testing::kClusterPipe, 8);
}

DIFF_CASE("clusters: ranks on a 2-D grid are x modulo the cluster size") {
  Case c;
  c.name = "cluster_ranks";
  c.source = R"(
def k<8, 3>(i32* y_ptr) threads=32 cluster=4:
    bx, by = BlockIndices()
    gy = ViewGlobal(y_ptr, shape=[3, 8])
    rank = ClusterRank()
    StoreScalar(gy, offset=[by, bx], value=rank * 100 + bx)
    ClusterSync()
)";
  c.buffers = {{"y_ptr", DataType::i32(), 24, Fill::Zero, 0, 0.0}};
  c.check = [](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    const int32_t *y = reinterpret_cast<const int32_t *>(buffers[0].data());
    int bad = 0;
    for (int i = 0; i < 24; ++i)
      bad += y[i] != (i % 8) % 4 * 100 + i % 8;
    INFO(side);
    CHECK(bad == 0);
  };
  runCase(c);
}

namespace {

// A GEMM tile loop with A in registers: each k tile of A is loaded from global memory straight
// into the wgmma A fragment of two warpgroups stacked along M (AT, or i8 converted to AT in
// registers, as dequantised weights would be), B copied into an N-major tile of two 64-column
// panels (two stages, one barrier per tile), C = A @ B in f32. Partial tiles read zeros.
std::string registerAGemmSource(const std::string &loadType) {
  std::string load =
      "LoadGlobal(ga, layout=spatial(2, 1).local(1, 2).spatial(4, 1).column_local(2, "
      "2).spatial(8, 4).local(1, 2), offset=[bi * 128:, kt * 32:])";
  std::string a = loadType == "AT" ? load : "Cast(" + load + ", AT)";
  return R"(
const AT = f16
def k<cdiv(m, 128) * cdiv(n, 128)>()" +
         loadType + R"(* a_ptr, AT* b_ptr, f32* c_ptr, i32 m, i32 n, i32 k) threads=256:
    pid = BlockIndices()
    bi = pid / cdiv(n, 128)
    bj = pid % cdiv(n, 128)
    ga = ViewGlobal(a_ptr, shape=[m, k])
    gb = ViewGlobal(b_ptr, shape=[k, n])
    sb = AllocateShared(AT, shape=[2, 32, 128], layout=row_major(2, 1, 2).swizzle(row_major(1, 32, 64), 3, 3, 3))
    acc = AllocateRegister(f32, layout=spatial(2, 1).spatial(4, 1).local(1, 16).local(2, 1).spatial(8, 4).local(1, 2))
    for kt in range(cdiv(k, 32)):
        stage = kt % 2
        CopyAsync(SliceShared(sb, offset=[stage, 0:, 0:]), gb, offset=[kt * 32:, bj * 128:])
        CopyAsyncWaitAll()
        FenceProxyAsync()
        Synchronize()
        a = )" +
         a + R"(
        WgmmaFence()
        Wgmma(a, SliceShared(sb, offset=[stage, 0:, 0:]), acc, out=acc)
        WgmmaCommitGroup()
        WgmmaWaitGroup(0)
    StoreGlobal(acc, ViewGlobal(c_ptr, shape=[m, n]), offset=[bi * 128:, bj * 128:])
)";
}

/// C = A @ B from the input buffers (plain sums in double), within a relative tolerance.
CaseCheck registerAGemmCheck(DataType ta, DataType tb, int m, int n, int k) {
  return [=](const char *side, const std::vector<std::vector<uint8_t>> &buffers) {
    auto element = [](const std::vector<uint8_t> &bytes, DataType t, int64_t e) {
      int bytesPer = t.storageBits() / 8;
      uint64_t bits = 0;
      std::memcpy(&bits, bytes.data() + size_t(e * bytesPer), size_t(bytesPer));
      return toDouble(bits, t);
    };
    int bad = 0;
    for (int i = 0; i < m; ++i)
      for (int j = 0; j < n; ++j) {
        double want = 0, scale = 0;
        for (int kk = 0; kk < k; ++kk) {
          double p = element(buffers[0], ta, i * k + kk) * element(buffers[1], tb, kk * n + j);
          want += p;
          scale += std::fabs(p);
        }
        float got = 0;
        std::memcpy(&got, buffers[2].data() + size_t(i * n + j) * 4, 4);
        if (std::fabs(double(got) - want) > 1e-5 * (scale + 1) && bad++ < 5)
          FAIL_CHECK(side << ": c[" << i << ", " << j << "] = " << got << ", want " << want);
      }
    CHECK(bad == 0);
  };
}

} // namespace

DIFF_CASE("wgmma with A in registers: a GEMM tile loop at a ragged shape, f16, bf16, i8 -> f16") {
  const int m = 200, n = 136, k = 200;
  for (const char *at : {"f16", "bf16", "i8"}) {
    bool dequant = std::string(at) == "i8";
    Case c;
    c.name = std::string("wgmma_register_a_") + at;
    c.source = registerAGemmSource(dequant ? "i8" : "AT");
    c.defines = {{"AT", dequant ? "f16" : at}};
    c.scalars = {{"m", m}, {"n", n}, {"k", k}};
    DataType ta = *DataType::parse(at), tb = dequant ? DataType::f16() : ta;
    c.buffers = {{"a_ptr", ta, m * k, Fill::Moderate},
                 {"b_ptr", tb, k * n, Fill::Moderate},
                 {"c_ptr", DataType::f32(), m * n, Fill::Zero, 0, 1e-3}};
    // the tensor cores and the interpreter sum in different orders: rows that cancel differ by
    // more than 1e-4 (|y| + 1) (H100: -0.042871 against -0.0430107); each side is held to the
    // plain sum within 1e-5 of the sum of |products| by the check
    c.check = registerAGemmCheck(ta, tb, m, n, k);
    runCase(c);
  }
}
