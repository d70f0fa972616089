// Instructions: opcodes and argument specifications generated from isa/instructions.def, and
// the in-memory form of one instruction.
#pragma once

#include "isa/dtype.h"
#include "isa/layout.h"
#include "isa/shared_layout.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace tilus {

using VarId = uint32_t;
using ExprId = uint32_t;
inline constexpr uint32_t kNoId = UINT32_MAX;

enum class Opcode : uint16_t {
#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)   \
  Name,
#include "isa/instructions.def"
};

enum class InstructionCategory : uint8_t {
  Indexing,
  Creation,
  Movement,
  Arithmetic,
  Bitwise,
  Comparison,
  Unary,
  Math,
  Select,
  Conversion,
  Contraction,
  Control
};

/// The memory space of a variable (or of an instruction's results).
enum class VarKind : uint8_t {
  None = 0,     // instructions without results
  Scalar = 1,   // block-uniform scalar (scalar parameters, BlockIndices, `x = expr`)
  Pointer = 2,  // pointer parameter
  Register = 3, // register tensor
  Shared = 4,   // shared tensor (allocation or view)
  Global = 5,   // global tensor (view over a pointer or workspace)
};

enum class ArgKind : uint8_t {
  Value,
  Expr,
  Int,
  Bool,
  DType,
  RegLayout,
  SharedLayout,
  IntList,
  ExprList,
  Offset,
  ReduceOp,
  String
};

enum class ReduceOp : uint8_t { Sum = 0, Max = 1, Min = 2, Prod = 3, Any = 4, All = 5 };
const char *reduceOpName(ReduceOp op);
std::optional<ReduceOp> parseReduceOp(std::string_view text);

struct ArgSpec {
  const char *name;
  ArgKind kind;
  bool required;
};

struct InstructionSpec {
  Opcode opcode;
  const char *name;
  InstructionCategory category;
  VarKind resultKind;
  uint8_t minResults;
  uint8_t maxResults;
  bool allowsOut;
  std::vector<ArgSpec> args;

  /// Position of the argument called `name`, or -1.
  int argIndex(std::string_view name) const;
};

/// The table row of an opcode.
const InstructionSpec &instructionSpec(Opcode op);
/// Look an instruction up by its assembly name.
const InstructionSpec *findInstruction(std::string_view name);
/// Number of opcodes (rows of the table).
size_t numOpcodes();

/// One entry of `offset=[...]`: `e` fixes a dimension to index e, `e:` starts a slice at e.
struct OffsetEntry {
  ExprId expr = kNoId;
  bool slice = false;
  friend bool operator==(const OffsetEntry &, const OffsetEntry &) = default;
};

/// An argument value; which member is meaningful follows the ArgSpec's kind.
struct Argument {
  bool present = false;
  // Value: a tensor variable (var != kNoId) or a scalar expression (expr != kNoId).
  VarId var = kNoId;
  ExprId expr = kNoId;                      // Value (scalar) and Expr
  int64_t intValue = 0;                     // Int, Bool (0/1), ReduceOp (enum value)
  DataType dtype;                           // DType
  std::optional<RegisterLayout> regLayout;  // RegLayout
  std::optional<SharedLayout> sharedLayout; // SharedLayout
  std::vector<int64_t> ints;                // IntList
  std::vector<ExprId> exprs;                // ExprList
  std::vector<OffsetEntry> offsets;         // Offset
  std::string text;                         // String

  bool isTensor() const { return present && var != kNoId; }
  bool isScalar() const { return present && expr != kNoId; }
};

/// Position in the source (debug info); line 0 when unknown.
struct SourceLoc {
  uint32_t line = 0;
  uint32_t column = 0;
  friend bool operator==(const SourceLoc &, const SourceLoc &) = default;
};

struct Instruction {
  Opcode opcode = Opcode::Synchronize;
  /// Variables written. With `out` set, results[0] is an existing register tensor written in
  /// place; otherwise each result is declared (or, for an update of an enclosing-scope
  /// variable, overwritten) by this instruction.
  std::vector<VarId> results;
  bool out = false;
  /// One entry per ArgSpec of the opcode, in table order.
  std::vector<Argument> args;
  SourceLoc loc;

  const InstructionSpec &spec() const { return instructionSpec(opcode); }
  /// The argument called `name` (asserts that the opcode has it).
  const Argument &arg(std::string_view name) const;
  Argument &arg(std::string_view name);
};

} // namespace tilus
