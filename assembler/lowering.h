// Lowering of one parsed program to the Program IR (docs/ir.md). Internal to the assembler.
// Statements and the program header live in lower_program.cpp, instruction calls and their
// arguments (by the instruction table) in lower_call.cpp.
#pragma once

#include "assembler/layout_infer.h"
#include "assembler/scalar_expr.h"
#include "assembler/scopes.h"

namespace tilus::tasm {

/// The macros defined before a program (docs/isa.md, "Macros"), by name.
using MacroTable = std::map<std::string, const AstMacro *, std::less<>>;

class ProgramLowering {
public:
  ProgramLowering(const std::string &fileName, const ConstTable &constants,
                  const MacroTable &macros, const std::set<std::string> &reservedNames,
                  Program &out)
      : file_(fileName), program_(out), scopes_(out, constants, file_, reservedNames),
        macros_(macros) {}

  /// Lower the whole program; the Status holds every error found (statements with errors are
  /// skipped, their targets declared so that later uses do not cascade).
  Status lower(const AstProgram &ast);

  /// Layout inference (layout_infer.h): the first lowering records its holes into `record`;
  /// the second applies `decisions`.
  void recordHoles(InferInput *record) { record_ = record; }
  void applyDecisions(const LayoutDecisions *decisions) { decisions_ = decisions; }

private:
  // lower_program.cpp
  Status header(const AstProgram &ast);
  Status statement(const AstStmt &s, std::vector<Stmt> &out);
  Status assignment(const AstStmt &s, std::vector<Stmt> &out);
  Status forLoop(const AstStmt &s, std::vector<Stmt> &out);
  Status forLoopWith(const AstStmt &s, const AstExpr *unroll, std::vector<Stmt> &out);
  Status conditional(const AstStmt &s, std::vector<Stmt> &out);
  Status parallel(const AstStmt &s, std::vector<Stmt> &out);
  /// Declare a read-only integer scalar in the innermost scope (a loop variable, a group's copy
  /// index, `what` in the message); `redefined` when the name is a constant.
  Expected<VarId> declareIndex(const AstName &name, const char *what, DataType dtype);
  Status assertion(const AstStmt &s, std::vector<Stmt> &out);
  Status specialization(const AstStmt &s, std::vector<Stmt> &out);
  Expected<ExprId> condition(const AstExpr &cond, const char *what);
  /// After an error, declare the targets that do not exist yet, so that later statements using
  /// them do not report a cascade of undefined names.
  void declareAfterFailure(const std::vector<AstName> &targets, VarKind kind);

  // lower_macro.cpp
  /// The macro a call statement names, or nullptr.
  const AstMacro *findMacro(const std::string &name) const;
  /// Expand the macro call statement `s` in place: its body's statements go to `out`.
  Status expandMacro(const AstStmt &s, const AstMacro &macro, std::vector<Stmt> &out);

  // lower_call.cpp
  /// Lower an instruction call. `targets` are the assignment targets (may be empty); for a
  /// nested call `nestedResult` receives the variable holding its value.
  Status instruction(const AstExpr &call, const std::vector<AstName> &targets, SrcPos stmtPos,
                     std::vector<Stmt> &out, VarId *nestedResult);
  Status matchArguments(const InstructionSpec &spec, const AstExpr &call,
                        std::vector<const AstArg *> &slots, const AstArg *&outArg,
                        const AstArg *&tileShape) const;
  /// The layout argument of an inferable instruction: a decision, a hole, or an error.
  Status layoutHole(const InstructionSpec &spec, const AstExpr &call, const CallSite &site,
                    const std::vector<const AstArg *> &slots, const AstArg *tileShape,
                    Instruction &inst, std::vector<int64_t> &holeShape, bool &hole);
  /// ConvertLayout(operand, layout=L) into a temporary, for a conversion decision.
  Expected<VarId> conversion(const AstExpr &operand, VarId nested, const RegisterLayout &layout,
                             std::vector<Stmt> &out);
  /// Append an instruction and its statement (and, in the first lowering, its entry in the
  /// record for inference: every instruction goes through here).
  void push(Instruction inst, const CallSite &site, SrcPos stmtPos, std::vector<Stmt> &out,
            std::vector<int64_t> holeShape, bool hole);
  Expected<Argument> argument(const InstructionSpec &spec, size_t index, const AstExpr &value,
                              VarId nested);
  Expected<Argument> exprArgument(const std::string &what, const AstExpr &value);
  Expected<Argument> boolArgument(const std::string &what, const AstExpr &value);
  Expected<Argument> valueArgument(const AstExpr &value, VarId nested);
  Expected<Argument> listArgument(const InstructionSpec &spec, size_t index, const AstExpr &value);
  Status results(const InstructionSpec &spec, const AstExpr &call, const AstArg *outArg,
                 const std::vector<AstName> &targets, VarId *nestedResult, Instruction &inst);

  // shared
  ExprContext exprContext(bool inGrid = false) const;
  /// The type a parameter's or an annotation's type name denotes (a data type name or a type
  /// constant).
  Expected<DataType> typeName(const AstName &name) const;
  Status error(ErrorCode code, SrcPos at, std::string message) const {
    return Status::error(code, std::move(message), makeLocation(file_, at));
  }
  static SourceLoc loc(SrcPos p) { return SourceLoc{p.line, p.column}; }
  /// Whether `ast` is a call of an instruction (as opposed to a builtin or a cast).
  static bool isInstructionCall(const AstExpr &ast);

  std::string file_;
  Program &program_;
  Scopes scopes_;
  const MacroTable &macros_;
  std::vector<const AstMacro *> expanding_; // the macro expansions being lowered, outermost first
  int loopDepth_ = 0;
  std::map<const AstExpr *, uint32_t> lowered_; // per call: how often instruction() lowered it
  InferInput *record_ = nullptr;
  const LayoutDecisions *decisions_ = nullptr;
};

} // namespace tilus::tasm
