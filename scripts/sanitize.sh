#!/usr/bin/env bash
# AddressSanitizer + UndefinedBehaviorSanitizer run (issue "Reliability").
#
#   scripts/sanitize.sh            build into build-san/, run everything below, exit 1 on any report
#   SAN_BUILD=dir                  another build folder
#   SAN_QUICK=1                    unit tests and test_bad_inputs.py only
#   SAN_EXTRA="-fsanitize=..."     more sanitizers, e.g. float-cast-overflow (not in GCC's "undefined")
#
# 1. Builds the whole project (engine, detect, stage_runner, libdetect.so and libdetect_internal.so,
#    every unit test) with -fsanitize=address,undefined into $SAN_BUILD.
#    The flags go in through the environment, not the make command line:
#    the Makefile appends its own (-std=c11 -fopenmp -fPIC -Iengine ...) with
#    +=, which a command-line CFLAGS= would silently override. The CUDA
#    backend is left out (CUDA=0): ASan and the CUDA runtime do not mix.
# 2. Runs every unit test binary in $SAN_BUILD/tests/.
# 3. Runs the parity tests that drive build-san/detect and stage_runner as
#    subprocesses, with DETECT_BUILD=$SAN_BUILD and leak checking on:
#    test_e2e.py for the small synthetic case only (synthetic-320; the
#    800-px astronaut and coffee-320 cases add nothing new under ASan and
#    cost minutes), test_cli.py, test_cli_batch.py, test_bad_inputs.py, and
#    test_big_batch.py with 200 images instead of 1,000.
# 4. Runs the ctypes tests (test_ops_torchvision.py, test_image_torch.py,
#    test_exif.py, test_coco_results.py, test_image_pil.py, test_zoo_conventions.py), which load $SAN_BUILD/libdetect_internal.so
#    into Debian's python: libasan is preloaded (LD_PRELOAD) and leak
#    checking is off there (python itself is not built for LSan and "leaks"
#    by design at exit).
# 5. Builds tests/unit/test_image_prefetch.c with ThreadSanitizer (the
#    only threads of ours outside OpenMP: the decoders of
#    engine/io/image_prefetch.c) from the engine sources it needs, without
#    OpenMP (libgomp is not TSan-instrumented), and runs it.
# test_convert.py is not run: it is pure python and never touches the engine.
#
# Every ASan/LSan report is written to $SAN_BUILD/san-logs/ (log_path) and
# changes the process's exit status to 99; a UBSan report goes to stderr
# (GCC 12's libubsan ignores log_path next to ASan) and exits with 98. So a
# test that expects status 0, 1 or 2 fails on any report, and the ones in
# san-logs are caught even where a test ignores the status. The script
# prints every logged report and exits 1 if there is one, or if any test
# failed. Leak reports from oneDNN's JIT or libgomp's thread
# pool would go in tests/lsan.supp (none are needed today; see the file).
set -u
cd "$(dirname "$0")/.."
. scripts/test_env.sh  # pycocotools on PYTHONPATH, run by make or by hand
ROOT=$PWD
SAN_BUILD=${SAN_BUILD:-build-san}
PYTHON=${PYTHON:-/usr/bin/python3}
JOBS=${JOBS:-$(nproc)}
SAN_EXTRA=${SAN_EXTRA:-}
SAN_CFLAGS="-O1 -g -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=all $SAN_EXTRA"
SAN_LDFLAGS="-fsanitize=address,undefined -fopenmp $SAN_EXTRA"

start=$(date +%s)
failed=()

# A build folder made with other flags would be reused silently by make: start over.
stamp="$SAN_BUILD/.sanitize-flags"
if [ -d "$SAN_BUILD" ] && [ "$(cat "$stamp" 2>/dev/null)" != "$SAN_CFLAGS | $SAN_LDFLAGS" ]; then
    echo "sanitize: $SAN_BUILD was built with other flags; rebuilding from scratch"
    rm -rf "$SAN_BUILD"
fi
mkdir -p "$SAN_BUILD"
echo "$SAN_CFLAGS | $SAN_LDFLAGS" > "$stamp"

unit_bins=()
for src in tests/unit/test_*.c; do
    unit_bins+=("$SAN_BUILD/tests/$(basename "$src" .c)")
done

echo "== build ($SAN_BUILD): CFLAGS=\"$SAN_CFLAGS\""
if ! CFLAGS="$SAN_CFLAGS" LDFLAGS="$SAN_LDFLAGS" make -j"$JOBS" BUILD="$SAN_BUILD" CUDA=0 all "${unit_bins[@]}"; then
    echo "sanitize: build failed" >&2
    exit 1
fi

LOGS="$ROOT/$SAN_BUILD/san-logs"
rm -rf "$LOGS"
mkdir -p "$LOGS"
ASAN_COMMON="abort_on_error=0:halt_on_error=1:exitcode=99:strict_string_checks=1:detect_stack_use_after_return=1:log_path=$LOGS/asan"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=98"
export LSAN_OPTIONS="suppressions=$ROOT/tests/lsan.supp:print_suppressions=0"
export ASAN_OPTIONS="detect_leaks=1:$ASAN_COMMON"

echo "== unit tests"
for t in "${unit_bins[@]}"; do
    echo "-- $t"
    "$t" || failed+=("$t")
done

if [ "${SAN_QUICK:-0}" = 1 ]; then
    parity_files=(tests/parity/test_bad_inputs.py)
    ctypes_files=()
else
    parity_files=(tests/parity/test_cli.py tests/parity/test_cli_batch.py tests/parity/test_bad_inputs.py
                  tests/parity/test_big_batch.py)
    ctypes_files=(tests/parity/test_ops_torchvision.py tests/parity/test_image_torch.py tests/parity/test_exif.py
                  tests/parity/test_coco_results.py tests/parity/test_image_pil.py
                  tests/parity/test_zoo_conventions.py)
fi

echo "== parity tests through $SAN_BUILD/detect and stage_runner (leak checking on)"
if [ "${SAN_QUICK:-0}" != 1 ]; then
    DETECT_BUILD="$ROOT/$SAN_BUILD" "$PYTHON" -m pytest -q -rs -p no:cacheprovider tests/parity/test_e2e.py \
        -k synthetic-320 || failed+=("test_e2e.py -k synthetic-320")
fi
DETECT_BUILD="$ROOT/$SAN_BUILD" DETECT_BIG_BATCH_N=200 "$PYTHON" -m pytest -q -rs -p no:cacheprovider \
    "${parity_files[@]}" || failed+=("${parity_files[*]}")

if [ ${#ctypes_files[@]} -gt 0 ]; then
    echo "== ctypes tests: $SAN_BUILD/libdetect_internal.so in python with libasan preloaded (no leak checking)"
    LD_PRELOAD="$(gcc -print-file-name=libasan.so)" ASAN_OPTIONS="detect_leaks=0:$ASAN_COMMON" \
        DETECT_BUILD="$ROOT/$SAN_BUILD" "$PYTHON" -m pytest -q -rs -p no:cacheprovider "${ctypes_files[@]}" \
        || failed+=("${ctypes_files[*]}")
fi

echo "== ThreadSanitizer: the image prefetcher's decoder threads"
TSAN_BIN="$SAN_BUILD/tests/test_image_prefetch_tsan"
if gcc -O1 -g -fsanitize=thread -std=c11 -D_GNU_SOURCE -Iengine tests/unit/test_image_prefetch.c \
        engine/io/image_prefetch.c engine/io/image.c engine/io/image_source.c engine/io/image_{webp,tiff,gif,bmp}.c \
        engine/core/status.c -lpng -ljpeg -lwebp -lwebpdemux -ltiff -lgif \
        -lm -lcmocka -o "$TSAN_BIN"; then
    TSAN_OPTIONS="halt_on_error=1:exitcode=97:log_path=$LOGS/tsan" "$TSAN_BIN" || failed+=("$TSAN_BIN")
else
    failed+=("$TSAN_BIN (build)")
fi

reports=("$LOGS"/*)
[ -e "${reports[0]}" ] || reports=()
for r in "${reports[@]}"; do
    echo "==================== sanitizer report: $r"
    cat "$r"
done

echo "sanitize: $(( $(date +%s) - start )) s"
if [ ${#reports[@]} -gt 0 ] || [ ${#failed[@]} -gt 0 ]; then
    echo "sanitize: FAILED: ${#reports[@]} sanitizer report(s); failing test groups: ${failed[*]:-none}" >&2
    exit 1
fi
echo "sanitize: clean"
