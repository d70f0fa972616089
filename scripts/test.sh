#!/usr/bin/env bash
# Installs what is needed, builds, and runs the whole test suite (every component's doctest
# executable, the conformance suite, PTX validation with ptxas, GPU tests that skip without a
# GPU, a bounded fuzz run). Prints "N passed, N failed, N skipped" last.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/deps.sh
bash scripts/build.sh
python3 tests/run_tests.py "${BUILD_DIR:-build}"
