#!/usr/bin/env bash
# make cuda-report: the compiler's resource report for every kernel of cuda/
# (issue #8: "find where the time goes", the part that needs no GPU).
#
#   scripts/cuda_report.sh [ARCH]     ARCH: the SM to compile for (default 90, the H200)
#
# Compiles each cuda/*.cu with the Makefile's kernel flags plus -Xptxas -v
# into a temporary folder and prints one line per kernel entry: registers
# per thread, stack frame, spill stores/loads, static shared memory, and the
# most threads per SM its registers allow (65536 / registers, before the
# 2048-thread cap). cub's radix-sort kernels are listed under their own
# names. Exits 1 when one of our kernels (not cub's) spills: spilled
# registers go through local memory, which a kernel this small should never
# need. The build itself is untouched.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH=${1:-90}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$NVCC" ] || { echo "cuda-report: nvcc not found" >&2; exit 2; }
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

for f in cuda/*.cu; do
    echo "# $f"
    "$NVCC" -O2 -std=c++17 -Iengine -Icuda -gencode "arch=compute_$ARCH,code=sm_$ARCH" -fmad=false \
        -Xptxas -v -c "$f" -o "$TMP/$(basename "$f").o" 2>&1
done >"$TMP/ptxas.txt"

# ptxas prints, per entry: "Compiling entry function 'NAME'", then a line
# with the stack frame and spills, then "Used N registers, ... smem".
awk -v arch="$ARCH" '
    /^# /                 { file = $2 }
    /Compiling entry/     { match($0, /'"'"'[^'"'"']+'"'"'/); name = substr($0, RSTART + 1, RLENGTH - 2) }
    /bytes stack frame/   { stack = $1; spill_st = $5; spill_ld = $9 }
    /Used [0-9]+ registers/ {
        regs = $5; smem = 0
        if (match($0, /[0-9]+ bytes smem/)) smem = substr($0, RSTART, RLENGTH - 11) + 0
        print file "\t" name "\t" regs "\t" stack "\t" spill_st "\t" spill_ld "\t" smem
    }' "$TMP/ptxas.txt" >"$TMP/rows.tsv"

printf "sm_%s: %-58s %5s %6s %12s %6s %8s\n" "$ARCH" "kernel (file)" "regs" "stack" "spill st/ld" "smem" "thr/SM"
bad=0
while IFS=$'\t' read -r file name regs stack sst sld smem; do
    # the name without return type, template arguments and parameters
    pretty=$(echo "$name" | c++filt | sed -E 's/^void //; s/[<(].*//')
    case "$pretty" in cub::*) pretty="cub ${pretty##*::}" ;; esac
    thr=$(( 65536 / (regs > 0 ? regs : 1) ))
    printf "      %-58s %5s %6s %12s %6s %8s\n" "${pretty:0:40} ($(basename "$file"))" "$regs" "$stack" \
        "$sst/$sld" "$smem" "$thr"
    if [ "$sst" != 0 ] || [ "$sld" != 0 ]; then
        case "$pretty" in cub\ *) ;; *) bad=1 ;; esac
    fi
done <"$TMP/rows.tsv"
echo "$(wc -l <"$TMP/rows.tsv") kernel entries"
if [ $bad -ne 0 ]; then
    echo "cuda-report: a kernel of ours spills registers (see above)" >&2
    exit 1
fi
