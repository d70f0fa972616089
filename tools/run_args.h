// vm-run's argument values (ISA section 8): parsing `--arg NAME=VALUE`, element access in
// packed buffers, and the deterministic random fill.
//
// Scalar values: an integer (decimal, or hex with 0x; '-' allowed for signed types) for an
// integer parameter, 0/1/true/false for bool, any decimal or hex float, inf or nan for a float
// parameter (rounded to the parameter's type with the ISA section 2 rules).
// Buffer values: `@FILE.npy`, `zeros`, `rand[:SEED]`, `zeros:DTYPE[d1,d2,..]`,
// `rand:DTYPE[d1,..][:SEED]`.
#pragma once

#include "isa/dtype.h"
#include "isa/status.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tilus::run {

/// The bit pattern of `text` as a value of `dtype` (error code `usage`).
Expected<uint64_t> parseScalar(std::string_view text, DataType dtype);

struct BufferSpec {
  enum class Kind { File, Zeros, Rand };
  Kind kind = Kind::Zeros;
  std::string path;              // File
  std::optional<DataType> dtype; // explicit form zeros:DTYPE[..] / rand:DTYPE[..]
  std::vector<int64_t> shape;    // explicit form
  uint64_t seed = 0;             // Rand
  bool explicitShape() const { return dtype.has_value(); }
  /// Elements of the explicit shape (product of the dimensions; 1 for []).
  int64_t explicitElements() const;
};

/// The most elements an explicit shape (zeros:DTYPE[..], rand:DTYPE[..]) may have: 2^40.
constexpr int64_t kMaxBufferElements = int64_t(1) << 40;

/// A buffer value; an explicit shape of more than kMaxBufferElements elements is refused.
Expected<BufferSpec> parseBufferSpec(std::string_view text);

/// A byte count: decimal digits with an optional binary suffix K, M, G or T (KiB ... TiB), e.g.
/// 4096, 512M, 16G. At least 1 and below 2^63.
Expected<uint64_t> parseByteSize(std::string_view text);

/// Split "NAME=VALUE" at the first '='.
Expected<std::pair<std::string, std::string>> splitAssignment(std::string_view text);

/// Element `index` of a buffer of `dtype` as a bit pattern: storageBits() bits at bit
/// index * storageBits (ISA section 2 packing; bool is one byte). Precondition: in range.
uint64_t readElement(std::span<const uint8_t> bytes, DataType dtype, int64_t index);
void writeElement(std::span<uint8_t> bytes, DataType dtype, int64_t index, uint64_t bits);

/// Deterministic random contents for `elements` elements (splitmix64 from `seed`; element k
/// takes the k-th draw z): floats uniform in [-1, 1) as (z >> 11) * 2^-52 - 1 rounded to the
/// dtype; bool z >> 63; integers the low `bits` bits of z. Bits past the last element are 0.
void fillRandom(std::span<uint8_t> bytes, DataType dtype, int64_t elements, uint64_t seed);

/// The splitmix64 sequence used by fillRandom: the k-th draw (k from 0) for `seed`.
uint64_t splitmix64Draw(uint64_t seed, uint64_t k);

} // namespace tilus::run
