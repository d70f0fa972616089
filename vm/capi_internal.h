// What the C API's translation units share (vm/capi.cpp defines it): the error boundary's
// reporting and the adoption of a verified module into a tilusvm_module handle. Not part of
// the public API.
#pragma once

#include "loader/verified_module.h"
#include "vm/include/tilusvm.h"

#include <string>

namespace tilus::capi {

/// Set the calling thread's last error to `message` and return `code`.
int failWithMessage(int code, std::string message);
/// The status code and message (every diagnostic, located where known) of a failed Status.
int failWithStatus(const Status &status);
/// Wrap a verified module (or report why there is none) as a new handle in `*out`.
int adoptModule(Expected<VerifiedModule> verified, tilusvm_module *out);

} // namespace tilus::capi
