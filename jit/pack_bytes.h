// Packing four byte slots into one 32-bit word with `prmt`. A byte slot that View or a load cut
// from a wider value is, in the IR, a truncation of a shift of that value (trace_code.h); when
// every byte of a word lies whole in a 32-bit part of such a value, the word is built from those
// parts by byte permutes: one `prmt` for bytes of at most two words, three for three or four
// (two pair steps and a merge). A pair step that takes byte j of both of its words takes them as
// the interleave of the half that holds j (bytes 0, 1 or 2, 3 of each), the same for every j of
// that half, so that the words of a 4 x 4 byte transpose share their pair steps (two `prmt` per
// word after common subexpressions) instead of a shift and a bit-field insert per byte.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include <optional>
#include <vector>

namespace tilus::jit {

/// The i32 whose byte i is bytes[i] (four i8 values), by `prmt` from the words the bytes were
/// cut from; nullptr when a byte is not a whole byte of a 32-bit part of a value of 32 bits or
/// more (a byte computed as such, e.g. by a conversion, is left to the ordinary packing).
llvm::Value *packTracedBytes(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &bytes);

/// bytes[first, first + count) (count a multiple of 4) as count / 4 words, each packed by
/// packTracedBytes; nothing when some word's bytes are refused.
std::optional<std::vector<llvm::Value *>> packTracedWords(llvm::IRBuilder<> &b,
                                                          const std::vector<llvm::Value *> &bytes,
                                                          size_t first, size_t count);

} // namespace tilus::jit
