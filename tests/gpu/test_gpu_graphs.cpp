// CUDA graphs through the C API, as a serving engine uses it: kernels prepared ahead, a graph
// of several launches (different kernels, clean workspaces from the runtime and from the
// caller) captured once and replayed 100 times with new inputs copied into the captured
// buffers between replays, every result checked against sums computed here; eager launches
// after replays still see clean workspaces; and the errors: a launch that would compile or
// allocate during capture fails with a message that says to prepare, and the capture can still
// be ended. A library program with a workspace (a16wx with split-K) captured the same ways and
// replayed against the interpreter. Two captured launches of a TMA kernel with their own tensor
// maps. Also the other parts of the versioned C API that need a device:
// lazy compilation off, caller workspaces, the CUresult of a failed driver call, streams of another
// context.
#include "gpu_support.h"

#include "isa/bytecode.h"
#include "vm/cpu/interpreter.h"
#include "vm/include/tilusvm.h"

#include <cmath>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

using namespace tilus;
using namespace gpu;

namespace {

const char *kGraphPrograms = R"(
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

def huge<1>(i32 n, i32* out_ptr) threads=32:
    g = AllocateGlobal(i32, shape=[n, n])
    go = ViewGlobal(out_ptr, shape=[32])
    StoreGlobal(Iota(layout=spatial(32), dim=0), go)
)";

/// A C API runtime on the shared runtime's device with the programs above and a handle each.
struct CRuntime {
  tilusvm_runtime rt = nullptr;
  tilusvm_module module = nullptr;
  std::map<std::string, tilusvm_kernel> kernels;

  explicit CRuntime(int lazy = 1, const char *programs = kGraphPrograms,
                    std::vector<const char *> names = {"vector_add", "dirty", "clean_add",
                                                       "huge"}) {
    tilusvm_runtime_options o;
    REQUIRE(tilusvm_runtime_options_init(&o) == TILUSVM_OK);
    o.device = runtime().device().ordinal;
    std::string dir = scratchDirectory("graphs_cache");
    o.cache_dir = dir.c_str();
    o.lazy_compile = lazy;
    int created = tilusvm_runtime_create_ex(&o, &rt);
    INFO(tilusvm_last_error());
    REQUIRE(created == TILUSVM_OK);
    std::vector<uint8_t> bytes = encodeModule(loadProgramText(programs).verified.module);
    REQUIRE(tilusvm_module_load(bytes.data(), bytes.size(), &module) == TILUSVM_OK);
    for (const char *name : names) {
      tilusvm_kernel k = nullptr;
      int got = tilusvm_kernel_get(rt, module, name, &k);
      INFO(name << ": " << tilusvm_last_error());
      REQUIRE(got == TILUSVM_OK);
      kernels[name] = k;
    }
  }
  ~CRuntime() {
    for (auto &[name, k] : kernels)
      tilusvm_kernel_destroy(k);
    tilusvm_module_destroy(module);
    tilusvm_runtime_destroy(rt);
  }
  tilusvm_kernel operator[](const std::string &name) { return kernels.at(name); }
  tilusvm_stats stats() const {
    tilusvm_stats s;
    s.struct_size = sizeof s;
    REQUIRE(tilusvm_runtime_get_stats(rt, &s) == TILUSVM_OK);
    return s;
  }
};

/// A non-blocking stream in the device's primary context.
struct Stream {
  CUstream stream = nullptr;
  Stream() {
    cuda::ContextGuard guard(runtime().api(), runtime().context());
    REQUIRE_OK(guard.status());
    REQUIRE_OK(TILUSVM_CU_CALL(runtime().api(), cuStreamCreate, &stream, CU_STREAM_NON_BLOCKING));
  }
  ~Stream() {
    cuda::ContextGuard guard(runtime().api(), runtime().context());
    runtime().api().cuStreamSynchronize(stream);
    runtime().api().cuStreamDestroy(stream);
  }
  operator CUstream() const { return stream; }
};

tilusvm_arg ptrArg(const DeviceArray &a) {
  return {0, reinterpret_cast<void *>(uintptr_t(a.buffer.address())), a.buffer.bytes()};
}
tilusvm_arg i32Arg(int32_t v) { return {uint64_t(uint32_t(v)), nullptr, 0}; }

/// A launch through the C API that must succeed.
void launch(tilusvm_kernel k, const std::vector<tilusvm_arg> &args, CUstream stream,
            const DeviceArray *workspace = nullptr) {
  void *ws = workspace ? reinterpret_cast<void *>(uintptr_t(workspace->buffer.address())) : nullptr;
  int r = tilusvm_kernel_launch(k, args.data(), args.size(), stream, ws,
                                workspace ? workspace->buffer.bytes() : 0);
  INFO(tilusvm_last_error());
  REQUIRE(r == TILUSVM_OK);
}

void prepare(tilusvm_kernel k, const std::vector<tilusvm_arg> &args, CUstream stream) {
  int r = tilusvm_kernel_prepare(k, args.data(), args.size(), stream);
  INFO(tilusvm_last_error());
  REQUIRE(r == TILUSVM_OK);
}

template <typename T>
void uploadAsync(const DeviceArray &dst, const std::vector<T> &src, CUstream s) {
  REQUIRE_OK(TILUSVM_CU_CALL(runtime().api(), cuMemcpyHtoDAsync, dst.buffer.address(), src.data(),
                             src.size() * sizeof(T), s));
}

/// DeviceArray uploads are synchronous copies on the legacy default stream, whose DMA from
/// pageable memory may still be in flight when they return; the tests' streams are
/// non-blocking, so wait for the legacy stream before launching on them.
void settleUploads() { REQUIRE_OK(runtime().synchronize(nullptr)); }

CUstreamCaptureStatus captureStatus(CUstream s) {
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_ACTIVE;
  CHECK_OK(TILUSVM_CU_CALL(runtime().api(), cuStreamIsCapturing, s, &status));
  return status;
}

std::vector<int32_t> ramp(int32_t start, int32_t step, size_t count) {
  std::vector<int32_t> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = start + step * int32_t(i);
  return v;
}

} // namespace

TEST_CASE("a captured graph of several launches replays 100 times with changing inputs") {
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c;
  Stream stream;
  const int n = 1000; // four blocks, the last partial
  DeviceArray dx = DeviceArray::from(std::vector<float>(n)),
              dy = DeviceArray::from(std::vector<float>(n)),
              dz = DeviceArray::from(std::vector<float>(n)),
              dz2 = DeviceArray::from(std::vector<float>(n)),
              din = DeviceArray::from(std::vector<int32_t>(64)),
              dout = DeviceArray::from(std::vector<int32_t>(64, -1)),
              dout2 = DeviceArray::from(std::vector<int32_t>(64, -1));
  std::vector<tilusvm_arg> add1 = {ptrArg(dx), ptrArg(dy), ptrArg(dz), i32Arg(n)};
  std::vector<tilusvm_arg> add2 = {ptrArg(dx), ptrArg(dz), ptrArg(dz2), i32Arg(n)};
  std::vector<tilusvm_arg> none;
  std::vector<tilusvm_arg> clean1 = {ptrArg(din), ptrArg(dout)};
  std::vector<tilusvm_arg> clean2 = {ptrArg(din), ptrArg(dout2)};

  // The caller's workspace, as an engine's allocator would hand it out: sized by the library,
  // and full of garbage (0xab bytes) that the clean region must not show.
  uint64_t cleanBytes = 0, dirtyBytes = 0, addBytes = 1;
  REQUIRE(tilusvm_kernel_workspace_size(c["clean_add"], clean1.data(), 2, &cleanBytes) ==
          TILUSVM_OK);
  REQUIRE(tilusvm_kernel_workspace_size(c["dirty"], nullptr, 0, &dirtyBytes) == TILUSVM_OK);
  REQUIRE(tilusvm_kernel_workspace_size(c["vector_add"], add1.data(), 4, &addBytes) == TILUSVM_OK);
  CHECK(cleanBytes == 64 * 4);
  CHECK(dirtyBytes == 64 * 4);
  CHECK(addBytes == 0);
  DeviceArray callerWorkspace = DeviceArray::from(std::vector<uint8_t>(256, 0xab));
  settleUploads();

  // Prepare everything before capturing: kernels for these arguments, the stream's workspace.
  prepare(c["vector_add"], add1, stream);
  prepare(c["dirty"], none, stream);
  prepare(c["clean_add"], clean1, stream);
  tilusvm_stats before = c.stats();
  CHECK(before.workspace_bytes >= 256);

  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  launch(c["vector_add"], add1, stream);
  launch(c["dirty"], none, stream);       // dirties the runtime workspace at offset 0 ...
  launch(c["clean_add"], clean1, stream); // ... which this needs zero: a captured memset
  launch(c["vector_add"], add2, stream);
  launch(c["dirty"], none, stream, &callerWorkspace);       // dirties the caller's workspace
  launch(c["clean_add"], clean2, stream, &callerWorkspace); // zeroed by a captured memset
  CUgraph graph = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamEndCapture, stream, &graph));
  CUgraphExec exec = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphInstantiateWithFlags, &exec, graph, 0));
  tilusvm_stats after = c.stats();
  CHECK(after.workspace_bytes == before.workspace_bytes); // nothing allocated during capture
  CHECK(after.compiles == before.compiles);
  CHECK(after.disk_hits == before.disk_hits);
  CHECK(after.shared_hits == before.shared_hits);

  int badReplays = 0;
  for (int replay = 0; replay < 100; ++replay) {
    std::vector<float> x = randomFloats(n, uint32_t(1000 + replay));
    std::vector<float> y = randomFloats(n, uint32_t(5000 + replay));
    std::vector<int32_t> in = ramp(replay * 1000 - 50, 3, 64);
    uploadAsync(dx, x, stream);
    uploadAsync(dy, y, stream);
    uploadAsync(din, in, stream);
    REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphLaunch, exec, stream));
    if (replay % 10 == 5) // eager work on the same stream between replays changes nothing
      launch(c["dirty"], none, stream);
    REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
    std::vector<float> z = dz.to<float>(), z2 = dz2.to<float>();
    std::vector<int32_t> out = dout.to<int32_t>(), out2 = dout2.to<int32_t>();
    int wrong = 0;
    for (size_t i = 0; i < size_t(n); ++i) {
      float sum = x[i] + y[i];
      wrong += z[i] != sum;
      wrong += z2[i] != x[i] + sum;
    }
    for (size_t i = 0; i < 64; ++i) {
      wrong += out[i] != in[i];
      wrong += out2[i] != in[i];
    }
    if (wrong != 0 && badReplays++ < 3)
      MESSAGE("replay " << replay << ": " << wrong << " wrong elements (out[0] = " << out[0]
                        << ", in[0] = " << in[0] << ", out2[0] = " << out2[0] << ")");
  }
  CHECK(badReplays == 0);
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphExecDestroy, exec));
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphDestroy, graph));
}

namespace {

// TMA loads and stores (sm_90a): y = 2 x over [m, 32] f32 in tiles of 64 rows; the last tile is
// partial (the load reads zeros, the store clips rows past m).
const char *kTmaProgram = R"(
def tma_double<cdiv(m, 64)>(f32* x_ptr, f32* y_ptr, i32 m) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[m, 32])
    gy = ViewGlobal(y_ptr, shape=[m, 32])
    s = AllocateShared(f32, shape=[64, 32])
    bar = AllocateShared(u64, shape=[1])
    MbarrierInit(bar, count=1)
    Synchronize()
    MbarrierArrive(bar, tx=8192)
    TmaLoad(s, gx, bar=bar, offset=[bi * 64:, 0:])
    MbarrierWait(bar, parity=0)
    t = LoadShared(s, layout=spatial(32, 4).local(2, 8))
    Synchronize()
    StoreShared(Add(t, t), s)
    FenceProxyAsync()
    Synchronize()
    TmaStore(s, gy, offset=[bi * 64:, 0:])
    TmaStoreCommitGroup()
    TmaStoreWaitGroup(0)
)";

} // namespace

TEST_CASE("TMA: two captured launches of one kernel keep their own tensor maps across replays") {
  if (runtime().device().computeCapability != 90) {
    MESSAGE("skipped: TmaLoad and TmaStore need sm_90a (an H100)");
    return;
  }
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c(1, kTmaProgram, {"tma_double"});
  Stream stream;
  const int m1 = 1000, m2 = 700; // 16 and 11 tiles, both with a partial last tile
  DeviceArray x1 = DeviceArray::from(std::vector<float>(size_t(m1) * 32)),
              y1 = DeviceArray::from(std::vector<float>(size_t(m1) * 32 + 32, -5.0f)),
              x2 = DeviceArray::from(std::vector<float>(size_t(m2) * 32)),
              y2 = DeviceArray::from(std::vector<float>(size_t(m2) * 32 + 32, -5.0f));
  std::vector<tilusvm_arg> a1 = {ptrArg(x1), ptrArg(y1), i32Arg(m1)};
  std::vector<tilusvm_arg> a2 = {ptrArg(x2), ptrArg(y2), i32Arg(m2)};
  settleUploads();
  prepare(c["tma_double"], a1, stream);
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  launch(c["tma_double"], a1, stream);
  launch(c["tma_double"], a2, stream);
  CUgraph graph = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamEndCapture, stream, &graph));
  CUgraphExec exec = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphInstantiateWithFlags, &exec, graph, 0));
  int badReplays = 0;
  for (int replay = 0; replay < 20; ++replay) {
    std::vector<float> in1 = randomFloats(size_t(m1) * 32, uint32_t(300 + replay));
    std::vector<float> in2 = randomFloats(size_t(m2) * 32, uint32_t(900 + replay));
    uploadAsync(x1, in1, stream);
    uploadAsync(x2, in2, stream);
    REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphLaunch, exec, stream));
    REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
    std::vector<float> out1 = y1.to<float>(), out2 = y2.to<float>();
    int wrong = 0;
    for (size_t i = 0; i < in1.size(); ++i)
      wrong += out1[i] != 2.0f * in1[i];
    for (size_t i = 0; i < in2.size(); ++i)
      wrong += out2[i] != 2.0f * in2[i];
    for (size_t i = 0; i < 32; ++i) // the row past m: clipped by the store
      wrong += (out1[in1.size() + i] != -5.0f) + (out2[in2.size() + i] != -5.0f);
    if (wrong != 0 && badReplays++ < 3)
      MESSAGE("replay " << replay << ": " << wrong << " wrong elements");
  }
  CHECK(badReplays == 0);
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphExecDestroy, exec));
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphDestroy, graph));
}

TEST_CASE("a16wx with split-K through the C API: prepared, captured with the runtime's and a "
          "caller's workspace, replayed against the interpreter") {
  // programs/quant/a16wx.tasm at K = 1024, N = 512: 16 column tiles of 32 rows, each tile of C
  // split over SPLITK = 8 blocks (docs/quant.md) that meet in requires_clean workspaces.
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c;
  Stream stream;
  const int k = 1024, n = 512, m = 16, groups = k / 128;
  cuda::LoadedModule loaded = loadProgramFile(
      "quant/a16wx.tasm",
      {{"WT", "u4"}, {"N", "512"}, {"K", "1024"}, {"G", "128"}, {"ZERO", "1"}, {"SPLITK", "8"}});
  std::vector<uint8_t> bytes = encodeModule(loaded.verified.module);
  tilusvm_module module = nullptr;
  REQUIRE(tilusvm_module_load(bytes.data(), bytes.size(), &module) == TILUSVM_OK);
  tilusvm_kernel matmul = nullptr;
  REQUIRE(tilusvm_kernel_get(c.rt, module, "matmul", &matmul) == TILUSVM_OK);

  std::vector<uint16_t> a = randomHalves(size_t(m * k), 1), s = randomHalves(size_t(groups * n), 2),
                        z = randomHalves(size_t(groups * n), 3);
  std::vector<uint8_t> wq(size_t(k * n / 2));
  for (size_t i = 0; i < wq.size(); ++i)
    wq[i] = uint8_t((i * 2654435761u) >> 13); // any byte is two u4 codes
  DeviceArray da = DeviceArray::from(a), dwq = DeviceArray::from(wq), ds = DeviceArray::from(s),
              dz = DeviceArray::from(z),
              dc = DeviceArray::from(std::vector<uint16_t>(size_t(m * n), 0xFFFF)),
              dc2 = DeviceArray::from(std::vector<uint16_t>(size_t(m * n), 0xFFFF));
  std::vector<tilusvm_arg> args = {ptrArg(da), ptrArg(dwq), ptrArg(ds),
                                   ptrArg(dz), ptrArg(dc),  i32Arg(m)};
  std::vector<tilusvm_arg> args2 = {ptrArg(da), ptrArg(dwq), ptrArg(ds),
                                    ptrArg(dz), ptrArg(dc2), i32Arg(m)};
  // f32 sums [N / 32, 1, 32, 16] (two atoms of 16 rows per warp by default: 32768 bytes), then
  // at the next multiple of 256 one i32 ticket per tile (16 x 4 bytes); then the decode body
  // of 1 < m <= 8 rows' own (docs/quant.md): sums [N / 32, 1, 32, 8] (16384 bytes) at 33024,
  // the next multiple of 256 after 32832, and its 16 tickets at 49408
  uint64_t need = 0;
  REQUIRE(tilusvm_kernel_workspace_size(matmul, args.data(), args.size(), &need) == TILUSVM_OK);
  CHECK(need == 33024 + 16384 + 64);
  DeviceArray callerWorkspace = DeviceArray::from(std::vector<uint8_t>(size_t(need), 0xab));
  settleUploads();

  prepare(matmul, args, stream); // the kernel, and this stream's workspace
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  launch(matmul, args, stream);
  launch(matmul, args2, stream, &callerWorkspace);
  CUgraph graph = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamEndCapture, stream, &graph));
  CUgraphExec exec = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphInstantiateWithFlags, &exec, graph, 0));

  size_t program = programIndex(loaded, "matmul");
  auto host = [](std::vector<uint16_t> &v) {
    return KernelArg{0, v.data(), v.size() * sizeof(uint16_t)};
  };
  // C on the GPU against the interpreter: |x - e| <= 1e-2 (|e| + mean |e|), as vm-run --check
  auto wrongOf = [&](const std::vector<uint16_t> &gpu, const std::vector<uint16_t> &cpu) {
    double mean = 0;
    for (uint16_t e : cpu)
      mean += std::fabs(halfToDouble(e)) / double(cpu.size());
    int wrong = 0;
    for (size_t i = 0; i < cpu.size(); ++i) {
      double x = halfToDouble(gpu[i]), e = halfToDouble(cpu[i]);
      wrong += !(std::fabs(x - e) <= 1e-2 * (std::fabs(e) + mean));
    }
    return wrong;
  };
  int badReplays = 0;
  for (int replay = 0; replay < 6; ++replay) {
    a = randomHalves(size_t(m * k), uint32_t(100 + replay));
    uploadAsync(da, a, stream);
    if (replay < 5)
      REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphLaunch, exec, stream));
    else // after the replays, an eager launch on the runtime's workspace of the stream
      launch(matmul, args, stream);
    REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
    std::vector<uint16_t> ref(size_t(m * n), 0);
    REQUIRE_OK(runOnCpu(loaded.verified, program,
                        {host(a), KernelArg{0, wq.data(), wq.size()}, host(s), host(z), host(ref),
                         KernelArg{uint64_t(m), nullptr, 0}}));
    int wrong =
        wrongOf(dc.to<uint16_t>(), ref) + (replay < 5 ? wrongOf(dc2.to<uint16_t>(), ref) : 0);
    if (wrong != 0 && badReplays++ < 3)
      MESSAGE("replay " << replay << ": " << wrong << " elements of C differ from the interpreter");
  }
  CHECK(badReplays == 0);
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphExecDestroy, exec));
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphDestroy, graph));
  tilusvm_kernel_destroy(matmul);
  tilusvm_module_destroy(module);
}

TEST_CASE("eager launches after replays of a captured dirtying program still read clean "
          "workspaces") {
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c;
  Stream stream;
  DeviceArray din = DeviceArray::from(ramp(11, 5, 64)),
              dout = DeviceArray::from(std::vector<int32_t>(64, -1));
  std::vector<tilusvm_arg> none, clean = {ptrArg(din), ptrArg(dout)};
  settleUploads();
  prepare(c["dirty"], none, stream);
  prepare(c["clean_add"], clean, stream);
  launch(c["clean_add"], clean, stream); // a fresh buffer: clean, nothing to zero
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
  CHECK(dout.to<int32_t>() == ramp(11, 5, 64));

  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  launch(c["dirty"], none, stream);
  CUgraph graph = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamEndCapture, stream, &graph));
  CUgraphExec exec = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphInstantiateWithFlags, &exec, graph, 0));
  for (int round = 0; round < 5; ++round) {
    std::vector<int32_t> stale(64, -1);
    REQUIRE_OK(runtime().copyToDevice(dout.buffer, stale.data(), 64 * 4));
    settleUploads();
    REQUIRE_OK(TILUSVM_CU_CALL(api, cuGraphLaunch, exec, stream)); // dirties at replay time
    launch(c["clean_add"], clean, stream); // must zero what the replay dirtied
    REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
    CHECK(dout.to<int32_t>() == ramp(11, 5, 64));
  }
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphExecDestroy, exec));
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphDestroy, graph));
}

TEST_CASE("inside capture, what was not prepared fails with a message that says so, and the "
          "capture can be ended") {
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c; // a new runtime: nothing loaded in it yet
  Stream stream;
  const int n = 300;
  std::vector<float> x = randomFloats(n, 7), y = randomFloats(n, 8);
  DeviceArray dx = DeviceArray::from(x), dy = DeviceArray::from(y),
              dz = DeviceArray::from(std::vector<float>(n, -1.0f)),
              din = DeviceArray::from(ramp(0, 1, 64)),
              dout = DeviceArray::from(std::vector<int32_t>(64, -1));
  std::vector<tilusvm_arg> add = {ptrArg(dx), ptrArg(dy), ptrArg(dz), i32Arg(n)};
  std::vector<tilusvm_arg> clean = {ptrArg(din), ptrArg(dout)};
  settleUploads();
  // clean_add's kernel is compiled (for any arguments), but this stream has no workspace.
  REQUIRE(tilusvm_kernel_prepare(c["clean_add"], nullptr, 0, stream) == TILUSVM_OK);

  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamBeginCapture, stream, CU_STREAM_CAPTURE_MODE_GLOBAL));
  CHECK(tilusvm_kernel_launch(c["vector_add"], add.data(), 4, stream, nullptr, 0) ==
        TILUSVM_ERROR_NOT_PREPARED);
  std::string message = tilusvm_last_error();
  INFO(message);
  CHECK(message.find("cannot launch vector_add during CUDA graph capture") != std::string::npos);
  CHECK(message.find("prepare the kernel before capturing") != std::string::npos);
  CHECK(tilusvm_kernel_launch(c["clean_add"], clean.data(), 2, stream, nullptr, 0) ==
        TILUSVM_ERROR_NOT_PREPARED);
  message = tilusvm_last_error();
  CHECK(message.find("needs 256 bytes of workspace and this stream's holds 0") !=
        std::string::npos);
  CHECK(tilusvm_kernel_prepare(c["vector_add"], add.data(), 4, stream) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("capturing a CUDA graph") != std::string::npos);
  // The old API refuses in the same way.
  CHECK(tilusvm_launch(c.rt, c.module, "vector_add", add.data(), 4, stream) ==
        TILUSVM_ERROR_NOT_PREPARED);
  // Nothing was queued: the capture ends cleanly.
  CHECK(captureStatus(stream) == CU_STREAM_CAPTURE_STATUS_ACTIVE);
  CUgraph graph = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamEndCapture, stream, &graph));
  CHECK(captureStatus(stream) == CU_STREAM_CAPTURE_STATUS_NONE);
  CHECK_OK(TILUSVM_CU_CALL(api, cuGraphDestroy, graph));
  tilusvm_stats stats = c.stats();
  CHECK(stats.workspace_bytes == 0);

  // After the capture the same launches run eagerly (compiling and allocating as needed).
  launch(c["vector_add"], add, stream);
  launch(c["clean_add"], clean, stream);
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuStreamSynchronize, stream));
  std::vector<float> z = dz.to<float>();
  for (size_t i = 0; i < size_t(n); ++i)
    CHECK(z[i] == x[i] + y[i]);
  CHECK(dout.to<int32_t>() == ramp(0, 1, 64));
}

TEST_CASE("with lazy compilation off, kernels compile in tilusvm_kernel_get and launches never") {
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c(/*lazy=*/0);
  tilusvm_stats got = c.stats();
  CHECK(got.compiles + got.disk_hits + got.shared_hits == 4); // four handles, four kernels
  const int n = 4096;                                         // a multiple of 16: class "aaad"
  std::vector<float> x = randomFloats(n, 9), y = randomFloats(n, 10);
  DeviceArray dx = DeviceArray::from(x), dy = DeviceArray::from(y),
              dz = DeviceArray::from(std::vector<float>(n));
  std::vector<tilusvm_arg> add = {ptrArg(dx), ptrArg(dy), ptrArg(dz), i32Arg(n)};
  launch(c["vector_add"], add, nullptr); // the unspecialised kernel serves it
  REQUIRE_OK(runtime().synchronize(nullptr));
  std::vector<float> z = dz.to<float>();
  for (size_t i = 0; i < size_t(n); ++i)
    CHECK(z[i] == x[i] + y[i]);
  tilusvm_stats launched = c.stats();
  CHECK(launched.compiles == got.compiles);
  CHECK(launched.disk_hits == got.disk_hits);
  CHECK(launched.shared_hits == got.shared_hits);
  // Preparing for these arguments compiles the specialised kernel, which later launches use.
  prepare(c["vector_add"], add, nullptr);
  tilusvm_stats prepared = c.stats();
  CHECK(prepared.compiles + prepared.disk_hits + prepared.shared_hits == 5);
}

TEST_CASE("caller workspaces are checked before anything is queued") {
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c;
  DeviceArray din = DeviceArray::from(ramp(3, 2, 64)),
              dout = DeviceArray::from(std::vector<int32_t>(64, -1)),
              ws = DeviceArray::from(std::vector<uint8_t>(512, 0xcd));
  std::vector<tilusvm_arg> clean = {ptrArg(din), ptrArg(dout)};
  void *base = reinterpret_cast<void *>(uintptr_t(ws.buffer.address()));
  void *misaligned = reinterpret_cast<void *>(uintptr_t(ws.buffer.address() + 16));
  CHECK(tilusvm_kernel_launch(c["clean_add"], clean.data(), 2, nullptr, misaligned, 496) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("not aligned to 256 bytes") != std::string::npos);
  CHECK(tilusvm_kernel_launch(c["clean_add"], clean.data(), 2, nullptr, base, 128) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("has 128 bytes; the launch needs 256") !=
        std::string::npos);
  CHECK(tilusvm_last_cu_result() == 0);
  launch(c["clean_add"], clean, nullptr, &ws);
  REQUIRE_OK(runtime().synchronize(nullptr));
  CHECK(dout.to<int32_t>() == ramp(3, 2, 64)); // the 0xcd bytes were zeroed first
}

// Makes a driver call fail on purpose (scripts/gpu_run.sh --sanitize excludes it: the
// sanitizer reports every failed API call).
TEST_CASE("the CUresult of a failed driver call is kept (a deliberate out-of-memory)") {
  const cuda::DriverApi &api = runtime().api();
  cuda::ContextGuard guard(api, runtime().context());
  REQUIRE_OK(guard.status());
  CRuntime c;
  // 2^20 x 2^20 i32 = 4 TiB of workspace: cuMemAlloc fails with CUDA_ERROR_OUT_OF_MEMORY.
  DeviceArray out = DeviceArray::from(std::vector<int32_t>(32));
  std::vector<tilusvm_arg> huge = {i32Arg(1 << 20), ptrArg(out)};
  uint64_t bytes = 0;
  REQUIRE(tilusvm_kernel_workspace_size(c["huge"], huge.data(), 2, &bytes) == TILUSVM_OK);
  CHECK(bytes == (uint64_t(1) << 42));
  CHECK(tilusvm_kernel_prepare(c["huge"], huge.data(), 2, nullptr) == TILUSVM_ERROR_CUDA);
  CHECK(tilusvm_last_cu_result() == int(CUDA_ERROR_OUT_OF_MEMORY));
  CHECK(std::string(tilusvm_last_error()).find("cuMemAlloc") != std::string::npos);
  tilusvm_module m = nullptr;
  CHECK(tilusvm_module_load(nullptr, 1, &m) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_last_cu_result() == 0); // the latest failure was not the driver's
}

TEST_CASE("a stream of another CUDA context is refused before anything is queued") {
  const cuda::DriverApi &api = runtime().api();
  if (!api.cuCtxCreate) {
    MESSAGE("skipped: the driver has no cuCtxCreate_v4 (CUDA 12.5+)");
    return;
  }
  CUdevice device = 0;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuDeviceGet, &device, runtime().device().ordinal));
  CUctxCreateParams params{};
  CUcontext other = nullptr;
  REQUIRE_OK(TILUSVM_CU_CALL(api, cuCtxCreate, &other, &params, 0, device)); // pushed
  CUstream foreign = nullptr;
  Status made = TILUSVM_CU_CALL(api, cuStreamCreate, &foreign, CU_STREAM_NON_BLOCKING);
  CUcontext popped = nullptr;
  api.cuCtxPopCurrent(&popped);
  CHECK(popped == other);
  REQUIRE_OK(made);
  {
    CRuntime c;
    const int n = 64;
    DeviceArray dx = DeviceArray::from(std::vector<float>(n, 1.0f)),
                dz = DeviceArray::from(std::vector<float>(n, -1.0f));
    std::vector<tilusvm_arg> add = {ptrArg(dx), ptrArg(dx), ptrArg(dz), i32Arg(n)};
    CHECK(tilusvm_kernel_launch(c["vector_add"], add.data(), 4, foreign, nullptr, 0) ==
          TILUSVM_ERROR_INVALID_ARGUMENT);
    std::string message = tilusvm_last_error();
    INFO(message);
    CHECK(message.find("the stream belongs to") != std::string::npos);
    CHECK(message.find("this runtime runs on device " +
                       std::to_string(runtime().device().ordinal)) != std::string::npos);
    if (api.cuCtxGetDevice) // names the stream's device when the driver can say
      CHECK(message.find("a CUDA context of device " + std::to_string(runtime().device().ordinal) +
                         " other than its primary context") != std::string::npos);
    CHECK(tilusvm_kernel_prepare(c["vector_add"], add.data(), 4, foreign) ==
          TILUSVM_ERROR_INVALID_ARGUMENT);
    CHECK_ERROR(runtime().launch(loadProgramText(kGraphPrograms), 0,
                                 {dx.arg(), dx.arg(), dz.arg(), scalar(uint32_t(n))}, foreign),
                ErrorCode::Usage);
    CHECK(dz.to<float>() == std::vector<float>(n, -1.0f)); // nothing ran
  }
  {
    cuda::ContextGuard inOther(api, other);
    CHECK_OK(TILUSVM_CU_CALL(api, cuStreamDestroy, foreign));
  }
  CHECK_OK(TILUSVM_CU_CALL(api, cuCtxDestroy, other));
}

namespace {
struct LogRecord {
  std::mutex mutex;
  std::vector<std::pair<int, std::string>> messages;
};
void recordLog(int level, const char *message, void *user) {
  auto *record = static_cast<LogRecord *>(user);
  std::lock_guard lock(record->mutex);
  record->messages.emplace_back(level, message);
}
} // namespace

TEST_CASE("a runtime's log callback gets its messages at its level, and only those") {
  LogRecord debug, quiet;
  tilusvm_module module = nullptr;
  std::vector<uint8_t> bytes = encodeModule(loadProgramText(kGraphPrograms).verified.module);
  REQUIRE(tilusvm_module_load(bytes.data(), bytes.size(), &module) == TILUSVM_OK);
  for (LogRecord *record : {&debug, &quiet}) {
    tilusvm_runtime_options o;
    REQUIRE(tilusvm_runtime_options_init(&o) == TILUSVM_OK);
    o.device = runtime().device().ordinal;
    o.log_level = record == &debug ? TILUSVM_LOG_DEBUG : TILUSVM_LOG_ERROR;
    o.log_callback = recordLog;
    o.log_user_data = record;
    tilusvm_runtime rt = nullptr;
    REQUIRE(tilusvm_runtime_create_ex(&o, &rt) == TILUSVM_OK);
    CHECK(tilusvm_prepare(rt, module, "dirty") == TILUSVM_OK); // logs "kernel ... ready" (debug)
    CHECK(tilusvm_runtime_destroy(rt) == TILUSVM_OK);
  }
  tilusvm_module_destroy(module);
  bool ready = false;
  for (const auto &[level, message] : debug.messages) {
    CHECK(level >= TILUSVM_LOG_DEBUG);
    CHECK(message.find('\n') == std::string::npos);
    ready = ready || (level == TILUSVM_LOG_DEBUG && message.find("ready") != std::string::npos);
  }
  CHECK(ready);
  CHECK(quiet.messages.empty());
}
