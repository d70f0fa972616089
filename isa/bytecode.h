// The bytecode format (.tbc), documented in docs/bytecode.md.
//
// encode() is deterministic: the same module and options give the same bytes. decode() reads
// any byte string defensively: every read checks the remaining length, every count is capped
// before anything is allocated, every section ends exactly at its boundary, the integrity hash
// must match. It returns a module or an error (code `bytecode`), never crashes, hangs or
// allocates without bound. Decoding checks structure only (ids in range, arguments of the right
// kind); the layout type checker (loader/) judges meaning.
#pragma once

#include "isa/program.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tilus {

inline constexpr uint32_t kBytecodeFormatVersion = 1;

/// Limits on every count and size in a bytecode file.
struct BytecodeLimits {
  uint64_t maxFileBytes = 256u << 20;
  uint32_t maxPrograms = 4096;
  uint32_t maxVars = 1u << 20;
  uint32_t maxExprs = 1u << 22;
  uint32_t maxInstructions = 1u << 22;
  uint32_t maxStmtDepth = 256;
  uint32_t maxListLength = 1u << 16; // any list inside an argument (shapes, offsets, modes)
  uint32_t maxStringBytes = 1u << 20;
  uint32_t maxSourceBytes = 64u << 20;
  // Added with the format (docs/bytecode.md, "Limits"): bounds that keep decoding and every
  // later stage (checker, printer, interpreter) linear and free of overflow. Lowering any limit
  // is safe; the layout arithmetic assumes maxLayoutElements <= 2^24.
  uint32_t maxNameBytes = 1024;                // program and variable names
  uint32_t maxStmts = 1u << 22;                // statements of one program, nested ones included
  uint32_t maxExprDepth = 1024;                // longest operand chain of one expression tree
  uint32_t maxLayoutRank = 16;                 // rank of a register or shared layout
  uint32_t maxLayoutDepth = 32;                // nesting of shared layout expressions
  int64_t maxLayoutElements = kMaxLayoutCells; // elements (and shared offsets) of one layout
  int64_t maxTotalLayoutElements = 1ll << 24;  // element visits of layout code, whole module
  uint64_t maxDecodedBytes = 1ull << 30;       // estimated memory of the decoded IR
};

struct EncodeOptions {
  /// Include the source text and per-instruction locations (tilus-asm -g).
  bool debugInfo = false;
};

std::vector<uint8_t> encodeModule(const Module &module, const EncodeOptions &options = {});

Expected<Module> decodeModule(std::span<const uint8_t> bytes, const BytecodeLimits &limits = {});

/// A stable 64-bit content hash of a module's canonical bytecode (without debug info), used as
/// the kernel cache key's program part.
uint64_t moduleContentHash(const Module &module);

} // namespace tilus
