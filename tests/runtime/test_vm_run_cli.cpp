// vm-run as a user runs it (ISA section 8): exit codes, messages, --save files, .npy inputs
// written here from the format spec, random inputs recomputed here from the documented
// splitmix64 rule, the --json report, and the no-driver behaviour of every --device.
// The binary's path comes from the build (TILUSVM_VM_RUN); $VM_RUN overrides it.
#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "test_helpers.h"
#include "vm/cuda/runtime.h"

#include <nlohmann/json.hpp>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {

const char *kVectorAdd = R"(
const BLOCK = 256
def vector_add<cdiv(n, BLOCK)>(f32* x_ptr, f32* y_ptr, f32* z_ptr, i32 n) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    gy = ViewGlobal(y_ptr, shape=[n])
    gz = ViewGlobal(z_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    y = LoadGlobal(gy, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    StoreGlobal(Add(x, y), gz, offset=[bi * BLOCK:])

def negate_i6<1>(i6* w, i6* out) threads=32:
    gw = ViewGlobal(w, shape=[64])
    go = ViewGlobal(out, shape=[64])
    v = Cast(LoadGlobal(gw, layout=spatial(32).local(2)), i8)
    StoreGlobal(Cast(Neg(v), i6), go)
)";

struct Result {
  int status = -1;
  std::string out;
  std::string err;
};

struct Workspace {
  std::filesystem::path dir;
  Workspace() {
    dir = std::filesystem::temp_directory_path() /
          ("tilusvm_vm_run_cli_" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    auto module = tilus::assemble(kVectorAdd);
    REQUIRE_OK(module);
    std::vector<uint8_t> bytes = tilus::encodeModule(*module);
    std::ofstream(path("m.tbc"), std::ios::binary)
        .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
  }
  ~Workspace() { std::filesystem::remove_all(dir); }
  std::string path(const std::string &name) const { return (dir / name).string(); }

  Result run(const std::string &args) const {
    const char *binary = std::getenv("VM_RUN");
    if (!binary)
      binary = TILUSVM_VM_RUN;
    std::string command =
        std::string(binary) + " " + args + " >" + path("out.txt") + " 2>" + path("err.txt");
    Result r;
    int raw = std::system(command.c_str());
    r.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : -1;
    r.out = slurp(path("out.txt"));
    r.err = slurp(path("err.txt"));
    return r;
  }
  static std::string slurp(const std::string &p) {
    std::ifstream in(p, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
};

/// The documented random fill, written independently: element k of seed s is
/// (z >> 11) * 2^-52 - 1 for z the k-th splitmix64 output.
float documentedRandF32(uint64_t seed, uint64_t k) {
  uint64_t z = seed + (k + 1) * 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return float(double(z >> 11) / 4503599627370496.0 - 1.0);
}

/// A v1.0 .npy file of little-endian f32 values, as np.save writes it.
std::string npyF32(const std::vector<float> &values) {
  std::string dict = "{'descr': '<f4', 'fortran_order': False, 'shape': (" +
                     std::to_string(values.size()) + ",), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string out = std::string("\x93NUMPY\x01\x00", 8);
  out += char(dict.size() & 0xff);
  out += char(dict.size() >> 8);
  out += dict;
  out.append(reinterpret_cast<const char *>(values.data()), values.size() * 4);
  return out;
}

std::vector<float> readNpyF32(const std::string &path, std::string *header = nullptr) {
  std::string bytes = Workspace::slurp(path);
  REQUIRE(bytes.size() >= 10);
  size_t headerBytes = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
  if (header)
    *header = bytes.substr(10, headerBytes);
  std::vector<float> values((bytes.size() - 10 - headerBytes) / 4);
  std::memcpy(values.data(), bytes.data() + 10 + headerBytes, values.size() * 4);
  return values;
}

bool driverPresent() {
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle)
    dlclose(handle);
  return handle != nullptr;
}

} // namespace

TEST_CASE("vm-run runs on the cpu with random and .npy inputs and saves .npy outputs") {
  Workspace ws;
  const int n = 1000;
  std::vector<float> y(n);
  for (int i = 0; i < n; ++i)
    y[size_t(i)] = float(i) * 0.25f;
  std::ofstream(ws.path("y.npy"), std::ios::binary) << npyF32(y);
  Result r = ws.run(ws.path("m.tbc") + " --kernel vector_add --device cpu --arg n=1000" +
                    " --arg x_ptr=rand:9 --arg y_ptr=@" + ws.path("y.npy") +
                    " --save z_ptr=" + ws.path("z.npy"));
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("vector_add: ran on cpu, grid 4x1x1, 128 threads") != std::string::npos);
  std::string header;
  std::vector<float> z = readNpyF32(ws.path("z.npy"), &header);
  CHECK(header.find("'descr': '<f4'") != std::string::npos);
  CHECK(header.find("'shape': (1000,)") != std::string::npos);
  REQUIRE(z.size() == size_t(n));
  for (int i = 0; i < n; ++i)
    CHECK(z[size_t(i)] == documentedRandF32(9, uint64_t(i)) + y[size_t(i)]);
}

TEST_CASE("vm-run saves sub-byte buffers as packed u1 bytes and reads them back") {
  Workspace ws;
  // 64 i6 values: element k = (k % 64) - 32, packed by hand (48 bytes).
  std::vector<uint8_t> packed(48, 0);
  for (int k = 0; k < 64; ++k) {
    unsigned v = unsigned((k % 64) - 32) & 63u;
    for (int b = 0; b < 6; ++b)
      if ((v >> b) & 1)
        packed[size_t(k * 6 + b) / 8] |= uint8_t(1u << ((k * 6 + b) % 8));
  }
  std::string dict = "{'descr': '|u1', 'fortran_order': False, 'shape': (48,), }";
  size_t total = 10 + dict.size() + 1;
  dict.append((64 - total % 64) % 64, ' ');
  dict += '\n';
  std::string file = std::string("\x93NUMPY\x01\x00", 8) + char(dict.size()) + char(0) + dict;
  file.append(reinterpret_cast<const char *>(packed.data()), packed.size());
  std::ofstream(ws.path("w.npy"), std::ios::binary) << file;
  Result r = ws.run(ws.path("m.tbc") + " --kernel negate_i6 --device cpu --arg w=@" +
                    ws.path("w.npy") + " --save out=" + ws.path("o.npy"));
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string bytes = Workspace::slurp(ws.path("o.npy"));
  size_t headerBytes = uint8_t(bytes[8]) | (size_t(uint8_t(bytes[9])) << 8);
  CHECK(bytes.substr(10, headerBytes)
            .find("'descr': '|u1', 'fortran_order': False, "
                  "'shape': (48,)") != std::string::npos);
  std::string data = bytes.substr(10 + headerBytes);
  REQUIRE(data.size() == 48);
  for (int k = 0; k < 64; ++k) {
    int v = 0;
    for (int b = 0; b < 6; ++b)
      v |= ((uint8_t(data[size_t(k * 6 + b) / 8]) >> ((k * 6 + b) % 8)) & 1) << b;
    int value = v >= 32 ? v - 64 : v;
    int expected = -((k % 64) - 32);
    CHECK(value == (expected == 32 ? -32 : expected)); // -(-32) wraps to -32 in i6
  }
}

TEST_CASE("vm-run names the clusters of a program with cluster= in both reports") {
  Workspace ws;
  auto module = tilus::assemble(R"(
def k<2 * n>(i32* y_ptr, i32 n) threads=32 cluster=2:
    pid = BlockIndices()
    rank = ClusterRank()
    StoreScalar(ViewGlobal(y_ptr, shape=[2 * n]), offset=[pid], value=rank)
    ClusterSync()
)");
  REQUIRE(module.ok());
  std::vector<uint8_t> bytes = tilus::encodeModule(*module);
  std::ofstream(ws.path("c.tbc"), std::ios::binary)
      .write(reinterpret_cast<const char *>(bytes.data()), std::streamsize(bytes.size()));
  Result r = ws.run(ws.path("c.tbc") + " --device cpu --arg n=3 --arg y_ptr=zeros:i32[6]");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("k: ran on cpu, grid 6x1x1 in clusters of 2, 32 threads") != std::string::npos);
  Result j = ws.run(ws.path("c.tbc") + " --device cpu --arg n=3 --arg y_ptr=zeros:i32[6] --json");
  REQUIRE(j.status == 0);
  nlohmann::json report = nlohmann::json::parse(j.out);
  CHECK(report["grid"] == nlohmann::json::array({6, 1, 1}));
  CHECK(report["cluster"] == 2);
}

TEST_CASE("vm-run --json reports the run") {
  Workspace ws;
  Result r = ws.run(ws.path("m.tbc") + " --kernel vector_add --device cpu --arg n=300 --json" +
                    " --arg x_ptr=zeros:f32[512]");
  INFO(r.err);
  REQUIRE(r.status == 0);
  nlohmann::json report = nlohmann::json::parse(r.out);
  CHECK(report["ok"] == true);
  CHECK(report["device"] == "cpu");
  CHECK(report["kernel"] == "vector_add");
  CHECK(report["grid"] == nlohmann::json::array({2, 1, 1}));
  CHECK(report["cluster"] == 1);
  CHECK(report["threads"] == 128);
  CHECK(report["args"][0]["name"] == "n");
  CHECK(report["args"][0]["value"] == "300");
  CHECK(report["args"][1]["elements"] == 512); // explicit size kept
  CHECK(report["args"][1]["bytes"] == 2048);
  CHECK(report["args"][2]["elements"] == 300); // default: the extent
  CHECK(report["args"][2]["source"] == "zeros");
}

TEST_CASE("vm-run --bench on the cpu says it times the interpreter and gives the maximum") {
  Workspace ws;
  std::string base = ws.path("m.tbc") + " --kernel vector_add --device cpu --arg n=300 --bench";
  Result r = ws.run(base + " --iters 2");
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("ms over 2 runs of the checked CPU reference interpreter (host clock)") !=
        std::string::npos);
  CHECK(r.out.find(" ms, max ") != std::string::npos);
  CHECK(r.out.find("--unchecked times without them") != std::string::npos);
  Result u = ws.run(base + " --iters 1 --unchecked");
  REQUIRE(u.status == 0);
  CHECK(u.out.find("over 1 runs of the unchecked CPU reference interpreter") != std::string::npos);
  Result j = ws.run(base + " --iters 3 --json");
  REQUIRE(j.status == 0);
  nlohmann::json bench = nlohmann::json::parse(j.out)["bench"];
  CHECK(bench["interpreter"] == "checked");
  CHECK(bench["iterations"] == 3);
  CHECK(bench["min_ms"].get<double>() <= bench["median_ms"].get<double>());
  CHECK(bench["median_ms"].get<double>() <= bench["max_ms"].get<double>());
}

TEST_CASE("vm-run --dump-dir keeps the kernel's LLVM IR and PTX") {
  Workspace ws;
  std::string dir = ws.path("dump/nested");
  // Without a driver (or with --device cpu) nothing is compiled for a device: the dump is the
  // unspecialised kernel for sm_90a.
  Result r = ws.run(ws.path("m.tbc") + " --kernel vector_add --device cpu --arg n=300" +
                    " --dump-dir " + dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  std::string ll = Workspace::slurp(dir + "/vector_add.sm_90a.ll");
  std::string ptx = Workspace::slurp(dir + "/vector_add.sm_90a.ptx");
  CHECK(ll.find("define ptx_kernel void @vector_add(") != std::string::npos);
  CHECK(ptx.find(".target sm_90a") != std::string::npos);
  CHECK(ptx.find(".entry vector_add(") != std::string::npos);
  CHECK(r.out.find("kept " + dir + "/vector_add.sm_90a.ll\n") != std::string::npos);
  CHECK(r.out.find("kept " + dir + "/vector_add.sm_90a.ptx\n") != std::string::npos);
  Result j = ws.run(ws.path("m.tbc") + " --kernel vector_add --device cpu --arg n=300 --json" +
                    " --dump-dir " + dir);
  REQUIRE(j.status == 0);
  CHECK(nlohmann::json::parse(j.out)["dumped"] ==
        nlohmann::json::array({dir + "/vector_add.sm_90a.ll", dir + "/vector_add.sm_90a.ptx"}));
  // A directory that cannot be made is an io error (exit 1), after the run.
  std::ofstream(ws.path("plain")) << "x";
  Result bad = ws.run(ws.path("m.tbc") + " --kernel vector_add --device cpu --arg n=300" +
                      " --dump-dir " + ws.path("plain/sub"));
  CHECK(bad.status == 1);
  CHECK(bad.err.find("--dump-dir: cannot create directory") != std::string::npos);
}

TEST_CASE("usage errors exit 2 with a message") {
  Workspace ws;
  std::string m = ws.path("m.tbc");
  struct Case {
    std::string args;
    std::string message;
  };
  std::vector<Case> cases = {
      {m + " --device cpu", "choose one with --kernel NAME (vector_add, negate_i6)"},
      {m + " --kernel nope --device cpu", "no program named nope"},
      {m + " --kernel vector_add --device cpu", "missing --arg n=VALUE"},
      {m + " --kernel vector_add --device cpu --arg n=x", "'x' is not a value of type i32"},
      {m + " --kernel vector_add --device cpu --arg n=10 --arg q=1", "no parameter named q"},
      {m + " --kernel vector_add --device cpu --arg n=10 --arg n=11", "n given twice"},
      {m + " --kernel vector_add --device cpu --arg n=10 --arg x_ptr=zeros:f32[9]",
       "x_ptr has 9 elements; the program can touch 10"},
      {m + " --kernel vector_add --device cpu --arg n=10 --arg x_ptr=zeros:f16[10]",
       "x_ptr is f32, the value says f16"},
      {m + " --kernel vector_add --device cpu --arg n=10 --arg x_ptr=@" + ws.path("none.npy"),
       "cannot open"},
      {m + " --kernel vector_add --device cpu --arg n=10 --save n=" + ws.path("n.npy"),
       "not a pointer parameter"},
      {m + " --kernel vector_add --device gpu --arg n=10", "--device"},
      {m + " --kernel vector_add --bogus", "--bogus"},
  };
  for (const Case &c : cases) {
    Result r = ws.run(c.args);
    INFO(c.args);
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(r.err.find(c.message) != std::string::npos);
  }
}

TEST_CASE("program errors exit 1") {
  Workspace ws;
  std::ofstream(ws.path("bad.tbc"), std::ios::binary) << "not bytecode";
  Result r = ws.run(ws.path("bad.tbc") + " --device cpu");
  CHECK(r.status == 1);
  CHECK(r.err.find("error[bytecode]") != std::string::npos);
  Result missing = ws.run(ws.path("missing.tbc"));
  CHECK(missing.status == 1);
}

TEST_CASE("--device cuda, --check and auto: plain failures without a driver, cuda runs with one") {
  Workspace ws;
  std::string base = ws.path("m.tbc") + " --kernel vector_add --arg n=10";
  Result cuda = ws.run(base + " --device cuda");
  Result check = ws.run(base + " --check");
  Result autoRun = ws.run(base);
  INFO(cuda.err);
  INFO(check.err);
  INFO(autoRun.err);
  if (!driverPresent()) {
    CHECK(cuda.status == 1);
    CHECK(cuda.err.find("no CUDA driver (libcuda.so.1 not found)") != std::string::npos);
    CHECK(check.status == 1);
    CHECK(check.err.find("no CUDA driver (libcuda.so.1 not found)") != std::string::npos);
    CHECK(autoRun.status == 0);
    CHECK(autoRun.err.find("running on the cpu interpreter") != std::string::npos);
    CHECK(autoRun.out.find("ran on cpu") != std::string::npos);
    return;
  }
  if (!tilus::cuda::cudaAvailable().ok()) { // a driver without a device
    CHECK(cuda.status == 1);
    CHECK(check.status == 1);
    CHECK(autoRun.status == 0);
    CHECK(autoRun.out.find("ran on cpu") != std::string::npos);
    return;
  }
  CHECK(cuda.status == 0);
  CHECK(cuda.out.find("ran on cuda") != std::string::npos);
  CHECK(check.status == 0);
  CHECK(check.out.find("check passed: cuda vs cpu") != std::string::npos);
  CHECK(autoRun.status == 0);
  CHECK(autoRun.out.find("ran on cuda") != std::string::npos);
  CHECK(autoRun.err.find("running on the cpu interpreter") == std::string::npos);
}
