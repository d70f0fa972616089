// Type constants (`const WT = u4`, `-D WT=f6e3m2`) and the type builtins: a program written
// with a type constant assembles to exactly the bytes of the program with the type written
// literally, for every data type of ISA section 2; bits()/is_*() and type comparisons fold to the
// values worked out here from the type names; errors carry their codes and locations.
#include "asm_test_util.h"

#include "isa/bytecode.h"

#include <cstdio>

namespace {

using namespace tilus;
using namespace tilus::testing;

/// Every data type spelling of ISA section 2, written out.
std::vector<std::string> allTypeNames() {
  std::vector<std::string> names = {"bool", "f16", "bf16", "f32", "f64"};
  for (int b : {8, 16, 32, 64}) {
    names.push_back("i" + std::to_string(b));
    names.push_back("u" + std::to_string(b));
  }
  for (int b = 1; b <= 7; ++b) {
    names.push_back("u" + std::to_string(b));
    if (b >= 2)
      names.push_back("i" + std::to_string(b));
  }
  // fNeEmM: 3 <= N = 1 + E + M <= 8, E >= 1, M >= 1 (f8e4m3 and f8e5m2 among them).
  for (int n = 3; n <= 8; ++n)
    for (int e = 1; e <= n - 2; ++e) {
      // Formatted, not "f" + std::string&&: that trips a false -Wrestrict warning of GCC 12
      // (GCC bug 105329).
      char name[16];
      std::snprintf(name, sizeof name, "f%de%dm%d", n, e, n - 1 - e);
      names.push_back(name);
    }
  return names;
}

/// Storage bits of a type, from its name alone: 8 for bool, N for fNeEmM, the number after
/// the letter for iN/uN/fN, 16 for bf16.
int bitsOfName(const std::string &name) {
  if (name == "bool")
    return 8;
  if (name == "bf16")
    return 16;
  size_t end = 1;
  while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end])))
    ++end;
  return std::stoi(name.substr(1, end - 1));
}

bool isFloatName(const std::string &name) { return name[0] == 'f' || name == "bf16"; }
bool isIntName(const std::string &name) { return name[0] == 'i' || name[0] == 'u'; }

void replaceAll(std::string &text, const std::string &from, const std::string &to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

std::vector<uint8_t> bytesOf(const std::string &text,
                             std::map<std::string, std::string> defines = {}) {
  auto m = asmText(text, std::move(defines));
  REQUIRE_OK(m);
  return encodeModule(*m);
}

// Every place a data type is written: parameters (pointer and scalar), an annotation, a scalar
// cast, ViewGlobal, AllocateRegister, View, Cast, and a constant branch on the type. $T is the
// type, $B its bits, $F whether it is a float.
const char *kTemplate = R"(const WT = u4
const N = 64
def k<1>($T* w_ptr, f16* o_ptr, $T s, i32 n) threads=32:
    x: $T = 3
    y = $T(n)
    c = $B * N / 8 + n
    gw = ViewGlobal(w_ptr, dtype=$T, shape=[N])
    gu = ViewGlobal(w_ptr, dtype=u8, shape=[N * $B / 8])
    r = LoadGlobal(gw, layout=spatial(32).local(2))
    a = AllocateRegister($T, layout=spatial(32).local(2))
    v = View(r, dtype=$T, layout=spatial(32).local(2))
    h = Cast(r, f16)
    z = Cast(h, $T)
    if $F:
        q = 1
)";

std::string generic() {
  std::string text = kTemplate;
  replaceAll(text, "$T", "WT");
  replaceAll(text, "$B", "bits(WT)");
  replaceAll(text, "$F", "is_float(WT)");
  return text;
}

std::string literal(const std::string &type) {
  std::string text = kTemplate;
  replaceAll(text, "$T", type);
  replaceAll(text, "$B", std::to_string(bitsOfName(type)));
  replaceAll(text, "$F", isFloatName(type) ? "True" : "False");
  return text;
}

/// The first grid expression of the only program of `text`, which must fold to an integer.
int64_t gridValue(const std::string &text, std::map<std::string, std::string> defines = {}) {
  auto m = asmText(text, std::move(defines));
  REQUIRE_OK(m);
  const Program &p = m->programs.at(0);
  const ExprNode &e = p.exprs.at(p.grid.at(0));
  REQUIRE(e.op == ExprOp::Const);
  return int64_t(e.bits);
}

std::string diag(const std::string &text, std::map<std::string, std::string> defines = {}) {
  auto m = asmText(text, std::move(defines));
  REQUIRE_FALSE(m.ok());
  return m.status().first().toString();
}

TEST_CASE("a type constant gives the bytes of the type written literally, for every type") {
  std::vector<std::string> names = allTypeNames();
  CHECK(names.size() ==
        4 + 1 + 8 + 13 + 21); // bool f16 bf16 f32 f64, 8 ints, 13 sub-byte, 21 fNeEmM
  std::string text = generic();
  for (const std::string &t : names) {
    CAPTURE(t);
    REQUIRE(DataType::parse(t).has_value());
    CHECK(bytesOf(text, {{"WT", t}}) == bytesOf(literal(t)));
    // Declared rather than given with -D.
    std::string declared = text;
    replaceAll(declared, "const WT = u4", "const WT = " + t);
    CHECK(bytesOf(declared) == bytesOf(literal(t)));
  }
}

TEST_CASE("the paper's f16 x i6 program with WT = i6 is byte-identical to programs/") {
  std::string original = readSourceFile("programs/paper_matmul_f16_i6.tasm");
  std::string text = original;
  replaceAll(text, "const BM, BN, BK = 16, 8, 16", "const BM, BN, BK = 16, 8, 16\nconst WT = u4");
  replaceAll(text, "i6* b_ptr", "WT* b_ptr");
  replaceAll(text, "dtype=i6", "dtype=WT");
  replaceAll(text, "BK * BN * 6 / 8", "BK * BN * bits(WT) / 8");
  replaceAll(text, "local(3).spatial(32)", "local(BK * BN * bits(WT) / 8 / 32).spatial(32)");
  REQUIRE(text.find("i6") == text.find("i6[K, N] weights")); // only the comment keeps i6
  CHECK(bytesOf(text, {{"WT", "i6"}}) == bytesOf(original));
}

TEST_CASE("type builtins fold to the values of ISA section 2") {
  auto value = [](const std::string &expr, const std::string &type) {
    return gridValue("const WT = u4\ndef k<" + expr + ">() threads=32:\n    pass\n",
                     {{"WT", type}});
  };
  for (const std::string &t : allTypeNames()) {
    CAPTURE(t);
    CHECK(value("bits(WT)", t) == bitsOfName(t));
    CHECK(value("i32(is_float(WT))", t) == (isFloatName(t) ? 1 : 0));
    CHECK(value("i32(is_int(WT))", t) == (isIntName(t) ? 1 : 0));
    CHECK(value("i32(is_signed(WT))", t) == (t[0] == 'i' || isFloatName(t) ? 1 : 0));
    CHECK(value("i32(WT == " + t + ")", "u4") == (t == "u4" ? 1 : 0));
    CHECK(value("i32(WT != " + t + ")", "u4") == (t == "u4" ? 0 : 1));
  }
  CHECK(value("exponent_bits(WT) * 100 + mantissa_bits(WT)", "f6e3m2") == 302);
  CHECK(value("exponent_bits(WT) * 100 + mantissa_bits(WT)", "f8e4m3") == 403);
  CHECK(value("exponent_bits(WT) * 100 + mantissa_bits(WT)", "bf16") == 807);
  CHECK(value("exponent_bits(WT) * 100 + mantissa_bits(WT)", "i6") == 0);
  CHECK(value("8192 * bits(WT) / 8", "u3") == 3072);
  CHECK(value("bits(f16 if bits(WT) < 8 else f32)", "u4") == 16);
  CHECK(value("bits(f16 if bits(WT) < 8 else f32)", "u8") == 32);
}

TEST_CASE("type constants: choices, chains and constant branches") {
  const char *text = "const AT = f16\n"
                     "const ACC = f32 if AT == bf16 else AT\n"
                     "const W2 = ACC\n"
                     "def k<bits(W2)>() threads=32:\n"
                     "    pass\n";
  CHECK(gridValue(text) == 16);
  CHECK(gridValue(text, {{"AT", "bf16"}}) == 32);
  CHECK(gridValue(text, {{"AT", "f8e5m2"}}) == 8);
  // The same constant value in a scalar expression and in a type position.
  const char *branch = "const WT = u4\n"
                       "const SIGNED = is_signed(WT)\n"
                       "def k<(2 if SIGNED else 1)>() threads=32:\n"
                       "    pass\n";
  CHECK(gridValue(branch) == 1);
  CHECK(gridValue(branch, {{"WT", "i4"}}) == 2);
  CHECK(gridValue(branch, {{"WT", "f4e2m1"}}) == 2);
}

TEST_CASE("type constant errors") {
  const char *head = "const WT = u4\nconst N = 4\ndef k<1>(f32* x, i32 n) threads=32:\n";
  auto stmt = [&](const std::string &line, std::map<std::string, std::string> d = {}) {
    return diag(std::string(head) + "    " + line + "\n", std::move(d));
  };
  // A type where a number is needed.
  CHECK(stmt("y = WT + 1") == "t.tasm:4:9: error[dtype-mismatch]: 'WT' is a data type constant "
                              "(u4), not a value (bits(WT) is its width)");
  CHECK(stmt("y = n * u4") ==
        "t.tasm:4:13: error[dtype-mismatch]: data type u4 is not a value (bits(u4) is its width)");
  CHECK(stmt("y = WT == 3") ==
        "t.tasm:4:15: error[dtype-mismatch]: '==' compares a data type with a value");
  // A number where a type is needed.
  CHECK(stmt("g = ViewGlobal(x, dtype=N, shape=[8])") ==
        "t.tasm:4:29: error[dtype-mismatch]: 'N' is a number constant (i32), not a data type");
  CHECK(stmt("y: N = 1") ==
        "t.tasm:4:8: error[dtype-mismatch]: 'N' is a number constant (i32), not a "
        "data type");
  CHECK(diag("const N = 4\ndef k<1>(N* p) threads=32:\n    pass\n") ==
        "t.tasm:2:10: error[dtype-mismatch]: 'N' is a number constant (i32), not a data type");
  CHECK(stmt("y = bits(n)") == "t.tasm:4:14: error[dtype-mismatch]: 'n' is a variable, not a data "
                               "type");
  CHECK(stmt("y = bits(3)") == "t.tasm:4:14: error[dtype-mismatch]: bits() takes a data type");
  CHECK(stmt("y = bits(u4, u8)") == "t.tasm:4:9: error[bad-argument]: bits() takes one data type");
  CHECK(stmt("g = ViewGlobal(x, dtype=f16 if n > 0 else f32, shape=[8])") ==
        "t.tasm:4:38: error[bad-argument]: the condition of a choice between data types must be "
        "a bool or integer constant");
  CHECK(stmt("g = ViewGlobal(x, dtype=notatype, shape=[8])") ==
        "t.tasm:4:29: error[bad-argument]: argument 'dtype' of 'ViewGlobal' must be a data type");
  CHECK(diag("def k<1>(WT* p) threads=32:\n    pass\n") ==
        "t.tasm:1:10: error[syntax]: unknown data type 'WT'");
  // Redefinition: type constants are constants.
  CHECK(diag("const WT = u4\nconst WT = i4\n") ==
        "t.tasm:2:7: error[redefined]: constant 'WT' is already declared at line 1");
  CHECK(diag("const f16 = u4\n") == "t.tasm:1:7: error[redefined]: a data type constant cannot "
                                    "be named like the data type 'f16'");
  CHECK(stmt("WT = 3") ==
        "t.tasm:4:5: error[redefined]: cannot assign to constant 'WT' (declared at line 1)");
  // -D values.
  CHECK(stmt("pass", {{"WT", "notatype"}}) ==
        "-D WT:1:1: error[syntax]: 'notatype' is not a data type ('WT' is declared as a data "
        "type at line 1)");
  CHECK(stmt("pass", {{"WT", "3"}}) == "-D WT:1:1: error[syntax]: '3' is not a data type ('WT' "
                                       "is declared as a data type at line 1)");
  CHECK(stmt("pass", {{"N", "u4"}}) ==
        "-D N:1:1: error[dtype-mismatch]: 'N' is declared as a number at line 2, not as a data "
        "type");
  CHECK(gridValue("const WT = u4\ndef k<bits(WT)>() threads=32:\n    pass\n",
                  {{"WT", " f6e3m2 "}}) == 6);
}

} // namespace

namespace {

using namespace tilus;
using namespace tilus::testing;

const char *kBranches = R"(const WT = u4
def k<1>(f32* x, i32 n) threads=32:
    g = ViewGlobal(x, shape=[32])
    if is_signed(WT):
        r = LoadGlobal(g, layout=spatial(32))
        StoreGlobal(Neg(r), g)
    elif WT == u4:
        y = n + 4
    else:
        Frobnicate(q)
    z = n * bits(WT)
)";

TEST_CASE("an if over constants keeps only the taken branch") {
  // Each expectation is the program with only the taken branch written out.
  auto expect = [](const std::string &type, const std::string &taken, int bits) {
    std::string text = "const UNUSED = 0\n"
                       "def k<1>(f32* x, i32 n) threads=32:\n"
                       "    g = ViewGlobal(x, shape=[32])\n" +
                       taken + "    z = n * " + std::to_string(bits) + "\n";
    CAPTURE(type);
    CHECK(bytesOf(kBranches, {{"WT", type}}) == bytesOf(text));
  };
  expect("i4", "    r = LoadGlobal(g, layout=spatial(32))\n    StoreGlobal(Neg(r), g)\n", 4);
  expect("f6e3m2", "    r = LoadGlobal(g, layout=spatial(32))\n    StoreGlobal(Neg(r), g)\n", 6);
  expect("u4", "    y = n + 4\n", 4);
  // The branch not taken is parsed but not lowered: its errors appear only when it is taken.
  CHECK(diag(kBranches, {{"WT", "u2"}}) ==
        "t.tasm:10:9: error[unknown-instruction]: unknown instruction 'Frobnicate'");
  // The taken body keeps its scope.
  CHECK(diag("def k<1>(i32 n) threads=32:\n    if True:\n        y = n\n    z = y\n") ==
        "t.tasm:4:9: error[undefined-name]: undefined name 'y'");
  // A condition that is not constant stays an If with both branches.
  Program p = asmProgram("def k<1>(i32 n) threads=32:\n    if n > 0:\n        y = 1\n"
                         "    else:\n        y = 2\n");
  REQUIRE(p.body.size() == 1);
  CHECK(p.body[0].kind == StmtKind::If);
  CHECK(p.body[0].body.size() == 1);
  CHECK(p.body[0].orelse.size() == 1);
  // while is never resolved by the assembler.
  Program w = asmProgram("def k<1>() threads=32:\n    while True:\n        break\n");
  REQUIRE(w.body.size() == 1);
  CHECK(w.body[0].kind == StmtKind::While);
}

} // namespace
