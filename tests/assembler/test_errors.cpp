// Diagnostics: at least one case per error code the assembler emits, with the exact
// FILE:LINE:COL and message, and several errors reported by one run.
#include "asm_test_util.h"

namespace {

using namespace tilus;
using namespace tilus::testing;

/// The full first diagnostic line for `text` (which must fail).
std::string diag(const std::string &text) {
  auto m = asmText(text);
  REQUIRE_FALSE(m.ok());
  return m.status().first().toString();
}

const char *kPre = "def k<1>(f32* x, i32 n) threads=32:\n"
                   "    g = ViewGlobal(x, shape=[32])\n"
                   "    r = LoadGlobal(g, layout=spatial(32))\n";

/// The diagnostic of one statement appended after kPre (the statement is line 4).
std::string stmt(const std::string &line) { return diag(std::string(kPre) + "    " + line + "\n"); }

TEST_CASE("syntax") {
  CHECK(diag("def k<1>():\n\tpass\n") ==
        "t.tasm:2:1: error[syntax]: tab in indentation (indent with spaces)");
  CHECK(diag("def k<1>(f17 a):\n    pass\n") ==
        "t.tasm:1:10: error[syntax]: unknown data type 'f17'");
  CHECK(stmt("y: f99 = 1") == "t.tasm:4:8: error[syntax]: unknown data type 'f99'");
  CHECK(stmt("a, b = n + 1") ==
        "t.tasm:4:8: error[syntax]: assigning 2 targets needs an instruction that returns several "
        "values");
  CHECK(stmt("y: i32 = Exp(r)") ==
        "t.tasm:4:8: error[syntax]: a type annotation applies only to scalar assignments");
  CHECK(stmt("y = 1e39") ==
        "t.tasm:4:9: error[syntax]: float literal 1e39 overflows f32 (write f64(1e39) for an f64 "
        "constant)");
}

TEST_CASE("undefined-name") {
  CHECK(stmt("y = Exp(q)") == "t.tasm:4:13: error[undefined-name]: undefined name 'q'");
  CHECK(stmt("Add(r, 1, out=q)") == "t.tasm:4:19: error[undefined-name]: undefined name 'q'");
  CHECK(diag("def k<M>():\n    pass\n") == "t.tasm:1:7: error[undefined-name]: undefined name 'M'");
  CHECK(diag("const A = B\n") == "t.tasm:1:11: error[undefined-name]: undefined name 'B'");
}

TEST_CASE("redefined") {
  CHECK(diag("const A = 1\nconst A = 2\n") ==
        "t.tasm:2:7: error[redefined]: constant 'A' is already declared at line 1");
  CHECK(diag("const A, A = 1, 2\n") ==
        "t.tasm:1:10: error[redefined]: constant 'A' is already declared at line 1");
  CHECK(diag("def k<1>(i32 a, f16* a):\n    pass\n") ==
        "t.tasm:1:22: error[redefined]: parameter 'a' is declared twice (first at column 14)");
  CHECK(diag("const a = 1\ndef k<1>(i32 a):\n    pass\n") ==
        "t.tasm:2:14: error[redefined]: parameter 'a' redefines the constant declared at line 1");
  CHECK(diag("def k<1>():\n    pass\ndef k<2>():\n    pass\n") ==
        "t.tasm:3:5: error[redefined]: program 'k' is already declared at line 1");
  CHECK(diag("const C = 1\ndef k<1>():\n    C = 2\n") ==
        "t.tasm:3:5: error[redefined]: cannot assign to constant 'C' (declared at line 1)");
}

TEST_CASE("unknown-instruction") {
  CHECK(stmt("y = Frobnicate(r)") ==
        "t.tasm:4:9: error[unknown-instruction]: no instruction or builtin function named "
        "'Frobnicate'");
  CHECK(stmt("Frobnicate(r)") ==
        "t.tasm:4:5: error[unknown-instruction]: unknown instruction 'Frobnicate'");
  CHECK(stmt("min(n, 2)") ==
        "t.tasm:4:5: error[unknown-instruction]: 'min' is a scalar function, not an "
        "instruction; its value must be assigned");
  CHECK(stmt("y = n + exp(n)") ==
        "t.tasm:4:13: error[unknown-instruction]: no instruction or builtin function named "
        "'exp'");
}

TEST_CASE("bad-argument: matching arguments to the table") {
  CHECK(stmt("y = Add(r)") ==
        "t.tasm:4:9: error[bad-argument]: 'Add' is missing required argument 'b'");
  CHECK(stmt("y = Add(r, r, spatial(32), 4)") ==
        "t.tasm:4:32: error[bad-argument]: 'Add' takes at most 3 arguments, got 4");
  CHECK(stmt("y = Add(r, r, c=1)") ==
        "t.tasm:4:19: error[bad-argument]: 'Add' has no argument 'c'");
  CHECK(stmt("y = Add(r, r, b=1)") ==
        "t.tasm:4:19: error[bad-argument]: argument 'b' of 'Add' is given twice");
  CHECK(stmt("y = View(r, out=r)") ==
        "t.tasm:4:17: error[bad-argument]: 'View' does not accept out=");
  CHECK(stmt("Add(r, r, out=r, out=r)") == "t.tasm:4:22: error[bad-argument]: out= is given twice");
}

TEST_CASE("bad-argument: wrong kind of argument") {
  CHECK(stmt("y = Cast(r, 3)") ==
        "t.tasm:4:17: error[bad-argument]: argument 'dtype' of 'Cast' must be a data type");
  CHECK(stmt("y = Reduce(r, dim=n, op=sum)") ==
        "t.tasm:4:23: error[bad-argument]: argument 'dim' of 'Reduce' must be an integer constant");
  CHECK(stmt("y = Reduce(r, dim=1.0, op=sum)") ==
        "t.tasm:4:23: error[bad-argument]: argument 'dim' of 'Reduce' must be an integer constant");
  CHECK(stmt("y = Reduce(r, dim=0, op=mean)") ==
        "t.tasm:4:29: error[bad-argument]: argument 'op' of 'Reduce' must be one of sum, max, "
        "min, prod, any, all");
  CHECK(stmt("y = Reduce(r, dim=0, op=sum, keepdim=1)") ==
        "t.tasm:4:42: error[bad-argument]: argument 'keepdim' of 'Reduce' must be True or False");
  CHECK(stmt("Print(r, msg=n)") ==
        "t.tasm:4:18: error[bad-argument]: argument 'msg' of 'Print' must be a string literal");
  CHECK(stmt("y = AllocateRegister(f32, layout=spatial(32), init=r)") ==
        "t.tasm:4:56: error[bad-argument]: argument 'init' of 'AllocateRegister' must be a "
        "scalar expression, got register tensor 'r'");
  CHECK(stmt("s = AllocateShared(f32, shape=4)") ==
        "t.tasm:4:35: error[bad-argument]: argument 'shape' of 'AllocateShared' must be a list "
        "[...]");
  CHECK(stmt("s = AllocateShared(f32, shape=[n])") ==
        "t.tasm:4:36: error[bad-argument]: an entry of argument 'shape' of 'AllocateShared' "
        "must be an integer constant");
  CHECK(stmt("h = ViewGlobal(x, shape=[n:])") ==
        "t.tasm:4:30: error[bad-argument]: argument 'shape' of 'ViewGlobal' cannot hold a slice "
        "'e:' (only offsets can)");
  CHECK(stmt("y = AllocateRegister(f32, layout=4)") ==
        "t.tasm:4:38: error[bad-argument]: expected a register layout (expected local, "
        "column_local, spatial, column_spatial or replicate)");
  CHECK(stmt("y = Add(r, [1])") ==
        "t.tasm:4:16: error[bad-argument]: a list is not a scalar expression");
  CHECK(stmt("y = Add(r, \"s\")") ==
        "t.tasm:4:16: error[bad-argument]: a string is not a scalar expression");
  CHECK(stmt("y = n + Exp(r)") ==
        "t.tasm:4:13: error[bad-argument]: instruction 'Exp' cannot be used inside a scalar "
        "expression");
  CHECK(stmt("y = min(n)") == "t.tasm:4:9: error[bad-argument]: min() takes 2 arguments, got 1");
  CHECK(stmt("y = i64(n, n)") == "t.tasm:4:9: error[bad-argument]: i64() takes 1 argument, got 2");
}

TEST_CASE("bad-argument: results and out=") {
  CHECK(stmt("a, b = Exp(r)") ==
        "t.tasm:4:5: error[bad-argument]: 'Exp' returns 1 value, got 2 targets");
  CHECK(stmt("a, b, c, d = BlockIndices()") ==
        "t.tasm:4:5: error[bad-argument]: 'BlockIndices' returns 1 to 3 values, got 4 targets");
  CHECK(stmt("a = Synchronize()") ==
        "t.tasm:4:5: error[bad-argument]: 'Synchronize' returns no value");
  CHECK(
      stmt("Exp(r)") ==
      "t.tasm:4:5: error[bad-argument]: the result of 'Exp' is not used (assign it, or pass out=)");
  CHECK(stmt("y = Exp(StoreGlobal(r, g))") ==
        "t.tasm:4:13: error[bad-argument]: 'StoreGlobal' returns no value and cannot be used as "
        "an argument");
  CHECK(stmt("y = Add(r, r, out=r)") ==
        "t.tasm:4:5: error[bad-argument]: out= cannot be combined with assignment targets");
  CHECK(stmt("Add(r, r, out=g)") ==
        "t.tasm:4:19: error[bad-argument]: out= must name a register tensor, 'g' is a global "
        "tensor");
  CHECK(stmt("Add(r, r, out=1)") ==
        "t.tasm:4:19: error[bad-argument]: out= must name an existing register tensor");
}

TEST_CASE("break-outside-loop") {
  CHECK(stmt("break") == "t.tasm:4:5: error[break-outside-loop]: 'break' outside a loop");
  CHECK(stmt("continue") == "t.tasm:4:5: error[break-outside-loop]: 'continue' outside a loop");
}

TEST_CASE("threads") {
  CHECK(diag("def k<1>() threads=48:\n    pass\n") ==
        "t.tasm:1:20: error[threads]: threads=48 is not a multiple of 32 in [32, 1024]");
  CHECK(diag("def k<1>() threads=2048:\n    pass\n") ==
        "t.tasm:1:20: error[threads]: threads=2048 is not a multiple of 32 in [32, 1024]");
  CHECK(diag("def k<1>() threads=0:\n    pass\n") ==
        "t.tasm:1:20: error[threads]: threads=0 is not a multiple of 32 in [32, 1024]");
  CHECK(diag("def k<1>(i32 n) threads=n:\n    pass\n") ==
        "t.tasm:1:25: error[threads]: threads must be an integer constant");
  // blocks_per_sm=: a constant in [0, 32], at most once
  CHECK(diag("def k<1>() threads=32 blocks_per_sm=33:\n    pass\n") ==
        "t.tasm:1:37: error[threads]: blocks_per_sm=33 is not in [0, 32] (0: no request)");
  CHECK(diag("def k<1>() blocks_per_sm=-1:\n    pass\n") ==
        "t.tasm:1:26: error[threads]: blocks_per_sm=-1 is not in [0, 32] (0: no request)");
  CHECK(diag("def k<1>(i32 n) blocks_per_sm=n:\n    pass\n") ==
        "t.tasm:1:31: error[threads]: blocks_per_sm must be an integer constant");
  CHECK(diag("def k<1>() blocks_per_sm=2 threads=32 blocks_per_sm=2:\n    pass\n") ==
        "t.tasm:1:39: error[syntax]: blocks_per_sm= is given twice");
  CHECK(diag("def k<1>() threads=32 threads=32:\n    pass\n") ==
        "t.tasm:1:23: error[syntax]: threads= is given twice");
}

TEST_CASE("grid-expr, scope and dtype-mismatch") {
  CHECK(diag("def k<cdiv(32, x)>(f32* x):\n    pass\n") ==
        "t.tasm:1:16: error[grid-expr]: grid dimension uses pointer parameter 'x' (only "
        "constants and scalar parameters are allowed)");
  CHECK(diag("def k<1.5>():\n    pass\n") ==
        "t.tasm:1:7: error[dtype-mismatch]: grid dimension must be an integer, got f32");
  CHECK(stmt("y = r + 1") ==
        "t.tasm:4:9: error[scope]: register tensor 'r' cannot be used in a scalar expression");
  CHECK(stmt("y = x * 2") ==
        "t.tasm:4:9: error[scope]: pointer 'x' cannot be used in a scalar expression");
  CHECK(stmt("if 1.5:\n        pass") ==
        "t.tasm:4:8: error[dtype-mismatch]: condition of 'if' must be bool or an integer, got f32");
  CHECK(stmt("while n * 0.5:\n        pass") ==
        "t.tasm:4:13: error[dtype-mismatch]: condition of 'while' must be bool or an integer, got "
        "f32");
  CHECK(stmt("y = 1.0 << 2") ==
        "t.tasm:4:13: error[dtype-mismatch]: '<<' needs integer operands, got f32 and i32");
}

TEST_CASE("update-type and layout-invalid") {
  CHECK(stmt("for i in range(2):\n        r = 1") ==
        "t.tasm:5:9: error[update-type]: update of 'r' (a register tensor declared at line 3) "
        "with a scalar");
  auto m = asmText(std::string(kPre) + "    y = LoadGlobal(g, layout=spatial(32).local(0))\n");
  CHECK_ERROR(m, ErrorCode::LayoutInvalid);
  CHECK(firstWhere(m.status()) == "t.tasm:4:42");
}

TEST_CASE("one run reports errors of several statements and programs") {
  auto m = asmText(R"(def a<1>():
    x = q
    y = 1
    z = y + w
def b<1>():
    break
)");
  REQUIRE_FALSE(m.ok());
  const auto &d = m.status().diagnostics();
  REQUIRE(d.size() == 3);
  CHECK(d[0].toString() == "t.tasm:2:9: error[undefined-name]: undefined name 'q'");
  CHECK(d[1].toString() == "t.tasm:4:13: error[undefined-name]: undefined name 'w'");
  CHECK(d[2].toString() == "t.tasm:6:5: error[break-outside-loop]: 'break' outside a loop");
  // A failed statement still declares its targets: no cascade of undefined names.
  auto c =
      asmText("def a<1>(f32* p) threads=32:\n    t = Exp(Frob(p))\n    u = Exp(t)\n    v = x2\n");
  REQUIRE_FALSE(c.ok());
  REQUIRE(c.status().diagnostics().size() == 2);
  CHECK(c.status().diagnostics()[0].code == ErrorCode::UnknownInstruction);
  CHECK(c.status().diagnostics()[1].message == "undefined name 'x2'");
}

} // namespace

TEST_CASE("thread groups: the parallel statement's syntax and constants") {
  // only group clauses, each with an integer constant count and regs= and copies= as options
  CHECK(diag("def k<1>() threads=64:\n    parallel:\n        pass\n") ==
        "t.tasm:3:9: error[syntax]: expected 'group(THREADS[, regs=R][, copies=C]):' in a "
        "parallel statement, found 'pass'");
  CHECK(diag("def k<1>() threads=64:\n    parallel:\n        group(64, warps=2):\n"
             "            pass\n") ==
        "t.tasm:3:19: error[syntax]: expected 'regs=' or 'copies=' in group(...), found 'warps'");
  CHECK(diag("def k<1>() threads=64:\n    parallel:\n        group(32, copies=2, copies=2):\n"
             "            pass\n") ==
        "t.tasm:3:29: error[syntax]: 'copies=' given twice in group(...)");
  CHECK(diag("def k<1>() threads=64:\n    parallel:\n        group(32, copies=2) as 3:\n"
             "            pass\n")
            .find("error[syntax]") != std::string::npos);
  CHECK(diag("def k<1>() threads=64:\n    parallel:\n        group(32, copies=0):\n"
             "            pass\n") ==
        "t.tasm:3:26: error[thread-group]: copies=0 is not in [1, 15]");
  CHECK(diag("const W = 1\ndef k<1>() threads=64:\n    parallel:\n        group(32, copies=2) as "
             "W:\n            pass\n")
            .find("error[redefined]") != std::string::npos);
  CHECK(diag("def k<1>(i32 n) threads=64:\n    parallel:\n        group(n):\n"
             "            pass\n")
            .find("error[thread-group]") != std::string::npos);
  // `group` and `parallel` stay usable as names outside the statement
  CHECK_OK(asmText("def k<1>() threads=32:\n    group = 1\n    parallel = group + 1\n"));
}
