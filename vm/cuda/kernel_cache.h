// Compiled-kernel cache keys and the on-disk cache of PTX and cubin.
//
// A kernel is identified by everything that decides its machine code: the content hash of the
// module's canonical bytecode (moduleContentHash), the program's name, the JIT's compiler
// version, the PTX target and the device architecture, the codegen options, and the driver
// version (the driver's PTX compiler makes the cubin). KernelKey::text() spells all of them;
// its 64-bit hash names the file, and the full text is stored inside the entry and compared on
// load, so a hash collision is a miss, never a wrong kernel.
//
// Disk layout: one file per kernel, DIR/<16 hex digits>.tvmk:
//   header  "TVMKCACH" | u32 format version (1) | u32 0 | u64 payload bytes | u64 XXH3-64 of
//   payload payload str key | str entry name | u32 threads | i64 shared bytes | str ptx | str cubin
// (little-endian; str = u64 length + bytes). A file whose size, hash, key or fields do not
// check out is corrupt: load() removes it and reports a miss, and the caller recompiles.
// store() writes a temporary file in DIR and renames it over the entry (atomic on POSIX).
#pragma once

#include "isa/status.h"

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace tilus::cuda {

struct KernelKey {
  uint64_t moduleHash = 0;
  std::string program;
  std::string compilerVersion;
  int ptxTarget = 90;  // JitOptions::smVersion (90 = sm_90a)
  int deviceArch = 90; // compute capability major*10 + minor of the device
  int optLevel = 3;
  int driverVersion = 0;
  std::string specialization; // Specialization::text(), "" for the unspecialised kernel

  /// The canonical spelling, e.g.
  /// "tilusvm-kernel/1 module=00ab.. program=matmul compiler=.. ptx=sm_90a device=sm_90 O3
  /// driver=13000"
  std::string text() const;
  /// XXH3-64 of text().
  uint64_t hash() const;
  /// The file name without directory: 16 lowercase hex digits of hash() + ".tvmk".
  std::string fileName() const;
};

/// What one cache entry holds.
struct CachedKernel {
  std::string entryName;
  uint32_t threads = 0;
  int64_t sharedBytes = 0;
  std::string ptx;
  std::string cubin; // empty when only the PTX is known
};

inline constexpr uint32_t kCacheFormatVersion = 1;
/// Entries larger than this are treated as corrupt (never read whole).
inline constexpr uint64_t kMaxCacheEntryBytes = 512ull << 20;

/// The bytes of an entry file for `keyText`.
std::vector<uint8_t> encodeCacheEntry(const std::string &keyText, const CachedKernel &kernel);
/// Parse and verify an entry file; an error (code `io`) says what is wrong with it.
Expected<CachedKernel> decodeCacheEntry(std::span<const uint8_t> bytes, const std::string &keyText);

/// The cache directory from the environment: $TILUSVM_CACHE_DIR, else
/// $XDG_CACHE_HOME/tilusvm, else $HOME/.cache/tilusvm; nullopt (no disk cache) when
/// TILUSVM_DISK_CACHE=0 or none of those variables is set.
std::optional<std::string> defaultCacheDirectory();

class DiskCache {
public:
  /// A cache in `directory` (created on first store); an empty string disables it.
  explicit DiskCache(std::string directory) : directory_(std::move(directory)) {}

  bool enabled() const { return !directory_.empty(); }
  const std::string &directory() const { return directory_; }
  std::string entryPath(const KernelKey &key) const;

  struct Lookup {
    std::optional<CachedKernel> kernel; // set on a hit
    bool corrupt = false;               // an entry existed but failed verification (removed)
    std::string reason;                 // why it was corrupt
  };
  /// Look the key up. Never fails: a missing or unreadable entry is a miss.
  Lookup load(const KernelKey &key) const;
  /// Write the entry atomically. Errors (code `io`) are for the caller to log; the cache is an
  /// optimisation and a failed store loses nothing.
  Status store(const KernelKey &key, const CachedKernel &kernel) const;

private:
  std::string directory_;
};

} // namespace tilus::cuda
