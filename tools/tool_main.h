// What the command-line tools' mains share: CLI11's parse with the tools' conventions, and the
// error boundary around a tool's body.
#pragma once

#include <CLI/CLI.hpp>

#include <exception>
#include <iostream>
#include <new>
#include <optional>

namespace tilus::tools {

/// Parse the command line. --help, --help-all and --version print and give exit code 0; any
/// other parse error gives `usageError(message)` (the tool's report and exit code). nullopt:
/// parsed, the tool goes on.
template <typename UsageError>
std::optional<int> parseCommandLine(CLI::App &app, int argc, char **argv, UsageError &&usageError) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp &e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion &e) {
    return app.exit(e);
  } catch (const CLI::ParseError &e) {
    return usageError(e.what());
  }
  return std::nullopt;
}

/// The error boundary of a tool's main: nothing escapes as an exception or an abort. Returns
/// runMain's exit code; on an exception prints `TOOL: outOfMemory` (std::bad_alloc) or
/// `TOOL: internal error: WHAT` and returns 1.
inline int guardedMain(int (*runMain)(int, char **), int argc, char **argv, const char *tool,
                       const char *outOfMemory) {
  try {
    return runMain(argc, argv);
  } catch (const std::bad_alloc &) {
    std::cerr << tool << ": " << outOfMemory << "\n";
  } catch (const std::exception &e) {
    std::cerr << tool << ": internal error: " << e.what() << "\n";
  }
  return 1;
}

} // namespace tilus::tools
