// Reading and writing the files the tools and the runtime are given, as untrusted paths.
//
// Inputs must be regular files (a directory, device, FIFO or socket is an error: nothing is
// read from /dev/zero or a pipe without bound) and are size-checked before anything is
// allocated. Outputs follow what compilers do: a regular file (or a new one) is replaced
// atomically through a temporary file in the same directory and a rename, so a failed run never
// leaves a truncated file; a symbolic link is followed and its target written the same way; a
// device, FIFO or other non-regular file (/dev/null, /dev/stdout) is opened and written in
// place, never replaced; a directory is an error.
#pragma once

#include "isa/status.h"

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace tilus {

/// The contents of the regular file at `path`, refused (ErrorCode::Io, located at the path)
/// when it is not a regular file or holds more than `maxBytes` bytes.
Expected<std::vector<uint8_t>> readRegularFile(const std::string &path, uint64_t maxBytes);

/// Check, before any work is done, that `path` can later be written by writeOutputFile: its
/// directory exists and it is not a directory itself.
Status checkOutputPath(const std::string &path);

/// Write `data` to `path` as described above.
Status writeOutputFile(const std::string &path, std::span<const uint8_t> data);

} // namespace tilus
