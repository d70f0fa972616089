// Shared test helpers: CHECK_OK(expr) for a Status or Expected that must succeed (printing the
// diagnostics when it does not), CHECK_ERROR(expr, code) for one that must fail with `code`.
#pragma once

#include "isa/status.h"

#include <doctest/doctest.h>

namespace tilus::testing {

inline const Status &statusOf(const Status &s) { return s; }
template <typename T> const Status &statusOf(const Expected<T> &e) { return e.status(); }
inline bool okOf(const Status &s) { return s.ok(); }
template <typename T> bool okOf(const Expected<T> &e) { return e.ok(); }

} // namespace tilus::testing

#define CHECK_OK(expr)                                                                             \
  do {                                                                                             \
    const auto &tilus_r_ = (expr);                                                                 \
    INFO(::tilus::testing::statusOf(tilus_r_).toString());                                         \
    CHECK(::tilus::testing::okOf(tilus_r_));                                                       \
  } while (0)

#define REQUIRE_OK(expr)                                                                           \
  do {                                                                                             \
    const auto &tilus_r_ = (expr);                                                                 \
    INFO(::tilus::testing::statusOf(tilus_r_).toString());                                         \
    REQUIRE(::tilus::testing::okOf(tilus_r_));                                                     \
  } while (0)

#define CHECK_ERROR(expr, errcode)                                                                 \
  do {                                                                                             \
    const auto &tilus_r_ = (expr);                                                                 \
    REQUIRE_FALSE(::tilus::testing::okOf(tilus_r_));                                               \
    INFO(::tilus::testing::statusOf(tilus_r_).toString());                                         \
    CHECK(::tilus::testing::statusOf(tilus_r_).code() == (errcode));                               \
  } while (0)
