// Errors as values. Anything that input can cause (a bad program, corrupt bytecode, a missing
// driver) is reported through Status or Expected<T>; assert() is for our own bugs only.
//
// A Diagnostic carries one of the ISA section 6 codes (or a tool-level code) and a location:
// either FILE:LINE:COL for assembly text or `<bytecode>:program:instruction` for bytecode
// without debug info. Messages follow LLVM style: lowercase, no final period, concrete numbers.
#pragma once

#include <cassert>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace tilus {

#define TILUSVM_ERROR_CODES(X)                                                                     \
  X(Syntax, "syntax")                                                                              \
  X(UndefinedName, "undefined-name")                                                               \
  X(Redefined, "redefined")                                                                        \
  X(UnknownInstruction, "unknown-instruction")                                                     \
  X(BadArgument, "bad-argument")                                                                   \
  X(DtypeMismatch, "dtype-mismatch")                                                               \
  X(ShapeMismatch, "shape-mismatch")                                                               \
  X(Scope, "scope")                                                                                \
  X(LayoutInvalid, "layout-invalid")                                                               \
  X(LayoutShape, "layout-shape")                                                                   \
  X(LayoutThreads, "layout-threads")                                                               \
  X(LayoutMismatch, "layout-mismatch")                                                             \
  X(ViewBits, "view-bits")                                                                         \
  X(ViewReplicated, "view-replicated")                                                             \
  X(DotShape, "dot-shape")                                                                         \
  X(DotDtype, "dot-dtype")                                                                         \
  X(DotLayout, "dot-layout")                                                                       \
  X(OffsetRank, "offset-rank")                                                                     \
  X(OutOfBounds, "out-of-bounds")                                                                  \
  X(SharedCapacity, "shared-capacity")                                                             \
  X(ReduceDim, "reduce-dim")                                                                       \
  X(SubbyteArith, "subbyte-arith")                                                                 \
  X(BreakOutsideLoop, "break-outside-loop")                                                        \
  X(UpdateType, "update-type")                                                                     \
  X(GridExpr, "grid-expr")                                                                         \
  X(Threads, "threads")                                                                            \
  X(Assert, "assert")                                                                              \
  X(AssertExpr, "assert-expr")                                                                     \
  X(SpecializeExpr, "specialize-expr")                                                             \
  X(DivisionByZero, "division-by-zero")                                                            \
  X(AtomicDtype, "atomic-dtype")                                                                   \
  /* Codes outside ISA section 6: tools, bytecode, runtime. */                                     \
  X(Bytecode, "bytecode")                                                                          \
  X(Io, "io")                                                                                      \
  X(Usage, "usage")                                                                                \
  X(Runtime, "runtime")                                                                            \
  X(Race, "race")                                                                                  \
  X(Cuda, "cuda")                                                                                  \
  X(Jit, "jit")                                                                                    \
  X(Unsupported, "unsupported")                                                                    \
  /* The assembler's layout inference (docs/layout-inference.md). */                               \
  X(LayoutInfer, "layout-infer")                                                                   \
  /* Hopper instructions (docs/isa.md), appended so that existing codes keep their values. */      \
  X(Mbarrier, "mbarrier")                                                                          \
  X(WgmmaShape, "wgmma-shape")                                                                     \
  X(WgmmaDtype, "wgmma-dtype")                                                                     \
  X(WgmmaLayout, "wgmma-layout")                                                                   \
  /* The tensor memory accelerator (docs/isa.md, "Tensor-memory-accelerator loads"). */            \
  X(Tma, "tma")                                                                                    \
  /* Thread groups (docs/isa.md, "Thread groups: warp specialisation"). */                         \
  X(ThreadGroup, "thread-group")                                                                   \
  /* Thread-block clusters (docs/isa.md, "Thread-block clusters and TMA multicast"). */            \
  X(Cluster, "cluster")                                                                            \
  /* Macros of the assembly language (docs/isa.md, "Macros"). */                                   \
  X(Macro, "macro")

enum class ErrorCode : uint8_t {
#define TILUSVM_X(name, text) name,
  TILUSVM_ERROR_CODES(TILUSVM_X)
#undef TILUSVM_X
};

/// The spelling used in diagnostics and `# expect:` lines, e.g. "layout-mismatch".
const char *errorCodeName(ErrorCode code);
/// Inverse of errorCodeName; nullopt for an unknown spelling.
std::optional<ErrorCode> errorCodeFromName(const std::string &name);

/// Where something is: a position in source text, or an instruction of a program in bytecode.
struct Location {
  std::string file;         // source file name; empty for bytecode without debug info
  uint32_t line = 0;        // 1-based; 0 = unknown
  uint32_t column = 0;      // 1-based; 0 = unknown
  std::string program;      // program name (bytecode locations)
  int64_t instruction = -1; // instruction index within the program (bytecode locations)
  std::string opcode;       // that instruction's name, shown after its index; may be empty

  bool known() const { return line != 0 || instruction >= 0 || !file.empty(); }
  /// "FILE:LINE:COL", or "<bytecode>:PROGRAM:INDEX (OPCODE)", or "FILE" or "<unknown>".
  std::string toString() const;
};

struct Diagnostic {
  ErrorCode code = ErrorCode::Syntax;
  std::string message;
  Location location;

  /// "FILE:LINE:COL: error[CODE]: message".
  std::string toString() const;
};

/// Success, or one or more diagnostics.
class [[nodiscard]] Status {
public:
  Status() = default;
  Status(Diagnostic d) { diagnostics_.push_back(std::move(d)); }
  static Status success() { return Status(); }
  static Status error(ErrorCode code, std::string message, Location loc = {}) {
    return Status(Diagnostic{code, std::move(message), std::move(loc)});
  }

  bool ok() const { return diagnostics_.empty(); }
  const std::vector<Diagnostic> &diagnostics() const { return diagnostics_; }
  /// The first diagnostic; precondition: !ok().
  const Diagnostic &first() const { return diagnostics_.front(); }
  ErrorCode code() const { return first().code; }
  void append(const Status &other) {
    diagnostics_.insert(diagnostics_.end(), other.diagnostics_.begin(), other.diagnostics_.end());
  }
  void append(Diagnostic d) { diagnostics_.push_back(std::move(d)); }
  /// All diagnostics, one per line.
  std::string toString() const;

private:
  std::vector<Diagnostic> diagnostics_;
};

/// A value or a failed Status.
template <typename T> class [[nodiscard]] Expected {
public:
  Expected(T value) : value_(std::move(value)) {}
  Expected(Status status) : status_(std::move(status)) { assert(!status_.ok()); }
  Expected(Diagnostic d) : status_(std::move(d)) {}

  bool ok() const { return value_.has_value(); }
  explicit operator bool() const { return ok(); }
  T &value() & {
    assert(ok());
    return *value_;
  }
  const T &value() const & {
    assert(ok());
    return *value_;
  }
  T &&value() && {
    assert(ok());
    return std::move(*value_);
  }
  T *operator->() { return &value(); }
  const T *operator->() const { return &value(); }
  T &operator*() { return value(); }
  const T &operator*() const { return value(); }
  const Status &status() const { return status_; }
  Status takeStatus() { return std::move(status_); }

private:
  std::optional<T> value_;
  Status status_;
};

} // namespace tilus

/// Propagate a failed Status: TILUSVM_TRY(doSomething());
#define TILUSVM_TRY(expr)                                                                          \
  do {                                                                                             \
    ::tilus::Status tilusvm_status_ = (expr);                                                      \
    if (!tilusvm_status_.ok())                                                                     \
      return tilusvm_status_;                                                                      \
  } while (0)
