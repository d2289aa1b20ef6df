#!/usr/bin/python3
"""Write the `detect` JSON config of a model from the config it was trained with.

    train_config.py TRAIN_CONFIG -o OUT.json [--framework detectron2|mmdetection|torchvision]
                    [--class-names FILE] [-v]
    convert.py SRC DST.safetensors --train-config TRAIN_CONFIG [--config-out PATH]

TRAIN_CONFIG is one of (docs/zoos.md "Bring your own model" has the commands and tables):
- a detectron2 yaml (`_BASE_` chains followed, merged as detectron2's CfgNode merges them,
  over our table of detectron2's defaults): read as data with PyYAML, nothing executed;
- a detectron2 LazyConfig .py (or the config.yaml a LazyConfig training run saves): the .py is
  executed in a limited child process with a stub `detectron2` (train_config_sandbox.py);
- an mmdetection .py with `_base_`: loaded by mmengine's own Config.fromfile, which executes
  it, in the same kind of child process with build/venv-mmdet's python (`make deps`);
- a torchvision builder description: a JSON (or Python-literal) dict of the builder's
  keyword arguments (train_config_tv.py lists them).

The framework is found from the file (extension and content) or given with --framework.
The result starts from the shipped config of that framework's conventions (configs/
mask_rcnn_R-101-FPN_<framework>.json),
overlays every inference setting the training config makes and has all keys.  A setting the
engine cannot honour (a cascade head, deformable convs, rotated boxes, test-time
augmentation, a norm or layer shape it has not, ...) is refused: one line naming the file and
the key, exit status 2, nothing written.  Settings that only affect training (solver, losses,
samplers, train-time augmentation) are ignored by name; -v lists them.

Class names: from the training config where it holds them (mmdetection's metainfo, the
torchvision description), else from --class-names (one name a line, or a JSON list; with or
without the background first), else COCO's for a COCO dataset with 80 classes, else
"class_1".."class_N" (said on stderr), as configs/README.md's rule names them.

As a library: write_config(path, framework=None, class_names=None, out=None) -> dict.
"""

import argparse
import collections
import json
import os
import re
import sys
import tempfile

try:  # imported as part of a package
    from . import coco_classes
except ImportError:  # run as a script, or imported with models/ on sys.path
    import coco_classes

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(os.path.dirname(HERE), "configs")
FRAMEWORKS = ("detectron2", "mmdetection", "torchvision")
MAX_CLASSES = 1024  # MR_MAX_CLASSES (engine/core/config.h)
MAX_NAME_BYTES = 63


class TrainConfigError(Exception):
    """A refusal or a read error: `file: key: problem` (one line)."""

    def __init__(self, key, problem, file=None):
        super().__init__(problem)
        self.key, self.problem, self.file = key, problem, file

    def __str__(self):
        parts = [p for p in (self.file, self.key) if p]
        return ": ".join(parts + [" ".join(str(self.problem).split())])


def refuse(key, problem, file=None):
    raise TrainConfigError(key, problem, file)


# ---------------------------------------------------------------------------------------
# What a framework module returns
# ---------------------------------------------------------------------------------------

class Mapping:
    """The engine keys a training config sets, each with the training key it came from."""

    def __init__(self, framework, base):
        self.framework, self.base = framework, base  # base: a key of BASES
        self.values = collections.OrderedDict()      # "section.key" -> value
        self.origin = {}                              # "section.key" -> training key
        self.notes = []                               # said on stderr
        self.ignored = []                             # training-only keys read and ignored
        self.class_names = None                       # with background first, if known
        self.class_names_origin = None
        self.coco = False                             # the dataset is COCO's
        self.num_classes_origin = None
        self.kind = framework                         # e.g. "detectron2 yaml"

    def set(self, key, value, origin):
        self.values[key] = value
        self.origin[key] = origin

    def note(self, text):
        self.notes.append(text)


def short_repr(v):
    """A value as a refusal quotes it: its repr, cut at 80 characters."""
    text = repr(v)
    return text if len(text) < 80 else text[:77] + "..."


def set_norm(m, section, norm, origin):
    """Sets `section`'s norm keys from (our kind, groups or None, eps or None) on m (a Mapping, or
    anything with its set())."""
    kind, groups, eps = norm
    m.set(f"{section}.norm", kind, origin)
    if groups is not None:
        m.set(f"{section}.norm_groups", groups, origin)
    if eps is not None:
        m.set(f"{section}.norm_eps", eps, origin)


class TreeReader:
    """A training config's tree of dicts and lists (a LazyConfig's or mmengine's, as the child
    printed it), read by dotted paths, with the file named in refusals."""

    def __init__(self, tree, file, m):
        self.tree, self.file, self.m = tree, file, m

    def at(self, path):
        """The node at a dotted path (list items by index), or None."""
        node = self.tree
        for part in path.split("."):
            if isinstance(node, dict) and part in node:
                node = node[part]
            elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
                node = node[int(part)]
            else:
                return None
        return node

    def refuse(self, key, problem):
        refuse(key, problem, self.file)

    def set(self, key, value, origin):
        self.m.set(key, value, origin)


# ---------------------------------------------------------------------------------------
# The bases: the shipped config of each framework's conventions
# ---------------------------------------------------------------------------------------

BASE_FILES = {
    "detectron2": "mask_rcnn_R-101-FPN_detectron2.json",
    "torchvision": "mask_rcnn_R-101-FPN_torchvision.json",
    "torchvision_v2": "mask_rcnn_R-101-FPN_torchvision_v2.json",
    "mmdetection": "mask_rcnn_R-101-FPN_mmdetection.json",
}

def get_key(cfg, key):
    node = cfg
    for part in key.split("."):
        node = node[part]
    return node


def set_key(cfg, key, value, after=None):
    """Sets cfg's dotted key; a key not there yet goes after `after` (a sibling) or last."""
    *path, last = key.split(".")
    node = cfg
    for part in path:
        node = node[part]
    if last in node or after is None:
        node[last] = value
        return
    items = list(node.items())
    node.clear()
    for k, v in items:
        node[k] = v
        if k == after.rsplit(".", 1)[-1]:
            node[last] = value
    node.setdefault(last, value)


def _read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f, object_pairs_hook=collections.OrderedDict)


def load_base(base):
    """The full config a framework's mapping starts from (an OrderedDict, all keys): the shipped
    config of its conventions."""
    path = os.path.join(CONFIGS, BASE_FILES[base])
    try:
        return _read_json(path)
    except (OSError, ValueError) as e:
        raise TrainConfigError(None, f"cannot read the base config {path}: {e}") from None


# ---------------------------------------------------------------------------------------
# Values: types from the base, the engine's ranges
# ---------------------------------------------------------------------------------------

# The ranges of engine/core/config_table.c for the keys a training config can set
# (lo, hi, open at lo); enums list their names.
LIMITS = {
    "input.pixel_scale": (0, 1, True), "input.min_size": (1, 65536), "input.max_size": (1, 65536),
    "input.size_divisibility": (1, 1024), "input.pixel_std": (0, 65536, True),
    "input.pixel_mean": (-65536, 65536),
    "backbone.depth": (50, 152), "backbone.stem_out_channels": (1, 4096),
    "backbone.res2_out_channels": (1, 8192), "backbone.width_per_group": (1, 4096),
    "backbone.norm_eps": (0, 1), "backbone.norm_groups": (1, 4096),
    "fpn.out_channels": (1, 4096), "fpn.norm_eps": (0, 1), "fpn.norm_groups": (1, 4096),
    "anchors.sizes": (0, 65536, True), "anchors.aspect_ratios": (0, 1000, True), "anchors.offset": (0, 1),
    "rpn.num_convs": (1, 8), "rpn.pre_nms_top_n": (1, 1000000), "rpn.post_nms_top_n": (1, 1000000),
    "rpn.nms_thresh": (0, 1), "rpn.min_size": (0, 65536), "rpn.score_thresh": (0, 1),
    "rpn.box_weights": (0, 1000, True), "box.bbox_xform_clip": (0, 64, True),
    "box_head.pooler.resolution": (1, 64), "box_head.pooler.sampling_ratio": (0, 64),
    "box_head.pooler.canonical_size": (1, 65536), "box_head.pooler.canonical_level": (1, 16),
    "box_head.num_convs": (0, 8), "box_head.conv_dim": (1, 4096), "box_head.num_fcs": (1, 4),
    "box_head.fc_dim": (1, 65536), "box_head.norm_eps": (0, 1), "box_head.norm_groups": (1, 4096),
    "box_head.box_weights": (0, 1000, True), "box_head.score_thresh": (0, 1),
    "box_head.nms_thresh": (0, 1), "box_head.min_size": (0, 65536),
    "box_head.detections_per_image": (1, 100000),
    "mask_head.pooler.resolution": (1, 64), "mask_head.pooler.sampling_ratio": (0, 64),
    "mask_head.pooler.canonical_size": (1, 65536), "mask_head.pooler.canonical_level": (1, 16),
    "mask_head.num_convs": (0, 8), "mask_head.conv_dim": (1, 4096), "mask_head.norm_eps": (0, 1),
    "mask_head.norm_groups": (1, 4096), "mask_head.threshold": (0, 1),
    "classes.num_classes": (2, MAX_CLASSES),
}
DEPTHS = (50, 101, 152)
FLOAT_LISTS = {"anchors.sizes": [[0.0]]}  # numbers, though the shipped files write integers


def _number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _coerce(key, like, value, origin, file):
    """value in the JSON type of the base's value `like` (an int stays an int: the engine's
    integers have no fraction)."""
    def bad(what):
        refuse(origin, f"{what} (for {key})", file)

    if isinstance(like, bool):
        if not isinstance(value, bool):
            bad(f"expected true or false, got {value!r}")
        return value
    if isinstance(like, int):
        if not _number(value) or value != int(value):
            bad(f"expected an integer, got {value!r}")
        return int(value)
    if isinstance(like, float):
        if not _number(value):
            bad(f"expected a number, got {value!r}")
        return float(value)
    if isinstance(like, str):
        if not isinstance(value, str):
            bad(f"expected a string, got {value!r}")
        return value
    if isinstance(like, list):
        if not isinstance(value, (list, tuple)):
            bad(f"expected a list, got {value!r}")
        inner = like[0] if like else 0.0
        return [_coerce(key, inner, v, origin, file) for v in value]
    return value


def _check_limits(key, value, origin, file):
    lim = LIMITS.get(key)
    if lim is None:
        return
    lo, hi = lim[0], lim[1]
    open_lo = len(lim) > 2 and lim[2]
    flat = value
    while flat and isinstance(flat, list) and isinstance(flat[0], list):
        flat = [x for row in flat for x in row]
    for v in flat if isinstance(flat, list) else [flat]:
        if not _number(v) or v < lo or v > hi or (open_lo and v == lo):
            side = "(" if open_lo else "["
            refuse(origin, f"{v!r} is outside what the engine accepts for {key}: {side}{lo:g},{hi:g}]", file)
    if key == "backbone.depth" and value not in DEPTHS:
        refuse(origin, f"ResNet depth {value}: the engine runs depths {', '.join(map(str, DEPTHS))}", file)


def assemble(m, file):
    """The full config: the base, then m.values, typed and range-checked."""
    cfg = load_base(m.base)
    for key, value in m.values.items():
        origin = m.origin.get(key)
        try:
            like = FLOAT_LISTS.get(key) or get_key(cfg, key)
        except KeyError:
            raise AssertionError(f"{key} is not a config key") from None
        value = _coerce(key, like, value, origin, file)
        _check_limits(key, value, origin, file)
        set_key(cfg, key, value)
    inp = cfg["input"]
    if inp["min_size"] > inp["max_size"]:
        refuse(m.origin.get("input.min_size") or m.origin.get("input.max_size"),
               f"test size {inp['min_size']} is larger than the maximum {inp['max_size']}: the engine "
               "needs input.min_size <= input.max_size", file)
    sizes = cfg["anchors"]["sizes"]
    levels = cfg["fpn"]["max_level"] - cfg["fpn"]["min_level"] + 1
    origin = m.origin.get("anchors.sizes")
    if len(sizes) != levels:
        refuse(origin, f"{len(sizes)} rows of anchor sizes for {levels} FPN levels", file)
    if len({len(r) for r in sizes}) != 1 or not 1 <= len(sizes[0]) <= 4:
        refuse(origin, "the engine needs 1 to 4 anchor sizes per level, the same count on every level; "
               f"got {[len(r) for r in sizes]}", file)
    if not 1 <= len(cfg["anchors"]["aspect_ratios"]) <= 8:
        refuse(m.origin.get("anchors.aspect_ratios"), "the engine takes 1 to 8 aspect ratios", file)
    return cfg


# ---------------------------------------------------------------------------------------
# Class names
# ---------------------------------------------------------------------------------------

def read_class_names(path):
    """--class-names FILE: a JSON list of strings, or one name a line (blank lines skipped)."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise TrainConfigError("--class-names", f"cannot read {path}: {e}") from None
    if text.lstrip().startswith("["):
        try:
            names = json.loads(text)
        except ValueError as e:
            raise TrainConfigError("--class-names", f"{path}: not a JSON list: {e}") from None
        if not all(isinstance(n, str) for n in names):
            refuse("--class-names", f"{path}: the JSON list must hold strings")
        return names
    return [line.strip() for line in text.splitlines() if line.strip()]


def _check_names(names, num_classes, origin, file):
    """names (foreground only, or background first) -> the num_classes list, background first."""
    fg = num_classes - 1
    if len(names) == fg:
        names = ["__background__"] + list(names)
    elif len(names) != num_classes:
        refuse(origin, f"{len(names)} class names for {fg} classes (give {fg} names, or {num_classes} "
               "with the background first)", file)
    for n in names:
        size = len(n.encode("utf-8"))
        if not 1 <= size <= MAX_NAME_BYTES:
            refuse(origin, f"class name {n!r}: the engine takes 1 to {MAX_NAME_BYTES} bytes", file)
    dup = [n for n, c in collections.Counter(names).items() if c > 1]
    if dup:
        refuse(origin, f"class name {dup[0]!r} appears more than once", file)
    return list(names)


def class_names_for(m, num_classes, given, file):
    if given is not None:
        if m.class_names is not None:
            m.note(f"class names from --class-names, not {m.class_names_origin}")
        return _check_names(given, num_classes, "--class-names", None)
    if m.class_names is not None:
        return _check_names(m.class_names, num_classes, m.class_names_origin, file)
    if m.coco and num_classes == 81:
        return list(coco_classes.COCO_81)
    if m.coco and num_classes == 91:
        return list(coco_classes.TORCHVISION_91)
    m.note(f"the training config does not name its {num_classes - 1} classes: wrote class_1..class_"
           f"{num_classes - 1} (give --class-names FILE for the real names)")
    return ["__background__"] + [f"class_{i}" for i in range(1, num_classes)]


# ---------------------------------------------------------------------------------------
# Which framework
# ---------------------------------------------------------------------------------------

def detect_framework(path):
    """detectron2 | mmdetection | torchvision from the file's extension and content; raises
    TrainConfigError when it cannot tell."""
    ext = os.path.splitext(path)[1].lower()
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read(1 << 20)
    except (OSError, UnicodeDecodeError) as e:
        raise TrainConfigError(None, f"cannot read: {e}", path) from None
    if ext in (".yaml", ".yml"):
        return "detectron2"
    if ext == ".json":
        return "torchvision"
    if ext == ".py":
        if text.lstrip().startswith("{"):
            return "torchvision"  # a Python-literal builder description
        if re.search(r"^\s*(from|import)\s+detectron2\b", text, re.M) or "LazyCall" in text:
            return "detectron2"
        if re.search(r"^\s*_base_\s*=", text, re.M) or re.search(r"\bdict\(\s*type\s*=", text):
            return "mmdetection"
        if re.search(r"^\s*from \.+\w", text, re.M):
            return "detectron2"  # a LazyConfig importing its sibling files only
    refuse("--framework", "cannot tell which framework this config is for: give --framework "
           "detectron2, mmdetection or torchvision", path)


def map_config(path, framework=None):
    """The Mapping of a training config (framework modules do the reading)."""
    if not os.path.isfile(path):
        refuse(None, "no such file", path)
    framework = framework or detect_framework(path)
    if framework == "detectron2":
        try:
            from . import train_config_d2 as mod
        except ImportError:
            import train_config_d2 as mod
    elif framework == "mmdetection":
        try:
            from . import train_config_mmdet as mod
        except ImportError:
            import train_config_mmdet as mod
    elif framework == "torchvision":
        try:
            from . import train_config_tv as mod
        except ImportError:
            import train_config_tv as mod
    else:
        refuse("--framework", f"unknown framework {framework!r} (one of {', '.join(FRAMEWORKS)})")
    return mod.read(path)


def build_config(path, framework=None, class_names=None):
    """(config dict with every key, Mapping)."""
    m = map_config(path, framework)
    cfg = assemble(m, path)
    n = cfg["classes"]["num_classes"]
    cfg["classes"]["class_names"] = class_names_for(m, n, class_names, path)
    cfg["name"] = config_name(path)
    return cfg, m


def config_name(path):
    stem = os.path.splitext(os.path.basename(path))[0] or "model"
    name = "trained_" + stem
    return name.encode("utf-8")[:127].decode("utf-8", "ignore")


def write_config(train_config_path, framework=None, class_names=None, out=None):
    """The `detect` config of a training config, as a dict with every key (the function
    end-to-end tests call); written atomically to `out` when given.  class_names: a list
    (with or without the background first) or None.  Raises TrainConfigError."""
    cfg, _ = build_config(train_config_path, framework, class_names)
    if out is not None:
        save(cfg, out)
    return cfg


# ---------------------------------------------------------------------------------------
# Writing
# ---------------------------------------------------------------------------------------

def _fmt_list(v):
    return "[" + ", ".join(_fmt_list(x) if isinstance(x, list) else json.dumps(x) for x in v) + "]"


def dumps(cfg):
    """JSON in the shipped configs' layout: sections indented, arrays on one line, class
    names wrapped."""
    def block(d, indent):
        pad = "  " * indent
        lines = []
        for i, (k, v) in enumerate(d.items()):
            comma = "," if i < len(d) - 1 else ""
            if isinstance(v, dict):
                lines.append(f"{pad}{json.dumps(k)}: {{")
                lines.extend(block(v, indent + 1))
                lines.append(f"{pad}}}{comma}")
            elif k == "class_names":
                lines.append(f"{pad}{json.dumps(k)}: [")
                row, rows = [], []
                for name in v:
                    item = json.dumps(name, ensure_ascii=False)
                    if row and len(pad) + 2 + len(", ".join(row + [item])) > 96:
                        rows.append(", ".join(row))
                        row = []
                    row.append(item)
                rows.append(", ".join(row))
                lines.extend(f"{pad}  {r}{',' if j < len(rows) - 1 else ''}" for j, r in enumerate(rows))
                lines.append(f"{pad}]{comma}")
            elif isinstance(v, list):
                lines.append(f"{pad}{json.dumps(k)}: {_fmt_list(v)}{comma}")
            else:
                lines.append(f"{pad}{json.dumps(k)}: {json.dumps(v)}{comma}")
        return lines
    return "{\n" + "\n".join(block(cfg, 1)) + "\n}\n"


def save(cfg, path):
    """Writes atomically: a temporary file in the destination folder, renamed into place."""
    text = dumps(cfg)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    except OSError as e:
        raise TrainConfigError(None, f"cannot write {path}: {e.strerror or e}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except OSError as e:
        _unlink(tmp)
        raise TrainConfigError(None, f"cannot write {path}: {e.strerror or e}") from None
    except BaseException:
        _unlink(tmp)
        raise


def _unlink(path):
    try:
        os.unlink(path)
    except OSError:
        pass


# ---------------------------------------------------------------------------------------
# The weights against the training config (convert.py --train-config)
# ---------------------------------------------------------------------------------------

def _trunk_norm(info_norm):
    return "batchnorm" if info_norm in ("batchnorm", "affine") else info_norm


# (config key, what convert.py's check_canonical inferred from the weights, words)
WEIGHT_CHECKS = (
    ("backbone.depth", lambda i: i["depth"], "ResNet depth"),
    ("backbone.stem_out_channels", lambda i: i["stem_out_channels"], "stem width"),
    ("backbone.res2_out_channels", lambda i: i["res2_out_channels"], "res2 width"),
    ("backbone.num_groups", lambda i: i["groups"], "3x3 conv groups"),
    ("backbone.width_per_group", lambda i: i["width_per_group"], "width per group"),
    ("backbone.norm", lambda i: _trunk_norm(i["norm"]), "trunk norm"),
    ("fpn.out_channels", lambda i: i["fpn_dim"], "FPN width"),
    ("fpn.norm", lambda i: i["fpn_norm"], "FPN norm"),
    ("rpn.num_convs", lambda i: i["rpn_num_convs"], "RPN convs"),
    ("box_head.num_convs", lambda i: i["box_head_num_convs"], "box head convs"),
    ("box_head.conv_dim", lambda i: i["box_head_conv_dim"] if i["box_head_num_convs"] else None,
     "box head conv width"),
    ("box_head.num_fcs", lambda i: i["box_head_num_fcs"], "box head FCs"),
    ("box_head.fc_dim", lambda i: i["representation"], "box head FC width"),
    ("box_head.norm", lambda i: i["box_head_norm"], "box head norm"),
    ("box_head.pooler.resolution", lambda i: i["pooler"], "box pooler size"),
    ("mask_head.num_convs", lambda i: i.get("mask_head_num_convs", 4), "mask head convs"),
    ("mask_head.conv_dim", lambda i: i["mask_dim"], "mask head width"),
    ("mask_head.norm", lambda i: i["mask_head_norm"], "mask head norm"),
    ("classes.num_classes", lambda i: i["num_classes"], "classes (with the background)"),
    ("box_head.class_agnostic_regression", lambda i: bool(i.get("box_head_class_agnostic")),
     "class-agnostic box regression"),
    ("mask_head.class_agnostic", lambda i: bool(i.get("mask_head_class_agnostic")), "class-agnostic masks"),
)


def check_weights(cfg, m, info, weights, file):
    """Refuses (TrainConfigError naming both) where the weights' architecture, as convert.py
    inferred it, is not the training config's."""
    for key, of, words in WEIGHT_CHECKS:
        want = of(info)
        if want is None:
            continue
        have = get_key(cfg, key)
        if have != want:
            origin = m.origin.get(key) or f"(default of {m.kind})"
            refuse(origin, f"the training config gives {words} {have!r} ({key}), the weights {weights} "
                   f"have {want!r}", file)
    anchors = len(cfg["anchors"]["aspect_ratios"]) * len(cfg["anchors"]["sizes"][0])
    if info.get("num_anchors") and anchors != info["num_anchors"]:
        refuse(m.origin.get("anchors.aspect_ratios") or m.origin.get("anchors.sizes"),
               f"the training config gives {anchors} anchors per position, the weights {weights} have "
               f"{info['num_anchors']} (rpn.objectness)", file)


# ---------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------

def report(cfg, m, out, verbose=False, stream=sys.stdout):
    bb, cl = cfg["backbone"], cfg["classes"]
    print(f"{out}: from the {m.kind} training config: R-{bb['depth']} FPN, {cl['num_classes'] - 1} classes "
          f"(+ background), {len(m.values)} settings from the training config", file=stream)
    if m.ignored:
        more = ": " + ", ".join(m.ignored) if verbose else " (-v lists them)"
        print(f"  ignored {len(m.ignored)} settings that do not change inference (training, runtime){more}",
              file=stream)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="train_config.py", description=(
        "Write the detect JSON config of a model from its training config (detectron2 yaml or "
        "LazyConfig, mmdetection .py, torchvision builder description); docs/zoos.md."))
    ap.add_argument("train_config", metavar="TRAIN_CONFIG")
    ap.add_argument("-o", "--output", required=True, metavar="OUT.json")
    ap.add_argument("--framework", choices=FRAMEWORKS, help="default: found from the file")
    ap.add_argument("--class-names", metavar="FILE", help="one name a line, or a JSON list")
    ap.add_argument("-v", "--verbose", action="store_true", help="list the settings ignored (training, runtime)")
    args = ap.parse_args(argv)
    try:
        names = read_class_names(args.class_names) if args.class_names else None
        cfg, m = build_config(args.train_config, args.framework, names)
        save(cfg, args.output)
    except TrainConfigError as e:
        if e.file is None and e.key != "--class-names":
            e.file = args.train_config
        print(f"train_config.py: {e}", file=sys.stderr)
        return 2
    for n in m.notes:
        print(f"train_config.py: {args.train_config}: note: {n}", file=sys.stderr)
    report(cfg, m, args.output, args.verbose)
    return 0


if __name__ == "__main__":
    # Run through the importable module, so that its readers' exceptions are this main's.
    sys.path.insert(0, HERE)
    import train_config
    sys.exit(train_config.main())
