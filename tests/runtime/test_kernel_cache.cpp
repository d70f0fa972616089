// Kernel cache keys and the on-disk cache: the key's spelling, the entry format (checked
// against bytes assembled by hand from the documented layout), corruption of every kind being
// rejected and removed, atomic stores, and the cache directory's environment rules.
#include "vm/cuda/kernel_cache.h"

#include "test_helpers.h"

#include <xxhash.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace tilus;
using namespace tilus::cuda;

namespace {

KernelKey sampleKey() {
  KernelKey key;
  key.moduleHash = 0x00ab00cd00ef0012ull;
  key.program = "matmul";
  key.compilerVersion = "tilusvm-jit 0.1.0 llvm 19";
  key.ptxTarget = 90;
  key.deviceArch = 90;
  key.optLevel = 3;
  key.driverVersion = 13000;
  return key;
}

CachedKernel sampleKernel() {
  return {"matmul", 128, 49152, ".version 8.0\n.target sm_90a\n",
          std::string("\x7f"
                      "ELF\0\1",
                      6)};
}

void putLe(std::vector<uint8_t> &out, uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i)
    out.push_back(uint8_t(v >> (8 * i)));
}
void putStr(std::vector<uint8_t> &out, const std::string &s) {
  putLe(out, s.size(), 8);
  out.insert(out.end(), s.begin(), s.end());
}

/// A scratch directory removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("tilusvm_cache_test_" + std::to_string(::getpid()) + "_" +
            std::to_string(reinterpret_cast<uintptr_t>(this)));
    std::filesystem::remove_all(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
};

std::vector<uint8_t> readAll(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void writeAll(const std::string &path, const std::vector<uint8_t> &bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
}

} // namespace

TEST_CASE("the key spells every part that decides the kernel's code") {
  KernelKey key = sampleKey();
  CHECK(key.text() == "tilusvm-kernel/1 module=00ab00cd00ef0012 program=matmul "
                      "compiler=tilusvm-jit 0.1.0 llvm 19 ptx=sm_90a device=sm_90 O3 "
                      "driver=13000");
  KernelKey sm80 = key;
  sm80.ptxTarget = 80;
  sm80.deviceArch = 86;
  CHECK(sm80.text().find("ptx=sm_80 device=sm_86") != std::string::npos);
  std::string text = key.text();
  CHECK(key.hash() == XXH3_64bits(text.data(), text.size()));
  char expected[32];
  std::snprintf(expected, sizeof expected, "%016llx.tvmk",
                static_cast<unsigned long long>(key.hash()));
  CHECK(key.fileName() == expected);
  // Any change of any part changes the key.
  KernelKey other = key;
  other.program = "matmul2";
  CHECK(other.hash() != key.hash());
  other = key;
  other.driverVersion = 12080;
  CHECK(other.hash() != key.hash());
  other = key;
  other.optLevel = 2;
  CHECK(other.hash() != key.hash());
  other = key;
  other.moduleHash ^= 1;
  CHECK(other.hash() != key.hash());
}

TEST_CASE("entry bytes follow the documented layout") {
  std::string keyText = sampleKey().text();
  CachedKernel k = sampleKernel();
  std::vector<uint8_t> payload;
  putStr(payload, keyText);
  putStr(payload, k.entryName);
  putLe(payload, k.threads, 4);
  putLe(payload, uint64_t(k.sharedBytes), 8);
  putStr(payload, k.ptx);
  putStr(payload, k.cubin);
  std::vector<uint8_t> expected = {'T', 'V', 'M', 'K', 'C', 'A', 'C', 'H'};
  putLe(expected, 1, 4);
  putLe(expected, 0, 4);
  putLe(expected, payload.size(), 8);
  putLe(expected, XXH3_64bits(payload.data(), payload.size()), 8);
  expected.insert(expected.end(), payload.begin(), payload.end());
  CHECK(encodeCacheEntry(keyText, k) == expected);

  auto decoded = decodeCacheEntry(expected, keyText);
  REQUIRE_OK(decoded);
  CHECK(decoded->entryName == "matmul");
  CHECK(decoded->threads == 128);
  CHECK(decoded->sharedBytes == 49152);
  CHECK(decoded->ptx == k.ptx);
  CHECK(decoded->cubin == k.cubin);
}

TEST_CASE("corrupt entries are rejected") {
  std::string keyText = sampleKey().text();
  std::vector<uint8_t> good = encodeCacheEntry(keyText, sampleKernel());
  // Every single-byte change anywhere is caught (header fields or payload hash).
  for (size_t i = 0; i < good.size(); ++i) {
    std::vector<uint8_t> bad = good;
    bad[i] ^= 0x40;
    CHECK_FALSE(decodeCacheEntry(bad, keyText).ok());
  }
  // Every truncation is caught.
  for (size_t n = 0; n < good.size(); ++n)
    CHECK_FALSE(decodeCacheEntry(std::span(good).first(n), keyText).ok());
  // A valid entry for another key (a hash collision) is not this key's kernel.
  CHECK_ERROR(decodeCacheEntry(good, keyText + "x"), ErrorCode::Io);
  // Consistent header and hash, but fields that overrun the payload.
  std::vector<uint8_t> payload;
  putLe(payload, 1000, 8);
  std::vector<uint8_t> overrun = {'T', 'V', 'M', 'K', 'C', 'A', 'C', 'H'};
  putLe(overrun, 1, 4);
  putLe(overrun, 0, 4);
  putLe(overrun, payload.size(), 8);
  putLe(overrun, XXH3_64bits(payload.data(), payload.size()), 8);
  overrun.insert(overrun.end(), payload.begin(), payload.end());
  CHECK_ERROR(decodeCacheEntry(overrun, keyText), ErrorCode::Io);
}

TEST_CASE("the disk cache stores atomically and rejects and removes corrupt files") {
  TempDir dir;
  DiskCache cache((dir.path / "nested" / "cache").string());
  KernelKey key = sampleKey();
  CHECK_FALSE(cache.load(key).kernel.has_value()); // missing directory: a miss
  REQUIRE_OK(cache.store(key, sampleKernel()));
  // Exactly one file: the entry, no temporary left behind.
  int files = 0;
  for (const auto &entry : std::filesystem::directory_iterator(dir.path / "nested" / "cache")) {
    ++files;
    CHECK(entry.path().filename().string() == key.fileName());
  }
  CHECK(files == 1);
  DiskCache::Lookup hit = cache.load(key);
  REQUIRE(hit.kernel.has_value());
  CHECK_FALSE(hit.corrupt);
  CHECK(hit.kernel->cubin == sampleKernel().cubin);

  // Flip one payload byte on disk: the lookup reports corruption and deletes the file.
  std::string path = cache.entryPath(key);
  std::vector<uint8_t> bytes = readAll(path);
  bytes.back() ^= 1;
  writeAll(path, bytes);
  DiskCache::Lookup bad = cache.load(key);
  CHECK_FALSE(bad.kernel.has_value());
  CHECK(bad.corrupt);
  CHECK(bad.reason.find("hash") != std::string::npos);
  CHECK_FALSE(std::filesystem::exists(path));

  // An empty file (a crash before any byte was written) is corrupt too.
  writeAll(path, {});
  CHECK(cache.load(key).corrupt);
  CHECK_FALSE(std::filesystem::exists(path));

  // Storing again replaces whatever is there.
  REQUIRE_OK(cache.store(key, sampleKernel()));
  REQUIRE_OK(cache.store(key, sampleKernel()));
  CHECK(cache.load(key).kernel.has_value());
}

TEST_CASE("a disabled disk cache stores nothing and always misses") {
  DiskCache off("");
  CHECK_FALSE(off.enabled());
  CHECK_OK(off.store(sampleKey(), sampleKernel()));
  CHECK_FALSE(off.load(sampleKey()).kernel.has_value());
}

TEST_CASE("a store into an unwritable place is an io error, not a crash") {
  TempDir dir;
  std::filesystem::create_directories(dir.path);
  writeAll((dir.path / "file").string(), {1});
  DiskCache cache((dir.path / "file" / "sub").string()); // a directory below a regular file
  CHECK_ERROR(cache.store(sampleKey(), sampleKernel()), ErrorCode::Io);
}

TEST_CASE("the cache directory comes from the environment") {
  auto saved = [](const char *name) -> std::optional<std::string> {
    const char *v = std::getenv(name);
    return v ? std::optional<std::string>(v) : std::nullopt;
  };
  auto restore = [](const char *name, const std::optional<std::string> &v) {
    if (v)
      ::setenv(name, v->c_str(), 1);
    else
      ::unsetenv(name);
  };
  auto dirVar = saved("TILUSVM_CACHE_DIR"), xdg = saved("XDG_CACHE_HOME"), home = saved("HOME"),
       flag = saved("TILUSVM_DISK_CACHE");
  ::unsetenv("TILUSVM_DISK_CACHE");
  ::setenv("TILUSVM_CACHE_DIR", "/tmp/a", 1);
  ::setenv("XDG_CACHE_HOME", "/tmp/x", 1);
  ::setenv("HOME", "/tmp/h", 1);
  CHECK(defaultCacheDirectory() == std::optional<std::string>("/tmp/a"));
  ::unsetenv("TILUSVM_CACHE_DIR");
  CHECK(defaultCacheDirectory() == std::optional<std::string>("/tmp/x/tilusvm"));
  ::unsetenv("XDG_CACHE_HOME");
  CHECK(defaultCacheDirectory() == std::optional<std::string>("/tmp/h/.cache/tilusvm"));
  ::unsetenv("HOME");
  CHECK_FALSE(defaultCacheDirectory().has_value());
  ::setenv("TILUSVM_CACHE_DIR", "/tmp/a", 1);
  ::setenv("TILUSVM_DISK_CACHE", "0", 1);
  CHECK_FALSE(defaultCacheDirectory().has_value());
  restore("TILUSVM_CACHE_DIR", dirVar);
  restore("XDG_CACHE_HOME", xdg);
  restore("HOME", home);
  restore("TILUSVM_DISK_CACHE", flag);
}
