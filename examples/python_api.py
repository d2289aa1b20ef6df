"""The Python package in a few lines: a path, encoded bytes, an RGB array and a PIL image give
the same detections (python examples/python_api.py, after pip install .). The package needs
numpy only; the PIL lines need Pillow too (Debian: python3-pil; pip install pillow), which the
package does not install: without it they are skipped, with a note."""
import numpy as np

import detect

try:
    from PIL import Image
except ImportError:
    Image = None

with detect.Model("configs/mask_rcnn_R-101-FPN_shapes.json", "models/shapes_r101_narrow.safetensors",
                  device="cpu", score_threshold=0.7) as model:
    path = "examples/shapes/scene_1.png"
    r = model(path)
    for name, score, box in zip(r.class_names, r.scores, r.boxes):
        print(f"{name:8s} {score:.3f} {box.round(1)}")
    assert (model(open(path, "rb").read()).scores == r.scores).all()
    if Image is None:
        print("Pillow is not installed: the array and PIL image examples are skipped")
    else:
        assert (model(np.asarray(Image.open(path).convert("RGB"))).boxes == r.boxes).all()
        assert (model(Image.open(path)).boxes == r.boxes).all()
    print(r.masks.shape, r.masks_rle[0]["counts"][:16], r.stage_seconds["backbone"] > 0)
