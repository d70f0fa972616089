// The trap for LLVM fatal errors (see fatal_error.h): a thread-local stack of jump buffers and
// one process-wide handler that jumps to the top one.
#include "jit/fatal_error.h"

#include <llvm/Support/ErrorHandling.h>

#include <csetjmp>
#include <mutex>
#include <string>

namespace tilus::jit {

namespace {

struct Trap {
  std::jmp_buf env;
  std::string reason;
  Trap *outer = nullptr;
};

thread_local Trap *innermostTrap = nullptr;

void onFatalError(void *, const char *reason, bool) {
  Trap *trap = innermostTrap;
  if (!trap)
    return; // not compiling on this thread: LLVM prints the reason and exits
  trap->reason = reason ? reason : "(no reason given)";
  std::longjmp(trap->env, 1);
}

/// The body's status, or false when it ended in a fatal error. Kept apart from the caller so
/// that nothing with a destructor lives in the frame that calls setjmp.
bool runBody(Trap &trap, const std::function<Status()> &body, Status &status) {
  if (setjmp(trap.env) != 0)
    return false;
  status = body();
  return true;
}

} // namespace

void installLlvmFatalErrorHandler() {
  static std::once_flag once;
  std::call_once(once, [] { llvm::install_fatal_error_handler(onFatalError, nullptr); });
}

Status runTrappingLlvmFatalErrors(const std::function<Status()> &body) {
  installLlvmFatalErrorHandler();
  Trap trap;
  trap.outer = innermostTrap;
  innermostTrap = &trap;
  Status status;
  bool finished = runBody(trap, body, status);
  innermostTrap = trap.outer;
  if (finished)
    return status;
  return Status::error(ErrorCode::Jit, "LLVM fatal error: " + trap.reason);
}

} // namespace tilus::jit
