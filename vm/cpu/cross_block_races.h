// Checked mode's race check between blocks. Blocks of one launch run in no defined order and
// cannot wait for each other, so a global element that one block writes and another block
// reads or writes is a race whatever the program does. Every block hands over the global bit
// ranges it read and wrote (coalesced, see race_detector.h); once all blocks have run, one
// sweep over the ranges sorted by address finds writes that overlap a range of another block.
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
  void add(std::vector<AccessInterval> reads, std::vector<AccessInterval> writes);
  /// Compare all recorded ranges; one diagnostic per pair of instructions (at most 16).
  std::vector<Diagnostic> analyze();

private:
  void report(const AccessInterval &earlier, bool earlierWrites, const AccessInterval &later,
              bool laterWrites);
  void writesAgainstWrites();
  void readsAgainstWrites();

  const LaunchPlan &plan_;
  std::mutex mutex_;
  std::vector<AccessInterval> reads_, writes_;
  std::set<std::pair<uint32_t, uint32_t>> reported_;
  std::vector<Diagnostic> diagnostics_;
};

} // namespace tilus::cpu
