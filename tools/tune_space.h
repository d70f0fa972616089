// tilus-tune's search space (docs/tilus-tune.md): `--space 'BN=64,128;STAGES=3,4'` is a list of
// dimensions, each a constant name and the values (-D values) to try; the points are the
// cartesian product, the first dimension varying slowest.
#pragma once

#include "isa/status.h"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace tilus::tune {

struct Dimension {
  std::string name;
  std::vector<std::string> values;
  uint32_t column = 0; // of the name in the --space text (1-based)
};
using Space = std::vector<Dimension>;

/// At most this many points (the product of the dimensions' sizes).
inline constexpr size_t kMaxPoints = 100000;

/// Parse `NAME=V1,V2,...;NAME=...` (spaces around names, values and separators are ignored; an
/// empty text is the space of one point). Errors are `usage` diagnostics located at
/// `--space:1:COL`: a missing `=`, a name that is not a constant name, an empty value or
/// dimension, a name or a value given twice, more than kMaxPoints points.
Expected<Space> parseSpace(std::string_view text);

/// The number of points (1 for an empty space).
size_t pointCount(const Space &space);

/// Point `index` (0 <= index < pointCount): one (name, value) per dimension, in dimension
/// order. Points are numbered like nested loops over the dimensions as written, the last
/// dimension innermost.
std::vector<std::pair<std::string, std::string>> pointAt(const Space &space, size_t index);

} // namespace tilus::tune
