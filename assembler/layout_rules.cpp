// The constraint rules of layout inference, one per family (docs/layout-inference.md). Every
// layout is built from primitives or from a unified form, so the rules only choose sizes and
// orders; whether a combination is legal is decided by the same ownership questions the checker
// asks (covers, dotLayoutsFit).
#include "assembler/layout_rules.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <set>
#include <tuple>

namespace tilus::tasm {

namespace {

using L = RegisterLayout;

/// Product of the factors; nullopt when one is invalid or the product exceeds the layout limits
/// (kMaxLayoutCells: large tiles over many replicated threads).
std::optional<RegisterLayout> tryChain(std::initializer_list<Expected<RegisterLayout>> parts) {
  std::optional<RegisterLayout> l;
  for (const Expected<RegisterLayout> &p : parts) {
    if (!p)
      return std::nullopt;
    if (!l) {
      l = p.value();
      continue;
    }
    Expected<RegisterLayout> next = l->product(p.value());
    if (!next)
      return std::nullopt;
    l = std::move(next).value();
  }
  return l;
}

/// Product of factors that are valid by construction (the atoms).
RegisterLayout chain(std::initializer_list<Expected<RegisterLayout>> parts) {
  return *tryChain(parts);
}

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> d;
  for (int64_t k = 1; k <= n; ++k)
    if (n % k == 0)
      d.push_back(k);
  return d;
}

struct Atom {
  const char *name;
  int64_t k;
  RegisterLayout a, b, c;
};

/// The mma atom of the checker's table (docs/checker.md, Dot) for operand and result types.
std::optional<Atom> atomFor(DataType ab, DataType cd) {
  bool f16 = ab == DataType::f16() && (cd == DataType::f32() || cd == DataType::f16());
  bool bf16 = ab == DataType::bf16() && cd == DataType::f32();
  bool i8 = (ab == DataType::i(8) || ab == DataType::u(8)) && cd == DataType::i32();
  bool f8 = (ab == DataType::f8e4m3() || ab == DataType::f8e5m2()) && cd == DataType::f32();
  RegisterLayout c = chain({L::local({2, 1}), L::spatial({8, 4}), L::local({1, 2})});
  if (f16 || bf16)
    return Atom{"m16n8k16", 16,
                chain({L::columnLocal({2, 2}), L::spatial({8, 4}), L::local({1, 2})}),
                chain({L::local({2, 1}), L::columnSpatial({4, 8}), L::local({2, 1})}), c};
  if (i8 || f8)
    return Atom{"m16n8k32", 32,
                chain({L::columnLocal({2, 2}), L::spatial({8, 4}), L::local({1, 4})}),
                chain({L::local({2, 1}), L::columnSpatial({4, 8}), L::local({4, 1})}), c};
  return std::nullopt;
}

/// Thread t's owned elements of `l` as a map from linear index to local slot (-1: not owned).
void ownedSlots(const RegisterLayout &l, int64_t t, std::vector<int64_t> &slot) {
  slot.assign(size_t(l.numElements()), -1);
  for (int64_t i = 0; i < l.numLocals(); ++i)
    slot[size_t(l.applyLinear(t, i))] = i;
}

/// The per-thread Dot rule over a [M, K], b [K, N], c [M, N]; with `uniformSlots`, the slots of
/// the a and b elements each c slot needs must not depend on the thread (the JIT's mma plan).
/// Each thread's c slots need whole rows of a and whole columns of b, so a row's (a column's)
/// slots are looked up once per thread, not once per c slot; with `uniformSlots` each row's
/// and column's slot vector is interned, and c slot i must see the same ids in every thread.
bool perThreadDot(const RegisterLayout &a, const RegisterLayout &b, const RegisterLayout &c,
                  bool uniformSlots) {
  if (a.rank() != 2 || b.rank() != 2 || c.rank() != 2)
    return false;
  int64_t m = c.shape()[0], n = c.shape()[1], k = a.shape()[1];
  if (a.shape()[0] != m || b.shape()[0] != k || b.shape()[1] != n)
    return false;
  int64_t threads = c.numThreads();
  if (a.numThreads() != threads || b.numThreads() != threads)
    return false;
  // Work bound: the questions are asked of tiles, never of huge tensors.
  if (threads * (a.numElements() + b.numElements() + c.numLocals() * k) > (int64_t(1) << 27))
    return false;
  constexpr int64_t kUnseen = -2;
  std::vector<int64_t> sa, sb, firstRow, firstCol;
  std::vector<int64_t> rowId = std::vector<int64_t>(size_t(m));
  std::vector<int64_t> colId = std::vector<int64_t>(size_t(n));
  std::vector<int64_t> slots = std::vector<int64_t>(size_t(k));
  std::map<std::vector<int64_t>, int64_t> ids; // slot vectors of a's rows and b's columns
  // the slots of a's row r (b's column j) in this thread: an id, or -1 where one is not owned
  auto lookUp = [&](const std::vector<int64_t> &owned, int64_t start, int64_t stride) {
    for (int64_t kk = 0; kk < k; ++kk) {
      slots[size_t(kk)] = owned[size_t(start + kk * stride)];
      if (slots[size_t(kk)] < 0)
        return int64_t(-1);
    }
    return uniformSlots ? ids.emplace(slots, int64_t(ids.size())).first->second : int64_t(0);
  };
  for (int64_t t = 0; t < threads; ++t) {
    ownedSlots(a, t, sa);
    ownedSlots(b, t, sb);
    std::fill(rowId.begin(), rowId.end(), kUnseen);
    std::fill(colId.begin(), colId.end(), kUnseen);
    for (int64_t i = 0; i < c.numLocals(); ++i) {
      int64_t lin = c.applyLinear(t, i), row = lin / n, col = lin % n; // c is [m, n]
      if (rowId[size_t(row)] == kUnseen)
        rowId[size_t(row)] = lookUp(sa, row * k, 1);
      if (colId[size_t(col)] == kUnseen)
        colId[size_t(col)] = lookUp(sb, col, n);
      if (rowId[size_t(row)] < 0 || colId[size_t(col)] < 0)
        return false;
      if (!uniformSlots)
        continue;
      if (t == 0) {
        firstRow.push_back(rowId[size_t(row)]);
        firstCol.push_back(colId[size_t(col)]);
      } else if (firstRow[size_t(i)] != rowId[size_t(row)] ||
                 firstCol[size_t(i)] != colId[size_t(col)]) {
        return false;
      }
    }
  }
  return true;
}

std::vector<DotPlan> gridPlans(int64_t m, int64_t n, int64_t k, const std::optional<Atom> &atom,
                               int64_t threads, int64_t costA, int64_t costB);

int log2Exact(int64_t v) {
  if (v <= 0 || (v & (v - 1)) != 0)
    return -1;
  int r = 0;
  while ((int64_t(1) << r) < v)
    ++r;
  return r;
}

} // namespace

std::string DotPlan::describe(int64_t m, int64_t n) const {
  if (derived)
    return "per-thread, every thread holding the rows of a and columns of b of its accumulator "
           "elements";
  std::string unit = mma ? " warps, " : " threads, ";
  std::string s = mma ? std::string("mma ") + atom : std::string("per-thread");
  s += ", " + std::to_string(rows) + " x " + std::to_string(cols) + unit +
       std::to_string(m / rows) + " x " + std::to_string(n / cols) + " per " +
       (mma ? "warp" : "thread");
  if (replicas > 1)
    s += ", each tile on " + std::to_string(replicas) + (mma ? " warps" : " threads");
  return s;
}

int64_t operandCost(bool convertedFromInt) { return convertedFromInt ? 5 : 1; }

std::vector<DotPlan> dotPlans(int64_t m, int64_t n, int64_t k, DataType ab, DataType cd,
                              int64_t threads, int64_t costA, int64_t costB) {
  std::vector<DotPlan> plans;
  if (m < 1 || n < 1 || k < 1 || threads < 1)
    return plans;
  std::optional<Atom> atom = atomFor(ab, cd);
  bool mma = atom && threads % 32 == 0 && m % 16 == 0 && n % 8 == 0 && k % atom->k == 0;
  if (mma) {
    // The mma arrangements first; the per-thread ones remain as fallbacks (for operands whose
    // written layouts no mma arrangement fits).
    plans = gridPlans(m, n, k, std::nullopt, threads, costA, costB);
    std::vector<DotPlan> atoms = gridPlans(m, n, k, *atom, threads, costA, costB);
    plans.insert(plans.begin(), atoms.begin(), atoms.end());
    return plans;
  }
  return gridPlans(m, n, k, std::nullopt, threads, costA, costB);
}

namespace {

std::vector<DotPlan> gridPlans(int64_t m, int64_t n, int64_t k, const std::optional<Atom> &atom,
                               int64_t threads, int64_t costA, int64_t costB) {
  std::vector<DotPlan> plans;
  bool mma = atom.has_value();
  int64_t units = mma ? threads / 32 : threads;
  int64_t tm = mma ? m / 16 : m, tn = mma ? n / 8 : n, tk = mma ? k / atom->k : k;
  for (int64_t rows : divisors(tm)) {
    for (int64_t cols : divisors(tn)) {
      if (units % (rows * cols) != 0)
        continue;
      int64_t rep = units / (rows * cols);
      DotPlan p;
      p.mma = mma;
      p.atom = mma ? atom->name : "";
      p.rows = rows;
      p.cols = cols;
      p.replicas = rep;
      std::optional<RegisterLayout> c =
          tryChain({L::spatial({rows, cols}), L::replicate(rep), L::local({tm / rows, tn / cols}),
                    mma ? Expected<RegisterLayout>(atom->c) : L::replicate(1)});
      std::optional<RegisterLayout> a =
          tryChain({L::spatial({rows, 1}), L::replicate(cols * rep), L::local({tm / rows, tk}),
                    mma ? Expected<RegisterLayout>(atom->a) : L::replicate(1)});
      std::optional<RegisterLayout> b = tryChain(
          {L::replicate(rows), L::spatial({1, cols}), L::replicate(rep), L::local({tk, tn / cols}),
           mma ? Expected<RegisterLayout>(atom->b) : L::replicate(1)});
      if (!a || !b || !c)
        continue; // beyond the layout limits
      p.a = std::move(*a);
      p.b = std::move(*b);
      p.c = std::move(*c);
      plans.push_back(std::move(p));
    }
  }
  std::stable_sort(plans.begin(), plans.end(), [&](const DotPlan &x, const DotPlan &y) {
    return std::make_tuple(x.replicas, costA * m / x.rows + costB * n / x.cols, x.rows) <
           std::make_tuple(y.replicas, costA * m / y.rows + costB * n / y.cols, y.rows);
  });
  return plans;
}

} // namespace

std::optional<DotPlan> perThreadPlanFor(const RegisterLayout &c, int64_t k) {
  if (c.rank() != 2 || k < 1)
    return std::nullopt;
  Expected<RegisterLayout> rows = c.reduce(1, true), cols = c.reduce(0, true);
  if (!rows || !cols)
    return std::nullopt;
  Expected<RegisterLayout> a = rows->product(L::local({1, k}).value());
  Expected<RegisterLayout> b = cols->product(L::local({k, 1}).value());
  if (!a || !b)
    return std::nullopt;
  DotPlan p;
  p.a = std::move(a).value();
  p.b = std::move(b).value();
  p.c = c;
  p.derived = true;
  return p;
}

bool dotLayoutsFit(const RegisterLayout &a, const RegisterLayout &b, const RegisterLayout &c,
                   DataType ab, DataType cd, bool mma) {
  if (!mma)
    return perThreadDot(a, b, c, false);
  std::optional<Atom> atom = atomFor(ab, cd);
  if (!atom)
    return false;
  std::optional<RegisterLayout> oa = a.divideRight(atom->a), ob = b.divideRight(atom->b),
                                oc = c.divideRight(atom->c);
  return oa && ob && oc && perThreadDot(*oa, *ob, *oc, true);
}

std::vector<RegisterLayout> vectorLayouts(const std::vector<int64_t> &shape, int elementBits,
                                          int64_t threads, int vectorDim) {
  std::vector<RegisterLayout> busy, rest;
  int rank = int(shape.size());
  if (rank == 0) {
    busy.push_back(chain({L::local({}), L::replicate(threads)}));
    return busy;
  }
  if (vectorDim < 0 || vectorDim >= rank)
    vectorDim = rank - 1;
  int64_t widest = std::max<int64_t>(1, 128 / std::max(1, elementBits));
  // Dimensions from the fastest: the vector dimension, then the others from the innermost.
  std::vector<int> order{vectorDim};
  for (int d = rank - 1; d >= 0; --d)
    if (d != vectorDim)
      order.push_back(d);
  for (int64_t v = widest; v >= 1; v /= 2) {
    if (shape[size_t(vectorDim)] % v != 0)
      continue;
    std::vector<int64_t> left = shape, spread(size_t(rank), 1);
    left[size_t(vectorDim)] /= v;
    int64_t free = threads;
    for (int d : order) {
      int64_t t = std::gcd(left[size_t(d)], free);
      spread[size_t(d)] = t;
      left[size_t(d)] /= t;
      free /= t;
    }
    // Unified form: per dimension [outer local, threads, vector]; spatial from the slowest
    // dimension of `order` to the fastest; local: outer parts row-major, then the vector.
    std::vector<LayoutMode> modes;
    for (int d = 0; d < rank; ++d) {
      modes.push_back({d, left[size_t(d)]});
      modes.push_back({d, spread[size_t(d)]});
      modes.push_back({d, d == vectorDim ? v : 1});
    }
    modes.push_back({-1, free});
    std::vector<int32_t> spatial{int32_t(3 * rank)}, local;
    for (auto it = order.rbegin(); it != order.rend(); ++it)
      spatial.push_back(int32_t(3 * *it + 1));
    for (int d = 0; d < rank; ++d)
      local.push_back(int32_t(3 * d));
    for (int d = 0; d < rank; ++d)
      if (d != vectorDim)
        local.push_back(int32_t(3 * d + 2));
    local.push_back(int32_t(3 * vectorDim + 2));
    Expected<RegisterLayout> l = RegisterLayout::tryCreate(shape, modes, spatial, local);
    if (!l)
      continue;
    (free == 1 ? busy : rest).push_back(std::move(l).value());
  }
  // Where no option keeps every thread busy (the threads share few factors with the shape), the
  // widest vector can leave each thread far more elements than another option: [5, 828] over
  // 128 threads is 4,140 elements per thread with 16-byte runs but 1,035 with 4-byte runs over
  // four threads. Beyond kManyLocals elements per thread the code per element matters more than
  // the width of the accesses (docs/jit.md, "Code size"): the fewest elements first.
  constexpr int64_t kManyLocals = 64;
  if (busy.empty() && !rest.empty()) {
    int64_t fewest = rest.front().numLocals();
    for (const RegisterLayout &l : rest)
      fewest = std::min(fewest, l.numLocals());
    if (rest.front().numLocals() > std::max(kManyLocals, fewest))
      std::stable_sort(rest.begin(), rest.end(),
                       [](const RegisterLayout &x, const RegisterLayout &y) {
                         return x.numLocals() < y.numLocals();
                       });
  }
  busy.insert(busy.end(), rest.begin(), rest.end());
  return busy;
}

int64_t vectorRun(const RegisterLayout &layout, int dim) {
  const std::vector<int32_t> &local = layout.localModes();
  if (local.empty())
    return 1;
  const std::vector<LayoutMode> &modes = layout.modes();
  int32_t last = local.back();
  if (modes[size_t(last)].dim != dim)
    return 1;
  for (size_t k = size_t(last) + 1; k < modes.size(); ++k)
    if (modes[k].dim == dim)
      return 1; // a less significant mode of the dimension follows: the run is strided
  return modes[size_t(last)].size;
}

std::optional<RegisterLayout> broadcastLayout(const RegisterLayout &result,
                                              const std::vector<int64_t> &operandShape) {
  int r = result.rank(), q = int(operandShape.size());
  if (r < 0 || q > r)
    return std::nullopt;
  int offset = r - q;
  RegisterLayout l = result;
  for (int d = offset; d < r; ++d) {
    int64_t want = operandShape[size_t(d - offset)], have = result.shape()[size_t(d)];
    if (want == have)
      continue;
    if (want != 1)
      return std::nullopt;
    Expected<RegisterLayout> reduced = l.reduce(d, true);
    if (!reduced)
      return std::nullopt;
    l = std::move(reduced).value();
  }
  for (int d = 0; d < offset; ++d) {
    Expected<RegisterLayout> reduced = l.reduce(0, false);
    if (!reduced)
      return std::nullopt;
    l = std::move(reduced).value();
  }
  return l;
}

bool covers(const RegisterLayout &result, const RegisterLayout &operand) {
  if (result.numThreads() != operand.numThreads() || result.rank() < 0 || operand.rank() < 0 ||
      operand.rank() > result.rank())
    return false;
  if (result == operand)
    return true; // every thread holds exactly what it needs (no walk over every element)
  int r = result.rank(), q = operand.rank(), offset = r - q;
  for (int d = 0; d < q; ++d) {
    int64_t o = operand.shape()[size_t(d)], s = result.shape()[size_t(d + offset)];
    if (o != s && o != 1)
      return false;
  }
  std::vector<std::vector<int64_t>> own(size_t(operand.numThreads()));
  for (int64_t t = 0; t < operand.numThreads(); ++t) {
    for (int64_t i = 0; i < operand.numLocals(); ++i)
      own[size_t(t)].push_back(operand.applyLinear(t, i));
    std::sort(own[size_t(t)].begin(), own[size_t(t)].end());
  }
  std::vector<int64_t> x(size_t(std::max(r, 1)));
  for (int64_t t = 0; t < result.numThreads(); ++t) {
    for (int64_t i = 0; i < result.numLocals(); ++i) {
      result.apply(t, i, x.data());
      int64_t linear = 0;
      for (int d = 0; d < q; ++d) {
        int64_t size = operand.shape()[size_t(d)];
        linear = linear * size + (size == 1 ? 0 : x[size_t(d + offset)]);
      }
      if (!std::binary_search(own[size_t(t)].begin(), own[size_t(t)].end(), linear))
        return false;
    }
  }
  return true;
}

bool readsColumnChunks(const RegisterLayout &layout, int elementBits) {
  int r = layout.rank();
  if (r < 2)
    return false;
  int64_t chunk = std::max<int64_t>(1, 128 / std::max(1, elementBits));
  int64_t lanes = std::min<int64_t>(32, layout.numThreads());
  std::vector<int64_t> x(static_cast<size_t>(r), 0);
  for (int64_t i = 0; i < layout.numLocals(); ++i) {
    std::set<std::pair<int64_t, int64_t>> seen; // (chunk, row)
    std::set<int64_t> chunks;
    for (int64_t t = 0; t < lanes; ++t) {
      layout.apply(t, i, x.data());
      int64_t row = 0;
      for (int d = 0; d + 1 < r; ++d)
        row = row * layout.shape()[size_t(d)] + x[size_t(d)];
      int64_t c = x[size_t(r - 1)] / chunk;
      if (seen.insert({c, row}).second && !chunks.insert(c).second)
        return true; // a second row at a chunk already seen
    }
  }
  return false;
}

SharedLayout sharedLayoutFor(const std::vector<int64_t> &shape, int elementBits,
                             bool columnChunks) {
  SharedLayout plain = SharedLayout::rowMajor(shape).value();
  int rank = int(shape.size());
  if (!columnChunks || rank < 2 || elementBits % 8 != 0 || elementBits > 128)
    return plain;
  int64_t e = elementBits / 8;
  int64_t r = shape.back();
  int base = log2Exact(16 / e), lr = log2Exact(r), line = log2Exact(128 / e);
  if (base < 0 || lr < 0 || line < 0 || r * e < 16)
    return plain;
  // The XOR's source: the row index, or the line index when a line holds several rows. The
  // swizzle moves offset bits [base + shift, base + shift + bits) onto [base, base + bits).
  int source = std::max(lr, line);
  int64_t elements = 1;
  for (int64_t s : shape)
    elements *= s;
  // It permutes offsets within blocks of 2^(source + bits) elements, so it keeps the size only
  // when the tensor is whole blocks.
  int bits = 3;
  while (bits > 0 && elements % (int64_t(1) << (source + bits)) != 0)
    --bits;
  if (bits == 0)
    return plain;
  return SharedLayout::swizzle(plain, bits, base, source - base).value();
}

} // namespace tilus::tasm
