// Vector accesses of bit-packed (sub-byte) elements, shared by the global and shared lowerings
// (lower_memory_global.cpp, lower_memory.cpp).
//
// Element k of a packed tensor occupies bits [k N, (k + 1) N) of its bit stream (ISA section 2).
// A run of `count` consecutive elements whose first bit is byte-aligned and whose count * N is
// a multiple of 8 therefore covers whole bytes that hold no other element. It is moved as
// accesses of `unit` bytes (the largest power of two, at most 16, that divides the run's
// bytes): a u4 run of 32 elements is one 16-byte access, a u3 run of 32 elements three 4-byte
// ones. Its elements are cut out of the accessed bytes (or packed into them) at constant bit
// positions, which gives exactly the iN values that loadElement produces and storeElement
// consumes, so the register representation does not depend on the path.
#include "jit/memory_util.h"

#include <bit>

namespace tilus::jit {

PackedRun packedRun(int bits, int64_t count) {
  PackedRun run;
  run.bytes = int(count * bits / 8);
  run.unit = std::min(16, run.bytes & -run.bytes);
  return run;
}

int packedMinWidth(int bits) { return 8 / (bits & -bits); }

int packedMaxWidth(int bits, int64_t locals) {
  int64_t maxBits = int64_t(128) * (bits >> std::countr_zero(unsigned(bits)));
  int width = 1;
  while (width * 2 <= locals && int64_t(width) * 2 * bits <= maxBits)
    width *= 2;
  return width;
}

std::vector<llvm::Value *> unpackRun(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &pieces,
                                     int pieceBits, int bits, int64_t count) {
  llvm::Type *elem = b.getIntNTy(unsigned(bits));
  std::vector<llvm::Value *> out;
  out.reserve(size_t(count));
  for (int64_t j = 0; j < count; ++j) {
    int64_t bit = j * bits;
    size_t k = size_t(bit / pieceBits);
    int s = int(bit % pieceBits);
    llvm::Value *v = s ? b.CreateLShr(pieces[k], uint64_t(s)) : pieces[k];
    if (s + bits > pieceBits) // the element straddles two pieces
      v = b.CreateOr(v, b.CreateShl(pieces[k + 1], uint64_t(pieceBits - s)));
    out.push_back(b.CreateTrunc(v, elem));
  }
  return out;
}

std::vector<llvm::Value *> packRun(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &values,
                                   int pieceBits, int bits) {
  int64_t total = int64_t(values.size()) * bits;
  std::vector<llvm::Value *> pieces(size_t(total / pieceBits), b.getInt32(0));
  for (size_t j = 0; j < values.size(); ++j) {
    int64_t bit = int64_t(j) * bits;
    size_t k = size_t(bit / pieceBits);
    int s = int(bit % pieceBits);
    llvm::Value *v = b.CreateZExt(values[j], b.getInt32Ty());
    pieces[k] = b.CreateOr(pieces[k], b.CreateShl(v, uint64_t(s)));
    if (s + bits > pieceBits)
      pieces[k + 1] = b.CreateOr(pieces[k + 1], b.CreateLShr(v, uint64_t(pieceBits - s)));
  }
  if (pieceBits < 32)
    for (llvm::Value *&p : pieces)
      p = b.CreateAnd(p, b.getInt32((uint32_t(1) << pieceBits) - 1));
  return pieces;
}

} // namespace tilus::jit
