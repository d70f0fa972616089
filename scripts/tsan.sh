#!/usr/bin/env bash
# ThreadSanitizer run of the concurrency tests (tests/tsan/): configures its own small build
# directory with meson -Db_sanitize=thread (once), builds only those tests and the libraries they
# link (isa, loader, assembler, jit and the disk cache; the CPU interpreter; not libtilusvm, the
# tools or the other tests), and runs them: kernels compiled and cached from many threads, and the
# interpreter's cooperative tasks (cluster blocks and thread groups on host threads). Any data race TSan reports fails the run (halt_on_error). LLVM itself is
# linked from the system's static libraries, which are not instrumented: TSan sees every access
# this project's code makes, none that LLVM's code makes.
#
# Usage: scripts/tsan.sh           (build dir: $TSAN_BUILD_DIR, default build-tsan)
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/configure.sh
build_dir="${TSAN_BUILD_DIR:-build-tsan}"
# -O1 with line tables only: the reports keep functions and lines, the build stays quick.
# GCC at -O1 inlines LLVM's User::operator new/delete pairs and warns that they mismatch
# (they do not: LLVM's GlobalVariable defines both).
configure_once "$build_dir" -Db_sanitize=thread -Dbuildtype=plain \
  -Dcpp_args='-O1 -g1 -Wno-mismatched-new-delete' -Db_lundef=false
ninja -C "$build_dir" tests/tsan/test_concurrency tests/tsan/test_cooperative_tasks
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$build_dir/tests/tsan/test_concurrency"
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
  "$build_dir/tests/tsan/test_cooperative_tasks"
