"""Synthetic checkpoints in the model zoos' own formats, for tests/parity/test_convert_zoos.py.

Random values, the zoos' real tensor names, shapes and layouts (R-50/R-101-FPN Mask R-CNN, or
narrower "tiny" widths with the same names for the quick error tests).  Everything here is
written from the zoos' documented layouts (shared/reference/conventions.md §3,
tests/parity/detectron2_r101_keys.txt, maskrcnn-benchmark's modeling/ sources), not from
models/convert.py's tables, so the tests compare two independent descriptions.

The canonical model is generated first ({canonical name: array}, BatchNorm form, or GroupNorm
form with norm="gn"), then each zoo's file is derived from it: renamed, and with the zoo's own
value layout (Detectron's AffineChannel blobs, detectron2's background-last classes).

The stronger architectures (ARCHS: detectron2's LSJ new baselines and torchvision v2 "lsj",
detectron2 Misc SyncBN "syncbn", the GroupNorm models of detectron2, Detectron and
maskrcnn-benchmark "gn") add norms to the FPN and the heads, RPN and box head convs; their zoo
names are written here from shared/reference/zoo_variants.md sections 1, 2 and 5 and the zoos'
sources (detectron2 fpn.py/rpn.py/box_head.py/mask_head.py, Detectron ResNet.py/FPN.py/
fast_rcnn_heads.py/mask_rcnn_heads.py ConvGN blobs `<prefix>_gn_{s,b}`, maskrcnn-benchmark
make_layers.py / roi_box_feature_extractors.py FPNXconv1fcFeatureExtractor, torchvision
Conv2dNormActivation / FastRCNNConvFCHead Sequential indices).

mmdetection's names (mmdet_name) are written from shared/reference/zoo_variants.md §3c and mmdet's
sources (ResNet conv1/bn1/layer*, ConvModule's `.conv` / `.bn`, RPNHead rpn_conv / rpn_cls / rpn_reg,
ConvFCBBoxHead shared_convs / shared_fcs / fc_cls / fc_reg, FCNMaskHead convs / upsample /
conv_logits); its class layout (background last, no background rows) is detectron2's.
Class-agnostic heads (canonical_shapes box_agnostic / mask_agnostic): 4 bbox_pred rows, 1 mask
logits channel, in every zoo's file and in ours.
"""

import collections
import re
import struct

import numpy as np

BLOCKS = {50: (3, 4, 6, 3), 101: (3, 4, 23, 3)}
BN = ("weight", "bias", "running_mean", "running_var")
GN = ("weight", "bias")

# Architecture presets (keyword arguments of canonical_shapes).
ARCHS = {
    "classic": {},
    "lsj": dict(fpn_norm="bn", rpn_convs=2, box_convs=4, box_fcs=1, box_norm="bn", mask_norm="bn"),
    "syncbn": dict(fpn_norm="bn", rpn_convs=1, box_convs=4, box_fcs=1, box_norm="bn", mask_norm="bn"),
    "gn": dict(norm="gn", fpn_norm="gn", rpn_convs=1, box_convs=4, box_fcs=1, box_norm="gn", mask_norm="gn"),
}


def canonical_shapes(depth=101, K=81, stem=64, width=64, res2=256, fpn=256, rep=1024, mask=256,
                     groups=1, A=3, pool=7, norm="bn", fpn_norm=None, rpn_convs=1, box_convs=0,
                     box_fcs=2, box_norm=None, mask_norm=None, conv_dim=None, box_agnostic=False,
                     mask_agnostic=False):
    """{canonical name: shape} in file order (models/README.md); width = res2 bottleneck width
    (64 for ResNet, groups*width_per_group for ResNeXt).  norm: the trunk's ("bn" BatchNorm
    form, "gn" GroupNorm form); fpn_norm/box_norm/mask_norm: None (convs with bias), "bn" or
    "gn" (convs without bias, then the norm); box_convs 3x3 convs of conv_dim (default fpn)
    channels, then box_fcs FCs; box_agnostic: 4 bbox_pred rows (one box for every class),
    mask_agnostic: 1 mask logits channel."""
    s = collections.OrderedDict()
    conv_dim = conv_dim or fpn
    norm_kind = norm

    def norm_of(prefix, c, kind):
        for p in (BN if kind == "bn" else GN):
            s[f"{prefix}.{p}"] = (c,)

    def norm(prefix, c):
        norm_of(prefix, c, norm_kind)

    def conv(prefix, shape, kind):
        s[prefix + ".weight"] = shape
        if kind is None:
            s[prefix + ".bias"] = (shape[0],)
        else:
            norm_of(prefix + ".norm", shape[0], kind)

    s["backbone.stem.conv.weight"] = (stem, 3, 7, 7)
    norm("backbone.stem.norm", stem)
    cin, outs = stem, {}
    for si, n in enumerate(BLOCKS[depth]):
        S, w, out = si + 2, width << si, res2 << si
        for b in range(n):
            p = f"backbone.res{S}.{b}"
            s[p + ".conv1.weight"] = (w, cin, 1, 1)
            norm(p + ".conv1.norm", w)
            s[p + ".conv2.weight"] = (w, w // groups, 3, 3)
            norm(p + ".conv2.norm", w)
            s[p + ".conv3.weight"] = (out, w, 1, 1)
            norm(p + ".conv3.norm", out)
            if b == 0:
                s[p + ".shortcut.weight"] = (out, cin, 1, 1)
                norm(p + ".shortcut.norm", out)
            cin = out
        outs[S] = out
    for S in (2, 3, 4, 5):
        conv(f"fpn.lateral{S}", (fpn, outs[S], 1, 1), fpn_norm)
    for S in (2, 3, 4, 5):
        conv(f"fpn.output{S}", (fpn, fpn, 3, 3), fpn_norm)
    for i in range(1, rpn_convs + 1):
        conv("rpn.conv" + (str(i) if i > 1 else ""), (fpn, fpn, 3, 3), None)
    heads = [("rpn.objectness", (A, fpn, 1, 1)), ("rpn.deltas", (4 * A, fpn, 1, 1))]
    for name, shape in heads:
        s[name + ".weight"], s[name + ".bias"] = shape, (shape[0],)
    cin = fpn
    for i in range(1, box_convs + 1):
        conv(f"box_head.conv{i}", (conv_dim, cin, 3, 3), box_norm)
        cin = conv_dim
    fin = cin * pool * pool
    for i in range(box_fcs):
        conv(f"box_head.fc{6 + i}", (rep, fin), None)
        fin = rep
    for name, shape in (("box_predictor.cls_score", (K, rep)),
                        ("box_predictor.bbox_pred", (4 if box_agnostic else 4 * K, rep))):
        s[name + ".weight"], s[name + ".bias"] = shape, (shape[0],)
    for i in range(1, 5):
        conv(f"mask_head.fcn{i}", (mask, fpn if i == 1 else mask, 3, 3), mask_norm)
    for name, shape in (("mask_head.deconv", (mask, mask, 2, 2)),
                        ("mask_head.logits", (1 if mask_agnostic else K, mask, 1, 1))):
        s[name + ".weight"], s[name + ".bias"] = shape, (shape[0],)
    return s


TINY = dict(stem=8, width=8, res2=32, fpn=16, rep=32, mask=16)  # same names, small widths


def canonical_model(seed=0, dtype=np.float32, **kw):
    """Random canonical tensors; running_var positive (0.5..1.5)."""
    rng = np.random.default_rng(seed)
    out = collections.OrderedDict()
    for name, shape in canonical_shapes(**kw).items():
        a = rng.standard_normal(shape, dtype=np.float32)
        if name.endswith("running_var"):
            a = np.abs(a) * np.float32(0.5) + np.float32(0.5)
        out[name] = a.astype(dtype, copy=False)
    return out


def last_blocks(canon):
    last = {}
    for n in canon:
        m = re.match(r"backbone\.res(\d)\.(\d+)\.", n)
        if m:
            last[int(m.group(1))] = max(last.get(int(m.group(1)), 0), int(m.group(2)))
    return last


# ---- names: canonical -> each zoo ---------------------------------------------------------

_SB = {"weight": "s", "bias": "b"}  # Detectron GroupNorm gamma/beta blobs (SpatialGN _s/_b)


def detectron_name(canon, last, gn_heads=False):
    """Caffe2 blob name of a canonical tensor.  Trunk norms: AffineChannel `_bn_s/_bn_b` (scale,
    shift) or, in the GN models, ConvGN's `_gn_s/_gn_b` (norm weight, bias); the GN models name
    the mask convs `_mask_fcn{i}` (mask_rcnn_fcn_head_v1upXconvs_gn) and the box head convs
    `head_conv{i}` (add_roi_Xconv1fc_gn_head)."""
    wb = {"weight": "w", "bias": "b", "scale": "s", "shift": "b"}

    def norm_suffix(p):
        return "_bn_" + wb[p] if p in ("scale", "shift") else "_gn_" + _SB[p]

    m = re.fullmatch(r"backbone\.stem\.conv\.weight", canon)
    if m:
        return "conv1_w"
    m = re.fullmatch(r"backbone\.stem\.norm\.(\w+)", canon)
    if m:
        return "res_conv1_bn_" + wb[m.group(1)] if m.group(1) in ("scale", "shift") else "conv1_gn_" + _SB[m.group(1)]
    m = re.fullmatch(r"backbone\.res(\d)\.(\d+)\.(conv(\d)|shortcut)\.(norm\.)?(\w+)", canon)
    if m:
        S, b, unit, k, norm, p = m.groups()
        branch = "branch1" if unit == "shortcut" else "branch2" + "abc"[int(k) - 1]
        return f"res{S}_{b}_{branch}" + (norm_suffix(p) if norm else "_" + wb[p])
    m = re.fullmatch(r"fpn\.(lateral|output)(\d)\.(norm\.)?(\w+)", canon)
    if m:
        kind, S, norm, p = m.group(1), int(m.group(2)), m.group(3), m.group(4)
        if kind == "output":
            prefix = f"fpn_res{S}_{last[S]}_sum"
        else:
            prefix = f"fpn_inner_res{S}_{last[S]}_sum{'' if S == 5 else '_lateral'}"
        return prefix + ("_gn_" + _SB[p] if norm else "_" + wb[p])
    m = re.fullmatch(r"(box_head\.conv|mask_head\.fcn)(\d)\.(norm\.)?(\w+)", canon)
    if m and (m.group(1) == "box_head.conv" or gn_heads):
        prefix = ("head_conv" if m.group(1) == "box_head.conv" else "_mask_fcn") + m.group(2)
        return prefix + ("_gn_" + _SB[m.group(4)] if m.group(3) else "_" + wb[m.group(4)])
    heads = {"rpn.conv": "conv_rpn_fpn2", "rpn.objectness": "rpn_cls_logits_fpn2",
             "rpn.deltas": "rpn_bbox_pred_fpn2", "box_head.fc6": "fc6", "box_head.fc7": "fc7",
             "box_predictor.cls_score": "cls_score", "box_predictor.bbox_pred": "bbox_pred",
             "mask_head.deconv": "conv5_mask", "mask_head.logits": "mask_fcn_logits"}
    for i in range(1, 5):
        heads[f"mask_head.fcn{i}"] = f"_[mask]_fcn{i}"
    prefix, p = canon.rsplit(".", 1)
    return f"{heads[prefix]}_{wb[p]}"


def d2_name(canon, rpn_convs=1):
    """detectron2 name.  Norms are the Conv2d wrapper's `norm` attribute everywhere; the RPN head
    with N > 1 convs holds them as conv.conv0..conv{N-1}, with one conv as `conv` (rpn.py)."""
    m = re.fullmatch(r"backbone\.stem\.conv\.weight", canon)
    if m:
        return "backbone.bottom_up.stem.conv1.weight"
    if canon.startswith("backbone.stem.norm."):
        return "backbone.bottom_up.stem.conv1.norm." + canon.split(".")[-1]
    if canon.startswith("backbone.res"):
        return "backbone.bottom_up." + canon[len("backbone."):]
    m = re.fullmatch(r"fpn\.(lateral|output)(\d)\.(.+)", canon)
    if m:
        return f"backbone.fpn_{m.group(1)}{m.group(2)}.{m.group(3)}"
    m = re.fullmatch(r"rpn\.conv(\d*)\.(\w+)", canon)
    if m:
        i = int(m.group(1) or 1)
        return ("proposal_generator.rpn_head.conv." if rpn_convs == 1
                else f"proposal_generator.rpn_head.conv.conv{i - 1}.") + m.group(2)
    m = re.fullmatch(r"box_head\.conv(\d+)\.(.+)", canon)
    if m:
        return f"roi_heads.box_head.conv{m.group(1)}.{m.group(2)}"
    m = re.fullmatch(r"box_head\.fc(\d+)\.(\w+)", canon)
    if m:
        return f"roi_heads.box_head.fc{int(m.group(1)) - 5}.{m.group(2)}"
    m = re.fullmatch(r"mask_head\.fcn(\d)\.(.+)", canon)
    if m:
        return f"roi_heads.mask_head.mask_fcn{m.group(1)}.{m.group(2)}"
    table = {"rpn.objectness": "proposal_generator.rpn_head.objectness_logits",
             "rpn.deltas": "proposal_generator.rpn_head.anchor_deltas",
             "box_predictor.cls_score": "roi_heads.box_predictor.cls_score",
             "box_predictor.bbox_pred": "roi_heads.box_predictor.bbox_pred",
             "mask_head.deconv": "roi_heads.mask_head.deconv", "mask_head.logits": "roi_heads.mask_head.predictor"}
    prefix, p = canon.rsplit(".", 1)
    return f"{table[prefix]}.{p}"


def mmdet_name(canon, rpn_convs=1):
    """mmdetection state_dict name (zoo_variants.md §3c).  The trunk is torchvision's resnet layout
    under `backbone.` (conv1/bn1, layer{S-1}.{b}.conv{k}/bn{k}, downsample.0/.1).  Every FPN, RPN
    (with more than one conv), box head conv and mask conv is an mmcv ConvModule: the conv is
    `.conv`, its norm `.bn` (BatchNorm or SyncBN: infer_abbr).  One RPN conv is a plain Conv2d
    `rpn_conv`, N > 1 a Sequential of ConvModules rpn_conv.{0..N-1}.conv."""
    if canon == "backbone.stem.conv.weight":
        return "backbone.conv1.weight"
    if canon.startswith("backbone.stem.norm."):
        return "backbone.bn1." + canon.split(".")[-1]
    m = re.fullmatch(r"backbone\.res(\d)\.(\d+)\.(conv(\d)|shortcut)\.(norm\.)?(\w+)", canon)
    if m:
        S, b, unit, k, norm, p = m.groups()
        layer = f"backbone.layer{int(S) - 1}.{b}."
        if unit == "shortcut":
            return layer + ("downsample.1." if norm else "downsample.0.") + p
        return layer + (f"bn{k}." if norm else f"conv{k}.") + p
    m = re.fullmatch(r"fpn\.(lateral|output)(\d)\.(norm\.)?(\w+)", canon)
    if m:
        kind = "lateral_convs" if m.group(1) == "lateral" else "fpn_convs"
        return f"neck.{kind}.{int(m.group(2)) - 2}.{'bn' if m.group(3) else 'conv'}.{m.group(4)}"
    m = re.fullmatch(r"rpn\.conv(\d*)\.(\w+)", canon)
    if m:
        i = int(m.group(1) or 1)
        return "rpn_head.rpn_conv." + ("" if rpn_convs == 1 else f"{i - 1}.conv.") + m.group(2)
    m = re.fullmatch(r"box_head\.conv(\d+)\.(norm\.)?(\w+)", canon)
    if m:
        return f"roi_head.bbox_head.shared_convs.{int(m.group(1)) - 1}.{'bn' if m.group(2) else 'conv'}.{m.group(3)}"
    m = re.fullmatch(r"box_head\.fc(\d+)\.(\w+)", canon)
    if m:
        return f"roi_head.bbox_head.shared_fcs.{int(m.group(1)) - 6}.{m.group(2)}"
    m = re.fullmatch(r"mask_head\.fcn(\d)\.(norm\.)?(\w+)", canon)
    if m:
        return f"roi_head.mask_head.convs.{int(m.group(1)) - 1}.{'bn' if m.group(2) else 'conv'}.{m.group(3)}"
    table = {"rpn.objectness": "rpn_head.rpn_cls", "rpn.deltas": "rpn_head.rpn_reg",
             "box_predictor.cls_score": "roi_head.bbox_head.fc_cls",
             "box_predictor.bbox_pred": "roi_head.bbox_head.fc_reg",
             "mask_head.deconv": "roi_head.mask_head.upsample", "mask_head.logits": "roi_head.mask_head.conv_logits"}
    prefix, p = canon.rsplit(".", 1)
    return f"{table[prefix]}.{p}"


def mb_name(canon, gn_heads=False):
    """maskrcnn-benchmark state_dict name (without the DistributedDataParallel 'module.').  With
    GN (gn_heads): FPN and mask convs are Sequential(conv, GroupNorm) (.0 / .1), the box head is
    FPNXconv1fcFeatureExtractor's xconvs = (conv, GN, ReLU) * N, then fc6."""
    if canon == "backbone.stem.conv.weight":
        return "backbone.body.stem.conv1.weight"
    if canon.startswith("backbone.stem.norm."):
        return "backbone.body.stem.bn1." + canon.split(".")[-1]
    m = re.fullmatch(r"backbone\.res(\d)\.(\d+)\.(.*)", canon)
    if m:
        S, b, rest = int(m.group(1)), m.group(2), m.group(3)
        p = f"backbone.body.layer{S - 1}.{b}."
        rest = re.sub(r"^conv(\d)\.norm\.", r"bn\1.", rest)
        rest = rest.replace("shortcut.norm.", "downsample.1.").replace("shortcut.weight", "downsample.0.weight")
        return p + rest
    m = re.fullmatch(r"fpn\.(lateral|output)(\d)\.(norm\.)?(\w+)", canon)
    if m:
        kind = "inner" if m.group(1) == "lateral" else "layer"
        seq = (".1." if m.group(3) else ".0.") if gn_heads else "."
        return f"backbone.fpn.fpn_{kind}{int(m.group(2)) - 1}{seq}{m.group(4)}"
    m = re.fullmatch(r"box_head\.conv(\d)\.(norm\.)?(\w+)", canon)
    if m:
        k = int(m.group(1)) - 1
        return f"roi_heads.box.feature_extractor.xconvs.{3 * k + (1 if m.group(2) else 0)}.{m.group(3)}"
    m = re.fullmatch(r"mask_head\.fcn(\d)\.(norm\.)?(\w+)", canon)
    if m:
        seq = (".1." if m.group(2) else ".0.") if gn_heads else "."
        return f"roi_heads.mask.feature_extractor.mask_fcn{m.group(1)}{seq}{m.group(3)}"
    table = {"rpn.conv": "rpn.head.conv", "rpn.objectness": "rpn.head.cls_logits", "rpn.deltas": "rpn.head.bbox_pred",
             "box_head.fc6": "roi_heads.box.feature_extractor.fc6",
             "box_head.fc7": "roi_heads.box.feature_extractor.fc7",
             "box_predictor.cls_score": "roi_heads.box.predictor.cls_score",
             "box_predictor.bbox_pred": "roi_heads.box.predictor.bbox_pred",
             "mask_head.deconv": "roi_heads.mask.predictor.conv5_mask",
             "mask_head.logits": "roi_heads.mask.predictor.mask_fcn_logits"}
    prefix, p = canon.rsplit(".", 1)
    return f"{table[prefix]}.{p}"


def tv_legacy_name(canon):
    """torchvision state_dict name as the COCO_V1 file (saved by torchvision 0.3) spells it."""
    if canon == "backbone.stem.conv.weight":
        return "backbone.body.conv1.weight"
    if canon.startswith("backbone.stem.norm."):
        return "backbone.body.bn1." + canon.split(".")[-1]
    m = re.fullmatch(r"backbone\.res(\d)\.(\d+)\.(.*)", canon)
    if m:
        S, b, rest = int(m.group(1)), m.group(2), m.group(3)
        rest = re.sub(r"^conv(\d)\.norm\.", r"bn\1.", rest)
        rest = rest.replace("shortcut.norm.", "downsample.1.").replace("shortcut.weight", "downsample.0.weight")
        return f"backbone.body.layer{S - 1}.{b}.{rest}"
    m = re.fullmatch(r"fpn\.(lateral|output)(\d)\.(\w+)", canon)
    if m:
        kind = "inner" if m.group(1) == "lateral" else "layer"
        return f"backbone.fpn.{kind}_blocks.{int(m.group(2)) - 2}.{m.group(3)}"
    table = {"rpn.conv": "rpn.head.conv", "rpn.objectness": "rpn.head.cls_logits", "rpn.deltas": "rpn.head.bbox_pred",
             "box_head.fc6": "roi_heads.box_head.fc6", "box_head.fc7": "roi_heads.box_head.fc7",
             "box_predictor.cls_score": "roi_heads.box_predictor.cls_score",
             "box_predictor.bbox_pred": "roi_heads.box_predictor.bbox_pred",
             "mask_head.deconv": "roi_heads.mask_predictor.conv5_mask",
             "mask_head.logits": "roi_heads.mask_predictor.mask_fcn_logits"}
    for i in range(1, 5):
        table[f"mask_head.fcn{i}"] = f"roi_heads.mask_head.mask_fcn{i}"
    prefix, p = canon.rsplit(".", 1)
    return f"{table[prefix]}.{p}"


def tv_name(canon, box_convs=0):
    """torchvision >= 0.13 state_dict name (maskrcnn_resnet50_fpn_v2's layout when the model has
    norms in the FPN and heads): Conv2dNormActivation = Sequential(conv, norm[, ReLU]), so .0 is
    the conv and .1 its norm; FastRCNNConvFCHead = [conv blocks] * box_convs, Flatten, then
    (Linear, ReLU) per FC, so FC j (from 0) is roi_heads.box_head.{box_convs + 1 + 2j}."""
    m = re.fullmatch(r"fpn\.(lateral|output)(\d)\.(norm\.)?(\w+)", canon)
    if m:
        kind = "inner" if m.group(1) == "lateral" else "layer"
        return f"backbone.fpn.{kind}_blocks.{int(m.group(2)) - 2}.{'1' if m.group(3) else '0'}.{m.group(4)}"
    m = re.fullmatch(r"rpn\.conv(\d*)\.(\w+)", canon)
    if m:
        return f"rpn.head.conv.{int(m.group(1) or 1) - 1}.0.{m.group(2)}"
    m = re.fullmatch(r"box_head\.conv(\d+)\.(norm\.)?(\w+)", canon)
    if m:
        return f"roi_heads.box_head.{int(m.group(1)) - 1}.{'1' if m.group(2) else '0'}.{m.group(3)}"
    m = re.fullmatch(r"box_head\.fc(\d+)\.(\w+)", canon)
    if m and box_convs:
        return f"roi_heads.box_head.{box_convs + 1 + 2 * (int(m.group(1)) - 6)}.{m.group(2)}"
    m = re.fullmatch(r"mask_head\.fcn(\d)\.(norm\.)?(\w+)", canon)
    if m:
        return f"roi_heads.mask_head.{int(m.group(1)) - 1}.{'1' if m.group(2) else '0'}.{m.group(3)}"
    return tv_legacy_name(canon)


# ---- each zoo's tensors, and what the converted file must hold -----------------------------

def detectron_blobs(canon, seed=1):
    """(blobs in a Python-2-dict-like scrambled order, expected canonical tensors).
    AffineChannel norms: the BN weight/bias arrays serve as random _bn_s/_bn_b, mean/var are
    dropped.  Extras a real model_final.pkl holds: *_momentum of trained params (here of the
    FPN and heads only), fc1000_* and zero biases of the bias-less backbone convs (ImageNet
    init leftovers)."""
    last = last_blocks(canon)
    gn_heads = "mask_head.fcn1.norm.weight" in canon
    rng = np.random.default_rng(seed)
    blobs, expected = {}, collections.OrderedDict()
    for name, a in canon.items():
        if name.endswith((".running_mean", ".running_var")):
            continue
        c = name
        if ".norm." in name and name[: name.rindex(".")] + ".running_var" in canon:  # BN: AffineChannel
            c = name[: name.rindex(".")] + (".scale" if name.endswith(".weight") else ".shift")
        blob = detectron_name(c, last, gn_heads)
        blobs[blob] = a
        expected[c] = a
        if not blob.startswith(("conv1", "res")):  # (a real file has them for res3..res5 too:
            blobs[blob + "_momentum"] = np.zeros_like(a)  # left out to halve the test's bytes)
        m = re.fullmatch(r"(conv1|res\d_\d+_branch(1|2[abc]))_w", blob)
        if m:
            blobs[m.group(1) + "_b"] = np.zeros(a.shape[0], np.float32)
    c5 = canon["fpn.lateral5.weight"].shape[1]
    blobs["fc1000_w"] = rng.standard_normal((1000, c5), dtype=np.float32)
    blobs["fc1000_b"] = rng.standard_normal(1000, dtype=np.float32)
    keys = list(blobs)
    rng.shuffle(keys)
    return [(k, blobs[k]) for k in keys], expected


def background_last_tensors(canon, name_of):
    """(state dict named by name_of(canonical name, rpn_convs), expected canonical tensors computed
    from it) for a zoo that keeps background as the LAST cls_score row and has no background rows
    in a class-specific bbox_pred (4*80) and mask predictor (80): detectron2 and mmdetection.
    Class-agnostic heads (4 rows, 1 channel) are the same in the zoo's file and ours."""
    rpn_convs = sum(1 for n in canon if re.fullmatch(r"rpn\.conv\d*\.weight", n))
    box_agnostic = canon["box_predictor.bbox_pred.weight"].shape[0] == 4
    mask_agnostic = canon["mask_head.logits.weight"].shape[0] == 1
    sd = collections.OrderedDict()
    for name, a in canon.items():
        if name.startswith("box_predictor.cls_score."):
            a = np.concatenate([a[1:], a[:1]])  # background row 0 -> last
        elif name.startswith("box_predictor.bbox_pred.") and not box_agnostic:
            a = a[4:]
        elif name.startswith("mask_head.logits.") and not mask_agnostic:
            a = a[1:]
        sd[name_of(name, rpn_convs)] = np.ascontiguousarray(a)
    expected = collections.OrderedDict()
    for name in canon:
        a = sd[name_of(name, rpn_convs)]
        if name.startswith("box_predictor.cls_score."):
            a = np.concatenate([a[-1:], a[:-1]])
        elif name.startswith("box_predictor.bbox_pred.") and not box_agnostic:
            a = np.concatenate([np.zeros((4,) + a.shape[1:], a.dtype), a])
        elif name.startswith("mask_head.logits.") and not mask_agnostic:
            a = np.concatenate([np.zeros((1,) + a.shape[1:], a.dtype), a])
        expected[name] = a
    return sd, expected


def d2_tensors(canon):
    """(detectron2 state dict, expected canonical tensors computed from it)."""
    return background_last_tensors(canon, d2_name)


def mmdet_tensors(canon):
    """(mmdetection state dict, expected canonical tensors computed from it)."""
    return background_last_tensors(canon, mmdet_name)


# ---- Python 2 pickles ----------------------------------------------------------------------
#
# Detectron wrote model_final.pkl with Python 2's cPickle, protocol 2 (detectron/utils/io.py
# save_object), and Python 2 numpy pickles an array's bytes as a Python 2 `str`.  Python 3's
# pickle cannot produce that: it writes bytes as BINBYTES (protocol 3+) or as
# _codecs.encode(text, 'latin1') (protocol 2), never as the SHORT_BINSTRING/BINSTRING
# opcodes that a Python 3 reader must decode with encoding='latin1'.  So this tiny emitter
# writes the opcodes cPickle 2.7 + numpy 1.16 write, in the same order and with the same memo
# puts (checked byte for byte against a pickle made by Python 2.7.18 + numpy 1.16.6 in
# test_py2_emitter_is_byte_identical_to_python2).


class Py2Pickler:
    """cPickle protocol 2 of a dict of str -> (str | dict of str -> float ndarray)."""

    def __init__(self, inner_keys_shared):
        self.out, self.memo, self.next_id = [], {}, 1
        self.inner_keys_shared, self.depth = inner_keys_shared, 0

    def _put(self, key=None):
        i = self.next_id
        self.next_id += 1
        if key is not None:
            self.memo[key] = i
        self.out.append(b"q" + bytes([i]) if i < 256 else b"r" + struct.pack("<I", i))

    def _get(self, key):
        i = self.memo[key]
        self.out.append(b"h" + bytes([i]) if i < 256 else b"j" + struct.pack("<I", i))

    def _str(self, b, memo):
        # cPickle memoizes a str only when something else holds it too (refcount >= 2) and it
        # has 2+ characters: literals and variables yes, an array's data or a computed key no.
        self.out.append(b"U" + bytes([len(b)]) + b if len(b) < 256 else b"T" + struct.pack("<i", len(b)) + b)
        if memo and len(b) >= 2:
            self._put()

    def _int(self, v):
        if 0 <= v < 256:
            self.out.append(b"K" + bytes([v]))
        elif 0 <= v < 65536:
            self.out.append(b"M" + struct.pack("<H", v))
        else:
            self.out.append(b"J" + struct.pack("<i", v))

    def _global(self, module, name):
        key = ("global", module, name)
        if key in self.memo:
            self._get(key)
        else:
            self.out.append(b"c" + module.encode() + b"\n" + name.encode() + b"\n")
            self._put(key)

    def _tuple(self, items):
        if not items:
            self.out.append(b")")
            return
        if len(items) > 3:
            self.out.append(b"(")
        for emit in items:
            emit()
        self.out.append(b"t" if len(items) > 3 else b"\x85\x86\x87"[len(items) - 1:len(items)])

    def _dtype(self, dt):
        key = ("dtype", dt.str)
        if key in self.memo:
            self._get(key)
            return
        self._global("numpy", "dtype")
        self._str(f"{dt.kind}{dt.itemsize}".encode(), False)
        self._int(0)
        self._int(1)
        self.out.append(b"\x87R")  # TUPLE3 REDUCE
        self._put(key)
        order = "|" if dt.itemsize == 1 else "<"
        self.out.append(b"(")
        self._int(3)
        self._str(order.encode(), False)
        self.out.append(b"NNN" + b"J" + struct.pack("<i", -1) + b"J" + struct.pack("<i", -1))
        self._int(0)
        self.out.append(b"tb")  # TUPLE BUILD

    def _array(self, a):
        a = np.ascontiguousarray(a)
        self._global("numpy.core.multiarray", "_reconstruct")
        self._global("numpy", "ndarray")
        self._int(0)
        self.out.append(b"\x85")  # TUPLE1
        self._str(b"b", False)
        self.out.append(b"\x87R")  # TUPLE3 REDUCE
        self._put()
        self.out.append(b"(")
        self._int(1)
        self._tuple([lambda n=n: self._int(n) for n in a.shape])
        self._dtype(a.dtype)
        self.out.append(b"\x89")  # NEWFALSE: not Fortran order
        self._str(a.astype(a.dtype.newbyteorder("<")).tobytes(), False)
        self.out.append(b"tb")  # TUPLE BUILD

    def _value(self, v):
        if isinstance(v, bytes):
            self._str(v, True)
        elif isinstance(v, np.ndarray):
            self._array(v)
        else:
            self._dict(v)

    def _dict(self, items):
        items = list(items.items()) if isinstance(items, dict) else list(items)
        shared = self.depth == 0 or self.inner_keys_shared
        self.depth += 1
        self.out.append(b"}")
        self._put()
        for i in range(0, len(items), 1000):  # cPickle's BATCHSIZE
            batch = items[i:i + 1000]
            if len(batch) > 1:
                self.out.append(b"(")
            for k, v in batch:
                self._str(k.encode("latin1"), shared)
                self._value(v)
            self.out.append(b"u" if len(batch) > 1 else b"s")
        self.depth -= 1

    def dumps(self, top_items):
        self.out.append(b"\x80\x02")
        self._dict(top_items)
        self.out.append(b".")
        return b"".join(self.out)


def py2_pickle(top_items, inner_keys_shared=False):
    """top_items: [(key, value)] in the order Python 2's dict iterated; values are bytes (a
    Python 2 str, memoized: Detectron's cfg is a local variable too), float ndarrays, or such a
    list/dict again.  Top-level keys are memoized (keyword-argument names); inner keys only if
    inner_keys_shared (Detectron's blob names are computed, held by the dict alone)."""
    return Py2Pickler(inner_keys_shared).dumps(top_items)
