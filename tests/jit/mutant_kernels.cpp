// Mutation testing of the JIT on the GPU (scripts/mutate.py --gpu-pack, docs/testing.md): the
// differential test's modules are recorded on the CPU (TILUSVM_DIFF_RECORD_DIR), each JIT mutant
// compiles them here to PTX, and on the GPU an unmutated runtime installs that PTX into a disk
// kernel cache under the keys it would look up itself, so the unmutated test_jit_gpu runs the
// mutant's kernels.
//
//   mutant_kernels compile MODULES_DIR PTX_DIR SM     every program of every MODULES_DIR/*.tbc
//                                                     to PTX_DIR/<module>.<program index>.ptx
//                                                     (+ .meta: entry, threads, shared bytes, sm)
//   mutant_kernels install MODULES_DIR PTX_DIR CACHE  (GPU) store each PTX in the disk cache
//                                                     CACHE under this device's key
#include "isa/bytecode.h"
#include "jit/jit.h"
#include "loader/loader.h"
#include "vm/cuda/kernel_cache.h"
#include "vm/cuda/runtime.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

using namespace tilus;
namespace fs = std::filesystem;

namespace {

std::string readAll(const fs::path &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::vector<fs::path> moduleFiles(const std::string &dir) {
  std::vector<fs::path> files;
  for (const auto &e : fs::directory_iterator(dir))
    if (e.path().extension() == ".tbc")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

Expected<VerifiedModule> loadTbc(const fs::path &path) {
  std::string bytes = readAll(path);
  return loadModule(
      std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
}

int fail(const std::string &message) {
  std::cerr << "mutant_kernels: " << message << "\n";
  return 1;
}

int compile(const std::string &modules, const std::string &out, int sm) {
  fs::create_directories(out);
  int kernels = 0, failures = 0;
  for (const fs::path &file : moduleFiles(modules)) {
    Expected<VerifiedModule> vm = loadTbc(file);
    if (!vm)
      return fail(file.string() + ": " + vm.status().toString());
    for (size_t i = 0; i < vm->module.programs.size(); ++i) {
      std::string stem = (fs::path(out) / file.stem()).string() + "." + std::to_string(i);
      JitOptions options;
      options.smVersion = sm;
      Expected<PtxKernel> kernel = compileToPtx(*vm, i, options);
      if (!kernel) { // a mutant may break the compiler: no PTX, the GPU run then compiles
        ++failures;
        std::cerr << file.string() << " program " << i << ": " << kernel.status().toString()
                  << "\n";
        continue;
      }
      std::ofstream(stem + ".ptx", std::ios::binary) << kernel->ptx;
      std::ofstream(stem + ".meta") << kernel->entryName << " " << kernel->threads << " "
                                    << kernel->sharedBytes << " " << sm << "\n";
      ++kernels;
    }
  }
  std::cout << kernels << " kernels compiled, " << failures << " failed\n";
  return 0;
}

int install(const std::string &modules, const std::string &ptxDir, const std::string &cache) {
  cuda::RuntimeOptions options;
  options.cacheDirectory = cache;
  auto rt = cuda::CudaRuntime::create(options);
  if (!rt)
    return fail(rt.status().toString());
  cuda::DiskCache disk(cache);
  int installed = 0;
  for (const fs::path &file : moduleFiles(modules)) {
    Expected<VerifiedModule> vm = loadTbc(file);
    if (!vm)
      return fail(file.string() + ": " + vm.status().toString());
    cuda::LoadedModule loaded = cuda::LoadedModule::from(std::move(vm).value());
    for (size_t i = 0; i < loaded.verified.module.programs.size(); ++i) {
      fs::path stem = fs::path(ptxDir) / (file.stem().string() + "." + std::to_string(i));
      if (!fs::exists(stem.string() + ".ptx"))
        continue;
      cuda::CachedKernel kernel;
      int sm = 0;
      std::ifstream(stem.string() + ".meta") >> kernel.entryName >> kernel.threads >>
          kernel.sharedBytes >> sm;
      if (sm != (*rt)->jitOptions().smVersion)
        return fail(stem.string() + ": PTX for sm_" + std::to_string(sm) +
                    ", this device needs sm_" + std::to_string((*rt)->jitOptions().smVersion));
      kernel.ptx = readAll(stem.string() + ".ptx");
      Status stored = disk.store((*rt)->cacheKey(loaded, i), kernel);
      if (!stored.ok())
        return fail(stored.toString());
      ++installed;
    }
  }
  std::cout << installed << " kernels installed in " << cache << "\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> a(argv + 1, argv + argc);
  if (a.size() == 4 && a[0] == "compile") {
    // SM: the compute capability as a number (80, 90), as scripts/mutate.py passes it
    const std::string &sm = a[3];
    if (sm.empty() || sm.size() > 3 || !std::all_of(sm.begin(), sm.end(), ::isdigit)) {
      std::cerr << "mutant_kernels: SM is the compute capability as a number (e.g. 90), not `" << sm
                << "`\n";
      return 2;
    }
    return compile(a[1], a[2], std::stoi(sm));
  }
  if (a.size() == 4 && a[0] == "install")
    return install(a[1], a[2], a[3]);
  std::cerr << "usage: mutant_kernels compile MODULES_DIR PTX_DIR SM\n"
               "       mutant_kernels install MODULES_DIR PTX_DIR CACHE_DIR\n";
  return 2;
}
