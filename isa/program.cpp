#include "isa/program.h"

namespace tilus {

const Program *Module::findProgram(std::string_view name) const {
  for (const Program &p : programs)
    if (p.name == name)
      return &p;
  return nullptr;
}

std::vector<const Stmt *> Program::preconditions() const {
  std::vector<const Stmt *> out;
  for (const Stmt &s : body) {
    if (s.kind != StmtKind::Assert)
      break;
    out.push_back(&s);
  }
  return out;
}

std::vector<const Stmt *> Program::specializations() const {
  std::vector<const Stmt *> out;
  for (const Stmt &s : body) {
    if (s.kind == StmtKind::Assert)
      continue;
    if (s.kind != StmtKind::Specialize)
      break;
    out.push_back(&s);
  }
  return out;
}

namespace {

bool anyRegs(const std::vector<Stmt> &body) {
  for (const Stmt &s : body)
    if ((s.kind == StmtKind::Group && s.regs != 0) || anyRegs(s.body) || anyRegs(s.orelse))
      return true;
  return false;
}

} // namespace

bool Program::reallocatesRegisters() const { return anyRegs(body); }

} // namespace tilus
