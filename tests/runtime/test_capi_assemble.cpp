// tilusvm_module_assemble: .tasm text with -D defines to a checked module through the C API.
// Defines are checked by running the assembled programs on the CPU and comparing with values
// computed here; every failure has its status code and a located message.
#include "vm/include/tilusvm.h"

#include "test_helpers.h"

#include <cstring>
#include <string>
#include <vector>

namespace {

// A type constant, a grid constant and a value constant, each overridable.
const char *kSource = R"(const T = f32
const BLOCK = 256
const VALUE = 3
def scaled_add<cdiv(n, BLOCK)>(T* x_ptr, T* z_ptr, i32 n) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    gz = ViewGlobal(z_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(128).local(BLOCK / 128), offset=[bi * BLOCK:])
    StoreGlobal(Add(x, x), gz, offset=[bi * BLOCK:])

def fill<1>(i8* out) threads=32:
    g = ViewGlobal(out, shape=[32])
    StoreGlobal(AllocateRegister(i8, layout=spatial(32), init=VALUE), g)
)";

int assembleText(const std::string &text, const char *file, std::vector<tilusvm_define> defines,
                 tilusvm_module *out) {
  return tilusvm_module_assemble(text.data(), text.size(), file, defines.data(), defines.size(),
                                 out);
}

std::string lastError() { return tilusvm_last_error(); }

} // namespace

TEST_CASE("assembling source with defines gives a module whose constants took the values") {
  tilusvm_module m = nullptr;
  REQUIRE(assembleText(kSource, "k.tasm", {{"VALUE", "-7"}, {"T", "f16"}}, &m) == TILUSVM_OK);
  INFO(lastError());
  size_t count = 0;
  REQUIRE(tilusvm_module_program_count(m, &count) == TILUSVM_OK);
  CHECK(count == 2);
  const char *name = nullptr, *dtype = nullptr;
  int isPointer = -1;
  REQUIRE(tilusvm_program_param(m, "scaled_add", 1, &name, &dtype, &isPointer) == TILUSVM_OK);
  CHECK(std::string(name) == "z_ptr");
  CHECK(std::string(dtype) == "f16"); // T = f16 replaced the declared f32
  CHECK(isPointer == 1);

  std::vector<int8_t> out(32, 0);
  tilusvm_arg fillArgs[1] = {{0, out.data(), 32}};
  REQUIRE(tilusvm_run_cpu(m, "fill", fillArgs, 1, 1) == TILUSVM_OK);
  for (int8_t v : out)
    CHECK(v == -7);

  // f16 2.5 is 0x4100; 2.5 + 2.5 = 5.0 is 0x4500. 300 elements: two blocks of 256.
  const int n = 300;
  std::vector<uint16_t> x(n, 0x4100), z(n, 0);
  tilusvm_arg args[3] = {{0, x.data(), n * 2}, {0, z.data(), n * 2}, {uint64_t(n), nullptr, 0}};
  REQUIRE(tilusvm_run_cpu(m, "scaled_add", args, 3, 1) == TILUSVM_OK);
  for (uint16_t v : z)
    CHECK(v == 0x4500);
  CHECK(tilusvm_module_destroy(m) == TILUSVM_OK);
}

TEST_CASE("assembling without defines keeps the declared values; the size bounds the text") {
  // Bytes after source_size are not part of the source (here: a line that does not parse).
  std::string text = std::string(kSource) + "this is not tasm\n";
  tilusvm_module m = nullptr;
  REQUIRE(tilusvm_module_assemble(text.data(), std::strlen(kSource), nullptr, nullptr, 0, &m) ==
          TILUSVM_OK);
  INFO(lastError());
  const char *dtype = nullptr;
  REQUIRE(tilusvm_program_param(m, "scaled_add", 0, nullptr, &dtype, nullptr) == TILUSVM_OK);
  CHECK(std::string(dtype) == "f32");
  std::vector<int8_t> out(32, 0);
  tilusvm_arg fillArgs[1] = {{0, out.data(), 32}};
  REQUIRE(tilusvm_run_cpu(m, "fill", fillArgs, 1, 1) == TILUSVM_OK);
  for (int8_t v : out)
    CHECK(v == 3);
  // BLOCK = 128 makes each block cover 128 elements: 3 blocks for 300 (the grid follows it).
  tilusvm_module m128 = nullptr;
  REQUIRE(assembleText(kSource, "k.tasm", {{"BLOCK", "128"}}, &m128) == TILUSVM_OK);
  const int n = 300;
  std::vector<float> x(n), z(n, 0.0f);
  for (int i = 0; i < n; ++i)
    x[size_t(i)] = float(i) - 100.0f;
  tilusvm_arg args[3] = {{0, x.data(), n * 4}, {0, z.data(), n * 4}, {uint64_t(n), nullptr, 0}};
  REQUIRE(tilusvm_run_cpu(m128, "scaled_add", args, 3, 1) == TILUSVM_OK);
  for (int i = 0; i < n; ++i)
    CHECK(z[size_t(i)] == 2.0f * (float(i) - 100.0f));
  tilusvm_module_destroy(m);
  tilusvm_module_destroy(m128);
}

TEST_CASE("source that does not assemble or check: TILUSVM_ERROR_CHECK with located messages") {
  tilusvm_module m = reinterpret_cast<tilusvm_module>(1);
  // A syntax error on line 2, column 17 (the second '(').
  CHECK(assembleText("def bad<1>() threads=32:\n    x = Foo((\n", "syn.tasm", {}, &m) ==
        TILUSVM_ERROR_CHECK);
  CHECK(m == nullptr);
  CHECK(lastError().rfind("syn.tasm:2:", 0) == 0);
  CHECK(lastError().find("error[") != std::string::npos);

  // Assembles, but the checker rejects it: an f16 tensor stored into an f32 view (line 4).
  const char *unchecked = "def bad<1>(f32* out) threads=32:\n"
                          "    g = ViewGlobal(out, shape=[32])\n"
                          "    r = AllocateRegister(f16, layout=spatial(32))\n"
                          "    StoreGlobal(r, g)\n";
  CHECK(assembleText(unchecked, "chk.tasm", {}, &m) == TILUSVM_ERROR_CHECK);
  CHECK(lastError().rfind("chk.tasm:4:", 0) == 0);
  CHECK(lastError().find("error[dtype-mismatch]") != std::string::npos);

  // A define the source does not declare, and one of the wrong kind.
  CHECK(assembleText(kSource, "k.tasm", {{"NOPE", "1"}}, &m) == TILUSVM_ERROR_CHECK);
  CHECK(lastError().find("error[undefined-name]") != std::string::npos);
  CHECK(lastError().find("NOPE") != std::string::npos);
  CHECK(assembleText(kSource, "k.tasm", {{"T", "f99"}}, &m) == TILUSVM_ERROR_CHECK);
  CHECK(lastError().find("error[syntax]: 'f99' is not a data type") != std::string::npos);

  // Constants only: nothing to run.
  CHECK(assembleText("const A = 1\n", "empty.tasm", {}, &m) == TILUSVM_ERROR_CHECK);
  CHECK(lastError().find("empty.tasm: no program is defined") != std::string::npos);
  // No file name: diagnostics say <input>.
  CHECK(assembleText("def", nullptr, {}, &m) == TILUSVM_ERROR_CHECK);
  CHECK(lastError().rfind("<input>:1:", 0) == 0);
}

TEST_CASE("a failure message with NUL bytes is returned whole, each NUL written as \\0") {
  // The assert message (a precondition on the parameter, checked at launch) holds two NUL
  // bytes (the escape \0 of the source): the message must keep what follows them.
  const char *text = "def stop<1>(i32 n) threads=32:\n"
                     "    assert n > 5, \"a\\0b\\0c\"\n";
  tilusvm_module m = nullptr;
  REQUIRE(assembleText(text, "nul.tasm", {}, &m) == TILUSVM_OK);
  tilusvm_arg args[1] = {{uint64_t(3), nullptr, 0}};
  CHECK(tilusvm_run_cpu(m, "stop", args, 1, 1) == TILUSVM_ERROR_RUNTIME);
  INFO(lastError());
  CHECK(lastError().find("precondition failed: a\\0b\\0c: `n > 5` with n = 3") !=
        std::string::npos);
  CHECK(tilusvm_module_destroy(m) == TILUSVM_OK);
}

TEST_CASE("bad calls to tilusvm_module_assemble are invalid-argument errors") {
  tilusvm_module m = reinterpret_cast<tilusvm_module>(1);
  std::string text = kSource;
  CHECK(tilusvm_module_assemble(text.data(), text.size(), "k", nullptr, 0, nullptr) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(lastError().find("out is NULL") != std::string::npos);
  CHECK(tilusvm_module_assemble(nullptr, 5, "k", nullptr, 0, &m) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(m == nullptr);
  CHECK(lastError().find("source is NULL") != std::string::npos);
  CHECK(tilusvm_module_assemble(text.data(), text.size(), "k", nullptr, 2, &m) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(lastError().find("defines is NULL") != std::string::npos);
  CHECK(assembleText(text, "k", {{"VALUE", "1"}, {nullptr, "2"}}, &m) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(lastError().find("define 1: name is NULL") != std::string::npos);
  CHECK(assembleText(text, "k", {{"VALUE", nullptr}}, &m) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(lastError().find("define 0: value is NULL") != std::string::npos);
  CHECK(assembleText(text, "k", {{"", "1"}}, &m) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(lastError().find("the name is empty") != std::string::npos);
  CHECK(assembleText(text, "k", {{"VALUE", "1"}, {"VALUE", "2"}}, &m) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(lastError().find("VALUE is defined twice") != std::string::npos);
  // Beyond the source limit (64 MiB): refused before anything is read.
  CHECK(tilusvm_module_assemble(text.data(), (size_t(64) << 20) + 1, "big.tasm", nullptr, 0, &m) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(lastError().find("big.tasm: the source is 67108865 bytes") != std::string::npos);
  CHECK(m == nullptr);
}
