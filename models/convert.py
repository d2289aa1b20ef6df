#!/usr/bin/python3
"""Convert a Mask R-CNN checkpoint to the canonical `detect` safetensors file.

    convert.py SRC DST.safetensors [--from detectron|detectron2|maskrcnn-benchmark|mmdetection|torchvision]
                                   [--dtype f32|f16] [-q]
                                   [--train-config FILE [--config-out PATH] [--class-names FILE]]

SRC is read without importing torch or running any code from the file: a torch.save() file
(zip format, or the legacy pre-1.6 pickle stream) or a plain pickle of numpy arrays
(Detectron / detectron2 .pkl) goes through one restricted unpickler whose allow-listed globals
are convert.py's own stand-ins and whose every other global is an inert placeholder.  The
source format is detected from the file's structure and names (or forced with --from).
Tensor names are mapped to our canonical scheme (models/README.md) through a per-format rule
table, format-specific value changes are applied (detectron2's and mmdetection's background-last
class rows, maskrcnn-benchmark's eps-free FrozenBatchNorm folded into AffineChannel form), the result is
checked (no unknown names, nothing missing, consistent shapes; depth, widths and groups
inferred from shapes; the architecture read from the names: each part's norm form, RPN convs,
box head convs and FCs) and written with safetensors_io.save(), with metadata naming the
source, classes, architecture and the config to use.

On any problem: one line `convert.py: SRC: <problem>` on stderr, exit status 2, and
DST is not created (the writer renames a finished temporary file into place).

--train-config FILE also writes DST's `detect` config (DST with .json, or --config-out) from the
config the model was trained with (models/train_config.py): it is read before the conversion
(a refusal names FILE and the key, and nothing is written), the architecture the weights show
(depth, widths, norms, head shapes, classes, anchors) must be the one it describes (else a
refusal naming both, before DST is written), and the config is written after DST.

Reading: checkpoint_reader.py; the zoos' layouts: zoo_formats.py (adding a source format:
models/README.md).
"""

import argparse
import collections
import hashlib
import json
import math
import os
import re
import sys

try:
    import numpy as np
except ImportError:  # e.g. a python3 without numpy earlier on PATH
    print(f"convert.py: needs numpy, which {sys.executable} lacks (use /usr/bin/python3)", file=sys.stderr)
    sys.exit(2)

try:  # imported as part of a package
    from . import checkpoint_reader, coco_classes, safetensors_io, train_config, zoo_formats
except ImportError:  # run as a script, or imported with models/ on sys.path
    import checkpoint_reader
    import coco_classes
    import safetensors_io
    import train_config
    import zoo_formats

# Used below, and by tests/ and tests/fuzz/ as convert.<name> (convert.py is the entry point).
ConvertError = checkpoint_reader.ConvertError
TensorRef = checkpoint_reader.TensorRef
_ALLOWED_GLOBALS = checkpoint_reader._ALLOWED_GLOBALS
_ArrayBuilder = checkpoint_reader._ArrayBuilder
_DType = checkpoint_reader._DType
_LEGACY_MAGIC = checkpoint_reader._LEGACY_MAGIC
_Opaque = checkpoint_reader._Opaque
_OrderedDict = checkpoint_reader._OrderedDict
_RestrictedUnpickler = checkpoint_reader._RestrictedUnpickler
_STORAGE_TYPES = checkpoint_reader._STORAGE_TYPES
_Storage = checkpoint_reader._Storage
_StorageType = checkpoint_reader._StorageType
_materialize = checkpoint_reader._materialize
_names = checkpoint_reader._names
extract_state_dict = checkpoint_reader.extract_state_dict
load_checkpoint = checkpoint_reader.load_checkpoint
read_pickle_checkpoint = checkpoint_reader.read_pickle_checkpoint
read_pickle_checkpoint_bytes = checkpoint_reader.read_pickle_checkpoint_bytes
read_torch_checkpoint = checkpoint_reader.read_torch_checkpoint
AFFINE_PARAMS = zoo_formats.AFFINE_PARAMS
BN_PARAMS = zoo_formats.BN_PARAMS
SOURCE_FORMATS = zoo_formats.SOURCE_FORMATS
SourceFormat = zoo_formats.SourceFormat
Field = zoo_formats.Field
Rule = zoo_formats.Rule
detect_format = zoo_formats.detect_format

FORMAT = "detect-maskrcnn"
FORMAT_VERSION = "1"


# ---------------------------------------------------------------------------------------
# The canonical model: required names, shapes, depth
# ---------------------------------------------------------------------------------------

DEPTHS = {(3, 4, 6, 3): 50, (3, 4, 23, 3): 101, (3, 8, 36, 3): 152}
_BLOCK_RE = re.compile(r"backbone\.res([2-5])\.(0|[1-9][0-9]*)\.")
_NORM_RE = re.compile(r"(.+\.norm)\.(weight|bias|running_mean|running_var|scale|shift)\Z")
_RPN_CONV_RE = re.compile(r"rpn\.conv([2-9]|[1-9][0-9]+)?\.")
_BOX_CONV_RE = re.compile(r"box_head\.conv([1-9][0-9]*)\.")
_BOX_FC_RE = re.compile(r"box_head\.fc([6-9]|[1-9][0-9]+)\.")
GN_PARAMS = zoo_formats.GN_PARAMS

# A norm's form, from the parameters it has (models/README.md "Norms").
NORM_FORMS = {"batchnorm": BN_PARAMS, "affine": AFFINE_PARAMS, "group_norm": GN_PARAMS}
_FORM_WORDS = {"batchnorm": "BatchNorm (weight, bias, running_mean, running_var)",
               "affine": "AffineChannel (scale, shift)",
               "group_norm": "GroupNorm (weight, bias; no running statistics)"}
# The parts of the model whose norms share one form, by canonical name prefix.
PARTS = (("backbone.", "trunk"), ("fpn.", "FPN"), ("rpn.", "RPN head"), ("box_head.", "box head"),
         ("mask_head.", "mask head"))


def _norm_form(params):
    ps = set(params)
    if ps & set(AFFINE_PARAMS):
        return "mixed" if ps & set(BN_PARAMS) else "affine"
    if ps & {"running_mean", "running_var"}:
        return "batchnorm"
    return "group_norm"


def _part_of(name):
    return next((part for prefix, part in PARTS if name.startswith(prefix)), None)


def _norm_forms(shapes, describe):
    """{part: form or None}: the one norm form of each part.  Raises ConvertError naming a norm
    whose form differs from the rest of its part, or an AffineChannel norm outside the trunk."""
    norms = collections.OrderedDict()
    for name in shapes:
        m = _NORM_RE.match(name)
        if m:
            norms.setdefault(m.group(1), []).append(m.group(2))
    by_part = collections.OrderedDict()
    for prefix, params in norms.items():
        form = _norm_form(params)
        if form != "mixed":  # _Checker reports it with the norm's shapes
            by_part.setdefault(_part_of(prefix), []).append((prefix, params, form))
    forms = {}
    for part, items in by_part.items():
        count = collections.Counter(f for _, _, f in items)
        major = max(count, key=lambda f: (count[f], -[f2 for _, _, f2 in items].index(f)))
        if len(count) > 1:
            odd = next(it for it in items if it[2] != major)
            like = next(it for it in items if it[2] == major)
            raise ConvertError(
                f"{part} norms of mixed forms: {describe(odd[0] + '.' + odd[1][0])} is "
                f"{_FORM_WORDS[odd[2]]}, while {count[major]} other {part} norm(s), e.g. "
                f"{describe(like[0] + '.' + like[1][0])}, are {_FORM_WORDS[major]}; one form per part")
        if major == "affine" and part != "trunk":
            raise ConvertError(f"{describe(items[0][0] + '.' + items[0][1][0])}: AffineChannel norms "
                               f"(scale, shift) are supported in the trunk only, not in the {part}")
        forms[part] = major
    return forms


class _Checker:
    """Builds the expected canonical name list (in file order) while checking shapes."""

    def __init__(self, shapes, describe, forms):
        self.shapes, self.describe, self.forms = shapes, describe, forms
        self.order, self.required, self.bad, self.no_norm = [], [], [], []

    def _note(self, name, required):
        self.order.append(name)
        if required:
            self.required.append(name)

    def has(self, name):
        return name in self.shapes

    def shape(self, name):
        return self.shapes.get(name)

    def expect(self, name, shape, required=True):
        """shape: tuple of ints or None entries (None = inferred, any value)."""
        self._note(name, required)
        got = self.shapes.get(name)
        if got is None:
            return None
        ok = len(got) == len(shape) and all(e is None or e == g for e, g in zip(shape, got))
        if not ok:
            want = "[" + ",".join("?" if e is None else str(e) for e in shape) + "]"
            self.bad.append(f"{self.describe(name)} has shape {list(got)}, expected {want}")
            return None
        return got

    def conv_unit(self, conv, norm, shape, part):
        """conv weight, its bias and its norm.  Trunk convs always have a norm (BatchNorm,
        AffineChannel or GroupNorm form: the part's) and an optional bias; elsewhere either every
        conv of the part has a norm (then the bias is optional) or none has (bias required)."""
        got = self.expect(conv + ".weight", shape)
        c = got[0] if got else shape[0]
        form = self.forms.get(part)
        normed = form is not None or part == "trunk"
        self.expect(conv + ".bias", (c,), required=not normed)
        if not normed:
            return got
        params = [p for p in BN_PARAMS + AFFINE_PARAMS if self.has(f"{norm}.{p}")]
        own = _norm_form(params) if params else None
        if own == "mixed":
            self.bad.append(f"{norm} mixes BatchNorm and AffineChannel parameters")
        elif own is None and part != "trunk":
            self.no_norm.append((conv, norm, part, form))
        form = own if own in NORM_FORMS else (form or "batchnorm")
        for p in NORM_FORMS[form] if own != "mixed" else BN_PARAMS:
            self.expect(f"{norm}.{p}", (c,), required=own is not None or part == "trunk")
        return got

    def wb(self, prefix, shape):
        got = self.expect(prefix + ".weight", shape)
        self.expect(prefix + ".bias", (got[0] if got else shape[0],))
        return got


def _count(shapes, rx, first=None):
    """Largest index matched by rx in the names (group 1; None -> `first`), or 0."""
    out = 0
    for name in shapes:
        m = rx.match(name)
        if m:
            out = max(out, int(m.group(1)) if m.group(1) is not None else first)
    return out


def check_canonical(shapes, describe=lambda n: n):
    """Validate {canonical name: shape}.  Returns (ordered names, info dict); raises ConvertError
    naming unexpected, missing or mis-shaped tensors, a norm whose form differs from the rest of
    its part, or a conv without the norm the other convs of its part have.  describe(name)
    decorates names in messages.  The architecture (norms per part, RPN conv count, box head
    convs and FCs) is read from the names present; models/README.md lists what is accepted."""
    counts = [0, 0, 0, 0]
    for name in shapes:
        m = _BLOCK_RE.match(name)
        if m:
            s = int(m.group(1)) - 2
            counts[s] = max(counts[s], int(m.group(2)) + 1)
    forms = _norm_forms(shapes, describe)
    ck = _Checker(shapes, describe, forms)

    stem = ck.conv_unit("backbone.stem.conv", "backbone.stem.norm", (None, 3, None, None), "trunk")
    cin = stem[0] if stem else None
    stage_out = {}
    groups = 1
    for si, nblocks in enumerate(counts):
        S = si + 2
        for b in range(nblocks):
            p = f"backbone.res{S}.{b}"
            c1 = ck.conv_unit(p + ".conv1", p + ".conv1.norm", (None, cin, 1, 1), "trunk")
            m = c1[0] if c1 else None
            c2 = ck.conv_unit(p + ".conv2", p + ".conv2.norm", (m, None, 3, 3), "trunk")
            if c2 and m and (c2[1] <= 0 or m % c2[1]):
                ck.bad.append(f"{describe(p + '.conv2.weight')} has shape {list(c2)}: "
                              f"input channels do not divide {m}")
            elif c2 and m:
                groups = m // c2[1]
            c3 = ck.conv_unit(p + ".conv3", p + ".conv3.norm", (None, m, 1, 1), "trunk")
            out = c3[0] if c3 else None
            if b == 0:
                ck.conv_unit(p + ".shortcut", p + ".shortcut.norm", (out, cin, 1, 1), "trunk")
            elif out is not None and cin is not None and out != cin:
                ck.bad.append(f"{describe(p + '.conv3.weight')} outputs {out} channels, "
                              f"the residual input has {cin}")
            cin = out
        stage_out[S] = cin

    lat5 = ck.shape("fpn.lateral5.weight")
    F = lat5[0] if lat5 and len(lat5) == 4 else None
    for S in (2, 3, 4, 5):
        ck.conv_unit(f"fpn.lateral{S}", f"fpn.lateral{S}.norm", (F, stage_out.get(S), 1, 1), "FPN")
    for S in (2, 3, 4, 5):
        ck.conv_unit(f"fpn.output{S}", f"fpn.output{S}.norm", (F, F, 3, 3), "FPN")

    n_rpn = max(1, _count(shapes, _RPN_CONV_RE, first=1))
    for i in range(1, n_rpn + 1):
        ck.wb("rpn.conv" + (str(i) if i > 1 else ""), (F, F, 3, 3))
    obj = ck.wb("rpn.objectness", (None, F, 1, 1))
    A = obj[0] if obj else None
    ck.wb("rpn.deltas", (4 * A if A else None, F, 1, 1))

    n_conv = _count(shapes, _BOX_CONV_RE)
    cin_box, conv_dim = F, None
    for i in range(1, n_conv + 1):
        c = ck.conv_unit(f"box_head.conv{i}", f"box_head.conv{i}.norm", (conv_dim, cin_box, 3, 3), "box head")
        if i == 1 and c:
            conv_dim = c[0]
        cin_box = conv_dim
    n_fc = max(1, _count(shapes, _BOX_FC_RE) - 5)
    fc6 = ck.wb("box_head.fc6", (None, None))
    pool = None
    if fc6 and cin_box:
        pool = math.isqrt(fc6[1] // cin_box)
        if pool * pool * cin_box != fc6[1]:
            what = f"{conv_dim} (box_head.conv{n_conv})" if n_conv else f"{cin_box} (the FPN width)"
            ck.bad.append(f"{describe('box_head.fc6.weight')} has {fc6[1]} inputs, "
                          f"not {what}*P*P for an integer pooler size P")
            pool = None
    R = fc6[0] if fc6 else None
    for i in range(2, n_fc + 1):
        fc = ck.wb(f"box_head.fc{5 + i}", (None, R))
        R = fc[0] if fc else None
    cls = ck.wb("box_predictor.cls_score", (None, R))
    K = cls[0] if cls else None
    # Class-agnostic heads: 4 box deltas for every class, 1 mask for every class (K >= 2 here, so
    # neither shape is ever the class-specific one: 4K >= 8 rows, K >= 2 channels).
    bp, lg = ck.shape("box_predictor.bbox_pred.weight"), ck.shape("mask_head.logits.weight")
    box_agnostic = bool(K and K > 1 and bp and bp[0] == 4)
    mask_agnostic = bool(K and K > 1 and lg and lg[0] == 1)
    ck.wb("box_predictor.bbox_pred", ((4 if box_agnostic else 4 * K) if K else None, R))

    fcn1 = ck.conv_unit("mask_head.fcn1", "mask_head.fcn1.norm", (None, F, 3, 3), "mask head")
    M = fcn1[0] if fcn1 else None
    for n in (2, 3, 4):
        ck.conv_unit(f"mask_head.fcn{n}", f"mask_head.fcn{n}.norm", (M, M, 3, 3), "mask head")
    dec = ck.expect("mask_head.deconv.weight", (M, None, 2, 2))
    D = dec[1] if dec else None
    ck.expect("mask_head.deconv.bias", (D,))
    ck.wb("mask_head.logits", (1 if mask_agnostic else K, D, 1, 1))

    allowed = set(ck.order)
    unexpected = [n for n in shapes if n not in allowed]
    if unexpected:
        raise ConvertError(f"unexpected tensor(s): {_names(describe(n) for n in unexpected)}")
    if ck.no_norm:
        conv, norm, part, form = ck.no_norm[0]
        more = f" (and {len(ck.no_norm) - 1} more conv(s))" if len(ck.no_norm) > 1 else ""
        raise ConvertError(
            f"{describe(conv + '.weight')} has no norm{more}, while the other {part} convs have "
            f"{_FORM_WORDS[form]} norms: missing "
            + ", ".join(describe(f"{norm}.{p}") for p in NORM_FORMS[form]))
    missing = [n for n in ck.required if n not in shapes]
    if missing:
        raise ConvertError(f"missing tensor(s): {_names(describe(n) for n in missing)}")
    if ck.bad:
        raise ConvertError("; ".join(ck.bad[:4]) + (f"; ... ({len(ck.bad) - 4} more)" if len(ck.bad) > 4 else ""))
    depth = DEPTHS.get(tuple(counts))
    if depth is None:
        raise ConvertError(
            "cannot infer ResNet depth: blocks per stage res2..res5 = "
            f"{','.join(map(str, counts))}; supported: "
            + "; ".join(f"{d}: {','.join(map(str, c))}" for c, d in DEPTHS.items()))
    res2_conv1 = ck.shape("backbone.res2.0.conv1.weight")
    info = dict(depth=depth, blocks=counts, num_classes=K, num_anchors=A, fpn_dim=F,
                pooler=pool, representation=R, mask_dim=M, groups=groups,
                norm=forms.get("trunk", "batchnorm"),
                stem_out_channels=stem[0], res2_out_channels=stage_out[2],
                width_per_group=res2_conv1[0] // groups,
                fpn_norm=forms.get("FPN", "none"), rpn_num_convs=n_rpn,
                box_head_num_convs=n_conv, box_head_conv_dim=conv_dim, box_head_num_fcs=n_fc,
                box_head_norm=forms.get("box head", "none") if n_conv else "none",
                mask_head_norm=forms.get("mask head", "none"),
                box_head_class_agnostic=box_agnostic, mask_head_class_agnostic=mask_agnostic)
    info["architecture"] = architecture_of(info)
    return [n for n in ck.order if n in shapes], info


# Known architectures: (trunk norm, FPN norm, RPN convs, box head convs, box head FCs, box head
# norm, mask head norm) -> name.  Trunk "batchnorm" and "affine" both fold at load.
ARCHITECTURES = {
    ("bn", "none", 1, 0, 2, "none", "none"): "classic",
    ("bn", "batchnorm", 2, 4, 1, "batchnorm", "batchnorm"): "bn_heads_rpn2",
    ("bn", "batchnorm", 1, 4, 1, "batchnorm", "batchnorm"): "bn_heads",
    ("group_norm", "group_norm", 1, 4, 1, "group_norm", "group_norm"): "gn_heads",
}
ARCHITECTURE_WORDS = {
    "classic": "classic: frozen-BN trunk, FPN without norm, 1 RPN conv, 2fc box head",
    "bn_heads_rpn2": "BatchNorm heads: BN trunk and FPN, 2 RPN convs, 4conv1fc BN box head, BN mask head "
                     "(detectron2 new baselines / LSJ, torchvision v2)",
    "bn_heads": "BatchNorm heads: BN trunk and FPN, 1 RPN conv, 4conv1fc BN box head, BN mask head "
                "(detectron2 Misc SyncBN)",
    "gn_heads": "GroupNorm: GN trunk and FPN, 1 RPN conv, 4conv1fc GN box head, GN mask head "
                "(detectron2 Misc GN, Detectron GN, maskrcnn-benchmark GN)",
}


def _arch_key(info):
    trunk = "bn" if info["norm"] in ("batchnorm", "affine") else info["norm"]
    return (trunk, info["fpn_norm"], info["rpn_num_convs"], info["box_head_num_convs"],
            info["box_head_num_fcs"], info["box_head_norm"], info["mask_head_norm"])


def architecture_of(info):
    """A known architecture's name (ARCHITECTURES), or "custom"."""
    return ARCHITECTURES.get(_arch_key(info), "custom")


def describe_architecture(info):
    """One line naming the parts found."""
    def norm(f):
        return {"batchnorm": "BN", "affine": "AffineChannel", "group_norm": "GN", "none": "no norm"}[f]
    box = (f"{info['box_head_num_convs']}conv{info['box_head_num_fcs']}fc" if info["box_head_num_convs"]
           else f"{info['box_head_num_fcs']}fc")
    parts = (f"trunk {norm(info['norm'])}, FPN {norm(info['fpn_norm'])}, {info['rpn_num_convs']} RPN "
             f"conv(s), box head {box}" + (f" ({norm(info['box_head_norm'])})" if info["box_head_num_convs"] else "")
             + f", mask head {norm(info['mask_head_norm'])}")
    name = info.get("architecture") or architecture_of(info)
    return f"{name} ({parts})"


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16)}


def convert_state_dict(state, source_format="torchvision", dtype="f32"):
    """{source name: ndarray or TensorRef} -> (OrderedDict {canonical name: ndarray}, info).
    The shared path of convert.py and tests/parity/oracle.py export_weights().  info has the
    checks' results plus `ignored` ({label: [source names]}) and `warnings`."""
    fmt = SOURCE_FORMATS[source_format].bind(state)
    ignored = {}
    mapped = fmt.map_names(state, ignored)
    if fmt.transform is not None:
        mapped = fmt.transform(mapped)

    def describe(canon):
        if canon in mapped:
            src = mapped[canon][0]
        else:
            src = fmt.source_name(canon)
        return f"{canon} ({fmt.name}: {src})" if src and src != canon else canon

    order, info = check_canonical({k: tuple(v[1].shape) for k, v in mapped.items()}, describe)
    target = DTYPES[dtype]
    out = collections.OrderedDict()
    for name in order:
        src, t = mapped[name]
        if np.dtype(t.dtype).kind != "f":
            raise ConvertError(f"{describe(name)} has dtype {np.dtype(t.dtype)}, expected floating point")
        try:
            a = _materialize(t)
        except ConvertError as e:
            raise ConvertError(f"{src}: {e}") from None
        except Exception as e:  # e.g. zipfile's bad CRC, a short read
            raise ConvertError(f"{src}: cannot read tensor data ({type(e).__name__}: {e})") from None
        if not np.all(np.isfinite(a)):
            raise ConvertError(f"{describe(name)} contains NaN or Inf")
        with np.errstate(over="ignore"):
            a = a.astype(target, copy=False)
        if not np.all(np.isfinite(a)):
            raise ConvertError(f"{describe(name)} overflows {dtype}")
        out[name] = a
    info["ignored"] = {label: [n for n, _ in items] for label, items in ignored.items()}
    info["warnings"] = fmt.warn(ignored) if fmt.warn is not None else []
    return out, info


# torchvision's COCO_V1 file (maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth, the file name's hash is
# a SHA-256 prefix): torchvision's maskrcnn_resnet50_fpn calls overwrite_eps(model, 0.0) after
# loading exactly these weights (torchvision/models/detection/mask_rcnn.py).
_TORCHVISION_COCO_SHA256_PREFIX = "bf2d0c1e"


def norm_eps_of(info, source_format, source_sha256):
    """The trunk BatchNorm eps the source framework uses with these weights (config key
    backbone.norm_eps), or None when the file holds folded AffineChannel norms or GroupNorm
    (whose eps is the config's backbone.norm_eps too, but is not a property of the weights:
    1e-5 in every zoo, configs/README.md)."""
    if info["norm"] != "batchnorm":
        return None
    if source_format == "torchvision" and str(source_sha256).startswith(_TORCHVISION_COCO_SHA256_PREFIX):
        return "0"
    return "1e-05"  # torchvision and detectron2 FrozenBatchNorm2d, BatchNorm2d, SyncBatchNorm


def class_names_of(source_format, num_classes):
    if source_format == "torchvision" and num_classes == 91:
        return coco_classes.TORCHVISION_91
    if num_classes == 81:
        return coco_classes.COCO_81
    return None


STOCK_WIDTHS = {"stem_out_channels": 64, "res2_out_channels": 256, "width_per_group": 64}
CONFIGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs")

# The shipped config of each zoo's architecture, as a suffix of configs/mask_rcnn_R-{50,101}-FPN_<format>
# (suggested only where the file exists: detectron2's SyncBN and GN models are R-50 only).
CONFIG_SUFFIX = {
    "classic": "",
    "bn_heads_rpn2": {"detectron2": "_LSJ", "torchvision": "_v2"},
    "bn_heads": {"detectron2": "_syncbn"},
    "gn_heads": {"detectron2": "_gn", "detectron": "_gn", "maskrcnn-benchmark": "_gn"},
}


def _config_get(cfg, section, key, default):
    v = cfg.get(section, {})
    return v.get(key, default) if isinstance(v, dict) else default


def _config_arch(cfg):
    """The architecture a config describes (its keys, with the engine's defaults)."""
    trunk = _config_get(cfg, "backbone", "norm", "batchnorm")
    return ("bn" if trunk == "batchnorm" else trunk, _config_get(cfg, "fpn", "norm", "none"),
            _config_get(cfg, "rpn", "num_convs", 1), _config_get(cfg, "box_head", "num_convs", 0),
            _config_get(cfg, "box_head", "num_fcs", 2), _config_get(cfg, "box_head", "norm", "none"),
            _config_get(cfg, "mask_head", "norm", "none"))


# Class-agnostic heads: the config keys that say so (configs/README.md), and the info fields.
AGNOSTIC_KEYS = (("box_head", "class_agnostic_regression", "box_head_class_agnostic"),
                 ("mask_head", "class_agnostic", "mask_head_class_agnostic"))


def _config_heads(cfg):
    return tuple(_config_get(cfg, section, key, False) is True for section, key, _ in AGNOSTIC_KEYS)


def _heads_key(info):
    return tuple(bool(info.get(field, False)) for _, _, field in AGNOSTIC_KEYS)


def _load_config(name):
    try:
        with open(os.path.join(CONFIGS, name), encoding="utf-8") as f:
            cfg = json.load(f)
        return cfg if isinstance(cfg, dict) else None
    except (OSError, ValueError):
        return None


def suggested_config_of(info, source_format, stride_in_1x1=None):
    """configs/mask_rcnn_R-{50,101}-FPN_<format><variant>.json (CONFIG_SUFFIX: "" for the classic
    model, e.g. "_LSJ" for detectron2's new baselines; "_caffe" added for an mmdetection file whose
    config says style='caffe', stride_in_1x1) for the zoos' widths, where it exists; for other
    widths (a narrow model such as the demo's) the config in configs/ whose backbone widths, class
    count and architecture keys are the model's, so that the suggestion loads it; "" where none
    fits (R-152, grouped convolutions, a width or an architecture no config has).  Either way the
    config's class-agnostic keys (box_head.class_agnostic_regression, mask_head.class_agnostic,
    default false) must be the file's: no shipped config has agnostic heads, so such weights get
    no suggestion and the report names the keys to set."""
    if info["depth"] not in (50, 101) or info["groups"] != 1:
        return ""
    arch = info.get("architecture") or architecture_of(info)
    suffix = CONFIG_SUFFIX.get(arch)
    if isinstance(suffix, dict):
        suffix = suffix.get(source_format)
    if all(info[k] == v for k, v in STOCK_WIDTHS.items()):
        if suffix is None:
            return ""
        if source_format == "mmdetection" and stride_in_1x1:
            suffix += "_caffe"
        name = f"mask_rcnn_R-{info['depth']}-FPN_{source_format}{suffix}.json"
        cfg = _load_config(name)
        return f"configs/{name}" if cfg is not None and _config_heads(cfg) == _heads_key(info) else ""
    names = sorted(os.listdir(CONFIGS)) if os.path.isdir(CONFIGS) else []
    for name in sorted(names, key=lambda n: source_format not in n):  # the checkpoint's own zoo first
        cfg = _load_config(name) if name.endswith(".json") else None
        try:
            backbone, classes = cfg.get("backbone", {}), cfg.get("classes", {})
            same_arch = _config_arch(cfg) == _arch_key(info) and _config_heads(cfg) == _heads_key(info)
        except AttributeError:
            continue
        if backbone.get("depth") == info["depth"] and classes.get("num_classes") == info["num_classes"] and \
                all(backbone.get(k, v) == info[k] for k, v in STOCK_WIDTHS.items()) and same_arch:
            return f"configs/{name}"
    return ""


def _bool(v):
    return "true" if v else "false"


def class_names_from_file(file_meta, num_classes):
    """["__background__"] + the file's own class names, when it has K - 1 of them; else None."""
    names = getattr(file_meta, "class_names", None)
    if names is None or len(names) != num_classes - 1:
        return None
    return ["__background__"] + list(names)


def make_metadata(info, source_format, source_sha256, file_meta=None):
    """The __metadata__ of a converted file (models/README.md "Metadata").  file_meta: what the
    checkpoint said besides its weights (zoo_formats.FileMeta: mmdetection's class names and
    trunk style), or None."""
    stride = getattr(file_meta, "stride_in_1x1", None)
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "source_format": source_format,
        "source_sha256": source_sha256,
        "num_classes": str(info["num_classes"]),
        "depth": str(info["depth"]),
        "num_groups": str(info["groups"]),
        "width_per_group": str(info["width_per_group"]),
        "stem_out_channels": str(info["stem_out_channels"]),
        "res2_out_channels": str(info["res2_out_channels"]),
        "norm": info["norm"],
        "architecture": info["architecture"],
        "fpn_norm": info["fpn_norm"],
        "rpn_num_convs": str(info["rpn_num_convs"]),
        "box_head_num_convs": str(info["box_head_num_convs"]),
        "box_head_num_fcs": str(info["box_head_num_fcs"]),
        "box_head_fc_dim": str(info["representation"]),
        "box_head_norm": info["box_head_norm"],
        "mask_head_norm": info["mask_head_norm"],
        "box_head_class_agnostic": _bool(info.get("box_head_class_agnostic")),
        "mask_head_class_agnostic": _bool(info.get("mask_head_class_agnostic")),
        "suggested_config": suggested_config_of(info, source_format, stride),
    }
    if info["box_head_num_convs"]:
        meta["box_head_conv_dim"] = str(info["box_head_conv_dim"])
    eps = norm_eps_of(info, source_format, source_sha256)
    if eps is not None:
        meta["norm_eps"] = eps
    if stride is not None:
        meta["stride_in_1x1"] = _bool(stride)
    if getattr(file_meta, "class_names", None) is not None:  # the file's own names, or none if they do not fit
        names = class_names_from_file(file_meta, info["num_classes"])
    else:
        names = class_names_of(source_format, info["num_classes"])
    if names is not None:
        meta["class_names"] = json.dumps(names)
    return meta


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_CONTAINER_WORDS = {"torch": "a torch.save() file (.pth)", "pickle": "a plain pickle of numpy arrays (.pkl)"}


def convert_file(src, dst, source_format="auto", dtype="f32", before_write=None):
    """Convert SRC to DST.  Returns info (with `source_format`, `detected`, `opaque`,
    `ignored_entries`); raises ConvertError (DST untouched on error).  before_write(info,
    source_format), if given, runs after the checks and before DST is written (it may raise)."""
    if source_format != "auto" and source_format not in SOURCE_FORMATS:
        raise ConvertError(f"unknown source format {source_format!r}")
    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        raise ConvertError("SRC and DST are the same file")
    try:
        digest = sha256_file(src)
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    opaque, entries = set(), []
    kind, obj = load_checkpoint(src, opaque)
    detected = source_format == "auto"
    name = detect_format(kind, obj) if detected else source_format
    fmt = SOURCE_FORMATS[name]
    if kind not in fmt.containers:
        raise ConvertError(f"--from {name} reads {' or '.join(_CONTAINER_WORDS[c] for c in fmt.containers)}; "
                           f"this is {_CONTAINER_WORDS[kind]} (leave out --from to detect the format)")
    state = fmt.extract(kind, obj, entries)
    file_meta = fmt.read_meta(obj) if fmt.read_meta is not None else zoo_formats.FileMeta()
    tensors, info = convert_state_dict(state, name, dtype)
    if file_meta.class_names is not None and class_names_from_file(file_meta, info["num_classes"]) is None:
        info["warnings"].append(
            f"{file_meta.source['class_names']} has {len(file_meta.class_names)} names, the classifier "
            f"{info['num_classes'] - 1} classes (+ background): class names not recorded")
    info["warnings"] += file_meta.warnings
    metadata = make_metadata(info, name, digest, file_meta)
    if before_write is not None:
        before_write(dict(info, source_sha256=digest), name)
    try:
        safetensors_io.save(tensors, dst, metadata)
    except OSError as e:
        raise ConvertError(f"cannot write {dst}: {e.strerror or e}") from None
    info.update(source_format=name, detected=detected, opaque=sorted(opaque), ignored_entries=entries,
                suggested_config=metadata["suggested_config"], file_meta=file_meta,
                class_names=json.loads(metadata["class_names"]) if "class_names" in metadata else None)
    return info


def _report(args, info):
    fmt = info["source_format"]
    how = "detected" if info["detected"] else "given with --from"
    print(f"{args.src}: {fmt} checkpoint ({how})")
    if info["ignored_entries"]:
        print(f"  not weights, ignored: {', '.join(info['ignored_entries'])}")
    if info["opaque"]:
        print(f"  pickled objects of classes outside the allow-list, not loaded: {_names(info['opaque'], 6)}")
    n = sum(len(v) for v in info["ignored"].values())
    if n:
        print(f"  ignored {n} source tensors: "
              + "; ".join(f"{len(v)} {label}" for label, v in info["ignored"].items()))
    if info["groups"] != 1:
        print(f"  grouped 3x3 convolutions: {info['groups']} groups x {info['width_per_group']} "
              "(ResNeXt; recorded in the metadata; the engine does not run grouped convolutions yet)")
    print(f"{args.dst}: R-{info['depth']} FPN, {info['num_classes']} classes, "
          f"{info['num_anchors']} anchors/position, {info['norm']} norms, {args.dtype}")
    print(f"  architecture: {describe_architecture(info)}")
    agnostic = [f"{words} (config {section}.{key} true)" for (section, key, field), words in
                zip(AGNOSTIC_KEYS, ("box regression: 4 deltas for every class", "mask: 1 for every class"))
                if info.get(field)]
    if agnostic:
        print("  class-agnostic " + "; ".join(agnostic))
    fm = info.get("file_meta")
    if fm is not None and fm.stride_in_1x1 is not None:
        print(f"  trunk strides in the {'1x1' if fm.stride_in_1x1 else '3x3'} conv, from {fm.source['stride_in_1x1']} "
              f"(config backbone.stride_in_1x1 {_bool(fm.stride_in_1x1)})")
    elif info["source_format"] == "mmdetection":
        print("  the file does not say its ResNet style: style='pytorch' (stride in the 3x3 conv) is assumed; a "
              "style='caffe' model needs backbone.stride_in_1x1 true and its BGR, std 1 input")
    if fm is not None and class_names_from_file(fm, info["num_classes"]) is not None:
        print(f"  class names from {fm.source['class_names']}: {_names(info['class_names'][1:], 6)}")
    if getattr(args, "train_config", None):
        return  # the written config is reported instead
    cfg = info["suggested_config"]
    print(f"suggested config: {cfg}" if cfg else "suggested config: none (no config for this backbone, "
          "architecture and heads yet)")


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="convert.py",
        description="Convert a Mask R-CNN checkpoint (Detectron .pkl, detectron2 .pkl/.pth, "
                    "maskrcnn-benchmark .pth, mmdetection .pth, torchvision .pth) to canonical detect safetensors "
                    "(models/README.md).")
    ap.add_argument("src", metavar="SRC", help="checkpoint")
    ap.add_argument("dst", metavar="DST", help="output .safetensors")
    ap.add_argument("--from", dest="source_format", default="auto", choices=["auto"] + sorted(SOURCE_FORMATS),
                    help="source format (default: detected from the file's structure and names)")
    ap.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing on success (warnings still)")
    ap.add_argument("--train-config", metavar="FILE", help="the model's training config (detectron2 yaml or "
                    "LazyConfig, mmdetection .py, torchvision description): write the detect config from it "
                    "beside DST, after checking that it describes the weights (models/train_config.py)")
    ap.add_argument("--config-out", metavar="PATH", help="where --train-config's config goes (default: DST "
                    "with .json)")
    ap.add_argument("--framework", choices=train_config.FRAMEWORKS, help="--train-config's framework "
                    "(default: found from the file)")
    ap.add_argument("--class-names", metavar="FILE", help="class names for --train-config (one a line, or a "
                    "JSON list)")
    args = ap.parse_args(argv)
    if (args.config_out or args.framework or args.class_names) and not args.train_config:
        ap.error("--config-out, --framework and --class-names go with --train-config")
    trained = None
    try:
        if args.train_config:
            trained = _train_config(args)
        info = convert_file(args.src, args.dst, args.source_format, args.dtype,
                            trained["check"] if trained else None)
        if trained:
            _save_train_config(args, trained)
    except train_config.TrainConfigError as e:
        print(f"convert.py: {e}", file=sys.stderr)
        return 2
    except ConvertError as e:
        msg = " ".join(str(e).split())  # one line
        print(f"convert.py: {args.src}: {msg}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"convert.py: {args.src}: out of memory", file=sys.stderr)
        return 2
    for w in info["warnings"]:
        print(f"convert.py: {args.src}: warning: {w}", file=sys.stderr)
    if trained:
        for n in trained["mapping"].notes:
            print(f"convert.py: {args.train_config}: note: {n}", file=sys.stderr)
    if not args.quiet:
        _report(args, info)
        if trained:
            train_config.report(trained["config"], trained["mapping"], trained["path"])
    return 0


# Which training framework's conventions a checkpoint format's weights need.
TRAIN_FRAMEWORK_OF = {"detectron2": "detectron2", "torchvision": "torchvision", "mmdetection": "mmdetection",
                      "mmdet": "mmdetection"}  # the mmdet format's name, whichever it lands with


def _train_config(args):
    """--train-config: the config (refusals before any conversion), and the check of the
    weights against it that runs before DST is written."""
    names = train_config.read_class_names(args.class_names) if args.class_names else None
    cfg, mapping = train_config.build_config(args.train_config, args.framework, names)
    cfg["name"] = os.path.splitext(os.path.basename(args.dst))[0][:127] or cfg["name"]
    path = args.config_out or os.path.splitext(args.dst)[0] + ".json"
    for other in (args.src, args.dst, args.train_config):
        if os.path.abspath(path) == os.path.abspath(other):
            raise train_config.TrainConfigError("--config-out", f"{path} is also {other}")
    if not os.path.isdir(os.path.dirname(os.path.abspath(path))):
        raise train_config.TrainConfigError("--config-out", f"{path}: no such folder")

    def check(info, source_format):
        want = TRAIN_FRAMEWORK_OF.get(source_format)
        if want != mapping.framework:
            raise train_config.TrainConfigError(
                None, f"a {mapping.framework} training config, but {args.src} is a {source_format} checkpoint "
                f"(its conventions are {want or source_format}'s)", args.train_config)
        train_config.check_weights(cfg, mapping, info, args.src, args.train_config)
        eps = norm_eps_of(info, source_format, info["source_sha256"])
        if eps is not None and float(eps) != cfg["backbone"]["norm_eps"]:
            raise train_config.TrainConfigError(
                mapping.origin.get("backbone.norm_eps") or "backbone.norm_eps",
                f"the training config gives the trunk's BatchNorm eps {cfg['backbone']['norm_eps']}, the weights "
                f"{args.src} need {eps} (torchvision's COCO_V1 file, whose builder sets it to 0: describe it with "
                '"weights": "COCO_V1")', args.train_config)

    return {"config": cfg, "mapping": mapping, "path": path, "check": check}


def _save_train_config(args, trained):
    """Writes the config after the weights; if it cannot be written, the weights go too."""
    try:
        train_config.save(trained["config"], trained["path"])
    except train_config.TrainConfigError:
        try:
            os.unlink(args.dst)
        except OSError:
            pass
        raise


if __name__ == "__main__":
    sys.exit(main())
