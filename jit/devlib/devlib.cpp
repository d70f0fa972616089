// The JIT's device library (see devlib.h for why it exists and how it is built and tested).
//
// Conversions: every encoding goes through one exact value (sign, 64-bit significand, binary
// exponent) and one rounding step, as ISA section 2 requires.
// Math: f64 algorithms in the style of fdlibm with Taylor coefficients (1/n! and 2/(2k+1),
// rounded to double) instead of minimax ones, one or two more terms to make up for it:
//   exp/exp2/expm1: k = round(x / ln2), r = x - k ln2 (Cody-Waite, 32-bit ln2 head), e^r - 1 by
//                   a polynomial, scaled by 2^k in two exact-then-rounding steps;
//   log/log2:       x = 2^k (1 + f), log(1 + f) = f - f^2/2 + s (f^2/2 + R(s^2)), s = f/(2+f);
//   sin/cos:        Payne-Hanek reduction of |x| > pi/4 with a 1280-bit table of 2/pi and 64-bit
//                   integer products (exact for every double), then Taylor kernels on [-pi/4,
//                   pi/4] that take the reduced argument as a double-double;
//   tanh:           from expm1; fmod: exact long division on the integer significands.
#include "jit/devlib/devlib.h"

namespace {

template <typename To, typename From> inline To bitCast(From value) {
  return __builtin_bit_cast(To, value);
}

inline uint64_t maskBits(int n) { return n >= 64 ? ~uint64_t(0) : (uint64_t(1) << n) - 1; }
inline int clz64(uint64_t x) { return x == 0 ? 64 : __builtin_clzll(x); }
inline double fma(double a, double b, double c) { return __builtin_fma(a, b, c); }
inline double rint(double x) { return __builtin_rint(x); }
inline double fabs(double x) { return __builtin_fabs(x); }
inline bool isNaN(double x) { return x != x; }

constexpr int kIeee = 0;
constexpr int kE4M3 = 1;

constexpr double kInf = __builtin_inf();
constexpr double kNaN = __builtin_bit_cast(double, uint64_t(0x7FF8000000000000));

// ---- conversions ----------------------------------------------------------------------------

uint64_t maxFiniteBits(int e, int m, int style) {
  int n = 1 + e + m;
  if (style == kIeee)
    return ((maskBits(e) - 1) << m) | maskBits(m);
  if (style == kE4M3)
    return maskBits(n - 1) - 1;
  return maskBits(n - 1);
}

uint64_t overflowBits(uint64_t signBit, int e, int m, int style) {
  if (style == kIeee && 1 + e + m > 8)
    return signBit | (maskBits(e) << m); // infinity
  return signBit | maxFiniteBits(e, m, style);
}

uint64_t canonicalNaNBits(int e, int m, int style) {
  if (style == kIeee)
    return (maskBits(e) << m) | (uint64_t(1) << (m - 1));
  if (style == kE4M3)
    return maskBits(e + m);
  return 0;
}

/// sig / 2^shift rounded to nearest, ties to even (shift <= 0: exact, the caller ensures it fits).
uint64_t roundShiftRne(uint64_t sig, int shift) {
  if (shift <= 0)
    return sig << -shift;
  if (shift > 64)
    return 0;
  if (shift == 64)
    return sig > (uint64_t(1) << 63) ? 1 : 0;
  uint64_t q = sig >> shift;
  uint64_t rest = sig & maskBits(shift);
  uint64_t half = uint64_t(1) << (shift - 1);
  if (rest > half || (rest == half && (q & 1)))
    ++q;
  return q;
}

/// 2^k as a double for k in [-1022, 1023].
inline double pow2(int k) { return bitCast<double>(uint64_t(k + 1023) << 52); }

/// p * 2^k with a single rounding for |k| <= 2000 and p in [0.5, 2].
inline double scale2(double p, int k) {
  int k1 = k / 2;
  return (p * pow2(k1)) * pow2(k - k1);
}

} // namespace

extern "C" {

uint64_t tl_encode_finite(uint32_t neg, uint64_t sig, int32_t exp, int32_t e, int32_t m,
                          int32_t style) {
  int n = 1 + e + m;
  uint64_t signBit = uint64_t(neg & 1) << (n - 1);
  int bias = (1 << (e - 1)) - 1;
  int valueExp = (63 - clz64(sig)) + exp; // value in [2^valueExp, 2^(valueExp+1))
  int minExp = 1 - bias;
  int quantum = (valueExp < minExp ? minExp : valueExp) - m; // exponent of one unit
  uint64_t units = roundShiftRne(sig, quantum - exp);
  if (units == 0)
    return signBit;
  if (units >> (m + 1)) { // rounded up into the next binade
    units >>= 1;
    ++quantum;
  }
  if (units < (uint64_t(1) << m))
    return signBit | units; // subnormal
  int64_t expField = int64_t(quantum) + m + bias;
  int64_t maxExpField = int64_t(style == kIeee ? maskBits(e) - 1 : maskBits(e));
  if (expField > maxExpField)
    return overflowBits(signBit, e, m, style);
  uint64_t result = signBit | (uint64_t(expField) << m) | (units - (uint64_t(1) << m));
  if (style == kE4M3 && (result & maskBits(n - 1)) == maskBits(n - 1))
    return overflowBits(signBit, e, m, style); // S.1111.111 is NaN, not a number
  return result;
}

uint64_t tl_f64_to_float(double x, int32_t e, int32_t m, int32_t style) {
  uint64_t u = bitCast<uint64_t>(x);
  uint32_t neg = uint32_t(u >> 63);
  uint64_t expField = (u >> 52) & 0x7FF;
  uint64_t mant = u & maskBits(52);
  uint64_t signBit = uint64_t(neg) << (e + m);
  if (expField == 0x7FF)
    return mant != 0 ? canonicalNaNBits(e, m, style) : overflowBits(signBit, e, m, style);
  if (expField == 0 && mant == 0)
    return signBit;
  uint64_t sig = expField != 0 ? (mant | (uint64_t(1) << 52)) : mant;
  int exp = expField != 0 ? int(expField) - 1075 : -1074;
  return tl_encode_finite(neg, sig, exp, e, m, style);
}

uint32_t tl_f32_to_float(float x, int32_t e, int32_t m, int32_t style) {
  uint32_t u = bitCast<uint32_t>(x);
  uint32_t neg = u >> 31;
  uint32_t expField = (u >> 23) & 0xFF;
  uint32_t mant = u & 0x7FFFFF;
  uint64_t signBit = uint64_t(neg) << (e + m);
  if (expField == 0xFF)
    return uint32_t(mant != 0 ? canonicalNaNBits(e, m, style) : overflowBits(signBit, e, m, style));
  if (expField == 0 && mant == 0)
    return uint32_t(signBit);
  uint64_t sig = expField != 0 ? (mant | (uint32_t(1) << 23)) : mant;
  int exp = expField != 0 ? int(expField) - 150 : -149;
  return uint32_t(tl_encode_finite(neg, sig, exp, e, m, style));
}

uint64_t tl_i64_to_float(int64_t x, int32_t e, int32_t m, int32_t style) {
  if (x == 0)
    return 0;
  uint32_t neg = x < 0;
  uint64_t magnitude = neg ? uint64_t(0) - uint64_t(x) : uint64_t(x);
  return tl_encode_finite(neg, magnitude, 0, e, m, style);
}

uint64_t tl_u64_to_float(uint64_t x, int32_t e, int32_t m, int32_t style) {
  if (x == 0)
    return 0;
  return tl_encode_finite(0, x, 0, e, m, style);
}

float tl_float_to_f32(uint32_t bits, int32_t e, int32_t m, int32_t style) {
  int n = 1 + e + m;
  uint32_t neg = (bits >> (n - 1)) & 1;
  uint32_t expField = (bits >> m) & uint32_t(maskBits(e));
  uint32_t mant = bits & uint32_t(maskBits(m));
  float sign = neg ? -1.0f : 1.0f;
  if (style == kIeee && expField == maskBits(e))
    return mant != 0 ? bitCast<float>(uint32_t(0x7FC00000)) : sign * __builtin_inff();
  if (style == kE4M3 && expField == maskBits(e) && mant == maskBits(m))
    return bitCast<float>(uint32_t(0x7FC00000));
  int bias = (1 << (e - 1)) - 1;
  if (expField == 0) {
    // mant * 2^(1 - bias - m), exactly: both factors are exact floats and so is the product.
    int k = 1 - bias - m;
    float scale = k >= -126 ? bitCast<float>(uint32_t(k + 127) << 23)
                            : bitCast<float>(uint32_t(1) << (k + 149));
    return sign * (float(mant) * scale);
  }
  uint32_t f32 = (uint32_t(int(expField) - bias + 127) << 23) | (mant << (23 - m));
  return sign * bitCast<float>(f32);
}

} // extern "C"

// ---- exponentials -------------------------------------------------------------------------------

namespace {

constexpr double kLn2 = 0x1.62e42fefa39efp-1;
constexpr double kLn2Lo = 0x1.abc9e3b39803fp-56;    // ln2 - kLn2
constexpr double kLn2Hi32 = 0x1.62e42ff000000p-1;   // ln2 to 32 bits: k * kLn2Hi32 is exact
constexpr double kLn2Lo32 = -0x1.718432a1b0e26p-35; // ln2 - kLn2Hi32
constexpr double kLog2e = 0x1.71547652b82fep+0;
constexpr double kInvLn2Hi32 = 0x1.7154765200000p+0; // 1/ln2 to 32 bits
constexpr double kInvLn2Lo32 = 0x1.705fc2eefa200p-33;

// 1/n!
constexpr double kInvFact[21] = {
    1.0,
    0x1.0000000000000p+0,
    0x1.0000000000000p-1,
    0x1.5555555555555p-3,
    0x1.5555555555555p-5,
    0x1.1111111111111p-7,
    0x1.6c16c16c16c17p-10,
    0x1.a01a01a01a01ap-13,
    0x1.a01a01a01a01ap-16,
    0x1.71de3a556c734p-19,
    0x1.27e4fb7789f5cp-22,
    0x1.ae64567f544e4p-26,
    0x1.1eed8eff8d898p-29,
    0x1.6124613a86d09p-33,
    0x1.93974a8c07c9dp-37,
    0x1.ae7f3e733b81fp-41,
    0x1.ae7f3e733b81fp-45,
    0x1.952c77030ad4ap-49,
    0x1.6827863b97d97p-53,
    0x1.2f49b46814157p-57,
    0x1.e542ba4020225p-62,
};

/// e^r - 1 as a double-double hi + lo for |r| <= 0.75: r + r^2 (1/2 + r (1/6 + ...)) with the
/// square and the final sum kept exact (Taylor to r^20; the first omitted term is below
/// 2^-68 |r|).
double expm1Poly(double r, double &lo) {
  double h = kInvFact[20];
  for (int n = 19; n >= 3; --n)
    h = fma(h, r, kInvFact[n]);
  double u = fma(r, h, 0.5);
  double r2 = r * r;
  double r2Lo = fma(r, r, -r2);
  double t = r2 * u;
  double tLo = fma(r2, u, -t) + r2Lo * u;
  double s = r + t; // two-sum
  double bb = s - r;
  double err = (r - (s - bb)) + (t - bb);
  lo = err + tLo;
  return s;
}

struct ExpReduced {
  int k;
  double r; // x - k ln2, rounded
  double c; // the rounding error of r
};

/// x = k ln2 + r + c with |r| <= ln2/2 (+ a little); precondition |x| < 2^20.
ExpReduced reduceExp(double x) {
  double kd = rint(x * kLog2e);
  double hi = fma(-kd, kLn2Hi32, x); // exact
  double lo = kd * kLn2Lo32;
  double r = hi - lo;
  double c = (hi - r) - lo;
  return {int(kd), r, c};
}

/// e^x - 1 as a double-double for -40 <= x <= 710.
double expm1Double(double x, double &lo) {
  if (fabs(x) <= 0.75)
    return expm1Poly(x, lo);
  ExpReduced red = reduceExp(x);
  double pLo;
  double p = expm1Poly(red.r, pLo);
  pLo += red.c * (1.0 + p);
  if (red.k > 52) {
    double y = 1.0 + p;
    double yLo = ((1.0 - y) + p) + pLo;
    lo = 0.0;
    return scale2(y + yLo, red.k) - 1.0;
  }
  // 2^k (1 + p) - 1 = (2^k - 1) + 2^k p; 2^k - 1 and 2^k p are exact.
  double t = pow2(red.k);
  double a = t - 1.0, b = t * p;
  double s = a + b;
  double bb = s - a;
  double err = (a - (s - bb)) + (b - bb);
  lo = err + t * pLo;
  return s;
}

} // namespace

extern "C" {

double tl_exp(double x) {
  if (isNaN(x))
    return kNaN;
  if (x > 710.0)
    return kInf;
  if (x < -746.0)
    return 0.0;
  ExpReduced red = reduceExp(x);
  double pLo;
  double p = expm1Poly(red.r, pLo);
  pLo += red.c * (1.0 + p);
  double y = 1.0 + p;
  double yLo = ((1.0 - y) + p) + pLo; // |p| < 1: fast two-sum
  return scale2(y + yLo, red.k);
}

double tl_exp2(double x) {
  if (isNaN(x))
    return kNaN;
  if (x >= 1024.0)
    return kInf;
  if (x < -1080.0)
    return 0.0;
  double kd = rint(x);
  double r = x - kd; // exact, |r| <= 1/2
  double th = r * kLn2;
  double tl = fma(r, kLn2, -th) + r * kLn2Lo;
  double pLo;
  double p = expm1Poly(th, pLo);
  pLo += tl * (1.0 + p);
  double y = 1.0 + p;
  double yLo = ((1.0 - y) + p) + pLo;
  return scale2(y + yLo, int(kd));
}

double tl_expm1(double x) {
  if (isNaN(x))
    return kNaN;
  if (x > 710.0)
    return kInf;
  if (x < -40.0)
    return -1.0;
  double lo;
  double hi = expm1Double(x, lo);
  return hi + lo;
}

} // extern "C"

// ---- exponentials in f32 ------------------------------------------------------------------------

namespace {

inline float fmaf(float a, float b, float c) { return __builtin_fmaf(a, b, c); }

/// The IEEE maximum / minimum of x and a number, NaN when x is NaN: one `max.NaN.f32` /
/// `min.NaN.f32` on the device (any NaN gives the hardware's NaN, whatever its payload).
inline float maxOrNaN(float x, float lo) {
#ifdef __NVPTX__
  return __nvvm_fmax_nan_f(x, lo);
#else
  return x != x ? x : (x < lo ? lo : x);
#endif
}
inline float minOrNaN(float x, float hi) {
#ifdef __NVPTX__
  return __nvvm_fmin_nan_f(x, hi);
#else
  return x != x ? x : (x > hi ? hi : x);
#endif
}

} // namespace

extern "C" {

float tl_expf(float x) {
  // e^x = 2^j e^r, r = x - j ln2, j = round(x log2(e)), in f32 without branches (19 instructions).
  // Inputs below -104 give 0 (e^-104 < 2^-150, half the smallest subnormal) and above 89 give
  // inf (e^88.73 > max f32), so x is clamped to [-104, 89] first; NaN stays NaN.
  float xc = minOrNaN(maxOrNaN(x, -104.0f), 89.0f);
  // j = round-to-nearest-even(xc log2(e)) in the low bits of t (1.5 2^23 + j, j in [-150, 128])
  float t = fmaf(xc, 0x1.715476p+0f, 0x1.8p23f);
  float j = t - 0x1.8p23f; // exact
  // r = xc - j ln2 with ln2 = hi + lo (hi has 15 significant bits): xc - j hi is exact (for
  // |xc| >= 1 a multiple of 2^-23 below 0.36 in magnitude; for |xc| < 1, j is 0 or +-1 and
  // Sterbenz applies), and the second step rounds once: |r - (xc - j ln2)| <= 2^-26 (|lo| < 2^-19
  // is exact to 2^-44), |r| <= ln2 / 2 + 2^-17
  float r = fmaf(j, -0x1.62e4p-1f, xc);
  r = fmaf(j, -0x1.7f7d1cp-20f, r);
  // e^r = 1 + r q(r), q of degree 5 (Chebyshev fit of (e^r - 1) / r on [-0.347, 0.347], error
  // below 2^-26.4 of q), Horner with fused multiply-adds
  float q = 0x1.6d431cp-10f;
  q = fmaf(q, r, 0x1.123d88p-7f);
  q = fmaf(q, r, 0x1.5554eap-5f);
  q = fmaf(q, r, 0x1.55547cp-3f);
  q = fmaf(q, r, 0.5f);
  q = fmaf(q, r, 1.0f);
  float p = fmaf(q, r, 1.0f); // in [0.70, 1.42]
  // p 2^j as (p 2^j1) 2^j2 with j1 = floor(j / 2), j2 = j - j1 in [-76, 64]: both powers are
  // normal, the first product is exact, the second rounds once (subnormal results, overflow to
  // inf). t's bits are 0x4B400000 + j, whose multiples of 2^23 drop the constant.
  uint32_t u = bitCast<uint32_t>(t);
  uint32_t h = (u >> 1) << 23;                            // j1 << 23
  float s1 = bitCast<float>(h + 0x3F800000u);             // 2^j1
  float s2 = bitCast<float>((u << 23) - h + 0x3F800000u); // 2^j2
  return (p * s1) * s2;
}

// ---- logarithms ---------------------------------------------------------------------------------

} // extern "C"

namespace {

// 2/(2k+1) for k = 1..12
constexpr double kLogC[13] = {
    0.0,
    0x1.5555555555555p-1,
    0x1.999999999999ap-2,
    0x1.2492492492492p-2,
    0x1.c71c71c71c71cp-3,
    0x1.745d1745d1746p-3,
    0x1.3b13b13b13b14p-3,
    0x1.1111111111111p-3,
    0x1.e1e1e1e1e1e1ep-4,
    0x1.af286bca1af28p-4,
    0x1.8618618618618p-4,
    0x1.642c8590b2164p-4,
    0x1.47ae147ae147bp-4,
};

struct LogReduced {
  int k;    // x = 2^k (1 + f)
  double f; // in [sqrt(2)/2 - 1, sqrt(2) - 1)
  double hfsq;
  double sR; // s (hfsq + R): log(1 + f) = f - hfsq + sR
};

/// Precondition: x finite and > 0.
LogReduced reduceLog(double x) {
  uint64_t u = bitCast<uint64_t>(x);
  int k = 0;
  if ((u >> 52) == 0) { // subnormal
    x *= 0x1p54;
    u = bitCast<uint64_t>(x);
    k = -54;
  }
  int expField = int(u >> 52);
  uint64_t mant = u & maskBits(52);
  // m in [sqrt(2)/2, sqrt(2)): compare the mantissa with that of sqrt(2) (0x6A09E667F3BCD).
  int adjust = mant >= 0x6A09E667F3BCDull ? 1 : 0;
  k += expField - 1023 + adjust;
  double m = bitCast<double>(mant | (uint64_t(1023 - adjust) << 52));
  double f = m - 1.0; // exact
  double s = f / (2.0 + f);
  double z = s * s;
  double r = kLogC[12];
  for (int j = 11; j >= 1; --j)
    r = fma(r, z, kLogC[j]);
  r *= z;
  double hfsq = 0.5 * f * f;
  return {k, f, hfsq, s * (hfsq + r)};
}

} // namespace

extern "C" {

double tl_log(double x) {
  if (isNaN(x) || x < 0.0)
    return kNaN;
  if (x == 0.0)
    return -kInf;
  if (x == kInf)
    return kInf;
  LogReduced red = reduceLog(x);
  double dk = double(red.k);
  return dk * kLn2Hi32 - ((red.hfsq - (red.sR + dk * kLn2Lo32)) - red.f);
}

double tl_log2(double x) {
  if (isNaN(x) || x < 0.0)
    return kNaN;
  if (x == 0.0)
    return -kInf;
  if (x == kInf)
    return kInf;
  LogReduced red = reduceLog(x);
  // log(1 + f) = hi + lo with hi holding 32 bits, so that hi * kInvLn2Hi32 is exact.
  double hi = red.f - red.hfsq;
  hi = bitCast<double>(bitCast<uint64_t>(hi) & 0xFFFFFFFF00000000ull);
  double lo = (red.f - hi) - red.hfsq + red.sR;
  double valHi = hi * kInvLn2Hi32;
  double valLo = (lo + hi) * kInvLn2Lo32 + lo * kInvLn2Hi32;
  double dk = double(red.k);
  double w = dk + valHi;
  valLo += (dk - w) + valHi;
  return valLo + w;
}

} // extern "C"

// ---- sin and cos --------------------------------------------------------------------------------

namespace {

constexpr double kPio2Hi = 0x1.921fb54442d18p+0;
constexpr double kPio2Lo = 0x1.1a62633145c07p-54;
constexpr double kPio4 = 0x1.921fb54442d18p-1;

// Bits of 2/pi, most significant first, after two zero words: word 2 holds the bits of weight
// 2^-1 .. 2^-64. The zero words let the reduction read a window that starts before the point.
const uint64_t kTwoOverPi[22] = {
    0x0000000000000000ull, 0x0000000000000000ull, 0xa2f9836e4e441529ull, 0xfc2757d1f534ddc0ull,
    0xdb6295993c439041ull, 0xfe5163abdebbc561ull, 0xb7246e3a424dd2e0ull, 0x06492eea09d1921cull,
    0xfe1deb1cb129a73eull, 0xe88235f52ebb4484ull, 0xe99c7026b45f7e41ull, 0x3991d639835339f4ull,
    0x9c845f8bbdf9283bull, 0x1ff897ffde05980full, 0xef2f118b5a0a6d1full, 0x6d367ecf27cb09b7ull,
    0x4f463f669e5fea2dull, 0x7527bac7ebe5f17bull, 0x3d0739f78a5292eaull, 0x6bfb5fb11f8d5d08ull,
    0x56033046fc7b6babull, 0xf0cfbc209af4361dull,
};

void mul64(uint64_t a, uint64_t b, uint64_t &hi, uint64_t &lo) {
  uint64_t a0 = uint32_t(a), a1 = a >> 32, b0 = uint32_t(b), b1 = b >> 32;
  uint64_t p00 = a0 * b0, p01 = a0 * b1, p10 = a1 * b0, p11 = a1 * b1;
  uint64_t mid = (p00 >> 32) + uint32_t(p01) + uint32_t(p10);
  lo = (mid << 32) | uint32_t(p00);
  hi = p11 + (p01 >> 32) + (p10 >> 32) + (mid >> 32);
}

struct TrigReduced {
  int q;     // quadrant, x = (4n + q) pi/2 + y
  double y0; // y = y0 + y1, |y| <= pi/4
  double y1;
};

/// Payne-Hanek: precondition x finite, |x| > pi/4. Writes x = m 2^e (m a 53-bit integer) and
/// takes the 192 bits of 2/pi from weight 2^-(e-1) on: bits of larger weight only add multiples
/// of 4 to x * 2/pi, and the ones beyond the window change it by less than 2^-137.
TrigReduced reduceTrig(double x) {
  uint64_t u = bitCast<uint64_t>(x);
  bool negative = (u >> 63) != 0;
  int expField = int((u >> 52) & 0x7FF);
  uint64_t m = (u & maskBits(52)) | (uint64_t(1) << 52);
  int e = expField - 1075;
  int j0 = (e - 1) + 127; // position of the bit of weight 2^-(e-1) in kTwoOverPi
  int w = j0 >> 6, s = j0 & 63;
  uint64_t win[3];
  for (int k = 0; k < 3; ++k)
    win[k] =
        s == 0 ? kTwoOverPi[w + k] : (kTwoOverPi[w + k] << s) | (kTwoOverPi[w + k + 1] >> (64 - s));
  // P = m * win, 245 bits; x * 2/pi = P * 2^-190 (mod 4).
  uint64_t h2, l2, h1, l1, h0, l0;
  mul64(m, win[2], h2, l2);
  mul64(m, win[1], h1, l1);
  mul64(m, win[0], h0, l0);
  uint64_t p0 = l2;
  uint64_t p1 = h2 + l1;
  uint64_t c1 = p1 < h2 ? 1 : 0;
  uint64_t p2 = h1 + l0;
  p2 += c1;
  int q = int(p2 >> 62);
  uint64_t fHi = (p2 << 2) | (p1 >> 62); // fraction, 128 bits
  uint64_t fLo = (p1 << 2) | (p0 >> 62);
  bool flip = false;
  if (fHi >> 63) { // fraction >= 1/2: next quadrant, fraction - 1
    q += 1;
    flip = true;
    fLo = ~fLo + 1;
    fHi = ~fHi + (fLo == 0 ? 1 : 0);
  }
  double y0 = 0.0, y1 = 0.0;
  if (fHi != 0 || fLo != 0) {
    int lz = fHi != 0 ? clz64(fHi) : 64 + clz64(fLo);
    uint64_t hiBits, loBits;
    if (lz >= 64) {
      hiBits = fLo << (lz - 64);
      loBits = 0;
    } else if (lz == 0) {
      hiBits = fHi;
      loBits = fLo;
    } else {
      hiBits = (fHi << lz) | (fLo >> (64 - lz));
      loBits = fLo << lz;
    }
    double scale = pow2(-64 - lz);
    double a = double(hiBits & ~uint64_t(0x7FF)) * scale; // 53 bits: exact
    double b = (double(hiBits & 0x7FF) + double(loBits) * 0x1p-64) * scale;
    double ph = a * kPio2Hi;
    double pl = fma(a, kPio2Hi, -ph) + (a * kPio2Lo + b * kPio2Hi);
    y0 = ph + pl;
    y1 = pl - (y0 - ph);
  }
  if (flip != negative) {
    y0 = -y0;
    y1 = -y1;
  }
  if (negative)
    q = -q;
  return {q & 3, y0, y1};
}

// Taylor coefficients: kS[k] = (-1)^k / (2k+1)!, kC[k] = (-1)^(k+1) / (2k+2)!.
constexpr double kS[9] = {0.0,
                          -0x1.5555555555555p-3,
                          0x1.1111111111111p-7,
                          -0x1.a01a01a01a01ap-13,
                          0x1.71de3a556c734p-19,
                          -0x1.ae64567f544e4p-26,
                          0x1.6124613a86d09p-33,
                          -0x1.ae7f3e733b81fp-41,
                          0x1.952c77030ad4ap-49};
constexpr double kC[9] = {0.0,
                          0x1.5555555555555p-5,
                          -0x1.6c16c16c16c17p-10,
                          0x1.a01a01a01a01ap-16,
                          -0x1.27e4fb7789f5cp-22,
                          0x1.1eed8eff8d898p-29,
                          -0x1.93974a8c07c9dp-37,
                          0x1.ae7f3e733b81fp-45,
                          -0x1.6827863b97d97p-53};

/// sin(x + y) for |x + y| <= pi/4, y a tail below ulp(x).
double kernelSin(double x, double y) {
  double z = x * x;
  double v = z * x;
  double r = kS[8];
  for (int k = 7; k >= 2; --k)
    r = fma(r, z, kS[k]);
  return x - ((z * (0.5 * y - v * r) - y) - v * kS[1]);
}

/// cos(x + y) for |x + y| <= pi/4.
double kernelCos(double x, double y) {
  double z = x * x;
  double r = kC[8];
  for (int k = 7; k >= 1; --k)
    r = fma(r, z, kC[k]);
  r *= z;
  double hz = 0.5 * z;
  double w = 1.0 - hz;
  return w + (((1.0 - w) - hz) + (z * r - x * y));
}

TrigReduced reduceAny(double x) {
  if (fabs(x) <= kPio4)
    return {0, x, 0.0};
  return reduceTrig(x);
}

} // namespace

extern "C" {

double tl_sin(double x) {
  if (isNaN(x) || fabs(x) == kInf)
    return kNaN;
  TrigReduced r = reduceAny(x);
  switch (r.q) {
  case 0:
    return kernelSin(r.y0, r.y1);
  case 1:
    return kernelCos(r.y0, r.y1);
  case 2:
    return -kernelSin(r.y0, r.y1);
  default:
    return -kernelCos(r.y0, r.y1);
  }
}

double tl_cos(double x) {
  if (isNaN(x) || fabs(x) == kInf)
    return kNaN;
  TrigReduced r = reduceAny(x);
  switch (r.q) {
  case 0:
    return kernelCos(r.y0, r.y1);
  case 1:
    return -kernelSin(r.y0, r.y1);
  case 2:
    return -kernelCos(r.y0, r.y1);
  default:
    return kernelSin(r.y0, r.y1);
  }
}

double tl_tanh(double x) {
  if (isNaN(x))
    return kNaN;
  double ax = fabs(x);
  double z;
  if (ax >= 22.0)
    z = 1.0;
  else if (ax < 0x1p-28)
    z = ax;
  else if (ax >= 1.0)
    z = 1.0 - 2.0 / (tl_expm1(2.0 * ax) + 2.0);
  else {
    // z = -t / (t + 2) for t = e^(-2ax) - 1 = th + tl, with the division corrected for tl and
    // for the rounding of the denominator.
    double tl;
    double th = expm1Double(-2.0 * ax, tl);
    double d = 2.0 + th;
    double dl = ((2.0 - d) + th) + tl; // denominator d + dl
    double q = th / d;
    double rho = fma(-q, d, th); // th - q d, exactly
    z = -(q + (rho + tl - q * dl) / d);
  }
  return x < 0.0 ? -z : z;
}

double tl_fmod(double x, double y) {
  uint64_t ux = bitCast<uint64_t>(x), uy = bitCast<uint64_t>(y);
  int ex = int((ux >> 52) & 0x7FF), ey = int((uy >> 52) & 0x7FF);
  uint64_t signBit = ux & (uint64_t(1) << 63);
  if ((uy << 1) == 0 || isNaN(y) || ex == 0x7FF)
    return kNaN;
  if ((ux << 1) <= (uy << 1))
    return (ux << 1) == (uy << 1) ? bitCast<double>(signBit) : x;
  // Integer significands, normalised so that bit 52 is the leading one.
  uint64_t mx, my;
  if (ex == 0) {
    mx = ux << 12;
    for (; (mx >> 63) == 0; mx <<= 1)
      --ex;
    mx = ux << (1 - ex); // ex <= 0 now: shift the subnormal up to bit 52
  } else {
    mx = (ux & maskBits(52)) | (uint64_t(1) << 52);
  }
  if (ey == 0) {
    my = uy << 12;
    for (; (my >> 63) == 0; my <<= 1)
      --ey;
    my = uy << (1 - ey);
  } else {
    my = (uy & maskBits(52)) | (uint64_t(1) << 52);
  }
  // Long division, one bit per step; the remainder stays below 2 * my.
  for (; ex > ey; --ex) {
    uint64_t d = mx - my;
    if ((d >> 63) == 0) {
      if (d == 0)
        return bitCast<double>(signBit);
      mx = d;
    }
    mx <<= 1;
  }
  uint64_t d = mx - my;
  if ((d >> 63) == 0) {
    if (d == 0)
      return bitCast<double>(signBit);
    mx = d;
  }
  for (; (mx >> 52) == 0; mx <<= 1)
    --ex;
  if (ex > 0) {
    mx -= uint64_t(1) << 52;
    mx |= uint64_t(ex) << 52;
  } else {
    mx >>= (1 - ex);
  }
  return bitCast<double>(mx | signBit);
}

} // extern "C"
