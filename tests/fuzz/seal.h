// The header fields a `.tbc` file's decoder checks first, made to match a mutated file: the
// fuzz targets that feed bytecode rewrite the total length and the XXH3-64 integrity hash so
// that mutations reach the sections instead of stopping at the header (docs/bytecode.md).
#pragma once

#include "isa/bytecode_format.h"

#include <xxhash.h>

#include <cstdint>
#include <vector>

namespace fuzzing {

/// Writes b's total length and the hash of everything after the header into b's header.
inline void seal(std::vector<uint8_t> &b) {
  using tilus::bytecode::kHeaderBytes;
  uint64_t total = b.size();
  uint64_t hash = XXH3_64bits(b.data() + kHeaderBytes, b.size() - kHeaderBytes);
  for (int i = 0; i < 8; ++i) {
    b[16 + i] = uint8_t(total >> (8 * i));
    b[24 + i] = uint8_t(hash >> (8 * i));
  }
}

} // namespace fuzzing
