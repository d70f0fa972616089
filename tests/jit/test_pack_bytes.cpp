// jit::packTracedBytes over its whole domain: for every choice of the four result bytes among the
// bytes of four 32-bit words (16^4 patterns), with the bytes cut from the words as View cuts them
// (trunc of lshr), the emitted IR evaluated on word values with distinct bytes must give the
// word whose byte i is the chosen byte i. The evaluator implements PTX prmt's default mode
// (each selector nibble's low three bits pick one of the eight bytes of {b, a}; bit 3, sign
// replication, must be 0) independently of the code under test. Also: the prmt count of a 4 x 4
// byte transpose (two per word once shared), of one and two source words, and the refusal of
// bytes that are not whole bytes of a word (cut across a byte boundary, or computed as bytes).
#include "jit/pack_bytes.h"

#include "test_helpers.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/IntrinsicsNVPTX.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <array>
#include <map>
#include <set>

namespace {

using tilus::jit::packTracedBytes;

/// PTX prmt.b32 (default mode): byte i of the result is byte (selector nibble i) of {b, a}.
uint32_t prmtReference(uint32_t a, uint32_t b, uint32_t selector) {
  uint64_t both = uint64_t(b) << 32 | a;
  uint32_t r = 0;
  for (int i = 0; i < 4; ++i) {
    uint32_t nibble = (selector >> (4 * i)) & 0xF;
    REQUIRE(nibble < 8); // no sign replication
    r |= uint32_t((both >> (8 * nibble)) & 0xFF) << (8 * i);
  }
  return r;
}

struct Evaluator {
  std::map<llvm::Value *, uint64_t> known;
  std::set<llvm::Value *> prmts;

  uint64_t eval(llvm::Value *v) {
    if (auto it = known.find(v); it != known.end())
      return it->second;
    if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(v))
      return c->getZExtValue();
    auto *inst = llvm::dyn_cast<llvm::Instruction>(v);
    REQUIRE(inst != nullptr);
    uint64_t mask = inst->getType()->getIntegerBitWidth() >= 64
                        ? ~uint64_t(0)
                        : (uint64_t(1) << inst->getType()->getIntegerBitWidth()) - 1;
    uint64_t r = 0;
    if (auto *call = llvm::dyn_cast<llvm::IntrinsicInst>(inst)) {
      REQUIRE(call->getIntrinsicID() == llvm::Intrinsic::nvvm_prmt);
      prmts.insert(call);
      r = prmtReference(uint32_t(eval(call->getArgOperand(0))),
                        uint32_t(eval(call->getArgOperand(1))),
                        uint32_t(eval(call->getArgOperand(2))));
    } else {
      switch (inst->getOpcode()) {
      case llvm::Instruction::Trunc:
      case llvm::Instruction::ZExt:
        r = eval(inst->getOperand(0));
        break;
      case llvm::Instruction::LShr:
        r = eval(inst->getOperand(0)) >> eval(inst->getOperand(1));
        break;
      default:
        FAIL("unexpected instruction " << inst->getOpcodeName());
      }
    }
    r &= mask;
    known[v] = r;
    return r;
  }
};

struct Fixture {
  llvm::LLVMContext ctx;
  llvm::Module module{"pack", ctx};
  llvm::IRBuilder<> b{ctx};
  llvm::Function *f = nullptr;
  std::array<llvm::Value *, 4> words{};

  Fixture() {
    auto *i32 = b.getInt32Ty();
    auto *type = llvm::FunctionType::get(b.getVoidTy(), {i32, i32, i32, i32}, false);
    f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "k", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
    for (unsigned w = 0; w < 4; ++w)
      words[w] = f->getArg(w);
  }

  /// An evaluator that knows the words: word w's byte j is 0x10 * (w + 1) + j, so every byte
  /// of the four words is distinct.
  Evaluator distinctBytes() const {
    Evaluator e;
    for (unsigned w = 0; w < 4; ++w)
      e.known[words[w]] = byteValue(w, 0) * 0x01010101u + 0x03020100u;
    return e;
  }

  static uint32_t byteValue(unsigned w, unsigned j) { return 0x10u * (w + 1) + j; }

  /// Byte `index` of word `w` as View cuts it.
  llvm::Value *byteOf(unsigned w, unsigned index) {
    llvm::Value *x = index ? b.CreateLShr(words[w], uint64_t(8 * index)) : words[w];
    return b.CreateTrunc(x, b.getInt8Ty());
  }
};

} // namespace

TEST_CASE("packTracedBytes: every choice of four bytes of four words") {
  Fixture fx;
  const Evaluator base = fx.distinctBytes();
  for (uint32_t pattern = 0; pattern < 65536; ++pattern) {
    std::vector<llvm::Value *> bytes;
    uint32_t want = 0;
    for (unsigned i = 0; i < 4; ++i) {
      unsigned w = (pattern >> (4 * i + 2)) & 3, j = (pattern >> (4 * i)) & 3;
      bytes.push_back(fx.byteOf(w, j));
      want |= Fixture::byteValue(w, j) << (8 * i);
    }
    llvm::Value *word = packTracedBytes(fx.b, bytes);
    REQUIRE(word != nullptr);
    REQUIRE(word->getType()->isIntegerTy(32));
    Evaluator e = base;
    INFO("pattern " << pattern);
    REQUIRE(uint32_t(e.eval(word)) == want);
    std::set<unsigned> sources;
    for (unsigned i = 0; i < 4; ++i)
      sources.insert((pattern >> (4 * i + 2)) & 3);
    // at most one prmt for one or two words, three for more
    CHECK(e.prmts.size() <= (sources.size() <= 2 ? 1u : 3u));
  }
}

TEST_CASE("packTracedBytes: a 4 x 4 byte transpose shares its pair steps, a word stays a word") {
  Fixture fx;
  Evaluator e = fx.distinctBytes();
  for (unsigned j = 0; j < 4; ++j) {
    llvm::Value *word =
        packTracedBytes(fx.b, {fx.byteOf(0, j), fx.byteOf(1, j), fx.byteOf(2, j), fx.byteOf(3, j)});
    REQUIRE(word != nullptr);
    CHECK(uint32_t(e.eval(word)) == 0x40302010u + j * 0x01010101u);
  }
  // two pair steps per half (bytes 0, 1 and 2, 3) and one merge per word (after the CSE of
  // identical calls that the optimiser does; counted here by distinct operands)
  std::set<std::tuple<llvm::Value *, llvm::Value *, uint64_t>> distinct;
  for (llvm::Value *p : e.prmts) {
    auto *call = llvm::cast<llvm::IntrinsicInst>(p);
    distinct.insert({call->getArgOperand(0), call->getArgOperand(1),
                     llvm::cast<llvm::ConstantInt>(call->getArgOperand(2))->getZExtValue()});
  }
  std::set<std::tuple<llvm::Value *, llvm::Value *, uint64_t>> steps;
  for (const auto &[x, y, s] : distinct)
    if (llvm::isa<llvm::Argument>(x))
      steps.insert({x, y, s});
  CHECK(steps.size() == 4);
  CHECK(distinct.size() - steps.size() == 4);
  // a word's own bytes in order: the word itself, no prmt
  CHECK(packTracedBytes(fx.b, {fx.byteOf(2, 0), fx.byteOf(2, 1), fx.byteOf(2, 2),
                               fx.byteOf(2, 3)}) == fx.words[2]);
}

TEST_CASE("packTracedBytes: bytes not cut whole from a word are refused") {
  Fixture fx;
  // a byte at bit 4 straddles two bytes of the word
  llvm::Value *odd = fx.b.CreateTrunc(fx.b.CreateLShr(fx.words[0], uint64_t(4)), fx.b.getInt8Ty());
  CHECK(packTracedBytes(fx.b, {odd, fx.byteOf(0, 1), fx.byteOf(0, 2), fx.byteOf(0, 3)}) == nullptr);
  // a computed byte (an add of bytes) is not a byte of a word
  llvm::Value *sum = fx.b.CreateAdd(fx.byteOf(1, 0), fx.byteOf(1, 1));
  CHECK(packTracedBytes(fx.b, {fx.byteOf(0, 0), sum, fx.byteOf(0, 2), fx.byteOf(0, 3)}) == nullptr);
  // three bytes are not a word
  CHECK(packTracedBytes(fx.b, {fx.byteOf(0, 0), fx.byteOf(0, 1), fx.byteOf(0, 2)}) == nullptr);
}
