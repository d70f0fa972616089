// tilusvm-cache: look after the on-disk kernel cache (vm/cuda/kernel_cache.h).
//
//   tilusvm-cache [--dir DIR] list [--json]          one line per entry, least recently used first
//   tilusvm-cache [--dir DIR] stats [--json]         entries, bytes, the cap, other builds' entries
//   tilusvm-cache [--dir DIR] prune [--max-bytes N]  evict least recently used entries to the cap
//   tilusvm-cache [--dir DIR] clear                  remove every entry and temporary file
//   tilusvm-cache [--dir DIR] export OUTDIR          each entry's PTX into OUTDIR/<entry>.ptx
//   tilusvm-cache [--dir DIR] import PTXDIR          each entry's PTX replaced by
//   PTXDIR/<entry>.ptx
//
// export and import are for experiments with hand-edited PTX: the runtime serves an imported
// entry under its key as it would the JIT's code (docs/runtime.md, "Experiments with edited PTX").
// DIR defaults to the directory the runtime uses (TILUSVM_CACHE_DIR, XDG_CACHE_HOME/tilusvm or
// HOME/.cache/tilusvm); the cap to TILUSVM_CACHE_MAX_BYTES. A directory that does not exist is
// an empty cache. Exit status: 0 success; 1 the directory cannot be read, a file cannot be
// removed or written, or import found nothing to replace or an empty PTX file; 2 a usage error
// (unknown command or option, a bad byte count, no directory known).
#include "jit/jit.h"
#include "tools/tool_main.h"
#include "vm/cuda/kernel_cache.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#ifndef TILUSVM_VERSION
#define TILUSVM_VERSION "unknown"
#endif

namespace {

using namespace tilus;
using namespace tilus::cuda;
using json = nlohmann::ordered_json;

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int usageError(const std::string &message) {
  std::cerr << "tilusvm-cache: " << message << "\nRun with --help for more information.\n";
  return kExitUsage;
}

int ioError(const Status &status) {
  std::cerr << "tilusvm-cache: error[io]: " << status.first().message << "\n";
  return kExitError;
}

std::string utcTime(std::filesystem::file_time_type t) {
  std::time_t seconds = std::chrono::system_clock::to_time_t(
      std::chrono::time_point_cast<std::chrono::seconds>(std::chrono::file_clock::to_sys(t)));
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024 && unit < 4) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, units[unit]);
  return text;
}

/// The value of `name=` in a key's text ("" when absent).
std::string keyField(const std::string &keyText, const std::string &name) {
  std::string needle = " " + name + "=";
  size_t at = keyText.find(needle);
  if (at == std::string::npos)
    return "";
  size_t start = at + needle.size();
  return keyText.substr(start, keyText.find(' ', start) - start);
}

/// What one file of the cache holds, read and verified.
struct Described {
  DiskCache::File file;
  bool corrupt = false;
  std::string reason; // why it is corrupt
  std::string keyText;
  std::string entryName;
  bool currentBuild = false;          // compiled by this library build (same compiler version)
  std::optional<CachedKernel> kernel; // the entry's contents, when asked for (export, import)
};

Described describe(const DiskCache::File &file, bool withKernel) {
  Described d;
  d.file = file;
  if (file.temporary)
    return d;
  std::ifstream in(file.path, std::ios::binary);
  std::vector<uint8_t> bytes;
  if (file.bytes <= kMaxCacheEntryBytes) {
    bytes.resize(size_t(file.bytes));
    in.read(reinterpret_cast<char *>(bytes.data()), std::streamsize(bytes.size()));
  }
  if (!in || file.bytes > kMaxCacheEntryBytes) {
    d.corrupt = true;
    d.reason = file.bytes > kMaxCacheEntryBytes ? "too large" : "cannot be read";
    return d;
  }
  Expected<CacheEntryInfo> info = inspectCacheEntry(bytes);
  if (!info.ok()) {
    d.corrupt = true;
    d.reason = info.status().first().message;
    return d;
  }
  d.keyText = info->keyText;
  d.entryName = info->kernel.entryName;
  if (withKernel)
    d.kernel = std::move(info->kernel);
  d.currentBuild = d.keyText.find(std::string(" compiler=") + JitOptions::compilerVersion() +
                                  " ptx=") != std::string::npos;
  return d;
}

Expected<std::vector<Described>> describeAll(const DiskCache &cache, bool withKernels = false) {
  Expected<std::vector<DiskCache::File>> files = cache.files();
  if (!files.ok())
    return files.takeStatus();
  std::vector<Described> all;
  for (const DiskCache::File &f : *files)
    all.push_back(describe(f, withKernels));
  return all;
}

int listMode(const DiskCache &cache, bool asJson) {
  auto all = describeAll(cache);
  if (!all.ok())
    return ioError(all.status());
  json entries = json::array();
  for (const Described &d : *all) {
    if (asJson) {
      json e = {{"file", d.file.path.filename().string()},
                {"bytes", d.file.bytes},
                {"last_used", utcTime(d.file.lastUsed)}};
      if (d.file.temporary) {
        e["temporary"] = true;
      } else if (d.corrupt) {
        e["corrupt"] = d.reason;
      } else {
        e["program"] = keyField(d.keyText, "program");
        e["module"] = keyField(d.keyText, "module");
        e["ptx"] = keyField(d.keyText, "ptx");
        e["device"] = keyField(d.keyText, "device");
        e["entry"] = d.entryName;
        e["current_build"] = d.currentBuild;
        e["key"] = d.keyText;
      }
      entries.push_back(e);
      continue;
    }
    std::cout << utcTime(d.file.lastUsed) << "  " << std::setw(10) << humanBytes(d.file.bytes)
              << "  " << d.file.path.filename().string() << "  ";
    if (d.file.temporary)
      std::cout << "temporary file of a store";
    else if (d.corrupt)
      std::cout << "corrupt: " << d.reason;
    else
      std::cout << keyField(d.keyText, "program") << " (module " << keyField(d.keyText, "module")
                << ", " << keyField(d.keyText, "ptx") << ", device "
                << keyField(d.keyText, "device") << (d.currentBuild ? "" : ", another build")
                << ")";
    std::cout << "\n";
  }
  if (asJson)
    std::cout << json{{"directory", cache.directory()}, {"entries", entries}}.dump(2) << "\n";
  else if (all->empty())
    std::cout << "(no entries in " << cache.directory() << ")\n";
  return kExitOk;
}

int statsMode(const DiskCache &cache, bool asJson) {
  auto all = describeAll(cache);
  if (!all.ok())
    return ioError(all.status());
  uint64_t entries = 0, bytes = 0, otherBuild = 0, otherBuildBytes = 0, corrupt = 0,
           temporaries = 0, temporaryBytes = 0;
  std::string oldest, newest;
  for (const Described &d : *all) {
    if (d.file.temporary) {
      ++temporaries;
      temporaryBytes += d.file.bytes;
      continue;
    }
    ++entries;
    bytes += d.file.bytes;
    if (d.corrupt)
      ++corrupt;
    else if (!d.currentBuild) {
      ++otherBuild;
      otherBuildBytes += d.file.bytes;
    }
    if (oldest.empty())
      oldest = utcTime(d.file.lastUsed);
    newest = utcTime(d.file.lastUsed);
  }
  if (asJson) {
    std::cout << json{{"directory", cache.directory()},
                      {"entries", entries},
                      {"bytes", bytes},
                      {"max_bytes", cache.maxBytes()},
                      {"other_build_entries", otherBuild},
                      {"other_build_bytes", otherBuildBytes},
                      {"corrupt_entries", corrupt},
                      {"temporary_files", temporaries},
                      {"temporary_bytes", temporaryBytes},
                      {"least_recently_used", oldest},
                      {"most_recently_used", newest},
                      {"build", JitOptions::compilerVersion()}}
                     .dump(2)
              << "\n";
    return kExitOk;
  }
  std::cout << "directory:   " << cache.directory() << "\n"
            << "entries:     " << entries << " (" << humanBytes(bytes) << ", " << bytes
            << " bytes)\n"
            << "cap:         "
            << (cache.maxBytes() == 0 ? std::string("none")
                                      : humanBytes(cache.maxBytes()) + " (" +
                                            std::to_string(cache.maxBytes()) + " bytes)")
            << "\n"
            << "other build: " << otherBuild << " entries (" << humanBytes(otherBuildBytes)
            << "), never used by this build\n"
            << "corrupt:     " << corrupt << " entries\n"
            << "temporaries: " << temporaries << " files (" << humanBytes(temporaryBytes) << ")\n";
  if (entries > 0)
    std::cout << "last used:   " << oldest << " (least recent) to " << newest << "\n";
  std::cout << "this build:  " << JitOptions::compilerVersion() << "\n";
  return kExitOk;
}

/// The file an entry's PTX goes to or comes from: OUTDIR/<entry file without .tvmk>.ptx.
std::filesystem::path ptxPath(const std::string &dir, const Described &d) {
  return std::filesystem::path(dir) / (d.file.path.stem().string() + ".ptx");
}

int exportMode(const DiskCache &cache, const std::string &outDir) {
  auto all = describeAll(cache, true);
  if (!all.ok())
    return ioError(all.status());
  std::error_code ec;
  std::filesystem::create_directories(outDir, ec);
  if (ec)
    return ioError(Status::error(ErrorCode::Io, "cannot create " + outDir + ": " + ec.message()));
  int exported = 0;
  for (const Described &d : *all) {
    if (d.file.temporary || d.corrupt)
      continue;
    std::filesystem::path out = ptxPath(outDir, d);
    std::ofstream file(out, std::ios::binary | std::ios::trunc);
    file << d.kernel->ptx;
    file.flush();
    if (!file)
      return ioError(Status::error(ErrorCode::Io, "cannot write " + out.string()));
    std::cout << d.file.path.filename().string() << "  " << keyField(d.keyText, "program")
              << "  -> " << out.string() << "\n";
    ++exported;
  }
  std::cout << "exported the PTX of " << exported << " entries to " << outDir << "\n";
  return kExitOk;
}

int importMode(const DiskCache &cache, const std::string &ptxDir) {
  auto all = describeAll(cache, true);
  if (!all.ok())
    return ioError(all.status());
  std::error_code ec;
  if (!std::filesystem::is_directory(ptxDir, ec))
    return ioError(Status::error(ErrorCode::Io, ptxDir + " is not a directory"));
  int replaced = 0;
  for (const Described &d : *all) {
    if (d.file.temporary || d.corrupt)
      continue;
    std::filesystem::path in = ptxPath(ptxDir, d);
    if (!std::filesystem::exists(in, ec))
      continue;
    std::ifstream file(in, std::ios::binary);
    std::string ptx{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    if (!file.good() && !file.eof())
      return ioError(Status::error(ErrorCode::Io, "cannot read " + in.string()));
    if (ptx.empty())
      return ioError(Status::error(ErrorCode::Io, in.string() + " is empty; " +
                                                      d.file.path.filename().string() +
                                                      " left as it was"));
    CachedKernel kernel = *d.kernel;
    kernel.ptx = ptx;
    Status written = cache.writeEntry(d.file.path.filename().string(), d.keyText, kernel);
    if (!written.ok())
      return ioError(written);
    std::cout << "replaced " << d.file.path.filename().string() << "  "
              << keyField(d.keyText, "program") << "  (" << ptx.size() << " bytes of PTX from "
              << in.string() << ")\n";
    ++replaced;
  }
  if (replaced == 0)
    return ioError(Status::error(ErrorCode::Io, "no entry of " + cache.directory() +
                                                    " has a .ptx file in " + ptxDir));
  std::cout << "replaced the PTX of " << replaced << " entries\n";
  return kExitOk;
}

void printRemoved(const char *verb, const DiskCache::Removed &r) {
  std::cout << verb << " " << r.entries << " entries and " << r.temporaries << " temporary files ("
            << humanBytes(r.bytes) << ")\n";
}

} // namespace

static int runMain(int argc, char **argv) {
  CLI::App app{"List, summarise, prune, clear, export and import the Tilus VM kernel cache.",
               "tilusvm-cache"};
  app.set_version_flag("--version", std::string("tilusvm-cache ") + TILUSVM_VERSION + " (" +
                                        JitOptions::compilerVersion() + ")");
  app.require_subcommand(1);
  std::string dir;
  bool asJson = false;
  std::string maxBytesText;
  app.add_option("--dir", dir,
                 "cache directory (default: TILUSVM_CACHE_DIR, XDG_CACHE_HOME/tilusvm or "
                 "HOME/.cache/tilusvm)");
  CLI::App *list = app.add_subcommand("list", "one line per entry, least recently used first");
  list->add_flag("--json", asJson, "print JSON");
  CLI::App *stats = app.add_subcommand("stats", "entries, bytes, the cap, other builds' entries");
  stats->add_flag("--json", asJson, "print JSON");
  CLI::App *prune = app.add_subcommand(
      "prune", "remove least recently used entries until the rest fit the cap, and stale "
               "temporary files");
  prune->add_option("--max-bytes", maxBytesText,
                    "the cap, e.g. 500M (default: TILUSVM_CACHE_MAX_BYTES, else 1G; 0 = none)");
  CLI::App *clear = app.add_subcommand("clear", "remove every entry and temporary file");
  std::string outDir, ptxDir;
  CLI::App *exportCmd =
      app.add_subcommand("export", "write each entry's PTX to OUTDIR/<entry>.ptx (for "
                                   "experiments with edited PTX; import puts it back)");
  exportCmd->add_option("OUTDIR", outDir, "directory for the .ptx files (created)")->required();
  CLI::App *importCmd = app.add_subcommand(
      "import", "replace the PTX of every entry that has PTXDIR/<entry>.ptx by that file, under "
                "the same key (the runtime then loads the edited PTX)");
  importCmd->add_option("PTXDIR", ptxDir, "directory of .ptx files named as export names them")
      ->required();
  if (std::optional<int> exitCode = tilus::tools::parseCommandLine(app, argc, argv, usageError))
    return *exitCode;
  if (dir.empty()) {
    std::optional<std::string> configured = defaultCacheDirectory();
    if (!configured) {
      const char *off = std::getenv("TILUSVM_DISK_CACHE");
      return usageError(off && std::string(off) == "0"
                            ? "the disk cache is off (TILUSVM_DISK_CACHE=0); name one with --dir"
                            : "no cache directory: set TILUSVM_CACHE_DIR or HOME, or use --dir");
    }
    dir = *configured;
  }
  std::error_code ec;
  if (std::filesystem::exists(dir, ec) && !std::filesystem::is_directory(dir, ec)) {
    std::cerr << "tilusvm-cache: error[io]: " << dir << " is not a directory\n";
    return kExitError;
  }
  uint64_t cap = 0;
  if (!maxBytesText.empty()) {
    Expected<uint64_t> parsed = parseCacheBytes(maxBytesText);
    if (!parsed.ok())
      return usageError("--max-bytes: " + parsed.status().first().message);
    cap = *parsed;
  } else {
    Expected<uint64_t> fromEnv = cacheMaxBytesFromEnvironment();
    if (!fromEnv.ok())
      return usageError(fromEnv.status().first().message);
    cap = *fromEnv;
  }
  DiskCache cache(dir, cap);
  if (list->parsed())
    return listMode(cache, asJson);
  if (stats->parsed())
    return statsMode(cache, asJson);
  if (prune->parsed()) {
    auto removed = cache.prune(cap);
    if (!removed.ok())
      return ioError(removed.status());
    printRemoved("removed", *removed);
    return kExitOk;
  }
  if (exportCmd->parsed())
    return exportMode(cache, outDir);
  if (importCmd->parsed())
    return importMode(cache, ptxDir);
  if (clear->parsed()) {
    auto removed = cache.clear();
    if (!removed.ok())
      return ioError(removed.status());
    printRemoved("removed", *removed);
    return kExitOk;
  }
  return usageError("no command");
}

/// The error boundary: nothing escapes as an exception or an abort.
int main(int argc, char **argv) {
  return tilus::tools::guardedMain(runMain, argc, argv, "tilusvm-cache",
                                   "error[io]: out of memory");
}
