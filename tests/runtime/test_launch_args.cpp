// Host-side launch facts without a GPU: buffer sizes, argument checks against the checker's
// extents, grid evaluation and the kernel parameter bits of the JIT ABI (jit/jit.h), each
// against values worked out by hand.
#include "vm/cuda/runtime.h"

#include "assembler/assembler.h"
#include "loader/checker.h"
#include "test_helpers.h"

using namespace tilus;
using namespace tilus::cuda;

namespace {

const char *kVectorAdd = R"(
const BLOCK = 256
def vector_add<cdiv(n, BLOCK)>(f32* x_ptr, f32* y_ptr, f32* z_ptr, i32 n) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    gy = ViewGlobal(y_ptr, shape=[n])
    gz = ViewGlobal(z_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    y = LoadGlobal(gy, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    StoreGlobal(Add(x, y), gz, offset=[bi * BLOCK:])
)";

VerifiedModule verify(const char *text) {
  auto module = assemble(text);
  REQUIRE_OK(module);
  auto verified = checkModule(std::move(module.value()));
  REQUIRE_OK(verified);
  return std::move(verified.value());
}

KernelArgs vectorAddArgs(int32_t n, uint64_t bytes, void *pointer) {
  KernelArgs args(4);
  for (int i = 0; i < 3; ++i) {
    args[size_t(i)].pointer = pointer;
    args[size_t(i)].byteSize = bytes;
  }
  args[3].scalarBits = uint32_t(n);
  return args;
}

} // namespace

TEST_CASE("storage bytes pack sub-byte types") {
  CHECK(storageBytes(DataType::f32(), 1000) == 4000);
  CHECK(storageBytes(DataType::i(6), 7) == 6); // 42 bits
  CHECK(storageBytes(DataType::u(1), 9) == 2); // 9 bits
  CHECK(storageBytes(DataType::i(4), 8) == 4);
  CHECK(storageBytes(DataType::boolean(), 3) == 3);
  CHECK(storageBytes(DataType::f16(), 0) == 0);
  CHECK(storageBytes(DataType::f16(), int64_t(1) << 40) == uint64_t(1) << 41);
  CHECK(storageBytes(DataType::f(2, 1), 3) == 2); // f4e2m1: 12 bits
}

TEST_CASE("kernel parameters are widened by sign or zero extension") {
  auto scalar = [](DataType t) {
    Variable v;
    v.kind = VarKind::Scalar;
    v.dtype = t;
    return v;
  };
  auto bits = [](uint64_t b) {
    KernelArg a;
    a.scalarBits = b;
    return a;
  };
  CHECK(kernelParamBits(scalar(DataType::i(8)), bits(0xff)) == ~uint64_t(0));
  CHECK(kernelParamBits(scalar(DataType::u(8)), bits(0xff)) == 0xff);
  CHECK(kernelParamBits(scalar(DataType::i32()), bits(0x80000000u)) == 0xffffffff80000000ull);
  CHECK(kernelParamBits(scalar(DataType::i(6)), bits(0x20)) == 0xffffffffffffffe0ull);
  CHECK(kernelParamBits(scalar(DataType::boolean()), bits(1)) == 1);
  CHECK(kernelParamBits(scalar(DataType::f16()), bits(0xbc00)) == 0xbc00);
  CHECK(kernelParamBits(scalar(DataType::f32()), bits(0xbf800000u)) == 0xbf800000u);
  // Bits above the parameter's width are ignored.
  CHECK(kernelParamBits(scalar(DataType::u(16)), bits(0x123456789)) == 0x6789);
  Variable pointer;
  pointer.kind = VarKind::Pointer;
  pointer.dtype = DataType::f32();
  KernelArg p;
  p.pointer = reinterpret_cast<void *>(uintptr_t(0x7f0000001000ull));
  CHECK(kernelParamBits(pointer, p) == 0x7f0000001000ull);
}

TEST_CASE("the grid comes from the grid expressions and the scalar arguments") {
  VerifiedModule m = verify(kVectorAdd);
  const Program &program = m.module.programs[0];
  const ProgramInfo &info = m.programs[0];
  float dummy = 0;
  auto g = launchGeometry(program, info, vectorAddArgs(1000, 4000, &dummy));
  REQUIRE_OK(g);
  CHECK(g->grid == std::array<uint32_t, 3>{4, 1, 1}); // cdiv(1000, 256)
  CHECK(g->block == 128);
  CHECK_FALSE(g->empty());
  // n = 0: cdiv(0, 256) = 0 blocks is an error, not an empty launch.
  auto empty = launchGeometry(program, info, vectorAddArgs(0, 0, nullptr));
  REQUIRE_FALSE(empty.ok());
  CHECK(empty.status().code() == ErrorCode::Runtime);
  CHECK(empty.status().first().message ==
        "program `vector_add`: grid dimension 0 is 0: a launch of no blocks would run nothing");
}

TEST_CASE("a grid computed with a division by zero is an error") {
  VerifiedModule m = verify(R"(
def k<cdiv(n, d), 1 + n % d>(i32 n, i32 d) threads=32:
    bi, bj = BlockIndices()
)");
  KernelArgs args(2);
  args[0].scalarBits = 64;
  args[1].scalarBits = 0;
  auto g = launchGeometry(m.module.programs[0], m.programs[0], args);
  REQUIRE_FALSE(g.ok());
  CHECK(g.status().first().message == "program `k`: grid dimension 0 divides by zero");
  args[1].scalarBits = 32; // cdiv(64, 32) = 2, 1 + 64 % 32 = 1
  auto ok = launchGeometry(m.module.programs[0], m.programs[0], args);
  REQUIRE_OK(ok);
  CHECK(ok->grid == std::array<uint32_t, 3>{2, 1, 1});
  args[0].scalarBits = 65; // 1 + 65 % 32 = 2
  args[1].scalarBits = 32;
  ok = launchGeometry(m.module.programs[0], m.programs[0], args);
  REQUIRE_OK(ok);
  CHECK(ok->grid == std::array<uint32_t, 3>{3, 2, 1});
}

TEST_CASE("negative and oversized grid dimensions are errors") {
  VerifiedModule m = verify(R"(
def grid2<m, n>(i32 m, i32 n) threads=32:
    bi, bj = BlockIndices()
)");
  KernelArgs args(2);
  args[0].scalarBits = 3;
  args[1].scalarBits = 0xffffffffu; // -1
  CHECK_ERROR(launchGeometry(m.module.programs[0], m.programs[0], args), ErrorCode::Runtime);
  args[1].scalarBits = 65536; // y is limited to 65535
  CHECK_ERROR(launchGeometry(m.module.programs[0], m.programs[0], args), ErrorCode::Runtime);
  args[1].scalarBits = 65535;
  auto ok = launchGeometry(m.module.programs[0], m.programs[0], args);
  REQUIRE_OK(ok);
  CHECK(ok->grid == std::array<uint32_t, 3>{3, 65535, 1});
}

TEST_CASE("arguments are checked against the extents the program can touch") {
  VerifiedModule m = verify(kVectorAdd);
  const Program &program = m.module.programs[0];
  const ProgramInfo &info = m.programs[0];
  std::vector<float> buffer(1000);
  CHECK_OK(validateArgs(program, info, vectorAddArgs(1000, 4000, buffer.data())));
  Status small = validateArgs(program, info, vectorAddArgs(1000, 3996, buffer.data()));
  CHECK_ERROR(small, ErrorCode::Runtime);
  CHECK(small.first().message.find("holds 3996 bytes") != std::string::npos);
  CHECK(small.first().message.find("4000 bytes (1000 f32 elements)") != std::string::npos);
  // one byte short is short
  CHECK_ERROR(validateArgs(program, info, vectorAddArgs(1000, 3999, buffer.data())),
              ErrorCode::Runtime);
  CHECK_ERROR(validateArgs(program, info, vectorAddArgs(1000, 4000, nullptr)), ErrorCode::Runtime);
  // n = 0 touches nothing: empty, null buffers are fine.
  CHECK_OK(validateArgs(program, info, vectorAddArgs(0, 0, nullptr)));
  KernelArgs three = vectorAddArgs(10, 40, buffer.data());
  three.pop_back();
  CHECK_ERROR(validateArgs(program, info, three), ErrorCode::Runtime);
}

TEST_CASE("parameter values give pointers their address and scalars their bits") {
  VerifiedModule m = verify(kVectorAdd);
  const Program &program = m.module.programs[0];
  std::vector<float> buffer(4);
  KernelArgs args = vectorAddArgs(-7, 16, buffer.data());
  VarValueFn values = paramValues(program, args);
  CHECK(values(program.params[0]) == uint64_t(reinterpret_cast<uintptr_t>(buffer.data())));
  CHECK(values(program.params[3]) == 0xfffffff9u);
}

TEST_CASE("launch classes: aligned pointers, and integers equal to 1, multiples of 16 or other") {
  // the class letters of jit/jit.h (Specialization::text): a pointer at a multiple of 16 bytes
  // 'a' (else '-'); an integer 1 '1', a multiple of 16 (zero and negatives included) 'd', any
  // other 'n' (the JIT then assumes it is not 1)
  VerifiedModule m = verify(kVectorAdd);
  const Program &program = m.module.programs[0];
  alignas(16) float buffer[8] = {};
  auto classOf = [&](void *pointer, int32_t n) {
    return classifyArgs(program, vectorAddArgs(n, 32, pointer)).text();
  };
  CHECK(classOf(buffer, 1) == "aaa1");
  CHECK(classOf(buffer, 0) == "aaad");
  CHECK(classOf(buffer, 4096) == "aaad");
  CHECK(classOf(buffer, -32) == "aaad");
  CHECK(classOf(buffer, 1000) == "aaan");
  CHECK(classOf(buffer, -1) == "aaan");
  CHECK(classOf(buffer, 2) == "aaan");
  CHECK(classOf(buffer + 1, 17) == "---n");
}

TEST_CASE("launch classes: the values of specialize statements follow the parameters' letters") {
  // each specialize statement's value at the launch, computed on the host from the scalar
  // parameters as the kernel would compute it: '/' then T or F per statement, in order
  // (Specialization::text); a program whose parameters give no letters has the values alone
  VerifiedModule m = verify(R"(
def k<1>(f32* p, i32 n, i32 m) threads=32:
    assert n > 0
    specialize big = n >= 1024 and cdiv(m, 16) * 16 == m
    specialize one = m == 1 or n / 0 > 3
    g = ViewGlobal(p, shape=[n])
    StoreGlobal(LoadGlobal(g, layout=spatial(32)), g)
)");
  const Program &program = m.module.programs[0];
  REQUIRE(program.specializations().size() == 2);
  alignas(16) float buffer[8] = {};
  auto classOf = [&](void *pointer, int32_t n, int32_t mm) {
    KernelArgs args(3);
    args[0].pointer = pointer;
    args[0].byteSize = 32;
    args[1].scalarBits = uint32_t(n);
    args[2].scalarBits = uint32_t(mm);
    return classifyArgs(program, args).text();
  };
  CHECK(classOf(buffer, 1024, 32) == "add/TF"); // 1024 >= 1024, 32 a multiple of 16
  CHECK(classOf(buffer, 4096, 1) == "ad1/FT");
  CHECK(classOf(buffer, 2048, 40) == "adn/FF");
  CHECK(classOf(buffer, 1000, 1) == "an1/FT");
  CHECK(classOf(buffer + 1, 1024, 48) == "-dd/TF");
  // n / 0 is 0 (ISA: integer division by zero gives 0), so `one` is m == 1 alone
  CHECK(classOf(buffer, 17, 16) == "and/FF");
}
