#!/usr/bin/env bash
# Build and run a libFuzzer target (tests/fuzz/fuzz_TARGET.cpp):
#   decode    the bytecode decoder and the checker (default)
#   asm       the assembler on .tasm text, then the checker and the decoder
#   npy       vm-run's .npy reader
#   run_args  vm-run's argument values (--arg scalars and buffers, --max-memory)
#   capi      the C API's module and launch entry points on the CPU interpreter
#   jit       the JIT (sm_80 and sm_90a) on every program the checker accepts
# The project builds with g++; libFuzzer needs clang, so this script compiles the target and
# the library sources it needs (as listed in their meson.build) directly with
# clang++-19 -fsanitize=fuzzer,address,undefined into build-fuzz/.
#
# Needs: clang-19 and libclang-rt-19-dev (libFuzzer and the sanitizer runtimes), libxxhash-dev.
#
# Usage: scripts/fuzz.sh [options] [-- extra libFuzzer arguments]
#   --target NAME     decode (default), asm, npy, run_args, capi or jit
#   --time SECONDS    stop after this long (default 60)
#   --runs N          stop after N inputs (default: no limit)
#   --workers N       run N fuzzing processes in parallel (default 1)
#   --decode-only     fuzz the decoder without the checker
#   --build-only      build, do not run
#   --seeds           (re)write the seed corpus tests/fuzz/corpus/ with tests/fuzz/make_seeds.cpp
#   --regressions     run every input of the target's regression folder once; fail on any crash
#   --bundle DIR      build every target into DIR, a self-contained folder (about 33 MB) to fuzz
#                     on another x86_64 Linux machine with glibc 2.36 or newer and no compiler:
#                     the binaries stripped of debug info (symbol tables kept) and compressed
#                     with xz (LLVM, xxHash, zstd and zlib linked statically), the seeds, the
#                     regression inputs and scripts/fuzz_remote.sh, which runs them there:
#                       bash DIR/fuzz_remote.sh DIR --workers 16 --seconds 500 --runs 10000000
# Seeds and regression inputs: tests/fuzz/corpus/ and tests/fuzz/regressions/ for decode,
# tests/fuzz/corpus-TARGET/ and tests/fuzz/regressions-TARGET/ for the others (only read; jit
# takes the seeds of asm). Inputs the fuzzer finds go to build-fuzz/corpus[-TARGET]/; crashes to
# build-fuzz/artifacts/. Environment: FUZZ_CXX (default clang++-19), FUZZ_BUILD_DIR (default
# build-fuzz), FUZZ_JOBS (parallel compiles, default 1).
# The capi and jit targets link LLVM (llvm-config-19, its static libraries, not instrumented)
# and need cuda.h (FUZZ_CUDA_ROOT, default /usr/local/cuda); the JIT's generated sources (the
# device library bitcode, the source hash) are made here as jit/meson.build makes them.
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
BUNDLE=
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
    --bundle) BUNDLE=$2; shift 2 ;;
    --) shift; EXTRA=("$@"); break ;;
    -h|--help) sed -n '2,37p' "$0"; exit 0 ;;
    *) echo "fuzz.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done

if ! command -v "$CXX" >/dev/null; then
  echo "fuzz.sh: $CXX not found (apt-get install clang-19 libclang-rt-19-dev)" >&2
  exit 2
fi

VERSION=$(sed -n "s/^ *version *: *'\([^']*\)'.*/\1/p" "$ROOT/meson.build" | head -1)
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
BASE_FLAGS=(-std=c++20 -O1 -g "${SAN[@]}" -I"$ROOT" "-DTILUSVM_VERSION=\"$VERSION\""
            -DSPDLOG_HEADER_ONLY -DFMT_HEADER_ONLY -DSPDLOG_FMT_EXTERNAL
            -Wno-deprecated-declarations)
# xxHash, zstd and zlib linked statically (LLVM is static), so the binaries run where none of
# them is installed; -no-pie because Debian's libzstd.a is not PIC. libstdc++ stays shared: a
# static one brings its own operator new and delete, which then mix with the sanitizer's
# (AddressSanitizer reports alloc-dealloc-mismatch); every machine with glibc has it.
LIBS=(-no-pie -Wl,-Bstatic -lxxhash -Wl,-Bdynamic)
COMPILE=("$CXX")
if command -v ccache >/dev/null; then
  COMPILE=(env "CCACHE_DIR=${CCACHE_DIR:-/work/.ccache}" ccache "$CXX")
fi
CUDA_ROOT=${FUZZ_CUDA_ROOT:-/usr/local/cuda}
LLVM_CONFIG=llvm-config-19

# The library sources, as the meson build lists them.
sources() { grep -oE "'[A-Za-z0-9_]+\.cpp'" "$ROOT/$1/meson.build" | tr -d "'" | sed "s|^|$1/|"; }
vm_sources() { grep -oE "'(cpu|cuda)/[A-Za-z0-9_]+\.cpp'" "$ROOT/vm/meson.build" | tr -d "'" |
               sed "s|^|vm/|"; }

# The JIT's generated sources, made as jit/meson.build makes them: the device library bitcode
# embedded in a C++ array ($OUT/gen/jit/devlib_bitcode.cpp) and the hash of the sources that
# decide the generated code ($OUT/gen/jit/source_hash.h, included as "jit/source_hash.h").
jit_generate() {
  local gen=$OUT/gen/jit
  mkdir -p "$gen"
  if [[ ! -f $gen/devlib_bitcode.cpp || $ROOT/jit/devlib/devlib.cpp -nt $gen/devlib_bitcode.cpp ||
        $ROOT/jit/devlib/devlib.h -nt $gen/devlib_bitcode.cpp ]]; then
    "$CXX" -std=c++20 -target nvptx64-nvidia-cuda -march=sm_80 -O2 -ffp-contract=off \
      -fno-math-errno -ffreestanding -nostdlibinc -I"$ROOT" -emit-llvm -c \
      "$ROOT/jit/devlib/devlib.cpp" -o "$gen/devlib.bc"
    python3 "$ROOT/jit/embed_bitcode.py" "$gen/devlib.bc" "$gen/devlib_bitcode.cpp"
  fi
  python3 "$ROOT/jit/source_hash.py" "$gen/source_hash.h.new" "$gen/source_hash.d" "$ROOT" \
    isa loader jit
  if cmp -s "$gen/source_hash.h.new" "$gen/source_hash.h"; then
    rm "$gen/source_hash.h.new"
  else
    mv "$gen/source_hash.h.new" "$gen/source_hash.h"
  fi
}

compile_one() { # source object extra-flags...
  local src=$1 obj=$2
  shift 2
  [[ $src == /* ]] || src=$ROOT/$src
  "${COMPILE[@]}" "${FLAGS[@]}" "$@" -c "$src" -o "$obj"
}

# build_target NAME: compiles the target and the library sources it needs into $OUT, sets
# TARGET to the binary.
build_target() {
  local name=$1 variant=full
  FLAGS=("${BASE_FLAGS[@]}")
  local link=("${LIBS[@]}")
  LIB_SOURCES=($(sources isa))
  case "$name" in
    decode)
      if [[ $DECODE_ONLY == 0 ]]; then
        LIB_SOURCES+=($(sources loader))
      else
        FLAGS+=(-DTILUSVM_FUZZ_DECODE_ONLY)
        variant=decode
      fi ;;
    asm) LIB_SOURCES+=($(sources loader) $(sources assembler)) ;;
    npy) LIB_SOURCES+=(tools/npy.cpp) ;;
    run_args) LIB_SOURCES+=(tools/run_args.cpp) ;;
    capi|jit)
      variant=llvm
      if ! command -v "$LLVM_CONFIG" >/dev/null || [[ ! -f $CUDA_ROOT/include/cuda.h ]]; then
        echo "fuzz.sh: $name needs $LLVM_CONFIG and $CUDA_ROOT/include/cuda.h" >&2
        exit 2
      fi
      jit_generate
      # LLVM's own definitions (-D_GNU_SOURCE, -D__STDC_*_MACROS) from llvm-config, as meson
      # takes them; its include directory as a system one.
      FLAGS+=(-isystem "$($LLVM_CONFIG --includedir)" -isystem "$CUDA_ROOT/include"
              -I"$OUT/gen" $($LLVM_CONFIG --cxxflags | tr ' ' '\n' | grep '^-D'))
      # (jit/meson.build names the generated devlib_bitcode.cpp as an output too.)
      LIB_SOURCES+=($(sources loader) $(sources assembler)
                    $(sources jit | grep -v '/devlib_bitcode\.cpp$')
                    "$OUT/gen/jit/devlib_bitcode.cpp")
      [[ $name == capi ]] && LIB_SOURCES+=($(vm_sources) vm/capi.cpp vm/capi_assemble.cpp)
      link+=(-L"$($LLVM_CONFIG --libdir)" $($LLVM_CONFIG --link-static --libs nvptx irreader passes)
             -Wl,-Bstatic -lzstd -lz -Wl,-Bdynamic -ldl -lpthread) ;;
    *) echo "fuzz.sh: unknown target $name (decode, asm, npy, run_args, capi, jit)" >&2; exit 2 ;;
  esac
  mkdir -p "$OUT/obj-$variant"
  OBJECTS=()
  for src in "${LIB_SOURCES[@]}"; do
    OBJECTS+=("$OUT/obj-$variant/$(basename "$(dirname "$src")")_$(basename "${src%.cpp}").o")
  done
  echo "fuzz.sh: $name: compiling ${#LIB_SOURCES[@]} sources with $CXX ($JOBS at a time)"
  local running=0
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
  if [[ $name == decode ]]; then
    TARGET="$OUT/fuzz_decode-$variant"
  else
    TARGET="$OUT/fuzz_$name"
  fi
  compile_one "tests/fuzz/fuzz_$name.cpp" "$OUT/obj-$variant/fuzz_$name.o" -fsanitize=fuzzer
  "$CXX" "${FLAGS[@]}" -fsanitize=fuzzer "$OUT/obj-$variant/fuzz_$name.o" "${OBJECTS[@]}" \
    "${link[@]}" -o "$TARGET"
  echo "fuzz.sh: built $TARGET"
}

seed_dir() { [[ $1 == decode ]] && echo "$ROOT/tests/fuzz/corpus" ||
             echo "$ROOT/tests/fuzz/corpus-$1"; }
regression_dir() { [[ $1 == decode ]] && echo "$ROOT/tests/fuzz/regressions" ||
                   echo "$ROOT/tests/fuzz/regressions-$1"; }
# The seeds of jit are the assembler's (.tasm text).
[[ $TARGET_NAME == jit ]] && jit_seeds=1 || jit_seeds=0

if [[ -n $BUNDLE ]]; then
  mkdir -p "$BUNDLE/bin" "$BUNDLE/seeds" "$BUNDLE/regressions"
  for t in decode asm npy run_args capi jit; do
    build_target "$t"
    cp "$TARGET" "$BUNDLE/bin/fuzz_$t"
    strip --strip-debug "$BUNDLE/bin/fuzz_$t"
    xz -T1 -6 -f "$BUNDLE/bin/fuzz_$t"
    src=$(seed_dir "$t")
    [[ $t == jit ]] && src=$(seed_dir asm)
    rm -rf "$BUNDLE/seeds/$t"
    cp -r "$src" "$BUNDLE/seeds/$t"
    if [[ -d $(regression_dir "$t") ]]; then
      rm -rf "$BUNDLE/regressions/$t"
      cp -r "$(regression_dir "$t")" "$BUNDLE/regressions/$t"
    fi
  done
  cp "$ROOT/scripts/fuzz_remote.sh" "$BUNDLE/fuzz_remote.sh"
  ls -l "$BUNDLE/bin"
  bytes=$(du -sb "$BUNDLE" | cut -f1)
  echo "fuzz.sh: bundle $BUNDLE: $bytes bytes in all"
  if [[ $bytes -ge $((64 << 20)) ]]; then
    echo "fuzz.sh: the bundle is 64 MiB or more (remove $BUNDLE/work if a run left it there)" >&2
    exit 1
  fi
  exit 0
fi

if [[ $TARGET_NAME != decode && $DECODE_ONLY == 1 ]]; then
  echo "fuzz.sh: --decode-only is for the decode target" >&2
  exit 2
fi
VARIANT=full
[[ $DECODE_ONLY == 1 ]] && VARIANT=decode
SEED_DIR=$(seed_dir "$TARGET_NAME")
[[ $jit_seeds == 1 ]] && SEED_DIR=$(seed_dir asm)
REGRESSION_DIR=$(regression_dir "$TARGET_NAME")
if [[ $TARGET_NAME == decode ]]; then
  WORK_CORPUS=$OUT/corpus
else
  WORK_CORPUS=$OUT/corpus-$TARGET_NAME
fi
mkdir -p "$WORK_CORPUS" "$OUT/artifacts"
build_target "$TARGET_NAME"

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
# capi: programs may Print (the interpreter writes to stdout); jit: O3 and PTX emission of a
# large program under ASan take seconds.
[[ $TARGET_NAME == capi ]] && ARGS+=(-close_fd_mask=1)
[[ $TARGET_NAME == jit ]] && ARGS+=(-timeout=60)
exec "$TARGET" "${ARGS[@]}" "${EXTRA[@]}" "$WORK_CORPUS" "$SEED_DIR"
exit
}
