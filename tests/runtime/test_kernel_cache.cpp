// Kernel cache keys and the on-disk cache: the key's spelling, the entry format (checked
// against bytes assembled by hand from the documented layout), corruption of every kind being
// rejected and removed, atomic stores, the cache directory's environment rules, and the
// lifecycle: the size cap and its least-recently-used eviction, stale temporary files, clear().
#include "vm/cuda/kernel_cache.h"

#include "test_helpers.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <thread>
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

CachedKernel sampleKernel() { return {"matmul", 128, 49152, ".version 8.0\n.target sm_90a\n"}; }

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
  CHECK(key.text() == "tilusvm-kernel/2 module=00ab00cd00ef0012 program=matmul "
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
  std::vector<uint8_t> expected = {'T', 'V', 'M', 'K', 'C', 'A', 'C', 'H'};
  putLe(expected, 2, 4);
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
  CHECK(hit.kernel->ptx == sampleKernel().ptx);

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

TEST_CASE("a load while another writer replaces the entry reads one whole entry, not a mix") {
  // A store renames a complete file over the entry's path. A load that opened the old file
  // must read it by its own size: taking the size of the path (by then the new file's, which
  // may differ) read a short or long entry and reported it corrupt, and deleted the path.
  TempDir dir;
  DiskCache cache(dir.path.string());
  KernelKey key = sampleKey();
  CachedKernel small = sampleKernel(), large = sampleKernel();
  large.ptx += std::string(4096, ';');
  REQUIRE_OK(cache.store(key, small));
  std::atomic<bool> done{false};
  std::atomic<int> storeFailures{0};
  std::thread writer([&] {
    for (int i = 0; i < 1500; ++i)
      if (!cache.store(key, i % 2 ? large : small).ok())
        ++storeFailures;
    done = true;
  });
  int corrupt = 0, hits = 0;
  while (!done) {
    DiskCache::Lookup hit = cache.load(key);
    corrupt += hit.corrupt ? 1 : 0;
    if (hit.kernel) {
      ++hits;
      CHECK((hit.kernel->ptx == small.ptx || hit.kernel->ptx == large.ptx));
    }
  }
  writer.join();
  CHECK(storeFailures == 0);
  CHECK(corrupt == 0);
  CHECK(hits > 0);
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

namespace {

/// The key of entry `n`: sampleKey() for another program.
KernelKey keyOf(int n) {
  KernelKey key = sampleKey();
  key.program = "p" + std::to_string(n);
  return key;
}

/// Set a file's modification time to `secondsAgo` before now.
void age(const std::string &path, int secondsAgo) {
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() -
                                             std::chrono::seconds(secondsAgo));
}

std::vector<std::string> names(const std::filesystem::path &dir) {
  std::vector<std::string> found;
  for (const auto &e : std::filesystem::directory_iterator(dir))
    found.push_back(e.path().filename().string());
  std::sort(found.begin(), found.end());
  return found;
}

} // namespace

TEST_CASE("byte counts: digits with a power-of-1024 suffix") {
  CHECK(parseCacheBytes("0").value() == 0);
  CHECK(parseCacheBytes("12345").value() == 12345);
  CHECK(parseCacheBytes("1K").value() == 1024);
  CHECK(parseCacheBytes("3kib").value() == 3072);
  CHECK(parseCacheBytes("500M").value() == 500ull * 1048576);
  CHECK(parseCacheBytes("2GB").value() == 2147483648ull);
  CHECK(parseCacheBytes("1T").value() == 1099511627776ull);
  CHECK(parseCacheBytes("18446744073709551615").value() == UINT64_MAX);
  CHECK_ERROR(parseCacheBytes("18446744073709551616"), ErrorCode::Usage);
  CHECK_ERROR(parseCacheBytes("16777216T"), ErrorCode::Usage); // 2^64 bytes
  CHECK_ERROR(parseCacheBytes(""), ErrorCode::Usage);
  CHECK_ERROR(parseCacheBytes("-1"), ErrorCode::Usage);
  CHECK_ERROR(parseCacheBytes("1.5G"), ErrorCode::Usage);
  CHECK_ERROR(parseCacheBytes("10X"), ErrorCode::Usage);
  CHECK(parseCacheBytes("10X").status().first().message.find("unknown suffix 'X'") !=
        std::string::npos);
}

TEST_CASE("the size cap comes from TILUSVM_CACHE_MAX_BYTES") {
  const char *old = std::getenv("TILUSVM_CACHE_MAX_BYTES");
  std::optional<std::string> saved = old ? std::optional<std::string>(old) : std::nullopt;
  ::unsetenv("TILUSVM_CACHE_MAX_BYTES");
  CHECK(cacheMaxBytesFromEnvironment().value() == (1ull << 30));
  ::setenv("TILUSVM_CACHE_MAX_BYTES", "64M", 1);
  CHECK(cacheMaxBytesFromEnvironment().value() == 64ull << 20);
  ::setenv("TILUSVM_CACHE_MAX_BYTES", "0", 1);
  CHECK(cacheMaxBytesFromEnvironment().value() == 0);
  ::setenv("TILUSVM_CACHE_MAX_BYTES", "lots", 1);
  auto bad = cacheMaxBytesFromEnvironment();
  CHECK_ERROR(bad, ErrorCode::Usage);
  CHECK(bad.status().first().message.rfind("TILUSVM_CACHE_MAX_BYTES: ", 0) == 0);
  if (saved)
    ::setenv("TILUSVM_CACHE_MAX_BYTES", saved->c_str(), 1);
  else
    ::unsetenv("TILUSVM_CACHE_MAX_BYTES");
}

TEST_CASE("a hit marks the entry as used now") {
  TempDir dir;
  DiskCache cache(dir.path.string(), 0);
  REQUIRE_OK(cache.store(sampleKey(), sampleKernel()));
  std::string path = cache.entryPath(sampleKey());
  age(path, 3600);
  auto before = std::filesystem::last_write_time(path);
  REQUIRE(cache.load(sampleKey()).kernel.has_value());
  auto after = std::filesystem::last_write_time(path);
  CHECK(after - before > std::chrono::seconds(3500));
  // A miss touches nothing.
  CHECK_FALSE(cache.load(keyOf(7)).kernel.has_value());
}

TEST_CASE("stores evict the least recently used entries down to the cap") {
  TempDir dir;
  // Every entry of sampleKernel() with a 2-character program name has the same size.
  uint64_t entryBytes = encodeCacheEntry(keyOf(1).text(), sampleKernel()).size();
  DiskCache cache(dir.path.string(), 3 * entryBytes); // room for three
  for (int n = 1; n <= 3; ++n)
    REQUIRE_OK(cache.store(keyOf(n), sampleKernel()));
  // Last use: p1 10 s ago, p2 30 s ago, p3 20 s ago; then p1 is hit (now).
  age(cache.entryPath(keyOf(1)), 10);
  age(cache.entryPath(keyOf(2)), 30);
  age(cache.entryPath(keyOf(3)), 20);
  REQUIRE(cache.load(keyOf(1)).kernel.has_value());
  // A fourth entry pushes out the least recently used one, p2.
  REQUIRE_OK(cache.store(keyOf(4), sampleKernel()));
  CHECK(std::filesystem::exists(cache.entryPath(keyOf(1))));
  CHECK_FALSE(std::filesystem::exists(cache.entryPath(keyOf(2))));
  CHECK(std::filesystem::exists(cache.entryPath(keyOf(3))));
  CHECK(std::filesystem::exists(cache.entryPath(keyOf(4))));
  // files() lists least recently used first: p3 (20 s ago), then p1 and p4 (now).
  auto listed = cache.files();
  REQUIRE_OK(listed);
  REQUIRE(listed->size() == 3);
  CHECK((*listed)[0].path.filename() == keyOf(3).fileName());
  CHECK((*listed)[0].bytes == entryBytes);

  // A cap smaller than one entry keeps only the entry just stored.
  DiskCache tiny(dir.path.string(), 1);
  REQUIRE_OK(tiny.store(keyOf(5), sampleKernel()));
  CHECK(names(dir.path) == std::vector<std::string>{keyOf(5).fileName()});
  // No cap: nothing is evicted.
  DiskCache unlimited(dir.path.string(), 0);
  for (int n = 1; n <= 4; ++n)
    REQUIRE_OK(unlimited.store(keyOf(n), sampleKernel()));
  CHECK(names(dir.path).size() == 5);
}

TEST_CASE("prune removes stale temporary files, keeps fresh ones and foreign files") {
  TempDir dir;
  DiskCache cache(dir.path.string(), 0);
  REQUIRE_OK(cache.store(sampleKey(), sampleKernel()));
  std::string entry = sampleKey().fileName();
  std::string stale = (dir.path / (entry + ".tmp.123.abcd1234.0")).string();
  std::string fresh = (dir.path / (entry + ".tmp.456.abcd1234.1")).string();
  std::string foreign = (dir.path / "notes.txt").string();
  writeAll(stale, std::vector<uint8_t>(100, 1));
  writeAll(fresh, std::vector<uint8_t>(50, 1));
  writeAll(foreign, {1, 2, 3});
  age(stale, 3600); // an hour: its process died between write and rename
  auto removed = cache.prune(0);
  REQUIRE_OK(removed);
  CHECK(removed->entries == 0);
  CHECK(removed->temporaries == 1);
  CHECK(removed->bytes == 100);
  std::vector<std::string> expected = {entry, entry + ".tmp.456.abcd1234.1", "notes.txt"};
  std::sort(expected.begin(), expected.end());
  CHECK(names(dir.path) == expected);

  // clear() removes every entry and temporary file, never other files.
  auto cleared = cache.clear();
  REQUIRE_OK(cleared);
  CHECK(cleared->entries == 1);
  CHECK(cleared->temporaries == 1);
  CHECK(names(dir.path) == std::vector<std::string>{"notes.txt"});
  // A directory that does not exist is an empty cache.
  DiskCache missing((dir.path / "absent").string());
  REQUIRE_OK(missing.files());
  CHECK(missing.files()->empty());
  CHECK(missing.clear().value().entries == 0);
}

TEST_CASE("inspectCacheEntry reads any entry's key; decodeCacheEntry still compares it") {
  std::string keyText = sampleKey().text();
  std::vector<uint8_t> bytes = encodeCacheEntry(keyText, sampleKernel());
  auto info = inspectCacheEntry(bytes);
  REQUIRE_OK(info);
  CHECK(info->keyText == keyText);
  CHECK(info->kernel.sharedBytes == 49152);
  CHECK_ERROR(decodeCacheEntry(bytes, keyOf(9).text()), ErrorCode::Io);
  bytes[40] ^= 1;
  CHECK_ERROR(inspectCacheEntry(bytes), ErrorCode::Io);
}
