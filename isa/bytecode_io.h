// Byte-level reading and writing for the bytecode format (docs/bytecode.md, "Primitive
// encodings"). Internal to isa/: the encoder and decoder of isa/bytecode*.cpp share it.
//
// ByteReader is defensive in the style of wasm3's parser: every read checks the bytes left
// before the current limit (the end of the section or structure being read), varints reject
// overflow and overlong forms, and counts are checked against a cap and against the bytes left
// before anything is allocated. Errors are sticky: the first failure is kept with its offset,
// every later read returns zero without advancing, and callers test ok() at the points where a
// zero would be used to index or to allocate.
#pragma once

#include "isa/dtype.h"
#include "isa/status.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace tilus::bytecode {

class ByteWriter {
public:
  void u8(uint8_t v) { out_.push_back(v); }
  void u32le(uint32_t v);
  void u64le(uint64_t v);
  /// Unsigned LEB128, minimal length.
  void uleb(uint64_t v);
  /// Signed: zigzag, then unsigned LEB128.
  void sleb(int64_t v);
  void boolean(bool v) { u8(v ? 1 : 0); }
  /// uleb byte length, then the bytes.
  void str(std::string_view s);
  void bytes(std::span<const uint8_t> b) { out_.insert(out_.end(), b.begin(), b.end()); }
  /// kind, bits, exponent, mantissa: four bytes.
  void dtype(DataType t);
  /// uleb size, then the payload (a section or any length-prefixed structure).
  void sized(const ByteWriter &payload);

  void reserve(size_t n) { out_.reserve(n); }
  size_t size() const { return out_.size(); }
  const std::vector<uint8_t> &data() const { return out_; }
  std::vector<uint8_t> take() { return std::move(out_); }

private:
  std::vector<uint8_t> out_;
};

class ByteReader {
public:
  explicit ByteReader(std::span<const uint8_t> bytes) : data_(bytes), end_(bytes.size()) {}

  bool ok() const { return status_.ok(); }
  const Status &status() const { return status_; }
  /// Absolute offset of the next byte.
  size_t offset() const { return pos_; }
  /// Bytes left before the current limit.
  size_t remaining() const { return end_ - pos_; }
  size_t limit() const { return end_; }

  /// Narrow reads to the next `n` bytes (the caller has checked n <= remaining()); returns the
  /// previous limit for popLimit.
  size_t pushLimit(size_t n);
  void popLimit(size_t previous) { end_ = previous; }

  /// Prefix of every later error message, e.g. "program 0 instruction 3 (Add)".
  void setContext(std::string context) { context_ = std::move(context); }
  const std::string &context() const { return context_; }
  /// Record an error at the current offset (only the first error is kept).
  void fail(const std::string &message) { failAt(pos_, message); }
  void failAt(size_t offset, const std::string &message);

  uint8_t u8(const char *what);
  uint32_t u32le(const char *what);
  uint64_t u64le(const char *what);
  uint64_t uleb(const char *what);
  /// uleb that must fit 32 bits.
  uint32_t u32(const char *what);
  /// uleb in [0, bound].
  uint64_t bounded(const char *what, uint64_t bound);
  int64_t sleb(const char *what);
  /// One byte, 0 or 1.
  bool boolean(const char *what);
  /// A count of elements that each take at least `minElementBytes` bytes: at most `cap` and
  /// at most what the remaining bytes can hold.
  uint32_t count(const char *what, uint64_t cap, size_t minElementBytes = 1);
  /// uleb length (at most `cap`), then the bytes.
  std::string str(const char *what, uint64_t cap);
  /// A DataType, which must be valid().
  DataType dtype(const char *what);
  /// Raw bytes.
  std::span<const uint8_t> raw(const char *what, size_t n);
  /// The bytes read since absolute offset `start`.
  std::span<const uint8_t> since(size_t start) const { return data_.subspan(start, pos_ - start); }

private:
  bool need(size_t n, const char *what);
  /// An unsigned little-endian value of n <= 8 bytes.
  uint64_t littleEndian(size_t n, const char *what);

  std::span<const uint8_t> data_;
  size_t pos_ = 0;
  size_t end_;
  Status status_;
  std::string context_;
};

/// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool isValidUtf8(std::string_view s);
/// [A-Za-z_][A-Za-z0-9_]*
bool isIdentifier(std::string_view s);

} // namespace tilus::bytecode
