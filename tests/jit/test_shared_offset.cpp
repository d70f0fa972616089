// The JIT's shared-memory address arithmetic (jit::sharedLayoutOffset) evaluated on constant
// coordinates, where the IR builder folds it to a number: over the whole domain of row-major,
// column-major, strided, tiled and swizzled layouts it must give SharedLayout::offset, and a few
// swizzled offsets are also checked against values computed by hand. (The PTX itself runs only
// on a GPU; this pins the arithmetic that it contains.)
#include "jit/memory_util.h"

#include "isa/shared_layout.h"
#include "test_helpers.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstrTypes.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <map>

namespace {

using namespace tilus;

SharedLayout make(Expected<SharedLayout> l) {
  REQUIRE_OK(l);
  return std::move(l).value();
}

/// The JIT's offset of `index`, folded to a constant.
int64_t jitOffset(llvm::IRBuilder<> &b, const SharedLayout &layout,
                  const std::vector<int64_t> &index) {
  std::vector<llvm::Value *> c;
  for (int64_t x : index)
    c.push_back(b.getInt32(uint32_t(x)));
  llvm::Value *v = jit::sharedLayoutOffset(b, layout, c);
  auto *folded = llvm::dyn_cast<llvm::ConstantInt>(v);
  REQUIRE_MESSAGE(folded != nullptr, "the offset did not fold to a constant");
  return int64_t(folded->getZExtValue());
}

void forEachIndex(const std::vector<int64_t> &shape,
                  const std::function<void(const std::vector<int64_t> &)> &f) {
  std::vector<int64_t> x(shape.size(), 0);
  while (true) {
    f(x);
    size_t d = shape.size();
    while (d > 0 && ++x[d - 1] == shape[d - 1])
      x[--d] = 0;
    if (d == 0)
      return;
  }
}

} // namespace

TEST_CASE("shared offsets of the JIT equal SharedLayout::offset over whole layouts") {
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);
  SharedLayout rm864 = make(SharedLayout::rowMajor({8, 64}));
  std::vector<SharedLayout> layouts = {
      make(SharedLayout::rowMajor({4, 6, 5})),
      make(SharedLayout::columnMajor({6, 10})),
      make(SharedLayout::strided({4, 8}, {9, 1})),
      make(SharedLayout::tile(make(SharedLayout::columnMajor({2, 3})),
                              make(SharedLayout::rowMajor({4, 8})))),
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({8, 8})), 3, 0, 3)),
      make(SharedLayout::swizzle(rm864, 3, 3, 3)),
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({16, 32})), 2, 3, 3)),
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({32, 32})), 3, 2, 4)),
      make(SharedLayout::swizzle(make(SharedLayout::columnMajor({64, 8})), 3, 3, 3)),
      make(SharedLayout::tile(make(SharedLayout::rowMajor({2, 2})),
                              make(SharedLayout::swizzle(rm864, 3, 3, 3)))),
  };
  for (const SharedLayout &l : layouts) {
    INFO(l.toString());
    int64_t mismatches = 0;
    forEachIndex(l.shape(), [&](const std::vector<int64_t> &x) {
      if (jitOffset(b, l, x) != l.offset(x) && mismatches++ < 5)
        FAIL_CHECK("index " << x[0] << ", " << x[1] << ": jit " << jitOffset(b, l, x) << ", layout "
                            << l.offset(x));
    });
    CHECK(mismatches == 0);
  }
}

TEST_CASE("swizzled shared offsets of the JIT against hand-computed values") {
  llvm::LLVMContext ctx;
  llvm::IRBuilder<> b(ctx);
  // swizzle(row_major(8, 8), 3, 0, 3): o = 8 r + c, o ^ ((o >> 3) & 7) = 8 r + (c ^ r).
  SharedLayout s8 = make(SharedLayout::swizzle(make(SharedLayout::rowMajor({8, 8})), 3, 0, 3));
  CHECK(jitOffset(b, s8, {0, 5}) == 5);
  CHECK(jitOffset(b, s8, {1, 0}) == 9);
  CHECK(jitOffset(b, s8, {3, 6}) == 24 + 5);
  CHECK(jitOffset(b, s8, {7, 7}) == 56);
  // swizzle(row_major(8, 64), 3, 3, 3): o = 64 r + c; bits 6..8 of o (= r) XOR into bits 3..5:
  // o ^ (r << 3).
  SharedLayout s64 = make(SharedLayout::swizzle(make(SharedLayout::rowMajor({8, 64})), 3, 3, 3));
  CHECK(jitOffset(b, s64, {0, 9}) == 9);
  CHECK(jitOffset(b, s64, {1, 0}) == 64 + 8);
  CHECK(jitOffset(b, s64, {5, 17}) == 320 + (17 ^ 40));
  CHECK(jitOffset(b, s64, {7, 63}) == 448 + (63 ^ 56));
}

namespace {

/// Evaluates the i32 expression `v` (constants, arguments and the integer operations that
/// sharedLayoutOffset emits) at the argument values `args`.
int64_t evaluate(llvm::Value *v, const std::map<const llvm::Value *, uint32_t> &args) {
  if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(v))
    return int64_t(c->getZExtValue());
  auto it = args.find(v);
  if (it != args.end())
    return it->second;
  auto *op = llvm::dyn_cast<llvm::BinaryOperator>(v);
  REQUIRE_MESSAGE(op != nullptr, "an operation the test does not evaluate");
  uint32_t x = uint32_t(evaluate(op->getOperand(0), args));
  uint32_t y = uint32_t(evaluate(op->getOperand(1), args));
  switch (op->getOpcode()) {
  case llvm::Instruction::Add:
    return uint32_t(x + y);
  case llvm::Instruction::Mul:
    return uint32_t(x * y);
  case llvm::Instruction::Shl:
    return uint32_t(x << y);
  case llvm::Instruction::LShr:
    return x >> y;
  case llvm::Instruction::And:
    return x & y;
  case llvm::Instruction::Xor:
    return x ^ y;
  case llvm::Instruction::Or:
    return x | y;
  default:
    FAIL("an operation the test does not evaluate: " << op->getOpcodeName());
  }
  return 0;
}

/// Whether `v` depends on `arg`.
bool uses(llvm::Value *v, const llvm::Value *arg) {
  if (v == arg)
    return true;
  if (auto *i = llvm::dyn_cast<llvm::Instruction>(v))
    for (llvm::Value *o : i->operands())
      if (uses(o, arg))
        return true;
  return false;
}

} // namespace

TEST_CASE("swizzles let a stage's stride through: the swizzled part is computed without it") {
  // swizzle(row_major(3, 8, 16), 2, 3, 2): the XOR reads bits 5-6 of the offset and writes bits
  // 3-4, so the stage stride 128 = 2^7 changes none of them; the JIT adds the stage's term to
  // the swizzled offset of the row and column, which then does not depend on the stage
  llvm::LLVMContext ctx;
  llvm::Module mod("m", ctx);
  llvm::IRBuilder<> b(ctx);
  auto *fnType = llvm::FunctionType::get(b.getInt32Ty(),
                                         {b.getInt32Ty(), b.getInt32Ty(), b.getInt32Ty()}, false);
  auto *fn = llvm::Function::Create(fnType, llvm::Function::ExternalLinkage, "f", mod);
  b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", fn));
  llvm::Argument *stage = fn->getArg(0), *row = fn->getArg(1), *col = fn->getArg(2);
  // indices of the layout at which the IR `o` of (stage, row, col) differs from its offset
  auto mismatches = [&](const SharedLayout &layout, llvm::Value *o) {
    int64_t count = 0;
    forEachIndex(layout.shape(), [&](const std::vector<int64_t> &x) {
      std::map<const llvm::Value *, uint32_t> args = {
          {stage, uint32_t(x[0])}, {row, uint32_t(x[1])}, {col, uint32_t(x[2])}};
      if (evaluate(o, args) != layout.offset(x))
        ++count;
    });
    return count;
  };
  // `o` is an add whose one operand holds the stage and the other (returned) does not: the
  // swizzled part, computed without the stage
  auto swizzledPart = [&](llvm::Value *o) -> llvm::Value * {
    auto *sum = llvm::dyn_cast<llvm::BinaryOperator>(o);
    REQUIRE(sum != nullptr);
    CHECK(sum->getOpcode() == llvm::Instruction::Add);
    llvm::Value *part = uses(sum->getOperand(0), stage) ? sum->getOperand(1) : sum->getOperand(0);
    CHECK_FALSE(uses(part, stage));
    return part;
  };
  SharedLayout l = make(SharedLayout::swizzle(make(SharedLayout::rowMajor({3, 8, 16})), 2, 3, 2));
  llvm::Value *o = jit::sharedLayoutOffset(b, l, {stage, row, col});
  CHECK(uses(swizzledPart(o), row));
  CHECK(mismatches(l, o) == 0);
  // hand-computed: stage 2, row 5, column 9: o = 256 + 80 + 9 = 345; bits 5-6 of 89 (row and
  // column part) are 2, so bits 3-4 of 89 (3) become 3 ^ 2 = 1: 89 - 24 + 8 = 73; 256 + 73
  CHECK(evaluate(o, {{stage, 2}, {row, 5}, {col, 9}}) == 329);
  CHECK(l.offset(std::vector<int64_t>{2, 5, 9}) == 329);
  // a nest of two swizzles (rows of 32 words: swizzle(swizzle(.., 1, 2, 5), 2, 3, 2), whose
  // XORs reach bit 7 and bit 6): the stage's stride 512 = 2^9 passes through both
  SharedLayout nested = make(SharedLayout::swizzle(
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({3, 16, 32})), 1, 2, 5)), 2, 3, 2));
  llvm::Value *n = jit::sharedLayoutOffset(b, nested, {stage, row, col});
  CHECK(uses(swizzledPart(n), row));
  CHECK(mismatches(nested, n) == 0);
  // a stride that passes through the inner swizzle but not the outer one (rows of 16 words
  // under swizzle(swizzle(.., 2, 3, 2), 2, 4, 3), whose XOR reads bits 7-8): no split, the
  // offsets still right
  SharedLayout partial = make(SharedLayout::swizzle(
      make(SharedLayout::swizzle(make(SharedLayout::rowMajor({3, 8, 16})), 2, 3, 2)), 2, 4, 3));
  llvm::Value *q = jit::sharedLayoutOffset(b, partial, {stage, row, col});
  CHECK(mismatches(partial, q) == 0);
  // a swizzle of zero bits is its inner layout: linear, and the same offsets
  CHECK(make(SharedLayout::swizzle(make(SharedLayout::rowMajor({3, 8, 16})), 0, 3, 2)) ==
        make(SharedLayout::rowMajor({3, 8, 16})));
}
