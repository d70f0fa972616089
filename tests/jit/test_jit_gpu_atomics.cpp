// The atomics on the GPU against the interpreter (docs/isa.md, "Atomics and fences"). The
// programs are written so that the results do not depend on the order in which blocks update
// an element: integer sums, max and min, float sums of small integers (exact in any order),
// old values of elements that one block alone updates, a ticket counter's final value; the
// old values of a replicated operand reach every thread; vector adds (red.global.add.v4.f32)
// and their misaligned / partial tiles; shared-memory atomics; the f32 subnormal rule of
// global adds (and not of shared ones); AtomicStore and AtomicLoad between blocks (a ticket
// protocol) and within one (shared memory).
#include "jit_diff.h"

using namespace tilus;
using namespace tilus::jitdiff;

DIFF_CASE("atomics on global and shared memory, results independent of the block order") {
  Case c;
  c.name = "atomics";
  c.source = R"(
def atomics<8>(i32* ia, u64* ua, f32* fa, f16* ha, i32* own, i32* olds, i32* cnt, i32* tk, i64* sh, f32* part) threads=64:
    b = BlockIndices()
    i = Iota(layout=spatial(64), dim=0)
    AtomicAdd(ViewGlobal(ia, shape=[64]), Add(i, b))
    AtomicMax(ViewGlobal(ua, shape=[128]), Cast(Mul(Sub(i, 20), b + 1), u64), offset=[0:])
    AtomicMin(ViewGlobal(ua, shape=[128]), Cast(Mul(Sub(i, 20), b + 1), u64), offset=[64:])
    AtomicAdd(ViewGlobal(fa, shape=[64]), Cast(Sub(i, b), f32))
    AtomicAdd(ViewGlobal(ha, shape=[64]), Cast(Iota(layout=replicate(2).spatial(32).local(2), dim=0, dtype=i32), f16))
    # one block alone updates its row: the old values are the inputs
    mine = ViewGlobal(own, shape=[8, 64])
    StoreGlobal(AtomicAdd(mine, i, offset=[b, 0:]), ViewGlobal(olds, shape=[8, 5, 64]), offset=[b, 0, 0:])
    StoreGlobal(AtomicExch(mine, Mul(i, 3), offset=[b, 0:]), ViewGlobal(olds, shape=[8, 5, 64]), offset=[b, 1, 0:])
    StoreGlobal(AtomicCas(mine, Where(Lt(i, 32), Mul(i, 3), 0), Neg(i), offset=[b, 0:]), ViewGlobal(olds, shape=[8, 5, 64]), offset=[b, 2, 0:])
    StoreGlobal(AtomicMin(mine, Sub(i, 40), offset=[b, 0:]), ViewGlobal(olds, shape=[8, 5, 64]), offset=[b, 3, 0:])
    # a replicated rank-0 operand: applied once, its old value handed to all 64 threads
    one = AllocateRegister(i32, layout=replicate(64), init=1)
    AtomicAdd(ViewGlobal(cnt, shape=[1]), one, offset=[0])
    t = AtomicAdd(ViewGlobal(tk, shape=[8]), one, offset=[b])
    StoreGlobal(Add(i, t), ViewGlobal(olds, shape=[8, 5, 64]), offset=[b, 4, 0:])
    # shared: a replicated operand, Max and Cas, read back after a barrier
    s = AllocateShared(i64, shape=[64])
    StoreShared(Cast(i, i64), s)
    Synchronize()
    AtomicAdd(s, AllocateRegister(i64, layout=local(4).replicate(64), init=100), offset=[8:])
    AtomicMax(s, Cast(Mul(i, 2), i64))
    AtomicCas(s, Cast(Mul(i, 2), i64), Cast(Neg(i), i64))
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(64)), ViewGlobal(sh, shape=[8, 64]), offset=[b, 0:])
    # 4 consecutive f32 per thread (red.global.add.v4.f32 on sm_90), a tile that starts at an
    # odd element (misaligned vectors) and one that leaves the tensor
    x = Cast(Iota(layout=replicate(4).spatial(16).local(4), dim=0), f32)
    AtomicAdd(ViewGlobal(part, shape=[200]), x)
    AtomicAdd(ViewGlobal(part, shape=[200]), x, offset=[65:])
    AtomicAdd(ViewGlobal(part, shape=[200]), x, offset=[170:])
)";
  c.buffers = {{"ia", DataType::i32(), 64, Fill::Random},
               {"ua", DataType::u(64), 128, Fill::Random},
               {"fa", DataType::f32(), 64, Fill::Zero},
               {"ha", DataType::f16(), 64, Fill::Zero},
               {"own", DataType::i32(), 8 * 64, Fill::Random},
               {"olds", DataType::i32(), 8 * 5 * 64, Fill::Zero},
               {"cnt", DataType::i32(), 1, Fill::Index},
               {"tk", DataType::i32(), 8, Fill::Index},
               {"sh", DataType::i64(), 8 * 64, Fill::Zero},
               {"part", DataType::f32(), 200, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("f32 atomic adds flush subnormals in global memory, not in shared memory") {
  Case c;
  c.name = "atomic_subnormals";
  c.source = R"(
def sub<1>(f32* g, f32* v, f32* s_out) threads=32:
    x = LoadGlobal(ViewGlobal(v, shape=[64]), layout=spatial(32).local(2))
    AtomicAdd(ViewGlobal(g, shape=[64]), x)
    s = AllocateShared(f32, shape=[64])
    StoreShared(x, s)
    Synchronize()
    AtomicAdd(s, x)
    Synchronize()
    StoreGlobal(LoadShared(s, layout=spatial(32).local(2)), ViewGlobal(s_out, shape=[64]))
)";
  // element k holds the bit pattern k: 0 and 63 positive subnormals
  c.buffers = {{"g", DataType::f32(), 64, Fill::Codes},
               {"v", DataType::f32(), 64, Fill::Codes},
               {"s_out", DataType::f32(), 64, Fill::Zero}};
  runCase(c);
}

DIFF_CASE("AtomicStore and AtomicLoad: partials published by every block, read by the last one") {
  // Block b writes its row of partials with AtomicStore (u64 and f32), fences and draws a ticket;
  // the block with the last ticket reads every row back with AtomicLoad and stores the sums (the
  // same in any block order). Every block also reads a tile that leaves the view (zeros there)
  // and round-trips a replicated tile through shared memory.
  Case c;
  c.name = "atomic_load_store";
  c.source = R"(
def publish<8>(u64* rows, f32* frows, i32* tickets, u64* sums, f32* fsums, u64* edge, f32* sh) threads=64:
    b = BlockIndices()
    i = Iota(layout=spatial(64), dim=0)
    AtomicStore(ViewGlobal(rows, shape=[8, 64]), Cast(Add(Mul(i, 1000), b), u64), offset=[b, 0:])
    AtomicStore(ViewGlobal(frows, shape=[8, 64]), Cast(Sub(i, b), f32), offset=[b, 0:])
    Fence(scope=gpu)
    Synchronize()
    t = AtomicAdd(ViewGlobal(tickets, shape=[1]), AllocateRegister(i32, layout=replicate(64), init=1), offset=[0])
    Fence(scope=gpu)
    st = AllocateShared(i32, shape=[1])
    StoreShared(t, st, offset=[0])
    Synchronize()
    drawn = LoadScalar(st, offset=[0], dtype=i32)
    if drawn == 7:
        all = AtomicLoad(ViewGlobal(rows, shape=[8, 64]), layout=local(8, 1).spatial(1, 64))
        StoreGlobal(Reduce(all, dim=0, op=sum), ViewGlobal(sums, shape=[64]))
        fall = AtomicLoad(ViewGlobal(frows, shape=[8, 64]), layout=local(8, 1).spatial(1, 64))
        StoreGlobal(Reduce(fall, dim=0, op=sum), ViewGlobal(fsums, shape=[64]))
    # rows b and b + 1 of a view of the first b + 1 rows: the block's own row, and zeros
    mine = AtomicLoad(ViewGlobal(rows, shape=[b + 1, 64]), layout=local(2, 1).spatial(1, 64), offset=[b:, 0:])
    StoreGlobal(Reduce(mine, dim=0, op=max), ViewGlobal(edge, shape=[8, 64]), offset=[b, 0:])
    s = AllocateShared(f32, shape=[4, 16])
    AtomicStore(s, Cast(Iota(layout=local(4, 16).replicate(64), dim=1), f32))
    Synchronize()
    x = AtomicLoad(s, layout=spatial(4, 16), offset=[0:, 0:])
    StoreGlobal(Add(x, b * 1.0), ViewGlobal(sh, shape=[8, 4, 16]), offset=[b, 0:, 0:])
)";
  c.buffers = {{"rows", DataType::u(64), 8 * 64, Fill::Random},
               {"frows", DataType::f32(), 8 * 64, Fill::Random},
               {"tickets", DataType::i32(), 1, Fill::Zero},
               {"sums", DataType::u(64), 64, Fill::Zero},
               {"fsums", DataType::f32(), 64, Fill::Zero},
               {"edge", DataType::u(64), 8 * 64, Fill::Zero},
               {"sh", DataType::f32(), 8 * 4 * 16, Fill::Zero}};
  runCase(c);
}
