// Data movement (MemoryLowering): LoadShared / StoreShared, LoadScalar, StoreScalar and the slot
// grouping and shared-offset splitting of memory_util.h (LoadGlobal / StoreGlobal are in
// lower_memory_global.cpp, ldmatrix and stmatrix in lower_memory_matrix.cpp, the asynchronous
// copies in lower_memory_async.cpp; the tiles and element primitives that other families use too
// are in emit_memory.cpp).
//
// A load or store turns its `offset=[...]` into a tile (GlobalTile/SharedTile) of the view it
// reads (emit_memory.cpp) and then addresses register slot (t, i) at tile index
// x = S(t) + Loc(i) (layout_map.h).
//
// Shared accesses are not bounds-checked (the checker rejects provable violations, the
// interpreter traps on the rest; on the GPU they are undefined). Replicated elements are
// stored once: only the primary owner (layout_map.h) stores.
//
// Vector shared accesses: runs of consecutive slots along a unit-stride dimension become LLVM
// vector loads/stores when the address is provably aligned (known bits; allocations are
// 128-byte aligned); for tiled and swizzled layouts when the layout keeps such runs contiguous
// (SharedLayout::contiguousRuns: shown from the expression, or checked over every index).
// Sub-byte elements group into runs of whole bytes (lower_memory_packed.cpp) under the same
// conditions, their first bit provably a multiple of 8 * unit; a run's bytes hold no other
// element, so its store leaves neighbouring elements (which other threads update atomically,
// element by element) alone.
#include "jit/bank_report.h"
#include "jit/lowering.h"
#include "jit/memory_util.h"
#include "jit/pack_bytes.h"

#include "isa/convert.h"
#include "isa/view_rules.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/InlineAsm.h>

namespace tilus::jit {

/// Split the slots into groups of `width` consecutive elements (or single slots).
std::vector<SlotGroup> groupSlots(const LayoutMap &map, int width, int minWidth,
                                  const std::vector<bool> &unitStride) {
  std::vector<SlotGroup> groups;
  int rank = map.rank();
  for (int64_t i = 0; i < map.locals();) {
    SlotGroup g{i, 1, -1};
    // The widest power-of-two run starting here (aligned to its width in the tile).
    for (int w = width; w >= minWidth && w > 1 && g.dim < 0; w /= 2) {
      if (i + w > map.locals())
        continue;
      for (int d = 0; d < rank && g.dim < 0; ++d) {
        if (!unitStride[size_t(d)] || map.localPart(i)[d] % w != 0)
          continue;
        bool ok = true;
        for (int j = 1; j < w && ok; ++j)
          for (int e = 0; e < rank; ++e)
            ok = ok && map.localPart(i + j)[e] == map.localPart(i)[e] + (e == d ? j : 0);
        if (ok)
          g = SlotGroup{i, w, d};
      }
    }
    groups.push_back(g);
    i += g.count;
  }
  return groups;
}

/// The narrowest group worth a vector access: 4 bytes.
int minVectorWidth(int bytes) { return bytes >= 4 ? 2 : 4 / bytes; }

ChunkSplit chunkSplit(const std::vector<int64_t> &chunks, int64_t threads) {
  int64_t suffix = 1;
  for (size_t k = chunks.size(); k-- > 2;) {
    suffix *= chunks[k];
    if (suffix > threads)
      break;
    if (threads % suffix == 0 && chunks[k - 1] % (threads / suffix) == 0)
      return ChunkSplit{k, suffix};
  }
  return {};
}

std::vector<int64_t> chunkStep(const std::vector<int64_t> &chunks, const ChunkSplit &split,
                               int64_t threads, int64_t i) {
  std::vector<int64_t> step(split.dim, 0);
  int64_t q = i * threads / split.inner;
  for (size_t k = split.dim; k-- > 0;) {
    step[k] = k == 0 ? q : q % chunks[k];
    q = k == 0 ? 0 : q / chunks[k];
  }
  return step;
}

/// The widest vector (in elements) worth trying for an element of `bytes` bytes.
int vectorWidth(int bytes, int64_t locals) {
  int width = 16 / bytes;
  while (width > 1 && (width > locals || width * bytes < 4))
    width /= 2;
  return width;
}

bool isConstOne(llvm::Value *v) {
  auto *c = llvm::dyn_cast<llvm::ConstantInt>(v);
  return c && c->isOne();
}

// ---- shared layout offsets ----------------------------------------------------------------------

llvm::Value *sharedLayoutShift(llvm::IRBuilder<> &b, const llvm::DataLayout &dl,
                               const SharedLayout &layout, const std::vector<llvm::Value *> &d) {
  std::vector<int64_t> strides = layout.linearStrides();
  if (!strides.empty() || layout.rank() == 0)
    return linearOffset(b, strides, d);
  if (layout.kind() == SharedLayout::Kind::Tile) {
    // (c + d) / n = c / n + d / n and (c + d) % n = c % n when d is a multiple of n: only
    // constant shifts are taken
    const SharedLayout &outer = *layout.children()[0];
    const SharedLayout &inner = *layout.children()[1];
    std::vector<llvm::Value *> q(d.size());
    for (size_t k = 0; k < d.size(); ++k) {
      auto *c = llvm::dyn_cast<llvm::ConstantInt>(d[k]);
      int64_t n = inner.shape()[k];
      if (!c || c->getSExtValue() % n != 0)
        return nullptr;
      q[k] = b.getInt32(uint64_t(c->getSExtValue() / n));
    }
    llvm::Value *o = sharedLayoutShift(b, dl, outer, q);
    return o ? b.CreateMul(o, b.getInt32(uint64_t(inner.size()))) : nullptr;
  }
  // swizzle: the XOR reads bits [base + shift, base + shift + bits) of the offset and writes
  // bits [base, base + bits); a shift that is a multiple of 2^(base + shift + bits) changes
  // neither, so it passes through unchanged
  llvm::Value *s = sharedLayoutShift(b, dl, *layout.children()[0], d);
  if (!s)
    return nullptr;
  unsigned need = unsigned(layout.swizzleReach());
  if (llvm::computeKnownBits(s, dl).countMinTrailingZeros() < need)
    return nullptr;
  return s;
}

llvm::Value *sharedOffsetSplit(Codegen &cg, VarId root, const std::vector<llvm::Value *> &c,
                               const std::vector<llvm::Value *> &d) {
  llvm::IRBuilder<> &b = cg.b;
  std::vector<llvm::Value *> d32;
  d32.reserve(d.size());
  for (llvm::Value *v : d)
    d32.push_back(b.CreateTrunc(v, b.getInt32Ty()));
  const SharedLayout &layout = *cg.info.vars[root].sharedLayout;
  llvm::Value *shift = sharedLayoutShift(b, cg.mod.getDataLayout(), layout, d32);
  if (!shift)
    return nullptr;
  return b.CreateAdd(cg.sharedOffset(root, c), b.CreateZExt(shift, b.getInt64Ty()), "",
                     /*HasNUW=*/true, /*HasNSW=*/true);
}

llvm::Value *sharedAddressSplit(Codegen &cg, VarId root, const std::vector<llvm::Value *> &c,
                                const std::vector<llvm::Value *> &d, DataType t) {
  llvm::IRBuilder<> &b = cg.b;
  if (t.storageBits() % 8 != 0)
    return nullptr;
  // Constant parts of d (a constant origin coordinate, "x + 16") move to c: they are
  // loop-invariant like c, and what stays in d is more often a multiple the layout passes.
  std::vector<llvm::Value *> cc = c;
  std::vector<llvm::Value *> d32;
  d32.reserve(d.size());
  for (size_t k = 0; k < d.size(); ++k) {
    llvm::Value *v = d[k];
    int64_t constant = 0;
    if (auto *ci = llvm::dyn_cast<llvm::ConstantInt>(v)) {
      constant = ci->getSExtValue();
      v = b.getInt64(0);
    } else if (auto *add = llvm::dyn_cast<llvm::BinaryOperator>(v);
               add && add->getOpcode() == llvm::Instruction::Add) {
      if (auto *ci = llvm::dyn_cast<llvm::ConstantInt>(add->getOperand(1))) {
        constant = ci->getSExtValue();
        v = add->getOperand(0);
      }
    }
    if (constant != 0)
      cc[k] = addFolded(b, cc[k], b.getInt64(uint64_t(constant)));
    d32.push_back(b.CreateTrunc(v, b.getInt32Ty()));
  }
  const SharedLayout &layout = *cg.info.vars[root].sharedLayout;
  llvm::Value *shift = sharedLayoutShift(b, cg.mod.getDataLayout(), layout, d32);
  if (!shift)
    return nullptr;
  // (base + L(c) * bytes) + shift * bytes: the first part is per-thread (LICM hoists it out of
  // a loop that moves only the shift), the second shared by every access with the same shift
  llvm::Value *first = cg.sharedElementAddress(root, cg.sharedOffset(root, cc), t);
  llvm::Value *bytes = mulFolded(b, shift, b.getInt32(uint64_t(t.storageBits() / 8)));
  return b.CreateGEP(b.getInt8Ty(), first, bytes);
}

// ---- LoadScalar ---------------------------------------------------------------------------------

// One element read by every thread from the same address (a uniform load: the hardware
// broadcasts it), guarded by the bounds test for global tensors (outside reads 0). The value is
// a plain load: no range or alignment is assumed about it.
Status MemoryLowering::visitLoadScalar(const Instruction &inst) {
  VarId x = inst.arg(ArgName::x).var;
  VarId r = inst.results[0];
  DataType want = prog.var(r).dtype;
  const Argument &offset = inst.arg(ArgName::offset);
  if (info.vars[x].kind == VarKind::Shared) {
    SharedTile tile = cg.sharedTile(cg.readShared(x), offset);
    if (!tile.dims.empty())
      return cg.error(ErrorCode::OffsetRank, inst, "LoadScalar offset has slice entries");
    llvm::Value *elem = cg.sharedOffset(tile.root, tile.origin);
    llvm::Value *root = cg.sharedElementAddress(tile.root, cg.constI64(0), tile.dtype);
    cg.writeScalar(r, cg.convert(cg.loadElement(root, elem, tile.dtype), tile.dtype, want));
    return Status::success();
  }
  GlobalTile tile = cg.globalTile(cg.readGlobal(x), offset);
  if (!tile.lo.empty())
    return cg.error(ErrorCode::OffsetRank, inst, "LoadScalar offset has slice entries");
  DataType t = tile.dtype;
  llvm::Value *v = guarded(cg, tile.valid, cg.zeroOf(t), [&]() -> llvm::Value * {
    return cg.loadElement(tile.ptr, tile.offset, t);
  });
  cg.writeScalar(r, cg.convert(v, t, want));
  return Status::success();
}

// ---- StoreScalar --------------------------------------------------------------------------------

// Thread 0 converts the value and stores the element (guarded by the bounds test for global
// tensors); the checker refuses sub-byte elements, so the store touches no neighbour.
Status MemoryLowering::visitStoreScalar(const Instruction &inst) {
  VarId dst = inst.arg(ArgName::dst).var;
  const Argument &offset = inst.arg(ArgName::offset);
  const Argument &value = inst.arg(ArgName::value);
  llvm::Value *first = b.CreateICmpEQ(cg.tid(), cg.constI32(0));
  if (info.vars[dst].kind == VarKind::Shared) {
    SharedTile tile = cg.sharedTile(cg.readShared(dst), offset);
    if (!tile.dims.empty())
      return cg.error(ErrorCode::OffsetRank, inst, "StoreScalar offset has slice entries");
    llvm::Value *v = cg.scalarArg(value, tile.dtype);
    llvm::Value *elem = cg.sharedOffset(tile.root, tile.origin);
    llvm::Value *root = cg.sharedElementAddress(tile.root, cg.constI64(0), tile.dtype);
    cg.emitIf(first, "store_scalar", [&] { cg.storeElement(root, elem, tile.dtype, v); });
    return Status::success();
  }
  GlobalTile tile = cg.globalTile(cg.readGlobal(dst), offset);
  if (!tile.lo.empty())
    return cg.error(ErrorCode::OffsetRank, inst, "StoreScalar offset has slice entries");
  llvm::Value *v = cg.scalarArg(value, tile.dtype);
  cg.emitIf(b.CreateAnd(first, tile.valid), "store_scalar",
            [&] { cg.storeElement(tile.ptr, tile.offset, tile.dtype, v); });
  return Status::success();
}

// ---- shared register <-> memory -----------------------------------------------------------------

namespace {

/// The widest and narrowest slot groups of one vector access to shared memory (width 1: none):
/// byte-sized types as global accesses, bit-packed types in runs of whole bytes; bool never.
std::pair<int, int> sharedGroupWidths(DataType t, int64_t locals) {
  int bits = t.storageBits();
  if (t.isBool())
    return {1, 1};
  if (bits < 8)
    return {packedMaxWidth(bits, locals), packedMinWidth(bits)};
  return {bits % 8 == 0 ? vectorWidth(bits / 8, locals) : 1, minVectorWidth(std::max(1, bits / 8))};
}

/// The byte alignment that a group of `count` elements needs: its size, or a packed run's unit.
int64_t groupAlignment(DataType t, int64_t count) {
  int bits = t.storageBits();
  if (bits < 8)
    return packedRun(bits, count).unit;
  return int64_t(bits / 8) * count;
}

/// The byte address (ptr addrspace(3)) of the first byte of a packed run at element offset
/// `elem` (i64, its first bit a multiple of 8) in shared root `root`.
llvm::Value *packedSharedAddress(Codegen &cg, VarId root, llvm::Value *elem, int bits) {
  llvm::IRBuilder<> &b = cg.b;
  llvm::Value *bit = b.CreateMul(b.CreateTrunc(elem, b.getInt32Ty()), b.getInt32(uint32_t(bits)));
  llvm::Value *byte =
      b.CreateAdd(cg.constI32(cg.info.vars[root].sharedByteOffset), b.CreateLShr(bit, 3));
  return b.CreateGEP(b.getInt8Ty(), cg.sharedBase(), byte);
}

/// The LLVM type of one `unit`-byte access of a packed run: i8, i16, i32 or <n x i32>.
llvm::Type *packedUnitType(llvm::IRBuilder<> &b, int unit) {
  if (unit < 4)
    return b.getIntNTy(unsigned(unit * 8));
  if (unit == 4)
    return b.getInt32Ty();
  return llvm::FixedVectorType::get(b.getInt32Ty(), unsigned(unit / 4));
}

/// The `count` elements of the packed run at element offset `elem` of shared root `root`.
std::vector<llvm::Value *> loadPackedShared(Codegen &cg, VarId root, llvm::Value *elem, DataType t,
                                            int64_t count) {
  llvm::IRBuilder<> &b = cg.b;
  int bits = t.storageBits();
  PackedRun run = packedRun(bits, count);
  llvm::Value *addr = packedSharedAddress(cg, root, elem, bits);
  llvm::Type *type = packedUnitType(b, run.unit);
  std::vector<llvm::Value *> pieces;
  for (int at = 0; at < run.bytes; at += run.unit) {
    llvm::Value *p = b.CreateGEP(b.getInt8Ty(), addr, b.getInt32(uint32_t(at)));
    llvm::Value *v = b.CreateAlignedLoad(type, p, llvm::Align(uint64_t(run.unit)));
    if (run.unit < 4)
      pieces.push_back(b.CreateZExt(v, b.getInt32Ty()));
    else if (run.unit == 4)
      pieces.push_back(v);
    else
      for (int w = 0; w < run.unit / 4; ++w)
        pieces.push_back(b.CreateExtractElement(v, uint64_t(w)));
  }
  return unpackRun(b, pieces, std::min(32, run.unit * 8), bits, count);
}

/// Store `values` as the packed run at element offset `elem` of shared root `root`.
void storePackedShared(Codegen &cg, VarId root, llvm::Value *elem, DataType t,
                       const std::vector<llvm::Value *> &values) {
  llvm::IRBuilder<> &b = cg.b;
  int bits = t.storageBits();
  PackedRun run = packedRun(bits, int64_t(values.size()));
  llvm::Value *addr = packedSharedAddress(cg, root, elem, bits);
  llvm::Type *type = packedUnitType(b, run.unit);
  std::vector<llvm::Value *> pieces = packRun(b, values, std::min(32, run.unit * 8), bits);
  size_t next = 0;
  for (int at = 0; at < run.bytes; at += run.unit) {
    llvm::Value *p = b.CreateGEP(b.getInt8Ty(), addr, b.getInt32(uint32_t(at)));
    llvm::Value *v;
    if (run.unit < 4) {
      v = b.CreateTrunc(pieces[next++], type);
    } else if (run.unit == 4) {
      v = pieces[next++];
    } else {
      v = llvm::PoisonValue::get(type);
      for (int w = 0; w < run.unit / 4; ++w)
        v = b.CreateInsertElement(v, pieces[next++], uint64_t(w));
    }
    b.CreateAlignedStore(v, p, llvm::Align(uint64_t(run.unit)));
  }
}

/// Slots [first, first + count) of 8-bit elements as count / 4 words (an i32, or a vector of
/// them), each packed by prmt from the words its bytes were cut from (pack_bytes.h); nullptr
/// when some byte was not cut from a word.
llvm::Value *packedWords(llvm::IRBuilder<> &b, const std::vector<llvm::Value *> &slots,
                         int64_t first, int64_t count) {
  std::optional<std::vector<llvm::Value *>> words =
      packTracedWords(b, slots, size_t(first), size_t(count));
  if (!words)
    return nullptr;
  if (words->size() == 1)
    return (*words)[0];
  llvm::Value *vec =
      llvm::PoisonValue::get(llvm::FixedVectorType::get(b.getInt32Ty(), unsigned(words->size())));
  for (size_t w = 0; w < words->size(); ++w)
    vec = b.CreateInsertElement(vec, (*words)[w], uint64_t(w));
  return vec;
}

/// `g` as one vector group when `vector`, else its slots one by one.
void keepOrSplit(std::vector<SlotGroup> &groups, const SlotGroup &g, bool vector) {
  if (vector) {
    groups.push_back(g);
    return;
  }
  for (int64_t j = 0; j < g.count; ++j)
    groups.push_back(SlotGroup{g.first + j, 1, -1});
}

/// Element offsets of the slots of `map` in a shared tile that the accesses use (the first slot
/// of each group), and the slot groups that can be accessed as one aligned vector. The offsets
/// are emitted in slot order, only for the slots that begin a group (the others' offsets would
/// be dead code for the optimiser to delete).
struct SharedSlots {
  std::vector<llvm::Value *> elem; // per slot that begins a group, i64 element offset
  std::vector<SlotGroup> groups;
};

SharedSlots sharedSlots(Codegen &cg, MemoryLowering &memory, const SharedTile &tile,
                        const LayoutMap &map) {
  llvm::IRBuilder<> &b = cg.b;
  const SharedLayout &layout = *cg.info.vars[tile.root].sharedLayout;
  const std::vector<llvm::Value *> &s = cg.threadPart(map);
  int rank = map.rank();
  SharedSlots out;
  out.elem.resize(size_t(map.locals()));
  std::vector<int64_t> strides = layout.linearStrides();
  DataType t = tile.dtype;
  if (strides.empty() && layout.rank() != 0) {
    // Non-linear layout (tile, swizzle): the full layout function per slot. A run of w slots
    // along a tile dimension is one vector when the layout keeps every w-run of that root
    // dimension that starts at a multiple of w contiguous and w-aligned (checked once over the
    // root's shape) and the run provably starts at such a multiple (known bits).
    std::vector<llvm::Value *> start(static_cast<size_t>(rank)); // root coordinate of Loc = 0
    for (int k = 0; k < rank; ++k) {
      size_t r = size_t(tile.dims[size_t(k)]);
      start[size_t(k)] = addFolded(b, tile.origin[r], s[size_t(k)]);
    }
    auto [width, minWidth] = sharedGroupWidths(t, map.locals());
    std::vector<bool> all(static_cast<size_t>(rank), true);
    const llvm::DataLayout &dl = cg.mod.getDataLayout();
    int64_t rootOffset = cg.info.vars[tile.root].sharedByteOffset;
    for (const SlotGroup &g : groupSlots(map, width, minWidth, all)) {
      // a run that starts at a multiple of its count starts at a multiple of its bytes
      bool ok = g.count > 1 && rootOffset % groupAlignment(t, g.count) == 0;
      if (ok) {
        int r = tile.dims[size_t(g.dim)];
        unsigned tz = llvm::computeKnownBits(start[size_t(g.dim)], dl).countMinTrailingZeros();
        ok = (int64_t(1) << std::min(tz, 30u)) % g.count == 0 &&
             map.localPart(g.first)[g.dim] % g.count == 0 &&
             memory.contiguousRuns(tile.root, r, int(g.count));
      }
      keepOrSplit(out.groups, g, ok);
    }
    for (const SlotGroup &g : out.groups) {
      std::vector<llvm::Value *> coords = tile.origin;
      const int64_t *loc = map.localPart(g.first);
      for (int k = 0; k < rank; ++k) {
        size_t r = size_t(tile.dims[size_t(k)]);
        llvm::Value *base = addFolded(b, coords[r], s[size_t(k)]);
        coords[r] = addFolded(b, base, b.getInt64(uint64_t(loc[k])));
      }
      out.elem[size_t(g.first)] = cg.sharedOffset(tile.root, coords);
    }
    return out;
  }
  llvm::Value *base = b.getInt64(0);
  for (size_t r = 0; r < strides.size(); ++r)
    base = addFolded(b, base, mulFolded(b, tile.origin[r], b.getInt64(uint64_t(strides[r]))));
  std::vector<int64_t> stride(static_cast<size_t>(rank));
  for (int k = 0; k < rank; ++k) {
    stride[size_t(k)] = strides[size_t(tile.dims[size_t(k)])];
    base = addFolded(b, base, mulFolded(b, s[size_t(k)], b.getInt64(uint64_t(stride[size_t(k)]))));
  }
  auto elemAt = [&](int64_t i) {
    if (!out.elem[size_t(i)]) {
      const int64_t *loc = map.localPart(i);
      int64_t c = 0;
      for (int k = 0; k < rank; ++k)
        c += loc[k] * stride[size_t(k)];
      out.elem[size_t(i)] = addFolded(b, base, b.getInt64(uint64_t(c)));
    }
    return out.elem[size_t(i)];
  };
  // Vector groups: unit stride and a provably aligned byte address (a packed run: its first
  // bit a multiple of 8 * unit).
  int bits = t.storageBits();
  std::vector<bool> unit(static_cast<size_t>(rank));
  for (int k = 0; k < rank; ++k)
    unit[size_t(k)] = stride[size_t(k)] == 1;
  auto [width, minWidth] = sharedGroupWidths(t, map.locals());
  const llvm::DataLayout &dl = cg.mod.getDataLayout();
  int64_t rootOffset = cg.info.vars[tile.root].sharedByteOffset;
  for (const SlotGroup &g : groupSlots(map, width, minWidth, unit)) {
    bool aligned = g.count == 1;
    if (!aligned) {
      int64_t vecBytes = groupAlignment(t, g.count);
      llvm::KnownBits known = llvm::computeKnownBits(elemAt(g.first), dl);
      int64_t alignElems = int64_t(1) << std::min<unsigned>(known.countMinTrailingZeros(), 20);
      // bits of the first element's offset (bytes times 8 for byte-sized types)
      int64_t alignBits = alignElems * (bits < 8 ? bits : bits / 8 * 8);
      aligned = alignBits % (vecBytes * 8) == 0 && rootOffset % vecBytes == 0;
    }
    keepOrSplit(out.groups, g, aligned);
    for (int64_t j = 0; j < (aligned ? 1 : g.count); ++j)
      elemAt(g.first + j);
  }
  return out;
}

/// The bank-conflict report of a plain shared access (jit/bank_report.h), when asked for.
void reportSharedAccess(Codegen &cg, const Instruction &inst, const SharedTile &tile,
                        const LayoutMap &map, const std::vector<SlotGroup> &groups,
                        bool primaryOnly) {
  if (!cg.reportingSharedAccesses())
    return;
  std::vector<int64_t> origin;
  for (llvm::Value *o : tile.origin) {
    auto *c = llvm::dyn_cast<llvm::ConstantInt>(o);
    origin.push_back(c ? c->getSExtValue() : 0);
  }
  const VarType &root = cg.info.vars[tile.root];
  SharedAccessReport r = analyseSharedAccess(*root.sharedLayout, root.sharedByteOffset, tile.dtype,
                                             origin, tile.dims, map, groups, primaryOnly);
  r.instruction = size_t(&inst - cg.prog.instructions.data());
  r.opcode = inst.spec().name;
  cg.addSharedAccess(r);
}

} // namespace

Status MemoryLowering::visitLoadShared(const Instruction &inst) {
  VarId r = inst.results[0];
  const LayoutMap &map = cg.layoutOf(r);
  SharedView view = cg.readShared(inst.arg(ArgName::s).var);
  SharedTile tile = cg.sharedTile(view, inst.arg(ArgName::offset));
  if (int(tile.dims.size()) != map.rank())
    return cg.error(ErrorCode::OffsetRank, inst, "slice count differs from the register rank");
  if (tryLdmatrix(tile, r))
    return Status::success();
  DataType t = tile.dtype;
  SharedSlots ss = sharedSlots(cg, *this, tile, map);
  reportSharedAccess(cg, inst, tile, map, ss.groups, /*primaryOnly=*/false);
  std::vector<llvm::Value *> slots(size_t(map.locals()));
  llvm::Value *root = cg.sharedElementAddress(tile.root, cg.constI64(0), t);
  for (const SlotGroup &g : ss.groups) {
    if (g.count == 1) {
      slots[size_t(g.first)] = cg.loadElement(root, ss.elem[size_t(g.first)], t);
      continue;
    }
    if (t.storageBits() < 8) {
      std::vector<llvm::Value *> run =
          loadPackedShared(cg, tile.root, ss.elem[size_t(g.first)], t, g.count);
      std::copy(run.begin(), run.end(), slots.begin() + g.first);
      continue;
    }
    int bytes = t.storageBits() / 8;
    llvm::Value *addr = cg.sharedElementAddress(tile.root, ss.elem[size_t(g.first)], t);
    auto *vecType = llvm::FixedVectorType::get(cg.elemType(t), unsigned(g.count));
    llvm::Value *vec = b.CreateAlignedLoad(vecType, addr, llvm::Align(uint64_t(bytes * g.count)));
    for (int64_t j = 0; j < g.count; ++j)
      slots[size_t(g.first + j)] = b.CreateExtractElement(vec, uint64_t(j));
  }
  cg.writeRegister(r, slots);
  return Status::success();
}

Status MemoryLowering::visitStoreShared(const Instruction &inst) {
  VarId src = inst.arg(ArgName::r).var;
  if (src == kNoId)
    return cg.error(ErrorCode::Scope, inst, "the stored value is not a register tensor");
  const LayoutMap &map = cg.layoutOf(src);
  std::vector<llvm::Value *> slots = cg.readRegister(src);
  SharedView view = cg.readShared(inst.arg(ArgName::s).var);
  SharedTile tile = cg.sharedTile(view, inst.arg(ArgName::offset));
  if (int(tile.dims.size()) != map.rank())
    return cg.error(ErrorCode::OffsetRank, inst, "slice count differs from the register rank");
  DataType t = tile.dtype;
  for (llvm::Value *&v : slots)
    v = cg.convert(v, info.vars[src].dtype, t);
  if (tryStmatrix(tile, src, slots))
    return Status::success();
  SharedSlots ss = sharedSlots(cg, *this, tile, map);
  reportSharedAccess(cg, inst, tile, map, ss.groups, /*primaryOnly=*/true);
  llvm::Value *root = cg.sharedElementAddress(tile.root, cg.constI64(0), t);
  llvm::Value *primary = cg.isPrimary(map);
  guarded(cg, primary, nullptr, [&]() -> llvm::Value * {
    for (const SlotGroup &g : ss.groups) {
      if (g.count == 1) {
        cg.storeElement(root, ss.elem[size_t(g.first)], t, slots[size_t(g.first)]);
        continue;
      }
      if (t.storageBits() < 8) {
        std::vector<llvm::Value *> values(slots.begin() + g.first,
                                          slots.begin() + g.first + g.count);
        storePackedShared(cg, tile.root, ss.elem[size_t(g.first)], t, values);
        continue;
      }
      int bytes = t.storageBits() / 8;
      llvm::Value *addr = cg.sharedElementAddress(tile.root, ss.elem[size_t(g.first)], t);
      llvm::Value *vec = nullptr;
      if (bytes == 1 && g.count % 4 == 0) // bytes cut from words: words by prmt
        vec = packedWords(b, slots, g.first, g.count);
      if (!vec) {
        auto *vecType = llvm::FixedVectorType::get(cg.elemType(t), unsigned(g.count));
        vec = llvm::PoisonValue::get(vecType);
        for (int64_t j = 0; j < g.count; ++j)
          vec = b.CreateInsertElement(vec, slots[size_t(g.first + j)], uint64_t(j));
      }
      b.CreateAlignedStore(vec, addr, llvm::Align(uint64_t(bytes * g.count)));
    }
    return nullptr;
  });
  return Status::success();
}

bool MemoryLowering::contiguousRuns(VarId root, int dim, int width) {
  auto key = std::make_tuple(root, dim, width);
  auto it = runsCache_.find(key);
  if (it != runsCache_.end())
    return it->second;
  bool ok = info.vars[root].sharedLayout->contiguousRuns(dim, width);
  runsCache_[key] = ok;
  return ok;
}

} // namespace tilus::jit
