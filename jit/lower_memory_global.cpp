// LoadGlobal and StoreGlobal: register tiles to and from global memory.
//
// Slot (t, i) addresses tile index x = S(t) + Loc(i) (layout_map.h): the thread part is
// computed once per instruction, the local part is a constant per slot, so each element costs
// one add and a bounds test against constants (outside the tensor: loads give 0, stores are
// dropped; only primary owners store replicated elements).
//
// Consecutive local slots that hold consecutive elements of a dimension with a constant unit
// stride form groups of 4, 8 or 16 bytes. Each group is one predicated inline-PTX access
// (`@%p ld.global.v4.b32`, destination zeroed first; `@%p st.global.v4.b32`; the predicate is a
// `.pred` operand of the statement) predicated on "whole group in bounds and address aligned"
// (the pointer's alignment is only known at run time); a normally untaken branch handles
// partial or misaligned groups element by element (in instructions with kAsmElementPaths
// grouped slots or more as one inline-PTX statement per group). Single elements are predicated
// accesses too, so the common path has no branch, and inline PTX keeps LLVM from splitting the
// vectors again.
//
// Sub-byte (bit-packed) elements group the same way into runs of whole bytes
// (lower_memory_packed.cpp): a run of consecutive elements along a unit stride whose element
// count times N is a multiple of 8 is moved as predicated accesses of 1 to 16 bytes when its
// first bit is byte-aligned, its bytes suitably aligned and the whole run in bounds; its bytes
// hold no other element, so a store never touches a neighbour's bits. Otherwise (and for
// single elements) loadElement / storeElement (emit_memory.cpp) read the words that hold the
// element and update its bits atomically; a single element of 1, 2 or 4 bits (within one byte,
// so within one aligned word) is loaded as that byte by a predicated access and stored by two
// predicated reductions (and, or) on its word; one of 3, 5, 6 or 7 bits from and to the words of
// its first and last bit (a funnel shift; two pairs of reductions). Neither has a branch, and
// each byte or word is addressed from that of its class of constant bit offsets
// (PackedAddresses).
#include "jit/global_access.h"
#include "jit/lowering.h"
#include "jit/memory_util.h"

#include "isa/convert.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/Support/KnownBits.h>

#include <algorithm>
#include <bit>
#include <map>
#include <optional>
#include <string_view>

namespace tilus::jit {

namespace {
/// Instructions whose vector groups hold at least this many slots in all take the groups'
/// element paths as one inline-PTX statement per group (asmLoadElements, asmStoreElements).
/// Below it the element code stays IR: there it is small, and LLVM shares its bounds tests
/// with the vector path's (the asm statement takes the bounds as registers instead: up to
/// three more registers in programs/vector_add.tasm and layers/swiglu_quant.tasm).
constexpr int64_t kAsmElementPaths = 16;

/// Concatenation by appends (GCC 12 warns falsely about `"x" + std::string` chains).
std::string cat(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (std::string_view p : parts)
    out.append(p);
  return out;
}

llvm::Value *sum(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  return addFolded(b, x, y);
}
llvm::Value *product(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  return mulFolded(b, x, y);
}
/// Whether v is the constant false.
bool isFalse(llvm::Value *v) {
  auto *c = llvm::dyn_cast<llvm::ConstantInt>(v);
  return c && c->isZero();
}
/// x && y, without an instruction when either is a constant.
llvm::Value *both(llvm::IRBuilder<> &b, llvm::Value *x, llvm::Value *y) {
  if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(x))
    return c->isOne() ? y : x;
  if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(y))
    return c->isOne() ? x : y;
  return b.CreateAnd(x, y);
}

} // namespace

unsigned trailingZeros(llvm::Value *v, const llvm::DataLayout &dl, int depth) {
  if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(v))
    return c->isZero() ? 64u : c->getValue().countr_zero();
  unsigned known = llvm::computeKnownBits(v, dl).countMinTrailingZeros();
  if (depth > 24)
    return known;
  // extensions, selects and min/max (the clamps of extents) keep the zero low bits their
  // operands share
  if (auto *cast = llvm::dyn_cast<llvm::CastInst>(v);
      cast && (llvm::isa<llvm::SExtInst>(cast) || llvm::isa<llvm::ZExtInst>(cast)))
    return std::max(known, trailingZeros(cast->getOperand(0), dl, depth + 1));
  if (auto *sel = llvm::dyn_cast<llvm::SelectInst>(v))
    return std::max(known, std::min(trailingZeros(sel->getTrueValue(), dl, depth + 1),
                                    trailingZeros(sel->getFalseValue(), dl, depth + 1)));
  if (auto *mm = llvm::dyn_cast<llvm::MinMaxIntrinsic>(v))
    return std::max(known, std::min(trailingZeros(mm->getLHS(), dl, depth + 1),
                                    trailingZeros(mm->getRHS(), dl, depth + 1)));
  auto *inst = llvm::dyn_cast<llvm::BinaryOperator>(v);
  if (!inst)
    return known;
  llvm::Value *x = inst->getOperand(0), *y = inst->getOperand(1);
  switch (inst->getOpcode()) {
  case llvm::Instruction::Add:
  case llvm::Instruction::Sub:
    return std::max(known,
                    std::min(trailingZeros(x, dl, depth + 1), trailingZeros(y, dl, depth + 1)));
  case llvm::Instruction::Mul:
    return std::max(
        known, std::min(64u, trailingZeros(x, dl, depth + 1) + trailingZeros(y, dl, depth + 1)));
  case llvm::Instruction::Shl:
    if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(y))
      return std::max(known, unsigned(std::min<uint64_t>(64, trailingZeros(x, dl, depth + 1) +
                                                                 c->getZExtValue())));
    return known;
  case llvm::Instruction::SDiv:
  case llvm::Instruction::UDiv:
  case llvm::Instruction::AShr:
  case llvm::Instruction::LShr: {
    // x / 2^s and x >> s of an x with z >= s zero low bits: exact, z - s of them remain
    auto *c = llvm::dyn_cast<llvm::ConstantInt>(y);
    if (!c || c->isNegative())
      return known;
    bool shift = inst->getOpcode() == llvm::Instruction::AShr ||
                 inst->getOpcode() == llvm::Instruction::LShr;
    if (!shift && !c->getValue().isPowerOf2())
      return known;
    uint64_t s = shift ? c->getZExtValue() : c->getValue().logBase2();
    unsigned z = trailingZeros(x, dl, depth + 1);
    unsigned width = v->getType()->getIntegerBitWidth();
    if (z >= width) // x == 0
      return 64u;
    return z >= s ? std::max(known, unsigned(z - s)) : known;
  }
  default:
    return known;
  }
}

/// The alignment in bytes that `ptr` is known to have: its own (a parameter's `align`, the
/// workspace's 256 bytes), or for a byte GEP from a base (a workspace region, Codegen's
/// workspaceRegion) the base's, limited by the zero low bits of the offset.
uint64_t knownAlignment(llvm::Value *ptr, const llvm::DataLayout &dl) {
  uint64_t own = ptr->getPointerAlignment(dl).value();
  auto *gep = llvm::dyn_cast<llvm::GetElementPtrInst>(ptr);
  if (!gep || gep->getNumIndices() != 1 || !gep->getSourceElementType()->isIntegerTy(8))
    return own;
  unsigned tz = std::min(63u, trailingZeros(gep->getOperand(1), dl, 0));
  return std::max(own, std::min(knownAlignment(gep->getPointerOperand(), dl), uint64_t(1) << tz));
}

llvm::Value *alignedTest(llvm::IRBuilder<> &b, llvm::Value *ptr, llvm::Value *addr,
                         llvm::Value *elem, int es, int bytes) {
  const llvm::DataLayout &dl = b.GetInsertBlock()->getModule()->getDataLayout();
  if (knownAlignment(ptr, dl) >= uint64_t(bytes)) {
    unsigned tz = std::min(63u, trailingZeros(elem, dl) + unsigned(std::countr_zero(unsigned(es))));
    if ((uint64_t(1) << tz) >= uint64_t(bytes))
      return b.getTrue();
  }
  return b.CreateICmpEQ(
      b.CreateAnd(b.CreatePtrToInt(addr, b.getInt64Ty()), b.getInt64(uint64_t(bytes - 1))),
      b.getInt64(0));
}

namespace {

/// "ptr + (bit >> 3) is a multiple of `unit` bytes and bit % 8 == 0" for the first bit `bit` =
/// elem * bits of a packed run: the constant true when the pointer's alignment and the zero low
/// bits of elem prove it, otherwise a run-time test.
llvm::Value *packedAlignedTest(llvm::IRBuilder<> &b, llvm::Value *ptr, llvm::Value *addr,
                               llvm::Value *elem, llvm::Value *bit, int bits, int unit) {
  const llvm::DataLayout &dl = b.GetInsertBlock()->getModule()->getDataLayout();
  unsigned need = 3 + unsigned(std::countr_zero(unsigned(unit)));
  bool ptrAligned = knownAlignment(ptr, dl) >= uint64_t(unit);
  if (ptrAligned &&
      std::min(64u, trailingZeros(elem, dl) + unsigned(std::countr_zero(unsigned(bits)))) >= need)
    return b.getTrue();
  if (ptrAligned) // the bit offset alone decides
    return b.CreateICmpEQ(b.CreateAnd(bit, b.getInt64((uint64_t(1) << need) - 1)), b.getInt64(0));
  llvm::Value *byteAligned = b.CreateICmpEQ(b.CreateAnd(bit, b.getInt64(7)), b.getInt64(0));
  if (unit == 1)
    return byteAligned;
  llvm::Value *addrAligned = b.CreateICmpEQ(
      b.CreateAnd(b.CreatePtrToInt(addr, b.getInt64Ty()), b.getInt64(uint64_t(unit - 1))),
      b.getInt64(0));
  return b.CreateAnd(byteAligned, addrAligned);
}

/// Per-thread addressing of a global tile for a register layout.
struct GlobalAccess {
  llvm::Value *threadBase;           // i64 element offset of x = S(t)
  std::vector<llvm::Value *> lo, hi; // bounds on Loc_k (thread part subtracted)
  std::vector<llvm::Value *> stride;
  llvm::Value *valid;
  /// Whether some local term indexes dimension k (otherwise Loc_k is 0 in every slot), and
  /// `valid` with the bounds of the dimensions that have none (inBounds tests them once).
  std::vector<bool> varies;
  llvm::Value *fixedIn = nullptr;
  /// lo and hi saturated to [-1, 2^31 - 1] as i32 (narrowBounds), for the element paths'
  /// comparisons with non-negative constants; nullptr where not computed.
  std::vector<llvm::Value *> lo32, hi32;
  /// The alignment tests of the groups so far (groupAligned), in the instruction's main line.
  std::map<std::vector<int64_t>, llvm::Value *> aligned;
  /// Per dimension, the zero low bits that lo and hi share (groupUncut), computed once; -1
  /// until then.
  std::vector<int> boundZeros;
};

/// lo_d <= loc_d < hi_d in one dimension.
llvm::Value *inBoundsAlong(llvm::IRBuilder<> &b, const GlobalAccess &a, const int64_t *loc, int d) {
  llvm::Value *c = b.getInt64(uint64_t(loc[d]));
  return b.CreateAnd(b.CreateICmpSLE(a.lo[size_t(d)], c), b.CreateICmpSGT(a.hi[size_t(d)], c));
}

/// Sets a.varies and a.fixedIn (after a.valid is final).
void fixBounds(llvm::IRBuilder<> &b, GlobalAccess &a, const LayoutMap &map) {
  int rank = map.rank();
  a.varies.assign(size_t(rank), false);
  for (const LayoutTerm &term : map.localTerms())
    a.varies[size_t(term.dim)] = true;
  std::vector<int64_t> zero(size_t(rank), 0);
  a.fixedIn = a.valid;
  for (int k = 0; k < rank; ++k)
    if (!a.varies[size_t(k)])
      a.fixedIn = both(b, a.fixedIn, inBoundsAlong(b, a, zero.data(), k));
}

GlobalAccess globalAccess(Codegen &cg, const GlobalTile &tile, const LayoutMap &map) {
  llvm::IRBuilder<> &b = cg.b;
  const std::vector<llvm::Value *> &s = cg.threadPart(map);
  GlobalAccess a;
  a.threadBase = tile.offset;
  a.valid = tile.valid;
  a.stride = tile.strides;
  for (int k = 0; k < map.rank(); ++k) {
    a.threadBase = sum(b, a.threadBase, product(b, s[size_t(k)], tile.strides[size_t(k)]));
    a.lo.push_back(b.CreateSub(tile.lo[size_t(k)], s[size_t(k)]));
    a.hi.push_back(b.CreateSub(tile.hi[size_t(k)], s[size_t(k)]));
  }
  return a;
}

llvm::Value *inBounds(llvm::IRBuilder<> &b, const GlobalAccess &a, const int64_t *loc, int rank) {
  llvm::Value *ok = a.fixedIn;
  for (int k = 0; k < rank; ++k)
    if (a.varies[size_t(k)])
      ok = both(b, ok, inBoundsAlong(b, a, loc, k));
  return ok;
}

/// The view is valid and loc is in bounds in every dimension but `skip`.
llvm::Value *inBoundsExcept(llvm::IRBuilder<> &b, const GlobalAccess &a, const int64_t *loc,
                            int rank, int skip) {
  llvm::Value *ok = a.fixedIn;
  for (int k = 0; k < rank; ++k)
    if (k != skip && a.varies[size_t(k)])
      ok = both(b, ok, inBoundsAlong(b, a, loc, k));
  return ok;
}

llvm::Value *elementOffset(llvm::IRBuilder<> &b, const GlobalAccess &a, const int64_t *loc,
                           int rank) {
  llvm::Value *e = a.threadBase;
  for (int k = 0; k < rank; ++k)
    if (loc[k] != 0)
      e = sum(b, e, product(b, b.getInt64(uint64_t(loc[k])), a.stride[size_t(k)]));
  return e;
}

} // namespace

namespace {

/// How the accesses of an instruction are made: plain (`ld.global` with the load's eviction
/// `hint`, `st.global`: LoadGlobal, StoreGlobal) or relaxed at gpu scope (`ld.relaxed.gpu.global`,
/// `st.relaxed.gpu.global`: AtomicLoad and AtomicStore of 32-bit elements, where each 32-bit word
/// of a vector access is one element's relaxed access; docs/isa.md), which also take the memory
/// clobber of the other atomics.
struct GlobalOp {
  bool relaxed = false;
  std::string_view hint; // an eviction-priority qualifier of plain loads (evictionQualifier)

  std::string ld() const { return relaxed ? "ld.relaxed.gpu.global" : cat({"ld.global", hint}); }
  std::string st() const { return relaxed ? "st.relaxed.gpu.global" : "st.global"; }
  const char *clobber() const { return relaxed ? ",~{memory}" : ""; }
};

/// Predicated global load of `bytes` bytes (1, 2, 4, 8 or 16) at `addr` as inline PTX: the
/// result is zero when `pred` is false. Loads of 4 bytes and more are vectors of 32-bit words.
/// Returns the loaded bytes as 32-bit words (or one i16 for 1 and 2 bytes).
std::vector<llvm::Value *> asmLoadGlobal(llvm::IRBuilder<> &b, llvm::Value *addr, llvm::Value *pred,
                                         int bytes, const GlobalOp &op) {
  int words = bytes >= 4 ? bytes / 4 : 1;
  bool narrow = bytes < 4;
  std::string regs, zero;
  std::string constraints;
  for (int w = 0; w < words; ++w) {
    std::string reg = cat({"$", std::to_string(w)});
    regs += w ? ", " : "";
    regs += reg;
    zero += narrow ? "mov.b16 " : "mov.b32 ";
    zero += reg;
    zero += ", 0; ";
    constraints += narrow ? "=h," : "=r,";
  }
  std::string type = bytes == 1 ? "u8" : bytes == 2 ? "b16" : "b32";
  std::string vec = words == 1 ? "" : cat({"v", std::to_string(words), "."});
  std::string load = cat({op.ld(), ".", vec, type, " ", words == 1 ? regs : cat({"{", regs, "}"}),
                          ", [$", std::to_string(words), "];"});
  bool always = llvm::isa<llvm::ConstantInt>(pred) && llvm::cast<llvm::ConstantInt>(pred)->isOne();
  std::string text;
  if (always) {
    text = load;
    constraints += "l";
  } else {
    text = cat({"{ ", zero, "@$", std::to_string(words + 1), " ", load, " }"});
    constraints += "l,b";
  }
  constraints += op.clobber();
  llvm::Type *wordType = narrow ? b.getInt16Ty() : b.getInt32Ty();
  llvm::Type *ret = wordType;
  if (words > 1)
    ret = llvm::StructType::get(b.getContext(), std::vector<llvm::Type *>(size_t(words), wordType));
  std::vector<llvm::Type *> params = {b.getInt64Ty()};
  std::vector<llvm::Value *> args = {b.CreatePtrToInt(addr, b.getInt64Ty())};
  if (!always) {
    params.push_back(b.getInt1Ty());
    args.push_back(pred);
  }
  auto *asmType = llvm::FunctionType::get(ret, params, false);
  llvm::InlineAsm *ia = llvm::InlineAsm::get(asmType, text, constraints, /*hasSideEffects=*/true);
  llvm::Value *r = b.CreateCall(ia, args);
  std::vector<llvm::Value *> out;
  for (int w = 0; w < words; ++w)
    out.push_back(words == 1 ? r : b.CreateExtractValue(r, unsigned(w)));
  return out;
}

/// Predicated global store of the words (i32, or one i16 / i8 value) at `addr`.
void asmStoreGlobal(llvm::IRBuilder<> &b, llvm::Value *addr, llvm::Value *pred,
                    const std::vector<llvm::Value *> &words, int bytes, const GlobalOp &op) {
  int n = int(words.size());
  bool narrow = bytes < 4;
  std::string type = bytes == 1 ? "u8" : bytes == 2 ? "b16" : "b32";
  std::string vec = n == 1 ? "" : cat({"v", std::to_string(n), "."});
  bool always = llvm::isa<llvm::ConstantInt>(pred) && llvm::cast<llvm::ConstantInt>(pred)->isOne();
  int first = always ? 1 : 2; // operand number of the first value
  std::string regs;
  for (int w = 0; w < n; ++w) {
    regs += w ? ", $" : "$";
    regs += std::to_string(first + w);
  }
  std::string store = cat({op.st(), ".", vec, type, " [$", std::to_string(first - 1), "], ",
                           n == 1 ? regs : cat({"{", regs, "}"}), ";"});
  std::string text = always ? store : cat({"@$0 ", store});
  std::string constraints = always ? "l" : "b,l";
  std::vector<llvm::Type *> params;
  std::vector<llvm::Value *> args;
  if (!always) {
    params.push_back(b.getInt1Ty());
    args.push_back(pred);
  }
  params.push_back(b.getInt64Ty());
  args.push_back(b.CreatePtrToInt(addr, b.getInt64Ty()));
  for (llvm::Value *w : words) {
    llvm::Value *v = narrow ? b.CreateZExtOrTrunc(w, b.getInt16Ty()) : w;
    params.push_back(v->getType());
    args.push_back(v);
    constraints += narrow ? ",h" : ",r";
  }
  constraints += op.clobber();
  auto *asmType = llvm::FunctionType::get(b.getVoidTy(), params, false);
  b.CreateCall(llvm::InlineAsm::get(asmType, text, constraints, true), args);
}

/// A sub-byte element of 1, 2 or 4 bits (bool is a byte): it lies within one byte, so within one
/// aligned 32-bit word.
bool withinByte(DataType t) { return !t.isBool() && 8 % t.storageBits() == 0; }

/// The addresses of a tile's sub-byte elements in units of `unitBits` (8: the byte that holds an
/// element of 1, 2 or 4 bits, for loads; 32: the aligned words that hold an element, for the
/// loads of wider ones and for the reductions of stores).
/// Element threadBase + c lies at bit A = 8 ptr + N threadBase + N c of memory. Writing
/// N c = unitBits q + s (0 <= s < unitBits), its unit is U_s + q and its shift within the unit
/// the shift of class s, where U_s and the shift are those of 8 ptr + N threadBase + s: computed
/// once per class (at most unitBits / gcd(N, unitBits) classes per instruction), so that each
/// element costs one address plus a constant. Elements whose offset is not a constant (a
/// stride that is not one) take their own address.
class PackedAddresses {
public:
  PackedAddresses(Codegen &cg, const GlobalAccess &a, llvm::Value *ptr, int bits, int unitBits)
      : cg_(cg), a_(a), ptr_(ptr), bits_(bits), unitBits_(unitBits) {}

  struct Unit {
    llvm::Value *addr;  // ptr
    llvm::Value *shift; // i32
    /// the unit that holds the element's last bit: addr, or the next unit where the element
    /// straddles two (only for widths that do not divide the unit; else addr)
    llvm::Value *last;
  };

  Unit at(const int64_t *loc, int rank) {
    llvm::IRBuilder<> &b = cg_.b;
    std::optional<int64_t> c = constantPart(loc, rank);
    if (!c) {
      llvm::Value *bit = b.CreateMul(elementOffset(b, a_, loc, rank), cg_.constI64(int64_t(bits_)));
      return unitOf(b.CreateAdd(pointerBits(), bit));
    }
    int64_t nc = *c * bits_;
    int64_t q = nc >= 0 ? nc / unitBits_ : -((-nc + unitBits_ - 1) / unitBits_);
    int64_t s = nc - q * unitBits_;
    auto it = classes_.find(s);
    if (it == classes_.end())
      it = classes_.emplace(s, unitOf(b.CreateAdd(threadBits(), cg_.constI64(s)))).first;
    llvm::Value *step = cg_.constI64(q * (unitBits_ / 8));
    llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), it->second.addr, step);
    llvm::Value *last = it->second.last == it->second.addr
                            ? addr
                            : b.CreateGEP(b.getInt8Ty(), it->second.last, step);
    return Unit{addr, it->second.shift, last};
  }

private:
  /// sum_k loc_k stride_k where every stride of a nonzero loc_k is a constant
  std::optional<int64_t> constantPart(const int64_t *loc, int rank) const {
    int64_t c = 0;
    for (int k = 0; k < rank; ++k) {
      if (loc[k] == 0)
        continue;
      auto *st = llvm::dyn_cast<llvm::ConstantInt>(a_.stride[size_t(k)]);
      if (!st)
        return std::nullopt;
      c += loc[k] * st->getSExtValue();
    }
    return c;
  }
  /// 8 ptr: the tile's origin as a bit address
  llvm::Value *pointerBits() {
    if (!pointerBits_)
      pointerBits_ = cg_.b.CreateShl(cg_.b.CreatePtrToInt(ptr_, cg_.b.getInt64Ty()), 3);
    return pointerBits_;
  }
  /// 8 ptr + N threadBase: the thread's first element as a bit address
  llvm::Value *threadBits() {
    if (!threadBits_)
      threadBits_ = cg_.b.CreateAdd(pointerBits(),
                                    cg_.b.CreateMul(a_.threadBase, cg_.constI64(int64_t(bits_))));
    return threadBits_;
  }
  Unit unitOf(llvm::Value *bitAddress) {
    llvm::IRBuilder<> &b = cg_.b;
    int log = unitBits_ == 8 ? 3 : 5;
    auto unitAt = [&](llvm::Value *bit) {
      return b.CreateIntToPtr(b.CreateShl(b.CreateLShr(bit, uint64_t(log)), uint64_t(log - 3)),
                              ptr_->getType());
    };
    llvm::Value *addr = unitAt(bitAddress);
    llvm::Value *shift =
        b.CreateTrunc(b.CreateAnd(bitAddress, cg_.constI64(unitBits_ - 1)), b.getInt32Ty());
    llvm::Value *last = unitBits_ % bits_ == 0
                            ? addr
                            : unitAt(b.CreateAdd(bitAddress, cg_.constI64(int64_t(bits_ - 1))));
    return Unit{addr, shift, last};
  }

  Codegen &cg_;
  const GlobalAccess &a_;
  llvm::Value *ptr_;
  int bits_, unitBits_;
  llvm::Value *pointerBits_ = nullptr, *threadBits_ = nullptr;
  std::map<int64_t, Unit> classes_;
};

/// `word &= clear; word |= set` as two relaxed reductions at gpu scope (the bits of the other
/// elements of the word stay; other threads update theirs the same way), both predicated on
/// `pred`.
void redAndOr(llvm::IRBuilder<> &b, llvm::Value *word, llvm::Value *pred, llvm::Value *clear,
              llvm::Value *set) {
  auto *type = llvm::FunctionType::get(
      b.getVoidTy(), {b.getInt1Ty(), b.getInt64Ty(), b.getInt32Ty(), b.getInt32Ty()}, false);
  b.CreateCall(llvm::InlineAsm::get(type,
                                    "{ @$0 red.relaxed.gpu.global.and.b32 [$1], $2; @$0 "
                                    "red.relaxed.gpu.global.or.b32 [$1], $3; }",
                                    "b,l,r,r,~{memory}", true),
               {pred, b.CreatePtrToInt(word, b.getInt64Ty()), clear, set});
}

/// Split 32-bit words (or one i16) into `count` elements of type t (little-endian).
std::vector<llvm::Value *> wordsToElements(Codegen &cg, const std::vector<llvm::Value *> &words,
                                           int bytes, DataType t, int64_t count) {
  llvm::IRBuilder<> &b = cg.b;
  int es = t.storageBits() / 8;
  std::vector<llvm::Value *> out;
  if (bytes < 4) { // one element of 1 or 2 bytes
    llvm::Value *v = b.CreateTrunc(words[0], b.getIntNTy(unsigned(es * 8)));
    out.push_back(t.isBool() ? b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0))
                             : cg.fromBits(v, t));
    return out;
  }
  for (int64_t j = 0; j < count; ++j) {
    int64_t byte = j * es;
    llvm::Value *v;
    if (es == 8) {
      llvm::Value *lo = b.CreateZExt(words[size_t(byte / 4)], b.getInt64Ty());
      llvm::Value *hi = b.CreateZExt(words[size_t(byte / 4 + 1)], b.getInt64Ty());
      v = b.CreateOr(lo, b.CreateShl(hi, 32));
    } else {
      llvm::Value *w = words[size_t(byte / 4)];
      if (byte % 4 != 0)
        w = b.CreateLShr(w, uint64_t((byte % 4) * 8));
      v = b.CreateTrunc(w, b.getIntNTy(unsigned(es * 8)));
    }
    out.push_back(t.isBool() ? b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0))
                             : cg.fromBits(v, t));
  }
  return out;
}

/// Pack `values` (elements of type t) into 32-bit words (or one i16 / i8 below 4 bytes).
std::vector<llvm::Value *> elementsToWords(Codegen &cg, const std::vector<llvm::Value *> &values,
                                           DataType t) {
  llvm::IRBuilder<> &b = cg.b;
  int es = t.storageBits() / 8;
  int bytes = es * int(values.size());
  auto bitsOf = [&](llvm::Value *v) {
    return t.isBool() ? b.CreateZExt(v, b.getInt8Ty()) : cg.toBits(v, t);
  };
  if (bytes < 4)
    return {bitsOf(values[0])};
  std::vector<llvm::Value *> words(size_t(bytes / 4), b.getInt32(0));
  for (size_t j = 0; j < values.size(); ++j) {
    int64_t byte = int64_t(j) * es;
    llvm::Value *bits = bitsOf(values[j]);
    if (es == 8) {
      words[size_t(byte / 4)] = b.CreateTrunc(bits, b.getInt32Ty());
      words[size_t(byte / 4 + 1)] = b.CreateTrunc(b.CreateLShr(bits, 32), b.getInt32Ty());
      continue;
    }
    llvm::Value *w = b.CreateZExt(bits, b.getInt32Ty());
    if (byte % 4 != 0)
      w = b.CreateShl(w, uint64_t((byte % 4) * 8));
    llvm::Value *&word = words[size_t(byte / 4)];
    word = llvm::isa<llvm::ConstantInt>(word) && llvm::cast<llvm::ConstantInt>(word)->isZero()
               ? w
               : b.CreateOr(word, w);
  }
  return words;
}

bool nativeAccess(DataType t) { return t.storageBits() % 8 == 0 && t.storageBits() <= 64; }

/// Bit-packed elements (N < 8 bits; bool is a byte).
bool packedAccess(DataType t) { return t.storageBits() < 8; }

/// The widest and narrowest slot groups worth one vector access for elements of type t (width
/// 1: no groups).
std::pair<int, int> groupWidths(DataType t, int64_t locals) {
  if (packedAccess(t))
    return {packedMaxWidth(t.storageBits(), locals), packedMinWidth(t.storageBits())};
  int es = t.storageBits() / 8;
  return {nativeAccess(t) ? vectorWidth(es, locals) : 1, minVectorWidth(std::max(1, es))};
}

/// Which tile dimensions have the constant stride 1.
std::vector<bool> unitStrides(const GlobalAccess &a) {
  std::vector<bool> unit;
  for (llvm::Value *stride : a.stride)
    unit.push_back(isConstOne(stride));
  return unit;
}

/// The vector access of a slot group along g.dim: its address and size, and the tests of its
/// two paths. The group's elements agree on being in or out of bounds in the other dimensions
/// (the thread's row of a partial tile is out as a whole), so only a group cut by the bounds of
/// g.dim, or misaligned, takes the element path. A group that no bound can cut (`uncut`: its
/// first local index and both bounds along g.dim are multiples of its power-of-two size, so its
/// elements are all in or all out) takes the element path only when misaligned: with alignment
/// proven too (pointers of 16-byte alignment, divisible extents) the path is gone.
struct GroupTests {
  llvm::Value *elem = nullptr; // element offset of the group's first element
  llvm::Value *addr = nullptr;
  int bytes = 0;
  int unit = 0; // bytes per access (bytes, or a packed run's unit)
  bool uncut = false;
  llvm::Value *othersIn = nullptr, *runIn = nullptr, *aligned = nullptr;
  llvm::Value *fast = nullptr; // the vector path: all in bounds and aligned
  /// The element path: in bounds in the other dimensions, but cut along g.dim or misaligned.
  llvm::Value *slow(llvm::IRBuilder<> &b) const {
    if (uncut)
      return both(b, othersIn, both(b, runIn, b.CreateNot(aligned)));
    return both(b, othersIn, b.CreateNot(both(b, runIn, aligned)));
  }
};

/// Whether no bound along dimension d can cut a group of `count` elements (a power of two)
/// whose first local index is `first`: first and the bounds a.lo[d], a.hi[d] (local
/// coordinates) are all multiples of count, so first in bounds means the whole group is.
bool groupUncut(llvm::IRBuilder<> &b, GlobalAccess &a, int d, int64_t first, int64_t count) {
  if (count < 2 || !std::has_single_bit(uint64_t(count)) || first % count != 0)
    return false;
  a.boundZeros.resize(a.lo.size(), -1);
  int &zeros = a.boundZeros[size_t(d)];
  if (zeros < 0) {
    const llvm::DataLayout &dl = b.GetInsertBlock()->getModule()->getDataLayout();
    zeros = int(std::min(trailingZeros(a.lo[size_t(d)], dl), trailingZeros(a.hi[size_t(d)], dl)));
  }
  return zeros >= std::countr_zero(uint64_t(count));
}

/// alignedTest of a group's address, shared by the groups whose addresses differ from an
/// earlier group's by a constant multiple of `bytes` (the same local part in the dimensions of
/// run-time stride): one test per row of a tile instead of one per group.
llvm::Value *groupAligned(llvm::IRBuilder<> &b, GlobalAccess &a, llvm::Value *ptr,
                          llvm::Value *addr, llvm::Value *elem, const int64_t *loc, int rank,
                          int es, int bytes) {
  std::vector<int64_t> key = {bytes};
  int64_t constant = 0;
  for (int k = 0; k < rank; ++k) {
    if (auto *c = llvm::dyn_cast<llvm::ConstantInt>(a.stride[size_t(k)]))
      constant += loc[k] * c->getSExtValue();
    else
      key.push_back(loc[k]);
  }
  key.push_back(((constant * es) % bytes + bytes) % bytes);
  llvm::Value *&test = a.aligned[key];
  if (!test)
    test = alignedTest(b, ptr, addr, elem, es, bytes);
  return test;
}

GroupTests groupTests(Codegen &cg, GlobalAccess &a, llvm::Value *ptr, const LayoutMap &map,
                      const SlotGroup &g, DataType t) {
  llvm::IRBuilder<> &b = cg.b;
  int rank = map.rank();
  const int64_t *first = map.localPart(g.first);
  const int64_t *last = map.localPart(g.first + g.count - 1);
  GroupTests tests;
  llvm::Value *elem = elementOffset(b, a, first, rank);
  tests.elem = elem;
  if (packedAccess(t)) {
    int bits = t.storageBits();
    llvm::Value *bit = b.CreateMul(elem, cg.constI64(bits));
    PackedRun run = packedRun(bits, g.count);
    tests.addr = b.CreateGEP(b.getInt8Ty(), ptr, b.CreateAShr(bit, 3));
    tests.bytes = run.bytes;
    tests.unit = run.unit;
    tests.aligned = packedAlignedTest(b, ptr, tests.addr, elem, bit, bits, run.unit);
  } else {
    int es = t.storageBits() / 8;
    tests.addr = b.CreateGEP(b.getInt8Ty(), ptr, b.CreateMul(elem, cg.constI64(es)));
    tests.bytes = es * int(g.count);
    tests.unit = tests.bytes;
    tests.aligned = groupAligned(b, a, ptr, tests.addr, elem, first, rank, es, tests.bytes);
  }
  tests.othersIn = inBoundsExcept(b, a, first, rank, g.dim);
  tests.uncut = groupUncut(b, a, g.dim, first[g.dim], g.count);
  tests.runIn = tests.uncut ? inBoundsAlong(b, a, first, g.dim)
                            : b.CreateAnd(inBoundsAlong(b, a, first, g.dim),
                                          inBoundsAlong(b, a, last, g.dim));
  tests.fast = both(b, tests.othersIn, both(b, tests.runIn, tests.aligned));
  return tests;
}

/// Element j of a group on its element path: in bounds when the others are (tests.othersIn) and
/// lo <= first + j < hi along g.dim (the group's elements differ only there, by unit steps), at
/// element offset elem + j. Equal to inBounds / elementOffset of the element's own slot, from
/// the group's terms.
llvm::Value *groupElementIn(llvm::IRBuilder<> &b, const GlobalAccess &a, const LayoutMap &map,
                            const SlotGroup &g, const GroupTests &tests, int64_t j) {
  const int64_t *loc = map.localPart(g.first + j);
  return both(b, tests.othersIn, inBoundsAlong(b, a, loc, g.dim));
}

/// The PTX register type of an element of `es` bytes in inline assembly: its constraint letter
/// and the width of the LLVM integer that carries it (bytes go in 16-bit registers).
std::pair<const char *, int> elementRegister(int es) {
  switch (es) {
  case 1:
  case 2:
    return {"h", 16};
  case 4:
    return {"r", 32};
  }
  return {"l", 64};
}

/// Sets a.lo32 and a.hi32 for the dimensions that groups of more than one slot run along: i32
/// copies of the bounds that compare with the constants 0 <= k < 2^31 - 1 as the i64 bounds do,
/// computed once per instruction (two registers where the i64 bounds would take four).
void narrowBounds(Codegen &cg, GlobalAccess &a, const std::vector<SlotGroup> &groups) {
  llvm::IRBuilder<> &b = cg.b;
  IrArithmetic ir{cg};
  a.lo32.assign(a.lo.size(), nullptr);
  a.hi32.assign(a.hi.size(), nullptr);
  auto narrow = [&](llvm::Value *v) {
    llvm::Value *sat = ir.min(ir.max(v, cg.constI64(-1)), cg.constI64(INT32_MAX));
    return b.CreateTrunc(sat, b.getInt32Ty());
  };
  for (const SlotGroup &g : groups) {
    size_t d = size_t(g.dim);
    if (g.count == 1 || a.lo32[d])
      continue;
    a.lo32[d] = narrow(a.lo[d]);
    a.hi32[d] = narrow(a.hi[d]);
  }
}

/// Whether the element paths of the vector groups take the inline-PTX form (native element
/// types, at least kAsmElementPaths slots in groups of more than one); then with narrowBounds.
bool useAsmElementPaths(Codegen &cg, GlobalAccess &a, DataType t,
                        const std::vector<SlotGroup> &groups) {
  int64_t grouped = 0;
  for (const SlotGroup &g : groups)
    grouped += g.count > 1 ? g.count : 0;
  if (!nativeAccess(t) || grouped < kAsmElementPaths)
    return false;
  narrowBounds(cg, a, groups);
  return true;
}

/// The bounds of a group's element path in inline PTX: element j is in bounds when
/// lo <= c + j < hi for the group's bounds `lo`, `hi` (i64) along g.dim and c = Loc(first) there
/// (the other dimensions are in bounds on the element path: tests.othersIn). A constant bound
/// is decided at compile time; the others are asm operands (`operands`, from number `first`).
struct ElementBounds {
  std::optional<int64_t> lo, hi; // the constant bounds
  int loOperand = -1, hiOperand = -1;
  std::vector<llvm::Value *> operands;

  /// With `c` = Loc(first) along g.dim. A bound that holds for the whole group (the tests the
  /// vector path makes of its first and last element) is passed as the saturated constant, so
  /// that where LLVM proves those tests (a loop variable's range) the operand is a constant.
  ElementBounds(llvm::IRBuilder<> &b, const GlobalAccess &a, const SlotGroup &g, int64_t c,
                int first) {
    size_t d = size_t(g.dim);
    for (int side = 0; side < 2; ++side) {
      llvm::Value *v = side ? a.hi[d] : a.lo[d];
      std::optional<int64_t> &k = side ? hi : lo;
      if (auto *known = llvm::dyn_cast<llvm::ConstantInt>(v)) {
        k = known->getSExtValue();
        continue;
      }
      llvm::Value *whole = side ? b.CreateICmpSGT(v, b.getInt64(uint64_t(c + g.count - 1)))
                                : b.CreateICmpSLE(v, b.getInt64(uint64_t(c)));
      (side ? hiOperand : loOperand) = first + int(operands.size());
      operands.push_back(b.CreateSelect(whole, b.getInt32(side ? INT32_MAX : uint32_t(-1)),
                                        side ? a.hi32[d] : a.lo32[d]));
    }
  }

  /// The PTX that sets predicate p for element index k (= c + j) and the access's guard ("@p ",
  /// or "" when the element is in bounds for certain); nullopt when it is out for certain.
  std::optional<std::pair<std::string, std::string>> test(int64_t k) const {
    if ((lo && *lo > k) || (hi && *hi <= k))
      return std::nullopt;
    std::string at = std::to_string(k);
    if (loOperand >= 0 && hiOperand >= 0)
      return std::pair{
          cat({"setp.le.s32 q, $", std::to_string(loOperand), ", ", at, "; setp.gt.and.s32 p, $",
               std::to_string(hiOperand), ", ", at, ", q; "}),
          std::string("@p ")};
    if (loOperand >= 0)
      return std::pair{cat({"setp.le.s32 p, $", std::to_string(loOperand), ", ", at, "; "}),
                       std::string("@p ")};
    if (hiOperand >= 0)
      return std::pair{cat({"setp.gt.s32 p, $", std::to_string(hiOperand), ", ", at, "; "}),
                       std::string("@p ")};
    return std::pair{std::string(), std::string()};
  }

  /// The bound operands after the address: one 32-bit register each.
  void appendOperands(llvm::IRBuilder<> &b, std::string &constraints,
                      std::vector<llvm::Type *> &params, std::vector<llvm::Value *> &args) const {
    for (llvm::Value *v : operands) {
      constraints += ",r";
      params.push_back(b.getInt32Ty());
      args.push_back(v);
    }
  }
};

/// The element path of a native group (elements of es bytes at `addr`) as one inline-PTX
/// statement: element j is loaded when it is in bounds (ElementBounds) and is 0 otherwise. One
/// call instead of a bounds test and an access per element in the IR: the same PTX (the tests
/// and a predicated access per element) for a fraction of the optimiser's and backend's time.
std::vector<llvm::Value *> asmLoadElements(llvm::IRBuilder<> &b, llvm::Value *addr,
                                           const GlobalAccess &a, const LayoutMap &map,
                                           const SlotGroup &g, int es, const GlobalOp &op) {
  auto [reg, regBits] = elementRegister(es);
  std::string type = es == 1 ? "u8" : cat({"b", std::to_string(es * 8)});
  std::string mov = cat({"mov.b", std::to_string(regBits), " $"});
  int n = int(g.count);
  int64_t c = map.localPart(g.first)[g.dim];
  ElementBounds bounds(b, a, g, c, n + 1);
  std::string text = "{ .reg .pred p, q; ";
  std::string constraints;
  for (int j = 0; j < n; ++j) {
    std::string out = std::to_string(j);
    text += cat({mov, out, ", 0; "});
    if (auto test = bounds.test(c + j))
      text += cat({test->first, test->second, op.ld(), ".", type, " $", out, ", [$",
                   std::to_string(n), "+", std::to_string(j * es), "]; "});
    constraints += cat({"=", reg, ","});
  }
  text += "}";
  constraints += "l";
  std::vector<llvm::Type *> params = {b.getInt64Ty()};
  std::vector<llvm::Value *> args = {b.CreatePtrToInt(addr, b.getInt64Ty())};
  bounds.appendOperands(b, constraints, params, args);
  constraints += op.clobber();
  llvm::Type *regType = b.getIntNTy(unsigned(regBits));
  auto *ret = llvm::StructType::get(b.getContext(), std::vector<llvm::Type *>(size_t(n), regType));
  auto *asmType = llvm::FunctionType::get(ret, params, false);
  llvm::Value *r = b.CreateCall(llvm::InlineAsm::get(asmType, text, constraints, true), args);
  std::vector<llvm::Value *> out;
  for (int j = 0; j < n; ++j)
    out.push_back(
        b.CreateTrunc(b.CreateExtractValue(r, unsigned(j)), b.getIntNTy(unsigned(es * 8))));
  return out;
}

/// The store counterpart: element j (`bits[j]`, es bytes) is stored when it is in bounds.
void asmStoreElements(llvm::IRBuilder<> &b, llvm::Value *addr, const GlobalAccess &a,
                      const LayoutMap &map, const SlotGroup &g, int es,
                      const std::vector<llvm::Value *> &bits, const GlobalOp &op) {
  auto [reg, regBits] = elementRegister(es);
  std::string type = es == 1 ? "u8" : cat({"b", std::to_string(es * 8)});
  int64_t c = map.localPart(g.first)[g.dim];
  ElementBounds bounds(b, a, g, c, 1);
  int values = 1 + int(bounds.operands.size()); // operand number of the first value
  std::string text = "{ .reg .pred p, q; ";
  std::string constraints = "l";
  std::vector<llvm::Type *> params = {b.getInt64Ty()};
  std::vector<llvm::Value *> args = {b.CreatePtrToInt(addr, b.getInt64Ty())};
  bounds.appendOperands(b, constraints, params, args);
  llvm::Type *regType = b.getIntNTy(unsigned(regBits));
  for (size_t j = 0; j < bits.size(); ++j) {
    if (auto test = bounds.test(c + int64_t(j))) {
      text += cat({test->first, test->second, op.st(), ".", type, " [$0+",
                   std::to_string(int64_t(j) * es), "], $", std::to_string(values), "; "});
      constraints += cat({",", reg});
      params.push_back(regType);
      args.push_back(b.CreateZExt(bits[j], regType));
      ++values;
    }
  }
  text += "}";
  constraints += op.clobber();
  auto *asmType = llvm::FunctionType::get(b.getVoidTy(), params, false);
  b.CreateCall(llvm::InlineAsm::get(asmType, text, constraints, true), args);
}

/// The accesses of a packed run: `run.bytes / run.unit` loads of `unit` bytes, predicated on
/// `pred`, and the run's elements cut out of them.
std::vector<llvm::Value *> loadPackedRun(llvm::IRBuilder<> &b, const GroupTests &tests,
                                         llvm::Value *pred, int bits, int64_t count,
                                         const GlobalOp &op) {
  std::vector<llvm::Value *> pieces;
  for (int at = 0; at < tests.bytes; at += tests.unit) {
    llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), tests.addr, b.getInt64(uint64_t(at)));
    for (llvm::Value *w : asmLoadGlobal(b, addr, pred, tests.unit, op))
      pieces.push_back(tests.unit >= 4 ? w : b.CreateZExt(w, b.getInt32Ty()));
  }
  return unpackRun(b, pieces, std::min(32, tests.unit * 8), bits, count);
}

/// The elements of a packed run packed into its bytes and stored as `unit`-byte accesses.
void storePackedRun(llvm::IRBuilder<> &b, const GroupTests &tests, llvm::Value *pred, int bits,
                    const std::vector<llvm::Value *> &values, const GlobalOp &op) {
  std::vector<llvm::Value *> pieces = packRun(b, values, std::min(32, tests.unit * 8), bits);
  size_t perAccess = size_t(std::max(1, tests.unit / 4));
  for (int at = 0, k = 0; at < tests.bytes; at += tests.unit, ++k) {
    llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), tests.addr, b.getInt64(uint64_t(at)));
    std::vector<llvm::Value *> words(pieces.begin() + ptrdiff_t(size_t(k) * perAccess),
                                     pieces.begin() + ptrdiff_t(size_t(k + 1) * perAccess));
    asmStoreGlobal(b, addr, pred, words, tests.unit, op);
  }
}

/// The `ld` qualifier of a LoadGlobal's eviction hint (docs/isa.md, "Eviction hints"): L1
/// eviction priorities of PTX ISA 7.4 (sm_70 and later); nothing for none or `normal`, so that
/// such loads are unchanged.
std::string_view evictionQualifier(const Argument &evict) {
  if (!evict.present)
    return {};
  switch (Eviction(evict.intValue)) {
  case Eviction::First:
    return ".L1::evict_first";
  case Eviction::Last:
    return ".L1::evict_last";
  case Eviction::Normal:
    break;
  }
  return {};
}

/// The tile of the global view `g` at `offset`, for the register layout `map`, with the bounds
/// that every block provably meets widened (Codegen::boundProvenTiles).
Expected<GlobalTile> registerTile(Codegen &cg, const Instruction &inst, VarId g,
                                  const Argument &offset, const LayoutMap &map) {
  GlobalTile tile = cg.globalTile(cg.readGlobal(g), offset);
  if (int(tile.lo.size()) != map.rank())
    return cg.error(ErrorCode::OffsetRank, inst, "slice count differs from the register rank");
  cg.boundProvenTiles(g, offset, map, tile);
  return tile;
}

} // namespace

Status lowerLoadGlobal(Codegen &cg, const Instruction &inst, VarId r, VarId g,
                       const Argument &offset, bool relaxed) {
  llvm::IRBuilder<> &b = cg.b;
  const GlobalOp op{relaxed,
                    relaxed ? std::string_view() : evictionQualifier(inst.arg(ArgName::evict))};
  const LayoutMap &map = cg.layoutOf(r);
  Expected<GlobalTile> tiled = registerTile(cg, inst, g, offset, map);
  if (!tiled)
    return tiled.takeStatus();
  GlobalTile tile = std::move(tiled).value();
  DataType t = tile.dtype;
  GlobalAccess a = globalAccess(cg, tile, map);
  fixBounds(b, a, map);
  std::vector<llvm::Value *> slots(size_t(map.locals()));
  int rank = map.rank();
  std::vector<bool> unit = unitStrides(a);
  int es = t.storageBits() / 8;
  auto [width, minWidth] = groupWidths(t, map.locals());
  PackedAddresses bytes(cg, a, tile.ptr, t.storageBits(), 8);
  PackedAddresses words(cg, a, tile.ptr, t.storageBits(), 32);
  auto elementLoad = [&](int64_t i, llvm::Value *extra) {
    const int64_t *loc = map.localPart(i);
    llvm::Value *ok = inBounds(b, a, loc, rank);
    if (extra)
      ok = b.CreateAnd(ok, extra);
    if (!nativeAccess(t) && withinByte(t)) {
      // the byte that holds the element, loaded under the bounds test as a predicated access (0
      // outside): no branch per element; its address is its class's plus a constant
      PackedAddresses::Unit u = bytes.at(loc, rank);
      llvm::Value *bits = asmLoadGlobal(b, u.addr, ok, 1, op)[0];
      llvm::Value *shift = b.CreateTrunc(u.shift, b.getInt16Ty());
      return b.CreateTrunc(b.CreateLShr(bits, shift), cg.elemType(t));
    }
    if (!nativeAccess(t)) {
      // 3, 5, 6 or 7 bits: the words that hold the element's first and last bits (the same
      // word unless it straddles two), each by a predicated access, and the element from the
      // pair by a funnel shift; where they are the same word the bits above the element are
      // that word's again, which the truncation drops: no branch, no select
      PackedAddresses::Unit u = words.at(loc, rank);
      llvm::Value *lo = asmLoadGlobal(b, u.addr, ok, 4, op)[0];
      llvm::Value *hi = asmLoadGlobal(b, u.last, ok, 4, op)[0];
      llvm::Value *v = cg.callIntrinsic(llvm::Intrinsic::fshr, {b.getInt32Ty()}, {hi, lo, u.shift});
      return b.CreateTrunc(v, cg.elemType(t));
    }
    llvm::Value *elem = elementOffset(b, a, loc, rank);
    llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), tile.ptr, b.CreateMul(elem, cg.constI64(es)));
    return wordsToElements(cg, asmLoadGlobal(b, addr, ok, es, op), es, t, 1)[0];
  };
  std::vector<SlotGroup> groups = groupSlots(map, width, minWidth, unit);
  bool asmPath = useAsmElementPaths(cg, a, t, groups);
  for (const SlotGroup &g : groups) {
    if (g.count == 1) {
      slots[size_t(g.first)] = elementLoad(g.first, nullptr);
      continue;
    }
    // One vector load (a packed run: one per `unit` bytes) when the whole group is in bounds
    // and aligned; the elements one by one (a branch that is normally not taken) when only part
    // of it is in bounds or the address is misaligned.
    GroupTests tests = groupTests(cg, a, tile.ptr, map, g, t);
    std::vector<llvm::Value *> fastVals =
        packedAccess(t)
            ? loadPackedRun(b, tests, tests.fast, t.storageBits(), g.count, op)
            : wordsToElements(cg, asmLoadGlobal(b, tests.addr, tests.fast, tests.bytes, op),
                              tests.bytes, t, g.count);
    llvm::Value *slow = tests.slow(b);
    if (isFalse(slow)) { // the launch class proves every element path untaken
      std::copy(fastVals.begin(), fastVals.end(), slots.begin() + g.first);
      continue;
    }
    std::vector<llvm::Value *> merged = cg.emitIf(slow, "ldg.elem", fastVals, [&] {
      std::vector<llvm::Value *> slowVals;
      if (asmPath) {
        for (llvm::Value *v : asmLoadElements(b, tests.addr, a, map, g, es, op))
          slowVals.push_back(t.isBool() ? b.CreateICmpNE(v, llvm::ConstantInt::get(v->getType(), 0))
                                        : cg.fromBits(v, t));
        return slowVals;
      }
      for (int64_t j = 0; j < g.count; ++j) {
        llvm::Value *ok = groupElementIn(b, a, map, g, tests, j);
        if (!nativeAccess(t)) {
          llvm::Value *elem = b.CreateAdd(tests.elem, cg.constI64(j));
          slowVals.push_back(
              guarded(cg, ok, cg.zeroOf(t), [&] { return cg.loadElement(tile.ptr, elem, t); }));
          continue;
        }
        llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), tests.addr, cg.constI64(j * es));
        slowVals.push_back(wordsToElements(cg, asmLoadGlobal(b, addr, ok, es, op), es, t, 1)[0]);
      }
      return slowVals;
    });
    std::copy(merged.begin(), merged.end(), slots.begin() + g.first);
  }
  cg.writeRegister(r, slots);
  return Status::success();
}

Status lowerStoreGlobal(Codegen &cg, const Instruction &inst, VarId src, VarId g,
                        const Argument &offset, bool relaxed) {
  llvm::IRBuilder<> &b = cg.b;
  const ProgramInfo &info = cg.info;
  const GlobalOp op{relaxed, {}};
  const LayoutMap &map = cg.layoutOf(src);
  std::vector<llvm::Value *> slots = cg.readRegister(src);
  Expected<GlobalTile> tiled = registerTile(cg, inst, g, offset, map);
  if (!tiled)
    return tiled.takeStatus();
  GlobalTile tile = std::move(tiled).value();
  DataType t = tile.dtype;
  DataType st = info.vars[src].dtype;
  for (llvm::Value *&v : slots)
    v = cg.convert(v, st, t);
  GlobalAccess a = globalAccess(cg, tile, map);
  a.valid = b.CreateAnd(a.valid, cg.isPrimary(map));
  fixBounds(b, a, map);
  int rank = map.rank();
  std::vector<bool> unit = unitStrides(a);
  int es = t.storageBits() / 8;
  auto [width, minWidth] = groupWidths(t, map.locals());
  PackedAddresses words(cg, a, tile.ptr, t.storageBits(), 32);
  // the parts of a value's bits shifted left by `shift` that fall into the word of its first
  // bit and into the next word (funnel shifts of 32 bits)
  auto parts = [&](llvm::Value *v, llvm::Value *shift) {
    return std::pair{
        b.CreateShl(v, shift),
        cg.callIntrinsic(llvm::Intrinsic::fshl, {b.getInt32Ty()}, {b.getInt32(0), v, shift})};
  };
  // the element's clear masks by shift, computed once per class of bit offsets
  std::map<llvm::Value *, std::pair<llvm::Value *, llvm::Value *>> clearMasks;
  auto clearMask = [&](llvm::Value *shift) {
    std::pair<llvm::Value *, llvm::Value *> &clear = clearMasks[shift];
    if (!clear.first) {
      auto [lo, hi] = parts(b.getInt32(uint32_t(bitMask(t.storageBits()))), shift);
      clear = {b.CreateNot(lo), b.CreateNot(hi)};
    }
    return clear;
  };
  auto elementStore = [&](int64_t i) {
    const int64_t *loc = map.localPart(i);
    llvm::Value *ok = inBounds(b, a, loc, rank);
    if (!nativeAccess(t) && withinByte(t)) {
      // the element's bits in its aligned word, cleared and set by two predicated reductions
      // (the elements of other threads in that word are updated the same way): no branch; the
      // word's address is its class's plus a constant
      PackedAddresses::Unit u = words.at(loc, rank);
      llvm::Value *clear = clearMask(u.shift).first;
      llvm::Value *bits =
          b.CreateShl(b.CreateZExt(cg.toBits(slots[size_t(i)], t), b.getInt32Ty()), u.shift);
      redAndOr(b, u.addr, ok, clear, bits);
      return;
    }
    if (!nativeAccess(t)) {
      // 3, 5, 6 or 7 bits: the element's bits in the words of its first and last bit, each
      // cleared and set by two predicated reductions; where both are one word the second pair
      // changes nothing (all-ones and zero), so there is no branch
      PackedAddresses::Unit u = words.at(loc, rank);
      auto [clearLo, clearHi] = clearMask(u.shift);
      auto [lo, hi] = parts(b.CreateZExt(cg.toBits(slots[size_t(i)], t), b.getInt32Ty()), u.shift);
      redAndOr(b, u.addr, ok, clearLo, lo);
      redAndOr(b, u.last, ok, clearHi, hi);
      return;
    }
    llvm::Value *elem = elementOffset(b, a, loc, rank);
    llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), tile.ptr, b.CreateMul(elem, cg.constI64(es)));
    asmStoreGlobal(b, addr, ok, elementsToWords(cg, {slots[size_t(i)]}, t), es, op);
  };
  std::vector<SlotGroup> groups = groupSlots(map, width, minWidth, unit);
  bool asmPath = useAsmElementPaths(cg, a, t, groups);
  for (const SlotGroup &g : groups) {
    if (g.count == 1) {
      elementStore(g.first);
      continue;
    }
    GroupTests tests = groupTests(cg, a, tile.ptr, map, g, t);
    std::vector<llvm::Value *> values(slots.begin() + g.first, slots.begin() + g.first + g.count);
    if (packedAccess(t))
      storePackedRun(b, tests, tests.fast, t.storageBits(), values, op);
    else
      asmStoreGlobal(b, tests.addr, tests.fast, elementsToWords(cg, values, t), tests.bytes, op);
    llvm::Value *slow = tests.slow(b);
    if (isFalse(slow)) // the launch class proves every element path untaken
      continue;
    cg.emitIf(slow, "stg.elem", [&] {
      if (asmPath) {
        std::vector<llvm::Value *> bits;
        for (int64_t j = 0; j < g.count; ++j) {
          llvm::Value *v = slots[size_t(g.first + j)];
          bits.push_back(t.isBool() ? b.CreateZExt(v, b.getInt8Ty()) : cg.toBits(v, t));
        }
        asmStoreElements(b, tests.addr, a, map, g, es, bits, op);
        return;
      }
      for (int64_t j = 0; j < g.count; ++j) {
        llvm::Value *ok = groupElementIn(b, a, map, g, tests, j);
        llvm::Value *value = slots[size_t(g.first + j)];
        if (!nativeAccess(t)) {
          llvm::Value *elem = b.CreateAdd(tests.elem, cg.constI64(j));
          guarded(cg, ok, nullptr, [&]() -> llvm::Value * {
            cg.storeElement(tile.ptr, elem, t, value);
            return nullptr;
          });
          continue;
        }
        llvm::Value *addr = b.CreateGEP(b.getInt8Ty(), tests.addr, cg.constI64(j * es));
        asmStoreGlobal(b, addr, ok, elementsToWords(cg, {value}, t), es, op);
      }
    });
  }
  return Status::success();
}

Status MemoryLowering::visitLoadGlobal(const Instruction &inst) {
  return lowerLoadGlobal(cg, inst, inst.results[0], inst.arg(ArgName::g).var,
                         inst.arg(ArgName::offset), false);
}

Status MemoryLowering::visitStoreGlobal(const Instruction &inst) {
  VarId src = inst.arg(ArgName::r).var;
  if (src == kNoId)
    return cg.error(ErrorCode::Scope, inst, "the stored value is not a register tensor");
  return lowerStoreGlobal(cg, inst, src, inst.arg(ArgName::g).var, inst.arg(ArgName::offset),
                          false);
}

} // namespace tilus::jit
