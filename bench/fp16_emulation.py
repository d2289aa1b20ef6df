#!/usr/bin/python3
"""What --precision fp16 should cost in accuracy, measured on the CPU before any GPU run.

  /usr/bin/python3 bench/fp16_emulation.py [--scenes N] [--threads T]

torchvision's Mask R-CNN with our CUDA backend's fp16 storage imitated (bench/NOTES.md 12.4):
batchnorm folded into the conv weights, then every conv, deconv and linear weight rounded to
fp16, the conv biases too except where our backend adds them in fp32 (RPN predictors, mask
logits, deconv, linear layers); the network input and every feature map between layers rounded
to fp16 (backbone ReLUs and shortcuts, FPN laterals, top-down sums and outputs, RPN conv,
RoIAlign outputs, fc6/fc7, mask head convs and deconv); products summed in fp32 as tensor cores
do. What it does not imitate: the order of the tensor cores' sums, and our conv3's two
roundings (the residual sum, then the bias) where it rounds once.

Reported against the fp32 model on the same inputs:
1. the seeded random R-101-FPN (tests/parity/oracle.py, seed 0) on the astronaut photo and the
   800x1216 synthetic scene: share of fp32's top-20 detections found (same class, IoU >= 0.5),
   box IoU, score difference, mask IoU of the matched ones;
2. the shipped shapes model (models/shapes_r101_narrow.safetensors) on N held-out scenes: box
   and mask AP, AP50, AP75 by pycocotools, fp32 against emulated fp16.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [os.path.join(REPO, "tests", "parity"), os.path.join(REPO, "models", "shapes"),
                os.path.join(REPO, "models")]
import oracle  # noqa: E402
from metrics import precision_drift  # noqa: E402
from torchvision.ops.misc import FrozenBatchNorm2d  # noqa: E402


def half(t):
    return t.half().float()


def fold_bn(conv, bn):
    """conv's weight times bn's scale, rounded to fp16; bn becomes x + (rounded folded bias)."""
    scale = bn.weight * (bn.running_var + bn.eps).rsqrt()
    bias = bn.bias - bn.running_mean * scale
    conv.weight.data = half(conv.weight.data * scale.reshape(-1, 1, 1, 1))
    bn.weight.data.fill_(1.0)
    bn.running_mean.data.zero_()
    bn.running_var.data.fill_(1.0 - bn.eps)
    bn.bias.data = half(bias)


def round_output(module, inputs, output):
    return half(output)


def round_input(module, inputs):
    return tuple(half(x) if torch.is_tensor(x) else x for x in inputs)


def emulate_fp16(model):
    """Rounds model's weights and registers the rounding hooks, in place."""
    body = model.backbone.body
    folded = set()
    for name, mod in body.named_modules():
        pairs = [("conv1", "bn1"), ("conv2", "bn2"), ("conv3", "bn3")]
        for c, b in pairs:
            if isinstance(getattr(mod, c, None), nn.Conv2d) and isinstance(getattr(mod, b, None), FrozenBatchNorm2d):
                fold_bn(getattr(mod, c), getattr(mod, b))
                folded.add(getattr(mod, c))
        ds = getattr(mod, "downsample", None)
        if isinstance(ds, nn.Sequential) and len(ds) == 2:
            fold_bn(ds[0], ds[1])
            folded.add(ds[0])
            ds.register_forward_hook(round_output)
    fp32_bias = {model.rpn.head.cls_logits, model.rpn.head.bbox_pred, model.roi_heads.mask_predictor.mask_fcn_logits,
                 model.roi_heads.mask_predictor.conv5_mask}
    for mod in model.modules():
        if isinstance(mod, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            if mod not in folded:
                mod.weight.data = half(mod.weight.data)
            if mod.bias is not None and isinstance(mod, nn.Conv2d) and mod not in fp32_bias:
                mod.bias.data = half(mod.bias.data)
    body.register_forward_pre_hook(round_input)  # the normalised input
    for mod in body.modules():
        if isinstance(mod, nn.ReLU):
            mod.register_forward_hook(round_output)
    fpn = model.backbone.fpn
    for m in fpn.inner_blocks:
        m.register_forward_hook(round_output)
    for m in fpn.layer_blocks:
        m.register_forward_pre_hook(round_input)  # the top-down sum
        m.register_forward_hook(round_output)
    model.rpn.head.conv.register_forward_hook(round_output)
    rh = model.roi_heads
    for m in (rh.box_roi_pool, rh.box_head.fc6, rh.box_head.fc7, rh.mask_roi_pool, rh.mask_predictor.conv5_mask):
        m.register_forward_hook(round_output)
    for m in rh.mask_head:
        m.register_forward_hook(round_output)
    return model


def detections(model, img):
    with torch.no_grad():
        out = model([oracle.image_tensor(img)])[0]
    return {"boxes": out["boxes"].numpy().astype(np.float64), "scores": out["scores"].numpy(),
            "labels": out["labels"].numpy(), "masks": out["masks"][:, 0].numpy() > 0.5}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenes", type=int, default=50)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)

    print("1. seeded random R-101-FPN (oracle seed 0), fp16 storage emulated vs fp32:", flush=True)
    ref_model = oracle.build_model(0, min_size=800, max_size=1333).eval()
    f16_model = emulate_fp16(oracle.build_model(0, min_size=800, max_size=1333).eval())
    images = {"astronaut 512x512 -> 800x800": oracle.load_image(os.path.join(REPO, "examples", "astronaut.png")),
              "synthetic 800x1216": oracle.make_synthetic_image(800, 1216, 0)}
    for name, img in images.items():
        t = time.time()
        r, o = detections(ref_model, img), detections(f16_model, img)
        print(f"  {name}: {precision_drift(r, o)['text']} ({time.time() - t:.0f} s)", flush=True)

    print(f"2. the shipped shapes model, {a.scenes} held-out scenes, AP by pycocotools:", flush=True)
    import evaluate
    import shapes_data
    with tempfile.TemporaryDirectory() as work:
        ann_path = shapes_data.write_dataset(os.path.join(work, "images"), shapes_data.HELDOUT_SEED, a.scenes, 0)
        ann = json.load(open(ann_path))
        for label, model in (("fp32", evaluate.load_torchvision(evaluate.WEIGHTS, a.threads)),
                             ("fp16 emulated", emulate_fp16(evaluate.load_torchvision(evaluate.WEIGHTS, a.threads)))):
            dets = evaluate.run_torchvision(model, os.path.join(work, "images"), ann)
            ap = evaluate.coco_ap(ann_path, evaluate.coco_results(dets))
            print(f"  {label:<14} box AP/AP50/AP75 " + " ".join(f"{x:.4f}" for x in ap["bbox"]) +
                  "   mask " + " ".join(f"{x:.4f}" for x in ap["segm"]), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
