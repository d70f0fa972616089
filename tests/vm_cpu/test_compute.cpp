// View, Permute, ConvertLayout, Dot, Reduce, Iota and AllocateRegister against hand-computed
// values and plain C++ references.
#include "cpu_test_util.h"

#include <random>

using namespace cputest;

TEST_CASE("View reinterprets each thread's packed local bits: 3 x u8 -> 4 x i6") {
  // Thread t holds bytes in[t], in[32 + t], in[64 + t] (local(3).spatial(32)); its 24 bits,
  // byte 0 least significant, re-read as four i6 values that land at 4t .. 4t + 3.
  const char *src = R"(
def k<1>(u8* in_ptr, i8* out_ptr) threads=32:
    b = LoadGlobal(ViewGlobal(in_ptr, shape=[96]), layout=local(3).spatial(32))
    w = View(b, dtype=i6, layout=spatial(32).local(4))
    StoreGlobal(Cast(w, i8), ViewGlobal(out_ptr, shape=[128]))
)";
  std::vector<uint8_t> in(96);
  for (size_t i = 0; i < 96; ++i)
    in[i] = uint8_t(i * 97 + 13);
  std::vector<int8_t> out(128);
  CHECK_OK(run(build(src), {bufferArg(in), bufferArg(out)}));
  for (uint32_t t = 0; t < 32; ++t) {
    uint32_t bits = in[t] | uint32_t(in[32 + t]) << 8 | uint32_t(in[64 + t]) << 16;
    for (uint32_t j = 0; j < 4; ++j) {
      int v = int((bits >> (6 * j)) & 63);
      if (v >= 32)
        v -= 64;
      CHECK(out[4 * t + j] == v);
    }
  }
}

TEST_CASE("View of f16 pairs as u32 and of f32 as i32") {
  const char *src = R"(
def k<1>(f16* h_ptr, u32* u_ptr, f32* f_ptr, i32* i_ptr) threads=32:
    h = LoadGlobal(ViewGlobal(h_ptr, shape=[64]), layout=spatial(32).local(2))
    StoreGlobal(View(h, dtype=u32, layout=spatial(32)), ViewGlobal(u_ptr, shape=[32]))
    f = LoadGlobal(ViewGlobal(f_ptr, shape=[32]), layout=spatial(32))
    StoreGlobal(View(f, dtype=i32), ViewGlobal(i_ptr, shape=[32]))
)";
  std::vector<uint16_t> h(64);
  for (size_t i = 0; i < 64; ++i)
    h[i] = uint16_t(0x3C00 + i * 3);
  std::vector<uint32_t> u(32);
  std::vector<float> f(32);
  std::vector<int32_t> iv(32);
  for (size_t i = 0; i < 32; ++i)
    f[i] = float(i) - 7.25f;
  CHECK_OK(run(build(src), {bufferArg(h), bufferArg(u), bufferArg(f), bufferArg(iv)}));
  for (size_t t = 0; t < 32; ++t) {
    CHECK(u[t] == (uint32_t(h[2 * t]) | uint32_t(h[2 * t + 1]) << 16));
    CHECK(uint32_t(iv[t]) == floatToBits(f[t]));
  }
}

TEST_CASE("Permute transposes; ConvertLayout keeps every value") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* t_ptr, i32* c_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[4, 16]), layout=spatial(4, 8).local(1, 2))
    StoreGlobal(Permute(x, dims=[1, 0]), ViewGlobal(t_ptr, shape=[16, 4]))
    y = ConvertLayout(x, layout=local(4, 2).spatial(1, 8).replicate(4))
    StoreGlobal(Add(y, 1), ViewGlobal(c_ptr, shape=[4, 16]))
)";
  std::vector<int32_t> x(64), t(64), c(64);
  for (size_t i = 0; i < 64; ++i)
    x[i] = int32_t(i * i);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(t), bufferArg(c)}));
  for (size_t i = 0; i < 4; ++i)
    for (size_t j = 0; j < 16; ++j) {
      CHECK(t[j * 4 + i] == x[i * 16 + j]);
      CHECK(c[i * 16 + j] == x[i * 16 + j] + 1);
    }
}

TEST_CASE("Dot f16 x f16 + f32 with the mma.m16n8k16 fragments") {
  const char *src = R"(
def k<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr, f32* d_ptr) threads=32:
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[16, 16]), layout=column_local(2, 2).spatial(8, 4).local(1, 2))
    b = LoadGlobal(ViewGlobal(b_ptr, shape=[16, 8]), layout=local(2, 1).column_spatial(4, 8).local(2, 1))
    c = LoadGlobal(ViewGlobal(c_ptr, shape=[16, 8]), layout=local(2, 1).spatial(8, 4).local(1, 2))
    StoreGlobal(Dot(a, b, c), ViewGlobal(d_ptr, shape=[16, 8]))
)";
  std::mt19937 rng(5);
  std::vector<uint16_t> a(256), b(128);
  std::vector<double> av(256), bv(128);
  for (size_t i = 0; i < 256; ++i) {
    av[i] = double(int(rng() % 17) - 8) / 4; // exact in f16
    a[i] = doubleToHalf(av[i]);
  }
  for (size_t i = 0; i < 128; ++i) {
    bv[i] = double(int(rng() % 9) - 4) / 2;
    b[i] = doubleToHalf(bv[i]);
  }
  std::vector<float> c(128), d(128);
  for (size_t i = 0; i < 128; ++i)
    c[i] = float(i) / 8;
  CHECK_OK(run(build(src), {bufferArg(a), bufferArg(b), bufferArg(c), bufferArg(d)}));
  for (size_t m = 0; m < 16; ++m)
    for (size_t n = 0; n < 8; ++n) {
      double ref = c[m * 8 + n];
      for (size_t k = 0; k < 16; ++k)
        ref += av[m * 16 + k] * bv[k * 8 + n];
      CHECK(d[m * 8 + n] == float(ref)); // small dyadic values: exact
    }
}

TEST_CASE("Dot i8 x i8 + i32 per-thread: exact products, wrapping accumulator") {
  const char *src = R"(
def k<1>(i8* a_ptr, i8* b_ptr, i32* c_ptr, i32* d_ptr) threads=32:
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[4, 8]), layout=spatial(4, 1).replicate(8).local(1, 8))
    b = LoadGlobal(ViewGlobal(b_ptr, shape=[8, 8]), layout=replicate(4).spatial(1, 8).local(8, 1))
    c = LoadGlobal(ViewGlobal(c_ptr, shape=[4, 8]), layout=spatial(4, 8))
    StoreGlobal(Dot(a, b, c), ViewGlobal(d_ptr, shape=[4, 8]))
)";
  std::vector<int8_t> a(32), b(64);
  for (size_t i = 0; i < 32; ++i)
    a[i] = int8_t(i % 2 ? -128 : 127 - int(i));
  for (size_t i = 0; i < 64; ++i)
    b[i] = int8_t(i % 3 ? -127 + int(i) : 127);
  std::vector<int32_t> c(32), d(32);
  for (size_t i = 0; i < 32; ++i)
    c[i] = i % 4 == 0 ? INT32_MAX : int32_t(i) * 1000;
  CHECK_OK(run(build(src), {bufferArg(a), bufferArg(b), bufferArg(c), bufferArg(d)}));
  for (size_t m = 0; m < 4; ++m)
    for (size_t n = 0; n < 8; ++n) {
      int64_t ref = c[m * 8 + n];
      for (size_t k = 0; k < 8; ++k)
        ref += int64_t(a[m * 8 + k]) * b[k * 8 + n];
      CHECK(d[m * 8 + n] == int32_t(uint32_t(uint64_t(ref))));
    }
}

TEST_CASE("Reduce: every op over each dimension, with and without keepdim") {
  const char *src = R"(
def k<1>(i32* x_ptr, i32* r_ptr, i32* c_ptr, f32* f_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[4, 8]), layout=spatial(4, 8))
    gr = ViewGlobal(r_ptr, shape=[6, 4])
    StoreGlobal(Reduce(x, dim=1, op=sum), gr, offset=[0, 0:])
    StoreGlobal(Reduce(x, dim=1, op=max), gr, offset=[1, 0:])
    StoreGlobal(Reduce(x, dim=1, op=min), gr, offset=[2, 0:])
    StoreGlobal(Reduce(x, dim=1, op=prod), gr, offset=[3, 0:])
    StoreGlobal(Reduce(x, dim=1, op=any), gr, offset=[4, 0:])
    StoreGlobal(Reduce(x, dim=1, op=all, keepdim=True), ViewGlobal(r_ptr, shape=[6, 4, 1]), offset=[5, 0:, 0:])
    StoreGlobal(Reduce(x, dim=0, op=sum, keepdim=True), ViewGlobal(c_ptr, shape=[1, 8]))
    f = Cast(x, f32)
    StoreGlobal(Reduce(Div(f, 3.0), dim=1, op=sum), ViewGlobal(f_ptr, shape=[4]))
)";
  std::vector<int32_t> x = {1,      2,      3, 4,  5, 6, 7, 8,   // row 0
                            -1,     0,      9, -9, 3, 3, 3, 3,   // row 1 has a zero
                            7,      7,      7, 7,  7, 7, 7, 7,   // row 2
                            100000, 100000, 1, 1,  1, 1, 1, -2}; // row 3: prod wraps
  std::vector<int32_t> r(24), c(8);
  std::vector<float> f(4);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(r), bufferArg(c), bufferArg(f)}));
  for (size_t i = 0; i < 4; ++i) {
    int64_t sum = 0;
    int32_t mx = INT32_MIN, mn = INT32_MAX;
    uint32_t prod = 1;
    bool any = false, all = true;
    double fs = 0;
    for (size_t j = 0; j < 8; ++j) {
      int32_t v = x[i * 8 + j];
      sum += v;
      mx = std::max(mx, v);
      mn = std::min(mn, v);
      prod *= uint32_t(v);
      any = any || v != 0;
      all = all && v != 0;
      fs += double(float(v) / 3.0f);
    }
    CHECK(r[0 * 4 + i] == sum);
    CHECK(r[1 * 4 + i] == mx);
    CHECK(r[2 * 4 + i] == mn);
    CHECK(r[3 * 4 + i] == int32_t(prod));
    CHECK(r[4 * 4 + i] == int32_t(any));
    CHECK(r[5 * 4 + i] == int32_t(all));
    CHECK(std::fabs(double(f[i]) - fs) <= 1e-6 * std::fabs(fs) + 1e-6);
  }
  for (size_t j = 0; j < 8; ++j)
    CHECK(c[j] == x[j] + x[8 + j] + x[16 + j] + x[24 + j]);
}

TEST_CASE("Iota and AllocateRegister init in an mma layout") {
  const char *src = R"(
def k<1>(i32* r_ptr, i32* c_ptr, i8* z_ptr, f16* h_ptr) threads=32:
    StoreGlobal(Iota(layout=local(2, 1).spatial(8, 4).local(1, 2), dim=0), ViewGlobal(r_ptr, shape=[16, 8]))
    StoreGlobal(Iota(layout=local(2, 1).spatial(8, 4).local(1, 2), dim=1), ViewGlobal(c_ptr, shape=[16, 8]))
    StoreGlobal(AllocateRegister(i8, layout=spatial(32), init=300), ViewGlobal(z_ptr, shape=[32]))
    StoreGlobal(AllocateRegister(f16, layout=spatial(32), init=0.1), ViewGlobal(h_ptr, shape=[32]))
)";
  std::vector<int32_t> r(128), c(128);
  std::vector<int8_t> z(32);
  std::vector<uint16_t> h(32);
  CHECK_OK(run(build(src), {bufferArg(r), bufferArg(c), bufferArg(z), bufferArg(h)}));
  for (int32_t i = 0; i < 16; ++i)
    for (int32_t j = 0; j < 8; ++j) {
      CHECK(r[size_t(i * 8 + j)] == i);
      CHECK(c[size_t(i * 8 + j)] == j);
    }
  for (size_t t = 0; t < 32; ++t) {
    CHECK(z[t] == int8_t(300 - 256));
    CHECK(h[t] == doubleToHalf(double(0.1f))); // the f32 literal, rounded to f16
  }
}

TEST_CASE("Dot f16 x f16 + f16 rounds each result once to f16; f32 per-thread Dot") {
  const char *src = R"(
def k<1>(f16* a_ptr, f16* b_ptr, f16* c_ptr, f16* d_ptr, f32* e_ptr) threads=32:
    a = LoadGlobal(ViewGlobal(a_ptr, shape=[16, 16]), layout=column_local(2, 2).spatial(8, 4).local(1, 2))
    b = LoadGlobal(ViewGlobal(b_ptr, shape=[16, 8]), layout=local(2, 1).column_spatial(4, 8).local(2, 1))
    c = LoadGlobal(ViewGlobal(c_ptr, shape=[16, 8]), layout=local(2, 1).spatial(8, 4).local(1, 2))
    StoreGlobal(Dot(a, b, c), ViewGlobal(d_ptr, shape=[16, 8]))
    fa = LoadGlobal(ViewGlobal(a_ptr, shape=[16, 16]), layout=spatial(4, 1).replicate(8).local(4, 16))
    fb = LoadGlobal(ViewGlobal(b_ptr, shape=[16, 8]), layout=replicate(4).spatial(1, 8).local(16, 1))
    acc = AllocateRegister(f32, layout=spatial(4, 8).local(4, 1), init=0.5)
    StoreGlobal(Dot(Cast(fa, f32), Cast(fb, f32), acc), ViewGlobal(e_ptr, shape=[16, 8]))
)";
  std::mt19937 rng(9);
  std::vector<uint16_t> a(256), b(128), c(128), d(128);
  std::vector<double> av(256), bv(128), cv(128);
  for (size_t i = 0; i < 256; ++i)
    a[i] = doubleToHalf(av[i] = double(int(rng() % 2001) - 1000) / 1024);
  for (size_t i = 0; i < 128; ++i) {
    b[i] = doubleToHalf(bv[i] = double(int(rng() % 2001) - 1000) / 1024);
    c[i] = doubleToHalf(cv[i] = double(int(rng() % 201) - 100) / 64);
  }
  std::vector<float> e(128);
  CHECK_OK(run(build(src), {bufferArg(a), bufferArg(b), bufferArg(c), bufferArg(d), bufferArg(e)}));
  for (size_t m = 0; m < 16; ++m)
    for (size_t n = 0; n < 8; ++n) {
      double exact = cv[m * 8 + n], products = 0.5;
      for (size_t k = 0; k < 16; ++k) {
        exact += av[m * 16 + k] * bv[k * 8 + n]; // products of 11-bit values: exact sums here
        products += av[m * 16 + k] * bv[k * 8 + n];
      }
      CHECK(d[m * 8 + n] == doubleToHalf(exact));
      CHECK(e[m * 8 + n] == float(products));
    }
}

TEST_CASE("Reduce max and min: the extreme at every position of a row") {
  // Row r holds the extreme (max for even r, min for odd r) at position r % 4; the other
  // elements are 1, 2, 3 in order.
  const char *src = R"(
def k<1>(i32* x_ptr, i32* y_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[32, 4]), layout=spatial(32, 1).local(1, 4))
    gy = ViewGlobal(y_ptr, shape=[2, 32])
    StoreGlobal(Reduce(x, dim=1, op=max), gy, offset=[0, 0:])
    StoreGlobal(Reduce(x, dim=1, op=min), gy, offset=[1, 0:])
)";
  std::vector<int32_t> x(128), y(64, -1);
  for (int r = 0; r < 32; ++r) {
    int other = 1;
    for (int j = 0; j < 4; ++j)
      x[size_t(r * 4 + j)] = j == r % 4 ? (r % 2 == 0 ? 50 + r : -50 - r) : other++;
  }
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y)}));
  for (int r = 0; r < 32; ++r) {
    CAPTURE(r);
    CHECK(y[size_t(r)] == (r % 2 == 0 ? 50 + r : 3));
    CHECK(y[size_t(32 + r)] == (r % 2 == 0 ? 1 : -50 - r));
  }
}

TEST_CASE("View: elements straddling a 64-bit word of a thread's bits (u8 x 10 as u5 x 16)") {
  const char *src = R"(
def k<1>(u8* x_ptr, u8* y_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[320]), layout=spatial(32).local(10))
    v = View(x, dtype=u5, layout=spatial(32).local(16))
    StoreGlobal(Cast(v, u8), ViewGlobal(y_ptr, shape=[512]))
)";
  std::vector<uint8_t> x(320), y(512);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = uint8_t(i * 37 + 11);
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y)}));
  for (size_t t = 0; t < 32; ++t)
    for (size_t j = 0; j < 16; ++j) {
      // bits [5j, 5j + 5) of the thread's 80 bits, byte 0 least significant
      unsigned v = 0;
      for (size_t b = 0; b < 5; ++b) {
        size_t bit = 5 * j + b;
        v |= unsigned((x[10 * t + bit / 8] >> (bit % 8)) & 1) << b;
      }
      CAPTURE(t);
      CAPTURE(j);
      CHECK(y[16 * t + j] == v);
    }
}

TEST_CASE("Reduce sum and prod of f32 rows") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr) threads=32:
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[32, 4]), layout=spatial(32, 1).local(1, 4))
    gy = ViewGlobal(y_ptr, shape=[2, 32])
    StoreGlobal(Reduce(x, dim=1, op=prod), gy, offset=[0, 0:])
    StoreGlobal(Reduce(x, dim=1, op=sum), gy, offset=[1, 0:])
)";
  std::vector<float> x(128), y(64, -1.0f);
  for (size_t r = 0; r < 32; ++r) {
    x[r * 4 + 0] = 2.0f;
    x[r * 4 + 1] = float(r);
    x[r * 4 + 2] = 0.5f;
    x[r * 4 + 3] = -4.0f;
  }
  CHECK_OK(run(build(src), {bufferArg(x), bufferArg(y)}));
  for (size_t r = 0; r < 32; ++r) {
    CAPTURE(r);
    CHECK(y[r] == -4.0f * float(r));     // 2 * r * 0.5 * -4, exact
    CHECK(y[32 + r] == float(r) - 1.5f); // 2 + r + 0.5 - 4, exact
  }
}
