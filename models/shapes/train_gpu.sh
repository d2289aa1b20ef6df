#!/usr/bin/env bash
# models/shapes/train_gpu.sh: the shapes demo model's whole training in one command, on a CUDA
# GPU (made for a lent H200: 16 cores render the scenes, nothing needs the network):
#   1. from scratch: train.py's default recipe (4000 iterations with trainable BatchNorm,
#      precise BN, 500 frozen), as the first shipped model was trained;
#   2. converted to canonical safetensors (F32), then fine-tuned as the shipped model was
#      (models/README.md, "Recipe"): --init, FINETUNE_ITERS frozen iterations at lr 0.01 with a
#      50-iteration warm-up, half the scenes from the hard mix, 128 RoIs per image;
#   3. converted to F16: OUT/shapes_r101_narrow.safetensors, ready to replace the shipped file
#      after models/shapes/evaluate.py has been run on it (on any machine).
# With INIT=W.safetensors (a converted model, e.g. the shipped one) step 1 is skipped and step 2
# fine-tunes W itself: one more fine-tuning round.
# Each step resumes from its checkpoint when OUT holds one (rerun the same command).
#
#   device run:  bash models/shapes/train_gpu.sh        (files come back from $OUT)
#   env:  PYTHON  (default python3) with torch built for CUDA, torchvision >= 0.13, numpy, PIL
#         OUT     (default $OUT of the device tool, else build/shapes_train_gpu)
#         SCRATCH_ITERS (4000), SCRATCH_FREEZE_ITERS (500), FINETUNE_ITERS (5000),
#         WORKERS (cores - 2, at least 1), DEVICE (cuda; `cpu` for the smoke test in
#         tests/parity/test_train_script.py, which runs a few iterations of each step),
#         INIT (none: train from scratch first), SCENE_OFFSET (100000: the fine-tuning's first
#         training scene; give a round from INIT one that no earlier round used, models/README.md)
# On an H200 with 14 workers train.py fine-tuned at 0.09 s per iteration (bench/NOTES.md 18.5):
# the whole script takes about 15 minutes there, more than one 10-minute call of the device
# tool (whose machine starts bare each time, so OUT's checkpoints do not carry over by
# themselves); with INIT the fine-tuning alone, about 8 minutes, fits in one call.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=${PYTHON:-python3}
OUT=${OUT:-build/shapes_train_gpu}
SCRATCH_ITERS=${SCRATCH_ITERS:-4000}
SCRATCH_FREEZE_ITERS=${SCRATCH_FREEZE_ITERS:-500}
FINETUNE_ITERS=${FINETUNE_ITERS:-5000}
SCENE_OFFSET=${SCENE_OFFSET:-100000}
DEVICE=${DEVICE:-cuda}
WORKERS=${WORKERS:-$(( $(nproc) > 3 ? $(nproc) - 2 : 1 ))}
mkdir -p "$OUT"

$PY -c "import sys, torch, torchvision; gpu = sys.argv[1] != 'cpu'; \
assert not gpu or torch.cuda.is_available(), 'PyTorch sees no CUDA GPU'; \
print('torch', torch.__version__, 'torchvision', torchvision.__version__, torch.cuda.get_device_name(0) if gpu else 'cpu')" "$DEVICE"

run() { echo "+ $*"; "$@"; }
INIT=${INIT:-}
if [ -z "$INIT" ]; then
  run $PY models/shapes/train.py --out "$OUT/scratch" --device "$DEVICE" --workers "$WORKERS" \
    --iters "$SCRATCH_ITERS" --freeze-iters "$SCRATCH_FREEZE_ITERS" 2>&1 | tee -a "$OUT/train.log"
  run $PY models/convert.py -q "$OUT/scratch/model_final.pth" "$OUT/scratch.safetensors"
  INIT="$OUT/scratch.safetensors"
fi
run $PY models/shapes/train.py --out "$OUT/finetune" --device "$DEVICE" --workers "$WORKERS" \
  --init "$INIT" --freeze-iters "$FINETUNE_ITERS" --freeze-lr 0.01 --freeze-warmup 50 \
  --hard-fraction 0.5 --scene-offset "$SCENE_OFFSET" --rois 128 2>&1 | tee -a "$OUT/train.log"
run $PY models/convert.py -q "$OUT/finetune/model_final.pth" "$OUT/shapes_r101_narrow.safetensors" --dtype f16
echo "train_gpu: wrote $OUT/shapes_r101_narrow.safetensors; check it with"
echo "  /usr/bin/python3 models/shapes/evaluate.py --weights $OUT/shapes_r101_narrow.safetensors"
