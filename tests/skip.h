// Skipping test cases honestly: `TEST_CASE("name" * needsGpu())` is registered as skipped when
// the host lacks what the case needs, so doctest counts it in its "skipped" number (never as
// passed), and the listener of skip_listener.h prints the case's name with the reason. The
// decision is taken once, at registration, from what the host has: a CUDA driver with a device,
// or ptxas.
#pragma once

#include "vm/cuda/runtime.h"

#include <doctest/doctest.h>

#include <string>

namespace tilus::testing {

/// A doctest decorator: skip the case (with `reason`, which must outlive the run) unless `run`.
struct SkipUnless {
  bool run = true;
  const char *reason = nullptr;

  void fill(doctest::detail::TestCase &state) const {
    if (!run) {
      state.m_skip = true;
      state.m_description = reason;
    }
  }
  void fill(doctest::detail::TestSuite &state) const {
    if (!run) {
      state.m_skip = true;
      state.m_description = reason;
    }
  }
};

/// Why the GPU cases cannot run here ("" when a CUDA driver reports a device).
inline const std::string &gpuMissingReason() {
  static const std::string reason = [] {
    Status available = cuda::cudaAvailable();
    return available.ok() ? std::string() : "no CUDA GPU: " + available.first().message;
  }();
  return reason;
}

/// Skip unless a CUDA driver and a device are present.
inline SkipUnless needsGpu() { return {gpuMissingReason().empty(), gpuMissingReason().c_str()}; }

} // namespace tilus::testing
