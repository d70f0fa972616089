// Packing byte slots into words by byte permutes (see pack_bytes.h).
#include "jit/pack_bytes.h"

#include "jit/trace_code.h"

#include <array>
#include <optional>

namespace tilus::jit {

namespace {

/// One byte of the result: byte `index` of source word `word`.
struct ByteSource {
  size_t word = 0;
  uint32_t index = 0;
};

} // namespace

llvm::Value *packTracedBytes(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &bytes) {
  if (bytes.size() != 4)
    return nullptr;
  struct Word {
    llvm::Value *root;
    unsigned part;
  };
  std::vector<Word> words;
  std::array<ByteSource, 4> src{};
  for (size_t i = 0; i < 4; ++i) {
    if (!bytes[i]->getType()->isIntegerTy(8))
      return nullptr;
    std::optional<WordCode> c = wordCode(traceCode(bytes[i], 8), 8);
    if (!c || c->offset % 8 != 0 || c->offset + 8 > 32 || widthOf(c->root) < 32)
      return nullptr;
    size_t w = 0;
    while (w < words.size() && !(words[w].root == c->root && words[w].part == c->part))
      ++w;
    if (w == words.size())
      words.push_back(Word{c->root, c->part});
    src[i] = ByteSource{w, c->offset / 8};
  }
  std::vector<llvm::Value *> values;
  for (const Word &w : words)
    values.push_back(wordValue(b, w.root, w.part));
  // bytes of at most two words: one prmt (or the word itself)
  if (words.size() <= 2) {
    uint32_t selector = 0;
    bool identity = words.size() == 1;
    for (uint32_t i = 0; i < 4; ++i) {
      selector |= (uint32_t(src[i].word) * 4 + src[i].index) << (4 * i);
      identity = identity && src[i].index == i;
    }
    if (identity)
      return values[0];
    return prmt(b, values[0], words.size() == 2 ? values[1] : values[0], selector);
  }
  // three or four words: words 0 and 1 and words 2 and 3 (or 2 alone) in two pair steps, then
  // a merge that takes each byte from the step holding it
  std::array<uint32_t, 4> at{}; // position of result byte i in its pair step's word
  auto pairStep = [&](size_t first, size_t second) -> llvm::Value * {
    std::vector<size_t> mine;
    for (size_t i = 0; i < 4; ++i)
      if (src[i].word == first || src[i].word == second)
        mine.push_back(i);
    // byte j of both words, once each: the interleave of the half that holds j
    if (second < words.size() && mine.size() == 2 && src[mine[0]].word != src[mine[1]].word &&
        src[mine[0]].index == src[mine[1]].index) {
      uint32_t j = src[mine[0]].index;
      for (size_t i : mine)
        at[i] = 2 * (j % 2) + (src[i].word == first ? 0 : 1);
      return prmt(b, values[first], values[second], j < 2 ? 0x5140 : 0x7362);
    }
    uint32_t selector = 0;
    for (size_t i : mine) {
      at[i] = uint32_t(i);
      selector |= ((src[i].word == first ? 0 : 4) + src[i].index) << (4 * i);
    }
    return prmt(b, values[first], second < words.size() ? values[second] : values[first], selector);
  };
  llvm::Value *low = pairStep(0, 1);
  llvm::Value *high = pairStep(2, 3);
  uint32_t selector = 0;
  for (uint32_t i = 0; i < 4; ++i)
    selector |= ((src[i].word < 2 ? 0 : 4) + at[i]) << (4 * i);
  return prmt(b, low, high, selector);
}

std::optional<std::vector<llvm::Value *>> packTracedWords(llvm::IRBuilder<> &b,
                                                          const std::vector<llvm::Value *> &bytes,
                                                          size_t first, size_t count) {
  std::vector<llvm::Value *> words;
  for (size_t w = first; w + 4 <= first + count; w += 4) {
    llvm::Value *word = packTracedBytes(
        b, std::vector<llvm::Value *>(bytes.begin() + long(w), bytes.begin() + long(w + 4)));
    if (!word)
      return std::nullopt;
    words.push_back(word);
  }
  return words;
}

} // namespace tilus::jit
