// `assert` (docs/isa.md, "Preconditions"): asserts over constants decided by the assembler and
// leaving no trace in the bytecode, asserts over parameters kept as Assert statements, the
// disassembly round trip, and the errors with their positions.
#include "asm_test_util.h"

#include "isa/bytecode.h"

using namespace tilus;
using namespace tilus::testing;

namespace {

const char *kBody = "    g = ViewGlobal(p, shape=[n])\n"
                    "    StoreGlobal(AllocateRegister(f32, layout=spatial(32)), g)\n";

std::vector<uint8_t> bytesOf(const std::string &text) {
  auto m = asmText(text);
  REQUIRE_OK(m);
  return encodeModule(*m);
}

} // namespace

TEST_CASE("asserts over constants leave the bytecode as it was without them") {
  std::string plain = "const N = 64\ndef k<1>(f32* p, i32 n) threads=32:\n" + std::string(kBody);
  std::string asserted = "const N = 64\nassert N % 32 == 0, \"whole warps\"\n"
                         "def k<1>(f32* p, i32 n) threads=32:\n"
                         "    assert N > 0 and N <= 1024\n"
                         "    if N > 32:\n"
                         "        assert N % 64 == 0, \"checked only when N > 32\"\n" +
                         std::string(kBody) + "    assert True, \"anywhere\"\n";
  CHECK(bytesOf(asserted) == bytesOf(plain));
}

TEST_CASE("asserts over parameters are Assert statements that open the body") {
  auto m = asmText("def k<1>(f32* p, i32 n, i64 s) threads=32:\n"
                   "    assert n > 0, \"positive\"\n"
                   "    assert i64(n) <= s\n" +
                   std::string(kBody));
  REQUIRE_OK(m);
  const Program &p = m->programs[0];
  REQUIRE(p.preconditions().size() == 2);
  CHECK(p.body[0].kind == StmtKind::Assert);
  CHECK(p.body[0].text == "positive");
  CHECK(p.expr(p.body[0].expr).dtype == DataType::boolean());
  CHECK(p.body[1].text.empty());
  CHECK(p.body[2].kind == StmtKind::Instruction);
  // The disassembly assembles to the same bytes.
  std::string text = disassemble(*m);
  CHECK(text.find("    assert n > 0, \"positive\"\n") != std::string::npos);
  CHECK(bytesOf(text) == encodeModule(*m));
}

TEST_CASE("assert errors: false constants, misplaced or non-parameter conditions, types") {
  auto failsWith = [](const std::string &text, ErrorCode code, const std::string &where,
                      const std::string &message) {
    auto m = asmText(text);
    REQUIRE_FALSE(m.ok());
    CHECK(m.status().code() == code);
    CHECK(firstWhere(m.status()) == where);
    CHECK(m.status().first().message == message);
  };
  failsWith("const K = 100\nassert K % 64 == 0, \"K is whole tiles\"\n", ErrorCode::Assert,
            "t.tasm:2:1", "assertion failed: K is whole tiles");
  failsWith("def k<1>(i32 n) threads=32:\n    assert 1 > 2\n", ErrorCode::Assert, "t.tasm:2:5",
            "assertion failed");
  failsWith("def k<1>(i32 n) threads=32:\n    m = n\n    assert n > 0\n", ErrorCode::AssertExpr,
            "t.tasm:3:5",
            "an assert over parameters must come before every other statement of the program "
            "body (it is checked before the launch)");
  failsWith("def k<1>(i32 n) threads=32:\n    m = n\n    assert m > 0\n", ErrorCode::AssertExpr,
            "t.tasm:3:12",
            "assert condition uses 'm' (only constants and scalar parameters are allowed: an "
            "assert is checked before the launch)");
  failsWith("def k<1>(i32 n) threads=32:\n    assert n\n", ErrorCode::DtypeMismatch, "t.tasm:2:12",
            "assert condition must be bool (a comparison, `and`, `or`, `not`), got i32");
  failsWith("def k<1>(i32 n) threads=32:\n    assert n > 0, 5\n", ErrorCode::Syntax, "t.tasm:2:19",
            "the message of an assert must be a string literal");
  failsWith("const A = 3\nassert A\n", ErrorCode::DtypeMismatch, "t.tasm:2:8",
            "assert condition must be bool (a comparison, `and`, `or`, `not`), got i32");
}
