// Helpers shared by the GPU tests (see gpu_support.h): the tests need one device runtime, the
// library's programs, and device buffers, with every failure reported as a test failure.
#include "gpu_support.h"

#include "assembler/assembler.h"
#include "loader/checker.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <unistd.h>

namespace gpu {

std::string scratchDirectory(const std::string &name) {
  std::filesystem::path path = std::filesystem::temp_directory_path() /
                               ("tilusvm_gpu_" + std::to_string(::getpid()) + "_" + name);
  std::filesystem::remove_all(path);
  std::filesystem::create_directories(path);
  return path.string();
}

tilus::cuda::CudaRuntime &runtime() {
  // Never destroyed: the process exits with the device's work done and no static-destruction
  // order to worry about.
  static tilus::cuda::CudaRuntime *shared = [] {
    tilus::cuda::RuntimeOptions options;
    options.cacheDirectory = scratchDirectory("shared_cache");
    auto created = tilus::cuda::CudaRuntime::create(options);
    REQUIRE_OK(created);
    return created.value().release();
  }();
  return *shared;
}

namespace {

std::string readProgram(const std::string &name) {
  std::vector<std::string> dirs;
  if (const char *env = std::getenv("TILUSVM_PROGRAMS_DIR"))
    dirs.push_back(env);
  dirs.push_back("programs");
  dirs.push_back(std::string(TILUSVM_SOURCE_DIR) + "/programs");
  for (const std::string &dir : dirs) {
    std::ifstream in(dir + "/" + name);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      return text.str();
    }
  }
  FAIL("program file " << name << " not found (set TILUSVM_PROGRAMS_DIR)");
  return {};
}

tilus::cuda::LoadedModule finish(tilus::Expected<tilus::Module> module) {
  REQUIRE_OK(module);
  auto verified = tilus::checkModule(std::move(module.value()));
  REQUIRE_OK(verified);
  return tilus::cuda::LoadedModule::from(std::move(verified.value()));
}

} // namespace

tilus::cuda::LoadedModule loadProgramFile(const std::string &name,
                                          const std::map<std::string, std::string> &defines) {
  tilus::AssembleOptions options;
  options.fileName = name;
  options.defines = defines;
  return finish(tilus::assemble(readProgram(name), options));
}

tilus::cuda::LoadedModule loadProgramText(const std::string &text) {
  return finish(tilus::assemble(text));
}

size_t programIndex(const tilus::cuda::LoadedModule &module, const std::string &name) {
  const auto &programs = module.verified.module.programs;
  for (size_t i = 0; i < programs.size(); ++i)
    if (programs[i].name == name)
      return i;
  FAIL("no program " << name);
  return 0;
}

namespace {
struct Lcg {
  uint32_t state;
  double next() { // uniform in [-1, 1)
    state = state * 1664525u + 1013904223u;
    return double(state >> 8) / double(1u << 23) - 1.0;
  }
};
} // namespace

std::vector<uint16_t> randomHalves(size_t count, uint32_t seed) {
  Lcg lcg{seed};
  std::vector<uint16_t> out(count);
  for (uint16_t &v : out)
    v = uint16_t(tilus::fromDouble(lcg.next(), tilus::DataType::f16()));
  return out;
}

std::vector<float> randomFloats(size_t count, uint32_t seed) {
  Lcg lcg{seed};
  std::vector<float> out(count);
  for (float &v : out)
    v = float(lcg.next());
  return out;
}

} // namespace gpu
