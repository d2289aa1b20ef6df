#!/usr/bin/env bash
# The README's first command (via `make demo`): runs detect on the bundled
# example photo. Until a trained model ships, the weights are the seeded
# random reference weights (tests/parity/oracle.py, seed 0): the pipeline
# runs for real end to end, but its detections are not meaningful.
set -euo pipefail
cd "$(dirname "$0")/.."
mkdir -p build/demo
weights=build/demo/seeded-r101-fpn.safetensors
if [ ! -f "$weights" ]; then
  echo "demo: writing seeded random R-101-FPN weights to $weights (needs python3-torchvision)"
  /usr/bin/python3 - "$weights" <<'PY'
import sys
sys.path.insert(0, "tests/parity")
import oracle
oracle.export_weights(oracle.build_model(0, bg_bias=5.0), sys.argv[1])
PY
fi
build/detect --config configs/mask_rcnn_R-101-FPN_torchvision.json --weights "$weights" \
  --output build/demo --json build/demo/detections.json --profile examples/astronaut.png
echo "demo: wrote build/demo/astronaut.png (drawing), build/demo/astronaut.json and build/demo/detections.json"
