// Checked mode's data-race detector (ISA section 1).
//
// Within a block, Synchronize() splits execution into epochs. Every shared or global element
// remembers its last write and last read (epoch, dynamic instruction instance, static
// instruction, thread). Two accesses race when they are in the same epoch, come from different
// dynamic instructions (two iterations of one loop body are different instructions), and at
// least one writes. A CopyAsync destination is "pending" from the copy until the wait that
// covers it: any access to it in between races with the copy; at the wait the data lands as a
// write of the copy in the wait's epoch, so reading it before the next Synchronize() races too.
// A TmaLoad destination is pending from the copy until the mbarrier wait that observes the
// completion of its phase, where it lands as a write ordered before that wait.
// A Wgmma reads its shared operands until the WgmmaWaitGroup that covers it: a write to them in
// between races with the Wgmma, whatever the epochs.
//
// Atomics (AtomicAdd ...) are accesses of their own kind: two atomic accesses never race, an
// atomic and a plain read or write race under the same rule as a read and a write (same epoch,
// different dynamic instructions), and a CopyAsync destination that is still pending races with
// an atomic as with a write.
//
// Across blocks (which run in no defined order and cannot wait for each other), a global
// element written by one block and read or written by another is a race, and so is one that a
// block updates atomically while another reads or writes it plainly. Each block also records the
// global bit ranges it read, wrote and updated atomically (coalesced intervals), which
// cross_block_races.h compares once every block has run.
#pragma once

#include "isa/instruction.h"
#include "isa/status.h"

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace tilus::cpu {

struct LaunchPlan;

struct Access {
  uint64_t instance = 0; // dynamic instruction number; 0 = never
  uint32_t epoch = 0;
  uint32_t instruction = kNoId;
  int32_t thread = -1; // -1: the whole block (CopyAsync)
  int32_t group = -1;  // the thread group that made it (-1: the block, outside groups)
  uint32_t groupEpoch = 0;
};

struct Shadow {
  Access write, read, atomic;
  uint32_t pendingCopy = kNoId; // CopyAsync whose data has not landed
  uint32_t landedAt = kNoId;    // the wait at which write.instruction (a CopyAsync) landed
  uint32_t asyncReader = kNoId; // Wgmma still reading the element (until its WgmmaWaitGroup)
};

/// A range of global memory that one block read or wrote: bits [lo, hi) of host memory,
/// first touched by `instruction` at element `element` of the view rooted at `root`.
struct AccessInterval {
  uint64_t lo = 0, hi = 0;
  int64_t block = 0;
  uint32_t instruction = kNoId;
  VarId root = kNoId;
  int64_t element = 0;
  int32_t bits = 8; // element size, to name the element at any address of the interval
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
  /// A barrier of the block (Synchronize() outside thread groups, a completed mbarrier phase).
  void synchronize() { ++epoch_; }
  /// Accesses from now on are thread group `group`'s (-1: the block's again), whose thread t
  /// is the block's thread `firstThread` + t (reports name block threads); a Synchronize() in a
  /// group orders only that group's accesses (docs/isa.md, "Thread groups").
  void enterGroup(int32_t group, int32_t firstThread) {
    group_ = group;
    threadBase_ = firstThread;
    if (group >= 0 && size_t(group) >= groupEpochs_.size())
      groupEpochs_.resize(size_t(group) + 1, 0);
  }
  void synchronizeGroup() {
    if (group_ >= 0)
      ++groupEpochs_[size_t(group_)];
    else
      ++epoch_;
  }

  void sharedRead(VarId root, int64_t element, int32_t thread);
  void sharedWrite(VarId root, int64_t element, int32_t thread);
  void sharedCopyIssue(VarId root, int64_t element);
  /// The data of a pending copy lands: at a CopyAsync wait as a write of the copy in the
  /// current epoch (reading it before the next Synchronize() races); `atBarrier` (a TmaLoad at
  /// the mbarrier wait that observes its phase): as a write ordered before everything after.
  void sharedCopyLand(VarId root, int64_t element, uint32_t copyInstruction,
                      bool atBarrier = false);
  /// A Wgmma operand read by the whole block that lasts until its WgmmaWaitGroup: a write to the
  /// element before sharedAsyncReadEnd races with it.
  void sharedAsyncRead(VarId root, int64_t element);
  /// Another block of the cluster's TmaLoadMulticast (instruction `copy`) writes the element:
  /// pending until this block's wait observes its phase, like sharedCopyIssue, but not checked
  /// against this block's earlier accesses (other blocks' barriers order those, which the
  /// detector does not follow).
  void sharedRemoteCopyIssue(VarId root, int64_t element, uint32_t copy);
  void sharedAsyncReadEnd(VarId root, int64_t element, uint32_t reader);
  /// `key` is the element's bit address in host memory, `bits` its size; root/element name it.
  void globalRead(uint64_t key, int bits, VarId root, int64_t element, int32_t thread);
  void globalWrite(uint64_t key, int bits, VarId root, int64_t element, int32_t thread);
  /// An atomic read-modify-write (races with plain accesses only).
  void sharedAtomic(VarId root, int64_t element, int32_t thread);
  void globalAtomic(uint64_t key, int bits, VarId root, int64_t element, int32_t thread);

  std::vector<Diagnostic> takeDiagnostics() { return std::move(diagnostics_); }
  /// The block's global reads and writes, sorted and coalesced (call once, at the block's end).
  std::vector<AccessInterval> takeReads();
  std::vector<AccessInterval> takeWrites();
  std::vector<AccessInterval> takeAtomics();

private:
  enum class Kind : uint8_t {
    ReadAfterWrite,
    WriteAfterRead,
    WriteAfterWrite,
    PendingRead,
    PendingWrite,
    PendingAsyncRead,
    UnsyncedLanding,
    ReadAfterAtomic,
    WriteAfterAtomic,
    AtomicAfterWrite,
    AtomicAfterRead,
    PendingAtomic
  };
  /// The element an access touches (names are only built when something is reported).
  struct Target {
    bool global;
    VarId root;
    int64_t element;
  };
  Shadow &sharedShadow(VarId root, int64_t element);
  void checkRead(Shadow &s, const Target &target, int32_t thread);
  void checkWrite(Shadow &s, const Target &target, int32_t thread);
  void checkAtomic(Shadow &s, const Target &target, int32_t thread);
  /// Whether access `a` is in the current epoch and from another dynamic instruction.
  /// Within a thread group also: another group's, or the group's own in its current epoch.
  bool concurrent(const Access &a) const {
    return a.instance != 0 && a.epoch == epoch_ && a.instance != instance_ &&
           (a.group != group_ || group_ < 0 || a.groupEpoch == groupEpochs_[size_t(group_)]);
  }
  /// The current access of `thread` (instruction `instruction`, epoch `epoch`).
  Access now(uint32_t instruction, int32_t thread, uint32_t epoch) const {
    return Access{instance_, epoch,  instruction,
                  thread,    group_, group_ >= 0 ? groupEpochs_[size_t(group_)] : 0};
  }
  /// Whether to (re)write the report for this pair of instructions: the first conflict of a
  /// pair is reported, and replaced once by a conflict between two different threads (the
  /// more telling example) if the first was between accesses of one thread.
  bool shouldReport(Kind kind, uint32_t other, int32_t thread, int32_t otherThread);
  void report(const std::string &message);
  /// Report (shouldReport permitting) that the current access of `thread` (`verb`: "reads",
  /// ...) conflicts with the concurrent access `prior` (`how`: "written by", ...).
  void conflict(Kind kind, const Access &prior, const Target &target, int32_t thread,
                const char *verb, const char *how);
  std::string name(const Target &target) const;
  std::string site(uint32_t instruction, int32_t thread) const;

  const LaunchPlan &plan_;
  int64_t block_ = 0;
  uint64_t instance_ = 0;
  uint32_t epoch_ = 1;
  uint32_t current_ = kNoId;
  int32_t group_ = -1;
  int32_t threadBase_ = 0;                  // the running group's first thread in the block
  std::vector<uint32_t> groupEpochs_;       // per thread group of the block
  std::vector<std::vector<Shadow>> shared_; // per shared root VarId
  std::unordered_map<uint64_t, Shadow> global_;
  std::vector<AccessInterval> reads_, writes_, atomics_;
  struct Reported {
    size_t index;     // into diagnostics_
    bool crossThread; // its threads differ
  };
  std::map<std::tuple<int, uint32_t, uint32_t>, Reported> reported_;
  size_t pendingSlot_ = 0; // where report() writes
  std::vector<Diagnostic> diagnostics_;
};

/// "block (1, 0, 0)" for a linear block number of the plan's grid.
std::string blockName(const LaunchPlan &plan, int64_t linear);

} // namespace tilus::cpu
