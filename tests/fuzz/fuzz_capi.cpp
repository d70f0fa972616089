// libFuzzer entry point for the C API's module and launch entry points on the CPU interpreter
// (built and run by scripts/fuzz.sh --target capi with clang++-19
// -fsanitize=fuzzer,address,undefined).
//
// Input: a u16le length A, then A bytes that describe the arguments, then a `.tbc` module whose
// total-length and hash fields are rewritten to match (as fuzz_decode does), so that mutations
// reach the sections. Every parameter takes its description from the argument bytes in order:
//   scalar   one byte b: b < 0xf0 gives the value b - 16 converted to the parameter's type;
//            otherwise the next 8 bytes are the raw scalar_bits (too wide values included)
//   pointer  one byte s and one byte f: a host buffer of 64 * s bytes filled from seed f
//            (s = 0xff: a null pointer with byte_size 64 * f)
// tilusvm_module_load decodes and checks the module; the module queries are cross-checked; then
// up to two programs run with tilusvm_run_cpu, in checked mode when bit 0 of the first argument
// byte is set, otherwise unchecked.
//
// Properties beyond "no crash, no hang, no leak":
//   - every status is a tilusvm_status value, and every failure leaves a non-empty
//     tilusvm_last_error();
//   - program count, names, find_program and parameter queries agree with each other;
//   - a run that succeeds in checked mode writes the same bytes when run again unchecked (the
//     reference interpreter is deterministic on race-free programs), unless blocks update global
//     memory atomically: the order of atomics between blocks is undefined (docs/isa.md,
//     "Atomics and fences"), and the interpreter's parallel workers take blocks in any order,
//     so float sums, exchanges and tickets may differ from run to run.
// Runs that could take unbounded time or memory are not started (the module is still loaded and
// queried): a `while` loop, a `for` loop whose trip count cannot be computed from the parameters
// before the run or that runs more than 2^12 times (nested: the product), a grid of more than 64
// blocks, an AllocateGlobal workspace beyond 16 MiB, or more than 2^21 element operations in
// all: each instruction the blocks execute counts the elements of its largest tensor (register
// tensors: threads x locals, replicas included; shared tensors: their shape), a Dot or Wgmma
// M x N x K, times the trip counts of its loops. Such programs are the interpreter's
// documented cost, not a defect.
#include "isa/bytecode.h"
#include "isa/convert.h"
#include "isa/scalar_eval.h"
#include "loader/checker.h"
#include "tests/fuzz/seal.h"
#include "vm/include/tilusvm.h"

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <vector>

namespace {

using fuzzing::seal;
using tilus::bytecode::kHeaderBytes;
constexpr uint64_t kMaxWork = uint64_t(1) << 12;
constexpr int64_t kMaxBlocks = 64;
constexpr uint64_t kMaxWorkspaceBytes = uint64_t(16) << 20;
constexpr uint64_t kMaxElementWork = uint64_t(1) << 21;

[[noreturn]] void failure(const char *what) {
  std::fprintf(stderr, "fuzz_capi: %s (last error: %s)\n", what, tilusvm_last_error());
  std::abort();
}

int checkStatus(int status) {
  if (status < TILUSVM_OK || status > TILUSVM_ERROR_INTERNAL)
    failure("a status outside tilusvm_status");
  if (status != TILUSVM_OK && tilusvm_last_error()[0] == '\0')
    failure("a failure without a message");
  return status;
}

struct ArgBytes {
  const uint8_t *p;
  size_t n;
  uint8_t next() {
    if (n == 0)
      return 0x30;
    --n;
    return *p++;
  }
};

/// Arguments of one program built from the argument bytes, with their host buffers.
struct Launch {
  std::vector<tilusvm_arg> args;
  std::vector<std::vector<uint8_t>> buffers; // one per argument (empty for scalars)
  bool rawScalars = false;                   // some scalar took raw bits (maybe huge)
};

Launch buildArgs(tilusvm_module module, const char *program, size_t count, ArgBytes &bytes) {
  using namespace tilus;
  Launch l;
  l.args.resize(count);
  l.buffers.resize(count);
  for (size_t i = 0; i < count; ++i) {
    const char *name = nullptr, *dtype = nullptr;
    int isPointer = 0;
    if (checkStatus(tilusvm_program_param(module, program, i, &name, &dtype, &isPointer)) != 0)
      failure("a parameter below the count cannot be queried");
    if (!name || !dtype || (isPointer != 0 && isPointer != 1))
      failure("a parameter query left an output unset");
    tilusvm_arg &a = l.args[i];
    if (isPointer) {
      uint8_t s = bytes.next(), f = bytes.next();
      if (s == 0xff) {
        a.pointer = nullptr;
        a.byte_size = uint64_t(f) * 64;
        continue;
      }
      std::vector<uint8_t> &buf = l.buffers[i];
      buf.resize(size_t(s) * 64);
      uint32_t x = 0x9e3779b9u * (f + 1u);
      for (uint8_t &c : buf) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        c = uint8_t(x);
      }
      a.pointer = buf.empty() ? nullptr : buf.data();
      a.byte_size = buf.size();
      continue;
    }
    std::optional<DataType> t = DataType::parse(dtype);
    if (!t)
      failure("a scalar parameter's dtype spelling does not parse");
    uint8_t b = bytes.next();
    if (b < 0xf0) {
      int64_t v = int64_t(b) - 16;
      a.scalar_bits = t->isFloat() ? fromDouble(double(v), *t) : fromInt64(v, *t);
      continue;
    }
    uint64_t raw = 0;
    for (int k = 0; k < 8; ++k)
      raw |= uint64_t(bytes.next()) << (8 * k);
    a.scalar_bits = raw;
    l.rawScalars = true;
  }
  return l;
}

/// The launch's grid from its scalar arguments (grid expressions read parameters and constants
/// only), or an error where it cannot be evaluated before the run.
tilus::Expected<std::array<int64_t, 3>> launchGrid(const tilus::Program &p, const Launch &launch) {
  std::map<tilus::VarId, uint64_t> known;
  for (size_t i = 0; i < p.params.size() && i < launch.args.size(); ++i)
    known[p.params[i]] = launch.args[i].scalar_bits;
  return tilus::evaluateGrid(p, [&](tilus::VarId v) { return known.count(v) ? known[v] : 0; });
}

/// Whether running `program` on these scalar values has a small bound on its work (see the
/// file comment). Top-level scalar assignments made once are evaluated like parameters.
class WorkBound {
public:
  WorkBound(const tilus::Program &program, const tilus::ProgramInfo &info, const Launch &launch)
      : p_(program), info_(info), launch_(launch) {
    for (size_t i = 0; i < program.params.size() && i < launch.args.size(); ++i)
      known_[program.params[i]] = launch.args[i].scalar_bits;
    for (const tilus::Stmt &s : program.body)
      countAssignments(s);
  }

  bool bounded() {
    using namespace tilus;
    auto grid = launchGrid(p_, launch_);
    uint64_t blocks = kMaxBlocks; // an unknown grid counts as the largest one that runs
    if (grid.ok()) {
      blocks = 1; // each factor in [1, kMaxBlocks]: no overflow
      for (int64_t d : *grid) {
        if (d > kMaxBlocks)
          return false;
        blocks *= uint64_t(std::max<int64_t>(d, 1)); // a dimension below 1 fails the launch
      }
      if (blocks > kMaxBlocks)
        return false;
    }
    if (!block(p_.body, 1, true) || elementWork_ > kMaxElementWork / blocks)
      return false;
    for (const Instruction &inst : p_.instructions) {
      if (inst.opcode != Opcode::AllocateGlobal)
        continue;
      uint64_t bytes = uint64_t(inst.arg(ArgName::dtype).dtype.storageBits() + 7) / 8;
      for (ExprId e : inst.arg(ArgName::shape).exprs) {
        int64_t n = 0;
        if (!value(e, n) || n < 0 || (n > 0 && bytes > kMaxWorkspaceBytes / uint64_t(n)))
          return false;
        bytes *= uint64_t(n);
      }
    }
    return true;
  }

private:
  void countAssignments(const tilus::Stmt &s) {
    if (s.kind == tilus::StmtKind::Assign || s.kind == tilus::StmtKind::For)
      ++assigned_[s.var];
    for (const tilus::Stmt &b : s.body)
      countAssignments(b);
    for (const tilus::Stmt &b : s.orelse)
      countAssignments(b);
  }

  bool value(tilus::ExprId e, int64_t &out) {
    using namespace tilus;
    bool unknown = false;
    uint64_t bits = evaluateExpr(p_, e, [&](VarId v) -> uint64_t {
      auto it = known_.find(v);
      if (it == known_.end()) {
        unknown = true;
        return 0;
      }
      return it->second;
    });
    DataType t = p_.expr(e).dtype;
    if (unknown || !t.isInt())
      return false;
    out = toInt64(bits, t);
    return true;
  }

  bool block(const std::vector<tilus::Stmt> &stmts, uint64_t work, bool topLevel) {
    using namespace tilus;
    for (const Stmt &s : stmts) {
      switch (s.kind) {
      case StmtKind::Assign: {
        int64_t v = 0;
        if (topLevel && assigned_[s.var] == 1 && value(s.expr, v))
          known_[s.var] = fromInt64(v, p_.var(s.var).dtype);
        break;
      }
      case StmtKind::For: {
        int64_t start = 0, stop = 0, step = 0;
        if (!value(s.expr, start) || !value(s.stop, stop) || !value(s.step, step) || step == 0)
          return false;
        __int128 span = step > 0 ? __int128(stop) - start : __int128(start) - stop;
        __int128 trips = span <= 0 ? 0
                                   : (span + (step > 0 ? step : -__int128(step)) - 1) /
                                         (step > 0 ? step : -__int128(step));
        if (trips > __int128(kMaxWork) || uint64_t(trips) * work > kMaxWork)
          return false;
        if (!block(s.body, work * std::max<uint64_t>(1, uint64_t(trips)), false))
          return false;
        break;
      }
      case StmtKind::If:
        if (!block(s.body, work, false) || !block(s.orelse, work, false))
          return false;
        break;
      case StmtKind::Parallel: // its thread groups run at the same time: each one's work counts
        if (!block(s.body, work, false))
          return false;
        break;
      case StmtKind::Group: // each copy runs the body
        if (s.copies > kMaxGroupCopies ||
            !block(s.body, work * std::max<uint64_t>(1, s.copies), false))
          return false;
        break;
      case StmtKind::While:
        return false;
      case StmtKind::Instruction:
        // work <= kMaxWork and cost <= 2^62: the product and the sum stay below 2^64 once the
        // sum is capped
        elementWork_ = std::min(elementWork_ + work * std::min(cost(s.index), kMaxElementWork),
                                kMaxElementWork + 1);
        break;
      case StmtKind::Break:
      case StmtKind::Continue:
      case StmtKind::Assert:
        break;
      }
    }
    return true;
  }

  /// Elements of a register tensor (threads x locals) or a shared tensor (its shape); 1 for
  /// anything else.
  uint64_t elements(tilus::VarId v) const {
    using namespace tilus;
    if (v == kNoId || v >= info_.vars.size())
      return 1;
    const VarType &t = info_.vars[v];
    uint64_t n = 1;
    if (t.kind == VarKind::Register && t.layout)
      n = uint64_t(t.layout->numThreads()) * uint64_t(t.layout->numLocals());
    else if (t.kind == VarKind::Shared)
      for (int64_t d : t.shape)
        n = std::min(n * uint64_t(std::max<int64_t>(d, 1)), kMaxElementWork + 1);
    return n;
  }

  /// The element operations of one execution of an instruction by one block.
  uint64_t cost(uint32_t index) const {
    using namespace tilus;
    const Instruction &inst = p_.instructions[index];
    uint64_t c = 1;
    for (VarId r : inst.results)
      c = std::max(c, elements(r));
    for (const Argument &a : inst.args)
      c = std::max(c, elements(a.var));
    if ((inst.opcode == Opcode::Dot || inst.opcode == Opcode::Wgmma) && !inst.results.empty()) {
      VarId a = inst.arg(ArgName::a).var;
      uint64_t k = a != kNoId && a < info_.vars.size() && !info_.vars[a].shape.empty()
                       ? uint64_t(std::max<int64_t>(info_.vars[a].shape.back(), 1))
                       : 1;
      c = std::max(c, std::min(elements(inst.results[0]) * std::min(k, kMaxElementWork),
                               kMaxElementWork + 1));
    }
    return c;
  }

  const tilus::Program &p_;
  const tilus::ProgramInfo &info_;
  const Launch &launch_;
  uint64_t elementWork_ = 0;
  std::map<tilus::VarId, uint64_t> known_;
  std::map<tilus::VarId, int> assigned_;
};

/// Whether the bytes a run writes may depend on the order in which blocks run: an atomic (any
/// row of the Atomic category but Fence) on a global tensor, in a grid of more than one block
/// (or of a size not known before the run).
bool blockOrderMatters(const tilus::Program &p, const tilus::ProgramInfo &info,
                       const Launch &launch) {
  using namespace tilus;
  bool globalAtomics = false;
  for (const Instruction &inst : p.instructions) {
    if (instructionSpec(inst.opcode).category != InstructionCategory::Atomic ||
        inst.opcode == Opcode::Fence)
      continue;
    for (const Argument &a : inst.args)
      if (a.var != kNoId && a.var < info.vars.size() && info.vars[a.var].kind == VarKind::Global)
        globalAtomics = true;
  }
  if (!globalAtomics)
    return false;
  auto grid = launchGrid(p, launch);
  if (!grid.ok())
    return true;
  int64_t blocks = 1;
  for (int64_t d : *grid)
    blocks *= std::max<int64_t>(d, 1);
  return blocks > 1;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  using namespace tilus;
  if (size < 2)
    return 0;
  size_t argLength = std::min<size_t>(size - 2, size_t(data[0]) | size_t(data[1]) << 8);
  ArgBytes argBytes{data + 2, argLength};
  std::vector<uint8_t> bytes(data + 2 + argLength, data + size);
  if (bytes.size() >= kHeaderBytes)
    seal(bytes);

  tilusvm_module module = nullptr;
  int loaded = checkStatus(tilusvm_module_load(bytes.data(), bytes.size(), &module));
  if (loaded != TILUSVM_OK) {
    if (module != nullptr)
      failure("a failed load left a module");
    return 0;
  }
  Expected<Module> decoded = decodeModule(bytes); // the IR, to bound the work of a run
  if (!decoded)
    failure("a module the C API loaded does not decode");
  Expected<VerifiedModule> verified = checkModule(*decoded); // the tensors' sizes
  if (!verified)
    failure("a module the C API loaded does not check");
  size_t count = 0;
  checkStatus(tilusvm_module_program_count(module, &count));
  if (count != decoded->programs.size())
    failure("program count differs from the module's");
  bool checked = argLength > 0 && (data[2] & 1);
  for (size_t i = 0; i < count; ++i) {
    const char *name = nullptr;
    if (checkStatus(tilusvm_module_program_name(module, i, &name)) != 0 || !name)
      failure("a program below the count has no name");
    if (decoded->programs[i].name != name)
      failure("a program name differs from the module's");
    size_t found = 0;
    if (checkStatus(tilusvm_module_find_program(module, name, &found)) != 0 || found > i ||
        decoded->programs[found].name != name)
      failure("find_program does not find a program by its name");
    size_t params = 0;
    checkStatus(tilusvm_program_param_count(module, name, &params));
    if (params != decoded->programs[i].params.size())
      failure("parameter count differs from the module's");
    const char *dummy = nullptr;
    if (checkStatus(tilusvm_program_param(module, name, params, &dummy, nullptr, nullptr)) == 0)
      failure("a parameter index past the count is accepted");
    if (i >= 2 || found != i)
      continue;
    Launch launch = buildArgs(module, name, params, argBytes);
    if (!WorkBound(decoded->programs[i], verified->programs[i], launch).bounded())
      continue;
    std::vector<std::vector<uint8_t>> before = launch.buffers;
    int ran = checkStatus(
        tilusvm_run_cpu(module, name, launch.args.data(), launch.args.size(), checked ? 1 : 0));
    if (ran != TILUSVM_OK || !checked ||
        blockOrderMatters(decoded->programs[i], verified->programs[i], launch))
      continue;
    // Again, unchecked, from the same inputs: the same bytes.
    Launch again = launch;
    again.buffers = before;
    for (size_t k = 0; k < again.args.size(); ++k)
      if (launch.args[k].pointer != nullptr)
        again.args[k].pointer = again.buffers[k].data();
    if (checkStatus(tilusvm_run_cpu(module, name, again.args.data(), again.args.size(), 0)) != 0)
      failure("a program that ran checked fails unchecked");
    if (again.buffers != launch.buffers)
      failure("checked and unchecked runs wrote different bytes");
  }
  checkStatus(tilusvm_module_destroy(module));
  return 0;
}
