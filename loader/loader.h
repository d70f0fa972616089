// Loading bytecode: read a file or a memory buffer, decode it defensively, and check it.
#pragma once

#include "isa/bytecode.h"
#include "loader/checker.h"

#include <string>

namespace tilus {

Expected<std::vector<uint8_t>> readFileBytes(const std::string &path);
Expected<VerifiedModule> loadModule(std::span<const uint8_t> bytes,
                                    const CheckOptions &options = {},
                                    const BytecodeLimits &limits = {});
Expected<VerifiedModule> loadModuleFile(const std::string &path, const CheckOptions &options = {});

} // namespace tilus
