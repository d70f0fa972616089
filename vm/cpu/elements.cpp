// Out-of-line parts of the element helpers: the f16 decode table (65536 entries, built once
// from the exact conversion of isa/convert.h so that the hot paths of Dot and elementwise
// instructions need no per-element conversion call) and packed stores into memory that several
// host threads write at once.
#include "vm/cpu/elements.h"

#include <atomic>
#include <vector>

namespace tilus::cpu {

const float *halfToFloatTable() {
  static const std::vector<float> table = [] {
    std::vector<float> t(65536);
    for (uint32_t bits = 0; bits < 65536; ++bits)
      t[bits] = float(toDouble(bits, DataType::f16()));
    return t;
  }();
  return table.data();
}

namespace {

void updateByteAtomically(uint8_t *byte, uint8_t mask, uint8_t bits) {
  std::atomic_ref<uint8_t> ref(*byte);
  uint8_t old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, uint8_t((old & ~mask) | bits), std::memory_order_relaxed))
    ;
}

} // namespace

void writeBitsAtomic(uint8_t *mem, int64_t bitAddr, int storageBits, uint64_t value) {
  uint8_t *p = mem + (bitAddr >> 3);
  int shift = int(bitAddr & 7);
  uint32_t mask = uint32_t(bitMask(storageBits)) << shift;
  uint32_t bits = (uint32_t(value) << shift) & mask;
  updateByteAtomically(p, uint8_t(mask), uint8_t(bits));
  if (shift + storageBits > 8)
    updateByteAtomically(p + 1, uint8_t(mask >> 8), uint8_t(bits >> 8));
}

} // namespace tilus::cpu
