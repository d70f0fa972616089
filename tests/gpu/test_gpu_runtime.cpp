// The CUDA runtime on a real device: launches against host-computed results, streams, the
// kernel cache in memory and on disk (including a corrupted entry), the workspace's clean
// regions after another program dirtied the buffer, growth, and concurrent host threads.
#include "gpu_support.h"

#include "isa/bytecode.h"
#include "vm/cuda/process_cache.h"
#include "vm/cuda/workspace.h"
#include "vm/include/tilusvm.hpp"

#include <filesystem>
#include <fstream>
#include <thread>

using namespace tilus;
using namespace gpu;

namespace {

KernelArgs vectorAddArgs(const DeviceArray &x, const DeviceArray &y, const DeviceArray &z,
                         int32_t n) {
  return {x.arg(), y.arg(), z.arg(), scalar(uint32_t(n))};
}

} // namespace

TEST_CASE("the device is usable") {
  const cuda::DeviceInfo &device = runtime().device();
  MESSAGE("device " << device.ordinal << ": " << device.name << ", compute capability "
                    << device.computeCapability << ", " << device.multiprocessors << " SMs");
  CHECK_FALSE(device.name.empty());
  CHECK(device.computeCapability >= 80);
  CHECK(device.maxSharedPerBlockOptin >= 48 * 1024);
  CHECK(runtime().jitOptions().smVersion == (device.computeCapability == 90 ? 90 : 80));
}

TEST_CASE("vector_add matches the host sum, tail block included") {
  cuda::LoadedModule module = loadProgramFile("vector_add.tasm");
  const int n = 1000; // 4 blocks of 256, the last partial
  std::vector<float> x = randomFloats(n, 1), y = randomFloats(n, 2);
  DeviceArray dx = DeviceArray::from(x), dy = DeviceArray::from(y),
              dz = DeviceArray::from(std::vector<float>(n, -7.0f));
  REQUIRE_OK(runtime().launch(module, 0, vectorAddArgs(dx, dy, dz, n), nullptr));
  REQUIRE_OK(runtime().synchronize(nullptr));
  std::vector<float> z = dz.to<float>();
  for (int i = 0; i < n; ++i)
    CHECK(z[size_t(i)] == x[size_t(i)] + y[size_t(i)]);
}

TEST_CASE("a launch with an empty grid is an error, before anything is queued") {
  // vector_add states `assert n > 0` (a precondition, checked first); the grid check is the
  // next line of defence, reached here by a program without that precondition.
  cuda::LoadedModule module = loadProgramFile("vector_add.tasm");
  KernelArg none;
  CHECK_ERROR(runtime().launch(module, 0, {none, none, none, scalar(0)}, nullptr),
              ErrorCode::Assert);
  cuda::LoadedModule bare = loadProgramText(R"(
def k<cdiv(n, 32)>(i32 n) threads=32:
    pass
)");
  CHECK_ERROR(runtime().launch(bare, 0, {scalar(0)}, nullptr), ErrorCode::Runtime);
}

TEST_CASE("preconditions are checked on the host before the launch") {
  cuda::LoadedModule module = loadProgramText(R"(
def fill<cdiv(n, 32)>(f32* out, i32 n, i32 g) threads=32:
    assert n % g == 0 and g > 0, "n is a multiple of the group size g"
    bi = BlockIndices()
    o = ViewGlobal(out, shape=[n])
    StoreGlobal(AllocateRegister(f32, layout=spatial(32), init=2.0), o, offset=[bi * 32:])
)");
  DeviceArray out = DeviceArray::from(std::vector<float>(96, -1.0f));
  Status violated = runtime().launch(module, 0, {out.arg(), scalar(96), scalar(5)}, nullptr);
  CHECK_ERROR(violated, ErrorCode::Assert);
  CHECK(violated.first().message ==
        "program `fill`: precondition failed: n is a multiple of the group size g: "
        "`((n % g) == 0) and (g > 0)` with n = 96, g = 5 (assert at line 3)");
  REQUIRE_OK(runtime().synchronize(nullptr));
  // Nothing ran: the buffer keeps its contents.
  for (float v : out.to<float>())
    CHECK(v == -1.0f);
  REQUIRE_OK(runtime().launch(module, 0, {out.arg(), scalar(96), scalar(32)}, nullptr));
  REQUIRE_OK(runtime().synchronize(nullptr));
  for (float v : out.to<float>())
    CHECK(v == 2.0f);
}

TEST_CASE("launch errors are statuses") {
  cuda::LoadedModule module = loadProgramFile("vector_add.tasm");
  DeviceArray small = DeviceArray::from(std::vector<float>(10));
  CHECK_ERROR(runtime().launch(module, 0, vectorAddArgs(small, small, small, 11), nullptr),
              ErrorCode::Runtime);
  CHECK_ERROR(runtime().launch(module, 5, {}, nullptr), ErrorCode::Usage);
}

TEST_CASE("the C++ API launches on a caller's stream") {
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CUstream stream = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING));
  cuda::LoadedModule loaded = loadProgramFile("vector_add.tasm");
  std::vector<uint8_t> bytes = encodeModule(loaded.verified.module);
  tilusvm::Module module = tilusvm::Module::load(bytes.data(), bytes.size());
  tilusvm::Runtime rt;
  CHECK(rt.computeCapability() == runtime().device().computeCapability);
  const int n = 4096;
  std::vector<float> x = randomFloats(n, 3), y = randomFloats(n, 4);
  DeviceArray dx = DeviceArray::from(x), dy = DeviceArray::from(y),
              dz = DeviceArray::from(std::vector<float>(n));
  rt.prepare(module, "vector_add");
  rt.launch(module, "vector_add",
            {tilusvm::Arg::device(dx.buffer.address(), n * 4),
             tilusvm::Arg::device(dy.buffer.address(), n * 4),
             tilusvm::Arg::device(dz.buffer.address(), n * 4), tilusvm::Arg::i32(n)},
            stream);
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
  std::vector<float> z = dz.to<float>();
  for (int i = 0; i < n; ++i)
    CHECK(z[size_t(i)] == x[size_t(i)] + y[size_t(i)]);
  // Errors come back as tilusvm::Error with the C status.
  try {
    rt.launch(module, "vector_add",
              {tilusvm::Arg::device(dx.buffer.address(), 16), tilusvm::Arg::device(0, 0),
               tilusvm::Arg::device(0, 0), tilusvm::Arg::i32(n)},
              stream);
    FAIL("a launch with a 16-byte buffer succeeded");
  } catch (const tilusvm::Error &e) {
    CHECK(e.status() == TILUSVM_ERROR_INVALID_ARGUMENT);
  }
  CHECK_THROWS_AS(rt.launch(module, "nope", {}, stream), tilusvm::Error);
  // A kernel handle of a runtime made with options, the look-up done once.
  tilusvm_runtime_options options = tilusvm::runtimeOptions();
  options.lazy_compile = 0;
  tilusvm::Runtime strict(options);
  tilusvm::Kernel add(strict, module, "vector_add"); // compiled here
  std::vector<tilusvm_arg> args = {tilusvm::Arg::device(dy.buffer.address(), n * 4),
                                   tilusvm::Arg::device(dz.buffer.address(), n * 4),
                                   tilusvm::Arg::device(dx.buffer.address(), n * 4),
                                   tilusvm::Arg::i32(n)};
  CHECK(add.workspaceSize(args) == 0);
  add.launch(args, stream); // x = y + z
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
  std::vector<float> sum = dx.to<float>();
  for (int i = 0; i < n; ++i)
    CHECK(sum[size_t(i)] == y[size_t(i)] + z[size_t(i)]);
  CHECK_THROWS_AS(tilusvm::Kernel(strict, module, "nope"), tilusvm::Error);
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamDestroy, stream));
}

TEST_CASE("kernel cache: memory hits, disk hits in a new runtime, corrupt entries recompiled") {
  std::string dir = scratchDirectory("cache_test");
  cuda::RuntimeOptions options;
  options.cacheDirectory = dir;
  cuda::LoadedModule module = loadProgramFile("vector_add.tasm");
  // Runtimes of one process share compiled code (process_cache.h): forget it, so that each
  // runtime below sees only the disk. (The process-wide sharing is checked at the end.)
  cuda::ProcessKernelCache &shared = cuda::ProcessKernelCache::instance();
  shared.clear();

  auto first = cuda::CudaRuntime::create(options);
  REQUIRE_OK(first);
  auto k1 = (*first)->kernel(module, 0);
  REQUIRE_OK(k1);
  CHECK((*k1)->origin == "compiled");
  auto k2 = (*first)->kernel(module, 0);
  REQUIRE_OK(k2);
  CHECK(*k1 == *k2);
  CHECK((*first)->cacheStats().compiles == 1);
  CHECK((*first)->cacheStats().memoryHits == 1);
  std::string entry = dir + "/" + (*first)->cacheKey(module, 0).fileName();
  REQUIRE(std::filesystem::exists(entry));

  shared.clear();
  auto second = cuda::CudaRuntime::create(options);
  REQUIRE_OK(second);
  auto k3 = (*second)->kernel(module, 0);
  REQUIRE_OK(k3);
  CHECK((*k3)->origin == "disk");
  CHECK((*second)->cacheStats().compiles == 0);
  CHECK((*second)->cacheStats().diskHits == 1);

  { // flip one byte in the middle of the entry
    std::fstream f(entry, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    std::streamoff middle = f.tellg() / 2;
    f.seekg(middle);
    char c = 0;
    f.read(&c, 1);
    c = char(c ^ 0x5a);
    f.seekp(middle);
    f.write(&c, 1);
  }
  shared.clear();
  auto third = cuda::CudaRuntime::create(options);
  REQUIRE_OK(third);
  auto k4 = (*third)->kernel(module, 0);
  REQUIRE_OK(k4);
  CHECK((*k4)->origin == "compiled");
  CHECK((*third)->cacheStats().diskCorrupt == 1);
  CHECK((*third)->cacheStats().compiles == 1);
  // The recompiled kernel computes the right thing and the entry was rewritten.
  const int n = 300;
  std::vector<float> x = randomFloats(n, 5), y = randomFloats(n, 6);
  DeviceArray dx = DeviceArray::from(x), dy = DeviceArray::from(y),
              dz = DeviceArray::from(std::vector<float>(n));
  REQUIRE_OK((*third)->launch(module, 0, vectorAddArgs(dx, dy, dz, n), nullptr));
  REQUIRE_OK((*third)->synchronize(nullptr));
  std::vector<float> z = dz.to<float>();
  for (int i = 0; i < n; ++i)
    CHECK(z[size_t(i)] == x[size_t(i)] + y[size_t(i)]);
  shared.clear();
  auto fourth = cuda::CudaRuntime::create(options);
  REQUIRE_OK(fourth);
  auto k5 = (*fourth)->kernel(module, 0);
  REQUIRE_OK(k5);
  CHECK((*k5)->origin == "disk");
  // Without clearing, a fifth runtime takes the code from the process (no disk read, no JIT)
  // and loads it into its own context.
  auto fifth = cuda::CudaRuntime::create(options);
  REQUIRE_OK(fifth);
  auto k6 = (*fifth)->kernel(module, 0);
  REQUIRE_OK(k6);
  CHECK((*k6)->origin == "shared");
  CHECK((*fifth)->cacheStats().sharedHits == 1);
  CHECK((*fifth)->cacheStats().compiles == 0);
  CHECK((*fifth)->cacheStats().diskHits == 0);
  CHECK((*k6)->function != (*k5)->function); // its own module
  std::vector<float> stale(size_t(n), -7.0f);
  REQUIRE_OK(runtime().copyToDevice(dz.buffer, stale.data(), stale.size() * 4));
  REQUIRE_OK((*fifth)->launch(module, 0, vectorAddArgs(dx, dy, dz, n), nullptr));
  REQUIRE_OK((*fifth)->synchronize(nullptr));
  z = dz.to<float>();
  for (int i = 0; i < n; ++i)
    CHECK(z[size_t(i)] == x[size_t(i)] + y[size_t(i)]);
}

namespace {
const char *kWorkspacePrograms = R"(
def dirty<1>() threads=32:
    g = AllocateGlobal(i32, shape=[64])
    StoreGlobal(Add(Iota(layout=spatial(32).local(2), dim=0), 7), g)

def clean<1>(i32* out) threads=32:
    g = AllocateGlobal(i32, shape=[64], requires_clean=True)
    o = ViewGlobal(out, shape=[64])
    StoreGlobal(LoadGlobal(g, layout=spatial(32).local(2)), o)

def big<1>(i32 n, i32* out) threads=32:
    g = AllocateGlobal(i32, shape=[n])
    StoreGlobal(Add(Iota(layout=spatial(32).local(2), dim=0), 1), g)
    Synchronize()
    x = LoadGlobal(g, layout=spatial(32).local(2))
    o = ViewGlobal(out, shape=[64])
    StoreGlobal(x, o)
)";
} // namespace

TEST_CASE("kernels report the registers and local memory the driver loaded them with") {
  // vector_add lives in a few registers
  cuda::LoadedModule small = loadProgramFile("vector_add.tasm");
  auto k = runtime().kernel(small, 0);
  REQUIRE_OK(k);
  CHECK((*k)->registers > 0);
  CHECK((*k)->registers <= 255);
  CHECK((*k)->localBytes == 0);
  // The decode GEMM with four warps per block: asking for 16 blocks per SM leaves each thread
  // at most 65536 / (16 * 128) = 32 registers (the register file), far fewer than the kernel
  // needs, so it spills; 2 blocks per SM leave it 255 and it does not.
  std::map<std::string, std::string> defines = {
      {"WT", "u4"}, {"N", "4096"}, {"K", "1024"}, {"WARPS", "4"}};
  defines["OCC"] = "16";
  cuda::LoadedModule tight = loadProgramFile("quant/a16wx.tasm", defines);
  defines["OCC"] = "2";
  cuda::LoadedModule roomy = loadProgramFile("quant/a16wx.tasm", defines);
  auto spilled = runtime().kernel(tight, programIndex(tight, "matmul"));
  REQUIRE_OK(spilled);
  CHECK((*spilled)->registers <= 32);
  CHECK((*spilled)->localBytes > 0);
  auto fits = runtime().kernel(roomy, programIndex(roomy, "matmul"));
  REQUIRE_OK(fits);
  CHECK((*fits)->registers > 32);
  CHECK((*fits)->registers <= 255);
  CHECK((*fits)->localBytes == 0);
}

TEST_CASE("requires_clean workspace reads zero even after another program dirtied it") {
  cuda::LoadedModule module = loadProgramText(kWorkspacePrograms);
  size_t dirty = programIndex(module, "dirty"), clean = programIndex(module, "clean");
  DeviceArray out = DeviceArray::from(std::vector<int32_t>(64, -1));
  REQUIRE_OK(runtime().launch(module, clean, {out.arg()}, nullptr));
  REQUIRE_OK(runtime().synchronize(nullptr));
  CHECK(out.to<int32_t>() == std::vector<int32_t>(64, 0));
  for (int round = 0; round < 3; ++round) {
    REQUIRE_OK(runtime().launch(module, dirty, {}, nullptr));
    REQUIRE_OK(runtime().launch(module, clean, {out.arg()}, nullptr));
  }
  REQUIRE_OK(runtime().synchronize(nullptr));
  CHECK(out.to<int32_t>() == std::vector<int32_t>(64, 0));
}

TEST_CASE("the workspace grows on demand while earlier kernels keep their memory") {
  cuda::LoadedModule module = loadProgramText(kWorkspacePrograms);
  size_t big = programIndex(module, "big");
  std::vector<int32_t> expected(64);
  for (int i = 0; i < 64; ++i)
    expected[size_t(i)] = i + 1;
  uint64_t before = runtime().workspaceBytes();
  std::vector<DeviceArray> outs;
  for (int32_t n : {64, 1 << 12, 1 << 16, 1 << 20, 64}) {
    outs.push_back(DeviceArray::from(std::vector<int32_t>(64, 0)));
    REQUIRE_OK(runtime().launch(module, big, {scalar(uint32_t(n)), outs.back().arg()}, nullptr));
  }
  REQUIRE_OK(runtime().synchronize(nullptr));
  for (const DeviceArray &out : outs)
    CHECK(out.to<int32_t>() == expected);
  CHECK(runtime().workspaceBytes() >= std::max<uint64_t>(before, uint64_t(1) << 22));
}

TEST_CASE("one runtime serves many host threads at once") {
  cuda::LoadedModule module = loadProgramFile("vector_add.tasm");
  const int threads = 4, n = 1 << 14, rounds = 10;
  std::vector<std::vector<float>> xs, ys;
  std::vector<DeviceArray> dx, dy, dz;
  for (int t = 0; t < threads; ++t) {
    xs.push_back(randomFloats(n, uint32_t(10 + t)));
    ys.push_back(randomFloats(n, uint32_t(20 + t)));
    dx.push_back(DeviceArray::from(xs.back()));
    dy.push_back(DeviceArray::from(ys.back()));
    dz.push_back(DeviceArray::from(std::vector<float>(n)));
  }
  std::vector<Status> results(threads);
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      for (int r = 0; r < rounds && results[size_t(t)].ok(); ++r)
        results[size_t(t)] = runtime().launch(
            module, 0, vectorAddArgs(dx[size_t(t)], dy[size_t(t)], dz[size_t(t)], n), nullptr);
    });
  for (std::thread &t : pool)
    t.join();
  REQUIRE_OK(runtime().synchronize(nullptr));
  for (int t = 0; t < threads; ++t) {
    CHECK_OK(results[size_t(t)]);
    std::vector<float> z = dz[size_t(t)].to<float>();
    int wrong = 0;
    for (int i = 0; i < n; ++i)
      wrong += z[size_t(i)] != xs[size_t(t)][size_t(i)] + ys[size_t(t)][size_t(i)];
    CHECK(wrong == 0);
  }
}
