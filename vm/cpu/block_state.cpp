// Per-block state: set up once per worker and reset for each block it runs, so that blocks
// share nothing mutable but global memory (and the checked-mode race table).
#include "vm/cpu/block_state.h"

#include "isa/convert.h"

#include <string_view>

namespace tilus::cpu {

BlockState::BlockState(const LaunchPlan &p) : plan(p), program(*p.program), info(*p.info) {
  size_t nv = program.vars.size();
  scalars.assign(nv, 0);
  regs.resize(nv);
  globals.resize(nv);
  shareds.resize(nv);
  if (plan.checked)
    race = std::make_unique<BlockRaceDetector>(plan);
  varValue_ = [this](VarId v) { return scalars[v]; };
}

void BlockState::reset(int64_t block) {
  linear = block;
  index[0] = block % plan.grid[0];
  index[1] = (block / plan.grid[0]) % plan.grid[1];
  index[2] = block / (plan.grid[0] * plan.grid[1]);
  clusterRank = int32_t(index[0] % int64_t(program.cluster > 0 ? program.cluster : 1));
  for (size_t v = 0; v < scalars.size(); ++v)
    scalars[v] = plan.paramValue(VarId(v));
  shared.assign(size_t(info.sharedBytes), 0);
  uncommitted.clear();
  committed.clear();
  mbarriers.clear();
  wgmmaPending.assign(program.vars.size(), 0);
  wgmmaLast.assign(program.vars.size(), kNoId);
  wgmmaReading.assign(program.vars.size(), 0);
  wgmmaReader.assign(program.vars.size(), kNoId);
  wgmmaRegisterReads = 0;
  wgmmaUncommitted.clear();
  wgmmaCommitted.clear();
  tmaStoreUncommitted.clear();
  tmaStoreCommitted.clear();
  if (race)
    race->reset(block);
}

int64_t BlockState::evalInt(ExprId id) const {
  uint64_t bits = eval(id);
  DataType t = program.expr(id).dtype;
  if (t.isFloat())
    return toInt64(convertBits(bits, t, DataType::i64()), DataType::i64());
  return toInt64(bits, t);
}

std::vector<OffsetValue> BlockState::offsets(const Argument &arg, size_t rank) const {
  if (!arg.present)
    return std::vector<OffsetValue>(rank, OffsetValue{0, true});
  std::vector<OffsetValue> out;
  out.reserve(arg.offsets.size());
  for (const OffsetEntry &e : arg.offsets)
    out.push_back(OffsetValue{evalInt(e.expr), e.slice});
  return out;
}

std::vector<uint64_t> BlockState::takeBuffer(size_t n) {
  std::vector<uint64_t> buffer = std::move(spare_);
  spare_.clear();
  buffer.resize(n);
  return buffer;
}

void BlockState::setRegister(VarId v, std::vector<uint64_t> &&slots) {
  spare_ = std::move(regs[v]);
  regs[v] = std::move(slots);
}

Status BlockState::requireRegister(uint32_t instruction, VarId v) const {
  const LayoutTable *table = plan.varTables[v];
  if (v < wgmmaPending.size() && wgmmaPending[v] != 0)
    return fail(ErrorCode::Race, instruction,
                "register tensor `" + program.var(v).name + "` is read while " +
                    plan.describe(wgmmaLast[v]) +
                    " is still accumulating into it (no covering WgmmaWaitGroup before the read)");
  if (table && regs[v].size() == size_t(table->numSlots()))
    return Status::success();
  return fail(ErrorCode::Runtime, instruction,
              "register tensor `" + program.var(v).name + "` is used before it is assigned");
}

Status BlockState::checkWgmmaRegisterA(uint32_t index) const {
  if (wgmmaRegisterReads == 0)
    return Status::success();
  const Instruction &inst = program.instructions[index];
  auto reading = [&](VarId v) { return v != kNoId && v < wgmmaReading.size() && wgmmaReading[v]; };
  for (VarId v : inst.results)
    if (reading(v))
      return fail(ErrorCode::Race, index,
                  "register tensor `" + program.var(v).name + "` is written while " +
                      plan.describe(wgmmaReader[v]) +
                      " may still be reading it as its A operand (no covering WgmmaWaitGroup "
                      "before the write)");
  const std::vector<ArgSpec> &specs = inst.spec().args;
  for (size_t k = 0; k < inst.args.size(); ++k) {
    VarId v = inst.args[k].var;
    if (!inst.args[k].isTensor() || !reading(v))
      continue;
    if (inst.opcode == Opcode::Wgmma && k < specs.size() && std::string_view(specs[k].name) == "a")
      continue; // a further Wgmma reading the same A fragment
    return fail(ErrorCode::Race, index,
                "register tensor `" + program.var(v).name + "` is read while " +
                    plan.describe(wgmmaReader[v]) +
                    " may still be reading it as its A operand (only a further Wgmma may read "
                    "it as its A operand before the covering WgmmaWaitGroup)");
  }
  return Status::success();
}

Status BlockState::requireShared(uint32_t instruction, VarId v) const {
  if (shareds[v].layout)
    return Status::success();
  return fail(ErrorCode::Runtime, instruction,
              "shared tensor `" + program.var(v).name + "` is used before it is allocated");
}

std::string BlockState::blockText() const {
  return "block (" + std::to_string(index[0]) + ", " + std::to_string(index[1]) + ", " +
         std::to_string(index[2]) + ")";
}

Status BlockState::fail(ErrorCode code, uint32_t instruction, const std::string &message) const {
  return Status::error(code, blockText() + ": " + message, plan.location(instruction));
}

} // namespace tilus::cpu
