"""detectron2 LazyConfig trees -> the D2 record (train_config_d2.py's LazyConfig half).

The tree comes from train_config_sandbox.py's child (a .py config, run with a stub detectron2)
or from the config.yaml a LazyConfig training run saves (read as data).  OmegaConf
interpolations ("${..num_classes}") are resolved here; then each node is checked against the
detectron2 class its `_target_` names, as detectron2 would build it: a class other than the
FPN Mask R-CNN's there, or an argument the class does not take, is refused; an argument that
only matters in training is ignored (listed); the others fill the D2 record that
train_config_d2.finish maps to our keys.  Defaults are those of the classes' __init__
(detectron2 02b5c4e: DefaultAnchorGenerator offset 0.5, FastRCNNOutputLayers
test_score_thresh 0.0, BottleneckBlock stride_in_1x1 False and norm "BN", ...).
"""

import re

try:
    from .train_config import Mapping, TreeReader, short_repr, refuse
    from .train_config_d2 import D2, RES_FEATURES, SCALE_CLAMP, finish
except ImportError:
    from train_config import Mapping, TreeReader, short_repr, refuse
    from train_config_d2 import D2, RES_FEATURES, SCALE_CLAMP, finish


_INTERP = re.compile(r"\$\{([^${}]*)\}")


def resolve(tree, file):
    """OmegaConf interpolations, resolved in the tree: `${a.b}` from the root, `${.x}` from the
    node holding the key, each further dot one node up."""
    def lookup(parents, expr, where):
        dots = len(expr) - len(expr.lstrip("."))
        rest = expr[dots:]
        if ":" in rest:
            refuse(where, f"interpolation ${{{expr}}}: resolvers are not supported", file)
        if dots:
            if dots > len(parents):
                refuse(where, f"interpolation ${{{expr}}} goes above the root", file)
            node = parents[-dots]
        else:
            node = parents[0]
        for part in rest.split(".") if rest else []:
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                refuse(where, f"interpolation ${{{expr}}}: {part!r} not found", file)
        return node

    def value(v, parents, where, depth=0):
        if depth > 32:
            refuse(where, "interpolations refer to each other in a loop", file)
        if isinstance(v, str):
            whole = _INTERP.fullmatch(v)
            if whole:
                return value(lookup(parents, whole.group(1), where), parents, where, depth + 1)
            if _INTERP.search(v):
                return _INTERP.sub(lambda mt: str(value(lookup(parents, mt.group(1), where), parents, where,
                                                        depth + 1)), v)
            return v
        if isinstance(v, dict):
            return {k: value(x, parents + [v], f"{where}.{k}" if where else k) for k, x in v.items()}
        if isinstance(v, list):
            return [value(x, parents + [v], f"{where}.{i}") for i, x in enumerate(v)]
        return v

    return value(tree, [], "")


class Call:
    """One node of a LazyConfig tree checked against the detectron2 class it builds."""

    MISSING = object()

    def __init__(self, lz, path, classes, optional=False):
        self.lz, self.path = lz, path
        node = lz.at(path)
        self.node = node
        if node is None and optional:
            self.kw = None
            return
        if not isinstance(node, dict) or "_target_" not in node:
            lz.refuse(path, f"expected a LazyCall of {' or '.join(classes)}, got {short_repr(node)}")
        target = str(node["_target_"])
        cls = target.rsplit(".", 1)[-1]
        if cls not in classes:
            lz.refuse(path + "._target_", f"{target}: the engine runs {' or '.join(classes)} here"
                      + _WHY.get(cls, ""))
        self.kw = {k: v for k, v in node.items() if k != "_target_"}
        self.seen = set()

    def get(self, name, default=MISSING):
        self.seen.add(name)
        if name in self.kw:
            return self.kw[name]
        if default is Call.MISSING:
            self.lz.refuse(f"{self.path}.{name}", "missing (detectron2 needs it)")
        return default

    def key(self, name):
        return f"{self.path}.{name}"

    def training(self, *names):
        for n in names:
            self.seen.add(n)
            if n in self.kw:
                self.lz.m.ignored.append(self.key(n))

    def must(self, name, default, problem):
        v = self.get(name, default)
        if v != default:
            self.lz.refuse(self.key(name), f"{short_repr(v)}: {problem}")

    def done(self):
        extra = [k for k in self.kw if k not in self.seen]
        if extra:
            self.lz.refuse(self.key(extra[0]), "not an argument the converter reads for "
                           f"{self.node['_target_']} (detectron2 would refuse an unknown one)")


_WHY = {"CascadeROIHeads": " (cascade heads are not supported)",
        "DeformBottleneckBlock": " (deformable convolutions are not supported)",
        "RRPN": " (rotated boxes are not supported)", "RROIHeads": " (rotated boxes are not supported)",
        "RotatedAnchorGenerator": " (rotated boxes are not supported)",
        "LastLevelP6P7": " (P6/P7 convs are RetinaNet's; the engine's P6 is a max pool of P5)",
        "PanopticFPN": " (panoptic heads are not supported)", "RetinaNet": " (RetinaNet is not supported)"}


class Lazy(TreeReader):
    """The tree this reader maps (train_config.TreeReader)."""


def read_lazy(tree, path, kind):
    m = Mapping("detectron2", "detectron2")
    m.kind = kind
    if not isinstance(tree, dict) or "model" not in tree:
        refuse("model", "the LazyConfig defines no `model`", path)
    tree = resolve(tree, path)
    lz = Lazy(tree, path, m)
    d = D2(path)

    def put(name, call, arg, default=Call.MISSING):
        d.put(name, call.get(arg, default), call.key(arg))

    model = Call(lz, "model", ("GeneralizedRCNN",))
    put("pixel_mean", model, "pixel_mean")
    put("pixel_std", model, "pixel_std")
    model.training("vis_period")

    fpn = Call(lz, "model.backbone", ("FPN",))
    put("fpn_in_features", fpn, "in_features")
    put("fpn_out", fpn, "out_channels")
    put("fpn_norm", fpn, "norm", "")
    put("fpn_fuse", fpn, "fuse_type", "sum")
    fpn.must("square_pad", 0, "square padding is not supported (the engine pads to size_divisibility)")
    top = fpn.get("top_block", None)
    if top is None:
        lz.refuse(fpn.key("top_block"), "no top block: the engine's FPN has P6 (LastLevelMaxPool)")
    Call(lz, "model.backbone.top_block", ("LastLevelMaxPool",)).done()
    fpn.get("bottom_up")
    fpn.done()

    res = Call(lz, "model.backbone.bottom_up", ("ResNet",))
    out = list(res.get("out_features", None) or [])
    if not set(RES_FEATURES) <= set(out):
        lz.refuse(res.key("out_features"), f"{out}: the FPN needs {RES_FEATURES}")
    res.must("num_classes", None, "a classification ResNet")
    res.training("freeze_at")
    res.get("stem"), res.get("stages")
    res.done()
    stem = Call(lz, "model.backbone.bottom_up.stem", ("BasicStem",))
    stem.must("in_channels", 3, "the engine reads 3-channel images")
    put("stem_out", stem, "out_channels", 64)
    put("stem_norm", stem, "norm", "BN")
    stem.done()
    stages = Call(lz, "model.backbone.bottom_up.stages", ("make_default_stages",))
    put("depth", stages, "depth")
    block = stages.get("block_class", None)
    if block is not None and str(block.get("_name_", block) if isinstance(block, dict) else block) \
            .rsplit(".", 1)[-1] != "BottleneckBlock":
        lz.refuse(stages.key("block_class"), f"{short_repr(block)}: the engine's blocks are BottleneckBlock")
    put("stride_in_1x1", stages, "stride_in_1x1", False)
    put("stage_norm", stages, "norm", "BN")
    put("num_groups", stages, "num_groups", 1)
    put("res5_dilation", stages, "dilation", 1)
    stages.done()
    d.put("width_per_group", 64, "(make_default_stages: 64)")
    d.put("res2_out", 256, "(make_default_stages: 256)")

    rpn = Call(lz, "model.proposal_generator", ("RPN",))
    put("rpn_in_features", rpn, "in_features")
    pre, post = rpn.get("pre_nms_topk"), rpn.get("post_nms_topk")
    for name, v in (("pre_nms_topk", pre), ("post_nms_topk", post)):
        if not isinstance(v, (list, tuple)) or len(v) != 2:
            lz.refuse(rpn.key(name), f"{short_repr(v)}: expected (train, test)")
    d.put("rpn_pre", pre[1], rpn.key("pre_nms_topk") + "[1]")
    d.put("rpn_post", post[1], rpn.key("post_nms_topk") + "[1]")
    put("rpn_nms", rpn, "nms_thresh", 0.7)
    put("rpn_min_size", rpn, "min_box_size", 0.0)
    rpn.training("anchor_matcher", "batch_size_per_image", "positive_fraction", "anchor_boundary_thresh",
                 "loss_weight", "box_reg_loss_type", "smooth_l1_beta")
    rpn.get("head"), rpn.get("anchor_generator"), rpn.get("box2box_transform")
    rpn.done()
    head = Call(lz, "model.proposal_generator.head", ("StandardRPNHead",))
    head.must("box_dim", 4, "the engine's boxes have 4 coordinates")
    put("rpn_conv_dims", head, "conv_dims", [-1])
    head.get("in_channels"), head.get("num_anchors")
    head.done()
    anchors = Call(lz, "model.proposal_generator.anchor_generator", ("DefaultAnchorGenerator",))
    put("anchor_sizes", anchors, "sizes")
    put("anchor_ratios", anchors, "aspect_ratios")
    put("anchor_offset", anchors, "offset", 0.5)
    strides = list(anchors.get("strides"))
    if strides != [4, 8, 16, 32, 64]:
        lz.refuse(anchors.key("strides"), f"{strides}: the engine's levels P2..P6 have strides [4, 8, 16, 32, 64]")
    anchors.done()
    coder = Call(lz, "model.proposal_generator.box2box_transform", ("Box2BoxTransform",))
    put("rpn_weights", coder, "weights")
    put("rpn_clamp", coder, "scale_clamp", SCALE_CLAMP)
    coder.done()

    roi = Call(lz, "model.roi_heads", ("StandardROIHeads",))
    put("num_classes", roi, "num_classes")
    put("box_in_features", roi, "box_in_features")
    put("mask_in_features", roi, "mask_in_features", None)
    for k in ("keypoint_in_features", "keypoint_pooler", "keypoint_head"):
        roi.must(k, None, "keypoint heads are not supported")
    if roi.get("mask_head", None) is None:
        lz.refuse(roi.key("mask_head"), "no mask head: the engine runs Mask R-CNN")
    roi.training("batch_size_per_image", "positive_fraction", "proposal_matcher", "proposal_append_gt",
                 "train_on_pred_boxes")
    roi.get("box_pooler"), roi.get("box_head"), roi.get("box_predictor"), roi.get("mask_pooler")
    roi.done()
    for head_name in ("box", "mask"):
        pooler = Call(lz, f"model.roi_heads.{head_name}_pooler", ("ROIPooler",))
        put(f"{head_name}_res", pooler, "output_size")
        put(f"{head_name}_sampling", pooler, "sampling_ratio")
        put(f"{head_name}_pooler_type", pooler, "pooler_type")
        put(f"{head_name}_canonical_size", pooler, "canonical_box_size", 224)
        put(f"{head_name}_canonical_level", pooler, "canonical_level", 4)
        scales = [float(s) for s in pooler.get("scales")]
        if scales != [0.25, 0.125, 0.0625, 0.03125]:
            lz.refuse(pooler.key("scales"), f"{scales}: the engine pools P2..P5 (1/4 .. 1/32)")
        pooler.done()
    box = Call(lz, "model.roi_heads.box_head", ("FastRCNNConvFCHead",))
    put("box_conv_dims", box, "conv_dims")
    put("box_fc_dims", box, "fc_dims")
    put("box_norm", box, "conv_norm", "")
    box.get("input_shape")
    box.done()
    pred = Call(lz, "model.roi_heads.box_predictor", ("FastRCNNOutputLayers",))
    put("score_thresh", pred, "test_score_thresh", 0.0)
    put("nms_thresh", pred, "test_nms_thresh", 0.5)
    put("dets", pred, "test_topk_per_image", 100)
    put("agnostic_box", pred, "cls_agnostic_bbox_reg", False)
    put("sigmoid_ce", pred, "use_sigmoid_ce", False)
    if pred.get("num_classes") != d["num_classes"]:
        lz.refuse(pred.key("num_classes"), f"{pred.get('num_classes')} classes, roi_heads has {d['num_classes']}")
    pred.training("smooth_l1_beta", "box_reg_loss_type", "loss_weight", "use_fed_loss", "get_fed_loss_cls_weights",
                  "fed_loss_num_classes")
    pred.get("input_shape"), pred.get("box2box_transform")
    pred.done()
    bcoder = Call(lz, "model.roi_heads.box_predictor.box2box_transform", ("Box2BoxTransform",))
    put("box_weights", bcoder, "weights")
    put("box_clamp", bcoder, "scale_clamp", SCALE_CLAMP)
    bcoder.done()
    mask = Call(lz, "model.roi_heads.mask_head", ("MaskRCNNConvUpsampleHead",))
    put("mask_conv_dims", mask, "conv_dims")
    put("mask_norm", mask, "conv_norm", "")
    mnc = mask.get("num_classes")
    if mnc not in (1, d["num_classes"]):
        lz.refuse(mask.key("num_classes"), f"{mnc} mask classes for {d['num_classes']} classes (1 for "
                  "class-agnostic masks)")
    d.put("agnostic_mask", mnc == 1 and d["num_classes"] != 1, mask.key("num_classes"))
    mask.training("loss_weight", "vis_period")
    mask.get("input_shape")
    mask.done()

    test = lz.at("dataloader.test")
    if test is None:
        lz.refuse("dataloader.test", "not in the config: the test-time resize is unknown")
    mapper = Call(lz, "dataloader.test.mapper", ("DatasetMapper",))
    augs = mapper.get("augmentations")
    if not isinstance(augs, list) or len(augs) != 1:
        lz.refuse(mapper.key("augmentations"), "the engine's test transform is one ResizeShortestEdge; got "
                  f"{len(augs) if isinstance(augs, list) else short_repr(augs)} transforms")
    rs = Call(lz, "dataloader.test.mapper.augmentations.0", ("ResizeShortestEdge",))
    short = rs.get("short_edge_length")
    if isinstance(short, (list, tuple)):
        if len(short) != 1 and not (len(short) == 2 and short[0] == short[1]):
            lz.refuse(rs.key("short_edge_length"), f"{list(short)}: a random test size; the engine resizes "
                      "to one size")
        short = short[0]
    d.put("min_size", short, rs.key("short_edge_length"))
    if "max_size" not in rs.kw:
        lz.refuse(rs.key("max_size"), "no max_size (unbounded): the engine needs a cap on the long side")
    put("max_size", rs, "max_size")
    rs.get("sample_style", "range")
    interp = rs.get("interp", None)
    if interp is not None and not str(interp.get("_name_", "") if isinstance(interp, dict) else interp) \
            .endswith("BILINEAR") and interp != 2:
        lz.refuse(rs.key("interp"), f"{short_repr(interp)}: the engine resizes bilinearly (PIL.Image.BILINEAR)")
    rs.done()
    fmt = model.get("input_format", None)
    mfmt = mapper.get("image_format", None)
    if fmt is not None and mfmt is not None and fmt != mfmt:
        lz.refuse(model.key("input_format"), f"{fmt!r}, the test mapper reads {mfmt!r}")
    if fmt is not None:
        d.put("format", fmt, model.key("input_format"))
    else:
        d.put("format", mfmt or "BGR", mapper.key("image_format"))
    model.get("backbone"), model.get("proposal_generator"), model.get("roi_heads")
    model.done()
    d.put("datasets", lz.at("dataloader.test.dataset.names"), "dataloader.test.dataset.names")
    finish(d, m)
    m.ignored += [f"dataloader.{k}" for k in (lz.at("dataloader") or {}) if k != "test"]
    m.ignored += sorted(k for k in tree if k not in ("model", "dataloader"))  # train, optimizer, ...
    return m
