#!/usr/bin/env bash
# Fuzzes the parsers: the libFuzzer targets in tests/fuzz/ (config JSON,
# safetensors, PNG, JPEG, WebP, TIFF, GIF, BMP, COCO RLE) and the converter's pickle reader
# (tests/fuzz/fuzz_convert.py).
#
#   scripts/fuzz.sh                  reproducible (make fuzz, make check, CI): mutation seed
#                                    FUZZ_SEED (default 1) and a fixed number of executions per
#                                    target (RUNS below, about a minute each here), so the same
#                                    code gets the same verdict on any machine, however loaded
#   FUZZ_JOBS=N scripts/fuzz.sh ...  N targets at once (default: the core count)
#   scripts/fuzz.sh explore [SECONDS]  fresh mutation seeds (printed in the log), SECONDS per
#                                    target (default 60): finds new inputs (make fuzz-explore)
#   scripts/fuzz.sh replay           every seed and regression input once, no mutation
#   FUZZ_TARGETS="rle png" scripts/fuzz.sh ...   a subset (names: config weights png jpeg webp tiff gif bmp
#                                    rle convert)
#
# Builds into build/fuzz/ with its own clang command lines (ASan + UBSan +
# libFuzzer; only the engine files each target needs, so no oneDNN), runs
# each target on a copy of its seed corpus (tests/fuzz/corpus/<target>/) and
# of its past crashes (tests/fuzz/regressions/<target>/; the committed files
# never change), with its dictionary where there is one. Every copied input
# runs first, before any mutation, so a crash that comes back fails the run
# even at SECONDS=0. Then prints per target: executions, run time, crashes.
# Exits 1 on any crash, leaving the input in build/fuzz/crashes/ (a target's
# inputs from an earlier run are removed when it runs again) and the log in
# build/fuzz/logs/.
# Reproduce one: build/fuzz/fuzz_<target> build/fuzz/crashes/<target>-crash-...
# (the Python target: tests/fuzz/fuzz_convert.py --replay FILE).
#
# Needs clang-14 with the libFuzzer runtime (libclang-rt-14-dev on Debian 12)
# and the -dev packages of libpng, libjpeg-turbo and cJSON: scripts/install_deps.sh
# installs them (make fuzz runs it first).
set -euo pipefail

usage() { echo "usage: scripts/fuzz.sh [explore [SECONDS] | replay]" >&2; exit 2; }
MODE=${1:-reproducible}
SECONDS_PER_TARGET=0
case "$MODE" in
  reproducible | replay) [ $# -le 1 ] || usage ;;
  explore)
    SECONDS_PER_TARGET=${2:-60}
    case "$SECONDS_PER_TARGET" in '' | *[!0-9]*) usage ;; esac ;;
  *) usage ;;
esac
SEED=${FUZZ_SEED:-1}
# Mutated executions per target in the reproducible mode: about a minute each on a 2-core
# development machine (AVX-512 Xeon, 2026-12).
# The image formats added with issue 47 (webp tiff gif bmp) are sized to under 40 s each.
declare -A RUNS=([config]=2000000 [weights]=1500000 [png]=1000000 [jpeg]=150000 [webp]=25000 [tiff]=24000
                 [gif]=10000 [bmp]=30000 [rle]=400000 [convert]=100000)
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
. scripts/test_env.sh  # pycocotools on PYTHONPATH, run by make or by hand
OUT=build/fuzz
PYTHON=${PYTHON:-/usr/bin/python3}
TARGETS=${FUZZ_TARGETS:-config weights png jpeg webp tiff gif bmp rle convert}

# ---- toolchain -------------------------------------------------------------

need_deps() {
  echo "fuzz.sh: $*; run scripts/install_deps.sh (or make fuzz, which runs it)" >&2
  exit 2
}
find_clang() {
  if [ -n "${CLANG:-}" ]; then echo "$CLANG"; return; fi
  for c in clang-14 clang; do command -v "$c" >/dev/null 2>&1 && { echo "$c"; return; }; done
}
CLANG=$(find_clang)
[ -n "$CLANG" ] || need_deps "clang not found"

mkdir -p "$OUT/logs" "$OUT/crashes" "$OUT/work"
# Crash stacks with file:line (llvm-14's symbolizer; not on PATH unless the unversioned llvm is installed).
if [ -z "${ASAN_SYMBOLIZER_PATH:-}" ] && [ -x /usr/lib/llvm-14/bin/llvm-symbolizer ]; then
  export ASAN_SYMBOLIZER_PATH=/usr/lib/llvm-14/bin/llvm-symbolizer
fi
# libFuzzer's runtime: Debian 12 ships it in libclang-rt-14-dev (clang-14 only recommends it).
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
  >"$OUT/probe.c"
"$CLANG" -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe" 2>"$OUT/probe.log" ||
  need_deps "$CLANG cannot link a libFuzzer target ($(head -n 1 "$OUT/probe.log"))"
[ -f /usr/include/png.h ] || need_deps "libpng-dev missing"
[ -f /usr/include/jpeglib.h ] || [ -f /usr/include/x86_64-linux-gnu/jpeglib.h ] || need_deps "libjpeg62-turbo-dev missing"
[ -f /usr/include/cjson/cJSON.h ] || need_deps "libcjson-dev missing"
[ -f /usr/include/webp/demux.h ] || need_deps "libwebp-dev missing"
[ -f /usr/include/gif_lib.h ] || need_deps "libgif-dev missing"
[ -f /usr/include/x86_64-linux-gnu/tiffio.h ] || [ -f /usr/include/tiffio.h ] || need_deps "libtiff-dev missing"
case " $TARGETS " in *" convert "*) "$PYTHON" -c 'import numpy' 2>/dev/null || need_deps "numpy missing" ;; esac

# ---- build -------------------------------------------------------------------

CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
CFLAGS+=" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unknown-pragmas -Iengine -Itests/fuzz"
LIBS="-lpng -ljpeg -lwebp -lwebpdemux -ltiff -lgif -lcjson -lm"
# Every image target links every decoder: image_load picks one by content.
IMAGE_SOURCES="engine/core/status.c engine/io/image.c engine/io/image_source.c engine/io/image_webp.c
  engine/io/image_tiff.c engine/io/image_gif.c engine/io/image_bmp.c engine/ops/image_preprocess.c
  engine/ops/resize_pil.c engine/ops/resize_cv2.c engine/ops/resize_cv2_uint8.c engine/core/config.c
  engine/core/config_table.c"
declare -A SOURCES=(
  [config]="engine/core/status.c engine/core/config.c engine/core/config_table.c"
  [weights]="engine/core/status.c engine/core/weights.c"
  [png]=$IMAGE_SOURCES [jpeg]=$IMAGE_SOURCES [webp]=$IMAGE_SOURCES [tiff]=$IMAGE_SOURCES [gif]=$IMAGE_SOURCES
  [bmp]=$IMAGE_SOURCES
  [rle]="engine/core/status.c engine/io/rle.c"
)
# The target's own file, where it has one; the other formats share fuzz_image.c.
target_main() { if [ -f "tests/fuzz/fuzz_$1.c" ]; then echo "tests/fuzz/fuzz_$1.c"; else echo tests/fuzz/fuzz_image.c; fi; }
for t in $TARGETS; do
  [ "$t" = convert ] && continue
  [ -n "${SOURCES[$t]:-}" ] || { echo "fuzz.sh: unknown target $t" >&2; exit 2; }
  echo "fuzz.sh: building $OUT/fuzz_$t"
  # shellcheck disable=SC2086
  "$CLANG" $CFLAGS -DFUZZ_TARGET="\"$t\"" "$(target_main "$t")" ${SOURCES[$t]} $LIBS -o "$OUT/fuzz_$t"
done

# ---- run ---------------------------------------------------------------------

# fuzz_one TARGET: runs one target; its executions, seconds and crashes go to $OUT/logs/TARGET.result.
# The targets are independent processes with their own seeds and folders, so they run side by side
# (FUZZ_JOBS at once, default the core count: each is one thread) and give the verdicts they give
# one at a time.
fuzz_one() {
  local t=$1 log="$OUT/logs/$1.log" work="$OUT/work/$1" start end rc=0 execs n
  rm -rf "$work" "$OUT/logs/$t.result"
  mkdir -p "$work"
  rm -f "$OUT/crashes/$t"-*
  case "$MODE" in
    reproducible) echo "fuzz.sh: fuzzing $t, ${RUNS[$t]} runs from seed $SEED (log: $log)" ;;
    explore) echo "fuzz.sh: fuzzing $t for ${SECONDS_PER_TARGET}s from a fresh seed (log: $log)" ;;
    replay) echo "fuzz.sh: replaying $t's seeds and regressions (log: $log)" ;;
  esac
  start=$(date +%s.%N)
  cp -r "tests/fuzz/corpus/$t/." "$work/"
  [ -d "tests/fuzz/regressions/$t" ] && cp -r "tests/fuzz/regressions/$t/." "$work/"
  if [ "$t" = convert ]; then
    case "$MODE" in
      reproducible) budget=(--runs "${RUNS[$t]}" --seed "$SEED") ;;
      explore) budget=(--seconds "$SECONDS_PER_TARGET") ;;
      replay) budget=(--runs 0) ;;
    esac
    "$PYTHON" tests/fuzz/fuzz_convert.py "${budget[@]}" --corpus "$work" \
      --crashes "$OUT/crashes" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^executions: \([0-9]*\).*/\1/p' "$log" | tail -1)
  else
    dict=()
    [ -f "tests/fuzz/dict/$t.dict" ] && dict=("-dict=tests/fuzz/dict/$t.dict")
    # -timeout: a single input running 60 s is a hang, reported as a crash. libFuzzer's timer
    # is wall-clock, so the limit sits far above the slowest honest input (the seeds' slowest,
    # a 4096-wide PNG under ASan, takes well under a second) for a loaded machine not to trip it.
    case "$MODE" in
      # -reload=0: by default libFuzzer rereads its corpus folder every second, so which inputs
      # it mutates would depend on the machine's speed (two runs of one seed diverged without it)
      reproducible) limit=(-seed="$SEED" -runs="${RUNS[$t]}" -reload=0) ;;
      explore) limit=(-max_total_time="$SECONDS_PER_TARGET") ;;
      replay) limit=(-runs=0) ;;
    esac
    # -malloc_limit_mb: one allocation over 512 MiB from a few-KB input is a bug (the largest legitimate
    # one, a decoded 4096x4096 RGB image, is 48 MiB); it catches regressions/png/ztxt-declares-1gib.png.
    "$OUT/fuzz_$t" "$work" "${dict[@]}" "${limit[@]}" -rss_limit_mb=2048 -malloc_limit_mb=512 \
      -timeout=60 -print_final_stats=1 -artifact_prefix="$OUT/crashes/$t-" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  fi
  end=$(date +%s.%N)
  n=$(find "$OUT/crashes" -maxdepth 1 -name "$t-*" ! -name '*.txt' -type f | wc -l)
  [ "$rc" -ne 0 ] && [ "$n" -eq 0 ] && n=1 # died without leaving an input (e.g. the build of a seed)
  if [ "$n" -ne 0 ]; then
    echo "fuzz.sh: $t: exit status $rc; end of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
  fi
  echo "${execs:-?} $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }') $n" >"$OUT/logs/$t.result"
}

JOBS=${FUZZ_JOBS:-$(nproc 2>/dev/null || echo 1)}
running=0
for t in $TARGETS; do
  if [ "$running" -ge "$JOBS" ]; then
    wait -n || true
    running=$((running - 1))
  fi
  fuzz_one "$t" &
  running=$((running + 1))
done
wait

declare -A EXECS TIMES CRASHES
status=0
for t in $TARGETS; do
  read -r EXECS[$t] TIMES[$t] CRASHES[$t] <"$OUT/logs/$t.result" 2>/dev/null || { EXECS[$t]='?' TIMES[$t]='?' CRASHES[$t]=1; }
  [ "${CRASHES[$t]}" -eq 0 ] || status=1
done

echo
# The table also goes to $OUT/summary.txt, which scripts/check.sh prints again at the end.
{
  printf '%-8s %12s %8s %8s\n' target executions time_s crashes
  for t in $TARGETS; do
    printf '%-8s %12s %8s %8s\n' "$t" "${EXECS[$t]}" "${TIMES[$t]}" "${CRASHES[$t]}"
  done
} | tee "$OUT/summary.txt"
if [ $status -ne 0 ]; then
  echo "fuzz.sh: FAILED: crash inputs in $OUT/crashes/:"
  ls -1 "$OUT/crashes" | sed 's/^/    /'
fi
exit $status
