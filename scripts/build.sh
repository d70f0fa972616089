#!/usr/bin/env bash
# Configures (once, warnings as errors) and builds Tilus VM into ${BUILD_DIR:-build}.
set -euo pipefail
cd "$(dirname "$0")/.."
build_dir="${BUILD_DIR:-build}"
if command -v ccache >/dev/null && [ -z "${CXX:-}" ]; then
  export CXX="ccache g++"
fi
if [ ! -f "$build_dir/build.ninja" ]; then
  meson setup -Dwerror=true "$build_dir" >/dev/null
fi
ninja -C "$build_dir" "$@"
