// runOnCpu: plans the launch, runs every block of the grid (or, with cluster=, every cluster of
// blocks, as cooperative tasks: cluster_scheduler.h) on a pool of host threads, and collects what
// went wrong. Blocks share nothing mutable except global memory (and, in
// checked mode, the launch-wide race table and the print lock). A trap in one block stops the
// launch from starting further blocks; race reports do not stop anything. Diagnostics come
// back ordered by block, traps first.
#include "vm/cpu/interpreter.h"

#include "vm/cpu/cluster_scheduler.h"
#include "vm/cpu/cross_block_races.h"
#include "vm/cpu/exec.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <thread>

namespace tilus {

namespace {

using cpu::BlockState;
using cpu::LaunchPlan;

struct BlockReport {
  int64_t block;
  bool trap;
  Diagnostic diagnostic;
};

constexpr size_t kMaxRaceReports = 16;

class BlockRunner {
public:
  BlockRunner(LaunchPlan &plan, int workers) : plan_(plan), workers_(workers) {}

  std::vector<BlockReport> run() {
    if (workers_ <= 1) {
      work();
    } else {
      std::vector<std::thread> threads;
      for (int w = 0; w < workers_; ++w)
        threads.emplace_back([this] { work(); });
      for (std::thread &t : threads)
        t.join();
    }
    std::stable_sort(reports_.begin(), reports_.end(),
                     [](const BlockReport &a, const BlockReport &b) {
                       return a.trap != b.trap ? a.trap : a.block < b.block;
                     });
    return std::move(reports_);
  }

private:
  /// The block's traps and (checked mode) races, after it ran with `status`.
  void finish(BlockState &state, const Status &status, std::vector<BlockReport> &local) {
    for (const Diagnostic &d : status.diagnostics())
      local.push_back(BlockReport{state.linear, true, d});
    if (!status.ok())
      stop_ = true;
    if (state.race) {
      for (Diagnostic &d : state.race->takeDiagnostics())
        local.push_back(BlockReport{state.linear, false, std::move(d)});
      plan_.crossBlockRaces->add(state.race->takeReads(), state.race->takeWrites(),
                                 state.race->takeAtomics());
    }
  }

  void work() {
    // a unit of work is a block, or with cluster= C the C blocks of one cluster: consecutive
    // along x, run together
    const int64_t c = int64_t(plan_.program->cluster > 1 ? plan_.program->cluster : 1);
    std::vector<std::unique_ptr<BlockState>> states;
    for (int64_t r = 0; r < c; ++r)
      states.push_back(std::make_unique<BlockState>(plan_));
    std::vector<BlockReport> local;
    const int64_t units = plan_.numBlocks() / c;
    for (;;) {
      if (stop_.load(std::memory_order_relaxed))
        break;
      int64_t unit = next_.fetch_add(1);
      if (unit >= units)
        break;
      if (c == 1) {
        states[0]->reset(unit);
        finish(*states[0], cpu::runBlock(*states[0]), local);
        continue;
      }
      // cluster `unit`: x in [C j, C j + C) of row (y, z), with j = unit % (gx / C)
      const int64_t perRow = plan_.grid[0] / c;
      const int64_t first = (unit % perRow) * c + (unit / perRow) * plan_.grid[0];
      std::vector<BlockState *> blocks;
      for (int64_t r = 0; r < c; ++r) {
        states[size_t(r)]->reset(first + r);
        blocks.push_back(states[size_t(r)].get());
      }
      std::vector<Status> statuses;
      {
        cpu::ClusterScheduler scheduler(blocks);
        statuses = scheduler.run([](BlockState &b) { return cpu::runBlock(b); });
      }
      for (int64_t r = 0; r < c; ++r)
        finish(*states[size_t(r)], statuses[size_t(r)], local);
    }
    std::lock_guard<std::mutex> lock(mutex_);
    for (BlockReport &r : local)
      reports_.push_back(std::move(r));
  }

  LaunchPlan &plan_;
  int workers_;
  std::atomic<int64_t> next_{0};
  std::atomic<bool> stop_{false};
  std::mutex mutex_;
  std::vector<BlockReport> reports_;
};

/// The part of a race message after "data race in block (..): ", to report each race once.
std::string raceKey(const Diagnostic &d) {
  size_t at = d.message.find("): ");
  return std::to_string(d.location.instruction) + "|" +
         (at == std::string::npos ? d.message : d.message.substr(at + 3));
}

void checkCleanWorkspace(const LaunchPlan &plan, Status &status) {
  for (const cpu::WorkspaceRegion &region : plan.workspaceRegions) {
    if (!region.requiresClean)
      continue;
    const uint8_t *p = plan.workspace.get() + region.byteOffset;
    int64_t dirty = std::count_if(p, p + region.bytes, [](uint8_t v) { return v != 0; });
    if (dirty != 0)
      status.append(Diagnostic{ErrorCode::Runtime,
                               "requires_clean workspace left dirty: " + std::to_string(dirty) +
                                   " of " + std::to_string(region.bytes) +
                                   " bytes are non-zero after the launch",
                               plan.location(region.instruction)});
  }
}

Status collect(const LaunchPlan &plan, std::vector<BlockReport> reports,
               cpu::CrossBlockRaces *races) {
  Status status;
  std::vector<std::string> seen;
  size_t raceCount = 0;
  for (BlockReport &r : reports) {
    if (r.trap) {
      status.append(std::move(r.diagnostic));
      continue;
    }
    std::string key = raceKey(r.diagnostic);
    if (raceCount >= kMaxRaceReports || std::find(seen.begin(), seen.end(), key) != seen.end())
      continue;
    seen.push_back(key);
    ++raceCount;
    status.append(std::move(r.diagnostic));
  }
  if (races)
    for (Diagnostic &d : races->analyze())
      status.append(std::move(d));
  if (plan.checked)
    checkCleanWorkspace(plan, status);
  return status;
}

} // namespace

Status runOnCpu(const VerifiedModule &module, size_t programIndex, const KernelArgs &args,
                const CpuRunOptions &options) {
  LaunchPlan plan;
  TILUSVM_TRY(cpu::buildLaunchPlan(plan, module, programIndex, args, options));
  plan.printStream = options.printStream ? options.printStream : &std::cout;
  std::unique_ptr<cpu::CrossBlockRaces> races;
  if (plan.checked) {
    races = std::make_unique<cpu::CrossBlockRaces>(plan);
    plan.crossBlockRaces = races.get();
  }
  int64_t blocks = plan.numBlocks() / std::max<int64_t>(1, int64_t(plan.program->cluster));
  int workers = options.numWorkers > 0 ? options.numWorkers
                                       : int(std::max(1u, std::thread::hardware_concurrency()));
  workers = int(std::min<int64_t>(workers, std::max<int64_t>(blocks, 1)));
  BlockRunner runner(plan, workers);
  std::vector<BlockReport> reports = blocks > 0 ? runner.run() : std::vector<BlockReport>{};
  return collect(plan, std::move(reports), races.get());
}

} // namespace tilus
