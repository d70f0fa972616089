// The GPU test runner: runs every test case when a CUDA driver and device are present, and
// otherwise skips them all, saying why on stdout, and exits 0 (doctest reports them skipped).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include "skip_listener.h"
#include "vm/cuda/runtime.h"

#include <iostream>

int main(int argc, char **argv) {
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  tilus::Status available = tilus::cuda::cudaAvailable();
  if (!available.ok()) {
    tilus::testing::runnerSkipReason() = "no CUDA GPU: " + available.first().message;
    context.addFilter("test-case-exclude", "*");
  }
  return context.run();
}
