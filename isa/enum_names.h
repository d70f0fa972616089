// The spellings of a small enum's enumerators as one table that serves both directions: the
// name of an enumerator and the enumerator of a name. The enumerators must be 0..N-1 in order.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string_view>

namespace tilus {

template <typename E, size_t N> struct EnumNames {
  std::array<const char *, N> names;

  /// The spelling of `e`, "?" for a value outside the enum.
  constexpr const char *name(E e) const { return size_t(e) < N ? names[size_t(e)] : "?"; }
  /// The enumerator spelled `text`.
  constexpr std::optional<E> parse(std::string_view text) const {
    for (size_t i = 0; i < N; ++i)
      if (text == names[i])
        return E(i);
    return std::nullopt;
  }
};

} // namespace tilus
