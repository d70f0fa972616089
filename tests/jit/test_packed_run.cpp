// The JIT's packed-run arithmetic (jit::unpackRun, jit::packRun, lower_memory_packed.cpp)
// evaluated on constants, where the IR builder folds it to numbers: for every width of 1 to 7
// bits, every run length the lowerings use and every access unit, the elements cut out of the
// accessed bytes must be those of the ISA's bit stream (element k at bits [k N, (k + 1) N),
// least significant first), read here bit by bit from the bytes, and packing must give the
// bytes back. The run sizes and units are checked against values worked out by hand. (The
// vector accesses themselves run only on a GPU: tests/jit/test_jit_gpu.cpp.)
#include "jit/memory_util.h"

#include "test_helpers.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>

#include <random>

namespace {

using namespace tilus;

uint64_t folded(llvm::Value *v) {
  auto *c = llvm::dyn_cast<llvm::ConstantInt>(v);
  REQUIRE_MESSAGE(c != nullptr, "the value did not fold to a constant");
  return c->getZExtValue();
}

/// Element k of `bits` bits of the little-endian bit stream of `bytes`, bit by bit.
uint64_t streamElement(const std::vector<uint8_t> &bytes, int bits, int64_t k) {
  uint64_t v = 0;
  for (int i = 0; i < bits; ++i) {
    int64_t b = k * bits + i;
    v |= uint64_t((bytes[size_t(b / 8)] >> (b % 8)) & 1) << i;
  }
  return v;
}

/// The bytes as pieces of `pieceBits` bits (i32 constants), in address order.
std::vector<llvm::Value *> piecesOf(llvm::IRBuilder<> &b, const std::vector<uint8_t> &bytes,
                                    int pieceBits) {
  std::vector<llvm::Value *> pieces;
  size_t per = size_t(pieceBits / 8);
  for (size_t at = 0; at < bytes.size(); at += per) {
    uint32_t w = 0;
    for (size_t i = 0; i < per; ++i)
      w |= uint32_t(bytes[at + i]) << (8 * i);
    pieces.push_back(b.getInt32(w));
  }
  return pieces;
}

} // namespace

TEST_CASE("packed runs: sizes, access units and group widths") {
  // u4 x 32: 16 bytes in one access; u3 x 32: 12 bytes as three 4-byte accesses; u3 x 128:
  // 48 bytes as three 16-byte accesses; u6 x 4: 3 bytes, one byte at a time
  CHECK(jit::packedRun(4, 32).bytes == 16);
  CHECK(jit::packedRun(4, 32).unit == 16);
  CHECK(jit::packedRun(3, 32).bytes == 12);
  CHECK(jit::packedRun(3, 32).unit == 4);
  CHECK(jit::packedRun(3, 128).bytes == 48);
  CHECK(jit::packedRun(3, 128).unit == 16);
  CHECK(jit::packedRun(6, 4).bytes == 3);
  CHECK(jit::packedRun(6, 4).unit == 1);
  CHECK(jit::packedRun(1, 16).unit == 2);
  CHECK(jit::packedRun(2, 64).unit == 16);
  CHECK(jit::packedRun(2, 128).bytes == 32);
  CHECK(jit::packedRun(2, 128).unit == 16);
  // the narrowest run of whole bytes
  const int minWidth[8] = {0, 8, 4, 8, 2, 8, 4, 8};
  for (int n = 1; n <= 7; ++n)
    CHECK(jit::packedMinWidth(n) == minWidth[n]);
  // the widest: 16 bytes times the odd part of N, and no more than the thread's slots
  CHECK(jit::packedMaxWidth(4, 1024) == 32);
  CHECK(jit::packedMaxWidth(1, 1024) == 128);
  CHECK(jit::packedMaxWidth(2, 1024) == 64);
  CHECK(jit::packedMaxWidth(3, 1024) == 128);
  CHECK(jit::packedMaxWidth(6, 1024) == 64);
  CHECK(jit::packedMaxWidth(7, 1024) == 128);
  CHECK(jit::packedMaxWidth(4, 12) == 8);
  CHECK(jit::packedMaxWidth(4, 1) == 1);
}

TEST_CASE("packed runs: unpackRun reads the ISA bit stream, packRun writes it back") {
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);
  std::mt19937 rng(12345);
  for (int bits = 1; bits <= 7; ++bits) {
    for (int64_t count = jit::packedMinWidth(bits); count <= 256; count *= 2) {
      jit::PackedRun run = jit::packedRun(bits, count);
      REQUIRE(run.bytes * 8 == count * bits);
      REQUIRE(run.bytes % run.unit == 0);
      // every unit the run's size allows, not only the one the lowering picks
      for (int unit = 1; unit <= run.unit; unit *= 2) {
        CAPTURE(bits);
        CAPTURE(count);
        CAPTURE(unit);
        int pieceBits = std::min(32, unit * 8);
        for (int trial = 0; trial < 3; ++trial) {
          std::vector<uint8_t> bytes(size_t(run.bytes));
          for (uint8_t &x : bytes)
            x = uint8_t(trial == 0 ? 0xff : rng());
          std::vector<llvm::Value *> values =
              jit::unpackRun(b, piecesOf(b, bytes, pieceBits), pieceBits, bits, count);
          REQUIRE(int64_t(values.size()) == count);
          for (int64_t k = 0; k < count; ++k) {
            REQUIRE(values[size_t(k)]->getType()->getIntegerBitWidth() == unsigned(bits));
            REQUIRE(folded(values[size_t(k)]) == streamElement(bytes, bits, k));
          }
          std::vector<llvm::Value *> pieces = jit::packRun(b, values, pieceBits, bits);
          std::vector<llvm::Value *> want = piecesOf(b, bytes, pieceBits);
          REQUIRE(pieces.size() == want.size());
          for (size_t p = 0; p < pieces.size(); ++p)
            REQUIRE(folded(pieces[p]) == folded(want[p]));
        }
      }
    }
  }
}
