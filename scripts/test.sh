#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite: a bounded fuzz run of the
# bytecode decoder and checker (sanitizers on, with the checked-in seeds and regression inputs),
# then every component's doctest executable, the conformance suite, PTX validation with ptxas,
# and GPU tests that skip without a GPU. Prints "N passed, N failed, N skipped" last.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
fuzz_seconds="${FUZZ_SECONDS:-60}"
if [ "$fuzz_seconds" -gt 0 ]; then
  echo "== fuzz: regression inputs, then ${fuzz_seconds} s of new inputs"
  bash scripts/fuzz.sh --regressions
  bash scripts/fuzz.sh --time "$fuzz_seconds" -- -print_final_stats=1 2>&1 | tail -n 12
fi
echo "== tests"
python3 tests/run_tests.py "${BUILD_DIR:-build}"
