#!/usr/bin/python3
"""mixed_batch.py --work DIR: a folder of mixed sizes and formats through
detect --device cuda (strict fp32, decoding ahead on its default threads,
pinned upload buffers, CUDA graphs keyed by the padded input size) against
detect --device cpu, image by image (tests/emu/run.sh runs it on the CUDA
emulator; on a GPU machine it runs as it is).

The images: held-out scenes of the shipped shapes model
(models/shapes/shapes_data.py), resized to 12 sizes from 160x200 to
480x640 in both orientations, half of them JPEG, each size twice, so the
CUDA backend meets a new input shape, then the same one again (op by op,
then captured and launched), with other shapes in between. Checked per
image: every detection matched by class at box IoU >= 0.99 with its score
within 1e-3 (near-ties at the score threshold excepted), masks IoU >= 0.98.
Exit 1 on any mismatch.

With --conventions mmdet-agnostic the same comparison runs under mmdetection's test-time
conventions (configs/mask_rcnn_R-101-FPN_mmdetection.json's keys: cv2's uint8 resize to the
round-half-up size, the two-sided dw/dh clamp, levels from finest_scale 56, detectron2's paste)
with class-agnostic heads: the shapes weights with one box regression and one mask channel
(class 1's, for every class), on 6 of the sizes. The CPU backend's own parity with mmdetection is
tests/parity/test_mmdet_e2e.py; this checks the CUDA backend's path through the same keys."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path[:0] = [os.path.join(REPO, "tests", "parity"), os.path.join(REPO, "models", "shapes"),
                os.path.join(REPO, "models")]
BUILD = os.environ.get("DETECT_BUILD", os.path.join(REPO, "build"))
CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
WEIGHTS = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
SIZES = [(160, 200), (200, 160), (240, 320), (320, 240), (256, 256), (300, 400), (400, 300), (360, 480),
         (480, 360), (480, 640), (640, 480), (224, 400)]
SCORE_THRESH = 0.3


def make_folder(work, sizes=SIZES, seed_offset=1, name="mixed"):
    """work/name: held-out scenes resized to each of sizes, each size twice,
    half of them JPEG (tests/emu/in_flight.py makes its folder here too)."""
    import shapes_data
    ann = shapes_data.write_dataset(os.path.join(work, "scenes"), shapes_data.HELDOUT_SEED + seed_offset, len(sizes),
                                    0)
    scenes = [os.path.join(work, "scenes", im["file_name"]) for im in json.load(open(ann))["images"]]
    folder = os.path.join(work, name)
    os.makedirs(folder, exist_ok=True)
    paths = []
    for rep in range(2):
        for k, (h, w) in enumerate(sizes):
            img = Image.open(scenes[k]).convert("RGB").resize((w, h), Image.BILINEAR)
            ext = "jpg" if (k + rep) % 2 else "png"
            p = os.path.join(folder, f"{rep}_{k:02d}_{h}x{w}.{ext}")
            img.save(p, quality=92) if ext == "jpg" else img.save(p)
            paths.append(p)
    return folder, sorted(paths)


# configs/mask_rcnn_R-101-FPN_mmdetection.json's conventions (not its normalisation: the shapes
# model keeps its own, so that it still finds its shapes) and class-agnostic heads
MMDET_KEYS = {
    "input": {"resize_rounding": "mmdet", "resize_method": "cv2_linear_uint8"},
    "rpn": {"min_size": 0.0, "min_size_rule": "detectron2"},
    "box": {"bbox_xform_clip_rule": "symmetric"},
    "box_head": {"pooler": {"sampling_ratio": 0, "aligned": True, "canonical_size": 56, "canonical_level": 2,
                            "level_eps": 1e-6, "level_eps_inside_log": True},
                 "min_size": 0.0, "class_agnostic_regression": True},
    "mask_head": {"pooler": {"sampling_ratio": 0, "aligned": True, "canonical_size": 56, "canonical_level": 2,
                             "level_eps": 1e-6, "level_eps_inside_log": True},
                  "threshold_rule": ">=", "paste_rule": "detectron2", "class_agnostic": True},
}


def mmdet_agnostic_model(work):
    """(config, weights) for --conventions mmdet-agnostic, written under work."""
    import safetensors_io
    with open(CONFIG) as f:
        cfg = json.load(f)
    for section, kv in MMDET_KEYS.items():
        for k, v in kv.items():
            if isinstance(v, dict):
                cfg[section][k].update(v)
            else:
                cfg[section][k] = v
    config = os.path.join(work, "mmdet_agnostic.json")
    with open(config, "w") as f:
        json.dump(cfg, f, indent=1)
    tensors, meta = safetensors_io.load(WEIGHTS)
    for p in ("weight", "bias"):  # class 1's regression and mask for every class
        tensors[f"box_predictor.bbox_pred.{p}"] = tensors[f"box_predictor.bbox_pred.{p}"][4:8].copy()
        tensors[f"mask_head.logits.{p}"] = tensors[f"mask_head.logits.{p}"][1:2].copy()
    weights = os.path.join(work, "mmdet_agnostic.safetensors")
    safetensors_io.save(tensors, weights, meta)
    return config, weights


def run(folder, device, out, config=CONFIG, weights=WEIGHTS):
    cmd = [os.path.join(BUILD, "detect"), "--config", config, "--weights", weights, "--device", device, "-q",
           "--score-thresh", str(SCORE_THRESH), "--json", out, folder]
    if device == "cuda":
        cmd[cmd.index("-q"):cmd.index("-q")] = ["--precision", "fp32"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed:\n{r.stderr}")
    from test_cli import detect_json_images
    return {os.path.basename(f): (dets, masks) for f, dets, masks in detect_json_images(out)}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--conventions", default="torchvision", choices=["torchvision", "mmdet-agnostic"])
    a = ap.parse_args()
    from metrics import mask_iou, match_detections, near_tie
    os.makedirs(a.work, exist_ok=True)
    model = {}
    if a.conventions == "mmdet-agnostic":
        model = dict(zip(("config", "weights"), mmdet_agnostic_model(a.work)))
        folder, paths = make_folder(a.work, sizes=SIZES[::2])
    else:
        folder, paths = make_folder(a.work)
    cpu = run(folder, "cpu", os.path.join(a.work, "cpu.json"), **model)
    cuda = run(folder, "cuda", os.path.join(a.work, "cuda.json"), **model)
    bad, total = 0, 0
    for p in paths:
        name = os.path.basename(p)
        ((rb, rs, rl), ref_masks), ((ob, os_, ol), our_masks) = cpu[name], cuda[name]
        pairs, missed, extra = match_detections(rb, rs, rl, ob, os_, ol, iou=0.99, score_tol=1e-3)
        missed = [i for i in missed if not near_tie(rs[i], [SCORE_THRESH], 2e-4)]
        extra = [j for j in extra if not near_tie(os_[j], [SCORE_THRESH], 2e-4)]
        ious = [mask_iou(our_masks[j], ref_masks[i]) for i, j in pairs]
        ok = not missed and not extra and all(v >= 0.98 for v in ious)
        bad += not ok
        total += len(rb)
        print(f"  {'OK  ' if ok else 'FAIL'} {name}: cpu {len(rb)} cuda {len(ob)} matched {len(pairs)}, "
              f"mask IoU min {min(ious, default=1.0):.4f}")
    print(f"mixed batch: {len(paths)} images, {total} CPU detections, {bad} images differ")
    return 1 if bad or total == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
