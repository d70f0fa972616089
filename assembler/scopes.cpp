// Name resolution for one program: a stack of scopes (parameters, the body, then one per
// `for`/`if`/`elif`/`else`/`while` block) over the module's constants. The one subtle rule is
// what `x = ...` means (ISA section 4):
//
//   acc = AllocateRegister(...)     # declares acc in the body scope
//   for k in range(n):
//       acc = Add(acc, one)         # acc is visible from an enclosing scope: update it
//       t = Exp(acc)                # declares t in the loop scope
//       t = Exp(t)                  # t is declared in this scope: a new t shadows it
//   acc = Cast(acc, f16)            # same scope as the first acc: a new acc shadows it
//
// Variables are appended to Program::vars as they are declared, which gives the declaration
// order of docs/ir.md (parameters first, then the body in source order).
#include "assembler/scopes.h"

namespace tilus::tasm {

bool isTemporaryName(std::string_view name) {
  if (name.size() < 3 || name[0] != '_' || name[1] != 't')
    return false;
  for (size_t k = 2; k < name.size(); ++k)
    if (name[k] < '0' || name[k] > '9')
      return false;
  return true;
}

VarId Scopes::find(std::string_view name) const {
  std::string key(name);
  for (size_t s = scopes_.size(); s-- > 0;) {
    auto it = scopes_[s].find(key);
    if (it != scopes_[s].end())
      return it->second;
  }
  return kNoId;
}

const ConstValue *Scopes::findConstant(std::string_view name) const {
  for (auto o = overlays_.rbegin(); o != overlays_.rend(); ++o) {
    auto it = (*o)->find(name);
    if (it != (*o)->end())
      return &it->second;
  }
  return findModuleConstant(name);
}

const ConstValue *Scopes::findModuleConstant(std::string_view name) const {
  auto it = constants_.find(name);
  return it == constants_.end() ? nullptr : &it->second;
}

VarId Scopes::declare(const AstName &name, VarKind kind, DataType dtype, bool readOnly,
                      bool isParam) {
  Variable v;
  v.name = name.name;
  v.kind = kind;
  v.dtype = dtype;
  v.isParam = isParam;
  program_.vars.push_back(std::move(v));
  VarId id = VarId(program_.vars.size() - 1);
  declPos_.push_back(name.pos);
  readOnly_.push_back(readOnly ? 1 : 0);
  scopes_.back()[name.name] = id;
  return id;
}

VarId Scopes::declareTemporary(VarKind kind, DataType dtype, SrcPos pos) {
  std::string name;
  do {
    name = "_t" + std::to_string(nextTemp_++);
  } while (reserved_.count(name));
  Variable v;
  v.name = name;
  v.kind = kind;
  v.dtype = dtype;
  program_.vars.push_back(std::move(v));
  declPos_.push_back(pos);
  readOnly_.push_back(0);
  return VarId(program_.vars.size() - 1);
}

Expected<VarId> Scopes::bindTarget(const AstName &name, VarKind kind, DataType dtype) {
  Location at = makeLocation(file_, name.pos);
  if (const ConstValue *c = findConstant(name.name))
    return Status::error(ErrorCode::Redefined,
                         "cannot assign to constant '" + name.name + "' (declared at line " +
                             std::to_string(c->pos.line) + ")",
                         at);
  if (isTemporaryName(name.name))
    return declare(name, kind, dtype, false, false);
  VarId found = find(name.name);
  if (found == kNoId)
    return declare(name, kind, dtype, false, false);
  const Variable &v = program_.vars[found];
  if (readOnly_[found])
    return Status::error(ErrorCode::UpdateType,
                         std::string("cannot assign to ") +
                             (v.isParam               ? "parameter '"
                              : readOnly_[found] == 2 ? "group index '"
                              : readOnly_[found] == 3 ? "specialized variable '"
                                                      : "loop variable '") +
                             name.name + "' (" +
                             (v.isParam               ? "parameters"
                              : readOnly_[found] == 2 ? "group indices"
                              : readOnly_[found] == 3 ? "specialized variables"
                                                      : "loop variables") +
                             " are read-only)",
                         at);
  auto current = scopes_.back().find(name.name);
  if (current != scopes_.back().end() && current->second == found)
    return declare(name, kind, dtype, false, false);
  std::string declared = " declared at line " + std::to_string(declPos_[found].line);
  if (v.kind != kind)
    return Status::error(ErrorCode::UpdateType,
                         "update of '" + name.name + "' (" + varKindPhrase(v.kind) + declared +
                             ") with " + varKindPhrase(kind),
                         at);
  if (kind == VarKind::Scalar && !(v.dtype == dtype))
    return Status::error(ErrorCode::UpdateType,
                         "update of '" + name.name + "' (" + v.dtype.name() + declared +
                             ") with a value of type " + dtype.name(),
                         at);
  return found;
}

} // namespace tilus::tasm
