// Typing rules of the conversions of register tensors (ISA section 5, "Computation on register
// tensors"): Cast (new dtype, same layout), View (the same bits per thread reinterpreted),
// Permute (dimensions reordered with the layout) and ConvertLayout (the same elements in another
// layout, exchanged through the scratch area).
#include "loader/checker_impl.h"

namespace tilus::detail {

bool ProgramChecker::visitCast(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  r[0] = registerType(inst.arg(ArgName::dtype).dtype, *a->layout);
  return true;
}

/// View reinterprets each thread's local bits: the bits per thread (locals x storage bits) and
/// the thread count must stay, and both layouts must replicate alike (the same threads are
/// replicas of each other), so that replicas keep holding equal values.
bool ProgramChecker::visitView(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  const Argument *dt = optionalArg(inst, ArgName::dtype);
  DataType to = dt ? dt->dtype : a->dtype;
  const RegisterLayout &from = *a->layout;
  const RegisterLayout *given = layoutArg(inst, ArgName::layout);
  const RegisterLayout &layout = given ? *given : from;
  if (layout.numThreads() != from.numThreads())
    return fail(ErrorCode::ViewBits, "View changes the thread count from " +
                                         std::to_string(from.numThreads()) + " to " +
                                         std::to_string(layout.numThreads()));
  int64_t bitsFrom = from.numLocals() * a->dtype.storageBits();
  int64_t bitsTo = layout.numLocals() * to.storageBits();
  if (bitsFrom != bitsTo)
    return fail(ErrorCode::ViewBits, "View changes bits per thread from " +
                                         std::to_string(bitsFrom) + " to " +
                                         std::to_string(bitsTo));
  // Replicas must stay replicas: threads that hold the same bits before (the same elements at
  // the same slots) must hold the same elements after, and no others.
  for (int64_t t = 0; (from.isReplicated() || layout.isReplicated()) && t < from.numThreads();
       ++t) {
    int64_t before = from.replicaRoot(t), after = layout.replicaRoot(t);
    if (before == after)
      continue;
    if (before != t)
      return fail(ErrorCode::ViewReplicated,
                  "View of " + varName(inst.arg(ArgName::a).var) + " whose layout " +
                      from.toString() + " replicates thread " + std::to_string(before) +
                      " in thread " + std::to_string(t) + " into " + layout.toString() +
                      ", where they hold different elements");
    return fail(ErrorCode::ViewReplicated,
                "View to " + layout.toString() + ", which replicates thread " +
                    std::to_string(after) + " in thread " + std::to_string(t) + ", of " +
                    from.toString() + ", where they hold different elements");
  }
  r[0] = registerType(to, layout);
  return true;
}

bool isPermutation(const std::vector<int64_t> &dims, size_t rank) {
  std::vector<uint8_t> seen(rank, 0);
  if (dims.size() != rank)
    return false;
  for (int64_t d : dims) {
    if (d < 0 || d >= int64_t(rank) || seen[size_t(d)])
      return false;
    seen[size_t(d)] = 1;
  }
  return true;
}

bool ProgramChecker::visitPermute(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  const std::vector<int64_t> &dims = inst.arg(ArgName::dims).ints;
  if (!isPermutation(dims, a->rank))
    return fail(ErrorCode::BadArgument, "Permute dims=" + shapeString(dims) +
                                            " is not a permutation of the " +
                                            std::to_string(a->rank) + " dimensions");
  Expected<RegisterLayout> p = a->layout->permute(dims);
  if (!p)
    return fail(p.status().code(), p.status().first().message);
  r[0] = registerType(a->dtype, *p);
  return true;
}

bool ProgramChecker::visitConvertLayout(const Instruction &inst, Results &r) {
  const VarType *a = tensorArg(inst, ArgName::a, VarKind::Register);
  if (!a)
    return false;
  const RegisterLayout &layout = *layoutArg(inst, ArgName::layout);
  if (!checkLayoutShape(layout, a->shape, "ConvertLayout layout="))
    return false;
  // a conversion in which every thread already holds the elements it needs (the source covers
  // the result) renames registers; others go through the scratch area
  if (oracle_.cover(layout, *a->layout)) {
    int64_t bytes = std::max(1, a->dtype.storageBits() / 8);
    noteScratch(shapeElements(a->shape) * bytes);
  }
  r[0] = registerType(a->dtype, layout);
  return true;
}

} // namespace tilus::detail
