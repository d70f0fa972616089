// The contractions Dot and Reduce, computed on the tensor's logical elements and handed back to
// every owner.
//
// Accumulation choices (the ISA leaves the order unspecified): Dot and float sum/prod
// reductions accumulate in double (integer Dot and reductions in wrapping 64-bit integers) and
// round once into the result type; see docs/interpreter.md.
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"

namespace tilus::cpu {

namespace {

/// Logical elements (row-major) of register tensor v, each taken from its first owner.
Expected<const std::vector<uint64_t> *> logicalValues(BlockState &b, uint32_t index, VarId v,
                                                      size_t scratch) {
  if (Status s = b.requireRegister(index, v); !s.ok())
    return s;
  const LayoutTable &table = *b.plan.varTables[v];
  const std::vector<uint64_t> &slots = b.regs[v];
  std::vector<uint64_t> &out = b.scratch[scratch];
  out.resize(size_t(table.elements));
  for (int64_t e = 0; e < table.elements; ++e)
    out[size_t(e)] = slots[size_t(table.firstOwner(e))];
  return &out;
}

void scatter(BlockState &b, VarId r, const std::vector<uint64_t> &logical) {
  const LayoutTable &table = *b.plan.varTables[r];
  std::vector<uint64_t> out = b.takeBuffer(size_t(table.numSlots()));
  for (size_t s = 0; s < out.size(); ++s)
    out[s] = logical[size_t(table.slotLinear[s])];
  b.setRegister(r, std::move(out));
}

} // namespace

namespace {

template <typename T, typename Decode>
std::vector<T> decodeAll(const std::vector<uint64_t> &bits, Decode decode) {
  std::vector<T> out(bits.size());
  for (size_t k = 0; k < bits.size(); ++k)
    out[k] = decode(bits[k]);
  return out;
}

/// d[m, n] = c[m, n] + sum_k a[m, k] * b[k, n] over decoded values.
template <typename T>
void contract(std::vector<T> &d, const std::vector<T> &a, const std::vector<T> &bm, int64_t m,
              int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; ++i) {
    T *row = d.data() + i * n;
    for (int64_t p = 0; p < k; ++p) {
      T x = a[size_t(i * k + p)];
      const T *brow = bm.data() + p * n;
      for (int64_t j = 0; j < n; ++j)
        row[j] += x * brow[j];
    }
  }
}

} // namespace

Status Exec::visitDot(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId va = inst.arg(ArgName::a).var, vb = inst.arg(ArgName::b).var, vc = inst.arg(ArgName::c).var;
  VarId r = inst.results[0];
  const LayoutTable &ta = *b.plan.varTables[va], &tb = *b.plan.varTables[vb];
  if (ta.shape.size() != 2 || tb.shape.size() != 2 || ta.shape[1] != tb.shape[0])
    return b.fail(ErrorCode::DotShape, index, "Dot operands are not [M, K] and [K, N]");
  int64_t m = ta.shape[0], k = ta.shape[1], n = tb.shape[1];
  DataType da = b.info.vars[va].dtype, db = b.info.vars[vb].dtype, dc = b.info.vars[vc].dtype;
  auto av = logicalValues(b, index, va, 0);
  auto bv = logicalValues(b, index, vb, 1);
  auto cv = logicalValues(b, index, vc, 2);
  if (!av || !bv || !cv)
    return !av ? av.takeStatus() : !bv ? bv.takeStatus() : cv.takeStatus();
  std::vector<uint64_t> result(size_t(m * n));
  if (da.isFloat()) {
    auto fa = decodeAll<double>(**av, [&](uint64_t x) { return decodeFloat(x, da); });
    auto fb = decodeAll<double>(**bv, [&](uint64_t x) { return decodeFloat(x, db); });
    auto fd = decodeAll<double>(**cv, [&](uint64_t x) { return decodeFloat(x, dc); });
    contract(fd, fa, fb, m, n, k);
    for (size_t e = 0; e < result.size(); ++e)
      result[e] = encodeFloat(fd[e], dc);
  } else {
    auto ia = decodeAll<int64_t>(**av, [&](uint64_t x) { return toInt64(x, da); });
    auto ib = decodeAll<int64_t>(**bv, [&](uint64_t x) { return toInt64(x, db); });
    auto id = decodeAll<uint64_t>(**cv, [&](uint64_t x) { return uint64_t(toInt64(x, dc)); });
    std::vector<uint64_t> ua(ia.begin(), ia.end()), ub(ib.begin(), ib.end());
    contract(id, ua, ub, m, n, k); // wrapping two's-complement arithmetic
    for (size_t e = 0; e < result.size(); ++e)
      result[e] = id[e] & bitMask(dc.bits);
  }
  scatter(b, r, result);
  return Status::success();
}

namespace {

uint64_t reduceOne(ReduceOp op, DataType t, const uint64_t *x, int64_t len, int64_t stride) {
  auto at = [&](int64_t j) { return x[j * stride]; };
  auto truth = [&](uint64_t v) { return convertBits(v, t, DataType::boolean()) != 0; };
  switch (op) {
  case ReduceOp::Any:
  case ReduceOp::All: {
    bool any = false, all = true;
    for (int64_t j = 0; j < len; ++j) {
      bool v = truth(at(j));
      any = any || v;
      all = all && v;
    }
    return convertBits((op == ReduceOp::Any ? any : all) ? 1 : 0, DataType::boolean(), t);
  }
  case ReduceOp::Max:
  case ReduceOp::Min: {
    ExprOp e = op == ReduceOp::Max ? ExprOp::Max : ExprOp::Min;
    uint64_t acc = at(0);
    for (int64_t j = 1; j < len; ++j) {
      uint64_t operands[2] = {acc, at(j)};
      acc = applyScalarOp(e, t, t, operands);
    }
    return acc;
  }
  case ReduceOp::Sum:
  case ReduceOp::Prod:
    break;
  }
  bool sum = op == ReduceOp::Sum;
  if (t.isFloat()) {
    double acc = sum ? 0.0 : 1.0;
    for (int64_t j = 0; j < len; ++j)
      acc = sum ? acc + decodeFloat(at(j), t) : acc * decodeFloat(at(j), t);
    return encodeFloat(acc, t);
  }
  uint64_t acc = sum ? 0 : 1;
  for (int64_t j = 0; j < len; ++j)
    acc = sum ? acc + uint64_t(toInt64(at(j), t)) : acc * uint64_t(toInt64(at(j), t));
  return t.isBool() ? uint64_t(acc != 0) : acc & bitMask(t.bits);
}

} // namespace

Status Exec::visitReduce(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  VarId a = inst.arg(ArgName::a).var, r = inst.results[0];
  const LayoutTable &at = *b.plan.varTables[a];
  int64_t dim = inst.arg(ArgName::dim).intValue;
  if (dim < 0 || size_t(dim) >= at.shape.size())
    return b.fail(ErrorCode::ReduceDim, index,
                  "Reduce dimension " + std::to_string(dim) + " out of range for rank " +
                      std::to_string(at.shape.size()));
  if (at.shape[size_t(dim)] == 0)
    return b.fail(ErrorCode::ReduceDim, index, "Reduce over an empty dimension");
  ReduceOp op = ReduceOp(inst.arg(ArgName::op).intValue);
  DataType t = b.info.vars[a].dtype;
  auto values = logicalValues(b, index, a, 0);
  if (!values)
    return values.takeStatus();
  int64_t outer = 1, inner = 1, len = at.shape[size_t(dim)];
  for (size_t d = 0; d < at.shape.size(); ++d) {
    if (int64_t(d) < dim)
      outer *= at.shape[d];
    else if (int64_t(d) > dim)
      inner *= at.shape[d];
  }
  std::vector<uint64_t> result(size_t(outer * inner));
  const uint64_t *x = (*values)->data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i)
      result[size_t(o * inner + i)] = reduceOne(op, t, x + (o * len) * inner + i, len, inner);
  scatter(b, r, result);
  return Status::success();
}

} // namespace tilus::cpu
