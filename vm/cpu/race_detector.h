// Checked mode's data-race detector (ISA section 1).
//
// Within a block, Synchronize() splits execution into epochs. Every shared or global element
// remembers its last write and last read (epoch, dynamic instruction instance, static
// instruction, thread). Two accesses race when they are in the same epoch, come from different
// dynamic instructions (two iterations of one loop body are different instructions), and at
// least one writes. A CopyAsync destination is "pending" from the copy until the wait that
// covers it: any access to it in between races with the copy; at the wait the data lands as a
// write of the copy in the wait's epoch, so reading it before the next Synchronize() races too.
//
// Across blocks (which run in no defined order and cannot wait for each other), a global
// element written by one block and read or written by another is a race. Each block's
// accesses are merged into a launch-wide table when the block ends.
#pragma once

#include "isa/status.h"
#include "isa/instruction.h"

#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tilus::cpu {

struct LaunchPlan;

struct Access {
  uint64_t instance = 0;  // dynamic instruction number; 0 = never
  uint32_t epoch = 0;
  uint32_t instruction = kNoId;
  int32_t thread = -1;    // -1: the whole block (CopyAsync)
};

struct Shadow {
  Access write, read;
  uint32_t pendingCopy = kNoId; // CopyAsync whose data has not landed
  uint32_t landedAt = kNoId;    // the wait at which write.instruction (a CopyAsync) landed
};

/// Per global element of one block: the within-block shadow plus what the cross-block check
/// needs (any write and any read of the whole block).
struct GlobalShadow {
  Shadow shadow;
  VarId root = kNoId;
  int64_t element = 0;
  uint32_t anyWrite = kNoId;
  uint32_t anyRead = kNoId;
};

class BlockRaceDetector {
public:
  explicit BlockRaceDetector(const LaunchPlan &plan);

  /// Start a block: every shadow cleared.
  void reset(int64_t blockLinear);
  void beginInstruction(uint32_t instruction) {
    ++instance_;
    current_ = instruction;
  }
  void synchronize() { ++epoch_; }

  void sharedRead(VarId root, int64_t element, int32_t thread);
  void sharedWrite(VarId root, int64_t element, int32_t thread);
  void sharedCopyIssue(VarId root, int64_t element);
  void sharedCopyLand(VarId root, int64_t element, uint32_t copyInstruction);
  /// `key` identifies the element in host memory (its bit address); root/element name it.
  void globalRead(uint64_t key, VarId root, int64_t element, int32_t thread);
  void globalWrite(uint64_t key, VarId root, int64_t element, int32_t thread);

  const std::unordered_map<uint64_t, GlobalShadow> &globalAccesses() const { return global_; }
  std::vector<Diagnostic> takeDiagnostics() { return std::move(diagnostics_); }

private:
  enum class Kind : uint8_t { ReadAfterWrite, WriteAfterRead, WriteAfterWrite, PendingRead,
                              PendingWrite, UnsyncedLanding };
  /// The element an access touches (names are only built when something is reported).
  struct Target {
    bool global;
    VarId root;
    int64_t element;
  };
  Shadow &sharedShadow(VarId root, int64_t element);
  void checkRead(Shadow &s, const Target &target, int32_t thread);
  void checkWrite(Shadow &s, const Target &target, int32_t thread);
  bool shouldReport(Kind kind, uint32_t other);
  void report(const std::string &message);
  std::string name(const Target &target) const;
  std::string site(uint32_t instruction, int32_t thread) const;

  const LaunchPlan &plan_;
  int64_t block_ = 0;
  uint64_t instance_ = 0;
  uint32_t epoch_ = 1;
  uint32_t current_ = kNoId;
  std::vector<std::vector<Shadow>> shared_; // per shared root VarId
  std::unordered_map<uint64_t, GlobalShadow> global_;
  std::set<std::tuple<int, uint32_t, uint32_t>> reported_;
  std::vector<Diagnostic> diagnostics_;
};

/// The launch-wide record of which blocks touched which global elements.
class GlobalRaceTable {
public:
  explicit GlobalRaceTable(const LaunchPlan &plan) : plan_(plan) {}
  /// Merge the accesses of a finished block; reports conflicts with blocks merged before.
  void merge(int64_t blockLinear, const BlockRaceDetector &detector);
  std::vector<Diagnostic> takeDiagnostics();

private:
  struct Entry {
    int64_t writer = -1;
    uint32_t writerInstruction = kNoId;
    int64_t readers[2] = {-1, -1};
    uint32_t readerInstructions[2] = {kNoId, kNoId};
  };
  struct Shard {
    std::mutex mutex;
    std::unordered_map<uint64_t, Entry> entries;
  };
  static constexpr size_t kShards = 64;

  struct Found {
    std::pair<uint32_t, uint32_t> pair; // (earlier instruction, this block's instruction)
    Diagnostic diagnostic;
  };
  void mergeOne(Entry &entry, int64_t block, const GlobalShadow &access, std::vector<Found> &out);

  const LaunchPlan &plan_;
  Shard shards_[kShards];
  std::mutex reportMutex_;
  std::set<std::pair<uint32_t, uint32_t>> reported_;
  std::vector<Diagnostic> diagnostics_;
};

/// "block (1, 0, 0)" for a linear block number of the plan's grid.
std::string blockName(const LaunchPlan &plan, int64_t linear);

} // namespace tilus::cpu
