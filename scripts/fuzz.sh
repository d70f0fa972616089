#!/usr/bin/env bash
# Build and run a libFuzzer target (tests/fuzz/fuzz_TARGET.cpp):
#   decode    the bytecode decoder and the checker (default)
#   asm       the assembler on .tasm text, then the checker and the decoder
#   npy       vm-run's .npy reader
#   run_args  vm-run's argument values (--arg scalars and buffers, --max-memory)
# The project builds with g++; libFuzzer needs clang, so this script compiles the target and
# the library sources it needs (as listed in their meson.build) directly with
# clang++-19 -fsanitize=fuzzer,address,undefined into build-fuzz/.
#
# Needs: clang-19 and libclang-rt-19-dev (libFuzzer and the sanitizer runtimes), libxxhash-dev.
#
# Usage: scripts/fuzz.sh [options] [-- extra libFuzzer arguments]
#   --target NAME     decode (default), asm, npy or run_args
#   --time SECONDS    stop after this long (default 60)
#   --runs N          stop after N inputs (default: no limit)
#   --workers N       run N fuzzing processes in parallel (default 1)
#   --decode-only     fuzz the decoder without the checker
#   --build-only      build, do not run
#   --seeds           (re)write the seed corpus tests/fuzz/corpus/ with tests/fuzz/make_seeds.cpp
#   --regressions     run every input of the target's regression folder once; fail on any crash
# Seeds and regression inputs: tests/fuzz/corpus/ and tests/fuzz/regressions/ for decode,
# tests/fuzz/corpus-TARGET/ and tests/fuzz/regressions-TARGET/ for the others (only read).
# Inputs the fuzzer finds go to build-fuzz/corpus[-TARGET]/; crashes to build-fuzz/artifacts/. Environment: FUZZ_CXX (default clang++-19),
# FUZZ_BUILD_DIR (default build-fuzz), FUZZ_JOBS (parallel compiles, default 1).
set -euo pipefail
# The body is one brace group, so bash reads all of it before running any: editing the script
# while a fuzzing run is in progress cannot change what that run executes.
{

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT=${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}
CXX=${FUZZ_CXX:-clang++-19}
JOBS=${FUZZ_JOBS:-1}
TARGET_NAME=decode
TIME=60
RUNS=-1
WORKERS=1
DECODE_ONLY=0
BUILD_ONLY=0
SEEDS=0
REGRESSIONS=0
EXTRA=()

while [[ $# -gt 0 ]]; do
  case "$1" in
    --target) TARGET_NAME=$2; shift 2 ;;
    --time) TIME=$2; shift 2 ;;
    --runs) RUNS=$2; shift 2 ;;
    --workers) WORKERS=$2; shift 2 ;;
    --decode-only) DECODE_ONLY=1; shift ;;
    --build-only) BUILD_ONLY=1; shift ;;
    --seeds) SEEDS=1; shift ;;
    --regressions) REGRESSIONS=1; shift ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if ! command -v "$CXX" >/dev/null; then
  echo "fuzz.sh: $CXX not found (apt-get install clang-19 libclang-rt-19-dev)" >&2
  exit 2
fi

VERSION=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$ROOT/meson.build" | head -1)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
FLAGS=(-std=c++20 -O1 -g "${SAN[@]}" -I"$ROOT" "-DTILUSVM_VERSION=\"$VERSION\""
       -DSPDLOG_HEADER_ONLY -DFMT_HEADER_ONLY -DSPDLOG_FMT_EXTERNAL
       -Wno-deprecated-declarations)
VARIANT=full
if [[ $DECODE_ONLY == 1 ]]; then
  FLAGS+=(-DTILUSVM_FUZZ_DECODE_ONLY)
  VARIANT=decode
fi
# xxHash linked statically, so the binary runs where libxxhash is not installed.
LIBS=(-Wl,-Bstatic -lxxhash -Wl,-Bdynamic)
COMPILE=("$CXX")
if command -v ccache >/dev/null; then
  COMPILE=(env "CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}" ccache "$CXX")
fi

# The library sources, as the meson build lists them.
sources() { grep -oE "'[A-Za-z0-9_]+\.cpp'" "$ROOT/$1/meson.build" | tr -d "'" | sed "s|^|$1/|"; }
LIB_SOURCES=($(sources isa))
case "$TARGET_NAME" in
  decode)
    if [[ $DECODE_ONLY == 0 ]]; then
      LIB_SOURCES+=($(sources loader))
    fi ;;
  asm) LIB_SOURCES+=($(sources loader) $(sources assembler)) ;;
  npy) LIB_SOURCES+=(tools/npy.cpp) ;;
  run_args) LIB_SOURCES+=(tools/run_args.cpp) ;;
  *) echo "fuzz.sh: unknown target $TARGET_NAME (decode, asm, npy, run_args)" >&2; exit 2 ;;
esac
if [[ $TARGET_NAME != decode && $DECODE_ONLY == 1 ]]; then
  echo "fuzz.sh: --decode-only is for the decode target" >&2
  exit 2
fi
if [[ $TARGET_NAME == decode ]]; then
  SEED_DIR=$ROOT/tests/fuzz/corpus
  REGRESSION_DIR=$ROOT/tests/fuzz/regressions
  WORK_CORPUS=$OUT/corpus
else
  SEED_DIR=$ROOT/tests/fuzz/corpus-$TARGET_NAME
  REGRESSION_DIR=$ROOT/tests/fuzz/regressions-$TARGET_NAME
  WORK_CORPUS=$OUT/corpus-$TARGET_NAME
fi

mkdir -p "$OUT/obj-$VARIANT" "$WORK_CORPUS" "$OUT/artifacts"
compile_one() { # source object extra-flags...
  local src=$1 obj=$2
  shift 2
  "${COMPILE[@]}" "${FLAGS[@]}" "$@" -c "$ROOT/$src" -o "$obj"
}
OBJECTS=()
for src in "${LIB_SOURCES[@]}"; do
  OBJECTS+=("$OUT/obj-$VARIANT/$(echo "$src" | tr / _ | sed 's/\.cpp$/.o/')")
done
echo "fuzz.sh: compiling ${#LIB_SOURCES[@]} sources with $CXX ($JOBS at a time)"
running=0
for i in "${!LIB_SOURCES[@]}"; do
  compile_one "${LIB_SOURCES[$i]}" "${OBJECTS[$i]}" -fsanitize=fuzzer-no-link &
  running=$((running + 1))
  if [[ $running -ge $JOBS ]]; then
    wait -n || exit 1
    running=$((running - 1))
  fi
done
while [[ $running -gt 0 ]]; do
  wait -n || exit 1
  running=$((running - 1))
done

if [[ $TARGET_NAME == decode ]]; then
  TARGET="$OUT/fuzz_decode-$VARIANT"
else
  TARGET="$OUT/fuzz_$TARGET_NAME"
fi
compile_one "tests/fuzz/fuzz_$TARGET_NAME.cpp" "$OUT/obj-$VARIANT/fuzz_$TARGET_NAME.o" \
  -fsanitize=fuzzer
"$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$OUT/obj-$VARIANT/fuzz_$TARGET_NAME.o" "${OBJECTS[@]}" \
  "${LIBS[@]}" -o "$TARGET"
echo "fuzz.sh: built $TARGET"

if [[ $SEEDS == 1 ]]; then
  if [[ $DECODE_ONLY == 1 || $TARGET_NAME != decode ]]; then
    echo "fuzz.sh: --seeds writes the decode target's corpus; drop --decode-only/--target" >&2
    exit 2
  fi
  # The assembler, to turn programs/*.tasm into seeds as well.
  ASM_OBJECTS=()
  for src in $(sources assembler); do
    obj="$OUT/obj-$VARIANT/$(echo "$src" | tr / _ | sed 's/\.cpp$/.o/')"
    compile_one "$src" "$obj"
    ASM_OBJECTS+=("$obj")
  done
  compile_one tests/fuzz/make_seeds.cpp "$OUT/obj-$VARIANT/make_seeds.o"
  "$CXX" "${FLAGS[@]}" "$OUT/obj-$VARIANT/make_seeds.o" "${ASM_OBJECTS[@]}" "${OBJECTS[@]}" \
    "${LIBS[@]}" -o "$OUT/make_seeds"
  mkdir -p "$ROOT/tests/fuzz/corpus"
  "$OUT/make_seeds" "$ROOT/tests/fuzz/corpus" "$ROOT"/programs/*.tasm "$ROOT"/programs/variants/*.tasm
fi

if [[ $BUILD_ONLY == 1 ]]; then
  exit 0
fi

if [[ $REGRESSIONS == 1 ]]; then
  shopt -s nullglob
  inputs=("$REGRESSION_DIR"/*)
  if [[ ${#inputs[@]} == 0 ]]; then
    echo "fuzz.sh: no regression inputs for $TARGET_NAME"
    exit 0
  fi
  "$TARGET" "${inputs[@]}"
  echo "fuzz.sh: ${#inputs[@]} $TARGET_NAME regression inputs ran clean"
  exit 0
fi

ARGS=(-max_total_time="$TIME" -runs="$RUNS" -timeout=10 -rss_limit_mb=2048 -max_len=16384
      -artifact_prefix="$OUT/artifacts/" -print_final_stats=1)
if [[ $WORKERS -gt 1 ]]; then
  ARGS+=(-workers="$WORKERS" -jobs="$WORKERS")
fi
exec "$TARGET" "${ARGS[@]}" "${EXTRA[@]}" "$WORK_CORPUS" "$SEED_DIR"
exit
}
