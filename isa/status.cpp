#include "isa/status.h"

namespace tilus {

const char *errorCodeName(ErrorCode code) {
  switch (code) {
#define TILUSVM_X(name, text)                                                                      \
  case ErrorCode::name:                                                                            \
    return text;
    TILUSVM_ERROR_CODES(TILUSVM_X)
#undef TILUSVM_X
  }
  return "unknown";
}

std::optional<ErrorCode> errorCodeFromName(const std::string &name) {
#define TILUSVM_X(id, text)                                                                        \
  if (name == text)                                                                                \
    return ErrorCode::id;
  TILUSVM_ERROR_CODES(TILUSVM_X)
#undef TILUSVM_X
  return std::nullopt;
}

std::string Location::toString() const {
  if (line != 0) {
    std::string s = (file.empty() ? std::string("<input>") : file) + ":" + std::to_string(line);
    // Appended piecewise: "..." + std::string&& trips a false -Wrestrict warning of GCC 12
    // (GCC bug 105329).
    if (column != 0) {
      s += ':';
      s += std::to_string(column);
    }
    return s;
  }
  if (instruction >= 0 || !program.empty()) {
    std::string s = file.empty() ? std::string("<bytecode>") : file;
    s += ':';
    s += program.empty() ? std::string("?") : program;
    if (instruction >= 0) {
      s += ':';
      s += std::to_string(instruction);
    }
    if (instruction >= 0 && !opcode.empty())
      s += " (" + opcode + ")";
    return s;
  }
  if (!file.empty())
    return file;
  return "<unknown>";
}

std::string Diagnostic::toString() const {
  return location.toString() + ": error[" + errorCodeName(code) + "]: " + message;
}

std::string Status::toString() const {
  std::string s;
  for (const Diagnostic &d : diagnostics_) {
    if (!s.empty())
      s += "\n";
    s += d.toString();
  }
  return s;
}

} // namespace tilus
