// The primitive encodings of the bytecode format (docs/bytecode.md): fixed little-endian
// integers for the header, minimal LEB128 varints everywhere else, zigzag for signed values,
// length-prefixed strings and four-byte data types. Kept apart from the format's structure so
// that the bounds checks every read depends on live in one small place.
#include "isa/bytecode_io.h"

namespace tilus::bytecode {

void ByteWriter::u32le(uint32_t v) {
  for (int i = 0; i < 4; ++i)
    u8(uint8_t(v >> (8 * i)));
}

void ByteWriter::u64le(uint64_t v) {
  for (int i = 0; i < 8; ++i)
    u8(uint8_t(v >> (8 * i)));
}

void ByteWriter::uleb(uint64_t v) {
  do {
    uint8_t byte = v & 0x7f;
    v >>= 7;
    u8(v != 0 ? uint8_t(byte | 0x80) : byte);
  } while (v != 0);
}

void ByteWriter::sleb(int64_t v) { uleb((uint64_t(v) << 1) ^ uint64_t(v >> 63)); }

void ByteWriter::str(std::string_view s) {
  uleb(s.size());
  out_.insert(out_.end(), s.begin(), s.end());
}

void ByteWriter::dtype(DataType t) {
  u8(uint8_t(t.kind));
  u8(t.bits);
  u8(t.exponent);
  u8(t.mantissa);
}

void ByteWriter::sized(const ByteWriter &payload) {
  uleb(payload.size());
  bytes(payload.data());
}

size_t ByteReader::pushLimit(size_t n) {
  size_t previous = end_;
  end_ = pos_ + n;
  return previous;
}

void ByteReader::failAt(size_t offset, const std::string &message) {
  if (!ok())
    return;
  std::string text = context_.empty() ? message : context_ + ": " + message;
  status_ = Status::error(ErrorCode::Bytecode, text + " at offset " + std::to_string(offset));
}

bool ByteReader::need(size_t n, const char *what) {
  if (!ok())
    return false;
  if (n <= remaining())
    return true;
  fail(std::string("unexpected end of data reading ") + what + ": need " + std::to_string(n) +
       " bytes, " + std::to_string(remaining()) + " remaining");
  return false;
}

uint8_t ByteReader::u8(const char *what) {
  if (!need(1, what))
    return 0;
  return data_[pos_++];
}

uint64_t ByteReader::littleEndian(size_t n, const char *what) {
  if (!need(n, what))
    return 0;
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i)
    v |= uint64_t(data_[pos_ + i]) << (8 * i);
  pos_ += n;
  return v;
}

uint32_t ByteReader::u32le(const char *what) { return uint32_t(littleEndian(4, what)); }

uint64_t ByteReader::u64le(const char *what) { return littleEndian(8, what); }

uint64_t ByteReader::uleb(const char *what) {
  size_t start = pos_;
  uint64_t result = 0;
  for (int i = 0; i < 10; ++i) {
    if (!need(1, what))
      return 0;
    uint8_t byte = data_[pos_++];
    if (i == 9 && byte > 1) {
      failAt(start, std::string(what) + " varint overflows 64 bits");
      return 0;
    }
    result |= uint64_t(byte & 0x7f) << (7 * i);
    if ((byte & 0x80) == 0) {
      if (byte == 0 && i > 0) {
        failAt(start, std::string(what) + " varint is overlong (" + std::to_string(i + 1) +
                          " bytes for value " + std::to_string(result) + ")");
        return 0;
      }
      return result;
    }
  }
  return 0; // unreachable: the tenth byte either ends the varint or fails above
}

uint32_t ByteReader::u32(const char *what) { return uint32_t(bounded(what, UINT32_MAX)); }

uint64_t ByteReader::bounded(const char *what, uint64_t bound) {
  size_t start = pos_;
  uint64_t v = uleb(what);
  if (ok() && v > bound) {
    failAt(start,
           std::string(what) + " " + std::to_string(v) + " exceeds " + std::to_string(bound));
    return 0;
  }
  return v;
}

int64_t ByteReader::sleb(const char *what) {
  uint64_t z = uleb(what);
  return int64_t((z >> 1) ^ (~(z & 1) + 1));
}

bool ByteReader::boolean(const char *what) {
  size_t start = pos_;
  uint8_t v = u8(what);
  if (v > 1) {
    failAt(start, std::string(what) + " must be 0 or 1, got " + std::to_string(v));
    return false;
  }
  return v == 1;
}

uint32_t ByteReader::count(const char *what, uint64_t cap, size_t minElementBytes) {
  size_t start = pos_;
  uint64_t n = uleb(what);
  if (!ok())
    return 0;
  if (n > cap) {
    failAt(start, std::string(what) + " count " + std::to_string(n) + " exceeds limit " +
                      std::to_string(cap));
    return 0;
  }
  // n <= cap < 2^32 and minElementBytes is small: no overflow.
  if (n * minElementBytes > remaining()) {
    failAt(start, std::string(what) + " count " + std::to_string(n) + " exceeds remaining " +
                      std::to_string(remaining()) + " bytes");
    return 0;
  }
  return uint32_t(n);
}

std::string ByteReader::str(const char *what, uint64_t cap) {
  size_t start = pos_;
  uint64_t n = uleb(what);
  if (!ok())
    return {};
  if (n > cap) {
    failAt(start, std::string(what) + " length " + std::to_string(n) + " exceeds limit " +
                      std::to_string(cap));
    return {};
  }
  if (!need(n, what))
    return {};
  std::string s(reinterpret_cast<const char *>(data_.data() + pos_), n);
  pos_ += n;
  return s;
}

DataType ByteReader::dtype(const char *what) {
  size_t start = pos_;
  uint8_t kind = u8(what);
  uint8_t bits = u8(what);
  uint8_t exponent = u8(what);
  uint8_t mantissa = u8(what);
  if (!ok())
    return DataType{};
  DataType t{TypeKind(kind), bits, exponent, mantissa};
  if (kind > uint8_t(TypeKind::Float) || !t.valid()) {
    failAt(start, std::string("invalid ") + what + " (kind " + std::to_string(kind) + ", bits " +
                      std::to_string(bits) + ", exponent " + std::to_string(exponent) +
                      ", mantissa " + std::to_string(mantissa) + ")");
    return DataType{};
  }
  return t;
}

std::span<const uint8_t> ByteReader::raw(const char *what, size_t n) {
  if (!need(n, what))
    return {};
  std::span<const uint8_t> s = data_.subspan(pos_, n);
  pos_ += n;
  return s;
}

bool isValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    uint8_t c = uint8_t(s[i]);
    if (c < 0x80) {
      ++i;
      continue;
    }
    size_t len;
    uint32_t cp;
    if ((c & 0xe0) == 0xc0) {
      len = 2;
      cp = c & 0x1f;
    } else if ((c & 0xf0) == 0xe0) {
      len = 3;
      cp = c & 0x0f;
    } else if ((c & 0xf8) == 0xf0) {
      len = 4;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (s.size() - i < len)
      return false;
    for (size_t k = 1; k < len; ++k) {
      uint8_t cc = uint8_t(s[i + k]);
      if ((cc & 0xc0) != 0x80)
        return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMinForLength[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMinForLength[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
      return false;
    i += len;
  }
  return true;
}

bool isIdentifier(std::string_view s) {
  if (s.empty())
    return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; };
  if (!alpha(s[0]))
    return false;
  for (char c : s)
    if (!alpha(c) && !(c >= '0' && c <= '9'))
      return false;
  return true;
}

} // namespace tilus::bytecode
