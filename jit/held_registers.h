// Two shapes of optimised IR that ptxas compiles to extra instructions in every loop iteration,
// rewritten after optimisation so that it keeps the values in registers instead:
//
//  1. An mma.sync whose operand registers repeat one value (the rows 8 + g of a Q fragment that
//     repeat rows g, decode_paged.tasm): the instruction needs the value in two registers of
//     its register quad, and ptxas re-creates the second one with a move before every mma, even
//     when the value is loop-invariant. Each repeat of a value defined outside the loop becomes
//     a copy made once before the loop, which ptxas cannot see through.
//  2. `(x & C1) | C2` and `(x & C1) ^ C2` with two constants (the masks and magic exponents of
//     the dequantisation, jit/emit_dequant_pairs.cpp): a lop3 holds one immediate, so ptxas
//     emits two, or rematerialises C2 with a move per use. C2, when a loop uses it at least four
//     times so, is made once at the kernel's entry in a register that ptxas cannot see through:
//     one lop3 per use. Where six or more such magics share one field mask (the u1 pairs have
//     ten), the masks become one `lop3` each with C1 | C2 as the immediate and one held register
//     that selects the field's bits, instead of a held register per magic.
//
// The copies add 0 to the value, where 0 is lane 0's lane index, read with one shuffle at the
// kernel's entry (every lane of every warp executes the entry): exact for every bit pattern.
#pragma once

#include <cstddef>

namespace llvm {
class Function;
} // namespace llvm

namespace tilus::jit {

/// Rewrites `f` (after optimisation) as above; returns the number of copies and constants made.
size_t holdLoopInvariantRegisters(llvm::Function &f);

} // namespace tilus::jit
