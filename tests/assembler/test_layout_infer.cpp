// Layout inference on whole programs (docs/layout-inference.md): what is inferred and why, the
// candidates, the ConvertLayout inserted for a conflict, the tile shapes, determinism, and the
// stripping of every program of programs/. Every inferred module must pass the checker.
#include "asm_test_util.h"

#include "isa/bytecode.h"
#include "loader/checker.h"

namespace {

using namespace tilus;
using namespace tilus::testing;

RegisterLayout L(const std::string &text) {
  Expected<RegisterLayout> l = parseRegisterLayout(text);
  REQUIRE_OK(l);
  return std::move(l).value();
}

struct Inferred {
  Module module;
  LayoutReport report;
};

Inferred infer(const std::string &text, int64_t candidate = 0,
               std::map<std::string, std::string> defines = {}) {
  Inferred out;
  AssembleOptions o;
  o.fileName = "t.tasm";
  o.defines = std::move(defines);
  o.layoutCandidate = candidate;
  o.layoutReport = &out.report;
  Expected<Module> m = assemble(text, o);
  REQUIRE_OK(m);
  Expected<VerifiedModule> checked = checkModule(*m);
  REQUIRE_OK(checked);
  out.module = std::move(m).value();
  return out;
}

/// The layout argument of the instruction that declares `var`.
RegisterLayout layoutOf(const Program &p, const std::string &var) {
  VarId v = varNamed(p, var);
  for (const Instruction &inst : p.instructions)
    if (!inst.results.empty() && inst.results[0] == v)
      for (const Argument &a : inst.args)
        if (a.present && a.regLayout)
          return *a.regLayout;
  FAIL("no layout written for " << var);
  return {};
}

const char *kMatmul = R"(
def mm<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr) threads=128:
    ga = ViewGlobal(a_ptr, shape=[64, 32])
    gb = ViewGlobal(b_ptr, shape=[32, 64])
    gc = ViewGlobal(c_ptr, shape=[64, 64])
    sa = AllocateShared(f16, shape=[2, 64, 32])
    CopyAsync(SliceShared(sa, offset=[0, 0:, 0:]), ga)
    CopyAsyncWaitAll()
    Synchronize()
    a = LoadShared(sa, offset=[0, 0:, 0:])
    b = LoadGlobal(gb, shape=[32, 64])
    acc = AllocateRegister(f32, shape=[64, 64])
    Dot(a, b, acc, out=acc)
    StoreGlobal(acc, gc)
)";

} // namespace

TEST_CASE("inference: the Dot decides its operands, LoadShared takes the sliced dimensions") {
  Inferred r = infer(kMatmul);
  const Program &p = r.module.programs[0];
  CHECK(layoutOf(p, "acc") == L("spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(layoutOf(p, "a") ==
        L("spatial(2, 1).replicate(2).local(2, 2).column_local(2, 2).spatial(8, 4).local(1, 2)"));
  CHECK(layoutOf(p, "b") == L("replicate(2).spatial(1, 2).local(2, 4).local(2, 1)."
                              "column_spatial(4, 8).local(2, 1)"));
  // the shared tile is read in mma fragments: swizzled
  const Instruction *alloc = nullptr;
  for (const Instruction &inst : p.instructions)
    if (inst.opcode == Opcode::AllocateShared)
      alloc = &inst;
  REQUIRE(alloc != nullptr);
  const Argument &shared = alloc->arg(ArgName::layout);
  REQUIRE(shared.present);
  CHECK(shared.sharedLayout->toString() == "swizzle(row_major(2, 64, 32), 3, 3, 3)");
  // one explanation line per inferred layout, each with its rule
  REQUIRE(r.report.lines.size() == 4);
  CHECK(r.report.lines[0].find("t.tasm:6:10: sa = AllocateShared") == 0);
  CHECK(r.report.lines[1].find("a = LoadShared") != std::string::npos);
  CHECK(r.report.lines[1].find("[Dot rule at 13:5: mma m16n8k16, 2 x 2 warps, 32 x 32 per warp, "
                               "operand a]") != std::string::npos);
  CHECK(r.report.notes.empty());
}

TEST_CASE("inference: a TMA tile without a layout keeps row_major, which the checker accepts") {
  // the same tile read in mma fragments would be swizzled (the test above); copied by TmaLoad it
  // must stay what the box writes
  std::string src = R"(
def mm<1>(f16* a_ptr, f16* b_ptr, f32* c_ptr) threads=128:
    ga = ViewGlobal(a_ptr, shape=[64, 32])
    gb = ViewGlobal(b_ptr, shape=[32, 64])
    gc = ViewGlobal(c_ptr, shape=[64, 64])
    sa = AllocateShared(f16, shape=[2, 64, 32])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=4096)
    TmaLoad(SliceShared(sa, offset=[0, 0:, 0:]), ga, bar=bar)
    MbarrierWait(bar, parity=0)
    a = LoadShared(sa, offset=[0, 0:, 0:])
    b = LoadGlobal(gb, shape=[32, 64])
    acc = AllocateRegister(f32, shape=[64, 64])
    Dot(a, b, acc, out=acc)
    StoreGlobal(acc, gc)
)";
  Inferred r = infer(src);
  const Program &p = r.module.programs[0];
  const Instruction *alloc = nullptr;
  for (const Instruction &inst : p.instructions)
    if (inst.opcode == Opcode::AllocateShared && !alloc)
      alloc = &inst;
  REQUIRE(alloc != nullptr);
  REQUIRE(alloc->arg(ArgName::layout).present);
  CHECK(alloc->arg(ArgName::layout).sharedLayout->toString() == "row_major(2, 64, 32)");
  REQUIRE(!r.report.lines.empty());
  CHECK(r.report.lines[0].find("copied by the tensor memory accelerator") != std::string::npos);
}

TEST_CASE("inference: candidates are the other warp arrangements, each a valid program") {
  Inferred first = infer(kMatmul);
  // 1 x 1, 1 x 2, 2 x 1, 1 x 4, 2 x 2, 4 x 1 warps fit; the first four in order enter
  CHECK(first.report.candidates == 4);
  std::vector<RegisterLayout> accs;
  for (int64_t k = 0; k < 4; ++k)
    accs.push_back(layoutOf(infer(kMatmul, k).module.programs[0], "acc"));
  CHECK(accs[0] == L("spatial(2, 2).local(2, 4).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(accs[1] == L("spatial(1, 4).local(4, 2).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(accs[2] == L("spatial(4, 1).local(1, 8).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(accs[3] ==
        L("spatial(1, 2).replicate(2).local(4, 4).local(2, 1).spatial(8, 4).local(1, 2)"));
  // the same candidate twice: the same bytes
  CHECK(encodeModule(infer(kMatmul, 2).module) == encodeModule(infer(kMatmul, 2).module));
}

TEST_CASE("inference: an operand whose written layout does not fit gets a ConvertLayout") {
  const char *text = R"(
def k<1>(f32* p, f32* q):
    g = ViewGlobal(p, shape=[32, 4])
    gq = ViewGlobal(q, shape=[32, 4])
    x = LoadGlobal(g, layout=spatial(32, 1).local(1, 4))
    y = LoadGlobal(g, layout=local(4, 1).spatial(8, 4))
    z = LoadGlobal(gq, shape=[32, 4])
    StoreGlobal(Add(Add(x, y), z), gq)
)";
  Inferred r = infer(text);
  const Program &p = r.module.programs[0];
  CHECK(p.threads == 32); // from the first written layout
  REQUIRE(r.report.notes.size() == 1);
  CHECK(r.report.notes[0].find("t.tasm:8:") == 0);
  CHECK(r.report.notes[0].find("note[layout-infer]: ConvertLayout of 'y' (512 bytes) to "
                               "spatial(32, 1).local(1, 4) inserted before the Add") !=
        std::string::npos);
  int converts = 0;
  for (const Instruction &inst : p.instructions)
    if (inst.opcode == Opcode::ConvertLayout) {
      ++converts;
      CHECK(*inst.arg(ArgName::layout).regLayout == L("spatial(32, 1).local(1, 4)"));
      CHECK(inst.arg(ArgName::a).var == varNamed(p, "y"));
    }
  CHECK(converts == 1);
  // z joins the sum's layout: no conversion for it
  CHECK(layoutOf(p, "z") == L("spatial(32, 1).local(1, 4)"));
  // the disassembly shows the conversion and re-assembles to the same bytes
  std::string printed = disassemble(r.module);
  CHECK(printed.find("= ConvertLayout(y, layout=spatial(32, 1).local(1, 4))") != std::string::npos);
  auto again = asmText(printed);
  REQUIRE_OK(again);
  CHECK(encodeModule(*again) == encodeModule(r.module));
}

TEST_CASE("inference: a Dot whose result feeds another Dot takes an arrangement both share") {
  // S = A B [64, 32], P = Cast(S, f16), O = P V [64, 64] over 4 warps. Alone, the first Dot
  // would split its 4 x 4 atoms 2 x 2 (traffic 2 + 2) and the second 2 x 2 as well, but a C
  // tile split along N cannot be the A operand of the second Dot (A is never split along K):
  // both take 4 x 1 warps, and P needs no ConvertLayout.
  const char *text = R"(
def k<1>(f16* a_ptr, f16* b_ptr, f16* v_ptr, f32* o_ptr) threads=128:
    ga = ViewGlobal(a_ptr, shape=[64, 16])
    gb = ViewGlobal(b_ptr, shape=[16, 32])
    gv = ViewGlobal(v_ptr, shape=[32, 64])
    go = ViewGlobal(o_ptr, shape=[64, 64])
    s = AllocateRegister(f32, shape=[64, 32])
    Dot(LoadGlobal(ga, shape=[64, 16]), LoadGlobal(gb, shape=[16, 32]), s, out=s)
    p = Cast(s, f16)
    o = AllocateRegister(f32, shape=[64, 64])
    Dot(p, LoadGlobal(gv, shape=[32, 64]), o, out=o)
    StoreGlobal(o, go)
)";
  Inferred r = infer(text);
  const Program &p = r.module.programs[0];
  CHECK(r.report.notes.empty());
  for (const Instruction &inst : p.instructions)
    CHECK(inst.opcode != Opcode::ConvertLayout);
  // m16n8k16 C atoms, four warps along M: 16 x 32 and 16 x 64 per warp
  CHECK(layoutOf(p, "s") == L("spatial(4, 1).local(1, 4).local(2, 1).spatial(8, 4).local(1, 2)"));
  CHECK(layoutOf(p, "o") == L("spatial(4, 1).local(1, 8).local(2, 1).spatial(8, 4).local(1, 2)"));
}

TEST_CASE("inference: a broadcast result no memory access decides takes its largest operand's "
          "layout") {
  // x [1, 64] is written (a View would fix it too); q [4, 1] is loaded. Mul(q, x) [4, 64] only
  // feeds a Reduce: it takes x's layout repeated 4 times in local slots, so x (the larger
  // operand) is used where it is, and only q, broadcast, is read in that layout.
  const char *text = R"(
def k<1>(f32* x_ptr, f32* q_ptr, f32* o_ptr) threads=32:
    gx = ViewGlobal(x_ptr, shape=[1, 64])
    gq = ViewGlobal(q_ptr, shape=[4, 1])
    go = ViewGlobal(o_ptr, shape=[4, 1])
    x = LoadGlobal(gx, layout=spatial(1, 32).local(1, 2))
    q = LoadGlobal(gq, shape=[4, 1])
    StoreGlobal(Reduce(Mul(q, x), dim=1, op=sum, keepdim=True), go)
)";
  Inferred r = infer(text);
  CHECK(r.report.notes.empty());
  bool found = false;
  for (const std::string &line : r.report.lines)
    if (line.find("= Mul: ") != std::string::npos) {
      found = true;
      CHECK(line.find("broadcast rule: 'x''s layout") != std::string::npos);
    }
  CHECK(found);
  const Program &p = r.module.programs[0];
  for (const Instruction &inst : p.instructions) {
    CHECK(inst.opcode != Opcode::ConvertLayout);
    if (inst.opcode == Opcode::Mul)
      CHECK(*inst.arg(ArgName::layout).regLayout == L("local(4, 1).spatial(1, 32).local(1, 2)"));
  }
}

TEST_CASE("inference: threads, shape= and the per-program switch") {
  // no threads= and no written layout: four warps
  Inferred r = infer(R"(
def k<1>(f32* p):
    g = ViewGlobal(p, shape=[512])
    x = LoadGlobal(g, shape=[512])
    StoreGlobal(Exp(x), g)
)");
  CHECK(r.module.programs[0].threads == 128);
  CHECK(layoutOf(r.module.programs[0], "x") == L("spatial(128).local(4)"));
  // shape= of an Iota, the elementwise-only rule
  Inferred iota = infer(R"(
def k<1>(i32* p) threads=32:
    g = ViewGlobal(p, shape=[4, 8])
    i = Iota(shape=[4, 8], dim=1)
    StoreGlobal(Add(i, 1), g)
)");
  CHECK(layoutOf(iota.module.programs[0], "i") == L("spatial(4, 8)"));
  // shape= and layout= that disagree
  Expected<Module> bad = asmText(R"(
def k<1>(f32* p) threads=32:
    g = ViewGlobal(p, shape=[64])
    x = LoadGlobal(g, shape=[32], layout=spatial(32).local(2))
    StoreGlobal(x, g)
)");
  REQUIRE(!bad);
  CHECK(bad.status().code() == ErrorCode::LayoutShape);
  // a program that writes every register layout is not inferred: its AllocateShared without a
  // layout stays row-major (no layout argument), exactly as before
  Program written = asmProgram(R"(
def k<1>(f16* p) threads=32:
    g = ViewGlobal(p, shape=[16, 16])
    s = AllocateShared(f16, shape=[16, 16])
    CopyAsync(s, g)
    CopyAsyncWaitAll()
    Synchronize()
    a = LoadShared(s, layout=column_local(2, 2).spatial(8, 4).local(1, 2))
    StoreGlobal(a, g)
)");
  CHECK(!written.instructions[1].arg(ArgName::layout).present);
}

TEST_CASE("inference: a tile whose every layout is too large says so") {
  // 7 and 4099 are primes, so the load/store rule can only replicate the tile: 7 x 4099 x 128
  // cells, above the 2^21 a layout may have
  Expected<Module> bad = asmText(R"(
def k<1>(f32* p) threads=128:
    g = ViewGlobal(p, shape=[7, 4099])
    x = LoadGlobal(g, shape=[7, 4099])
    StoreGlobal(x, g)
)");
  REQUIRE(!bad);
  CHECK(bad.status().code() == ErrorCode::LayoutInfer);
  const Diagnostic &d = bad.status().diagnostics().front();
  CHECK(d.location.line == 4);
  CHECK(d.message.find("no layout of shape [7, 4099] over 128 threads stays within the 2097152 "
                       "cells") != std::string::npos);
  CHECK(d.message.find("shape is unknown") == std::string::npos);
  // with 4096 columns the threads divide the shape: spread, no error
  Inferred ok = infer(R"(
def k<1>(f32* p) threads=128:
    g = ViewGlobal(p, shape=[7, 4096])
    x = LoadGlobal(g, shape=[7, 4096])
    StoreGlobal(x, g)
)");
  CHECK(layoutOf(ok.module.programs[0], "x").numLocals() == 7 * 4096 / 128);
  // 828 = 4 x 207: the tile over the four threads the shape shares with 128, 5 x 207 elements
  // each, and the explanation says what the widest runs would have cost
  Inferred spread = infer(R"(
def k<1>(f32* p) threads=128:
    g = ViewGlobal(p, shape=[5, 828])
    x = LoadGlobal(g, shape=[5, 828])
    StoreGlobal(Exp(x), g)
)");
  CHECK(layoutOf(spread.module.programs[0], "x").numLocals() == 5 * 207);
  REQUIRE(!spread.report.lines.empty());
  CHECK(spread.report.lines[0].find("1035 elements per thread (runs of 828 elements would leave "
                                    "each thread 4140)") != std::string::npos);
}

TEST_CASE("inference: deterministic, and the same as the layouts written by hand") {
  std::string source = readSourceFile("programs/examples/gemv.tasm");
  Inferred a = infer(source), b = infer(source);
  CHECK(encodeModule(a.module) == encodeModule(b.module));
  CHECK(a.report.lines == b.report.lines);
  // gemv with the inferred layouts written by hand assembles to the same bytes
  std::string hand = source;
  auto replace = [&](const std::string &from, const std::string &to) {
    size_t at = hand.find(from);
    REQUIRE(at != std::string::npos);
    hand.replace(at, from.size(), to);
  };
  replace("AllocateRegister(f32, shape=[ROWS, KB])",
          "AllocateRegister(f32, layout=local(2, 1).spatial(4, 32).local(1, 8), shape=[ROWS, KB])");
  replace("LoadGlobal(gw, shape=[ROWS, KB],",
          "LoadGlobal(gw, layout=local(2, 1).spatial(4, 32).local(1, 8),");
  replace("LoadGlobal(gx, shape=[1, KB],",
          "LoadGlobal(gx, layout=replicate(4).spatial(1, 32).local(1, 8),");
  auto handModule = asmText(hand);
  REQUIRE_OK(handModule);
  CHECK(encodeModule(*handModule) == encodeModule(a.module));
}

TEST_CASE("stripping: every program of programs/ loses its performance-only layouts") {
  for (const std::string &path : examplePrograms()) {
    CAPTURE(path);
    std::string source = readSourceFile(path);
    AssembleOptions o;
    o.fileName = path;
    if (path.find("paper_matmul") != std::string::npos ||
        path.find("matmul_f16_i6_16x16") != std::string::npos)
      o.defines = {{"M", "64"}, {"N", "64"}, {"K", "64"}};
    Expected<std::string> stripped = stripPerformanceLayouts(source, o);
    REQUIRE_OK(stripped);
    auto count = [](const std::string &s, const std::string &what) {
      size_t n = 0;
      for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1))
        ++n;
      return n;
    };
    if (path.find("programs/examples/") == 0 && path.find("_annotated") == std::string::npos) {
      CHECK(*stripped == source); // written without performance layouts
      continue;
    }
    // (programs whose layouts all feed Views keep them all: programs/layers/rmsnorm.tasm)
    CHECK(count(*stripped, "layout=") <= count(source, "layout="));
    // View layouts and the layouts of the tensors feeding a View stay
    CHECK(count(*stripped, "View(") == count(source, "View("));
    Expected<Module> m = assemble(*stripped, o);
    REQUIRE_OK(m);
    REQUIRE_OK(checkModule(std::move(m).value()));
  }
  // the meaning-carrying layouts of the paper's matmul: the u8 load that a View reinterprets
  std::string paper = *stripPerformanceLayouts(readSourceFile("programs/paper_matmul_f16_i6.tasm"),
                                               AssembleOptions{});
  CHECK(paper.find("b = LoadGlobal(gb, layout=local(3).spatial(32), offset=[bk, bj, 0:])") !=
        std::string::npos);
  CHECK(paper.find("a = LoadGlobal(ga, shape=[16, 16], offset=[bi * BM:, bk * BK:])") !=
        std::string::npos);
  CHECK(paper.find("acc = AllocateRegister(f32, shape=[16, 8], init=0.0)") != std::string::npos);
}

TEST_CASE("stripping: the old values of an atomic are in r's layout, so a View of them keeps it") {
  // zm's layout reaches the View only through the AtomicExch's result: it stays; `add`'s does
  // not feed a View and goes
  const std::string source = R"(def k<1>(u64* p, f32* q) threads=32:
    g = ViewGlobal(p, shape=[4])
    zm = AllocateRegister(u64, layout=replicate(8).spatial(4))
    m = View(AtomicExch(g, zm), dtype=f32, layout=replicate(8).spatial(4).local(2))
    add = AllocateRegister(f32, layout=replicate(8).spatial(4).local(2), init=1.0)
    StoreGlobal(Add(m, add), ViewGlobal(q, shape=[8]))
)";
  Expected<std::string> stripped = stripPerformanceLayouts(source, AssembleOptions{});
  REQUIRE_OK(stripped);
  CHECK(stripped->find("zm = AllocateRegister(u64, layout=replicate(8).spatial(4))") !=
        std::string::npos);
  CHECK(stripped->find("add = AllocateRegister(f32, shape=[8], init=1.0)") != std::string::npos);
  Expected<Module> m = assemble(*stripped, AssembleOptions{});
  REQUIRE_OK(m);
  REQUIRE_OK(checkModule(std::move(m).value()));
}

TEST_CASE("stripping: a Reduce's operand whose result a View reads keeps its layout") {
  // the words `w` are the sum over dim 1 of `t`, whose layout only the Shl writes (its operands
  // have other shapes): the View of w depends on it, so it stays; `add`'s goes
  const std::string source = R"(def k<1>(u32* p, u8* q, f32* r) threads=32:
    x = LoadGlobal(ViewGlobal(p, shape=[32, 1]), layout=spatial(32, 1))
    j = Iota(layout=spatial(1, 1).local(1, 4), dim=1, dtype=u32)
    t = Shl(x, Mul(j, 8), layout=spatial(32, 1).local(1, 4))
    w = Reduce(t, dim=1, op=sum)
    StoreGlobal(View(w, dtype=u8, layout=spatial(32).local(4)), ViewGlobal(q, shape=[128]))
    add = AllocateRegister(f32, layout=spatial(32), init=1.0)
    StoreGlobal(add, ViewGlobal(r, shape=[32]))
)";
  Expected<std::string> stripped = stripPerformanceLayouts(source, AssembleOptions{});
  REQUIRE_OK(stripped);
  CHECK(stripped->find("t = Shl(x, Mul(j, 8), layout=spatial(32, 1).local(1, 4))") !=
        std::string::npos);
  CHECK(stripped->find("add = AllocateRegister(f32, shape=[32], init=1.0)") != std::string::npos);
  Expected<Module> m = assemble(*stripped, AssembleOptions{});
  REQUIRE_OK(m);
  REQUIRE_OK(checkModule(std::move(m).value()));
}

TEST_CASE("stripping: a loop lowered twice (an unroll hint chosen by a parameter) is edited once") {
  // the two copies of the loop list the same call's layout twice; its text is removed once
  const std::string source = R"(def k<1>(f32* p, i32 m, i32 n) threads=32:
    g = ViewGlobal(p, shape=[n, 32])
    acc = AllocateRegister(f32, layout=spatial(32))
    for i in range(n, unroll=4 if m == 1 else 2):
        one = AllocateRegister(f32, layout=spatial(32), init=1.0)
        acc = Add(acc, Mul(one, LoadGlobal(g, layout=spatial(32), offset=[i, 0:])))
    StoreGlobal(acc, g, offset=[0, 0:])
)";
  Expected<std::string> stripped = stripPerformanceLayouts(source, AssembleOptions{});
  REQUIRE_OK(stripped);
  CHECK(stripped->find("one = AllocateRegister(f32, shape=[32], init=1.0)\n") != std::string::npos);
  CHECK(stripped->find("unroll=4 if m == 1 else 2):\n") != std::string::npos);
  Expected<Module> m = assemble(*stripped, AssembleOptions{});
  REQUIRE_OK(m);
  REQUIRE_OK(checkModule(std::move(m).value()));
}

TEST_CASE("inference: a return before a left-out layout") {
  // the record for inference holds one entry per instruction, the Exit of `return` included
  const std::string body = R"(
    x = LoadGlobal(g, shape=[64], offset=[0:])
    StoreGlobal(Add(x, x), g, offset=[0:])
)";
  Inferred with = infer("def k<1>(f32* p, i32 n) threads=32:\n"
                        "    g = ViewGlobal(p, shape=[64])\n"
                        "    if n == 0:\n"
                        "        return" +
                        body);
  Inferred without = infer("def k<1>(f32* p, i32 n) threads=32:\n"
                           "    g = ViewGlobal(p, shape=[64])" +
                           body);
  CHECK(layoutOf(with.module.programs[0], "x") == layoutOf(without.module.programs[0], "x"));
}

TEST_CASE("inference and stripping: a macro body expanded with tiles of other shapes") {
  // each expansion's left-out layout is decided for its own tile (R rows)
  Inferred twice = infer(R"(macro rows(R):
    x = LoadGlobal(g, shape=[R, 32], offset=[0:, 0:])
    StoreGlobal(Add(x, x), g, offset=[0:, 0:])
def k<1>(f32* p) threads=32:
    g = ViewGlobal(p, shape=[4, 32])
    rows(1)
    rows(4)
)");
  const Program &p = twice.module.programs[0];
  std::vector<VarId> xs = varsNamed(p, "x");
  REQUIRE(xs.size() == 2);
  auto alone = [&](int r) {
    Inferred one = infer("def k<1>(f32* p) threads=32:\n"
                         "    g = ViewGlobal(p, shape=[4, 32])\n"
                         "    x = LoadGlobal(g, shape=[" +
                         std::to_string(r) +
                         ", 32], offset=[0:, 0:])\n"
                         "    StoreGlobal(Add(x, x), g, offset=[0:, 0:])\n");
    return layoutOf(one.module.programs[0], "x");
  };
  auto layoutOfVar = [&](VarId v) {
    for (const Instruction &inst : p.instructions)
      if (!inst.results.empty() && inst.results[0] == v)
        return *inst.arg(ArgName::layout).regLayout;
    FAIL("no instruction writes the variable");
    return RegisterLayout();
  };
  CHECK(layoutOfVar(xs[0]) == alone(1));
  CHECK(layoutOfVar(xs[1]) == alone(4));
  // a written layout whose shape differs between expansions stays (one shape= could not replace
  // it); one of the same shape in every expansion goes
  const std::string source = R"(macro rows(R):
    x = LoadGlobal(g, layout=local(R, 1).spatial(1, 32), offset=[0:, 0:])
    one = AllocateRegister(f32, layout=spatial(32), init=1.0)
    StoreGlobal(Add(x, x), g, offset=[0:, 0:])
    StoreGlobal(one, g, offset=[0, 0:])
def k<1>(f32* p) threads=32:
    g = ViewGlobal(p, shape=[4, 32])
    rows(1)
    rows(4)
)";
  Expected<std::string> stripped = stripPerformanceLayouts(source, AssembleOptions{});
  REQUIRE_OK(stripped);
  CHECK(stripped->find("x = LoadGlobal(g, layout=local(R, 1).spatial(1, 32), offset=[0:, 0:])") !=
        std::string::npos);
  CHECK(stripped->find("one = AllocateRegister(f32, shape=[32], init=1.0)") != std::string::npos);
  Expected<Module> m = assemble(*stripped, AssembleOptions{});
  REQUIRE_OK(m);
  REQUIRE_OK(checkModule(std::move(m).value()));
}
