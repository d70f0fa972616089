// Instruction calls: arguments matched to the instruction table, each ArgKind's IR form,
// results and out=, nested calls, evaluation order, and source locations.
#include "asm_test_util.h"

namespace {

using namespace tilus;
using namespace tilus::testing;

const char *kHeader = "const BM, BK, STAGES = 16, 32, 3\n"
                      "def k<1>(f16* a_ptr, i32 m, f32 s) threads=32:\n";

Program body(const std::string &lines) { return asmProgram(kHeader + lines); }

TEST_CASE("arguments: positional then keyword, stored in table order") {
  Program p = body("    g = ViewGlobal(a_ptr, strides=[m, 1], shape=[4, m])\n");
  REQUIRE(p.instructions.size() == 1);
  const Instruction &v = p.instructions[0];
  CHECK(v.opcode == Opcode::ViewGlobal);
  REQUIRE(v.args.size() == 4); // ptr, dtype, shape, strides
  CHECK(v.args[0].present);
  CHECK(v.args[0].var == 0);
  CHECK_FALSE(v.args[1].present);
  CHECK(v.args[2].present);
  CHECK(v.args[3].present);
  // Table order, not source order: shape's expressions are emitted before strides'.
  REQUIRE(v.args[2].exprs.size() == 2);
  REQUIRE(v.args[3].exprs.size() == 2);
  CHECK(v.args[2].exprs[0] < v.args[3].exprs[0]);
  CHECK(p.exprs[v.args[2].exprs[0]].bits == 4);
  CHECK(p.exprs[v.args[2].exprs[1]].op == ExprOp::Var);
  CHECK(p.exprs[v.args[3].exprs[0]].var == 1);
  CHECK(v.results == std::vector<VarId>{varNamed(p, "g")});
}

TEST_CASE("every argument kind has its IR form") {
  Program p = body(R"(    bi, bj, bk = BlockIndices()
    g = ViewGlobal(a_ptr, dtype=f16, shape=[m, BK])
    sa = AllocateShared(f16, shape=[STAGES, BM, BK], layout=row_major(3, 16, 32))
    acc = AllocateRegister(f32, layout=local(2, 1).spatial(8, 4).local(1, 2), init=s * 2.0)
    CopyAsync(SliceShared(sa, offset=[bi, 0:, 0:]), g, offset=[bi * BM:, 0:])
    CopyAsyncWaitGroup(STAGES - 2)
    r = Reduce(acc, dim=1, op=max, keepdim=True)
    c = Cast(acc, f16)
    y = Add(acc, 1)
    z = Mul(acc, s)
    Print(acc, msg="acc")
    return
)");
  auto inst = [&](size_t k) -> const Instruction & { return p.instructions.at(k); };
  // BlockIndices: three scalar i32 results.
  CHECK(inst(0).results.size() == 3);
  CHECK(p.vars[inst(0).results[2]].kind == VarKind::Scalar);
  CHECK(p.vars[inst(0).results[2]].dtype == DataType::i32());
  // DType and ExprList.
  CHECK(inst(1).arg(ArgName::dtype).dtype == DataType::f16());
  CHECK(p.exprs[inst(1).arg(ArgName::shape).exprs[1]].bits == 32);
  // IntList and SharedLayout.
  CHECK(inst(2).arg(ArgName::shape).ints == std::vector<int64_t>{3, 16, 32});
  CHECK(*inst(2).arg(ArgName::layout).sharedLayout == *SharedLayout::rowMajor({3, 16, 32}));
  // RegLayout and Expr.
  RegisterLayout mma = *RegisterLayout::local({2, 1})
                            ->product(*RegisterLayout::spatial({8, 4}))
                            ->product(*RegisterLayout::local({1, 2}));
  CHECK(*inst(3).arg(ArgName::layout).regLayout == mma);
  const ExprNode &init = p.exprs[inst(3).arg(ArgName::init).expr];
  CHECK(init.op == ExprOp::Mul);
  CHECK(init.dtype == DataType::f32());
  // A nested call comes first, into a temporary; Offset entries with slice flags.
  CHECK(inst(4).opcode == Opcode::SliceShared);
  const Argument &off = inst(4).arg(ArgName::offset);
  REQUIRE(off.offsets.size() == 3);
  CHECK_FALSE(off.offsets[0].slice);
  CHECK(off.offsets[1].slice);
  CHECK(off.offsets[2].slice);
  CHECK(p.exprs[off.offsets[0].expr].var == inst(0).results[0]);
  CHECK(inst(5).opcode == Opcode::CopyAsync);
  CHECK(inst(5).arg(ArgName::s).var == inst(4).results[0]);
  CHECK(p.vars[inst(4).results[0]].name == "_t0");
  CHECK(p.vars[inst(4).results[0]].kind == VarKind::Shared);
  CHECK(inst(5).arg(ArgName::offset).offsets.size() == 2);
  CHECK(inst(5).arg(ArgName::offset).offsets[0].expr > off.offsets[2].expr);
  // Int.
  CHECK(inst(6).arg(ArgName::n).intValue == 1);
  // Int, ReduceOp, Bool; absent optional layout.
  CHECK(inst(7).arg(ArgName::dim).intValue == 1);
  CHECK(inst(7).arg(ArgName::op).intValue == int64_t(ReduceOp::Max));
  CHECK(inst(7).arg(ArgName::keepdim).intValue == 1);
  CHECK_FALSE(inst(7).arg(ArgName::layout).present);
  CHECK(inst(8).arg(ArgName::dtype).dtype == DataType::f16());
  // Value: a literal and a scalar variable are expressions.
  CHECK(inst(9).arg(ArgName::b).isScalar());
  CHECK(p.exprs[inst(9).arg(ArgName::b).expr].bits == 1);
  CHECK(p.exprs[inst(10).arg(ArgName::b).expr].op == ExprOp::Var);
  CHECK(inst(10).arg(ArgName::a).isTensor());
  // String; return is Exit.
  CHECK(inst(11).arg(ArgName::msg).text == "acc");
  CHECK(inst(12).opcode == Opcode::Exit);
  CHECK(inst(12).results.empty());
}

TEST_CASE("out= writes an existing register tensor in place") {
  Program p = body(R"(    acc = AllocateRegister(f32, layout=spatial(32))
    Add(acc, 1.0, out=acc)
    y = Exp(Neg(acc, out=acc))
)");
  VarId acc = varNamed(p, "acc");
  const Instruction &add = p.instructions[1];
  CHECK(add.out);
  CHECK(add.results == std::vector<VarId>{acc});
  // A nested call with out= passes the named tensor on.
  CHECK(p.instructions[2].opcode == Opcode::Neg);
  CHECK(p.instructions[2].out);
  CHECK(p.instructions[3].arg(ArgName::a).var == acc);
  CHECK(varsNamed(p, "_t0").empty());
}

TEST_CASE("statements and instructions carry source locations") {
  Program p = body("    acc = AllocateRegister(f32, layout=spatial(32))\n"
                   "    y = Exp(  Neg(acc))\n"
                   "    for i in range(2):\n"
                   "        Synchronize()\n");
  // Header is line 2; the body starts at line 3.
  CHECK(p.body[0].loc == SourceLoc{3, 5});
  CHECK(p.instructions[0].loc == SourceLoc{3, 11});
  CHECK(p.body[1].loc == SourceLoc{4, 15}); // the nested Neg is a statement at its call
  CHECK(p.instructions[1].loc == SourceLoc{4, 15});
  CHECK(p.body[2].loc == SourceLoc{4, 5});
  CHECK(p.instructions[2].loc == SourceLoc{4, 9});
  CHECK(p.body[3].loc == SourceLoc{5, 5});
  CHECK(p.body[3].body[0].loc == SourceLoc{6, 9});
}

TEST_CASE("threads, grid and keepSource") {
  Program p = asmProgram("const W = 4\ndef k<1, 2, 3>() threads=W * 32:\n    pass\n");
  CHECK(p.threads == 128);
  CHECK(p.grid.size() == 3);
  CHECK(p.body.empty());
  AssembleOptions o;
  o.fileName = "x.tasm";
  o.keepSource = true;
  auto m = assemble("def k<1>():\n    pass\n", o);
  REQUIRE_OK(m);
  CHECK(m->hasDebugInfo);
  CHECK(m->sourceName == "x.tasm");
  CHECK(m->sourceText == "def k<1>():\n    pass\n");
  auto plain = asmText("def k<1>():\n    pass\n");
  REQUIRE_OK(plain);
  CHECK_FALSE(plain->hasDebugInfo);
  CHECK(plain->sourceText.empty());
}

TEST_CASE("a module holds several programs in order") {
  auto m = asmText("def a<1>():\n    pass\nconst C = 2\ndef b<C>():\n    pass\n");
  REQUIRE_OK(m);
  REQUIRE(m->programs.size() == 2);
  CHECK(m->programs[0].name == "a");
  CHECK(m->programs[1].name == "b");
  CHECK(m->programs[1].exprs[m->programs[1].grid[0]].bits == 2);
  CHECK(m->findProgram("b") == &m->programs[1]);
}

} // namespace
