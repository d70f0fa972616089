// libFuzzer entry point for the .npy reader of vm-run (tools/npy.cpp), built and run by
// scripts/fuzz.sh --target npy with clang++-19 -fsanitize=fuzzer,address,undefined.
//
// Beyond "no crash, no hang, no leak" (sizes come from the file's header and must be checked
// before anything is allocated), on every accepted file:
//   - the data holds exactly elements x item size bytes;
//   - the C-order little-endian copy has the same size;
//   - writing that copy as a C-order little-endian file and reading it back gives the same
//     shape and bytes.
#include "tools/npy.h"

#include <cstdio>
#include <cstdlib>

namespace {

[[noreturn]] void failure(const char *what) {
  std::fprintf(stderr, "fuzz_npy: %s\n", what);
  std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tilus;
  auto array = npy::parse(std::span<const uint8_t>(data, size));
  if (!array.ok())
    return 0;
  auto item = npy::itemSize(array->descr);
  if (!item.ok())
    failure("an accepted file has an unsupported descr");
  if (uint64_t(array->elements()) * uint64_t(*item) != array->data.size())
    failure("the data size is not elements x item size");
  auto plain = npy::cOrderLittleEndian(*array);
  if (!plain.ok())
    failure("an accepted array cannot be brought to C order");
  if (plain->size() != array->data.size())
    failure("the C-order copy changed size");
  std::string descr = npy::normalizeDescr(array->descr);
  if (descr[0] == '>')
    descr[0] = '<';
  std::vector<uint8_t> encoded = npy::encode(descr, array->shape, *plain);
  auto back = npy::parse(encoded);
  if (!back.ok())
    failure("an encoded array does not parse");
  if (back->shape != array->shape || back->data != *plain || back->fortranOrder)
    failure("an encoded array reads back differently");
  return 0;
}
