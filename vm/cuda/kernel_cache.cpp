// The kernel cache's keys and its on-disk form.
//
// Compiling a program (LLVM to PTX, then the driver's PTX compiler to machine code) takes far
// longer than a launch, and a serving engine restarts often; so compiled kernels are kept on disk,
// named by a hash of everything that decides their code. A file there is input like any other:
// it is read defensively and verified (size, hash, the full key) before it is trusted, and one
// that fails is deleted and recompiled. Writes go to a temporary file that is renamed into
// place, so readers in other processes see either the old entry or the new one, never half.
#include "vm/cuda/kernel_cache.h"

#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <thread>
#include <unistd.h>

namespace tilus::cuda {
namespace {

constexpr char kMagic[8] = {'T', 'V', 'M', 'K', 'C', 'A', 'C', 'H'};
constexpr size_t kHeaderBytes = 8 + 4 + 4 + 8 + 8;

std::string smName(int version, bool archSpecific) {
  std::string name = "sm_" + std::to_string(version);
  if (archSpecific && version >= 90)
    name += "a";
  return name;
}

std::string hex16(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

void putU32(std::vector<uint8_t> &out, uint32_t v) {
  for (int i = 0; i < 4; ++i)
    out.push_back(uint8_t(v >> (8 * i)));
}
void putU64(std::vector<uint8_t> &out, uint64_t v) {
  for (int i = 0; i < 8; ++i)
    out.push_back(uint8_t(v >> (8 * i)));
}
void putString(std::vector<uint8_t> &out, const std::string &s) {
  putU64(out, s.size());
  out.insert(out.end(), s.begin(), s.end());
}

/// Bounds-checked little-endian reader over the payload.
class Reader {
public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}
  bool u32(uint32_t &v) {
    uint64_t w = 0;
    if (!raw(4, w))
      return false;
    v = uint32_t(w);
    return true;
  }
  bool u64(uint64_t &v) { return raw(8, v); }
  bool string(std::string &s) {
    uint64_t n = 0;
    if (!u64(n) || n > bytes_.size() - pos_)
      return false;
    s.assign(reinterpret_cast<const char *>(bytes_.data() + pos_), size_t(n));
    pos_ += size_t(n);
    return true;
  }
  bool atEnd() const { return pos_ == bytes_.size(); }

private:
  bool raw(size_t n, uint64_t &v) {
    if (n > bytes_.size() - pos_)
      return false;
    v = 0;
    for (size_t i = 0; i < n; ++i)
      v |= uint64_t(bytes_[pos_ + i]) << (8 * i);
    pos_ += n;
    return true;
  }
  std::span<const uint8_t> bytes_;
  size_t pos_ = 0;
};

Status corrupt(std::string why) { return Status::error(ErrorCode::Io, std::move(why)); }

uint64_t readU64(const uint8_t *p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i)
    v |= uint64_t(p[i]) << (8 * i);
  return v;
}

/// A name for a temporary file that no other thread or process uses at the same time.
std::string temporaryName(const std::string &finalName) {
  static std::atomic<uint64_t> counter{0};
  uint64_t thread = std::hash<std::thread::id>()(std::this_thread::get_id());
  return finalName + ".tmp." + std::to_string(::getpid()) + "." + hex16(thread).substr(8) + "." +
         std::to_string(counter.fetch_add(1));
}

/// DIR/<16 hex digits>.tvmk
bool isEntryName(const std::string &name) {
  if (name.size() != 16 + 5 || name.compare(16, 5, ".tvmk") != 0)
    return false;
  return std::all_of(name.begin(), name.begin() + 16,
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

/// What temporaryName() makes of an entry name: <entry>.tmp.<anything>.
bool isTemporaryName(const std::string &name) {
  return name.size() > 21 + 5 && isEntryName(name.substr(0, 21)) &&
         name.compare(21, 5, ".tmp.") == 0;
}

} // namespace

std::string KernelKey::text() const {
  return "tilusvm-kernel/" + std::to_string(kCacheFormatVersion) + " module=" + hex16(moduleHash) +
         " program=" + program + " compiler=" + compilerVersion +
         " ptx=" + smName(ptxTarget, true) + " device=" + smName(deviceArch, false) + " O" +
         std::to_string(optLevel) + " driver=" + std::to_string(driverVersion) +
         (specialization.empty() ? "" : " spec=" + specialization);
}

uint64_t KernelKey::hash() const {
  std::string t = text();
  return XXH3_64bits(t.data(), t.size());
}

std::string KernelKey::fileName() const { return hex16(hash()) + ".tvmk"; }

std::vector<uint8_t> encodeCacheEntry(const std::string &keyText, const CachedKernel &kernel) {
  std::vector<uint8_t> payload;
  putString(payload, keyText);
  putString(payload, kernel.entryName);
  putU32(payload, kernel.threads);
  putU64(payload, uint64_t(kernel.sharedBytes));
  putString(payload, kernel.ptx);
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  putU32(out, kCacheFormatVersion);
  putU32(out, 0);
  putU64(out, payload.size());
  putU64(out, XXH3_64bits(payload.data(), payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

Expected<CacheEntryInfo> inspectCacheEntry(std::span<const uint8_t> bytes) {
  if (bytes.size() < kHeaderBytes)
    return corrupt("entry of " + std::to_string(bytes.size()) + " bytes is shorter than its " +
                   std::to_string(kHeaderBytes) + "-byte header");
  if (std::memcmp(bytes.data(), kMagic, 8) != 0)
    return corrupt("entry does not start with TVMKCACH");
  uint64_t versionWord = readU64(bytes.data() + 8);
  uint32_t version = uint32_t(versionWord & 0xffffffffu);
  if (version != kCacheFormatVersion)
    return corrupt("entry format version " + std::to_string(version) + ", expected " +
                   std::to_string(kCacheFormatVersion));
  if ((versionWord >> 32) != 0)
    return corrupt("entry header's reserved word is not 0");
  uint64_t payloadBytes = readU64(bytes.data() + 16);
  uint64_t expectedHash = readU64(bytes.data() + 24);
  std::span<const uint8_t> payload = bytes.subspan(kHeaderBytes);
  if (payloadBytes != payload.size())
    return corrupt("entry payload is " + std::to_string(payload.size()) + " bytes, header says " +
                   std::to_string(payloadBytes));
  if (XXH3_64bits(payload.data(), payload.size()) != expectedHash)
    return corrupt("entry payload hash mismatch");
  Reader reader(payload);
  CacheEntryInfo info;
  CachedKernel &kernel = info.kernel;
  uint64_t shared = 0;
  if (!reader.string(info.keyText) || !reader.string(kernel.entryName) ||
      !reader.u32(kernel.threads) || !reader.u64(shared) || !reader.string(kernel.ptx) ||
      !reader.atEnd())
    return corrupt("entry fields do not fill the payload exactly");
  kernel.sharedBytes = int64_t(shared);
  if (kernel.entryName.empty() || kernel.ptx.empty() || kernel.threads == 0 ||
      kernel.sharedBytes < 0)
    return corrupt("entry has an empty entry name or PTX, or bad launch facts");
  return info;
}

Expected<CachedKernel> decodeCacheEntry(std::span<const uint8_t> bytes,
                                        const std::string &keyText) {
  Expected<CacheEntryInfo> info = inspectCacheEntry(bytes);
  if (!info.ok())
    return info.takeStatus();
  if (info->keyText != keyText)
    return corrupt("entry holds another key (hash collision)");
  return std::move(info->kernel);
}

Expected<uint64_t> parseCacheBytes(const std::string &text) {
  auto bad = [&](const std::string &why) {
    return Status::error(ErrorCode::Usage, "byte count '" + text + "': " + why +
                                               " (expected digits with an optional K, M, G or "
                                               "T suffix, e.g. 500M)");
  };
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9')
    ++digits;
  if (digits == 0)
    return bad("no digits");
  std::string suffix = text.substr(digits);
  for (char &c : suffix)
    c = char(std::toupper(static_cast<unsigned char>(c)));
  int shift = 0;
  if (suffix.empty() || suffix == "B")
    shift = 0;
  else if (suffix == "K" || suffix == "KB" || suffix == "KIB")
    shift = 10;
  else if (suffix == "M" || suffix == "MB" || suffix == "MIB")
    shift = 20;
  else if (suffix == "G" || suffix == "GB" || suffix == "GIB")
    shift = 30;
  else if (suffix == "T" || suffix == "TB" || suffix == "TIB")
    shift = 40;
  else
    return bad("unknown suffix '" + text.substr(digits) + "'");
  uint64_t value = 0;
  for (size_t i = 0; i < digits; ++i) {
    uint64_t digit = uint64_t(text[i] - '0');
    if (value > (UINT64_MAX - digit) / 10)
      return bad("too large");
    value = value * 10 + digit;
  }
  if (shift > 0 && value > (UINT64_MAX >> shift))
    return bad("too large");
  return value << shift;
}

Expected<uint64_t> cacheMaxBytesFromEnvironment() {
  const char *text = std::getenv("TILUSVM_CACHE_MAX_BYTES");
  if (!text || !*text)
    return kDefaultCacheMaxBytes;
  Expected<uint64_t> bytes = parseCacheBytes(text);
  if (!bytes.ok())
    return Status::error(ErrorCode::Usage,
                         "TILUSVM_CACHE_MAX_BYTES: " + bytes.status().first().message);
  return bytes;
}

std::optional<std::string> defaultCacheDirectory() {
  if (const char *off = std::getenv("TILUSVM_DISK_CACHE"); off && std::string(off) == "0")
    return std::nullopt;
  if (const char *dir = std::getenv("TILUSVM_CACHE_DIR"); dir && *dir)
    return std::string(dir);
  if (const char *xdg = std::getenv("XDG_CACHE_HOME"); xdg && *xdg)
    return std::string(xdg) + "/tilusvm";
  if (const char *home = std::getenv("HOME"); home && *home)
    return std::string(home) + "/.cache/tilusvm";
  return std::nullopt;
}

std::string DiskCache::entryPath(const KernelKey &key) const {
  return directory_ + "/" + key.fileName();
}

DiskCache::Lookup DiskCache::load(const KernelKey &key) const {
  Lookup result;
  if (!enabled())
    return result;
  std::string path = entryPath(key);
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return result;
  std::error_code ec;
  // The size of the file opened, not of the path: another writer may rename a new entry over
  // the path meanwhile (the store is a rename), and the two need not be the same size.
  std::streamoff end = in.tellg();
  in.seekg(0);
  if (end < 0 || !in)
    ec = std::make_error_code(std::errc::io_error);
  uint64_t size = end < 0 ? 0 : uint64_t(end);
  std::vector<uint8_t> bytes;
  if (!ec && size <= kMaxCacheEntryBytes) {
    bytes.resize(size_t(size));
    in.read(reinterpret_cast<char *>(bytes.data()), std::streamsize(size));
    if (uint64_t(in.gcount()) != size)
      ec = std::make_error_code(std::errc::io_error);
  }
  Expected<CachedKernel> decoded =
      ec ? Expected<CachedKernel>(corrupt("entry could not be read: " + ec.message()))
      : size > kMaxCacheEntryBytes
          ? Expected<CachedKernel>(
                corrupt("entry of " + std::to_string(size) + " bytes is too large"))
          : decodeCacheEntry(bytes, key.text());
  if (decoded.ok()) {
    result.kernel = std::move(decoded.value());
    // The time of last use, for least-recently-used eviction. A read-only cache keeps working.
    std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now(), ec);
    return result;
  }
  result.corrupt = true;
  result.reason = decoded.status().first().message;
  std::filesystem::remove(path, ec); // never trusted again; the caller rewrites it
  return result;
}

Status DiskCache::store(const KernelKey &key, const CachedKernel &kernel) const {
  if (!enabled())
    return Status::success();
  TILUSVM_TRY(writeEntry(key.fileName(), key.text(), kernel));
  Expected<Removed> pruned = prune(maxBytes_, key.fileName());
  if (!pruned.ok())
    return pruned.takeStatus();
  return Status::success();
}

Status DiskCache::writeEntry(const std::string &fileName, const std::string &keyText,
                             const CachedKernel &kernel) const {
  if (!enabled())
    return Status::success();
  std::error_code ec;
  std::filesystem::create_directories(directory_, ec);
  if (ec)
    return Status::error(ErrorCode::Io,
                         "cannot create cache directory " + directory_ + ": " + ec.message());
  std::string finalPath = directory_ + "/" + fileName;
  std::string tempPath = temporaryName(finalPath);
  std::vector<uint8_t> bytes = encodeCacheEntry(keyText, kernel);
  {
    std::ofstream out(tempPath, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
    out.flush();
    if (!out) {
      std::filesystem::remove(tempPath, ec);
      return Status::error(ErrorCode::Io, "cannot write cache entry " + tempPath);
    }
  }
  std::filesystem::rename(tempPath, finalPath, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(tempPath, ignored);
    return Status::error(ErrorCode::Io,
                         "cannot rename cache entry into " + finalPath + ": " + ec.message());
  }
  return Status::success();
}

Expected<std::vector<DiskCache::File>> DiskCache::files() const {
  std::vector<File> found;
  if (!enabled())
    return found;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::exists(directory_, ec))
    return found;
  fs::directory_iterator it(directory_, ec);
  if (ec)
    return Status::error(ErrorCode::Io,
                         "cannot read cache directory " + directory_ + ": " + ec.message());
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec)
      return Status::error(ErrorCode::Io,
                           "cannot read cache directory " + directory_ + ": " + ec.message());
    std::string name = it->path().filename().string();
    File file;
    file.path = it->path();
    file.temporary = isTemporaryName(name);
    if (!file.temporary && !isEntryName(name))
      continue;
    std::error_code statError;
    if (!it->is_regular_file(statError))
      continue;
    file.bytes = it->file_size(statError);
    file.lastUsed = it->last_write_time(statError);
    if (statError) // removed by another process since the listing
      continue;
    found.push_back(std::move(file));
  }
  std::sort(found.begin(), found.end(), [](const File &a, const File &b) {
    return a.lastUsed != b.lastUsed ? a.lastUsed < b.lastUsed : a.path < b.path;
  });
  return found;
}

Expected<DiskCache::Removed> DiskCache::prune(uint64_t maxBytes, const std::string &keep,
                                              std::chrono::seconds staleAfter) const {
  Removed removed;
  Expected<std::vector<File>> listed = files();
  if (!listed.ok())
    return listed.takeStatus();
  auto now = std::filesystem::file_time_type::clock::now();
  uint64_t total = 0;
  for (const File &f : *listed)
    if (!f.temporary)
      total += f.bytes;
  auto remove = [&](const File &f) {
    std::error_code ec;
    if (std::filesystem::remove(f.path, ec)) {
      ++(f.temporary ? removed.temporaries : removed.entries);
      removed.bytes += f.bytes;
    }
    return !ec;
  };
  for (const File &f : *listed) { // least recently used first
    if (f.temporary) {
      if (now - f.lastUsed > staleAfter && !remove(f))
        return Status::error(ErrorCode::Io, "cannot remove " + f.path.string());
      continue;
    }
    if (maxBytes == 0 || total <= maxBytes || f.path.filename() == keep)
      continue;
    if (!remove(f))
      return Status::error(ErrorCode::Io, "cannot remove " + f.path.string());
    total -= f.bytes;
  }
  return removed;
}

Expected<DiskCache::Removed> DiskCache::clear() const {
  Removed removed;
  Expected<std::vector<File>> listed = files();
  if (!listed.ok())
    return listed.takeStatus();
  for (const File &f : *listed) {
    std::error_code ec;
    if (std::filesystem::remove(f.path, ec)) {
      ++(f.temporary ? removed.temporaries : removed.entries);
      removed.bytes += f.bytes;
    } else if (ec) {
      return Status::error(ErrorCode::Io, "cannot remove " + f.path.string() + ": " + ec.message());
    }
  }
  return removed;
}

} // namespace tilus::cuda
