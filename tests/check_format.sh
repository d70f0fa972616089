#!/usr/bin/env bash
# Checks that every tracked C++ file follows the repository's .clang-format (clang-format 19,
# the version that matches the LLVM the project builds with). Usage: check_format.sh SOURCE_DIR
set -euo pipefail
cd "$1"
fmt=$(command -v clang-format-19 || true)
if [ -z "$fmt" ]; then
  echo "format check: clang-format-19 is not installed (bash scripts/deps.sh installs it)" >&2
  exit 1
fi
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.hpp')
bad=$("$fmt" --dry-run "${files[@]}" 2>&1 | sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: warning:.*/\1/p' | sort -u)
if [ -n "$bad" ]; then
  echo "format check: these files differ from clang-format-19 (run clang-format-19 -i on them):"
  echo "$bad"
  exit 1
fi
echo "format check: ${#files[@]} files follow .clang-format"
