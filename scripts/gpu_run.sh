#!/usr/bin/env bash
# The one script run on the GPU machine: GPU tests (C++, and tests/python with PyTorch),
# `vm-run --check` of the paper's program at M=N=K=512, and benchmarks of the library's
# programs against baselines measured in the same run (PyTorch/cuBLAS f16 matmul for the
# matmuls, device-to-device copy bandwidth for vector_add), then the kernel cache on a GPU
# (tilusvm-cache over the entries the run made, TILUSVM_CACHE_MAX_BYTES=1 keeping one entry) and
# vm-run --dump-dir. Prints a short table last.
#
# Here (the development machine, no GPU): build and pack what travels, stripped, into .carry/
# (git-ignored; about 55 MB, under the device tool's 64 MiB):
#   bash scripts/gpu_run.sh --pack            # BUILD_DIR defaults to build-rt
# There (the device tool's `run`, carrying .carry):
#   BUILD_DIR=.carry bash scripts/gpu_run.sh
# BUILD_DIR needs tools/tilus-asm, tools/vm-run, tests/gpu/test_gpu, vm/libtilusvm_private.so.0
# (the library the tools and tests link; see vm/meson.build) and vm/libtilusvm.so.0 (the public
# library, for the Python step) (tools/tilus-tune and tools/tilusvm-cache too for their steps).
# Logs and JSON reports go to $OUT (the device tool's output folder) or /tmp/tilusvm-gpu.
#
#   BUILD_DIR=.carry bash scripts/gpu_run.sh --sanitize
# runs NVIDIA compute-sanitizer instead (memcheck, racecheck, synccheck, initcheck) over every
# program at ragged sizes (partial tiles, odd lengths) and memcheck over the GPU tests; any
# sanitizer report or CUDA API error (CUDA_ERROR_CONTEXT_IS_DESTROYED at exit included) fails
# it. Sized to finish in a few minutes on an H100.
set -uo pipefail
cd "$(dirname "$0")/.."

build="${BUILD_DIR:-build-rt}"
if [ "${1:-}" = "--pack" ]; then
  set -e
  ninja -C "$build" -j1 tools/vm-run tools/tilus-asm tools/tilus-tune tools/tilusvm-cache \
    tests/gpu/test_gpu tests/jit/test_jit_gpu vm/libtilusvm.so.0.1.0
  rm -rf .carry
  mkdir -p .carry/vm .carry/tools .carry/tests/gpu .carry/tests/jit
  # The tools and tests link libtilusvm_private; the Python package loads libtilusvm, which
  # travels xz-compressed (both uncompressed exceed the device tool's 64 MiB) and is unpacked
  # there by the run below.
  cp -L "$build/vm/libtilusvm_private.so.0" "$build/vm/libtilusvm.so.0" .carry/vm/
  # libxxhash is not part of every CUDA image; it travels beside libtilusvm_private.
  cp -L "$(ldd "$build/vm/libtilusvm_private.so.0" | awk '/libxxhash/ {print $3}')" .carry/vm/
  cp "$build/tools/vm-run" "$build/tools/tilus-asm" "$build/tools/tilus-tune" \
    "$build/tools/tilusvm-cache" .carry/tools/
  cp "$build/tests/gpu/test_gpu" .carry/tests/gpu/
  cp "$build/tests/jit/test_jit_gpu" .carry/tests/jit/
  strip --strip-unneeded .carry/vm/libtilusvm_private.so.0 .carry/vm/libtilusvm.so.0 \
    .carry/tools/* .carry/tests/gpu/test_gpu .carry/tests/jit/test_jit_gpu
  xz -T0 -6 .carry/vm/libtilusvm.so.0
  du -sh .carry
  exit 0
fi
if [ -f "$build/vm/libtilusvm.so.0.xz" ] && [ ! -f "$build/vm/libtilusvm.so.0" ]; then
  xz -dc "$build/vm/libtilusvm.so.0.xz" > "$build/vm/libtilusvm.so.0"
fi
export LD_LIBRARY_PATH="$build/vm${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
out="${OUT:-/tmp/tilusvm-gpu}"
bench_size="${BENCH_SIZE:-4096}"
mkdir -p "$out"
work="$(mktemp -d)"
export TILUSVM_CACHE_DIR="$work/cache" # a fresh disk cache: the first launch compiles
asm="$build/tools/tilus-asm"
run="$build/tools/vm-run"
status=0

step() { echo; echo "== $*"; }
fail() { echo "FAILED: $*"; status=1; }

if [ "${1:-}" = "--sanitize" ]; then
  sanitizer="$(command -v compute-sanitizer || echo /usr/local/cuda/bin/compute-sanitizer)"
  [ -x "$sanitizer" ] || { echo "compute-sanitizer not found"; exit 2; }
  # Every report is an error (exit 3), API errors included (--report-api-errors all).
  san() { # tool log command...
    local tool=$1 log=$2
    shift 2
    timeout 240 "$sanitizer" --tool "$tool" --error-exitcode 3 --report-api-errors all \
      --print-limit 20 "$@" > "$out/$log" 2>&1
    local rc=$?
    local summary
    summary=$(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|error" "$out/$log" | tail -n 1)
    if [ "$rc" -ne 0 ]; then
      fail "$tool $log (exit $rc): $summary"
      tail -n 20 "$out/$log"
    else
      echo "ok  $tool  $log  ${summary}"
    fi
  }
  step "assemble at ragged sizes"
  "$asm" programs/paper_matmul_f16_i6.tasm -D M=48 -D N=40 -D K=32 -o "$work/paper.tbc" &&
  "$asm" programs/matmul_f16_pipelined.tasm -o "$work/matmul.tbc" &&
  "$asm" programs/matmul_f16_large_tile.tasm -o "$work/matmul_large.tbc" &&
  "$asm" programs/softmax_rows.tasm -o "$work/softmax.tbc" &&
  "$asm" programs/vector_add.tasm -o "$work/vector_add.tbc" &&
  "$asm" programs/attention/prefill.tasm -D AT=bf16 -D HD=128 -D CAUSAL=1 \
    -o "$work/prefill.tbc" &&
  "$asm" programs/quant/a16wx.tasm -D PREFILL=1 -D WT=u4 -D N=256 -D K=512 -D G=128 -D ZERO=1 \
    -o "$work/a16wx_prefill.tbc" &&
  "$asm" programs/gemm/wgmma_tma.tasm -D SMS=2 -o "$work/wgmma_tma.tbc" || fail "assemble"
  for tool in memcheck racecheck synccheck initcheck; do
    step "compute-sanitizer --tool $tool"
    extra=()
    [ "$tool" = memcheck ] && extra=(--leak-check full)
    san "$tool" "$tool-vector_add.log" "${extra[@]}" "$run" "$work/vector_add.tbc" \
      --device cuda --arg x_ptr=rand:1 --arg y_ptr=rand:2 --arg n=1000
    san "$tool" "$tool-softmax.log" "${extra[@]}" "$run" "$work/softmax.tbc" --device cuda \
      --arg x_ptr=rand:1 --arg m=13
    san "$tool" "$tool-matmul.log" "${extra[@]}" "$run" "$work/matmul.tbc" --device cuda \
      --arg a_ptr=rand:1 --arg b_ptr=rand:2 --arg m=100 --arg n=72 --arg k=40
    san "$tool" "$tool-matmul_large.log" "${extra[@]}" "$run" "$work/matmul_large.tbc" \
      --device cuda --arg a_ptr=rand:1 --arg b_ptr=rand:2 --arg m=130 --arg n=200 --arg k=48
    san "$tool" "$tool-paper_transform_b.log" "${extra[@]}" "$run" "$work/paper.tbc" \
      --kernel transform_b --device cuda --arg b_ptr=rand:7 --save \
      transformed_b_ptr="$work/tb.npy"
    san "$tool" "$tool-paper_matmul.log" "${extra[@]}" "$run" "$work/paper.tbc" \
      --kernel matmul --device cuda --arg a_ptr=rand:1 --arg transformed_b_ptr=@"$work/tb.npy"
    # TMA loads and stores, mbarriers and wgmma (register A included); ragged sizes
    san "$tool" "$tool-prefill.log" "${extra[@]}" "$run" "$work/prefill.tbc" --device cuda \
      --arg q_ptr=rand:1 --arg k_ptr=rand:2 --arg v_ptr=rand:3 --arg batch=2 --arg seq_q=300 \
      --arg seq_k=333 --arg heads=4 --arg kv_heads=2 --arg scale=0.088
    san "$tool" "$tool-a16wx_prefill.log" "${extra[@]}" "$run" "$work/a16wx_prefill.tbc" \
      --kernel matmul --device cuda --arg a_ptr=rand:1 --arg wq_ptr=rand:2 --arg s_ptr=rand:3 \
      --arg z_ptr=rand:4 --arg m=200
    # the persistent TMA GEMM: two blocks walking nine tiles, C stored in halves
    san "$tool" "$tool-wgmma_tma.log" "${extra[@]}" "$run" "$work/wgmma_tma.tbc" --device cuda \
      --arg a_ptr=rand:1 --arg b_ptr=rand:2 --arg m=300 --arg n=520 --arg k=136
  done
  step "compute-sanitizer --tool memcheck: gpu tests"
  # Less the case that makes a driver call fail on purpose (an out-of-memory cuMemAlloc).
  san memcheck memcheck-test_gpu.log "$build/tests/gpu/test_gpu" \
    "--test-case-exclude=*deliberate out-of-memory*"
  rm -rf "$work"
  echo
  [ "$status" -eq 0 ] && echo "sanitizers: clean" || echo "sanitizers: FAILED"
  exit "$status"
fi

step "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader || true

step "gpu tests"
"$build/tests/gpu/test_gpu" 2>&1 | tee "$out/test_gpu.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || fail "gpu tests"
if [ -x "$build/tests/jit/test_jit_gpu" ]; then
  # The JIT against the CPU interpreter, every instruction family (programs read from here).
  TILUSVM_SOURCE_ROOT="$PWD" "$build/tests/jit/test_jit_gpu" > "$out/test_jit_gpu.log" 2>&1 ||
    fail "jit differential tests"
  tail -n 3 "$out/test_jit_gpu.log"
fi

step "python tests (the tilusvm package with NumPy and PyTorch: tests/python)"
PYTHONPATH="$PWD/python" TILUSVM_LIBRARY="$(ls "$build"/vm/libtilusvm.so* | head -n 1)" \
  TILUS_ASM="$asm" python3 tests/python/run.py > "$out/test_python.log" 2>&1 || fail "python tests"
grep -E "^(FAIL|ERROR):|^\[python\]" "$out/test_python.log"

step "assemble"
"$asm" programs/paper_matmul_f16_i6.tasm -D M=512 -D N=512 -D K=512 -o "$work/paper512.tbc" &&
"$asm" programs/paper_matmul_f16_i6.tasm -D M="$bench_size" -D N="$bench_size" \
  -D K="$bench_size" -o "$work/paper_bench.tbc" &&
"$asm" programs/matmul_f16_pipelined.tasm -o "$work/matmul.tbc" &&
"$asm" programs/matmul_f16_large_tile.tasm -o "$work/matmul_large.tbc" &&
"$asm" programs/vector_add.tasm -o "$work/vector_add.tbc" || fail "assemble"

step "vm-run --check: paper matmul at M=N=K=512"
"$run" "$work/paper512.tbc" --kernel transform_b --check --arg b_ptr=rand:7 \
  --save transformed_b_ptr="$work/tb512.npy" || fail "check transform_b"
"$run" "$work/paper512.tbc" --kernel matmul --check --arg a_ptr=rand:1 \
  --arg transformed_b_ptr=@"$work/tb512.npy" --save c_ptr="$out/paper512_c.npy" \
  --json > "$out/check_paper512.json" || fail "check matmul"
python3 - "$out/check_paper512.json" <<'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
for b in r.get("check", {}).get("buffers", []):
    print(f"check {b['name']}: ok={b['ok']} written={b['written']} mismatches={b['mismatches']} "
          f"max_abs={b['max_abs_error']:.3g} max_rel={b['max_rel_error']:.3g} rel_l2={b['rel_l2_error']:.3g}")
EOF

step "benchmarks (vm-run --bench, CUDA events, median of 100 after 10 warm-up)"
n="$bench_size"
"$run" "$work/paper_bench.tbc" --kernel matmul --device cuda --arg a_ptr=rand:1 \
  --arg transformed_b_ptr=rand:2 --bench --json > "$out/bench_paper.json" || fail "bench paper"
"$run" "$work/matmul.tbc" --device cuda --arg a_ptr=rand:1 --arg b_ptr=rand:2 \
  --arg m="$n" --arg n="$n" --arg k="$n" --bench --json > "$out/bench_matmul.json" ||
  fail "bench matmul"
"$run" "$work/matmul_large.tbc" --device cuda --arg a_ptr=rand:1 --arg b_ptr=rand:2 \
  --arg m="$n" --arg n="$n" --arg k="$n" --bench --json > "$out/bench_matmul_large.json" ||
  fail "bench matmul large tile"
vec_n=$((1 << 26))
"$run" "$work/vector_add.tbc" --device cuda --arg x_ptr=rand:1 --arg y_ptr=rand:2 \
  --arg n="$vec_n" --bench --json > "$out/bench_vector_add.json" || fail "bench vector_add"

step "kernel cache and introspection: tilusvm-cache, TILUSVM_CACHE_MAX_BYTES, vm-run --dump-dir"
if [ -x "$build/tools/tilusvm-cache" ]; then
  # The runs above filled the cache: every entry is of this build, none corrupt.
  "$build/tools/tilusvm-cache" --dir "$TILUSVM_CACHE_DIR" stats || fail "tilusvm-cache stats"
  "$build/tools/tilusvm-cache" --dir "$TILUSVM_CACHE_DIR" stats --json > "$out/cache_stats.json"
  python3 - "$out/cache_stats.json" <<'EOF' || fail "cache entries"
import json, sys
s = json.load(open(sys.argv[1]))
assert s["entries"] >= 4 and s["other_build_entries"] == 0 and s["corrupt_entries"] == 0, s
print(f"cache: {s['entries']} entries of this build, {s['bytes']} bytes")
EOF
  # A cap of one byte keeps only the entry stored last.
  capped="$work/capped"
  TILUSVM_CACHE_DIR="$capped" TILUSVM_CACHE_MAX_BYTES=1 "$run" "$work/vector_add.tbc" \
    --device cuda --arg x_ptr=rand:1 --arg y_ptr=rand:2 --arg n=1000 > /dev/null &&
    TILUSVM_CACHE_DIR="$capped" TILUSVM_CACHE_MAX_BYTES=1 "$run" "$work/matmul.tbc" \
      --device cuda --arg a_ptr=rand:1 --arg b_ptr=rand:2 --arg m=64 --arg n=64 --arg k=64 \
      > /dev/null || fail "capped runs"
  "$build/tools/tilusvm-cache" --dir "$capped" list
  kept=$(find "$capped" -name '*.tvmk' | wc -l)
  [ "$kept" = 1 ] || fail "TILUSVM_CACHE_MAX_BYTES=1 kept $kept entries, expected 1"
else
  echo "no $build/tools/tilusvm-cache; skipped"
fi
"$run" "$work/vector_add.tbc" --device cuda --arg x_ptr=rand:1 --arg y_ptr=rand:2 --arg n=1000 \
  --dump-dir "$out/dump" || fail "vm-run --dump-dir"
ls "$out/dump"
grep -q "\.entry vector_add(" "$out"/dump/vector_add.sm_*.ptx &&
  grep -q "define ptx_kernel void @vector_add(" "$out"/dump/vector_add.sm_*.ll ||
  fail "--dump-dir: no vector_add kernel in the files kept"

step "tilus-tune: matmul_f16_pipelined over STAGES and BK (BK=16 fails the checker)"
if [ -x "$build/tools/tilus-tune" ]; then
  "$build/tools/tilus-tune" programs/matmul_f16_pipelined.tasm --kernel matmul_f16 \
    --space 'STAGES=2,3,4;BK=16,32' --arg a_ptr=rand:1 --arg b_ptr=rand:2 --arg m="$n" \
    --arg n="$n" --arg k="$n" --json "$out/tune_matmul.json" || fail "tilus-tune"
else
  echo "no $build/tools/tilus-tune; skipped"
fi

step "baselines (PyTorch, same run)"
python3 - "$n" "$vec_n" > "$out/baseline.json" <<'EOF' || fail "baselines"
import json, sys
import torch
sys.path.insert(0, "scripts")
from bench_common import torch_bench
n, vec_n = int(sys.argv[1]), int(sys.argv[2])
def bench(fn):
    return torch_bench(fn, iters=100)
a = torch.rand(n, n, device="cuda", dtype=torch.float16) * 2 - 1
b = torch.rand(n, n, device="cuda", dtype=torch.float16) * 2 - 1
c = torch.empty(n, n, device="cuda", dtype=torch.float16)
mm = bench(lambda: torch.matmul(a, b, out=c))
src = torch.rand(vec_n * 3, device="cuda", dtype=torch.float32)
dst = torch.empty_like(src)
cp = bench(lambda: dst.copy_(src))
print(json.dumps({"device": torch.cuda.get_device_name(), "matmul_ms": mm, "copy_ms": cp,
                  "copy_bytes": 2 * src.numel() * 4}))
EOF

step "summary"
python3 - "$out" "$n" "$vec_n" <<'EOF' || fail "summary"
import json, os, sys
out, n, vec_n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def load(name):
    try:
        return json.load(open(os.path.join(out, name)))
    except Exception as e:
        return {"error": str(e)}
base = load("baseline.json")
flops = 2.0 * n * n * n
rows = []
def add(name, size, report, rate_fn, unit, base_rate, base_name):
    ms = report.get("bench", {}).get("median_ms")
    if ms is None:
        rows.append((name, size, "failed", "", base_name, "")); return
    rate = rate_fn(ms)
    ratio = f"{rate / base_rate:.2f}x" if base_rate else "n/a"
    rows.append((name, size, f"{ms:.4f}", f"{rate:.1f} {unit}", f"{base_name} {base_rate:.1f} {unit}" if base_rate else base_name, ratio))
mm_rate = flops / (base["matmul_ms"] * 1e-3) / 1e12 if "matmul_ms" in base else 0
bw = base["copy_bytes"] / (base["copy_ms"] * 1e-3) / 1e9 if "copy_ms" in base else 0
add("paper f16 x i6 matmul", f"{n}^3", load("bench_paper.json"),
    lambda ms: flops / (ms * 1e-3) / 1e12, "TFLOP/s", mm_rate, "cuBLAS f16")
add("matmul_f16_pipelined", f"{n}^3", load("bench_matmul.json"),
    lambda ms: flops / (ms * 1e-3) / 1e12, "TFLOP/s", mm_rate, "cuBLAS f16")
add("matmul_f16_large_tile", f"{n}^3", load("bench_matmul_large.json"),
    lambda ms: flops / (ms * 1e-3) / 1e12, "TFLOP/s", mm_rate, "cuBLAS f16")
add("vector_add f32", f"2^{vec_n.bit_length() - 1}", load("bench_vector_add.json"),
    lambda ms: 12.0 * vec_n / (ms * 1e-3) / 1e9, "GB/s", bw, "D2D copy")
chk = load("check_paper512.json")
print(f"device: {base.get('device', '?')}")
print(f"check paper matmul 512^3 (cuda vs cpu): {'ok' if chk.get('ok') else 'FAILED'}")
hdr = ("program", "size", "median ms", "rate", "baseline (same run)", "ratio")
widths = [max(len(str(r[i])) for r in rows + [hdr]) for i in range(len(hdr))]
for r in [hdr] + rows:
    print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
EOF
rm -rf "$work"
exit "$status"
