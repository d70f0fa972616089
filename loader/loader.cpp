// Loading bytecode: the one path by which programs from outside enter the runtime. Bytes are
// read (bounded by BytecodeLimits::maxFileBytes), decoded defensively (isa/bytecode.cpp) and
// checked (loader/checker.cpp); only a module that passes both becomes a VerifiedModule.
#include "loader/loader.h"

#include <cerrno>
#include <cstring>
#include <fstream>

namespace tilus {

namespace {

Expected<std::vector<uint8_t>> readBounded(const std::string &path, uint64_t maxBytes) {
  Location loc;
  loc.file = path;
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in)
    return Status::error(ErrorCode::Io, std::string("cannot open file: ") + std::strerror(errno),
                         loc);
  std::streamoff size = in.tellg();
  if (size < 0)
    return Status::error(ErrorCode::Io, "cannot determine the file size", loc);
  if (uint64_t(size) > maxBytes)
    return Status::error(ErrorCode::Bytecode,
                         "file size " + std::to_string(size) + " exceeds the limit of " +
                             std::to_string(maxBytes) + " bytes",
                         loc);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  in.seekg(0);
  if (size > 0 && !in.read(reinterpret_cast<char *>(bytes.data()), size))
    return Status::error(ErrorCode::Io, "read failed: file of " + std::to_string(size) + " bytes",
                         loc);
  return bytes;
}

} // namespace

Expected<std::vector<uint8_t>> readFileBytes(const std::string &path) {
  return readBounded(path, UINT64_MAX);
}

Expected<VerifiedModule> loadModule(std::span<const uint8_t> bytes, const CheckOptions &options,
                                    const BytecodeLimits &limits) {
  Expected<Module> module = decodeModule(bytes, limits);
  if (!module)
    return module.takeStatus();
  CheckOptions opts = options;
  if (opts.fileName.empty() && module->hasDebugInfo)
    opts.fileName = module->sourceName;
  return checkModule(std::move(*module), opts);
}

Expected<VerifiedModule> loadModuleFile(const std::string &path, const CheckOptions &options) {
  BytecodeLimits limits;
  Expected<std::vector<uint8_t>> bytes = readBounded(path, limits.maxFileBytes);
  if (!bytes)
    return bytes.takeStatus();
  return loadModule(*bytes, options, limits);
}

} // namespace tilus
