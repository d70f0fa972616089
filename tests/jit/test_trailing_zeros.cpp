// jit::trailingZeros (memory_util.h), the zero low bits that prove vector groups aligned and
// uncut, on hand-built IR over a parameter n whose low bits are unknown: masks give them
// (n & -16: 4), sums keep the fewer, products add, shifts left add; exact divisions and shifts
// right by 2^s take s away (and give nothing when they may round), extensions, selects and
// min/max keep what their operands share. Each expected count is worked out by hand.
#include "jit/memory_util.h"

#include "test_helpers.h"

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

namespace {

struct Fixture {
  llvm::LLVMContext ctx;
  llvm::Module module{"tz", ctx};
  llvm::IRBuilder<> b{ctx};
  llvm::Value *n = nullptr, *m = nullptr; // i32 parameters, nothing known

  Fixture() {
    auto *i32 = b.getInt32Ty();
    auto *type = llvm::FunctionType::get(b.getVoidTy(), {i32, i32}, false);
    auto *f = llvm::Function::Create(type, llvm::Function::ExternalLinkage, "k", module);
    b.SetInsertPoint(llvm::BasicBlock::Create(ctx, "entry", f));
    n = f->getArg(0);
    m = f->getArg(1);
  }
  unsigned tz(llvm::Value *v) { return tilus::jit::trailingZeros(v, module.getDataLayout()); }
  llvm::Value *masked(llvm::Value *v, int bits) {
    return b.CreateAnd(v, b.getInt32(~((1u << bits) - 1)));
  }
};

} // namespace

TEST_CASE("trailingZeros: masks, sums, products and shifts left") {
  Fixture fx;
  llvm::Value *n16 = fx.masked(fx.n, 4), *m4 = fx.masked(fx.m, 2);
  CHECK(fx.tz(fx.n) == 0);
  CHECK(fx.tz(n16) == 4);
  CHECK(fx.tz(fx.b.CreateAdd(n16, m4)) == 2);
  CHECK(fx.tz(fx.b.CreateSub(n16, fx.b.getInt32(32))) == 4);
  CHECK(fx.tz(fx.b.CreateMul(n16, m4)) == 6);
  CHECK(fx.tz(fx.b.CreateShl(m4, 3)) == 5);
  CHECK(fx.tz(fx.b.getInt32(0)) == 64);
}

TEST_CASE("trailingZeros: exact divisions and shifts right by powers of two") {
  Fixture fx;
  llvm::Value *n16 = fx.masked(fx.n, 4);
  // n16 / 4 and n16 >> 2: exact, 4 - 2 zero bits remain (signed division of a negative multiple
  // of 16 by 4 is exact too)
  CHECK(fx.tz(fx.b.CreateSDiv(n16, fx.b.getInt32(4))) == 2);
  CHECK(fx.tz(fx.b.CreateUDiv(n16, fx.b.getInt32(16))) == 0);
  CHECK(fx.tz(fx.b.CreateAShr(n16, 3)) == 1);
  CHECK(fx.tz(fx.b.CreateLShr(n16, 1)) == 3);
  // dividing by more than the zero bits may round: nothing is known
  CHECK(fx.tz(fx.b.CreateSDiv(n16, fx.b.getInt32(32))) == 0);
  CHECK(fx.tz(fx.b.CreateAShr(n16, 5)) == 0);
  // not a power of two, or a negative divisor: nothing
  CHECK(fx.tz(fx.b.CreateSDiv(n16, fx.b.getInt32(12))) == 0);
  CHECK(fx.tz(fx.b.CreateSDiv(n16, fx.b.getInt32(-4))) == 0);
  // a division by a variable: nothing
  CHECK(fx.tz(fx.b.CreateSDiv(n16, fx.m)) == 0);
}

TEST_CASE("trailingZeros: extensions, selects and min/max keep the shared zero bits") {
  Fixture fx;
  llvm::Value *n16 = fx.masked(fx.n, 4), *m4 = fx.masked(fx.m, 2);
  llvm::Value *wide = fx.b.CreateSExt(fx.b.CreateSDiv(n16, fx.b.getInt32(4)), fx.b.getInt64Ty());
  CHECK(fx.tz(wide) == 2);
  CHECK(fx.tz(fx.b.CreateZExt(n16, fx.b.getInt64Ty())) == 4);
  llvm::Value *cond = fx.b.CreateICmpSGT(fx.n, fx.m);
  CHECK(fx.tz(fx.b.CreateSelect(cond, n16, m4)) == 2);
  CHECK(fx.tz(fx.b.CreateSelect(cond, fx.b.getInt32(0), n16)) == 4);
  // the clamp of an extent: max(x, 0) keeps x's zero bits; min with 1 keeps none
  llvm::Value *clamped = fx.b.CreateBinaryIntrinsic(llvm::Intrinsic::smax, wide, fx.b.getInt64(0));
  CHECK(fx.tz(clamped) == 2);
  CHECK(fx.tz(fx.b.CreateBinaryIntrinsic(llvm::Intrinsic::smin, n16, fx.b.getInt32(1))) == 0);
  // a bound of a tile: extent minus a multiple of 64 minus a thread part of zero low bits 2
  llvm::Value *hi = fx.b.CreateSub(fx.b.CreateSub(clamped, fx.b.getInt64(128)),
                                   fx.b.CreateZExt(m4, fx.b.getInt64Ty()));
  CHECK(fx.tz(hi) == 2);
}
