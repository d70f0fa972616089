// Memory access primitives that every family uses (internal to jit/): the tiles of global and
// shared views (isa/view_rules.h), shared layout offsets and addresses, and the loads and stores
// of one element.
//
// Sub-byte types are bit-packed (ISA section 2). A load reads the aligned 32-bit words that hold
// the element's first and last bit (both contain the element, so neither can fault); a store
// clears and sets the element's bits with atomic and/or on those words, so that threads (and
// blocks) writing neighbouring elements of one byte do not lose each other's bits.
#include "jit/memory_util.h"

#include "isa/convert.h"
#include "isa/view_rules.h"

#include <algorithm>
#include <cstdlib>
#include <string>

namespace tilus::jit {

namespace {

/// The other operand when x or y is the constant `identity`; nullptr otherwise.
llvm::Value *skipIdentity(llvm::Value *x, llvm::Value *y, uint64_t identity) {
  if (auto *cx = llvm::dyn_cast<llvm::ConstantInt>(x); cx && cx->equalsInt(identity))
    return y;
  if (auto *cy = llvm::dyn_cast<llvm::ConstantInt>(y); cy && cy->equalsInt(identity))
    return x;
  return nullptr;
}

} // namespace

llvm::Value *addFolded(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  llvm::Value *folded = skipIdentity(x, y, 0);
  return folded ? folded : b.CreateAdd(x, y);
}

llvm::Value *mulFolded(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  llvm::Value *folded = skipIdentity(x, y, 1);
  return folded ? folded : b.CreateMul(x, y);
}

// ---- tiles ------------------------------------------------------------------------------------

/// Entry d of an offset argument as isa/view_rules.h's applyOffset reads it (an absent offset
/// is all slices from 0).
std::pair<llvm::Value *, bool> Codegen::offsetEntry(const Argument &offset, size_t d) {
  if (!offset.present)
    return {constI64(0), true};
  return {exprI64(offset.offsets[d].expr), offset.offsets[d].slice};
}

namespace {

/// Applies `offset` to `view`, giving the rest of `tile` (isa/view_rules.h).
template <class View, class Tile>
Tile tileAt(Codegen &cg, const View &view, const Argument &offset, Tile tile) {
  IrArithmetic a{cg};
  applyOffset<OffsetUse::Tile>(a, view, tile, view.shape.size(),
                               [&](size_t d) { return cg.offsetEntry(offset, d); });
  return tile;
}

} // namespace

GlobalTile Codegen::globalTile(const GlobalView &view, const Argument &offset) {
  GlobalTile tile;
  tile.dtype = view.dtype;
  tile.ptr = view.ptr;
  tile.offset = view.offset;
  tile.valid = view.valid;
  return tileAt(*this, view, offset, std::move(tile));
}

void Codegen::noteViewShape(VarId v, const std::vector<ExprId> &shape) {
  if (assignments_[v] == 1)
    viewShapes_[v] = shape;
}

void Codegen::noteBlockIndex(VarId v, int dim) {
  if (assignments_[v] == 1)
    blockIndexDims_[v] = dim;
}

void Codegen::boundProvenTiles(VarId g, const Argument &offset, const LayoutMap &map,
                               GlobalTile &tile) {
  // TILUSVM_JIT_PROVEN=0 keeps every bounds test, for experiments (part of compilerVersion)
  static const bool off = [] {
    const char *v = std::getenv("TILUSVM_JIT_PROVEN");
    return v && std::string(v) == "0";
  }();
  if (off)
    return;
  auto shape = viewShapes_.find(g);
  if (!offset.present || shape == viewShapes_.end() ||
      shape->second.size() != offset.offsets.size())
    return;
  // an integer constant's value, if the expression is one
  auto constant = [&](ExprId e) -> std::optional<int64_t> {
    const ExprNode &n = prog.expr(e);
    if (n.op != ExprOp::Const || !n.dtype.isInt() || n.dtype.bits > 64)
      return std::nullopt;
    return n.dtype.isSigned() ? signExtend(n.bits, n.dtype.bits) : int64_t(n.bits);
  };
  // a scalar parameter assigned once (its value is the launch's)
  auto parameter = [&](ExprId e) -> std::optional<size_t> {
    const ExprNode &n = prog.expr(e);
    if (n.op != ExprOp::Var || assignments_[n.var] != 1)
      return std::nullopt;
    for (size_t i = 0; i < prog.params.size(); ++i)
      if (prog.params[i] == n.var && prog.var(n.var).kind != VarKind::Pointer)
        return i;
    return std::nullopt;
  };
  const std::vector<ParamFact> &facts = opts.specialization.params;
  size_t t = 0; // the tile's dimension of the slice entry d
  for (size_t d = 0; d < offset.offsets.size(); ++d) {
    const OffsetEntry &entry = offset.offsets[d];
    if (!entry.slice)
      continue;
    size_t dim = t++;
    if (dim >= tile.hi.size() || int(dim) >= map.rank())
      return;
    // the slice's start: b * T (either order) or b, for a block index b
    const ExprNode &start = prog.expr(entry.expr);
    VarId index = kNoId;
    int64_t step = 1;
    if (start.op == ExprOp::Var) {
      index = start.var;
    } else if (start.op == ExprOp::Mul) {
      for (int side = 0; side < 2 && index == kNoId; ++side) {
        const ExprNode &x = prog.expr(start.operands[side]);
        std::optional<int64_t> c = constant(start.operands[1 - side]);
        if (x.op == ExprOp::Var && c) {
          index = x.var;
          step = *c;
        }
      }
    }
    auto grid = blockIndexDims_.find(index);
    if (index == kNoId || grid == blockIndexDims_.end() || step < 1 || step > 16 ||
        16 % step != 0 || map.shape()[dim] > step || size_t(grid->second) >= prog.grid.size())
      continue;
    // the grid extent of that block index: cdiv(E, step) for the view's extent E, a parameter
    // that the launch class makes a multiple of 16 (so of step): then b * step + step <= E
    const ExprNode &extent = prog.expr(prog.grid[size_t(grid->second)]);
    if (extent.op != ExprOp::CeilDiv || constant(extent.operands[1]) != step)
      continue;
    std::optional<size_t> p = parameter(extent.operands[0]);
    std::optional<size_t> q = parameter(shape->second[d]);
    if (!p || p != q || facts.size() != prog.params.size() || facts[*p] != ParamFact::Divisible16)
      continue;
    // every coordinate the layout gives (0 to map.shape()[dim] - 1 <= step - 1) is in bounds:
    // b * step + c lies in [0, E) (b * step <= E - step does not overflow)
    tile.lo[dim] = constI64(0);
    tile.hi[dim] = constI64(int64_t(1) << 40);
  }
}

SharedTile Codegen::sharedTile(const SharedView &view, const Argument &offset) {
  SharedTile tile;
  tile.root = view.root;
  tile.dtype = view.dtype;
  tile.origin = view.origin;
  return tileAt(*this, view, offset, std::move(tile));
}

// ---- shared addresses ---------------------------------------------------------------------------

llvm::Value *linearOffset(llvm::IRBuilder<> &b, const std::vector<int64_t> &strides,
                          const std::vector<llvm::Value *> &c) {
  llvm::Value *o = b.getInt32(0);
  for (size_t d = 0; d < strides.size(); ++d)
    o = addFolded(b, o, mulFolded(b, c[d], b.getInt32(uint64_t(strides[d]))));
  return o;
}

llvm::Value *sharedLayoutOffset(llvm::IRBuilder<> &b, const SharedLayout &layout,
                                const std::vector<llvm::Value *> &c) {
  std::vector<int64_t> strides = layout.linearStrides();
  if (!strides.empty() || layout.rank() == 0)
    return linearOffset(b, strides, c);
  if (layout.kind() == SharedLayout::Kind::Tile) {
    const SharedLayout &outer = *layout.children()[0];
    const SharedLayout &inner = *layout.children()[1];
    std::vector<llvm::Value *> q(c.size()), r(c.size());
    for (size_t d = 0; d < c.size(); ++d) {
      llvm::Value *n = b.getInt32(uint64_t(inner.shape()[d]));
      q[d] = b.CreateUDiv(c[d], n);
      r[d] = b.CreateURem(c[d], n);
    }
    llvm::Value *o = sharedLayoutOffset(b, outer, q);
    return b.CreateAdd(b.CreateMul(o, b.getInt32(uint64_t(inner.size()))),
                       sharedLayoutOffset(b, inner, r));
  }
  // swizzle
  const SharedLayout &inner = *layout.children()[0];
  // A swizzle's XOR reads and writes only bits below 2^need (need = base + shift + bits); a term
  // of the linear layout beneath a nest of swizzles whose stride is a multiple of 2^need of
  // every swizzle of the nest (a pipeline stage's) changes none of those bits and carries
  // nothing into them, so sw_k(..sw_1(high + low)) = high + sw_k(..sw_1(low)): the swizzled part
  // then depends only on the other terms (a lane's coordinates and constants), which a loop
  // over the stages computes once
  std::vector<const SharedLayout *> nest; // outermost first
  const SharedLayout *base = &layout;
  int64_t need = 1;
  while (base->kind() == SharedLayout::Kind::Swizzle) {
    nest.push_back(base);
    need = std::max(need, int64_t(1) << base->swizzleReach());
    base = base->children()[0].get();
  }
  auto swizzled = [&](llvm::Value *o, const SharedLayout &s) {
    uint64_t mask = ((uint64_t(1) << s.swizzleBits()) - 1) << s.swizzleBase();
    return b.CreateXor(o, b.CreateAnd(b.CreateLShr(o, uint64_t(s.swizzleShift())), mask));
  };
  std::vector<int64_t> baseStrides = base->linearStrides();
  if (!baseStrides.empty()) {
    bool any = false;
    for (size_t d = 0; d < baseStrides.size(); ++d)
      any = any ||
            (baseStrides[d] != 0 && baseStrides[d] % need == 0 && !llvm::isa<llvm::Constant>(c[d]));
    if (any) {
      llvm::Value *low = b.getInt32(0), *high = b.getInt32(0);
      for (size_t d = 0; d < baseStrides.size(); ++d) {
        if (baseStrides[d] == 0)
          continue;
        llvm::Value *term = mulFolded(b, c[d], b.getInt32(uint64_t(baseStrides[d])));
        if (baseStrides[d] % need == 0)
          high = addFolded(b, high, term);
        else
          low = addFolded(b, low, term);
      }
      for (auto s = nest.rbegin(); s != nest.rend(); ++s)
        low = swizzled(low, **s);
      return b.CreateAdd(high, low);
    }
  }
  return swizzled(sharedLayoutOffset(b, inner, c), layout);
}

llvm::Value *Codegen::sharedOffset(VarId root, const std::vector<llvm::Value *> &coords) {
  // In i32: a defined access has every root coordinate in [0, shape) and its offset below the
  // root's size, which is at most ProgramInfo::sharedBytes < 2^32, so the i32 layout function
  // (its divisions and shifts included) equals the i64 one there. Per-thread shared terms then
  // take one register each instead of two, which matters in the k loops of matrix programs.
  std::vector<llvm::Value *> c32;
  c32.reserve(coords.size());
  for (llvm::Value *c : coords)
    c32.push_back(b.CreateTrunc(c, b.getInt32Ty()));
  llvm::Value *o = sharedLayoutOffset(b, *info.vars[root].sharedLayout, c32);
  return b.CreateZExt(o, b.getInt64Ty());
}

llvm::Value *Codegen::sharedElementAddress(VarId root, llvm::Value *elem, DataType t) {
  // Shared offsets fit in 32 bits: computing them in i32 (InstCombine narrows the whole chain
  // behind the truncation) halves the registers that shared addressing holds.
  llvm::Value *byteOffset = constI32(info.vars[root].sharedByteOffset);
  if (t.storageBits() % 8 == 0) {
    llvm::Value *e = b.CreateTrunc(elem, b.getInt32Ty());
    byteOffset = addFolded(b, byteOffset, mulFolded(b, e, constI32(t.storageBits() / 8)));
  }
  return b.CreateGEP(b.getInt8Ty(), sharedBase(), byteOffset);
}

llvm::Value *Codegen::sharedOriginAddress32(VarId v) {
  SharedView view = readShared(v);
  llvm::Value *elem = sharedOffset(view.root, view.origin);
  return b.CreatePtrToInt(sharedElementAddress(view.root, elem, view.dtype), b.getInt32Ty());
}

// ---- element primitives -------------------------------------------------------------------------

namespace {

/// The aligned 32-bit words holding bits [bit, bit + n) of the bytes at `ptr`: their addresses
/// and the offset of `bit` within the first word. For N dividing 8 an element lies within one
/// byte and so within the first word (the loads and stores then leave the second one alone).
struct PackedWords {
  llvm::Value *first; // ptr
  llvm::Value *last;  // ptr
  llvm::Value *shift; // i64: bit offset within the 64-bit pair (first low, last high)
  llvm::Value *same;  // i1: first == last
};

PackedWords packedWords(llvm::IRBuilder<> &b, llvm::Value *ptr, llvm::Value *bit, int n) {
  llvm::Value *byte = b.CreateAdd(b.CreatePtrToInt(ptr, b.getInt64Ty()), b.CreateAShr(bit, 3));
  llvm::Value *firstWord =
      b.CreateIntToPtr(b.CreateAnd(byte, b.getInt64(~uint64_t(3))), ptr->getType());
  llvm::Value *shift = b.CreateAdd(b.CreateShl(b.CreateAnd(byte, b.getInt64(3)), 3),
                                   b.CreateAnd(bit, b.getInt64(7)));
  llvm::Value *lastByte =
      b.CreateAdd(b.CreatePtrToInt(ptr, b.getInt64Ty()),
                  b.CreateAShr(b.CreateAdd(bit, b.getInt64(uint64_t(n - 1))), 3));
  llvm::Value *lastWord = b.CreateAnd(lastByte, b.getInt64(~uint64_t(3)));
  PackedWords w;
  w.first = firstWord;
  w.last = b.CreateIntToPtr(lastWord, ptr->getType());
  w.shift = shift;
  w.same = b.CreateICmpEQ(b.CreatePtrToInt(firstWord, b.getInt64Ty()), lastWord);
  return w;
}

} // namespace

llvm::Value *Codegen::loadElement(llvm::Value *ptr, llvm::Value *elem, DataType t) {
  int sb = t.storageBits();
  if (sb % 8 == 0) {
    llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), ptr, b.CreateMul(elem, constI64(sb / 8)));
    if (t.isBool()) {
      llvm::Value *byte = b.CreateAlignedLoad(b.getInt8Ty(), addr, llvm::Align(1));
      return b.CreateICmpNE(byte, b.getInt8(0));
    }
    return b.CreateAlignedLoad(elemType(t), addr, llvm::Align(uint64_t(sb / 8)));
  }
  llvm::Value *bit = b.CreateMul(elem, constI64(sb));
  PackedWords w = packedWords(b, ptr, bit, sb);
  llvm::Value *lo =
      b.CreateZExt(b.CreateAlignedLoad(b.getInt32Ty(), w.first, llvm::Align(4)), b.getInt64Ty());
  if (8 % sb == 0) // within one byte, so within one word
    return b.CreateTrunc(b.CreateLShr(lo, w.shift), elemType(t));
  llvm::Value *hi =
      b.CreateZExt(b.CreateAlignedLoad(b.getInt32Ty(), w.last, llvm::Align(4)), b.getInt64Ty());
  llvm::Value *pair = b.CreateOr(lo, b.CreateSelect(w.same, constI64(0), b.CreateShl(hi, 32)));
  llvm::Value *v = b.CreateLShr(pair, w.shift);
  return b.CreateTrunc(v, elemType(t));
}

void Codegen::storeElement(llvm::Value *ptr, llvm::Value *elem, DataType t, llvm::Value *value) {
  int sb = t.storageBits();
  if (sb % 8 == 0) {
    llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), ptr, b.CreateMul(elem, constI64(sb / 8)));
    if (t.isBool()) {
      b.CreateAlignedStore(b.CreateZExt(value, b.getInt8Ty()), addr, llvm::Align(1));
      return;
    }
    b.CreateAlignedStore(value, addr, llvm::Align(uint64_t(sb / 8)));
    return;
  }
  llvm::Value *bit = b.CreateMul(elem, constI64(sb));
  PackedWords w = packedWords(b, ptr, bit, sb);
  llvm::Value *mask = b.CreateShl(constI64(int64_t(bitMask(sb))), w.shift);
  llvm::Value *bits = b.CreateShl(b.CreateZExt(toBits(value, t), b.getInt64Ty()), w.shift);
  auto update = [&](llvm::Value *word, llvm::Value *m, llvm::Value *v) {
    llvm::Value *m32 = b.CreateTrunc(m, b.getInt32Ty());
    llvm::Value *v32 = b.CreateTrunc(v, b.getInt32Ty());
    b.CreateAtomicRMW(llvm::AtomicRMWInst::And, word, b.CreateNot(m32), llvm::MaybeAlign(4),
                      llvm::AtomicOrdering::Monotonic);
    b.CreateAtomicRMW(llvm::AtomicRMWInst::Or, word, v32, llvm::MaybeAlign(4),
                      llvm::AtomicOrdering::Monotonic);
  };
  update(w.first, mask, bits);
  if (8 % sb == 0) // within one byte, so within one word
    return;
  // The high part is empty when the element does not cross into the next word.
  update(w.last, b.CreateSelect(w.same, constI64(0), b.CreateLShr(mask, 32)),
         b.CreateSelect(w.same, constI64(0), b.CreateLShr(bits, 32)));
}

} // namespace tilus::jit
