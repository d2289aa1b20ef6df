"""detectron2 training configs -> our config keys (train_config.py's detectron2 reader).

Two config systems, one meaning.  Both are first reduced to the arguments detectron2's
constructors receive (the `D2` record below: what `from_config` builds from a yaml, or what
a LazyConfig passes explicitly), then `finish` maps those to our keys and refuses what the
engine cannot run.

yaml (detectron2/config/config.py + fvcore's CfgNode, read, not copied): the file is read with
PyYAML's safe loader (python/* tags refused: detectron2 itself would execute them); `_BASE_`
(a path relative to the file, or a list of them) is loaded first and the file's keys merged
over it, dicts key by key, anything else replaced; the result is merged over detectron2's
defaults (train_config_d2_defaults.py) as yacs merges: a key the defaults lack is an error,
a string value is read as a Python literal when it is one ("(800,)" is a tuple), and the
value must have the default's type (tuple and list interchangeable, None either way),
otherwise detectron2 refuses the file and so do we.  VERSION must be 2 (or absent).

LazyConfig (train_config_d2_lazy.py): a .py runs in train_config_sandbox.py's child (see there
what that protects against and what not) and comes back as a tree; a config.yaml saved by a
LazyConfig run is read as data (python/name tags become names).
"""

import ast
import copy
import difflib
import math
import os
import re

import yaml

try:
    from . import train_config_d2_defaults as defaults
    from . import train_config_sandbox as sandbox
    from .train_config import Mapping, TrainConfigError, refuse, set_norm
except ImportError:
    import train_config_d2_defaults as defaults
    import train_config_sandbox as sandbox
    from train_config import Mapping, TrainConfigError, refuse, set_norm

SCALE_CLAMP = math.log(1000.0 / 16)  # detectron2/modeling/box_regression.py _DEFAULT_SCALE_CLAMP
BN_NAMES = {"BN", "SyncBN", "FrozenBN", "nnSyncBN", "naiveSyncBN", "naiveSyncBN_N"}
BN_CLASSES = {"BatchNorm2d", "SyncBatchNorm", "NaiveSyncBatchNorm", "FrozenBatchNorm2d"}
RES_FEATURES = ["res2", "res3", "res4", "res5"]
RPN_FEATURES = ["p2", "p3", "p4", "p5", "p6"]
ROI_FEATURES = ["p2", "p3", "p4", "p5"]


def read(path):
    try:
        from .train_config_d2_lazy import read_lazy
    except ImportError:
        from train_config_d2_lazy import read_lazy
    if path.endswith(".py"):
        try:
            tree = sandbox.run_child("lazy", path)
        except sandbox.SandboxError as e:
            raise TrainConfigError(None, f"cannot load the LazyConfig: {e}", path) from None
        return read_lazy(tree, path, "detectron2 LazyConfig")
    data = _load_yaml(path)
    if isinstance(data, dict) and isinstance(data.get("model"), dict) and "_target_" in data["model"]:
        return read_lazy(data, path, "detectron2 LazyConfig (saved yaml)")
    return read_yaml(path)


# ---------------------------------------------------------------------------------------
# The record both systems reduce to
# ---------------------------------------------------------------------------------------

class D2:
    """detectron2's constructor arguments by meaning, each with its origin (a key label)."""

    def __init__(self, file):
        self.file, self.v, self.o = file, {}, {}

    def put(self, name, value, origin):
        self.v[name], self.o[name] = value, origin

    def __getitem__(self, name):
        return self.v[name]

    def refuse(self, name, problem):
        refuse(self.o.get(name, name), problem, self.file)


def _norm(spec, d, name):
    """A detectron2 norm (get_norm's string, a norm class, or a function building one) ->
    (our kind, GroupNorm groups or None, eps or None)."""
    if spec is None or spec == "":
        return "none", None, None
    if isinstance(spec, str):
        if spec in BN_NAMES:
            return "batchnorm", None, None
        if spec == "GN":
            return "group_norm", 32, None
        d.refuse(name, f"norm {spec!r}: the engine runs BatchNorm (BN, SyncBN, FrozenBN, ...) and GroupNorm "
                       "(GN) only")
    if isinstance(spec, dict) and "_name_" in spec:
        cls = spec["_name_"].rsplit(".", 1)[-1]
        if cls in BN_CLASSES:
            return "batchnorm", None, None
        d.refuse(name, f"norm {spec['_name_']}: the engine runs BatchNorm and GroupNorm only")
    if isinstance(spec, dict) and "_function_" in spec:
        if "_returns_" not in spec:
            d.refuse(name, f"a function ({spec['_function_']}) whose norm could not be found by calling it "
                           f"with a channel count ({spec.get('_error_')})")
        return _norm(spec["_returns_"], d, name)
    if isinstance(spec, dict) and "_target_" in spec:
        cls = str(spec["_target_"]).rsplit(".", 1)[-1]
        args, kw = list(spec.get("_args_", [])), {k: v for k, v in spec.items() if not k.startswith("_")}
        eps = kw.get("eps")
        if cls in BN_CLASSES:
            return "batchnorm", None, eps
        if cls == "GroupNorm":
            groups = kw.get("num_groups", args[0] if args else None)
            if not isinstance(groups, int):
                d.refuse(name, "GroupNorm without a readable num_groups")
            return "group_norm", groups, eps
        d.refuse(name, f"norm {spec['_target_']}: the engine runs BatchNorm and GroupNorm only")
    d.refuse(name, f"norm {spec!r}: not a norm the converter can read")


def finish(d, m):
    """Our keys from the record; refuses what the engine cannot run."""
    o = d.o
    fmt = d["format"]
    if fmt not in ("BGR", "RGB"):
        d.refuse("format", f"input format {fmt!r}: the engine takes BGR or RGB images")
    m.set("input.channel_order", fmt, o["format"])
    for name, key in (("pixel_mean", "input.pixel_mean"), ("pixel_std", "input.pixel_std")):
        v = d[name]
        if not isinstance(v, (list, tuple)) or len(v) != 3:
            d.refuse(name, f"expected 3 values (one per channel), got {v!r}")
        m.set(key, list(v), o[name])
    if not isinstance(d["min_size"], int) or d["min_size"] <= 0:
        d.refuse("min_size", f"test size {d['min_size']!r}: the engine always resizes (a positive short side)")
    m.set("input.min_size", d["min_size"], o["min_size"])
    m.set("input.max_size", d["max_size"], o["max_size"])

    depth = d["depth"]
    if depth in (18, 34):
        d.refuse("depth", f"ResNet-{depth} (basic blocks): the engine runs bottleneck ResNets 50, 101, 152")
    m.set("backbone.depth", depth, o["depth"])
    if d["num_groups"] != 1:
        d.refuse("num_groups", f"{d['num_groups']} groups (ResNeXt): the engine does not run grouped convolutions")
    m.set("backbone.num_groups", 1, o["num_groups"])
    m.set("backbone.width_per_group", d["width_per_group"], o["width_per_group"])
    m.set("backbone.stem_out_channels", d["stem_out"], o["stem_out"])
    m.set("backbone.res2_out_channels", d["res2_out"], o["res2_out"])
    m.set("backbone.stride_in_1x1", d["stride_in_1x1"], o["stride_in_1x1"])
    if d["res5_dilation"] != 1:
        d.refuse("res5_dilation", f"dilation {d['res5_dilation']} in res5: the engine runs undilated stages")
    stem, stages = _norm(d["stem_norm"], d, "stem_norm"), _norm(d["stage_norm"], d, "stage_norm")
    if stages[0] == "none":
        d.refuse("stage_norm", "a trunk without norms: the engine's trunk has BatchNorm or GroupNorm")
    if stem[:2] != stages[:2]:
        d.refuse("stem_norm", f"the stem's norm ({stem[0]}) is not the stages' ({stages[0]}): the engine has "
                              "one trunk norm")
    set_norm(m, "backbone", stages, o["stage_norm"])

    if list(d["fpn_in_features"]) != RES_FEATURES:
        d.refuse("fpn_in_features", f"FPN on {d['fpn_in_features']}: the engine's FPN takes {RES_FEATURES}")
    if d["fpn_fuse"] != "sum":
        d.refuse("fpn_fuse", f"FPN fuse type {d['fpn_fuse']!r}: the engine sums the top-down path")
    m.set("fpn.out_channels", d["fpn_out"], o["fpn_out"])
    set_norm(m, "fpn", _norm(d["fpn_norm"], d, "fpn_norm"), o["fpn_norm"])

    if list(d["rpn_in_features"]) != RPN_FEATURES:
        d.refuse("rpn_in_features", f"RPN on {d['rpn_in_features']}: the engine's RPN runs on {RPN_FEATURES}")
    m.set("anchors.sizes", _per_level(d, "anchor_sizes", "sizes"), o["anchor_sizes"])
    ratios = _per_level(d, "anchor_ratios", "aspect ratios")
    if any(r != ratios[0] for r in ratios):
        d.refuse("anchor_ratios", f"aspect ratios differ between levels ({ratios}): the engine uses one list")
    m.set("anchors.aspect_ratios", ratios[0], o["anchor_ratios"])
    off = d["anchor_offset"]
    if not (isinstance(off, (int, float)) and 0 <= off < 1):
        d.refuse("anchor_offset", f"anchor offset {off!r}: must be in [0, 1)")
    m.set("anchors.offset", off, o["anchor_offset"])
    dims = d["rpn_conv_dims"]
    if not isinstance(dims, (list, tuple)) or not dims:
        d.refuse("rpn_conv_dims", f"RPN conv dims {dims!r}: expected a non-empty list")
    if any(c != -1 and c != d["fpn_out"] for c in dims):
        d.refuse("rpn_conv_dims", f"RPN convs of widths {list(dims)}: the engine's RPN convs are as wide as the "
                                  f"FPN ({d['fpn_out']}; -1)")
    m.set("rpn.num_convs", len(dims), o["rpn_conv_dims"])
    m.set("rpn.pre_nms_top_n", d["rpn_pre"], o["rpn_pre"])
    m.set("rpn.post_nms_top_n", d["rpn_post"], o["rpn_post"])
    m.set("rpn.nms_thresh", d["rpn_nms"], o["rpn_nms"])
    m.set("rpn.min_size", d["rpn_min_size"], o["rpn_min_size"])
    m.set("rpn.box_weights", _weights(d, "rpn_weights"), o["rpn_weights"])
    for name in ("rpn_clamp", "box_clamp"):
        if not math.isclose(d[name], SCALE_CLAMP, rel_tol=1e-12):
            if not math.isclose(d["rpn_clamp"], d["box_clamp"], rel_tol=1e-12):
                d.refuse(name, "the RPN's and the box head's scale_clamp differ: the engine has one "
                               "box.bbox_xform_clip")
            m.set("box.bbox_xform_clip", d[name], o[name])

    nc = d["num_classes"]
    if not isinstance(nc, int) or nc < 1:
        d.refuse("num_classes", f"{nc!r} classes")
    m.set("classes.num_classes", nc + 1, o["num_classes"])
    m.num_classes_origin = o["num_classes"]
    m.set("box_head.score_thresh", d["score_thresh"], o["score_thresh"])
    m.set("box_head.nms_thresh", d["nms_thresh"], o["nms_thresh"])
    m.set("box_head.agnostic_nms_thresh", d["nms_thresh"], o["nms_thresh"])
    m.set("box_head.detections_per_image", d["dets"], o["dets"])
    m.set("box_head.box_weights", _weights(d, "box_weights"), o["box_weights"])
    m.set("box_head.class_agnostic_regression", bool(d["agnostic_box"]), o["agnostic_box"])
    if d["sigmoid_ce"]:
        d.refuse("sigmoid_ce", "sigmoid class scores: the engine scores classes by softmax")

    for head in ("box", "mask"):
        section = f"{head}_head"
        feats = d[f"{head}_in_features"]
        if not isinstance(feats, (list, tuple)) or list(feats) != ROI_FEATURES:
            d.refuse(f"{head}_in_features", f"{head} head on {d[head + '_in_features']}: the engine pools "
                                            f"{ROI_FEATURES}")
        ptype = d[f"{head}_pooler_type"]
        if ptype not in ("ROIAlignV2", "ROIAlign"):
            d.refuse(f"{head}_pooler_type", f"pooler {ptype!r}: the engine runs ROIAlignV2 and ROIAlign")
        m.set(f"{section}.pooler.aligned", ptype == "ROIAlignV2", o[f"{head}_pooler_type"])
        m.set(f"{section}.pooler.resolution", d[f"{head}_res"], o[f"{head}_res"])
        m.set(f"{section}.pooler.sampling_ratio", d[f"{head}_sampling"], o[f"{head}_sampling"])
        m.set(f"{section}.pooler.canonical_size", d[f"{head}_canonical_size"], o[f"{head}_canonical_size"])
        m.set(f"{section}.pooler.canonical_level", d[f"{head}_canonical_level"], o[f"{head}_canonical_level"])

    convs, fcs = list(d["box_conv_dims"]), list(d["box_fc_dims"])
    if len(set(convs)) > 1:
        d.refuse("box_conv_dims", f"box head convs of widths {convs}: the engine's are all one width")
    if not fcs:
        d.refuse("box_fc_dims", "a box head without FC layers: the engine's has 1 to 4")
    if len(set(fcs)) > 1:
        d.refuse("box_fc_dims", f"box head FCs of widths {fcs}: the engine's are all one width")
    m.set("box_head.num_convs", len(convs), o["box_conv_dims"])
    if convs:
        m.set("box_head.conv_dim", convs[0], o["box_conv_dims"])
    m.set("box_head.num_fcs", len(fcs), o["box_fc_dims"])
    m.set("box_head.fc_dim", fcs[0], o["box_fc_dims"])
    set_norm(m, "box_head", _norm(d["box_norm"], d, "box_norm") if convs else ("none", None, None),
              o["box_norm"])

    mdims = list(d["mask_conv_dims"])
    if not mdims:
        d.refuse("mask_conv_dims", "a mask head without its upsampling layer")
    if len(set(mdims)) > 1:
        d.refuse("mask_conv_dims", f"mask head convs and deconv of widths {mdims}: the engine's are all one width")
    m.set("mask_head.num_convs", len(mdims) - 1, o["mask_conv_dims"])
    m.set("mask_head.conv_dim", mdims[0], o["mask_conv_dims"])
    set_norm(m, "mask_head", _norm(d["mask_norm"], d, "mask_norm") if len(mdims) > 1 else ("none", None, None),
              o["mask_norm"])
    m.set("mask_head.class_agnostic", bool(d["agnostic_mask"]), o["agnostic_mask"])

    names = d.v.get("datasets") or []
    names = [names] if isinstance(names, str) else list(names)
    m.coco = bool(names) and all(isinstance(n, str) and n.startswith("coco_") for n in names)


def _weights(d, name):
    w = d[name]
    if not isinstance(w, (list, tuple)) or len(w) != 4:
        d.refuse(name, f"box coder weights {w!r}: expected 4 numbers")
    return [float(x) for x in w]


def _per_level(d, name, words):
    """detectron2's per-level lists: one row for every level, a row per level, or (LazyConfig)
    a flat list for every level."""
    v = d[name]
    if not isinstance(v, (list, tuple)) or not v:
        d.refuse(name, f"anchor {words} {v!r}: expected a list")
    if not isinstance(v[0], (list, tuple)):
        v = [v]
    rows = [list(r) for r in v]
    if len(rows) == 1:
        rows = rows * len(RPN_FEATURES)
    if len(rows) != len(RPN_FEATURES):
        d.refuse(name, f"{len(rows)} rows of anchor {words} for {len(RPN_FEATURES)} RPN levels")
    return rows


# ---------------------------------------------------------------------------------------
# yaml
# ---------------------------------------------------------------------------------------

class _NameLoader(yaml.SafeLoader):
    """The safe loader, plus `!!python/name:X` and `!!python/tuple` as data (a saved LazyConfig
    has them); any other python/* tag stays an error."""


_NameLoader.add_multi_constructor("tag:yaml.org,2002:python/name:",
                                  lambda loader, suffix, node: {"_name_": suffix})
_NameLoader.add_constructor("tag:yaml.org,2002:python/tuple",
                            lambda loader, node: loader.construct_sequence(node))


def _load_yaml(path, for_key=None, base_of=None):
    try:
        with open(path, encoding="utf-8") as f:
            return yaml.load(f, Loader=_NameLoader)  # noqa: S506 (a safe loader)
    except FileNotFoundError:
        raise TrainConfigError(for_key, f"{path}: no such file", base_of) from None
    except OSError as e:
        raise TrainConfigError(for_key, f"cannot read {path}: {e.strerror or e}", base_of) from None
    except yaml.constructor.ConstructorError as e:
        raise TrainConfigError(None, f"YAML tag {e.problem}: python objects are not loaded (detectron2 would "
                               "execute them)", path) from None
    except yaml.YAMLError as e:
        raise TrainConfigError(None, f"not valid YAML: {' '.join(str(e).split())}", path) from None


def _merge_dicts(a, b):
    """fvcore's _BASE_ merge: a's keys into b, dicts key by key, anything else replaced."""
    for k, v in a.items():
        if isinstance(v, dict) and k in b:
            if not isinstance(b[k], dict):
                raise TrainConfigError(k, "cannot inherit a section over a value of the base")
            _merge_dicts(v, b[k])
        else:
            b[k] = v


def _leaves(tree, prefix=""):
    for k, v in tree.items():
        if isinstance(v, dict) and v:
            yield from _leaves(v, f"{prefix}{k}.")
        else:
            yield f"{prefix}{k}"


def load_with_base(path, chain=(), includer=None):
    """(tree, {dotted key: file that set it}) of a yaml and its _BASE_ files."""
    real = os.path.realpath(path)
    if real in chain:
        raise TrainConfigError("_BASE_", f"{path}: the _BASE_ chain comes back to this file", includer)
    tree = _load_yaml(path, "_BASE_" if chain else None, includer)
    if tree is None:
        tree = {}
    if not isinstance(tree, dict):
        raise TrainConfigError(None, "expected a YAML mapping at the top level", path)
    base_spec = tree.pop("_BASE_", None)
    origins = {k: path for k in _leaves(tree)}
    if base_spec is None:
        return tree, origins
    specs = base_spec if isinstance(base_spec, list) else [base_spec]
    base, base_origins = {}, {}
    for spec in specs:
        if not isinstance(spec, str):
            raise TrainConfigError("_BASE_", f"expected a file name, got {spec!r}", path)
        if re.match(r"[a-z]+://", spec):
            raise TrainConfigError("_BASE_", f"{spec}: a URL; download the base file and name it", path)
        spec_path = os.path.expanduser(spec)
        if not os.path.isabs(spec_path):
            spec_path = os.path.join(os.path.dirname(path), spec_path)
        t, o = load_with_base(spec_path, chain + (real,), path)
        try:
            _merge_dicts(t, base)
        except TrainConfigError as e:
            raise TrainConfigError("_BASE_", f"{spec}: {e.key}: {e.problem}", path) from None
        base_origins.update(o)
    try:
        _merge_dicts(tree, base)
    except TrainConfigError as e:
        raise TrainConfigError(e.key, e.problem, path) from None
    base_origins.update(origins)
    return base, base_origins


def _decode(value):
    """yacs's _decode_cfg_value: strings that are Python literals become them."""
    if not isinstance(value, str):
        return value
    try:
        return ast.literal_eval(value)
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        return value


_VALID = (tuple, list, str, int, float, bool, type(None))


def _coerce(value, default):
    """yacs's _check_and_coerce_cfg_value_type, or None when detectron2 would refuse."""
    if type(value) is type(default):
        return value
    if value is None and isinstance(default, _VALID) or default is None and isinstance(value, _VALID):
        return value
    if isinstance(value, tuple) and isinstance(default, list):
        return list(value)
    if isinstance(value, list) and isinstance(default, tuple):
        return tuple(value)
    return None


class YamlCfg:
    """The merged config with each leaf's origin; get() records what was read."""

    def __init__(self, path):
        self.top = path
        tree, self.origins = load_with_base(path)
        self.tree = copy.deepcopy(defaults.DEFAULTS)
        self.set_keys = []
        self._merge(tree, self.tree, "")
        self.read = set()

    def label(self, key):
        f = self.origins.get(key, self.top)
        if os.path.realpath(f) == os.path.realpath(self.top):
            return key
        return f"{key} (set in {os.path.relpath(f, os.path.dirname(os.path.abspath(self.top)))})"

    def _merge(self, a, b, prefix):
        for k, v in a.items():
            full = prefix + str(k)
            if k not in b:
                close = difflib.get_close_matches(str(k), list(b), n=1, cutoff=0.8)
                hint = f" (did you mean {prefix}{close[0]}?)" if close else " (a project's add_*_config key?)"
                refuse(self.label(full), "not a key of detectron2's config" + hint, self.top)
            if isinstance(b[k], dict):
                if not isinstance(v, dict):
                    refuse(self.label(full), f"expected a section, got {v!r}", self.top)
                self._merge(v, b[k], full + ".")
                continue
            value = _coerce(_decode(v), b[k])
            if value is None:
                refuse(self.label(full), f"{v!r} has type {type(_decode(v)).__name__}, the default "
                       f"{b[k]!r} {type(b[k]).__name__}: detectron2's CfgNode refuses this", self.top)
            b[k] = value
            self.set_keys.append(full)

    def get(self, key):
        node = self.tree
        for part in key.split("."):
            node = node[part]
        self.read.add(key)
        return node


def read_yaml(path):
    c = YamlCfg(path)
    m = Mapping("detectron2", "detectron2")
    m.kind = "detectron2 yaml"
    d = D2(path)

    def put(name, key, value=None):
        d.put(name, c.get(key) if value is None else value, c.label(key))

    def must(key, want, problem):
        have = c.get(key)
        if have != want:
            refuse(c.label(key), f"{have!r}: {problem}", path)

    version = c.get("VERSION")
    if version != 2:
        refuse(c.label("VERSION"), f"version {version!r}: detectron2 upgrades old configs with its compat "
               "module, which the converter does not; save the config with detectron2 to upgrade it", path)
    must("MODEL.META_ARCHITECTURE", "GeneralizedRCNN", "the engine runs GeneralizedRCNN (Mask R-CNN)")
    must("MODEL.MASK_ON", True, "the engine runs Mask R-CNN: MASK_ON must be true")
    must("MODEL.KEYPOINT_ON", False, "keypoint heads are not supported")
    must("MODEL.LOAD_PROPOSALS", False, "precomputed proposals are not supported (the engine runs its RPN)")
    must("MODEL.BACKBONE.NAME", "build_resnet_fpn_backbone", "the engine's backbone is a ResNet with an FPN "
         "(build_resnet_fpn_backbone)")
    must("MODEL.PROPOSAL_GENERATOR.NAME", "RPN", "the engine's proposals come from an RPN (RRPN and "
         "precomputed proposals are not supported)")
    must("MODEL.ANCHOR_GENERATOR.NAME", "DefaultAnchorGenerator", "rotated anchors are not supported")
    if [list(a) for a in c.get("MODEL.ANCHOR_GENERATOR.ANGLES")] != [[-90, 0, 90]]:
        refuse(c.label("MODEL.ANCHOR_GENERATOR.ANGLES"), "anchor angles are rotated anchors' setting: "
               "rotated boxes are not supported", path)
    must("MODEL.RPN.HEAD_NAME", "StandardRPNHead", "the engine's RPN head is StandardRPNHead")
    heads = c.get("MODEL.ROI_HEADS.NAME")
    if heads != "StandardROIHeads":
        why = {"CascadeROIHeads": "cascade heads are not supported", "RROIHeads": "rotated boxes are not supported"}
        refuse(c.label("MODEL.ROI_HEADS.NAME"), f"{heads!r}: " + why.get(heads, "the engine runs StandardROIHeads "
               "(FPN box and mask heads)"), path)
    must("MODEL.ROI_BOX_HEAD.NAME", "FastRCNNConvFCHead", "the engine's box head is FastRCNNConvFCHead")
    must("MODEL.ROI_MASK_HEAD.NAME", "MaskRCNNConvUpsampleHead", "the engine's mask head is "
         "MaskRCNNConvUpsampleHead")
    deform = c.get("MODEL.RESNETS.DEFORM_ON_PER_STAGE")
    if any(deform):
        refuse(c.label("MODEL.RESNETS.DEFORM_ON_PER_STAGE"), f"{list(deform)}: deformable convolutions are not "
               "supported", path)
    if c.get("TEST.AUG.ENABLED"):
        refuse(c.label("TEST.AUG.ENABLED"), "test-time augmentation is not supported (the engine runs one "
               "scale, no flip)", path)
    out = list(c.get("MODEL.RESNETS.OUT_FEATURES"))
    if not set(RES_FEATURES) <= set(out):
        refuse(c.label("MODEL.RESNETS.OUT_FEATURES"), f"{out}: the FPN needs {RES_FEATURES}", path)

    put("format", "INPUT.FORMAT")
    put("pixel_mean", "MODEL.PIXEL_MEAN")
    put("pixel_std", "MODEL.PIXEL_STD")
    put("min_size", "INPUT.MIN_SIZE_TEST")
    put("max_size", "INPUT.MAX_SIZE_TEST")
    put("depth", "MODEL.RESNETS.DEPTH")
    put("num_groups", "MODEL.RESNETS.NUM_GROUPS")
    put("width_per_group", "MODEL.RESNETS.WIDTH_PER_GROUP")
    put("stem_out", "MODEL.RESNETS.STEM_OUT_CHANNELS")
    put("res2_out", "MODEL.RESNETS.RES2_OUT_CHANNELS")
    put("stride_in_1x1", "MODEL.RESNETS.STRIDE_IN_1X1")
    put("res5_dilation", "MODEL.RESNETS.RES5_DILATION")
    put("stem_norm", "MODEL.RESNETS.NORM")
    put("stage_norm", "MODEL.RESNETS.NORM")
    put("fpn_in_features", "MODEL.FPN.IN_FEATURES")
    put("fpn_out", "MODEL.FPN.OUT_CHANNELS")
    put("fpn_norm", "MODEL.FPN.NORM")
    put("fpn_fuse", "MODEL.FPN.FUSE_TYPE")
    put("rpn_in_features", "MODEL.RPN.IN_FEATURES")
    put("anchor_sizes", "MODEL.ANCHOR_GENERATOR.SIZES")
    put("anchor_ratios", "MODEL.ANCHOR_GENERATOR.ASPECT_RATIOS")
    put("anchor_offset", "MODEL.ANCHOR_GENERATOR.OFFSET")
    put("rpn_conv_dims", "MODEL.RPN.CONV_DIMS")
    put("rpn_pre", "MODEL.RPN.PRE_NMS_TOPK_TEST")
    put("rpn_post", "MODEL.RPN.POST_NMS_TOPK_TEST")
    put("rpn_nms", "MODEL.RPN.NMS_THRESH")
    put("rpn_min_size", "MODEL.PROPOSAL_GENERATOR.MIN_SIZE")
    put("rpn_weights", "MODEL.RPN.BBOX_REG_WEIGHTS")
    d.put("rpn_clamp", SCALE_CLAMP, "(detectron2's scale clamp)")
    d.put("box_clamp", SCALE_CLAMP, "(detectron2's scale clamp)")
    put("num_classes", "MODEL.ROI_HEADS.NUM_CLASSES")
    put("score_thresh", "MODEL.ROI_HEADS.SCORE_THRESH_TEST")
    put("nms_thresh", "MODEL.ROI_HEADS.NMS_THRESH_TEST")
    put("dets", "TEST.DETECTIONS_PER_IMAGE")
    put("box_weights", "MODEL.ROI_BOX_HEAD.BBOX_REG_WEIGHTS")
    put("agnostic_box", "MODEL.ROI_BOX_HEAD.CLS_AGNOSTIC_BBOX_REG")
    put("sigmoid_ce", "MODEL.ROI_BOX_HEAD.USE_SIGMOID_CE")
    put("box_in_features", "MODEL.ROI_HEADS.IN_FEATURES")
    put("mask_in_features", "MODEL.ROI_HEADS.IN_FEATURES")
    for head, sec in (("box", "ROI_BOX_HEAD"), ("mask", "ROI_MASK_HEAD")):
        put(f"{head}_res", f"MODEL.{sec}.POOLER_RESOLUTION")
        put(f"{head}_sampling", f"MODEL.{sec}.POOLER_SAMPLING_RATIO")
        put(f"{head}_pooler_type", f"MODEL.{sec}.POOLER_TYPE")
        d.put(f"{head}_canonical_size", 224, "(detectron2's ROIPooler canonical_box_size)")
        d.put(f"{head}_canonical_level", 4, "(detectron2's ROIPooler canonical_level)")
    box = "MODEL.ROI_BOX_HEAD."
    d.put("box_conv_dims", [c.get(box + "CONV_DIM")] * c.get(box + "NUM_CONV"), c.label(box + "NUM_CONV"))
    d.put("box_fc_dims", [c.get(box + "FC_DIM")] * c.get(box + "NUM_FC"), c.label(box + "NUM_FC"))
    put("box_norm", box + "NORM")
    mask = "MODEL.ROI_MASK_HEAD."
    d.put("mask_conv_dims", [c.get(mask + "CONV_DIM")] * (c.get(mask + "NUM_CONV") + 1), c.label(mask + "NUM_CONV"))
    put("mask_norm", mask + "NORM")
    put("agnostic_mask", mask + "CLS_AGNOSTIC_MASK")
    put("datasets", "DATASETS.TEST")
    c.get("MODEL.ROI_HEADS.NAME")
    finish(d, m)
    m.ignored = [k for k in c.set_keys if defaults.group_of(k) != "read"]
    m.read_keys = c.read
    return m
