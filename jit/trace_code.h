// Where a code of a register slot lies: a slot of a sub-byte or byte type is, in the IR that View
// and the loads emit, a chain of shifts, masks, truncations and extensions of a wider value (a
// loaded 32-bit word, a byte of a loop-carried register). traceCode walks that chain back to its
// root and the bit offset of the code in it, so that the dequantisation (emit_dequant.cpp,
// emit_dequant_pairs.cpp) reads codes where they lie instead of re-assembling them bit by bit.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <optional>

namespace tilus::jit {

/// Where a code's bits lie: bits [offset, offset + n) of root.
struct CodeBits {
  llvm::Value *root = nullptr;
  unsigned offset = 0;
};

unsigned widthOf(llvm::Value *v);

/// Follows the shifts, masks, truncations and extensions that select an n-bit code from a wider
/// value. Stops at the first value that is not such an operation (any integer value is a valid
/// root: the code is bits [offset, offset + n) of it).
CodeBits traceCode(llvm::Value *v, unsigned n);

/// A code within one 32-bit part of its root: bits [offset, offset + n) of part `part`.
struct WordCode {
  llvm::Value *root = nullptr;
  unsigned part = 0, offset = 0;
};

/// The code's 32-bit part, or nothing when it straddles two.
std::optional<WordCode> wordCode(const CodeBits &c, int n);

/// Part `part` of `root` as an i32.
llvm::Value *wordValue(llvm::IRBuilder<> &b, llvm::Value *root, unsigned part);

/// PTX prmt.b32 (default mode): byte i of the result is byte (nibble i of `selector`) of the
/// eight bytes of {y, x}; how codes found by traceCode are moved between words.
llvm::Value *prmt(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y, uint32_t selector);

} // namespace tilus::jit
