#include "jit/code_size.h"

#include "jit/lowering.h"

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace tilus::jit {
namespace {

constexpr int64_t kSaturated = std::numeric_limits<int64_t>::max() / 2;

int64_t saturatingAdd(int64_t x, int64_t y) { return std::min(kSaturated, x + y); }
int64_t saturatingMul(int64_t x, int64_t y) {
  return y != 0 && x > kSaturated / y ? kSaturated : x * y;
}

std::string withThousands(int64_t v) {
  std::string digits = std::to_string(v), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

} // namespace

CodeSize measureCodeSize(const Program &program, const ProgramInfo &info, int smVersion) {
  CodeSize size;
  for (size_t k = 0; k < program.instructions.size(); ++k) {
    const Instruction &inst = program.instructions[k];
    int64_t share = 0, most = 0;
    VarId mostVar = kNoId;
    auto see = [&](VarId v, int64_t times) {
      if (v == kNoId || v >= info.vars.size())
        return;
      const VarType &t = info.vars[v];
      if (t.kind != VarKind::Register || !t.layout)
        return;
      int64_t n = saturatingMul(t.layout->numLocals(), times);
      share = saturatingAdd(share, n);
      if (n > most) {
        most = n;
        mostVar = v;
      }
    };
    // A Dot emits a multiply-add per result element and k, or an mma atom per 16 of them
    int64_t dotK = 1;
    if (inst.opcode == Opcode::Dot && inst.arg(ArgName::a).isTensor() &&
        inst.arg(ArgName::b).isTensor() && !inst.results.empty()) {
      const VarType &a = info.vars[inst.arg(ArgName::a).var];
      const VarType &b = info.vars[inst.arg(ArgName::b).var];
      if (a.shape.size() == 2)
        dotK = std::max<int64_t>(1, a.shape[1]);
      if (dotUsesMma(a, b, info.vars[inst.results[0]], info.threads, smVersion))
        dotK = std::max<int64_t>(1, dotK / 16);
    }
    for (VarId r : inst.results)
      see(r, inst.opcode == Opcode::Dot ? dotK : 1);
    for (const Argument &a : inst.args)
      if (a.isTensor())
        see(a.var, 1);
    size.elements = saturatingAdd(size.elements, share);
    if (share > size.largest) {
      size.largest = share;
      size.largestAt = int64_t(k);
      const VarType &t = info.vars[mostVar];
      size.largestWhat = std::string(inst.spec().name) + " (`" + program.vars[mostVar].name +
                         "`: " + t.layout->toString() + ", " +
                         withThousands(t.layout->numLocals()) + " elements per thread" +
                         (inst.opcode == Opcode::Dot && mostVar == inst.results[0]
                              ? " times " + std::to_string(dotK)
                              : std::string()) +
                         ")";
    }
  }
  return size;
}

Expected<int64_t> maxCode() {
  const char *v = std::getenv("TILUSVM_JIT_MAX_IR");
  if (!v || !*v)
    return kDefaultMaxCode;
  std::string text(v);
  bool digits = text.size() <= 18 &&
                std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    return Status::error(ErrorCode::Usage, "TILUSVM_JIT_MAX_IR: `" + text +
                                               "` is not a non-negative integer (0: no limit)");
  return std::stoll(text);
}

namespace {

Location locationOf(const Program &program, const CodeSize &size) {
  Location loc;
  loc.program = program.name;
  if (size.largestAt >= 0) {
    const Instruction &inst = program.instructions[size_t(size.largestAt)];
    loc.line = inst.loc.line;
    loc.column = inst.loc.column;
    loc.instruction = size.largestAt;
    loc.opcode = inst.spec().name;
  }
  return loc;
}

const char *kAdvice = "; give its tiles layouts that spread them over more threads, or make "
                      "them smaller (TILUSVM_JIT_MAX_IR sets the limit)";

} // namespace

Status checkCodeSize(const Program &program, const ProgramInfo &info, int smVersion,
                     int64_t limit) {
  if (limit <= 0)
    return Status::success();
  CodeSize size = measureCodeSize(program, info, smVersion);
  if (size.elements <= limit)
    return Status::success();
  return Status::error(ErrorCode::Unsupported,
                       "kernel `" + program.name +
                           "` is too large to compile: its instructions touch " +
                           withThousands(size.elements) + " register elements per thread (limit " +
                           withThousands(limit) + "); the largest is " + size.largestWhat + kAdvice,
                       locationOf(program, size));
}

Status checkIrSize(const Program &program, const ProgramInfo &info, int smVersion,
                   int64_t irInstructions, int64_t limit) {
  if (limit <= 0 || irInstructions <= limit)
    return Status::success();
  CodeSize size = measureCodeSize(program, info, smVersion);
  return Status::error(
      ErrorCode::Unsupported,
      "kernel `" + program.name + "` is too large to compile: " + withThousands(irInstructions) +
          " LLVM IR instructions before optimisation (limit " + withThousands(limit) +
          "); the largest instruction is " + size.largestWhat + kAdvice,
      locationOf(program, size));
}

} // namespace tilus::jit
