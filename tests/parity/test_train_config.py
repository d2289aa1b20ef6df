"""models/train_config.py and convert.py --train-config: the detect config from a training config.

Run: build/venv-test/bin/python -m pytest -q tests/parity/test_train_config.py

For each framework: the zoo's own default config gives the shipped config's values; three
custom training configs give the values they set; every refusal names the file and the key,
exits 2 and writes nothing; each written config loads in the engine (config_load of
build/libdetect_internal.so).  The detectron2 yaml and LazyConfig files are written here (the
same structure as detectron2's configs/Base-RCNN-FPN.yaml and configs/common/); mmdetection's
are its own, from the mmdet wheel in build/venv-mmdet (skipped without it), and small ones
written here over them.  The sandbox of Python configs is checked with configs that loop,
allocate, write, spawn and print.
"""

import ctypes
import json
import os
import pickle
import subprocess
import sys
import textwrap

import pytest

from conftest import REPO, engine_library_path

MODELS = os.path.join(REPO, "models")
CONFIGS = os.path.join(REPO, "configs")
sys.path.insert(0, MODELS)
import coco_classes  # noqa: E402
import train_config as tc  # noqa: E402
import train_config_d2  # noqa: E402
import train_config_d2_defaults as d2_defaults  # noqa: E402
import train_config_sandbox as sandbox  # noqa: E402

TRAIN_CONFIG = os.path.join(MODELS, "train_config.py")
CONVERT = os.path.join(MODELS, "convert.py")
MMDET_CONFIGS = os.path.join(sandbox.MMDET_VENV, "lib", f"python{sys.version_info[0]}.{sys.version_info[1]}",
                             "site-packages", "mmdet", ".mim", "configs")
def needs_mmdet(test):
    """mmdetection's configs are read by mmengine from build/venv-mmdet, which make deps installs:
    without it these tests fail (they are part of make check), naming the fix."""
    import functools

    @functools.wraps(test)
    def run(*args, **kwargs):
        if sandbox.mmdet_python() is None or not os.path.isdir(MMDET_CONFIGS):
            pytest.fail(f"no mmdet venv at {sandbox.MMDET_VENV}: run make deps")
        return test(*args, **kwargs)
    return run


def flat(cfg, prefix=""):
    out = {}
    for k, v in cfg.items():
        if isinstance(v, dict):
            out.update(flat(v, f"{prefix}{k}."))
        else:
            out[prefix + k] = v
    return out


def shipped(name):
    with open(os.path.join(CONFIGS, name)) as f:
        return json.load(f)


def write(path, text):
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "w") as f:
        f.write(textwrap.dedent(text).lstrip())
    return str(path)


def cli(path, out, *extra, env=None):
    return subprocess.run([sys.executable, TRAIN_CONFIG, str(path), "-o", str(out), *extra],
                          capture_output=True, text=True, env=env, timeout=120)


# ---- the engine loads what is written ------------------------------------------------------

class _Err(ctypes.Structure):
    _fields_ = [("status", ctypes.c_int), ("msg", ctypes.c_char * 1024)]


@pytest.fixture(scope="module")
def engine_load(tmp_path_factory):
    lib = ctypes.CDLL(engine_library_path())
    folder = tmp_path_factory.mktemp("engine_load")

    def load(cfg):
        """Loads cfg (a dict) with the engine's config_load; fails with its message."""
        path = folder / "cfg.json"
        path.write_text(json.dumps(cfg))
        buf = ctypes.create_string_buffer(1 << 22)
        lib.config_defaults(buf)
        err = _Err()
        assert lib.config_load(buf, str(path).encode(), ctypes.byref(err)) == 0, \
            f"the engine refuses the config: {err.msg.decode()}"
    return load


def check_written(path, engine_load):
    """A written config: every key of the shipped configs, loads in the engine."""
    with open(path) as f:
        cfg = json.load(f)
    want = set(flat(shipped("mask_rcnn_R-101-FPN_detectron2.json")))
    assert set(flat(cfg)) == want
    engine_load(cfg)
    return cfg


def same_as_shipped(cfg, name, framework):
    """cfg's values are those of configs/<name>."""
    got, want = flat(cfg), flat(shipped(name))
    diff = {k: (got.get(k), want.get(k)) for k in set(got) | set(want) if k != "name" and got.get(k) != want.get(k)}
    assert not diff, diff


# ---- detectron2 yaml -----------------------------------------------------------------------

# The same keys and values as detectron2's configs/Base-RCNN-FPN.yaml.
D2_BASE = """
MODEL:
  META_ARCHITECTURE: "GeneralizedRCNN"
  BACKBONE:
    NAME: "build_resnet_fpn_backbone"
  RESNETS:
    OUT_FEATURES: ["res2", "res3", "res4", "res5"]
  FPN:
    IN_FEATURES: ["res2", "res3", "res4", "res5"]
  ANCHOR_GENERATOR:
    SIZES: [[32], [64], [128], [256], [512]]
    ASPECT_RATIOS: [[0.5, 1.0, 2.0]]
  RPN:
    IN_FEATURES: ["p2", "p3", "p4", "p5", "p6"]
    PRE_NMS_TOPK_TRAIN: 2000
    PRE_NMS_TOPK_TEST: 1000
    POST_NMS_TOPK_TRAIN: 1000
    POST_NMS_TOPK_TEST: 1000
  ROI_HEADS:
    NAME: "StandardROIHeads"
    IN_FEATURES: ["p2", "p3", "p4", "p5"]
  ROI_BOX_HEAD:
    NAME: "FastRCNNConvFCHead"
    NUM_FC: 2
    POOLER_RESOLUTION: 7
  ROI_MASK_HEAD:
    NAME: "MaskRCNNConvUpsampleHead"
    NUM_CONV: 4
    POOLER_RESOLUTION: 14
DATASETS:
  TRAIN: ("coco_2017_train",)
  TEST: ("coco_2017_val",)
SOLVER:
  IMS_PER_BATCH: 16
  BASE_LR: 0.02
  STEPS: (60000, 80000)
  MAX_ITER: 90000
INPUT:
  MIN_SIZE_TRAIN: (640, 672, 704, 736, 768, 800)
VERSION: 2
"""

# COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml
D2_R101_3X = """
_BASE_: "../Base-RCNN-FPN.yaml"
MODEL:
  WEIGHTS: "detectron2://ImageNetPretrained/MSRA/R-101.pkl"
  MASK_ON: True
  RESNETS:
    DEPTH: 101
SOLVER:
  STEPS: (210000, 250000)
  MAX_ITER: 270000
"""

# Misc/mask_rcnn_R_50_FPN_3x_gn.yaml
D2_GN = """
_BASE_: "../Base-RCNN-FPN.yaml"
MODEL:
  WEIGHTS: "catalog://ImageNetPretrained/FAIR/R-50-GN"
  MASK_ON: True
  RESNETS:
    DEPTH: 50
    NORM: "GN"
    STRIDE_IN_1X1: False
  FPN:
    NORM: "GN"
  ROI_BOX_HEAD:
    NAME: "FastRCNNConvFCHead"
    NUM_CONV: 4
    NUM_FC: 1
    NORM: "GN"
  ROI_MASK_HEAD:
    NORM: "GN"
SOLVER:
  STEPS: (210000, 250000)
  MAX_ITER: 270000
"""


@pytest.fixture
def d2_tree(tmp_path):
    write(tmp_path / "configs" / "Base-RCNN-FPN.yaml", D2_BASE)
    return tmp_path / "configs"


@pytest.mark.parametrize("text, shipped_name", [(D2_R101_3X, "mask_rcnn_R-101-FPN_detectron2.json"),
                                                (D2_GN, "mask_rcnn_R-50-FPN_detectron2_gn.json")],
                         ids=["R101_3x", "R50_3x_gn"])
def test_d2_zoo_yaml_gives_the_shipped_config(d2_tree, tmp_path, engine_load, text, shipped_name):
    path = write(d2_tree / "COCO-InstanceSegmentation" / "model.yaml", text)
    out = tmp_path / "out.json"
    r = cli(path, out, "-v")
    assert r.returncode == 0, r.stderr
    assert r.stderr == ""  # COCO's names: nothing to say
    assert "SOLVER.MAX_ITER" in r.stdout and "INPUT.MIN_SIZE_TRAIN" in r.stdout  # ignored, by name
    cfg = check_written(out, engine_load)
    same_as_shipped(cfg, shipped_name, "detectron2")
    assert cfg["classes"]["class_names"] == coco_classes.COCO_81
    assert cfg["name"] == "trained_model"


D2_CUSTOM = {
    # custom classes (named by --class-names), anchors, test size, class-agnostic heads, score
    # threshold and detections per image
    "agnostic": ("""
        _BASE_: "../Base-RCNN-FPN.yaml"
        MODEL:
          MASK_ON: True
          RESNETS: {DEPTH: 101}
          ANCHOR_GENERATOR:
            SIZES: [[16], [32], [64], [128], [256]]
            ASPECT_RATIOS: [[0.25, 0.5, 1.0, 2.0, 4.0]]
          ROI_HEADS:
            NUM_CLASSES: 3
            SCORE_THRESH_TEST: 0.3
          ROI_BOX_HEAD: {CLS_AGNOSTIC_BBOX_REG: True}
          ROI_MASK_HEAD: {CLS_AGNOSTIC_MASK: True}
        INPUT: {MIN_SIZE_TEST: 640, MAX_SIZE_TEST: 1024}
        TEST: {DETECTIONS_PER_IMAGE: 50}
        DATASETS:
          TEST: ("my_dataset_val",)
        """, ["cat", "dog", "bird"],
        {"classes.num_classes": 4, "classes.class_names": ["__background__", "cat", "dog", "bird"],
         "anchors.sizes": [[16.0], [32.0], [64.0], [128.0], [256.0]],
         "anchors.aspect_ratios": [0.25, 0.5, 1.0, 2.0, 4.0], "input.min_size": 640, "input.max_size": 1024,
         "box_head.class_agnostic_regression": True, "mask_head.class_agnostic": True,
         "box_head.score_thresh": 0.3, "box_head.detections_per_image": 50, "backbone.depth": 101}),
    # GroupNorm everywhere, 2 RPN convs, 2 anchor sizes per level, RGB input with ImageNet's
    # std, legacy RoIAlign, other RPN limits; names not given: class_1..
    "gn_rgb": ("""
        _BASE_: "../Base-RCNN-FPN.yaml"
        MODEL:
          MASK_ON: True
          PIXEL_MEAN: [123.675, 116.28, 103.53]
          PIXEL_STD: [58.395, 57.12, 57.375]
          RESNETS: {DEPTH: 50, NORM: "GN", STRIDE_IN_1X1: False}
          FPN: {NORM: "GN"}
          ANCHOR_GENERATOR:
            SIZES: [[32, 45.25], [64, 90.5], [128, 181], [256, 362], [512, 724]]
          RPN: {CONV_DIMS: [-1, -1], PRE_NMS_TOPK_TEST: 2000, POST_NMS_TOPK_TEST: 500, NMS_THRESH: 0.6}
          ROI_HEADS: {NUM_CLASSES: 7, NMS_THRESH_TEST: 0.6}
          ROI_BOX_HEAD: {NUM_CONV: 4, NUM_FC: 1, NORM: "GN", POOLER_TYPE: "ROIAlign", POOLER_SAMPLING_RATIO: 2}
          ROI_MASK_HEAD: {NORM: "GN", POOLER_TYPE: "ROIAlign", POOLER_SAMPLING_RATIO: 2}
        INPUT: {FORMAT: "RGB"}
        """, None,
        {"classes.num_classes": 8, "input.channel_order": "RGB", "input.pixel_mean": [123.675, 116.28, 103.53],
         "input.pixel_std": [58.395, 57.12, 57.375], "backbone.norm": "group_norm", "fpn.norm": "group_norm",
         "box_head.norm": "group_norm", "mask_head.norm": "group_norm", "backbone.stride_in_1x1": False,
         "anchors.sizes": [[32.0, 45.25], [64.0, 90.5], [128.0, 181.0], [256.0, 362.0], [512.0, 724.0]],
         "rpn.num_convs": 2, "rpn.pre_nms_top_n": 2000, "rpn.post_nms_top_n": 500, "rpn.nms_thresh": 0.6,
         "box_head.nms_thresh": 0.6, "box_head.agnostic_nms_thresh": 0.6, "box_head.num_convs": 4,
         "box_head.num_fcs": 1, "box_head.pooler.aligned": False, "box_head.pooler.sampling_ratio": 2,
         "mask_head.pooler.aligned": False, "mask_head.pooler.sampling_ratio": 2, "backbone.depth": 50,
         "classes.class_names": ["__background__"] + [f"class_{i}" for i in range(1, 8)]}),
    # a list of bases two deep, narrower heads, a 2-conv mask head, anchor offset, RPN min size,
    # box coder weights given as a tuple string, 81 classes on a custom dataset
    "narrow": ("""
        _BASE_: ["../Base-RCNN-FPN.yaml", "extra.yaml"]
        MODEL:
          FPN: {OUT_CHANNELS: 128}
          ANCHOR_GENERATOR: {OFFSET: 0.5}
          PROPOSAL_GENERATOR: {MIN_SIZE: 2}
          ROI_BOX_HEAD: {FC_DIM: 512, BBOX_REG_WEIGHTS: "(20.0, 20.0, 10.0, 10.0)"}
          ROI_MASK_HEAD: {CONV_DIM: 128, NUM_CONV: 2}
        DATASETS:
          TEST: ("my_val",)
        """, None,
        {"fpn.out_channels": 128, "anchors.offset": 0.5, "rpn.min_size": 2.0, "box_head.fc_dim": 512,
         "box_head.box_weights": [20.0, 20.0, 10.0, 10.0], "mask_head.conv_dim": 128, "mask_head.num_convs": 2,
         "backbone.depth": 152, "input.min_size": 600, "classes.num_classes": 81,
         "classes.class_names": ["__background__"] + [f"class_{i}" for i in range(1, 81)]}),
}


@pytest.mark.parametrize("name", sorted(D2_CUSTOM))
def test_d2_custom_yaml(d2_tree, tmp_path, engine_load, name):
    text, names, want = D2_CUSTOM[name]
    write(d2_tree / "mine" / "extra.yaml", """
        _BASE_: "deeper.yaml"
        MODEL: {MASK_ON: True, RESNETS: {DEPTH: 152}}
        """)
    write(d2_tree / "mine" / "deeper.yaml", "INPUT: {MIN_SIZE_TEST: 600}\n")
    path = write(d2_tree / "mine" / f"{name}.yaml", text)
    out = tmp_path / "out.json"
    extra = []
    if names:
        (tmp_path / "names.txt").write_text("\n".join(names) + "\n")
        extra = ["--class-names", str(tmp_path / "names.txt")]
    r = cli(path, out, *extra)
    assert r.returncode == 0, r.stderr
    cfg = check_written(out, engine_load)
    got = flat(cfg)
    assert {k: got[k] for k in want} == want
    assert ("class_1..class_" in r.stderr) == (names is None)
    # everything not set stays detectron2's
    base = flat(tc.load_base("detectron2"))
    m = tc.map_config(path)
    assert {k for k in got if got[k] != base[k]} - {"name"} <= set(m.values) | {"classes.class_names"}


def test_d2_class_names_as_json_with_background(d2_tree, tmp_path):
    path = write(d2_tree / "x" / "m.yaml", D2_CUSTOM["agnostic"][0])
    (tmp_path / "n.json").write_text('["bg", "cat", "dog", "bird"]')
    cfg = tc.write_config(path, class_names=tc.read_class_names(str(tmp_path / "n.json")))
    assert cfg["classes"]["class_names"] == ["bg", "cat", "dog", "bird"]
    for bad, needle in ((["a", "b"], "2 class names for 3 classes"), (["a", "a", "b"], "more than once"),
                        (["a", "", "b"], "1 to 63 bytes")):
        with pytest.raises(tc.TrainConfigError, match=needle):
            tc.write_config(path, class_names=bad)


def test_d2_defaults_table_is_complete():
    """Every key of the defaults table is training-only, inert or read by the mapping (and only
    one of them), and the mapping reads every key it does not ignore."""
    keys = list(d2_defaults.leaves(d2_defaults.DEFAULTS))
    assert len(keys) == len(set(keys)) == 192  # detectron2 02b5c4e's defaults.py
    for pattern in list(d2_defaults.TRAINING) + list(d2_defaults.INERT):
        assert any(k == pattern or (pattern.endswith(".") and k.startswith(pattern)) for k in keys), pattern
    both = [k for k in keys if d2_defaults._match(k, d2_defaults.TRAINING) and d2_defaults._match(k, d2_defaults.INERT)]
    assert not both
    for refused_by in d2_defaults.INERT.values():
        assert d2_defaults.group_of(refused_by) == "read"


def test_d2_mapping_reads_every_read_key(d2_tree):
    path = write(d2_tree / "x" / "m.yaml", D2_R101_3X.replace("../", "../"))
    m = train_config_d2.read_yaml(path)
    read = {k for k in d2_defaults.leaves(d2_defaults.DEFAULTS) if d2_defaults.group_of(k) == "read"}
    assert read - m.read_keys == set()


D2_REFUSALS = [
    # (yaml over a Mask R-CNN R-101 config, the key named, words of the reason)
    ("MODEL: {META_ARCHITECTURE: RetinaNet}", "MODEL.META_ARCHITECTURE", "GeneralizedRCNN"),
    ("MODEL: {MASK_ON: False}", "MODEL.MASK_ON", "MASK_ON"),
    ("MODEL: {KEYPOINT_ON: True}", "MODEL.KEYPOINT_ON", "keypoint"),
    ("MODEL: {LOAD_PROPOSALS: True}", "MODEL.LOAD_PROPOSALS", "precomputed"),
    ("MODEL: {ROI_HEADS: {NAME: CascadeROIHeads}}", "MODEL.ROI_HEADS.NAME", "cascade"),
    ("MODEL: {ROI_HEADS: {NAME: RROIHeads}}", "MODEL.ROI_HEADS.NAME", "rotated"),
    ("MODEL: {RESNETS: {DEFORM_ON_PER_STAGE: [False, True, True, True]}}", "MODEL.RESNETS.DEFORM_ON_PER_STAGE",
     "deformable"),
    ("MODEL: {BACKBONE: {NAME: build_resnet_backbone}}", "MODEL.BACKBONE.NAME", "FPN"),
    ("MODEL: {ANCHOR_GENERATOR: {NAME: RotatedAnchorGenerator}}", "MODEL.ANCHOR_GENERATOR.NAME", "rotated"),
    ("MODEL: {ANCHOR_GENERATOR: {ANGLES: [[-60, 0, 60]]}}", "MODEL.ANCHOR_GENERATOR.ANGLES", "rotated"),
    ("MODEL: {PROPOSAL_GENERATOR: {NAME: RRPN}}", "MODEL.PROPOSAL_GENERATOR.NAME", "RRPN"),
    ("TEST: {AUG: {ENABLED: True}}", "TEST.AUG.ENABLED", "test-time augmentation"),
    ("INPUT: {MIN_SIZE_TEST: 0}", "INPUT.MIN_SIZE_TEST", "always resizes"),
    ("INPUT: {MIN_SIZE_TEST: 1400}", "INPUT.MIN_SIZE_TEST", "larger than the maximum"),
    ("INPUT: {FORMAT: L}", "INPUT.FORMAT", "BGR or RGB"),
    ("MODEL: {RESNETS: {NORM: LN}}", "MODEL.RESNETS.NORM", "BatchNorm"),
    ("MODEL: {RESNETS: {NORM: ''}}", "MODEL.RESNETS.NORM", "without norms"),
    ("MODEL: {RESNETS: {NUM_GROUPS: 32, WIDTH_PER_GROUP: 8}}", "MODEL.RESNETS.NUM_GROUPS", "grouped"),
    ("MODEL: {RESNETS: {DEPTH: 34, RES2_OUT_CHANNELS: 64}}", "MODEL.RESNETS.DEPTH", "basic blocks"),
    ("MODEL: {RESNETS: {RES5_DILATION: 2}}", "MODEL.RESNETS.RES5_DILATION", "dilation"),
    ("MODEL: {FPN: {FUSE_TYPE: avg}}", "MODEL.FPN.FUSE_TYPE", "sums"),
    ("MODEL: {RPN: {HEAD_NAME: MyRPNHead}}", "MODEL.RPN.HEAD_NAME", "StandardRPNHead"),
    ("MODEL: {RPN: {CONV_DIMS: [128]}}", "MODEL.RPN.CONV_DIMS", "as wide as the FPN"),
    ("MODEL: {ANCHOR_GENERATOR: {SIZES: [[32, 64, 128, 256, 512]]}}", "MODEL.ANCHOR_GENERATOR.SIZES", "1 to 4"),
    ("MODEL: {ANCHOR_GENERATOR: {ASPECT_RATIOS: [[0.5], [1.0], [2.0], [1.0], [1.0]]}}",
     "MODEL.ANCHOR_GENERATOR.ASPECT_RATIOS", "one list"),
    ("MODEL: {ROI_BOX_HEAD: {NUM_FC: 0}}", "MODEL.ROI_BOX_HEAD.NUM_FC", "without FC"),
    ("MODEL: {ROI_BOX_HEAD: {POOLER_TYPE: ROIPool}}", "MODEL.ROI_BOX_HEAD.POOLER_TYPE", "ROIAlignV2"),
    ("MODEL: {ROI_MASK_HEAD: {POOLER_TYPE: ROIAlignRotated}}", "MODEL.ROI_MASK_HEAD.POOLER_TYPE", "ROIAlignV2"),
    ("MODEL: {ROI_BOX_HEAD: {USE_SIGMOID_CE: True}}", "MODEL.ROI_BOX_HEAD.USE_SIGMOID_CE", "softmax"),
    ("MODEL: {ROI_BOX_HEAD: {NAME: MyBoxHead}}", "MODEL.ROI_BOX_HEAD.NAME", "FastRCNNConvFCHead"),
    ("MODEL: {ROI_MASK_HEAD: {NAME: PointRendMaskHead}}", "MODEL.ROI_MASK_HEAD.NAME", "MaskRCNNConvUpsampleHead"),
    ("MODEL: {ROI_HEADS: {NUM_CLASSES: 2000}}", "MODEL.ROI_HEADS.NUM_CLASSES", "[2,1024]"),
    ("MODEL: {ROI_HEADS: {SCORE_THRESH_TEST: 0}}", "MODEL.ROI_HEADS.SCORE_THRESH_TEST", "CfgNode refuses"),
    ("MODEL: {ROI_HEADS: {SCORE_TRESH_TEST: 0.1}}", "MODEL.ROI_HEADS.SCORE_TRESH_TEST", "did you mean"),
    ("MODEL: {POINT_HEAD: {NUM_CLASSES: 80}}", "MODEL.POINT_HEAD", "add_*_config"),
    ("VERSION: 1", "VERSION", "compat"),
    ("_BASE_: missing.yaml", "_BASE_", "no such file"),
    ("_BASE_: https://example.com/base.yaml", "_BASE_", "URL"),
    ("_BASE_: m.yaml", "_BASE_", "comes back"),
]


@pytest.mark.parametrize("text, key, words", D2_REFUSALS, ids=[f"{i}-{c[1]}" for i, c in enumerate(D2_REFUSALS)])
def test_d2_refusals(d2_tree, tmp_path, text, key, words):
    write(d2_tree / "x" / "r101.yaml", D2_R101_3X)
    path = write(d2_tree / "x" / "m.yaml", ("_BASE_: r101.yaml\n" if "_BASE_" not in text else "") + text + "\n")
    expect_refusal(path, tmp_path / "out.json", key, words)


def expect_refusal(path, out, key, words, env=None, file=None):
    r = cli(path, out, env=env)
    assert r.returncode == 2, (r.stdout, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith(f"train_config.py: {file or path}: {key}"), lines[0]
    assert words in lines[0], lines[0]
    assert not os.path.exists(out)
    assert not [f for f in os.listdir(os.path.dirname(str(out))) if f.startswith(os.path.basename(str(out)))]


def test_d2_refusal_names_the_base_that_set_the_key(d2_tree, tmp_path):
    write(d2_tree / "x" / "cascade.yaml", "_BASE_: ../Base-RCNN-FPN.yaml\nMODEL: {ROI_HEADS: {NAME: CascadeROIHeads}}\n")
    path = write(d2_tree / "x" / "m.yaml", "_BASE_: cascade.yaml\nMODEL: {MASK_ON: True}\n")
    r = cli(path, tmp_path / "o.json")
    assert r.returncode == 2
    assert f"{path}: MODEL.ROI_HEADS.NAME (set in cascade.yaml): 'CascadeROIHeads'" in r.stderr


def test_d2_python_yaml_tags_are_not_run(d2_tree, tmp_path):
    marker = tmp_path / "ran"
    path = write(d2_tree / "x" / "m.yaml",
                 f"_BASE_: ../Base-RCNN-FPN.yaml\nMODEL: !!python/object/apply:os.system ['touch {marker}']\n")
    r = cli(path, tmp_path / "o.json")
    assert r.returncode == 2 and "python objects are not loaded" in r.stderr
    assert not marker.exists()


# ---- detectron2 LazyConfig -----------------------------------------------------------------

# Our own LazyConfig-style files, laid out as detectron2's configs/common/: models/, data/.
LAZY_MODEL = """
from detectron2.config import LazyCall as L
from detectron2.layers import ShapeSpec
from detectron2.modeling.meta_arch import GeneralizedRCNN
from detectron2.modeling.anchor_generator import DefaultAnchorGenerator
from detectron2.modeling.backbone.fpn import LastLevelMaxPool
from detectron2.modeling.backbone import BasicStem, FPN, ResNet
from detectron2.modeling.box_regression import Box2BoxTransform
from detectron2.modeling.matcher import Matcher
from detectron2.modeling.poolers import ROIPooler
from detectron2.modeling.proposal_generator import RPN, StandardRPNHead
from detectron2.modeling.roi_heads import (StandardROIHeads, FastRCNNOutputLayers, MaskRCNNConvUpsampleHead,
                                           FastRCNNConvFCHead)

from ..data.constants import constants

model = L(GeneralizedRCNN)(
    backbone=L(FPN)(
        bottom_up=L(ResNet)(
            stem=L(BasicStem)(in_channels=3, out_channels=64, norm="FrozenBN"),
            stages=L(ResNet.make_default_stages)(depth=50, stride_in_1x1=True, norm="FrozenBN"),
            out_features=["res2", "res3", "res4", "res5"],
        ),
        in_features="${.bottom_up.out_features}",
        out_channels=256,
        top_block=L(LastLevelMaxPool)(),
    ),
    proposal_generator=L(RPN)(
        in_features=["p2", "p3", "p4", "p5", "p6"],
        head=L(StandardRPNHead)(in_channels=256, num_anchors=3),
        anchor_generator=L(DefaultAnchorGenerator)(
            sizes=[[32], [64], [128], [256], [512]], aspect_ratios=[0.5, 1.0, 2.0],
            strides=[4, 8, 16, 32, 64], offset=0.0),
        anchor_matcher=L(Matcher)(thresholds=[0.3, 0.7], labels=[0, -1, 1], allow_low_quality_matches=True),
        box2box_transform=L(Box2BoxTransform)(weights=[1.0, 1.0, 1.0, 1.0]),
        batch_size_per_image=256,
        positive_fraction=0.5,
        pre_nms_topk=(2000, 1000),
        post_nms_topk=(1000, 1000),
        nms_thresh=0.7,
    ),
    roi_heads=L(StandardROIHeads)(
        num_classes=80,
        batch_size_per_image=512,
        positive_fraction=0.25,
        proposal_matcher=L(Matcher)(thresholds=[0.5], labels=[0, 1], allow_low_quality_matches=False),
        box_in_features=["p2", "p3", "p4", "p5"],
        box_pooler=L(ROIPooler)(output_size=7, scales=(1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32), sampling_ratio=0,
                                pooler_type="ROIAlignV2"),
        box_head=L(FastRCNNConvFCHead)(input_shape=ShapeSpec(channels=256, height=7, width=7), conv_dims=[],
                                       fc_dims=[1024, 1024]),
        box_predictor=L(FastRCNNOutputLayers)(
            input_shape=ShapeSpec(channels=1024),
            test_score_thresh=0.05,
            box2box_transform=L(Box2BoxTransform)(weights=(10, 10, 5, 5)),
            num_classes="${..num_classes}",
        ),
        mask_in_features=["p2", "p3", "p4", "p5"],
        mask_pooler=L(ROIPooler)(output_size=14, scales=(1.0 / 4, 1.0 / 8, 1.0 / 16, 1.0 / 32), sampling_ratio=0,
                                 pooler_type="ROIAlignV2"),
        mask_head=L(MaskRCNNConvUpsampleHead)(input_shape=ShapeSpec(channels=256, width=14, height=14),
                                              num_classes="${..num_classes}", conv_dims=[256, 256, 256, 256, 256]),
    ),
    pixel_mean=constants.imagenet_bgr256_mean,
    pixel_std=constants.imagenet_bgr256_std,
    input_format="BGR",
)
"""

LAZY_DATA = """
from omegaconf import OmegaConf

import detectron2.data.transforms as T
from detectron2.config import LazyCall as L
from detectron2.data import DatasetMapper, build_detection_test_loader, build_detection_train_loader
from detectron2.data import get_detection_dataset_dicts

dataloader = OmegaConf.create()
dataloader.train = L(build_detection_train_loader)(
    dataset=L(get_detection_dataset_dicts)(names="coco_2017_train"),
    mapper=L(DatasetMapper)(
        is_train=True,
        augmentations=[L(T.ResizeShortestEdge)(short_edge_length=(640, 800), sample_style="choice", max_size=1333),
                       L(T.RandomFlip)(horizontal=True)],
        image_format="BGR",
        use_instance_mask=True,
    ),
    total_batch_size=16,
    num_workers=4,
)
dataloader.test = L(build_detection_test_loader)(
    dataset=L(get_detection_dataset_dicts)(names="coco_2017_val", filter_empty=False),
    mapper=L(DatasetMapper)(
        is_train=False,
        augmentations=[L(T.ResizeShortestEdge)(short_edge_length=800, max_size=1333)],
        image_format="${...train.mapper.image_format}",
    ),
    num_workers=4,
)
"""

LAZY_CONSTANTS = """
constants = dict(
    imagenet_bgr256_mean=[103.530, 116.280, 123.675],
    imagenet_bgr256_std=[1.0, 1.0, 1.0],
)
"""

LAZY_TRAIN = "train = dict(output_dir='./output', max_iter=90000, amp=dict(enabled=False))\n"

# As new_baselines/mask_rcnn_R_50_FPN_100ep_LSJ.py + the R-101 file: the LSJ config.
LAZY_LSJ = """
import torch
import detectron2.data.transforms as T
from detectron2.config.lazy import LazyCall as L
from detectron2.layers.batch_norm import NaiveSyncBatchNorm

from ..common.data.coco import dataloader
from ..common.models.mask_rcnn_fpn import model
from ..common.train import train

optimizer = L(torch.optim.SGD)(lr=0.1, momentum=0.9, weight_decay=4e-5)
train.max_iter = 184375
model.backbone.bottom_up.freeze_at = 0
model.backbone.bottom_up.stem.norm = model.backbone.bottom_up.stages.norm = model.backbone.norm = "SyncBN"
model.roi_heads.box_head.conv_norm = model.roi_heads.mask_head.conv_norm = lambda c: NaiveSyncBatchNorm(
    c, stats_mode="N")
model.proposal_generator.head.conv_dims = [-1, -1]
model.roi_heads.box_head.conv_dims = [256, 256, 256, 256]
model.roi_heads.box_head.fc_dims = [1024]
image_size = 1024
dataloader.train.mapper.augmentations = [
    L(T.ResizeScale)(min_scale=0.1, max_scale=2.0, target_height=image_size, target_width=image_size),
    L(T.FixedSizeCrop)(crop_size=(image_size, image_size)),
    L(T.RandomFlip)(horizontal=True),
]
model.backbone.bottom_up.stages.depth = 101
"""


@pytest.fixture
def lazy_tree(tmp_path):
    root = tmp_path / "configs"
    write(root / "common" / "models" / "mask_rcnn_fpn.py", LAZY_MODEL)
    write(root / "common" / "data" / "coco.py", LAZY_DATA)
    write(root / "common" / "data" / "constants.py", LAZY_CONSTANTS)
    write(root / "common" / "train.py", LAZY_TRAIN)
    return root


def test_lazy_lsj_gives_the_shipped_config(lazy_tree, tmp_path, engine_load):
    path = write(lazy_tree / "new_baselines" / "lsj_r101.py", LAZY_LSJ)
    out = tmp_path / "out.json"
    r = cli(path, out, "-v")
    assert r.returncode == 0, r.stderr
    cfg = check_written(out, engine_load)
    same_as_shipped(cfg, "mask_rcnn_R-101-FPN_detectron2_LSJ.json", "detectron2")
    assert "detectron2 LazyConfig" in r.stdout and "optimizer" in r.stdout and "model.backbone.bottom_up.freeze_at" in r.stdout


def test_lazy_plain_model_is_the_classic_config(lazy_tree, tmp_path):
    path = write(lazy_tree / "mine" / "r50.py", """
        from ..common.data.coco import dataloader
        from ..common.models.mask_rcnn_fpn import model
        """)
    cfg = tc.write_config(path)
    want = flat(shipped("mask_rcnn_R-50-FPN_detectron2.json"))
    got = flat(cfg)
    assert {k: got[k] for k in want if k != "name"} == {k: v for k, v in want.items() if k != "name"}


LAZY_CUSTOM = {
    "agnostic": ("""
        from detectron2.config import LazyCall as L
        from ..common.data.coco import dataloader
        from ..common.models.mask_rcnn_fpn import model
        model.roi_heads.num_classes = 3
        model.roi_heads.box_predictor.cls_agnostic_bbox_reg = True
        model.roi_heads.box_predictor.test_score_thresh = 0.4
        model.roi_heads.box_predictor.test_topk_per_image = 30
        model.roi_heads.mask_head.num_classes = 1
        model.proposal_generator.anchor_generator.sizes = [[24], [48], [96], [192], [384]]
        model.proposal_generator.anchor_generator.aspect_ratios = [[0.5, 1.0, 2.0, 3.0]]
        dataloader.test.mapper.augmentations[0].short_edge_length = 512
        dataloader.test.mapper.augmentations[0].max_size = 853
        dataloader.test.dataset.names = "my_val"
        """, ["a", "b", "c"],
        {"classes.num_classes": 4, "box_head.class_agnostic_regression": True, "mask_head.class_agnostic": True,
         "box_head.score_thresh": 0.4, "box_head.detections_per_image": 30, "input.min_size": 512,
         "input.max_size": 853, "anchors.sizes": [[24.0], [48.0], [96.0], [192.0], [384.0]],
         "anchors.aspect_ratios": [0.5, 1.0, 2.0, 3.0], "classes.class_names": ["__background__", "a", "b", "c"]}),
    "gn": ("""
        import torch.nn as nn
        from ..common.data.coco import dataloader
        from ..common.models.mask_rcnn_fpn import model
        model.backbone.bottom_up.stem.norm = model.backbone.bottom_up.stages.norm = "GN"
        model.backbone.bottom_up.stages.stride_in_1x1 = False
        model.backbone.norm = "GN"
        model.roi_heads.box_head.conv_dims = [256] * 4
        model.roi_heads.box_head.fc_dims = [1024]
        model.roi_heads.box_head.conv_norm = lambda c: nn.GroupNorm(16, c)
        model.roi_heads.mask_head.conv_norm = "GN"
        model.pixel_std = [57.375, 57.12, 58.395]
        model.proposal_generator.anchor_generator.offset = 0.5
        """, None,
        {"backbone.norm": "group_norm", "fpn.norm": "group_norm", "box_head.norm": "group_norm",
         "box_head.norm_groups": 16, "mask_head.norm": "group_norm", "mask_head.norm_groups": 32,
         "backbone.stride_in_1x1": False, "box_head.num_convs": 4, "box_head.num_fcs": 1,
         "input.pixel_std": [57.375, 57.12, 58.395], "anchors.offset": 0.5,
         "classes.class_names": coco_classes.COCO_81}),
    "loaded": ("""
        from detectron2.config import LazyConfig
        from ..common.data.coco import dataloader
        model = LazyConfig.load_rel("../common/models/mask_rcnn_fpn.py", "model")
        model.roi_heads.box_pooler.sampling_ratio = 2
        model.roi_heads.box_pooler.pooler_type = "ROIAlign"
        model.roi_heads.box_predictor.test_nms_thresh = 0.3
        model.proposal_generator.nms_thresh = 0.8
        model.proposal_generator.post_nms_topk = (2000, 300)
        model.input_format = "RGB"
        model.pixel_mean = [123.675, 116.28, 103.53]
        dataloader.train.mapper.image_format = "RGB"
        """, None,
        {"box_head.pooler.sampling_ratio": 2, "box_head.pooler.aligned": False, "box_head.nms_thresh": 0.3,
         "rpn.nms_thresh": 0.8, "rpn.post_nms_top_n": 300, "input.channel_order": "RGB",
         "input.pixel_mean": [123.675, 116.28, 103.53]}),
}


@pytest.mark.parametrize("name", sorted(LAZY_CUSTOM))
def test_lazy_custom(lazy_tree, tmp_path, engine_load, name):
    text, names, want = LAZY_CUSTOM[name]
    path = write(lazy_tree / "mine" / f"{name}.py", text)
    cfg = tc.write_config(path, class_names=names, out=str(tmp_path / "out.json"))
    check_written(tmp_path / "out.json", engine_load)
    got = flat(cfg)
    assert {k: got[k] for k in want} == want


def test_lazy_saved_yaml(lazy_tree, tmp_path, engine_load):
    """The config.yaml a LazyConfig training run saves (LazyConfig.save): targets as strings, read
    as data; a function (a norm given as a lambda) saved as a python/name tag is a name, not
    imported, and refused because its norm cannot be known from it."""
    import yaml
    tree = sandbox.run_child("lazy", write(lazy_tree / "mine" / "r50.py", """
        from ..common.data.coco import dataloader
        from ..common.models.mask_rcnn_fpn import model
        model.roi_heads.num_classes = 5
        """))
    path = write(tmp_path / "run" / "config.yaml", yaml.safe_dump(tree))
    cfg = tc.write_config(path)
    assert cfg["classes"]["num_classes"] == 6 and cfg["backbone"]["depth"] == 50
    engine_load(cfg)
    tree["model"]["roi_heads"]["mask_head"]["conv_norm"] = "NORM"
    text = yaml.safe_dump(tree).replace("conv_norm: NORM", "conv_norm: !!python/name:mine.lsj.%3Clambda%3E ''")
    bad = write(tmp_path / "run2" / "config.yaml", text)
    with pytest.raises(tc.TrainConfigError, match="model.roi_heads.mask_head.conv_norm: norm"):
        tc.write_config(bad)


LAZY_REFUSALS = [
    ("model.roi_heads._target_ = 'detectron2.modeling.roi_heads.CascadeROIHeads'", "model.roi_heads._target_",
     "cascade"),
    ("model.roi_heads.keypoint_head = L(KRCNNConvDeconvUpsampleHead)(num_keypoints=17)",
     "model.roi_heads.keypoint_head", "keypoint"),
    ("model.backbone.norm = 'LN'", "model.backbone.norm", "BatchNorm"),
    ("model.backbone.bottom_up.stages.block_class = DeformBottleneckBlock",
     "model.backbone.bottom_up.stages.block_class", "BottleneckBlock"),
    ("model.backbone.top_block = L(LastLevelP6P7)(in_channels=2048, out_channels=256)",
     "model.backbone.top_block._target_", "RetinaNet"),
    ("model.backbone.square_pad = 1024", "model.backbone.square_pad", "square"),
    ("model.roi_heads.box_predictor.use_sigmoid_ce = True", "model.roi_heads.box_predictor.use_sigmoid_ce",
     "softmax"),
    ("model.roi_heads.box_predictor.test_unknown = 1", "model.roi_heads.box_predictor.test_unknown", "not an argument"),
    ("model.roi_heads.box_head.conv_dims = [256, 128]", "model.roi_heads.box_head.conv_dims", "one width"),
    ("model.roi_heads.mask_head.num_classes = 7", "model.roi_heads.mask_head.num_classes", "mask classes"),
    ("model.proposal_generator.anchor_generator.strides = [8, 16, 32, 64, 128]",
     "model.proposal_generator.anchor_generator.strides", "P2..P6"),
    ("model.proposal_generator.box2box_transform.scale_clamp = 3.0",
     "model.proposal_generator.box2box_transform.scale_clamp", "one box.bbox_xform_clip"),
    ("dataloader.test.mapper.augmentations.append(L(T.RandomFlip)())", "dataloader.test.mapper.augmentations",
     "one ResizeShortestEdge"),
    ("dataloader.test.mapper.augmentations[0].short_edge_length = (640, 800)",
     "dataloader.test.mapper.augmentations.0.short_edge_length", "random test size"),
    ("del dataloader.test.mapper.augmentations[0].max_size", "dataloader.test.mapper.augmentations.0.max_size",
     "cap"),
    ("model.input_format = 'RGB'", "model.input_format", "test mapper reads 'BGR'"),
    ("model.roi_heads.box_predictor.num_classes = '${..missing}'", "model.roi_heads.box_predictor.num_classes",
     "'missing' not found"),
    ("del dataloader.test", "dataloader.test", "test-time resize is unknown"),
]


@pytest.mark.parametrize("line, key, words", LAZY_REFUSALS, ids=[c[1] for c in LAZY_REFUSALS])
def test_lazy_refusals(lazy_tree, tmp_path, line, key, words):
    path = write(lazy_tree / "mine" / "m.py", """
        import detectron2.data.transforms as T
        from detectron2.config import LazyCall as L
        from detectron2.modeling.roi_heads import KRCNNConvDeconvUpsampleHead
        from detectron2.modeling.backbone.resnet import DeformBottleneckBlock
        from detectron2.modeling.backbone.fpn import LastLevelP6P7
        from ..common.data.coco import dataloader
        from ..common.models.mask_rcnn_fpn import model
        """ + line + "\n")
    expect_refusal(path, tmp_path / "out.json", key, words)


SANDBOX_CASES = [
    # (config body, words of the error)
    ("raise ValueError('my own error')", "m.py:2: ValueError: my own error"),
    ("from .nonexistent import model", "nonexistent.py does not exist"),
    ("from . import sibling", "Relative import of directories"),
    ("open('/tmp/written-by-a-config', 'w').write('x')", "refuses writing '/tmp/written-by-a-config'"),
    ("import os\nos.remove('/etc/hostname')", "refuses os.remove"),
    ("import subprocess\nsubprocess.run(['true'])", "refuses subprocess.Popen"),
    ("import os\nos.system('true')", "refuses os.system"),
    ("import socket\nsocket.create_connection(('127.0.0.1', 9))", "refuses socket"),
    ("import ctypes", "refuses ctypes"),
    ("import sys\nsys.exit(3)", "exit(3)"),
    ("print('noise ' * 1000)\nraise KeyError('after printing')", "KeyError: 'after printing'"),
]


@pytest.mark.parametrize("body, words", SANDBOX_CASES, ids=[c[1][:30] for c in SANDBOX_CASES])
def test_sandbox_refuses_and_reports(lazy_tree, tmp_path, body, words):
    path = write(lazy_tree / "mine" / "m.py", "from ..common.models.mask_rcnn_fpn import model\n" + body + "\n")
    with pytest.raises(tc.TrainConfigError) as e:
        tc.write_config(path, out=str(tmp_path / "o.json"))
    assert words in str(e.value) and str(e.value).startswith(path + ": cannot load the LazyConfig:")
    assert not os.path.exists("/tmp/written-by-a-config") and not (tmp_path / "o.json").exists()


def test_sandbox_limits(lazy_tree, tmp_path, monkeypatch):
    """A config that loops is stopped by the CPU limit, one that sleeps by the wall-clock limit,
    one that allocates by the memory limit; each is one line."""
    monkeypatch.setattr(sandbox, "CPU_SECONDS", 1)
    monkeypatch.setattr(sandbox, "WALL_SECONDS", 4)
    monkeypatch.setattr(sandbox, "ADDRESS_SPACE", 512 << 20)
    for body, words in (("while True:\n    pass", "the CPU limit (1 s)"),
                        ("import time\ntime.sleep(30)", "more than 4 s"),
                        ("x = bytearray(1 << 31)", "MemoryError")):
        path = write(lazy_tree / "mine" / "m.py", body + "\n")
        with pytest.raises(tc.TrainConfigError) as e:
            tc.write_config(path, framework="detectron2")
        assert words in str(e.value), str(e.value)


def test_sandbox_environment(lazy_tree, tmp_path, monkeypatch):
    """The child sees a scrubbed environment, a temporary working folder and no site-packages."""
    monkeypatch.setenv("SECRET_TOKEN", "xyz")
    path = write(lazy_tree / "mine" / "env.py", """
        import os, sys
        probe = dict(env=sorted(os.environ), cwd=os.getcwd(), path=[p for p in sys.path if 'site-packages' in p
                                                                      or 'dist-packages' in p])
        """)
    tree = sandbox.run_child("lazy", path)
    assert set(tree["probe"]["env"]) - {"LC_CTYPE"} == {"HOME", "LANG", "PATH", "TMPDIR", "OMP_NUM_THREADS",
                                                       "OPENBLAS_NUM_THREADS"}
    assert os.path.basename(tree["probe"]["cwd"]).startswith("detect-train-config-")
    assert tree["probe"]["path"] == []
    assert not os.path.exists(tree["probe"]["cwd"])  # removed after


# ---- mmdetection ---------------------------------------------------------------------------

# mmdetection's test-time conventions as engine keys (zoo_variants.md §3), where they differ
# from detectron2's
MMDET_CONVENTIONS = {
    "input.channel_order": "RGB",
    "input.pixel_mean": [123.675, 116.28, 103.53],
    "input.pixel_std": [58.395, 57.12, 57.375],
    "input.resize_rounding": "mmdet",
    "input.resize_method": "cv2_linear_uint8",
    "backbone.stride_in_1x1": False,
    "rpn.rank_by_logit": False,
    "box.bbox_xform_clip_rule": "symmetric",
    "box_head.pooler.canonical_size": 56,
    "box_head.pooler.canonical_level": 2,
    "box_head.pooler.level_eps": 1e-06,
    "box_head.pooler.level_eps_inside_log": True,
    "box_head.clip_final_boxes": False,
    "mask_head.pooler.canonical_size": 56,
    "mask_head.pooler.canonical_level": 2,
    "mask_head.pooler.level_eps": 1e-06,
    "mask_head.pooler.level_eps_inside_log": True,
}


def mmdet_config(rel):
    return os.path.join(MMDET_CONFIGS, rel)


@needs_mmdet
def test_mmdet_zoo_r101_gives_the_mmdet_config(tmp_path, engine_load):
    """mask-rcnn_r101_fpn_1x_coco.py gives the shipped configs/mask_rcnn_R-101-FPN_mmdetection.json
    exactly, and that has mmdetection's conventions as shared/reference/zoo_variants.md §3 states
    them (written out here, not read from the converter)."""
    out = tmp_path / "out.json"
    r = cli(mmdet_config("mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py"), out)
    assert r.returncode == 0, r.stderr
    cfg = check_written(out, engine_load)
    got = flat(cfg)
    for key, value in MMDET_CONVENTIONS.items():
        assert got[key] == value, key
    assert got["classes.class_names"] == coco_classes.COCO_81
    same_as_shipped(cfg, tc.BASE_FILES["mmdetection"], "mmdetection")


@needs_mmdet
@pytest.mark.parametrize("rel, want", [
    ("mask_rcnn/mask-rcnn_r101-caffe_fpn_1x_coco.py",
     {"input.channel_order": "BGR", "input.pixel_mean": [103.53, 116.28, 123.675],
      "input.pixel_std": [1.0, 1.0, 1.0], "backbone.stride_in_1x1": True}),
    ("mask_rcnn/mask-rcnn_r101_fpn_ms-poly-3x_coco.py", {}),
    ("mask_rcnn/mask-rcnn_r101-caffe_fpn_ms-poly-3x_coco.py",
     {"input.channel_order": "BGR", "input.pixel_mean": [103.53, 116.28, 123.675],
      "input.pixel_std": [1.0, 1.0, 1.0], "backbone.stride_in_1x1": True}),
    ("strong_baselines/mask-rcnn_r50_fpn_rpn-2conv_4conv1fc_syncbn-all_lsj-100e_coco.py",
     {"backbone.depth": 50, "fpn.norm": "batchnorm", "rpn.num_convs": 2, "box_head.num_convs": 4,
      "box_head.num_fcs": 1, "box_head.norm": "batchnorm", "mask_head.norm": "batchnorm"}),
    ("gn/mask-rcnn_r101_fpn_gn-all_2x_coco.py",
     {"backbone.norm": "group_norm", "fpn.norm": "group_norm", "box_head.norm": "group_norm",
      "mask_head.norm": "group_norm", "box_head.num_convs": 4, "box_head.num_fcs": 1,
      "input.channel_order": "BGR", "input.pixel_mean": [103.53, 116.28, 123.675],
      "input.pixel_std": [1.0, 1.0, 1.0]}),  # pytorch style, detectron's BGR GN weights
], ids=["caffe_1x", "ms_poly_3x", "caffe_ms_poly_3x", "strong_lsj", "gn_all"])
def test_mmdet_zoo_variants(tmp_path, engine_load, rel, want):
    out = tmp_path / "out.json"
    r = cli(mmdet_config(rel), out)
    assert r.returncode == 0, r.stderr
    got = flat(check_written(out, engine_load))
    base = flat(tc.load_base("mmdetection"))
    diff = {k: got[k] for k in got if got[k] != base[k] and k != "name"}
    assert diff == want


MMDET_CUSTOM = {
    # custom classes (metainfo), test size, class-agnostic heads, thresholds
    "agnostic": ("""
        _base_ = '{r101}'
        metainfo = dict(classes=('balloon', 'kite', 'drone'))
        model = dict(roi_head=dict(bbox_head=dict(num_classes=3, reg_class_agnostic=True),
                                   mask_head=dict(num_classes=3, class_agnostic=True)),
                     test_cfg=dict(rcnn=dict(score_thr=0.3, max_per_img=50)))
        test_pipeline = [dict(type='LoadImageFromFile'), dict(type='Resize', scale=(1024, 640), keep_ratio=True),
                         dict(type='PackDetInputs')]
        test_dataloader = dict(dataset=dict(metainfo=metainfo, pipeline=test_pipeline))
        """,
        {"classes.num_classes": 4, "classes.class_names": ["__background__", "balloon", "kite", "drone"],
         "box_head.class_agnostic_regression": True, "mask_head.class_agnostic": True,
         "box_head.score_thresh": 0.3, "box_head.detections_per_image": 50, "input.min_size": 640,
         "input.max_size": 1024}),
    # anchors, GroupNorm heads, a 2-conv RPN, caffe style, RPN test limits, pad 64
    "anchors_gn": ("""
        _base_ = '{r101}'
        norm_cfg = dict(type='GN', num_groups=16, requires_grad=True)
        model = dict(
            data_preprocessor=dict(mean=[103.53, 116.28, 123.675], std=[1.0, 1.0, 1.0], bgr_to_rgb=False,
                                   pad_size_divisor=64),
            backbone=dict(depth=50, style='caffe', norm_cfg=norm_cfg),
            neck=dict(norm_cfg=norm_cfg),
            rpn_head=dict(num_convs=2, anchor_generator=dict(scales=[4, 8], ratios=[0.5, 1.0, 2.0, 4.0],
                                                             scale_major=False)),
            roi_head=dict(bbox_head=dict(type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=norm_cfg,
                                         num_classes=5),
                          mask_head=dict(norm_cfg=norm_cfg, num_classes=5)),
            test_cfg=dict(rpn=dict(nms_pre=2000, max_per_img=300, nms=dict(type='nms', iou_threshold=0.6),
                                   min_bbox_size=2)))
        """,
        {"backbone.depth": 50, "backbone.stride_in_1x1": True, "backbone.norm": "group_norm",
         "backbone.norm_groups": 16, "fpn.norm": "group_norm", "box_head.norm": "group_norm",
         "mask_head.norm": "group_norm", "input.channel_order": "BGR", "input.size_divisibility": 64,
         "rpn.num_convs": 2, "anchors.sizes": [[16.0, 32.0], [32.0, 64.0], [64.0, 128.0], [128.0, 256.0],
                                               [256.0, 512.0]],
         "anchors.aspect_ratios": [0.5, 1.0, 2.0, 4.0], "box_head.num_convs": 4, "box_head.num_fcs": 1,
         "rpn.pre_nms_top_n": 2000, "rpn.post_nms_top_n": 300, "rpn.nms_thresh": 0.6, "rpn.min_size": 2.0,
         "classes.num_classes": 6}),
    # an mmdet 2.x config: no data preprocessor, MultiScaleFlipAug, img_norm_cfg, Pad, `classes`
    "v2": ("""
        _base_ = './v2_base.py'
        classes = ('a', 'b')
        img_norm_cfg = dict(mean=[103.53, 116.28, 123.675], std=[1.0, 1.0, 1.0], to_rgb=False)
        test_pipeline = [
            dict(type='LoadImageFromFile'),
            dict(type='MultiScaleFlipAug', img_scale=(1000, 600), flip=False,
                 transforms=[dict(type='Resize', keep_ratio=True), dict(type='RandomFlip'),
                             dict(type='Normalize', **img_norm_cfg), dict(type='Pad', size_divisor=32),
                             dict(type='ImageToTensor', keys=['img']), dict(type='Collect', keys=['img'])])]
        data = dict(test=dict(type='CocoDataset', classes=classes, pipeline=test_pipeline))
        model = dict(roi_head=dict(bbox_head=dict(num_classes=2), mask_head=dict(num_classes=2)))
        """,
        {"classes.num_classes": 3, "classes.class_names": ["__background__", "a", "b"], "input.min_size": 600,
         "input.max_size": 1000, "input.channel_order": "BGR", "input.pixel_std": [1.0, 1.0, 1.0]}),
}

# An mmdet 2.x model (mmdet 2.28's _base_/models/mask_rcnn_r50_fpn.py, the parts read here).
MMDET_V2_BASE = """
model = dict(
    type='MaskRCNN',
    pretrained='torchvision://resnet101',
    backbone=dict(type='ResNet', depth=101, num_stages=4, out_indices=(0, 1, 2, 3), frozen_stages=1,
                  norm_cfg=dict(type='BN', requires_grad=True), norm_eval=True, style='pytorch'),
    neck=dict(type='FPN', in_channels=[256, 512, 1024, 2048], out_channels=256, num_outs=5),
    rpn_head=dict(type='RPNHead', in_channels=256, feat_channels=256,
                  anchor_generator=dict(type='AnchorGenerator', scales=[8], ratios=[0.5, 1.0, 2.0],
                                        strides=[4, 8, 16, 32, 64]),
                  bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[.0, .0, .0, .0],
                                  target_stds=[1.0, 1.0, 1.0, 1.0]),
                  loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=True, loss_weight=1.0),
                  loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
    roi_head=dict(
        type='StandardRoIHead',
        bbox_roi_extractor=dict(type='SingleRoIExtractor', roi_layer=dict(type='RoIAlign', output_size=7,
                                                                          sampling_ratio=0),
                                out_channels=256, featmap_strides=[4, 8, 16, 32]),
        bbox_head=dict(type='Shared2FCBBoxHead', in_channels=256, fc_out_channels=1024, roi_feat_size=7,
                       num_classes=80,
                       bbox_coder=dict(type='DeltaXYWHBBoxCoder', target_means=[0., 0., 0., 0.],
                                       target_stds=[0.1, 0.1, 0.2, 0.2]),
                       reg_class_agnostic=False,
                       loss_cls=dict(type='CrossEntropyLoss', use_sigmoid=False, loss_weight=1.0),
                       loss_bbox=dict(type='L1Loss', loss_weight=1.0)),
        mask_roi_extractor=dict(type='SingleRoIExtractor', roi_layer=dict(type='RoIAlign', output_size=14,
                                                                          sampling_ratio=0),
                                out_channels=256, featmap_strides=[4, 8, 16, 32]),
        mask_head=dict(type='FCNMaskHead', num_convs=4, in_channels=256, conv_out_channels=256, num_classes=80,
                       loss_mask=dict(type='CrossEntropyLoss', use_mask=True, loss_weight=1.0))),
    train_cfg=dict(rpn=dict(allowed_border=-1, pos_weight=-1, debug=False)),
    test_cfg=dict(
        rpn=dict(nms_pre=1000, max_per_img=1000, nms=dict(type='nms', iou_threshold=0.7), min_bbox_size=0),
        rcnn=dict(score_thr=0.05, nms=dict(type='nms', iou_threshold=0.5), max_per_img=100,
                  mask_thr_binary=0.5)))
optimizer = dict(type='SGD', lr=0.02, momentum=0.9, weight_decay=0.0001)
"""


@needs_mmdet
@pytest.mark.parametrize("name", sorted(MMDET_CUSTOM))
def test_mmdet_custom(tmp_path, engine_load, name):
    text, want = MMDET_CUSTOM[name]
    write(tmp_path / "cfg" / "v2_base.py", MMDET_V2_BASE)
    path = write(tmp_path / "cfg" / f"{name}.py",
                 text.replace("{r101}", mmdet_config("mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py")))
    out = tmp_path / "out.json"
    r = cli(path, out)
    assert r.returncode == 0, r.stderr
    got = flat(check_written(out, engine_load))
    assert {k: got[k] for k in want} == want


MMDET_REFUSALS = [
    # (a config file from the wheel, or lines over the R-101 1x config; the key named; words)
    ("@cascade_rcnn/cascade-mask-rcnn_r101_fpn_1x_coco.py", "model.type", "cascade"),
    ("@htc/htc_r101_fpn_20e_coco.py", "model.type", "cascade"),
    ("@dcn/mask-rcnn_r101-dconv-c3-c5_fpn_1x_coco.py", "model.backbone.dcn", "deformable"),
    ("@mask_rcnn/mask-rcnn_x101-32x4d_fpn_1x_coco.py", "model.backbone.type", "grouped"),
    ("@legacy_1.x/mask-rcnn_r50_fpn_1x_coco_v1.py", "model.rpn_head.anchor_generator.type", "AnchorGenerator"),
    ("@gn+ws/mask-rcnn_r101_fpn_gn-ws-all_2x_coco.py", "model.backbone.conv_cfg", "plain convolutions"),
    ("@ms_rcnn/ms-rcnn_r101-caffe_fpn_1x_coco.py", "model.type", "mask scoring"),
    ("model = dict(neck=dict(add_extra_convs='on_input'))", "model.neck.add_extra_convs", "max pool"),
    ("model = dict(rpn_head=dict(anchor_generator=dict(center_offset=0.5)))",
     "model.rpn_head.anchor_generator.center_offset", "offset 0"),
    ("model = dict(rpn_head=dict(anchor_generator=dict(scales=[4, 8])))",
     "model.rpn_head.anchor_generator.scale_major", "size-major"),
    ("model = dict(test_cfg=dict(rcnn=dict(nms=dict(type='soft_nms'))))", "model.test_cfg.rcnn.nms.type",
     "plain NMS"),
    ("model = dict(test_cfg=dict(rcnn=dict(nms=dict(class_agnostic=True))))", "model.test_cfg.rcnn.nms.class_agnostic",
     "per class"),
    ("model = dict(roi_head=dict(bbox_roi_extractor=dict(roi_layer=dict(pool_mode='max'))))",
     "model.roi_head.bbox_roi_extractor.roi_layer.pool_mode", "max pooling"),
    ("model = dict(roi_head=dict(bbox_head=dict(loss_cls=dict(use_sigmoid=True))))",
     "model.roi_head.bbox_head.loss_cls.use_sigmoid", "softmax"),
    ("model = dict(roi_head=dict(mask_head=dict(upsample_cfg=dict(type='bilinear'))))",
     "model.roi_head.mask_head.upsample_cfg", "deconv"),
    ("model = dict(roi_head=dict(mask_head=dict(num_classes=5)))", "model.roi_head.mask_head.num_classes",
     "the bbox head has 80"),
    ("model = dict(roi_head=dict(bbox_head=dict(my_option=1)))", "model.roi_head.bbox_head.my_option",
     "not an argument"),
    ("model = dict(backbone=dict(plugins=[dict(cfg=dict(type='ContextBlock'), stages=(False, True, True, True), "
     "position='after_conv3')]))", "model.backbone.plugins", "plugins"),
    ("model = dict(backbone=dict(norm_cfg=dict(type='LN')))", "model.backbone.norm_cfg.type", "GroupNorm"),
    ("test_dataloader = dict(dataset=dict(pipeline=[dict(type='LoadImageFromFile'), dict(type='Resize', "
     "scale=(1333, 800), keep_ratio=False)]))", "test_dataloader.dataset.pipeline.1.keep_ratio", "aspect ratio"),
    ("test_dataloader = dict(dataset=dict(pipeline=[dict(type='LoadImageFromFile'), dict(type='Resize', "
     "scale=(1333, 800), keep_ratio=True, backend='pillow')]))", "test_dataloader.dataset.pipeline.1.backend",
     "cv2"),
    ("test_dataloader = dict(dataset=dict(pipeline=[dict(type='LoadImageFromFile'), "
     "dict(type='PhotoMetricDistortion')]))", "test_dataloader.dataset.pipeline.1.type", "does not run"),
    ("metainfo = dict(classes=('a', 'b'))\ntest_dataloader = dict(dataset=dict(metainfo=metainfo))",
     "test_dataloader.dataset.metainfo.classes", "2 class names for 80 classes"),
    ("raise RuntimeError('from the config')", "", "RuntimeError: from the config"),
]


@needs_mmdet
@pytest.mark.parametrize("spec, key, words", MMDET_REFUSALS, ids=[f"{i}-{c[1]}" for i, c in enumerate(MMDET_REFUSALS)])
def test_mmdet_refusals(tmp_path, spec, key, words):
    if spec.startswith("@"):
        path = mmdet_config(spec[1:])
    else:
        path = write(tmp_path / "cfg" / "m.py",
                     f"_base_ = '{mmdet_config('mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py')}'\n{spec}\n")
    if key:
        expect_refusal(path, tmp_path / "out.json", key, words)
    else:
        r = cli(path, tmp_path / "out.json")
        assert r.returncode == 2 and words in r.stderr and len(r.stderr.strip().splitlines()) == 1, r.stderr


def test_mmdet_without_its_venv(tmp_path):
    path = write(tmp_path / "m.py", "_base_ = 'x.py'\nmodel = dict(type='MaskRCNN')\n")
    env = dict(os.environ, DETECT_MMDET_VENV=str(tmp_path / "no-venv"))
    r = cli(path, tmp_path / "out.json", env=env)
    assert r.returncode == 2 and "make deps" in r.stderr and str(tmp_path / "no-venv") in r.stderr
    assert not (tmp_path / "out.json").exists()


# ---- torchvision ---------------------------------------------------------------------------

@pytest.mark.parametrize("desc, shipped_name", [
    ({"builder": "maskrcnn_resnet50_fpn", "weights": "COCO_V1"}, "mask_rcnn_R-50-FPN_torchvision.json"),
    ({"builder": "maskrcnn_resnet50_fpn_v2"}, "mask_rcnn_R-50-FPN_torchvision_v2.json"),
    ({"builder": "resnet_fpn_backbone + MaskRCNN", "backbone": "resnet101", "num_classes": 81,
      "class_names": coco_classes.COCO_81}, "mask_rcnn_R-101-FPN_torchvision.json"),
], ids=["v1_coco", "v2", "r101"])
def test_tv_builders_give_the_shipped_configs(tmp_path, engine_load, desc, shipped_name):
    path = tmp_path / "model.json"
    path.write_text(json.dumps(desc))
    out = tmp_path / "out.json"
    r = cli(path, out)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    same_as_shipped(check_written(out, engine_load), shipped_name, "torchvision")


TV_CUSTOM = {
    "r101_small": ('{"builder": "resnet_fpn_backbone + MaskRCNN", "backbone": "resnet101", "num_classes": 4, '
                   '"class_names": ["cat", "dog", "bird"], "min_size": 640, "max_size": 1000, '
                   '"box_score_thresh": 0.3, "box_detections_per_img": 50, "trainable_layers": 5}',
                   {"backbone.depth": 101, "classes.num_classes": 4, "input.min_size": 640,
                    "input.max_size": 1000, "box_head.score_thresh": 0.3, "box_head.detections_per_image": 50,
                    "classes.class_names": ["__background__", "cat", "dog", "bird"]}),
    "v2_anchors": ('{"builder": "maskrcnn_resnet50_fpn_v2", "num_classes": 3, '
                   '"anchor_sizes": [[16], [32], [64], [128], [256]], '
                   '"aspect_ratios": [[0.5, 1.0, 2.0, 4.0], [0.5, 1.0, 2.0, 4.0], [0.5, 1.0, 2.0, 4.0], '
                   '[0.5, 1.0, 2.0, 4.0], [0.5, 1.0, 2.0, 4.0]], "rpn_pre_nms_top_n_test": 500, '
                   '"rpn_post_nms_top_n_test": 300, "rpn_nms_thresh": 0.6, "rpn_score_thresh": 0.01, '
                   '"box_nms_thresh": 0.4, "bbox_reg_weights": [20, 20, 10, 10]}',
                   {"backbone.depth": 50, "rpn.num_convs": 2, "box_head.num_convs": 4, "classes.num_classes": 3,
                    "anchors.sizes": [[16.0], [32.0], [64.0], [128.0], [256.0]],
                    "anchors.aspect_ratios": [0.5, 1.0, 2.0, 4.0], "rpn.pre_nms_top_n": 500,
                    "rpn.post_nms_top_n": 300, "rpn.nms_thresh": 0.6, "rpn.score_thresh": 0.01,
                    "box_head.nms_thresh": 0.4, "box_head.agnostic_nms_thresh": 0.4,
                    "box_head.box_weights": [20.0, 20.0, 10.0, 10.0]}),
    "python_literal": ("{'builder': 'maskrcnn_resnet50_fpn', 'weights': 'COCO_V1', 'min_size': (480, 512, 800),"
                       " 'image_mean': [0.5, 0.5, 0.5], 'image_std': [0.25, 0.25, 0.25], "
                       "'rpn_batch_size_per_image': 128, 'box_batch_size_per_image': 256}",
                       {"backbone.norm_eps": 0.0, "input.min_size": 800, "input.pixel_mean": [0.5, 0.5, 0.5],
                        "input.pixel_std": [0.25, 0.25, 0.25], "classes.num_classes": 91,
                        "classes.class_names": coco_classes.TORCHVISION_91}),
}


@pytest.mark.parametrize("name", sorted(TV_CUSTOM))
def test_tv_custom(tmp_path, engine_load, name):
    text, want = TV_CUSTOM[name]
    path = tmp_path / ("model.py" if name == "python_literal" else "model.json")
    path.write_text(text)
    out = tmp_path / "out.json"
    r = cli(path, out, "-v")
    assert r.returncode == 0, r.stderr
    got = flat(check_written(out, engine_load))
    assert {k: got[k] for k in want} == want


TV_REFUSALS = [
    ('{"builder": "fasterrcnn_resnet50_fpn"}', "builder", "one of"),
    ('{"builder": "maskrcnn_resnet50_fpn", "bakbone": "resnet50"}', "bakbone", "did you mean backbone"),
    ('{"builder": "maskrcnn_resnet50_fpn", "backbone": "resnet101"}', "backbone", "builds resnet50"),
    ('{"builder": "resnet_fpn_backbone + MaskRCNN", "backbone": "resnet34", "num_classes": 3}', "backbone",
     "the engine runs"),
    ('{"builder": "resnet_fpn_backbone + MaskRCNN", "backbone": "resnet50"}', "num_classes", "required"),
    ('{"builder": "maskrcnn_resnet50_fpn", "rpn_head": "RPNHead(256, 3, conv_depth=3)"}', "rpn_head", "modules"),
    ('{"builder": "maskrcnn_resnet50_fpn", "returned_layers": [2, 3, 4]}', "returned_layers", "all four"),
    ('{"builder": "maskrcnn_resnet50_fpn", "norm_layer": "GroupNorm"}', "norm_layer", "FrozenBatchNorm2d"),
    ('{"builder": "maskrcnn_resnet50_fpn", "aspect_ratios": [[0.5], [1.0], [2.0], [1.0], [1.0]]}', "aspect_ratios",
     "one list"),
    ('{"builder": "maskrcnn_resnet50_fpn", "anchor_sizes": [[32], [64], [128], [256]]}', "anchor_sizes",
     "4 rows of anchor sizes for 5 FPN levels"),
    ('{"builder": "maskrcnn_resnet50_fpn", "num_classes": 3, "class_names": ["a"]}', "class_names",
     "1 class names for 2 classes"),
    ('{"builder": "maskrcnn_resnet50_fpn", "box_score_thresh": 1.5}', "box_score_thresh", "[0,1]"),
    ('{"builder": "maskrcnn_resnet50_fpn", "min_size": 700.5}', "min_size", "expected an integer"),
    ('["builder"]', "", "expected an object"),
]


@pytest.mark.parametrize("text, key, words", TV_REFUSALS, ids=[f"{i}-{c[1]}" for i, c in enumerate(TV_REFUSALS)])
def test_tv_refusals(tmp_path, text, key, words):
    path = tmp_path / "d" / "model.json"
    path.parent.mkdir()
    path.write_text(text)
    if key:
        expect_refusal(str(path), tmp_path / "d" / "out.json", key, words)
    else:
        r = cli(path, tmp_path / "d" / "out.json")
        assert r.returncode == 2 and words in r.stderr


def test_framework_not_found(tmp_path):
    path = tmp_path / "x.py"
    path.write_text("a = 1\n")
    expect_refusal(str(path), tmp_path / "o.json", "--framework", "cannot tell")


# ---- convert.py --train-config -------------------------------------------------------------

TINY_YAML = """
_BASE_: "../Base-RCNN-FPN.yaml"
MODEL:
  MASK_ON: True
  RESNETS: {{DEPTH: {depth}, STEM_OUT_CHANNELS: 8, WIDTH_PER_GROUP: 8, RES2_OUT_CHANNELS: 32{trunk}}}
  FPN: {{OUT_CHANNELS: 16}}
  ROI_BOX_HEAD: {{FC_DIM: 32}}
  ROI_MASK_HEAD: {{CONV_DIM: 16}}
  ROI_HEADS: {{NUM_CLASSES: {classes}}}
"""


@pytest.fixture
def tiny_d2_checkpoint(tmp_path):
    import zoo_checkpoints as zoo
    canon = zoo.canonical_model(seed=3, depth=50, K=5, **zoo.TINY)
    sd, _ = zoo.d2_tensors(canon)
    path = tmp_path / "model_final.pkl"
    with open(path, "wb") as f:
        pickle.dump({"model": sd}, f, protocol=4)
    return path


def convert(*args):
    return subprocess.run([sys.executable, CONVERT, *map(str, args)], capture_output=True, text=True, timeout=300)


def test_convert_writes_the_config(d2_tree, tmp_path, tiny_d2_checkpoint, engine_load):
    yml = write(d2_tree / "mine" / "tiny.yaml", TINY_YAML.format(classes=4, trunk="", depth=50))
    (tmp_path / "names.txt").write_text("cat\ndog\nbird\nfish\n")
    dst = tmp_path / "out" / "mine.safetensors"
    dst.parent.mkdir()
    r = convert(tiny_d2_checkpoint, dst, "--train-config", yml, "--class-names", tmp_path / "names.txt")
    assert r.returncode == 0, r.stderr
    cfg = check_written(tmp_path / "out" / "mine.json", engine_load)
    assert cfg["name"] == "mine" and cfg["classes"]["class_names"][1:] == ["cat", "dog", "bird", "fish"]
    assert (cfg["backbone"]["depth"], cfg["fpn"]["out_channels"], cfg["box_head"]["fc_dim"]) == (50, 16, 32)
    assert "suggested config" not in r.stdout and "mine.json: from the detectron2 yaml training config" in r.stdout
    r = convert(tiny_d2_checkpoint, tmp_path / "b.safetensors", "--train-config", yml, "--config-out",
                tmp_path / "cfg" / "x.json")
    assert r.returncode == 2 and "--config-out" in r.stderr and "no such folder" in r.stderr
    assert not (tmp_path / "b.safetensors").exists()
    (tmp_path / "cfg").mkdir()
    r = convert(tiny_d2_checkpoint, tmp_path / "b.safetensors", "--train-config", yml, "--config-out",
                tmp_path / "cfg" / "x.json")
    assert r.returncode == 0 and (tmp_path / "cfg" / "x.json").exists() and "class_1..class_4" in r.stderr


@pytest.mark.parametrize("classes, trunk, depth, key, words", [
    (5, "", 50, "MODEL.ROI_HEADS.NUM_CLASSES", "classes (with the background) 6 (classes.num_classes), the weights"),
    (4, ", NORM: GN", 50, "MODEL.RESNETS.NORM", "trunk norm 'group_norm' (backbone.norm), the weights"),
    (4, "", 101, "MODEL.RESNETS.DEPTH", "ResNet depth 101"),
], ids=["classes", "norm", "depth"])
def test_convert_refuses_a_config_of_other_weights(d2_tree, tmp_path, tiny_d2_checkpoint, classes, trunk, depth,
                                                     key, words):
    yml = write(d2_tree / "mine" / "tiny.yaml", TINY_YAML.format(classes=classes, trunk=trunk, depth=depth))
    dst = tmp_path / "w" / "m.safetensors"
    dst.parent.mkdir()
    r = convert(tiny_d2_checkpoint, dst, "--train-config", yml)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert r.stderr.startswith(f"convert.py: {yml}: {key}") and words in r.stderr, r.stderr
    assert os.listdir(dst.parent) == []


def test_convert_refuses_agnostic_config_of_per_class_weights(d2_tree, tmp_path, tiny_d2_checkpoint):
    """A training config with class-agnostic masks for weights with one mask per class."""
    text = TINY_YAML.format(classes=4, trunk="", depth=50).replace(
        "ROI_MASK_HEAD: {CONV_DIM: 16}", "ROI_MASK_HEAD: {CONV_DIM: 16, CLS_AGNOSTIC_MASK: True}")
    assert "CLS_AGNOSTIC_MASK" in text
    yml = write(d2_tree / "mine" / "agnostic.yaml", text)
    r = convert(tiny_d2_checkpoint, tmp_path / "m.safetensors", "--train-config", yml)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith(f"convert.py: {yml}: MODEL.ROI_MASK_HEAD.CLS_AGNOSTIC_MASK"), r.stderr
    assert "class-agnostic masks True (mask_head.class_agnostic)" in r.stderr, r.stderr
    assert not (tmp_path / "m.safetensors").exists() and not (tmp_path / "m.json").exists()


def test_convert_refuses_another_frameworks_config(tmp_path, tiny_d2_checkpoint):
    desc = tmp_path / "tv.json"
    desc.write_text('{"builder": "maskrcnn_resnet50_fpn", "num_classes": 5}')
    r = convert(tiny_d2_checkpoint, tmp_path / "m.safetensors", "--train-config", desc)
    assert r.returncode == 2 and "a torchvision training config, but" in r.stderr and "detectron2 checkpoint" in r.stderr
    assert not (tmp_path / "m.safetensors").exists() and not (tmp_path / "m.json").exists()


def test_convert_refusal_before_reading_the_weights(d2_tree, tmp_path):
    yml = write(d2_tree / "mine" / "c.yaml",
                "_BASE_: ../Base-RCNN-FPN.yaml\nMODEL: {MASK_ON: True, ROI_HEADS: {NAME: CascadeROIHeads}}\n")
    r = convert(tmp_path / "does-not-exist.pkl", tmp_path / "m.safetensors", "--train-config", yml)
    assert r.returncode == 2 and "MODEL.ROI_HEADS.NAME" in r.stderr and "cascade" in r.stderr
