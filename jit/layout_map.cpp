// Splits a register layout's canonical form into thread terms and local terms (see
// layout_map.h), and matches result slots with operand slots for elementwise instructions.
// Everything here runs at compile time on plain integers; the code generator turns the terms
// into a few integer instructions per thread and the slot matches into direct register uses.
#include "jit/layout_map.h"

#include <cassert>
#include <optional>

namespace tilus::jit {

LayoutMap::LayoutMap(const RegisterLayout &layout)
    : rank_(layout.rank() < 0 ? 0 : layout.rank()), shape_(layout.shape()),
      threads_(layout.numThreads()), locals_(layout.numLocals()) {
  const std::vector<LayoutMode> &modes = layout.modes();
  // Weight of each mode within its dimension: the product of the sizes of the less significant
  // modes of the same dimension (later in `modes`).
  std::vector<int64_t> weight(modes.size(), 1);
  for (size_t m = 0; m < modes.size(); ++m) {
    if (modes[m].dim < 0)
      continue;
    int64_t w = 1;
    for (size_t n = m + 1; n < modes.size(); ++n)
      if (modes[n].dim == modes[m].dim)
        w *= modes[n].size;
    weight[m] = w;
  }
  auto buildTerms = [&](const std::vector<int32_t> &list, std::vector<LayoutTerm> &terms) {
    int64_t div = 1;
    for (size_t k = list.size(); k-- > 0;) {
      const LayoutMode &mode = modes[size_t(list[k])];
      terms.insert(terms.begin(), LayoutTerm{mode.dim, div, mode.size, weight[size_t(list[k])]});
      div *= mode.size;
    }
  };
  buildTerms(layout.spatialModes(), spatial_);
  buildTerms(layout.localModes(), local_);
  localPart_.assign(size_t(locals_ * rank_), 0);
  for (int64_t i = 0; i < locals_; ++i)
    for (const LayoutTerm &term : local_)
      localPart_[size_t(i * rank_ + term.dim)] += ((i / term.div) % term.size) * term.stride;
}

void LayoutMap::threadPart(int64_t t, int64_t *out) const {
  for (int d = 0; d < rank_; ++d)
    out[d] = 0;
  for (const LayoutTerm &term : spatial_)
    if (term.dim >= 0)
      out[term.dim] += ((t / term.div) % term.size) * term.stride;
}

void LayoutMap::apply(int64_t t, int64_t i, int64_t *out) const {
  threadPart(t, out);
  const int64_t *loc = localPart(i);
  for (int d = 0; d < rank_; ++d)
    out[d] += loc[d];
}

bool LayoutMap::isPrimary(int64_t t) const {
  for (const LayoutTerm &term : spatial_)
    if (term.dim < 0 && (t / term.div) % term.size != 0)
      return false;
  return true;
}

int64_t LayoutMap::localSlotOf(const int64_t *x) const {
  int64_t slot = 0;
  for (const LayoutTerm &term : local_)
    slot += ((x[term.dim] / term.stride) % term.size) * term.div;
  return slot;
}

bool LayoutMap::owns(int64_t t, const int64_t *x) const {
  for (const LayoutTerm &term : spatial_)
    if (term.dim >= 0 && (x[term.dim] / term.stride) % term.size != (t / term.div) % term.size)
      return false;
  return true;
}

int64_t LayoutMap::linear(const int64_t *x) const {
  int64_t index = 0;
  for (int d = 0; d < rank_; ++d)
    index = index * shape_[size_t(d)] + x[d];
  return index;
}

void broadcastIndex(const std::vector<int64_t> &resultShape, const int64_t *x,
                    const std::vector<int64_t> &operandShape, int64_t *out) {
  size_t r = resultShape.size(), o = operandShape.size();
  for (size_t k = 0; k < o; ++k) {
    size_t fromResult = r - o + k; // right-aligned
    out[k] = operandShape[k] == 1 ? 0 : x[fromResult];
  }
}

std::vector<SlotSource> gatherSlots(const LayoutMap &result, const LayoutMap &operand) {
  std::vector<SlotSource> sources(size_t(result.locals()));
  std::vector<int64_t> x(size_t(result.rank()) + 1), y(size_t(operand.rank()) + 1);
  for (int64_t i = 0; i < result.locals(); ++i) {
    SlotSource &src = sources[size_t(i)];
    std::vector<int64_t> perThread(size_t(result.threads()));
    for (int64_t t = 0; t < result.threads(); ++t) {
      result.apply(t, i, x.data());
      broadcastIndex(result.shape(), x.data(), operand.shape(), y.data());
      if (t >= operand.threads() || !operand.owns(t, y.data()))
        src.ok = false;
      perThread[size_t(t)] = operand.localSlotOf(y.data());
    }
    src.slot = perThread.empty() ? 0 : perThread[0];
    for (int64_t s : perThread)
      if (s != src.slot)
        src.uniform = false;
    if (!src.uniform)
      src.perThread = std::move(perThread);
  }
  return sources;
}

RegisterLayout layoutChain(std::initializer_list<Expected<RegisterLayout>> parts) {
  std::optional<RegisterLayout> l;
  for (const Expected<RegisterLayout> &p : parts)
    l = l ? l->product(*p).value() : *p;
  return *l;
}

} // namespace tilus::jit
