"""A custom detectron2 training config read by `--train-config` (models/train_config.py), run by
our engine against the detectron2-conventions oracle (oracle_d2.py) built with the same custom
settings: what make check has of issue 46's "the config --train-config writes gives the
framework's own predictor's detections" for detectron2, which is not on PyPI (detectron2's own
code on three custom yamls is tests/gpu/d2_train_config_parity.py, run once; mmdetection's own
predictor on its training configs is test_mmdet_e2e.py).

The yaml `_BASE_`s on a Base-RCNN-FPN (test_train_config.D2_BASE) and changes what a custom model
changes: 4 named classes, anchor sizes 24..384, test size 320 / 512, SCORE_THRESH_TEST 0.1,
DETECTIONS_PER_IMAGE 50. The oracle gets the same: a 5-way classifier, detectron2 cell anchors
of those sizes, the same thresholds. Compared from the PNG with test_detectron2_e2e.py's
tolerances: input, C2..P6, proposals, every detection (class, box, score) and the masks."""

import json
import os

import pytest

import test_detectron2_e2e as d2e
from conftest import BUILD, drop_unless_failed
from test_train_config import D2_BASE, write

NAMES = ["apple", "pear", "plum", "fig"]
CUSTOM = """
_BASE_: base.yaml
MODEL:
  MASK_ON: True
  RESNETS: {DEPTH: 101}
  ANCHOR_GENERATOR: {SIZES: [[24], [48], [96], [192], [384]]}
  ROI_HEADS: {NUM_CLASSES: 4, SCORE_THRESH_TEST: 0.1}
INPUT: {MIN_SIZE_TEST: 320, MAX_SIZE_TEST: 512}
TEST: {DETECTIONS_PER_IMAGE: 50}
"""


@pytest.fixture(scope="module")
def custom(request, tmp_path_factory):
    import torch
    import oracle
    import oracle_d2
    import train_config
    if not os.path.exists(os.path.join(BUILD, "stage_runner")):
        pytest.fail(f"{BUILD}/stage_runner is missing: run `make` first")
    torch.set_num_threads(2)
    root = tmp_path_factory.mktemp("d2_train_config")
    write(root / "base.yaml", D2_BASE)
    yml = root / "custom.yaml"
    write(yml, CUSTOM)
    c = d2e.D2Case(str(root))
    cfg = train_config.write_config(str(yml), class_names=NAMES, out=c.config)
    assert (cfg["classes"]["num_classes"], cfg["input"]["min_size"], cfg["input"]["max_size"]) == (5, 320, 512)
    assert cfg["anchors"]["sizes"] == [[24], [48], [96], [192], [384]]
    assert (cfg["box_head"]["score_thresh"], cfg["box_head"]["detections_per_image"]) == (0.1, 50)
    model = oracle_d2.build_model(d2e.SEED + 9, min_size=320, max_size=512, num_classes=5)
    model.rpn.anchor_generator = oracle_d2.D2AnchorGenerator(sizes=(24, 48, 96, 192, 384))
    model.roi_heads.score_thresh, model.roi_heads.detections_per_img = 0.1, 50
    img = oracle.make_synthetic_image(d2e.H, d2e.W, d2e.SEED + 9)
    oracle.save_png(img, c.png)
    oracle_d2.export_weights_bgr(model, c.weights)
    c.ref = oracle.run_staged(model, img, check=True)
    c.e2e = d2e.engine(c, os.path.join(c.root, "e2e"))
    c.cfg = cfg
    print("\n[detectron2 custom yaml] " + oracle.summary(c.ref))
    yield c
    drop_unless_failed(request, c.root)


def test_custom_yaml_e2e(custom):
    """Input, C2..C5, P2..P6, proposals, final detections and masks, from the PNG."""
    assert len(custom.ref["12_final_boxes"]) > 0, "the reference found nothing: the case tests nothing"
    rows = d2e.compare_e2e(custom.ref, custom.e2e, "custom yaml e2e")
    for r in rows:
        print(f"[detectron2 custom yaml] {r['stage']}: {r['metric']} = {r['value']}{'' if r['ok'] else ' (FAIL)'}")
    bad = [r for r in rows if not r["ok"]]
    assert not bad, bad


def test_custom_yaml_class_names(custom):
    with open(custom.config) as f:
        assert json.load(f)["classes"]["class_names"] == ["__background__"] + NAMES
