// tilus-tune: time one kernel of a .tasm program at every point of a space of constant values
// (docs/tilus-tune.md).
//
//   tilus-tune PROGRAM.tasm --kernel NAME [-D NAME=VALUE]... --space 'BN=64,128;STAGES=3,4'
//              [--arg NAME=VALUE]... [--warmup N] [--iters N] [--json FILE] [--timeout S]
//              [--dry-run]
//
// Every point is assembled with the -D values plus its own, checked, given its arguments (vm-run's
// --arg syntax and buffers, tools/run_job.h), compiled and timed with CUDA events
// (CudaRuntime::benchmark, as vm-run --bench). A point that fails at any stage is a row of the
// table with its diagnostics, never the end of the run. --dry-run stops after compiling to PTX, so
// everything but the timing runs without a GPU.
//
// Exit status: 0 at least one point succeeded; 1 every point failed, or a point ran past
// --timeout; 2 a usage error, or no CUDA device to time on.
#include "assembler/assembler.h"
#include "loader/checker.h"
#include "tools/run_job.h"
#include "tools/tool_main.h"
#include "tools/tune_space.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <sys/ioctl.h>
#include <thread>
#include <unistd.h>

namespace {

using namespace tilus;
using nlohmann::json;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitUsage = 2;

struct Options {
  std::string path;
  std::string kernel;
  std::string device = "cuda";
  std::string space;
  std::string jsonPath;
  std::vector<std::string> defines;
  std::vector<std::string> args;
  int warmup = 10;
  int iterations = 100;
  double timeout = 0; // seconds per point; 0: none
  bool dryRun = false;
};

struct PointResult {
  size_t index = 0;
  std::vector<std::pair<std::string, std::string>> values;
  std::string label;
  bool done = false; // false: not reached (a run stopped by --timeout)
  bool ok = false;
  std::string stage; // where a failed point failed
  std::string error; // its diagnostics, one per line
  std::array<uint32_t, 3> grid = {0, 0, 0};
  uint32_t threads = 0;
  int64_t sharedBytes = 0;
  int registers = 0;   // per thread, of the kernel timed (its argument class)
  int localBytes = 0;  // local memory per thread: spills (0: the kernel lives in registers)
  size_t ptxBytes = 0; // --dry-run
  std::vector<double> ms;
  double medianMs = 0, minMs = 0, maxMs = 0;
};

int usageError(const std::string &message) {
  std::cerr << "tilus-tune: " << message << "\nRun with --help for more information.\n";
  return kExitUsage;
}

/// Diagnostics one per line; those without a location get the code in brackets.
std::string describe(const Status &status) {
  std::string out;
  for (const Diagnostic &d : status.diagnostics()) {
    if (!out.empty())
      out += "\n";
    out += d.location.known() ? d.toString()
                              : "error[" + std::string(errorCodeName(d.code)) + "]: " + d.message;
  }
  return out;
}

std::string fmt(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4f", v);
  return text;
}

// ---- progress on stderr ----------------------------------------------------------------------

/// A bar redrawn in place on a terminal; one line per finished point otherwise.
class Progress {
public:
  Progress(size_t total, bool tty) : total_(total), tty_(tty) {}

  void stage(size_t done, const std::string &label, const char *what) {
    if (!tty_)
      return;
    const size_t width = 24;
    size_t filled = total_ ? done * width / total_ : width;
    std::string line = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] " +
                       std::to_string(done) + "/" + std::to_string(total_) + " " + label + ": " +
                       what;
    size_t columns = terminalColumns();
    if (line.size() >= columns)
      line.resize(columns - 1);
    std::cerr << "\r\033[K" << line << std::flush;
  }

  void finished(size_t done, const PointResult &r, bool dryRun) {
    if (tty_) {
      stage(done, r.label, r.ok ? "done" : "failed");
      return;
    }
    std::cerr << "tilus-tune: [" << done << "/" << total_ << "] " << r.label << ": ";
    if (!r.ok)
      std::cerr << "failed at " << r.stage << "\n";
    else if (dryRun)
      std::cerr << "ok (" << r.ptxBytes << " bytes of PTX)\n";
    else
      std::cerr << fmt(r.medianMs) << " ms (min " << fmt(r.minMs) << ")\n";
  }

  void clear() {
    if (tty_)
      std::cerr << "\r\033[K" << std::flush;
  }

private:
  static size_t terminalColumns() {
    winsize w{};
    if (::ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 20)
      return w.ws_col;
    return 80;
  }

  size_t total_;
  bool tty_;
};

// ---- the points --------------------------------------------------------------------------------

struct Tuner {
  Options options;
  std::string source;
  std::map<std::string, std::string> defines; // -D
  tune::Space space;
  std::unique_ptr<cuda::CudaRuntime> runtime; // null for --dry-run
  std::string deviceName;
  int computeCapability = 0;
  std::string kernelName; // --kernel, or the module's only program once a point assembles

  std::mutex mutex; // guards results and current (the --timeout watchdog reads them)
  std::vector<PointResult> results;
  size_t current = 0;
  std::string currentStage;

  void setStage(const char *what) {
    std::lock_guard<std::mutex> lock(mutex);
    currentStage = what;
  }

  /// Assemble, check, build the arguments, compile and (unless --dry-run) time point `r`.
  void run(PointResult &r, Progress &progress, size_t done) {
    auto fail = [&](const char *stage, const Status &status) {
      r.ok = false;
      r.stage = stage;
      r.error = describe(status);
    };
    auto step = [&](const char *what) {
      setStage(what);
      progress.stage(done, r.label, what);
    };
    step("assembling");
    AssembleOptions ao;
    ao.fileName = options.path;
    ao.defines = defines;
    for (const auto &[name, value] : r.values)
      ao.defines[name] = value;
    Expected<Module> module = assemble(source, ao);
    if (!module)
      return fail("assemble", module.status());
    step("checking");
    CheckOptions co;
    co.fileName = options.path;
    Expected<VerifiedModule> verified = checkModule(std::move(*module), co);
    if (!verified)
      return fail("check", verified.status());
    run::Job job;
    job.module = cuda::LoadedModule::from(std::move(*verified));
    auto index = run::chooseProgram(job.module.verified.module, options.kernel);
    if (!index)
      return fail("kernel", index.status());
    job.index = *index;
    if (kernelName.empty())
      kernelName = job.program().name;
    step("preparing arguments");
    if (Status s = run::buildArguments(job, options.args, {}); !s.ok())
      return fail("arguments", s);
    auto geometry = cuda::launchGeometry(job.program(), job.info(), job.scalars);
    if (!geometry)
      return fail("arguments", geometry.status());
    if (geometry->empty())
      return fail("arguments", run::usage("the grid is empty with these arguments"));
    r.grid = geometry->grid;
    r.threads = job.info().threads;
    step("compiling");
    if (!runtime) {
      auto ptx = compileToPtx(job.module.verified, job.index);
      if (!ptx)
        return fail("compile", ptx.status());
      r.ptxBytes = ptx->ptx.size();
      // what the launch asks for: the allocations and the part of the scratch area that the
      // kernel uses (the checker plans the area for the worst case of every instruction)
      r.sharedBytes = ptx->sharedBytes;
      r.ok = true;
      return;
    }
    auto uploaded = run::uploadArguments(job, *runtime);
    if (!uploaded)
      return fail("run", uploaded.status());
    // the kernel of the class that the timed launches take (launch-time specialisation)
    auto kernel =
        runtime->kernel(job.module, job.index, cuda::classifyArgs(job.program(), uploaded->args));
    if (!kernel)
      return fail("compile", kernel.status());
    r.registers = (*kernel)->registers;
    r.sharedBytes = (*kernel)->sharedBytes;
    r.localBytes = (*kernel)->localBytes;
    step("timing");
    auto ms = runtime->benchmark(job.module, job.index, uploaded->args, nullptr, options.warmup,
                                 options.iterations);
    if (!ms)
      return fail("run", ms.status());
    r.ms = std::move(*ms);
    r.medianMs = run::median(r.ms);
    r.minMs = *std::min_element(r.ms.begin(), r.ms.end());
    r.maxMs = *std::max_element(r.ms.begin(), r.ms.end());
    r.ok = true;
  }
};

// ---- reporting ---------------------------------------------------------------------------------

/// Successful points fastest first (--dry-run: in enumeration order), then failed ones, then
/// points not reached, each group in enumeration order.
std::vector<const PointResult *> ranked(const std::vector<PointResult> &results, bool dryRun) {
  std::vector<const PointResult *> order;
  for (const PointResult &r : results)
    order.push_back(&r);
  auto group = [](const PointResult *r) { return r->ok ? 0 : r->done ? 1 : 2; };
  std::stable_sort(order.begin(), order.end(), [&](const PointResult *a, const PointResult *b) {
    if (group(a) != group(b))
      return group(a) < group(b);
    if (group(a) == 0 && !dryRun)
      return a->medianMs < b->medianMs;
    return false;
  });
  return order;
}

double bestMedian(const std::vector<PointResult> &results) {
  double best = 0;
  for (const PointResult &r : results)
    if (r.ok && r.medianMs > 0 && (best == 0 || r.medianMs < best))
      best = r.medianMs;
  return best;
}

std::string gridText(const PointResult &r) {
  return std::to_string(r.grid[0]) + "x" + std::to_string(r.grid[1]) + "x" +
         std::to_string(r.grid[2]);
}

void printTable(const Tuner &t, std::ostream &out) {
  bool dry = t.options.dryRun;
  const std::vector<PointResult> &results = t.results;
  size_t ok = 0;
  for (const PointResult &r : results)
    ok += r.ok ? 1 : 0;
  std::string kernel = t.kernelName.empty() ? "the kernel" : t.kernelName;
  if (dry)
    out << "tilus-tune: dry run of " << kernel << " in " << t.options.path << ": " << ok << " of "
        << results.size() << " points assemble, check and compile to PTX (sm_90); nothing timed\n";
  else
    out << "tilus-tune: " << kernel << " in " << t.options.path << " on " << t.deviceName << " (sm_"
        << t.computeCapability << "): " << ok << " of " << results.size() << " points timed, "
        << t.options.warmup << " warmup + " << t.options.iterations << " timed launches each\n";
  std::vector<std::string> header =
      dry ? std::vector<std::string>{"#", "point", "grid", "threads", "shared B", "PTX B"}
          : std::vector<std::string>{"rank", "point",   "median ms", "min ms",  "vs best",
                                     "grid", "threads", "regs",      "local B", "shared B"};
  std::vector<std::vector<std::string>> rows;
  std::vector<const PointResult *> order = ranked(results, dry);
  double best = bestMedian(results);
  size_t rank = 0;
  for (const PointResult *r : order) {
    if (!r->ok)
      continue;
    ++rank;
    std::vector<std::string> row;
    if (dry)
      row = {std::to_string(r->index + 1),
             r->label,
             gridText(*r),
             std::to_string(r->threads),
             std::to_string(r->sharedBytes),
             std::to_string(r->ptxBytes)};
    else {
      char speed[32];
      std::snprintf(speed, sizeof speed, "%.2fx", r->medianMs > 0 ? best / r->medianMs : 0.0);
      row = {std::to_string(rank),
             r->label,
             fmt(r->medianMs),
             fmt(r->minMs),
             speed,
             gridText(*r),
             std::to_string(r->threads),
             std::to_string(r->registers),
             std::to_string(r->localBytes),
             std::to_string(r->sharedBytes)};
    }
    rows.push_back(std::move(row));
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto &row : rows)
      width[c] = std::max(width[c], row[c].size());
  }
  size_t labelWidth = width[1];
  for (const PointResult &r : results)
    labelWidth = std::max(labelWidth, r.label.size());
  width[1] = labelWidth;
  auto line = [&](const std::vector<std::string> &cells) {
    std::string s;
    for (size_t c = 0; c < cells.size(); ++c) {
      bool left = c == 1;
      std::string pad(width[c] - cells[c].size(), ' ');
      s += (c ? "  " : "") + (left ? cells[c] + pad : pad + cells[c]);
    }
    while (!s.empty() && s.back() == ' ')
      s.pop_back();
    out << s << "\n";
  };
  line(header);
  for (const auto &row : rows)
    line(row);
  for (const PointResult *r : order) {
    if (r->ok)
      continue;
    std::string first = std::string(width[0] - 1, ' ') + "-  " + r->label +
                        std::string(width[1] - r->label.size(), ' ') + "  ";
    if (!r->done) {
      out << first << "not run\n";
      continue;
    }
    std::istringstream lines(r->error);
    std::string l;
    std::getline(lines, l);
    out << first << "failed at " << r->stage << ": " << l << "\n";
    while (std::getline(lines, l))
      out << std::string(width[0] + 2, ' ') << "  " << l << "\n";
  }
}

json reportJson(const Tuner &t) {
  json points = json::array();
  double best = bestMedian(t.results);
  std::vector<const PointResult *> order = ranked(t.results, t.options.dryRun);
  std::map<size_t, size_t> rankOf;
  for (size_t k = 0, rank = 0; k < order.size(); ++k)
    if (order[k]->ok)
      rankOf[order[k]->index] = ++rank;
  for (const PointResult &r : t.results) {
    json values = json::object();
    for (const auto &[name, value] : r.values)
      values[name] = value;
    json p = {{"index", r.index}, {"point", r.label}, {"values", values}, {"ok", r.ok}};
    if (!r.done) {
      p["stage"] = "not-run";
    } else if (!r.ok) {
      p["stage"] = r.stage;
      p["error"] = r.error;
    } else {
      p["rank"] = rankOf[r.index];
      p["grid"] = r.grid;
      p["threads"] = r.threads;
      p["shared_bytes"] = r.sharedBytes;
      if (t.options.dryRun) {
        p["ptx_bytes"] = r.ptxBytes;
      } else {
        p["registers"] = r.registers;
        p["local_bytes"] = r.localBytes;
        p["median_ms"] = r.medianMs;
        p["min_ms"] = r.minMs;
        p["max_ms"] = r.maxMs;
        p["speed_vs_best"] = r.medianMs > 0 ? best / r.medianMs : 0.0;
      }
    }
    points.push_back(std::move(p));
  }
  json space = json::array();
  for (const tune::Dimension &d : t.space)
    space.push_back({{"name", d.name}, {"values", d.values}});
  json out = {{"program", t.options.path}, {"kernel", t.kernelName}, {"dry_run", t.options.dryRun},
              {"defines", t.defines},      {"args", t.options.args}, {"space", space},
              {"points", points}};
  if (!t.options.dryRun) {
    out["device"] = t.deviceName;
    out["compute_capability"] = t.computeCapability;
    out["warmup"] = t.options.warmup;
    out["iterations"] = t.options.iterations;
  }
  const PointResult *first = order.empty() || !order[0]->ok ? nullptr : order[0];
  out["best"] = first && !t.options.dryRun ? json(first->index) : json(nullptr);
  return out;
}

/// Print the table and write the JSON file; the exit status of the run.
int finish(const Tuner &t, bool stoppedByTimeout) {
  printTable(t, std::cout);
  std::cout << std::flush;
  if (!t.options.jsonPath.empty()) {
    std::ofstream file(t.options.jsonPath, std::ios::trunc);
    file << reportJson(t).dump(2) << "\n";
    file.flush();
    if (!file) {
      std::cerr << t.options.jsonPath << ": error[io]: cannot write the JSON report\n";
      return kExitFailed;
    }
  }
  bool anyOk =
      std::any_of(t.results.begin(), t.results.end(), [](const PointResult &r) { return r.ok; });
  return anyOk && !stoppedByTimeout ? kExitOk : kExitFailed;
}

/// --timeout: a thread that, when one point runs longer than the limit, reports what was done so
/// far (the point as failed at "timeout", later ones as not run) and ends the process, since a
/// running compilation or kernel cannot be cancelled from inside.
class Watchdog {
public:
  Watchdog(Tuner &tuner, double seconds) : tuner_(tuner), seconds_(seconds) {
    if (seconds_ > 0)
      thread_ = std::thread([this] { loop(); });
  }
  ~Watchdog() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
    }
    cv_.notify_all();
    if (thread_.joinable())
      thread_.join();
  }
  void arm() {
    std::lock_guard<std::mutex> lock(mutex_);
    deadline_ = std::chrono::steady_clock::now() +
                std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(seconds_));
    armed_ = true;
    cv_.notify_all();
  }
  void disarm() {
    std::lock_guard<std::mutex> lock(mutex_);
    armed_ = false;
  }

private:
  void loop() {
    std::unique_lock<std::mutex> lock(mutex_);
    while (!stop_) {
      if (!armed_) {
        cv_.wait(lock);
        continue;
      }
      if (cv_.wait_until(lock, deadline_) == std::cv_status::timeout && armed_ && !stop_ &&
          std::chrono::steady_clock::now() >= deadline_)
        expire();
    }
  }

  [[noreturn]] void expire() {
    std::lock_guard<std::mutex> lock(tuner_.mutex);
    PointResult &r = tuner_.results[tuner_.current];
    r.done = true;
    r.ok = false;
    r.stage = "timeout";
    char limit[32];
    std::snprintf(limit, sizeof limit, "%g", seconds_);
    r.error = "error[timeout]: still " + tuner_.currentStage + " after --timeout " + limit +
              " s; the run stops here";
    std::cerr << "\ntilus-tune: " << r.label << ": " << r.error << "\n";
    finish(tuner_, true);
    std::cout.flush();
    std::_Exit(kExitFailed);
  }

  Tuner &tuner_;
  double seconds_;
  std::thread thread_;
  std::mutex mutex_;
  std::condition_variable cv_;
  std::chrono::steady_clock::time_point deadline_;
  bool armed_ = false;
  bool stop_ = false;
};

bool readFile(const std::string &path, std::string &out) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    return false;
  std::ostringstream ss;
  ss << in.rdbuf();
  out = ss.str();
  return !in.bad();
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"tilus-tune: time a kernel at every point of a space of constant values "
               "(docs/tilus-tune.md)",
               "tilus-tune"};
  Tuner t;
  Options &o = t.options;
  app.add_option("program", o.path, "PROGRAM.tasm")->required();
  app.add_option("--kernel", o.kernel, "program to time (default: the only one)");
  app.add_option("-D", o.defines, "NAME=VALUE: a constant for every point")
      ->allow_extra_args(false);
  app.add_option("--space", o.space, "'NAME=V1,V2,...;NAME=...': the points (cartesian product)");
  app.add_option("--arg", o.args, "NAME=VALUE for a parameter, as vm-run (docs/vm-run.md)")
      ->allow_extra_args(false);
  app.add_option("--warmup", o.warmup, "untimed launches before timing each point (default 10)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--iters", o.iterations, "timed launches per point (default 100)")
      ->check(CLI::PositiveNumber);
  app.add_option("--device", o.device, "cuda (the only device tilus-tune times on)")
      ->check(CLI::IsMember({"cuda", "cpu"}));
  app.add_option("--json", o.jsonPath, "write the results as JSON to this file");
  app.add_option("--timeout", o.timeout,
                 "seconds one point may take (assembling to timing); past it the run stops")
      ->check(CLI::NonNegativeNumber);
  app.add_flag("--dry-run", o.dryRun,
               "assemble, check and compile every point to PTX, time nothing (no GPU needed)");
  if (std::optional<int> exitCode = tilus::tools::parseCommandLine(app, argc, argv, usageError))
    return *exitCode;
  t.kernelName = o.kernel;
  if (o.device == "cpu")
    return usageError("tilus-tune times kernels on a CUDA device only; --device cpu is not "
                      "supported (vm-run --device cpu --bench times the interpreter)");
  for (const std::string &d : o.defines) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0)
      return usageError("-D expects NAME=VALUE, got '" + d + "'");
    if (!t.defines.emplace(d.substr(0, eq), d.substr(eq + 1)).second)
      return usageError("-D " + d.substr(0, eq) + " given twice");
  }
  auto space = tune::parseSpace(o.space);
  if (!space) {
    for (const Diagnostic &d : space.status().diagnostics())
      std::cerr << d.toString() << "\n";
    return kExitUsage;
  }
  t.space = std::move(*space);
  for (const tune::Dimension &d : t.space)
    if (t.defines.count(d.name))
      return usageError("-D " + d.name + " is also a --space dimension; give it in one place");
  if (!o.dryRun) {
    Status available = cuda::cudaAvailable();
    if (!available.ok()) {
      std::cerr << "tilus-tune: no GPU to time on: " << available.first().message
                << " (--dry-run assembles, checks and compiles every point without one)\n";
      return kExitUsage;
    }
  }
  if (!readFile(o.path, t.source)) {
    std::cerr << o.path << ": error[io]: cannot read the input file\n";
    return kExitFailed;
  }
  if (!o.dryRun) {
    auto runtime = cuda::CudaRuntime::create();
    if (!runtime) {
      std::cerr << "tilus-tune: no GPU to time on: " << describe(runtime.status()) << "\n";
      return kExitUsage;
    }
    t.runtime = std::move(*runtime);
    t.deviceName = t.runtime->device().name;
    t.computeCapability = t.runtime->device().computeCapability;
  }
  size_t total = tune::pointCount(t.space);
  for (size_t k = 0; k < total; ++k) {
    PointResult r;
    r.index = k;
    r.values = tune::pointAt(t.space, k);
    for (const auto &[name, value] : r.values)
      r.label += (r.label.empty() ? "" : " ") + name + "=" + value;
    if (r.label.empty())
      r.label = "(defaults)";
    t.results.push_back(std::move(r));
  }
  Progress progress(total, ::isatty(STDERR_FILENO) != 0);
  {
    Watchdog watchdog(t, o.timeout);
    for (size_t k = 0; k < total; ++k) {
      {
        std::lock_guard<std::mutex> lock(t.mutex);
        t.current = k;
      }
      watchdog.arm();
      PointResult r = t.results[k];
      t.run(r, progress, k);
      r.done = true;
      watchdog.disarm();
      {
        std::lock_guard<std::mutex> lock(t.mutex);
        t.results[k] = r;
      }
      progress.finished(k + 1, r, o.dryRun);
    }
  }
  progress.clear();
  return finish(t, false);
}
