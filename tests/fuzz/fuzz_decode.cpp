// libFuzzer entry point for the bytecode decoder and the layout type checker (built and run by
// scripts/fuzz.sh with clang++-19 -fsanitize=fuzzer,address,undefined).
//
// The input's total-length and hash fields are rewritten to match its contents before decoding:
// a fuzzer cannot forge an XXH3 hash, and without this every mutation would stop at the header.
// (Header checks are covered by tests/isa/test_bytecode.cpp.)
//
// Beyond "no crash, no hang, no leak", the target checks properties on every accepted input:
//   - the error code of a rejected input is `bytecode`;
//   - the encoding is canonical: re-encoding the decoded module gives the input's bytes back
//     (apart from the producer section, which re-encodes as this build's producer);
//   - a re-encoded module decodes again to the same bytes and the same content hash;
// and then runs the checker on the module, which must return (a VerifiedModule or diagnostics).
#include "isa/bytecode.h"
#include "tests/fuzz/seal.h"
#ifndef TILUSVM_FUZZ_DECODE_ONLY
#include "loader/checker.h"
#endif

#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using fuzzing::seal;
using tilus::bytecode::kHeaderBytes;

[[noreturn]] void failure(const char *what) {
  std::fprintf(stderr, "fuzz_decode: %s\n", what);
  std::abort();
}

/// Offset just after the producer section of a file that decoded (its producer is at most 64
/// characters, so the section size is one varint byte).
size_t afterProducer(const std::vector<uint8_t> &b) {
  return kHeaderBytes + 2 + b[kHeaderBytes + 1];
}

bool sameApartFromProducer(const std::vector<uint8_t> &a, const std::vector<uint8_t> &b) {
  if (!std::equal(a.begin(), a.begin() + 16, b.begin()))
    return false; // magic, version, flags, reserved
  size_t pa = afterProducer(a), pb = afterProducer(b);
  return a.size() - pa == b.size() - pb &&
         std::equal(a.begin() + long(pa), a.end(), b.begin() + long(pb));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tilus;
  std::vector<uint8_t> bytes(data, data + size);
  if (bytes.size() >= kHeaderBytes)
    seal(bytes);
  Expected<Module> module = decodeModule(bytes);
  if (!module) {
    if (module.status().code() != ErrorCode::Bytecode)
      failure("a rejected input's error code is not `bytecode`");
    return 0;
  }
  const EncodeOptions options{module->hasDebugInfo};
  std::vector<uint8_t> again = encodeModule(*module, options);
  if (!sameApartFromProducer(bytes, again))
    failure("accepted an input that does not re-encode to the same bytes");
  Expected<Module> second = decodeModule(again);
  if (!second)
    failure("the re-encoded module does not decode");
  if (encodeModule(*second, options) != again)
    failure("decode(encode(m)) re-encodes differently");
  if (moduleContentHash(*second) != moduleContentHash(*module))
    failure("content hash changed over a round trip");
#ifndef TILUSVM_FUZZ_DECODE_ONLY
  Expected<VerifiedModule> checked = checkModule(std::move(*module));
  (void)checked;
#endif
  return 0;
}
