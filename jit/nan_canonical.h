// Canonical NaNs only where a NaN's bits can be seen. The ISA makes every float NaN result the
// canonical NaN of its type (isa/convert.h), and Codegen::canonicalizeNaN follows each float
// operation with `select(isnan(v), NaN, v)`: two instructions (setp.nan, selp) per element and
// operation. Most of those selects feed another float operation, whose own result is
// canonicalized again, and there the payload of the NaN going in cannot matter.
#pragma once

#include <cstddef>

namespace llvm {
class Function;
class SelectInst;
} // namespace llvm

namespace tilus::jit {

/// Replace by v every canonicalization `select(fcmp uno v, v), <canonical NaN>, v)` of `f`
/// whose value reaches only comparisons, other canonicalizations and conversions whose result is
/// the same for every NaN (float -> integer `cvt.rzi`, NaN -> 0; the FP8 pair conversions, whose
/// NaN codes are made canonical), through operations that leave a NaN for a NaN operand and never
/// a different non-NaN result because of its payload (float arithmetic and conversions,
/// ex2.approx, sqrt, the PTX max/min of emit_scalar.cpp, the device library's math functions,
/// f16/bf16/f32 mma and wgmma, accumulators and 16-bit register A operands) and moves that
/// carry its bits whole (select as the value passed, phis, same-width bit casts, two 16-bit
/// elements into a wgmma A register, vector and aggregate element moves, shfl.sync; shared memory,
/// from its stores to all its loads, when only plain loads read it). Every non-NaN value of the
/// program keeps its bits and every NaN stays a NaN; a NaN's payload reaches memory, an integer
/// operation or any other use only through a canonicalization that is kept. Promotes f's allocas to
/// SSA values first (mem2reg, as the pipeline would). Before deciding, a use that sees a float
/// value at a smaller loop depth than a canonicalization reaching it gets a canonicalization of its
/// own right before it (a loop-carried value published after its loop: one select after the loop
/// instead of one per iteration). Decided on that IR, then applied; returns the number removed.
size_t dropUnseenNaNCanonicalizations(llvm::Function &f);

/// Marks a select as a canonicalization that dropUnseenNaNCanonicalizations may drop like the
/// `select(fcmp uno v, v), NaN, v)` form: its true value is a canonical NaN and, wherever its
/// condition holds, its false value is a NaN already (element-wise for vectors).
void markNaNCanonicalization(llvm::SelectInst *select);

/// Rewrites each canonicalization of a pair of 16-bit floats (`select(fcmp uno v, v), <NaN,
/// NaN>, v)` on <2 x half>, or <2 x bfloat> from sm_90 on; Codegen::narrowPairs) into one
/// inline-PTX statement on the pair's 32-bit word: `set.nan.u32.f16x2` makes each NaN half's
/// mask, one `lop3` puts the canonical NaN there. Instead of a `setp.nan.f16x2`, two `selp.b16`
/// and the moves that unpack and repack the word. Run after dropUnseenNaNCanonicalizations, on
/// the ones it keeps; returns the number rewritten.
size_t lowerPairCanonicalizations(llvm::Function &f, int smVersion);

} // namespace tilus::jit
