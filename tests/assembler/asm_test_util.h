// Helpers shared by the assembler tests: assembling snippets, finding variables and
// instructions, and reading the shared example programs.
#pragma once

#include "assembler/assembler.h"
#include "isa/bytecode.h"
#include "test_helpers.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#ifndef TILUSVM_SOURCE_DIR
#error "TILUSVM_SOURCE_DIR must point at the repository root"
#endif

namespace tilus::testing {

inline std::string readSourceFile(const std::string &relative) {
  std::ifstream in(std::string(TILUSVM_SOURCE_DIR) + "/" + relative);
  REQUIRE_MESSAGE(in.good(), "cannot open " << relative);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

/// The example programs of programs/ (relative paths).
/// Every .tasm file under programs/ (recursively), relative to the source root, sorted.
inline std::vector<std::string> examplePrograms() {
  namespace fs = std::filesystem;
  fs::path root(TILUSVM_SOURCE_DIR);
  std::vector<std::string> paths;
  for (const auto &entry : fs::recursive_directory_iterator(root / "programs"))
    if (entry.path().extension() == ".tasm")
      paths.push_back(fs::relative(entry.path(), root).string());
  std::sort(paths.begin(), paths.end());
  return paths;
}

inline Expected<Module> asmText(const std::string &text,
                                std::map<std::string, std::string> defines = {}) {
  AssembleOptions o;
  o.fileName = "t.tasm";
  o.defines = std::move(defines);
  return assemble(text, o);
}

/// Assemble text that must succeed; returns its only (or first) program.
inline Program asmProgram(const std::string &text) {
  auto m = asmText(text);
  REQUIRE_OK(m);
  REQUIRE(!m->programs.empty());
  return m->programs[0];
}

/// Ids of the variables called `name`, in declaration order.
inline std::vector<VarId> varsNamed(const Program &p, const std::string &name) {
  std::vector<VarId> ids;
  for (VarId v = 0; v < p.vars.size(); ++v)
    if (p.vars[v].name == name)
      ids.push_back(v);
  return ids;
}

inline VarId varNamed(const Program &p, const std::string &name) {
  auto ids = varsNamed(p, name);
  REQUIRE_MESSAGE(ids.size() == 1, "expected one variable '" << name << "', found " << ids.size());
  return ids[0];
}

/// "line:column" of the first diagnostic, and its code spelled as in ISA section 6.
inline std::string firstWhere(const Status &s) {
  REQUIRE(!s.ok());
  const Location &l = s.first().location;
  return l.file + ":" + std::to_string(l.line) + ":" + std::to_string(l.column);
}

/// Assemble `text`, print it, re-assemble the print, and compare bytecode (and print again: the
/// printer must be a fixed point after one round); the print.
inline std::string checkRoundTrip(const std::string &text,
                                  std::map<std::string, std::string> defines = {}) {
  auto first = asmText(text, defines);
  REQUIRE_OK(first);
  std::string printed = disassemble(*first);
  INFO("disassembly:\n" << printed);
  auto second = asmText(printed);
  REQUIRE_OK(second);
  CHECK(encodeModule(*first) == encodeModule(*second));
  CHECK(disassemble(*second) == printed);
  return printed;
}

} // namespace tilus::testing
