// Instructions: opcodes and argument specifications generated from isa/instructions.def, and
// the in-memory form of one instruction.
#pragma once

#include "isa/dtype.h"
#include "isa/expr_op.h"
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

/// The categories of the instruction table, each in a family: a stage that handles a whole
/// category or family alike gives one handler for it (isa/instruction_visitor.h).
///   X(Category)
#define TILUSVM_CATEGORIES(X)                                                                      \
  X(Indexing)                                                                                      \
  X(Creation)                                                                                      \
  X(Movement)                                                                                      \
  X(Arithmetic)                                                                                    \
  X(Bitwise)                                                                                       \
  X(Comparison)                                                                                    \
  X(Unary)                                                                                         \
  X(Math)                                                                                          \
  X(Select)                                                                                        \
  X(Conversion)                                                                                    \
  X(Contraction)                                                                                   \
  X(Control)                                                                                       \
  X(Atomic)

// The family of each category: the categories of one family are handled alike by a stage
// that gives a handler for the family.
#define TILUSVM_FAMILY_OF_Indexing Indexing
#define TILUSVM_FAMILY_OF_Creation Creation
#define TILUSVM_FAMILY_OF_Movement Movement
#define TILUSVM_FAMILY_OF_Arithmetic Elementwise
#define TILUSVM_FAMILY_OF_Bitwise Elementwise
#define TILUSVM_FAMILY_OF_Comparison Elementwise
#define TILUSVM_FAMILY_OF_Unary Elementwise
#define TILUSVM_FAMILY_OF_Math Elementwise
#define TILUSVM_FAMILY_OF_Select Select
#define TILUSVM_FAMILY_OF_Conversion Conversion
#define TILUSVM_FAMILY_OF_Contraction Contraction
#define TILUSVM_FAMILY_OF_Control Control
#define TILUSVM_FAMILY_OF_Atomic Atomic

enum class InstructionCategory : uint8_t {
#define TILUSVM_X(Category) Category,
  TILUSVM_CATEGORIES(TILUSVM_X)
#undef TILUSVM_X
};

/// The math functions of the Math rows (payload TILUSVM_MATH_FN of isa/instructions.def).
enum class MathFn : uint8_t { None, Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Sin, Cos, Tanh, Rcp };

/// The memory space of a variable (or of an instruction's results).
enum class VarKind : uint8_t {
  None = 0,     // instructions without results
  Scalar = 1,   // block-uniform scalar (scalar parameters, BlockIndices, `x = expr`)
  Pointer = 2,  // pointer parameter
  Register = 3, // register tensor
  Shared = 4,   // shared tensor (allocation or view)
  Global = 5,   // global tensor (view over a pointer or workspace)
};
/// A variable kind in messages: "a scalar", "a pointer", "a register tensor", ...; "nothing"
/// for None.
const char *varKindPhrase(VarKind kind);

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
  String,
  MemoryScope,
  Eviction
};

enum class ReduceOp : uint8_t { Sum = 0, Max = 1, Min = 2, Prod = 3, Any = 4, All = 5 };
const char *reduceOpName(ReduceOp op);
std::optional<ReduceOp> parseReduceOp(std::string_view text);

/// The threads a Fence orders memory accesses for: the block's, or every thread of the launch.
enum class MemoryScope : uint8_t { Block = 0, Gpu = 1 };
const char *memoryScopeName(MemoryScope scope);
std::optional<MemoryScope> parseMemoryScope(std::string_view text);

/// LoadGlobal's L1 eviction priority for the lines it reads (a performance hint, docs/isa.md
/// "Eviction hints"): normal, first (data read once: evicted before other lines) or last
/// (data read again: kept longer).
enum class Eviction : uint8_t { Normal = 0, First = 1, Last = 2 };
const char *evictionName(Eviction eviction);
std::optional<Eviction> parseEviction(std::string_view text);

/// The argument names of the table (TILUSVM_ARG_NAME in isa/instructions.def).
enum class ArgName : uint8_t {
#define TILUSVM_ARG_NAME(name) name,
#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)
#include "isa/instructions.def"
};

/// The spelling of an argument name ("offset").
const char *argNameText(ArgName name);

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

/// Number of opcodes (rows of the table), at compile time.
inline constexpr size_t kNumOpcodes = 0
#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args) +1
#include "isa/instructions.def"
    ;

namespace detail {
struct OpcodePayload {
  bool hasScalarOp = false;
  ExprOp scalarOp = ExprOp::Const;
  MathFn mathFn = MathFn::None;
};
struct OpcodePayloads {
  OpcodePayload rows[kNumOpcodes];
};
inline constexpr OpcodePayloads kOpcodePayloads = [] {
  OpcodePayloads t{};
  size_t row = 0;
#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)   \
  row = size_t(Opcode::Name);
#define TILUSVM_SCALAR_OP(Name, Op) t.rows[row] = {true, ExprOp::Op, MathFn::None};
#define TILUSVM_MATH_FN(Name, Fn) t.rows[row] = {false, ExprOp::Const, MathFn::Fn};
#include "isa/instructions.def"
  return t;
}();
} // namespace detail

inline constexpr size_t kNumArgNames = 0
#define TILUSVM_ARG_NAME(name) +1
#define TILUSVM_ARG(name, kind, required)
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)
#include "isa/instructions.def"
    ;

namespace detail {
struct ArgPositions {
  int8_t at[kNumOpcodes][kNumArgNames];
};
inline constexpr ArgPositions kArgPositions = [] {
  ArgPositions t{};
  for (auto &row : t.at)
    for (int8_t &p : row)
      p = -1;
  size_t row = 0;
  int8_t k = 0;
#define TILUSVM_ARG(name, kind, required) t.at[row][size_t(ArgName::name)] = k++;
#define TILUSVM_INSTRUCTION(Name, Category, ResultKind, MinResults, MaxResults, AllowsOut, Args)   \
  row = size_t(Opcode::Name);                                                                      \
  k = 0;                                                                                           \
  Args
#include "isa/instructions.def"
  return t;
}();
} // namespace detail

/// Position of argument `name` in the row of `op`, or -1 when the row has no such argument.
constexpr int argPosition(Opcode op, ArgName name) {
  return detail::kArgPositions.at[size_t(op)][size_t(name)];
}

/// The scalar operator an elementwise row applies to each element (payload TILUSVM_SCALAR_OP:
/// Add -> Add, And -> BitAnd, Not -> BitNot, ...); nullopt for a row without one.
constexpr std::optional<ExprOp> scalarOpOf(Opcode op) {
  const detail::OpcodePayload &p = detail::kOpcodePayloads.rows[size_t(op)];
  return p.hasScalarOp ? std::optional<ExprOp>(p.scalarOp) : std::nullopt;
}
/// The math function of a Math row (payload TILUSVM_MATH_FN); MathFn::None for other rows.
constexpr MathFn mathFnOf(Opcode op) { return detail::kOpcodePayloads.rows[size_t(op)].mathFn; }

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
  ExprId expr = kNoId;  // Value (scalar) and Expr
  int64_t intValue = 0; // Int, Bool (0/1), ReduceOp, MemoryScope, Eviction (enum)
  DataType dtype;       // DType
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
  const Argument &arg(ArgName name) const;
  Argument &arg(ArgName name);
  /// Whether the opcode has an argument called `name` (present or not).
  bool hasArg(ArgName name) const { return argPosition(opcode, name) >= 0; }
};

} // namespace tilus
