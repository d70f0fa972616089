// Names and scopes (ISA section 4) checked on the produced IR: which variable each write and
// each read refers to, in which order variables are declared, and temporaries.
#include "asm_test_util.h"

namespace {

using namespace tilus;
using namespace tilus::testing;

/// The variable read by expression `id` (which must be a Var node).
VarId readVar(const Program &p, ExprId id) {
  REQUIRE(p.exprs[id].op == ExprOp::Var);
  return p.exprs[id].var;
}

std::vector<std::string> varNames(const Program &p) {
  std::vector<std::string> names;
  for (const Variable &v : p.vars)
    names.push_back(v.name);
  return names;
}

TEST_CASE("update of an enclosing-scope variable versus shadowing in the same scope") {
  Program p = asmProgram(R"(def k<1>(i32 n):
    s = 0
    for i in range(n):
        s = s + i
        t = 1
        t = t + 1
    s = 5
)");
  // n, s, i, t, t (shadow), s (shadow): the update inside the loop declares nothing.
  CHECK(varNames(p) == std::vector<std::string>{"n", "s", "i", "t", "t", "s"});
  CHECK(p.vars[0].isParam);
  for (VarId v = 1; v < p.vars.size(); ++v)
    CHECK_FALSE(p.vars[v].isParam);
  REQUIRE(p.body.size() == 3);
  CHECK(p.body[0].var == 1);
  const Stmt &loop = p.body[1];
  CHECK(loop.var == 2);
  REQUIRE(loop.body.size() == 3);
  CHECK(loop.body[0].kind == StmtKind::Assign);
  CHECK(loop.body[0].var == 1); // update of the outer s
  const ExprNode &add = p.exprs[loop.body[0].expr];
  CHECK(readVar(p, add.operands[0]) == 1);
  CHECK(readVar(p, add.operands[1]) == 2);
  CHECK(loop.body[1].var == 3);
  CHECK(loop.body[2].var == 4);                                   // same scope: a new t ...
  CHECK(readVar(p, p.exprs[loop.body[2].expr].operands[0]) == 3); // ... computed from the old
  CHECK(p.body[2].var == 5);
}

TEST_CASE("tensor results update an enclosing variable or shadow one of the same scope") {
  Program p = asmProgram(R"(def k<1>(f32* x) threads=32:
    g = ViewGlobal(x, shape=[32])
    acc = LoadGlobal(g, layout=spatial(32))
    for i in range(4):
        acc = Add(acc, acc)
    acc = Exp(acc)
    Print(acc)
)");
  VarId acc0 = varsNamed(p, "acc")[0], acc1 = varsNamed(p, "acc")[1];
  CHECK(varsNamed(p, "acc").size() == 2);
  const Instruction &add = p.instructions[2];
  CHECK(add.opcode == Opcode::Add);
  CHECK(add.results == std::vector<VarId>{acc0});
  CHECK_FALSE(add.out);
  CHECK(add.arg(ArgName::a).var == acc0);
  const Instruction &exp = p.instructions[3];
  CHECK(exp.results == std::vector<VarId>{acc1});
  CHECK(exp.arg(ArgName::a).var == acc0);
  CHECK(p.instructions[4].arg(ArgName::x).var == acc1);
  CHECK(p.vars[acc0].kind == VarKind::Register);
  CHECK(p.vars[varNamed(p, "g")].kind == VarKind::Global);
}

TEST_CASE("names declared in a block are not visible after it") {
  auto m = asmText("def k<1>(i32 n):\n    if n:\n        y = 1\n    z = y\n");
  CHECK_ERROR(m, ErrorCode::UndefinedName);
  CHECK(firstWhere(m.status()) == "t.tasm:4:9");
  CHECK(m.status().first().message == "undefined name 'y'");
  // if and else bodies are separate scopes: each declares its own a.
  Program p = asmProgram(R"(def k<1>(i32 n):
    if n:
        a = 1
    elif n > 2:
        a = 2
    else:
        a = 3
    while n:
        a = 4
)");
  CHECK(varsNamed(p, "a").size() == 4);
}

TEST_CASE("a loop variable shadows an outer name only inside the loop") {
  Program p = asmProgram(R"(def k<1>():
    i = 7
    for i in range(3):
        x = i
    y = i
)");
  std::vector<VarId> is = varsNamed(p, "i");
  REQUIRE(is.size() == 2);
  CHECK(p.body[1].var == is[1]);
  CHECK(readVar(p, p.body[1].body[0].expr) == is[1]);
  CHECK(readVar(p, p.body[2].expr) == is[0]);
}

TEST_CASE("loop variables and parameters are read-only; constants cannot be assigned") {
  auto loop = asmText("def k<1>():\n    for i in range(3):\n        i = 1\n");
  CHECK_ERROR(loop, ErrorCode::UpdateType);
  CHECK(firstWhere(loop.status()) == "t.tasm:3:9");
  CHECK(loop.status().first().message ==
        "cannot assign to loop variable 'i' (loop variables are read-only)");
  auto nested = asmText("def k<1>():\n    for i in range(3):\n        if i:\n            i = 1\n");
  CHECK_ERROR(nested, ErrorCode::UpdateType);
  auto param = asmText("def k<1>(i32 n):\n    n = n + 1\n");
  CHECK_ERROR(param, ErrorCode::UpdateType);
  CHECK(param.status().first().message ==
        "cannot assign to parameter 'n' (parameters are read-only)");
  auto konst = asmText("const C = 1\ndef k<1>():\n    C = 2\n");
  CHECK_ERROR(konst, ErrorCode::Redefined);
  CHECK(firstWhere(konst.status()) == "t.tasm:3:5");
  auto loopConst = asmText("const C = 1\ndef k<1>():\n    for C in range(2):\n        pass\n");
  CHECK_ERROR(loopConst, ErrorCode::Redefined);
}

TEST_CASE("an update must keep the variable's kind and scalar type") {
  auto dtype = asmText("def k<1>():\n    s = 0\n    for i in range(3):\n        s = i64(i)\n");
  CHECK_ERROR(dtype, ErrorCode::UpdateType);
  CHECK(firstWhere(dtype.status()) == "t.tasm:4:9");
  CHECK(dtype.status().first().message ==
        "update of 's' (i32 declared at line 2) with a value of type i64");
  auto kind = asmText("def k<1>(f32* x):\n    g = 0\n    if 1:\n        g = ViewGlobal(x)\n");
  CHECK_ERROR(kind, ErrorCode::UpdateType);
  // In the same scope the new value simply declares a new variable.
  Program p = asmProgram("def k<1>(f32* x):\n    g = 0\n    g = ViewGlobal(x)\n    g = 1.5\n");
  CHECK(varsNamed(p, "g").size() == 3);
  // An annotated update converts to the annotation, which must match the variable.
  Program q = asmProgram("def k<1>():\n    s: i64 = 0\n    if 1:\n        s: i64 = 5\n");
  CHECK(varsNamed(q, "s").size() == 1);
}

TEST_CASE("names _t<N> always declare, and temporaries avoid names the source uses") {
  Program p = asmProgram("def k<1>():\n    _t0 = 1\n    if 1:\n        _t0 = 2\n");
  CHECK(varsNamed(p, "_t0").size() == 2);
  // Every digit counts: _t9 and _t1909 are temporary names; _t, _tx and _t9a are not.
  for (const char *name : {"_t9", "_t1909"}) {
    CAPTURE(name);
    std::string n = name;
    Program t = asmProgram("def k<1>():\n    " + n + " = 1\n    if 1:\n        " + n + " = 2\n");
    CHECK(varsNamed(t, name).size() == 2);
  }
  for (const char *name : {"_tx", "_t9a"}) {
    CAPTURE(name);
    std::string n = name;
    Program t = asmProgram("def k<1>():\n    " + n + " = 1\n    if 1:\n        " + n + " = 2\n");
    CHECK(varsNamed(t, name).size() == 1); // an update of the outer variable
  }
  Program q = asmProgram(R"(def k<1>(f32* x) threads=32:
    g = ViewGlobal(x, shape=[32])
    _t0 = LoadGlobal(g, layout=spatial(32))
    _t2 = Exp(_t0)
    e = Exp(Sub(Exp(_t0), _t2))
)");
  // Nested calls, innermost first: Exp -> _t1, Sub -> _t3 (skipping the source's _t2).
  CHECK(varNames(q) == std::vector<std::string>{"x", "g", "_t0", "_t2", "_t1", "_t3", "e"});
  REQUIRE(q.instructions.size() == 6);
  CHECK(q.instructions[3].opcode == Opcode::Exp);
  CHECK(q.instructions[3].results == std::vector<VarId>{4});
  CHECK(q.instructions[4].opcode == Opcode::Sub);
  CHECK(q.instructions[4].arg(ArgName::a).var == 4);
  CHECK(q.instructions[4].arg(ArgName::b).var == 3);
  CHECK(q.instructions[4].results == std::vector<VarId>{5});
  CHECK(q.instructions[5].arg(ArgName::a).var == 5);
  CHECK(q.instructions[5].results == std::vector<VarId>{6});
  for (size_t k = 0; k < q.body.size(); ++k)
    CHECK(q.body[k].index == k); // statements in instruction order
  // Temporaries are not visible by name.
  auto hidden = asmText(R"(def k<1>(f32* x) threads=32:
    g = ViewGlobal(x, shape=[32])
    y = Exp(LoadGlobal(g, layout=spatial(32)))
    Print(_t0)
)");
  CHECK_ERROR(hidden, ErrorCode::UndefinedName);
}

TEST_CASE("parameters come first, then the grid expressions, then the body") {
  Program p = asmProgram(R"(const B = 64
def k<cdiv(n, B), m>(f16* a, i32 n, i64 m, u8* b):
    x = n
)");
  CHECK(varNames(p) == std::vector<std::string>{"a", "n", "m", "b", "x"});
  CHECK(p.params == std::vector<VarId>{0, 1, 2, 3});
  CHECK(p.vars[0].kind == VarKind::Pointer);
  CHECK(p.vars[0].dtype == DataType::f16());
  CHECK(p.vars[1].kind == VarKind::Scalar);
  CHECK(p.vars[3].dtype == DataType::u(8));
  REQUIRE(p.grid.size() == 2);
  CHECK(p.grid[0] == 2); // Var n, Const 64, CeilDiv
  CHECK(p.exprs[2].op == ExprOp::CeilDiv);
  CHECK(readVar(p, p.exprs[2].operands[0]) == 1);
  CHECK(p.grid[1] == 3);
  CHECK(readVar(p, 3) == 2);
  CHECK(p.threads == 0);
  CHECK(p.loc.line == 2);
  CHECK(p.loc.column == 1);
}

TEST_CASE("for loops: bounds are converted to the loop variable's type") {
  Program p = asmProgram("def k<1>(i64 n):\n    for i in range(n):\n        pass\n");
  const Stmt &f = p.body[0];
  CHECK(p.vars[f.var].dtype == DataType::i64());
  // range(n): the stop expression first, then the implicit start 0 and step 1.
  // Expression 0 is the grid's 1.
  CHECK(f.stop == 1);
  CHECK(f.expr == 2);
  CHECK(f.step == 3);
  CHECK(p.exprs[2].dtype == DataType::i64());
  CHECK(p.exprs[2].bits == 0);
  CHECK(p.exprs[3].bits == 1);
  CHECK(f.body.empty());
  Program q = asmProgram("def k<1>(i64 n):\n    for i in range(2, n, -1):\n        pass\n");
  const Stmt &g = q.body[0];
  CHECK(g.expr == 1);
  CHECK(q.exprs[1].dtype == DataType::i64()); // the i32 literal 2, converted
  CHECK(q.exprs[1].bits == 2);
  CHECK(g.stop == 2);
  CHECK(g.step == 3);
  CHECK(q.exprs[3].bits == uint64_t(-1));
  auto bad = asmText("def k<1>():\n    for i in range(1.5):\n        pass\n");
  CHECK_ERROR(bad, ErrorCode::DtypeMismatch);
  CHECK(firstWhere(bad.status()) == "t.tasm:2:20");
}

TEST_CASE("break and continue inside loops only") {
  Program p = asmProgram(R"(def k<1>(i32 n):
    while n:
        if n > 3:
            break
        continue
)");
  CHECK(p.body[0].kind == StmtKind::While);
  CHECK(p.body[0].body[0].body[0].kind == StmtKind::Break);
  CHECK(p.body[0].body[1].kind == StmtKind::Continue);
  auto bad = asmText("def k<1>(i32 n):\n    if n:\n        break\n");
  CHECK_ERROR(bad, ErrorCode::BreakOutsideLoop);
  CHECK(firstWhere(bad.status()) == "t.tasm:3:9");
  auto bad2 = asmText("def k<1>():\n    continue\n");
  CHECK_ERROR(bad2, ErrorCode::BreakOutsideLoop);
}

} // namespace
