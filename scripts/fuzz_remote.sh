#!/usr/bin/env bash
# Runs the fuzz targets of a bundle built by `scripts/fuzz.sh --bundle DIR` on a Linux x86_64
# machine with glibc, nothing else needed (no clang, no LLVM; xz or python3 to unpack).
#
# Usage: bash DIR/fuzz_remote.sh DIR [options] [TARGET[=SHARE]...] [-- libFuzzer options]
#   TARGET      decode asm npy run_args capi jit (default: all six); every target runs at once
#   --workers N fuzzing processes in all (default: the number of cores)
#   --seconds S stop every process S seconds after the start (default 540)
#   --runs R    stop a target once its processes have executed R inputs together (default: no
#               limit, S decides)
#   --work W    working folder: corpora, crash inputs, logs (default DIR/work)
#   --out O     also write the summary and a .tar.gz of the findings' inputs and logs to O
#               (for the device tool, $OUT)
# Without --runs the N processes are split among the targets (SHARE, default 1, weighs a
# target) and each runs until S. With --runs each target's goal is cut into N pieces of R / N
# inputs; a process that finishes a piece takes the next one not taken, of any target, in
# turn, so the cores the fast targets no longer need go to the slow ones. A process that ends
# in a finding (crash, leak, timeout, out of memory) is started again on the rest of its piece.
# Each process is plain libFuzzer (-runs, -max_total_time, -print_final_stats=1) on the shared
# corpus DIR/work/corpus-TARGET (new inputs, read back by the others with -reload) and the
# bundle's seeds; the target's regression inputs are replayed once first.
#
# Prints per target the inputs executed (the sum over its processes of libFuzzer's final
# stat::number_of_executed_runs), the inputs per second, the processes and the findings with
# the path of each input. Exit status: 0 when no target had a finding, 1 otherwise, 2 on a
# usage error.
set -uo pipefail

usage() { sed -n '2,28p' "$0"; exit 2; }
[[ $# -ge 1 && $1 != -* ]] || usage
DIR=$(cd "$1" && pwd) || usage
shift
WORKERS=$(nproc)
SECONDS_TOTAL=540
RUNS=-1
WORK=$DIR/work
OUTDIR=
SPECS=()
EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --workers) WORKERS=$2; shift 2 ;;
    --seconds) SECONDS_TOTAL=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --work) WORK=$2; shift 2 ;;
    --out) OUTDIR=$2; shift 2 ;;
    -h|--help) usage ;;
    --) shift; EXTRA=("$@"); break ;;
    -*) echo "fuzz_remote.sh: unknown option $1" >&2; exit 2 ;;
    *) SPECS+=("$1"); shift ;;
  esac
done
[[ ${#SPECS[@]} -gt 0 ]] || SPECS=(decode asm npy run_args capi jit)
for n in "$WORKERS" "$SECONDS_TOTAL"; do
  [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "fuzz_remote.sh: $n is not a positive count" >&2; exit 2; }
done
[[ $RUNS == -1 || $RUNS =~ ^[1-9][0-9]*$ ]] ||
  { echo "fuzz_remote.sh: --runs $RUNS is not a positive count" >&2; exit 2; }
TARGETS=()
declare -A SHARE
for spec in "${SPECS[@]}"; do
  t=${spec%%=*}
  s=1
  [[ $spec == *=* ]] && s=${spec#*=}
  [[ $s =~ ^[1-9][0-9]*$ ]] || { echo "fuzz_remote.sh: bad share in $spec" >&2; exit 2; }
  if [[ ! -f $DIR/bin/fuzz_$t.xz ]]; then
    echo "fuzz_remote.sh: no target $t in $DIR/bin" >&2
    exit 2
  fi
  TARGETS+=("$t")
  SHARE[$t]=$s
done
if [[ $RUNS == -1 && $WORKERS -lt ${#TARGETS[@]} ]]; then
  echo "fuzz_remote.sh: $WORKERS workers for ${#TARGETS[@]} targets" >&2
  exit 2
fi
mkdir -p "$WORK" && WORK=$(cd "$WORK" && pwd)
RUN_ID=$(date +%Y%m%d-%H%M%S)
STATE=$WORK/run-$RUN_ID
mkdir -p "$STATE/claims" "$STATE/results" "$STATE/logs" "$WORK/bin"
touch "$STATE/start"

# ASan's reports name functions from the symbol table (the bundle's binaries keep it) through
# addr2line when there is one; there is no llvm-symbolizer on such a machine.
export ASAN_OPTIONS="allow_addr2line=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="print_stacktrace=1:${UBSAN_OPTIONS:-}"

binary() { echo "$WORK/bin/fuzz_$1"; }
for t in "${TARGETS[@]}"; do
  bin=$(binary "$t")
  if [[ ! -x $bin || $DIR/bin/fuzz_$t.xz -nt $bin ]]; then
    if command -v xz >/dev/null; then
      xz -dc "$DIR/bin/fuzz_$t.xz" >"$bin.tmp"
    else
      python3 -c 'import lzma,sys; sys.stdout.buffer.write(lzma.open(sys.argv[1]).read())' \
        "$DIR/bin/fuzz_$t.xz" >"$bin.tmp"
    fi
    chmod +x "$bin.tmp" && mv "$bin.tmp" "$bin"
  fi
  mkdir -p "$WORK/corpus-$t" "$WORK/artifacts-$t"
done

# libFuzzer options of each target: capi's programs may Print (stdout is closed); jit compiles
# with LLVM at O3 under ASan, slower and larger.
target_options() {
  local t=$1
  local opts=(-rss_limit_mb=2048 -timeout=10 -max_len=16384)
  case "$t" in
    capi) opts+=(-close_fd_mask=1) ;;
    jit) opts=(-rss_limit_mb=4096 -timeout=60 -max_len=16384) ;;
  esac
  echo "${opts[@]}"
}

any_finding=0
echo "== regression inputs"
for t in "${TARGETS[@]}"; do
  if [[ -d $DIR/regressions/$t ]] && compgen -G "$DIR/regressions/$t/*" >/dev/null; then
    # shellcheck disable=SC2046
    if "$(binary "$t")" $(target_options "$t") "$DIR/regressions/$t"/* \
         >"$STATE/logs/regressions-$t.log" 2>&1; then
      echo "   $t: $(ls "$DIR/regressions/$t" | wc -l) inputs ran clean"
    else
      echo "   $t: a regression input fails (see $STATE/logs/regressions-$t.log)"
      any_finding=1
    fi
  fi
done

# The pieces of work: "TARGET RUNS" lines, in the order they are taken.
PIECES=()
if [[ $RUNS == -1 ]]; then
  total_share=0
  for t in "${TARGETS[@]}"; do total_share=$((total_share + SHARE[$t])); done
  declare -A COUNT
  given=0
  for t in "${TARGETS[@]}"; do
    COUNT[$t]=$((WORKERS * SHARE[$t] / total_share))
    [[ ${COUNT[$t]} -ge 1 ]] || COUNT[$t]=1
    given=$((given + COUNT[$t]))
  done
  # What rounding left over goes to the targets in the order given.
  i=0
  while [[ $given -lt $WORKERS ]]; do
    t=${TARGETS[$((i % ${#TARGETS[@]}))]}
    COUNT[$t]=$((COUNT[$t] + 1))
    given=$((given + 1))
    i=$((i + 1))
  done
  for t in "${TARGETS[@]}"; do
    for ((k = 0; k < COUNT[$t]; ++k)); do PIECES+=("$t -1"); done
  done
else
  per=$(((RUNS + WORKERS - 1) / WORKERS))
  for ((k = 0; k < WORKERS; ++k)); do
    for t in "${TARGETS[@]}"; do PIECES+=("$t $per"); done
  done
fi

START=$(date +%s)
END=$((START + SECONDS_TOTAL))

# run_piece K: runs piece K until its inputs are done or the time is up, again after a finding
# (at most 20 times). Writes one line per process to results/K.N: "TARGET EXECUTED STATUS
# SECONDS".
run_piece() {
  local k=$1 t runs attempt=0 executed=0
  read -r t runs <<<"${PIECES[$k]}"
  local bin
  bin=$(binary "$t")
  while [[ $attempt -lt 20 ]]; do
    local now left
    now=$(date +%s)
    left=$((END - now))
    [[ $left -ge 2 ]] || break
    local want=-1
    if [[ $runs != -1 ]]; then
      want=$((runs - executed))
      [[ $want -gt 0 ]] || break
    fi
    local log=$STATE/logs/$t-$k-$attempt.log began
    began=$(date +%s)
    # libFuzzer checks -max_total_time between inputs (and not while it replays the corpus): an
    # interrupt 30 s later ends it too, and it still prints its final statistics.
    # shellcheck disable=SC2046
    timeout -s INT -k 10 $((left + 30)) "$bin" $(target_options "$t") -runs="$want" \
      -max_total_time="$left" -print_final_stats=1 -reload=1 \
      -artifact_prefix="$WORK/artifacts-$t/" "${EXTRA[@]}" "$WORK/corpus-$t" "$DIR/seeds/$t" >"$log" 2>&1
    local status=$?
    local n
    n=$(sed -nE 's/^stat::number_of_executed_(runs|units): *([0-9]+).*/\2/p' "$log" | tail -1)
    echo "$t ${n:-0} $status $(($(date +%s) - began))" >"$STATE/results/$k.$attempt"
    executed=$((executed + ${n:-0}))
    attempt=$((attempt + 1))
    [[ $status == 0 ]] && break
  done
}

# worker: takes the pieces in order, each once (mkdir is the lock).
worker() {
  local k
  for k in "${!PIECES[@]}"; do
    mkdir "$STATE/claims/$k" 2>/dev/null || continue
    [[ $(date +%s) -lt $((END - 1)) ]] || break
    run_piece "$k"
  done
}

echo "== fuzzing: ${TARGETS[*]} on $WORKERS processes for at most $SECONDS_TOTAL s" \
     "($([[ $RUNS == -1 ]] && echo "no input limit" || echo "goal $RUNS inputs per target"));" \
     "logs in $STATE/logs"
PIDS=()
for ((w = 0; w < WORKERS; ++w)); do
  worker &
  PIDS+=($!)
done
for pid in "${PIDS[@]}"; do wait "$pid"; done
ELAPSED=$(( $(date +%s) - START ))

SUMMARY=$STATE/summary.txt
{
  echo "== summary: $WORKERS processes, $ELAPSED s (limit $SECONDS_TOTAL s)," \
       "$([[ $RUNS == -1 ]] && echo "no input limit" || echo "goal $RUNS inputs per target")"
  echo "(inputs: the sum over the target's processes; per core: inputs / process-seconds)"
  printf '%-9s %14s %9s %9s %6s %9s  %s\n' target inputs "inputs/s" "per core" procs findings \
    goal
  for t in "${TARGETS[@]}"; do
    total=0 procs=0 busy=0
    for f in "$STATE/results"/*; do
      [[ -f $f ]] || continue
      read -r rt rn rs rsec <"$f"
      [[ $rt == "$t" ]] || continue
      total=$((total + rn))
      procs=$((procs + 1))
      busy=$((busy + rsec))
    done
    found=$(find "$WORK/artifacts-$t" -type f -newer "$STATE/start" \
              \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) |
              wc -l)
    goal=-
    [[ $RUNS != -1 ]] && { [[ $total -ge $RUNS ]] && goal=reached || goal=short; }
    printf '%-9s %14d %9d %9d %6d %9d  %s\n' "$t" "$total" \
      $((total / (ELAPSED > 0 ? ELAPSED : 1))) $((total / (busy > 0 ? busy : 1))) "$procs" \
      "$found" "$goal"
    [[ $found -gt 0 ]] && any_finding=1
  done
  findings=$(find "$WORK"/artifacts-* -type f -newer "$STATE/start" \
               \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) |
               sort)
  if [[ -n $findings ]]; then
    echo "findings (inputs; the log of each names it in 'Test unit written to'):"
    echo "$findings" | sed 's/^/  /'
  fi
  slow=$(find "$WORK"/artifacts-* -type f -newer "$STATE/start" -name 'slow-unit-*' | wc -l)
  [[ $slow -gt 0 ]] && echo "slow units (over 10 s, not findings): $slow"
  echo "result: $([[ $any_finding == 0 ]] && echo "no finding" || echo "FINDINGS")"
} >"$SUMMARY"
cat "$SUMMARY"

if [[ -n $OUTDIR ]]; then
  mkdir -p "$OUTDIR"
  cp "$SUMMARY" "$OUTDIR/fuzz-summary-$RUN_ID.txt"
  if [[ $any_finding != 0 ]]; then
    # The findings' inputs and the logs that mention them (or every log, when a regression
    # input failed).
    list=$STATE/findings.list
    find "$WORK"/artifacts-* -type f -newer "$STATE/start" \
      \( -name 'crash-*' -o -name 'leak-*' -o -name 'oom-*' -o -name 'timeout-*' \) >"$list"
    while read -r f; do
      grep -l -F "$(basename "$f")" "$STATE"/logs/*.log 2>/dev/null | head -3
    done <"$list" >>"$list"
    ls "$STATE"/logs/regressions-*.log >>"$list" 2>/dev/null
    tar -czf "$OUTDIR/fuzz-findings-$RUN_ID.tar.gz" -P -T "$list" 2>/dev/null
  fi
fi
exit $any_finding
