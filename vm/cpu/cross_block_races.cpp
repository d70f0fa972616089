// The sweep behind CrossBlockRaces (see cross_block_races.h). Ranges are sorted by start;
// while walking them, `Reach` keeps the range that reaches furthest and the one that reaches
// furthest among the other blocks, which is all one needs to know whether some range of a
// different block still covers the current start.
#include "vm/cpu/cross_block_races.h"

#include "vm/cpu/launch_plan.h"

#include <algorithm>

namespace tilus::cpu {

namespace {

constexpr size_t kMaxReports = 16;

/// The two furthest-reaching ranges seen so far that belong to different blocks.
struct Reach {
  const AccessInterval *first = nullptr;  // largest hi
  const AccessInterval *second = nullptr; // largest hi among blocks other than first's

  void add(const AccessInterval &iv) {
    if (!first || iv.hi > first->hi) {
      if (first && first->block != iv.block)
        second = first;
      first = &iv;
    } else if (iv.block != first->block && (!second || iv.hi > second->hi)) {
      second = &iv;
    }
  }
  /// A range of a block other than `block` that extends beyond `lo`, or null.
  const AccessInterval *otherCovering(int64_t block, uint64_t lo) const {
    if (first && first->block != block)
      return first->hi > lo ? first : nullptr;
    return second && second->hi > lo ? second : nullptr;
  }
};

void sortByStart(std::vector<AccessInterval> &v) {
  std::sort(v.begin(), v.end(), [](const AccessInterval &a, const AccessInterval &b) {
    return a.lo != b.lo ? a.lo < b.lo : a.block < b.block;
  });
}

} // namespace

void CrossBlockRaces::add(std::vector<AccessInterval> reads, std::vector<AccessInterval> writes,
                          std::vector<AccessInterval> atomics) {
  std::lock_guard<std::mutex> lock(mutex_);
  reads_.insert(reads_.end(), reads.begin(), reads.end());
  writes_.insert(writes_.end(), writes.begin(), writes.end());
  atomics_.insert(atomics_.end(), atomics.begin(), atomics.end());
}

namespace {

const char *verb(bool present, int kind) {
  static const char *const kPresent[] = {" reads ", " writes ", " updates atomically "};
  static const char *const kPast[] = {" reads", " writes", " updates atomically"};
  return present ? kPresent[kind] : kPast[kind];
}

} // namespace

void CrossBlockRaces::report(const AccessInterval &earlier, Kind earlierKind,
                             const AccessInterval &later, Kind laterKind) {
  if (diagnostics_.size() >= kMaxReports ||
      !reported_.insert({earlier.instruction, later.instruction}).second)
    return;
  uint64_t at = std::max(earlier.lo, later.lo);
  int64_t element = later.element + int64_t((at - later.lo) / uint64_t(later.bits));
  std::string what = "global element " + std::to_string(element) + " of `" +
                     plan_.program->var(later.root).name + "`";
  diagnostics_.push_back(
      Diagnostic{ErrorCode::Race,
                 "data race between blocks: " + plan_.describe(later.instruction) + " in " +
                     blockName(plan_, later.block) + verb(true, int(laterKind)) + what +
                     ", which " + plan_.describe(earlier.instruction) + " in " +
                     blockName(plan_, earlier.block) + verb(false, int(earlierKind)) +
                     "; blocks run in no defined order and cannot wait for each other",
                 plan_.location(later.instruction)});
}

void CrossBlockRaces::writesAgainstWrites() {
  Reach reach;
  for (const AccessInterval &w : writes_) {
    if (const AccessInterval *other = reach.otherCovering(w.block, w.lo))
      report(*other, Kind::Write, w, Kind::Write);
    reach.add(w);
  }
}

void CrossBlockRaces::probeAgainst(const std::vector<AccessInterval> &probes, Kind probeKind,
                                   const std::vector<AccessInterval> &against, Kind againstKind) {
  Reach reach; // over ranges of `against` that start at or before the current probe
  size_t next = 0;
  for (const AccessInterval &r : probes) {
    while (next < against.size() && against[next].lo <= r.lo)
      reach.add(against[next++]);
    if (const AccessInterval *other = reach.otherCovering(r.block, r.lo)) {
      report(*other, againstKind, r, probeKind);
      continue;
    }
    for (size_t k = next; k < against.size() && against[k].lo < r.hi; ++k) {
      if (against[k].block != r.block) {
        report(against[k], againstKind, r, probeKind);
        break;
      }
    }
  }
}

std::vector<Diagnostic> CrossBlockRaces::analyze() {
  std::lock_guard<std::mutex> lock(mutex_);
  sortByStart(reads_);
  sortByStart(writes_);
  sortByStart(atomics_);
  writesAgainstWrites();
  probeAgainst(reads_, Kind::Read, writes_, Kind::Write);
  probeAgainst(atomics_, Kind::Atomic, writes_, Kind::Write);
  probeAgainst(atomics_, Kind::Atomic, reads_, Kind::Read);
  return std::move(diagnostics_);
}

} // namespace tilus::cpu
