#!/usr/bin/env bash
# Fuzzes the parsers: the libFuzzer targets in tests/fuzz/ (config JSON,
# safetensors, PNG, JPEG, COCO RLE) and the converter's pickle reader
# (tests/fuzz/fuzz_convert.py), each for SECONDS (default 60).
#
#   scripts/fuzz.sh [SECONDS]        all targets
#   FUZZ_TARGETS="rle png" scripts/fuzz.sh 30   a subset (names: config weights png jpeg rle convert)
#
# Builds into build/fuzz/ with its own clang command lines (ASan + UBSan +
# libFuzzer; only the engine files each target needs, so no oneDNN), runs
# each target on a copy of its seed corpus (tests/fuzz/corpus/<target>/ is
# never modified) with its dictionary where there is one, then prints per
# target: executions, run time, crashes. Exits 1 on any crash, leaving the
# input in build/fuzz/crashes/ (a target's inputs from an earlier run are
# removed when it runs again) and the log in build/fuzz/logs/.
# Reproduce one: build/fuzz/fuzz_<target> build/fuzz/crashes/<target>-crash-...
# (the Python target: tests/fuzz/fuzz_convert.py --replay FILE).
#
# On a fresh Debian machine it installs what is missing (clang-14, the
# libFuzzer runtime in libclang-rt-14-dev, the -dev packages of libpng,
# libjpeg-turbo and cJSON, numpy) with apt-get.
set -euo pipefail

SECONDS_PER_TARGET=${1:-60}
case "$SECONDS_PER_TARGET" in '' | *[!0-9]*) echo "usage: scripts/fuzz.sh [SECONDS]" >&2; exit 2 ;; esac
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
OUT=build/fuzz
PYTHON=${PYTHON:-/usr/bin/python3}
TARGETS=${FUZZ_TARGETS:-config weights png jpeg rle convert}

# ---- toolchain -------------------------------------------------------------

sudo_cmd=""
[ "$(id -u)" -eq 0 ] || sudo_cmd="sudo"
apt_updated=0
apt_install() {
  echo "fuzz.sh: installing $*"
  if [ $apt_updated -eq 0 ]; then $sudo_cmd apt-get update -qq; apt_updated=1; fi
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-install-recommends "$@"
}

find_clang() {
  if [ -n "${CLANG:-}" ]; then echo "$CLANG"; return; fi
  for c in clang-14 clang; do command -v "$c" >/dev/null 2>&1 && { echo "$c"; return; }; done
}
CLANG=$(find_clang)
[ -n "$CLANG" ] || { apt_install clang-14 libclang-rt-14-dev; CLANG=clang-14; }

mkdir -p "$OUT/logs" "$OUT/crashes" "$OUT/work"
# libFuzzer's runtime: Debian 12 ships it in libclang-rt-14-dev (clang-14 only recommends it).
printf 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }\n' \
  >"$OUT/probe.c"
if ! "$CLANG" -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe" 2>/dev/null; then
  apt_install libclang-rt-14-dev
  "$CLANG" -fsanitize=fuzzer,address,undefined "$OUT/probe.c" -o "$OUT/probe"
fi
missing=()
[ -f /usr/include/png.h ] || missing+=(libpng-dev)
[ -f /usr/include/jpeglib.h ] || [ -f /usr/include/x86_64-linux-gnu/jpeglib.h ] || missing+=(libjpeg62-turbo-dev)
[ -f /usr/include/cjson/cJSON.h ] || missing+=(libcjson-dev)
case " $TARGETS " in *" convert "*) "$PYTHON" -c 'import numpy' 2>/dev/null || missing+=(python3-numpy) ;; esac
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

# ---- build -------------------------------------------------------------------

CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined"
CFLAGS+=" -std=c11 -D_GNU_SOURCE -Wall -Wextra -Wno-unknown-pragmas -Iengine -Itests/fuzz"
LIBS="-lpng -ljpeg -lcjson -lm"
declare -A SOURCES=(
  [config]="engine/status.c engine/config.c engine/config_table.c"
  [weights]="engine/status.c engine/weights.c"
  [png]="engine/status.c engine/image.c engine/resize_pil.c engine/resize_cv2.c engine/config.c engine/config_table.c"
  [jpeg]="engine/status.c engine/image.c engine/resize_pil.c engine/resize_cv2.c engine/config.c engine/config_table.c"
  [rle]="engine/status.c engine/rle.c"
)
for t in $TARGETS; do
  [ "$t" = convert ] && continue
  [ -n "${SOURCES[$t]:-}" ] || { echo "fuzz.sh: unknown target $t" >&2; exit 2; }
  echo "fuzz.sh: building $OUT/fuzz_$t"
  # shellcheck disable=SC2086
  "$CLANG" $CFLAGS "tests/fuzz/fuzz_$t.c" ${SOURCES[$t]} $LIBS -o "$OUT/fuzz_$t"
done

# ---- run ---------------------------------------------------------------------

declare -A EXECS TIMES CRASHES
status=0
for t in $TARGETS; do
  log="$OUT/logs/$t.log"
  work="$OUT/work/$t"
  rm -rf "$work"
  mkdir -p "$work"
  rm -f "$OUT/crashes/$t"-*
  echo "fuzz.sh: fuzzing $t for ${SECONDS_PER_TARGET}s (log: $log)"
  start=$(date +%s.%N)
  rc=0
  if [ "$t" = convert ]; then
    "$PYTHON" tests/fuzz/fuzz_convert.py --seconds "$SECONDS_PER_TARGET" --corpus tests/fuzz/corpus/convert \
      --crashes "$OUT/crashes" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^executions: \([0-9]*\).*/\1/p' "$log" | tail -1)
  else
    cp -r "tests/fuzz/corpus/$t/." "$work/"
    dict=()
    [ -f "tests/fuzz/dict/$t.dict" ] && dict=("-dict=tests/fuzz/dict/$t.dict")
    # -timeout: a single input running 10 s is a hang, reported as a crash.
    "$OUT/fuzz_$t" "$work" "${dict[@]}" -max_total_time="$SECONDS_PER_TARGET" -rss_limit_mb=2048 \
      -timeout=10 -print_final_stats=1 -artifact_prefix="$OUT/crashes/$t-" >"$log" 2>&1 || rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -1)
  fi
  end=$(date +%s.%N)
  TIMES[$t]=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.0f", b - a }')
  EXECS[$t]=${execs:-?}
  n=$(find "$OUT/crashes" -maxdepth 1 -name "$t-*" ! -name '*.txt' -type f | wc -l)
  [ "$rc" -ne 0 ] && [ "$n" -eq 0 ] && n=1 # died without leaving an input (e.g. the build of a seed)
  CRASHES[$t]=$n
  if [ "$n" -ne 0 ]; then
    status=1
    echo "fuzz.sh: $t: exit status $rc; end of $log:"
    tail -n 40 "$log" | sed 's/^/    /'
  fi
done

echo
printf '%-8s %12s %8s %8s\n' target executions time_s crashes
for t in $TARGETS; do
  printf '%-8s %12s %8s %8s\n' "$t" "${EXECS[$t]}" "${TIMES[$t]}" "${CRASHES[$t]}"
done
if [ $status -ne 0 ]; then
  echo "fuzz.sh: FAILED: crash inputs in $OUT/crashes/:"
  ls -1 "$OUT/crashes" | sed 's/^/    /'
fi
exit $status
