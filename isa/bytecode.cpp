// The framing of a bytecode file (docs/bytecode.md, "Header" and "Sections"): a fixed 32-byte
// header (magic, format version, flags, total length, XXH3-64 of everything after the header),
// then the producer, programs and optional debug sections, each an id and a length with a
// payload that must end exactly at the section's end. The payloads are written and read by
// bytecode_write.cpp and bytecode_read.cpp.
//
// The integrity hash is checked before any section is parsed, so a damaged file is reported as
// such rather than as whatever structural error the damage happens to cause.
#include "isa/bytecode.h"
#include "isa/bytecode_format.h"

#include <xxhash.h>

#include <cstdio>
#include <cstring>
#include <string>

#ifndef TILUSVM_VERSION
#error "TILUSVM_VERSION must be defined by the build"
#endif

namespace tilus {

namespace {

using bytecode::ByteReader;
using bytecode::ByteWriter;

constexpr const char *kProducer = "tilusvm " TILUSVM_VERSION;

std::string hex64(uint64_t v) {
  char buf[19];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

void writeSection(ByteWriter &out, uint8_t id, const ByteWriter &payload) {
  out.u8(id);
  out.sized(payload);
}

/// The programs section; `fields`: the optional program fields to write
/// (bytecode::programFieldFlags: header flags kFlagBlocksPerSm, kFlagCluster, kFlagEviction).
ByteWriter programsSection(const Module &module, uint32_t fields) {
  ByteWriter payload;
  bytecode::writeProgramsPayload(payload, module, fields);
  ByteWriter section;
  writeSection(section, bytecode::kSectionPrograms, payload);
  return section;
}

/// Reads one section: its id must be `id`, its payload is read by `readPayload` and must end
/// exactly at the section's end.
template <typename F> void readSection(ByteReader &r, uint8_t id, const char *name, F readPayload) {
  r.setContext("");
  size_t at = r.offset();
  uint8_t found = r.u8("section id");
  if (r.ok() && found != id)
    return r.failAt(at, "expected section " + std::to_string(id) + " (" + name +
                            "), found section id " + std::to_string(found));
  at = r.offset();
  uint64_t size = r.uleb("section size");
  if (r.ok() && size > r.remaining())
    return r.failAt(at, "section " + std::to_string(id) + " size " + std::to_string(size) +
                            " exceeds remaining " + std::to_string(r.remaining()) + " bytes");
  if (!r.ok())
    return;
  size_t saved = r.pushLimit(size_t(size));
  readPayload();
  if (r.ok() && r.remaining() != 0) {
    r.setContext("");
    r.fail("section " + std::to_string(id) + " (" + name + ") has " +
           std::to_string(r.remaining()) + " bytes left after its content");
  }
  r.popLimit(saved);
}

void readProducer(ByteReader &r) {
  size_t at = r.offset();
  std::string producer = r.str("producer", bytecode::kMaxProducerBytes);
  if (!r.ok())
    return;
  bool printable = !producer.empty();
  for (char c : producer)
    printable = printable && c >= 0x20 && c < 0x7f;
  if (!printable)
    r.failAt(at, "producer must be 1 to " + std::to_string(bytecode::kMaxProducerBytes) +
                     " printable ASCII characters");
}

/// Header fields; returns the flags (kFlagDebugInfo, kFlagBlocksPerSm, kFlagCluster,
/// kFlagEviction).
uint32_t readHeader(ByteReader &r, std::span<const uint8_t> bytes) {
  std::span<const uint8_t> magic = r.raw("magic", 4);
  if (r.ok() && std::memcmp(magic.data(), bytecode::kMagic, 4) != 0)
    r.failAt(0, "bad magic: not a Tilus bytecode file (expected \"TLBC\")");
  size_t at = r.offset();
  uint32_t version = r.u32le("format version");
  if (r.ok() && version != kBytecodeFormatVersion)
    r.failAt(at, "unsupported format version " + std::to_string(version) + " (this build reads " +
                     std::to_string(kBytecodeFormatVersion) + ")");
  at = r.offset();
  uint32_t flags = r.u32le("flags");
  if (r.ok() && (flags & ~(bytecode::kFlagDebugInfo | bytecode::kFlagBlocksPerSm |
                           bytecode::kFlagCluster | bytecode::kFlagEviction)) != 0)
    r.failAt(at, "unknown flags " + hex64(flags));
  at = r.offset();
  if (r.u32le("reserved") != 0)
    r.failAt(at, "reserved header field is not zero");
  at = r.offset();
  uint64_t total = r.u64le("total length");
  if (r.ok() && total != bytes.size())
    r.failAt(at, "header total length " + std::to_string(total) + " differs from the " +
                     std::to_string(bytes.size()) + " bytes given");
  at = r.offset();
  uint64_t stored = r.u64le("integrity hash");
  if (!r.ok())
    return 0;
  uint64_t computed =
      XXH3_64bits(bytes.data() + bytecode::kHeaderBytes, bytes.size() - bytecode::kHeaderBytes);
  if (stored != computed)
    r.failAt(at, "integrity hash mismatch: header has " + hex64(stored) + ", contents hash to " +
                     hex64(computed));
  return flags;
}

} // namespace

std::vector<uint8_t> encodeModule(const Module &module, const EncodeOptions &options) {
  ByteWriter body;
  ByteWriter producer;
  producer.str(kProducer);
  writeSection(body, bytecode::kSectionProducer, producer);
  const uint32_t fields = bytecode::programFieldFlags(module);
  body.bytes(programsSection(module, fields).data());
  if (options.debugInfo) {
    ByteWriter debug;
    bytecode::writeDebugPayload(debug, module);
    writeSection(body, bytecode::kSectionDebug, debug);
  }
  ByteWriter out;
  out.reserve(bytecode::kHeaderBytes + body.size());
  for (uint8_t b : bytecode::kMagic)
    out.u8(b);
  out.u32le(kBytecodeFormatVersion);
  out.u32le((options.debugInfo ? bytecode::kFlagDebugInfo : 0) | fields);
  out.u32le(0);
  out.u64le(bytecode::kHeaderBytes + body.size());
  out.u64le(XXH3_64bits(body.data().data(), body.size()));
  out.bytes(body.data());
  return out.take();
}

Expected<Module> decodeModule(std::span<const uint8_t> bytes, const BytecodeLimits &limits) {
  if (bytes.size() > limits.maxFileBytes)
    return Status::error(ErrorCode::Bytecode, "file size " + std::to_string(bytes.size()) +
                                                  " exceeds limit " +
                                                  std::to_string(limits.maxFileBytes));
  ByteReader r(bytes);
  Module module;
  uint32_t flags = readHeader(r, bytes);
  module.hasDebugInfo = (flags & bytecode::kFlagDebugInfo) != 0;
  readSection(r, bytecode::kSectionProducer, "producer", [&] { readProducer(r); });
  readSection(r, bytecode::kSectionPrograms, "programs", [&] {
    bytecode::readProgramsPayload(
        r, limits, module,
        flags & (bytecode::kFlagBlocksPerSm | bytecode::kFlagCluster | bytecode::kFlagEviction));
  });
  if (module.hasDebugInfo)
    readSection(r, bytecode::kSectionDebug, "debug",
                [&] { bytecode::readDebugPayload(r, limits, module); });
  if (r.ok() && r.remaining() != 0) {
    r.setContext("");
    r.fail(std::to_string(r.remaining()) + " bytes after the last section");
  }
  if (!r.ok())
    return r.status();
  return module;
}

uint64_t moduleContentHash(const Module &module) {
  ByteWriter section = programsSection(module, bytecode::programFieldFlags(module));
  return XXH3_64bits(section.data().data(), section.size());
}

} // namespace tilus
