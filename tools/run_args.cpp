// Parsing vm-run's argument values and filling buffers.
//
// Everything the user types after `--arg NAME=` is checked here before anything runs, with a
// message that names the parameter's type, so a typo is a usage error (exit 2) rather than a
// confusing program failure. The random fill is specified exactly (see run_args.h) so that
// runs are reproducible across machines and the CPU and GPU see identical inputs.
#include "tools/run_args.h"

#include "isa/convert.h"
#include "isa/shape.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>

namespace tilus::run {
namespace {

Status usage(std::string message) { return Status::error(ErrorCode::Usage, std::move(message)); }

/// 'text' in quotes (built with += to keep GCC 12's -Wrestrict false positive away).
std::string quoted(std::string_view text) {
  std::string out;
  out += '\'';
  out += text;
  out += '\'';
  return out;
}

std::string lower(std::string_view text) {
  std::string out(text);
  for (char &c : out)
    c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

/// An integer literal: optional '-', then decimal digits or 0x + hex digits.
std::optional<std::pair<bool, uint64_t>> parseInteger(std::string_view text) {
  bool negative = false;
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) {
    negative = text[0] == '-';
    text.remove_prefix(1);
  }
  int base = 10;
  if (text.size() > 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    base = 16;
    text.remove_prefix(2);
  }
  if (text.empty())
    return std::nullopt;
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, base);
  if (ec != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return std::make_pair(negative, value);
}

Expected<uint64_t> parseIntegerValue(std::string_view text, DataType dtype) {
  auto parsed = parseInteger(text);
  std::string bad = quoted(text) + " is not a value of type " + dtype.name();
  if (!parsed)
    return usage(bad);
  auto [negative, magnitude] = *parsed;
  int bits = dtype.bits;
  if (!dtype.isSigned()) {
    if (negative && magnitude != 0)
      return usage(bad + " (negative)");
    if (bits < 64 && magnitude > bitMask(bits))
      return usage(bad + " (out of range)");
    return magnitude;
  }
  uint64_t limit = uint64_t(1) << (bits - 1); // |min|; max = limit - 1
  if ((negative && magnitude > limit) || (!negative && magnitude >= limit))
    return usage(bad + " (out of range)");
  uint64_t value = negative ? uint64_t(0) - magnitude : magnitude;
  return value & bitMask(bits);
}

Expected<uint64_t> parseFloatValue(std::string_view text, DataType dtype) {
  std::string s(text);
  std::string bad = quoted(s) + " is not a value of type " + dtype.name();
  if (s.empty())
    return usage(bad);
  errno = 0;
  char *end = nullptr;
  double value = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size())
    return usage(bad);
  // strtod reports overflow with ERANGE and +-HUGE_VAL, which is the right saturation input.
  return fromDouble(value, dtype);
}

Expected<std::vector<int64_t>> parseDims(std::string_view text) {
  std::vector<int64_t> dims;
  if (text.empty())
    return dims;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view item =
        text.substr(start, comma == std::string_view::npos ? text.npos : comma - start);
    while (!item.empty() && item.front() == ' ')
      item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ')
      item.remove_suffix(1);
    auto parsed = parseInteger(item);
    if (!parsed || parsed->first || parsed->second > (uint64_t(1) << 40))
      return usage(quoted(item) + " is not a dimension (0 to 2^40)");
    dims.push_back(int64_t(parsed->second));
    if (comma == std::string_view::npos)
      break;
    start = comma + 1;
  }
  return dims;
}

Expected<uint64_t> parseSeed(std::string_view text) {
  auto parsed = parseInteger(text);
  if (!parsed || parsed->first)
    return usage(quoted(text) + " is not a seed (a non-negative integer)");
  return parsed->second;
}

} // namespace

Expected<uint64_t> parseScalar(std::string_view text, DataType dtype) {
  if (dtype.isBool()) {
    std::string t = lower(text);
    if (t == "1" || t == "true")
      return uint64_t(1);
    if (t == "0" || t == "false")
      return uint64_t(0);
    return usage(quoted(text) + " is not a bool value (0, 1, true, false)");
  }
  if (dtype.isFloat())
    return parseFloatValue(text, dtype);
  return parseIntegerValue(text, dtype);
}

int64_t BufferSpec::explicitElements() const { return productOf(shape); }

Expected<BufferSpec> parseBufferSpec(std::string_view text) {
  BufferSpec spec;
  if (!text.empty() && text[0] == '@') {
    spec.kind = BufferSpec::Kind::File;
    spec.path = std::string(text.substr(1));
    if (spec.path.empty())
      return usage("'@' needs a file name");
    return spec;
  }
  std::string_view head = text.substr(0, text.find(':'));
  if (head == "zeros")
    spec.kind = BufferSpec::Kind::Zeros;
  else if (head == "rand")
    spec.kind = BufferSpec::Kind::Rand;
  else
    return usage(quoted(text) + " is not a buffer value (@FILE.npy, zeros, rand[:SEED], "
                                "zeros:DTYPE[d1,..], rand:DTYPE[d1,..]:SEED)");
  if (head.size() == text.size())
    return spec;
  std::string_view rest = text.substr(head.size() + 1);
  size_t bracket = rest.find('[');
  if (bracket == std::string_view::npos) { // rand:SEED
    if (spec.kind != BufferSpec::Kind::Rand)
      return usage(quoted(text) + ": zeros takes zeros:DTYPE[d1,..]");
    auto seed = parseSeed(rest);
    if (!seed.ok())
      return seed.status();
    spec.seed = *seed;
    return spec;
  }
  size_t close = rest.find(']', bracket);
  if (close == std::string_view::npos)
    return usage(quoted(text) + ": missing ']'");
  std::string_view dtypeText = rest.substr(0, bracket);
  spec.dtype = DataType::parse(dtypeText);
  if (!spec.dtype)
    return usage(quoted(dtypeText) + " is not a dtype");
  auto dims = parseDims(rest.substr(bracket + 1, close - bracket - 1));
  if (!dims.ok())
    return dims.status();
  spec.shape = std::move(dims.value());
  int64_t elements = 1;
  for (int64_t d : spec.shape)
    if (__builtin_mul_overflow(elements, d, &elements) || elements > kMaxBufferElements)
      return usage(quoted(text) + ": the shape has more than 2^40 elements");
  std::string_view tail = rest.substr(close + 1);
  if (tail.empty())
    return spec;
  if (tail[0] != ':' || spec.kind != BufferSpec::Kind::Rand)
    return usage(quoted(text) + ": unexpected " + quoted(tail));
  auto seed = parseSeed(tail.substr(1));
  if (!seed.ok())
    return seed.status();
  spec.seed = *seed;
  return spec;
}

Expected<uint64_t> parseByteSize(std::string_view text) {
  std::string bad = quoted(text) + " is not a byte count (e.g. 4096, 512M, 16G)";
  int shift = 0;
  if (!text.empty()) {
    switch (std::toupper(static_cast<unsigned char>(text.back()))) {
    case 'K':
      shift = 10;
      break;
    case 'M':
      shift = 20;
      break;
    case 'G':
      shift = 30;
      break;
    case 'T':
      shift = 40;
      break;
    }
    if (shift)
      text.remove_suffix(1);
  }
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value, 10);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || value == 0 ||
      value > (uint64_t(INT64_MAX) >> shift))
    return usage(bad);
  return value << shift;
}

Expected<std::pair<std::string, std::string>> splitAssignment(std::string_view text) {
  size_t eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return usage(quoted(text) + " is not NAME=VALUE");
  return std::make_pair(std::string(text.substr(0, eq)), std::string(text.substr(eq + 1)));
}

uint64_t readElement(std::span<const uint8_t> bytes, DataType dtype, int64_t index) {
  int bits = dtype.storageBits();
  if (bits % 8 == 0) { // whole bytes, little-endian
    uint64_t value = 0;
    size_t base = size_t(index) * size_t(bits / 8);
    for (int i = 0; i < bits / 8; ++i)
      value |= uint64_t(bytes[base + size_t(i)]) << (8 * i);
    return value;
  }
  uint64_t bit = uint64_t(index) * uint64_t(bits);
  uint64_t value = 0;
  for (int i = 0; i < bits; ++i, ++bit)
    value |= uint64_t((bytes[bit / 8] >> (bit % 8)) & 1u) << i;
  return value;
}

void writeElement(std::span<uint8_t> bytes, DataType dtype, int64_t index, uint64_t value) {
  int bits = dtype.storageBits();
  if (bits % 8 == 0) {
    size_t base = size_t(index) * size_t(bits / 8);
    for (int i = 0; i < bits / 8; ++i)
      bytes[base + size_t(i)] = uint8_t(value >> (8 * i));
    return;
  }
  uint64_t bit = uint64_t(index) * uint64_t(bits);
  for (int i = 0; i < bits; ++i, ++bit) {
    uint8_t mask = uint8_t(1u << (bit % 8));
    if ((value >> i) & 1u)
      bytes[bit / 8] |= mask;
    else
      bytes[bit / 8] &= uint8_t(~mask);
  }
}

uint64_t splitmix64Draw(uint64_t seed, uint64_t k) {
  uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

void fillRandom(std::span<uint8_t> bytes, DataType dtype, int64_t elements, uint64_t seed) {
  std::fill(bytes.begin(), bytes.end(), uint8_t(0));
  for (int64_t k = 0; k < elements; ++k) {
    uint64_t z = splitmix64Draw(seed, uint64_t(k));
    uint64_t bits = 0;
    if (dtype.isFloat())
      bits = fromDouble(std::ldexp(double(z >> 11), -52) - 1.0, dtype);
    else if (dtype.isBool())
      bits = z >> 63;
    else
      bits = z & bitMask(dtype.bits);
    writeElement(bytes, dtype, k, bits);
  }
}

} // namespace tilus::run
