// Compiled-kernel cache keys and the on-disk cache of the JIT's PTX.
//
// A kernel is identified by everything that decides its machine code: the content hash of the
// module's canonical bytecode (moduleContentHash), the program's name, the JIT's compiler
// version, the PTX target and the device architecture, the codegen options, and the driver
// version (the driver's PTX compiler makes the machine code). KernelKey::text() spells all of them;
// its 64-bit hash names the file, and the full text is stored inside the entry and compared on
// load, so a hash collision is a miss, never a wrong kernel.
//
// Disk layout: one file per kernel, DIR/<16 hex digits>.tvmk:
//   header  "TVMKCACH" | u32 format version (2) | u32 0 | u64 payload bytes | u64 XXH3-64 of
//   payload payload str key | str entry name | u32 threads | i64 shared bytes | str ptx
// The machine code is not stored: the runtime loads the PTX with cuModuleLoadDataEx, whose
// whole-program compilation the driver caches itself (format 1 also stored a cubin from the
// driver's linker, which compiles PTX as relocatable code with more registers).
// (little-endian; str = u64 length + bytes). A file whose size, hash, key or fields do not
// check out is corrupt: load() removes it and reports a miss, and the caller recompiles.
// store() writes a temporary file in DIR (DIR/<entry>.tmp.<pid>.<thread>.<n>) and renames it over
// the entry (atomic on POSIX).
//
// Lifecycle: the directory is capped at maxBytes (TILUSVM_CACHE_MAX_BYTES, default 1 GiB).
// Every hit sets the entry's modification time to now (access times are unreliable under
// noatime/relatime mounts), so the modification time is the time of last use; after each store
// the least recently used entries are removed until the entries fit the cap, the one just
// stored excepted. Temporary files older than kStaleTemporarySeconds (left by a process that
// died between write and rename) are removed by the same sweep. The tilusvm-cache tool lists,
// summarises, prunes and clears a cache directory with the functions below.
#pragma once

#include "isa/status.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
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
  /// "tilusvm-kernel/2 module=00ab.. program=matmul compiler=.. ptx=sm_90a device=sm_90 O3
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
};

inline constexpr uint32_t kCacheFormatVersion = 2;
/// Entries larger than this are treated as corrupt (never read whole).
inline constexpr uint64_t kMaxCacheEntryBytes = 512ull << 20;

/// The bytes of an entry file for `keyText`.
std::vector<uint8_t> encodeCacheEntry(const std::string &keyText, const CachedKernel &kernel);
/// Parse and verify an entry file; an error (code `io`) says what is wrong with it.
Expected<CachedKernel> decodeCacheEntry(std::span<const uint8_t> bytes, const std::string &keyText);

/// What an entry file says about itself, without a key to compare against (for listings).
struct CacheEntryInfo {
  std::string keyText;
  CachedKernel kernel;
};
/// Parse and verify an entry file (size, hash, fields), whatever its key.
Expected<CacheEntryInfo> inspectCacheEntry(std::span<const uint8_t> bytes);

/// The default size cap of a cache directory.
inline constexpr uint64_t kDefaultCacheMaxBytes = 1ull << 30;
/// Temporary files older than this are left over from a process that died mid-store.
inline constexpr int64_t kStaleTemporarySeconds = 600;

/// A byte count: digits with an optional suffix K, M, G or T (also KB/KiB..., powers of 1024),
/// e.g. "500M". An error (code `usage`) says what is wrong with `text`.
Expected<uint64_t> parseCacheBytes(const std::string &text);
/// The cap from $TILUSVM_CACHE_MAX_BYTES (0 = no cap), kDefaultCacheMaxBytes when unset or
/// empty; an unparsable value is an error (code `usage`) naming the variable.
Expected<uint64_t> cacheMaxBytesFromEnvironment();

/// The cache directory from the environment: $TILUSVM_CACHE_DIR, else
/// $XDG_CACHE_HOME/tilusvm, else $HOME/.cache/tilusvm; nullopt (no disk cache) when
/// TILUSVM_DISK_CACHE=0 or none of those variables is set.
std::optional<std::string> defaultCacheDirectory();

class DiskCache {
public:
  /// A cache in `directory` (created on first store); an empty string disables it. maxBytes
  /// caps the entries' total size (0 = no cap).
  explicit DiskCache(std::string directory, uint64_t maxBytes = kDefaultCacheMaxBytes)
      : directory_(std::move(directory)), maxBytes_(maxBytes) {}

  bool enabled() const { return !directory_.empty(); }
  const std::string &directory() const { return directory_; }
  uint64_t maxBytes() const { return maxBytes_; }
  std::string entryPath(const KernelKey &key) const;

  struct Lookup {
    std::optional<CachedKernel> kernel; // set on a hit
    bool corrupt = false;               // an entry existed but failed verification (removed)
    std::string reason;                 // why it was corrupt
  };
  /// Look the key up. Never fails: a missing or unreadable entry is a miss. A hit marks the
  /// entry as used now (its modification time).
  Lookup load(const KernelKey &key) const;
  /// Write the entry atomically, then prune() to maxBytes() keeping this entry. Errors (code
  /// `io`) are for the caller to log; the cache is an optimisation and a failed store loses
  /// nothing.
  Status store(const KernelKey &key, const CachedKernel &kernel) const;
  /// Write the entry of key text `keyText` holding `kernel` as file `fileName` of the directory,
  /// atomically (a temporary file renamed over it), without pruning: store() without the key's
  /// parts, for tools that rewrite an entry they read (`tilusvm-cache import`).
  Status writeEntry(const std::string &fileName, const std::string &keyText,
                    const CachedKernel &kernel) const;

  /// One file of the directory: an entry (*.tvmk) or a temporary file of a store.
  struct File {
    std::filesystem::path path;
    uint64_t bytes = 0;
    std::filesystem::file_time_type lastUsed; // modification time
    bool temporary = false;
  };
  /// The entries and temporary files, least recently used first (other files are ignored).
  /// A missing directory has none; an unreadable one is an error (code `io`).
  Expected<std::vector<File>> files() const;

  struct Removed {
    uint64_t entries = 0;
    uint64_t temporaries = 0;
    uint64_t bytes = 0;
  };
  /// Remove the least recently used entries until the rest total at most `maxBytes` (0 = no
  /// cap), never the entry named `keep`, and temporary files older than `staleAfter`.
  /// Files that vanish meanwhile (another process pruning) are not errors.
  Expected<Removed>
  prune(uint64_t maxBytes, const std::string &keep = "",
        std::chrono::seconds staleAfter = std::chrono::seconds(kStaleTemporarySeconds)) const;
  /// Remove every entry and temporary file (other files and the directory stay).
  Expected<Removed> clear() const;

private:
  std::string directory_;
  uint64_t maxBytes_ = kDefaultCacheMaxBytes;
};

} // namespace tilus::cuda
