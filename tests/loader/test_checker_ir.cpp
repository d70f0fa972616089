// Structural problems that the assembler never produces but bytecode (or a hand-built module)
// can: variables read before or outside their definition, break outside loops, writes to loop
// variables, expression DAGs and forward references, malformed arguments and results. Each test
// assembles a valid program, breaks one thing in the IR, and checks the diagnostic; none of
// them may crash the checker. Also the bytecode round trip through loadModule.
#include "check_test_util.h"
#include "isa/bytecode.h"
#include "loader/loader.h"
#include "test_helpers.h"

using namespace tilus;
using namespace tilus::testing;

namespace {

Module assembled(std::string_view src) {
  AssembleOptions ao;
  Expected<Module> m = assemble(src, ao);
  REQUIRE_OK(m);
  return std::move(m).value();
}

VarId varNamed(const Program &p, const std::string &name) {
  for (VarId v = 0; v < p.vars.size(); ++v)
    if (p.vars[v].name == name)
      return v;
  FAIL("no variable " << name);
  return kNoId;
}

void clearLocs(std::vector<Stmt> &body) {
  for (Stmt &s : body) {
    s.loc = SourceLoc{};
    clearLocs(s.body);
    clearLocs(s.orelse);
  }
}

/// Drops debug locations so that diagnostics use <bytecode>:PROGRAM:INDEX.
Module withoutLocs(Module m) {
  for (Program &p : m.programs) {
    p.loc = SourceLoc{};
    for (Instruction &inst : p.instructions)
      inst.loc = SourceLoc{};
    clearLocs(p.body);
  }
  return m;
}

const char *kSimple = "def k<1>(f32* p) threads=32:\n"
                      "    x = AllocateRegister(f32, layout=spatial(32))\n"
                      "    y = Add(x, 1.0)\n"
                      "    z = Mul(y, y)\n";

} // namespace

TEST_CASE("bytecode: a variable used before its definition") {
  Module m = withoutLocs(assembled(kSimple));
  std::swap(m.programs[0].body[0], m.programs[0].body[1]); // y = Add(x, ..) before x = ..
  Expected<VerifiedModule> r = checkModule(std::move(m));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::UndefinedName);
  CHECK(r.status().first().location.toString() == "<bytecode>:k:1 (Add)");
  CHECK(r.status().first().message.find("'x'") != std::string::npos);
}

TEST_CASE("bytecode: a variable used outside the scope of its definition") {
  Module m = assembled("def k<1>() threads=32:\n"
                       "    for i in range(2):\n"
                       "        y = AllocateRegister(f32, layout=spatial(32))\n"
                       "    z = AllocateRegister(f32, layout=spatial(32))\n"
                       "    w = Add(z, 1.0)\n");
  Program &p = m.programs[0];
  for (Instruction &inst : p.instructions)
    if (inst.opcode == Opcode::Add)
      inst.arg(ArgName::a).var = varNamed(p, "y");
  CHECK_ERROR(checkModule(std::move(m)), ErrorCode::UndefinedName);
}

TEST_CASE("bytecode: break and continue outside loops") {
  Module m = withoutLocs(assembled(kSimple));
  Stmt brk;
  brk.kind = StmtKind::Break;
  m.programs[0].body.push_back(brk);
  Stmt cont;
  cont.kind = StmtKind::Continue;
  m.programs[0].body.push_back(cont);
  Expected<VerifiedModule> r = checkModule(std::move(m));
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.status().diagnostics().size() == 2);
  CHECK(r.status().diagnostics()[0].code == ErrorCode::BreakOutsideLoop);
  CHECK(r.status().diagnostics()[1].code == ErrorCode::BreakOutsideLoop);
  CHECK(r.status().first().location.toString() == "<bytecode>:k");
}

TEST_CASE("bytecode: loop variables are read-only") {
  Module m = assembled("def k<1>() threads=32:\n"
                       "    for i in range(4):\n"
                       "        j = i + 1\n");
  Program &p = m.programs[0];
  REQUIRE(p.body[0].kind == StmtKind::For);
  REQUIRE(p.body[0].body[0].kind == StmtKind::Assign);
  p.body[0].body[0].var = p.body[0].var;
  CHECK_ERROR(checkModule(std::move(m)), ErrorCode::UpdateType);
}

TEST_CASE("bytecode: a for loop's unroll hint above 8 (a module built in memory)") {
  Module m = assembled("def k<1>() threads=32:\n"
                       "    for i in range(4, unroll=8):\n"
                       "        j = i + 1\n");
  REQUIRE(m.programs[0].body[0].unroll == 8);
  CHECK_OK(checkModule(Module(m)));
  m.programs[0].body[0].unroll = 9;
  Expected<VerifiedModule> r = checkModule(std::move(m));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().first().code == ErrorCode::BadArgument);
  CHECK(r.status().first().message == "unroll=9 is not in [1, 8]");
}

TEST_CASE("bytecode: expressions are trees in post-order") {
  Module m = assembled("def k<1>(i32 n) threads=32:\n"
                       "    a = n + 1\n"
                       "    b = n * 2\n");
  Module shared = m;
  Program &p = shared.programs[0];
  p.body[1].expr = p.body[0].expr; // one node used by two statements
  CHECK_ERROR(checkModule(std::move(shared)), ErrorCode::Bytecode);
  // A node used twice as an operand.
  Program &q = m.programs[0];
  ExprNode &add = q.exprs[q.body[0].expr];
  REQUIRE(exprOpArity(add.op) == 2);
  add.operands[1] = add.operands[0];
  CHECK_ERROR(checkModule(std::move(m)), ErrorCode::Bytecode);
  // Forward reference.
  Module fwd = assembled("def k<1>(i32 n) threads=32:\n    a = n + 1\n");
  Program &f = fwd.programs[0];
  ExprNode &node = f.exprs[f.body[0].expr];
  node.operands[0] = f.body[0].expr;
  CHECK_ERROR(checkModule(std::move(fwd)), ErrorCode::Bytecode);
}

TEST_CASE("bytecode: expression typing and references") {
  Module m = assembled("def k<1>(f32* p, i32 n) threads=32:\n    a = n + 1\n");
  Program &prog = m.programs[0];
  // A Var node naming the pointer parameter.
  Module ptr = m;
  for (ExprNode &e : ptr.programs[0].exprs)
    if (e.op == ExprOp::Var)
      e.var = varNamed(ptr.programs[0], "p");
  CHECK_ERROR(checkModule(std::move(ptr)), ErrorCode::Scope);
  // An Add typed f32 over i32 operands.
  Module typed = m;
  typed.programs[0].exprs[typed.programs[0].body[0].expr].dtype = DataType::f32();
  CHECK_ERROR(checkModule(std::move(typed)), ErrorCode::DtypeMismatch);
  (void)prog;
}

TEST_CASE("bytecode: arguments and results") {
  // A missing required argument.
  Module missing = assembled(kSimple);
  missing.programs[0].instructions[0].arg(ArgName::layout).present = false;
  CHECK_ERROR(checkModule(std::move(missing)), ErrorCode::BadArgument);
  // out= on an instruction that does not allow it.
  Module out = assembled(kSimple);
  out.programs[0].instructions[0].out = true;
  CHECK_ERROR(checkModule(std::move(out)), ErrorCode::BadArgument);
  // A result of the wrong kind.
  Module kind = assembled(kSimple);
  kind.programs[0].vars[kind.programs[0].instructions[1].results[0]].kind = VarKind::Shared;
  CHECK_ERROR(checkModule(std::move(kind)), ErrorCode::Bytecode);
  // One result more than the table allows (Add gives exactly one).
  Module extra = assembled(kSimple);
  Program &ep = extra.programs[0];
  Variable second = ep.vars[ep.instructions[1].results[0]];
  second.name = "second";
  ep.vars.push_back(second);
  ep.instructions[1].results.push_back(VarId(ep.vars.size() - 1));
  Expected<VerifiedModule> twoResults = checkModule(std::move(extra));
  CHECK_ERROR(twoResults, ErrorCode::BadArgument);
  CHECK(twoResults.status().toString().find("Add gives 1 results, not 2") != std::string::npos);
  // An instruction that no statement reaches.
  Module orphan = assembled(kSimple);
  orphan.programs[0].instructions.push_back(orphan.programs[0].instructions[2]);
  CHECK_ERROR(checkModule(std::move(orphan)), ErrorCode::Bytecode);
  // A statement naming an instruction that does not exist.
  Module range = assembled(kSimple);
  range.programs[0].body[2].index = 99;
  CHECK_ERROR(checkModule(std::move(range)), ErrorCode::Bytecode);
  // Wrong number of argument slots.
  Module slots = assembled(kSimple);
  slots.programs[0].instructions[1].args.pop_back();
  CHECK_ERROR(checkModule(std::move(slots)), ErrorCode::Bytecode);
  // A tensor argument naming a scalar variable directly.
  Module scalar = assembled("def k<1>(i32 n) threads=32:\n"
                            "    x = AllocateRegister(f32, layout=spatial(32))\n"
                            "    y = Add(x, 1.0)\n");
  scalar.programs[0].instructions[1].arg(ArgName::a).var = varNamed(scalar.programs[0], "n");
  CHECK_ERROR(checkModule(std::move(scalar)), ErrorCode::Bytecode);
}

TEST_CASE("bytecode: grid expressions and duplicate programs") {
  Module grid = assembled("def k<n>(i32 n) threads=32:\n    bi = BlockIndices()\n");
  Program &g = grid.programs[0];
  g.exprs[g.grid[0]].var = varNamed(g, "bi");
  CHECK_ERROR(checkModule(std::move(grid)), ErrorCode::GridExpr);
  Module twice = assembled(kSimple);
  twice.programs.push_back(twice.programs[0]);
  CHECK_ERROR(checkModule(std::move(twice)), ErrorCode::Redefined);
}

TEST_CASE("loadModule: bytecode round trip, checker diagnostics at <bytecode>") {
  Module ok = assembled(kSimple);
  std::vector<uint8_t> bytes = encodeModule(ok);
  Expected<VerifiedModule> loaded = loadModule(bytes);
  REQUIRE_OK(loaded);
  CHECK(loaded->programs[0].threads == 32);
  CHECK(*loaded->programs[0].vars[varNamed(loaded->module.programs[0], "z")].layout ==
        layoutOf("spatial(32)"));
  Module bad = assembled("def k<1>() threads=32:\n"
                         "    x = AllocateRegister(f32, layout=spatial(32))\n"
                         "    y = AllocateRegister(f16, layout=spatial(32))\n"
                         "    z = Add(x, y)\n");
  Expected<VerifiedModule> r = loadModule(encodeModule(bad));
  REQUIRE_FALSE(r.ok());
  CHECK(r.status().code() == ErrorCode::DtypeMismatch);
  CHECK(r.status().first().location.toString() == "<bytecode>:k:2 (Add)");
  // With debug info the diagnostic points at the source.
  AssembleOptions ao;
  ao.fileName = "bad.tasm";
  ao.keepSource = true;
  Expected<Module> src = assemble("def k<1>() threads=32:\n"
                                  "    x = AllocateRegister(f32, layout=spatial(32))\n"
                                  "    y = AllocateRegister(f16, layout=spatial(32))\n"
                                  "    z = Add(x, y)\n",
                                  ao);
  REQUIRE_OK(src);
  EncodeOptions eo;
  eo.debugInfo = true;
  Expected<VerifiedModule> dbg = loadModule(encodeModule(*src, eo));
  REQUIRE_FALSE(dbg.ok());
  CHECK(dbg.status().first().location.toString().rfind("bad.tasm:4:", 0) == 0);
  // Corrupt bytes are a decode error, not a crash.
  bytes[bytes.size() / 2] ^= 0x5a;
  CHECK_FALSE(loadModule(bytes).ok());
  CHECK_ERROR(loadModuleFile("/nonexistent/file.tbc"), ErrorCode::Io);
}
