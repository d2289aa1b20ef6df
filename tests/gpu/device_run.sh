#!/usr/bin/env bash
# tests/gpu/device_run.sh: the one call a lent GPU machine gets (the device
# tool's METHOD.md: one script that builds, checks and times every variant,
# the tables printed last). Runs tests/gpu/check.sh (build, op tests, CUDA
# graphs, end-to-end parity against torchvision on the same GPU) with a
# short latency table, then tests/gpu/bench.sh sized to what is left of one
# 10-minute call (latency of every variant and issue 35's targets; issue
# 36's throughput, about 2.5 minutes; then, as time allows, --profile's
# overhead, the demo model, the older throughput runs and the peers at
# their best), each logged in full under $OUT; then prints check.sh's
# verdicts, bench.sh's tables, and issue 36's throughput tables last
# (markdown for bench/NOTES.md, also in $OUT/bench/throughput.md). Carry
# tests/gpu/deps: the build's libraries where the machine lacks them
# (tests/gpu/fetch_deps.sh: .deb files), and detectron2 for the peers
# (tests/gpu/fetch_detectron2.sh: tests/gpu/deps/detectron2, about 6 MB).
#
#   device run:  bash tests/gpu/device_run.sh     (timeout_s 600)
#   env:         OUT (default /tmp/device_run), CHECK_LIMIT (seconds for
#                check.sh, 270), BENCH_RUNS (check.sh's latency runs, 5),
#                ROUNDS (2), RUNS (5), BATCH (20), JPEGS (100), TP_IMAGES (400: the
#                JPEGs per throughput folder; the issue's figure is 2000), TP_BUDGET
#                (150 s of throughput runs): bench.sh's
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/device_run}
mkdir -p "$OUT"
T0=$(date +%s)

BENCH_RUNS=${BENCH_RUNS:-5} WORK="$OUT/check" timeout "${CHECK_LIMIT:-270}" bash tests/gpu/check.sh \
    >"$OUT/check.log" 2>&1
check_rc=$?
left=$((585 - ($(date +%s) - T0)))
# bench.sh keeps to BENCH_LIMIT itself (its bench_gpu.py stopped in time to print the throughput
# tables); the timeout is the backstop.
ROUNDS=${ROUNDS:-2} RUNS=${RUNS:-5} BATCH=${BATCH:-20} JPEGS=${JPEGS:-100} TP_IMAGES=${TP_IMAGES:-400} \
    TP_BUDGET=${TP_BUDGET:-150} BENCH_LIMIT=$((left - 5)) WORK="$OUT/bench" \
    timeout "$left" bash tests/gpu/bench.sh >"$OUT/bench.log" 2>&1
bench_rc=$?

echo "== tests/gpu/check.sh: exit $check_rc ($OUT/check.log)"
grep -E "^(== |  (OK|FAIL)|SKIP|\[  (PASSED|FAILED) )|passed|failed|parity checks" "$OUT/check.log" | tail -40
echo
echo "== tests/gpu/bench.sh: exit $bench_rc ($OUT/bench.log), $(($(date +%s) - T0)) s in all"
sed -n '/^GPU: /,$p' "$OUT/bench.log" | sed '/^## Throughput (issue 36)/,$d' | head -90
echo
if [ -s "$OUT/bench/throughput.md" ]; then
    cat "$OUT/bench/throughput.md"
else
    echo "## Throughput (issue 36): no tables (bench_gpu.py did not reach the section; see $OUT/bench.log)"
fi
exit $((check_rc || bench_rc))
