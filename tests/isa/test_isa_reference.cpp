// docs/isa.md, the user-facing instruction reference, against the instruction table
// (isa/instructions.def, read through isa/instruction.h exactly as every stage reads it): every
// instruction has a row in section 5 whose first cell is its call and names each of its
// arguments, and no row names an instruction that does not exist. A failure says what to add.
#include "isa/instruction.h"

#include "test_helpers.h"

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

using namespace tilus;

namespace {

const char *kindName(ArgKind kind) {
  switch (kind) {
  case ArgKind::Value:
    return "Value";
  case ArgKind::Expr:
    return "Expr";
  case ArgKind::Int:
    return "Int";
  case ArgKind::Bool:
    return "Bool";
  case ArgKind::DType:
    return "DType";
  case ArgKind::RegLayout:
    return "RegLayout";
  case ArgKind::SharedLayout:
    return "SharedLayout";
  case ArgKind::IntList:
    return "IntList";
  case ArgKind::ExprList:
    return "ExprList";
  case ArgKind::Offset:
    return "Offset";
  case ArgKind::ReduceOp:
    return "ReduceOp";
  case ArgKind::String:
    return "String";
  case ArgKind::MemoryScope:
    return "MemoryScope";
  case ArgKind::Eviction:
    return "Eviction";
  }
  return "?";
}

/// A call to suggest for a row that is missing: required arguments positional (layouts and
/// lists by name), optional ones in brackets by name.
std::string suggestedCall(const InstructionSpec &spec) {
  std::string call = std::string(spec.name) + "(";
  bool first = true;
  for (const ArgSpec &a : spec.args) {
    bool byName = a.kind == ArgKind::RegLayout || a.kind == ArgKind::SharedLayout ||
                  a.kind == ArgKind::IntList || a.kind == ArgKind::ExprList ||
                  a.kind == ArgKind::Offset || a.kind == ArgKind::ReduceOp;
    std::string text = std::string(a.name) + (byName || !a.required ? "=.." : "");
    if (a.required)
      call += (first ? "" : ", ") + text;
    else
      call += std::string("[") + (first ? "" : ", ") + text + "]";
    first = false;
  }
  return call + ")";
}

std::string argumentList(const InstructionSpec &spec) {
  std::string text;
  for (const ArgSpec &a : spec.args)
    text += std::string(text.empty() ? "" : ", ") + a.name + " (" + kindName(a.kind) + ", " +
            (a.required ? "required" : "optional") + ")";
  return text.empty() ? "none" : text;
}

/// Section 5 of docs/isa.md: the instruction name of each table row whose first cell is a
/// call, with that cell's text. A name may have several rows only by mistake.
std::multimap<std::string, std::string> documentedRows(const std::string &doc) {
  std::multimap<std::string, std::string> rows;
  size_t start = doc.find("\n## 5. Instructions");
  REQUIRE_MESSAGE(start != std::string::npos, "docs/isa.md has no '## 5. Instructions' section");
  size_t end = doc.find("\n## ", start + 1);
  std::istringstream lines(doc.substr(start, end == std::string::npos ? end : end - start));
  // | `[results =] Name(...` ...
  static const std::regex row(R"(^\|\s*`(?:[\w\[\], ]+=\s*)?([A-Z]\w*)\(([^|]|\\\|)*?`\s*\|)");
  std::string line;
  while (std::getline(lines, line)) {
    std::smatch m;
    if (std::regex_search(line, m, row)) {
      std::string cell = line.substr(0, line.find("` |") + 1);
      rows.emplace(m[1].str(), cell);
    }
  }
  return rows;
}

} // namespace

TEST_CASE("docs/isa.md documents every instruction of isa/instructions.def") {
  std::ifstream in(std::string(TILUSVM_SOURCE_DIR) + "/docs/isa.md");
  REQUIRE_MESSAGE(in.good(), "cannot read docs/isa.md");
  std::string doc{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  std::multimap<std::string, std::string> rows = documentedRows(doc);
  REQUIRE(numOpcodes() > 0);
  std::set<std::string> names;
  for (size_t op = 0; op < numOpcodes(); ++op) {
    const InstructionSpec &spec = instructionSpec(Opcode(op));
    std::string name = spec.name;
    names.insert(name);
    auto [first, last] = rows.equal_range(name);
    if (first == last) {
      FAIL_CHECK("docs/isa.md: instruction " << name << " (opcode " << op
                                             << " of isa/instructions.def) has no row in section "
                                                "5. Add one to the table of its family:\n  | `"
                                             << suggestedCall(spec) << "` | what it does |\n"
                                             << "  its arguments: " << argumentList(spec));
      continue;
    }
    CHECK_MESSAGE(std::next(first) == last,
                  "docs/isa.md: instruction " << name << " has more than one row in section 5");
    const std::string &cell = first->second;
    for (const ArgSpec &a : spec.args) {
      std::regex word("\\b" + std::string(a.name) + "\\b");
      std::string argument = std::string(a.name) + " (" + kindName(a.kind) + ", " +
                             (a.required ? "required" : "optional") + ")";
      CHECK_MESSAGE(std::regex_search(cell.substr(cell.find('(')), word),
                    "docs/isa.md: the row of " << name << " does not name its argument " << argument
                                               << "; write the call as `" << suggestedCall(spec)
                                               << "`. Row: " << cell);
    }
  }
  for (const auto &[name, cell] : rows)
    CHECK_MESSAGE(names.count(name) == 1, "docs/isa.md: section 5 documents "
                                              << name << ", which isa/instructions.def does not "
                                              << "have; remove or rename the row: " << cell);
}
