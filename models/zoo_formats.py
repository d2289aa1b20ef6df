"""The model zoos' checkpoint layouts: name rule tables and value changes per source format.

Each SourceFormat maps a zoo's tensor names to the canonical names of models/README.md
(Detectron .pkl, detectron2 .pkl/.pth, maskrcnn-benchmark .pth, torchvision .pth, mmdetection
.pth) and applies what is not a rename (detectron2's and mmdetection's background-last class rows,
maskrcnn-benchmark's eps-free FrozenBatchNorm folded into AffineChannel form, class-agnostic box
regression's rows).  detect_format() recognises a loaded file.
Part of models/convert.py.
"""

import copy
import re

import numpy as np

try:  # imported as part of a package
    from .checkpoint_reader import ConvertError, _Derived, _is_tensor, _materialize, _names, _not_tensor, \
        extract_state_dict
except ImportError:  # models/ on sys.path
    from checkpoint_reader import ConvertError, _Derived, _is_tensor, _materialize, _names, _not_tensor, \
        extract_state_dict

BN_PARAMS = ("weight", "bias", "running_mean", "running_var")
AFFINE_PARAMS = ("scale", "shift")
GN_PARAMS = ("weight", "bias")  # GroupNorm: gamma, beta; statistics are computed per sample

# ---------------------------------------------------------------------------------------
# Name mapping: per-source rule tables, shared machinery
# ---------------------------------------------------------------------------------------

class Field:
    """A `{placeholder}` in a source name template.

    regex: what it matches in the source name; canon: the canonical placeholder it fills;
    offset: canonical value = source value + offset (integers).  Formats whose fields are
    not integer shifts (Detectron's branch2a/b/c -> conv1/2/3) pass to_canon/from_canon."""

    def __init__(self, regex, canon, offset=0, to_canon=None, from_canon=None):
        self.regex, self.canon = regex, canon
        self.to_canon = to_canon or (lambda v: str(int(v) + offset) if offset else v)
        self.from_canon = from_canon or (lambda v: str(int(v) - offset) if offset else v)


# Placeholders of canonical templates (used to describe missing canonical names).
_CANON_FIELD_RE = {
    "S": r"[2-5]", "b": r"0|[1-9][0-9]*", "k": r"[123]", "n": r"[1-4]",
    "p": r"weight|bias|running_mean|running_var|scale|shift", "t": r"weight|bias",
    "r": r"|[2-9]|[1-9][0-9]+",  # RPN conv: rpn.conv (the first), rpn.conv2, rpn.conv3, ...
    "c": r"[1-9][0-9]*",  # box head conv: box_head.conv1, conv2, ...
    "f": r"[6-9]|[1-9][0-9]+",  # box head FC: box_head.fc6 (the first), fc7, ...
}

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _template_regex(template, field_re):
    out, pos = [], 0
    for m in _PLACEHOLDER.finditer(template):
        out.append(re.escape(template[pos:m.start()]))
        out.append(f"(?P<{m.group(1)}>{field_re[m.group(1)]})")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out) + r"\Z")


class Rule:
    def __init__(self, source, canonical, fields, legacy=False):
        self.source, self.canonical, self.fields, self.legacy = source, canonical, fields, legacy
        self.used = set(_PLACEHOLDER.findall(source))  # fields may share a canonical placeholder
        self.source_re = _template_regex(source, {k: f.regex for k, f in fields.items()})
        self.canon_re = _template_regex(canonical, _CANON_FIELD_RE)

    def to_canonical(self, name):
        m = self.source_re.match(name)
        if not m:
            return None
        vals = {self.fields[k].canon: self.fields[k].to_canon(v) for k, v in m.groupdict().items()}
        return _PLACEHOLDER.sub(lambda mm: vals[mm.group(1)], self.canonical)

    def to_source(self, canonical_name):
        m = self.canon_re.match(canonical_name)
        if not m:
            return None
        cvals = m.groupdict()
        try:
            vals = {k: f.from_canon(cvals[f.canon]) for k, f in self.fields.items()
                    if f.canon in cvals and k in self.used}
        except ValueError:
            return None
        name = _PLACEHOLDER.sub(lambda mm: vals[mm.group(1)], self.source)
        return name if self.source_re.match(name) else None


class SourceFormat:
    """One model zoo's checkpoint layout.

    containers: the file kinds it comes in ('torch': torch.save(), 'pickle': a .pkl of numpy
    arrays); extract(kind, obj, ignored) -> {source name: tensor}; rules: (source template,
    canonical template) pairs; ignore: (label, regex) pairs of source names that are not
    weights of the model (counted and reported); dynamic_rules(state) -> more Rules that
    depend on the file (Detectron's FPN blob names carry the last block index of a stage);
    transform(mapped) -> mapped: value changes that are not renames; warn(ignored) -> list of
    warnings about ignored tensors; unsupported: (reason, regex) pairs of known layers the
    engine does not run (deformable convs, cascade stages): an unknown name matching one is
    reported with the reason; read_meta(obj) -> FileMeta: what the file says besides its
    weights (class names, the trunk's stride placement), or None."""

    def __init__(self, name, containers, extract, rules, ignore=(), dynamic_rules=None,
                 transform=None, warn=None, unsupported=(), read_meta=None):
        self.name, self.containers, self.extract, self.rules = name, containers, extract, rules
        self.ignore = [(label, re.compile(rx)) for label, rx in ignore]
        self.dynamic_rules, self.transform, self.warn = dynamic_rules, transform, warn
        self.unsupported = [(reason, re.compile(rx)) for reason, rx in unsupported]
        self.read_meta = read_meta

    def bind(self, state):
        """This format with the rules that depend on the names in `state` (first, so that
        source_name() prefers them: torchvision's v2 box head FC over the TwoMLPHead name)."""
        if self.dynamic_rules is None:
            return self
        bound = copy.copy(self)
        bound.rules, bound.dynamic_rules = self.dynamic_rules(state) + self.rules, None
        return bound

    def source_name(self, canonical_name):
        """The (current, non-legacy) source name of a canonical tensor, or None."""
        for r in self.rules:
            if not r.legacy:
                s = r.to_source(canonical_name)
                if s is not None:
                    return s
        return None

    def map_names(self, state, ignored=None):
        """{source name: tensor} -> {canonical name: (source name, tensor)}; unknown names and
        two source names for one canonical tensor are errors.  Ignored names are collected in
        `ignored` ({label: [(name, tensor)]})."""
        out, unknown = {}, []
        for name, t in state.items():
            label = next((lb for lb, rx in self.ignore if rx.search(name)), None)
            if label is not None:
                if ignored is not None:
                    ignored.setdefault(label, []).append((name, t))
                continue
            canon = None
            for r in self.rules:
                canon = r.to_canonical(name)
                if canon is not None:
                    break
            if canon is None:
                unknown.append(name)
            elif canon in out:
                raise ConvertError(f"{out[canon][0]} and {name} both map to {canon}")
            else:
                out[canon] = (name, t)
        for reason, rx in self.unsupported:
            hits = [n for n in unknown if rx.search(n)]
            if hits:
                raise ConvertError(f"unsupported layer for --from {self.name}: {reason}: {_names(hits)}")
        if unknown:
            raise ConvertError(f"unknown tensor name(s) for --from {self.name}: {_names(unknown)}")
        return out


class FileMeta:
    """What a checkpoint says besides its weights.  class_names: the foreground classes in
    training order (no background), or None; stride_in_1x1: True/False when the file's own
    config says where the trunk strides (config backbone.stride_in_1x1), else None; source: where
    each came from, for the report; warnings: what was found but not used."""

    def __init__(self, class_names=None, stride_in_1x1=None, source=None, warnings=()):
        self.class_names, self.stride_in_1x1 = class_names, stride_in_1x1
        self.source, self.warnings = dict(source or {}), list(warnings)


def _enum(regex, canon, table):
    """A Field whose values are renamed through `table` (source value -> canonical value)."""
    back = {v: k for k, v in table.items()}

    def lookup(d, v):
        if v not in d:
            raise ValueError(v)  # Rule.to_source: this canonical name has no such source name
        return d[v]

    return Field(regex, canon, to_canon=lambda v: lookup(table, v), from_canon=lambda v: lookup(back, v))


_BLOCK = Field(r"0|[1-9][0-9]*", "b")
_BN = Field(r"weight|bias|running_mean|running_var", "p")  # BatchNorm, or GroupNorm's weight|bias
_WB = Field(r"weight|bias", "t")
# A 0-based RPN conv index -> the canonical suffix: 0 -> rpn.conv, 1 -> rpn.conv2, 2 -> rpn.conv3.
_RPN_CONV0 = Field(r"0|[1-9][0-9]*", "r", to_canon=lambda v: "" if v == "0" else str(int(v) + 1),
                   from_canon=lambda v: "0" if v == "" else str(int(v) - 1))

# ---- torchvision ------------------------------------------------------------------------

_TV_FIELDS = {
    "L": Field(r"[1-4]", "S", offset=1),  # body.layer1..4 -> res2..5
    "l": Field(r"[0-3]", "S", offset=2),  # fpn blocks 0..3 -> levels 2..5
    "j": Field(r"[0-3]", "n", offset=1),  # mask_head.0..3 -> fcn1..4
    "n": Field(r"[1-4]", "n"),
    "b": _BLOCK,
    "k": Field(r"[123]", "k"),
    "p": _BN,
    "t": _WB,
    "r": _RPN_CONV0,  # rpn.head.conv.0/1 -> rpn.conv, rpn.conv2
    "c": Field(r"0|[1-9][0-9]*", "c", offset=1),  # box_head.0.. (convs) -> conv1..
}

# (torchvision 0.14 state_dict name, canonical name[, legacy]).  Legacy rows: names saved by
# torchvision before the Conv2dNormActivation refactor (0.13), which 0.14 still renames on
# load (FeaturePyramidNetwork / RPNHead / MaskRCNNHeads._load_from_state_dict).
# The v2 layout (maskrcnn_resnet50_fpn_v2, torchvision/models/detection/mask_rcnn.py, or the same
# parts around another trunk): Conv2dNormActivation is Sequential(conv, norm[, ReLU]), so index
# 0 is the conv and 1 its norm (BatchNorm2d, or GroupNorm with weight/bias only) in the FPN
# (BackboneWithFPN(norm_layer=...)), the box head (FastRCNNConvFCHead: convs 0..N-1, Flatten N,
# then Linear/ReLU pairs: the FCs are at N+1, N+3, ...: _torchvision_fc_rules) and the mask head
# (MaskRCNNHeads(norm_layer=...)); RPNHead(conv_depth=2) has rpn.head.conv.{0,1}.0 with bias.
# The trunk's norms keep their names whatever their kind (resnet*(norm_layer=...)).
_TV_TABLE = [
    ("backbone.body.conv1.weight", "backbone.stem.conv.weight"),
    ("backbone.body.bn1.{p}", "backbone.stem.norm.{p}"),
    ("backbone.body.layer{L}.{b}.conv{k}.weight", "backbone.res{S}.{b}.conv{k}.weight"),
    ("backbone.body.layer{L}.{b}.bn{k}.{p}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("backbone.body.layer{L}.{b}.downsample.0.weight", "backbone.res{S}.{b}.shortcut.weight"),
    ("backbone.body.layer{L}.{b}.downsample.1.{p}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("backbone.fpn.inner_blocks.{l}.0.{t}", "fpn.lateral{S}.{t}"),
    ("backbone.fpn.inner_blocks.{l}.1.{p}", "fpn.lateral{S}.norm.{p}"),
    ("backbone.fpn.layer_blocks.{l}.0.{t}", "fpn.output{S}.{t}"),
    ("backbone.fpn.layer_blocks.{l}.1.{p}", "fpn.output{S}.norm.{p}"),
    ("rpn.head.conv.{r}.0.{t}", "rpn.conv{r}.{t}"),
    ("rpn.head.cls_logits.{t}", "rpn.objectness.{t}"),
    ("rpn.head.bbox_pred.{t}", "rpn.deltas.{t}"),
    ("roi_heads.box_head.fc6.{t}", "box_head.fc6.{t}"),
    ("roi_heads.box_head.fc7.{t}", "box_head.fc7.{t}"),
    ("roi_heads.box_head.{c}.0.{t}", "box_head.conv{c}.{t}"),
    ("roi_heads.box_head.{c}.1.{p}", "box_head.conv{c}.norm.{p}"),
    ("roi_heads.box_predictor.cls_score.{t}", "box_predictor.cls_score.{t}"),
    ("roi_heads.box_predictor.bbox_pred.{t}", "box_predictor.bbox_pred.{t}"),
    ("roi_heads.mask_head.{j}.0.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_heads.mask_head.{j}.1.{p}", "mask_head.fcn{n}.norm.{p}"),
    ("roi_heads.mask_predictor.conv5_mask.{t}", "mask_head.deconv.{t}"),
    ("roi_heads.mask_predictor.mask_fcn_logits.{t}", "mask_head.logits.{t}"),
    ("backbone.fpn.inner_blocks.{l}.{t}", "fpn.lateral{S}.{t}", True),
    ("backbone.fpn.layer_blocks.{l}.{t}", "fpn.output{S}.{t}", True),
    ("rpn.head.conv.{t}", "rpn.conv.{t}", True),
    ("roi_heads.mask_head.mask_fcn{n}.{t}", "mask_head.fcn{n}.{t}", True),
]


def _rules(table, fields):
    return [Rule(row[0], row[1], fields, legacy=len(row) > 2 and row[2]) for row in table]


_TV_BOX_CONV = re.compile(r"roi_heads\.box_head\.(0|[1-9][0-9]*)\.0\.weight\Z")
_TV_BOX_INDEX = re.compile(r"roi_heads\.box_head\.(0|[1-9][0-9]*)\.(weight|bias)\Z")


def _torchvision_fc_rules(state):
    """FastRCNNConvFCHead is one Sequential: N conv blocks (0..N-1), Flatten (N), then
    Linear + ReLU per FC, so the i-th FC (from 0) is at N+1+2i: box_head.fc{6+i}.  N is the
    number of conv blocks in `state`.  An index that is no Linear's stays unknown."""
    convs = sum(1 for n in state if _TV_BOX_CONV.match(n))
    rows = []
    for x in sorted({int(m.group(1)) for m in map(_TV_BOX_INDEX.match, state) if m}):
        if x > convs and (x - convs - 1) % 2 == 0:
            rows.append((f"roi_heads.box_head.{x}.{{t}}", f"box_head.fc{6 + (x - convs - 1) // 2}.{{t}}"))
    return _rules(rows, _TV_FIELDS)


def _extract_torch(kind, obj, ignored):
    return extract_state_dict(obj, ignored=ignored)


_IGNORE_BN_COUNTER = ("BatchNorm num_batches_tracked counters", r"(^|\.)num_batches_tracked\Z")

# ---- maskrcnn-benchmark -----------------------------------------------------------------
# Names from facebookresearch/maskrcnn-benchmark: modeling/backbone/resnet.py (StemWithFixedBatchNorm
# conv1/bn1 in `stem`; stages "layer1".."layer4" = res2..res5 (StageSpec index 1..4); Bottleneck
# conv1..3/bn1..3, downsample = Sequential(Conv2d, FrozenBatchNorm2d)), backbone/backbone.py
# (Sequential body/fpn), backbone/fpn.py ("fpn_inner{1..4}"/"fpn_layer{1..4}" for res2..res5),
# rpn/rpn.py RPNHead (conv, cls_logits, bbox_pred), roi_heads/box_head (feature_extractor
# fc6/fc7, predictor cls_score/bbox_pred), roi_heads/mask_head (feature_extractor
# mask_fcn1..4, predictor conv5_mask/mask_fcn_logits).  utils/checkpoint.py saves
# {'model': model.state_dict(), 'optimizer', 'scheduler', 'iteration'}, 'module.'-prefixed
# when trained with DistributedDataParallel.  Classes: 81 rows, background 0 (as Detectron).

_MB_FIELDS = dict(_TV_FIELDS, i=Field(r"[1-4]", "S", offset=1))

# GN configs (configs/gn_baselines/*_gn.yaml): StemWithGN / BottleneckWithGN keep the names
# (bn1..bn3 and downsample.1 are GroupNorms: weight/bias only); with FPN.USE_GN and
# ROI_MASK_HEAD.USE_GN, modeling/make_layers.py's conv_with_kaiming_uniform / make_conv3x3 return
# Sequential(conv without bias, GroupNorm): fpn_inner{i}.0 / .1, mask_fcn{n}.0 / .1.  The
# Xconv1fc box head (FPNXconv1fcFeatureExtractor) is one Sequential `xconvs` of (conv, GN, ReLU)
# per conv, or (conv with bias, ReLU) without GN, then fc6: _mb_xconv_rules.  The 2fc head with
# ROI_BOX_HEAD.USE_GN (FPN2MLPFeatureExtractor: make_fc(use_gn) = Sequential(Linear, GroupNorm),
# fc6.0 / fc6.1) normalises FC outputs, which the engine does not run: refused by name.

_MB_TABLE = [
    ("backbone.body.stem.conv1.weight", "backbone.stem.conv.weight"),
    ("backbone.body.stem.bn1.{p}", "backbone.stem.norm.{p}"),
    ("backbone.body.layer{L}.{b}.conv{k}.weight", "backbone.res{S}.{b}.conv{k}.weight"),
    ("backbone.body.layer{L}.{b}.bn{k}.{p}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("backbone.body.layer{L}.{b}.downsample.0.weight", "backbone.res{S}.{b}.shortcut.weight"),
    ("backbone.body.layer{L}.{b}.downsample.1.{p}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("backbone.fpn.fpn_inner{i}.{t}", "fpn.lateral{S}.{t}"),
    ("backbone.fpn.fpn_layer{i}.{t}", "fpn.output{S}.{t}"),
    ("backbone.fpn.fpn_inner{i}.0.{t}", "fpn.lateral{S}.{t}"),
    ("backbone.fpn.fpn_inner{i}.1.{p}", "fpn.lateral{S}.norm.{p}"),
    ("backbone.fpn.fpn_layer{i}.0.{t}", "fpn.output{S}.{t}"),
    ("backbone.fpn.fpn_layer{i}.1.{p}", "fpn.output{S}.norm.{p}"),
    ("rpn.head.conv.{t}", "rpn.conv.{t}"),
    ("rpn.head.cls_logits.{t}", "rpn.objectness.{t}"),
    ("rpn.head.bbox_pred.{t}", "rpn.deltas.{t}"),
    ("roi_heads.box.feature_extractor.fc6.{t}", "box_head.fc6.{t}"),
    ("roi_heads.box.feature_extractor.fc7.{t}", "box_head.fc7.{t}"),
    ("roi_heads.box.predictor.cls_score.{t}", "box_predictor.cls_score.{t}"),
    ("roi_heads.box.predictor.bbox_pred.{t}", "box_predictor.bbox_pred.{t}"),
    ("roi_heads.mask.feature_extractor.mask_fcn{n}.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_heads.mask.feature_extractor.mask_fcn{n}.0.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_heads.mask.feature_extractor.mask_fcn{n}.1.{p}", "mask_head.fcn{n}.norm.{p}"),
    ("roi_heads.mask.predictor.conv5_mask.{t}", "mask_head.deconv.{t}"),
    ("roi_heads.mask.predictor.mask_fcn_logits.{t}", "mask_head.logits.{t}"),
]


_MB_XCONV = re.compile(r"roi_heads\.box\.feature_extractor\.xconvs\.(0|[1-9][0-9]*)\.(weight|bias)\Z")


def _mb_xconv_rules(state):
    """FPNXconv1fcFeatureExtractor.xconvs: with GroupNorm the k-th conv (from 0) is at 3k and its
    norm at 3k+1; without, the conv (with bias) is at 2k.  GroupNorm is recognised by a 1-D
    `weight` among the indices."""
    found = {}
    for name, t in state.items():
        m = _MB_XCONV.match(name)
        if m:
            found.setdefault(int(m.group(1)), {})[m.group(2)] = len(getattr(t, "shape", ()))
    if not found:
        return []
    gn = any(d.get("weight") == 1 for d in found.values())
    step = 3 if gn else 2
    rows = []
    for x in sorted(found):
        k, r = divmod(x, step)
        if r == 0:
            rows.append((f"roi_heads.box.feature_extractor.xconvs.{x}.{{t}}", f"box_head.conv{k + 1}.{{t}}"))
        elif r == 1 and gn:
            rows.append((f"roi_heads.box.feature_extractor.xconvs.{x}.{{p}}", f"box_head.conv{k + 1}.norm.{{p}}"))
    return _rules(rows, _MB_FIELDS)


def _fold_frozen_bn_no_eps(mapped):
    """maskrcnn-benchmark's FrozenBatchNorm2d (layers/batch_norm.py, master) has no eps:
    scale = weight * running_var.rsqrt(); bias = bias - running_mean * scale; y = x*scale + bias.
    Each complete group is folded here, in float32 with the same operations, into the
    AffineChannel form norm.{scale,shift}, so the file needs no eps (the config's
    backbone.norm_eps does not apply to it).  Incomplete groups are left for check_canonical
    to report."""
    out = dict(mapped)
    groups = sorted({n[: -len(".running_var")] for n in mapped
                     if n.endswith(".norm.running_var") and n.startswith("backbone.")})
    for g in groups:
        names = [f"{g}.{p}" for p in BN_PARAMS]
        if not all(n in mapped for n in names):
            continue
        srcs = [mapped[n] for n in names]
        shape = tuple(srcs[0][1].shape)
        if any(tuple(t.shape) != shape or len(shape) != 1 for _, t in srcs):
            continue  # check_canonical reports the shapes

        def fold(srcs=srcs):
            w, b, m, v = (_materialize(t).astype(np.float32) for _, t in srcs)
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = w * (np.float32(1) / np.sqrt(v))
                shift = b - m * scale
            return scale, shift

        cache = {}

        def part(i, fold=fold, cache=cache):
            if "v" not in cache:
                cache["v"] = fold()
            return cache["v"][i]

        src = srcs[0][0].rsplit(".", 1)[0] + ".{weight,bias,running_mean,running_var} (folded, no eps)"
        for n in names:
            del out[n]
        out[g + ".scale"] = (src, _Derived(shape, lambda part=part: part(0)))
        out[g + ".shift"] = (src, _Derived(shape, lambda part=part: part(1)))
    return out


# ---- detectron2 -------------------------------------------------------------------------
# Names: tests/parity/detectron2_r101_keys.txt (detectron2 modeling/backbone/
# resnet.py BasicStem/BottleneckBlock with FrozenBatchNorm2d `norm`, fpn.py fpn_lateral/
# fpn_output{2..5}, proposal_generator/rpn.py StandardRPNHead, roi_heads/box_head.py fc1/fc2,
# fast_rcnn.py FastRCNNOutputLayers, mask_head.py MaskRCNNConvUpsampleHead).  FrozenBN keeps
# running stats with eps 1e-5 (layers/batch_norm.py): the BatchNorm form is kept and the
# config says backbone.norm_eps 1e-5.

_D2_FIELDS = {"S": Field(r"[2-5]", "S"), "b": _BLOCK, "k": Field(r"[123]", "k"),
              "n": Field(r"[1-4]", "n"), "p": _BN, "t": _WB, "r": _RPN_CONV0,
              "c": Field(r"[1-9][0-9]*", "c"),  # box_head.conv1.. (FastRCNNConvFCHead, from 1)
              "f": Field(r"[1-9][0-9]*", "f", offset=5)}  # box_head.fc1.. -> fc6..

# The norm layers (SyncBN, NaiveSyncBatchNorm, BN: BatchNorm form; GN: weight/bias only) are the
# `norm` attribute of detectron2's Conv2d wrapper, so `<conv>.norm.*` everywhere: the trunk
# (resnet.py), the FPN (fpn.py: lateral/output convs have no bias when normed), the box head
# (box_head.py FastRCNNConvFCHead: conv{k} (bias only without norm), flatten, fc{k}) and the mask
# head (mask_head.py MaskRCNNConvUpsampleHead mask_fcn{k}).  StandardRPNHead (rpn.py) with more
# than one conv holds them in a Sequential `conv` as conv0, conv1, ...; with one it keeps the
# old name `conv` ("backwards compatibility").  Sources: detectron2 configs/new_baselines/*.py,
# configs/common/models/mask_rcnn_fpn.py, configs/Misc/mask_rcnn_R_50_FPN_3x_{syncbn,gn}.yaml.

_D2_TABLE = [
    ("backbone.bottom_up.stem.conv1.weight", "backbone.stem.conv.weight"),
    ("backbone.bottom_up.stem.conv1.norm.{p}", "backbone.stem.norm.{p}"),
    ("backbone.bottom_up.res{S}.{b}.conv{k}.weight", "backbone.res{S}.{b}.conv{k}.weight"),
    ("backbone.bottom_up.res{S}.{b}.conv{k}.norm.{p}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("backbone.bottom_up.res{S}.{b}.shortcut.weight", "backbone.res{S}.{b}.shortcut.weight"),
    ("backbone.bottom_up.res{S}.{b}.shortcut.norm.{p}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("backbone.fpn_lateral{S}.{t}", "fpn.lateral{S}.{t}"),
    ("backbone.fpn_lateral{S}.norm.{p}", "fpn.lateral{S}.norm.{p}"),
    ("backbone.fpn_output{S}.{t}", "fpn.output{S}.{t}"),
    ("backbone.fpn_output{S}.norm.{p}", "fpn.output{S}.norm.{p}"),
    ("proposal_generator.rpn_head.conv.{t}", "rpn.conv.{t}"),
    ("proposal_generator.rpn_head.conv.conv{r}.{t}", "rpn.conv{r}.{t}"),
    ("proposal_generator.rpn_head.objectness_logits.{t}", "rpn.objectness.{t}"),
    ("proposal_generator.rpn_head.anchor_deltas.{t}", "rpn.deltas.{t}"),
    ("roi_heads.box_head.conv{c}.{t}", "box_head.conv{c}.{t}"),
    ("roi_heads.box_head.conv{c}.norm.{p}", "box_head.conv{c}.norm.{p}"),
    ("roi_heads.box_head.fc{f}.{t}", "box_head.fc{f}.{t}"),
    ("roi_heads.box_predictor.cls_score.{t}", "box_predictor.cls_score.{t}"),
    ("roi_heads.box_predictor.bbox_pred.{t}", "box_predictor.bbox_pred.{t}"),
    ("roi_heads.mask_head.mask_fcn{n}.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_heads.mask_head.mask_fcn{n}.norm.{p}", "mask_head.fcn{n}.norm.{p}"),
    ("roi_heads.mask_head.deconv.{t}", "mask_head.deconv.{t}"),
    ("roi_heads.mask_head.predictor.{t}", "mask_head.logits.{t}"),
]


def _background_last_to_ours(zoo):
    """The transform of a zoo whose classifier keeps background LAST (detectron2's
    FastRCNNOutputLayers: softmax over K = 80+1 rows, background = index K-1; mmdetection's
    BBoxHead fc_cls likewise) and whose class-specific bbox_pred / mask predictor have rows for the
    foreground classes only (4*80 deltas, row 4c+j = class c; 80 mask channels).  Our layout has
    background at row/channel 0: cls_score rows are rotated (row K-1 -> 0, rows 0..K-2 -> 1..K-1);
    bbox_pred gets 4 zero rows in front (the background deltas, never used); mask logits get a zero
    channel 0 (never used).  A class-agnostic head (detectron2 CLS_AGNOSTIC_BBOX_REG /
    CLS_AGNOSTIC_MASK, mmdetection reg_class_agnostic / class_agnostic: 4 rows, 1 channel) is kept
    as it is: our agnostic layout has exactly those rows.  With one foreground class the two forms
    have the same shape; it is treated as class-specific (the same numbers)."""

    def transform(mapped):
        out = dict(mapped)
        cls = mapped.get("box_predictor.cls_score.weight")
        if cls is None or len(cls[1].shape) != 2:
            return out  # check_canonical reports it
        K = cls[1].shape[0]
        specific = {}
        for name, per, words in (("box_predictor.bbox_pred", 4, "4 deltas"), ("mask_head.logits", 1, "1 mask")):
            w = mapped.get(name + ".weight")
            if w is None or len(w[1].shape) < 1:
                continue
            rows = w[1].shape[0]
            if rows == per * (K - 1):
                specific[name] = per
            elif rows != per:
                raise ConvertError(
                    f"{w[0]} has {rows} rows; {zoo} stores {words} per foreground class ({per * (K - 1)}), or "
                    f"{per} for a class-agnostic head, and {cls[0]} has {K} rows ({K - 1} classes + 1 background)")

        def rotate(t):
            def f():
                a = _materialize(t).astype(np.float32)
                return np.concatenate([a[-1:], a[:-1]])
            return f

        def pad(t, n):
            return lambda: np.concatenate([np.zeros((n,) + tuple(t.shape[1:]), np.float32),
                                           _materialize(t).astype(np.float32)])

        for p in ("weight", "bias"):
            e = mapped.get(f"box_predictor.cls_score.{p}")
            if e is not None and len(e[1].shape) != 0:
                out[f"box_predictor.cls_score.{p}"] = (f"{e[0]} (rotated: background row moved from last to 0)",
                                                       _Derived(e[1].shape, rotate(e[1])))
            for name, n in specific.items():
                e = mapped.get(f"{name}.{p}")
                if e is None or len(e[1].shape) == 0:
                    continue
                how = "4 zero background rows inserted at 0" if n == 4 else "zero background channel inserted at 0"
                src, t = e
                out[f"{name}.{p}"] = (f"{src} ({how})", _Derived((t.shape[0] + n,) + tuple(t.shape[1:]), pad(t, n)))
        return out

    return transform


def _background_first_agnostic(zoo):
    """Detectron and maskrcnn-benchmark with CLS_AGNOSTIC_BBOX_REG regress 2 "classes",
    background and foreground: bbox_pred has 8 rows, and inference keeps the last 4
    (Detectron core/test.py `box_deltas[:, -4:]`, maskrcnn-benchmark box_head/inference.py
    `box_regression[:, -4:]`).  Our agnostic layout is those 4 rows.  With one foreground class
    (K = 2) 8 rows are the class-specific layout as well: kept as they are (the same numbers)."""

    def transform(mapped):
        out = dict(mapped)
        cls = mapped.get("box_predictor.cls_score.weight")
        w = mapped.get("box_predictor.bbox_pred.weight")
        if cls is None or w is None or len(cls[1].shape) != 2 or len(w[1].shape) < 1:
            return out
        if w[1].shape[0] != 8 or cls[1].shape[0] == 2:
            return out
        for p in ("weight", "bias"):
            e = mapped.get(f"box_predictor.bbox_pred.{p}")
            if e is None or len(e[1].shape) == 0 or e[1].shape[0] != 8:
                continue
            src, t = e
            out[f"box_predictor.bbox_pred.{p}"] = (
                f"{src} (class-agnostic: {zoo}'s foreground rows 4..7)",
                _Derived((4,) + tuple(t.shape[1:]), lambda t=t: _materialize(t).astype(np.float32)[4:8]))
        return out

    return transform


def _compose(*fns):
    def transform(mapped):
        for f in fns:
            mapped = f(mapped)
        return mapped
    return transform


_d2_classes_to_ours = _background_last_to_ours("detectron2")


def _extract_d2(kind, obj, ignored):
    if kind == "pickle":  # model zoo .pkl: {'model': {name: ndarray}, '__author__': ..., ...}
        if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
            raise ConvertError("a .pkl without a 'model' dict (not a detectron2 model zoo file)")
        return extract_state_dict(obj, wrapper_keys=("model",), ignored=ignored)
    return extract_state_dict(obj, ignored=ignored)  # .pth: {'model', 'optimizer', 'scheduler', 'iteration'}


# ---- Detectron (Caffe2) ---------------------------------------------------------------------
# detectron/utils/net.py save_model_to_weights_file: pickle.dump(dict(blobs=..., cfg=yaml),
# protocol 2, Python 2) of every param, its *_momentum, and the blobs of the ImageNet init file
# the model never used ("preserved": fc1000_*, zero biases of bias-less convs that
# tools/pickle_caffe_blobs.py add_missing_biases created).  Blob names: modeling/ResNet.py
# (conv1 + res_conv1_bn; res{S}_{b}_branch2{a,b,c} + _bn, res{S}_0_branch1 + _bn;
# AffineChannel _bn_s/_bn_b), modeling/FPN.py (fpn_inner_res5_{last}_sum, fpn_inner_res{S}_
# {last}_sum_lateral, fpn_res{S}_{last}_sum; conv_rpn_fpn2/rpn_cls_logits_fpn2/rpn_bbox_pred_
# fpn2 shared by all levels), fast_rcnn_heads.py (fc6, fc7, cls_score, bbox_pred),
# mask_rcnn_heads.py (_[mask]_fcn1..4, conv5_mask, mask_fcn_logits).  Classes: 81 rows,
# background 0, bbox_pred 4*81 rows: our layout already.

_DT_FIELDS = {
    "S": Field(r"[2-5]", "S"), "b": _BLOCK, "n": Field(r"[1-4]", "n"),
    "x": _enum(r"[abc]", "k", {"a": "1", "b": "2", "c": "3"}),  # branch2a/b/c -> conv1/2/3
    "q": _enum(r"s|b", "p", {"s": "scale", "b": "shift"}),  # AffineChannel _bn_s/_bn_b
    "g": _enum(r"s|b", "p", {"s": "weight", "b": "bias"}),  # GroupNorm gamma/beta _gn_s/_gn_b
    "t": _enum(r"w|b", "t", {"w": "weight", "b": "bias"}),
    "c": Field(r"[1-9][0-9]*", "c"),  # head_conv1.. (add_roi_Xconv1fc_gn_head)
}

# GN models (configs/04_2018_gn_baselines/e2e_mask_rcnn_R-{50,101}-FPN_{2x,3x}_gn.yaml): every
# ConvGN (modeling/detector.py) is a bias-less conv `<prefix>_w` followed by SpatialGN named
# `<prefix>_gn`, whose learnable gamma/beta are `<prefix>_gn_s` / `<prefix>_gn_b` (GroupNorm's
# scale and bias: NOT a folded BatchNorm, so canonical norm.weight/norm.bias, GroupNorm form).
# ResNet.py basic_gn_stem (conv1), bottleneck_gn_transformation (res{S}_{b}_branch2{a,b,c}),
# basic_gn_shortcut (res{S}_0_branch1); FPN.py with FPN.USE_GN (the same prefixes as without:
# _detectron_fpn_rules); fast_rcnn_heads.py add_roi_Xconv1fc_gn_head (head_conv1..N, then fc6
# only); mask_rcnn_heads.py mask_rcnn_fcn_head_v1upXconvs_gn (`_mask_fcn{i}`, not `_[mask]_`).

_DT_TABLE = [
    ("conv1_w", "backbone.stem.conv.weight"),
    ("res_conv1_bn_{q}", "backbone.stem.norm.{p}"),
    ("res{S}_{b}_branch2{x}_w", "backbone.res{S}.{b}.conv{k}.weight"),
    ("res{S}_{b}_branch2{x}_bn_{q}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("res{S}_{b}_branch1_w", "backbone.res{S}.{b}.shortcut.weight"),
    ("res{S}_{b}_branch1_bn_{q}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("conv1_gn_{g}", "backbone.stem.norm.{p}"),
    ("res{S}_{b}_branch2{x}_gn_{g}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("res{S}_{b}_branch1_gn_{g}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("conv_rpn_fpn2_{t}", "rpn.conv.{t}"),
    ("rpn_cls_logits_fpn2_{t}", "rpn.objectness.{t}"),
    ("rpn_bbox_pred_fpn2_{t}", "rpn.deltas.{t}"),
    ("head_conv{c}_{t}", "box_head.conv{c}.{t}"),
    ("head_conv{c}_gn_{g}", "box_head.conv{c}.norm.{p}"),
    ("fc6_{t}", "box_head.fc6.{t}"),
    ("fc7_{t}", "box_head.fc7.{t}"),
    ("cls_score_{t}", "box_predictor.cls_score.{t}"),
    ("bbox_pred_{t}", "box_predictor.bbox_pred.{t}"),
    ("_[mask]_fcn{n}_{t}", "mask_head.fcn{n}.{t}"),
    ("_mask_fcn{n}_{t}", "mask_head.fcn{n}.{t}"),
    ("_mask_fcn{n}_gn_{g}", "mask_head.fcn{n}.norm.{p}"),
    ("conv5_mask_{t}", "mask_head.deconv.{t}"),
    ("mask_fcn_logits_{t}", "mask_head.logits.{t}"),
]

_DT_BLOCK = re.compile(r"res([2-5])_(0|[1-9][0-9]*)_branch2a_w\Z")
_DT_UNUSED_BIAS = "zero biases of bias-less backbone convs (Detectron's add_missing_biases)"


def _detectron_fpn_rules(state):
    """FPN blobs are named after the last block of each stage (fpn_inner_res4_22_sum_lateral
    for R-101, res4_5 for R-50): rules for the block counts found in `state`."""
    last = {}
    for name in state:
        m = _DT_BLOCK.match(name)
        if m:
            last[int(m.group(1))] = max(last.get(int(m.group(1)), 0), int(m.group(2)))
    rows = []
    for S, b in sorted(last.items()):
        inner = f"fpn_inner_res{S}_{b}_sum" if S == 5 else f"fpn_inner_res{S}_{b}_sum_lateral"
        rows += [(inner + "_{t}", f"fpn.lateral{S}.{{t}}"), (f"fpn_res{S}_{b}_sum_{{t}}", f"fpn.output{S}.{{t}}"),
                 (inner + "_gn_{g}", f"fpn.lateral{S}.norm.{{p}}"),
                 (f"fpn_res{S}_{b}_sum_gn_{{g}}", f"fpn.output{S}.norm.{{p}}")]
    return _rules(rows, _DT_FIELDS)


def _detectron_warn(ignored):
    """Detectron's convs are no_bias (ResNet.py ConvAffine), so it never used these blobs; say so
    when one is not zero, since ignoring it then changes nothing Detectron computed but the file
    is unusual."""
    out = []
    for name, t in ignored.get(_DT_UNUSED_BIAS, []):
        a = _materialize(t)
        if a.size and np.any(a != 0):
            out.append(f"ignored blob {name} is not zero (max |b| = {float(np.max(np.abs(a))):.3g}); "
                       "Detectron never applies it (its backbone convs have no bias)")
    return out


def _extract_detectron(kind, obj, ignored):
    if not isinstance(obj, dict):
        raise ConvertError(f"top-level object is a {type(obj).__name__}, not Detectron's {{'blobs': ...}}")
    if "blobs" in obj:  # model_final.pkl; a dict of blobs alone is the older layout
        if not isinstance(obj["blobs"], dict):
            raise ConvertError("'blobs' is not a dict")
        ignored.extend(str(k) for k in obj if k != "blobs")
        obj = obj["blobs"]
    bad = [_not_tensor(k, v) for k, v in obj.items() if not isinstance(k, str) or not _is_tensor(v)]
    if bad:
        raise ConvertError(f"blobs that are not arrays: {_names(bad)}")
    if not obj:
        raise ConvertError("no blobs")
    return dict(obj)


# ---- mmdetection ----------------------------------------------------------------------------
# shared/reference/zoo_variants.md §3c; mmdet 3.3.0 / 2.28.2 models/backbones/resnet.py (ResNet:
# conv1/bn1, layer1..4 of Bottleneck conv1..3/bn1..3, downsample = Sequential(conv, norm): torchvision's
# layout), necks/fpn.py (lateral_convs / fpn_convs: ConvModule, so `.conv` and, with a norm_cfg, `.bn`
# and no conv bias: mmcv cnn/bricks/conv_module.py, norm.py infer_abbr), dense_heads/rpn_head.py
# (rpn_conv; with num_convs > 1 a Sequential of ConvModules without norm, rpn_conv.{i}.conv;
# rpn_cls with A sigmoid outputs; rpn_reg 4A), roi_heads/bbox_heads/convfc_bbox_head.py
# (shared_convs.{i} ConvModules, shared_fcs.{i} Linear; Shared2FCBBoxHead = 0 convs + 2 FCs,
# Shared4Conv1FCBBoxHead = 4 convs + 1 FC), bbox_head.py (fc_cls: num_classes + 1 rows, background
# LAST; fc_reg: 4 * num_classes rows, or 4 with reg_class_agnostic), mask_heads/fcn_mask_head.py
# (convs.{i} ConvModules, upsample = ConvTranspose2d, conv_logits: num_classes channels, or 1 with
# class_agnostic).  Files: tools/model_converters/publish_model.py keeps {'meta', 'state_dict'};
# training checkpoints add optimizer, message_hub, param_schedulers (3.x) or optimizer (2.x).
# The trunk's BatchNorms are real BN (norm_eval, eps 1e-5): the BatchNorm form is kept, config
# backbone.norm_eps 1e-5.  style='pytorch' strides in the 3x3 conv, style='caffe' in the 1x1,
# with the same names: only the file's config text (meta 'cfg' in 3.x, 'config' in 2.x) says which.

_MM_FIELDS = {
    "L": Field(r"[1-4]", "S", offset=1),  # layer1..4 -> res2..5
    "l": Field(r"[0-3]", "S", offset=2),  # lateral_convs / fpn_convs 0..3 -> levels 2..5
    "b": _BLOCK, "k": Field(r"[123]", "k"), "p": _BN, "t": _WB,
    "r": _RPN_CONV0,  # rpn_conv.0 / .1 -> rpn.conv, rpn.conv2
    "c": Field(r"0|[1-9][0-9]*", "c", offset=1),  # shared_convs.0.. -> box_head.conv1..
    "f": Field(r"0|[1-9][0-9]*", "f", offset=6),  # shared_fcs.0.. -> box_head.fc6..
    "j": Field(r"[0-3]", "n", offset=1),  # mask_head.convs.0..3 -> mask_head.fcn1..4
}

_MM_TABLE = [
    ("backbone.conv1.weight", "backbone.stem.conv.weight"),
    ("backbone.bn1.{p}", "backbone.stem.norm.{p}"),
    ("backbone.layer{L}.{b}.conv{k}.weight", "backbone.res{S}.{b}.conv{k}.weight"),
    ("backbone.layer{L}.{b}.bn{k}.{p}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("backbone.layer{L}.{b}.downsample.0.weight", "backbone.res{S}.{b}.shortcut.weight"),
    ("backbone.layer{L}.{b}.downsample.1.{p}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("neck.lateral_convs.{l}.conv.{t}", "fpn.lateral{S}.{t}"),
    ("neck.lateral_convs.{l}.bn.{p}", "fpn.lateral{S}.norm.{p}"),
    ("neck.fpn_convs.{l}.conv.{t}", "fpn.output{S}.{t}"),
    ("neck.fpn_convs.{l}.bn.{p}", "fpn.output{S}.norm.{p}"),
    ("rpn_head.rpn_conv.{t}", "rpn.conv.{t}"),
    ("rpn_head.rpn_conv.{r}.conv.{t}", "rpn.conv{r}.{t}"),
    ("rpn_head.rpn_cls.{t}", "rpn.objectness.{t}"),
    ("rpn_head.rpn_reg.{t}", "rpn.deltas.{t}"),
    ("roi_head.bbox_head.shared_convs.{c}.conv.{t}", "box_head.conv{c}.{t}"),
    ("roi_head.bbox_head.shared_convs.{c}.bn.{p}", "box_head.conv{c}.norm.{p}"),
    ("roi_head.bbox_head.shared_fcs.{f}.{t}", "box_head.fc{f}.{t}"),
    ("roi_head.bbox_head.fc_cls.{t}", "box_predictor.cls_score.{t}"),
    ("roi_head.bbox_head.fc_reg.{t}", "box_predictor.bbox_pred.{t}"),
    ("roi_head.mask_head.convs.{j}.conv.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_head.mask_head.convs.{j}.bn.{p}", "mask_head.fcn{n}.norm.{p}"),
    ("roi_head.mask_head.upsample.{t}", "mask_head.deconv.{t}"),
    ("roi_head.mask_head.conv_logits.{t}", "mask_head.logits.{t}"),
]

_MM_UNSUPPORTED = [
    ("a cascade of heads (CascadeRoIHead / HybridTaskCascadeRoIHead: roi_head.bbox_head.<stage>, "
     "roi_head.mask_head.<stage>)", r"\Aroi_head\.(bbox|mask)_head\.[0-9]+\."),
    ("deformable convolution offsets (DCN / DCNv2: conv_offset)", r"(\A|\.)conv_offset\."),
    ("GroupNorm (mmdetection's gn and gn+ws configs): a weight-standardised ConvWS conv has the "
     "names of a plain conv, so the weights cannot say which of the two they need",
     r"(\A|\.)gn[0-9]*\."),
    ("FPN extra convs on P6/P7 (add_extra_convs; the engine's P6 is P5 max-pooled)",
     r"\Aneck\.fpn_convs\.[4-9]\."),
    ("separate classification and regression branches of a ConvFCBBoxHead (cls_convs, cls_fcs, "
     "reg_convs, reg_fcs)", r"\Aroi_head\.bbox_head\.(cls|reg)_(convs|fcs)\."),
    ("the deep stem of ResNetV1d (backbone.stem.*)", r"\Abackbone\.stem\."),
]


def _mmdet_rpn_check(mapped):
    """rpn_cls has one output per anchor with mmdet's default sigmoid RPN (loss_cls use_sigmoid=True)
    and two (foreground, background) with a softmax RPN, which the engine does not score."""
    cls, reg = mapped.get("rpn.objectness.weight"), mapped.get("rpn.deltas.weight")
    if cls and reg and len(cls[1].shape) >= 1 and len(reg[1].shape) >= 1 and reg[1].shape[0] % 4 == 0 \
            and cls[1].shape[0] == 2 * (reg[1].shape[0] // 4) and cls[1].shape[0] != reg[1].shape[0] // 4:
        raise ConvertError(f"unsupported layer for --from mmdetection: {cls[0]} has 2 outputs per anchor "
                           f"({cls[1].shape[0]} for the {reg[1].shape[0] // 4} anchors of {reg[0]}): a softmax RPN "
                           "(rpn_head loss_cls use_sigmoid=False); the engine scores one sigmoid per anchor")
    return mapped


_MM_STYLE = re.compile(r"""\bstyle\s*=\s*['"](pytorch|caffe)['"]""")


def _mmdet_names(v):
    return list(v) if isinstance(v, (list, tuple)) and v and all(isinstance(c, str) for c in v) else None


def _read_mmdet_meta(obj):
    """Class names from meta['dataset_meta']['classes'] (mmdet 3.x) or meta['CLASSES'] (2.x); the
    trunk's style from the config text mmdet stores in meta['cfg'] (3.x) or meta['config'] (2.x)."""
    meta = obj.get("meta") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return FileMeta()
    names, source, warnings = None, {}, []
    ds = meta.get("dataset_meta")
    for where, v in (("meta['dataset_meta']['classes']", ds.get("classes") if isinstance(ds, dict) else None),
                     ("meta['CLASSES']", meta.get("CLASSES"))):
        if v is None:
            continue
        names = _mmdet_names(v)
        if names is None:
            warnings.append(f"{where} is not a list of class names; not recorded")
            continue
        source["class_names"] = where
        break
    stride = None
    for key in ("cfg", "config"):
        text = meta.get(key)
        if isinstance(text, str):
            styles = set(_MM_STYLE.findall(text))
            if len(styles) == 1:
                stride = styles == {"caffe"}
                source["stride_in_1x1"] = f"meta['{key}'] style='{styles.pop()}'"
            elif len(styles) > 1:
                warnings.append(f"meta['{key}'] names both ResNet styles; where the trunk strides is not recorded")
            break
    return FileMeta(names, stride, source, warnings)


SOURCE_FORMATS = {
    "torchvision": SourceFormat(
        "torchvision", ("torch",), _extract_torch, _rules(_TV_TABLE, _TV_FIELDS),
        ignore=[_IGNORE_BN_COUNTER], dynamic_rules=_torchvision_fc_rules),
    "maskrcnn-benchmark": SourceFormat(
        "maskrcnn-benchmark", ("torch",), _extract_torch, _rules(_MB_TABLE, _MB_FIELDS),
        ignore=[("anchor buffers rpn.anchor_generator.cell_anchors.* (the config's anchors)",
                 r"\Arpn\.anchor_generator\.cell_anchors\.[0-9]+\Z"), _IGNORE_BN_COUNTER],
        dynamic_rules=_mb_xconv_rules,
        transform=_compose(_fold_frozen_bn_no_eps, _background_first_agnostic("maskrcnn-benchmark")),
        unsupported=[("GroupNorm after the box head's FCs (FPN2MLPFeatureExtractor with ROI_BOX_HEAD.USE_GN; "
                      "use the Xconv1fc GN head)", r"\Aroi_heads\.box\.feature_extractor\.fc[67]\.[01]\.")]),
    "detectron2": SourceFormat(
        "detectron2", ("pickle", "torch"), _extract_d2, _rules(_D2_TABLE, _D2_FIELDS),
        ignore=[("pixel_mean/pixel_std buffers (config keys input.pixel_*)", r"\Apixel_(mean|std)\Z"),
                ("anchor buffers (the config's anchors)", r"\Aproposal_generator\.anchor_generator\.cell_anchors\.[0-9]+\Z"),
                _IGNORE_BN_COUNTER],
        transform=_d2_classes_to_ours,
        unsupported=[("deformable convolution offsets (DeformBottleneckBlock conv2_offset)",
                      r"\Abackbone\.bottom_up\.res[2-5]\.[0-9]+\.conv2_offset\."),
                     ("a cascade of box heads (CascadeROIHeads: box_head.<stage>, box_predictor.<stage>)",
                      r"\Aroi_heads\.box_(head|predictor)\.[0-9]+\.")]),
    "detectron": SourceFormat(
        "detectron", ("pickle",), _extract_detectron, _rules(_DT_TABLE, _DT_FIELDS),
        ignore=[("optimizer momentum blobs *_momentum", r"_momentum\Z"),
                ("ImageNet classifier blobs fc1000_*", r"\Afc1000_[wb]\Z"),
                (_DT_UNUSED_BIAS, r"\A(conv1|res[2-5]_[0-9]+_branch(1|2[abc]))_b\Z")],
        dynamic_rules=_detectron_fpn_rules, warn=_detectron_warn, transform=_background_first_agnostic("Detectron")),
    "mmdetection": SourceFormat(
        "mmdetection", ("torch",), _extract_torch, _rules(_MM_TABLE, _MM_FIELDS), ignore=[_IGNORE_BN_COUNTER],
        transform=_compose(_mmdet_rpn_check, _background_last_to_ours("mmdetection")),
        unsupported=_MM_UNSUPPORTED, read_meta=_read_mmdet_meta),
}


def detect_format(kind, obj):
    """The source format of a loaded checkpoint, from its structure and tensor names."""
    if kind == "pickle":
        if isinstance(obj, dict) and "blobs" in obj:
            return "detectron"
        if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
            return "detectron2"
        if isinstance(obj, dict) and "conv1_w" in obj:
            return "detectron"
        raise ConvertError("a pickle that is neither Detectron's {'blobs': ...} nor detectron2's "
                           "{'model': ...} (use --from to say which it is)")
    names = list(extract_state_dict(obj))
    for prefixes, fmt in ((("backbone.bottom_up.", "proposal_generator."), "detectron2"),
                          (("backbone.body.stem.", "roi_heads.box.", "roi_heads.mask."), "maskrcnn-benchmark"),
                          (("neck.lateral_convs.", "rpn_head.", "roi_head."), "mmdetection"),
                          (("backbone.body.",), "torchvision")):
        if any(n.startswith(prefixes) for n in names):
            return fmt
    return "torchvision"  # the historical default: its unknown-name error lists the names
