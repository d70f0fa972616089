// NumPy .npy files for vm-run's buffers.
//
// vm-run exchanges buffers with NumPy (inputs with @FILE.npy, outputs with --save), so it
// needs the format without a Python dependency. The reader treats a file as untrusted input:
// every length is checked against what is there, the header dict is parsed by a small
// recursive-descent parser that accepts exactly the literals NumPy writes, and sizes are
// checked for overflow before anything is allocated.
#include "tools/npy.h"

#include "isa/file_io.h"
#include "isa/shape.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <limits>

namespace tilus::npy {
namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
constexpr int64_t kMaxBytes = int64_t(1) << 40;

Status formatError(std::string message) {
  return Status::error(ErrorCode::Io, "npy: " + std::move(message));
}

/// Parser for the header dict: {'key': value, ...} with string, bool and int-tuple values.
class HeaderParser {
public:
  explicit HeaderParser(std::string_view text) : text_(text) {}

  Status parse(Array &array) {
    bool sawDescr = false, sawOrder = false, sawShape = false;
    skipSpace();
    if (!eat('{'))
      return formatError("header does not start with '{'");
    while (true) {
      skipSpace();
      if (eat('}'))
        break;
      std::string key;
      if (!string(key))
        return formatError("expected a quoted key in the header at offset " + std::to_string(pos_));
      skipSpace();
      if (!eat(':'))
        return formatError("expected ':' after '" + key + "'");
      skipSpace();
      if (key == "descr") {
        if (!string(array.descr))
          return formatError("'descr' is not a simple string (structured dtypes are not "
                             "supported)");
        sawDescr = true;
      } else if (key == "fortran_order") {
        if (!boolean(array.fortranOrder))
          return formatError("'fortran_order' is not True or False");
        sawOrder = true;
      } else if (key == "shape") {
        if (!tuple(array.shape))
          return formatError("'shape' is not a tuple of non-negative integers");
        sawShape = true;
      } else {
        return formatError("unknown header key '" + key + "'");
      }
      skipSpace();
      if (eat(','))
        continue;
      skipSpace();
      if (eat('}'))
        break;
      return formatError("expected ',' or '}' in the header at offset " + std::to_string(pos_));
    }
    if (!sawDescr || !sawOrder || !sawShape)
      return formatError("header lacks 'descr', 'fortran_order' or 'shape'");
    return Status::success();
  }

private:
  void skipSpace() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])))
      ++pos_;
  }
  bool eat(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  bool string(std::string &out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"'))
      return false;
    char quote = text_[pos_++];
    size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos)
      return false;
    out.assign(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return true;
  }
  bool boolean(bool &out) {
    if (text_.substr(pos_, 4) == "True") {
      pos_ += 4;
      out = true;
      return true;
    }
    if (text_.substr(pos_, 5) == "False") {
      pos_ += 5;
      out = false;
      return true;
    }
    return false;
  }
  bool integer(int64_t &out) {
    size_t start = pos_;
    int64_t value = 0;
    while (pos_ < text_.size() && std::isdigit(static_cast<unsigned char>(text_[pos_]))) {
      int digit = text_[pos_++] - '0';
      if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
        return false;
      value = value * 10 + digit;
    }
    // NumPy may write Python 2 longs ("3L").
    if (pos_ > start && pos_ < text_.size() && text_[pos_] == 'L')
      ++pos_;
    out = value;
    return pos_ > start;
  }
  bool tuple(std::vector<int64_t> &out) {
    if (!eat('('))
      return false;
    out.clear();
    while (true) {
      skipSpace();
      if (eat(')'))
        return true;
      int64_t v = 0;
      if (!integer(v) || out.size() >= 64)
        return false;
      out.push_back(v);
      skipSpace();
      if (eat(','))
        continue;
      skipSpace();
      return eat(')');
    }
  }

  std::string_view text_;
  size_t pos_ = 0;
};

uint32_t readLe(const uint8_t *p, int bytes) {
  uint32_t v = 0;
  for (int i = 0; i < bytes; ++i)
    v |= uint32_t(p[i]) << (8 * i);
  return v;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    text += std::to_string(shape[i]) + (shape.size() == 1 ? "," : i + 1 < shape.size() ? ", " : "");
  return text + ")";
}

} // namespace

int64_t Array::elements() const { return productOf(shape); }

Expected<int> itemSize(const std::string &descr) {
  if (descr.size() < 3 || std::string("<>|=").find(descr[0]) == std::string::npos ||
      std::string("biuf").find(descr[1]) == std::string::npos)
    return formatError("unsupported dtype '" + descr + "'");
  std::string digits = descr.substr(2);
  if (digits != "1" && digits != "2" && digits != "4" && digits != "8")
    return formatError("unsupported dtype '" + descr + "'");
  int size = std::stoi(digits);
  if (descr[1] == 'b' && size != 1)
    return formatError("unsupported dtype '" + descr + "'");
  if (descr[1] == 'f' && size == 1)
    return formatError("unsupported dtype '" + descr + "'");
  return size;
}

std::string normalizeDescr(const std::string &descr) {
  if (descr.empty())
    return descr;
  std::string out = descr;
  if (out[0] == '=')
    out[0] = '<';
  if (out.size() == 3 && out[2] == '1')
    out[0] = '|';
  return out;
}

std::string descrFor(DataType dtype) {
  if (dtype.isBool())
    return "|b1";
  if (dtype.isFloat()) {
    if (dtype == DataType::f16() || dtype == DataType::f32() || dtype == DataType::f64())
      return "<f" + std::to_string(dtype.bits / 8); // IEEE binary16, 32, 64
    if (dtype == DataType::bf16())
      return "<u2";
    return "|u1"; // FP8 and the other floats of 8 bits or fewer
  }
  if (dtype.bits < 8)
    return "|u1"; // packed sub-byte integers
  char kind = dtype.isSigned() ? 'i' : 'u';
  int bytes = dtype.bits / 8;
  return std::string(bytes == 1 ? "|" : "<") + kind + std::to_string(bytes);
}

Expected<Array> parse(std::span<const uint8_t> bytes) {
  if (bytes.size() < kMagicBytes + 4 || std::memcmp(bytes.data(), kMagic, kMagicBytes) != 0)
    return formatError("not a .npy file (no \\x93NUMPY magic)");
  int major = bytes[6];
  if (major < 1 || major > 3)
    return formatError("unsupported format version " + std::to_string(major) + "." +
                       std::to_string(int(bytes[7])));
  size_t lengthBytes = major == 1 ? 2 : 4;
  size_t prefix = 8 + lengthBytes;
  if (bytes.size() < prefix)
    return formatError("file of " + std::to_string(bytes.size()) + " bytes ends in the header");
  uint64_t headerBytes = readLe(bytes.data() + 8, int(lengthBytes));
  if (headerBytes > bytes.size() - prefix)
    return formatError("header of " + std::to_string(headerBytes) + " bytes exceeds the file");
  std::string_view header(reinterpret_cast<const char *>(bytes.data() + prefix),
                          size_t(headerBytes));
  Array array;
  TILUSVM_TRY(HeaderParser(header).parse(array));
  auto size = itemSize(array.descr);
  if (!size.ok())
    return size.status();
  int64_t total = *size;
  for (int64_t d : array.shape) {
    if (d != 0 && total > kMaxBytes / d)
      return formatError("array of shape " + shapeText(array.shape) + " is too large");
    total *= d;
  }
  uint64_t available = bytes.size() - prefix - headerBytes;
  if (uint64_t(total) > available)
    return formatError("shape " + shapeText(array.shape) + " of '" + array.descr + "' needs " +
                       std::to_string(total) + " data bytes, the file has " +
                       std::to_string(available));
  const uint8_t *data = bytes.data() + prefix + headerBytes;
  array.data.assign(data, data + total);
  return array;
}

Expected<Array> readFile(const std::string &path, uint64_t maxBytes) {
  auto bytes = readRegularFile(path, maxBytes);
  if (!bytes.ok())
    return Status::error(ErrorCode::Io, path + ": " + bytes.status().first().message);
  auto array = parse(*bytes);
  if (!array.ok())
    return Status::error(ErrorCode::Io, path + ": " + array.status().first().message);
  return array;
}

Expected<std::vector<uint8_t>> cOrderLittleEndian(const Array &array) {
  auto size = itemSize(array.descr);
  if (!size.ok())
    return size.status();
  const size_t item = size_t(*size);
  std::vector<uint8_t> out = array.data;
  if (array.descr[0] == '>' && item > 1)
    for (size_t i = 0; i + item <= out.size(); i += item)
      std::reverse(out.begin() + i, out.begin() + i + item);
  if (!array.fortranOrder || array.shape.size() < 2)
    return out;
  // Element at C index c has coordinates x; in Fortran order it is at sum x_k * prod_{j<k} d_j.
  const std::vector<int64_t> &shape = array.shape;
  std::vector<uint8_t> reordered(out.size());
  int64_t count = array.elements();
  std::vector<int64_t> x(shape.size(), 0);
  for (int64_t c = 0; c < count; ++c) {
    int64_t f = 0, stride = 1;
    for (size_t k = 0; k < shape.size(); ++k) {
      f += x[k] * stride;
      stride *= shape[k];
    }
    std::memcpy(&reordered[size_t(c) * item], &out[size_t(f) * item], item);
    for (size_t k = shape.size(); k-- > 0;) { // next C-order coordinate
      if (++x[k] < shape[k])
        break;
      x[k] = 0;
    }
  }
  return reordered;
}

std::vector<uint8_t> encode(const std::string &descr, const std::vector<int64_t> &shape,
                            std::span<const uint8_t> data) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shapeText(shape) + ", }";
  size_t unpadded = kMagicBytes + 2 + 2 + header.size() + 1; // + '\n'
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  std::vector<uint8_t> out(kMagic, kMagic + kMagicBytes);
  out.push_back(1);
  out.push_back(0);
  out.push_back(uint8_t(header.size() & 0xff));
  out.push_back(uint8_t(header.size() >> 8));
  out.insert(out.end(), header.begin(), header.end());
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

Status writeFile(const std::string &path, const std::string &descr,
                 const std::vector<int64_t> &shape, std::span<const uint8_t> data) {
  std::vector<uint8_t> bytes = encode(descr, shape, data);
  Status written = writeOutputFile(path, bytes);
  if (!written.ok())
    return Status::error(ErrorCode::Io, path + ": " + written.first().message);
  return Status::success();
}

} // namespace tilus::npy
