// Checked mode's race detection: seeded racy programs are reported with both instructions'
// locations, the block and the threads; the same programs with the missing Synchronize() are
// clean; unchecked mode reports nothing.
#include "cpu_test_util.h"

using namespace cputest;

namespace {

// Each thread stores one element; then every thread reads all of them.
std::string exchangeProgram(bool synchronize) {
  return std::string(R"(
def k<2>(f32* x_ptr, f32* y_ptr) threads=32:
    b = BlockIndices()
    s = AllocateShared(f32, shape=[32])
    x = LoadGlobal(ViewGlobal(x_ptr, shape=[64]), layout=spatial(32), offset=[b * 32:])
    StoreShared(x, s)
)") + (synchronize ? "    Synchronize()\n" : "    pass\n") +
         R"(    y = LoadShared(s, layout=local(32).replicate(32))
    StoreGlobal(Reduce(y, dim=0, op=sum, keepdim=True), ViewGlobal(y_ptr, shape=[2]), offset=[b:])
)";
}

} // namespace

TEST_CASE("StoreShared then LoadShared by other threads without Synchronize is a race") {
  std::vector<float> x(64, 1.0f), y(2);
  Status racy = run(build(exchangeProgram(false)), {bufferArg(x), bufferArg(y)});
  CHECK_ERROR(racy, ErrorCode::Race);
  CHECK(hasDiagnostic(racy, ErrorCode::Race,
                      {"test.tasm:8:", "LoadShared at 8:9", "reads shared element",
                       "of `s` written by StoreShared at 6:5 (thread", "no Synchronize()",
                       "block (0, 0, 0)"}));
  CHECK_OK(run(build(exchangeProgram(true)), {bufferArg(x), bufferArg(y)}));
  CHECK_OK(run(build(exchangeProgram(false)), {bufferArg(x), bufferArg(y)}, options(false)));
  CHECK(y == std::vector<float>{32.0f, 32.0f});
}

TEST_CASE("a write after reads in the same epoch, and a store repeated by a loop, race") {
  const char *src = R"(
def k<1>(i32* y_ptr) threads=32:
    s = AllocateShared(i32, shape=[32])
    v = AllocateRegister(i32, layout=spatial(32), init=3)
    StoreShared(v, s)
    Synchronize()
    a = LoadShared(s, layout=spatial(32))
    StoreShared(Add(a, 1), s)
    Synchronize()
    for i in range(2):
        StoreShared(v, s)
    StoreGlobal(a, ViewGlobal(y_ptr, shape=[32]))
)";
  std::vector<int32_t> y(32);
  Status s = run(build(src), {bufferArg(y)});
  CHECK(hasDiagnostic(s, ErrorCode::Race,
                      {"test.tasm:8:", "writes shared element", "read by LoadShared at 7:"}));
  CHECK(hasDiagnostic(s, ErrorCode::Race, {"test.tasm:11:", "also written by StoreShared at 11:"}));
}

TEST_CASE("reading a CopyAsync destination before the wait is reported at the read") {
  const char *src = R"(
def k<1>(f32* x_ptr, f32* y_ptr) threads=32:
    s = AllocateShared(f32, shape=[32])
    CopyAsync(s, ViewGlobal(x_ptr, shape=[32]))
    CopyAsyncCommitGroup()
    y = LoadShared(s, layout=spatial(32))
    CopyAsyncWaitAll()
    Synchronize()
    StoreGlobal(y, ViewGlobal(y_ptr, shape=[32]))
)";
  std::vector<float> x(32, 2.0f), y(32);
  Status s = run(build(src), {bufferArg(x), bufferArg(y)});
  CHECK_ERROR(s, ErrorCode::Race);
  CHECK(hasDiagnostic(
      s, ErrorCode::Race,
      {"test.tasm:6:", "LoadShared at 6:9 (thread", "CopyAsync at 4:5", "may still be copying"}));
}

TEST_CASE("blocks writing the same global element race with each other") {
  const char *src = R"(
def k<4>(i32* y_ptr) threads=32:
    b = BlockIndices()
    v = AllocateRegister(i32, layout=spatial(32), init=0)
    StoreGlobal(Add(v, b), ViewGlobal(y_ptr, shape=[32]))
)";
  std::vector<int32_t> y(32);
  Status s = run(build(src), {bufferArg(y)});
  CHECK(hasDiagnostic(
      s, ErrorCode::Race,
      {"data race between blocks", "StoreGlobal at 5:5", "writes global element", "of `_t"}));
}

TEST_CASE("blocks reading what another block writes race; disjoint blocks do not") {
  const char *src = R"(
def k<2>(i32* y_ptr, i32 shift) threads=32:
    b = BlockIndices()
    g = ViewGlobal(y_ptr, shape=[96])
    v = LoadGlobal(g, layout=spatial(32), offset=[b * 32 + shift:])
    StoreGlobal(Add(v, 1), g, offset=[b * 32 + 32:])
)";
  VerifiedModule m = build(src);
  std::vector<int32_t> y(96);
  // block 0 writes 32..63, which block 1 reads
  Status racy = run(m, {bufferArg(y), i32Arg(0)});
  CHECK(hasDiagnostic(racy, ErrorCode::Race,
                      {"data race between blocks", "LoadGlobal at 5:9", "StoreGlobal at 6:5"}));
  // with shift 64 block 0 reads 64..95 (written by block 1), so still racy; a per-block
  // private layout is clean:
  const char *clean = R"(
def k<2>(i32* y_ptr) threads=32:
    b = BlockIndices()
    g = ViewGlobal(y_ptr, shape=[2, 64])
    v = LoadGlobal(g, layout=spatial(32), offset=[b, 0:])
    StoreGlobal(Add(v, 1), g, offset=[b, 32:])
)";
  std::vector<int32_t> y2(128);
  CHECK_OK(run(build(clean), {bufferArg(y2)}));
}
