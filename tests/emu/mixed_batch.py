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
Exit 1 on any mismatch."""

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


def run(folder, device, out):
    cmd = [os.path.join(BUILD, "detect"), "--config", CONFIG, "--weights", WEIGHTS, "--device", device, "-q",
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
    a = ap.parse_args()
    from metrics import mask_iou, match_detections, near_tie
    folder, paths = make_folder(a.work)
    cpu = run(folder, "cpu", os.path.join(a.work, "cpu.json"))
    cuda = run(folder, "cuda", os.path.join(a.work, "cuda.json"))
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
