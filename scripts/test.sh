#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite: a bounded fuzz run of the
# bytecode decoder and checker, the assembler, the .npy reader, vm-run's argument values, the C
# API's module and launch entry points (CPU) and the JIT
# (sanitizers on, with the checked-in seeds and regression inputs),
# then a ThreadSanitizer build and run of the concurrency tests (scripts/tsan.sh),
# then every component's doctest executable, the conformance suite, PTX validation with ptxas,
# and GPU tests that skip without a GPU. Prints "N passed, N failed, N skipped" last.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
fuzz_seconds="${FUZZ_SECONDS:-60}"
# The sanitizer builds of the fuzz targets compile on every core.
export FUZZ_JOBS="${FUZZ_JOBS:-$(nproc)}"
if [ "$fuzz_seconds" -gt 0 ]; then
  # The time is split across the targets: a third to the decoder and checker, the rest evenly.
  echo "== fuzz: regression inputs, then ${fuzz_seconds} s of new inputs over 6 targets"
  for target in decode asm npy run_args capi jit; do
    bash scripts/fuzz.sh --target "$target" --regressions
    if [ "$target" = decode ]; then
      seconds=$((fuzz_seconds / 3))
    else
      seconds=$(((fuzz_seconds - fuzz_seconds / 3) / 5))
    fi
    [ "$seconds" -ge 1 ] || seconds=1
    bash scripts/fuzz.sh --target "$target" --time "$seconds" -- -print_final_stats=1 2>&1 |
      tail -n 12
  done
fi
echo "== ThreadSanitizer: kernels compiled and cached from many threads, the interpreter's cooperative tasks (tests/tsan)"
tsan_start=$(date +%s)
bash scripts/tsan.sh 2>&1 | tail -n 8
echo "ThreadSanitizer build and run: $(($(date +%s) - tsan_start)) s"
echo "== tests"
python3 tests/run_tests.py "${BUILD_DIR:-build}"
