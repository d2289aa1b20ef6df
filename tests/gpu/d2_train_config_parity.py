#!/usr/bin/env python3
"""detectron2's own predictor against our engine on custom training configs read by
`convert.py --train-config` (issue 46), run once, outside `make check` (detectron2 is not on PyPI):

    bash tests/gpu/fetch_detectron2.sh /path/to/detectron2.git      # tests/gpu/deps/detectron2
    python3 tests/gpu/d2_train_config_parity.py --work DIR [--image photo:chelsea] [--threads 2]

Each case is a detectron2 yaml written here that `_BASE_`s on the zoo's
COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml and changes what a custom-trained model
changes. For each:
  1. detectron2 builds the model from that yaml (get_cfg + merge_from_file + build_model); every
     parameter and batchnorm buffer is filled from a seed (the recipe of tests/parity/oracle.py,
     under detectron2's names; the stem divided by oracle_d2.STEM_INPUT_SCALE for the 0..255
     input) and saved as detectron2's checkpointer writes a training file ({'model': ...}, .pth);
  2. our side is what a user runs: models/convert.py model.pth model.safetensors
     --train-config the.yaml [--class-names names.txt] (the config written from the yaml), then
     build/detect --json;
  3. detectron2's side is DefaultPredictor's: ResizeShortestEdge(MIN_SIZE_TEST, MAX_SIZE_TEST)
     on the BGR image, then model([{"image", "height", "width"}]).
Checked: every detection matched (same class, box IoU >= 0.99, score within 1e-3; near-ties with
the score threshold or the per-image cut excepted), nothing extra, masks IoU >= 0.98. Exit 1 on a
mismatch."""

import argparse
import os
import subprocess
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "parity"))

import torch  # noqa: E402
import oracle_d2  # noqa: E402
from metrics import mask_iou, match_detections, near_tie  # noqa: E402
from d2_strong_parity import D2_DIR, d2_path, ours_detect, photo_inputs  # noqa: E402  (the same runs)

BASE = "COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml"
CASES = {
    "classes-anchors": dict(names=["apple", "pear", "plum"], yaml="""
MODEL:
  ANCHOR_GENERATOR:
    SIZES: [[24], [48], [96], [192], [384]]
    ASPECT_RATIOS: [[0.5, 1.0, 2.0, 3.0]]
  ROI_HEADS:
    NUM_CLASSES: 3
    SCORE_THRESH_TEST: 0.1
INPUT:
  MIN_SIZE_TEST: 600
  MAX_SIZE_TEST: 1000
TEST:
  DETECTIONS_PER_IMAGE: 60
"""),
    "agnostic": dict(names=["car", "van", "truck", "bus", "tram"], yaml="""
MODEL:
  ROI_HEADS:
    NUM_CLASSES: 5
  ROI_BOX_HEAD:
    CLS_AGNOSTIC_BBOX_REG: True
  ROI_MASK_HEAD:
    CLS_AGNOSTIC_MASK: True
INPUT:
  MIN_SIZE_TEST: 640
"""),
    "strong-heads": dict(names=["cell", "nucleus"], yaml="""
MODEL:
  FPN:
    NORM: "BN"
  RPN:
    CONV_DIMS: [-1, -1]
  ROI_HEADS:
    NUM_CLASSES: 2
  ROI_BOX_HEAD:
    NUM_CONV: 4
    NUM_FC: 1
    NORM: "BN"
  ROI_MASK_HEAD:
    NORM: "BN"
INPUT:
  MIN_SIZE_TEST: 512
  MAX_SIZE_TEST: 900
TEST:
  DETECTIONS_PER_IMAGE: 40
"""),
}
TIE_EPS = 2e-4


def d2_cfg(yaml_path):
    from detectron2.config import get_cfg
    cfg = get_cfg()
    cfg.merge_from_file(yaml_path)
    cfg.MODEL.DEVICE = "cpu"
    return cfg


@torch.no_grad()
def seed_model(model, seed):
    """oracle.py's init recipe (shared/reference/oracle.md §2) under detectron2's module names."""
    import torch.nn as nn
    g = torch.Generator().manual_seed(seed)

    def normal(t, std):
        t.copy_(torch.randn(t.shape, generator=g) * std)

    def uniform(t, a, b):
        t.copy_(torch.rand(t.shape, generator=g) * (b - a) + a)

    for name, m in model.named_modules():
        if hasattr(m, "running_mean") and hasattr(m, "weight") and not isinstance(m, (nn.Conv2d, nn.Linear)):
            uniform(m.weight, 0.1, 0.3) if (name.startswith("backbone.bottom_up.res") and
                                            name.endswith("conv3.norm")) else uniform(m.weight, 0.8, 1.2)
            normal(m.bias, 0.1)
            normal(m.running_mean, 0.1)
            uniform(m.running_var, 0.5, 1.5)
            continue
        if not isinstance(m, (nn.Conv2d, nn.Linear, nn.ConvTranspose2d)):
            continue
        w = m.weight
        fan_in = w[0].numel() if not isinstance(m, nn.ConvTranspose2d) else w.shape[0]
        if name.startswith("backbone.bottom_up."):
            gain = 2.0
        elif "fpn_lateral" in name:
            gain = 0.16
        elif name.endswith("mask_head.predictor"):
            gain = 4.0
        elif name.endswith("mask_head.deconv"):
            gain = 2.0
        else:
            gain = 1.0
        std = {"proposal_generator.rpn_head.objectness_logits": 0.05,
               "proposal_generator.rpn_head.anchor_deltas": 0.012,
               "roi_heads.box_predictor.cls_score": 0.05,
               "roi_heads.box_predictor.bbox_pred": 0.016}.get(name, (gain / fan_in) ** 0.5)
        normal(w, std)
        if name == "roi_heads.box_predictor.cls_score":
            w -= w.mean(1, keepdim=True)
        if name == "backbone.bottom_up.stem.conv1":
            w /= oracle_d2.STEM_INPUT_SCALE
        if m.bias is not None:
            normal(m.bias, 0.05)
            if name == "proposal_generator.rpn_head.anchor_deltas":
                m.bias.view(-1, 4)[:, 2:] += 0.3


@torch.no_grad()
def d2_detect(model, cfg, bgr):
    from detectron2.data import transforms as T
    h, w = bgr.shape[:2]
    aug = T.ResizeShortestEdge([cfg.INPUT.MIN_SIZE_TEST] * 2, cfg.INPUT.MAX_SIZE_TEST)
    img = aug.get_transform(bgr).apply_image(bgr)
    inst = model([{"image": torch.as_tensor(img.astype("float32").transpose(2, 0, 1)), "height": h,
                   "width": w}])[0]["instances"]
    return (inst.pred_boxes.tensor.numpy(), inst.scores.numpy(), inst.pred_classes.numpy() + 1,
            inst.pred_masks.numpy())


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", required=True)
    ap.add_argument("--image", default="photo:chelsea")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--seed", type=int, default=41)
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    torch.set_num_threads(a.threads)
    d2_path()
    from detectron2.modeling import build_model
    png, bgr = photo_inputs(a.work, a.image)
    failed = 0
    for name in a.cases.split(","):
        case = CASES[name]
        yaml_path = os.path.join(a.work, f"{name}.yaml")
        with open(yaml_path, "w") as f:
            f.write(f'_BASE_: "{os.path.join(D2_DIR, "configs", BASE)}"\n' + case["yaml"])
        names = os.path.join(a.work, f"{name}.names.txt")
        with open(names, "w") as f:
            f.write("\n".join(case["names"]) + "\n")
        cfg = d2_cfg(yaml_path)
        model = build_model(cfg).eval()
        seed_model(model, a.seed)
        ckpt = os.path.join(a.work, f"{name}.pth")
        torch.save({"model": model.state_dict()}, ckpt)
        weights, config = os.path.join(a.work, f"{name}.safetensors"), os.path.join(a.work, f"{name}.json")
        run([sys.executable, os.path.join(REPO, "models", "convert.py"), ckpt, weights, "-q", "--from",
             "detectron2", "--train-config", yaml_path, "--class-names", names, "--config-out", config])
        ob, osc, ol, om = ours_detect(a.work, name, config, weights, png, a.threads)
        rb, rs, rl, rm = d2_detect(model, cfg, bgr)
        cuts = [cfg.MODEL.ROI_HEADS.SCORE_THRESH_TEST] + \
               ([float(rs.min())] if len(rs) >= cfg.TEST.DETECTIONS_PER_IMAGE else [])
        pairs, missed, extra = match_detections(rb, rs, rl, ob, osc, ol, iou=0.99, score_tol=1e-3)
        missed = [i for i in missed if not near_tie(rs[i], cuts, TIE_EPS)]
        extra = [j for j in extra if not near_tie(osc[j], cuts, TIE_EPS)]
        ious = [mask_iou(om[j], rm[i]) for i, j in pairs]
        diff = max((abs(float(rs[i]) - float(osc[j])) for i, j in pairs), default=0.0)
        ok = len(rb) > 0 and not missed and not extra and min(ious, default=1.0) >= 0.98 and \
            len(pairs) >= 0.9 * len(rb)
        failed += not ok
        print(f"{'OK  ' if ok else 'FAIL'} {name}: detectron2 {len(rb)}, ours {len(ob)}, matched {len(pairs)}, "
              f"missed {len(missed)}, extra {len(extra)}, max score diff {diff:.2e}, "
              f"mask IoU min {min(ious, default=1.0):.4f}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
