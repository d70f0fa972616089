// Names and scopes of one program (ISA section 4 "Names and scopes"). Internal to the
// assembler.
#pragma once

#include "assembler/ast.h"
#include "isa/program.h"

#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace tilus::tasm {

/// A module-level constant: its value as a bit pattern of its dtype, or (isType) a data type.
struct ConstValue {
  DataType dtype; // the value's type; for a type constant, the type it names
  uint64_t bits = 0;
  SrcPos pos;
  bool isType = false;
};
using ConstTable = std::map<std::string, ConstValue, std::less<>>;

class Scopes {
public:
  /// `reserved`: names of the form _t<N> that the source spells anywhere, which temporaries
  /// must avoid.
  Scopes(Program &program, const ConstTable &constants, const std::string &fileName,
         const std::set<std::string> &reserved)
      : program_(program), constants_(constants), file_(fileName), reserved_(reserved) {}

  void push() { scopes_.emplace_back(); }
  void pop() { scopes_.pop_back(); }

  /// The variable a name denotes here (innermost declaration wins), or kNoId.
  VarId find(std::string_view name) const;
  /// The constant a name denotes here: a parameter of a macro being expanded (innermost
  /// expansion first), else a module constant; nullptr for neither.
  const ConstValue *findConstant(std::string_view name) const;
  /// Whether `name` is a module constant (not a macro parameter).
  const ConstValue *findModuleConstant(std::string_view name) const;

  /// Bind a macro expansion's parameters (docs/isa.md, "Macros") as constants until the
  /// matching popConstants; `c` must outlive that.
  void pushConstants(const ConstTable &c) { overlays_.push_back(&c); }
  void popConstants() { overlays_.pop_back(); }

  /// Declare a variable in the innermost scope. Read-only variables (parameters, loop
  /// variables) cannot be assigned.
  VarId declare(const AstName &name, VarKind kind, DataType dtype, bool readOnly, bool isParam);
  /// Mark a read-only variable as a thread group's copy index (for the message of an assignment).
  void markGroupIndex(VarId v) { readOnly_[v] = 2; }
  void markSpecialized(VarId v) { readOnly_[v] = 3; }
  /// Declare an unnamed temporary (a nested instruction call's result) as `_t<N>`: N counts per
  /// program and skips names the source uses. Temporaries are not visible by name.
  VarId declareTemporary(VarKind kind, DataType dtype, SrcPos pos);

  /// Bind an assignment target: declares `name` in the innermost scope, unless a variable of
  /// that name is visible from an enclosing scope, which is then updated (kind, and for
  /// scalars the dtype, must match: update-type). A name declared in the innermost scope is
  /// shadowed by a new variable; names `_t<N>` always declare. Assigning a constant is
  /// `redefined`; assigning a parameter or a loop variable (read-only) is `update-type`.
  Expected<VarId> bindTarget(const AstName &name, VarKind kind, DataType dtype);

  SrcPos declaredAt(VarId id) const { return declPos_[id]; }

private:
  Program &program_;
  const ConstTable &constants_;
  const std::string &file_;
  const std::set<std::string> &reserved_;
  std::vector<std::unordered_map<std::string, VarId>> scopes_;
  std::vector<const ConstTable *> overlays_; // macro parameters, innermost expansion last
  std::vector<SrcPos> declPos_;              // by VarId
  std::vector<uint8_t> readOnly_;            // by VarId: 1 a parameter or loop variable, 2 a group
                                             // index, 3 a specialized variable
  uint32_t nextTemp_ = 0;
};

/// Whether `name` has the form of a temporary, `_t` followed by decimal digits.
bool isTemporaryName(std::string_view name);

} // namespace tilus::tasm
