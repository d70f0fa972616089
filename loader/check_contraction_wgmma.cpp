// Typing rules of wgmma (docs/isa.md, "wgmma"): Wgmma(a, b, c, out=c) with a [M, K] in shared
// memory or registers, b [K, N] in shared memory and the accumulator c [M, N] in registers,
// issued by the block's warpgroups.
//
// The accumulator layout must be the wgmma fragment layout of some grid of warpgroups:
//   spatial(wgM, wgN).local(tilesM, 1).spatial(4, 1).local(1, n / 8).local(2, 1).spatial(8, 4)
//     .local(1, 2)
// (thread t of warpgroup (i, j) holds, for atom r, rows 64 (i tilesM + r) + 16 (t / 32 % 4) +
// t % 32 / 4 + 8 h and columns j n + 8 q + 2 (t % 4) + l at local slot r n / 2 + 4 q + 2 h + l,
// which is the PTX D fragment of wgmma.m64nNk16 in register order).
//
// A register a must have the wgmma A fragment layout of the accumulator's grid, which must have
// every warpgroup along M (isa/wgmma_fragment.h, wgmmaAFragment); its plan has no descriptors.
//
// Each shared operand must be a matrix-descriptor layout, per instruction atom: for a, the
// 64 x atomK block at rows 64 (i tilesM + r), columns s atomK; for b, the atomK x n block at rows
// s atomK, columns j n. Which descriptors fit is decided by the addresses themselves: for each
// of the four swizzle modes (PTX canonical layouts, Swizzle<b, 4, 3> on byte addresses:
// 128-byte b = 3, 64-byte b = 2, 32-byte b = 1, none b = 0) the start, LBO and SBO are read off
// three elements of the atom and the mode is accepted when the hardware's address of every
// element of the atom equals the byte address that the ISA layout gives it. This is checked for
// every value that the run-time parts of the operand view's origin can take (a stage index of
// a pipeline), so the JIT can use one set of descriptors relative to the view's origin. In
// element units of a 16-bit type the 128-byte swizzle is swizzle(.., 3, 3, 3) on rows of 64
// elements, which is what a K-major tile swizzle(row_major(BM, 64), 3, 3, 3) and an N-major tile
// of 64-column panels row_major(1, BN / 64).swizzle(row_major(BK, 64), 3, 3, 3) give.
#include "isa/view_rules.h"
#include "isa/wgmma_fragment.h"
#include "loader/checker_impl.h"

#include <functional>

namespace tilus::detail {

namespace {

/// The byte address that a descriptor gives element (mn, k) of an atom (mn along M or N, k
/// along K); kMajor: K contiguous within a row of `rowBytes` (= 16 << swizzleBits, 16 for no
/// swizzle), MN in groups of 8 rows at SBO; otherwise MN contiguous within the row, K in groups
/// of 8 rows at SBO, MN rows repeating at LBO. Then Swizzle<bits, 4, 3> on the address.
int64_t descriptorAddress(const WgmmaDescriptor &d, int64_t start, int bits, bool kMajor,
                          int64_t mn, int64_t k, int elemBytes) {
  int64_t rowBytes = int64_t(16) << bits;
  int64_t addr = start;
  if (kMajor) {
    int64_t kb = k * elemBytes;
    addr += (mn % 8) * rowBytes + (mn / 8) * d.sbo + (kb % rowBytes) + (kb / rowBytes) * d.lbo;
  } else {
    int64_t nb = mn * elemBytes;
    addr += (nb % rowBytes) + (nb / rowBytes) * d.lbo + (k % 8) * rowBytes + (k / 8) * d.sbo;
  }
  int64_t mask = ((int64_t(1) << bits) - 1) << 4;
  return addr ^ ((addr >> 3) & mask);
}

int swizzleBitsOfMode(int mode) { return mode == 1 ? 3 : mode == 2 ? 2 : mode == 3 ? 1 : 0; }

} // namespace

bool ProgramChecker::visitWgmma(const Instruction &inst, Results &results) {
  // a in registers or shared memory; b shared; c registers
  const Argument &argA = inst.arg(ArgName::a);
  bool registerA = argA.var != kNoId && info_.vars[argA.var].kind == VarKind::Register;
  const VarType *a = tensorArg(inst, ArgName::a, registerA ? VarKind::Register : VarKind::Shared);
  const VarType *b = a ? tensorArg(inst, ArgName::b, VarKind::Shared) : nullptr;
  const VarType *c = b ? tensorArg(inst, ArgName::c, VarKind::Register) : nullptr;
  if (!c)
    return false;
  if (!inst.out || inst.results[0] != inst.arg(ArgName::c).var)
    return fail(ErrorCode::BadArgument, "Wgmma accumulates in place: write it Wgmma(a, b, c, "
                                        "out=c) with out= naming the accumulator c");
  // dtypes
  DataType ta = a->dtype, tb = b->dtype, tc = c->dtype;
  bool half = (ta == DataType::f16() && tb == DataType::f16()) ||
              (ta == DataType::bf16() && tb == DataType::bf16());
  bool fp8 = (ta == DataType::f8e4m3() || ta == DataType::f8e5m2()) &&
             (tb == DataType::f8e4m3() || tb == DataType::f8e5m2());
  if ((!half && !fp8) || tc != DataType::f32())
    return fail(ErrorCode::WgmmaDtype,
                "Wgmma of " + ta.name() + " x " + tb.name() + " into " + tc.name() +
                    ": supported are f16 x f16, bf16 x bf16 and f8e4m3/f8e5m2 x f8e4m3/f8e5m2 "
                    "into f32");
  // shapes
  if (a->rank != 2 || b->rank != 2 || c->rank != 2 || a->shape[1] != b->shape[0] ||
      c->shape[0] != a->shape[0] || c->shape[1] != b->shape[1])
    return fail(ErrorCode::WgmmaShape, "Wgmma operands " + shapeString(a->shape) + " x " +
                                           shapeString(b->shape) + " + " + shapeString(c->shape) +
                                           " are not [M, K] x [K, N] + [M, N]");
  int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  WgmmaPlan plan;
  plan.registerA = registerA;
  plan.atomK = fp8 ? 32 : 16;
  int elemBytes = ta.storageBits() / 8;
  if (threads_ % 128 != 0)
    return fail(ErrorCode::WgmmaShape, "Wgmma needs whole warpgroups: the block has " +
                                           std::to_string(threads_) +
                                           " threads, not a multiple of 128");
  if (k % plan.atomK != 0)
    return fail(ErrorCode::WgmmaShape, "Wgmma K = " + std::to_string(k) +
                                           " is not a multiple of the atom's k" +
                                           std::to_string(plan.atomK));
  plan.ksteps = k / plan.atomK;
  // the accumulator layout: try every grid of warpgroups
  int warpgroups = int(threads_ / 128);
  const RegisterLayout &cl = *c->layout;
  bool found = false;
  std::string tried;
  std::vector<WgmmaFragment> fragments = wgmmaFragments(m, n, warpgroups);
  for (const WgmmaFragment &f : fragments) {
    if (f.layout == cl) {
      plan.wgM = f.wgM;
      plan.wgN = f.wgN;
      plan.tilesM = f.tilesM;
      plan.n = f.n;
      found = true;
      break;
    }
    tried += (tried.empty() ? "" : "; ") + std::string("spatial(") + std::to_string(f.wgM) + ", " +
             std::to_string(f.wgN) + ").local(" + std::to_string(f.tilesM) +
             ", 1).spatial(4, 1).local(1, " + std::to_string(f.n / 8) +
             ").local(2, 1).spatial(8, 4).local(1, 2)";
  }
  if (!found) {
    if (tried.empty())
      return fail(ErrorCode::WgmmaShape,
                  "Wgmma [" + std::to_string(m) + ", " + std::to_string(n) +
                      "] cannot be split over " + std::to_string(warpgroups) +
                      " warpgroups into m64 atoms with N per warpgroup a multiple of 8 up to 256");
    return fail(ErrorCode::WgmmaLayout,
                "Wgmma accumulator layout " + cl.toString() +
                    " is not a wgmma fragment layout; expected one of: " + tried);
  }
  // shared operands
  auto planOperand = [&](const VarType &v, VarId var, bool isA, bool kMajor,
                         std::vector<WgmmaDescriptor> &out, std::string &why) -> bool {
    (void)var;
    SharedViewAddresses view;
    if (!sharedViewAddresses(v, view, why))
      return false;
    const std::vector<std::vector<int64_t>> &origins = view.origins;
    std::vector<int64_t> index(2);
    auto byteAddr = [&](size_t o, int64_t i, int64_t j) {
      index[0] = i;
      index[1] = j;
      return view.address(o, index);
    };
    // atoms: (mn0, k0, mnExtent)
    struct Atom {
      int64_t mn0, k0, mnExtent;
    };
    std::vector<Atom> atoms;
    if (isA) {
      for (int i = 0; i < plan.wgM; ++i)
        for (int64_t r = 0; r < plan.tilesM; ++r)
          for (int64_t s = 0; s < plan.ksteps; ++s)
            atoms.push_back({(i * plan.tilesM + r) * 64, s * plan.atomK, 64});
    } else {
      for (int j = 0; j < plan.wgN; ++j)
        for (int64_t s = 0; s < plan.ksteps; ++s)
          atoms.push_back({j * plan.n, s * plan.atomK, plan.n});
    }
    // element (mn, k) of the operand in view coordinates (a: [m, k]; b: [k, n])
    auto at = [&](size_t o, int64_t mn, int64_t kk) {
      return isA ? byteAddr(o, mn, kk) : byteAddr(o, kk, mn);
    };
    for (const Atom &atom : atoms) {
      bool ok = false;
      WgmmaDescriptor chosen;
      for (int mode : {1, 2, 3, 0}) {
        int bits = swizzleBitsOfMode(mode);
        if (!kMajor && mode == 0)
          continue; // MN-major operands: swizzled modes only
        int64_t rowBytes = int64_t(16) << bits;
        WgmmaDescriptor d;
        d.mode = mode;
        const size_t o0 = 0;
        int64_t start = at(o0, atom.mn0, atom.k0);
        if (kMajor) {
          d.sbo = atom.mnExtent > 8 ? at(o0, atom.mn0 + 8, atom.k0) - start : 0;
          int64_t perRow = rowBytes / elemBytes;
          d.lbo = plan.atomK > perRow ? at(o0, atom.mn0, atom.k0 + perRow) - start : 0;
        } else {
          d.sbo = at(o0, atom.mn0, atom.k0 + 8) - start;
          int64_t perRow = rowBytes / elemBytes;
          d.lbo = atom.mnExtent > perRow ? at(o0, atom.mn0 + perRow, atom.k0) - start : 0;
        }
        if (d.sbo < 0 || d.lbo < 0 || d.sbo % 16 != 0 || d.lbo % 16 != 0 ||
            (d.sbo >> 4) >= (1 << 14) || (d.lbo >> 4) >= (1 << 14))
          continue;
        bool fits = true;
        for (size_t oi = 0; oi < origins.size() && fits; ++oi) {
          const size_t o = oi;
          int64_t originAddr = at(o, 0, 0);
          int64_t s0 = at(o, atom.mn0, atom.k0);
          if (oi == 0)
            d.startDelta = s0 - originAddr;
          else if (s0 - originAddr != d.startDelta)
            fits = false;
          if (s0 % 16 != 0)
            fits = false;
          for (int64_t i = 0; i < atom.mnExtent && fits; ++i)
            for (int64_t kk = 0; kk < plan.atomK && fits; ++kk)
              fits = descriptorAddress(d, s0, bits, kMajor, i, kk, elemBytes) ==
                     at(o, atom.mn0 + i, atom.k0 + kk);
        }
        if (fits) {
          chosen = d;
          ok = true;
          break;
        }
      }
      if (!ok) {
        why = "its atom at " + std::string(isA ? "rows " : "columns ") + std::to_string(atom.mn0) +
              ", k " + std::to_string(atom.k0) + " fits no matrix descriptor (" +
              std::string(kMajor ? "K"
                          : isA  ? "M"
                                 : "N") +
              "-major; swizzle 128, 64, 32 bytes" + (kMajor ? " or none" : "") + ")";
        return false;
      }
      out.push_back(chosen);
    }
    return true;
  };
  std::string why;
  VarId va = inst.arg(ArgName::a).var, vb = inst.arg(ArgName::b).var;
  if (registerA) {
    // a in registers: every warpgroup holds its own rows of A, so the grid has one column
    if (plan.wgN != 1)
      return fail(ErrorCode::WgmmaLayout,
                  "Wgmma operand a (" + varName(va) +
                      ") is in registers, which needs every warpgroup to compute whole rows "
                      "(a grid of " +
                      std::to_string(warpgroups) + " x 1 warpgroups, M a multiple of " +
                      std::to_string(64 * warpgroups) + "), but the accumulator " + cl.toString() +
                      " spreads " + std::to_string(plan.wgM) + " x " + std::to_string(plan.wgN) +
                      " warpgroups; give the accumulator the layout with every warpgroup along "
                      "M, or put a in shared memory");
    std::optional<RegisterLayout> want =
        wgmmaAFragment(plan.wgM, plan.tilesM, plan.ksteps, ta.storageBits());
    if (!want || !(*want == *a->layout))
      return fail(ErrorCode::WgmmaLayout,
                  "Wgmma operand a (" + varName(va) + ") in registers has layout " +
                      a->layout->toString() + ", not the wgmma A fragment layout " +
                      wgmmaAFragmentText(plan.wgM, plan.tilesM, plan.ksteps, ta.storageBits()) +
                      " of its accumulator's grid");
  } else if (!planOperand(*a, va, true, true, plan.a, why))
    return fail(ErrorCode::WgmmaLayout,
                "Wgmma operand a (" + varName(va) + ", layout " +
                    info_.vars[a->root].sharedLayout->toString() + "): " + why +
                    "; a must be K-major, e.g. swizzle(row_major(M, 64), 3, 3, 3) for 16-bit");
  std::string whyK;
  if (!planOperand(*b, vb, false, true, plan.b, whyK)) {
    plan.b.clear();
    if (fp8 || !planOperand(*b, vb, false, false, plan.b, why))
      return fail(ErrorCode::WgmmaLayout,
                  "Wgmma operand b (" + varName(vb) + ", layout " +
                      info_.vars[b->root].sharedLayout->toString() + "): " + (fp8 ? whyK : why) +
                      (fp8 ? "; FP8 operands must be K-major" : "; b must be K- or N-major"));
    plan.transB = true;
  }
  info_.wgmma[uint32_t(curInstruction_)] = std::move(plan);
  results[0] = *c;
  return true;
}

bool ProgramChecker::visitWgmmaWaitGroup(const Instruction &inst, Results &) {
  return checkGroupCount(inst, 7);
}

bool ProgramChecker::visitWgmmaFence(const Instruction &, Results &) { return true; }

bool ProgramChecker::visitWgmmaCommitGroup(const Instruction &, Results &) { return true; }

} // namespace tilus::detail
