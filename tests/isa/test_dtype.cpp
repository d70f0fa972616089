// DataType: spellings, legality and classification of the ISA section 2 types. The expected
// sets are written out here from the ISA text, independently of isa/dtype.cpp.
#include "isa/dtype.h"

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

using namespace tilus;

namespace {

std::string cat(std::string a, const std::string &b) { return a += b; }

/// Every legal spelling, written from the ISA section 2 table.
std::vector<std::string> allSpellings() {
  std::vector<std::string> names = {"bool", "i8",  "i16", "i32",  "i64", "u8", "u16",
                                    "u32",  "u64", "f16", "bf16", "f32", "f64"};
  for (int n = 2; n <= 7; ++n)
    names.push_back(cat("i", std::to_string(n)));
  for (int n = 1; n <= 7; ++n)
    names.push_back(cat("u", std::to_string(n)));
  for (int e = 1; e <= 6; ++e)
    for (int m = 1; 1 + e + m <= 8; ++m)
      names.push_back(
          cat(cat(cat(cat(cat("f", std::to_string(1 + e + m)), "e"), std::to_string(e)), "m"),
              std::to_string(m)));
  return names;
}

/// The legality rule restated from ISA section 2, for the brute-force comparison below.
bool referenceValid(TypeKind kind, int bits, int e, int m) {
  if (kind == TypeKind::Bool)
    return bits == 1 && e == 0 && m == 0;
  if (kind == TypeKind::Int)
    return e == 0 && m == 0 && ((bits >= 2 && bits <= 8) || bits == 16 || bits == 32 || bits == 64);
  if (kind == TypeKind::UInt)
    return e == 0 && m == 0 && ((bits >= 1 && bits <= 8) || bits == 16 || bits == 32 || bits == 64);
  if (bits != 1 + e + m)
    return false;
  if (bits == 16)
    return (e == 5 && m == 10) || (e == 8 && m == 7);
  if (bits == 32)
    return e == 8 && m == 23;
  if (bits == 64)
    return e == 11 && m == 52;
  return bits >= 3 && bits <= 8 && e >= 1 && m >= 1;
}

} // namespace

TEST_CASE("dtype: 47 legal spellings, each parses and prints back") {
  std::vector<std::string> names = allSpellings();
  // 1 bool + 10 signed + 11 unsigned + 4 IEEE + 21 fNeEmM (N = 3..8 gives 1+2+...+6).
  CHECK(names.size() == 47);
  std::set<std::string> unique(names.begin(), names.end());
  CHECK(unique.size() == 47);
  for (const std::string &name : names) {
    INFO(name);
    std::optional<DataType> t = DataType::parse(name);
    REQUIRE(t.has_value());
    CHECK(t->valid());
    CHECK(t->name() == name);
  }
}

TEST_CASE("dtype: parsed fields") {
  CHECK(DataType::parse("bool") == DataType{TypeKind::Bool, 1, 0, 0});
  CHECK(DataType::parse("i6") == DataType{TypeKind::Int, 6, 0, 0});
  CHECK(DataType::parse("u1") == DataType{TypeKind::UInt, 1, 0, 0});
  CHECK(DataType::parse("u64") == DataType{TypeKind::UInt, 64, 0, 0});
  CHECK(DataType::parse("f16") == DataType{TypeKind::Float, 16, 5, 10});
  CHECK(DataType::parse("bf16") == DataType{TypeKind::Float, 16, 8, 7});
  CHECK(DataType::parse("f32") == DataType{TypeKind::Float, 32, 8, 23});
  CHECK(DataType::parse("f64") == DataType{TypeKind::Float, 64, 11, 52});
  CHECK(DataType::parse("f8e4m3") == DataType{TypeKind::Float, 8, 4, 3});
  CHECK(DataType::parse("f8e5m2") == DataType{TypeKind::Float, 8, 5, 2});
  CHECK(DataType::parse("f4e2m1") == DataType{TypeKind::Float, 4, 2, 1});
  CHECK(DataType::parse("f3e1m1") == DataType{TypeKind::Float, 3, 1, 1});
  CHECK(DataType::parse("f8e1m6") == DataType{TypeKind::Float, 8, 1, 6});
}

TEST_CASE("dtype: rejected spellings") {
  const char *bad[] = {"i1",       "u0",       "i0",     "i9",     "u12",     "i128",   "u65",
                       "f9e4m4",   "f4e2m2",   "f2e1m0", "f3e2m0", "f3e0m2",  "f2e0m1", "f8",
                       "f16e5m10", "f32e8m23", "bf8",    "F16",    "I32",     "i08",    "u01",
                       "f08e4m3",  "f8e04m3",  "i",      "u",      "",        "bool8",  " i32",
                       "i32 ",     "f8e4m3x",  "f8e4m4", "e4m3",   "fp16",    "half",   "i-8",
                       "u+8",      "f8e4",     "f8m3e4", "f8e7m0", "f8e0m7",  "f1e0m0", "f10e5m4",
                       "float32",  "int32",    "b",      "f",      "f8e4m3\n"};
  for (const char *text : bad) {
    INFO(text);
    CHECK_FALSE(DataType::parse(text).has_value());
  }
  CHECK_FALSE(DataType::parse(std::string_view("i6\0", 3)).has_value());
}

TEST_CASE("dtype: valid() agrees with the ISA rule over every small field combination") {
  int validCount = 0;
  for (int kind = 0; kind < 4; ++kind)
    for (int bits = 0; bits <= 70; ++bits)
      for (int e = 0; e <= 12; ++e)
        for (int m = 0; m <= 60; ++m) {
          DataType t{TypeKind(kind), uint8_t(bits), uint8_t(e), uint8_t(m)};
          bool expected = referenceValid(TypeKind(kind), bits, e, m);
          if (t.valid() != expected) {
            INFO(kind << " " << bits << " " << e << " " << m);
            CHECK(t.valid() == expected);
          }
          if (!expected)
            continue;
          ++validCount;
          std::optional<DataType> back = DataType::parse(t.name());
          REQUIRE(back.has_value());
          CHECK(*back == t);
        }
  CHECK(validCount == 47);
  CHECK_FALSE((DataType{TypeKind(7), 8, 0, 0}).valid());
}

TEST_CASE("dtype: isArithmetic is bool, 8-64 bit integers, f16 bf16 f32 f64") {
  std::set<std::string> arithmetic = {"bool", "i8",  "i16", "i32",  "i64", "u8", "u16",
                                      "u32",  "u64", "f16", "bf16", "f32", "f64"};
  for (const std::string &name : allSpellings()) {
    INFO(name);
    CHECK(DataType::parse(name)->isArithmetic() == (arithmetic.count(name) == 1));
  }
}

TEST_CASE("dtype: float styles") {
  for (const std::string &name : allSpellings()) {
    DataType t = *DataType::parse(name);
    if (!t.isFloat())
      continue;
    INFO(name);
    FloatStyle expected = FloatStyle::Finite;
    if (name == "f16" || name == "bf16" || name == "f32" || name == "f64" || name == "f8e5m2")
      expected = FloatStyle::Ieee;
    if (name == "f8e4m3")
      expected = FloatStyle::OcpE4M3;
    CHECK(t.floatStyle() == expected);
  }
  CHECK(DataType::f(5, 1).floatStyle() == FloatStyle::Finite); // f7e5m1: not e5m2
  CHECK(DataType::f(4, 2).floatStyle() == FloatStyle::Finite); // f7e4m2: not e4m3
}

TEST_CASE("dtype: sub-byte and storage bits") {
  CHECK(DataType::boolean().storageBits() == 8);
  CHECK_FALSE(DataType::boolean().isSubByte());
  CHECK(DataType::u(1).isSubByte());
  CHECK(DataType::u(1).storageBits() == 1);
  CHECK(DataType::i(7).isSubByte());
  CHECK_FALSE(DataType::i(8).isSubByte());
  CHECK(DataType::f(2, 1).isSubByte());
  CHECK(DataType::f(2, 1).storageBits() == 4);
  CHECK_FALSE(DataType::f8e4m3().isSubByte());
  CHECK(DataType::f16().storageBits() == 16);
}
