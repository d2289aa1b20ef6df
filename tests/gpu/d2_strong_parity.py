#!/usr/bin/env python3
"""detectron2's own code against our engine on the strong R-101-FPN models (issue 48), run once,
outside `make check` (detectron2 is not on PyPI):

    bash tests/gpu/fetch_detectron2.sh /path/to/detectron2.git      # tests/gpu/deps/detectron2
    python3 tests/gpu/d2_strong_parity.py --work DIR [--image photo:chelsea] [--threads 2]

For each case, seeded weights (tests/parity/oracle.py's init recipe, random batchnorm statistics,
the stem conv divided by oracle_d2.STEM_INPUT_SCALE for detectron2's 0..255 input) go to both:
  - detectron2, in its own names (zoo_checkpoints.d2_tensors: background last), into the model its
    own config builds, run by its own code: ResizeShortestEdge(800, 1333) (PIL) on the BGR image,
    then model([{"image", "height", "width"}]) as DefaultPredictor does;
  - our engine, as canonical safetensors, with the shipped config the converter suggests.
Cases:
  lsj  configs/new_baselines/mask_rcnn_R_101_FPN_100ep_LSJ.py (LazyConfig; 200ep and 400ep only
       train longer): batchnorm in the trunk, FPN and heads, 2 RPN convs, 4conv1fc.
       configs/mask_rcnn_R-101-FPN_detectron2_LSJ.json
  gn   configs/Misc/mask_rcnn_R_50_FPN_3x_gn.yaml (detectron2 has no R-101 GN model): GroupNorm(32)
       in the trunk, FPN and heads, stride in the 3x3 conv, 4conv1fc.
       configs/mask_rcnn_R-50-FPN_detectron2_gn.json
One change to detectron2's config, equivalent at inference: "SyncBN" becomes "BN". In eval mode
both apply the running statistics; torch's SyncBatchNorm refuses CPU tensors.
Checked: every detection matched (same class, box IoU >= 0.99, score within 1e-3), pasted masks
IoU >= 0.98 (detectron2's grid_sample paste; our paste_rule "detectron2"). Exit 1 on a mismatch."""

import argparse
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
D2_DIR = os.path.join(HERE, "deps", "detectron2")
BUILD = os.environ.get("DETECT_BUILD", os.path.join(REPO, "build"))

import torch  # noqa: E402
import oracle  # noqa: E402
import oracle_d2  # noqa: E402
import zoo_checkpoints  # noqa: E402
from metrics import mask_iou, match_detections  # noqa: E402

CASES = {
    "lsj": dict(depth=101, arch="ARCH_V2", d2="new_baselines/mask_rcnn_R_101_FPN_100ep_LSJ.py",
                ours="mask_rcnn_R-101-FPN_detectron2_LSJ.json"),
    "gn": dict(depth=50, arch="ARCH_GN", d2="Misc/mask_rcnn_R_50_FPN_3x_gn.yaml",
               ours="mask_rcnn_R-50-FPN_detectron2_gn.json"),
}


def d2_path():
    """detectron2's source and its pure-Python dependencies (fetch_detectron2.sh) on sys.path,
    after the machine's own packages."""
    for p in (D2_DIR, os.path.join(D2_DIR, "site")):
        if p not in sys.path:
            sys.path.append(p)


def photo_inputs(work, image):
    """Prints detectron2's commit; writes the image as work/image.png for our engine and returns
    (that path, the BGR uint8 array detectron2 reads)."""
    with open(os.path.join(D2_DIR, "SOURCE.txt")) as f:
        print(f.readline().strip())
    rgb = oracle.load_image(image)
    png = os.path.join(work, "image.png")
    oracle.save_png(rgb, png)
    return png, np.ascontiguousarray(rgb[:, :, ::-1])


def d2_model(case):
    d2_path()
    path = os.path.join(D2_DIR, "configs", case["d2"])
    if path.endswith(".py"):
        from detectron2.config import LazyConfig, instantiate
        cfg = LazyConfig.load(path)
        m = cfg.model

        def no_sync(node):  # every norm="SyncBN" in the model's config -> "BN"
            for k in list(node.keys()):
                v = node[k]
                if v == "SyncBN":
                    node[k] = "BN"
                elif hasattr(v, "keys"):
                    no_sync(v)
        no_sync(m)
        model = instantiate(m)
    else:
        from detectron2.config import get_cfg
        from detectron2.modeling import build_model
        cfg = get_cfg()
        cfg.merge_from_file(path)
        cfg.MODEL.DEVICE = "cpu"
        model = build_model(cfg)
    return model.eval()


def seeded_canonical(case, seed):
    model = oracle.build_arch_model(getattr(oracle, case["arch"]), depth=case["depth"])
    oracle.init_weights(model, seed)
    canon, _ = oracle.convert.convert_state_dict(oracle.state_dict_numpy(model), "torchvision", "f32")
    canon["backbone.stem.conv.weight"] = np.ascontiguousarray(canon["backbone.stem.conv.weight"] /
                                                              oracle_d2.STEM_INPUT_SCALE)
    return canon


@torch.no_grad()
def d2_detect(model, bgr):
    from detectron2.data import transforms as T
    h, w = bgr.shape[:2]
    img = T.ResizeShortestEdge([800, 800], 1333).get_transform(bgr).apply_image(bgr)
    inst = model([{"image": torch.as_tensor(img.astype("float32").transpose(2, 0, 1)), "height": h,
                   "width": w}])[0]["instances"]
    return (inst.pred_boxes.tensor.numpy(), inst.scores.numpy(), inst.pred_classes.numpy() + 1,
            inst.pred_masks.numpy())


def ours_detect(work, name, config, weights, png, threads):
    from test_cli import detect_json_images
    out = os.path.join(work, f"{name}.json")
    r = subprocess.run([os.path.join(BUILD, "detect"), "-q", "--device", "cpu", "--threads", str(threads), "--config",
                        config, "--weights", weights, "--json", out, png], capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"detect failed: {r.stderr}")
    (_, (b, s, l), m), = detect_json_images(out)
    return b, s, l, m


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--image", default="photo:chelsea")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default="lsj,gn")
    ap.add_argument("--seed", type=int, default=7)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(a.threads)
    png, bgr = photo_inputs(a.work, a.image)
    failed = 0
    for name in a.cases.split(","):
        case = CASES[name]
        canon = seeded_canonical(case, a.seed)
        weights = os.path.join(a.work, f"{name}.safetensors")
        oracle.safetensors_io.save(canon, weights, {"format": "detect", "source_format": "d2_strong_parity"})
        # the converter's own check of what it would suggest for these weights
        model = d2_model(case)
        sd, _ = zoo_checkpoints.d2_tensors(canon)
        missing, unexpected = model.load_state_dict({k: torch.from_numpy(v) for k, v in sd.items()}, strict=False)
        missing = [k for k in missing if not k.endswith("num_batches_tracked")]
        assert not missing and not unexpected, (missing, unexpected)
        ref = d2_detect(model, bgr)
        ours = ours_detect(a.work, name, os.path.join(REPO, "configs", case["ours"]), weights, png, a.threads)
        pairs, missed, extra = match_detections(ref[0], ref[1], ref[2].astype(int), ours[0], ours[1],
                                                ours[2].astype(int), iou=0.99, score_tol=1e-3)
        ious = [mask_iou(ours[3][j], ref[3][i]) for i, j in pairs]
        dscore = max([abs(float(ours[1][j]) - float(ref[1][i])) for i, j in pairs], default=0.0)
        ok = len(ref[0]) > 0 and not missed and not extra and all(v >= 0.98 for v in ious)
        failed += not ok
        print(f"{'OK  ' if ok else 'FAIL'} {name} ({case['d2']} vs configs/{case['ours']}, {a.image} "
              f"{bgr.shape[1]}x{bgr.shape[0]}): detectron2 {len(ref[0])} detections, ours {len(ours[0])}, matched "
              f"{len(pairs)} (class, box IoU >= 0.99, score within 1e-3; max score diff {dscore:.1e}), "
              f"unmatched {len(missed)} + {len(extra)}; mask IoU min {min(ious, default=1):.4f} "
              f"mean {np.mean(ious) if ious else 1:.4f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
