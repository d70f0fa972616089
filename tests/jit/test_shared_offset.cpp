// The JIT's shared-memory address arithmetic (jit::sharedLayoutOffset) evaluated on constant
// coordinates, where the IR builder folds it to a number: over the whole domain of row-major,
// column-major, strided, tiled and swizzled layouts it must give SharedLayout::offset, and a few
// swizzled offsets are also checked against values computed by hand. (The PTX itself runs only
// on a GPU; this pins the arithmetic that it contains.)
#include "jit/memory_util.h"

#include "isa/shared_layout.h"
#include "test_helpers.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/LLVMContext.h>

#include <functional>

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
