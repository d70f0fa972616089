#!/usr/bin/env bash
# Installs the Debian packages Tilus VM needs to build and test (docs/design.md, "Dependencies").
# Idempotent: skips apt-get when every package is already installed.
set -euo pipefail

packages=(
  build-essential meson ninja-build pkg-config ccache python3 python3-numpy clang-format-19
  llvm-19-dev clang-19 libclang-rt-19-dev
  libspdlog-dev libfmt-dev doctest-dev libcli11-dev libxxhash-dev nlohmann-json3-dev
  zlib1g-dev libzstd-dev
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi

sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo="sudo"
fi
echo "deps: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
