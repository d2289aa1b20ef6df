#!/usr/bin/env bash
# Valgrind memcheck on one full-size image (issue "Reliability").
#
#   scripts/valgrind.sh        build, make seeded weights, run, print "valgrind: clean" on success
#   VG_CONFIG=path             another config (default: the full-size torchvision one)
#   VG_IMAGE=path              another image (default: examples/astronaut.png, 512x512 -> 800x800)
#   VG_ISA=AVX2                oneDNN's instruction set (default SSE41, see below; "ALL" = the CPU's best)
#
# Builds build/ as `make` does, writes seeded R-101-FPN weights (seed 3, as
# conftest's seeded_weights fixture) to build/valgrind/ once, and runs
# build/detect under memcheck with every output on (--json, --output,
# --coco-results, --profile-json), one thread. Any invalid read or write,
# use of uninitialised memory, bad free, or definite/indirect leak fails the
# run (--error-exitcode=1); the outputs are then checked to exist.
#
# oneDNN is capped at SSE4.1 (ONEDNN_MAX_CPU_ISA) by default: valgrind's
# VEX emulates AVX2's fused multiply-adds through per-lane helper calls, so
# the AVX2 kernels run ~400x slower than native under memcheck (the small
# config took over an hour) while the SSE4.1 ones run ~70x (8 minutes). Our
# code runs the same either way; only oneDNN's JIT kernels differ.
#
# tests/valgrind.supp holds the few suppressions, all inside oneDNN's own
# code; see that file. Expect about 20 minutes (the time is printed).
set -u
cd "$(dirname "$0")/.."
. scripts/test_env.sh  # pycocotools on PYTHONPATH, run by make or by hand
PYTHON=${PYTHON:-/usr/bin/python3}
CONFIG=${VG_CONFIG:-configs/mask_rcnn_R-101-FPN_torchvision.json}
IMAGE=${VG_IMAGE:-examples/astronaut.png}
ISA=${VG_ISA:-SSE41}
WORK=build/valgrind
WEIGHTS=$WORK/seed3.safetensors

command -v valgrind >/dev/null || { echo "valgrind: not installed (apt-get install valgrind)" >&2; exit 2; }
make -j"$(nproc)" all || { echo "valgrind: build failed" >&2; exit 2; }
mkdir -p "$WORK"
if [ ! -s "$WEIGHTS" ]; then
    echo "== seeded weights -> $WEIGHTS"
    (cd tests/parity && "$PYTHON" -c "
import sys, torch, oracle
torch.set_num_threads(2)
oracle.export_weights(oracle.build_model(3, bg_bias=5.0), sys.argv[1])" "$OLDPWD/$WEIGHTS") \
        || { echo "valgrind: could not write seeded weights" >&2; exit 2; }
fi

OUT=$WORK/out
rm -rf "$OUT"
mkdir -p "$OUT"
LOG=$WORK/memcheck.log
echo "== memcheck: $CONFIG, $IMAGE, oneDNN ISA $ISA (log: $LOG)"
start=$(date +%s)
ONEDNN_MAX_CPU_ISA=$ISA valgrind --tool=memcheck --leak-check=full --errors-for-leak-kinds=definite,indirect --error-exitcode=1 \
    --num-callers=30 --track-origins=no --suppressions=tests/valgrind.supp --log-file="$LOG" \
    build/detect --config "$CONFIG" --weights "$WEIGHTS" --threads 1 -q \
    --json "$OUT/all.json" --output "$OUT/vis" --coco-results "$OUT/coco.json" --profile-json "$OUT/profile.json" \
    "$IMAGE"
status=$?
secs=$(( $(date +%s) - start ))
echo "valgrind: run took ${secs} s"
grep -E "ERROR SUMMARY|definitely lost|indirectly lost|possibly lost|suppressed:" "$LOG"
if [ $status -ne 0 ]; then
    echo "valgrind: FAILED (status $status); the errors:" >&2
    sed -n '/^==[0-9]*== [A-Z][a-z]* \(read\|write\|jump\)\|^==[0-9]*== \(Invalid\|Conditional\|Use of\|Syscall\|Mismatched\|Source and\)\|are definitely\|are indirectly/,/^==[0-9]*== $/p' "$LOG" >&2
    exit 1
fi
name=$(basename "${IMAGE%.*}")
for f in "$OUT/all.json" "$OUT/coco.json" "$OUT/profile.json" "$OUT/vis/$name.png" "$OUT/vis/$name.json"; do
    [ -s "$f" ] || { echo "valgrind: FAILED: $f was not written" >&2; exit 1; }
done
echo "valgrind: clean"
