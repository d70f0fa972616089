#!/usr/bin/env bash
# Configures (once, warnings as errors) and builds Tilus VM into ${BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/configure.sh
build_dir="${BUILD_DIR:-build}"
configure_once "$build_dir" -Dwerror=true
ninja -C "$build_dir" "$@"
