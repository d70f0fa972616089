// .npy reading and writing against byte strings written by hand from the NumPy format
// specification (numpy/lib/format.py): magic "\x93NUMPY", version, little-endian header
// length, a dict literal padded with spaces to a multiple of 64 bytes ending in '\n', data.
#include "tools/npy.h"

#include "test_helpers.h"

#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

using namespace tilus;

namespace {

std::vector<uint8_t> bytesOf(const std::string &s) { return {s.begin(), s.end()}; }

/// A v1.0 file exactly as np.save writes it: the 10-byte prefix plus header is padded to 128.
std::vector<uint8_t> numpyV1(const std::string &dict, const std::vector<uint8_t> &data) {
  std::string header = dict;
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string prefix = std::string("\x93NUMPY\x01\x00", 8);
  prefix += char(header.size() & 0xff);
  prefix += char(header.size() >> 8);
  std::vector<uint8_t> out = bytesOf(prefix + header);
  out.insert(out.end(), data.begin(), data.end());
  return out;
}

} // namespace

TEST_CASE("encode writes what np.save writes for a float32 vector") {
  // np.save(f, np.array([1, 2, 3], dtype='<f4')): header length 118 (0x76), data at 128.
  std::vector<uint8_t> data = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00,
                               0x00, 0x40, 0x00, 0x00, 0x40, 0x40};
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  std::vector<uint8_t> expected =
      bytesOf(std::string("\x93NUMPY\x01\x00\x76\x00", 10) + dict + std::string(60, ' ') + "\n");
  expected.insert(expected.end(), data.begin(), data.end());
  CHECK(npy::encode("<f4", {3}, data) == expected);
  CHECK(expected.size() == 128 + 12);
}

TEST_CASE("encode of a 2-d shape spells the tuple like Python") {
  std::vector<uint8_t> data(2 * 3 * 2, 0);
  std::vector<uint8_t> bytes = npy::encode("<i2", {2, 3}, data);
  std::string text(bytes.begin(), bytes.end());
  CHECK(text.find("'shape': (2, 3), }") != std::string::npos);
  CHECK((bytes.size() - data.size()) % 64 == 0);
}

TEST_CASE("parse reads a hand-written v1.0 file") {
  auto array = npy::parse(numpyV1("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }",
                                  {1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}));
  REQUIRE_OK(array);
  CHECK(array->descr == "<i4");
  CHECK_FALSE(array->fortranOrder);
  CHECK(array->shape == std::vector<int64_t>{2});
  CHECK(array->data == std::vector<uint8_t>{1, 0, 0, 0, 0xff, 0xff, 0xff, 0xff});
}

TEST_CASE("parse reads a v2.0 file with a 4-byte header length and key order changed") {
  std::string dict = "{'shape': (1, 2), 'fortran_order': False, 'descr': '|u1'}";
  std::string prefix = std::string("\x93NUMPY\x02\x00", 8);
  uint32_t n = uint32_t(dict.size() + 1);
  for (int i = 0; i < 4; ++i)
    prefix += char((n >> (8 * i)) & 0xff);
  std::vector<uint8_t> bytes = bytesOf(prefix + dict + "\n");
  bytes.push_back(7);
  bytes.push_back(9);
  auto array = npy::parse(bytes);
  REQUIRE_OK(array);
  CHECK(array->shape == std::vector<int64_t>{1, 2});
  CHECK(array->data == std::vector<uint8_t>{7, 9});
}

TEST_CASE("a scalar array has shape () and one element") {
  auto array = npy::parse(numpyV1("{'descr': '<f8', 'fortran_order': False, 'shape': (), }",
                                  std::vector<uint8_t>(8, 0)));
  REQUIRE_OK(array);
  CHECK(array->shape.empty());
  CHECK(array->elements() == 1);
}

TEST_CASE("Fortran order is reordered to C order") {
  // [[1, 2, 3], [4, 5, 6]] as '<i2' in Fortran order is stored column by column: 1 4 2 5 3 6.
  std::vector<uint8_t> data = {1, 0, 4, 0, 2, 0, 5, 0, 3, 0, 6, 0};
  auto array =
      npy::parse(numpyV1("{'descr': '<i2', 'fortran_order': True, 'shape': (2, 3), }", data));
  REQUIRE_OK(array);
  auto c = npy::cOrderLittleEndian(*array);
  REQUIRE_OK(c);
  CHECK(*c == std::vector<uint8_t>{1, 0, 2, 0, 3, 0, 4, 0, 5, 0, 6, 0});
}

TEST_CASE("big-endian items are swapped to little-endian") {
  auto array = npy::parse(numpyV1("{'descr': '>u4', 'fortran_order': False, 'shape': (1,), }",
                                  {0x01, 0x02, 0x03, 0x04}));
  REQUIRE_OK(array);
  auto c = npy::cOrderLittleEndian(*array);
  REQUIRE_OK(c);
  CHECK(*c == std::vector<uint8_t>{0x04, 0x03, 0x02, 0x01});
}

TEST_CASE("malformed files are errors, never crashes") {
  std::string ok = "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }";
  CHECK_ERROR(npy::parse(bytesOf("NUMPY")), ErrorCode::Io);
  CHECK_ERROR(npy::parse(bytesOf(std::string("\x93NUMPX\x01\x00\x00\x00", 10))), ErrorCode::Io);
  CHECK_ERROR(npy::parse(numpyV1(ok, std::vector<uint8_t>(11, 0))), ErrorCode::Io); // 1 short
  CHECK_ERROR(npy::parse(numpyV1("{'descr': [('a', '<i4')], 'fortran_order': False, "
                                 "'shape': (1,), }",
                                 std::vector<uint8_t>(4, 0))),
              ErrorCode::Io);
  CHECK_ERROR(npy::parse(numpyV1("{'descr': '<f4', 'shape': (1,), }", std::vector<uint8_t>(4))),
              ErrorCode::Io);
  CHECK_ERROR(npy::parse(numpyV1("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }",
                                 std::vector<uint8_t>(8))),
              ErrorCode::Io);
  CHECK_ERROR(npy::parse(numpyV1("{'descr': '<f4', 'fortran_order': False, "
                                 "'shape': (99999999999, 99999999999), }",
                                 {})),
              ErrorCode::Io);
  // Header length pointing past the end of the file.
  CHECK_ERROR(npy::parse(bytesOf(std::string("\x93NUMPY\x01\x00\xff\x00{", 11))), ErrorCode::Io);
  // Every prefix of a valid file is rejected cleanly.
  std::vector<uint8_t> full = numpyV1(ok, std::vector<uint8_t>(12, 1));
  for (size_t n = 0; n < full.size(); ++n) {
    std::vector<uint8_t> cut(full.begin(), full.begin() + long(n));
    CHECK_FALSE(npy::parse(cut).ok());
  }
}

TEST_CASE("descrFor follows ISA section 8") {
  CHECK(npy::descrFor(DataType::f16()) == "<f2");
  CHECK(npy::descrFor(DataType::f32()) == "<f4");
  CHECK(npy::descrFor(DataType::f64()) == "<f8");
  CHECK(npy::descrFor(DataType::bf16()) == "<u2");
  CHECK(npy::descrFor(DataType::f8e4m3()) == "|u1");
  CHECK(npy::descrFor(DataType::f8e5m2()) == "|u1");
  CHECK(npy::descrFor(DataType::f(2, 1)) == "|u1");
  CHECK(npy::descrFor(DataType::i(6)) == "|u1");
  CHECK(npy::descrFor(DataType::u(1)) == "|u1");
  CHECK(npy::descrFor(DataType::boolean()) == "|b1");
  CHECK(npy::descrFor(DataType::i(8)) == "|i1");
  CHECK(npy::descrFor(DataType::u(8)) == "|u1");
  CHECK(npy::descrFor(DataType::i(16)) == "<i2");
  CHECK(npy::descrFor(DataType::u(32)) == "<u4");
  CHECK(npy::descrFor(DataType::i64()) == "<i8");
  CHECK(npy::normalizeDescr("=f4") == "<f4");
  CHECK(npy::normalizeDescr("<u1") == "|u1");
  CHECK(npy::normalizeDescr(">i2") == ">i2");
}

TEST_CASE("writeFile then readFile round-trips through the file system") {
  std::string path = (std::filesystem::temp_directory_path() / "tilusvm_test_npy.npy").string();
  std::vector<uint8_t> data = {1, 2, 3, 4, 5, 6};
  REQUIRE_OK(npy::writeFile(path, "<u2", {3}, data));
  auto array = npy::readFile(path);
  REQUIRE_OK(array);
  CHECK(array->descr == "<u2");
  CHECK(array->data == data);
  std::filesystem::remove(path);
  CHECK_ERROR(npy::readFile(path), ErrorCode::Io);
}
