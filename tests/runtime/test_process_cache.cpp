// The process-wide kernel cache (vm/cuda/process_cache.h), without a GPU: concurrent requests
// for one key run one build and the others wait for it; failures reach every waiter and are not
// kept; an exception in a build wakes the waiters. Then the part of several GPUs' runtimes that
// needs no driver: many threads asking for the same kernels, built by the real JIT, compile each
// distinct kernel exactly once and all get the same PTX.
#include "vm/cuda/process_cache.h"

#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "jit/jit.h"
#include "loader/checker.h"
#include "test_helpers.h"

#include <array>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <vector>

using namespace tilus;
using namespace tilus::cuda;

namespace {

ProcessKernelCache::Code fakeCode(const std::string &key) {
  CachedKernel kernel;
  kernel.entryName = "entry_" + key;
  kernel.threads = 32;
  kernel.ptx = "// ptx of " + key;
  return {kernel, "compiled"};
}

/// Start `count` threads together (each runs fn(index)) and join them.
template <typename Fn> void runTogether(int count, Fn fn) {
  std::atomic<int> waiting{count};
  std::vector<std::thread> threads;
  for (int t = 0; t < count; ++t)
    threads.emplace_back([&, t] {
      waiting.fetch_sub(1);
      while (waiting.load() > 0)
        std::this_thread::yield();
      fn(t);
    });
  for (std::thread &thread : threads)
    thread.join();
}

} // namespace

TEST_CASE("one build per key however many threads ask at once; the others wait for it") {
  ProcessKernelCache cache;
  const int threads = 12, keys = 3;
  std::array<std::atomic<int>, keys> builds{};
  std::vector<std::vector<const ProcessKernelCache::Code *>> seen(threads);
  std::vector<int> builtHere(threads, 0);
  std::mutex failuresMutex;
  std::vector<std::string> failures;
  runTogether(threads, [&](int t) {
    for (int round = 0; round < 2; ++round)
      for (int k = 0; k < keys; ++k) {
        std::string key = "key" + std::to_string((k + t) % keys);
        auto result = cache.getOrBuild(key, [&, key]() -> Expected<ProcessKernelCache::Code> {
          builds[size_t(key[3] - '0')].fetch_add(1);
          std::this_thread::sleep_for(std::chrono::milliseconds(60)); // long enough to overlap
          return fakeCode(key);
        });
        if (!result.ok()) {
          std::lock_guard lock(failuresMutex);
          failures.push_back(result.status().toString());
          continue;
        }
        if (result->code->kernel.entryName != "entry_" + key) {
          std::lock_guard lock(failuresMutex);
          failures.push_back("wrong code for " + key);
        }
        builtHere[size_t(t)] += result->built ? 1 : 0;
        seen[size_t(t)].push_back(result->code.get());
      }
  });
  CHECK(failures.empty());
  for (int k = 0; k < keys; ++k)
    CHECK(builds[size_t(k)].load() == 1);
  int totalBuilt = 0;
  for (int b : builtHere)
    totalBuilt += b;
  CHECK(totalBuilt == keys);
  ProcessKernelCache::Stats stats = cache.stats();
  CHECK(stats.builds == uint64_t(keys));
  CHECK(stats.failures == 0);
  CHECK(stats.builds + stats.waits + stats.hits == uint64_t(threads * keys * 2));
  CHECK(stats.waits > 0); // 12 threads started together on 60 ms builds: some waited
  CHECK(cache.size() == size_t(keys));
  // Everyone got the very same object for a key.
  std::map<std::string, const ProcessKernelCache::Code *> byKey;
  for (const auto &list : seen)
    for (const ProcessKernelCache::Code *code : list) {
      auto [it, inserted] = byKey.emplace(code->kernel.entryName, code);
      CHECK(it->second == code);
    }
  CHECK(byKey.size() == size_t(keys));
}

TEST_CASE("a failed build reaches every waiter, is not kept, and the next request builds again") {
  ProcessKernelCache cache;
  std::atomic<int> attempts{0};
  const int threads = 6;
  std::vector<std::string> messages(threads);
  runTogether(threads, [&](int t) {
    auto result = cache.getOrBuild("bad", [&]() -> Expected<ProcessKernelCache::Code> {
      attempts.fetch_add(1);
      std::this_thread::sleep_for(std::chrono::milliseconds(60));
      return Status::error(ErrorCode::Jit, "the JIT refused");
    });
    messages[size_t(t)] = result.ok() ? "ok" : result.status().first().message;
  });
  for (const std::string &m : messages)
    CHECK(m == "the JIT refused");
  // Threads that arrived after the failure built again; never more than one at a time.
  CHECK(attempts.load() >= 1);
  CHECK(cache.stats().failures == uint64_t(attempts.load()));
  CHECK(cache.size() == 0);
  auto retry = cache.getOrBuild(
      "bad", [&]() -> Expected<ProcessKernelCache::Code> { return fakeCode("bad"); });
  REQUIRE_OK(retry);
  CHECK(retry->built);
  CHECK(cache.size() == 1);
  cache.clear();
  CHECK(cache.size() == 0);
}

TEST_CASE("an exception in a build reaches its caller and wakes the waiters") {
  ProcessKernelCache cache;
  std::atomic<bool> building{false};
  std::string waiterMessage;
  std::thread builder([&] {
    CHECK_THROWS_AS(cache.getOrBuild("x",
                                     [&]() -> Expected<ProcessKernelCache::Code> {
                                       building = true;
                                       std::this_thread::sleep_for(std::chrono::milliseconds(100));
                                       throw std::runtime_error("boom");
                                     }),
                    std::runtime_error);
  });
  while (!building)
    std::this_thread::yield();
  auto waited = cache.getOrBuild("x", [&]() -> Expected<ProcessKernelCache::Code> {
    return fakeCode("x"); // runs only if this thread came after the failure
  });
  builder.join();
  if (!waited.ok())
    CHECK(waited.status().first().message == "the kernel build threw an exception");
  else
    CHECK(waited->built);
}

TEST_CASE("runtimes of several GPUs asking for the same kernels at once: the JIT runs once per "
          "distinct kernel (no GPU needed)") {
  auto module = assemble(R"(
const BLOCK = 256
def vector_add<cdiv(n, BLOCK)>(f32* x_ptr, f32* y_ptr, f32* z_ptr, i32 n) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    gy = ViewGlobal(y_ptr, shape=[n])
    gz = ViewGlobal(z_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    y = LoadGlobal(gy, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    StoreGlobal(Add(x, y), gz, offset=[bi * BLOCK:])

def fill<1>(i8* out, i8 value) threads=32:
    g = ViewGlobal(out, shape=[32])
    StoreGlobal(AllocateRegister(i8, layout=spatial(32), init=value), g)
)");
  REQUIRE_OK(module);
  auto verified = checkModule(std::move(module.value()));
  REQUIRE_OK(verified);
  const VerifiedModule &vm = *verified;
  uint64_t hash = moduleContentHash(vm.module);
  ProcessKernelCache cache;
  std::atomic<int> jitRuns{0};
  // Four "devices" (threads), each wanting both programs for two architectures: 2 x 2 distinct
  // kernels. Keys are spelled as CudaRuntime::cacheKey spells them.
  const int devices = 4;
  std::vector<std::map<std::string, std::string>> ptxSeen(devices);
  std::vector<std::string> errors(devices);
  runTogether(devices, [&](int d) {
    for (int arch : {80, 90})
      for (size_t p = 0; p < vm.module.programs.size(); ++p) {
        KernelKey key;
        key.moduleHash = hash;
        key.program = vm.module.programs[p].name;
        key.compilerVersion = JitOptions::compilerVersion();
        key.ptxTarget = arch;
        key.deviceArch = arch;
        auto result = cache.getOrBuild(key.text(), [&]() -> Expected<ProcessKernelCache::Code> {
          jitRuns.fetch_add(1);
          JitOptions options;
          options.smVersion = arch;
          auto ptx = compileToPtx(vm, p, options);
          if (!ptx.ok())
            return ptx.takeStatus();
          return ProcessKernelCache::Code{
              CachedKernel{ptx->entryName, ptx->threads, ptx->sharedBytes, ptx->ptx}, "compiled"};
        });
        if (!result.ok()) {
          errors[size_t(d)] = result.status().toString();
          return;
        }
        ptxSeen[size_t(d)][key.text()] = result->code->kernel.ptx;
      }
  });
  for (const std::string &e : errors)
    CHECK(e.empty());
  CHECK(jitRuns.load() == 4); // 2 programs x 2 architectures, not x 4 devices
  CHECK(cache.stats().builds == 4);
  for (int d = 1; d < devices; ++d)
    CHECK(ptxSeen[size_t(d)] == ptxSeen[0]);
  REQUIRE(ptxSeen[0].size() == 4);
  for (const auto &[key, ptx] : ptxSeen[0]) {
    bool sm90 = key.find("ptx=sm_90a") != std::string::npos;
    CHECK(ptx.find(sm90 ? ".target sm_90a" : ".target sm_80") != std::string::npos);
  }
}
