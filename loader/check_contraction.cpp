// The typing rules of the contractions (ISA section 5, "Computation on register tensors"):
// Reduce (at the end of the file), and Dot with the dot-* codes of section 6:
//
//   shapes   a [M, K], b [K, N], c [M, N]; the result d is c's type (or out='s)   dot-shape
//   dtypes   a == b, and (a, c) in the table: f16 -> f32|f16, bf16 -> f32,        dot-dtype
//            i8|u8 -> i32, f8e4m3|f8e5m2 -> f32, f32 -> f32, f64 -> f64
//   layouts  either the per-thread rule: every owner thread of d[m, n] owns c[m, n],
//            and a[m, k], b[k, n] for every k (any thread can then compute its own
//            outputs from its own registers), or an mma atom division: a, b, c, d divide
//            on the right by the atom's A, B, C fragments, and the outer layouts satisfy
//            the same rule with each warp as one "thread" (outer thread = warp index).
//
// Atoms (PTX ISA, mma.sync fragment layouts for one warp):
//   m16n8k16 (f16, bf16):
//     A 16x16 column_local(2, 2).spatial(8, 4).local(1, 2)
//     B 16x8  local(2, 1).column_spatial(4, 8).local(2, 1)
//     C 16x8  local(2, 1).spatial(8, 4).local(1, 2)
//   m16n8k32 (i8, u8, f8e4m3, f8e5m2): four 8-bit k-consecutive values per 32-bit register
//     A 16x32 column_local(2, 2).spatial(8, 4).local(1, 4)
//       row = lane/4 + 8*((i/4) % 2), col = 4*(lane%4) + i%4 + 16*(i/8)
//     B 32x8  local(2, 1).column_spatial(4, 8).local(4, 1)
//       row = 4*(lane%4) + i%4 + 16*(i/4), col = lane/4
//     C 16x8  local(2, 1).spatial(8, 4).local(1, 2)
// Example: the pipelined matmul's acc spatial(2, 2).local(2, 4).<C> divides into the outer
// spatial(2, 2).local(2, 4) (4 warps, 4x8 tiles): warp w holds tile rows 2(w/2)+{0,1} and
// columns 4(w%2)+{0..3}; a's outer spatial(2, 1).replicate(2).local(2, 2) gives warp w tile rows
// 2(w/2)+{0,1} for every k-tile, b's outer replicate(2).spatial(1, 2).local(2, 4) tile columns
// 4(w%2)+{0..3} for every k-tile: the warp-level rule holds.
#include "loader/checker_impl.h"

#include <cassert>

namespace tilus::detail {

namespace {

RegisterLayout chain(std::initializer_list<Expected<RegisterLayout>> parts) {
  std::optional<RegisterLayout> l;
  for (const Expected<RegisterLayout> &p : parts) {
    assert(p.ok() && "mma atom primitives are valid");
    if (!l) {
      l = *p;
      continue;
    }
    Expected<RegisterLayout> next = l->product(*p);
    assert(next.ok() && "mma atom products are valid");
    l = *next;
  }
  return *l;
}

using L = RegisterLayout;

/// An m16n8 atom: the two differ only in how many consecutive k each thread holds in a's and
/// b's innermost local, `kLocal`: 2 for m16n8k16 (16-bit operands), 4 for m16n8k32 (8-bit).
MmaAtom m16n8Atom(const char *name, int64_t kLocal) {
  return MmaAtom{name, chain({L::columnLocal({2, 2}), L::spatial({8, 4}), L::local({1, kLocal})}),
                 chain({L::local({2, 1}), L::columnSpatial({4, 8}), L::local({kLocal, 1})}),
                 chain({L::local({2, 1}), L::spatial({8, 4}), L::local({1, 2})})};
}

const MmaAtom &atomK16() {
  static const MmaAtom atom = m16n8Atom("m16n8k16", 2);
  return atom;
}

const MmaAtom &atomK32() {
  static const MmaAtom atom = m16n8Atom("m16n8k32", 4);
  return atom;
}

bool dotTypesAllowed(DataType ab, DataType c) {
  if (ab == DataType::f16())
    return c == DataType::f32() || c == DataType::f16();
  if (ab == DataType::bf16() || ab == DataType::f8e4m3() || ab == DataType::f8e5m2() ||
      ab == DataType::f32())
    return c == DataType::f32();
  if (ab == DataType::i(8) || ab == DataType::u(8))
    return c == DataType::i32();
  if (ab == DataType::f64())
    return c == DataType::f64();
  return false;
}

std::string describe(const DotFailure &f, const char *unit) {
  std::string who = std::string(unit) + " " + std::to_string(f.thread) + " owns d[" +
                    std::to_string(f.m) + ", " + std::to_string(f.n) + "] but not ";
  switch (f.missing) {
  case 'c':
    return who + "c[" + std::to_string(f.m) + ", " + std::to_string(f.n) + "]";
  case 'a':
    return who + "a[" + std::to_string(f.m) + ", " + std::to_string(f.k) + "]";
  default:
    return who + "b[" + std::to_string(f.k) + ", " + std::to_string(f.n) + "]";
  }
}

} // namespace

const MmaAtom *mmaAtomFor(DataType t) {
  if (t == DataType::f16() || t == DataType::bf16())
    return &atomK16();
  if (t == DataType::i(8) || t == DataType::u(8) || t == DataType::f8e4m3() ||
      t == DataType::f8e5m2())
    return &atomK32();
  return nullptr;
}

std::optional<std::array<const VarType *, 3>>
ProgramChecker::contractionOperands(const Instruction &inst, VarKind abKind) {
  const VarType *a = tensorArg(inst, ArgName::a, abKind);
  const VarType *b = a ? tensorArg(inst, ArgName::b, abKind) : nullptr;
  const VarType *c = b ? tensorArg(inst, ArgName::c, VarKind::Register) : nullptr;
  if (!c)
    return std::nullopt;
  return std::array<const VarType *, 3>{a, b, c};
}

bool ProgramChecker::visitDot(const Instruction &inst, Results &r) {
  std::optional<std::array<const VarType *, 3>> operands =
      contractionOperands(inst, VarKind::Register);
  if (!operands)
    return false;
  auto [a, b, c] = *operands;
  std::string shapes = "a " + shapeString(a->shape) + ", b " + shapeString(b->shape) + ", c " +
                       shapeString(c->shape);
  if (a->rank != 2 || b->rank != 2 || c->rank != 2)
    return fail(ErrorCode::DotShape, "Dot operands must be matrices: " + shapes);
  const int64_t m = a->shape[0], k = a->shape[1], n = b->shape[1];
  if (b->shape[0] != k || c->shape[0] != m || c->shape[1] != n)
    return fail(ErrorCode::DotShape, "Dot shapes " + shapes + " are not [M, K], [K, N], [M, N]");
  if (a->dtype != b->dtype || !dotTypesAllowed(a->dtype, c->dtype))
    return fail(ErrorCode::DotDtype,
                std::string("Dot of ") + a->dtype.name() + " x " + b->dtype.name() + " into " +
                    c->dtype.name() +
                    " is not supported (f16 -> f32|f16, bf16 -> f32, i8|u8 -> i32, "
                    "f8e4m3|f8e5m2 -> f32, f32 -> f32, f64 -> f64)");
  const VarType *target = outTarget(inst);
  if (target && target->dtype != c->dtype)
    return fail(ErrorCode::DtypeMismatch, std::string("Dot gives ") + c->dtype.name() +
                                              " but the out= target is " + target->dtype.name());
  if (target && target->shape != c->shape)
    return fail(ErrorCode::ShapeMismatch, "Dot gives shape " + shapeString(c->shape) +
                                              " but the out= target has shape " +
                                              shapeString(target->shape));
  const RegisterLayout &d = target ? *target->layout : *c->layout;
  if (!checkDotLayouts(a->dtype, *a->layout, *b->layout, *c->layout, d))
    return false;
  int64_t bytesA = std::max(1, a->dtype.storageBits() / 8);
  int64_t bytesB = std::max(1, b->dtype.storageBits() / 8);
  noteScratch(m * k * bytesA + k * n * bytesB);
  r[0] = registerType(c->dtype, d);
  return true;
}

namespace {

/// The dot-layout rule's verdict: nullopt when it holds, else the diagnostic's message.
std::optional<std::string> dotLayoutError(LayoutOracle &oracle, DataType operandType,
                                          const RegisterLayout &a, const RegisterLayout &b,
                                          const RegisterLayout &c, const RegisterLayout &d) {
  std::string atomWhy;
  if (const MmaAtom *atom = mmaAtomFor(operandType)) {
    std::optional<RegisterLayout> ao = a.divideRight(atom->a);
    std::optional<RegisterLayout> bo = b.divideRight(atom->b);
    std::optional<RegisterLayout> co = c.divideRight(atom->c);
    std::optional<RegisterLayout> dout = d.divideRight(atom->c);
    auto noDivide = [&](const char *what, const RegisterLayout &h, const RegisterLayout &g) {
      return std::string(what) + " " + h.toString() + " does not divide by the " + atom->name +
             " fragment " + g.toString();
    };
    if (!ao)
      atomWhy = noDivide("a", a, atom->a);
    else if (!bo)
      atomWhy = noDivide("b", b, atom->b);
    else if (!co)
      atomWhy = noDivide("c", c, atom->c);
    else if (!dout)
      atomWhy = noDivide("d", d, atom->c);
    else if (ao->numThreads() != bo->numThreads() || ao->numThreads() != co->numThreads() ||
             ao->numThreads() != dout->numThreads())
      atomWhy = "the outer layouts have different warp counts";
    else if (std::optional<DotFailure> f = oracle.dotPerThread(*ao, *bo, *co, *dout))
      atomWhy = std::string("with ") + atom->name + " tiles, " + describe(*f, "warp");
    else
      return std::nullopt;
  } else {
    atomWhy = std::string("no mma atom exists for ") + operandType.name();
  }
  std::optional<DotFailure> f = oracle.dotPerThread(a, b, c, d);
  if (!f)
    return std::nullopt;
  return "Dot layouts satisfy neither the per-thread rule (" + describe(*f, "thread") +
         ") nor an mma atom division (" + atomWhy + ")";
}

/// Whether the JIT reduces `dim` of `layout` with warp shuffles alone (docs/jit.md, Reduce):
/// every thread mode of the dimension has a power-of-two size and thread stride and stays
/// within 32 threads. Then the reduction needs no scratch area. (Each result slot combines the
/// same local slots in every thread: the derived layout keeps the other dimensions' modes, so
/// that part of the JIT's test always holds.) A thread mode's stride is the product of the
/// sizes of the thread modes after it (isa/layout.h, unified form).
bool reduceStaysInWarps(const RegisterLayout &layout, int dim) {
  auto pow2 = [](int64_t v) { return v > 0 && (v & (v - 1)) == 0; };
  const std::vector<LayoutMode> &modes = layout.modes();
  const std::vector<int32_t> &spatial = layout.spatialModes();
  int64_t div = 1;
  for (size_t k = spatial.size(); k-- > 0;) {
    const LayoutMode &mode = modes[size_t(spatial[k])];
    if (mode.dim == dim && (!pow2(div) || !pow2(mode.size) || div * mode.size > 32))
      return false;
    div *= mode.size;
  }
  return true;
}

} // namespace

/// Memoised per (operand dtype, layouts): programs repeat the same Dot many times.
bool ProgramChecker::checkDotLayouts(DataType operandType, const RegisterLayout &a,
                                     const RegisterLayout &b, const RegisterLayout &c,
                                     const RegisterLayout &d) {
  uint64_t tag = uint64_t(operandType.kind) << 24 | uint64_t(operandType.bits) << 16 |
                 uint64_t(operandType.exponent) << 8 | operandType.mantissa;
  std::optional<std::string> error = oracle_.verdict(
      tag, {a, b, c, d}, [&] { return dotLayoutError(oracle_, operandType, a, b, c, d); });
  if (!error)
    return true;
  return fail(ErrorCode::DotLayout, *error);
}

bool ProgramChecker::visitReduce(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  int64_t dim = inst.arg(ArgName::dim).intValue;
  if (dim < 0 || dim >= int64_t(a->rank))
    return fail(ErrorCode::ReduceDim, "Reduce dim=" + std::to_string(dim) +
                                          " is out of range for rank " + std::to_string(a->rank));
  auto op = ReduceOp(inst.arg(ArgName::op).intValue);
  std::string what = std::string("Reduce op=") + reduceOpName(op) + " on " + a->dtype.name();
  if (!a->dtype.isArithmetic())
    return fail(ErrorCode::SubbyteArith, what + ": defined for " + kArithmeticTypes);
  if ((op == ReduceOp::Any || op == ReduceOp::All) && a->dtype.isFloat())
    return fail(ErrorCode::DtypeMismatch, what + ": any and all need bool or integers");
  const Argument *keep = optionalArg(inst, ArgName::keepdim);
  Expected<RegisterLayout> derived = a->layout->reduce(int(dim), keep && keep->intValue != 0);
  if (!derived)
    return fail(derived.status().code(), derived.status().first().message);
  if (const RegisterLayout *given = layoutArg(inst, ArgName::layout)) {
    if (!checkLayoutShape(*given, derived->shape(), "Reduce layout="))
      return false;
    if (*given != *derived)
      return fail(ErrorCode::LayoutMismatch, "Reduce layout=" + given->toString() +
                                                 " differs from the derived layout " +
                                                 derived->toString());
  }
  if (!reduceStaysInWarps(*a->layout, int(dim)))
    noteScratch(shapeElements(a->shape) * 8);
  r[0] = registerType(a->dtype, *derived);
  return true;
}

} // namespace tilus::detail
