// The assembler's entry points. assemble() runs the pipeline text -> tokens (lexer.cpp) ->
// syntax tree (parser.cpp) -> Module (constants here, programs in lower_*.cpp). Constants are
// evaluated once, in declaration order, with -D overrides substituted for their declared
// values (a constant whose value is a type expression, `const WT = u4`, is a type constant and
// its override must be a data type); programs see the constants declared before them. Syntax errors
// stop at the first; errors after parsing are collected (every program, every statement) so that
// one run reports as many as it can.
#include "assembler/assembler.h"

#include "assembler/layout_expr.h"
#include "assembler/lowering.h"
#include "assembler/parser.h"

#include <cctype>
#include <optional>

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

/// A module's syntax tree and the temporary names its source reserves.
struct ParsedSource {
  AstModule ast;
  std::set<std::string> reserved;
};

Expected<ParsedSource> parseSource(std::string_view source, const std::string &fileName) {
  auto tokens = tokenize(source, fileName);
  if (!tokens)
    return tokens.takeStatus();
  auto ast = parseModule(*tokens, fileName);
  if (!ast)
    return ast.takeStatus();
  return ParsedSource{std::move(*ast), reservedTemporaryNames(*tokens)};
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

/// A -D value: one expression of literals and operators (no names), or a data type when the
/// constant it overrides is declared as a type (`declaredType`; the declaration is at `decl`).
Expected<ConstValue> defineValue(const std::string &name, const std::string &text,
                                 bool declaredType, SrcPos decl) {
  std::string where = "-D " + name;
  auto ast = parseStandaloneText(trim(text), where);
  if (!ast)
    return ast.takeStatus();
  ExprContext ctx;
  ctx.fileName = where;
  // Strings built piecewise: "..." + std::string&& trips a false -Wrestrict warning of GCC 12
  // (GCC bug 105329).
  std::string declared = " at line ";
  declared += std::to_string(decl.line);
  if (declaredType) {
    std::string quoted = "'";
    quoted += trim(text);
    auto t = buildType(**ast, ctx, ErrorCode::Syntax,
                       quoted + "' is not a data type ('" + name + "' is declared as a data type" +
                           declared + ")");
    if (!t)
      return t.takeStatus();
    return ConstValue{*t, 0, {}, true};
  }
  if (isTypeExpr(**ast, ctx))
    return Status::error(ErrorCode::DtypeMismatch,
                         "'" + name + "' is declared as a number" + declared +
                             ", not as a data type",
                         makeLocation(where, (*ast)->pos));
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
  /// Keep every program's first lowering (with its written layouts and holes) and do not infer.
  void capture(std::vector<std::pair<Program, InferInput>> *out) { captured_ = out; }

private:
  Status constDecl(const AstConst &decl);
  Status macroDecl(const AstMacro &macro);
  Status moduleAssert(const AstStmt &s);
  ExprContext constContext() const;
  Status program(const AstProgram &ast, Module &module);
  Status error(ErrorCode code, SrcPos at, std::string message) const {
    return Status::error(code, std::move(message), makeLocation(options_.fileName, at));
  }

  const AssembleOptions &options_;
  const std::set<std::string> &reserved_;
  ConstTable constants_;
  MacroTable macros_; // the macros defined so far
  std::map<std::string, SrcPos> programs_;
  std::set<std::string> usedDefines_;
  std::vector<std::pair<Program, InferInput>> *captured_ = nullptr;
};

Status ModuleAssembler::run(const AstModule &ast, Module &module) {
  Status errors;
  for (const AstItem &item : ast.items)
    errors.append(item.isConst    ? constDecl(item.constDecl)
                  : item.isAssert ? moduleAssert(item.assertion)
                  : item.isMacro  ? macroDecl(item.macro)
                                  : program(item.program, module));
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

/// An expression context in which only the constants declared so far have a meaning.
ExprContext ModuleAssembler::constContext() const {
  ExprContext ctx;
  ctx.fileName = options_.fileName;
  ctx.lookup = [this](const std::string &name) {
    NameMeaning m;
    auto it = constants_.find(name);
    if (it != constants_.end()) {
      m.kind = it->second.isType ? NameMeaning::Kind::Type : NameMeaning::Kind::Constant;
      m.dtype = it->second.dtype;
      m.bits = it->second.bits;
    }
    return m;
  };
  return ctx;
}

// A module-level `assert COND, "message"` over the constants declared before it (docs/isa.md,
// "Preconditions"): checked here; it leaves nothing in the module.
Status ModuleAssembler::moduleAssert(const AstStmt &s) {
  auto e = buildAssertCondition(*s.value, constContext());
  if (!e)
    return e.takeStatus();
  if (e->bits != 0) // folded: every name is a constant
    return Status::success();
  return error(ErrorCode::Assert, s.pos,
               "assertion failed" + (s.message.empty() ? std::string() : ": " + s.message));
}

// `const A, B = e1, e2`: every value is evaluated before any name is bound (as in Python).
Status ModuleAssembler::constDecl(const AstConst &decl) {
  ExprContext ctx = constContext();
  Status errors;
  std::vector<std::optional<ConstValue>> values(decl.names.size());
  for (size_t k = 0; k < decl.names.size(); ++k) {
    const AstName &n = decl.names[k];
    bool isType = isTypeExpr(*decl.values[k], ctx);
    if (isType && DataType::parse(n.name)) {
      errors.append(
          error(ErrorCode::Redefined, n.pos,
                "a data type constant cannot be named like the data type '" + n.name + "'"));
      continue;
    }
    auto define = options_.defines.find(n.name);
    if (define != options_.defines.end()) {
      usedDefines_.insert(n.name);
      auto v = defineValue(n.name, define->second, isType, n.pos);
      if (v) {
        values[k] = ConstValue{v->dtype, v->bits, n.pos, v->isType};
        continue;
      }
      // The declared value stands in for a rejected -D, so later uses do not cascade.
      errors.append(v.status());
    }
    if (isType) {
      auto t = buildType(*decl.values[k], ctx, ErrorCode::Syntax, "expected a data type");
      if (!t) {
        errors.append(t.status());
        continue;
      }
      values[k] = ConstValue{*t, 0, n.pos, true};
      continue;
    }
    auto e = buildScalar(*decl.values[k], ctx);
    if (!e) {
      errors.append(e.status());
      continue;
    }
    values[k] = ConstValue{e->dtype, e->bits, n.pos};
  }
  for (size_t k = 0; k < decl.names.size(); ++k) {
    const AstName &n = decl.names[k];
    if (!values[k])
      continue;
    auto prev = constants_.find(n.name);
    if (prev != constants_.end()) {
      errors.append(error(ErrorCode::Redefined, n.pos,
                          "constant '" + n.name + "' is already declared at line " +
                              std::to_string(prev->second.pos.line)));
      continue;
    }
    constants_.emplace(n.name, *values[k]);
  }
  return errors;
}

// `macro NAME(P, ..):` (docs/isa.md, "Macros"): its name and parameters are checked here, its
// body where a program expands it (a macro that no program calls is only parsed).
Status ModuleAssembler::macroDecl(const AstMacro &macro) {
  const std::string &name = macro.name.name;
  auto prev = macros_.find(name);
  if (prev != macros_.end())
    return error(ErrorCode::Redefined, macro.name.pos,
                 "macro '" + name + "' is already defined at line " +
                     std::to_string(prev->second->name.pos.line));
  if (findInstruction(name) || isScalarBuiltin(name) || DataType::parse(name))
    return error(ErrorCode::Redefined, macro.name.pos,
                 "macro '" + name + "' is named like " +
                     (findInstruction(name)   ? "an instruction"
                      : isScalarBuiltin(name) ? "a scalar function"
                                              : "a data type"));
  Status errors;
  for (size_t k = 0; k < macro.params.size(); ++k) {
    const AstName &p = macro.params[k];
    if (DataType::parse(p.name)) {
      errors.append(error(ErrorCode::Redefined, p.pos,
                          "macro parameter '" + p.name + "' is named like a data type"));
      continue;
    }
    for (size_t j = 0; j < k; ++j)
      if (macro.params[j].name == p.name) {
        errors.append(error(ErrorCode::Redefined, p.pos,
                            "macro parameter '" + p.name + "' is declared twice (first at column " +
                                std::to_string(macro.params[j].pos.column) + ")"));
        break;
      }
  }
  if (!errors.ok())
    return errors;
  macros_.emplace(name, &macro);
  return Status::success();
}

Status ModuleAssembler::program(const AstProgram &ast, Module &module) {
  auto prev = programs_.find(ast.name.name);
  if (prev != programs_.end())
    return error(ErrorCode::Redefined, ast.name.pos,
                 "program '" + ast.name.name + "' is already declared at line " +
                     std::to_string(prev->second.line));
  programs_.emplace(ast.name.name, ast.name.pos);
  Program p;
  InferInput holes;
  ProgramLowering first(options_.fileName, constants_, macros_, reserved_, p);
  first.recordHoles(&holes);
  Status st = first.lower(ast);
  if (captured_) {
    captured_->push_back({p, holes});
    module.programs.push_back(std::move(p));
    return st;
  }
  // Layout inference runs for a program that leaves a register layout out; a program that
  // writes them all assembles exactly as written (an AllocateShared without layout= is then
  // row_major, ISA section 3.2).
  bool infer = false;
  for (size_t i = 0; i < holes.holes.size(); ++i)
    infer = infer || (holes.holes[i] && p.instructions[i].opcode != Opcode::AllocateShared);
  if (!st.ok() || !infer) {
    module.programs.push_back(std::move(p));
    return st;
  }
  auto decisions =
      inferLayouts(p, holes, options_.fileName, options_.layoutCandidate, options_.layoutReport);
  if (!decisions) {
    module.programs.push_back(std::move(p));
    return decisions.takeStatus();
  }
  Program inferred;
  ProgramLowering second(options_.fileName, constants_, macros_, reserved_, inferred);
  second.applyDecisions(&*decisions);
  st = second.lower(ast);
  module.programs.push_back(std::move(inferred));
  return st;
}

} // namespace

Expected<Module> assemble(std::string_view source, const AssembleOptions &options) {
  auto parsed = parseSource(source, options.fileName);
  if (!parsed)
    return parsed.takeStatus();
  Module module;
  Status st = ModuleAssembler(options, parsed->reserved).run(parsed->ast, module);
  if (!st.ok())
    return st;
  if (options.keepSource) {
    module.hasDebugInfo = true;
    module.sourceName = options.fileName;
    module.sourceText = std::string(source);
  }
  return module;
}

Expected<std::string> stripPerformanceLayouts(std::string_view source,
                                              const AssembleOptions &options) {
  auto parsed = parseSource(source, options.fileName);
  if (!parsed)
    return parsed.takeStatus();
  Module module;
  std::vector<std::pair<Program, InferInput>> programs;
  ModuleAssembler assembler(options, parsed->reserved);
  assembler.capture(&programs);
  Status st = assembler.run(parsed->ast, module);
  if (!st.ok())
    return st;
  std::vector<PerformanceLayout> layouts;
  for (const auto &[program, input] : programs) {
    std::vector<PerformanceLayout> some = performanceOnlyLayouts(program, input);
    layouts.insert(layouts.end(), some.begin(), some.end());
  }
  return removeLayoutArguments(source, layouts);
}

Expected<RegisterLayout> parseRegisterLayout(std::string_view text) {
  const std::string file = "<layout>";
  auto ast = parseStandaloneText(trim(text), file);
  if (!ast)
    return ast.takeStatus();
  ExprContext ctx;
  ctx.fileName = file;
  return buildRegisterLayout(**ast, ctx);
}

} // namespace tilus
