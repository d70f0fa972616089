// Removing performance-only layout annotations from source text (tilus-asm --strip-layouts and
// the tests that assemble every program of programs/ without them). The syntax tree gives where
// each `layout=` keyword starts; its value ends at the next `,` or `)` outside brackets, strings
// and comments. Edits are applied from the end of the text so that earlier offsets stay valid.
#include "assembler/layout_infer.h"

#include <algorithm>

namespace tilus::tasm {

namespace {

/// Byte offset of a 1-based line and column.
size_t offsetOf(std::string_view text, SrcPos pos) {
  size_t offset = 0;
  for (uint32_t line = 1; line < pos.line && offset < text.size(); ++offset)
    if (text[offset] == '\n')
      ++line;
  return std::min(text.size(), offset + (pos.column > 0 ? pos.column - 1 : 0));
}

/// The end of an argument's value that starts at `from`: the `,` or `)` that closes it.
size_t valueEnd(std::string_view text, size_t from) {
  int depth = 0;
  for (size_t k = from; k < text.size(); ++k) {
    char c = text[k];
    if (c == '#') {
      while (k < text.size() && text[k] != '\n')
        ++k;
      continue;
    }
    if (c == '"' || c == '\'') {
      for (++k; k < text.size() && text[k] != c; ++k)
        if (text[k] == '\\')
          ++k;
      continue;
    }
    if (c == '(' || c == '[')
      ++depth;
    else if ((c == ')' || c == ']') && depth > 0)
      --depth;
    else if ((c == ',' || c == ')') && depth == 0)
      return k;
  }
  return text.size();
}

std::string shapeList(const std::vector<int64_t> &shape) {
  std::string s = "shape=[";
  for (size_t k = 0; k < shape.size(); ++k)
    s += (k ? ", " : "") + std::to_string(shape[k]);
  return s + "]";
}

struct Edit {
  size_t begin, end;
  std::string text;
};

} // namespace

std::string removeLayoutArguments(std::string_view source,
                                  const std::vector<PerformanceLayout> &layouts) {
  std::vector<Edit> edits;
  for (const PerformanceLayout &l : layouts) {
    const AstExpr &call = *l.call;
    const AstArg *layout = nullptr;
    bool hasShape = false;
    for (const AstArg &a : call.args) {
      if (a.keyword == "layout")
        layout = &a;
      if (a.keyword == "shape")
        hasShape = true;
    }
    if (!layout)
      continue; // written positionally: kept
    bool addShape = !hasShape && l.opcode != Opcode::AllocateShared && l.opcode != Opcode::Reduce &&
                    (l.opcode == Opcode::AllocateRegister || l.opcode == Opcode::Iota ||
                     l.opcode == Opcode::LoadGlobal || l.opcode == Opcode::LoadShared);
    std::string replacement = addShape ? shapeList(l.shape) : "";
    size_t begin = offsetOf(source, layout->pos);
    size_t end = valueEnd(source, begin);
    // Remove the separating comma before the argument, or the one after it when it is first.
    size_t before = begin;
    while (before > 0 && (source[before - 1] == ' ' || source[before - 1] == '\n' ||
                          source[before - 1] == '\r' || source[before - 1] == '\t'))
      --before;
    if (before > 0 && source[before - 1] == ',') {
      edits.push_back({before - 1, end, addShape ? ", " + replacement : ""});
      continue;
    }
    size_t after = end;
    if (after < source.size() && source[after] == ',') {
      ++after;
      while (after < source.size() && source[after] == ' ')
        ++after;
      edits.push_back({begin, after, addShape ? replacement + ", " : ""});
    } else {
      edits.push_back({begin, end, replacement});
    }
  }
  std::sort(edits.begin(), edits.end(),
            [](const Edit &x, const Edit &y) { return x.begin > y.begin; });
  std::string out(source);
  for (const Edit &e : edits)
    out.replace(e.begin, e.end - e.begin, e.text);
  return out;
}

} // namespace tilus::tasm
