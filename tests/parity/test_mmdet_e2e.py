"""mmdetection itself against our engine: its own model, config, test pipeline and
post-processing (mmdet 3.3 on the CPU, tests/parity/oracle_mmdet.py in build/venv-mmdet; mmcv's
two compiled ops stood in for by torchvision.ops, whose semantics shared/reference/zoo_variants.md
§4 names), on seeded weights and photographs, as a user would run a checkpoint:

    mmdet checkpoint (.pth as mmdet's publish tool writes it: {'meta', 'state_dict'})
      -> models/convert.py [--train-config THE_MMDET_CONFIG.py] -> safetensors (+ our JSON config)
      -> build/detect --json  vs  mmdet's inference_detector on the same decoded pixels.

Cases (zoo configs from the mmdet wheel's .mim/configs; training configs written here, each
`_base_`d on the zoo's R-101 config and differing from it where a custom-trained model would):

| case            | mmdet config                                   | our config                         |
|-----------------|------------------------------------------------|------------------------------------|
| r101-chelsea    | mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py         | configs/..._mmdetection.json       |
| caffe-astronaut | mask_rcnn/mask-rcnn_r101-caffe_fpn_1x_coco.py   | configs/..._mmdetection_caffe.json |
| classes-anchors | 3 named classes, anchors of 4 ratios at scale 6, test size 1000x600, score_thr 0.1, 60 per image | --train-config |
| agnostic        | 5 named classes, class-agnostic box regression and masks, test size 1333x640 | --train-config |
| strong-heads    | BatchNorm in the FPN, 2 RPN convs, Shared4Conv1FC box head and mask convs with BatchNorm, test size 800x512, 40 per image | --train-config |

Checked, every case: each of mmdet's detections matched by one of ours (same class, box IoU >=
0.99, score within 1e-3; near-ties with the score threshold or the per-image cut excepted), none
of ours unmatched, pasted masks IoU >= 0.98; the class names of our output are the training
config's."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import BUILD, REPO, drop_unless_failed

sys.path.insert(0, os.path.join(REPO, "models"))

SCORE_TOL = 1e-3
BOX_IOU = 0.99
MASK_IOU = 0.98
TIE_EPS = 2e-4

R101 = "mmdet::mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py"


def resize_pipeline(scale):
    """mmdet 3.x's test pipeline with another Resize scale (w, h)."""
    return (f"test_pipeline = [\n"
            f"    dict(type='LoadImageFromFile', backend_args=None),\n"
            f"    dict(type='Resize', scale={scale!r}, keep_ratio=True),\n"
            f"    dict(type='LoadAnnotations', with_bbox=True, with_mask=True),\n"
            f"    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape',\n"
            f"                                          'scale_factor')),\n"
            f"]\n")


TRAINING_CONFIGS = {
    "classes-anchors": f"""_base_ = '{R101}'
metainfo = dict(classes=('apple', 'pear', 'plum'))
model = dict(
    rpn_head=dict(anchor_generator=dict(scales=[6], ratios=[0.5, 1.0, 2.0, 3.0])),
    roi_head=dict(bbox_head=dict(num_classes=3), mask_head=dict(num_classes=3)),
    test_cfg=dict(rcnn=dict(score_thr=0.1, max_per_img=60)))
{resize_pipeline((1000, 600))}
test_dataloader = dict(dataset=dict(metainfo=metainfo, pipeline=test_pipeline))
""",
    "agnostic": f"""_base_ = '{R101}'
metainfo = dict(classes=('car', 'van', 'truck', 'bus', 'tram'))
model = dict(
    roi_head=dict(bbox_head=dict(num_classes=5, reg_class_agnostic=True),
                  mask_head=dict(num_classes=5, class_agnostic=True)))
{resize_pipeline((1333, 640))}
test_dataloader = dict(dataset=dict(metainfo=metainfo, pipeline=test_pipeline))
""",
    "strong-heads": f"""_base_ = '{R101}'
norm_cfg = dict(type='BN', requires_grad=True)
metainfo = dict(classes=('cell', 'nucleus'))
model = dict(
    neck=dict(norm_cfg=norm_cfg),
    rpn_head=dict(num_convs=2),
    roi_head=dict(
        bbox_head=dict(type='Shared4Conv1FCBBoxHead', conv_out_channels=256, norm_cfg=norm_cfg, num_classes=2),
        mask_head=dict(norm_cfg=norm_cfg, num_classes=2)),
    test_cfg=dict(rcnn=dict(max_per_img=40)))
{resize_pipeline((800, 512))}
test_dataloader = dict(dataset=dict(metainfo=metainfo, pipeline=test_pipeline))
""",
}

CASES = {
    "r101-chelsea": dict(config="mask_rcnn/mask-rcnn_r101_fpn_1x_coco.py", seed=31, image="photo:chelsea",
                         ours="configs/mask_rcnn_R-101-FPN_mmdetection.json"),
    "caffe-astronaut": dict(config="mask_rcnn/mask-rcnn_r101-caffe_fpn_1x_coco.py", seed=32,
                            image="photo:astronaut", ours="configs/mask_rcnn_R-101-FPN_mmdetection_caffe.json"),
    "classes-anchors": dict(training="classes-anchors", seed=33, image="photo:coffee"),
    "agnostic": dict(training="agnostic", seed=34, image="photo:rocket"),
    "strong-heads": dict(training="strong-heads", seed=35, image="photo:chelsea"),
}


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert r.returncode == 0, f"{' '.join(cmd)}: exit {r.returncode}\n{r.stderr}"
    return r


def build_case(name, root, device="cpu"):
    """Runs case `name` in folder root: mmdet's seeded checkpoint and its detections, the
    conversion, detect on `device` (tests/emu/mmdet_parity.py runs it with "cuda" on the
    emulator). Returns what compare() reads."""
    import oracle
    import oracle_mmdet
    spec = CASES[name]
    root = str(root)
    png = os.path.join(root, "image.png")
    oracle.save_png(oracle.load_image(spec["image"], spec["seed"]), png)
    if "training" in spec:
        mmdet_config = os.path.join(root, f"{name}.py")
        with open(mmdet_config, "w") as f:
            f.write(TRAINING_CONFIGS[spec["training"]])
    else:
        mmdet_config = spec["config"]
    ckpt, ref_npz = os.path.join(root, "model.pth"), os.path.join(root, "mmdet.npz")
    ref, report = oracle_mmdet.run_oracle(mmdet_config, spec["seed"], png, ref_npz, checkpoint_out=ckpt)
    weights = os.path.join(root, "model.safetensors")
    convert = [sys.executable, os.path.join(REPO, "models", "convert.py"), ckpt, weights, "-q"]
    if "training" in spec:
        config = os.path.join(root, "model.json")
        run(convert + ["--train-config", mmdet_config, "--config-out", config])
    else:
        config = os.path.join(REPO, spec["ours"])
        run(convert)
    out = os.path.join(root, "ours.json")
    cmd = [os.path.join(BUILD, "detect"), "--config", config, "--weights", weights, "--json", out, "-q",
           "--device", device]
    if device == "cuda":
        cmd += ["--precision", "fp32"]  # strict fp32: no TF32, as mmdet on the CPU
    run(cmd + [png])
    with open(config) as f:
        cfg = json.load(f)
    return dict(name=name, ref=ref, report=report, out=out, config=cfg, root=root)


def compare(c):
    """(ok, summary line): every detection of mmdet's matched by ours and nothing more."""
    from metrics import mask_iou, match_detections, near_tie
    from test_cli import detect_json_images
    ref = c["ref"]
    (_, (ob, osc, ol), omasks), = detect_json_images(c["out"])
    rb, rs = ref["boxes"].astype(np.float32), ref["scores"].astype(np.float32)
    rl = ref["labels"].astype(np.int64) + 1  # mmdet's 0-based foreground labels; ours have background 0
    bh = c["config"]["box_head"]
    cuts = [bh["score_thresh"]] + ([float(rs.min())] if len(rs) >= bh["detections_per_image"] else [])
    pairs, missed, extra = match_detections(rb, rs, rl, ob, osc, ol, iou=BOX_IOU, score_tol=SCORE_TOL)
    missed = [i for i in missed if not near_tie(rs[i], cuts, TIE_EPS)]
    extra = [j for j in extra if not near_tie(osc[j], cuts, TIE_EPS)]
    ious = [mask_iou(omasks[j], ref["masks"][i]) for i, j in pairs]
    worst = float(min(ious, default=1.0))
    score_diff = max((abs(float(rs[i]) - float(osc[j])) for i, j in pairs), default=0.0)
    # near-ties are excused; a case whose scores were all ties would test nothing, so 90% of
    # mmdet's detections must match outright
    ok = (len(rb) > 0 and not missed and not extra and worst >= MASK_IOU and len(pairs) >= 0.9 * len(rb))
    line = (f"[mmdet {c['name']}] mmdet {len(rb)} ours {len(ob)} matched {len(pairs)}, missed {len(missed)} "
            f"{missed[:10]}, extra {len(extra)} {extra[:10]}, max score diff {score_diff:.2e}, mask IoU min "
            f"{worst:.4f}")
    return ok, line


@pytest.fixture(scope="module", params=sorted(CASES))
def mmdet_case(request, tmp_path_factory):
    root = tmp_path_factory.mktemp("mmdet_" + request.param)
    yield build_case(request.param, root)
    drop_unless_failed(request, str(root))


def test_mmdet_detections(mmdet_case):
    """Every detection of mmdetection's own predictor matched by ours, and nothing more."""
    assert len(mmdet_case["ref"]["boxes"]) > 0, "mmdetection found nothing: the case tests nothing"
    ok, line = compare(mmdet_case)
    print(f"\n{line}; oracle {mmdet_case['report']}")
    assert ok, line


def test_mmdet_class_names(mmdet_case):
    """Our output names mmdet's classes (the training config's metainfo, or COCO's)."""
    c = mmdet_case
    names = list(c["ref"]["classes"])
    with open(c["out"]) as f:
        dets = json.load(f)["images"][0]["detections"]
    assert dets
    for d in dets:
        assert d["class"] == names[d["class_id"] - 1], d
    assert c["config"]["classes"]["class_names"][1:] == names
