// Typing rules of the atomics and of Fence (docs/isa.md, "Atomics"): AtomicAdd, AtomicMax,
// AtomicMin, AtomicExch and AtomicCas read-modify-write a tile of a global or shared tensor;
// AtomicStore writes one and AtomicLoad reads one (docs/isa.md, "AtomicLoad and AtomicStore").
//
//   old = AtomicAdd(dst, r[, offset=[..]])          dst: global or shared; r: register tensor
//   old = AtomicCas(dst, cmp, r[, offset=[..]])     cmp: register tensor in r's layout
//   AtomicStore(dst, r[, offset=[..]])              no result
//   v = AtomicLoad(x, layout=L[, offset=[..]])      x: global or shared; v: x's dtype in L
//
// The tile is addressed like a store of r (offset-rank, out-of-bounds as for StoreShared), the
// element types must equal dst's (dtype-mismatch, as for stores), and each operation allows the
// types of atomicAllows (atomic-dtype). The optional result has dst's dtype and r's layout; when
// that layout replicates (or out= names a tensor of another covering layout), the JIT hands the
// old values to their owners through the scratch area, so the checker reserves it.
#include "loader/checker_impl.h"

namespace tilus::detail {

namespace {

bool isWordInteger(DataType t) { return t.isInt() && (t.bits == 32 || t.bits == 64); }

/// The types an atomic operation allows (docs/isa.md): add: i32 u32 i64 u64 f16 bf16 f32 f64;
/// max, min and cas: i32 u32 i64 u64; exch, load and store: those and f32 f64.
bool atomicAllows(Opcode op, DataType t) {
  bool floats32or64 = t == DataType::f32() || t == DataType::f64();
  if (op == Opcode::AtomicAdd)
    return isWordInteger(t) || floats32or64 || t == DataType::f16() || t == DataType::bf16();
  if (op == Opcode::AtomicExch || op == Opcode::AtomicLoad || op == Opcode::AtomicStore)
    return isWordInteger(t) || floats32or64;
  return isWordInteger(t); // AtomicMax, AtomicMin, AtomicCas
}

/// The list of atomicAllows(op, ...) for messages.
const char *allowedText(Opcode op) {
  if (op == Opcode::AtomicAdd)
    return "i32 u32 i64 u64 f16 bf16 f32 f64";
  if (op == Opcode::AtomicExch || op == Opcode::AtomicLoad || op == Opcode::AtomicStore)
    return "i32 u32 i64 u64 f32 f64";
  return "i32 u32 i64 u64";
}

} // namespace

bool ProgramChecker::visitAtomic(const Instruction &inst, Results &r) {
  const char *op = inst.spec().name;
  const Argument &dstArg = inst.arg(ArgName::dst);
  VarKind kind = dstArg.var != kNoId ? info_.vars[dstArg.var].kind : VarKind::Scalar;
  if (kind != VarKind::Global && kind != VarKind::Shared)
    return fail(ErrorCode::Scope,
                std::string(op) + " argument 'dst' is " +
                    (dstArg.var != kNoId ? varName(dstArg.var) : std::string("a scalar")) +
                    "; expected a global or shared tensor");
  const VarType &dst = info_.vars[dstArg.var];
  const VarType *value = tensorArg(inst, ArgName::r, VarKind::Register);
  if (!value)
    return false;
  const VarType *cmp = nullptr;
  if (inst.hasArg(ArgName::cmp) && !(cmp = tensorArg(inst, ArgName::cmp, VarKind::Register)))
    return false;
  const char *space = kind == VarKind::Global ? "global" : "shared";
  for (const VarType *v : {value, cmp})
    if (v && v->dtype != dst.dtype)
      return fail(ErrorCode::DtypeMismatch, std::string(op) + " of " + v->dtype.name() + " into " +
                                                dst.dtype.name() + " " + space +
                                                " memory: dtypes must agree (Cast first)");
  if (!atomicAllows(inst.opcode, dst.dtype))
    return fail(ErrorCode::AtomicDtype, std::string(op) + " of " + dst.dtype.name() +
                                            " is not supported (" + allowedText(inst.opcode) + ")");
  if (inst.opcode == Opcode::AtomicAdd && dst.dtype == DataType::bf16() &&
      options_.target.smVersion < 90)
    return fail(ErrorCode::AtomicDtype, std::string(op) +
                                            " of bf16 needs sm_90, the target is sm_" +
                                            std::to_string(options_.target.smVersion));
  if (cmp) {
    if (cmp->shape != value->shape)
      return fail(ErrorCode::ShapeMismatch, std::string(op) + " cmp has shape " +
                                                shapeString(cmp->shape) + " but r has shape " +
                                                shapeString(value->shape));
    if (!(*cmp->layout == *value->layout))
      return fail(ErrorCode::LayoutMismatch,
                  std::string(op) + " cmp has layout " + cmp->layout->toString() +
                      " but r has layout " + value->layout->toString() + "; they must be equal");
  }
  if (!checkAccess(inst, dst, dstArg.var, value->shape, "the register tensor"))
    return false;
  if (inst.results.empty())
    return true;
  r[0] = registerType(dst.dtype, *value->layout);
  if (value->layout->isReplicated() || inst.out)
    noteScratch(shapeElements(value->shape) * (dst.dtype.storageBits() / 8));
  return true;
}

bool ProgramChecker::visitFence(const Instruction &, Results &) { return true; }

bool ProgramChecker::visitAtomicLoad(const Instruction &inst, Results &r) {
  const Argument &xArg = inst.arg(ArgName::x);
  VarKind kind = xArg.var != kNoId ? info_.vars[xArg.var].kind : VarKind::Scalar;
  if (kind != VarKind::Global && kind != VarKind::Shared)
    return fail(ErrorCode::Scope,
                std::string("AtomicLoad argument 'x' is ") +
                    (xArg.var != kNoId ? varName(xArg.var) : std::string("a scalar")) +
                    "; expected a global or shared tensor");
  const VarType &x = info_.vars[xArg.var];
  if (!atomicAllows(inst.opcode, x.dtype))
    return fail(ErrorCode::AtomicDtype, std::string("AtomicLoad of ") + x.dtype.name() +
                                            " is not supported (" + allowedText(inst.opcode) + ")");
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (!checkAccess(inst, x, xArg.var, layout.shape(), "the layout"))
    return false;
  r[0] = registerType(x.dtype, layout);
  return true;
}

} // namespace tilus::detail
