// Loading bytecode: the one path by which programs from outside enter the runtime. Bytes are
// read (bounded by BytecodeLimits::maxFileBytes), decoded defensively (isa/bytecode.cpp) and
// checked (loader/checker.cpp); only a module that passes both becomes a VerifiedModule.
#include "loader/loader.h"

#include "isa/file_io.h"

namespace tilus {

namespace {

/// A regular file of at most `maxBytes` bytes (isa/file_io.h: directories, devices and FIFOs
/// are refused before anything is read).
Expected<std::vector<uint8_t>> readBounded(const std::string &path, uint64_t maxBytes) {
  return readRegularFile(path, maxBytes);
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
