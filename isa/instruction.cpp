// Builds the instruction specifications from isa/instructions.def.
#include "isa/instruction.h"

#include "isa/enum_names.h"

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

namespace {

constexpr EnumNames<ReduceOp, 6> kReduceOpNames{{"sum", "max", "min", "prod", "any", "all"}};
static_assert(kReduceOpNames.names.size() == size_t(ReduceOp::All) + 1);
constexpr EnumNames<MemoryScope, 2> kMemoryScopeNames{{"block", "gpu"}};
static_assert(kMemoryScopeNames.names.size() == size_t(MemoryScope::Gpu) + 1);
constexpr EnumNames<Eviction, 3> kEvictionNames{{"normal", "first", "last"}};
static_assert(kEvictionNames.names.size() == size_t(Eviction::Last) + 1);
constexpr EnumNames<VarKind, 6> kVarKindPhrases{{"nothing", "a scalar", "a pointer",
                                                 "a register tensor", "a shared tensor",
                                                 "a global tensor"}};
static_assert(kVarKindPhrases.names.size() == size_t(VarKind::Global) + 1);

} // namespace

const char *reduceOpName(ReduceOp op) { return kReduceOpNames.name(op); }

std::optional<ReduceOp> parseReduceOp(std::string_view text) { return kReduceOpNames.parse(text); }

const char *memoryScopeName(MemoryScope scope) { return kMemoryScopeNames.name(scope); }

std::optional<MemoryScope> parseMemoryScope(std::string_view text) {
  return kMemoryScopeNames.parse(text);
}

const char *evictionName(Eviction eviction) { return kEvictionNames.name(eviction); }

std::optional<Eviction> parseEviction(std::string_view text) { return kEvictionNames.parse(text); }

const char *varKindPhrase(VarKind kind) { return kVarKindPhrases.name(kind); }

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
