// Register and shared layouts in bytecode (docs/bytecode.md, "Layouts").
//
// A register layout travels as its canonical unified form and is rebuilt with
// RegisterLayout::tryCreate, which validates it; the decoder then requires the rebuilt form to
// equal the bytes, so every accepted encoding is canonical and re-encodes to the same bytes.
// A shared layout travels as its expression tree and is rebuilt with the SharedLayout
// factories. Before calling any factory the decoder bounds ranks, sizes, element counts and
// offsets (and the sum over the module), so that no input can make layout code overflow,
// allocate without bound or run for long.
#include "isa/bytecode_format.h"

#include <algorithm>
#include <string>

namespace tilus::bytecode {

void writeRegisterLayout(ByteWriter &w, const RegisterLayout &layout) {
  assert(layout.shape().size() == size_t(std::max(layout.rank(), 0)));
  w.uleb(uint64_t(layout.rank() + 1));
  for (int64_t s : layout.shape())
    w.uleb(uint64_t(s));
  w.uleb(layout.modes().size());
  for (const LayoutMode &m : layout.modes()) {
    w.uleb(uint64_t(m.dim + 1));
    w.uleb(uint64_t(m.size));
  }
  w.uleb(layout.spatialModes().size());
  for (int32_t i : layout.spatialModes())
    w.uleb(uint64_t(i));
  w.uleb(layout.localModes().size());
  for (int32_t i : layout.localModes())
    w.uleb(uint64_t(i));
}

void writeSharedLayout(ByteWriter &w, const SharedLayout &layout) {
  using Kind = SharedLayout::Kind;
  w.u8(uint8_t(layout.kind()));
  switch (layout.kind()) {
  case Kind::RowMajor:
  case Kind::ColumnMajor:
    w.uleb(layout.shape().size());
    for (int64_t s : layout.shape())
      w.uleb(uint64_t(s));
    return;
  case Kind::Strided:
    assert(layout.strides().size() == layout.shape().size());
    w.uleb(layout.shape().size());
    for (int64_t s : layout.shape())
      w.uleb(uint64_t(s));
    for (int64_t s : layout.strides())
      w.uleb(uint64_t(s));
    return;
  case Kind::Tile:
    assert(layout.children().size() == 2);
    writeSharedLayout(w, *layout.children()[0]);
    writeSharedLayout(w, *layout.children()[1]);
    return;
  case Kind::Swizzle:
    assert(layout.children().size() == 1);
    writeSharedLayout(w, *layout.children()[0]);
    w.uleb(uint64_t(layout.swizzleBits()));
    w.uleb(uint64_t(layout.swizzleBase()));
    w.uleb(uint64_t(layout.swizzleShift()));
    return;
  }
}

namespace {

/// Charge `elements` (element visits that layout code will make) to the module's layout budget.
bool charge(ByteReader &r, const BytecodeLimits &limits, DecodeBudget &budget, int64_t elements,
            size_t start) {
  budget.layoutElements += elements; // the total stays below 2 * 2^32 * 2^24: no overflow
  if (budget.layoutElements <= limits.maxTotalLayoutElements)
    return true;
  r.failAt(start, "layout elements of the module exceed limit " +
                      std::to_string(limits.maxTotalLayoutElements));
  return false;
}

/// Reads `rank` sizes in [minSize, maxLayoutElements] whose product stays within the limit.
std::vector<int64_t> readSizes(ByteReader &r, const BytecodeLimits &limits, uint64_t rank,
                               int64_t minSize, const char *what, int64_t &product) {
  std::vector<int64_t> sizes;
  product = 1;
  for (uint64_t d = 0; d < rank && r.ok(); ++d) {
    size_t at = r.offset();
    int64_t s = int64_t(r.bounded(what, uint64_t(limits.maxLayoutElements)));
    if (r.ok() && s < minSize)
      r.failAt(at, std::string(what) + " " + std::to_string(d) + " is " + std::to_string(s) +
                       ", must be at least " + std::to_string(minSize));
    product *= s; // both factors <= 2^24 after the check below on the previous product
    if (r.ok() && product > limits.maxLayoutElements)
      r.failAt(at, std::string(what) + "s multiply to more than " +
                       std::to_string(limits.maxLayoutElements));
    sizes.push_back(s);
  }
  return sizes;
}

/// The canonical mode lists: each mode listed exactly once, replication only in `spatial`.
void checkModeLists(ByteReader &r, const std::vector<LayoutMode> &modes,
                    const std::vector<int32_t> &spatial, const std::vector<int32_t> &local,
                    size_t start) {
  std::vector<uint8_t> seen(modes.size(), 0);
  for (int32_t i : spatial)
    seen[size_t(i)]++;
  for (int32_t i : local) {
    seen[size_t(i)]++;
    if (modes[size_t(i)].dim < 0)
      return r.failAt(start, "register layout lists replication mode " + std::to_string(i) +
                                 " among local modes");
  }
  for (size_t i = 0; i < modes.size(); ++i)
    if (seen[i] != 1)
      return r.failAt(start, "register layout mode " + std::to_string(i) + " is listed " +
                                 std::to_string(seen[i]) + " times, must be once");
}

std::vector<int32_t> readModeList(ByteReader &r, size_t numModes, const char *what) {
  uint32_t n = r.count(what, numModes);
  std::vector<int32_t> list;
  for (uint32_t k = 0; k < n && r.ok(); ++k)
    list.push_back(int32_t(r.bounded(what, numModes - 1)));
  return list;
}

/// Whether the bytes read since `start` are exactly what `write` produces for the value built
/// from them: the factories may normalise (e.g. A.(B.C) becomes (A.B).C), and only the
/// normal form is accepted, so that every accepted encoding re-encodes to the same bytes.
template <typename F> bool isCanonical(const ByteReader &r, size_t start, F write) {
  ByteWriter w;
  write(w);
  std::span<const uint8_t> read = r.since(start);
  return std::equal(read.begin(), read.end(), w.data().begin(), w.data().end());
}

} // namespace

std::optional<RegisterLayout> readRegisterLayout(ByteReader &r, const BytecodeLimits &limits,
                                                 DecodeBudget &budget) {
  size_t start = r.offset();
  int rank = int(r.bounded("register layout rank+1", uint64_t(limits.maxLayoutRank) + 1)) - 1;
  int64_t elements = 1;
  std::vector<int64_t> shape =
      readSizes(r, limits, uint64_t(std::max(rank, 0)), 1, "register layout shape entry", elements);
  uint32_t numModes = r.count("register layout mode", kMaxLayoutModes, 2);
  std::vector<LayoutMode> modes;
  int64_t cells = 1; // threads * locals
  for (uint32_t k = 0; k < numModes && r.ok(); ++k) {
    LayoutMode m;
    m.dim = int32_t(r.bounded("register layout mode dim+1", uint64_t(std::max(rank, 0)))) - 1;
    size_t at = r.offset();
    m.size = int64_t(r.bounded("register layout mode size", uint64_t(limits.maxLayoutElements)));
    if (r.ok() && m.size < 2)
      r.failAt(at, "register layout mode size " + std::to_string(m.size) +
                       " is below 2 (size-1 modes are not canonical)");
    cells *= m.size; // each factor <= 2^24, product checked each step
    if (r.ok() && cells > limits.maxLayoutElements)
      r.fail("register layout threads x locals exceed " + std::to_string(limits.maxLayoutElements));
    modes.push_back(m);
  }
  std::vector<int32_t> spatial = readModeList(r, modes.size(), "register layout spatial mode");
  std::vector<int32_t> local = readModeList(r, modes.size(), "register layout local mode");
  if (!r.ok())
    return std::nullopt;
  checkModeLists(r, modes, spatial, local, start);
  if (!r.ok() || !charge(r, limits, budget, std::max(elements, cells), start) ||
      !chargeMemory(r, limits, budget,
                    sizeof(RegisterLayout) + 8 * shape.size() + 16 * modes.size()))
    return std::nullopt;
  Expected<RegisterLayout> built = rank >= 0
                                       ? RegisterLayout::tryCreate(shape, modes, spatial, local)
                                       : RegisterLayout::replicate(cells);
  if (!built) {
    r.failAt(start, "register layout: " + built.status().first().message);
    return std::nullopt;
  }
  if (!isCanonical(r, start, [&](ByteWriter &w) { writeRegisterLayout(w, *built); })) {
    r.failAt(start, "register layout is not in canonical form (canonical: " +
                        built->canonicalString() + ")");
    return std::nullopt;
  }
  return std::move(built).value();
}

namespace {

/// Upper bounds that the decoder tracks for a shared layout before building it.
struct SharedBound {
  int64_t nodes = 1;    // nodes of the expression tree
  int64_t elements = 1; // product of the shape
  int64_t extent = 1;   // an upper bound of max offset + 1
};

std::optional<SharedLayout> readShared(ByteReader &r, const BytecodeLimits &limits,
                                       DecodeBudget &budget, uint32_t depth, SharedBound &bound);

/// The layout a factory built, or nullopt with the factory's error reported at offset `at`.
std::optional<SharedLayout> builtLayout(ByteReader &r, size_t at, Expected<SharedLayout> built) {
  if (!built) {
    r.failAt(at, "shared layout: " + built.status().first().message);
    return std::nullopt;
  }
  return std::move(built).value();
}

std::optional<SharedLayout> readSharedLeaf(ByteReader &r, const BytecodeLimits &limits,
                                           DecodeBudget &budget, SharedLayout::Kind kind,
                                           SharedBound &bound) {
  using Kind = SharedLayout::Kind;
  size_t start = r.offset();
  uint64_t rank = r.bounded("shared layout rank", limits.maxLayoutRank);
  std::vector<int64_t> shape =
      readSizes(r, limits, rank, 0, "shared layout shape entry", bound.elements);
  bound.extent = std::max<int64_t>(bound.elements, 1);
  std::vector<int64_t> strides;
  if (kind == Kind::Strided) {
    int64_t maxOffset = 0;
    for (uint64_t d = 0; d < rank && r.ok(); ++d) {
      strides.push_back(int64_t(r.bounded("shared layout stride", limits.maxLayoutElements)));
      maxOffset += std::max<int64_t>(shape[d] - 1, 0) * strides.back(); // <= 16 * 2^48
    }
    bound.extent = maxOffset + 1;
  }
  if (!r.ok())
    return std::nullopt;
  if (bound.extent > limits.maxLayoutElements) {
    r.failAt(start, "shared layout offsets reach " + std::to_string(bound.extent - 1) +
                        ", limit is " + std::to_string(limits.maxLayoutElements));
    return std::nullopt;
  }
  if (!charge(r, limits, budget, std::max(bound.elements, bound.extent), start))
    return std::nullopt;
  return builtLayout(r, r.offset(),
                     kind == Kind::RowMajor      ? SharedLayout::rowMajor(shape)
                     : kind == Kind::ColumnMajor ? SharedLayout::columnMajor(shape)
                                                 : SharedLayout::strided(shape, strides));
}

std::optional<SharedLayout> readSharedTile(ByteReader &r, const BytecodeLimits &limits,
                                           DecodeBudget &budget, uint32_t depth,
                                           SharedBound &bound) {
  SharedBound a, b;
  std::optional<SharedLayout> outer = readShared(r, limits, budget, depth + 1, a);
  std::optional<SharedLayout> inner =
      outer ? readShared(r, limits, budget, depth + 1, b) : std::nullopt;
  if (!inner)
    return std::nullopt;
  bound.nodes = a.nodes + b.nodes + 1;
  bound.elements = a.elements * b.elements; // each <= 2^24
  bound.extent = a.extent * b.extent;
  if (bound.elements > limits.maxLayoutElements || bound.extent > limits.maxLayoutElements) {
    r.fail("tiled shared layout exceeds " + std::to_string(limits.maxLayoutElements) +
           " elements or offsets");
    return std::nullopt;
  }
  if (!charge(r, limits, budget, std::max(bound.elements, bound.extent), r.offset()))
    return std::nullopt;
  return builtLayout(r, r.offset(), SharedLayout::tile(*outer, *inner));
}

std::optional<SharedLayout> readSharedSwizzle(ByteReader &r, const BytecodeLimits &limits,
                                              DecodeBudget &budget, uint32_t depth,
                                              SharedBound &bound) {
  std::optional<SharedLayout> inner = readShared(r, limits, budget, depth + 1, bound);
  if (!inner)
    return std::nullopt;
  size_t at = r.offset();
  int64_t bits = int64_t(r.bounded("swizzle bits", kMaxSwizzleParam));
  int64_t base = int64_t(r.bounded("swizzle base", kMaxSwizzleParam));
  int64_t shift = int64_t(r.bounded("swizzle shift", kMaxSwizzleParam));
  if (r.ok() && uint64_t(bits + base) > kMaxSwizzleParam)
    r.failAt(at, "swizzle bits + base is " + std::to_string(bits + base) + ", limit is " +
                     std::to_string(kMaxSwizzleParam));
  if (!r.ok())
    return std::nullopt;
  // XOR with a value no larger than the offset stays below the offset's next power of two.
  int64_t pow2 = 1;
  while (pow2 < bound.extent)
    pow2 *= 2;
  bound.extent = pow2;
  if (bound.extent > limits.maxLayoutElements) {
    r.failAt(at, "swizzled shared layout offsets may reach " + std::to_string(pow2 - 1) +
                     ", limit is " + std::to_string(limits.maxLayoutElements));
    return std::nullopt;
  }
  // The factory evaluates the offset of every element through the whole inner tree.
  bound.nodes += 1;
  if (!charge(r, limits, budget, std::max(bound.elements, bound.extent) * bound.nodes, at))
    return std::nullopt;
  return builtLayout(r, at, SharedLayout::swizzle(*inner, bits, base, shift));
}

std::optional<SharedLayout> readShared(ByteReader &r, const BytecodeLimits &limits,
                                       DecodeBudget &budget, uint32_t depth, SharedBound &bound) {
  using Kind = SharedLayout::Kind;
  size_t start = r.offset();
  if (depth > limits.maxLayoutDepth) {
    r.fail("shared layout nesting exceeds limit " + std::to_string(limits.maxLayoutDepth));
    return std::nullopt;
  }
  uint8_t kind = r.u8("shared layout kind");
  if (r.ok() && kind > uint8_t(Kind::Swizzle))
    r.failAt(start, "shared layout kind " + std::to_string(kind) + " is not one of 0..4");
  // A node with its shape and strides, once per enclosing level: the factories copy subtrees.
  if (!r.ok() || !chargeMemory(r, limits, budget,
                               (depth + 1) * (sizeof(SharedLayout) + 64 +
                                              16 * uint64_t(limits.maxLayoutRank))))
    return std::nullopt;
  std::optional<SharedLayout> result;
  switch (Kind(kind)) {
  case Kind::RowMajor:
  case Kind::ColumnMajor:
  case Kind::Strided:
    result = readSharedLeaf(r, limits, budget, Kind(kind), bound);
    break;
  case Kind::Tile:
    result = readSharedTile(r, limits, budget, depth, bound);
    break;
  case Kind::Swizzle:
    result = readSharedSwizzle(r, limits, budget, depth, bound);
    break;
  }
  return result;
}

} // namespace

std::optional<SharedLayout> readSharedLayout(ByteReader &r, const BytecodeLimits &limits,
                                             DecodeBudget &budget) {
  size_t start = r.offset();
  SharedBound bound;
  std::optional<SharedLayout> layout = readShared(r, limits, budget, 1, bound);
  if (layout && !isCanonical(r, start, [&](ByteWriter &w) { writeSharedLayout(w, *layout); })) {
    r.failAt(start,
             "shared layout is not in canonical form (canonical: " + layout->toString() + ")");
    return std::nullopt;
  }
  return layout;
}

} // namespace tilus::bytecode
