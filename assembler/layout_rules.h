// The constraint rules of layout inference (docs/layout-inference.md), one per instruction family,
// as pure functions of shapes, types and thread counts. The inference engine (layout_infer.cpp)
// decides which rule applies to which tensor and in which order; the rules decide the layouts.
// Internal to the assembler; tests/assembler/test_layout_rules.cpp checks each rule against
// hand-derived layouts.
#pragma once

#include "isa/dtype.h"
#include "isa/layout.h"
#include "isa/shared_layout.h"

#include <optional>
#include <string>
#include <vector>

namespace tilus::tasm {

/// One way to lay out the operands of a Dot d[M, N] = a[M, K] b[K, N] + c[M, N].
struct DotPlan {
  bool mma = false;       // mma.sync atoms (else the per-thread rule)
  const char *atom = "";  // "m16n8k16", "m16n8k32"
  int64_t rows = 1;       // warps (mma) or threads (per-thread) along M
  int64_t cols = 1;       // ... along N
  int64_t replicas = 1;   // warps (threads) that repeat the same tiles
  RegisterLayout a, b, c; // c is also d's layout
  bool derived = false;   // made by perThreadPlanFor
  /// "mma m16n8k16, 2 x 2 warps, 32 x 32 per warp".
  std::string describe(int64_t m, int64_t n) const;
};

/// The Dot rule: every arrangement of a Dot over `threads` threads, best first. With an mma atom
/// for (ab, cd) and M, N, K multiples of the atom: warps split M and N (divisors of the atom
/// counts; replicas only when there are more warps than atoms), each warp's atoms in row-major
/// order; the A fragment is replicated over the warps of a warp row, B over those of a column.
/// Order: fewest replicas, then the least operand work per warp (costA M / rows + costB N / cols:
/// the elements of a and b each warp or thread holds, weighted by what producing one costs, see
/// operandCost), then fewer warp rows. Then (and without an atom, only) the per-thread arrangements
/// (threads instead of warps, every thread holding whole rows of A and columns of B), in the same
/// order.
std::vector<DotPlan> dotPlans(int64_t m, int64_t n, int64_t k, DataType ab, DataType cd,
                              int64_t threads, int64_t costA = 1, int64_t costB = 1);

/// The relative work of producing one element of a Dot operand in registers: 1 for a load or
/// anything else, 5 for an operand converted from an integer type (the integer-to-float
/// conversion runs at a quarter of the FMA rate on the GPU, and each thread converts every
/// element it holds, replicas included).
int64_t operandCost(bool convertedFromInt);

/// The per-thread plan for a written accumulator layout `c` of [M, N] and inner size `k`: each
/// thread holds the whole rows of a and columns of b that its elements of c need, a = (c reduced
/// over N) . local(1, K), b = (c reduced over M) . local(K, 1). It fits every accumulator.
std::optional<DotPlan> perThreadPlanFor(const RegisterLayout &c, int64_t k);

/// Whether a, b, c (c also d) satisfy the checker's Dot rule (ISA section 6, dot-layout) in the
/// form the JIT lowers fastest: with `mma`, every operand divides by the atom's fragment and the
/// outer layouts satisfy the per-thread rule with each warp as one thread, at local slots that do
/// not depend on the warp; otherwise the per-thread rule itself.
bool dotLayoutsFit(const RegisterLayout &a, const RegisterLayout &b, const RegisterLayout &c,
                   DataType ab, DataType cd, bool mma);

/// The load/store rule: layouts of a tile for plain vector accesses, best first. `vectorDim` is
/// the dimension with unit stride in memory (usually the last). Each thread holds runs of `v`
/// consecutive elements of that dimension (v from 16 bytes down to one element); threads are
/// spread over that dimension first, then over the others from the innermost, so that the lanes
/// of a warp touch consecutive runs; what is left of the tile is repeated in local slots, and
/// threads beyond the tile's size replicate it. Order: the widest runs that keep every thread
/// busy (no replication), then the remaining widths, widest first.
std::vector<RegisterLayout> vectorLayouts(const std::vector<int64_t> &shape, int elementBits,
                                          int64_t threads, int vectorDim);

/// The elements per thread run of a layout along `dim`: the size of its innermost local mode
/// when that mode belongs to `dim` and is the least significant digit of the dimension, else 1.
int64_t vectorRun(const RegisterLayout &layout, int dim);

/// The broadcast rule: the layout an operand of shape `operandShape` must have to be read by an
/// elementwise instruction whose result has `result` (numpy alignment on the right): the result
/// reduced over every dimension the operand broadcasts (size 1: kept with size 1; missing leading
/// dimensions: dropped). nullopt when the shapes do not broadcast.
std::optional<RegisterLayout> broadcastLayout(const RegisterLayout &result,
                                              const std::vector<int64_t> &operandShape);

/// The cover rule of the checker (layout-mismatch): every owner thread of every element of
/// `result` owns the element of `operand` that it broadcasts from. Equal thread counts and
/// broadcastable shapes are the caller's precondition (false otherwise).
bool covers(const RegisterLayout &result, const RegisterLayout &operand);

/// Whether a warp of `threads` threads reading or writing a register tile in `layout` touches one
/// 16-byte column chunk of the tile's last dimension in several rows at once (the access pattern
/// of mma fragments and ldmatrix), which a row-major shared tile serves with bank conflicts.
bool readsColumnChunks(const RegisterLayout &layout, int elementBits);

/// The shared rule: the layout of a shared tensor of `shape` whose accesses are described by
/// `columnChunks` (some register access reads column chunks, see above). When it is set and the
/// geometry allows (rank >= 2, whole bytes, a power-of-two last dimension of at least 16 bytes),
/// a swizzle of 16-byte chunks within 128-byte lines: for elements of e bytes and a last
/// dimension of R elements, the chunk bits [b, b + 3) of the offset, b = log2(16 / e), are XORed
/// with the bits from s = max(log2(R), log2(128 / e)) on (the row index, or the line index when
/// a line holds several rows): `swizzle(row_major(shape), 3, b, s - b)` (fewer bits when the
/// tensor is not whole blocks of 2^(s + 3) elements). This keeps every 16-byte chunk contiguous
/// (cp.async, vector and ldmatrix accesses) and puts the eight rows an ldmatrix reads in eight
/// different bank groups. Otherwise row_major(shape).
SharedLayout sharedLayoutFor(const std::vector<int64_t> &shape, int elementBits, bool columnChunks);

} // namespace tilus::tasm
