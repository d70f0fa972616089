// Names, spellings and legality of the data types of ISA section 2.
//
// Every stage that reads a type from outside (the assembler from text, the bytecode decoder from
// bytes) goes through parse() or valid(), so the set of legal types is decided here and nowhere
// else. The canonical spelling printed by name() is the only one parse() accepts: "i6", "u1",
// "bool", "f16", "bf16", "f32", "f64" and "fNeEmM" for every float of at most 8 bits (which
// includes the OCP types "f8e4m3" and "f8e5m2").
#include "isa/dtype.h"

namespace tilus {

namespace {

bool isIeeeWide(int exponent, int mantissa) {
  return (exponent == 5 && mantissa == 10) || (exponent == 8 && mantissa == 7) ||
         (exponent == 8 && mantissa == 23) || (exponent == 11 && mantissa == 52);
}

bool validIntBits(int bits, bool isSigned) {
  if (bits == 16 || bits == 32 || bits == 64)
    return true;
  return bits >= (isSigned ? 2 : 1) && bits <= 8;
}

/// A decimal number without sign or leading zeros, at most 3 digits; consumes it from `text`.
std::optional<int> takeNumber(std::string_view &text) {
  size_t n = 0;
  while (n < text.size() && n < 4 && text[n] >= '0' && text[n] <= '9')
    ++n;
  if (n == 0 || n > 3 || (n > 1 && text[0] == '0'))
    return std::nullopt;
  int value = 0;
  for (size_t k = 0; k < n; ++k)
    value = value * 10 + (text[k] - '0');
  text.remove_prefix(n);
  return value;
}

/// "N" after the kind letter of an integer type.
std::optional<DataType> parseInt(std::string_view rest, bool isSigned) {
  std::optional<int> bits = takeNumber(rest);
  if (!bits || !rest.empty() || !validIntBits(*bits, isSigned))
    return std::nullopt;
  return isSigned ? DataType::i(*bits) : DataType::u(*bits);
}

/// "NeEmM" after the leading 'f' of a low-precision float.
std::optional<DataType> parseSmallFloat(std::string_view rest) {
  std::optional<int> bits = takeNumber(rest);
  if (!bits || rest.empty() || rest[0] != 'e')
    return std::nullopt;
  rest.remove_prefix(1);
  std::optional<int> exponent = takeNumber(rest);
  if (!exponent || rest.empty() || rest[0] != 'm')
    return std::nullopt;
  rest.remove_prefix(1);
  std::optional<int> mantissa = takeNumber(rest);
  if (!mantissa || !rest.empty())
    return std::nullopt;
  if (*exponent < 1 || *mantissa < 1 || *bits != 1 + *exponent + *mantissa || *bits < 3 ||
      *bits > 8)
    return std::nullopt;
  return DataType::f(*exponent, *mantissa);
}

} // namespace

bool DataType::isArithmetic() const {
  switch (kind) {
  case TypeKind::Bool:
    return true;
  case TypeKind::Int:
  case TypeKind::UInt:
    return bits == 8 || bits == 16 || bits == 32 || bits == 64;
  case TypeKind::Float:
    return bits > 8 && isIeeeWide(exponent, mantissa);
  }
  return false;
}

FloatStyle DataType::floatStyle() const {
  if (!isFloat())
    return FloatStyle::Finite;
  if (bits > 8)
    return FloatStyle::Ieee;
  if (bits == 8 && exponent == 5 && mantissa == 2)
    return FloatStyle::Ieee;
  if (bits == 8 && exponent == 4 && mantissa == 3)
    return FloatStyle::OcpE4M3;
  return FloatStyle::Finite;
}

std::string DataType::name() const {
  switch (kind) {
  case TypeKind::Bool:
    return "bool";
  case TypeKind::Int:
    return std::string("i") += std::to_string(bits);
  case TypeKind::UInt:
    return std::string("u") += std::to_string(bits);
  case TypeKind::Float:
    break;
  }
  if (bits > 8 && exponent == 5 && mantissa == 10)
    return "f16";
  if (bits > 8 && exponent == 8 && mantissa == 7)
    return "bf16";
  if (bits > 8 && exponent == 8 && mantissa == 23)
    return "f32";
  if (bits > 8 && exponent == 11 && mantissa == 52)
    return "f64";
  std::string text = "f";
  text += std::to_string(bits);
  text += 'e';
  text += std::to_string(exponent);
  text += 'm';
  text += std::to_string(mantissa);
  return text;
}

std::optional<DataType> DataType::parse(std::string_view text) {
  if (text == "bool")
    return boolean();
  if (text == "f16")
    return f16();
  if (text == "bf16")
    return bf16();
  if (text == "f32")
    return f32();
  if (text == "f64")
    return f64();
  if (text.empty())
    return std::nullopt;
  char lead = text[0];
  text.remove_prefix(1);
  if (lead == 'i')
    return parseInt(text, true);
  if (lead == 'u')
    return parseInt(text, false);
  if (lead == 'f')
    return parseSmallFloat(text);
  return std::nullopt;
}

bool DataType::valid() const {
  switch (kind) {
  case TypeKind::Bool:
    return bits == 1 && exponent == 0 && mantissa == 0;
  case TypeKind::Int:
  case TypeKind::UInt:
    return exponent == 0 && mantissa == 0 && validIntBits(bits, kind == TypeKind::Int);
  case TypeKind::Float:
    if (bits != 1 + exponent + mantissa)
      return false;
    if (bits > 8)
      return isIeeeWide(exponent, mantissa);
    return exponent >= 1 && mantissa >= 1 && bits >= 3;
  }
  return false;
}

} // namespace tilus
