// The stripped-layout variant of the program tests (docs/layout-inference.md, "Tests"). Built with
// TILUSVM_STRIP_LAYOUTS defined, a program test assembles its program with every performance-only
// layout annotation removed (stripPerformanceLayouts), so that the assembler infers them, and
// checks the results against the same C++ references as the program written by hand. Without the
// macro the source is used as written.
#pragma once

#include "assembler/assembler.h"
#include "test_helpers.h"

#include <string>

namespace tilus::testing {

inline std::string programUnderTest(const std::string &source, const AssembleOptions &options) {
#ifdef TILUSVM_STRIP_LAYOUTS
  Expected<std::string> stripped = stripPerformanceLayouts(source, options);
  REQUIRE_OK(stripped);
  REQUIRE_MESSAGE(*stripped != source,
                  "no performance-only layout to strip in " << options.fileName);
  return *stripped;
#else
  (void)options;
  return source;
#endif
}

} // namespace tilus::testing
