// Builds the instruction specifications from isa/instructions.def.
#include "isa/instruction.h"

#include <cassert>
#include <unordered_map>

namespace tilus {

namespace {

std::vector<InstructionSpec> buildTable() {
  std::vector<InstructionSpec> table;
#define TILUSVM_ARG(name, kind, required) ArgSpec{#name, ArgKind::kind, required},
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)   \
  table.push_back(InstructionSpec{Opcode::Name, #Name, InstructionCategory::Category,              \
                                  VarKind::ResultKind, MinResults, MaxResults, AllowsOut,          \
                                  std::vector<ArgSpec>{Args}});
#include "isa/instructions.def"
  for (size_t i = 0; i < table.size(); ++i)
    assert(size_t(table[i].opcode) == i && "opcodes follow table order");
  return table;
}

const std::vector<InstructionSpec> &table() {
  static const std::vector<InstructionSpec> t = buildTable();
  return t;
}

} // namespace

int InstructionSpec::argIndex(std::string_view n) const {
  for (size_t i = 0; i < args.size(); ++i)
    if (n == args[i].name)
      return int(i);
  return -1;
}

const InstructionSpec &instructionSpec(Opcode op) { return table()[size_t(op)]; }

size_t numOpcodes() { return table().size(); }

const InstructionSpec *findInstruction(std::string_view name) {
  static const std::unordered_map<std::string_view, const InstructionSpec *> byName = [] {
    std::unordered_map<std::string_view, const InstructionSpec *> m;
    for (const InstructionSpec &s : table())
      m.emplace(s.name, &s);
    return m;
  }();
  auto it = byName.find(name);
  return it == byName.end() ? nullptr : it->second;
}

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  case ReduceOp::Prod:
    return "prod";
  case ReduceOp::Any:
    return "any";
  case ReduceOp::All:
    return "all";
  }
  return "?";
}

std::optional<ReduceOp> parseReduceOp(std::string_view text) {
  for (int i = 0; i <= int(ReduceOp::All); ++i)
    if (text == reduceOpName(ReduceOp(i)))
      return ReduceOp(i);
  return std::nullopt;
}

const char *memoryScopeName(MemoryScope scope) {
  switch (scope) {
  case MemoryScope::Block:
    return "block";
  case MemoryScope::Gpu:
    return "gpu";
  }
  return "?";
}

std::optional<MemoryScope> parseMemoryScope(std::string_view text) {
  for (int i = 0; i <= int(MemoryScope::Gpu); ++i)
    if (text == memoryScopeName(MemoryScope(i)))
      return MemoryScope(i);
  return std::nullopt;
}

const char *argNameText(ArgName name) {
  static constexpr const char *kNames[] = {
#define TILUSVM_ARG_NAME(name) #name,
#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)
#include "isa/instructions.def"
  };
  return kNames[size_t(name)];
}

const Argument &Instruction::arg(ArgName name) const {
  int i = argPosition(opcode, name);
  assert(i >= 0 && size_t(i) < args.size() && "instruction has no such argument");
  return args[size_t(i)];
}

Argument &Instruction::arg(ArgName name) {
  int i = argPosition(opcode, name);
  assert(i >= 0 && size_t(i) < args.size() && "instruction has no such argument");
  return args[size_t(i)];
}

} // namespace tilus
