// Differential testing of the JIT: run one program on the CPU reference interpreter and on the
// GPU (compiled by the JIT) with the same inputs, then compare every buffer (bit for bit, or
// within a tolerance in units in the last place for outputs whose rounding the ISA leaves
// open) and the Print text. Each case is declared with DIFF_CASE("title"), which registers two
// doctest cases: "gpu: title" (the comparison; skipped, and counted so, without a CUDA GPU) and
// "interpreter side: title" (the same programs on the interpreter alone, so they are checked on
// every host).
#pragma once

#include "isa/dtype.h"
#include "loader/verified_module.h"
#include "skip.h"

#include <doctest/doctest.h>

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace tilus::jitdiff {

enum class Fill : uint8_t {
  Random,   // random bit patterns
  Special,  // random bits, with special values (0, -0, -1, min, max, inf, NaN, ...) mixed in
  Moderate, // values of moderate magnitude (floats in [-8, 8), small integers)
  Positive, // floats in (0, 16]
  Zero,
  Index, // element k holds k (converted to the dtype)
  Codes, // element k holds the bit pattern k mod 2^bits: every code of a narrow type in turn
  Given, // element k holds BufferSpec::given[k]
};

struct BufferSpec {
  std::string param; // pointer parameter name
  DataType dtype;
  int64_t elements = 0;
  Fill fill = Fill::Random;
  /// Output comparison: 0 = bit for bit; otherwise floats may differ by this many ulps
  /// (NaN must meet NaN). Ignored for non-float dtypes.
  double ulps = 0;
  /// Relative tolerance (|x - y| <= rel * (|y| + 1)) instead of ulps, for reductions and Dot.
  double rel = 0;
  /// Fill::Given: the bit patterns of the elements, one per element.
  std::vector<uint64_t> given;
};

/// The buffers of one side after its run, in BufferSpec order, and the side's name.
using CaseCheck = std::function<void(const char *side, const std::vector<std::vector<uint8_t>> &)>;

struct Case {
  std::string name;
  std::string source;
  std::string program; // empty: the module's first program
  std::map<std::string, std::string> defines;
  std::map<std::string, uint64_t> scalars; // scalar parameters by name (bit patterns)
  std::vector<BufferSpec> buffers;
  bool comparePrint = false;
  /// GPU launches with the same inputs before the comparison (more than 1: the program must
  /// leave its requires_clean workspace clean, and give the same results again).
  int launches = 1;
  /// An independent reference: called with the interpreter's buffers ("interpreter") and, when
  /// the GPU runs, with the GPU's ("gpu"), after which the two are still compared.
  CaseCheck check;
};

/// Which sides runCase runs: the CPU only, or both (then a GPU is required).
enum class Sides : uint8_t { Interpreter, Both };

/// Sets the sides of every runCase for its lifetime.
struct SidesScope {
  explicit SidesScope(Sides sides);
  ~SidesScope();
  SidesScope(const SidesScope &) = delete;
  SidesScope &operator=(const SidesScope &) = delete;

private:
  Sides saved;
};

/// Run the case on the CPU and, in Sides::Both, on the GPU, and CHECK that they agree.
void runCase(const Case &c);

/// Element k of a bit-packed array (ISA section 2: bits [k N, (k + 1) N), LSB first), read
/// bit by bit.
uint64_t getElement(const std::vector<uint8_t> &bytes, int64_t k, int n);

} // namespace tilus::jitdiff

#define TILUS_DIFF_CASE_IMPL(fn, title)                                                            \
  static void fn();                                                                                \
  TEST_CASE("gpu: " title * ::tilus::testing::needsGpu()) {                                        \
    ::tilus::jitdiff::SidesScope sides(::tilus::jitdiff::Sides::Both);                             \
    fn();                                                                                          \
  }                                                                                                \
  TEST_CASE("interpreter side: " title) {                                                          \
    ::tilus::jitdiff::SidesScope sides(::tilus::jitdiff::Sides::Interpreter);                      \
    fn();                                                                                          \
  }                                                                                                \
  static void fn()

/// A differential case: `DIFF_CASE("title") { runCase(...); }`.
#define DIFF_CASE(title) TILUS_DIFF_CASE_IMPL(DOCTEST_ANONYMOUS(tilus_diff_case_), title)
