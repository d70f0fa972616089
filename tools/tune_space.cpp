// Parsing and enumeration of tilus-tune's search space (tools/tune_space.h).
#include "tools/tune_space.h"

#include <cctype>

namespace tilus::tune {

namespace {

/// A piece of the --space text and the 1-based column where it starts.
struct Piece {
  std::string_view text;
  uint32_t column = 1;
};

Status spaceError(uint32_t column, std::string message) {
  Location loc;
  loc.file = "--space";
  loc.line = 1;
  loc.column = column;
  return Status::error(ErrorCode::Usage, std::move(message), loc);
}

Piece trim(Piece p) {
  while (!p.text.empty() && std::isspace(static_cast<unsigned char>(p.text.front()))) {
    p.text.remove_prefix(1);
    ++p.column;
  }
  while (!p.text.empty() && std::isspace(static_cast<unsigned char>(p.text.back())))
    p.text.remove_suffix(1);
  return p;
}

std::vector<Piece> split(Piece p, char separator) {
  std::vector<Piece> out;
  size_t start = 0;
  for (size_t i = 0; i <= p.text.size(); ++i) {
    if (i == p.text.size() || p.text[i] == separator) {
      out.push_back(Piece{p.text.substr(start, i - start), p.column + uint32_t(start)});
      start = i + 1;
    }
  }
  return out;
}

bool isName(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_'))
    return false;
  for (char c : s)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_'))
      return false;
  return true;
}

} // namespace

Expected<Space> parseSpace(std::string_view text) {
  Space space;
  Piece all = trim(Piece{text, 1});
  if (all.text.empty())
    return space;
  size_t points = 1;
  for (Piece dim : split(Piece{text, 1}, ';')) {
    Piece d = trim(dim);
    if (d.text.empty())
      return spaceError(dim.column, "empty dimension (write NAME=V1,V2,... between ';')");
    size_t eq = d.text.find('=');
    if (eq == std::string_view::npos)
      return spaceError(d.column, "expected NAME=V1,V2,..., got '" + std::string(d.text) + "'");
    Piece name = trim(Piece{d.text.substr(0, eq), d.column});
    if (!isName(name.text))
      return spaceError(name.column, "'" + std::string(name.text) + "' is not a constant name");
    for (const Dimension &other : space)
      if (other.name == name.text)
        return spaceError(name.column, std::string(name.text) +
                                           " is already a dimension (at column " +
                                           std::to_string(other.column) + ")");
    Dimension dimension;
    dimension.name = std::string(name.text);
    dimension.column = name.column;
    std::vector<uint32_t> columns;
    for (Piece value : split(Piece{d.text.substr(eq + 1), d.column + uint32_t(eq) + 1}, ',')) {
      Piece v = trim(value);
      if (v.text.empty())
        return spaceError(value.column, "empty value for " + dimension.name);
      for (size_t k = 0; k < dimension.values.size(); ++k)
        if (dimension.values[k] == v.text)
          return spaceError(v.column, dimension.name + "=" + std::string(v.text) +
                                          " is already listed (at column " +
                                          std::to_string(columns[k]) + ")");
      dimension.values.emplace_back(v.text);
      columns.push_back(v.column);
    }
    if (dimension.values.size() > kMaxPoints / points)
      return spaceError(d.column,
                        "the space has more than " + std::to_string(kMaxPoints) + " points");
    points *= dimension.values.size();
    space.push_back(std::move(dimension));
  }
  return space;
}

size_t pointCount(const Space &space) {
  size_t n = 1;
  for (const Dimension &d : space)
    n *= d.values.size();
  return n;
}

std::vector<std::pair<std::string, std::string>> pointAt(const Space &space, size_t index) {
  std::vector<std::pair<std::string, std::string>> point(space.size());
  for (size_t d = space.size(); d-- > 0;) {
    size_t n = space[d].values.size();
    point[d] = {space[d].name, space[d].values[index % n]};
    index /= n;
  }
  return point;
}

} // namespace tilus::tune
