#include "isa/program.h"

namespace tilus {

const Program *Module::findProgram(std::string_view name) const {
  for (const Program &p : programs)
    if (p.name == name)
      return &p;
  return nullptr;
}

} // namespace tilus
