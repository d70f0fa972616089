// The disassembler: Module -> `.tasm`. The output is meant for people (names kept, `elif`,
// `return`, keyword arguments as in the ISA examples) and for the round trip of ISA section 7:
// for every module the assembler produced, assembling the printed text gives a module whose
// bytecode is identical. The round trip rests on printing each construct so that re-parsing
// appends variables, expressions and instructions in the original order:
//   - temporaries of nested calls are printed as statements of their own (`_t0 = Sub(x, m)`);
//     the assembler treats names `_t<N>` as always-declaring, so they rebind exactly;
//   - arguments are printed in table order (the order the assembler lowers them in);
//   - `range(n)` is printed short only when its implicit start 0 and step 1 were emitted after
//     the stop expression, which is what the short form re-creates;
//   - constants are printed by printConst (exact dtype and bits); layouts by their toString().
// Constants of the source are gone (bytecode holds only their values) and so are comments.
#include "assembler/assembler.h"

#include "assembler/expr_printer.h"

#include <algorithm>
#include <set>
#include <string_view>

namespace tilus {

namespace {

using namespace tasm;

class Printer {
public:
  explicit Printer(const Program &p) : p_(p) {}

  void program(std::string &out) const;

private:
  std::string name(VarId id) const {
    return id < p_.vars.size() ? p_.vars[id].name : "<var " + std::to_string(id) + ">";
  }
  std::string expr(ExprId id, int minPrec = kPrecTernary) const {
    return printExpr(p_, id, minPrec);
  }
  /// A nested body (a loop's, an `if`'s) and the body of a scope (the program's, a thread
  /// group's): updates that would re-assemble as new variables print inside `if True:`
  /// (shadowedUpdate).
  void body(const std::vector<Stmt> &stmts, int indent, std::string &out) const;
  void scopeBody(const std::vector<Stmt> &stmts, int indent, std::string &out) const;
  void stmt(const Stmt &s, int indent, std::string &out) const;
  void ifChain(const Stmt &s, int indent, const char *keyword, std::string &out) const;
  std::string rangeArgs(const Stmt &s) const;
  std::string instruction(const Instruction &inst) const;
  std::string argument(const ArgSpec &spec, const Argument &arg) const;
  bool isConst(ExprId id, uint64_t bits) const {
    return id < p_.exprs.size() && p_.exprs[id].op == ExprOp::Const && p_.exprs[id].bits == bits;
  }

  /// Whether statement `s`, printed in a body at `indent`, updates a variable declared before it
  /// where the assembler would read `x = ...` as a new variable instead. The assembler reads
  /// `x = ...` as a new variable that shadows `x` at the top of a scope's body (the program's, a
  /// thread group's) and in a nested body where `x` was declared in that same body, and as an
  /// update only inside an `if` or loop body for a variable of an enclosing scope; a constant `if`
  /// folded away by the assembler leaves its updates in the body around it, which are therefore
  /// printed inside `if True:`. `scopeTop`: the body is a scope's (any earlier declaration
  /// counts), else a nested body (only declarations in that same body count).
  bool shadowedUpdate(const Stmt &s, int indent, bool scopeTop) const;
  /// The variables that statement `s` assigns by `x = ...` (an Assign, or the results of an
  /// instruction without out=).
  std::vector<VarId> assigned(const Stmt &s) const;
  /// Records the body (by indent) in which each variable `s` assigns is first assigned.
  void declare(const Stmt &s, int indent) const;
  /// The body printer shared by scope bodies and nested bodies (shadowedUpdate).
  void statements(const std::vector<Stmt> &stmts, int indent, bool scopeTop,
                  std::string &out) const;

  /// Every variable that statement `s` reads or writes, its nested bodies included (appended,
  /// possibly repeated).
  void references(const Stmt &s, std::vector<VarId> &out) const;
  void exprVars(ExprId id, std::vector<VarId> &out) const;
  /// The variables first assigned in the nested bodies of `s` (appended).
  void nestedDeclarations(const Stmt &s, std::vector<VarId> &out) const;
  /// The statements of `stmts` to print inside `if True:` so that re-assembly declares the
  /// same variables (scopeRegions): pairs [first, last] of indices, disjoint and in order.
  std::vector<std::pair<size_t, size_t>> scopeRegions(const std::vector<Stmt> &stmts, size_t begin,
                                                      size_t end) const;
  /// statements() of stmts[begin, end).
  void range(const std::vector<Stmt> &stmts, size_t begin, size_t end, int indent, bool scopeTop,
             std::string &out) const;

  const Program &p_;
  mutable std::vector<int> declIndent_; // per variable: the indent of its declaration, or -1
  /// per variable: the statement that assigns it first in printing order (nullptr: none)
  mutable std::vector<const Stmt *> firstAssign_;
};

std::vector<VarId> Printer::assigned(const Stmt &s) const {
  if (s.kind == StmtKind::Assign || s.kind == StmtKind::Specialize)
    return {s.var};
  if (s.kind != StmtKind::Instruction || s.index >= p_.instructions.size())
    return {};
  const Instruction &inst = p_.instructions[s.index];
  if (inst.out)
    return {};
  return inst.results;
}

bool Printer::shadowedUpdate(const Stmt &s, int indent, bool scopeTop) const {
  for (VarId v : assigned(s))
    if (v < declIndent_.size() && (scopeTop ? declIndent_[v] >= 0 : declIndent_[v] == indent))
      return true;
  return false;
}

void Printer::declare(const Stmt &s, int indent) const {
  auto mark = [&](VarId v, int at) {
    if (v < declIndent_.size() && declIndent_[v] < 0)
      declIndent_[v] = at;
  };
  for (VarId v : assigned(s))
    mark(v, indent);
  if (s.kind == StmtKind::For)
    mark(s.var, indent + 1); // the loop variable, of the loop's scope
}

void Printer::exprVars(ExprId id, std::vector<VarId> &out) const {
  if (id >= p_.exprs.size())
    return;
  const ExprNode &e = p_.exprs[id];
  if (e.op == ExprOp::Var)
    out.push_back(e.var);
  for (uint32_t o : e.operands)
    if (o != kNoId)
      exprVars(o, out);
}

void Printer::references(const Stmt &s, std::vector<VarId> &out) const {
  auto one = [&](const Stmt &st) {
    if (st.var != kNoId)
      out.push_back(st.var);
    for (ExprId e : {st.expr, st.stop, st.step})
      exprVars(e, out);
    if (st.kind != StmtKind::Instruction || st.index >= p_.instructions.size())
      return;
    const Instruction &inst = p_.instructions[st.index];
    out.insert(out.end(), inst.results.begin(), inst.results.end());
    for (const Argument &a : inst.args) {
      if (a.var != kNoId)
        out.push_back(a.var);
      forEachArgumentExpr(a, [&](ExprId e) { exprVars(e, out); });
    }
  };
  one(s);
  forEachStmt(s.body, one);
  forEachStmt(s.orelse, one);
}

void Printer::nestedDeclarations(const Stmt &s, std::vector<VarId> &out) const {
  auto one = [&](const Stmt &b) {
    for (VarId v : assigned(b))
      if (v < firstAssign_.size() && firstAssign_[v] == &b)
        out.push_back(v);
  };
  forEachStmt(s.body, one);
  forEachStmt(s.orelse, one);
}

// Statements that the assembler lowered in a block of their own whose statements it then
// placed in the body around it (the taken side of a constant `if`, a macro expansion) declared
// their variables in that block: a variable `x` declared there ended with it, so a later `x = ..`
// in a nested body declared a new variable. Printed flat, the first `x` would still be visible
// there, and re-assembly would read the later one as its update. So a variable declared in
// `stmts` whose name a nested body of a later statement (after its last use) declares again is
// printed, with the statements from its declaration to its last use, inside `if True:` (which
// the assembler folds back into the same flat statements, in a block of their own). The region
// grows until every variable declared in it has its last use in it, and back to the earlier
// declaration of any name it declares again (a new variable there, where inside `if True:` it
// would read as an update).
std::vector<std::pair<size_t, size_t>> Printer::scopeRegions(const std::vector<Stmt> &stmts,
                                                             size_t begin, size_t end) const {
  // indices below are relative to `begin`
  size_t n = end - begin;
  std::vector<std::vector<VarId>> declared(n), refs(n);
  std::vector<size_t> lastUse(p_.vars.size(), 0);
  for (size_t i = 0; i < n; ++i) {
    const Stmt &st = stmts[begin + i];
    for (VarId v : assigned(st))
      if (v < firstAssign_.size() && firstAssign_[v] == &st)
        declared[i].push_back(v);
    references(st, refs[i]);
    for (VarId v : refs[i])
      if (v < lastUse.size())
        lastUse[v] = i;
  }
  // nestedFrom[k]: the names that nested bodies of statements k.. declare (a variable declared
  // at this level is never declared again there, so the same name is another variable)
  std::vector<std::set<std::string_view>> nestedFrom(n + 1);
  for (size_t k = n; k-- > 0;) {
    nestedFrom[k] = nestedFrom[k + 1];
    std::vector<VarId> nested;
    nestedDeclarations(stmts[begin + k], nested);
    for (VarId w : nested)
      nestedFrom[k].insert(p_.vars[w].name);
  }
  std::vector<std::pair<size_t, size_t>> regions;
  for (size_t i = 0; i < n; ++i)
    for (VarId v : declared[i])
      if (nestedFrom[std::max(i, lastUse[v]) + 1].count(p_.vars[v].name))
        regions.push_back({i, std::max(i, lastUse[v])});
  if (regions.empty())
    return regions;
  // grow each region to closure, then merge the overlapping ones, until nothing changes
  for (bool changed = true; changed;) {
    changed = false;
    for (auto &[first, last] : regions) {
      for (size_t x = first; x <= last; ++x)
        for (VarId u : declared[x]) {
          if (lastUse[u] > last) {
            last = lastUse[u];
            changed = true;
          }
          for (size_t y = 0; y < first; ++y) // the earliest such declaration
            for (VarId w : declared[y])
              if (p_.vars[w].name == p_.vars[u].name) {
                first = y; // ends the loop over y
                changed = true;
                break;
              }
        }
    }
    std::sort(regions.begin(), regions.end());
    std::vector<std::pair<size_t, size_t>> merged;
    for (const auto &r : regions) {
      if (!merged.empty() && r.first <= merged.back().second) {
        merged.back().second = std::max(merged.back().second, r.second);
      } else {
        merged.push_back(r);
      }
    }
    changed = changed || merged.size() != regions.size();
    regions = std::move(merged);
  }
  // in absolute indices; a region of the whole range is that range's own block already
  std::vector<std::pair<size_t, size_t>> out;
  for (const auto &[first, last] : regions)
    if (!(first == 0 && last + 1 == n))
      out.push_back({begin + first, begin + last});
  return out;
}

void Printer::program(std::string &out) const {
  out += "def " + p_.name + "<";
  for (size_t k = 0; k < p_.grid.size(); ++k)
    out += (k ? ", " : "") + expr(p_.grid[k], kPrecBitOr);
  out += ">(";
  for (size_t k = 0; k < p_.params.size(); ++k) {
    const Variable &v = p_.vars[p_.params[k]];
    out += (k ? ", " : "") + v.dtype.name() + (v.kind == VarKind::Pointer ? "* " : " ") + v.name;
  }
  out += ")";
  if (p_.threads != 0)
    out += " threads=" + std::to_string(p_.threads);
  if (p_.blocksPerSm != 0)
    out += " blocks_per_sm=" + std::to_string(p_.blocksPerSm);
  if (p_.cluster != 1)
    out += " cluster=" + std::to_string(p_.cluster);
  out += ":\n";
  declIndent_.assign(p_.vars.size(), -1);
  for (VarId v : p_.params)
    if (v < declIndent_.size())
      declIndent_[v] = 0;
  // the first assignment of every variable, in printing order
  std::vector<const Stmt *> &first = firstAssign_;
  first.assign(p_.vars.size(), nullptr);
  forEachStmt(p_.body, [&](const Stmt &st) {
    for (VarId v : assigned(st))
      if (v < first.size() && !first[v])
        first[v] = &st;
  });
  scopeBody(p_.body, 1, out);
}

void Printer::scopeBody(const std::vector<Stmt> &stmts, int indent, std::string &out) const {
  statements(stmts, indent, true, out);
}

void Printer::body(const std::vector<Stmt> &stmts, int indent, std::string &out) const {
  statements(stmts, indent, false, out);
}

void Printer::statements(const std::vector<Stmt> &stmts, int indent, bool scopeTop,
                         std::string &out) const {
  if (stmts.empty()) {
    out += std::string(size_t(indent) * 4, ' ') + "pass\n";
    return;
  }
  range(stmts, 0, stmts.size(), indent, scopeTop, out);
}

void Printer::range(const std::vector<Stmt> &stmts, size_t begin, size_t end, int indent,
                    bool scopeTop, std::string &out) const {
  std::vector<std::pair<size_t, size_t>> regions = scopeRegions(stmts, begin, end);
  size_t next = 0; // the next region
  for (size_t i = begin; i < end; ++i) {
    if (next < regions.size() && regions[next].first == i) {
      size_t last = regions[next++].second;
      out += std::string(size_t(indent) * 4, ' ') + "if True:\n";
      range(stmts, i, last + 1, indent + 1, false, out);
      i = last;
      continue;
    }
    const Stmt &s = stmts[i];
    if (shadowedUpdate(s, indent, scopeTop)) {
      out += std::string(size_t(indent) * 4, ' ') + "if True:\n";
      stmt(s, indent + 1, out);
    } else {
      stmt(s, indent, out);
    }
    declare(s, indent);
  }
}

void Printer::stmt(const Stmt &s, int indent, std::string &out) const {
  std::string pad(size_t(indent) * 4, ' ');
  switch (s.kind) {
  case StmtKind::Instruction:
    out += pad +
           (s.index < p_.instructions.size() ? instruction(p_.instructions[s.index])
                                             : "<instruction " + std::to_string(s.index) + ">") +
           "\n";
    return;
  case StmtKind::Assign:
    out += pad + name(s.var) + " = " + expr(s.expr) + "\n";
    return;
  case StmtKind::For:
    out += pad + "for " + name(s.var) + " in range(" + rangeArgs(s) +
           (s.unroll != 0 ? ", unroll=" + std::to_string(s.unroll) : "") + "):\n";
    body(s.body, indent + 1, out);
    return;
  case StmtKind::If:
    ifChain(s, indent, "if", out);
    return;
  case StmtKind::While:
    out += pad + "while " + expr(s.expr) + ":\n";
    body(s.body, indent + 1, out);
    return;
  case StmtKind::Break:
    out += pad + "break\n";
    return;
  case StmtKind::Continue:
    out += pad + "continue\n";
    return;
  case StmtKind::Specialize:
    out += pad + "specialize " + name(s.var) + " = " + expr(s.expr) + "\n";
    return;
  case StmtKind::Assert:
    out +=
        pad + "assert " + expr(s.expr) + (s.text.empty() ? "" : ", " + quoteString(s.text)) + "\n";
    return;
  case StmtKind::Parallel:
    out += pad + "parallel:\n";
    for (const Stmt &g : s.body)
      stmt(g, indent + 1, out);
    return;
  case StmtKind::Group:
    out += pad + "group(" + std::to_string(s.threads) +
           (s.regs != 0 ? ", regs=" + std::to_string(s.regs) : "") +
           (s.copies != 1 ? ", copies=" + std::to_string(s.copies) : "") + ")" +
           (s.var != kNoId ? " as " + name(s.var) : "") + ":\n";
    if (s.var != kNoId && s.var < declIndent_.size() && declIndent_[s.var] < 0)
      declIndent_[s.var] = indent + 1;  // the copy index, a variable of the group's scope
    scopeBody(s.body, indent + 1, out); // a group's body is a scope of its own, as the program's
    return;
  }
}

void Printer::ifChain(const Stmt &s, int indent, const char *keyword, std::string &out) const {
  std::string pad(size_t(indent) * 4, ' ');
  out += pad + keyword + " " + expr(s.expr) + ":\n";
  body(s.body, indent + 1, out);
  if (s.orelse.size() == 1 && s.orelse[0].kind == StmtKind::If) {
    ifChain(s.orelse[0], indent, "elif", out);
  } else if (!s.orelse.empty()) {
    out += pad + "else:\n";
    body(s.orelse, indent + 1, out);
  }
}

std::string Printer::rangeArgs(const Stmt &s) const {
  bool stepImplicit = s.step > s.stop && isConst(s.step, 1);
  if (stepImplicit && s.expr > s.stop && s.expr < s.step && isConst(s.expr, 0))
    return expr(s.stop);
  if (stepImplicit && s.expr < s.stop)
    return expr(s.expr) + ", " + expr(s.stop);
  return expr(s.expr) + ", " + expr(s.stop) + ", " + expr(s.step);
}

std::string Printer::instruction(const Instruction &inst) const {
  const InstructionSpec &spec = inst.spec();
  if (inst.opcode == Opcode::Exit && inst.results.empty())
    return "return";
  std::string lhs;
  if (!inst.out) {
    for (size_t k = 0; k < inst.results.size(); ++k)
      lhs += (k ? ", " : "") + name(inst.results[k]);
    if (!lhs.empty())
      lhs += " = ";
  }
  std::string args;
  bool positional = true;
  for (size_t k = 0; k < spec.args.size() && k < inst.args.size(); ++k) {
    const ArgSpec &a = spec.args[k];
    if (!inst.args[k].present) {
      positional = false;
      continue;
    }
    positional = positional && a.required &&
                 (a.kind == ArgKind::Value || a.kind == ArgKind::DType || spec.args.size() == 1);
    args += args.empty() ? "" : ", ";
    if (!positional)
      args += std::string(a.name) + "=";
    args += argument(a, inst.args[k]);
  }
  if (inst.out && !inst.results.empty())
    args += (args.empty() ? "" : ", ") + std::string("out=") + name(inst.results[0]);
  return lhs + spec.name + "(" + args + ")";
}

std::string Printer::argument(const ArgSpec &spec, const Argument &arg) const {
  auto join = [](const std::vector<std::string> &items) {
    std::string s = "[";
    for (size_t k = 0; k < items.size(); ++k)
      s += (k ? ", " : "") + items[k];
    return s + "]";
  };
  std::vector<std::string> items;
  switch (spec.kind) {
  case ArgKind::Value:
    return arg.var != kNoId ? name(arg.var) : expr(arg.expr);
  case ArgKind::Expr:
    return expr(arg.expr);
  case ArgKind::Int:
    return printInteger(arg.intValue);
  case ArgKind::Bool:
    return arg.intValue ? "True" : "False";
  case ArgKind::DType:
    return arg.dtype.name();
  case ArgKind::RegLayout:
    return arg.regLayout ? arg.regLayout->toString() : "<no layout>";
  case ArgKind::SharedLayout:
    return arg.sharedLayout ? arg.sharedLayout->toString() : "<no layout>";
  case ArgKind::IntList:
    for (int64_t v : arg.ints)
      items.push_back(printInteger(v));
    return join(items);
  case ArgKind::ExprList:
    for (ExprId e : arg.exprs)
      items.push_back(expr(e));
    return join(items);
  case ArgKind::Offset:
    for (const OffsetEntry &o : arg.offsets)
      items.push_back(expr(o.expr) + (o.slice ? ":" : ""));
    return join(items);
  case ArgKind::ReduceOp:
    return reduceOpName(ReduceOp(arg.intValue));
  case ArgKind::MemoryScope:
    return memoryScopeName(MemoryScope(arg.intValue));
  case ArgKind::Eviction:
    return evictionName(Eviction(arg.intValue));
  case ArgKind::String:
    return quoteString(arg.text);
  }
  return "?";
}

} // namespace

std::string disassemble(const Module &module) {
  std::string out;
  for (size_t k = 0; k < module.programs.size(); ++k) {
    if (k)
      out += "\n";
    Printer(module.programs[k]).program(out);
  }
  return out;
}

} // namespace tilus
