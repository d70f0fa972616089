// The --check comparison rule on hand-made buffers: exact for integers and bool, the
// documented relative-plus-scale tolerance for floats, NaN and infinity handling.
#include "tools/buffer_compare.h"

#include "test_helpers.h"

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

using namespace tilus;
using namespace tilus::run;

namespace {

std::vector<uint8_t> f32Bytes(const std::vector<float> &values) {
  std::vector<uint8_t> out(values.size() * 4);
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

} // namespace

TEST_CASE("tolerances per dtype") {
  CHECK(toleranceFor(DataType::i32()).exact);
  CHECK(toleranceFor(DataType::boolean()).exact);
  CHECK(toleranceFor(DataType::i(6)).exact);
  CHECK(toleranceFor(DataType::f32()).rtol == 1e-5);
  CHECK(toleranceFor(DataType::f16()).rtol == 1e-2);
  CHECK(toleranceFor(DataType::bf16()).rtol == 2e-2);
  CHECK(toleranceFor(DataType::f64()).rtol == 1e-9);
  CHECK(toleranceFor(DataType::f8e4m3()).rtol == 0.125);
  CHECK(toleranceFor(DataType::f8e5m2()).rtol == 0.25);
  CHECK(toleranceFor(DataType::f(2, 1)).rtol == 0.5);
}

TEST_CASE("integers compare exactly, element by element") {
  std::vector<uint8_t> a = {1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0};
  std::vector<uint8_t> b = a;
  BufferComparison same = compareBuffers(DataType::i32(), 3, a, b);
  CHECK(same.ok);
  CHECK(same.mismatches == 0);
  b[4] = 3; // element 1 differs by one
  BufferComparison diff = compareBuffers(DataType::i32(), 3, a, b);
  CHECK_FALSE(diff.ok);
  CHECK(diff.mismatches == 1);
  CHECK(diff.firstMismatch == 1);
  CHECK(diff.maxAbsError == 1.0);
}

TEST_CASE("packed sub-byte buffers compare only the elements, not the padding bits") {
  // Two u6 elements in 2 bytes: 12 bits used, 4 padding bits that may differ.
  std::vector<uint8_t> a = {0x41, 0x00};
  std::vector<uint8_t> b = {0x41, 0xf0};
  CHECK(compareBuffers(DataType::u(6), 2, a, b).ok);
  b[1] = 0x01; // element 1 now differs
  BufferComparison c = compareBuffers(DataType::u(6), 2, a, b);
  CHECK(c.mismatches == 1);
  CHECK(c.firstMismatch == 1);
}

TEST_CASE("floats pass within rtol * (|e| + mean |e|)") {
  // Reference [1, 3]: mean |e| = 2; element 0 allows 1e-5 * (1 + 2) = 3e-5.
  std::vector<uint8_t> e = f32Bytes({1.0f, 3.0f});
  CHECK(compareBuffers(DataType::f32(), 2, f32Bytes({1.0f + 2.5e-5f, 3.0f}), e).ok);
  BufferComparison c = compareBuffers(DataType::f32(), 2, f32Bytes({1.0f + 4e-5f, 3.0f}), e);
  CHECK_FALSE(c.ok);
  CHECK(c.mismatches == 1);
  CHECK(c.maxAbsError == doctest::Approx(4e-5).epsilon(0.01));
  CHECK(c.maxRelError == doctest::Approx(4e-5).epsilon(0.01));
  // An element at zero is judged on the buffer's scale: 1e-5 * (0 + 2) = 2e-5.
  std::vector<uint8_t> withZero = f32Bytes({0.0f, 4.0f});
  CHECK(compareBuffers(DataType::f32(), 2, f32Bytes({1.5e-5f, 4.0f}), withZero).ok);
  CHECK_FALSE(compareBuffers(DataType::f32(), 2, f32Bytes({3e-5f, 4.0f}), withZero).ok);
}

TEST_CASE("NaN matches only NaN, infinity only the same infinity") {
  float nan = std::numeric_limits<float>::quiet_NaN();
  float inf = std::numeric_limits<float>::infinity();
  CHECK(compareBuffers(DataType::f32(), 2, f32Bytes({nan, inf}), f32Bytes({nan, inf})).ok);
  CHECK_FALSE(compareBuffers(DataType::f32(), 1, f32Bytes({nan}), f32Bytes({1.0f})).ok);
  CHECK_FALSE(compareBuffers(DataType::f32(), 1, f32Bytes({1.0f}), f32Bytes({nan})).ok);
  CHECK_FALSE(compareBuffers(DataType::f32(), 1, f32Bytes({-inf}), f32Bytes({inf})).ok);
  CHECK_FALSE(compareBuffers(DataType::f32(), 1, f32Bytes({3e38f}), f32Bytes({inf})).ok);
}

TEST_CASE("f16 buffers use rtol 1e-2") {
  // f16 1.0 = 0x3c00, 1.0078125 = 0x3c08 (8 ulps away, within 1e-2 * (1 + 1)).
  std::vector<uint8_t> e = {0x00, 0x3c};
  std::vector<uint8_t> a = {0x08, 0x3c};
  BufferComparison c = compareBuffers(DataType::f16(), 1, a, e);
  CHECK(c.ok);
  CHECK(c.maxAbsError == 0.0078125);
  std::vector<uint8_t> far = {0x00, 0x3d}; // 1.25
  CHECK_FALSE(compareBuffers(DataType::f16(), 1, far, e).ok);
}

TEST_CASE("relative l2 error") {
  BufferComparison c =
      compareBuffers(DataType::f32(), 2, f32Bytes({3.0f, 4.5f}), f32Bytes({3.0f, 4.0f}));
  CHECK(c.relL2Error == doctest::Approx(0.5 / 5.0));
}
