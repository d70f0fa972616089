// Macros (docs/isa.md, "Macros"): a program calling macros assembles to exactly the bytes of the
// same program with each call written out by hand as the block the documentation defines (the
// body inside `if True:`, each parameter replaced by its argument's value); errors carry the code
// and the line the documentation gives; programs with expansions round-trip through the
// disassembler to identical bytes.
#include "asm_test_util.h"

#include "isa/bytecode.h"

namespace {

using namespace tilus;
using namespace tilus::testing;

std::vector<uint8_t> bytesOf(const std::string &text,
                             std::map<std::string, std::string> defines = {}) {
  auto m = asmText(text, std::move(defines));
  REQUIRE_OK(m);
  return encodeModule(*m);
}

/// The diagnostics of text that must fail, as "LINE code" each.
std::vector<std::string> errorsOf(const std::string &text) {
  auto m = asmText(text);
  REQUIRE(!m.ok());
  std::vector<std::string> out;
  for (const Diagnostic &d : m.status().diagnostics())
    out.push_back(std::to_string(d.location.line) + " " + errorCodeName(d.code));
  return out;
}

std::string messageOf(const std::string &text) {
  auto m = asmText(text);
  REQUIRE(!m.ok());
  return m.status().first().message;
}

/// The pieces one after another (built by appending: `std::string&& + "..."` trips a false
/// -Wrestrict warning of GCC 12, GCC bug 105329).
std::string cat(std::initializer_list<std::string_view> pieces) {
  std::string out;
  for (std::string_view p : pieces)
    out.append(p);
  return out;
}

// Type, float, int and bool parameters; a parameter in a layout, a shape and a constant `if`; a
// nested macro whose parameter hides the outer one's of the same name; an update of the
// caller's variable (acc) and a name first assigned in the body (x, y), assigned again by the
// next expansion.
const char *kWithMacros = R"(const N = 64

macro scale_into(T, S, NEG):
    x = LoadGlobal(ga, layout=spatial(32).local(N / 32), offset=[0:])
    y = Mul(Cast(Cast(x, T), f32), S)
    if NEG:
        y = Neg(y)
    acc = Add(acc, y)

macro rows(R, T):
    t = AllocateRegister(T, layout=spatial(32).local(R), init=1)
    scale_into(T, 0.25 * R, R > 1)

macro both(T):
    scale_into(T, 2.0, False)
    rows(2, T)

def k<1>(f32* a_ptr, f32* c_ptr) threads=32:
    ga = ViewGlobal(a_ptr, shape=[N])
    acc = AllocateRegister(f32, layout=spatial(32).local(N / 32), init=0.0)
    both(f16)
    both(bf16)
    StoreGlobal(acc, ViewGlobal(c_ptr, shape=[N]), offset=[0:])
)";

// The same program with every call written out: each expansion is a block of its own. The
// expansion of `both(T)`, by hand, with $T for the type:
const char *kBothWrittenOut = R"(    if True:
        if True:
            x = LoadGlobal(ga, layout=spatial(32).local(N / 32), offset=[0:])
            y = Mul(Cast(Cast(x, $T), f32), 2.0)
            if False:
                y = Neg(y)
            acc = Add(acc, y)
        if True:
            t = AllocateRegister($T, layout=spatial(32).local(2), init=1)
            if True:
                x = LoadGlobal(ga, layout=spatial(32).local(N / 32), offset=[0:])
                y = Mul(Cast(Cast(x, $T), f32), 0.5)
                if True:
                    y = Neg(y)
                acc = Add(acc, y)
)";

std::string writtenOut() {
  auto both = [](const std::string &type) {
    std::string block = kBothWrittenOut;
    for (size_t at = block.find("$T"); at != std::string::npos; at = block.find("$T", at))
      block.replace(at, 2, type);
    return block;
  };
  return cat({"const N = 64\n\n"
              "def k<1>(f32* a_ptr, f32* c_ptr) threads=32:\n"
              "    ga = ViewGlobal(a_ptr, shape=[N])\n"
              "    acc = AllocateRegister(f32, layout=spatial(32).local(N / 32), init=0.0)\n",
              both("f16"), both("bf16"),
              "    StoreGlobal(acc, ViewGlobal(c_ptr, shape=[N]), offset=[0:])\n"});
}

TEST_CASE("macro calls assemble to the bytes of the calls written out as blocks") {
  const std::string written = writtenOut();
  CHECK(bytesOf(kWithMacros) == bytesOf(written));
  // a written-out block that differs (one factor) gives other bytes: the comparison can fail
  std::string other = written;
  other.replace(other.find("0.5"), 3, "0.4");
  CHECK(bytesOf(kWithMacros) != bytesOf(other));
  // -D reaches the body through the constants it uses
  CHECK(bytesOf(kWithMacros, {{"N", "128"}}) == bytesOf(written, {{"N", "128"}}));
}

TEST_CASE("a macro's own names end with its expansion; the caller's names are updated") {
  // y is first assigned in the body: not defined after the call
  std::string text = R"(macro m(V):
    y = V
    z = z + V
def k<1>(i32* p) threads=32:
    z = 0
    m(1)
    m(2)
    w = z + y
)";
  CHECK(errorsOf(text) == std::vector<std::string>{"8 undefined-name"});
  // z, the caller's, was updated by both expansions (the same variable throughout)
  text.replace(text.find("w = z + y"), 9, "w = z");
  Program p = asmProgram(text);
  CHECK(varsNamed(p, "z").size() == 1);
  CHECK(varsNamed(p, "y").size() == 2); // one per expansion
}

TEST_CASE("macro errors: codes and locations") {
  const std::string head = "const C = 4\n"; // line 1
  // not a constant (a scalar parameter), at the argument
  CHECK(errorsOf(head + "macro m(V):\n    x = V\ndef k<1>(i32 n) threads=32:\n    m(n)\n") ==
        std::vector<std::string>{"5 macro"});
  // arity, keyword argument, used as a value
  CHECK(errorsOf(head + "macro m(V):\n    x = V\ndef k<1>(i32 n) threads=32:\n    m(1, 2)\n") ==
        std::vector<std::string>{"5 macro"});
  CHECK(errorsOf(head + "macro m(V):\n    x = V\ndef k<1>(i32 n) threads=32:\n    m(V=1)\n") ==
        std::vector<std::string>{"5 macro"});
  CHECK(errorsOf(head + "macro m(V):\n    x = V\ndef k<1>(i32 n) threads=32:\n    y = m(1)\n") ==
        std::vector<std::string>{"5 macro"});
  // direct recursion: at the call inside the body
  CHECK(errorsOf(head + "macro m(V):\n    m(V)\ndef k<1>(i32 n) threads=32:\n    m(1)\n") ==
        std::vector<std::string>{"3 macro"});
  CHECK(messageOf(head + "macro m(V):\n    m(V)\ndef k<1>(i32 n) threads=32:\n    m(1)\n") ==
        "macro 'm' expands itself (m -> m) (in macro 'm' expanded at line 5)");
  // a chain of 17 distinct macros, each calling the next: deeper than 16 expansions
  std::string chain = head;
  for (int k = 0; k < 17; ++k)
    chain += cat({"macro m", std::to_string(k), "():\n    ",
                  k < 16 ? cat({"m", std::to_string(k + 1), "()"}) : std::string("x = 1"), "\n"});
  CHECK(errorsOf(chain + "def k<1>(i32 n) threads=32:\n    m0()\n") ==
        std::vector<std::string>{"33 macro"}); // the call of m16 in m15
  // 16 deep is fine
  CHECK(asmText(chain + "def k<1>(i32 n) threads=32:\n    m1()\n").ok());
  // a parameter named like a module constant (at the parameter), like a variable visible at
  // the call (at the call)
  CHECK(errorsOf(head + "macro m(C):\n    x = C\ndef k<1>(i32 n) threads=32:\n    m(1)\n") ==
        std::vector<std::string>{"2 macro"});
  CHECK(errorsOf(head + "macro m(n):\n    x = n\ndef k<1>(i32 n) threads=32:\n    m(1)\n") ==
        std::vector<std::string>{"5 macro"});
  // specialize belongs to the program body's prefix
  CHECK(
      errorsOf(head +
               "macro m(V):\n    specialize s = V > 1\ndef k<1>(i32 n) threads=32:\n    m(1)\n") ==
      std::vector<std::string>{"3 macro"});
  // definitions: twice, like an instruction, a scalar function or a data type; parameters twice
  // or named like a data type
  CHECK(errorsOf(head + "macro m(V):\n    pass\nmacro m(W):\n    pass\n") ==
        std::vector<std::string>{"4 redefined"});
  for (const char *name : {"Synchronize", "cdiv", "bits", "f16"})
    CHECK(errorsOf(cat({head, "macro ", name, "(V):\n    pass\n"})) ==
          std::vector<std::string>{"2 redefined"});
  CHECK(errorsOf(head + "macro m(V, W, V):\n    pass\n") ==
        std::vector<std::string>{"2 redefined"});
  CHECK(errorsOf(head + "macro m(u4):\n    pass\n") == std::vector<std::string>{"2 redefined"});
  // an error in the body is reported at the body's line, once per expansion, naming it
  std::string twice = head + "macro m(V):\n    x = undefined_thing + V\n"
                             "def k<1>(i32 n) threads=32:\n    m(1)\n    m(2)\n";
  CHECK(errorsOf(twice) == std::vector<std::string>{"3 undefined-name", "3 undefined-name"});
  auto m = asmText(twice);
  REQUIRE(!m.ok());
  CHECK(m.status().diagnostics()[0].message.find("expanded at line 5") != std::string::npos);
  CHECK(m.status().diagnostics()[1].message.find("expanded at line 6") != std::string::npos);
  // a macro nobody calls is only parsed; `macro` is an ordinary name inside a program
  CHECK(asmText(head + "macro m(V):\n    x = undefined_thing\n"
                       "def k<1>(i32 n) threads=32:\n    macro = n\n")
            .ok());
}

TEST_CASE("programs with macro expansions round-trip through the disassembler") {
  checkRoundTrip(kWithMacros);
  // a name of the expansion declared again by a later nested body (a new variable there): the
  // disassembly keeps the expansion's variable in a block of its own
  checkRoundTrip(R"(macro m():
    t = 1
    u = t + 1
def k<1>(i32* a_ptr, i32 n) threads=32:
    m()
    if n > 0:
        t = 2.5
        u = t
)");
  // the same after a constant `if` (no macro): its block's names end with it
  checkRoundTrip(R"(const C = 1
def k<1>(i32* a_ptr, i32 n) threads=32:
    if C == 1:
        t = 1
    s = 3
    if C == 1:
        t = 1.5
        s = 4
    r = n
    while r > 0:
        t = r
        r = r - t
)");
}

} // namespace
