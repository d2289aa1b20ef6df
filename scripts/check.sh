#!/usr/bin/env bash
# make check: the README's test command, and what CI runs (.ci/run). Every
# check the project has that fits in CI's time, in five steps:
#
#   1. make test       release build; unit tests (cmocka) and parity tests
#                      against torchvision (pytest)
#      layers          scripts/check_layers.py --calls build: every include of
#                      engine/, cuda/ and cmd/ against the folder rules in
#                      docs/architecture.md, and no two files of a folder
#                      calling each other (seconds; after the build it reads)
#   2. make sanitize   the unit and end-to-end tests again under AddressSanitizer
#                      + UBSan (scripts/sanitize.sh: what it runs, and why the
#                      rest is left out, is at its top)
#   3. make fuzz       each fuzz target after replaying its seeds and past
#                      crashes, from a fixed mutation seed for a fixed number
#                      of executions: the same verdict on the same code
#                      (scripts/fuzz.sh; fresh seeds are make fuzz-explore)
#   4. make cuda-emu   the CUDA backend's tests on the CPU, through the CUDA
#                      emulator (tests/emu/README.md); skipped, visibly, in a
#                      build without CUDA (CUDA=0, no nvcc)
#
#   scripts/check.sh
#
# A step runs even when one before it failed, so one CI run reports every
# problem. The end is a table: each step's result and minutes, then each fuzz
# target's executions, run time and crashes. Exits 1 if any step failed.
# make valgrind (one full image through memcheck, tens of minutes) is not a step:
# run it by hand when the engine's memory handling changes.
set -u
cd "$(dirname "$0")/.."
. scripts/test_env.sh  # pycocotools on PYTHONPATH, run by make or by hand
MAKE=${MAKE:-make}

names=() results=() minutes=()
step() { # step NAME COMMAND...: runs it, records the outcome and time
  local name=$1 t0=$SECONDS rc=0
  shift
  echo
  echo "======== check: $name ($*)"
  "$@" || rc=$?
  names+=("$name")
  results+=("$([ $rc -eq 0 ] && echo ok || echo "FAILED (exit $rc)")")
  minutes+=("$(awk -v s=$((SECONDS - t0)) 'BEGIN { printf "%.1f", s / 60 }')")
}

start=$SECONDS
rm -f build/fuzz/summary.txt
step test "$MAKE" test
step layers "${PYTHON:-/usr/bin/python3}" scripts/check_layers.py --calls build
step sanitize scripts/sanitize.sh
step fuzz scripts/fuzz.sh
if "$MAKE" -n cuda-emu >/dev/null 2>&1; then
  step cuda-emu "$MAKE" cuda-emu
else
  echo "======== check: cuda-emu SKIPPED: this build has no CUDA backend (CUDA=0 or no nvcc)"
  names+=(cuda-emu) results+=("skipped (no CUDA)") minutes+=(0.0)
fi

echo
echo "======== check: summary"
failed=0
for i in "${!names[@]}"; do
  printf '%-9s %-18s %5s min\n' "${names[$i]}" "${results[$i]}" "${minutes[$i]}"
  case "${results[$i]}" in ok | skipped*) ;; *) failed=1 ;; esac
done
printf '%-9s %-18s %5s min\n' total "" "$(awk -v s=$((SECONDS - start)) 'BEGIN { printf "%.1f", s / 60 }')"
# The minutes depend on the processor (oneDNN's kernels, ours picked at run time): say which.
isa=AVX2
grep -qw avx512f /proc/cpuinfo 2>/dev/null && isa=AVX-512
grep -qw avx512_vnni /proc/cpuinfo 2>/dev/null && isa="$isa, VNNI"
grep -qw avx512_bf16 /proc/cpuinfo 2>/dev/null && isa="$isa, BF16"
grep -qw amx_tile /proc/cpuinfo 2>/dev/null && isa="$isa, AMX"
echo "machine: $(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo 2>/dev/null | head -1), $(nproc) cores, $isa" \
  "${ONEDNN_MAX_CPU_ISA:+(oneDNN capped at $ONEDNN_MAX_CPU_ISA)}"
if [ -f build/fuzz/summary.txt ]; then
  echo
  echo "fuzzing (reproducible: fixed seed and executions):"
  cat build/fuzz/summary.txt
fi
[ $failed -eq 0 ] && echo "check: all passed" || echo "check: FAILED" >&2
exit $failed
