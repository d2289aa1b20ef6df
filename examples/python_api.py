"""The Python package in ten lines: a path, an RGB array and encoded bytes
give the same detections (python examples/python_api.py, after pip install .)."""
import numpy as np
from PIL import Image

import detect

with detect.Model("configs/mask_rcnn_R-101-FPN_shapes.json", "models/shapes_r101_narrow.safetensors",
                  device="cpu", score_threshold=0.7) as model:
    path = "examples/shapes/scene_1.png"
    r = model(path)
    for name, score, box in zip(r.class_names, r.scores, r.boxes):
        print(f"{name:8s} {score:.3f} {box.round(1)}")
    assert (model(np.asarray(Image.open(path).convert("RGB"))).boxes == r.boxes).all()
    assert (model(open(path, "rb").read()).scores == r.scores).all()
    print(r.masks.shape, r.masks_rle[0]["counts"][:16], r.stage_seconds["backbone"] > 0)
