// Internal to isa/: the constants of the bytecode format (docs/bytecode.md) and the functions
// that the encoder and decoder files share. The public API is isa/bytecode.h.
#pragma once

#include "isa/bytecode.h"
#include "isa/bytecode_io.h"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace tilus::bytecode {

inline constexpr uint8_t kMagic[4] = {'T', 'L', 'B', 'C'};
inline constexpr size_t kHeaderBytes = 32;
inline constexpr uint32_t kFlagDebugInfo = 1u << 0;
/// Every program carries a blocks_per_sm field after threads (set when some program has one).
inline constexpr uint32_t kFlagBlocksPerSm = 1u << 1;
/// Every program carries a cluster field after blocks_per_sm (set when some program has
/// cluster= above 1).
inline constexpr uint32_t kFlagCluster = 1u << 2;
/// Every LoadGlobal carries its `evict` argument (presence, then the value when present) after
/// its offset (set when some LoadGlobal has one); without the flag, LoadGlobal is encoded
/// without it, as before the argument existed, and reads as having none.
inline constexpr uint32_t kFlagEviction = 1u << 3;
/// The program-field flags (kFlagBlocksPerSm, kFlagCluster, kFlagEviction) that a module needs.
uint32_t programFieldFlags(const Module &module);
/// Whether argument `k` of an `op` instruction is in the encoding of a file whose program-field
/// flags are `fields` (LoadGlobal's `evict` only with kFlagEviction).
bool argumentEncoded(Opcode op, size_t k, uint32_t fields);
/// The statement kind byte of a For with an unroll hint (Stmt::unroll != 0): the For's fields,
/// then `uleb` the hint in 1..kMaxUnroll, then the body. A For without one is kind 2, as before
/// hints existed; both decode to StmtKind::For.
inline constexpr uint8_t kStmtForUnroll = 10;
/// The statement kind byte of a Group with copies (Stmt::copies > 1 or an index variable): the
/// Group's fields, then `uleb` the copies in 1..kMaxGroupCopies and `uleb` the index variable
/// plus one (0: none), then the body. A Group without either is kind 9, as before copies
/// existed; both decode to StmtKind::Group.
inline constexpr uint8_t kStmtGroupCopies = 11;
/// Statement kind 12: Specialize (variable id, expression id), as StmtKind::Specialize.
inline constexpr uint8_t kStmtSpecialize = 12;

inline constexpr size_t kMaxProducerBytes = 64;
/// Modes of one register layout: each has size >= 2 and their product is bounded, so this is
/// never reached by a layout within maxLayoutElements; it caps the count before allocating.
inline constexpr uint32_t kMaxLayoutModes = 64;
/// Swizzle parameters: bits, base, shift <= 62 and bits + base <= 62 keep every mask and shift
/// of the offset computation inside int64.
inline constexpr uint64_t kMaxSwizzleParam = 62;

enum SectionId : uint8_t {
  kSectionProducer = 1,
  kSectionPrograms = 2,
  kSectionDebug = 3,
};

/// Work and memory spent while decoding one module.
struct DecodeBudget {
  int64_t layoutElements = 0; // elements summed over every layout (and shared layout node) built
  uint64_t memoryBytes = 0;   // estimated bytes of IR allocated so far
};

/// Charge `bytes` of IR memory before allocating them; records an error and returns false once
/// the module's total would exceed maxDecodedBytes.
bool chargeMemory(ByteReader &r, const BytecodeLimits &limits, DecodeBudget &budget,
                  uint64_t bytes);

// bytecode_layout.cpp
void writeRegisterLayout(ByteWriter &w, const RegisterLayout &layout);
void writeSharedLayout(ByteWriter &w, const SharedLayout &layout);
std::optional<RegisterLayout> readRegisterLayout(ByteReader &r, const BytecodeLimits &limits,
                                                 DecodeBudget &budget);
std::optional<SharedLayout> readSharedLayout(ByteReader &r, const BytecodeLimits &limits,
                                             DecodeBudget &budget);

// bytecode_write.cpp: section payloads.
/// `fields`: the program-field flags (kFlagBlocksPerSm, kFlagCluster, kFlagEviction) of the
/// fields to write.
void writeProgramsPayload(ByteWriter &w, const Module &module, uint32_t fields);
void writeDebugPayload(ByteWriter &w, const Module &module);

// bytecode_read.cpp: section payloads; the reader's limit is the section's end.
/// `fields`: the program-field flags (kFlagBlocksPerSm, kFlagCluster, kFlagEviction) of the
/// fields present.
void readProgramsPayload(ByteReader &r, const BytecodeLimits &limits, Module &module,
                         uint32_t fields);
void readDebugPayload(ByteReader &r, const BytecodeLimits &limits, Module &module);

} // namespace tilus::bytecode
