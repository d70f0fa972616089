// Where a code of a sub-byte or byte register slot lies in the wider value it was cut from
// (see trace_code.h).
#include "jit/trace_code.h"

#include "isa/convert.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>
#include <llvm/IR/IntrinsicsNVPTX.h>

namespace tilus::jit {

unsigned widthOf(llvm::Value *v) { return v->getType()->getIntegerBitWidth(); }

CodeBits traceCode(llvm::Value *v, unsigned n) {
  CodeBits at{v, 0};
  uint64_t need = bitMask(int(n));
  for (int depth = 0; depth < 16; ++depth) {
    auto *inst = llvm::dyn_cast<llvm::Instruction>(at.root);
    if (!inst || !inst->getType()->isIntegerTy())
      break;
    llvm::Value *x = inst->getNumOperands() > 0 ? inst->getOperand(0) : nullptr;
    auto constOperand = [&](unsigned i) -> std::optional<uint64_t> {
      auto *c = llvm::dyn_cast<llvm::ConstantInt>(inst->getOperand(i));
      if (!c || c->getBitWidth() > 64)
        return std::nullopt;
      return c->getZExtValue();
    };
    bool moved = false;
    switch (inst->getOpcode()) {
    case llvm::Instruction::Trunc:
      if (x->getType()->isIntegerTy()) {
        at.root = x;
        moved = true;
      }
      break;
    case llvm::Instruction::ZExt:
      if (x->getType()->isIntegerTy() && at.offset + n <= widthOf(x)) {
        at.root = x;
        moved = true;
      }
      break;
    case llvm::Instruction::LShr:
      if (std::optional<uint64_t> c = constOperand(1); c && at.offset + *c + n <= widthOf(x)) {
        at.offset += unsigned(*c);
        at.root = x;
        moved = true;
      }
      break;
    case llvm::Instruction::Shl:
      if (std::optional<uint64_t> c = constOperand(1); c && at.offset >= *c) {
        at.offset -= unsigned(*c);
        at.root = x;
        moved = true;
      }
      break;
    case llvm::Instruction::And:
      for (unsigned i = 0; i < 2 && !moved; ++i)
        if (std::optional<uint64_t> c = constOperand(i);
            c && at.offset + n <= 64 && ((*c >> at.offset) & need) == need) {
          at.root = inst->getOperand(1 - i);
          moved = true;
        }
      break;
    case llvm::Instruction::Or:
      for (unsigned i = 0; i < 2 && !moved; ++i)
        if (std::optional<uint64_t> c = constOperand(i); c && *c == 0) {
          at.root = inst->getOperand(1 - i);
          moved = true;
        }
      break;
    default:
      break;
    }
    if (!moved)
      break;
  }
  return at;
}

std::optional<WordCode> wordCode(const CodeBits &c, int n) {
  WordCode w{c.root, 0, c.offset};
  if (widthOf(c.root) > 32) {
    if (c.offset / 32 != (c.offset + unsigned(n) - 1) / 32)
      return std::nullopt; // the code straddles two 32-bit parts
    w.part = c.offset / 32;
    w.offset = c.offset % 32;
  }
  return w;
}

llvm::Value *prmt(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y, uint32_t selector) {
  return b.CreateIntrinsic(llvm::Intrinsic::nvvm_prmt, {}, {x, y, b.getInt32(selector)});
}

llvm::Value *wordValue(llvm::IRBuilder<> &b, llvm::Value *root, unsigned part) {
  if (widthOf(root) > 32)
    return b.CreateTrunc(part ? b.CreateLShr(root, uint64_t(32 * part)) : root, b.getInt32Ty());
  if (widthOf(root) < 32)
    return b.CreateZExt(root, b.getInt32Ty());
  return root;
}

} // namespace tilus::jit
