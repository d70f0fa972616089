#!/usr/bin/env bash
# On the GPU machine: the vm/cuda mutants packed by `scripts/mutate.py --runtime-pack`. For each
# library in the pack (lib_0 = unmutated, the baseline, then one per mutation id) it runs the GPU
# tests and the runtime suite (which asserts more on a GPU host) against that library; a mutant
# is killed when either fails. Prints one line per library and the score; exit 1 when the
# baseline fails.
#   bash scripts/gpu_runtime_mutants.sh .carry-runtime-mutants-1
set -uo pipefail
cd "$(dirname "$0")/.."
pack="$(cd "${1:?usage: gpu_runtime_mutants.sh PACK_DIR}" && pwd)"
out="${OUT:-/tmp/tilusvm-gpu-mutants}"
mkdir -p "$out"
export VM_RUN="$pack/tools/vm-run"
killed=0
total=0
status=0
for lib in $(ls "$pack"/lib_*.so.0.xz | sort -V); do
  id="$(basename "$lib" .so.0.xz)"
  id="${id#lib_}"
  xz -dc "$lib" > "$pack/vm/libtilusvm_private.so.0"
  gpu=0
  runtime=0
  "$pack/tests/gpu/test_gpu" > "$out/runtime_mutant_gpu_$id.log" 2>&1 || gpu=1
  (cd /tmp && "$pack/tests/runtime/test_runtime" > "$out/runtime_mutant_runtime_$id.log" 2>&1) ||
    runtime=1
  if [ "$id" = 0 ]; then
    verdict=passed
    if [ $gpu = 1 ] || [ $runtime = 1 ]; then verdict=FAILED; status=1; fi
  else
    total=$((total + 1))
    verdict=survived
    if [ $gpu = 1 ] || [ $runtime = 1 ]; then verdict=killed; killed=$((killed + 1)); fi
  fi
  echo "$id  $verdict  (gpu tests failed: $gpu, runtime suite failed: $runtime)"
done
echo "runtime mutation score on this GPU: $killed/$total killed"
[ $status = 0 ] || echo "baseline failed: results invalid"
exit $status
