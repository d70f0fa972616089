// Checked mode's race detection: the shadow bookkeeping behind the rules stated in
// race_detector.h, and the wording of the reports (each names both instructions with their
// locations, the block, the threads and the element).
#include "vm/cpu/race_detector.h"

#include "vm/cpu/launch_plan.h"

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
  const auto &vars = plan_.info->vars;
  for (size_t v = 0; v < vars.size(); ++v)
    if (vars[v].kind == VarKind::Shared && vars[v].sharedLayout)
      shared_[v].assign(size_t(vars[v].sharedLayout->size()), Shadow{});
  global_.clear();
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

bool BlockRaceDetector::shouldReport(Kind kind, uint32_t other) {
  return diagnostics_.size() < kMaxReports && reported_.insert({int(kind), current_, other}).second;
}

void BlockRaceDetector::report(const std::string &message) {
  diagnostics_.push_back(Diagnostic{ErrorCode::Race,
                                    "data race in " + blockName(plan_, block_) + ": " + message,
                                    plan_.location(current_)});
}

void BlockRaceDetector::checkRead(Shadow &s, const Target &target, int32_t thread) {
  if (s.pendingCopy != kNoId) {
    if (shouldReport(Kind::PendingRead, s.pendingCopy))
      report(site(current_, thread) + " reads " + name(target) + " while " +
             plan_.describe(s.pendingCopy) +
             " may still be copying into it (no covering CopyAsyncWaitGroup/WaitAll and "
             "Synchronize() before the read)");
  } else if (s.write.instance != 0 && s.write.epoch == epoch_ && s.write.instance != instance_) {
    if (s.landedAt != kNoId) {
      if (shouldReport(Kind::UnsyncedLanding, s.write.instruction))
        report(site(current_, thread) + " reads " + name(target) + " delivered by " +
               plan_.describe(s.write.instruction) + " at " + plan_.describe(s.landedAt) +
               " with no Synchronize() after the wait");
    } else if (shouldReport(Kind::ReadAfterWrite, s.write.instruction)) {
      report(site(current_, thread) + " reads " + name(target) + " written by " +
             site(s.write.instruction, s.write.thread) + " with no Synchronize() between them");
    }
  }
  s.read = Access{instance_, epoch_, current_, thread};
}

void BlockRaceDetector::checkWrite(Shadow &s, const Target &target, int32_t thread) {
  if (s.pendingCopy != kNoId) {
    if (shouldReport(Kind::PendingWrite, s.pendingCopy))
      report(site(current_, thread) + " writes " + name(target) + " while " +
             plan_.describe(s.pendingCopy) + " may still be copying into it");
  } else if (s.write.instance != 0 && s.write.epoch == epoch_ && s.write.instance != instance_) {
    if (shouldReport(Kind::WriteAfterWrite, s.write.instruction))
      report(site(current_, thread) + " writes " + name(target) + " also written by " +
             site(s.write.instruction, s.write.thread) + " with no Synchronize() between them");
  } else if (s.read.instance != 0 && s.read.epoch == epoch_ && s.read.instance != instance_) {
    if (shouldReport(Kind::WriteAfterRead, s.read.instruction))
      report(site(current_, thread) + " writes " + name(target) + " read by " +
             site(s.read.instruction, s.read.thread) + " with no Synchronize() between them");
  }
  s.write = Access{instance_, epoch_, current_, thread};
  s.landedAt = kNoId;
}

void BlockRaceDetector::sharedRead(VarId root, int64_t element, int32_t thread) {
  checkRead(sharedShadow(root, element), Target{false, root, element}, thread);
}

void BlockRaceDetector::sharedWrite(VarId root, int64_t element, int32_t thread) {
  checkWrite(sharedShadow(root, element), Target{false, root, element}, thread);
}

void BlockRaceDetector::sharedCopyIssue(VarId root, int64_t element) {
  Shadow &s = sharedShadow(root, element);
  checkWrite(s, Target{false, root, element}, -1);
  s.pendingCopy = current_;
}

void BlockRaceDetector::sharedCopyLand(VarId root, int64_t element, uint32_t copyInstruction) {
  Shadow &s = sharedShadow(root, element);
  s.pendingCopy = kNoId;
  s.write = Access{instance_, epoch_, copyInstruction, -1};
  s.landedAt = current_;
}

void BlockRaceDetector::globalRead(uint64_t key, VarId root, int64_t element, int32_t thread) {
  GlobalShadow &g = global_[key];
  g.root = root;
  g.element = element;
  if (g.anyRead == kNoId)
    g.anyRead = current_;
  checkRead(g.shadow, Target{true, root, element}, thread);
}

void BlockRaceDetector::globalWrite(uint64_t key, VarId root, int64_t element, int32_t thread) {
  GlobalShadow &g = global_[key];
  g.root = root;
  g.element = element;
  if (g.anyWrite == kNoId)
    g.anyWrite = current_;
  checkWrite(g.shadow, Target{true, root, element}, thread);
}

void GlobalRaceTable::mergeOne(Entry &entry, int64_t block, const GlobalShadow &access,
                               std::vector<Found> &out) {
  auto conflict = [&](int64_t other, uint32_t otherInst, const char *otherVerb, uint32_t mine,
                      const char *myVerb) {
    for (const Found &f : out)
      if (f.pair == std::make_pair(otherInst, mine))
        return;
    std::string what = "global element " + std::to_string(access.element) + " of `" +
                       plan_.program->var(access.root).name + "`";
    out.push_back(Found{{otherInst, mine}, Diagnostic{
        ErrorCode::Race,
        "data race between blocks: " + plan_.describe(otherInst) + " in " +
            blockName(plan_, other) + " " + otherVerb + " " + what + ", which " +
            plan_.describe(mine) + " in " + blockName(plan_, block) + " " + myVerb +
            "; blocks run in no defined order and cannot wait for each other",
        plan_.location(mine)}});
  };
  if (access.anyWrite != kNoId) {
    if (entry.writer >= 0 && entry.writer != block)
      conflict(entry.writer, entry.writerInstruction, "writes", access.anyWrite, "writes");
    for (int k = 0; k < 2; ++k)
      if (entry.readers[k] >= 0 && entry.readers[k] != block)
        conflict(entry.readers[k], entry.readerInstructions[k], "reads", access.anyWrite, "writes");
    if (entry.writer < 0) {
      entry.writer = block;
      entry.writerInstruction = access.anyWrite;
    }
  }
  if (access.anyRead != kNoId) {
    if (entry.writer >= 0 && entry.writer != block)
      conflict(entry.writer, entry.writerInstruction, "writes", access.anyRead, "reads");
    for (int k = 0; k < 2; ++k) {
      if (entry.readers[k] == block)
        break;
      if (entry.readers[k] < 0) {
        entry.readers[k] = block;
        entry.readerInstructions[k] = access.anyRead;
        break;
      }
    }
  }
}

void GlobalRaceTable::merge(int64_t blockLinear, const BlockRaceDetector &detector) {
  std::vector<std::vector<const std::pair<const uint64_t, GlobalShadow> *>> byShard(kShards);
  for (const auto &kv : detector.globalAccesses())
    byShard[std::hash<uint64_t>{}(kv.first) % kShards].push_back(&kv);
  std::vector<Found> found;
  for (size_t k = 0; k < kShards; ++k) {
    if (byShard[k].empty())
      continue;
    std::lock_guard<std::mutex> lock(shards_[k].mutex);
    for (const auto *kv : byShard[k])
      mergeOne(shards_[k].entries[kv->first], blockLinear, kv->second, found);
  }
  if (found.empty())
    return;
  std::lock_guard<std::mutex> lock(reportMutex_);
  for (Found &f : found) {
    if (diagnostics_.size() >= kMaxReports)
      break;
    if (reported_.insert(f.pair).second)
      diagnostics_.push_back(std::move(f.diagnostic));
  }
}

std::vector<Diagnostic> GlobalRaceTable::takeDiagnostics() {
  std::lock_guard<std::mutex> lock(reportMutex_);
  return std::move(diagnostics_);
}

} // namespace tilus::cpu
