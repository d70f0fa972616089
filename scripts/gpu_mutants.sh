#!/usr/bin/env bash
# On the GPU machine: the JIT mutants packed by `scripts/mutate.py --gpu-pack` against the
# unmutated differential test. For each PTX set (0 = the unmutated JIT, the baseline, then one
# per mutation id) it installs the kernels into a fresh disk cache under the keys this device's
# runtime computes, runs the `gpu:` cases of test_jit_gpu with TILUSVM_DIFF_CACHE_DIR pointing at
# it, and counts the cache entries the run had to compile itself (misses: must be 0, else the
# run did not test the mutant's kernels). Prints a table and the score; exit 1 when the
# baseline fails or misses.
#   bash scripts/gpu_mutants.sh .carry-mutants [ID ...]
set -uo pipefail
cd "$(dirname "$0")/.."
pack="${1:?usage: gpu_mutants.sh PACK_DIR [ID ...]}"
shift
export LD_LIBRARY_PATH="$pack/vm${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Unspecialised launches: the packed PTX was compiled without launch-time specialisation, and
# the keys mutant_kernels installs are the unspecialised ones.
export TILUSVM_SPECIALIZE=0
out="${OUT:-/tmp/tilusvm-gpu-mutants}"
work="$(mktemp -d)"
mkdir -p "$out"
ids=("$@")
if [ ${#ids[@]} -eq 0 ]; then
  ids=(0)
  for f in "$pack"/ptx/*.tar.xz; do
    id="$(basename "$f" .tar.xz)"
    [ "$id" = 0 ] || ids+=("$id")
  done
fi
killed=0
total=0
baseline_ok=1
printf '%-4s %-9s %-7s %s\n' id status misses detail | tee "$out/mutants.txt"
for id in "${ids[@]}"; do
  rm -rf "$work/ptx" "$work/cache"
  mkdir -p "$work/ptx" "$work/cache"
  tar -xJf "$pack/ptx/$id.tar.xz" -C "$work/ptx"
  "$pack/tests/jit/mutant_kernels" install "$pack/modules" "$work/ptx" "$work/cache" \
    > "$out/install_$id.log" 2>&1 || {
    echo "$id install failed"; cat "$out/install_$id.log"
    [ "$id" = 0 ] && baseline_ok=0
    continue
  }
  before=$(ls "$work/cache" | wc -l)
  start=$(date +%s)
  TILUSVM_SOURCE_ROOT="$pack" TILUSVM_DIFF_CACHE_DIR="$work/cache" timeout 540 "$pack/tests/jit/test_jit_gpu" -tc='gpu: *' \
    > "$out/mutant_$id.log" 2>&1
  rc=$?
  misses=$(( $(ls "$work/cache" | wc -l) - before ))
  detail="$(grep -m1 -o 'buffer [a-z_]* element [0-9]*\|ERROR: .*' "$out/mutant_$id.log" | head -c 70)"
  detail="$detail ($(( $(date +%s) - start )) s)"
  if [ "$id" = 0 ]; then
    status=$([ $rc -eq 0 ] && echo passed || echo FAILED)
    [ $rc -eq 0 ] && [ "$misses" -eq 0 ] || baseline_ok=0
  else
    total=$((total + 1))
    if [ $rc -ne 0 ]; then status=killed; killed=$((killed + 1)); else status=survived; fi
  fi
  printf '%-4s %-9s %-7s %s\n' "$id" "$status" "$misses" "$detail" | tee -a "$out/mutants.txt"
done
[ "$total" -gt 0 ] && echo "gpu mutation score: $killed/$total killed" | tee -a "$out/mutants.txt"
[ "$baseline_ok" -eq 1 ] || { echo "baseline failed or missed the cache: results invalid"; exit 1; }
