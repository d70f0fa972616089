// Internal to the checker (loader/check*.cpp): the per-program checking state and the layout
// ownership oracle. Not part of the loader's public API.
//
// One ProgramChecker walks one program's statements in program order. Each instruction goes
// through the same steps: structural validation of its arguments and results, liveness of the
// variables it reads, the thread count of its layout arguments, then one small function per
// instruction (visitNAME, dispatched by visitInstruction from isa/instructions.def) that derives
// the result types and reports the first rule it breaks. Results of a failing instruction are
// *poisoned*: later instructions that read them are skipped silently, so one mistake gives one
// diagnostic rather than a cascade.
#pragma once

#include "isa/instruction_visitor.h"
#include "loader/checker.h"

#include <array>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace tilus::detail {

/// The dtypes that arithmetic is defined for, as diagnostics name them.
inline constexpr const char *kArithmeticTypes =
    "bool, 8- to 64-bit integers and f16, bf16, f32, f64 (Cast sub-byte and FP8 tensors first)";

/// The largest pending arrival count and transaction byte count of an mbarrier (20 bits).
inline constexpr int64_t kMbarrierMaxPending = (int64_t(1) << 20) - 1;

/// Whether `dims` lists each of 0 .. rank-1 once (Permute, PermuteShared).
bool isPermutation(const std::vector<int64_t> &dims, size_t rank);
/// "1 entry", "3 entries".
std::string counted(int64_t n, const char *singular, const char *plural);
/// "[16, 8]".
std::string shapeString(const std::vector<int64_t> &shape);
/// Product of the dimensions, saturating at INT64_MAX.
int64_t shapeElements(const std::vector<int64_t> &shape);
/// Row-major multi-index of a linear index within `shape`.
std::vector<int64_t> unravelIndex(int64_t linear, const std::vector<int64_t> &shape);
/// numpy broadcasting of two shapes; nullopt when they do not broadcast.
std::optional<std::vector<int64_t>> broadcastShapes(const std::vector<int64_t> &a,
                                                    const std::vector<int64_t> &b);
/// An integer or bool value from its bit pattern (sign-extended for signed types; u64 values
/// above INT64_MAX saturate).
int64_t integerValue(uint64_t bits, DataType type);
/// The type of a register tensor of `dtype` in `layout` (its shape is the layout's).
VarType registerType(DataType dtype, const RegisterLayout &layout);

/// Why a cover check failed: `thread` owns result element `resultIndex` (row-major linear
/// index in the result's shape) but not operand element `operandIndex`.
struct CoverFailure {
  int64_t thread = 0;
  int64_t resultIndex = 0;
  int64_t operandIndex = 0;
};

/// Why the per-thread Dot rule failed: `thread` owns d[m, n] but not `missing` (one of
/// "c", "a", "b"); for "a" it lacks some a[m, k], for "b" some b[k, n].
struct DotFailure {
  int64_t thread = 0;
  int64_t m = 0;
  int64_t n = 0;
  char missing = 'c';
  int64_t k = 0; // the first missing k for "a" / "b"
};

/// Memoised ownership questions about register layouts. Both questions depend only on the
/// layouts involved, so the answers are cached by layout (hash() / ==): a program of 100,000
/// instructions over a handful of layouts does the per-thread work a handful of times.
class LayoutOracle {
public:
  LayoutOracle();
  ~LayoutOracle();
  LayoutOracle(const LayoutOracle &) = delete;
  LayoutOracle &operator=(const LayoutOracle &) = delete;

  /// The owner cover rule: nullopt when, for every element e of `result`, every owner thread
  /// of e owns the element of `operand` that e broadcasts from (numpy alignment on the right,
  /// operand dimensions of size 1 broadcast). Precondition: equal thread counts and an operand
  /// shape that broadcasts to the result's.
  std::optional<CoverFailure> cover(const RegisterLayout &result, const RegisterLayout &operand);

  /// The per-thread Dot rule over a [M,K], b [K,N], c and d [M,N] (equal thread counts): nullopt
  /// when every owner thread of d[m, n] owns c[m, n], and a[m, k] and b[k, n] for every k.
  std::optional<DotFailure> dotPerThread(const RegisterLayout &a, const RegisterLayout &b,
                                         const RegisterLayout &c, const RegisterLayout &d);

  /// Memo for a whole rule's verdict (an error message, or nullopt when the rule holds) that
  /// depends only on `tag` and `layouts`; `compute` runs on the first request.
  std::optional<std::string> verdict(uint64_t tag, std::vector<RegisterLayout> layouts,
                                     const std::function<std::optional<std::string>()> &compute);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The mma atoms that Dot layouts may divide by (ISA section 6, dot-layout).
struct MmaAtom {
  const char *name; // "m16n8k16"
  RegisterLayout a, b, c;
};
/// The atom for an operand dtype, or nullptr (f32, f64 and the rest have none).
const MmaAtom *mmaAtomFor(DataType operandType);

/// A diagnostic with the key it is sorted by (diagnostics are reported ordered by location).
struct SortedDiagnostic {
  size_t program = 0;
  uint32_t line = 0;
  uint32_t column = 0;
  int64_t instruction = -1;
  size_t sequence = 0;
  Diagnostic diagnostic;
};

/// Facts about one scalar expression node, computed once per program by a pass over the arena.
struct ExprFacts {
  bool constant = false;        // every leaf is a Const
  bool paramsOnly = false;      // every leaf is a Const or a scalar parameter
  std::optional<int64_t> value; // integer value when constant and of integer / bool type
  std::string error;            // typing error of this node itself (empty when well typed)
  ErrorCode errorCode = ErrorCode::DtypeMismatch;
};

/// The byte addresses of a shared view's elements (loader/shared_view_addresses.cpp): for each
/// value that the run-time parts of its origin can take (`origins`, root coordinates), the
/// address of view element `index` is address(origin, index).
struct SharedViewAddresses {
  const SharedLayout *layout = nullptr;
  int64_t rootBase = 0;      // the root's shared byte offset
  int64_t elemBytes = 1;     // storage bytes per element (1 for sub-byte types)
  std::vector<int32_t> dims; // view dimension -> root dimension
  std::vector<std::vector<int64_t>> origins;
  /// The byte address of view element `index` from origin `origin`. Called once per element by
  /// the exhaustive TMA and wgmma plans: the root coordinates are built in a buffer kept between
  /// calls (a view is used by one thread).
  int64_t address(size_t origin, const std::vector<int64_t> &index) const;

private:
  mutable std::vector<int64_t> root_;
};

enum class VarState : uint8_t { Undeclared, Live, Dead };

class ProgramChecker {
public:
  ProgramChecker(const Module &module, size_t programIndex, const CheckOptions &options,
                 LayoutOracle &oracle, std::vector<SortedDiagnostic> &diagnostics);

  /// Check the program; the result is meaningful only when no diagnostic was added.
  ProgramInfo run();

  using Results = std::vector<VarType>;

  // --- instruction handlers, dispatched by visitInstruction (isa/instruction_visitor.h). Each
  // derives the result types into `results` and returns false after reporting the first broken
  // rule. Every row of isa/instructions.def has its own handler visitNAME, declared here from the
  // table, except the elementwise rows (visitElementwise) and the atomic ones (visitAtomic);
  // each lives in the file of its family, check_<family>.cpp (docs/contributing.md).
#define TILUSVM_HANDLERS_OWNED TILUSVM_PER_ROW
#define TILUSVM_HANDLER(Name) bool visit##Name(const Instruction &inst, Results &results)
#include "isa/instruction_handlers.def"
  // check_elementwise.cpp: the rows of the elementwise family
  bool visitElementwise(const Instruction &inst, Results &results);
  // check_atomic.cpp: AtomicAdd, AtomicMax, AtomicMin, AtomicExch, AtomicCas, AtomicStore;
  // Fence and AtomicLoad have their own
  bool visitAtomic(const Instruction &inst, Results &results);
  bool visitFence(const Instruction &inst, Results &results);
  bool visitAtomicLoad(const Instruction &inst, Results &results);
  // checker.cpp
  bool visitInvalid(const Instruction &inst, Results &results);

private:
  // --- checker.cpp: driver, diagnostics, expressions, scopes, statements, results ---
  void analyseExprs();
  void analyseNode(ExprId id, std::vector<uint8_t> &used);
  void markRootUses(std::vector<uint8_t> &used);
  void checkHeader();
  uint32_t inferThreads();
  void checkBlock(const std::vector<Stmt> &body);
  void checkStmt(const Stmt &stmt);
  void checkAssign(const Stmt &stmt);
  void checkFor(const Stmt &stmt);
  void checkCondition(const Stmt &stmt, const char *what);
  void checkAssert(const Stmt &stmt);
  void checkSpecialize(const Stmt &stmt);
  bool paramsOnly(ExprId e, ErrorCode code, const char *what);
  // check_thread_group.cpp: parallel and its groups (docs/isa.md, "Thread groups")
  void checkParallel(const Stmt &stmt);
  /// Whether `var` (live) was declared outside the thread group being checked (false outside
  /// groups).
  bool declaredOutsideGroup(VarId var) const;
  void checkInstructionStmt(const Stmt &stmt);
  bool checkStructure(const Instruction &inst);
  bool checkArgument(const Instruction &inst, size_t k);
  bool checkResultSlots(const Instruction &inst);
  bool checkReads(const Instruction &inst, bool &poisoned);
  bool checkExprUse(ExprId id, bool &poisoned);
  bool checkVarRead(VarId var, bool &poisoned);
  bool checkLayoutThreads(const Instruction &inst);
  bool dispatch(const Instruction &inst, Results &results);
  bool checkOut(const Instruction &inst, const VarType &computed);
  void commitResults(const Instruction &inst, Results &results);
  void writeVar(VarId var, VarType type, bool scalarAssign);
  void poisonResults(const Instruction &inst);
  void openScope();
  void closeScope();
  void finishSharedPlan();
  void collectExtents();

  bool fail(ErrorCode code, std::string message);
  void report(ErrorCode code, std::string message, SourceLoc loc, int64_t instruction);
  std::string varName(VarId var) const;
  std::string exprTypeName(ExprId id) const;
  std::optional<int64_t> constValue(ExprId id) const;
  /// What the checker knows of the low bits of integer expression `id` at run time: its value is
  /// congruent to `residue` modulo `multiple`, a power of two in [1, 2^30] (1: nothing known).
  /// From constants, +, -, negation, * and << by a constant, and casts between integer types
  /// of 32 bits or more (a stage index times a tile height); the integer types wrap modulo 2^32
  /// or 2^64, which a power of two up to 2^30 divides.
  struct KnownMultiple {
    int64_t multiple = 1;
    int64_t residue = 0;
  };
  KnownMultiple knownMultiple(ExprId id) const;
  bool isIntegerExpr(ExprId id) const;
  const VarType &typeOf(VarId var) const { return info_.vars[var]; }
  /// A required tensor argument of kind `kind` (scope error otherwise).
  const VarType *tensorArg(const Instruction &inst, ArgName name, VarKind kind);
  const RegisterLayout *layoutArg(const Instruction &inst, ArgName name);
  const Argument *optionalArg(const Instruction &inst, ArgName name) const;
  /// The out= target's type, or nullptr without out=.
  const VarType *outTarget(const Instruction &inst) const;
  /// DtypeMismatch "<op> <what>[ entry <entry>] has type T; expected an integer" unless `id` is
  /// of an integer type (entry < 0: no entry).
  bool checkInteger(ExprId id, const char *op, const char *what, int64_t entry = -1);
  /// The n= of a wait on groups of asynchronous operations: not negative and, given `max`, at
  /// most `max`.
  bool checkGroupCount(const Instruction &inst, std::optional<int64_t> max);
  bool checkLayoutShape(const RegisterLayout &layout, const std::vector<int64_t> &shape,
                        const char *what);
  bool checkCover(const RegisterLayout &result, const RegisterLayout &operand,
                  const char *operandName, const char *resultName);
  void noteScratch(int64_t bytes);

  // --- check_elementwise.cpp ---
  bool checkElementwiseDtype(const Instruction &inst, DataType dtype);
  bool elementwiseResult(const Instruction &inst, const std::vector<const VarType *> &operands,
                         const std::vector<const char *> &names, DataType resultType,
                         Results &results);

  // --- check_views.cpp ---
  bool checkSharedSliceEntry(const VarType &s, size_t d, const OffsetEntry &e,
                             const Argument *shapeArg, std::vector<int64_t> &shape);
  /// Every expression of a list argument (`<op> <what>`, e.g. "ViewGlobal shape") is an integer.
  bool checkIntExprs(const std::vector<ExprId> &exprs, const char *op, const char *what);
  /// The rank rule (isa/view_rules.h) of a SliceGlobal / SliceShared offset= on `parent`:
  /// `sliceDims` is the length of shape=, or kAnySliceCount without it.
  bool checkSliceRank(const Instruction &inst, const VarType &parent, size_t sliceDims);

  // --- check_memory.cpp ---
  const VarType *scalarElement(const Instruction &inst, ArgName which, const char *op,
                               const char *relation);
  bool checkAccess(const Instruction &inst, const VarType &memory, VarId memoryVar,
                   const std::vector<int64_t> &tileShape, const char *tileName);
  /// LoadGlobal / LoadShared: the tile of memory argument `memory` (of kind `kind`) in the
  /// layout= argument's layout.
  bool checkLoad(const Instruction &inst, ArgName memory, VarKind kind, Results &results);
  /// StoreGlobal / StoreShared / CopyAsync: tensor argument `tile` of kind `tileKind` written to
  /// or (memoryIsSource) read from the tile of memory argument `memory` of kind `memoryKind`.
  bool checkTransfer(const Instruction &inst, ArgName tile, VarKind tileKind, ArgName memory,
                     VarKind memoryKind, bool memoryIsSource);

  // --- check_control_mbarrier.cpp ---
  /// Argument `which` is a one-element shared u64 tensor (an mbarrier).
  bool checkMbarrierOperand(const Instruction &inst, ArgName which = ArgName::s);

  // --- shared_view_addresses.cpp ---
  /// The addresses of shared view `v` for every value its origin can take (false with `why`
  /// when that is more than 4096 values).
  bool sharedViewAddresses(const VarType &v, SharedViewAddresses &out, std::string &why);

  // --- check_memory_tma.cpp ---
  /// The global tensor of TmaLoad / TmaStore: a tensor-map view (a ViewGlobal root with a
  /// parameter-only shape), whose ViewGlobal instruction goes to `viewIndex`; false after
  /// reporting.
  bool checkTensorMapView(const Instruction &inst, const VarType &g, VarId gVar,
                          uint32_t &viewIndex);
  /// TmaLoad / TmaStore of s and g (argument types already checked): the tensor map and the
  /// boxes (ProgramInfo::tensorMaps, ProgramInfo::tma); false after reporting.
  bool planTma(const Instruction &inst);
  /// The tensor-map dimensions of TmaLoad / TmaStore `inst` from view `viewIndex` with `box`
  /// (per view dimension): for each, the view dimensions it covers and the factor of its first
  /// one's coordinate (TensorMapSpec::groups, scales); false after reporting a rank above 5.
  bool mergeTensorMapDims(const Instruction &inst, uint32_t viewIndex,
                          const std::vector<int64_t> &box, std::vector<uint32_t> &groups,
                          std::vector<int64_t> &scales);
  /// cluster= in range and dividing a constant grid x extent (check_cluster.cpp).
  void checkClusterHeader();
  std::optional<int64_t> clusterForOperands() const;
  /// An integer mask= or rank= operand; a constant one in [lo, hi] (`range` says so).
  bool checkClusterOperand(const Instruction &inst, ArgName which, int64_t lo, int64_t hi,
                           const std::string &range);

  // --- check_contraction.cpp ---
  /// The operands a, b (tensors of `abKind`) and c (a register tensor) of Dot and Wgmma,
  /// checked in that order; nullopt after reporting the first of another kind.
  std::optional<std::array<const VarType *, 3>> contractionOperands(const Instruction &inst,
                                                                    VarKind abKind);
  bool checkDotLayouts(DataType operandType, const RegisterLayout &a, const RegisterLayout &b,
                       const RegisterLayout &c, const RegisterLayout &d);

  const Module &module_;
  const Program &prog_;
  size_t programIndex_;
  const CheckOptions &options_;
  LayoutOracle &oracle_;
  std::vector<SortedDiagnostic> &diagnostics_;
  size_t firstDiagnostic_;

  ProgramInfo info_;
  std::vector<ExprFacts> exprFacts_;
  std::vector<VarState> state_;
  std::vector<uint8_t> poisoned_;
  std::vector<uint8_t>
      loopVar_; // 1: a for loop's variable, 2: a group's copy index, 3: specialized
  std::vector<uint8_t> instructionSeen_;
  std::vector<std::vector<VarId>> scopes_;
  std::vector<ExprId> exprStack_; // checkExprUse's work list, kept to avoid reallocation
  // Rank-0 forms of rank-less layout arguments (layoutArg).
  std::unordered_map<const RegisterLayout *, std::unique_ptr<RegisterLayout>> rankedLayouts_;
  int loopDepth_ = 0;
  bool assertsAllowed_ = true;    // no statement other than an assert checked yet
  bool specializeAllowed_ = true; // no statement other than asserts and specialize checked yet

  // The instruction being checked (for diagnostics).
  SourceLoc curLoc_;
  int64_t curInstruction_ = -1;

  /// The threads of the block, or inside a thread group the group's (its layouts' count).
  uint32_t threads_ = 0;
  uint32_t blockThreads_ = 0;
  /// Per variable: the depth of the scope that declared it; and inside a thread group the depth
  /// of the group's scope (npos outside groups).
  std::vector<size_t> declScope_;
  size_t groupScope_ = std::string::npos;
  int64_t groupScratch_ = 0; // the scratch bytes of the group being checked
  int64_t sharedEnd_ = 0;
  int64_t scratchBytes_ = 0;
  bool capacityReported_ = false;
  // ViewGlobal instructions per pointer parameter, in program order.
  std::vector<std::pair<VarId, uint32_t>> views_;
};

} // namespace tilus::detail
