// Structured control flow over block-uniform scalars (for with positive and negative steps,
// while with break and continue, if/elif/else, return), BlockIndices over a 3-D grid, and the
// exact text of Print.
#include "cpu_test_util.h"

#include <algorithm>
#include <sstream>

using namespace cputest;

TEST_CASE("for, while, if/elif/else, break, continue and scalar updates") {
  const char *src = R"(
def k<1>(i32* out_ptr) threads=32:
    g = ViewGlobal(out_ptr, shape=[8])
    one = AllocateRegister(i32, layout=spatial(1).replicate(32), init=0)
    acc = AllocateRegister(i32, layout=spatial(1).replicate(32), init=0)
    total = 0
    for i in range(2, 10, 3):
        acc = Add(acc, i)
        total = total + i
    down = 0
    for j in range(10, 0, -3):
        down = down * 10 + j
    w = 0
    n = 0
    while n < 100:
        n = n + 1
        if n % 2 == 0:
            continue
        if n > 9:
            break
        w = w + n
    sel = 0
    if w > 100:
        sel = 1
    elif w == 25:
        sel = 2
    else:
        sel = 3
    StoreGlobal(acc, g, offset=[0:])
    StoreGlobal(Add(one, total), g, offset=[1:])
    StoreGlobal(Add(one, down), g, offset=[2:])
    StoreGlobal(Add(one, w), g, offset=[3:])
    StoreGlobal(Add(one, sel), g, offset=[4:])
    StoreGlobal(Add(one, n), g, offset=[5:])
)";
  std::vector<int32_t> out(8, -1);
  CHECK_OK(run(build(src), {bufferArg(out)}));
  CHECK(out[0] == 2 + 5 + 8);
  CHECK(out[1] == 15);
  CHECK(out[2] == ((10 * 10 + 7) * 10 + 4) * 10 + 1);
  CHECK(out[3] == 1 + 3 + 5 + 7 + 9);
  CHECK(out[4] == 2);
  CHECK(out[5] == 11);
  CHECK(out[6] == -1);
}

TEST_CASE("specialize: the variable holds its expression's value, read like any scalar") {
  // docs/isa.md, "Launch-time specialisation": the interpreter computes the value as the
  // statement says (a launch-class kernel of the GPU folds the same value); integer division by
  // zero gives 0
  const char *src = R"(
def k<1>(i32* out_ptr, i32 n, i32 m) threads=32:
    assert n > 0
    specialize big = n >= 1024 and m % 16 == 0
    specialize odd = n / 0 == 0 and n % 2 == 1
    g = ViewGlobal(out_ptr, shape=[4])
    one = AllocateRegister(i32, layout=spatial(1).replicate(32), init=0)
    sel = 0
    if big:
        sel = 1
    if odd:
        sel = sel + 10
    StoreGlobal(Add(one, sel), g, offset=[0:])
    StoreGlobal(Add(one, i32(big)), g, offset=[1:])
)";
  VerifiedModule m = build(src);
  auto runWith = [&](int32_t n, int32_t mm) {
    std::vector<int32_t> out(4, -1);
    CHECK_OK(run(m, {bufferArg(out), i32Arg(n), i32Arg(mm)}));
    return std::vector<int32_t>{out[0], out[1]};
  };
  CHECK(runWith(1024, 32) == std::vector<int32_t>{1, 1});
  CHECK(runWith(1025, 32) == std::vector<int32_t>{11, 1});
  CHECK(runWith(1025, 33) == std::vector<int32_t>{10, 0});
  CHECK(runWith(16, 32) == std::vector<int32_t>{0, 0});
}

TEST_CASE("return stops the block: stores after it do not happen") {
  const char *src = R"(
def k<4>(i32* out_ptr) threads=32:
    b = BlockIndices()
    g = ViewGlobal(out_ptr, shape=[4])
    one = AllocateRegister(i32, layout=spatial(1).replicate(32), init=1)
    for i in range(3):
        if b == i:
            return
    StoreGlobal(one, g, offset=[b:])
)";
  std::vector<int32_t> out(4, 0);
  CHECK_OK(run(build(src), {bufferArg(out)}));
  CHECK(out == std::vector<int32_t>{0, 0, 0, 1});
}

TEST_CASE("BlockIndices over a 3-D grid: every block once, x fastest") {
  const char *src = R"(
def k<3, 2, 4>(i32* out_ptr) threads=32:
    x, y, z = BlockIndices()
    g = ViewGlobal(out_ptr, shape=[4, 2, 3])
    v = AllocateRegister(i32, layout=spatial(1).replicate(32), init=0)
    StoreGlobal(Add(v, x * 100 + y * 10 + z), g, offset=[z, y, x:])
)";
  std::vector<int32_t> out(24, -1);
  CHECK_OK(run(build(src), {bufferArg(out)}));
  for (int z = 0; z < 4; ++z)
    for (int y = 0; y < 2; ++y)
      for (int x = 0; x < 3; ++x)
        CHECK(out[size_t((z * 2 + y) * 3 + x)] == x * 100 + y * 10 + z);
}

TEST_CASE("Print: the documented text for scalars and tensors, one line per Print") {
  const char *src = R"(
def k<2>(f32* x_ptr, i32 n) threads=32:
    b = BlockIndices()
    Print(b)
    Print(n * 2, "twice n")
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[2, 3]), layout=local(2, 3).replicate(32))
    Print(x, "x")
    Print(Cast(x, f16))
    Print(Gt(x, 0.0), "positive")
    Print(Iota(layout=spatial(2, 16), dim=1, dtype=i8), "iota")
    Print(Cast(x, f64), "wide")
)";
  std::vector<float> x = {0.1f,
                          -2.0f,
                          1e20f,
                          -0.0f,
                          std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()};
  std::ostringstream out;
  CHECK_OK(run(build(src), {bufferArg(x), i32Arg(21)}, options(true, 1, &out)));
  std::string expected;
  for (int b = 0; b < 2; ++b) {
    std::string p = "[block " + std::to_string(b) + ", 0, 0] ";
    expected += p + "i32 = " + std::to_string(b) + "\n";
    expected += p + "twice n: i32 = 42\n";
    expected += p + "x: f32[2, 3] = [[0.100000001, -2, 1.00000002e+20], [-0, inf, nan]]\n";
    expected += p + "f16[2, 3] = [[0.0999755859, -2, inf], [-0, inf, nan]]\n";
    expected += p + "positive: bool[2, 3] = [[true, false, true], [false, true, false]]\n";
    expected += p + "iota: i8[2, 16] = [[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15], "
                    "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]]\n";
    expected += p + "wide: f64[2, 3] = [[0.10000000149011612, -2, 1.0000000200408773e+20], "
                    "[-0, inf, nan]]\n";
  }
  CHECK(out.str() == expected);
}

TEST_CASE("Print lines of parallel blocks never interleave") {
  const char *src = R"(
def k<64>(i32 n) threads=32:
    b = BlockIndices()
    for i in range(n):
        Print(Iota(layout=spatial(32), dim=0), "row")
)";
  std::ostringstream out;
  CHECK_OK(run(build(src), {i32Arg(5)}, options(false, 4, &out)));
  std::string line, row = "row: i32[32] = [0";
  for (int k = 1; k < 32; ++k)
    row += ", " + std::to_string(k);
  row += "]";
  std::istringstream in(out.str());
  int lines = 0;
  while (std::getline(in, line)) {
    ++lines;
    size_t close = line.find("] ");
    REQUIRE(close != std::string::npos);
    CHECK(line.substr(close + 2) == row);
  }
  CHECK(lines == 64 * 5);
}
