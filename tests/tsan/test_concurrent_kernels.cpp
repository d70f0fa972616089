// Compiling and caching many kernels from many threads at once, as a serving process does: the
// JIT (compileToPtx: one LLVM initialisation per process, a fresh LLVMContext per compilation,
// the fatal error trap) and the on-disk kernel cache (DiskCache: atomic stores, verified loads
// that delete corrupt entries), keyed by KernelKey as the CUDA runtime keys them. No GPU is
// needed. Built and run under ThreadSanitizer by scripts/tsan.sh (a separate build directory,
// meson -Db_sanitize=thread); it also runs in the normal build as an ordinary test.
//
// Reference: every kernel is first compiled alone, on one thread. Then each of kThreads threads
// walks all kernels in its own order several times: load from the disk cache, or compile and
// store on a miss; every thread also stores each kernel it compiled under a key shared by all
// threads, so that stores and loads of one file race. Whatever a thread gets (compiled or
// loaded) must equal the reference byte for byte, and every cache file must load at the end.
#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "jit/jit.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cuda/kernel_cache.h"

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

using namespace tilus;
using namespace tilus::cuda;

namespace {

constexpr int kThreads = 6;
constexpr int kRounds = 2;

struct Kernel {
  const VerifiedModule *module;
  uint64_t moduleHash;
  size_t program;
  int sm;
  KernelKey key;
  PtxKernel reference;
};

VerifiedModule build(const std::string &path, const std::map<std::string, std::string> &defines) {
  std::ifstream in(path);
  REQUIRE(in);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  AssembleOptions options;
  options.fileName = path;
  options.defines = defines;
  Expected<Module> m = assemble(text, options);
  REQUIRE_OK(m);
  Expected<VerifiedModule> v = checkModule(std::move(*m));
  REQUIRE_OK(v);
  return std::move(*v);
}

struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tilusvm-concurrent-" + std::to_string(std::random_device()()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

} // namespace

TEST_CASE("many threads compile and cache many kernels at once") {
  std::string root = TILUSVM_SOURCE_DIR;
  std::vector<VerifiedModule> modules;
  modules.push_back(build(root + "/programs/vector_add.tasm", {}));
  modules.push_back(build(root + "/programs/softmax_rows.tasm", {}));
  modules.push_back(build(root + "/programs/matmul_f16_pipelined.tasm", {}));
  modules.push_back(
      build(root + "/programs/paper_matmul_f16_i6.tasm", {{"M", "64"}, {"N", "64"}, {"K", "64"}}));
  modules.push_back(build(root + "/programs/variants/matmul_f32_u2.tasm", {}));

  std::vector<Kernel> kernels;
  for (const VerifiedModule &m : modules) {
    uint64_t hash = moduleContentHash(m.module);
    for (size_t p = 0; p < m.module.programs.size(); ++p) {
      for (int sm : {80, 90}) {
        Kernel k{&m, hash, p, sm, {}, {}};
        k.key.moduleHash = hash;
        k.key.program = m.module.programs[p].name;
        k.key.compilerVersion = JitOptions::compilerVersion();
        k.key.ptxTarget = sm;
        k.key.deviceArch = sm;
        k.key.optLevel = 3;
        JitOptions options;
        options.smVersion = sm;
        Expected<PtxKernel> ptx = compileToPtx(m, p, options);
        REQUIRE_OK(ptx);
        k.reference = std::move(*ptx);
        kernels.push_back(std::move(k));
      }
    }
  }
  REQUIRE(kernels.size() >= 12);

  TempDir dir;
  DiskCache cache(dir.path.string());
  KernelKey shared = kernels[0].key;
  shared.program = "shared_by_all_threads";
  std::atomic<int> compiled{0}, loaded{0}, mismatches{0}, failures{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::vector<size_t> order(kernels.size());
      for (size_t i = 0; i < order.size(); ++i)
        order[i] = i;
      std::mt19937 rng{uint32_t(t)};
      for (int round = 0; round < kRounds; ++round) {
        std::shuffle(order.begin(), order.end(), rng);
        for (size_t i : order) {
          const Kernel &k = kernels[i];
          DiskCache::Lookup hit = cache.load(k.key);
          std::string ptx, entry;
          if (hit.kernel) {
            ptx = hit.kernel->ptx;
            entry = hit.kernel->entryName;
            ++loaded;
          } else {
            JitOptions options;
            options.smVersion = k.sm;
            Expected<PtxKernel> fresh = compileToPtx(*k.module, k.program, options);
            if (!fresh) {
              ++failures;
              continue;
            }
            ++compiled;
            ptx = fresh->ptx;
            entry = fresh->entryName;
            CachedKernel c{fresh->entryName, fresh->threads, fresh->sharedBytes, fresh->ptx};
            if (!cache.store(k.key, c).ok() || !cache.store(shared, c).ok())
              ++failures;
          }
          if (ptx != k.reference.ptx || entry != k.reference.entryName)
            ++mismatches;
          DiskCache::Lookup any = cache.load(shared);
          if (any.corrupt)
            ++failures;
        }
      }
    });
  }
  for (std::thread &th : threads)
    th.join();
  CHECK(failures.load() == 0);
  CHECK(mismatches.load() == 0);
  CHECK(compiled.load() + loaded.load() == int(kThreads * kRounds * kernels.size()));
  CHECK(compiled.load() >= int(kernels.size()));
  CHECK(loaded.load() > 0);
  for (const Kernel &k : kernels) {
    DiskCache::Lookup hit = cache.load(k.key);
    REQUIRE(hit.kernel.has_value());
    CHECK(hit.kernel->ptx == k.reference.ptx);
  }
  // Nothing but the entries is left: no temporary file survived a store.
  size_t files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path)) {
    ++files;
    CHECK(entry.path().extension() == ".tvmk");
  }
  CHECK(files == kernels.size() + 1);
}
