// The JIT's device library: the parts of ISA sections 2 and 5 that are easier to state in plain
// code than to build instruction by instruction with IRBuilder, namely the exact low-precision
// float encodings and the correctly rounded float math (exp, log, sin, ...; exact fmod).
//
// The same source is compiled twice: by clang for nvptx64 into LLVM bitcode that is embedded in
// libtilusvm and linked into every kernel module (internal linkage, so unused functions vanish
// and used ones are inlined with their constant arguments folded), and by the host compiler
// into the JIT's unit tests, which check it against isa/convert.h and long double math. Both
// compilations use strict IEEE semantics (-ffp-contract=off, no fast-math); fused multiply-adds
// are written explicitly.
//
// Float styles follow isa/dtype.h: 0 = IEEE (inf and NaN), 1 = OCP e4m3 (NaN S.1111.111, no
// inf), 2 = finite (no inf, no NaN). Encodings put a value of 1 + e + m bits in the low bits.
#pragma once

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

// ---- conversions (ISA section 2) --------------------------------------------------------------
/// (-1)^neg * sig * 2^exp (sig != 0) rounded once (nearest, ties to even) into the float format
/// (e, m, style): subnormals produced; overflow gives inf for IEEE formats wider than 8 bits and
/// the largest finite value otherwise.
uint64_t tl_encode_finite(uint32_t neg, uint64_t sig, int32_t exp, int32_t e, int32_t m,
                          int32_t style);
/// An f64 / f32 value converted into the format; NaN gives the format's canonical NaN
/// (isa/convert.h canonicalNaN; +0 for formats without NaN), inf saturates or stays inf.
uint64_t tl_f64_to_float(double x, int32_t e, int32_t m, int32_t style);
uint32_t tl_f32_to_float(float x, int32_t e, int32_t m, int32_t style);
/// An integer value converted into the format.
uint64_t tl_i64_to_float(int64_t x, int32_t e, int32_t m, int32_t style);
uint64_t tl_u64_to_float(uint64_t x, int32_t e, int32_t m, int32_t style);
/// A float of at most 8 exponent and 23 mantissa bits decoded exactly into f32.
float tl_float_to_f32(uint32_t bits, int32_t e, int32_t m, int32_t style);

// ---- math on f64 (ISA section 5: within 2 ulp; these are within 1 ulp) ------------------------
double tl_exp(double x);
double tl_exp2(double x);
double tl_expm1(double x);
double tl_log(double x);
double tl_log2(double x);
double tl_sin(double x);
double tl_cos(double x);
double tl_tanh(double x);
/// fmod, exactly (the result is always representable); NaN for y == 0, x infinite or NaN.
double tl_fmod(double x, double y);

// ---- fast math on f32 (Exp of f32 tensors; within 1 ulp of f32) ---------------------------------
float tl_expf(float x);

#ifdef __cplusplus
}
#endif
