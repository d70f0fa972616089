// Print: gathers the logical value of a scalar, a register tensor, a shared tensor or a global
// tensor, formats it (print_format.h) and writes the whole line at once under the launch's
// print lock, so lines of blocks running in parallel never interleave.
#include "vm/cpu/exec.h"

#include "vm/cpu/elements.h"
#include "vm/cpu/print_format.h"
#include "vm/cpu/tile_elements.h"

#include <mutex>
#include <ostream>
#include <type_traits>

namespace tilus::cpu {

namespace {

/// The logical values of the whole of a global or shared tensor, row-major. A shared tensor
/// that reaches outside its allocation traps; global elements outside the view read as 0, and
/// one outside the argument buffer is an error.
template <class View>
Status tensorValues(BlockState &b, uint32_t index, const View &view,
                    std::vector<uint64_t> &values) {
  constexpr bool kShared = std::is_same_v<View, SharedView>;
  std::vector<OffsetValue> whole(view.shape.size(), OffsetValue{0, true});
  Expected<TileAccess> tile = [&] {
    if constexpr (kShared)
      return sharedTile(view, whole, view.shape);
    else
      return globalTile(view, whole, view.shape);
  }();
  if (!tile)
    return b.fail(tile.status().code(), index, tile.status().first().message);
  values.assign(size_t(tile->elements()), 0);
  int sb = view.dtype.storageBits();
  Status status;
  forEachTileElement(*tile, [&](int64_t e, const int64_t *, bool valid, int64_t off) {
    if constexpr (kShared) {
      if (!valid) {
        if (status.ok())
          status = b.fail(ErrorCode::OutOfBounds, index,
                          "Print of a shared tensor that reaches outside its allocation");
        return;
      }
      values[size_t(e)] = canonicalFromMemory(
          readBits(b.shared.data(), view.byteOffset * 8 + off * sb, sb), view.dtype);
      if (b.race)
        b.race->sharedRead(view.root, off, -1);
    } else {
      int64_t bit = off * sb;
      if (!valid || !status.ok())
        return;
      if (!inBuffer(view, bit, sb)) {
        status = b.fail(ErrorCode::Runtime, index,
                        "Print reads element offset " + std::to_string(off) +
                            " outside the buffer of `" + b.program.var(view.root).name + "`");
        return;
      }
      values[size_t(e)] = canonicalFromMemory(readBits(view.base, bit, sb), view.dtype);
      if (b.race)
        b.race->globalRead(raceKey(view, bit), sb, view.root, off, -1);
    }
  });
  return status;
}

} // namespace

Status Exec::visitPrint(BlockState &b, uint32_t index) {
  const Instruction &inst = b.program.instructions[index];
  const Argument &x = inst.arg(ArgName::x);
  const Argument &msg = inst.arg(ArgName::msg);
  std::string message = msg.present ? msg.text : std::string();
  std::vector<uint64_t> values;
  std::string line;
  if (x.isScalar()) {
    values.push_back(b.eval(x.expr));
    line = formatPrint(b.index, message, b.program.expr(x.expr).dtype, false, {}, values);
  } else {
    const VarType &type = b.info.vars[x.var];
    std::vector<int64_t> shape;
    DataType dtype = type.dtype;
    switch (type.kind) {
    case VarKind::Register: {
      TILUSVM_TRY(b.requireRegister(index, x.var));
      const LayoutTable &table = *b.plan.varTables[x.var];
      const std::vector<uint64_t> &slots = b.regs[x.var];
      shape = table.shape;
      for (int64_t e = 0; e < table.elements; ++e)
        values.push_back(slots[size_t(table.firstOwner(e))]);
      break;
    }
    case VarKind::Shared:
      TILUSVM_TRY(b.requireShared(index, x.var));
      shape = b.shareds[x.var].shape;
      dtype = b.shareds[x.var].dtype;
      TILUSVM_TRY(tensorValues(b, index, b.shareds[x.var], values));
      break;
    case VarKind::Global:
      shape = b.globals[x.var].shape;
      dtype = b.globals[x.var].dtype;
      TILUSVM_TRY(tensorValues(b, index, b.globals[x.var], values));
      break;
    case VarKind::Scalar:
      values.push_back(b.scalars[x.var]);
      line = formatPrint(b.index, message, b.program.var(x.var).dtype, false, {}, values);
      break;
    case VarKind::None:
    case VarKind::Pointer:
      return b.fail(ErrorCode::Unsupported, index, "Print of a pointer parameter");
    }
    if (line.empty())
      line = formatPrint(b.index, message, dtype, true, shape, values);
  }
  std::lock_guard<std::mutex> lock(b.plan.printMutex);
  *b.plan.printStream << line << std::flush;
  return Status::success();
}

} // namespace tilus::cpu
