"""mmdetection training configs -> our config keys (train_config.py's mmdetection reader).

The config (and its `_base_` files) is loaded by mmdetection's own loader, mmengine's
`Config.fromfile`, which executes Python: it runs in train_config_sandbox.py's child process
with build/venv-mmdet's python (`make deps` makes the venv; mmengine 0.10.7, mmdet 3.3.0, whose
wheel has mmdet's own configs under mmdet/.mim/configs) and comes back as `cfg.to_dict()`.
Custom imports (`custom_imports`) are not imported: a type they would register is refused by
name here.  mmengine's "new style" configs (`with read_base():`, classes as types) load lazily
(mmengine does not import the classes) and their types come back as dotted names
("mmdet.models.MaskRCNN"), read by their last part.

Read: the model (data_preprocessor, ResNet backbone, FPN neck, RPNHead, StandardRoIHead with
its extractors, bbox head and FCNMaskHead, test_cfg), the test pipeline (v3:
test_dataloader.dataset.pipeline or test_pipeline; v2: data.test.pipeline with
MultiScaleFlipAug and img_norm_cfg's Normalize and Pad) and the class names (the test, val or
train dataset's metainfo.classes, v2's `classes`, else COCO's for CocoDataset).  Each module
dict is checked against the mmdet class its `type` names: an argument the class does not take
is refused (mmdet would refuse it too), one that changes inference in a way the engine cannot
follow is refused with the reason, a training-only one is ignored.  Defaults are mmdet 3.3.0's
(mmdet/models/..., mmcv's RoIAlign: aligned=True, sampling_ratio=0).
"""


try:
    from . import train_config_sandbox as sandbox
    from .train_config import Mapping, TrainConfigError, TreeReader, refuse, set_norm, short_repr
except ImportError:
    import train_config_sandbox as sandbox
    from train_config import Mapping, TrainConfigError, TreeReader, refuse, set_norm, short_repr

BN_TYPES = {"BN", "BN2d", "SyncBN", "MMSyncBN", "NaiveSyncBN", "TorchSyncBN"}  # eval: running stats
RES_WIDTHS = 4  # stages


def read(path):
    python = sandbox.mmdet_python()
    if python is None:
        raise TrainConfigError(None, "reading an mmdetection config needs mmengine, from the optional venv "
                               f"{sandbox.MMDET_VENV}, which is missing: run `make deps` (or set "
                               "DETECT_MMDET_VENV to a venv with mmengine and mmdet)", path)
    try:
        tree = sandbox.run_child("mmengine", path, python)
    except sandbox.SandboxError as e:
        raise TrainConfigError(None, f"mmengine could not load it: {e}", path) from None
    return read_tree(tree, path)


def _type_name(t):
    if isinstance(t, dict) and "_name_" in t:
        t = t["_name_"]
    t = str(t)
    return t.rsplit(".", 1)[-1]  # "mmdet.ResNet" (a scope), or a class's dotted name


class Part:
    """One module dict of the config, checked against the mmdet class its `type` names."""

    MISSING = object()

    def __init__(self, rd, path, types, node=MISSING, why=None):
        self.rd, self.path = rd, path
        node = rd.at(path) if node is Part.MISSING else node
        if not isinstance(node, dict) or "type" not in node:
            rd.refuse(path, f"expected a dict with type {' or '.join(types)}, got {short_repr(node)}")
        self.type = _type_name(node["type"])
        if self.type not in types:
            reason = (why or {}).get(self.type, "")
            rd.refuse(path + ".type", f"{self.type}: the engine runs {' or '.join(types)} here" + reason)
        self.kw = {k: v for k, v in node.items() if k != "type"}
        self.seen = set()

    def key(self, name):
        return f"{self.path}.{name}"

    def get(self, name, default=MISSING):
        self.seen.add(name)
        if name in self.kw:
            return self.kw[name]
        if default is Part.MISSING:
            self.rd.refuse(self.key(name), "missing (mmdet needs it)")
        return default

    def must(self, name, default, problem, ok=None):
        v = self.get(name, default)
        if not (ok(v) if ok else v == default):
            self.rd.refuse(self.key(name), f"{short_repr(v)}: {problem}")
        return v

    def training(self, *names):
        for n in names:
            self.seen.add(n)
            if n in self.kw:
                self.rd.m.ignored.append(self.key(n))

    def done(self):
        # `_scope_` is mmengine's registry scope, which a config that `_base_`s on
        # 'mmdet::...' carries on every node: not an argument
        extra = [k for k in self.kw if k not in self.seen and k != "_scope_"]
        if extra:
            self.rd.refuse(self.key(extra[0]), f"not an argument the converter reads for {self.type} "
                           "(mmdet would refuse an unknown one)")


class Reader(TreeReader):
    """The tree this reader maps (train_config.TreeReader)."""


def _norm(rd, part, name, default=None):
    """norm_cfg -> (our kind, groups or None, eps or None)."""
    cfg = part.get(name, default)
    if cfg is None:
        return "none", None, None
    if not isinstance(cfg, dict) or "type" not in cfg:
        rd.refuse(part.key(name), f"{short_repr(cfg)}: expected a norm dict")
    kind = _type_name(cfg["type"])
    extra = set(cfg) - {"type", "requires_grad", "eps", "momentum", "num_groups", "affine"}
    if extra:
        rd.refuse(part.key(name) + "." + sorted(extra)[0], "not a norm argument the converter reads")
    if cfg.get("affine", True) is not True:
        rd.refuse(part.key(name) + ".affine", "a norm without its affine weights is not supported")
    if kind in BN_TYPES:
        return "batchnorm", None, cfg.get("eps")
    if kind == "GN":
        groups = cfg.get("num_groups")
        if not isinstance(groups, int):
            rd.refuse(part.key(name) + ".num_groups", "GroupNorm needs num_groups")
        return "group_norm", groups, cfg.get("eps")
    rd.refuse(part.key(name) + ".type", f"{kind}: the engine runs BatchNorm (BN, SyncBN) and GroupNorm (GN) only")


def _conv_cfg(part, name="conv_cfg"):
    v = part.get(name, None)
    if v is not None and _type_name(v.get("type") if isinstance(v, dict) else v) not in ("Conv", "Conv2d"):
        part.rd.refuse(part.key(name), f"{short_repr(v)}: the engine runs plain convolutions (deformable and "
                       "other conv types are not supported)")


def _coder(rd, path, stds_default, section, origin_words):
    coder = Part(rd, path, ("DeltaXYWHBBoxCoder",))
    means = coder.get("target_means", (0.0, 0.0, 0.0, 0.0))
    if any(float(x) != 0.0 for x in means):
        rd.refuse(coder.key("target_means"), f"{list(means)}: the engine's box coder has zero means")
    stds = coder.get("target_stds", stds_default)
    if len(stds) != 4 or any(float(s) <= 0 for s in stds):
        rd.refuse(coder.key("target_stds"), f"{short_repr(stds)}: expected 4 positive numbers")
    rd.set(f"{section}.box_weights", [1.0 / float(s) for s in stds], coder.key("target_stds"))
    coder.must("clip_border", True, "the engine clips decoded boxes to the image")
    coder.must("add_ctr_clamp", False, "centre clamping is not supported")
    coder.get("ctr_clamp", 32)
    coder.must("use_box_type", False, "box types other than plain boxes are not supported")
    coder.done()


def _nms(rd, path, what):
    nms = rd.at(path)
    if not isinstance(nms, dict):
        rd.refuse(path, f"{short_repr(nms)}: expected dict(type='nms', iou_threshold=...)")
    if _type_name(nms.get("type", "nms")) != "nms":
        rd.refuse(path + ".type", f"{nms.get('type')}: the engine runs plain NMS ({what})")
    if nms.get("class_agnostic", False):
        rd.refuse(path + ".class_agnostic", f"class-agnostic NMS in the {what}: the engine's NMS is per "
                  "level (RPN) and per class (box head)")
    extra = set(nms) - {"type", "iou_threshold", "class_agnostic", "split_thr"}
    if extra:
        rd.refuse(f"{path}.{sorted(extra)[0]}", "not an NMS argument the converter reads")
    if "iou_threshold" not in nms:
        rd.refuse(path + ".iou_threshold", "missing")
    return nms["iou_threshold"]


def read_tree(tree, path):
    m = Mapping("mmdetection", "mmdetection")
    m.kind = "mmdetection"
    rd = Reader(tree, path, m)
    if not isinstance(tree.get("model"), dict):
        rd.refuse("model", "the config defines no model")
    v2 = "data_preprocessor" not in tree["model"]
    if v2:
        m.kind = "mmdetection 2.x"

    model = Part(rd, "model", ("MaskRCNN",), why={
        "CascadeRCNN": " (cascade heads are not supported)", "HybridTaskCascade": " (cascade heads are not "
        "supported)", "MaskScoringRCNN": " (mask scoring is not supported)", "PointRend": " (PointRend is not "
        "supported)", "QueryInst": "", "SOLO": "", "SOLOv2": "", "CondInst": "", "RTMDet": ""})
    model.training("train_cfg", "init_cfg", "pretrained")
    _read_input(rd, model, v2)
    _read_backbone(rd, model)
    _read_neck(rd, model)
    _read_rpn(rd, model)
    _read_roi(rd, model)
    _read_test_cfg(rd, model)
    model.done()
    _read_classes(rd, v2)
    read = {"model", "test_pipeline", "test_dataloader", "val_dataloader", "train_dataloader", "metainfo",
            "dataset_type", "data", "classes", "img_norm_cfg", "tta_model", "tta_pipeline"}
    m.ignored += sorted(k for k in tree if k not in read)  # runtime and training: loops, hooks, optimiser
    for key in ("tta_model", "tta_pipeline"):
        if tree.get(key) is not None:
            m.ignored.append(key)
            m.note(f"{key}: test-time augmentation (used only with mmdet's --tta) is not read; the engine runs "
                   "the plain test pipeline")
    return m


def _read_input(rd, model, v2):
    mean = std = origin = None
    rgb = False
    if not v2:
        pre = Part(rd, "model.data_preprocessor", ("DetDataPreprocessor",))
        mean, std = pre.get("mean", None), pre.get("std", None)
        origin = pre.key("mean")
        rgb = bool(pre.get("bgr_to_rgb", False)) or bool(pre.get("rgb_to_bgr", False))
        rd.set("input.size_divisibility", pre.get("pad_size_divisor", 1), pre.key("pad_size_divisor"))
        pre.must("pad_value", 0, "the engine pads with zeros")
        pre.training("pad_mask", "mask_pad_value", "pad_seg", "seg_pad_value", "boxtype2tensor", "non_blocking",
                     "batch_augments")
        pre.done()
        model.get("data_preprocessor")
    pipeline, where = _test_pipeline(rd, v2)
    steps = []  # (transform, its path), MultiScaleFlipAug's transforms in its place
    for i, step in enumerate(pipeline):
        steps.append((step, f"{where}.{i}"))
        if isinstance(step, dict) and _type_name(step.get("type")) == "MultiScaleFlipAug":
            steps += [(s, f"{where}.{i}.transforms.{j}") for j, s in enumerate(step.get("transforms", []))]
    size = None
    for step, spath in steps:
        if not isinstance(step, dict) or "type" not in step:
            rd.refuse(spath, f"{short_repr(step)}: expected a transform dict")
        t = _type_name(step["type"])
        if t in ("LoadImageFromFile", "LoadAnnotations", "PackDetInputs", "ImageToTensor", "DefaultFormatBundle",
                 "Collect", "RandomFlip", "LoadImageFromWebcam", "LoadImageFromNDArray"):
            if t == "RandomFlip" and (step.get("prob") or step.get("flip_ratio")):
                rd.refuse(spath, "a random flip at test time is not supported")
            continue
        if t == "MultiScaleFlipAug":
            scale = step.get("img_scale", step.get("scale"))
            if step.get("flip", False):
                rd.refuse(spath + ".flip", "test-time flip is not supported")
            if isinstance(scale, list) and scale and isinstance(scale[0], (list, tuple)):
                if len(scale) != 1:
                    rd.refuse(spath + ".img_scale", f"{scale}: several test scales (test-time augmentation) "
                              "are not supported")
                scale = scale[0]
            size = (scale, spath + ".img_scale")
        elif t == "Resize":
            if step.get("keep_ratio", False) is not True:
                rd.refuse(spath + ".keep_ratio", "a resize that does not keep the aspect ratio is not supported")
            if step.get("scale_factor") is not None:
                rd.refuse(spath + ".scale_factor", "a resize by a fixed factor is not supported")
            if step.get("backend", "cv2") != "cv2":
                rd.refuse(spath + ".backend", f"{step.get('backend')}: the engine resizes as mmcv's cv2 backend")
            if step.get("interpolation", "bilinear") != "bilinear":
                rd.refuse(spath + ".interpolation", f"{step.get('interpolation')}: the engine resizes bilinearly")
            extra = set(step) - {"type", "scale", "img_scale", "keep_ratio", "scale_factor", "backend",
                                 "interpolation", "clip_object_border", "bbox_clip_border", "override"}
            if extra:
                rd.refuse(f"{spath}.{sorted(extra)[0]}", "not a Resize argument the converter reads")
            scale = step.get("scale", step.get("img_scale"))
            if scale is not None:
                size = (scale, spath + ".scale")
        elif t == "Normalize":
            if not v2:
                rd.refuse(spath + ".type", "Normalize in the pipeline and in the data preprocessor: normalising "
                          "twice is not supported")
            mean, std, origin = step.get("mean"), step.get("std"), spath + ".mean"
            rgb = bool(step.get("to_rgb", True))
        elif t == "Pad":
            if step.get("size") is not None:
                rd.refuse(spath + ".size", "padding to a fixed size is not supported")
            rd.set("input.size_divisibility", step.get("size_divisor", 1), spath + ".size_divisor")
            if step.get("pad_val", 0) not in (0, {"img": 0}):
                rd.refuse(spath + ".pad_val", "the engine pads with zeros")
        else:
            rd.refuse(spath + ".type", f"{t}: a test transform the engine does not run (it resizes, normalises "
                      "and pads)")
    if size is None:
        rd.refuse(where, "no Resize in the test pipeline: the engine always resizes")
    scale, spath = size
    if not isinstance(scale, (list, tuple)) or len(scale) != 2 or not all(isinstance(s, int) for s in scale):
        rd.refuse(spath, f"{short_repr(scale)}: expected (long, short) sizes")
    rd.set("input.min_size", min(scale), spath)
    rd.set("input.max_size", max(scale), spath)
    if v2 and origin is None:
        rd.refuse(where, "no Normalize in the test pipeline (mean and std unknown)")
    if mean is None or std is None:
        mean, std = mean or [0.0, 0.0, 0.0], std or [1.0, 1.0, 1.0]
    if len(mean) != 3 or len(std) != 3:
        rd.refuse(origin, f"mean {mean}, std {std}: expected 3 values each")
    rd.set("input.pixel_mean", [float(x) for x in mean], origin)
    rd.set("input.pixel_std", [float(x) for x in std], origin)
    rd.set("input.channel_order", "RGB" if rgb else "BGR", origin)
    rd.set("input.pixel_scale", 1.0, origin)


def _test_pipeline(rd, v2):
    """(list of transform dicts, its path)."""
    candidates = (["data.test.pipeline", "test_pipeline"] if v2 else
                  ["test_dataloader.dataset.pipeline", "test_pipeline", "val_dataloader.dataset.pipeline"])
    for c in candidates:
        p = rd.at(c)
        if isinstance(p, list):
            return list(p), c
    rd.refuse(candidates[0], "no test pipeline in the config: the test-time resize is unknown")


def _read_backbone(rd, model):
    bb = Part(rd, "model.backbone", ("ResNet",), why={
        "ResNeXt": " (grouped convolutions are not supported)", "ResNetV1d": " (its deep stem is not supported)",
        "Res2Net": "", "RegNet": "", "SwinTransformer": "", "HRNet": ""})
    depth = bb.get("depth")
    rd.set("backbone.depth", depth, bb.key("depth"))
    if depth in (18, 34):
        rd.refuse(bb.key("depth"), f"ResNet-{depth} (basic blocks): the engine runs bottleneck ResNets 50, 101, 152")
    bb.must("in_channels", 3, "the engine reads 3-channel images")
    base = bb.get("base_channels", 64)
    stem = bb.get("stem_channels", None)
    rd.set("backbone.stem_out_channels", base if stem is None else stem, bb.key("stem_channels"))
    rd.set("backbone.width_per_group", base, bb.key("base_channels"))
    rd.set("backbone.res2_out_channels", base * 4, bb.key("base_channels"))
    rd.set("backbone.num_groups", 1, bb.key("type"))
    bb.must("num_stages", 4, "the engine's trunk has 4 stages")
    bb.must("strides", (1, 2, 2, 2), "the engine's stage strides are (1, 2, 2, 2)", ok=lambda v: list(v) == [1, 2, 2, 2])
    bb.must("dilations", (1, 1, 1, 1), "dilated stages are not supported", ok=lambda v: list(v) == [1, 1, 1, 1])
    bb.must("out_indices", (0, 1, 2, 3), "the FPN needs all 4 stages", ok=lambda v: list(v) == [0, 1, 2, 3])
    style = bb.get("style", "pytorch")
    if style not in ("pytorch", "caffe"):
        rd.refuse(bb.key("style"), f"{style!r}: expected 'pytorch' or 'caffe'")
    rd.set("backbone.stride_in_1x1", style == "caffe", bb.key("style"))
    bb.must("deep_stem", False, "a deep stem is not supported")
    bb.must("avg_down", False, "average-pool downsampling is not supported")
    _conv_cfg(bb)
    norm = _norm(rd, bb, "norm_cfg", {"type": "BN", "requires_grad": True})
    if norm[0] == "none":
        rd.refuse(bb.key("norm_cfg"), "a trunk without norms is not supported")
    set_norm(rd, "backbone", norm, bb.key("norm_cfg"))
    dcn = bb.get("dcn", None)
    stage_with_dcn = list(bb.get("stage_with_dcn", (False,) * 4))
    if dcn is not None and any(stage_with_dcn):
        rd.refuse(bb.key("dcn"), f"{short_repr(dcn)}: deformable convolutions are not supported")
    if dcn is None and any(stage_with_dcn):
        rd.refuse(bb.key("stage_with_dcn"), "deformable convolutions are not supported")
    if bb.get("plugins", None):
        rd.refuse(bb.key("plugins"), "trunk plugins (attention, context blocks) are not supported")
    bb.training("frozen_stages", "norm_eval", "with_cp", "zero_init_residual", "pretrained", "init_cfg")
    bb.done()
    model.get("backbone")


def _read_neck(rd, model):
    neck = Part(rd, "model.neck", ("FPN",), why={"PAFPN": "", "NASFPN": "", "BFP": "", "RFP": ""})
    out = neck.get("out_channels")
    rd.set("fpn.out_channels", out, neck.key("out_channels"))
    widths = list(neck.get("in_channels"))
    base = rd.m.values["backbone.res2_out_channels"]
    if widths != [base << i for i in range(RES_WIDTHS)]:
        rd.refuse(neck.key("in_channels"), f"{widths}: the trunk's stages are {[base << i for i in range(4)]} wide")
    neck.must("num_outs", 5, "the engine's FPN has 5 levels (P2..P6)")
    neck.must("start_level", 0, "the engine's FPN starts at P2")
    neck.must("end_level", -1, "the engine's FPN uses every stage", ok=lambda v: v in (-1, 3))
    neck.must("add_extra_convs", False, "extra convs for P6 are not supported (the engine's P6 is a max pool of P5)")
    neck.get("relu_before_extra_convs", False)
    _conv_cfg(neck)
    norm = _norm(rd, neck, "norm_cfg")
    if norm[0] != "none":
        neck.must("no_norm_on_lateral", False, "a norm on the output convs only is not supported")
    else:
        neck.get("no_norm_on_lateral", False)
    set_norm(rd, "fpn", norm, neck.key("norm_cfg"))
    neck.must("act_cfg", None, "the engine's FPN convs have no activation")
    up = neck.get("upsample_cfg", {"mode": "nearest"})
    if up != {"mode": "nearest"}:
        rd.refuse(neck.key("upsample_cfg"), f"{short_repr(up)}: the engine upsamples nearest to the lateral's size")
    neck.training("init_cfg")
    neck.done()
    model.get("neck")


def _read_rpn(rd, model):
    rpn = Part(rd, "model.rpn_head", ("RPNHead",), why={"GARPNHead": "", "CascadeRPNHead": "", "RPNHeadLoss": ""})
    fpn = rd.m.values["fpn.out_channels"]
    rpn.must("in_channels", fpn, f"the RPN reads the FPN's {fpn} channels")
    rpn.must("feat_channels", 256, f"the engine's RPN convs are as wide as the FPN ({fpn})", ok=lambda v: v == fpn)
    rd.set("rpn.num_convs", rpn.get("num_convs", 1), rpn.key("num_convs"))
    rpn.must("num_classes", 1, "the RPN scores one objectness per anchor")
    loss = rpn.get("loss_cls", {"type": "CrossEntropyLoss", "use_sigmoid": True})
    if isinstance(loss, dict) and not loss.get("use_sigmoid", False):
        rd.refuse(rpn.key("loss_cls.use_sigmoid"), "a softmax RPN: the engine's objectness is a sigmoid")
    anchors = Part(rd, "model.rpn_head.anchor_generator", ("AnchorGenerator",))
    strides = [s if isinstance(s, int) else s[0] for s in anchors.get("strides")]
    if strides != [4, 8, 16, 32, 64]:
        rd.refuse(anchors.key("strides"), f"{strides}: the engine's levels P2..P6 have strides 4..64")
    base_sizes = anchors.get("base_sizes", None)
    if base_sizes is not None and list(base_sizes) != strides:
        rd.refuse(anchors.key("base_sizes"), "base sizes other than the strides are not supported")
    for k in ("octave_base_scale", "scales_per_octave", "centers"):
        anchors.must(k, None, "not supported (the engine's anchors are scales x strides, centred on the cells)")
    scales = anchors.get("scales", None)
    if not scales:
        rd.refuse(anchors.key("scales"), "missing")
    if len(scales) > 1 and anchors.get("scale_major", True):
        rd.refuse(anchors.key("scale_major"), "several scales per level with scale_major=True order the anchors "
                  "ratio-major; the engine orders them size-major (scale_major=False)")
    anchors.get("scale_major", True)
    rd.set("anchors.sizes", [[s * float(x) for x in scales] for s in strides], anchors.key("scales"))
    rd.set("anchors.aspect_ratios", [float(r) for r in anchors.get("ratios")], anchors.key("ratios"))
    anchors.must("center_offset", 0.0, "the engine's mmdet anchors are centred at offset 0")
    anchors.must("use_box_type", False, "box types other than plain boxes are not supported")
    anchors.done()
    _coder(rd, "model.rpn_head.bbox_coder", (1.0, 1.0, 1.0, 1.0), "rpn", "RPN")
    rpn.get("anchor_generator"), rpn.get("bbox_coder", None)
    rpn.training("reg_decoded_bbox", "loss_bbox", "init_cfg", "train_cfg", "test_cfg")
    rpn.done()
    model.get("rpn_head")


def _read_roi(rd, model):
    roi = Part(rd, "model.roi_head", ("StandardRoIHead",), why={
        "CascadeRoIHead": " (cascade heads are not supported)", "HybridTaskCascadeRoIHead": " (cascade heads "
        "are not supported)", "MaskScoringRoIHead": " (mask scoring is not supported)", "PointRendRoIHead": ""})
    roi.must("shared_head", None, "a shared head (C4 models) is not supported")
    fpn = rd.m.values["fpn.out_channels"]
    sizes = {}
    for head, section in (("bbox", "box_head"), ("mask", "mask_head")):
        path = f"model.roi_head.{head}_roi_extractor"
        if rd.at(path) is None:
            rd.refuse(path, "missing: the engine's mask head has its own RoIAlign (14x14)")
        ex = Part(rd, path, ("SingleRoIExtractor",))
        layer = Part(rd, path + ".roi_layer", ("RoIAlign",), node=ex.get("roi_layer"))
        size = layer.get("output_size")
        size = size if isinstance(size, int) else size[0] if len(set(size)) == 1 else None
        if size is None:
            rd.refuse(layer.key("output_size"), "a non-square RoIAlign is not supported")
        sizes[head] = size
        rd.set(f"{section}.pooler.resolution", size, layer.key("output_size"))
        rd.set(f"{section}.pooler.sampling_ratio", layer.get("sampling_ratio", 0), layer.key("sampling_ratio"))
        rd.set(f"{section}.pooler.aligned", layer.get("aligned", True), layer.key("aligned"))
        layer.must("pool_mode", "avg", "max pooling is not supported")
        layer.get("use_torchvision", False)
        layer.done()
        ex.must("out_channels", fpn, f"the RoI features are the FPN's {fpn} channels")
        feats = list(ex.get("featmap_strides"))
        if feats != [4, 8, 16, 32]:
            rd.refuse(ex.key("featmap_strides"), f"{feats}: the engine pools P2..P5 (strides 4..32)")
        rd.set(f"{section}.pooler.canonical_size", ex.get("finest_scale", 56), ex.key("finest_scale"))
        ex.training("init_cfg")
        ex.done()
        roi.get(f"{head}_roi_extractor")
    nc_box = _read_bbox_head(rd, sizes["bbox"])
    nc_mask = _read_mask_head(rd, sizes["mask"])
    if nc_box != nc_mask:
        rd.refuse("model.roi_head.mask_head.num_classes", f"{nc_mask}, the bbox head has {nc_box}")
    rd.set("classes.num_classes", nc_box + 1, "model.roi_head.bbox_head.num_classes")
    rd.m.num_classes_origin = "model.roi_head.bbox_head.num_classes"
    roi.get("bbox_head"), roi.get("mask_head")
    roi.training("train_cfg", "test_cfg", "init_cfg")
    roi.done()
    model.get("roi_head")


def _read_bbox_head(rd, pool):
    head = Part(rd, "model.roi_head.bbox_head", ("Shared2FCBBoxHead", "Shared4Conv1FCBBoxHead", "ConvFCBBoxHead"),
                why={"SCNetBBoxHead": "", "DoubleConvFCBBoxHead": " (double heads are not supported)",
                     "SABLHead": ""})
    fixed = {"Shared2FCBBoxHead": (0, 2), "Shared4Conv1FCBBoxHead": (4, 1)}.get(head.type)
    if fixed:
        convs, fcs = fixed
    else:
        convs, fcs = head.get("num_shared_convs", 0), head.get("num_shared_fcs", 0)
        for k in ("num_cls_convs", "num_cls_fcs", "num_reg_convs", "num_reg_fcs"):
            head.must(k, 0, "separate classification and regression branches are not supported")
    if fcs < 1:
        rd.refuse(head.key("num_shared_fcs"), f"{fcs}: the engine's box head has 1 to 4 FC layers")
    rd.set("box_head.num_convs", convs, head.key("type"))
    rd.set("box_head.num_fcs", fcs, head.key("type"))
    rd.set("box_head.conv_dim", head.get("conv_out_channels", 256), head.key("conv_out_channels"))
    rd.set("box_head.fc_dim", head.get("fc_out_channels", 1024), head.key("fc_out_channels"))
    _conv_cfg(head)
    norm = _norm(rd, head, "norm_cfg")
    set_norm(rd, "box_head", norm if convs else ("none", None, None), head.key("norm_cfg"))
    head.must("with_avg_pool", False, "average pooling before the FCs is not supported")
    head.must("with_cls", True, "the engine's box head classifies")
    head.must("with_reg", True, "the engine's box head regresses boxes")
    head.must("roi_feat_size", 7, f"the RoIAlign gives {pool}x{pool}", ok=lambda v: v == pool)
    head.must("in_channels", rd.m.values["fpn.out_channels"], "the box head reads the FPN's channels")
    nc = head.get("num_classes", 80)
    head.must("predict_box_type", "hbox", "rotated boxes are not supported")
    rd.set("box_head.class_agnostic_regression", bool(head.get("reg_class_agnostic", False)),
           head.key("reg_class_agnostic"))
    for k in ("reg_predictor_cfg", "cls_predictor_cfg"):
        head.must(k, {"type": "Linear"}, "the engine's predictors are linear layers",
                  ok=lambda v: _type_name(v.get("type")) == "Linear" and set(v) == {"type"})
    loss = head.get("loss_cls", {"type": "CrossEntropyLoss", "use_sigmoid": False})
    if loss.get("use_sigmoid", False):
        rd.refuse(head.key("loss_cls.use_sigmoid"), "sigmoid class scores: the engine scores by softmax")
    if _type_name(loss.get("type")) not in ("CrossEntropyLoss",):
        rd.refuse(head.key("loss_cls.type"), f"{loss.get('type')}: a classification loss that may change how "
                  "scores are computed (the engine takes softmax of CrossEntropyLoss logits)")
    _coder(rd, "model.roi_head.bbox_head.bbox_coder", (0.1, 0.1, 0.2, 0.2), "box_head", "box head")
    head.get("bbox_coder", None)
    head.training("reg_decoded_bbox", "loss_bbox", "init_cfg")
    head.done()
    return nc


def _read_mask_head(rd, pool):
    head = Part(rd, "model.roi_head.mask_head", ("FCNMaskHead",), why={
        "HTCMaskHead": " (cascade heads are not supported)", "MaskIoUHead": "", "CoarseMaskHead": ""})
    rd.set("mask_head.num_convs", head.get("num_convs", 4), head.key("num_convs"))
    rd.set("mask_head.conv_dim", head.get("conv_out_channels", 256), head.key("conv_out_channels"))
    head.must("roi_feat_size", 14, f"the RoIAlign gives {pool}x{pool}", ok=lambda v: v == pool)
    head.must("in_channels", rd.m.values["fpn.out_channels"], "the mask head reads the FPN's channels")
    head.must("conv_kernel_size", 3, "the engine's mask convs are 3x3")
    nc = head.get("num_classes", 80)
    rd.set("mask_head.class_agnostic", bool(head.get("class_agnostic", False)), head.key("class_agnostic"))
    up = head.get("upsample_cfg", {"type": "deconv", "scale_factor": 2})
    if _type_name(up.get("type")) != "deconv" or up.get("scale_factor", 2) != 2 or set(up) - {"type", "scale_factor"}:
        rd.refuse(head.key("upsample_cfg"), f"{short_repr(up)}: the engine upsamples with a 2x2 stride-2 deconv")
    _conv_cfg(head)
    norm = _norm(rd, head, "norm_cfg")
    set_norm(rd, "mask_head", norm if rd.m.values["mask_head.num_convs"] else ("none", None, None),
              head.key("norm_cfg"))
    pred = head.get("predictor_cfg", {"type": "Conv"})
    if _type_name(pred.get("type")) not in ("Conv", "Conv2d") or set(pred) != {"type"}:
        rd.refuse(head.key("predictor_cfg"), f"{short_repr(pred)}: the engine's mask logits are a 1x1 conv")
    head.training("loss_mask", "init_cfg")
    head.done()
    return nc


def _read_test_cfg(rd, model):
    tc = model.get("test_cfg", None)
    if not isinstance(tc, dict) or "rpn" not in tc or "rcnn" not in tc:
        rd.refuse("model.test_cfg", "missing its rpn and rcnn parts (the test-time thresholds)")
    extra = set(tc) - {"rpn", "rcnn"}
    if extra:
        rd.refuse(f"model.test_cfg.{sorted(extra)[0]}", "not a test setting the converter reads")
    rpn, p = tc["rpn"], "model.test_cfg.rpn"
    if "nms" in rpn:
        rd.set("rpn.nms_thresh", _nms(rd, p + ".nms", "RPN"), p + ".nms.iou_threshold")
    elif "nms_thr" in rpn:  # mmdet 2.x before 2.12
        rd.set("rpn.nms_thresh", rpn["nms_thr"], p + ".nms_thr")
    else:
        rd.refuse(p + ".nms", "missing")
    if rpn.get("nms_across_levels", False):
        rd.refuse(p + ".nms_across_levels", "NMS across levels is not supported (the engine's is per level)")
    rd.set("rpn.pre_nms_top_n", rpn.get("nms_pre", 1000), p + ".nms_pre")
    if rpn.get("nms_pre", 1000) <= 0:
        rd.refuse(p + ".nms_pre", "no pre-NMS limit is not supported")
    post_key = "max_per_img" if "max_per_img" in rpn else "max_num"
    if post_key not in rpn:
        rd.refuse(p + ".max_per_img", "missing")
    rd.set("rpn.post_nms_top_n", rpn[post_key], f"{p}.{post_key}")
    min_size = rpn.get("min_bbox_size", -1)
    if min_size >= 0:
        rd.set("rpn.min_size", min_size, p + ".min_bbox_size")
        rd.set("rpn.min_size_rule", "detectron2", p + ".min_bbox_size")
    else:  # no filter: every clipped box has w, h >= 0
        rd.set("rpn.min_size", 0.0, p + ".min_bbox_size")
        rd.set("rpn.min_size_rule", "torchvision", p + ".min_bbox_size")
    rd.set("rpn.score_thresh", rpn.get("score_thr", 0.0), p + ".score_thr")
    extra = set(rpn) - {"nms", "nms_thr", "nms_pre", "max_per_img", "max_num", "min_bbox_size", "score_thr",
                        "nms_across_levels", "nms_post"}
    if extra:
        rd.refuse(f"{p}.{sorted(extra)[0]}", "not an RPN test setting the converter reads")
    rcnn, p = tc["rcnn"], "model.test_cfg.rcnn"
    for k in ("score_thr", "nms", "max_per_img", "mask_thr_binary"):
        if k not in rcnn:
            rd.refuse(f"{p}.{k}", "missing")
    rd.set("box_head.score_thresh", rcnn["score_thr"], p + ".score_thr")
    iou = _nms(rd, p + ".nms", "box head")
    rd.set("box_head.nms_thresh", iou, p + ".nms.iou_threshold")
    rd.set("box_head.agnostic_nms_thresh", iou, p + ".nms.iou_threshold")
    rd.set("box_head.detections_per_image", rcnn["max_per_img"], p + ".max_per_img")
    rd.set("mask_head.threshold", rcnn["mask_thr_binary"], p + ".mask_thr_binary")
    extra = set(rcnn) - {"score_thr", "nms", "max_per_img", "mask_thr_binary", "mask_size"}
    if extra:
        rd.refuse(f"{p}.{sorted(extra)[0]}", "not a box head test setting the converter reads")


def _read_classes(rd, v2):
    paths = (["data.test.classes", "classes", "data.val.classes", "data.train.classes"] if v2 else
             ["test_dataloader.dataset.metainfo.classes", "val_dataloader.dataset.metainfo.classes",
              "train_dataloader.dataset.metainfo.classes", "metainfo.classes"])
    for p in paths:
        names = rd.at(p)
        if names is not None:
            if isinstance(names, str) or not all(isinstance(n, str) for n in names):
                rd.refuse(p, f"{short_repr(names)}: expected a list of class names")
            rd.m.class_names, rd.m.class_names_origin = list(names), p
            break
    dtype = rd.at("data.test.type" if v2 else "test_dataloader.dataset.type") or rd.at("dataset_type")
    rd.m.coco = dtype is not None and _type_name(dtype) == "CocoDataset"
