// Helpers shared by the loader tests (see check_test_util.h).
#include "check_test_util.h"

#include "test_helpers.h"

#include <fstream>
#include <sstream>

namespace tilus::testing {

Expected<VerifiedModule> checkSource(std::string_view source, CheckOptions options) {
  AssembleOptions ao;
  ao.fileName = kTestFile;
  Expected<Module> module = assemble(source, ao);
  if (!module)
    return module.takeStatus();
  options.fileName = kTestFile;
  return checkModule(std::move(module).value(), options);
}

std::string kernel(std::string_view params, std::string_view body, int threads) {
  return "def k<1>(" + std::string(params) + ") threads=" + std::to_string(threads) + ":\n" +
         std::string(body);
}

void expectError(std::string_view source, ErrorCode code, uint32_t line) {
  Expected<VerifiedModule> r = checkSource(source);
  INFO(source);
  REQUIRE_FALSE(r.ok());
  INFO(r.status().toString());
  CHECK(errorCodeName(r.status().code()) == std::string(errorCodeName(code)));
  if (line != 0)
    CHECK(r.status().first().location.line == line);
}

std::vector<ErrorCode> codesOf(const Status &status) {
  std::vector<ErrorCode> codes;
  for (const Diagnostic &d : status.diagnostics())
    codes.push_back(d.code);
  return codes;
}

const ProgramInfo &programInfo(const VerifiedModule &m, const std::string &program) {
  for (size_t p = 0; p < m.module.programs.size(); ++p)
    if (m.module.programs[p].name == program)
      return m.programs[p];
  FAIL("no program " << program);
  return m.programs.front();
}

const VarType &varType(const VerifiedModule &m, const std::string &program,
                       const std::string &name) {
  for (size_t p = 0; p < m.module.programs.size(); ++p) {
    if (m.module.programs[p].name != program)
      continue;
    const std::vector<Variable> &vars = m.module.programs[p].vars;
    for (size_t v = vars.size(); v-- > 0;)
      if (vars[v].name == name)
        return m.programs[p].vars[v];
  }
  FAIL("no variable " << name << " in " << program);
  return m.programs.front().vars.front();
}

RegisterLayout layoutOf(std::string_view text) {
  Expected<RegisterLayout> l = parseRegisterLayout(text);
  REQUIRE_OK(l);
  return *l;
}

std::string readText(const std::string &path) {
  std::ifstream in(path);
  REQUIRE_MESSAGE(in.good(), "cannot open " << path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

} // namespace tilus::testing
