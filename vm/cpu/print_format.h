// The text of Print (docs/interpreter.md, "Print format"), shared by every backend's tests:
//   [block X, Y, Z] MSG: DTYPE = VALUE                 (scalar)
//   [block X, Y, Z] MSG: DTYPE[S1, S2] = [[v, v], ...]  (tensor, row-major, nested brackets)
// without "MSG: " when the message is absent.
#pragma once

#include "isa/dtype.h"

#include <cstdint>
#include <string>
#include <vector>

namespace tilus::cpu {

/// One element: bool true/false; integers in decimal; floats with printf "%.9g" ("%.17g" for
/// f64) of their exact value, and nan, inf, -inf.
std::string formatElement(uint64_t bits, DataType type);

/// A whole Print line, ending in '\n'. `shape` is empty for a scalar (isTensor false) and for a
/// rank-0 tensor; `values` are the logical elements in row-major order.
std::string formatPrint(const int64_t block[3], const std::string &message, DataType type,
                        bool isTensor, const std::vector<int64_t> &shape,
                        const std::vector<uint64_t> &values);

} // namespace tilus::cpu
