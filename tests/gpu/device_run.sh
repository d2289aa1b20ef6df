#!/usr/bin/env bash
# tests/gpu/device_run.sh: the one call a lent GPU machine gets (the device
# tool's METHOD.md: one script that builds, checks and times every variant,
# the tables printed last). Runs tests/gpu/check.sh (build, op tests, CUDA
# graphs, end-to-end parity against torchvision on the same GPU) with a
# short latency table, then tests/gpu/bench.sh sized to what is left of one
# 10-minute call (latency of every variant, issue 35's targets, --profile's
# overhead, the demo model, the peers at their best, then throughput), each
# logged in full under $OUT; then prints check.sh's verdicts and bench.sh's
# tables. Carry tests/gpu/deps (tests/gpu/fetch_deps.sh) where the machine
# lacks the build's libraries.
#
#   device run:  bash tests/gpu/device_run.sh     (timeout_s 600)
#   env:         OUT (default /tmp/device_run), CHECK_LIMIT (seconds for
#                check.sh, 270), BENCH_RUNS (check.sh's latency runs, 5),
#                ROUNDS (2), RUNS (5), BATCH (20), JPEGS (100): bench.sh's
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-/tmp/device_run}
mkdir -p "$OUT"
T0=$(date +%s)

BENCH_RUNS=${BENCH_RUNS:-5} WORK="$OUT/check" timeout "${CHECK_LIMIT:-270}" bash tests/gpu/check.sh \
    >"$OUT/check.log" 2>&1
check_rc=$?
left=$((585 - ($(date +%s) - T0)))
ROUNDS=${ROUNDS:-2} RUNS=${RUNS:-5} BATCH=${BATCH:-20} JPEGS=${JPEGS:-100} WORK="$OUT/bench" \
    timeout "$left" bash tests/gpu/bench.sh >"$OUT/bench.log" 2>&1
bench_rc=$?

echo "== tests/gpu/check.sh: exit $check_rc ($OUT/check.log)"
grep -E "^(== |  (OK|FAIL)|SKIP|\[  (PASSED|FAILED) )|passed|failed|parity checks" "$OUT/check.log" | tail -40
echo
echo "== tests/gpu/bench.sh: exit $bench_rc ($OUT/bench.log), $(($(date +%s) - T0)) s in all"
sed -n '/^GPU: /,$p' "$OUT/bench.log" | head -90
exit $((check_rc || bench_rc))
