// tilusvm-cache as a user runs it: list, stats, prune and clear over a cache directory filled
// here through DiskCache (entries of this build and of another one, a corrupt entry, a stale
// temporary file), their output and exit codes, and usage errors. The binary's path comes
// from the build (TILUSVM_CACHE_TOOL); $TILUSVM_CACHE_TOOL overrides it.
#include "jit/jit.h"
#include "vm/cuda/kernel_cache.h"

#include "test_helpers.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace tilus;
using namespace tilus::cuda;

namespace {

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

std::string slurp(const std::filesystem::path &p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct CacheDir {
  std::filesystem::path root;
  std::filesystem::path dir;
  CacheDir() {
    root = std::filesystem::temp_directory_path() /
           ("tilusvm_cache_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(root);
    std::filesystem::create_directories(root);
    dir = root / "cache";
  }
  ~CacheDir() { std::filesystem::remove_all(root); }

  /// Run the tool with `args` (and `env` assignments in front), output captured.
  Result run(const std::string &args, const std::string &env = "") const {
    const char *binary = std::getenv("TILUSVM_CACHE_TOOL");
    if (!binary)
      binary = TILUSVM_CACHE_TOOL;
    std::string command = "env -u TILUSVM_CACHE_MAX_BYTES " + env + " " + binary + " " + args +
                          " >" + (root / "out.txt").string() + " 2>" + (root / "err.txt").string();
    Result r;
    int raw = std::system(command.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(root / "out.txt");
    r.err = slurp(root / "err.txt");
    return r;
  }
  std::string dirArg() const { return "--dir " + dir.string(); }
};

KernelKey keyFor(const std::string &program, const std::string &compiler) {
  KernelKey key;
  key.moduleHash = 0x1234;
  key.program = program;
  key.compilerVersion = compiler;
  key.ptxTarget = 80;
  key.deviceArch = 86;
  return key;
}

CachedKernel kernelOf(size_t ptxBytes) { return {"entry", 128, 0, std::string(ptxBytes, 'p')}; }

void age(const std::filesystem::path &path, int secondsAgo) {
  std::filesystem::last_write_time(path, std::filesystem::file_time_type::clock::now() -
                                             std::chrono::seconds(secondsAgo));
}

bool contains(const std::string &text, const std::string &part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_CASE("tilusvm-cache: list, stats, prune and clear") {
  CacheDir c;
  DiskCache cache(c.dir.string(), 0);
  KernelKey mine = keyFor("matmul", JitOptions::compilerVersion());
  KernelKey old = keyFor("softmax", "tilusvm-0.0.1 src-0000000000000000 llvm-18.1.0");
  KernelKey bad = keyFor("broken", JitOptions::compilerVersion());
  REQUIRE_OK(cache.store(mine, kernelOf(1000)));
  REQUIRE_OK(cache.store(old, kernelOf(3000)));
  REQUIRE_OK(cache.store(bad, kernelOf(10)));
  std::filesystem::path badPath = cache.entryPath(bad);
  {
    std::ofstream(badPath, std::ios::binary | std::ios::trunc) << "TVMKCACH garbage";
  }
  std::filesystem::path temp = c.dir / (mine.fileName() + ".tmp.1.2.3");
  {
    std::ofstream(temp, std::ios::binary) << std::string(7, 't');
  }
  age(cache.entryPath(old), 300);
  age(badPath, 100);
  age(temp, 7200);
  uint64_t mineBytes = std::filesystem::file_size(cache.entryPath(mine));
  uint64_t oldBytes = std::filesystem::file_size(cache.entryPath(old));

  Result list = c.run(c.dirArg() + " list");
  REQUIRE(list.status == 0);
  CHECK(contains(list.out, mine.fileName() + "  matmul (module 0000000000001234, sm_80, device "
                                             "sm_86)"));
  CHECK(contains(list.out, old.fileName() + "  softmax (module 0000000000001234, sm_80, device "
                                            "sm_86, another build)"));
  CHECK(contains(list.out, bad.fileName() + "  corrupt: entry of 16 bytes is shorter than its "
                                            "32-byte header"));
  CHECK(contains(list.out, "temporary file of a store"));
  // Least recently used first: the temporary (2 h), the other build's entry (5 min), the
  // corrupt one (100 s), the entry of this build (now).
  CHECK(list.out.find(temp.filename().string()) < list.out.find(old.fileName()));
  CHECK(list.out.find(old.fileName()) < list.out.find(bad.fileName()));
  CHECK(list.out.find(bad.fileName()) < list.out.find(mine.fileName() + "  matmul"));

  Result json = c.run(c.dirArg() + " list --json");
  REQUIRE(json.status == 0);
  auto parsed = nlohmann::json::parse(json.out);
  CHECK(parsed["directory"] == c.dir.string());
  REQUIRE(parsed["entries"].size() == 4);
  CHECK(parsed["entries"][1]["program"] == "softmax");
  CHECK(parsed["entries"][1]["current_build"] == false);
  CHECK(parsed["entries"][1]["bytes"] == oldBytes);
  CHECK(parsed["entries"][1]["key"] == old.text());

  Result stats = c.run(c.dirArg() + " stats --json", "TILUSVM_CACHE_MAX_BYTES=5M");
  REQUIRE(stats.status == 0);
  auto s = nlohmann::json::parse(stats.out);
  CHECK(s["entries"] == 3);
  CHECK(s["bytes"] == mineBytes + oldBytes + 16);
  CHECK(s["max_bytes"] == 5 * 1048576);
  CHECK(s["other_build_entries"] == 1);
  CHECK(s["other_build_bytes"] == oldBytes);
  CHECK(s["corrupt_entries"] == 1);
  CHECK(s["temporary_files"] == 1);
  CHECK(s["temporary_bytes"] == 7);
  CHECK(s["build"] == JitOptions::compilerVersion());
  Result text = c.run(c.dirArg() + " stats");
  REQUIRE(text.status == 0);
  CHECK(contains(text.out, "entries:     3 ("));
  CHECK(contains(text.out, "cap:         1.0 GiB (1073741824 bytes)"));

  // Prune to the size of the newest entry: the least recently used entries go until the rest
  // fit (the other build's, then the corrupt one), and so does the stale temporary file.
  Result prune = c.run(c.dirArg() + " prune --max-bytes " + std::to_string(mineBytes));
  REQUIRE(prune.status == 0);
  CHECK(contains(prune.out, "removed 2 entries and 1 temporary files"));
  CHECK(std::filesystem::exists(cache.entryPath(mine)));
  CHECK_FALSE(std::filesystem::exists(cache.entryPath(old)));
  CHECK_FALSE(std::filesystem::exists(temp));

  Result clear = c.run(c.dirArg() + " clear");
  REQUIRE(clear.status == 0);
  CHECK(contains(clear.out, "removed 1 entries and 0 temporary files"));
  CHECK(std::filesystem::is_empty(c.dir));
  Result empty = c.run(c.dirArg() + " list");
  CHECK(empty.status == 0);
  CHECK(contains(empty.out, "(no entries in " + c.dir.string() + ")"));
}

TEST_CASE("tilusvm-cache: usage errors exit 2, io errors exit 1") {
  CacheDir c;
  Result none = c.run("");
  CHECK(none.status == 2);
  CHECK(contains(none.err, "tilusvm-cache: "));
  CHECK(c.run(c.dirArg() + " frobnicate").status == 2);
  Result cap = c.run(c.dirArg() + " prune --max-bytes 12Q");
  CHECK(cap.status == 2);
  CHECK(contains(cap.err, "--max-bytes: byte count '12Q': unknown suffix 'Q'"));
  Result envCap = c.run(c.dirArg() + " stats", "TILUSVM_CACHE_MAX_BYTES=big");
  CHECK(envCap.status == 2);
  CHECK(contains(envCap.err, "TILUSVM_CACHE_MAX_BYTES: byte count 'big'"));
  Result off = c.run("list", "-u TILUSVM_CACHE_DIR TILUSVM_DISK_CACHE=0");
  CHECK(off.status == 2);
  CHECK(contains(off.err, "the disk cache is off (TILUSVM_DISK_CACHE=0)"));
  Result nowhere = c.run("list", "-u TILUSVM_CACHE_DIR -u TILUSVM_DISK_CACHE -u XDG_CACHE_HOME "
                                 "-u HOME");
  CHECK(nowhere.status == 2);
  CHECK(contains(nowhere.err, "no cache directory"));
  // The default directory comes from the environment, as the runtime's does.
  Result fromEnv = c.run("stats --json", "TILUSVM_CACHE_DIR=" + c.dir.string());
  REQUIRE(fromEnv.status == 0);
  CHECK(nlohmann::json::parse(fromEnv.out)["directory"] == c.dir.string());
  {
    std::ofstream(c.root / "plain") << "x";
  }
  Result notDir = c.run("--dir " + (c.root / "plain").string() + " list");
  CHECK(notDir.status == 1);
  CHECK(contains(notDir.err, "is not a directory"));
  Result help = c.run("--help");
  CHECK(help.status == 0);
  for (const char *command : {"list", "stats", "prune", "clear", "export", "import", "--dir"})
    CHECK(contains(help.out, command));
}

TEST_CASE("tilusvm-cache: export and import the PTX of entries for experiments") {
  CacheDir c;
  DiskCache cache(c.dir.string(), 0);
  KernelKey matmul = keyFor("matmul", JitOptions::compilerVersion());
  KernelKey softmax = keyFor("softmax", JitOptions::compilerVersion());
  CachedKernel a{"matmul_entry", 384, 200000, ".version 8.0\n// the JIT's matmul\n"};
  CachedKernel b{"softmax_entry", 128, 0, ".version 8.0\n// the JIT's softmax\n"};
  REQUIRE_OK(cache.store(matmul, a));
  REQUIRE_OK(cache.store(softmax, b));
  std::filesystem::path ptx = c.root / "ptx";
  std::string stemA = std::filesystem::path(matmul.fileName()).stem().string();
  std::string stemB = std::filesystem::path(softmax.fileName()).stem().string();

  Result exported = c.run(c.dirArg() + " export " + ptx.string());
  REQUIRE(exported.status == 0);
  CHECK(contains(exported.out, "exported the PTX of 2 entries to " + ptx.string()));
  CHECK(slurp(ptx / (stemA + ".ptx")) == a.ptx);
  CHECK(slurp(ptx / (stemB + ".ptx")) == b.ptx);

  // edit one kernel's PTX; the other file goes, so its entry stays as it is
  {
    std::ofstream(ptx / (stemA + ".ptx"), std::ios::trunc) << ".version 8.0\n// edited\n";
  }
  std::filesystem::remove(ptx / (stemB + ".ptx"));
  Result imported = c.run(c.dirArg() + " import " + ptx.string());
  REQUIRE(imported.status == 0);
  CHECK(contains(imported.out, "replaced " + matmul.fileName() + "  matmul"));
  CHECK(contains(imported.out, "replaced the PTX of 1 entries"));
  DiskCache::Lookup hitA = cache.load(matmul);
  REQUIRE(hitA.kernel);
  CHECK(hitA.kernel->ptx == ".version 8.0\n// edited\n");
  CHECK(hitA.kernel->entryName == "matmul_entry"); // the launch facts stay
  CHECK(hitA.kernel->threads == 384);
  CHECK(hitA.kernel->sharedBytes == 200000);
  DiskCache::Lookup hitB = cache.load(softmax);
  REQUIRE(hitB.kernel);
  CHECK(hitB.kernel->ptx == b.ptx);
  Result list = c.run(c.dirArg() + " list");
  CHECK_FALSE(contains(list.out, "corrupt"));

  // an empty file is refused and the entry is left alone; nothing to import is an error
  {
    std::ofstream(ptx / (stemA + ".ptx"), std::ios::trunc);
  }
  Result empty = c.run(c.dirArg() + " import " + ptx.string());
  CHECK(empty.status == 1);
  CHECK(contains(empty.err, "is empty; " + matmul.fileName() + " left as it was"));
  CHECK(cache.load(matmul).kernel->ptx == ".version 8.0\n// edited\n");
  std::filesystem::remove(ptx / (stemA + ".ptx"));
  Result nothing = c.run(c.dirArg() + " import " + ptx.string());
  CHECK(nothing.status == 1);
  CHECK(contains(nothing.err, "has a .ptx file in " + ptx.string()));
  Result missing = c.run(c.dirArg() + " import " + (c.root / "absent").string());
  CHECK(missing.status == 1);
  CHECK(contains(missing.err, "is not a directory"));
  CHECK(c.run(c.dirArg() + " export").status == 2); // OUTDIR is required
  CHECK(c.run(c.dirArg() + " import").status == 2);
}
