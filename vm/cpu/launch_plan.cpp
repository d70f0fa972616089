// Launch planning: everything about a launch that does not depend on the block, so that the
// blocks (run in parallel) share it read-only. Register layouts are static types, so the
// mapping from result slots to operand slots of every elementwise instruction (broadcasting
// and layout differences included) is computed here once instead of per element per block.
#include "vm/cpu/launch_plan.h"

#include "isa/convert.h"
#include "isa/host_memory.h"
#include "isa/scalar_eval.h"
#include "loader/tensor_map.h"

#include <cstring>

namespace tilus::cpu {

int32_t LayoutTable::ownerOnThread(int64_t e, int64_t t) const {
  for (int32_t k = ownerStart[size_t(e)]; k < ownerStart[size_t(e) + 1]; ++k)
    if (ownerSlots[size_t(k)] / locals == t)
      return ownerSlots[size_t(k)];
  return firstOwner(e);
}

LayoutTable buildLayoutTable(const RegisterLayout &layout) {
  LayoutTable table;
  table.threads = layout.numThreads();
  table.locals = layout.numLocals();
  table.elements = layout.numElements();
  table.shape = layout.shape();
  int64_t slots = table.numSlots();
  table.slotLinear.resize(size_t(slots));
  std::vector<int32_t> counts(size_t(table.elements) + 1, 0);
  for (int64_t t = 0; t < table.threads; ++t) {
    for (int64_t i = 0; i < table.locals; ++i) {
      int64_t e = layout.applyLinear(t, i);
      table.slotLinear[size_t(t * table.locals + i)] = int32_t(e);
      ++counts[size_t(e) + 1];
    }
  }
  for (size_t e = 1; e < counts.size(); ++e)
    counts[e] += counts[e - 1];
  table.ownerStart = counts;
  table.ownerSlots.resize(size_t(slots));
  for (int64_t s = 0; s < slots; ++s) // increasing s: owners come out in (t, i) order
    table.ownerSlots[size_t(counts[size_t(table.slotLinear[size_t(s)])]++)] = int32_t(s);
  return table;
}

namespace {

const LayoutTable *tableFor(LaunchPlan &plan, const RegisterLayout &layout) {
  for (size_t k = 0; k < plan.tableLayouts.size(); ++k)
    if (plan.tableLayouts[k] == layout)
      return plan.tables[k].get();
  plan.tableLayouts.push_back(layout);
  plan.tables.push_back(std::make_unique<LayoutTable>(buildLayoutTable(layout)));
  return plan.tables.back().get();
}

/// Row-major linear index in `operandShape` of the element that broadcasts (numpy rules,
/// shapes aligned at the right) to result element `linear` of `resultShape`.
int64_t broadcastLinear(int64_t linear, const std::vector<int64_t> &resultShape,
                        const std::vector<int64_t> &operandShape) {
  size_t r = resultShape.size(), ra = operandShape.size();
  int64_t result = 0, scale = 1;
  for (size_t k = 0; k < r; ++k) {
    size_t d = r - 1 - k;
    int64_t x = linear % resultShape[d];
    linear /= resultShape[d];
    if (k >= ra)
      continue;
    size_t da = ra - 1 - k;
    if (operandShape[da] != 1)
      result += x * scale;
    scale *= operandShape[da];
  }
  return result;
}

OperandMap buildOperandMap(const LayoutTable &result, const LayoutTable &operand) {
  OperandMap map;
  if (&result == &operand) {
    map.kind = OperandMap::Kind::Identity;
    return map;
  }
  map.kind = OperandMap::Kind::Gather;
  map.slot.resize(size_t(result.numSlots()));
  for (int64_t s = 0; s < result.numSlots(); ++s) {
    int64_t e = broadcastLinear(result.slotLinear[size_t(s)], result.shape, operand.shape);
    map.slot[size_t(s)] = operand.ownerOnThread(e, s / result.locals);
  }
  return map;
}

bool usesOperandMaps(const Instruction &inst) {
  switch (inst.spec().category) {
  case InstructionCategory::Arithmetic:
  case InstructionCategory::Bitwise:
  case InstructionCategory::Comparison:
  case InstructionCategory::Unary:
  case InstructionCategory::Math:
  case InstructionCategory::Select:
    return true;
  case InstructionCategory::Conversion:
    return inst.opcode == Opcode::Cast || inst.opcode == Opcode::ConvertLayout;
  case InstructionCategory::Indexing:
  case InstructionCategory::Creation:
  case InstructionCategory::Movement:
  case InstructionCategory::Contraction:
  case InstructionCategory::Control:
  case InstructionCategory::Atomic:
    return false;
  }
  return false;
}

Status planOperands(LaunchPlan &plan) {
  const Program &program = *plan.program;
  const ProgramInfo &info = *plan.info;
  plan.varTables.assign(info.vars.size(), nullptr);
  for (size_t v = 0; v < info.vars.size(); ++v)
    if (info.vars[v].kind == VarKind::Register && info.vars[v].layout)
      plan.varTables[v] = tableFor(plan, *info.vars[v].layout);
  plan.operandMaps.assign(program.instructions.size(), {});
  for (size_t k = 0; k < program.instructions.size(); ++k) {
    const Instruction &inst = program.instructions[k];
    if (!usesOperandMaps(inst))
      continue;
    if (inst.results.empty() || !plan.varTables[inst.results[0]])
      return Status::error(ErrorCode::Runtime,
                           "result of " + plan.describe(uint32_t(k)) + " has no register layout",
                           plan.location(uint32_t(k)));
    const LayoutTable &result = *plan.varTables[inst.results[0]];
    const auto &specs = inst.spec().args;
    for (size_t a = 0; a < specs.size(); ++a) {
      if (specs[a].kind != ArgKind::Value || !inst.args[a].present)
        continue;
      const Argument &arg = inst.args[a];
      if (!arg.isTensor()) {
        plan.operandMaps[k].push_back(OperandMap{});
        continue;
      }
      const LayoutTable *operand = plan.varTables[arg.var];
      if (!operand)
        return Status::error(ErrorCode::Runtime,
                             "operand of " + plan.describe(uint32_t(k)) +
                                 " is not a register tensor",
                             plan.location(uint32_t(k)));
      plan.operandMaps[k].push_back(buildOperandMap(result, *operand));
    }
  }
  return Status::success();
}

/// The first variable other than a parameter that expression `id` reads, or kNoId.
VarId nonParameterVar(const Program &program, const LaunchPlan &plan, ExprId id) {
  const ExprNode &node = program.expr(id);
  if (node.op == ExprOp::Var)
    return plan.paramIndex[node.var] == kNoId ? node.var : kNoId;
  for (int k = 0; k < exprOpArity(node.op); ++k) {
    VarId v = nonParameterVar(program, plan, node.operands[k]);
    if (v != kNoId)
      return v;
  }
  return kNoId;
}

int64_t evalParamInt(const LaunchPlan &plan, ExprId id) {
  const Program &program = *plan.program;
  uint64_t bits = evaluateExpr(program, id, [&](VarId v) { return plan.paramValue(v); });
  DataType t = program.expr(id).dtype;
  return t.isFloat() ? int64_t(toDouble(bits, t)) : toInt64(bits, t);
}

Status planWorkspaceRegion(LaunchPlan &plan, uint32_t k) {
  const Program &program = *plan.program;
  const Instruction &inst = program.instructions[k];
  WorkspaceRegion region;
  region.instruction = k;
  region.requiresClean =
      inst.arg(ArgName::requires_clean).present && inst.arg(ArgName::requires_clean).intValue;
  DataType dtype = inst.arg(ArgName::dtype).dtype;
  int64_t elements = 1;
  for (ExprId e : inst.arg(ArgName::shape).exprs) {
    VarId bad = nonParameterVar(program, plan, e);
    if (bad != kNoId)
      return Status::error(ErrorCode::Unsupported,
                           "the shape of " + plan.describe(k) + " depends on `" +
                               program.var(bad).name + "`, which is not a parameter",
                           plan.location(k));
    int64_t n = evalParamInt(plan, e);
    if (n < 0)
      return Status::error(ErrorCode::Runtime,
                           "negative extent " + std::to_string(n) + " in " + plan.describe(k),
                           plan.location(k));
    if (__builtin_mul_overflow(elements, n, &elements))
      return Status::error(ErrorCode::Runtime,
                           "the shape of " + plan.describe(k) + " has more than 2^63 elements",
                           plan.location(k));
  }
  // Sizes in unsigned 128-bit arithmetic: no product or sum below can wrap.
  unsigned __int128 bytes = ((unsigned __int128)elements * unsigned(dtype.storageBits()) + 7) / 8;
  unsigned __int128 offset = (unsigned __int128)(plan.workspaceBytes + 255) / 256 * 256;
  if (offset + bytes > plan.maxMemoryBytes)
    return Status::error(
        ErrorCode::Runtime,
        plan.describe(k) + " of " + std::to_string(elements) + " " + dtype.name() +
            " elements needs " +
            (bytes > UINT64_MAX ? std::string("2^64 or more") : std::to_string(uint64_t(bytes))) +
            " bytes; the workspace limit is " + std::to_string(plan.maxMemoryBytes) + " bytes",
        plan.location(k));
  region.bytes = int64_t(bytes);
  region.byteOffset = int64_t(offset);
  plan.workspaceBytes = region.byteOffset + region.bytes;
  plan.workspaceRegionOf[k] = int32_t(plan.workspaceRegions.size());
  plan.workspaceRegions.push_back(region);
  return Status::success();
}

Status planWorkspace(LaunchPlan &plan) {
  const Program &program = *plan.program;
  plan.workspaceRegionOf.assign(program.instructions.size(), -1);
  for (size_t k = 0; k < program.instructions.size(); ++k)
    if (program.instructions[k].opcode == Opcode::AllocateGlobal)
      TILUSVM_TRY(planWorkspaceRegion(plan, uint32_t(k)));
  // Zeroed: requires_clean regions must start clean, and the others start deterministic.
  plan.workspace = std::make_unique<uint8_t[]>(size_t(std::max<int64_t>(plan.workspaceBytes, 1)));
  std::memset(plan.workspace.get(), 0, size_t(std::max<int64_t>(plan.workspaceBytes, 1)));
  return Status::success();
}

Status bindParameters(LaunchPlan &plan, const KernelArgs &args) {
  const Program &program = *plan.program;
  if (args.size() != program.params.size())
    return Status::error(ErrorCode::Usage, "program `" + program.name + "` takes " +
                                               std::to_string(program.params.size()) +
                                               " arguments, got " + std::to_string(args.size()));
  plan.paramIndex.assign(program.vars.size(), kNoId);
  for (size_t k = 0; k < program.params.size(); ++k)
    plan.paramIndex[program.params[k]] = uint32_t(k);
  return Status::success();
}

Status evaluateGrid(LaunchPlan &plan) {
  auto grid = tilus::evaluateGrid(*plan.program, [&](VarId v) { return plan.paramValue(v); });
  if (!grid.ok())
    return grid.status();
  for (size_t d = 0; d < 3; ++d)
    plan.grid[d] = (*grid)[d];
  return Status::success();
}

} // namespace

uint64_t LaunchPlan::paramValue(VarId v) const {
  uint32_t k = v < paramIndex.size() ? paramIndex[v] : kNoId;
  if (k == kNoId)
    return 0;
  const Variable &var = program->var(v);
  if (var.kind == VarKind::Pointer)
    return uint64_t(reinterpret_cast<uintptr_t>((*args)[k].pointer));
  return (*args)[k].scalarBits & bitMask(var.dtype.bits);
}

std::string LaunchPlan::describe(uint32_t instruction) const {
  const Instruction &inst = program->instructions[instruction];
  std::string s = inst.spec().name;
  if (inst.loc.line != 0)
    return s + " at " + std::to_string(inst.loc.line) + ":" + std::to_string(inst.loc.column);
  return s + " (instruction " + std::to_string(instruction) + ")";
}

Location LaunchPlan::location(uint32_t instruction) const {
  Location loc;
  const Instruction &inst = program->instructions[instruction];
  loc.program = program->name;
  loc.instruction = instruction;
  loc.opcode = inst.spec().name;
  if (inst.loc.line != 0) {
    loc.file = module->sourceName;
    loc.line = inst.loc.line;
    loc.column = inst.loc.column;
  }
  return loc;
}

Status buildLaunchPlan(LaunchPlan &plan, const VerifiedModule &module, size_t programIndex,
                       const KernelArgs &args, const CpuRunOptions &options) {
  if (programIndex >= module.module.programs.size() || programIndex >= module.programs.size())
    return Status::error(ErrorCode::Usage, "program index " + std::to_string(programIndex) +
                                               " out of range for a module of " +
                                               std::to_string(module.module.programs.size()) +
                                               " programs");
  plan.module = &module.module;
  plan.program = &module.module.programs[programIndex];
  plan.info = &module.programs[programIndex];
  plan.args = &args;
  plan.checked = options.checked;
  plan.maxMemoryBytes = options.maxMemoryBytes ? options.maxMemoryBytes : availableHostMemory();
  TILUSVM_TRY(bindParameters(plan, args));
  TILUSVM_TRY(evaluateGrid(plan));
  TILUSVM_TRY(
      checkTensorMaps(*plan.program, *plan.info, [&](VarId v) { return plan.paramValue(v); }));
  TILUSVM_TRY(planOperands(plan));
  return planWorkspace(plan);
}

} // namespace tilus::cpu
