// Elementwise instructions against plain C++ references: float arithmetic with special values,
// integer wrapping, division by zero and shifts, f16 arithmetic against a textbook binary16
// rounding, math functions within 2 ulp, unary operators, Where, Cast, bool arithmetic,
// scalar operands and numpy broadcasting across different layouts.
#include "cpu_test_util.h"

#include <limits>
#include <random>

using namespace cputest;

namespace {

/// z = OP(x, y) over 64 elements of dtype T held two per thread, result dtype R.
std::string binaryProgram(const std::string &op, const std::string &t, const std::string &r) {
  std::string src = R"(
def k<1>(T* x_ptr, T* y_ptr, R* z_ptr) threads=32:
    gx = ViewGlobal(x_ptr, shape=[64])
    gy = ViewGlobal(y_ptr, shape=[64])
    gz = ViewGlobal(z_ptr, shape=[64])
    x = LoadGlobal(gx, layout=spatial(32).local(2))
    y = LoadGlobal(gy, layout=spatial(32).local(2))
    StoreGlobal(OP(x, y), gz)
)";
  return replaceAll(replaceAll(replaceAll(src, "OP", op), "T*", t + "*"), "R*", r + "*");
}

std::string unaryProgram(const std::string &op, const std::string &t) {
  std::string src = R"(
def k<1>(T* x_ptr, T* z_ptr) threads=32:
    gx = ViewGlobal(x_ptr, shape=[64])
    gz = ViewGlobal(z_ptr, shape=[64])
    x = LoadGlobal(gx, layout=spatial(32).local(2))
    StoreGlobal(OP(x), gz)
)";
  return replaceAll(replaceAll(src, "OP", op), "T*", t + "*");
}

template <typename T, typename R>
std::vector<R> runBinary(const std::string &op, const std::string &t, const std::string &r,
                         std::vector<T> x, std::vector<T> y) {
  x.resize(64);
  y.resize(64);
  std::vector<R> z(64);
  VerifiedModule m = build(binaryProgram(op, t, r));
  CHECK_OK(run(m, {bufferArg(x), bufferArg(y), bufferArg(z)}));
  return z;
}

std::vector<float> specialFloats() {
  float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> v = {0.0f, -0.0f,  1.0f,    -1.0f,    3.5f, -2.25f, inf,    -inf,
                          nan,  1e-45f, 3.4e38f, -3.4e38f, 0.1f, 7.0f,   1e-30f, 123456.789f};
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-100.0f, 100.0f);
  while (v.size() < 64)
    v.push_back(dist(rng));
  return v;
}

bool sameFloat(float a, float b) {
  if (std::isnan(a) || std::isnan(b))
    return std::isnan(a) && std::isnan(b);
  return floatToBits(a) == floatToBits(b);
}

float maxNum(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  if (a == b)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

float minNum(float a, float b) {
  if (std::isnan(a))
    return b;
  if (std::isnan(b))
    return a;
  if (a == b)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

} // namespace

TEST_CASE("f32 binary arithmetic matches IEEE single precision, special values included") {
  std::vector<float> x = specialFloats(), y = specialFloats();
  std::rotate(y.begin(), y.begin() + 5, y.end()); // pair every special value with others
  struct Case {
    const char *op;
    float (*ref)(float, float);
  };
  Case cases[] = {
      {"Add", [](float a, float b) { return a + b; }},
      {"Sub", [](float a, float b) { return a - b; }},
      {"Mul", [](float a, float b) { return a * b; }},
      {"Div", [](float a, float b) { return a / b; }},
      {"Mod", [](float a, float b) { return std::fmod(a, b); }},
      {"Max", maxNum},
      {"Min", minNum},
  };
  for (const Case &c : cases) {
    CAPTURE(c.op);
    std::vector<float> z = runBinary<float, float>(c.op, "f32", "f32", x, y);
    for (size_t i = 0; i < 64; ++i) {
      CAPTURE(i);
      CAPTURE(x[i]);
      CAPTURE(y[i]);
      CHECK(sameFloat(z[i], c.ref(x[i], y[i])));
    }
  }
}

TEST_CASE("f32 comparisons give bool, NaN unordered") {
  std::vector<float> x = specialFloats(), y = specialFloats();
  std::rotate(y.begin(), y.begin() + 3, y.end());
  y[10] = x[10]; // some equal pairs
  y[20] = x[20];
  struct Case {
    const char *op;
    bool (*ref)(float, float);
  };
  Case cases[] = {{"Eq", [](float a, float b) { return a == b; }},
                  {"Ne", [](float a, float b) { return a != b; }},
                  {"Lt", [](float a, float b) { return a < b; }},
                  {"Le", [](float a, float b) { return a <= b; }},
                  {"Gt", [](float a, float b) { return a > b; }},
                  {"Ge", [](float a, float b) { return a >= b; }}};
  for (const Case &c : cases) {
    CAPTURE(c.op);
    std::vector<uint8_t> z = runBinary<float, uint8_t>(c.op, "f32", "bool", x, y);
    for (size_t i = 0; i < 64; ++i)
      CHECK(z[i] == (c.ref(x[i], y[i]) ? 1 : 0));
  }
}

namespace {

int32_t wrap32(int64_t v) { return int32_t(uint32_t(uint64_t(v))); }

int32_t refDiv(int32_t a, int32_t b) {
  if (b == 0)
    return 0;
  if (b == -1)
    return wrap32(-int64_t(a));
  return a / b;
}

int32_t refMod(int32_t a, int32_t b) {
  if (b == 0 || b == -1)
    return 0;
  return a % b;
}

int32_t refShl(int32_t a, int32_t b) { return (b < 0 || b >= 32) ? 0 : int32_t(uint32_t(a) << b); }

int32_t refShr(int32_t a, int32_t b) {
  if (b < 0 || b >= 32)
    return a < 0 ? -1 : 0;
  return a >> b; // arithmetic on this compiler (C++20 defines it)
}

} // namespace

TEST_CASE("i32 arithmetic wraps; division by zero gives 0; shifts saturate") {
  std::vector<int32_t> x = {0,   1,    -1, 7, -7,      INT32_MAX,  INT32_MIN, INT32_MIN,
                            100, -100, 5,  5, 1 << 30, -(1 << 30), 12345,     -12345};
  std::vector<int32_t> y = {0, 0, -1, 2, 2, 1, -1, 1, 33, 32, 31, -3, 4, 4, -12345, 7};
  std::mt19937 rng(3);
  while (x.size() < 64) {
    x.push_back(int32_t(rng()));
    y.push_back(int32_t(rng() % 40) - 4);
  }
  struct Case {
    const char *op;
    int32_t (*ref)(int32_t, int32_t);
  };
  Case cases[] = {
      {"Add", [](int32_t a, int32_t b) { return wrap32(int64_t(a) + b); }},
      {"Sub", [](int32_t a, int32_t b) { return wrap32(int64_t(a) - b); }},
      {"Mul", [](int32_t a, int32_t b) { return wrap32(int64_t(a) * b); }},
      {"Div", refDiv},
      {"Mod", refMod},
      {"Max", [](int32_t a, int32_t b) { return std::max(a, b); }},
      {"Min", [](int32_t a, int32_t b) { return std::min(a, b); }},
      {"And", [](int32_t a, int32_t b) { return a & b; }},
      {"Or", [](int32_t a, int32_t b) { return a | b; }},
      {"Xor", [](int32_t a, int32_t b) { return a ^ b; }},
      {"Shl", refShl},
      {"Shr", refShr},
  };
  for (const Case &c : cases) {
    CAPTURE(c.op);
    std::vector<int32_t> z = runBinary<int32_t, int32_t>(c.op, "i32", "i32", x, y);
    for (size_t i = 0; i < 64; ++i) {
      CAPTURE(x[i]);
      CAPTURE(y[i]);
      CHECK(z[i] == c.ref(x[i], y[i]));
    }
  }
}

TEST_CASE("8-bit integers: every pair of a sample wraps and compares in its own signedness") {
  std::vector<int8_t> x(64), y(64);
  for (int i = 0; i < 64; ++i) {
    x[size_t(i)] = int8_t(i * 37 - 128);
    y[size_t(i)] = int8_t(i * 91 + 5);
  }
  std::vector<int8_t> add = runBinary<int8_t, int8_t>("Add", "i8", "i8", x, y);
  std::vector<int8_t> mul = runBinary<int8_t, int8_t>("Mul", "i8", "i8", x, y);
  std::vector<int8_t> shr = runBinary<int8_t, int8_t>("Shr", "i8", "i8", x, y);
  std::vector<uint8_t> lt = runBinary<int8_t, uint8_t>("Lt", "i8", "bool", x, y);
  std::vector<uint8_t> ux(x.begin(), x.end()), uy(y.begin(), y.end());
  std::vector<uint8_t> ult = runBinary<uint8_t, uint8_t>("Lt", "u8", "bool", ux, uy);
  std::vector<uint8_t> ushr = runBinary<uint8_t, uint8_t>("Shr", "u8", "u8", ux, uy);
  std::vector<uint8_t> udiv = runBinary<uint8_t, uint8_t>("Div", "u8", "u8", ux, uy);
  for (size_t i = 0; i < 64; ++i) {
    CAPTURE(int(x[i]));
    CAPTURE(int(y[i]));
    CHECK(add[i] == int8_t(uint8_t(x[i] + y[i])));
    CHECK(mul[i] == int8_t(uint8_t(x[i] * y[i])));
    int amount = y[i];
    CHECK(shr[i] == ((amount < 0 || amount >= 8) ? (x[i] < 0 ? -1 : 0) : (x[i] >> amount)));
    CHECK(lt[i] == (x[i] < y[i]));
    CHECK(ult[i] == (ux[i] < uy[i]));
    CHECK(ushr[i] == (uy[i] >= 8 ? 0 : ux[i] >> uy[i]));
    CHECK(udiv[i] == (uy[i] == 0 ? 0 : ux[i] / uy[i]));
  }
}

TEST_CASE("f16 arithmetic is the exact result rounded once to binary16") {
  std::mt19937 rng(11);
  std::vector<uint16_t> x(64), y(64);
  for (size_t i = 0; i < 64; ++i) {
    // exponents 1..30 (normal, finite), some subnormals and zeros
    x[i] = uint16_t((rng() & 0x8000) | ((1 + rng() % 30) << 10) | (rng() & 0x3ff));
    y[i] = uint16_t((rng() & 0x8000) | ((1 + rng() % 30) << 10) | (rng() & 0x3ff));
  }
  x[0] = 0x0001; // smallest subnormal
  y[0] = 0x0003;
  x[1] = 0x7BFF; // max finite: overflows to inf when doubled
  y[1] = 0x7BFF;
  struct Case {
    const char *op;
    double (*ref)(double, double);
  };
  Case cases[] = {{"Add", [](double a, double b) { return a + b; }},
                  {"Sub", [](double a, double b) { return a - b; }},
                  {"Mul", [](double a, double b) { return a * b; }},
                  {"Div", [](double a, double b) { return a / b; }}};
  for (const Case &c : cases) {
    CAPTURE(c.op);
    std::vector<uint16_t> z = runBinary<uint16_t, uint16_t>(c.op, "f16", "f16", x, y);
    for (size_t i = 0; i < 64; ++i) {
      CAPTURE(i);
      // the exact double result of +, -, * of two halves; for / a correctly rounded double
      // rounds to the same half (53 >= 2 * 11 + 2)
      CHECK(z[i] == doubleToHalf(c.ref(halfToDouble(x[i]), halfToDouble(y[i]))));
    }
  }
}

TEST_CASE("math functions are within 2 ulp of the correctly rounded result") {
  std::vector<float> x(64);
  for (size_t i = 0; i < 64; ++i)
    x[i] = 0.05f + float(i) * 0.37f;
  struct Case {
    const char *op;
    double (*ref)(double);
  };
  Case cases[] = {{"Exp", [](double v) { return std::exp(v / 8); }},
                  {"Exp2", [](double v) { return std::exp2(v); }},
                  {"Log", [](double v) { return std::log(v); }},
                  {"Log2", [](double v) { return std::log2(v); }},
                  {"Sqrt", [](double v) { return std::sqrt(v); }},
                  {"Rsqrt", [](double v) { return 1 / std::sqrt(v); }},
                  {"Sin", [](double v) { return std::sin(v); }},
                  {"Cos", [](double v) { return std::cos(v); }},
                  {"Tanh", [](double v) { return std::tanh(v / 8); }},
                  {"Rcp", [](double v) { return 1 / v; }}};
  for (const Case &c : cases) {
    CAPTURE(c.op);
    bool scaled = std::string(c.op) == "Exp" || std::string(c.op) == "Tanh";
    std::vector<float> in = x;
    if (scaled) // keep exp and tanh in an interesting range: feed x / 8
      for (float &v : in)
        v = v / 8;
    std::vector<float> z(64);
    VerifiedModule m = build(unaryProgram(c.op, "f32"));
    CHECK_OK(run(m, {bufferArg(in), bufferArg(z)}));
    for (size_t i = 0; i < 64; ++i) {
      double want = c.ref(scaled ? double(in[i]) * 8 : double(in[i]));
      float rounded = float(want);
      int64_t ulps = std::llabs(int64_t(floatToBits(z[i])) - int64_t(floatToBits(rounded)));
      CAPTURE(in[i]);
      CHECK(ulps <= 2);
    }
  }
}

TEST_CASE("Rcp: exact quotients, rounded ones and special values") {
  // 64 inputs: the first ones hand-picked, the rest 1 (whose reciprocal is 1)
  std::vector<float> x(64, 1.0f);
  std::vector<std::pair<float, float>> want = {
      {4.0f, 0.25f},
      {-0.5f, -2.0f},
      {3.0f, 0x1.555556p-2f},          // 1/3 = 0x0.5555...: rounds up in the last place
      {-10.0f, -0x1.99999ap-4f},       // -0.1 correctly rounded
      {0x1p127f, 0x1p-127f},           // a subnormal result, kept
      {0x1p-149f, INFINITY},           // the smallest subnormal: overflows
      {0x1.8p-128f, 0x1.555556p+127f}, // a subnormal input, kept
      {0.0f, INFINITY},
      {-0.0f, -INFINITY},
      {INFINITY, 0.0f},
      {-INFINITY, -0.0f},
      {NAN, NAN}};
  for (size_t i = 0; i < want.size(); ++i)
    x[i] = want[i].first;
  std::vector<float> z(64);
  CHECK_OK(run(build(unaryProgram("Rcp", "f32")), {bufferArg(x), bufferArg(z)}));
  for (size_t i = 0; i < 64; ++i) {
    CAPTURE(i);
    float expect = i < want.size() ? want[i].second : 1.0f;
    CHECK(sameFloat(z[i], expect));
    if (std::isnan(expect)) // the canonical NaN
      CHECK(floatToBits(z[i]) == 0x7FC00000u);
  }
  // f64: the IEEE quotient
  std::vector<double> xd(64, 3.0), zd(64);
  xd[1] = -0.0;
  CHECK_OK(run(build(unaryProgram("Rcp", "f64")), {bufferArg(xd), bufferArg(zd)}));
  CHECK(zd[0] == 1.0 / 3.0);
  CHECK(zd[1] == -INFINITY);
}

TEST_CASE("Neg, Abs and Not") {
  std::vector<float> xf = specialFloats();
  std::vector<float> neg(64), abs(64);
  CHECK_OK(run(build(unaryProgram("Neg", "f32")), {bufferArg(xf), bufferArg(neg)}));
  CHECK_OK(run(build(unaryProgram("Abs", "f32")), {bufferArg(xf), bufferArg(abs)}));
  for (size_t i = 0; i < 64; ++i) {
    CHECK(sameFloat(neg[i], -xf[i]));
    CHECK(sameFloat(abs[i], std::fabs(xf[i])));
  }
  std::vector<int32_t> xi(64), negi(64), absi(64), noti(64);
  for (size_t i = 0; i < 64; ++i)
    xi[i] = int32_t(i * 2654435761u);
  xi[0] = INT32_MIN;
  CHECK_OK(run(build(unaryProgram("Neg", "i32")), {bufferArg(xi), bufferArg(negi)}));
  CHECK_OK(run(build(unaryProgram("Abs", "i32")), {bufferArg(xi), bufferArg(absi)}));
  CHECK_OK(run(build(unaryProgram("Not", "i32")), {bufferArg(xi), bufferArg(noti)}));
  for (size_t i = 0; i < 64; ++i) {
    CHECK(negi[i] == wrap32(-int64_t(xi[i])));
    CHECK(absi[i] == (xi[i] < 0 ? wrap32(-int64_t(xi[i])) : xi[i]));
    CHECK(noti[i] == ~xi[i]);
  }
  std::vector<uint8_t> xb(64), notb(64);
  for (size_t i = 0; i < 64; ++i)
    xb[i] = uint8_t(i % 3 == 0);
  CHECK_OK(run(build(unaryProgram("Not", "bool")), {bufferArg(xb), bufferArg(notb)}));
  for (size_t i = 0; i < 64; ++i)
    CHECK(notb[i] == (xb[i] ? 0 : 1));
}

TEST_CASE("bool arithmetic acts on 0/1 and gives x != 0") {
  // every pair of truth values
  std::vector<uint8_t> x = {0, 0, 1, 1}, y = {0, 1, 0, 1};
  auto add = runBinary<uint8_t, uint8_t>("Add", "bool", "bool", x, y);
  auto sub = runBinary<uint8_t, uint8_t>("Sub", "bool", "bool", x, y);
  auto mul = runBinary<uint8_t, uint8_t>("Mul", "bool", "bool", x, y);
  auto xr = runBinary<uint8_t, uint8_t>("Xor", "bool", "bool", x, y);
  auto lt = runBinary<uint8_t, uint8_t>("Lt", "bool", "bool", x, y);
  for (size_t i = 0; i < 4; ++i) {
    int a = x[i], b = y[i];
    CHECK(add[i] == ((a + b) != 0));
    CHECK(sub[i] == ((a - b) != 0));
    CHECK(mul[i] == ((a * b) != 0));
    CHECK(xr[i] == (a ^ b));
    CHECK(lt[i] == (a < b));
  }
}

TEST_CASE("Where selects per element; scalar operands convert to the tensor dtype") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr, f32* z_ptr, f32* w_ptr, i32* v_ptr) threads=32:
    gx = ViewGlobal(x_ptr, shape=[64])
    gy = ViewGlobal(y_ptr, shape=[64])
    x = LoadGlobal(gx, layout=spatial(32).local(2))
    y = LoadGlobal(gy, layout=spatial(32).local(2))
    StoreGlobal(Where(Lt(x, y), x, y), ViewGlobal(z_ptr, shape=[64]))
    StoreGlobal(Add(Where(Gt(x, 0.0), x, 0), 2), ViewGlobal(w_ptr, shape=[64]))
    i = Iota(layout=spatial(32).local(2), dim=0)
    StoreGlobal(Mul(Sub(i, 3), 2.9), ViewGlobal(v_ptr, shape=[64]))
)";
  std::vector<float> x = specialFloats(), y(64), z(64), w(64);
  for (size_t i = 0; i < 64; ++i)
    y[i] = float(i) - 30.0f;
  std::vector<int32_t> v(64);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y), bufferArg(z), bufferArg(w), bufferArg(v)}));
  for (size_t i = 0; i < 64; ++i) {
    CAPTURE(x[i]);
    CHECK(sameFloat(z[i], x[i] < y[i] ? x[i] : y[i]));
    CHECK(sameFloat(w[i], (x[i] > 0.0f ? x[i] : 0.0f) + 2.0f));
    // 2.9 converts to i32 as 2 (toward zero) before the multiplication
    CHECK(v[i] == (int32_t(i) - 3) * 2);
  }
}

TEST_CASE("Cast follows the conversion rules of ISA section 2") {
  const char *src = R"(
def k<1>(f32* x_ptr, i32* a_ptr, f16* b_ptr, u8* c_ptr, i8* d_ptr, bool* e_ptr, f32* f_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32).local(2))
    StoreGlobal(Cast(x, i32), ViewGlobal(a_ptr, shape=[64]))
    StoreGlobal(Cast(x, f16), ViewGlobal(b_ptr, shape=[64]))
    StoreGlobal(Cast(x, u8), ViewGlobal(c_ptr, shape=[64]))
    StoreGlobal(Cast(Cast(x, i32), i8), ViewGlobal(d_ptr, shape=[64]))
    StoreGlobal(Cast(x, bool), ViewGlobal(e_ptr, shape=[64]))
    StoreGlobal(Cast(Cast(x, bool), f32), ViewGlobal(f_ptr, shape=[64]))
)";
  std::vector<float> x = specialFloats();
  std::vector<int32_t> a(64);
  std::vector<uint16_t> b(64);
  std::vector<uint8_t> c(64), e(64);
  std::vector<int8_t> d(64);
  std::vector<float> f(64);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(a), bufferArg(b), bufferArg(c), bufferArg(d),
                            bufferArg(e), bufferArg(f)}));
  for (size_t i = 0; i < 64; ++i) {
    double v = x[i];
    CAPTURE(v);
    int64_t toI32 = std::isnan(v)        ? 0
                    : v >= 2147483647.0  ? INT32_MAX
                    : v <= -2147483648.0 ? INT32_MIN
                                         : int64_t(std::trunc(v));
    CHECK(a[i] == toI32);
    uint16_t half = doubleToHalf(v);
    if (std::isnan(v))
      CHECK((b[i] & 0x7FFF) > 0x7C00);
    else
      CHECK(b[i] == half);
    int64_t toU8 = std::isnan(v) ? 0 : v >= 255 ? 255 : v <= 0 ? 0 : int64_t(std::trunc(v));
    CHECK(c[i] == toU8);
    CHECK(d[i] == int8_t(uint8_t(uint32_t(toI32))));
    CHECK(e[i] == (v != 0.0 || std::isnan(v) ? 1 : 0));
    CHECK(f[i] == float(e[i]));
  }
}

TEST_CASE("broadcasting: [4, 1] and [8] operands against [4, 8] in other layouts") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* col_ptr, f32* row_ptr, f32* z_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[4, 8]), layout=spatial(4, 8))
    col = LoadGlobal(ViewGlobal(col_ptr, shape=[4, 1]), layout=spatial(4, 1).replicate(8))
    row = LoadGlobal(ViewGlobal(row_ptr, shape=[8]), layout=replicate(4).spatial(8))
    StoreGlobal(Sub(Mul(x, col), row), ViewGlobal(z_ptr, shape=[4, 8]))
)";
  std::vector<float> x(32), col = {1, 2, 3, 4}, row = {10, 20, 30, 40, 50, 60, 70, 80}, z(32);
  for (size_t i = 0; i < 32; ++i)
    x[i] = float(i) * 0.5f;
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(col), bufferArg(row), bufferArg(z)}));
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 8; ++j)
      CHECK(z[i * 8 + j] == x[i * 8 + j] * col[i] - row[j]);
}

TEST_CASE("bf16 and f64 arithmetic; u64 division, comparison and shifts") {
  std::mt19937 rng(23);
  std::vector<uint16_t> x(64), y(64);
  for (size_t i = 0; i < 64; ++i) {
    x[i] = uint16_t((rng() & 0x8000) | ((100 + rng() % 50) << 7) | (rng() & 0x7f));
    y[i] = uint16_t((rng() & 0x8000) | ((100 + rng() % 50) << 7) | (rng() & 0x7f));
  }
  auto add = runBinary<uint16_t, uint16_t>("Add", "bf16", "bf16", x, y);
  auto mul = runBinary<uint16_t, uint16_t>("Mul", "bf16", "bf16", x, y);
  for (size_t i = 0; i < 64; ++i) {
    CHECK(add[i] == doubleToBf16(bf16ToDouble(x[i]) + bf16ToDouble(y[i])));
    CHECK(mul[i] == doubleToBf16(bf16ToDouble(x[i]) * bf16ToDouble(y[i])));
  }
  std::vector<double> dx(64), dy(64);
  for (size_t i = 0; i < 64; ++i) {
    dx[i] = std::ldexp(double(rng()), int(rng() % 40) - 20) * (i % 2 ? 1 : -1);
    dy[i] = std::ldexp(double(rng()), int(rng() % 40) - 20);
  }
  auto ddiv = runBinary<double, double>("Div", "f64", "f64", dx, dy);
  auto dsub = runBinary<double, double>("Sub", "f64", "f64", dx, dy);
  for (size_t i = 0; i < 64; ++i) {
    CHECK(ddiv[i] == dx[i] / dy[i]);
    CHECK(dsub[i] == dx[i] - dy[i]);
  }
  std::vector<uint64_t> ux(64), uy(64);
  for (size_t i = 0; i < 64; ++i) {
    ux[i] = (uint64_t(rng()) << 32 | rng()) | (i % 2 ? 1ull << 63 : 0);
    uy[i] = i % 8 == 0 ? 0 : i % 3 == 0 ? uint64_t(i) : (uint64_t(rng()) << 32 | rng());
  }
  auto udiv = runBinary<uint64_t, uint64_t>("Div", "u64", "u64", ux, uy);
  auto umod = runBinary<uint64_t, uint64_t>("Mod", "u64", "u64", ux, uy);
  auto ushr = runBinary<uint64_t, uint64_t>("Shr", "u64", "u64", ux, uy);
  auto ult = runBinary<uint64_t, uint8_t>("Lt", "u64", "bool", ux, uy);
  for (size_t i = 0; i < 64; ++i) {
    CHECK(udiv[i] == (uy[i] == 0 ? 0 : ux[i] / uy[i]));
    CHECK(umod[i] == (uy[i] == 0 ? 0 : ux[i] % uy[i]));
    CHECK(ushr[i] == (uy[i] >= 64 ? 0 : ux[i] >> uy[i]));
    CHECK(ult[i] == (ux[i] < uy[i]));
  }
}
