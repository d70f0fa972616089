// Print's text format. Every backend must print the same text for the same values, so the
// rule is simple and exact: element values are formatted from their exact double value with a
// fixed printf precision that round-trips every type of at most 24 significand bits (9
// significant digits) and f64 (17), never from a host-dependent shortest representation.
#include "vm/cpu/print_format.h"

#include "isa/convert.h"

#include <cmath>
#include <cstdio>

namespace tilus::cpu {

std::string formatElement(uint64_t bits, DataType type) {
  if (type.isBool())
    return (bits & 1) ? "true" : "false";
  if (type.isInt())
    return type.isSigned() ? std::to_string(signExtend(bits, type.bits))
                           : std::to_string(bits & bitMask(type.bits));
  double v = toDouble(bits, type);
  if (std::isnan(v))
    return "nan";
  if (std::isinf(v))
    return v > 0 ? "inf" : "-inf";
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.*g", type == DataType::f64() ? 17 : 9, v);
  return buffer;
}

namespace {

void appendNested(std::string &out, DataType type, const std::vector<int64_t> &shape,
                  const std::vector<uint64_t> &values, size_t dim, size_t &next) {
  if (dim == shape.size()) {
    out += formatElement(values[next++], type);
    return;
  }
  out += '[';
  for (int64_t k = 0; k < shape[dim]; ++k) {
    if (k)
      out += ", ";
    appendNested(out, type, shape, values, dim + 1, next);
  }
  out += ']';
}

} // namespace

std::string formatPrint(const int64_t block[3], const std::string &message, DataType type,
                        bool isTensor, const std::vector<int64_t> &shape,
                        const std::vector<uint64_t> &values) {
  std::string out = "[block " + std::to_string(block[0]) + ", " + std::to_string(block[1]) + ", " +
                    std::to_string(block[2]) + "] ";
  if (!message.empty())
    out += message + ": ";
  out += type.name();
  if (isTensor) {
    out += '[';
    for (size_t d = 0; d < shape.size(); ++d)
      out += (d ? ", " : "") + std::to_string(shape[d]);
    out += ']';
  }
  out += " = ";
  size_t next = 0;
  appendNested(out, type, isTensor ? shape : std::vector<int64_t>{}, values, 0, next);
  out += '\n';
  return out;
}

} // namespace tilus::cpu
