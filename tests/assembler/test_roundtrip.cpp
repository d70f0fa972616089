// Round trips (ISA section 7): assemble -> encode, disassemble -> assemble -> encode, and the two
// byte strings must be identical. Also: every example program assembles and passes the checker.
#include "asm_test_util.h"

#include "isa/bytecode.h"
#include "isa/convert.h"
#include "loader/checker.h"

#include <algorithm>

namespace {

using namespace tilus;
using namespace tilus::testing;

TEST_CASE("every example program assembles and passes the checker") {
  for (const std::string &path : examplePrograms()) {
    CAPTURE(path);
    AssembleOptions o;
    o.fileName = path;
    auto m = assemble(readSourceFile(path), o);
    REQUIRE_OK(m);
    CHECK_OK(checkModule(*m));
  }
}

TEST_CASE("every example program round-trips through the disassembler to identical bytes") {
  for (const std::string &path : examplePrograms()) {
    CAPTURE(path);
    checkRoundTrip(readSourceFile(path));
  }
  checkRoundTrip(readSourceFile("programs/paper_matmul_f16_i6.tasm"),
                 {{"M", "64"}, {"N", "64"}, {"K", "64"}});
  // the decode program's paths that only other cache types take (u4: V as subnormals and the
  // rows scaled back after the loop, the mask in a branch, the kv head pair's copies; 8-bit: the
  // nest of swizzles) and an occupancy request
  for (const char *kt : {"u4", "f8e4m3", "i5"})
    checkRoundTrip(readSourceFile("programs/attention/decode_paged.tasm"), {{"KT", kt}});
  checkRoundTrip(readSourceFile("programs/attention/decode_paged.tasm"),
                 {{"KT", "u4"}, {"OCC", "12"}, {"CQ", "2"}, {"RING", "4"}});
  // the header's blocks_per_sm= (printed after threads=; 0 is not printed)
  std::string text = readSourceFile("tests/conformance/ok_blocks_per_sm.tasm");
  checkRoundTrip(text);
  auto m = asmText(text);
  REQUIRE_OK(m);
  std::string printed = disassemble(*m);
  CHECK(printed.find("def one_warp<cdiv(n, 32)>(f32* x, i32 n) threads=32 blocks_per_sm=16:") !=
        std::string::npos);
  CHECK(printed.find("threads=1024 blocks_per_sm=2:") != std::string::npos);
  CHECK(printed.find("blocks_per_sm=0") == std::string::npos);
  // the header's cluster= (1 is not printed)
  text = readSourceFile("tests/conformance/ok_cluster.tasm");
  checkRoundTrip(text);
  m = asmText(text);
  REQUIRE_OK(m);
  printed = disassemble(*m);
  CHECK(printed.find("def pipe<2 * n>(f32* x_ptr, f32* y_ptr, i32 n) threads=128 cluster=2:") !=
        std::string::npos);
  CHECK(printed.find("def alone<n>(f32* x_ptr, i32 n) threads=32:") != std::string::npos);
  // a thread group's copies= and copy index (a clause without them prints as before)
  text = readSourceFile("tests/conformance/ok_thread_group_copies.tasm");
  checkRoundTrip(text);
  m = asmText(text);
  REQUIRE_OK(m);
  printed = disassemble(*m);
  CHECK(printed.find("        group(64, copies=2) as w:\n") != std::string::npos);
  CHECK(printed.find("        group(128):\n") != std::string::npos);
}

TEST_CASE("decoded bytecode disassembles like the assembled module") {
  for (const std::string &path : examplePrograms()) {
    CAPTURE(path);
    auto m = asmText(readSourceFile(path));
    REQUIRE_OK(m);
    auto decoded = decodeModule(encodeModule(*m));
    REQUIRE_OK(decoded);
    CHECK(disassemble(*decoded) == disassemble(*m));
  }
}

TEST_CASE("programs at the nesting bounds still decode (assembler bounds < decoder limits)") {
  std::string chain = "def k<1>(i32 n, i64 w):\n    x = n";
  for (int k = 0; k < 998; ++k) // 998 additions, 999 levels, and a conversion: 1000
    chain += k == 500 ? " + w" : " + n";
  chain += "\n";
  std::string nested = "def q<1>(i32 n):\n";
  for (int d = 1; d <= 199; ++d) // the program body is the 200th block
    nested += std::string(size_t(d), ' ') + (d % 2 ? "if n:\n" : "for i in range(n):\n");
  nested += std::string(200, ' ') + "break\n";
  for (const std::string &text : {chain, nested}) {
    auto m = asmText(text);
    REQUIRE_OK(m);
    auto decoded = decodeModule(encodeModule(*m));
    REQUIRE_OK(decoded);
    checkRoundTrip(text);
  }
}

TEST_CASE("the round trip survives the debug-info encoding of the re-assembled text") {
  // With -g the source text and locations are part of the bytes; the disassembly assembled with
  // keepSource must decode back to the same module as its own encoding.
  auto m = asmText(readSourceFile("programs/softmax_rows.tasm"));
  REQUIRE_OK(m);
  AssembleOptions o;
  o.keepSource = true;
  o.fileName = "softmax.tasm";
  std::string printed = disassemble(*m);
  auto g = assemble(printed, o);
  REQUIRE_OK(g);
  CHECK(g->hasDebugInfo);
  CHECK(g->sourceText == printed);
  CHECK(g->sourceName == "softmax.tasm");
  EncodeOptions eo;
  eo.debugInfo = true;
  auto decoded = decodeModule(encodeModule(*g, eo));
  REQUIRE_OK(decoded);
  CHECK(disassemble(*decoded) == printed);
}

TEST_CASE("control flow, scopes, temporaries and updates round-trip") {
  checkRoundTrip(R"(
const B = 4
def k<cdiv(n, B), 2>(f32* x_ptr, i32 n, i64 big, f16 h) threads=64:
    bi, bj = BlockIndices()
    g = ViewGlobal(x_ptr, shape=[n], strides=[1])
    acc = AllocateRegister(f32, layout=spatial(64).local(2), init=0.0)
    s = 0
    t: i64 = 7
    for i in range(n):
        if i % 2 == 0:
            continue
        elif i > 100 and not (i < 3 or i == 5):
            break
        else:
            pass
        x = LoadGlobal(g, layout=spatial(64).local(2), offset=[i * B + bi:])
        acc = Add(acc, Exp(Sub(x, 1.0)))
        s = s + i
    for j in range(2, n):
        Add(acc, 2, out=acc)
    for j in range(big, 3 * big, -2):
        t = t + j
    while s < 10:
        s = s + 1
    if s:
        pass
    u = i64(s) * big + (s if s > 2 else -s) - cdiv(s, 3) + min(s, 2) - max(s, n)
    v = (u << 2) >> 1 & 255 | 1 ^ ~u
    w = f32(h) / 3.0 + f32(u) % 2.0
    StoreGlobal(Cast(acc, f32), g, offset=[0:])
    Print(acc, "acc\tis \"here\"\n")
    Synchronize()
    return
)");
}

TEST_CASE("updates left at the top of a body by a folded constant if round-trip") {
  // `if FLAG == 1:` is folded away, leaving updates of `a` and `m` (not new variables) at the
  // top of the body: printed inside `if True:`, they re-assemble as the same updates
  const char *src = R"(
const FLAG = 1
def k<1>(f32* x_ptr, i32 n) threads=32:
    m = n * 2
    a = AllocateRegister(f32, layout=spatial(32), init=1.0)
    if FLAG == 1:
        a = Add(a, a)
        m = m + 1
    a = Add(a, a)
    g = ViewGlobal(x_ptr, shape=[m])
    StoreGlobal(a, g)
)";
  std::string printed = checkRoundTrip(src);
  // the update of a and m inside if True:, the later `a = Add(a, a)` a new variable
  CHECK(printed.find("    if True:\n        a = Add(a, a)\n") != std::string::npos);
  CHECK(printed.find("    if True:\n        m = m + 1\n") != std::string::npos);
  CHECK(printed.find("\n    a = Add(a, a)\n    g = ViewGlobal") != std::string::npos);
}

TEST_CASE("updates left in a loop body by a folded constant if round-trip") {
  // in the loop body, `page` is first a variable of that body; `if T == 0:` is folded away,
  // leaving its update of `page` (an update: `page` belongs to the enclosing scope of the if's
  // body) in the loop body, where `page = ...` would read as a new variable that shadows it.
  // Printed inside `if True:`, it re-assembles as the same update; the later `page = page + 1`
  // of the loop body is a new variable and stays as it is
  const char *src = R"(
const T = 0
def k<1>(i32* a_ptr, i32 n) threads=32:
    ga = ViewGlobal(a_ptr, shape=[8])
    s = AllocateShared(i32, shape=[4])
    p0 = 0
    for it in range(n):
        for u in range(2):
            page = p0 if u == 0 else n
            if T == 0:
                page = LoadScalar(s, offset=[u], dtype=i32)
            page = page + 1
            StoreGlobal(AllocateRegister(i32, layout=replicate(32), init=1), ga, offset=[page])
)";
  std::string printed = checkRoundTrip(src);
  CHECK(printed.find("            if True:\n                page = LoadScalar(s, offset=[u], "
                     "dtype=i32)\n") != std::string::npos);
  CHECK(printed.find("\n            page = page + 1\n") != std::string::npos);
}

TEST_CASE("every instruction of the table round-trips with every argument it takes") {
  const char *text = R"(
def k<4, 2, 1>(f16* p, u8* q, i32 n, f32 s) threads=64:
    bx, by, bz = BlockIndices()
    r = AllocateRegister(f32, layout=spatial(64).local(2), shape=[128], init=s)
    io = Iota(layout=spatial(8, 8), dim=1, dtype=i64)
    sh = AllocateShared(f16, shape=[2, 64], layout=swizzle(row_major(2, 64), 2, 1, 3))
    wg = AllocateGlobal(i32, shape=[n, 4], requires_clean=True)
    g = ViewGlobal(p, dtype=f16, shape=[n, 64], strides=[64, 1])
    gs = SliceGlobal(g, offset=[bx, 0:], shape=[32])
    ss = SliceShared(sh, offset=[1, 0:], shape=[64])
    pt = PermuteShared(sh, dims=[1, 0])
    a = LoadGlobal(g, layout=spatial(64).local(1), offset=[by:, 0])
    ae = LoadGlobal(g, layout=spatial(64).local(1), offset=[by:, 1], evict=first)
    b = LoadShared(sh, layout=spatial(64), offset=[0, 0:])
    ls = LoadScalar(gs, offset=[n - 1], dtype=i64)
    lt = LoadScalar(x=sh, offset=[1, 3], dtype=f32)
    StoreScalar(gs, offset=[n - 1], value=lt * 2.0)
    StoreScalar(dst=sh, offset=[0, 2], value=n)
    StoreGlobal(a, g, offset=[bz * 2:, 3])
    StoreShared(b, sh)
    CopyAsync(sh, g, offset=[0:, 0:])
    CopyAsyncCommitGroup()
    CopyAsyncWaitGroup(0)
    CopyAsyncWaitAll()
    x0 = Add(r, 1)
    x1 = Sub(r, r, layout=spatial(64).local(2))
    x2 = Mul(r, s)
    x2f = Fma(r, s, x2, layout=spatial(64).local(2))
    x3 = Div(2.0, r)
    x4 = Mod(r, r)
    x5 = Max(r, r)
    x6 = Min(r, r)
    y0 = And(io, 3)
    y1 = Or(io, io)
    y2 = Xor(io, io)
    y3 = Shl(io, 1)
    y4 = Shr(io, n)
    c0 = Eq(r, r)
    c1 = Ne(r, 0.5)
    c2 = Lt(r, r)
    c3 = Le(r, r)
    c4 = Gt(r, r)
    c5 = Ge(r, r)
    u0 = Neg(r)
    u1 = Abs(r, layout=spatial(64).local(2))
    u2 = Not(c0)
    m0 = Exp(r)
    m1 = Exp2(r)
    m2 = Log(r)
    m3 = Log2(r)
    m4 = Sqrt(r)
    m5 = Rsqrt(r)
    m6 = Sin(r)
    m7 = Cos(r)
    m8 = Tanh(r)
    m9 = Rcp(r, layout=spatial(64).local(2))
    w = Where(c0, r, 0.0)
    h = Cast(r, f16)
    v = View(h, dtype=u16, layout=spatial(64).local(2))
    t = Permute(io, dims=[1, 0])
    cl = ConvertLayout(r, layout=local(2).spatial(64))
    d = Dot(a, b, r)
    Dot(a, b, r, out=r)
    rd = Reduce(io, dim=0, op=prod, keepdim=False, layout=spatial(8).replicate(8))
    ai = Iota(layout=spatial(64), dim=0)
    aa = AtomicAdd(wg, ai, offset=[0:, bx])
    AtomicMax(wg, ai, offset=[0:, 1])
    AtomicMin(wg, ai, offset=[0:, 2], out=aa)
    ae = AtomicExch(wg, ai, offset=[by:, 3])
    AtomicCas(wg, ai, aa, offset=[0:, 0])
    Fence(scope=gpu)
    Fence(scope=block)
    al = AtomicLoad(wg, layout=spatial(64), offset=[0:, bx])
    AtomicStore(wg, al, offset=[0:, 3])
    AtomicStore(r=al, dst=wg, offset=[0:, 1])
    bars = AllocateShared(u64, shape=[2])
    MbarrierInit(SliceShared(bars, offset=[0]), count=1)
    MbarrierArrive(SliceShared(bars, offset=[1]), tx=n * 2)
    MbarrierWait(s=SliceShared(bars, offset=[0]), parity=n % 2)
    FenceProxyAsync()
    TmaLoad(sh, g, bar=SliceShared(bars, offset=[1]), offset=[bx * 2:, 0:])
    TmaLoad(s=ss, g=g, bar=SliceShared(bars, offset=[0]))
    TmaStore(sh, g, offset=[by:, 0:])
    TmaStore(s=ss, g=g)
    TmaStoreCommitGroup()
    TmaStoreWaitGroup(2)
    rk = ClusterRank()
    ClusterSync()
    TmaLoadMulticast(sh, g, bar=SliceShared(bars, offset=[1]), mask=rk + 1, offset=[bx * 2:, 0:])
    MbarrierArriveCluster(SliceShared(bars, offset=[0]), rank=rk)
    WgmmaFence()
    Wgmma(sh, sh, r, out=r)
    WgmmaCommitGroup()
    WgmmaWaitGroup(1)
    Synchronize()
    Print(r, msg="r")
    Print(s)
    Exit()
)";
  auto m = asmText(text);
  REQUIRE_OK(m);
  std::vector<bool> seen(numOpcodes(), false);
  for (const Instruction &inst : m->programs[0].instructions)
    seen[size_t(inst.opcode)] = true;
  for (size_t op = 0; op < numOpcodes(); ++op) {
    CAPTURE(instructionSpec(Opcode(op)).name);
    CHECK(seen[op]);
  }
  checkRoundTrip(text);
}

TEST_CASE("LoadGlobal's eviction hints: header flag bit 3 only when used, bytes of old files") {
  // The decoded hint of each spelling; a module without hints encodes without flag bit 3 and
  // without a presence byte per LoadGlobal for it, byte for byte as before the argument existed
  // (so its size is that of the same module with hints minus one byte per LoadGlobal and the
  // hints' value bytes)
  const char *with = R"(
def k<1>(f16* p) threads=32:
    g = ViewGlobal(p, shape=[64])
    a = LoadGlobal(g, layout=spatial(32).local(2), evict=first)
    b = LoadGlobal(g, layout=spatial(32).local(2), evict=last)
    c = LoadGlobal(g, layout=spatial(32).local(2), evict=normal)
    d = LoadGlobal(g, layout=spatial(32).local(2))
    StoreGlobal(Add(Add(a, b), Add(c, d)), g)
)";
  auto m = asmText(with);
  REQUIRE_OK(m);
  std::vector<std::pair<bool, int64_t>> hints;
  for (const Instruction &inst : m->programs[0].instructions)
    if (inst.opcode == Opcode::LoadGlobal)
      hints.emplace_back(inst.arg(ArgName::evict).present, inst.arg(ArgName::evict).intValue);
  CHECK(hints == std::vector<std::pair<bool, int64_t>>{{true, int64_t(Eviction::First)},
                                                       {true, int64_t(Eviction::Last)},
                                                       {true, int64_t(Eviction::Normal)},
                                                       {false, 0}});
  std::vector<uint8_t> bytes = encodeModule(*m);
  CHECK((bytes[8] & 8) == 8);
  checkRoundTrip(with);
  Expected<Module> back = decodeModule(bytes);
  REQUIRE_OK(back);
  CHECK(encodeModule(*back) == bytes);

  std::string without = with;
  for (const char *hint : {", evict=first", ", evict=last", ", evict=normal"})
    without.erase(without.find(hint), std::string(hint).size());
  auto plain = asmText(without);
  REQUIRE_OK(plain);
  std::vector<uint8_t> plainBytes = encodeModule(*plain);
  CHECK((plainBytes[8] & 8) == 0);
  // four presence bytes and three values fewer (the header and the sections' lengths aside)
  CHECK(bytes.size() == plainBytes.size() + 7);
  checkRoundTrip(without);

  auto bad = asmText(R"(
def k<1>(f16* p) threads=32:
    g = ViewGlobal(p, shape=[64])
    a = LoadGlobal(g, layout=spatial(32).local(2), evict=sometimes)
    StoreGlobal(a, g)
)");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().toString().find("error[bad-argument]: argument 'evict' of 'LoadGlobal' must "
                                     "be one of normal, first, last") != std::string::npos);
}

TEST_CASE("constants of every kind round-trip bit-exactly") {
  checkRoundTrip(R"(
def k<1>(i64 a, f64 d, f32 f, u64 q, u8 b, i8 c, f16 h, bf16 bh) threads=32:
    x0 = a + 2147483648
    x1 = a + -2147483649
    x2 = a + (-9223372036854775807 - 1)
    x3 = a + 9223372036854775807
    x4 = a * 5
    y0 = d + f64(0.1)
    y1 = d + 0.1
    y2 = d + f64(1e300)
    y3 = d + f64(-0.0)
    y4 = d + f64(4.9e-324)
    z0 = f + 0.1
    z1 = f + 3.4028234e38
    z2 = f + 1e-45
    z3 = f + -0.0
    z4 = f + 1.0 / 0.0
    z5 = f + -1.0 / 0.0
    z6 = f + 0.0 / 0.0
    z7 = f + 16777216.0
    q0 = q + u64(-1)
    q1 = q + u64(9223372036854775807)
    b0 = b + u8(255)
    c0 = c + i8(-128)
    h0 = h + f16(65504.0)
    h1 = h + f16(1.0 / 0.0)
    h2 = h + f16(5.9604645e-08)
    bh0 = bh + bf16(0.1)
    n0 = -2147483647 + i32(-2147483648)
    m0 = a + i64(-5)
    e0 = True and a > 0
)");
}
/// Whether the assembler can produce the constant at all: every value except NaNs other than
/// the canonical one (arithmetic and conversions only ever produce that NaN, docs/types.md) and
/// the infinities of f8e5m2 (conversions into 8-bit floats saturate, and there is no scalar
/// arithmetic on them).
bool spellable(DataType t, uint64_t bits) {
  if (isNaN(bits, t))
    return bits == canonicalNaN(t);
  return !(isInf(bits, t) && t.bits <= 8);
}

TEST_CASE("constant printing covers every data type and edge value") {
  // Print a Const node of every type for a spread of bit patterns; re-assembly must give back
  // exactly the dtype and bits (the disassembler's contract for constants).
  std::vector<std::string> names = {"bool",   "i2",     "i7",     "i8",     "i16",   "i32",
                                    "i64",    "u1",     "u7",     "u8",     "u16",   "u32",
                                    "u64",    "f16",    "bf16",   "f32",    "f64",   "f8e4m3",
                                    "f8e5m2", "f4e2m1", "f6e3m2", "f3e1m1", "f7e5m1"};
  for (const std::string &n : names) {
    DataType t = *DataType::parse(n);
    uint64_t mask = t.bits >= 64 ? ~uint64_t(0) : (uint64_t(1) << t.bits) - 1;
    std::vector<uint64_t> patterns;
    for (uint64_t b = 0; b <= std::min<uint64_t>(mask, 255); ++b) // every value of <= 8 bits
      patterns.push_back(b);
    for (uint64_t b :
         {mask, mask >> 1, (mask >> 1) + 1, mask - 1, uint64_t(0x5A5A5A5A5A5A5A5A),
          uint64_t(0x3C00), uint64_t(0x7C00), uint64_t(0x7E00), uint64_t(0xFE00),
          uint64_t(0x7F800000), uint64_t(0xFFC00000), uint64_t(0x7FC00000),
          uint64_t(0x3FB999999999999A), uint64_t(0x7FF0000000000000), uint64_t(0xFFF8000000000000)})
      patterns.push_back(b & mask);
    for (uint64_t bits : patterns) {
      if ((t.isBool() && bits > 1) || !spellable(t, bits))
        continue;
      CAPTURE(n);
      CAPTURE(bits);
      Program p;
      p.name = "k";
      ExprNode one;
      one.dtype = DataType::i32();
      one.bits = 1;
      p.exprs.push_back(one);
      p.grid.push_back(0);
      ExprNode node;
      node.dtype = t;
      node.bits = bits;
      p.exprs.push_back(node);
      Variable v;
      v.name = "x";
      v.dtype = t;
      p.vars.push_back(v);
      Stmt s;
      s.kind = StmtKind::Assign;
      s.var = 0;
      s.expr = 1;
      p.body.push_back(s);
      Module m;
      m.programs.push_back(p);
      std::string text = disassemble(m);
      INFO(text);
      auto back = asmText(text);
      REQUIRE_OK(back);
      const Program &q = back->programs[0];
      REQUIRE(q.body.size() == 1);
      const ExprNode &e = q.exprs[q.body[0].expr];
      CHECK(e.op == ExprOp::Const);
      CHECK(e.dtype == t);
      CHECK(e.bits == bits);
      CHECK(q.body[0].expr == 1);
    }
  }
}

} // namespace

TEST_CASE("updates left at the top of a thread group's body by a folded constant if round-trip") {
  // a group's body is a scope of its own: the update of `a` that `if FLAG == 1:` leaves at its
  // top is printed inside `if True:`, so it re-assembles as an update, not a new variable
  const char *src = R"(
const FLAG = 1
def k<1>(f32* x_ptr) threads=64:
    g = ViewGlobal(x_ptr, shape=[2, 32])
    parallel:
        group(32, copies=2) as w:
            a = AllocateRegister(f32, layout=spatial(1, 32), init=1.0)
            if FLAG == 1:
                a = Add(a, a)
            StoreGlobal(a, g, offset=[w:, 0:])
)";
  std::string printed = checkRoundTrip(src);
  CHECK(printed.find("            if True:\n                a = Add(a, a)\n") != std::string::npos);
}

TEST_CASE("parallel statements and their groups round-trip") {
  std::string text = readSourceFile("tests/conformance/ok_thread_groups.tasm");
  checkRoundTrip(text);
  checkRoundTrip("def k<1>() threads=384:\n    parallel:\n        group(128, regs=40):\n"
                 "            pass\n        group(256, regs=232):\n            x = 1\n");
  auto m = asmText("def k<1>() threads=384:\n    parallel:\n        group(128, regs=40):\n"
                   "            pass\n        group(256):\n            pass\n");
  REQUIRE_OK(m);
  std::string printed = disassemble(*m);
  CHECK(printed.find("    parallel:\n        group(128, regs=40):\n            pass\n"
                     "        group(256):\n            pass\n") != std::string::npos);
}

TEST_CASE("unroll hints: statement kind 10 only with a hint, bytes of old files otherwise") {
  // A for loop with unroll=U (1..8) encodes as statement kind 10, the For's fields, U, then the
  // body; a loop without a hint encodes as kind 2 without the field, as before hints existed
  const char *with = R"(
def k<1>(i32 n) threads=32:
    x = 0
    for i in range(1, n, 2, unroll=4):
        x = x + i
    for j in range(n, unroll=1):
        x = x + j
)";
  auto m = asmText(with);
  REQUIRE_OK(m);
  const std::vector<Stmt> &body = m->programs[0].body;
  REQUIRE(body.size() == 3);
  CHECK(body[1].kind == StmtKind::For);
  CHECK(body[1].unroll == 4);
  CHECK(body[2].kind == StmtKind::For);
  CHECK(body[2].unroll == 1);
  std::vector<uint8_t> bytes = encodeModule(*m);
  Expected<Module> back = decodeModule(bytes);
  REQUIRE_OK(back);
  CHECK(back->programs[0].body[1].unroll == 4);
  CHECK(back->programs[0].body[2].unroll == 1);
  CHECK(encodeModule(*back) == bytes);
  std::string printed = disassemble(*m);
  CHECK(printed.find("in range(1, n, 2, unroll=4):\n") != std::string::npos);
  CHECK(printed.find("in range(n, unroll=1):\n") != std::string::npos);
  checkRoundTrip(with);

  std::string plainText = with;
  plainText.erase(plainText.find(", unroll=4"), std::string(", unroll=4").size());
  plainText.erase(plainText.find(", unroll=1"), std::string(", unroll=1").size());
  auto plain = asmText(plainText);
  REQUIRE_OK(plain);
  CHECK(plain->programs[0].body[1].unroll == 0);
  std::vector<uint8_t> plainBytes = encodeModule(*plain);
  // two bytes more: the hints (the kind byte 10 replaces the kind byte 2)
  CHECK(bytes.size() == plainBytes.size() + 2);
  checkRoundTrip(plainText);
  // the loop's encoding (kind, var, start, stop, step[, hint]) in both files
  auto find = [](const std::vector<uint8_t> &b, std::vector<uint8_t> pattern) {
    return std::search(b.begin(), b.end(), pattern.begin(), pattern.end()) != b.end();
  };
  const Stmt &loop = m->programs[0].body[1];
  std::vector<uint8_t> head = {uint8_t(loop.var), uint8_t(loop.expr), uint8_t(loop.stop),
                               uint8_t(loop.step)};
  std::vector<uint8_t> hinted = {10};
  hinted.insert(hinted.end(), head.begin(), head.end());
  hinted.push_back(4);
  std::vector<uint8_t> unhinted = {2};
  unhinted.insert(unhinted.end(), head.begin(), head.end());
  CHECK(find(bytes, hinted));
  CHECK(!find(bytes, unhinted));
  CHECK(find(plainBytes, unhinted));
}

TEST_CASE("unroll hints: a choice by a parameter is two copies of the loop") {
  // unroll=A if C else B with C not a constant: `if C:` the loop with hint A, else with B; the
  // disassembly prints the two loops, which assemble to the same module
  const char *text = R"(
def k<1>(i32 m, i32 n) threads=32:
    x = 0
    for i in range(n, unroll=4 if m == 1 else 2):
        x = x + i
    x = x + 1
)";
  auto m = asmText(text);
  REQUIRE_OK(m);
  const std::vector<Stmt> &body = m->programs[0].body;
  REQUIRE(body.size() == 3);
  REQUIRE(body[1].kind == StmtKind::If);
  REQUIRE(body[1].body.size() == 1);
  REQUIRE(body[1].orelse.size() == 1);
  CHECK(body[1].body[0].kind == StmtKind::For);
  CHECK(body[1].body[0].unroll == 4);
  CHECK(body[1].orelse[0].kind == StmtKind::For);
  CHECK(body[1].orelse[0].unroll == 2);
  CHECK(body[1].body[0].body.size() == 1);
  CHECK(body[1].orelse[0].body.size() == 1);
  std::string printed = disassemble(*m);
  CHECK(printed.find("    if m == 1:\n        for i in range(n, unroll=4):\n") !=
        std::string::npos);
  CHECK(printed.find("    else:\n        for i in range(n, unroll=2):\n") != std::string::npos);
  checkRoundTrip(text);
  // nested choices: three loops; the same hint on both sides, or a constant condition: one loop
  auto nested = asmText("def k<1>(i32 m, i32 n) threads=32:\n    x = 0\n"
                        "    for i in range(n, unroll=4 if m == 1 else (3 if m == 2 else 1)):\n"
                        "        x = x + i\n");
  REQUIRE_OK(nested);
  const Stmt &outer = nested->programs[0].body[1];
  REQUIRE(outer.kind == StmtKind::If);
  CHECK(outer.body[0].unroll == 4);
  REQUIRE(outer.orelse.size() == 1);
  REQUIRE(outer.orelse[0].kind == StmtKind::If);
  CHECK(outer.orelse[0].body[0].unroll == 3);
  CHECK(outer.orelse[0].orelse[0].unroll == 1);
  for (const char *hint : {"2 if m == 1 else 2", "4 if 1 == 2 else 2"}) {
    CAPTURE(hint);
    auto one = asmText(std::string("def k<1>(i32 m, i32 n) threads=32:\n    x = 0\n"
                                   "    for i in range(n, unroll=") +
                       hint + "):\n        x = x + i\n");
    REQUIRE_OK(one);
    REQUIRE(one->programs[0].body.size() == 2);
    CHECK(one->programs[0].body[1].kind == StmtKind::For);
    CHECK(one->programs[0].body[1].unroll == 2);
  }
}

TEST_CASE("unroll hints: errors") {
  auto error = [](const char *range) {
    std::string text = std::string("const U = 3\ndef k<1>(i32 n) threads=32:\n    x = 0\n"
                                   "    for i in ") +
                       range + ":\n        x = x + i\n";
    auto m = asmText(text);
    REQUIRE_FALSE(m.ok());
    return m.status().toString();
  };
  CHECK(error("range(n, unroll=0)").find(":4:30: error[bad-argument]: unroll=0 is not in [1, 8]") !=
        std::string::npos);
  CHECK(error("range(n, unroll=9)").find("error[bad-argument]: unroll=9 is not in [1, 8]") !=
        std::string::npos);
  CHECK(error("range(n, unroll=n)").find("error[bad-argument]") != std::string::npos);
  CHECK(error("range(n, unroll=U + 0.5)").find("error[") != std::string::npos);
  // a choice by a parameter takes constants in [1, 8] on both sides and an integer or bool
  // condition
  CHECK(error("range(n, unroll=4 if n == 1 else n)").find("error[bad-argument]") !=
        std::string::npos);
  CHECK(error("range(n, unroll=9 if n == 1 else 2)")
            .find("error[bad-argument]: unroll=9 is not in [1, 8]") != std::string::npos);
  CHECK(error("range(n, unroll=4 if n == 1 else 0)")
            .find("error[bad-argument]: unroll=0 is not in [1, 8]") != std::string::npos);
  CHECK(error("range(n, unroll=4 if n * 0.5 else 2)").find("error[dtype-mismatch]") !=
        std::string::npos);
  CHECK(error("range(n, unrol=2)")
            .find("error[syntax]: range() takes no keyword argument 'unrol' (only unroll=)") !=
        std::string::npos);
  CHECK(
      error("range(unroll=2, n)").find("error[syntax]: unroll= is the last argument of range()") !=
      std::string::npos);
  CHECK(error("range(unroll=2)").find("range() takes 1 to 3 arguments, got 0") !=
        std::string::npos);
  // a constant expression is fine
  CHECK_OK(asmText("const U = 3\ndef k<1>(i32 n) threads=32:\n    x = 0\n"
                   "    for i in range(n, unroll=U - 1,):\n        x = x + i\n"));
}
