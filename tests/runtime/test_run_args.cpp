// vm-run argument values: scalar parsing into bit patterns (reference patterns from the IEEE
// and OCP formats, written by hand), buffer specs, ISA section 2 packing, and the random fill
// (splitmix64 reference outputs from Vigna's published generator).
#include "tools/run_args.h"

#include "test_helpers.h"

#include <bitset>
#include <cmath>
#include <cstring>

using namespace tilus;
using namespace tilus::run;

TEST_CASE("integer scalars become two's-complement bit patterns of the parameter's width") {
  CHECK(parseScalar("-1", DataType::i32()).value() == 0xffffffffu);
  CHECK(parseScalar("2147483647", DataType::i32()).value() == 0x7fffffffu);
  CHECK(parseScalar("-2147483648", DataType::i32()).value() == 0x80000000u);
  CHECK_ERROR(parseScalar("2147483648", DataType::i32()), ErrorCode::Usage);
  CHECK(parseScalar("0x10", DataType::i32()).value() == 16);
  CHECK(parseScalar("255", DataType::u(8)).value() == 255);
  CHECK_ERROR(parseScalar("256", DataType::u(8)), ErrorCode::Usage);
  CHECK_ERROR(parseScalar("-1", DataType::u(8)), ErrorCode::Usage);
  CHECK(parseScalar("-32", DataType::i(6)).value() == 0x20);
  CHECK(parseScalar("31", DataType::i(6)).value() == 0x1f);
  CHECK_ERROR(parseScalar("32", DataType::i(6)), ErrorCode::Usage);
  CHECK(parseScalar("18446744073709551615", DataType::u(64)).value() == ~uint64_t(0));
  CHECK(parseScalar("-9223372036854775808", DataType::i64()).value() == uint64_t(1) << 63);
  CHECK_ERROR(parseScalar("1.5", DataType::i32()), ErrorCode::Usage);
  CHECK_ERROR(parseScalar("", DataType::i32()), ErrorCode::Usage);
  CHECK_ERROR(parseScalar("12abc", DataType::i32()), ErrorCode::Usage);
}

TEST_CASE("bool scalars") {
  CHECK(parseScalar("true", DataType::boolean()).value() == 1);
  CHECK(parseScalar("1", DataType::boolean()).value() == 1);
  CHECK(parseScalar("False", DataType::boolean()).value() == 0);
  CHECK_ERROR(parseScalar("2", DataType::boolean()), ErrorCode::Usage);
}

TEST_CASE("float scalars are rounded to the parameter's type") {
  CHECK(parseScalar("1.5", DataType::f32()).value() == 0x3fc00000u);
  CHECK(parseScalar("-2", DataType::f64()).value() == 0xc000000000000000ull);
  CHECK(parseScalar("1", DataType::f16()).value() == 0x3c00);
  CHECK(parseScalar("1.0", DataType::bf16()).value() == 0x3f80);
  CHECK(parseScalar("70000", DataType::f16()).value() == 0x7c00); // overflow to +inf
  CHECK(parseScalar("1000", DataType::f8e4m3()).value() == 0x7e); // saturates to 448
  CHECK(parseScalar("inf", DataType::f32()).value() == 0x7f800000u);
  CHECK_ERROR(parseScalar("one", DataType::f32()), ErrorCode::Usage);
}

TEST_CASE("buffer specs") {
  auto file = parseBufferSpec("@in/a.npy");
  REQUIRE_OK(file);
  CHECK(file->kind == BufferSpec::Kind::File);
  CHECK(file->path == "in/a.npy");

  auto zeros = parseBufferSpec("zeros");
  REQUIRE_OK(zeros);
  CHECK(zeros->kind == BufferSpec::Kind::Zeros);
  CHECK_FALSE(zeros->explicitShape());

  auto rand = parseBufferSpec("rand");
  REQUIRE_OK(rand);
  CHECK(rand->kind == BufferSpec::Kind::Rand);
  CHECK(rand->seed == 0);

  auto seeded = parseBufferSpec("rand:42");
  REQUIRE_OK(seeded);
  CHECK(seeded->seed == 42);

  auto shaped = parseBufferSpec("zeros:f16[2, 3,4]");
  REQUIRE_OK(shaped);
  CHECK(shaped->dtype == DataType::f16());
  CHECK(shaped->shape == std::vector<int64_t>{2, 3, 4});
  CHECK(shaped->explicitElements() == 24);

  auto shapedRand = parseBufferSpec("rand:i6[64]:7");
  REQUIRE_OK(shapedRand);
  CHECK(shapedRand->kind == BufferSpec::Kind::Rand);
  CHECK(shapedRand->dtype == DataType::i(6));
  CHECK(shapedRand->shape == std::vector<int64_t>{64});
  CHECK(shapedRand->seed == 7);

  auto noSeed = parseBufferSpec("rand:u8[5]");
  REQUIRE_OK(noSeed);
  CHECK(noSeed->seed == 0);

  CHECK_ERROR(parseBufferSpec("ones"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("@"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("zeros:5"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("zeros:f17[4]"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("zeros:f16[4"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("zeros:f16[-4]"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("zeros:f16[4]:3"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("rand:f16[4]x"), ErrorCode::Usage);
  CHECK_ERROR(parseBufferSpec("rand:-3"), ErrorCode::Usage);
}

TEST_CASE("NAME=VALUE splits at the first '='") {
  auto kv = splitAssignment("x=a=b");
  REQUIRE_OK(kv);
  CHECK(kv->first == "x");
  CHECK(kv->second == "a=b");
  CHECK_ERROR(splitAssignment("novalue"), ErrorCode::Usage);
  CHECK_ERROR(splitAssignment("=3"), ErrorCode::Usage);
}

TEST_CASE("packed elements follow ISA section 2 (least significant bit first)") {
  // u6 [1, 2, 3, 4]: 1 | 2 << 6 | 3 << 12 | 4 << 18 = 0x103081.
  std::vector<uint8_t> bytes(3, 0);
  for (int k = 0; k < 4; ++k)
    writeElement(bytes, DataType::u(6), k, uint64_t(k + 1));
  CHECK(bytes == std::vector<uint8_t>{0x81, 0x30, 0x10});
  for (int k = 0; k < 4; ++k)
    CHECK(readElement(bytes, DataType::u(6), k) == uint64_t(k + 1));

  // u1 [1,0,1,1,0,0,0,0, 1] -> 0x0d 0x01; i4 [-1, 2] -> 0x2f.
  std::vector<uint8_t> bits(2, 0xff);
  int pattern[9] = {1, 0, 1, 1, 0, 0, 0, 0, 1};
  for (int k = 0; k < 9; ++k)
    writeElement(bits, DataType::u(1), k, uint64_t(pattern[k]));
  CHECK(bits == std::vector<uint8_t>{0x0d, 0xff}); // bits 9..15 untouched
  std::vector<uint8_t> nibbles(1, 0);
  writeElement(nibbles, DataType::i(4), 0, 0xf);
  writeElement(nibbles, DataType::i(4), 1, 0x2);
  CHECK(nibbles[0] == 0x2f);

  // Whole-byte types are little-endian; bool takes a byte.
  std::vector<uint8_t> halves(4, 0);
  writeElement(halves, DataType::f16(), 1, 0x3c00);
  CHECK(halves == std::vector<uint8_t>{0, 0, 0x00, 0x3c});
  std::vector<uint8_t> flags(2, 0);
  writeElement(flags, DataType::boolean(), 1, 1);
  CHECK(flags == std::vector<uint8_t>{0, 1});
}

TEST_CASE("element access round-trips for every width over whole small domains") {
  for (int width = 1; width <= 16; ++width) {
    DataType t = DataType::u(width);
    const int count = 37;
    std::vector<uint8_t> bytes(size_t(count * width + 7) / 8, 0);
    for (int k = 0; k < count; ++k)
      writeElement(bytes, t, k, uint64_t(k * 2654435761u) & ((uint64_t(1) << width) - 1));
    for (int k = 0; k < count; ++k)
      CHECK(readElement(bytes, t, k) == (uint64_t(k * 2654435761u) & ((uint64_t(1) << width) - 1)));
  }
}

TEST_CASE("splitmix64 matches the reference generator") {
  CHECK(splitmix64Draw(0, 0) == 0xe220a8397b1dcdafull);
  CHECK(splitmix64Draw(0, 1) == 0x6e789e6aa1b965f4ull);
  CHECK(splitmix64Draw(0, 2) == 0x06c45d188009454full);
}

TEST_CASE("rand fills floats uniformly in [-1, 1) and integers with random bits") {
  const int n = 4096;
  std::vector<uint8_t> f(n * 4);
  fillRandom(f, DataType::f32(), n, 5);
  double sum = 0;
  for (int k = 0; k < n; ++k) {
    float v;
    std::memcpy(&v, &f[size_t(k) * 4], 4);
    CHECK(v >= -1.0f);
    CHECK(v < 1.0f);
    sum += v;
    if (k < 3) { // independent recomputation of the documented formula
      uint64_t z = splitmix64Draw(5, uint64_t(k));
      float expected = float(double(z >> 11) / 4503599627370496.0 - 1.0);
      CHECK(v == expected);
    }
  }
  CHECK(std::fabs(sum / n) < 0.05);

  std::vector<uint8_t> u(3);
  fillRandom(u, DataType::u(8), 3, 0);
  CHECK(u == std::vector<uint8_t>{0xaf, 0xf4, 0x4f});

  std::vector<uint8_t> b(3);
  fillRandom(b, DataType::boolean(), 3, 0);
  CHECK(b == std::vector<uint8_t>{1, 0, 0}); // top bits of e2.., 6e.., 06..

  // i6: low 6 bits of each draw, packed; the final 2 padding bits stay 0.
  std::vector<uint8_t> p(3, 0xff);
  fillRandom(p, DataType::i(6), 3, 0);
  uint64_t expect = (0xafu & 63) | (uint64_t(0xf4u & 63) << 6) | (uint64_t(0x4fu & 63) << 12);
  CHECK(p == std::vector<uint8_t>{uint8_t(expect), uint8_t(expect >> 8), uint8_t(expect >> 16)});
  CHECK((p[2] & 0xc0) == 0);

  // Same seed, same contents; another seed, other contents.
  std::vector<uint8_t> again(n * 4), other(n * 4);
  fillRandom(again, DataType::f32(), n, 5);
  fillRandom(other, DataType::f32(), n, 6);
  CHECK(again == f);
  CHECK(other != f);
}
