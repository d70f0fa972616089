// Checked mode's race check between blocks. Blocks of one launch run in no defined order and
// cannot wait for each other, so a global element that one block writes and another block
// reads or writes is a race whatever the program does; so is one that a block updates atomically
// and another reads or writes plainly (atomics of different blocks do not race with each
// other). Every block hands over the global bit ranges it read, wrote and updated atomically
// (coalesced, see race_detector.h); once all blocks have run, sweeps over the ranges sorted by
// address find ranges of conflicting kinds of different blocks that overlap.
// Cost: proportional to the number of ranges, not of elements, so large grids stay cheap.
#pragma once

#include "vm/cpu/race_detector.h"

#include <mutex>
#include <set>
#include <utility>
#include <vector>

namespace tilus::cpu {

class CrossBlockRaces {
public:
  explicit CrossBlockRaces(const LaunchPlan &plan) : plan_(plan) {}

  /// Record one finished block's ranges (thread-safe).
  void add(std::vector<AccessInterval> reads, std::vector<AccessInterval> writes,
           std::vector<AccessInterval> atomics);
  /// Compare all recorded ranges; one diagnostic per pair of instructions (at most 16).
  std::vector<Diagnostic> analyze();

private:
  enum class Kind : uint8_t { Read, Write, Atomic };
  void report(const AccessInterval &earlier, Kind earlierKind, const AccessInterval &later,
              Kind laterKind);
  void writesAgainstWrites();
  /// Report ranges of `probes` that overlap a range of `against` of another block.
  void probeAgainst(const std::vector<AccessInterval> &probes, Kind probeKind,
                    const std::vector<AccessInterval> &against, Kind againstKind);

  const LaunchPlan &plan_;
  std::mutex mutex_;
  std::vector<AccessInterval> reads_, writes_, atomics_;
  std::set<std::pair<uint32_t, uint32_t>> reported_;
  std::vector<Diagnostic> diagnostics_;
};

} // namespace tilus::cpu
