// libFuzzer entry point for vm-run's argument values (tools/run_args.cpp: --arg NAME=VALUE
// scalars and buffers, --max-memory), built and run by scripts/fuzz.sh --target run_args with
// clang++-19 -fsanitize=fuzzer,address,undefined.
//
// The input is split at newlines; each line is parsed as every kind of value. Properties:
//   - a scalar accepted for an integer or bool type fits in the type's bits;
//   - an explicit buffer shape has at most kMaxBufferElements elements, each dimension >= 0;
//   - a byte size is at least 1 and below 2^63;
//   - NAME=VALUE splits at the first '=' with a non-empty name.
#include "tools/run_args.h"

#include "isa/convert.h"

#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void failure(const char *what) {
  std::fprintf(stderr, "fuzz_run_args: %s\n", what);
  std::abort();
}

using tilus::DataType;
const DataType kTypes[] = {DataType::boolean(), DataType::i32(), DataType::f32(),   DataType::f16(),
                           DataType::bf16(),    DataType::f64(), DataType::i64(),   DataType::u(8),
                           DataType::u(32),     DataType::i(6),  DataType::f8e4m3()};

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tilus;
  std::string_view all(reinterpret_cast<const char *>(data), size);
  while (!all.empty()) {
    size_t end = all.find('\n');
    std::string_view line = all.substr(0, end);
    all = end == std::string_view::npos ? std::string_view() : all.substr(end + 1);
    for (DataType t : kTypes) {
      auto bits = run::parseScalar(line, t);
      if (bits.ok() && !t.isFloat() && t.bits < 64 && (*bits & ~bitMask(t.bits)) != 0)
        failure("a scalar has bits beyond its type");
    }
    if (auto spec = run::parseBufferSpec(line); spec.ok() && spec->explicitShape()) {
      for (int64_t d : spec->shape)
        if (d < 0)
          failure("a negative dimension");
      int64_t n = spec->explicitElements();
      if (n < 0 || n > run::kMaxBufferElements)
        failure("an explicit shape beyond kMaxBufferElements");
    }
    if (auto bytes = run::parseByteSize(line); bytes.ok() && (*bytes == 0 || *bytes >> 63))
      failure("a byte size outside [1, 2^63)");
    if (auto kv = run::splitAssignment(line); kv.ok()) {
      if (kv->first.empty() || kv->first.find('=') != std::string::npos ||
          kv->first.size() + 1 + kv->second.size() != line.size())
        failure("NAME=VALUE split wrongly");
    }
  }
  return 0;
}
