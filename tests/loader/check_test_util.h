// Helpers shared by the loader tests: assemble-and-check a source text, look up derived types
// by variable name, parse layouts written in the tests.
#pragma once

#include "assembler/assembler.h"
#include "loader/checker.h"

#include <string>
#include <string_view>
#include <vector>

namespace tilus::testing {

/// The file name that diagnostics of checkSource carry.
inline constexpr const char *kTestFile = "test.tasm";

/// Assemble `source` (as test.tasm) and check it; assembler diagnostics are returned as is.
Expected<VerifiedModule> checkSource(std::string_view source, CheckOptions options = {});
/// The text of a one-program module: `def k<1>(HEADER) threads=32:` on line 1, then `body`
/// (whose first line is line 2 of the module).
std::string kernel(std::string_view params, std::string_view body, int threads = 32);
/// Checks that `source` fails and that its first diagnostic has `code` (and `line` when not 0).
void expectError(std::string_view source, ErrorCode code, uint32_t line = 0);
/// Every diagnostic's code, in order.
std::vector<ErrorCode> codesOf(const Status &status);
/// The ProgramInfo of the program called `program` (REQUIREs that it exists).
const ProgramInfo &programInfo(const VerifiedModule &m, const std::string &program);
/// The type of the last variable called `name` in `program` (REQUIREs that it exists).
const VarType &varType(const VerifiedModule &m, const std::string &program,
                       const std::string &name);
/// A layout written in the tests (REQUIREs that it parses).
RegisterLayout layoutOf(std::string_view text);
/// The contents of a file (REQUIREs that it can be read).
std::string readText(const std::string &path);

} // namespace tilus::testing
