// A wgmma whose accumulator is known to be +0 computes D = A B without reading it: the
// instruction's scale-d operand 0 ("D = A B" instead of "D = A B + D"), and no accumulator
// registers to fill with zeros first (one move per register and wgmma, which ptxas keeps).
#pragma once

#include <cstddef>

namespace llvm {
class Function;
} // namespace llvm

namespace tilus::jit {

/// Rewrites every wgmma.mma_async of `f` (the inline PTX of jit/lower_contraction_wgmma.cpp,
/// with A from a descriptor or from registers) whose accumulator inputs are all the constant
/// +0.0 into the same instruction with scale-d 0 and no accumulator inputs. Run after the allocas
/// are promoted (the zeros of `AllocateRegister(init=0.0)` reach the wgmma as constants only then).
/// The sum's value is unchanged; only the sign of an exact zero may differ (A B + 0 is +0 where A B
/// is -0), which Dot's unspecified accumulation order allows. Returns the number rewritten.
size_t foldZeroWgmmaAccumulators(llvm::Function &f);

} // namespace tilus::jit
