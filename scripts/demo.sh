#!/usr/bin/env bash
# The README's first command (via `make demo`): runs detect with the bundled shapes model
# (models/shapes_r101_narrow.safetensors, a narrow R-101-FPN Mask R-CNN trained by
# models/shapes/train.py on generated scenes; models/README.md) on the bundled example
# scenes examples/shapes/*.png, prints every detection and writes the drawings
# (translucent masks, boxes, "class score" labels) to build/demo/. The drawings show what
# scores 0.7 or more: what the model is sure of (below that it adds second, other-class
# detections of some shapes; AP counts them all, models/README.md). Without --agnostic-nms:
# it removes most of those second labels but loses more right ones (models/README.md, issue 26).
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/demo
build/detect --config configs/mask_rcnn_R-101-FPN_shapes.json \
  --weights models/shapes_r101_narrow.safetensors \
  --score-thresh 0.7 --output build/demo --json build/demo/detections.json examples/shapes
echo "demo: wrote build/demo/scene_{1,2,3,4}.png (drawings), their .json files and build/demo/detections.json"
