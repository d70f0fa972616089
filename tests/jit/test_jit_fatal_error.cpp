// LLVM fatal errors inside a compilation become error[jit] (jit/fatal_error.h) instead of ending
// the process: the reason is kept, traps nest, each thread has its own, and LLVM keeps working
// after a trapped error.
#include "jit/fatal_error.h"
#include "jit/jit_test_util.h"

#include <llvm/ADT/Twine.h>
#include <llvm/Support/ErrorHandling.h>

#include <thread>

using namespace tilus;
using namespace tilus::testing;

TEST_CASE("an LLVM fatal error in a trap is an error status with LLVM's reason") {
  bool after = false;
  Status s = jit::runTrappingLlvmFatalErrors([&]() -> Status {
    llvm::report_fatal_error("Cannot select: a made-up node", false);
    after = true; // never reached
    return Status::success();
  });
  CHECK_ERROR(s, ErrorCode::Jit);
  CHECK(s.toString().find("LLVM fatal error: Cannot select: a made-up node") != std::string::npos);
  CHECK_FALSE(after);
  // A body without a fatal error keeps its own status.
  CHECK_OK(jit::runTrappingLlvmFatalErrors([] { return Status::success(); }));
  CHECK_ERROR(jit::runTrappingLlvmFatalErrors(
                  [] { return Status::error(ErrorCode::Unsupported, "not this one"); }),
              ErrorCode::Unsupported);
}

TEST_CASE("fatal error traps nest: the innermost one catches") {
  Status inner;
  Status outer = jit::runTrappingLlvmFatalErrors([&]() -> Status {
    inner = jit::runTrappingLlvmFatalErrors([]() -> Status {
      llvm::report_fatal_error("inner", false);
      return Status::success();
    });
    return Status::success();
  });
  CHECK_OK(outer);
  CHECK_ERROR(inner, ErrorCode::Jit);
  CHECK(inner.toString().find("LLVM fatal error: inner") != std::string::npos);
}

TEST_CASE("fatal errors on several threads are caught by each thread's own trap") {
  std::vector<std::string> messages(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < messages.size(); ++i)
    threads.emplace_back([&messages, i] {
      for (int round = 0; round < 20; ++round) {
        Status s = jit::runTrappingLlvmFatalErrors([i]() -> Status {
          llvm::report_fatal_error(llvm::Twine("thread ") + std::to_string(i), false);
          return Status::success();
        });
        messages[i] = s.toString();
      }
    });
  for (std::thread &t : threads)
    t.join();
  for (size_t i = 0; i < messages.size(); ++i)
    CHECK(messages[i].find("LLVM fatal error: thread " + std::to_string(i)) != std::string::npos);
}

TEST_CASE("the JIT still compiles after a trapped fatal error") {
  Status s = jit::runTrappingLlvmFatalErrors([]() -> Status {
    llvm::report_fatal_error("before compiling", false);
    return Status::success();
  });
  CHECK_ERROR(s, ErrorCode::Jit);
  VerifiedModule m = buildFile(std::string(TILUSVM_SOURCE_DIR) + "/programs/vector_add.tasm");
  for (int sm : {80, 90}) {
    JitOptions options;
    options.smVersion = sm;
    Expected<PtxKernel> k = compileToPtx(m, 0, options);
    REQUIRE_OK(k);
    CHECK(k->ptx.find(".entry vector_add") != std::string::npos);
  }
}
