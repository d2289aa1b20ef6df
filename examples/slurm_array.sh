#!/usr/bin/env bash
# detect over a Slurm cluster: a job array of N tasks, task K running
# `detect --shard K/N` on the same inputs, then one job that merges the N
# parts once every task has ended. docs/cluster.md explains it.
#
#   examples/slurm_array.sh submit IMAGES OUT N   submits both (sbatch), prints their job ids
#   sbatch --array=0-$((N-1)) examples/slurm_array.sh run IMAGES OUT     one task (K from Slurm)
#   sbatch --dependency=afterany:JOBID examples/slurm_array.sh merge OUT
#
# IMAGES: a folder (walked recursively) or a --list file (@FILE) that every
# node reads at the same path: a part is chosen by a hash of each path as
# given, so all tasks must be given the same one. OUT (shared too) receives
# images/NAME.{png,json}, part-K.json and coco-K.json from each task, and
# all.json and all_coco.json from the merge. A task that fails (a node lost,
# a time limit) is resubmitted as it was (sbatch --array=K ...): it skips
# the images it finished (--skip-existing) and its documents are still
# complete. Settings from the environment:
#   DETECT          the command, one or more words (default: detect on PATH; in a container,
#                   e.g. "apptainer exec --bind /shared detect.sif detect": docs/cluster.md)
#   DETECT_CONFIG   model config (default: configs/mask_rcnn_R-101-FPN_torchvision.json)
#   DETECT_WEIGHTS  weights (default: model.safetensors)
#   DETECT_ARGS     more options for every task (e.g. "--device cuda", "--threads 8")
#SBATCH --job-name=detect
#SBATCH --cpus-per-task=8
#SBATCH --output=detect-%A_%a.log
set -euo pipefail

DETECT=${DETECT:-detect}
CONFIG=${DETECT_CONFIG:-configs/mask_rcnn_R-101-FPN_torchvision.json}
WEIGHTS=${DETECT_WEIGHTS:-model.safetensors}
usage() { sed -n '2,9p' "$0" >&2; exit 2; }

inputs() { # IMAGES as detect arguments: @FILE is a list file
    case "$1" in @*) echo "--list ${1#@}" ;; *) echo "$1" ;; esac
}

case "${1:-}" in
run)
    [ $# -eq 3 ] || usage
    images=$2 out=$3
    # K counts from 0 (an array 0-(N-1)); SLURM_ARRAY_TASK_MIN makes any other start work too.
    k=$((SLURM_ARRAY_TASK_ID - ${SLURM_ARRAY_TASK_MIN:-0}))
    n=${SLURM_ARRAY_TASK_COUNT:?SLURM_ARRAY_TASK_COUNT is not set: run this as an array job (sbatch --array)}
    mkdir -p "$out/images"
    # shellcheck disable=SC2046,SC2086 # word splitting wanted: the command, options, "--list FILE"
    exec $DETECT --config "$CONFIG" --weights "$WEIGHTS" ${DETECT_ARGS:-} --shard "$k/$n" -q \
        --output "$out/images" --skip-existing --json "$out/part-$k.json" --coco-results "$out/coco-$k.json" \
        $(inputs "$images")
    ;;
merge)
    [ $# -eq 2 ] || usage
    out=$2
    # Checks that every part is there, complete and of the same inputs; exit 2 and nothing written if not.
    # shellcheck disable=SC2086 # the command may be several words
    exec $DETECT merge --json "$out/all.json" --coco-results "$out/all_coco.json" "$out"/part-*.json
    ;;
submit)
    [ $# -eq 4 ] || usage
    images=$2 out=$3 n=$4
    array=$(sbatch --parsable --array="0-$((n - 1))" "$0" run "$images" "$out")
    array=${array%%;*}
    merge=$(sbatch --parsable --dependency="afterany:$array" --job-name=detect-merge "$0" merge "$out")
    echo "array job $array ($n tasks), merge job ${merge%%;*}"
    ;;
*) usage ;;
esac
