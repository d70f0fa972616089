// Checked mode's race detection: the shadow bookkeeping behind the rules stated in
// race_detector.h, and the wording of the reports (each names both instructions with their
// locations, the block, the threads and the element).
#include "vm/cpu/race_detector.h"

#include "vm/cpu/launch_plan.h"

#include <algorithm>
#include <utility>

namespace tilus::cpu {

namespace {

constexpr size_t kMaxReports = 16;

} // namespace

std::string blockName(const LaunchPlan &plan, int64_t linear) {
  int64_t x = linear % plan.grid[0];
  int64_t y = (linear / plan.grid[0]) % plan.grid[1];
  int64_t z = linear / (plan.grid[0] * plan.grid[1]);
  return "block (" + std::to_string(x) + ", " + std::to_string(y) + ", " + std::to_string(z) + ")";
}

BlockRaceDetector::BlockRaceDetector(const LaunchPlan &plan) : plan_(plan) {
  shared_.resize(plan.info->vars.size());
}

void BlockRaceDetector::reset(int64_t blockLinear) {
  block_ = blockLinear;
  instance_ = 0;
  epoch_ = 1;
  current_ = kNoId;
  group_ = -1;
  threadBase_ = 0;
  groupEpochs_.clear();
  const auto &vars = plan_.info->vars;
  for (size_t v = 0; v < vars.size(); ++v)
    if (vars[v].kind == VarKind::Shared && vars[v].sharedLayout)
      shared_[v].assign(size_t(vars[v].sharedLayout->size()), Shadow{});
  global_.clear();
  reads_.clear();
  writes_.clear();
  atomics_.clear();
  reported_.clear();
  diagnostics_.clear();
}

Shadow &BlockRaceDetector::sharedShadow(VarId root, int64_t element) {
  std::vector<Shadow> &shadows = shared_[root];
  if (size_t(element) >= shadows.size()) // callers trap out-of-bounds accesses first
    shadows.resize(size_t(element) + 1);
  return shadows[size_t(element)];
}

std::string BlockRaceDetector::site(uint32_t instruction, int32_t thread) const {
  std::string s = plan_.describe(instruction);
  if (thread >= 0)
    s += " (thread " + std::to_string(thread) + ")";
  return s;
}

std::string BlockRaceDetector::name(const Target &target) const {
  return std::string(target.global ? "global" : "shared") + " element " +
         std::to_string(target.element) + " of `" + plan_.program->var(target.root).name + "`";
}

bool BlockRaceDetector::shouldReport(Kind kind, uint32_t other, int32_t thread,
                                     int32_t otherThread) {
  bool cross = thread != otherThread || thread < 0;
  auto key = std::make_tuple(int(kind), current_, other);
  auto it = reported_.find(key);
  if (it != reported_.end()) {
    if (it->second.crossThread || !cross)
      return false;
    it->second.crossThread = true;
    pendingSlot_ = it->second.index;
    return true;
  }
  if (diagnostics_.size() >= kMaxReports)
    return false;
  reported_.emplace(key, Reported{diagnostics_.size(), cross});
  pendingSlot_ = diagnostics_.size();
  diagnostics_.emplace_back();
  return true;
}

void BlockRaceDetector::report(const std::string &message) {
  diagnostics_[pendingSlot_] =
      Diagnostic{ErrorCode::Race, "data race in " + blockName(plan_, block_) + ": " + message,
                 plan_.location(current_)};
}

void BlockRaceDetector::conflict(Kind kind, const Access &prior, const Target &target,
                                 int32_t thread, const char *verb, const char *how) {
  bool groups = prior.group != group_ && prior.group >= 0 && group_ >= 0;
  if (shouldReport(kind, prior.instruction, thread, prior.thread))
    report(site(current_, thread) + " " + verb + " " + name(target) + " " + how + " " +
           site(prior.instruction, prior.thread) +
           (groups ? " of another thread group, with no completed mbarrier phase between them"
                   : " with no Synchronize() between them"));
}

void BlockRaceDetector::checkRead(Shadow &s, const Target &target, int32_t thread) {
  if (thread >= 0)
    thread += threadBase_; // a thread of the block
  if (s.pendingCopy != kNoId) {
    if (shouldReport(Kind::PendingRead, s.pendingCopy, thread, -1))
      report(site(current_, thread) + " reads " + name(target) + " while " +
             plan_.describe(s.pendingCopy) + " may still be copying into it (" +
             (plan_.program->instructions[s.pendingCopy].opcode != Opcode::CopyAsync
                  ? "no MbarrierWait that observes the completion of its phase before the read)"
                  : "no covering CopyAsyncWaitGroup/WaitAll and Synchronize() before the read)"));
  } else if (concurrent(s.write)) {
    if (s.landedAt != kNoId) {
      if (shouldReport(Kind::UnsyncedLanding, s.write.instruction, thread, -1))
        report(site(current_, thread) + " reads " + name(target) + " delivered by " +
               plan_.describe(s.write.instruction) + " at " + plan_.describe(s.landedAt) +
               " with no Synchronize() after the wait");
    } else {
      conflict(Kind::ReadAfterWrite, s.write, target, thread, "reads", "written by");
    }
  } else if (concurrent(s.atomic)) {
    conflict(Kind::ReadAfterAtomic, s.atomic, target, thread, "reads", "updated atomically by");
  }
  s.read = now(current_, thread, epoch_);
}

void BlockRaceDetector::checkWrite(Shadow &s, const Target &target, int32_t thread) {
  if (thread >= 0)
    thread += threadBase_; // a thread of the block
  if (s.asyncReader != kNoId) {
    if (shouldReport(Kind::PendingAsyncRead, s.asyncReader, thread, -1))
      report(site(current_, thread) + " writes " + name(target) + " while " +
             plan_.describe(s.asyncReader) + " may still be reading it (" +
             (plan_.program->instructions[s.asyncReader].opcode == Opcode::TmaStore
                  ? "no covering TmaStoreWaitGroup and Synchronize() before the write)"
                  : "no covering WgmmaWaitGroup before the write)"));
  } else if (s.pendingCopy != kNoId) {
    if (shouldReport(Kind::PendingWrite, s.pendingCopy, thread, -1))
      report(site(current_, thread) + " writes " + name(target) + " while " +
             plan_.describe(s.pendingCopy) + " may still be copying into it");
  } else if (concurrent(s.write)) {
    conflict(Kind::WriteAfterWrite, s.write, target, thread, "writes", "also written by");
  } else if (concurrent(s.read)) {
    conflict(Kind::WriteAfterRead, s.read, target, thread, "writes", "read by");
  } else if (concurrent(s.atomic)) {
    conflict(Kind::WriteAfterAtomic, s.atomic, target, thread, "writes", "updated atomically by");
  }
  s.write = now(current_, thread, epoch_);
  s.landedAt = kNoId;
}

void BlockRaceDetector::checkAtomic(Shadow &s, const Target &target, int32_t thread) {
  if (thread >= 0)
    thread += threadBase_; // a thread of the block
  if (s.pendingCopy != kNoId) {
    if (shouldReport(Kind::PendingAtomic, s.pendingCopy, thread, -1))
      report(site(current_, thread) + " updates " + name(target) + " atomically while " +
             plan_.describe(s.pendingCopy) + " may still be copying into it");
  } else if (concurrent(s.write)) {
    conflict(Kind::AtomicAfterWrite, s.write, target, thread, "updates", "atomically, written by");
  } else if (concurrent(s.read)) {
    conflict(Kind::AtomicAfterRead, s.read, target, thread, "updates", "atomically, read by");
  }
  s.atomic = now(current_, thread, epoch_);
}

void BlockRaceDetector::sharedRead(VarId root, int64_t element, int32_t thread) {
  checkRead(sharedShadow(root, element), Target{false, root, element}, thread);
}

void BlockRaceDetector::sharedWrite(VarId root, int64_t element, int32_t thread) {
  checkWrite(sharedShadow(root, element), Target{false, root, element}, thread);
}

void BlockRaceDetector::sharedAtomic(VarId root, int64_t element, int32_t thread) {
  checkAtomic(sharedShadow(root, element), Target{false, root, element}, thread);
}

void BlockRaceDetector::sharedCopyIssue(VarId root, int64_t element) {
  Shadow &s = sharedShadow(root, element);
  checkWrite(s, Target{false, root, element}, -1);
  s.pendingCopy = current_;
}

void BlockRaceDetector::sharedRemoteCopyIssue(VarId root, int64_t element, uint32_t copy) {
  sharedShadow(root, element).pendingCopy = copy;
}

void BlockRaceDetector::sharedCopyLand(VarId root, int64_t element, uint32_t copyInstruction,
                                       bool atBarrier) {
  Shadow &s = sharedShadow(root, element);
  s.pendingCopy = kNoId;
  if (atBarrier) { // the epoch before the phase's completion: ordered before the wait
    s.write = now(copyInstruction, -1, epoch_ - 1);
    s.landedAt = kNoId;
    return;
  }
  s.write = now(copyInstruction, -1, epoch_);
  s.landedAt = current_;
}

void BlockRaceDetector::sharedAsyncRead(VarId root, int64_t element) {
  Shadow &s = sharedShadow(root, element);
  checkRead(s, Target{false, root, element}, -1);
  s.asyncReader = current_;
}

void BlockRaceDetector::sharedAsyncReadEnd(VarId root, int64_t element, uint32_t reader) {
  Shadow &s = sharedShadow(root, element);
  if (s.asyncReader == reader)
    s.asyncReader = kNoId;
}

namespace {

/// Extend the last interval when the access continues it, else start a new one.
void note(std::vector<AccessInterval> &v, uint64_t key, int bits, VarId root, int64_t element,
          uint32_t instruction, int64_t block) {
  if (!v.empty() && v.back().hi == key && v.back().root == root && v.back().bits == bits)
    v.back().hi = key + uint64_t(bits);
  else
    v.push_back(AccessInterval{key, key + uint64_t(bits), block, instruction, root, element, bits});
}

/// Sort by address and merge overlapping or touching intervals of one view.
std::vector<AccessInterval> coalesce(std::vector<AccessInterval> v) {
  std::sort(v.begin(), v.end(),
            [](const AccessInterval &a, const AccessInterval &b) { return a.lo < b.lo; });
  std::vector<AccessInterval> out;
  for (const AccessInterval &a : v) {
    if (!out.empty() && a.lo <= out.back().hi && a.root == out.back().root &&
        a.bits == out.back().bits)
      out.back().hi = std::max(out.back().hi, a.hi);
    else
      out.push_back(a);
  }
  return out;
}

} // namespace

void BlockRaceDetector::globalRead(uint64_t key, int bits, VarId root, int64_t element,
                                   int32_t thread) {
  note(reads_, key, bits, root, element, current_, block_);
  checkRead(global_[key], Target{true, root, element}, thread);
}

void BlockRaceDetector::globalWrite(uint64_t key, int bits, VarId root, int64_t element,
                                    int32_t thread) {
  note(writes_, key, bits, root, element, current_, block_);
  checkWrite(global_[key], Target{true, root, element}, thread);
}

void BlockRaceDetector::globalAtomic(uint64_t key, int bits, VarId root, int64_t element,
                                     int32_t thread) {
  note(atomics_, key, bits, root, element, current_, block_);
  checkAtomic(global_[key], Target{true, root, element}, thread);
}

std::vector<AccessInterval> BlockRaceDetector::takeReads() {
  return coalesce(std::exchange(reads_, {}));
}

std::vector<AccessInterval> BlockRaceDetector::takeWrites() {
  return coalesce(std::exchange(writes_, {}));
}

std::vector<AccessInterval> BlockRaceDetector::takeAtomics() {
  return coalesce(std::exchange(atomics_, {}));
}

} // namespace tilus::cpu
