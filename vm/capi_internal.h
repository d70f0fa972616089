// What the C API's translation units share (vm/capi.cpp defines it): the error boundary and its
// reporting, and the adoption of a verified module into a tilusvm_module handle. Not part of
// the public API.
#pragma once

#include "loader/verified_module.h"
#include "vm/include/tilusvm.h"

#include <exception>
#include <new>
#include <string>

namespace tilus::capi {

/// Set the calling thread's last error to `message` and return `code`.
int failWithMessage(int code, std::string message);
/// The status code and message (every diagnostic, located where known) of a failed Status.
int failWithStatus(const Status &status);
/// Wrap a verified module (or report why there is none) as a new handle in `*out`.
int adoptModule(Expected<VerifiedModule> verified, tilusvm_module *out);

/// The error boundary of an exported function: what `body` returns, or INTERNAL with the
/// message of what it threw.
template <typename Body> int errorBoundary(Body &&body) noexcept {
  try {
    return body();
  } catch (const std::bad_alloc &) {
    return failWithMessage(TILUSVM_ERROR_INTERNAL, "out of memory");
  } catch (const std::exception &e) {
    return failWithMessage(TILUSVM_ERROR_INTERNAL, std::string("internal error: ") + e.what());
  } catch (...) {
    return failWithMessage(TILUSVM_ERROR_INTERNAL, "internal error: unknown exception");
  }
}

} // namespace tilus::capi
