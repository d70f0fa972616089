// tilus-asm: the command line of the assembler (ISA section 8).
//
//   tilus-asm INPUT.tasm [-o OUT.tbc] [-D NAME=VALUE]... [-g]   assemble, check, write bytecode
//   tilus-asm --check INPUT.tasm [-D NAME=VALUE]...             assemble and check only
//   tilus-asm -d INPUT.tbc [-o OUT.tasm]                        disassemble
//   tilus-asm layout 'EXPR' [--json]                            show a register layout
//   tilus-asm INPUT.tasm --emit llvm|ptx [--arch sm_80|sm_90a] [--kernel NAME] [-o OUT]
//                                                               show what the JIT makes of it
//                                                               (--sm 80|90 is --arch's old
//                                                               spelling)
//
// Exit status: 0 success; 1 a program error (every diagnostic on stderr, one per line), a failed
// check, unreadable input or an unwritable output; 2 a usage error. Inputs must be regular files.
// Output files are written as isa/file_io.h says: a regular file atomically (a temporary file in
// the same directory, then a rename), so a failed run never leaves a truncated .tbc behind; a
// symbolic link's target likewise; a device or FIFO (-o /dev/null) in place; a directory is an
// error.
#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "isa/file_io.h"
#include "jit/jit.h"
#include "loader/checker.h"
#include "tools/tool_main.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

#ifndef TILUSVM_VERSION
#define TILUSVM_VERSION "unknown"
#endif

namespace {

using namespace tilus;

/// The number of layout variants of the last module assembled (LayoutReport::candidates).
int64_t candidates_ = 1;

constexpr int kExitOk = 0;
constexpr int kExitError = 1;
constexpr int kExitUsage = 2;

int report(const Status &status) {
  for (const Diagnostic &d : status.diagnostics())
    std::cerr << d.toString() << "\n";
  return kExitError;
}

int ioError(const std::string &path, const std::string &what) {
  Location loc;
  loc.file = path;
  return report(Status::error(ErrorCode::Io, what, loc));
}

int usageError(const std::string &message) {
  std::cerr << "tilus-asm: " << message << "\nRun with --help for more information.\n";
  return kExitUsage;
}

/// The input file's bytes: a regular file of at most `maxBytes` bytes (isa/file_io.h).
Expected<std::vector<uint8_t>> readInput(const std::string &path, uint64_t maxBytes) {
  return readRegularFile(path, maxBytes);
}

int writeOutput(const std::string &path, std::string_view data) {
  Status s = writeOutputFile(
      path, std::span<const uint8_t>(reinterpret_cast<const uint8_t *>(data.data()), data.size()));
  return s.ok() ? kExitOk : report(s);
}

/// INPUT.tasm -> INPUT.tbc; any other name gets ".tbc" appended.
std::string defaultOutput(const std::string &input) {
  std::filesystem::path p(input);
  if (p.extension() == ".tasm")
    return p.replace_extension(".tbc").string();
  return input + ".tbc";
}

struct Options {
  std::string input;
  std::string output;
  std::vector<std::string> defines;
  bool debugInfo = false;
  bool checkOnly = false;
  bool disassemble = false;
  std::string layoutExpr;
  bool json = false;
  std::string emit;             // "", "llvm" or "ptx"
  int sm = 90;                  // 80 or 90 (sm_90a)
  std::string arch;             // --arch: "sm_80" or "sm_90a" (sets sm)
  std::string kernel;           // with --emit: one program of the module (default: every program)
  std::string spec;             // with --emit: launch-time specialisation, one letter per parameter
  bool explainLayouts = false;  // print what layout inference decided
  int64_t layoutCandidates = 0; // write up to N variants of the inferred layouts
  bool stripLayouts = false;    // print the source without its performance-only layouts
};

/// Parses --spec: one letter per parameter, '-' nothing, 'a' pointer aligned to 16 bytes, 'd'
/// integer divisible by 16, '1' integer equal to 1, 'n' integer other than 1, then optionally
/// '/' and one letter per specialize statement, 'T' or 'F' (jit/jit.h, Specialization::text();
/// the parameters' letters may be left out: '/T').
Expected<Specialization> parseSpec(const std::string &spec, const Program &program) {
  Specialization s;
  std::string text = spec;
  if (size_t slash = spec.find('/'); slash != std::string::npos) {
    std::string values = spec.substr(slash + 1);
    text = spec.substr(0, slash);
    size_t want = program.specializations().size();
    if (values.size() != want)
      return Status::error(ErrorCode::Usage,
                           "--spec '" + spec + "' has " + std::to_string(values.size()) +
                               " values after '/'; program " + program.name + " has " +
                               std::to_string(want) + " specialize statements");
    for (char c : values) {
      if (c != 'T' && c != 'F')
        return Status::error(ErrorCode::Usage,
                             std::string("--spec value '") + c + "' is neither T nor F");
      s.values.push_back(c == 'T');
    }
  }
  if (text.empty())
    return s;
  if (text.size() != program.params.size())
    return Status::error(ErrorCode::Usage,
                         "--spec '" + text + "' has " + std::to_string(text.size()) +
                             " letters; program " + program.name + " has " +
                             std::to_string(program.params.size()) + " parameters");
  for (char c : text) {
    if (c == '-')
      s.params.push_back(ParamFact::None);
    else if (c == 'a')
      s.params.push_back(ParamFact::Aligned16);
    else if (c == 'd')
      s.params.push_back(ParamFact::Divisible16);
    else if (c == '1')
      s.params.push_back(ParamFact::One);
    else if (c == 'n')
      s.params.push_back(ParamFact::NotOne);
    else
      return Status::error(ErrorCode::Usage,
                           std::string("--spec letter '") + c + "' is none of - a d 1 n");
  }
  return s;
}

/// `status` with `file` in the location of each diagnostic that names no file and is located
/// by a source line (`byLine`) or by none (`!byLine`).
Status inFile(const Status &status, const std::string &file, bool byLine) {
  Status located;
  for (Diagnostic d : status.diagnostics()) {
    if (d.location.file.empty() && (d.location.line != 0) == byLine)
      d.location.file = file;
    located.append(Status(std::move(d)));
  }
  return located;
}

/// A JIT diagnostic located by source line names the file the line belongs to: the module's
/// source (debug info) or, for a source input, the input.
int reportJit(const Status &status, const Options &o, const VerifiedModule &verified) {
  std::string file = verified.module.sourceName;
  if (file.empty() && std::filesystem::path(o.input).extension() != ".tbc")
    file = o.input;
  return report(inFile(status, file, true));
}

/// The JIT's LLVM IR or PTX of the module's programs (all, or the one named by --kernel), one
/// after another, each preceded by a comment line naming it.
int emitMode(const Options &o, const VerifiedModule &verified) {
  JitOptions jo;
  jo.smVersion = o.sm;
  std::string text;
  bool found = false;
  for (size_t p = 0; p < verified.module.programs.size(); ++p) {
    const std::string &name = verified.module.programs[p].name;
    if (!o.kernel.empty() && name != o.kernel)
      continue;
    found = true;
    Expected<Specialization> spec = parseSpec(o.spec, verified.module.programs[p]);
    if (!spec)
      return usageError(spec.status().diagnostics().front().message);
    jo.specialization = *spec;
    std::string body;
    if (o.emit == "ptx") {
      Expected<PtxKernel> k = compileToPtx(verified, p, jo);
      if (!k)
        return reportJit(k.status(), o, verified);
      // what a launch needs besides the PTX: the block's threads and its dynamic shared memory
      body = "// " + std::to_string(verified.programs[p].threads) + " threads, " +
             std::to_string(k->sharedBytes) + " bytes of dynamic shared memory\n" + k->ptx;
    } else {
      Expected<std::string> ir = compileToLlvmIr(verified, p, jo);
      if (!ir)
        return reportJit(ir.status(), o, verified);
      body = *ir;
    }
    text += (o.emit == "ptx" ? "// program " : "; program ") + name + "\n" + body;
  }
  if (!found)
    return usageError("no program named '" + o.kernel + "' in " + o.input);
  if (o.output.empty()) {
    std::cout << text;
    return std::cout ? kExitOk : kExitError;
  }
  return writeOutput(o.output, text);
}

/// -D NAME=VALUE into the assembler's options; false (after a usage error) when malformed.
bool parseDefines(const Options &o, AssembleOptions &ao) {
  for (const std::string &d : o.defines) {
    size_t eq = d.find('=');
    if (eq == std::string::npos || eq == 0) {
      usageError("-D expects NAME=VALUE, got '" + d + "'");
      return false;
    }
    ao.defines[d.substr(0, eq)] = d.substr(eq + 1);
  }
  return true;
}

/// Assemble and check the input; the layout inference notes go to standard error and, with
/// --explain-layouts, its report to standard output. nullopt after reporting an error (the exit
/// status is in `exit`).
std::optional<VerifiedModule> assembleChecked(const Options &o, AssembleOptions ao, int &exit) {
  BytecodeLimits limits;
  auto text = readInput(o.input, limits.maxSourceBytes);
  if (!text) {
    exit = report(text.status());
    return std::nullopt;
  }
  std::string source(text->begin(), text->end());
  LayoutReport layouts;
  ao.layoutReport = &layouts;
  Expected<Module> module = assemble(source, ao);
  if (!module) {
    exit = report(module.status());
    return std::nullopt;
  }
  for (const std::string &note : layouts.notes)
    std::cerr << note << "\n";
  if (o.explainLayouts) {
    for (const std::string &line : layouts.lines)
      std::cout << line << "\n";
    if (layouts.lines.empty())
      std::cout << o.input << ": every layout is written; nothing inferred\n";
  }
  if (module->programs.empty()) {
    exit = ioError(o.input, "no program is defined (an empty module is not assembled)");
    return std::nullopt;
  }
  CheckOptions co;
  co.fileName = o.input;
  Expected<VerifiedModule> verified = checkModule(std::move(*module), co);
  if (!verified) {
    exit = report(verified.status());
    return std::nullopt;
  }
  candidates_ = layouts.candidates;
  return std::move(*verified);
}

/// --layout-candidates N: each variant of the inferred layouts (docs/layout-inference.md,
/// "Candidates") disassembled, every layout written, to BASE.candK.tasm for K = 0, 1, ...: at
/// most N files, fewer when the choices allow fewer distinct modules. Each is a .tasm that
/// tilus-tune (or tilus-asm) takes as it is; standard output lists the files.
int candidatesMode(const Options &o) {
  AssembleOptions ao;
  ao.fileName = o.input;
  if (!parseDefines(o, ao))
    return kExitUsage;
  std::filesystem::path base(o.output.empty() ? o.input : o.output);
  if (base.extension() == ".tasm" || base.extension() == ".tbc")
    base.replace_extension();
  std::vector<std::vector<uint8_t>> seen;
  int64_t total = 1;
  int written = 0;
  for (int64_t k = 0; k < o.layoutCandidates && k < total; ++k) {
    ao.layoutCandidate = k;
    int exit = kExitOk;
    std::optional<VerifiedModule> verified = assembleChecked(o, ao, exit);
    if (!verified)
      return exit;
    total = candidates_;
    std::vector<uint8_t> bytes = encodeModule(verified->module, EncodeOptions{});
    if (std::find(seen.begin(), seen.end(), bytes) != seen.end())
      continue;
    seen.push_back(bytes);
    std::string path = base.string() + ".cand" + std::to_string(written) + ".tasm";
    if (int st = writeOutput(path, disassemble(verified->module)); st != kExitOk)
      return st;
    std::cout << path << "\n";
    ++written;
  }
  return kExitOk;
}

int assembleMode(const Options &o) {
  AssembleOptions ao;
  ao.fileName = o.input;
  ao.keepSource = o.debugInfo;
  if (!parseDefines(o, ao))
    return kExitUsage;
  if (o.stripLayouts) {
    BytecodeLimits limits;
    auto text = readInput(o.input, limits.maxSourceBytes);
    if (!text)
      return report(text.status());
    Expected<std::string> stripped =
        stripPerformanceLayouts(std::string(text->begin(), text->end()), ao);
    if (!stripped)
      return report(stripped.status());
    if (o.output.empty()) {
      std::cout << *stripped;
      return std::cout ? kExitOk : kExitError;
    }
    return writeOutput(o.output, *stripped);
  }
  if (o.layoutCandidates > 0)
    return candidatesMode(o);
  BytecodeLimits limits;
  int exit = kExitOk;
  std::optional<VerifiedModule> verified = assembleChecked(o, ao, exit);
  if (!verified)
    return exit;
  if (!o.emit.empty())
    return emitMode(o, *verified);
  EncodeOptions eo;
  eo.debugInfo = o.debugInfo;
  std::vector<uint8_t> bytes = encodeModule(verified->module, eo);
  // Whatever assembles also decodes: the decoder's limits (docs/bytecode.md, "Limits") are
  // checked on the encoded module, so a program beyond them is refused here, not at load time.
  if (Expected<Module> back = decodeModule(bytes, limits); !back) {
    Status located;
    for (Diagnostic d : back.status().diagnostics()) {
      d.message = "the assembled module exceeds a bytecode limit: " + d.message;
      d.location = Location{};
      d.location.file = o.input;
      located.append(std::move(d));
    }
    return report(located);
  }
  if (o.checkOnly)
    return kExitOk;
  std::string out = o.output.empty() ? defaultOutput(o.input) : o.output;
  return writeOutput(out,
                     std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()));
}

int disassembleMode(const Options &o) {
  BytecodeLimits limits;
  if (std::filesystem::path(o.input).extension() == ".tasm") {
    // A source: assembled and checked first, so the text shows every layout written out.
    AssembleOptions ao;
    ao.fileName = o.input;
    if (!parseDefines(o, ao))
      return kExitUsage;
    int exit = kExitOk;
    std::optional<VerifiedModule> verified = assembleChecked(o, ao, exit);
    if (!verified)
      return exit;
    std::string text = disassemble(verified->module);
    if (o.output.empty()) {
      std::cout << text;
      return std::cout ? kExitOk : kExitError;
    }
    return writeOutput(o.output, text);
  }
  auto bytes = readInput(o.input, limits.maxFileBytes);
  if (!bytes)
    return report(bytes.status());
  Expected<Module> module = decodeModule(*bytes, limits);
  if (!module)
    return report(inFile(module.status(), o.input, false));
  std::string text = disassemble(*module);
  if (o.output.empty()) {
    std::cout << text;
    return std::cout ? kExitOk : kExitError;
  }
  return writeOutput(o.output, text);
}

std::string joinInts(const std::vector<int64_t> &v) {
  std::string s;
  for (size_t k = 0; k < v.size(); ++k)
    s += (k ? ", " : "") + std::to_string(v[k]);
  return s;
}

/// {"shape": [..], "threads": T, "locals": N, "canonical": "...", "owners": [[[t, i], ...], ...]}
/// (owners null when `withOwners` is false).
nlohmann::ordered_json layoutJson(const RegisterLayout &l, bool withOwners) {
  nlohmann::ordered_json j = {{"shape", l.shape()},
                              {"threads", l.numThreads()},
                              {"locals", l.numLocals()},
                              {"canonical", l.canonicalString()},
                              {"owners", nullptr}};
  if (!withOwners)
    return j;
  nlohmann::ordered_json owners = nlohmann::ordered_json::array();
  for (const auto &list : l.owners()) {
    nlohmann::ordered_json element = nlohmann::ordered_json::array();
    for (const auto &[thread, local] : list)
      element.push_back({thread, local});
    owners.push_back(std::move(element));
  }
  j["owners"] = std::move(owners);
  return j;
}

/// The layout as grids of `thread:local` cells (replicated elements list every owner, joined by
/// commas); rank > 2 prints one grid per index of the leading dimensions.
std::string layoutGrid(const RegisterLayout &l) {
  std::vector<int64_t> shape = l.shape();
  if (shape.empty())
    shape = {1};
  auto owners = l.owners();
  std::vector<std::string> cells;
  size_t width = 1;
  for (const auto &list : owners) {
    std::string c;
    for (size_t k = 0; k < list.size(); ++k)
      c += (k ? "," : "") + std::to_string(list[k].first) + ":" + std::to_string(list[k].second);
    width = std::max(width, c.size());
    cells.push_back(std::move(c));
  }
  int64_t cols = shape.back();
  int64_t rows = shape.size() >= 2 ? shape[shape.size() - 2] : 1;
  int64_t planes = int64_t(cells.size()) / std::max<int64_t>(1, rows * cols);
  size_t rowLabel = std::to_string(std::max<int64_t>(rows - 1, 0)).size();
  width = std::max(width, std::to_string(cols - 1).size());
  std::string out;
  for (int64_t p = 0; p < planes; ++p) {
    if (shape.size() > 2) {
      std::vector<int64_t> lead(shape.begin(), shape.end() - 2), index(lead.size());
      int64_t rest = p;
      for (size_t d = lead.size(); d-- > 0;) {
        index[d] = rest % lead[d];
        rest /= lead[d];
      }
      out += (p ? "\n[" : "[") + joinInts(index) + ", :, :]\n";
    }
    out += std::string(rowLabel, ' ');
    for (int64_t c = 0; c < cols; ++c) {
      std::string h = std::to_string(c);
      out += "  " + std::string(width - h.size(), ' ') + h;
    }
    out += "\n";
    for (int64_t r = 0; r < rows; ++r) {
      std::string label = shape.size() >= 2 ? std::to_string(r) : "";
      out += std::string(rowLabel - label.size(), ' ') + label;
      for (int64_t c = 0; c < cols; ++c) {
        const std::string &cell = cells[size_t((p * rows + r) * cols + c)];
        out += "  " + std::string(width - cell.size(), ' ') + cell;
      }
      out += "\n";
    }
  }
  return out;
}

/// Layouts with more cells than this are summarised without their grid or owner lists.
constexpr int64_t kMaxShownCells = int64_t(1) << 16;

int layoutMode(const Options &o) {
  Expected<RegisterLayout> l = parseRegisterLayout(o.layoutExpr);
  if (!l)
    return report(l.status());
  const int64_t cells = l->numThreads() * l->numLocals(); // <= kMaxLayoutCells
  if (o.json) {
    std::cout << layoutJson(*l, cells <= kMaxShownCells).dump() << "\n";
    return kExitOk;
  }
  std::cout << l->toString() << "\n"
            << "shape [" << joinInts(l->shape()) << "], threads " << l->numThreads() << ", locals "
            << l->numLocals() << "\n"
            << "canonical: " << l->canonicalString() << "\n\n";
  if (cells > kMaxShownCells)
    std::cout << "(grid of " << cells << " cells not shown: more than " << kMaxShownCells << ")\n";
  else
    std::cout << layoutGrid(*l);
  return kExitOk;
}

} // namespace

static int runMain(int argc, char **argv) {
  CLI::App app{"Assemble, check and disassemble Tilus VM programs (.tasm <-> .tbc).", "tilus-asm"};
  app.set_version_flag("--version", std::string("tilus-asm ") + TILUSVM_VERSION);
  Options o;
  app.add_option("input", o.input, "INPUT.tasm to assemble (INPUT.tbc with -d)");
  app.add_option("-o,--output", o.output,
                 "output file (default: INPUT with .tbc; with -d: standard output)");
  app.add_option("-D", o.defines, "override a declared constant: -D NAME=VALUE")
      ->allow_extra_args(false);
  app.add_flag("-g", o.debugInfo, "keep the source text and locations in the bytecode");
  app.add_flag("--check", o.checkOnly, "assemble and check only; write nothing");
  app.add_flag("-d,--disassemble", o.disassemble, "disassemble bytecode to .tasm");
  app.add_option("--emit", o.emit, "print the JIT's output instead of bytecode: llvm or ptx")
      ->check(CLI::IsMember({"llvm", "ptx"}));
  app.add_option("--arch", o.arch, "target of --emit: sm_80 or sm_90a (default sm_90a)")
      ->check(CLI::IsMember({"sm_80", "sm_90a"}));
  app.add_option("--sm", o.sm, "target of --emit, as a number: 80 (sm_80) or 90 (sm_90a)")
      ->check(CLI::IsMember({80, 90}));
  app.add_option("--kernel", o.kernel, "with --emit: only this program");
  app.add_option("--spec", o.spec,
                 "with --emit: what launches guarantee, one letter per parameter: - nothing, "
                 "a aligned to 16 bytes, d divisible by 16, 1 equal to 1, n other than 1; then "
                 "optionally / and T or F per specialize statement (e.g. aaaddd/T)");
  app.add_flag("--explain-layouts", o.explainLayouts,
               "print each inferred layout with the rule that decided it");
  app.add_option("--layout-candidates", o.layoutCandidates,
                 "write up to N variants of the inferred layouts as BASE.candK.tasm")
      ->check(CLI::Range(int64_t(1), int64_t(1000)));
  app.add_flag("--strip-layouts", o.stripLayouts,
               "print the source without its performance-only layout annotations");
  CLI::App *layout = app.add_subcommand("layout", "show a register layout as a thread:local grid");
  layout->add_option("expr", o.layoutExpr, "layout expression, e.g. 'local(2, 1).spatial(8, 4)'")
      ->required();
  layout->add_flag("--json", o.json, "print the layout as JSON");
  if (std::optional<int> exitCode = tilus::tools::parseCommandLine(app, argc, argv, usageError))
    return *exitCode;
  if (!o.arch.empty()) {
    int fromArch = o.arch == "sm_80" ? 80 : 90;
    if (app.count("--sm") > 0 && o.sm != fromArch)
      return usageError("--arch " + o.arch + " and --sm " + std::to_string(o.sm) + " disagree");
    o.sm = fromArch;
  }
  if (layout->parsed()) {
    if (!o.input.empty() || !o.output.empty() || !o.defines.empty() || o.debugInfo || o.checkOnly ||
        o.disassemble || !o.emit.empty() || o.explainLayouts || o.layoutCandidates > 0 ||
        o.stripLayouts)
      return usageError("'layout' takes no other options");
    return layoutMode(o);
  }
  if (o.input.empty())
    return usageError("no input file");
  bool source = std::filesystem::path(o.input).extension() == ".tasm";
  if (o.disassemble) {
    if (o.checkOnly || o.debugInfo || (!o.defines.empty() && !source) || !o.emit.empty() ||
        o.layoutCandidates > 0 || o.stripLayouts || (o.explainLayouts && !source))
      return usageError("-d cannot be combined with --check, -g, --emit, --layout-candidates or "
                        "--strip-layouts, nor (for bytecode) with -D or --explain-layouts");
    return disassembleMode(o);
  }
  if ((o.stripLayouts || o.layoutCandidates > 0) &&
      (o.checkOnly || o.debugInfo || !o.emit.empty() || o.explainLayouts))
    return usageError("--strip-layouts and --layout-candidates cannot be combined with --check, "
                      "-g, --emit or --explain-layouts");
  if (o.stripLayouts && o.layoutCandidates > 0)
    return usageError("--strip-layouts cannot be combined with --layout-candidates");
  if (o.checkOnly && !o.output.empty())
    return usageError("--check writes no output; -o is not allowed");
  if (o.checkOnly && !o.emit.empty())
    return usageError("--check cannot be combined with --emit");
  if (o.emit.empty() &&
      (!o.kernel.empty() || app.count("--sm") > 0 || !o.arch.empty() || !o.spec.empty()))
    return usageError("--kernel, --arch, --sm and --spec go with --emit");
  return assembleMode(o);
}

/// The error boundary: nothing escapes as an exception or an abort.
int main(int argc, char **argv) {
  return tilus::tools::guardedMain(runMain, argc, argv, "tilus-asm", "error[io]: out of memory");
}
