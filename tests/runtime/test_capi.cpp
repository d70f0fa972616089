// The C API (the runtime's creation on hosts with and without a driver; the rest without a GPU):
// every error path returns its status code and a message (never an
// abort), messages are thread-local, module queries, and a CPU run through the API checked
// against sums computed here.
#include "vm/include/tilusvm.h"
#include "vm/include/tilusvm.hpp"

#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "test_helpers.h"

#include <dlfcn.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

const char *kTwoPrograms = R"(
const BLOCK = 256
def vector_add<cdiv(n, BLOCK)>(f32* x_ptr, f32* y_ptr, f32* z_ptr, i32 n) threads=128:
    bi = BlockIndices()
    gx = ViewGlobal(x_ptr, shape=[n])
    gy = ViewGlobal(y_ptr, shape=[n])
    gz = ViewGlobal(z_ptr, shape=[n])
    x = LoadGlobal(gx, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    y = LoadGlobal(gy, layout=spatial(128).local(2), offset=[bi * BLOCK:])
    StoreGlobal(Add(x, y), gz, offset=[bi * BLOCK:])

def fill<1>(i8* out, i8 value) threads=32:
    g = ViewGlobal(out, shape=[32])
    StoreGlobal(AllocateRegister(i8, layout=spatial(32), init=value), g)
)";

std::vector<uint8_t> moduleBytes() {
  auto module = tilus::assemble(kTwoPrograms);
  REQUIRE_OK(module);
  return tilus::encodeModule(*module);
}

bool driverPresent() {
  void *handle = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (handle)
    dlclose(handle);
  return handle != nullptr;
}

} // namespace

TEST_CASE("status names") {
  CHECK(std::string(tilusvm_status_name(TILUSVM_OK)) == "TILUSVM_OK");
  CHECK(std::string(tilusvm_status_name(TILUSVM_ERROR_NO_DRIVER)) == "TILUSVM_ERROR_NO_DRIVER");
  CHECK(std::string(tilusvm_status_name(12345)) == "TILUSVM_UNKNOWN_STATUS");
  CHECK(std::string(tilusvm_version()) == TILUSVM_VERSION);
  CHECK(std::to_string(TILUSVM_VERSION_MAJOR) + "." + std::to_string(TILUSVM_VERSION_MINOR) + "." +
            std::to_string(TILUSVM_VERSION_PATCH) ==
        TILUSVM_VERSION);
}

TEST_CASE("null arguments are invalid-argument errors") {
  tilusvm_module m = nullptr;
  CHECK(tilusvm_module_load(nullptr, 10, &m) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("bytes is NULL") != std::string::npos);
  CHECK(tilusvm_module_load("x", 1, nullptr) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_module_load_file(nullptr, &m) == TILUSVM_ERROR_INVALID_ARGUMENT);
  size_t count = 0;
  CHECK(tilusvm_module_program_count(nullptr, &count) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_launch(nullptr, nullptr, "p", nullptr, 0, nullptr) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_runtime_create(0, nullptr) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_module_destroy(nullptr) == TILUSVM_OK);
  CHECK(tilusvm_runtime_destroy(nullptr) == TILUSVM_OK);
}

TEST_CASE("bad bytes, missing files and failing checks have their own codes") {
  tilusvm_module m = reinterpret_cast<tilusvm_module>(1);
  const char garbage[] = "definitely not bytecode";
  CHECK(tilusvm_module_load(garbage, sizeof garbage, &m) == TILUSVM_ERROR_BYTECODE);
  CHECK(m == nullptr);
  CHECK(std::string(tilusvm_last_error()).find("bytecode") != std::string::npos);
  CHECK(tilusvm_module_load_file("/nonexistent/dir/k.tbc", &m) == TILUSVM_ERROR_IO);
  CHECK(std::string(tilusvm_last_error()).find("/nonexistent/dir/k.tbc") != std::string::npos);

  // Assembles, but the checker rejects it (an f16 tensor stored into an f32 view).
  auto bad = tilus::assemble(R"(
def bad<1>(f32* out) threads=32:
    g = ViewGlobal(out, shape=[32])
    StoreGlobal(AllocateRegister(f16, layout=spatial(32)), g)
)");
  REQUIRE_OK(bad);
  std::vector<uint8_t> bytes = tilus::encodeModule(*bad);
  CHECK(tilusvm_module_load(bytes.data(), bytes.size(), &m) == TILUSVM_ERROR_CHECK);
  CHECK(std::string(tilusvm_last_error()).find("error[") != std::string::npos);
}

TEST_CASE("runtime creation: fails plainly without a driver, gives a device with one") {
  tilusvm_runtime rt = reinterpret_cast<tilusvm_runtime>(1);
  int created = tilusvm_runtime_create(-1, &rt);
  if (!driverPresent()) {
    CHECK(created == TILUSVM_ERROR_NO_DRIVER);
    CHECK(rt == nullptr);
    CHECK(std::string(tilusvm_last_error()) == "no CUDA driver (libcuda.so.1 not found)");
    CHECK_THROWS_AS(tilusvm::Runtime(), tilusvm::Error);
    try {
      tilusvm::Runtime runtime;
    } catch (const tilusvm::Error &e) {
      CHECK(e.status() == TILUSVM_ERROR_NO_DRIVER);
      CHECK(std::string(e.what()).find("libcuda.so.1") != std::string::npos);
    }
    return;
  }
  // A driver: either a device (a runtime with a name) or the plain no-device error.
  INFO(tilusvm_last_error());
  REQUIRE((created == TILUSVM_OK || created == TILUSVM_ERROR_NO_DEVICE));
  if (created == TILUSVM_ERROR_NO_DEVICE) {
    CHECK(rt == nullptr);
    CHECK_THROWS_AS(tilusvm::Runtime(), tilusvm::Error);
    return;
  }
  REQUIRE(rt != nullptr);
  const char *name = nullptr;
  CHECK(tilusvm_runtime_device_name(rt, &name) == TILUSVM_OK);
  REQUIRE(name != nullptr);
  CHECK(std::strlen(name) > 0);
  std::string deviceName = name; // the string belongs to rt and goes with it
  CHECK(tilusvm_runtime_destroy(rt) == TILUSVM_OK);
  tilusvm::Runtime runtime;
  CHECK(runtime.deviceName() == deviceName);
}

TEST_CASE("runtime creation: a malformed TILUSVM_CACHE_MAX_BYTES is an invalid argument") {
  const char *old = std::getenv("TILUSVM_CACHE_MAX_BYTES");
  std::string saved = old ? old : "";
  ::setenv("TILUSVM_CACHE_MAX_BYTES", "10 gigs", 1);
  tilusvm_runtime rt = nullptr;
  // Checked before the driver is opened: the same answer on every machine.
  CHECK(tilusvm_runtime_create(-1, &rt) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(rt == nullptr);
  CHECK(std::string(tilusvm_last_error()) ==
        "TILUSVM_CACHE_MAX_BYTES: byte count '10 gigs': unknown suffix ' gigs' (expected digits "
        "with an optional K, M, G or T suffix, e.g. 500M)");
  if (old)
    ::setenv("TILUSVM_CACHE_MAX_BYTES", saved.c_str(), 1);
  else
    ::unsetenv("TILUSVM_CACHE_MAX_BYTES");
}

TEST_CASE("the last error is per thread") {
  tilusvm_module m = nullptr;
  CHECK(tilusvm_module_load_file("/nonexistent/a.tbc", &m) == TILUSVM_ERROR_IO);
  std::string other;
  std::thread t([&] {
    tilusvm_module m2 = nullptr;
    tilusvm_module_load(nullptr, 1, &m2);
    other = tilusvm_last_error();
  });
  t.join();
  CHECK(other.find("bytes is NULL") != std::string::npos);
  CHECK(std::string(tilusvm_last_error()).find("/nonexistent/a.tbc") != std::string::npos);
}

TEST_CASE("module queries") {
  std::vector<uint8_t> bytes = moduleBytes();
  tilusvm_module m = nullptr;
  REQUIRE(tilusvm_module_load(bytes.data(), bytes.size(), &m) == TILUSVM_OK);
  size_t count = 0;
  CHECK(tilusvm_module_program_count(m, &count) == TILUSVM_OK);
  CHECK(count == 2);
  const char *name = nullptr;
  CHECK(tilusvm_module_program_name(m, 1, &name) == TILUSVM_OK);
  CHECK(std::string(name) == "fill");
  CHECK(tilusvm_module_program_name(m, 2, &name) == TILUSVM_ERROR_NOT_FOUND);
  size_t index = 99;
  CHECK(tilusvm_module_find_program(m, "vector_add", &index) == TILUSVM_OK);
  CHECK(index == 0);
  CHECK(tilusvm_module_find_program(m, "matmul", &index) == TILUSVM_ERROR_NOT_FOUND);
  CHECK(std::string(tilusvm_last_error()).find("vector_add, fill") != std::string::npos);
  size_t params = 0;
  CHECK(tilusvm_program_param_count(m, "vector_add", &params) == TILUSVM_OK);
  CHECK(params == 4);
  const char *pname = nullptr, *dtype = nullptr;
  int isPointer = -1;
  CHECK(tilusvm_program_param(m, "vector_add", 3, &pname, &dtype, &isPointer) == TILUSVM_OK);
  CHECK(std::string(pname) == "n");
  CHECK(std::string(dtype) == "i32");
  CHECK(isPointer == 0);
  CHECK(tilusvm_program_param(m, "vector_add", 0, &pname, &dtype, &isPointer) == TILUSVM_OK);
  CHECK(std::string(pname) == "x_ptr");
  CHECK(std::string(dtype) == "f32");
  CHECK(isPointer == 1);
  CHECK(tilusvm_program_param(m, "vector_add", 4, &pname, nullptr, nullptr) ==
        TILUSVM_ERROR_NOT_FOUND);
  CHECK(tilusvm_module_destroy(m) == TILUSVM_OK);

  tilusvm::Module module = tilusvm::Module::load(bytes.data(), bytes.size());
  CHECK(module.programNames() == std::vector<std::string>{"vector_add", "fill"});
  auto info = module.params("fill");
  REQUIRE(info.size() == 2);
  CHECK(info[1].name == "value");
  CHECK(info[1].dtype == "i8");
  CHECK_FALSE(info[1].isPointer);
}

TEST_CASE("running on the cpu through the C API") {
  std::vector<uint8_t> bytes = moduleBytes();
  tilusvm_module m = nullptr;
  REQUIRE(tilusvm_module_load(bytes.data(), bytes.size(), &m) == TILUSVM_OK);
  const int n = 300; // two blocks, the second partial
  std::vector<float> x(n), y(n), z(n, -1.0f);
  for (int i = 0; i < n; ++i) {
    x[size_t(i)] = float(i) * 0.5f;
    y[size_t(i)] = 1000.0f - float(i);
  }
  tilusvm_arg args[4] = {
      {0, x.data(), n * 4}, {0, y.data(), n * 4}, {0, z.data(), n * 4}, {uint64_t(n), nullptr, 0}};
  CHECK(tilusvm_run_cpu(m, "vector_add", args, 4, 1) == TILUSVM_OK);
  INFO(tilusvm_last_error());
  for (int i = 0; i < n; ++i)
    CHECK(z[size_t(i)] == float(i) * 0.5f + (1000.0f - float(i)));

  // A buffer smaller than the extent the program can touch.
  args[2].byte_size = n * 4 - 4;
  CHECK(tilusvm_run_cpu(m, "vector_add", args, 4, 1) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("z_ptr") != std::string::npos);
  // Wrong argument count.
  CHECK(tilusvm_run_cpu(m, "vector_add", args, 3, 1) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_run_cpu(m, "nope", args, 4, 1) == TILUSVM_ERROR_NOT_FOUND);

  // The C++ API: an i8 scalar as its bit pattern.
  tilusvm::Module module = tilusvm::Module::load(bytes.data(), bytes.size());
  std::vector<int8_t> out(32, 0);
  module.runOnCpu("fill", {tilusvm::Arg::pointer(out.data(), 32), tilusvm::Arg::bits(0xfd)});
  for (int8_t v : out)
    CHECK(v == -3);
  CHECK_THROWS_AS(
      module.runOnCpu("fill", {tilusvm::Arg::pointer(out.data(), 16), tilusvm::Arg::bits(1)}),
      tilusvm::Error);
  tilusvm_module_destroy(m);
}

TEST_CASE("versioned options: defaults, sizes, unknown fields and bad values") {
  tilusvm_runtime_options o;
  std::memset(&o, 0x5a, sizeof o);
  CHECK(tilusvm_runtime_options_init(nullptr) == TILUSVM_ERROR_INVALID_ARGUMENT);
  REQUIRE(tilusvm_runtime_options_init(&o) == TILUSVM_OK);
  CHECK(o.struct_size == sizeof(tilusvm_runtime_options));
  CHECK(o.device == -1);
  CHECK(o.cache_dir == nullptr);
  CHECK(o.log_level == TILUSVM_LOG_DEFAULT);
  CHECK(!o.log_callback);
  CHECK(o.log_user_data == nullptr);
  CHECK(o.lazy_compile == 1);

  tilusvm_runtime_options fromHpp = tilusvm::runtimeOptions();
  CHECK(fromHpp.struct_size == o.struct_size);
  CHECK(fromHpp.device == -1);
  CHECK(fromHpp.lazy_compile == 1);
  if (!driverPresent())
    CHECK_THROWS_AS(tilusvm::Runtime{fromHpp}, tilusvm::Error);

  tilusvm_runtime rt = reinterpret_cast<tilusvm_runtime>(1);
  CHECK(tilusvm_runtime_create_ex(nullptr, &rt) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(rt == nullptr);
  CHECK(tilusvm_runtime_create_ex(&o, nullptr) == TILUSVM_ERROR_INVALID_ARGUMENT);

  tilusvm_runtime_options small = o;
  small.struct_size = sizeof(size_t) + sizeof(int); // only struct_size and device
  CHECK(tilusvm_runtime_create_ex(&small, &rt) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("struct_size is 12") != std::string::npos);

  // A struct from a later header: its extra fields must be zero here.
  struct Later {
    tilusvm_runtime_options v1;
    uint64_t added;
  } later;
  std::memset(&later, 0, sizeof later);
  later.v1 = o;
  later.v1.struct_size = sizeof later;
  later.added = 7;
  CHECK(tilusvm_runtime_create_ex(&later.v1, &rt) == TILUSVM_ERROR_UNSUPPORTED);
  CHECK(std::string(tilusvm_last_error()).find("does not know") != std::string::npos);
  CHECK(rt == nullptr);

  tilusvm_runtime_options bad = o;
  bad.log_level = 7;
  CHECK(tilusvm_runtime_create_ex(&bad, &rt) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("log_level 7") != std::string::npos);
  bad = o;
  bad.lazy_compile = 2;
  CHECK(tilusvm_runtime_create_ex(&bad, &rt) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()).find("lazy_compile is 2") != std::string::npos);

  // Valid options (the larger struct with zero extra fields included) get as far as the driver.
  later.added = 0;
  for (const tilusvm_runtime_options *valid : {&o, &later.v1}) {
    int created = tilusvm_runtime_create_ex(valid, &rt);
    if (!driverPresent()) {
      CHECK(created == TILUSVM_ERROR_NO_DRIVER);
      CHECK(tilusvm_last_cu_result() == 0); // no driver call was made
    } else {
      INFO(tilusvm_last_error());
      CHECK((created == TILUSVM_OK || created == TILUSVM_ERROR_NO_DEVICE));
    }
    tilusvm_runtime_destroy(rt);
    rt = nullptr;
  }
}

TEST_CASE("kernel handles, statistics and the last CUresult: error paths without a GPU") {
  CHECK(std::string(tilusvm_status_name(TILUSVM_ERROR_NOT_PREPARED)) ==
        "TILUSVM_ERROR_NOT_PREPARED");
  tilusvm_kernel k = reinterpret_cast<tilusvm_kernel>(1);
  CHECK(tilusvm_kernel_get(nullptr, nullptr, "vector_add", &k) == TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(k == nullptr);
  CHECK(std::string(tilusvm_last_error()) == "tilusvm_kernel_get: runtime is NULL");
  CHECK(tilusvm_last_cu_result() == 0);
  CHECK(tilusvm_kernel_get(nullptr, nullptr, "vector_add", nullptr) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_kernel_destroy(nullptr) == TILUSVM_OK);
  CHECK(tilusvm_kernel_prepare(nullptr, nullptr, 0, nullptr) == TILUSVM_ERROR_INVALID_ARGUMENT);
  uint64_t bytes = 0;
  CHECK(tilusvm_kernel_workspace_size(nullptr, nullptr, 0, &bytes) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(tilusvm_kernel_launch(nullptr, nullptr, 0, nullptr, nullptr, 0) ==
        TILUSVM_ERROR_INVALID_ARGUMENT);
  CHECK(std::string(tilusvm_last_error()) == "tilusvm_kernel_launch: kernel is NULL");

  // Statistics write only the fields the caller's struct_size covers.
  CHECK(tilusvm_process_get_stats(nullptr) == TILUSVM_ERROR_INVALID_ARGUMENT);
  tilusvm_stats stats;
  std::memset(&stats, 0xee, sizeof stats);
  stats.struct_size = 0;
  CHECK(tilusvm_process_get_stats(&stats) == TILUSVM_ERROR_INVALID_ARGUMENT);
  stats.struct_size = offsetof(tilusvm_stats, disk_hits); // an "older" struct: compiles only
  REQUIRE(tilusvm_process_get_stats(&stats) == TILUSVM_OK);
  CHECK(stats.struct_size == offsetof(tilusvm_stats, disk_hits));
  uint64_t untouched = 0;
  std::memset(&untouched, 0xee, sizeof untouched);
  CHECK(stats.disk_hits == untouched);
  CHECK(stats.workspace_bytes == untouched);
  stats.struct_size = sizeof stats;
  REQUIRE(tilusvm_process_get_stats(&stats) == TILUSVM_OK);
  CHECK(stats.struct_size == sizeof stats);
  CHECK(stats.workspace_bytes == 0); // the process has no workspace of its own
  CHECK(tilusvm_runtime_get_stats(nullptr, &stats) == TILUSVM_ERROR_INVALID_ARGUMENT);
}

TEST_CASE("preconditions are checked through the C API before a CPU run") {
  auto module = tilus::assemble(R"(
def fill<cdiv(n, 32)>(f32* out, i32 n, i32 g) threads=32:
    assert n % g == 0 and g > 0, "n is a multiple of the group size g"
    bi = BlockIndices()
    o = ViewGlobal(out, shape=[n])
    StoreGlobal(AllocateRegister(f32, layout=spatial(32), init=2.0), o, offset=[bi * 32:])
)");
  REQUIRE_OK(module);
  std::vector<uint8_t> bytes = tilus::encodeModule(*module);
  tilusvm_module m = nullptr;
  REQUIRE(tilusvm_module_load(bytes.data(), bytes.size(), &m) == TILUSVM_OK);
  std::vector<float> out(96, -1.0f);
  tilusvm_arg args[3] = {{0, out.data(), 96 * 4}, {96, nullptr, 0}, {5, nullptr, 0}};
  CHECK(tilusvm_run_cpu(m, "fill", args, 3, 1) == TILUSVM_ERROR_RUNTIME);
  std::string message = tilusvm_last_error();
  CHECK(message.find("program `fill`: precondition failed: n is a multiple of the group size g: "
                     "`((n % g) == 0) and (g > 0)` with n = 96, g = 5") != std::string::npos);
  for (float v : out)
    CHECK(v == -1.0f); // nothing ran
  // g = 0: the condition divides by zero, which fails it (g > 0 is false too).
  args[2].scalar_bits = 0;
  CHECK(tilusvm_run_cpu(m, "fill", args, 3, 0) == TILUSVM_ERROR_RUNTIME);
  CHECK(std::string(tilusvm_last_error()).find("with n = 96, g = 0 (a division by zero)") !=
        std::string::npos);
  args[2].scalar_bits = 32;
  CHECK(tilusvm_run_cpu(m, "fill", args, 3, 1) == TILUSVM_OK);
  for (float v : out)
    CHECK(v == 2.0f);
  tilusvm_module_destroy(m);
}
