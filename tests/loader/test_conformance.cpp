// The conformance suite: every tests/conformance/*.tasm declares its expected outcome with
// `# expect: ok` or one `# expect: CODE` line per expected diagnostic code (ISA section 6),
// optionally located: `# expect: CODE at LINE`. Each file is assembled and checked; assembler and
// checker diagnostics count alike. The file passes when the set of codes reported equals the set
// expected (an `ok` file must give none) and, for each located expectation, a diagnostic of that
// code names that line of the file.
#include "check_test_util.h"
#include "test_helpers.h"

#include <algorithm>
#include <filesystem>
#include <set>
#include <sstream>

using namespace tilus;
using namespace tilus::testing;

namespace {

struct Expectation {
  bool ok = false;
  std::set<std::string> codes;
  std::set<std::pair<std::string, uint32_t>> located; // (code, line)
};

Expectation parseExpectations(const std::string &text) {
  Expectation e;
  std::istringstream in(text);
  std::string line;
  const std::string tag = "# expect:";
  while (std::getline(in, line)) {
    size_t at = line.find(tag);
    if (at == std::string::npos)
      continue;
    std::string code = line.substr(at + tag.size());
    code.erase(0, code.find_first_not_of(" \t"));
    code.erase(code.find_last_not_of(" \t\r") + 1);
    size_t atLine = code.find(" at ");
    if (atLine != std::string::npos) {
      e.located.insert({code.substr(0, atLine), uint32_t(std::stoul(code.substr(atLine + 4)))});
      code = code.substr(0, atLine);
    }
    if (code == "ok")
      e.ok = true;
    else
      e.codes.insert(code);
  }
  return e;
}

std::set<std::string> reportedCodes(const std::string &file, const std::string &text,
                                    std::string &diagnostics,
                                    std::set<std::pair<std::string, uint32_t>> &located) {
  AssembleOptions ao;
  ao.fileName = file;
  Expected<Module> module = assemble(text, ao);
  Status status;
  if (!module) {
    status = module.takeStatus();
  } else {
    CheckOptions co;
    co.fileName = file;
    Expected<VerifiedModule> checked = checkModule(std::move(module).value(), co);
    if (!checked)
      status = checked.takeStatus();
  }
  diagnostics = status.toString();
  std::set<std::string> codes;
  for (const Diagnostic &d : status.diagnostics()) {
    codes.insert(errorCodeName(d.code));
    if (d.location.file == file)
      located.insert({errorCodeName(d.code), d.location.line});
  }
  return codes;
}

} // namespace

TEST_CASE("conformance suite") {
  namespace fs = std::filesystem;
  std::vector<fs::path> files;
  for (const fs::directory_entry &e : fs::directory_iterator(TILUSVM_CONFORMANCE_DIR))
    if (e.path().extension() == ".tasm")
      files.push_back(e.path());
  std::sort(files.begin(), files.end());
  REQUIRE(files.size() > 60);
  std::map<std::string, int> failingPerCode;
  int passing = 0;
  for (const fs::path &path : files) {
    std::string name = path.filename().string();
    CAPTURE(name);
    std::string text = readText(path.string());
    Expectation want = parseExpectations(text);
    REQUIRE_MESSAGE(want.ok != !want.codes.empty(), "needs `# expect: ok` or expected codes");
    std::string diagnostics;
    std::set<std::pair<std::string, uint32_t>> located;
    std::set<std::string> got = reportedCodes(name, text, diagnostics, located);
    INFO(diagnostics);
    CHECK(got == want.codes);
    for (const auto &[code, line] : want.located) {
      CAPTURE(code);
      CAPTURE(line);
      CHECK(located.count({code, line}) == 1);
    }
    for (const std::string &c : want.codes)
      ++failingPerCode[c];
    passing += want.ok ? 1 : 0;
  }
  // At least two failing programs for every code of ISA section 6.
  for (int c = int(ErrorCode::Syntax); c <= int(ErrorCode::DivisionByZero); ++c) {
    std::string code = errorCodeName(ErrorCode(c));
    CAPTURE(code);
    CHECK(failingPerCode[code] >= 2);
  }
  // and for the codes of the Hopper instructions (docs/isa.md)
  for (ErrorCode c :
       {ErrorCode::Mbarrier, ErrorCode::WgmmaShape, ErrorCode::WgmmaDtype, ErrorCode::WgmmaLayout,
        ErrorCode::Tma, ErrorCode::ThreadGroup, ErrorCode::Cluster, ErrorCode::Macro}) {
    std::string code = errorCodeName(c);
    CAPTURE(code);
    CHECK(failingPerCode[code] >= 2);
  }
  CHECK(passing >= 8);
}

TEST_CASE("conformance suite: passing programs use every instruction") {
  namespace fs = std::filesystem;
  std::set<Opcode> used;
  for (const fs::directory_entry &e : fs::directory_iterator(TILUSVM_CONFORMANCE_DIR)) {
    if (e.path().extension() != ".tasm")
      continue;
    std::string text = readText(e.path().string());
    if (!parseExpectations(text).ok)
      continue;
    AssembleOptions ao;
    Expected<Module> m = assemble(text, ao);
    if (!m)
      continue; // reported by the suite above
    for (const Program &p : m->programs)
      for (const Instruction &inst : p.instructions)
        used.insert(inst.opcode);
  }
  for (size_t op = 0; op < numOpcodes(); ++op) {
    CAPTURE(instructionSpec(Opcode(op)).name);
    CHECK(used.count(Opcode(op)) == 1);
  }
}
