// The assembler's entry points. assemble() runs the pipeline text -> tokens (lexer.cpp) ->
// syntax tree (parser.cpp) -> Module (constants here, programs in lower_*.cpp). Constants are
// evaluated once, in declaration order, with -D overrides substituted for their declared
// values; programs see the constants declared before them. Syntax errors stop at the first;
// errors after parsing are collected (every program, every statement) so that one run reports
// as many as it can.
#include "assembler/assembler.h"

#include "assembler/layout_expr.h"
#include "assembler/lowering.h"
#include "assembler/parser.h"

#include <cctype>

namespace tilus {

namespace {

using namespace tasm;

/// Names of the form _t<N> anywhere in the source, so that temporaries never collide with them.
std::set<std::string> reservedTemporaryNames(const std::vector<Token> &tokens) {
  std::set<std::string> names;
  for (const Token &t : tokens)
    if (t.kind == TokenKind::Name && isTemporaryName(t.text))
      names.insert(t.text);
  return names;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

/// A -D value: one expression of literals and operators (no names).
Expected<ConstValue> defineValue(const std::string &name, const std::string &text) {
  std::string where = "-D " + name;
  auto tokens = tokenize(trim(text), where);
  if (!tokens)
    return tokens.takeStatus();
  auto ast = parseStandaloneExpr(*tokens, where);
  if (!ast)
    return ast.takeStatus();
  ExprContext ctx;
  ctx.fileName = where;
  auto e = buildScalar(**ast, ctx);
  if (!e)
    return e.takeStatus();
  return ConstValue{e->dtype, e->bits, {}};
}

class ModuleAssembler {
public:
  ModuleAssembler(const AssembleOptions &options, const std::set<std::string> &reserved)
      : options_(options), reserved_(reserved) {}

  Status run(const AstModule &ast, Module &module);

private:
  Status constDecl(const AstConst &decl);
  Status program(const AstProgram &ast, Module &module);
  Status error(ErrorCode code, SrcPos at, std::string message) const {
    return Status::error(code, std::move(message), makeLocation(options_.fileName, at));
  }

  const AssembleOptions &options_;
  const std::set<std::string> &reserved_;
  ConstTable constants_;
  std::map<std::string, SrcPos> programs_;
  std::set<std::string> usedDefines_;
};

Status ModuleAssembler::run(const AstModule &ast, Module &module) {
  Status errors;
  for (const AstItem &item : ast.items)
    errors.append(item.isConst ? constDecl(item.constDecl) : program(item.program, module));
  for (const auto &[name, value] : options_.defines) {
    if (usedDefines_.count(name))
      continue;
    Location loc;
    loc.file = options_.fileName;
    errors.append(Diagnostic{ErrorCode::UndefinedName,
                             "-D " + name + ": no constant named '" + name + "' is declared", loc});
  }
  return errors;
}

// `const A, B = e1, e2`: every value is evaluated before any name is bound (as in Python).
Status ModuleAssembler::constDecl(const AstConst &decl) {
  ExprContext ctx;
  ctx.fileName = options_.fileName;
  ctx.lookup = [this](const std::string &name) {
    NameMeaning m;
    auto it = constants_.find(name);
    if (it != constants_.end()) {
      m.kind = NameMeaning::Kind::Constant;
      m.dtype = it->second.dtype;
      m.bits = it->second.bits;
    }
    return m;
  };
  Status errors;
  std::vector<ConstValue> values;
  for (size_t k = 0; k < decl.names.size(); ++k) {
    const AstName &n = decl.names[k];
    auto define = options_.defines.find(n.name);
    if (define != options_.defines.end()) {
      usedDefines_.insert(n.name);
      auto v = defineValue(n.name, define->second);
      if (!v) {
        errors.append(v.status());
        continue;
      }
      values.push_back(ConstValue{v->dtype, v->bits, n.pos});
      continue;
    }
    auto e = buildScalar(*decl.values[k], ctx);
    if (!e) {
      errors.append(e.status());
      continue;
    }
    values.push_back(ConstValue{e->dtype, e->bits, n.pos});
  }
  if (!errors.ok())
    return errors;
  for (size_t k = 0; k < decl.names.size(); ++k) {
    const AstName &n = decl.names[k];
    auto prev = constants_.find(n.name);
    if (prev != constants_.end()) {
      errors.append(error(ErrorCode::Redefined, n.pos,
                          "constant '" + n.name + "' is already declared at line " +
                              std::to_string(prev->second.pos.line)));
      continue;
    }
    constants_.emplace(n.name, values[k]);
  }
  return errors;
}

Status ModuleAssembler::program(const AstProgram &ast, Module &module) {
  auto prev = programs_.find(ast.name.name);
  if (prev != programs_.end())
    return error(ErrorCode::Redefined, ast.name.pos,
                 "program '" + ast.name.name + "' is already declared at line " +
                     std::to_string(prev->second.line));
  programs_.emplace(ast.name.name, ast.name.pos);
  Program p;
  Status st = ProgramLowering(options_.fileName, constants_, reserved_, p).lower(ast);
  module.programs.push_back(std::move(p));
  return st;
}

} // namespace

Expected<Module> assemble(std::string_view source, const AssembleOptions &options) {
  auto tokens = tokenize(source, options.fileName);
  if (!tokens)
    return tokens.takeStatus();
  auto ast = parseModule(*tokens, options.fileName);
  if (!ast)
    return ast.takeStatus();
  std::set<std::string> reserved = reservedTemporaryNames(*tokens);
  Module module;
  Status st = ModuleAssembler(options, reserved).run(*ast, module);
  if (!st.ok())
    return st;
  if (options.keepSource) {
    module.hasDebugInfo = true;
    module.sourceName = options.fileName;
    module.sourceText = std::string(source);
  }
  return module;
}

Expected<RegisterLayout> parseRegisterLayout(std::string_view text) {
  const std::string file = "<layout>";
  auto tokens = tokenize(trim(text), file);
  if (!tokens)
    return tokens.takeStatus();
  auto ast = parseStandaloneExpr(*tokens, file);
  if (!ast)
    return ast.takeStatus();
  ExprContext ctx;
  ctx.fileName = file;
  return buildRegisterLayout(**ast, ctx);
}

} // namespace tilus
