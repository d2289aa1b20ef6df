"""torchvision builder descriptions -> our config keys (train_config.py's torchvision reader).

torchvision has no config file: a model is the call that built it.  Describe that call in a
JSON object (or a Python literal dict, read with ast.literal_eval: nothing executed) whose
keys are the builder's keyword arguments, e.g.

    {"builder": "resnet_fpn_backbone + MaskRCNN", "backbone": "resnet101", "num_classes": 5,
     "min_size": 640, "max_size": 1000, "box_score_thresh": 0.3,
     "class_names": ["cat", "dog", "bird", "fish"]}

for `MaskRCNN(resnet_fpn_backbone(backbone_name="resnet101", weights=...), num_classes=5,
min_size=640, max_size=1000, box_score_thresh=0.3)`.  KEYS below lists every key with its
meaning and torchvision's default (torchvision/models/detection/{faster_rcnn,mask_rcnn}.py,
backbone_utils.py); any other key is refused.  The builders:

- "maskrcnn_resnet50_fpn": v1 parts around ResNet-50 (configs/mask_rcnn_R-50-FPN_torchvision
  .json's); with "weights": "COCO_V1" (or "DEFAULT") the trunk's FrozenBatchNorm eps is 0, as
  the builder sets it (overwrite_eps) before any fine-tuning;
- "maskrcnn_resnet50_fpn_v2": the v2 parts (BatchNorm FPN and heads, 2 RPN convs, 4conv1fc);
- "resnet_fpn_backbone + MaskRCNN": MaskRCNN around resnet_fpn_backbone(backbone_name=
  "backbone"); v1 heads; num_classes is required (MaskRCNN has no default).

A model built with other modules (custom rpn_head, box_head, predictors, roi poolers) cannot
be described here: convert its weights and write the config from the keys in configs/README.md.
"""

import ast
import difflib
import json

try:
    from .train_config import Mapping, TrainConfigError, refuse
except ImportError:
    from train_config import Mapping, TrainConfigError, refuse

BUILDERS = ("maskrcnn_resnet50_fpn", "maskrcnn_resnet50_fpn_v2", "resnet_fpn_backbone + MaskRCNN")
COCO_WEIGHTS = ("COCO_V1", "DEFAULT", "MaskRCNN_ResNet50_FPN_Weights.COCO_V1",
                "MaskRCNN_ResNet50_FPN_Weights.DEFAULT")

# key -> (our key or None for training-only, torchvision's default, words)
KEYS = {
    "builder": (None, None, "which builder, one of BUILDERS (required)"),
    "backbone": (None, "resnet50", "resnet_fpn_backbone's backbone_name: resnet50, resnet101, resnet152"),
    "norm_layer": (None, "FrozenBatchNorm2d", "the trunk's norm: FrozenBatchNorm2d or BatchNorm2d (both folded)"),
    "weights": (None, None, "the builder's weights: COCO_V1 makes the v1 trunk's eps 0"),
    "num_classes": ("classes.num_classes", 91, "classes including the background"),
    "class_names": (None, None, "num_classes names (background first) or num_classes - 1"),
    "min_size": ("input.min_size", 800, "short side; a list: the last entry (torchvision's eval size)"),
    "max_size": ("input.max_size", 1333, "cap on the long side"),
    "image_mean": ("input.pixel_mean", [0.485, 0.456, 0.406], "RGB mean of the 0..1 image"),
    "image_std": ("input.pixel_std", [0.229, 0.224, 0.225], "RGB std of the 0..1 image"),
    "anchor_sizes": ("anchors.sizes", [[32], [64], [128], [256], [512]], "AnchorGenerator sizes, a row per level"),
    "aspect_ratios": ("anchors.aspect_ratios", [0.5, 1.0, 2.0], "AnchorGenerator aspect_ratios (rows equal)"),
    "rpn_pre_nms_top_n_test": ("rpn.pre_nms_top_n", 1000, "per level, before NMS"),
    "rpn_post_nms_top_n_test": ("rpn.post_nms_top_n", 1000, "after NMS"),
    "rpn_nms_thresh": ("rpn.nms_thresh", 0.7, "RPN NMS IoU"),
    "rpn_score_thresh": ("rpn.score_thresh", 0.0, "RPN objectness threshold"),
    "box_score_thresh": ("box_head.score_thresh", 0.05, "class score threshold"),
    "box_nms_thresh": ("box_head.nms_thresh", 0.5, "per-class NMS IoU"),
    "box_detections_per_img": ("box_head.detections_per_image", 100, "detections per image"),
    "bbox_reg_weights": ("box_head.box_weights", None, "box coder weights; None: (10, 10, 5, 5)"),
    "returned_layers": (None, [1, 2, 3, 4], "resnet_fpn_backbone: must be [1, 2, 3, 4]"),
    "extra_blocks": (None, "LastLevelMaxPool", "resnet_fpn_backbone: must be LastLevelMaxPool"),
}
TRAINING = ("rpn_pre_nms_top_n_train", "rpn_post_nms_top_n_train", "rpn_fg_iou_thresh", "rpn_bg_iou_thresh",
            "rpn_batch_size_per_image", "rpn_positive_fraction", "box_fg_iou_thresh", "box_bg_iou_thresh",
            "box_batch_size_per_image", "box_positive_fraction", "trainable_backbone_layers", "trainable_layers",
            "weights_backbone", "progress")
HEAD_MODULES = ("rpn_anchor_generator", "rpn_head", "box_roi_pool", "box_head", "box_predictor", "mask_roi_pool",
                "mask_head", "mask_predictor", "fixed_size", "size_divisible", "_skip_resize")


def read(path):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise TrainConfigError(None, f"cannot read: {e}", path) from None
    try:
        desc = json.loads(text)
    except ValueError:
        try:
            desc = ast.literal_eval(text)
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError) as e:
            raise TrainConfigError(None, f"neither JSON nor a Python literal dict: {e}", path) from None
    if not isinstance(desc, dict):
        refuse(None, "expected an object of the builder's keyword arguments", path)
    return read_description(desc, path)


def read_description(desc, path):
    def bad(key, problem):
        refuse(key, problem, path)

    for key in desc:
        if key in HEAD_MODULES:
            bad(key, "modules cannot be described here (only the builders' own parts are known)")
        if key not in KEYS and key not in TRAINING:
            close = difflib.get_close_matches(str(key), list(KEYS) + list(TRAINING), n=1, cutoff=0.8)
            bad(key, "not a keyword the converter knows" + (f" (did you mean {close[0]}?)" if close else ""))
    builder = desc.get("builder")
    if builder not in BUILDERS:
        bad("builder", f"{builder!r}: one of {', '.join(BUILDERS)}")
    v2 = builder == "maskrcnn_resnet50_fpn_v2"
    m = Mapping("torchvision", "torchvision_v2" if v2 else "torchvision")
    m.kind = f"torchvision {builder}"
    m.ignored = [k for k in desc if k in TRAINING]

    backbone = desc.get("backbone", "resnet50")
    depths = {"resnet50": 50, "resnet101": 101, "resnet152": 152}
    if builder != "resnet_fpn_backbone + MaskRCNN" and backbone != "resnet50":
        bad("backbone", f"{backbone!r}: {builder} builds resnet50 (use \"resnet_fpn_backbone + MaskRCNN\")")
    if backbone not in depths:
        bad("backbone", f"{backbone!r}: the engine runs {', '.join(depths)}")
    m.set("backbone.depth", depths[backbone], "backbone")
    norm = desc.get("norm_layer", "BatchNorm2d" if v2 else "FrozenBatchNorm2d")
    if norm not in ("FrozenBatchNorm2d", "BatchNorm2d"):
        bad("norm_layer", f"{norm!r}: the trunk norms the engine folds are FrozenBatchNorm2d and BatchNorm2d")
    weights = desc.get("weights")
    eps = 1e-5
    if builder == "maskrcnn_resnet50_fpn" and weights in COCO_WEIGHTS:
        eps = 0.0
    elif weights is not None and not isinstance(weights, str):
        bad("weights", f"{weights!r}: a weights name")
    m.set("backbone.norm_eps", eps, "weights")
    if list(desc.get("returned_layers", [1, 2, 3, 4])) != [1, 2, 3, 4]:
        bad("returned_layers", "the engine's FPN takes all four stages ([1, 2, 3, 4])")
    if desc.get("extra_blocks", "LastLevelMaxPool") != "LastLevelMaxPool":
        bad("extra_blocks", "the engine's P6 is LastLevelMaxPool")

    if "num_classes" not in desc and builder == "resnet_fpn_backbone + MaskRCNN":
        bad("num_classes", "required: MaskRCNN has no default class count")
    n = desc.get("num_classes", 91)
    if not isinstance(n, int) or isinstance(n, bool):
        bad("num_classes", f"{n!r}: expected an integer")
    m.set("classes.num_classes", n, "num_classes")
    m.num_classes_origin = "num_classes"
    if "class_names" in desc:
        names = desc["class_names"]
        if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
            bad("class_names", "expected a list of strings")
        m.class_names, m.class_names_origin = names, "class_names"
    m.coco = n == 91 and "class_names" not in desc

    min_size = desc.get("min_size", 800)
    if isinstance(min_size, (list, tuple)):
        if not min_size:
            bad("min_size", "an empty list")
        min_size = min_size[-1]  # GeneralizedRCNNTransform in eval mode: self.min_size[-1]
    m.set("input.min_size", min_size, "min_size")
    for key in ("max_size", "image_mean", "image_std", "rpn_pre_nms_top_n_test", "rpn_post_nms_top_n_test",
                "rpn_nms_thresh", "rpn_score_thresh", "box_score_thresh", "box_nms_thresh", "box_detections_per_img"):
        if key in desc:
            m.set(KEYS[key][0], desc[key], key)
    if "box_nms_thresh" in desc:
        m.set("box_head.agnostic_nms_thresh", desc["box_nms_thresh"], "box_nms_thresh")
    if desc.get("bbox_reg_weights") is not None:
        w = desc["bbox_reg_weights"]
        if not isinstance(w, (list, tuple)) or len(w) != 4:
            bad("bbox_reg_weights", f"{w!r}: expected 4 numbers")
        m.set("box_head.box_weights", list(w), "bbox_reg_weights")
    if "anchor_sizes" in desc:
        sizes = desc["anchor_sizes"]
        if not isinstance(sizes, (list, tuple)) or not all(isinstance(r, (list, tuple)) for r in sizes):
            bad("anchor_sizes", "expected a list of lists, one per level (torchvision's AnchorGenerator sizes)")
        m.set("anchors.sizes", [list(r) for r in sizes], "anchor_sizes")
    if "aspect_ratios" in desc:
        ratios = desc["aspect_ratios"]
        if isinstance(ratios, (list, tuple)) and ratios and isinstance(ratios[0], (list, tuple)):
            if any(list(r) != list(ratios[0]) for r in ratios):
                bad("aspect_ratios", "different ratios per level: the engine uses one list")
            ratios = ratios[0]
        m.set("anchors.aspect_ratios", list(ratios), "aspect_ratios")
    return m
