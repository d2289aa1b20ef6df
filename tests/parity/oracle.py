#!/usr/bin/python3
"""torchvision reference ("oracle") for the Mask R-CNN R-101-FPN parity tests.

Run with Debian's Python (/usr/bin/python3: torch 1.13 CPU, torchvision 0.14).  Follows
/work/shared/reference/oracle.md: seeded random weights (§2 recipe), a staged forward that
exposes every stage boundary (§5), checked bitwise against model([img]).

Library:
    build_model(seed, num_classes=81, min_size=800, max_size=1333, bg_bias=0.0)
    init_weights(model, seed, bg_bias=0.0)
    export_weights(model, path)            canonical safetensors via models/convert.py's mapping
    export_weights_via_pth(model, path)    torch.save + `convert.py` subprocess (end to end)
    load_weights(model, path)              canonical safetensors -> torchvision model
    make_synthetic_image(h, w, seed)       uint8 RGB HxWx3
    photo(name)                            uint8 RGB HxWx3 from skimage.data
    load_image(spec, seed)                 'synthetic:HxW' | 'photo:NAME' | path to an image file
    run_staged(model, image_uint8_rgb)     {stage name: ndarray}, asserts staged == model([img])

CLI:
    oracle.py --seed 0 --image synthetic:800x1216 --min 800 --max 1333 --out DIR
              [--weights-out W.safetensors [--weights-via-pth] [--weights-dtype f16]]
              [--weights-in W.safetensors] [--png-out img.png] [--bg-bias B]
              [--threads 2] [--num-classes 81] [--image-seed N] [--no-check]
writes DIR/<stage>.npy for every stage, DIR/image.png (the exact input pixels; also --png-out),
DIR/manifest.json, and the weights when asked.

The network input is torch.from_numpy(img).permute(2, 0, 1).float() / 255 (a division, not a
multiplication by 1/255), i.e. an RGB CHW tensor in [0, 1].
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision
from torchvision.models.detection import MaskRCNN
from torchvision.models.detection.backbone_utils import resnet_fpn_backbone
from torchvision.models.detection.roi_heads import maskrcnn_inference
from torchvision.models.detection.rpn import concat_box_prediction_layers
from torchvision.ops.misc import FrozenBatchNorm2d

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS_DIR = os.path.join(REPO, "models")
CONVERT_PY = os.path.join(MODELS_DIR, "convert.py")
if MODELS_DIR not in sys.path:
    sys.path.insert(0, MODELS_DIR)
import convert  # noqa: E402  (models/convert.py: the one name mapping)
import safetensors_io  # noqa: E402

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket")


# ---------------------------------------------------------------------------------------
# Model and the seeded init recipe (oracle.md §2)
# ---------------------------------------------------------------------------------------

# The strong baselines' architectures (shared/reference/zoo_variants.md §1-2), as torchvision's
# own public classes build them: `arch` keys and what they select.
#   trunk_norm  "frozen_bn" (classic) | "bn" (v2, LSJ: nn.BatchNorm2d, eval) | "gn" (GroupNorm(32, C))
#   fpn_norm    None | "bn" | "gn"  (FeaturePyramidNetwork's Conv2dNormActivation blocks, no conv bias)
#   rpn_convs   1 | 2               (RPNHead conv_depth)
#   box_convs, box_fcs              0, 2: TwoMLPHead; else FastRCNNConvFCHead((256,7,7), [256]*convs, [1024]*fcs)
#   head_norm   None | "bn" | "gn"  (the box head's convs)
#   mask_norm   None | "bn" | "gn"  (MaskRCNNHeads' convs)
ARCH_CLASSIC = dict(trunk_norm="frozen_bn", fpn_norm=None, rpn_convs=1, box_convs=0, box_fcs=2, head_norm=None,
                    mask_norm=None)
ARCH_V2 = dict(trunk_norm="bn", fpn_norm="bn", rpn_convs=2, box_convs=4, box_fcs=1, head_norm="bn", mask_norm="bn")
ARCH_GN = dict(trunk_norm="gn", fpn_norm="gn", rpn_convs=1, box_convs=4, box_fcs=1, head_norm="gn", mask_norm="gn")
GN_GROUPS = 32


def config_keys(arch):
    """The engine's config keys ({section: {key: value}}, configs/README.md) that describe `arch`,
    derived from it: what a config for such weights sets on top of its zoo's conventions (GN_GROUPS
    and the eps 1e-5 of torch's norms are the keys' defaults)."""
    a = dict(ARCH_CLASSIC, **arch)
    norm = {None: "none", "frozen_bn": "batchnorm", "bn": "batchnorm", "gn": "group_norm"}
    return {"backbone": {"norm": norm[a["trunk_norm"]]}, "fpn": {"norm": norm[a["fpn_norm"]]},
            "rpn": {"num_convs": a["rpn_convs"]},
            "box_head": {"num_convs": a["box_convs"], "num_fcs": a["box_fcs"], "norm": norm[a["head_norm"]]},
            "mask_head": {"norm": norm[a["mask_norm"]]}}


def norm_layer(kind):
    """The norm_layer callable torchvision's builders take, for an `arch` norm name."""
    if kind is None:
        return None
    return {"frozen_bn": FrozenBatchNorm2d, "bn": nn.BatchNorm2d,
            "gn": lambda channels: nn.GroupNorm(GN_GROUPS, channels)}[kind]


def build_arch_model(arch, depth=101, num_classes=81, min_size=800, max_size=1333):
    """MaskRCNN of `arch` (ARCH_*), from torchvision's public classes: the v2 builder's body
    (maskrcnn_resnet50_fpn_v2) with any trunk depth and norms. Not initialised."""
    from torchvision.models import resnet50, resnet101
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import FastRCNNConvFCHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads
    from torchvision.models.detection.rpn import RPNHead
    from torchvision.ops.feature_pyramid_network import LastLevelMaxPool
    a = dict(ARCH_CLASSIC, **arch)
    trunk = {50: resnet50, 101: resnet101}[depth](weights=None, norm_layer=norm_layer(a["trunk_norm"]))
    backbone = BackboneWithFPN(trunk, {"layer1": "0", "layer2": "1", "layer3": "2", "layer4": "3"},
                               [256, 512, 1024, 2048], 256, extra_blocks=LastLevelMaxPool(),
                               norm_layer=norm_layer(a["fpn_norm"]))
    heads = dict(rpn_head=RPNHead(256, 3, conv_depth=a["rpn_convs"]),
                 mask_head=MaskRCNNHeads(256, [256] * 4, 1, norm_layer=norm_layer(a["mask_norm"])))
    if a["box_convs"] or a["box_fcs"] != 2:
        heads["box_head"] = FastRCNNConvFCHead((256, 7, 7), [256] * a["box_convs"], [1024] * a["box_fcs"],
                                               norm_layer=norm_layer(a["head_norm"]))
    return MaskRCNN(backbone, num_classes=num_classes, min_size=min_size, max_size=max_size, **heads).eval()


def build_model(seed, num_classes=81, min_size=800, max_size=1333, bg_bias=0.0, arch=None):
    """torchvision MaskRCNN, R-101-FPN, FrozenBN, eval mode, initialised by init_weights();
    with `arch` (ARCH_V2, ARCH_GN, ...), that architecture (build_arch_model)."""
    if arch is None:
        bb = resnet_fpn_backbone(backbone_name="resnet101", weights=None, trainable_layers=0)
        model = MaskRCNN(bb, num_classes=num_classes, min_size=min_size, max_size=max_size).eval()
    else:
        model = build_arch_model(arch, num_classes=num_classes, min_size=min_size, max_size=max_size)
    init_weights(model, seed, bg_bias=bg_bias)
    return model


@torch.no_grad()
def init_weights(model, seed, bg_bias=0.0):
    """oracle.md §2.  One torch.Generator(seed); modules visited in named_modules() order; per
    module the weight is drawn first, then the bias (FrozenBN: weight, bias, running_mean,
    running_var).  N(0, s^2) = s * randn, U(a, b) = a + (b - a) * rand, both from the generator."""
    g = torch.Generator().manual_seed(int(seed))

    def normal(t, std):
        t.copy_(torch.randn(t.shape, generator=g) * std)

    def uniform(t, a, b):
        t.copy_(torch.rand(t.shape, generator=g) * (b - a) + a)

    def fan_in(w):
        return w[0].numel()  # Conv2d [out,in,kh,kw] -> in*kh*kw; Linear [out,in] -> in

    def gain_std(w, gain2):  # N(0, gain2 / fan_in)
        return (gain2 / fan_in(w)) ** 0.5

    seen = 0
    for name, m in model.named_modules():
        # batchnorm in eval mode is FrozenBN's arithmetic: the same random statistics (mean
        # and var not 0 and 1, so folding them is tested)
        if isinstance(m, (FrozenBatchNorm2d, nn.BatchNorm2d, nn.GroupNorm)):
            if name.endswith("bn3"):
                uniform(m.weight, 0.1, 0.3)  # keeps the 33 residual sums bounded
            else:
                uniform(m.weight, 0.8, 1.2)
            normal(m.bias, 0.1)
            if not isinstance(m, nn.GroupNorm):  # GroupNorm has no running statistics
                normal(m.running_mean, 0.1)
                uniform(m.running_var, 0.5, 1.5)
            seen += 1
            continue
        if not isinstance(m, (nn.Conv2d, nn.ConvTranspose2d, nn.Linear)):
            continue
        w = m.weight
        if name.startswith("backbone.body."):
            normal(w, gain_std(w, 2.0))  # He
        elif name.startswith("backbone.fpn.inner_blocks."):
            normal(w, gain_std(w, 0.16))  # (0.4)^2 / fan_in
        elif name.startswith("backbone.fpn.layer_blocks."):
            normal(w, gain_std(w, 1.0))
        elif name in ("rpn.head.cls_logits",):
            normal(w, 0.05)
        elif name in ("rpn.head.bbox_pred",):
            normal(w, 0.012)
        elif name == "roi_heads.box_predictor.cls_score":
            normal(w, 0.05)
            w -= w.mean(1, keepdim=True)  # row-centred: post-ReLU features share a DC part
        elif name == "roi_heads.box_predictor.bbox_pred":
            normal(w, 0.016)
        elif name == "roi_heads.mask_predictor.conv5_mask":
            normal(w, (2.0 / 256) ** 0.5)
        elif name == "roi_heads.mask_predictor.mask_fcn_logits":
            normal(w, gain_std(w, 4.0))
        elif (name.startswith("rpn.head.conv") or name.startswith("roi_heads.box_head.")
              or name.startswith("roi_heads.mask_head.")):
            normal(w, gain_std(w, 1.0))
        else:
            raise AssertionError(f"init recipe has no rule for {name}")
        if m.bias is not None:
            normal(m.bias, 0.05)
            if name == "rpn.head.bbox_pred":
                A = m.bias.shape[0] // 4
                for a in range(A):  # dw, dh: bigger proposals, so P5 is used
                    m.bias[a * 4 + 2] += 0.3
                    m.bias[a * 4 + 3] += 0.3
            if name == "roi_heads.box_predictor.cls_score":
                m.bias[0] += bg_bias
        seen += 1
    assert seen > 0
    return model


@torch.no_grad()
def load_weights(model, path):
    """Load a canonical safetensors file (BatchNorm form) into the torchvision model: the
    inverse of export_weights, names via convert.py's torchvision table."""
    tensors, _ = safetensors_io.load(path)
    fmt = convert.SOURCE_FORMATS["torchvision"]
    sd = model.state_dict()
    loaded = {}
    for name, a in tensors.items():
        tv = fmt.source_name(name)
        if tv is None or tv not in sd:
            raise ValueError(f"{path}: {name} has no torchvision counterpart in this model")
        if tuple(sd[tv].shape) != a.shape:
            raise ValueError(f"{path}: {name} has shape {list(a.shape)}, model wants {list(sd[tv].shape)}")
        loaded[tv] = torch.from_numpy(a.astype(np.float32))
    missing = sorted(set(sd) - set(loaded))
    if missing:
        raise ValueError(f"{path}: missing {', '.join(missing[:5])}")
    model.load_state_dict(loaded, strict=True)
    return model


def state_dict_numpy(model):
    return {k: v.detach().cpu().numpy() for k, v in model.state_dict().items()}


def export_weights(model, path, dtype="f32", source_sha256=None):
    """state_dict -> numpy -> canonical names (convert.convert_state_dict) -> safetensors."""
    tensors, info = convert.convert_state_dict(state_dict_numpy(model), "torchvision", dtype)
    if source_sha256 is None:
        source_sha256 = "in-memory:oracle.py"
    safetensors_io.save(tensors, path, convert.make_metadata(info, "torchvision", source_sha256))
    return info


def export_weights_via_pth(model, path, dtype="f32", keep_pth=None):
    """torch.save(state_dict) then `convert.py` in a subprocess: the converter end to end."""
    with tempfile.TemporaryDirectory(dir=os.path.dirname(os.path.abspath(path))) as td:
        pth = keep_pth or os.path.join(td, "model.pth")
        torch.save(model.state_dict(), pth)
        r = subprocess.run([sys.executable, CONVERT_PY, pth, path, "--dtype", dtype, "-q"],
                           capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"convert.py failed ({r.returncode}): {r.stderr.strip()}")


# ---------------------------------------------------------------------------------------
# Images
# ---------------------------------------------------------------------------------------

def make_synthetic_image(h, w, seed=0):
    """uint8 RGB [h,w,3]: smooth colour gradients + 25 random filled rectangles + noise."""
    rng = np.random.RandomState(seed)
    y = np.linspace(0.0, 1.0, h, dtype=np.float64)[:, None]
    x = np.linspace(0.0, 1.0, w, dtype=np.float64)[None, :]
    img = np.empty((h, w, 3), np.float64)
    img[..., 0] = 0.2 + 0.6 * x + 0 * y
    img[..., 1] = 0.2 + 0.6 * y + 0 * x
    img[..., 2] = 0.5 + 0.3 * np.sin(2 * np.pi * (x + y))
    for _ in range(25):
        rh = rng.randint(max(2, h // 20), max(3, h // 2))
        rw = rng.randint(max(2, w // 20), max(3, w // 2))
        y0 = rng.randint(0, max(1, h - rh))
        x0 = rng.randint(0, max(1, w - rw))
        img[y0:y0 + rh, x0:x0 + rw] = rng.uniform(0.0, 1.0, size=3)
    img += rng.normal(0.0, 0.03, size=img.shape)
    return np.clip(np.round(img * 255.0), 0, 255).astype(np.uint8)


def photo(name):
    """A real photograph bundled with scikit-image, as uint8 RGB [h,w,3]
    (astronaut 512x512, coffee 400x600, chelsea 300x451, rocket 427x640)."""
    import skimage.data
    if name not in PHOTOS:
        raise ValueError(f"unknown photo {name!r}; choose from {', '.join(PHOTOS)}")
    a = getattr(skimage.data, name)()
    if a.ndim == 2:
        a = np.stack([a] * 3, axis=-1)
    return np.ascontiguousarray(a[..., :3].astype(np.uint8))


def load_image(spec, seed=0):
    """'synthetic:HxW', 'photo:NAME' or an image file path -> uint8 RGB [h,w,3]."""
    if spec.startswith("synthetic:"):
        h, w = (int(v) for v in spec[len("synthetic:"):].lower().split("x"))
        return make_synthetic_image(h, w, seed)
    if spec.startswith("photo:"):
        return photo(spec[len("photo:"):])
    from PIL import Image
    with Image.open(spec) as im:
        return np.asarray(im.convert("RGB"), dtype=np.uint8).copy()


def save_png(img, path):
    from PIL import Image
    Image.fromarray(img, mode="RGB").save(path, format="PNG")


def image_tensor(img):
    """uint8 HxWx3 RGB -> float CHW in [0,1]: the model input."""
    assert img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3, img.shape
    return torch.from_numpy(np.ascontiguousarray(img)).permute(2, 0, 1).float() / 255


# ---------------------------------------------------------------------------------------
# Staged forward (oracle.md §5)
# ---------------------------------------------------------------------------------------

@torch.no_grad()
def run_staged(model, image_uint8_rgb, check=True):
    """Run GeneralizedRCNN.forward unrolled for eval; return {name: ndarray} for every stage
    boundary (names/shapes as oracle.md §5, torch layouts).  With check=True, assert that
    final boxes/scores/labels/masks equal model([img]) bitwise."""
    m = model
    assert not m.training
    img = image_tensor(image_uint8_rgb)
    out = {}
    out["00_image"] = img

    il, _ = m.transform([img])
    out["01_input_tensor"] = il.tensors
    out["01_image_size_hw"] = torch.tensor(il.image_sizes[0], dtype=torch.int64)

    stem = {}
    hook = m.backbone.body.maxpool.register_forward_hook(lambda mod, i, o: stem.setdefault("x", o))
    try:
        body = m.backbone.body(il.tensors)
    finally:
        hook.remove()
    out["02_stem"] = stem["x"]
    for i, k in enumerate(["0", "1", "2", "3"]):
        out[f"03_c{i + 2}"] = body[k]
    feats = m.backbone.fpn(body)
    levels = list(feats.keys())  # '0','1','2','3','pool' = P2..P6
    for i, k in enumerate(levels):
        out[f"04_p{i + 2}"] = feats[k]

    fl = list(feats.values())
    obj, dlt = m.rpn.head(fl)
    for i in range(len(fl)):
        out[f"05_rpn_logits_p{i + 2}"] = obj[i]
    for i in range(len(fl)):
        out[f"05_rpn_deltas_p{i + 2}"] = dlt[i]
    anchors = m.rpn.anchor_generator(il, fl)
    out["06_anchors"] = anchors[0]
    o, d = concat_box_prediction_layers(obj, dlt)
    props = m.rpn.box_coder.decode(d.detach(), anchors).view(1, -1, 4)
    pboxes, pscores = m.rpn.filter_proposals(props, o, il.image_sizes, [x[0].numel() for x in obj])
    out["07_rpn_proposals"] = pboxes[0]
    out["07_rpn_scores"] = pscores[0]

    rh = m.roi_heads
    bf = rh.box_roi_pool(feats, pboxes, il.image_sizes)
    out["08_box_roi_feats"] = bf
    out["08_box_roi_levels"] = rh.box_roi_pool.map_levels(pboxes).to(torch.int64) + 2
    fc7 = rh.box_head(bf)
    cl, br = rh.box_predictor(fc7)
    out["09_box_fc7"] = fc7
    out["09_class_logits"] = cl
    out["09_box_regression"] = br
    boxes, scores, labels = rh.postprocess_detections(cl, br, pboxes, il.image_sizes)
    out["10_det_boxes"] = boxes[0]
    out["10_det_scores"] = scores[0]
    out["10_det_labels"] = labels[0]

    mf = rh.mask_roi_pool(feats, boxes, il.image_sizes)
    ml = rh.mask_predictor(rh.mask_head(mf))
    mp = maskrcnn_inference(ml, labels)
    out["11_mask_roi_feats"] = mf
    out["11_mask_logits"] = ml
    out["11_mask_probs"] = mp[0]
    res = m.transform.postprocess(
        [dict(boxes=boxes[0], scores=scores[0], labels=labels[0], masks=mp[0])],
        il.image_sizes, [tuple(img.shape[-2:])])[0]
    out["12_final_boxes"] = res["boxes"]
    out["12_final_scores"] = res["scores"]
    out["12_final_labels"] = res["labels"]
    out["12_final_masks"] = res["masks"]

    if check:
        ref = m([img])[0]
        for k in ("boxes", "scores", "labels", "masks"):
            a, b = out["12_final_" + k], ref[k]
            assert a.shape == b.shape and torch.equal(a, b), f"staged forward != model([img]) for {k}"
    return {k: v.detach().cpu().contiguous().numpy() for k, v in out.items()}


def summary(stages):
    s = stages
    lines = [
        f"input {list(s['01_input_tensor'].shape)} image_size {s['01_image_size_hw'].tolist()}",
        "std C2..C5 " + "/".join(f"{s[f'03_c{i}'].std():.2f}" for i in range(2, 6))
        + "  P2..P6 " + "/".join(f"{s[f'04_p{i}'].std():.2f}" for i in range(2, 7)),
        f"anchors {s['06_anchors'].shape[0]}  proposals {s['07_rpn_proposals'].shape[0]} "
        f"(scores {s['07_rpn_scores'].min():.3f}..{s['07_rpn_scores'].max():.5f})",
        "box RoIs per level P2..P5 "
        + "/".join(str(int((s["08_box_roi_levels"] == lv).sum())) for lv in range(2, 6)),
    ]
    n = s["12_final_scores"].shape[0]
    if n:
        lines.append(
            f"detections {n}: scores {s['12_final_scores'].min():.3f}..{s['12_final_scores'].max():.3f}, "
            f"{len(np.unique(s['12_final_labels']))} labels; mask prob p1/p50/p99 "
            + "/".join(f"{v:.3f}" for v in np.percentile(s["11_mask_probs"], [1, 50, 99])))
    else:
        lines.append("detections 0")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="oracle.py", description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=0, help="weight seed (and synthetic image seed)")
    ap.add_argument("--image-seed", type=int, default=None, help="synthetic image seed (default: --seed)")
    ap.add_argument("--image", default="synthetic:800x1216",
                    help="synthetic:HxW | photo:NAME (%s) | image file" % ",".join(PHOTOS))
    ap.add_argument("--min", dest="min_size", type=int, default=800)
    ap.add_argument("--max", dest="max_size", type=int, default=1333)
    ap.add_argument("--num-classes", type=int, default=81)
    ap.add_argument("--bg-bias", type=float, default=0.0, help="added to cls_score.bias[0]")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--out", help="directory for NAME.npy stage dumps, image.png, manifest.json")
    ap.add_argument("--weights-out", help="write canonical safetensors weights here")
    ap.add_argument("--weights-via-pth", action="store_true",
                    help="produce --weights-out with torch.save + convert.py (end-to-end converter path)")
    ap.add_argument("--weights-dtype", default="f32", choices=["f32", "f16"])
    ap.add_argument("--weights-in", help="load canonical safetensors weights instead of the seeded init")
    ap.add_argument("--png-out", help="also write the input image here as PNG")
    ap.add_argument("--no-check", action="store_true",
                    help="skip the second forward that checks staged == model([img])")
    args = ap.parse_args(argv)

    torch.set_num_threads(args.threads)
    t0 = time.time()
    img = load_image(args.image, args.seed if args.image_seed is None else args.image_seed)
    model = build_model(args.seed, args.num_classes, args.min_size, args.max_size, args.bg_bias)
    if args.weights_in:
        load_weights(model, args.weights_in)
    t_build = time.time() - t0

    if args.weights_out:
        t = time.time()
        if args.weights_via_pth:
            export_weights_via_pth(model, args.weights_out, args.weights_dtype)
        else:
            export_weights(model, args.weights_out, args.weights_dtype)
        print(f"weights: {args.weights_out} ({time.time() - t:.2f} s)")
    if args.png_out:
        save_png(img, args.png_out)

    t = time.time()
    stages = run_staged(model, img, check=not args.no_check)
    t_run = time.time() - t
    print(summary(stages))
    print(f"staged forward == model([img]): {'not checked' if args.no_check else 'ok'}; "
          f"build {t_build:.2f} s, staged{'' if args.no_check else ' + check'} {t_run:.2f} s")

    if args.out:
        os.makedirs(args.out, exist_ok=True)
        save_png(img, os.path.join(args.out, "image.png"))
        manifest = dict(
            seed=args.seed, image=args.image, image_hw=list(img.shape[:2]), min_size=args.min_size,
            max_size=args.max_size, num_classes=args.num_classes, bg_bias=args.bg_bias,
            threads=args.threads, torch=torch.__version__, torchvision=torchvision.__version__,
            weights_in=args.weights_in, staged_equals_model_forward=None if args.no_check else True,
            tensors=[])
        for name, a in stages.items():
            np.save(os.path.join(args.out, name + ".npy"), a)
            manifest["tensors"].append(dict(name=name, dtype=str(a.dtype), shape=list(a.shape)))
        with open(os.path.join(args.out, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=1)
        print(f"wrote {len(stages)} tensors to {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
