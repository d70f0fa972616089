// The interpreter's cooperative tasks under ThreadSanitizer: the blocks of thread-block clusters
// (vm/cpu/cluster_scheduler.h) and the thread groups inside them (group_scheduler.h) each run on
// a host thread of their own and hand control over through a mutex and condition variable, while
// several workers run clusters in parallel. Built and run under ThreadSanitizer by
// scripts/tsan.sh; it also runs in the normal build as an ordinary test. Reference: the plain
// sums of tests/cluster_program.h, and a run in which a block traps (the others abandoned).
#include "assembler/assembler.h"
#include "cluster_program.h"
#include "loader/checker.h"
#include "test_helpers.h"
#include "vm/cpu/interpreter.h"

#include <cmath>

using namespace tilus;

namespace {

constexpr int64_t kTiles = 6, kTile = 16 * 32;

VerifiedModule build(const std::string &source, int64_t c) {
  AssembleOptions options;
  options.defines = {{"C", std::to_string(c)}};
  Expected<Module> module = assemble(source, options);
  REQUIRE_OK(module);
  Expected<VerifiedModule> verified = checkModule(std::move(module).value());
  REQUIRE_OK(verified);
  return std::move(verified).value();
}

template <typename T> KernelArg bufferArg(std::vector<T> &v) {
  KernelArg a;
  a.pointer = v.data();
  a.byteSize = v.size() * sizeof(T);
  return a;
}

} // namespace

TEST_CASE("cooperative tasks: clusters with and without thread groups on four workers") {
  const int64_t nc = 6;
  for (const std::string &source : {tilus::testing::kClusterPipe, tilus::testing::kClusterGroups})
    for (int64_t c : {2, 4}) {
      CAPTURE(c);
      VerifiedModule m = build(source, c);
      std::vector<float> x(size_t(nc * kTiles * kTile)), y(size_t(nc * c * kTile), 0.0f);
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = float(int(i % 53) - 26) * 0.5f;
      KernelArg n;
      n.scalarBits = uint64_t(nc);
      CpuRunOptions o;
      o.numWorkers = 4;
      REQUIRE_OK(runOnCpu(m, 0, {bufferArg(x), bufferArg(y), n}, o));
      int64_t bad = 0;
      for (int64_t pid = 0; pid < nc * c; ++pid)
        for (int64_t e = 0; e < kTile; ++e) {
          double want = 0;
          for (int64_t t = 0; t < kTiles; ++t)
            want += x[size_t(((pid / c) * kTiles + t) * kTile + e)];
          bad += std::fabs(y[size_t(pid * kTile + e)] - want) > 1e-3;
        }
      CHECK(bad == 0);
    }
}

TEST_CASE("cooperative tasks: a block that traps abandons its cluster's other blocks") {
  std::string source = tilus::testing::kClusterGroups;
  const std::string from = "LoadShared(SliceShared(st, offset=[s, 0:, 0:]),";
  source.replace(source.find(from), from.size(),
                 "LoadShared(SliceShared(st, offset=[s + rank * S, 0:, 0:]),");
  VerifiedModule m = build(source, 2);
  const int64_t nc = 4;
  std::vector<float> x(size_t(nc * kTiles * kTile), 1.0f), y(size_t(nc * 2 * kTile), 0.0f);
  KernelArg n;
  n.scalarBits = uint64_t(nc);
  CpuRunOptions o;
  o.numWorkers = 4;
  Status s = runOnCpu(m, 0, {bufferArg(x), bufferArg(y), n}, o);
  REQUIRE(!s.ok());
  for (const Diagnostic &d : s.diagnostics())
    CHECK(d.code == ErrorCode::OutOfBounds);
}
