// LLVM fatal errors as error values. LLVM reports what it cannot continue from (a backend that
// cannot select an instruction, a broken invariant it checks) with report_fatal_error, which
// by default prints "LLVM ERROR" and exits the process. A library that compiles untrusted
// programs inside a host (a serving engine, a Python interpreter) must not end that host, so
// the JIT runs every compilation under a trap: the fatal error handler that the JIT installs
// (once per process) jumps back to the innermost trap of the calling thread, and the
// compilation returns ErrorCode::Jit with LLVM's reason:
//
//   Expected<PtxKernel> k = runTrappingLlvmFatalErrors([&] { return compile(...); });
//   // on "LLVM ERROR: Cannot select: ..." -> error[jit]: LLVM fatal error: Cannot select: ...
//
// Like LLVM's own CrashRecoveryContext, the jump skips the destructors of the frames in
// between, so the objects of the failed compilation are leaked (each compilation owns its
// LLVMContext, so nothing shared is left half-updated). Signals are not intercepted: a crash
// stays a crash.
#pragma once

#include "isa/status.h"

#include <functional>

namespace tilus::jit {

/// Install the JIT's LLVM fatal error handler (idempotent, thread-safe). Outside a trap the
/// handler returns and LLVM exits as it would have.
void installLlvmFatalErrorHandler();

/// Run `body` on this thread; an LLVM fatal error inside it (nested traps: the innermost)
/// returns ErrorCode::Jit "LLVM fatal error: REASON" instead of ending the process.
Status runTrappingLlvmFatalErrors(const std::function<Status()> &body);

} // namespace tilus::jit
