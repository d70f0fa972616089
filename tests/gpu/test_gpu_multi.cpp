// Several GPUs in one process, as a serving engine drives them: one runtime per device, each
// used from its own host thread, all at once, on the device's own streams. Every result is
// checked against a host reference; each distinct kernel is compiled once per architecture
// across the runtimes (the process-wide cache, with concurrent requests waiting for one build,
// and one shared disk cache), not once per device; a stream of another device is refused. With
// one GPU, two runtimes share it (and its primary context, so their streams are
// interchangeable) and the test says that the multi-device part was skipped.
#include "gpu_support.h"

#include "vm/cuda/process_cache.h"
#include "vm/include/tilusvm.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <memory>
#include <set>
#include <sstream>
#include <thread>

using namespace tilus;
using namespace gpu;

// Printed always (doctest shows MESSAGE only with --success or on failure): the run's log says
// how many devices took part and whether the multi-device part was skipped.
#define NOTE(text)                                                                                 \
  do {                                                                                             \
    std::ostringstream note_;                                                                      \
    note_ << text;                                                                                 \
    std::printf("[multi-gpu] %s\n", note_.str().c_str());                                          \
    std::fflush(stdout);                                                                           \
  } while (0)

namespace {

const char *kSmallPrograms = R"(
const BLOCK = 256

def vector_add<cdiv(n, BLOCK)>(f32* x_ptr, f32* y_ptr, f32* z_ptr, i32 n) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    gy = ViewGlobal(y_ptr, shape=[n])
    gz = ViewGlobal(z_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    y = LoadGlobal(gy, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    StoreGlobal(Add(x, y), gz, offset=[bi * BLOCK:])

def dirty<1>() threads=32:
    g = AllocateGlobal(i32, shape=[64])
    StoreGlobal(Add(Iota(layout=spatial(32).local(2), dim=0), 7), g)

def clean_add<1>(i32* in_ptr, i32* out_ptr) threads=32:
    g = AllocateGlobal(i32, shape=[64], requires_clean=True)
    gi = ViewGlobal(in_ptr, shape=[64])
    go = ViewGlobal(out_ptr, shape=[64])
    a = LoadGlobal(gi, layout=spatial(32).local(2))
    w = LoadGlobal(g, layout=spatial(32).local(2))
    StoreGlobal(Add(a, w), go)
)";

/// Kernels one device runs: vector_add, dirty, clean_add (one argument class each) and the
/// pipelined matmul.
constexpr uint64_t kDistinctKernels = 4;

/// One device's share of the work, run on its own thread.
struct DeviceRun {
  int ordinal = 0;
  std::unique_ptr<cuda::CudaRuntime> runtime;
  std::vector<CUstream> streams;
  std::string error;
  int wrong = -1;
};

KernelArg argOf(const cuda::DeviceBuffer &b) {
  KernelArg a;
  a.pointer = reinterpret_cast<void *>(uintptr_t(b.address()));
  a.byteSize = b.bytes();
  return a;
}

template <typename T>
Expected<cuda::DeviceBuffer> upload(cuda::CudaRuntime &rt, const std::vector<T> &host) {
  auto buffer = rt.allocate(host.size() * sizeof(T));
  if (!buffer.ok())
    return buffer.takeStatus();
  TILUSVM_TRY(rt.copyToDevice(*buffer, host.data(), host.size() * sizeof(T)));
  return std::move(buffer.value());
}

template <typename T>
Expected<std::vector<T>> download(cuda::CudaRuntime &rt, const cuda::DeviceBuffer &b) {
  std::vector<T> host(b.bytes() / sizeof(T));
  TILUSVM_TRY(rt.copyToHost(host.data(), b, host.size() * sizeof(T)));
  return host;
}

/// The whole job of one device: its runtime, two streams of its own, three rounds of every
/// program, results compared with host references. Returns the number of wrong elements.
Expected<int> work(DeviceRun &run, const std::string &cacheDir, const cuda::LoadedModule &small,
                   const cuda::LoadedModule &matmul, uint32_t seed) {
  cuda::RuntimeOptions options;
  options.device = run.ordinal;
  options.cacheDirectory = cacheDir;
  auto created = cuda::CudaRuntime::create(options);
  if (!created.ok())
    return created.takeStatus();
  run.runtime = std::move(created.value());
  cuda::CudaRuntime &rt = *run.runtime;
  const cuda::DriverApi &api = rt.api();
  cuda::ContextGuard guard(api, rt.context());
  TILUSVM_TRY(guard.status());
  for (int s = 0; s < 2; ++s) { // blocking streams: ordered after the synchronous uploads
    CUstream stream = nullptr;
    TILUSVM_TRY(TILUSVM_CU_CALL(api, cuStreamCreate, &stream, CU_STREAM_DEFAULT));
    run.streams.push_back(stream);
  }
  const int n = 1000, m = 100, nn = 72, k = 40;
  std::vector<float> x = randomFloats(n, seed), y = randomFloats(n, seed + 1);
  std::vector<int32_t> in(64);
  for (int i = 0; i < 64; ++i)
    in[size_t(i)] = int32_t(seed) * 100 + 3 * i - 17;
  std::vector<uint16_t> a = randomHalves(size_t(m * k), seed + 2),
                        b = randomHalves(size_t(k * nn), seed + 3);
  auto dx = upload(rt, x), dy = upload(rt, y), dz = upload(rt, std::vector<float>(n, -1.0f));
  auto din = upload(rt, in), dout = upload(rt, std::vector<int32_t>(64, -1));
  auto da = upload(rt, a), db = upload(rt, b),
       dc = upload(rt, std::vector<uint16_t>(size_t(m * nn), 0x7e00));
  for (auto *buffer : {&dx, &dy, &dz, &din, &dout, &da, &db, &dc})
    if (!buffer->ok())
      return buffer->status();
  size_t vectorAdd = programIndex(small, "vector_add"), dirty = programIndex(small, "dirty"),
         cleanAdd = programIndex(small, "clean_add");
  auto scalarArg = [](int32_t v) {
    KernelArg s;
    s.scalarBits = uint32_t(v);
    return s;
  };
  for (int round = 0; round < 3; ++round) {
    TILUSVM_TRY(rt.launch(small, vectorAdd, {argOf(*dx), argOf(*dy), argOf(*dz), scalarArg(n)},
                          run.streams[0]));
    TILUSVM_TRY(rt.launch(
        matmul, 0, {argOf(*da), argOf(*db), argOf(*dc), scalarArg(m), scalarArg(nn), scalarArg(k)},
        run.streams[0]));
    TILUSVM_TRY(rt.launch(small, dirty, {}, run.streams[1]));
    TILUSVM_TRY(rt.launch(small, cleanAdd, {argOf(*din), argOf(*dout)}, run.streams[1]));
  }
  for (CUstream stream : run.streams)
    TILUSVM_TRY(rt.synchronize(stream));
  auto z = download<float>(rt, *dz);
  auto out = download<int32_t>(rt, *dout);
  auto c = download<uint16_t>(rt, *dc);
  if (!z.ok() || !out.ok() || !c.ok())
    return !z.ok() ? z.status() : !out.ok() ? out.status() : c.status();
  int wrong = 0;
  for (size_t i = 0; i < size_t(n); ++i)
    wrong += (*z)[i] != x[i] + y[i];
  for (size_t i = 0; i < 64; ++i)
    wrong += (*out)[i] != in[i];
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < nn; ++j) {
      double ref = 0;
      for (int p = 0; p < k; ++p)
        ref += halfToDouble(a[size_t(i * k + p)]) * halfToDouble(b[size_t(p * nn + j)]);
      double got = halfToDouble((*c)[size_t(i * nn + j)]);
      wrong += !(std::fabs(got - ref) <= 1e-2 * (std::fabs(ref) + 1.0));
    }
  return wrong;
}

} // namespace

TEST_CASE("one runtime per GPU, one host thread each, all at once: every result right, each "
          "kernel compiled once per architecture") {
  const cuda::DriverApi &api = runtime().api();
  int count = 0;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuDeviceGetCount, &count));
  std::vector<DeviceRun> runs;
  if (count >= 2) {
    for (int d = 0; d < count; ++d)
      runs.emplace_back().ordinal = d;
    NOTE(count << " GPUs: one runtime and one host thread per device");
  } else {
    runs.emplace_back().ordinal = runtime().device().ordinal;
    runs.emplace_back().ordinal = runtime().device().ordinal;
    NOTE("one GPU: two runtimes on device " << runtime().device().ordinal
                                            << " from two threads at once; the multi-device "
                                               "part (one runtime per GPU) was skipped");
  }
  cuda::LoadedModule small = loadProgramText(kSmallPrograms);
  cuda::LoadedModule matmul = loadProgramFile("matmul_f16_pipelined.tasm");
  std::string cacheDir = scratchDirectory("multi_gpu_cache"); // shared by all, empty
  cuda::ProcessKernelCache::instance().clear();               // nothing compiled in memory
  uint64_t compilesBefore = cuda::processCacheStats().compiles;

  std::atomic<int> waiting{int(runs.size())};
  std::vector<std::thread> threads;
  for (size_t t = 0; t < runs.size(); ++t)
    threads.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0) // start together, so that compilations would race
        std::this_thread::yield();
      auto wrong = work(runs[t], cacheDir, small, matmul, uint32_t(100 + 10 * t));
      if (wrong.ok())
        runs[t].wrong = *wrong;
      else
        runs[t].error = wrong.status().toString();
    });
  for (std::thread &thread : threads)
    thread.join();

  std::set<int> architectures;
  uint64_t obtained = 0;
  for (const DeviceRun &run : runs) {
    INFO("device " << run.ordinal << ": " << run.error);
    CHECK(run.error.empty());
    CHECK(run.wrong == 0);
    REQUIRE(run.runtime);
    architectures.insert(run.runtime->device().computeCapability);
    cuda::CacheStats stats = run.runtime->cacheStats();
    NOTE("device " << run.ordinal << " (" << run.runtime->device().name << "): compiled "
                   << stats.compiles << ", from another runtime " << stats.sharedHits
                   << ", from disk " << stats.diskHits << ", workspace "
                   << run.runtime->workspaceBytes() << " bytes");
    CHECK(stats.diskHits == 0);
    CHECK(stats.compiles + stats.sharedHits == kDistinctKernels); // each kernel loaded once here
    obtained += stats.compiles + stats.sharedHits;
    CHECK(run.runtime->workspaceBytes() >= 256); // its own workspace, on its own device
  }
  uint64_t compiles = cuda::processCacheStats().compiles - compilesBefore;
  NOTE("kernels compiled: " << compiles << " for " << kDistinctKernels << " distinct kernels on "
                            << architectures.size() << " architecture(s) and " << runs.size()
                            << " runtimes");
  CHECK(compiles == kDistinctKernels * architectures.size());
  tilusvm_stats process; // the C API's view of the same counter
  process.struct_size = sizeof process;
  REQUIRE(tilusvm_process_get_stats(&process) == TILUSVM_OK);
  CHECK(process.compiles == cuda::processCacheStats().compiles);
  CHECK(obtained == kDistinctKernels * runs.size());

  // Streams: another device's are refused before anything is queued; with one GPU both
  // runtimes use its primary context, so each may launch on the other's streams.
  cuda::CudaRuntime &first = *runs[0].runtime;
  CUstream foreign = runs[1].streams.at(0);
  if (runs[0].ordinal != runs[1].ordinal) {
    Status refused = first.checkStream(foreign);
    REQUIRE_FALSE(refused.ok());
    CHECK(refused.code() == ErrorCode::Usage);
    if (api.cuCtxGetDevice) // names the stream's device when the driver can say
      CHECK(refused.first().message.find("a CUDA context of device " +
                                         std::to_string(runs[1].ordinal)) != std::string::npos);
    CHECK_ERROR(first.launch(small, programIndex(small, "dirty"), {}, foreign), ErrorCode::Usage);
  } else {
    CHECK_OK(first.checkStream(foreign));
    CHECK_OK(first.launch(small, programIndex(small, "dirty"), {}, foreign));
    CHECK_OK(first.synchronize(foreign));
  }
  for (DeviceRun &run : runs) {
    cuda::ContextGuard guard(run.runtime->api(), run.runtime->context());
    for (CUstream stream : run.streams)
      CHECK_OK(TILUSVM_CU_CALL(run.runtime->api(), cuStreamDestroy, stream));
    run.streams.clear();
  }
}
