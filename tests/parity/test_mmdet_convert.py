"""mmdetection itself as the oracle (oracle_mmdet.py in build/venv-mmdet): its environment and mmcv
shim, and models/convert.py on checkpoints that mmdetection's own model classes wrote.

Run with Debian's Python: cd tests/parity && /usr/bin/python3 -m pytest -q test_mmdet_convert.py

The converted tensors are compared with the mmdet model's own state_dict under the mapping of
shared/reference/zoo_variants.md §3c (zoo_checkpoints.mmdet_name, written from that table, not
from convert.py's) and the background-last class layout.  Without build/venv-mmdet every test here
fails, saying "run make deps".
"""

import collections
import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "models"))
import coco_classes  # noqa: E402
import oracle_mmdet as om  # noqa: E402
import safetensors_io  # noqa: E402
import zoo_checkpoints as zoo  # noqa: E402

torch = pytest.importorskip("torch")
CONVERT = os.path.join(REPO, "models", "convert.py")
CHELSEA = "/usr/lib/python3/dist-packages/skimage/data/chelsea.png"  # 451x300, python3-skimage


@pytest.fixture(scope="module")
def mmdet_py():
    try:
        return om.mmdet_python()
    except om.OracleMissing as e:
        pytest.fail(str(e))


def test_missing_environment_says_run_make_deps(tmp_path, monkeypatch):
    (tmp_path / "scripts").mkdir()
    shutil.copy(os.path.join(REPO, "scripts", "test_env.sh"), tmp_path / "scripts")
    monkeypatch.setattr(om, "REPO", str(tmp_path))
    with pytest.raises(om.OracleMissing, match=r"build/venv-mmdet/bin/python is missing.*run make deps"):
        om.mmdet_python()


SHIM_CHECK = r'''
import filecmp, os, sys, warnings
warnings.simplefilter("ignore")
import numpy as np, torch, torchvision
import mmcv, mmcv._ext as ext
from mmcv.ops import RoIAlign, batched_nms, nms

# the installed shim is the tree's
assert filecmp.cmp(ext.__file__, sys.argv[1], shallow=False), (ext.__file__, sys.argv[1])

# any other op is a stub that names itself; dunders stay missing
try:
    ext.deform_conv_forward(1, 2)
    raise SystemExit("stub did not raise")
except NotImplementedError as e:
    assert "deform_conv_forward" in str(e), e
assert not hasattr(ext, "__path__")

def mmcv_nms_cpu(b, s, thr, offset):
    """mmcv/ops/csrc/pytorch/cpu/nms.cpp, transcribed (float32)."""
    b = b.astype(np.float32)
    x1, y1, x2, y2 = b.T
    off = np.float32(offset)
    areas = (x2 - x1 + off) * (y2 - y1 + off)
    order = np.argsort(-s, kind="stable")
    keep, sel = [], np.ones(len(b), bool)
    for _i, i in enumerate(order):
        if not sel[_i]:
            continue
        keep.append(i)
        for _j in range(_i + 1, len(order)):
            j = order[_j]
            if not sel[_j]:
                continue
            w = max(np.float32(0), min(x2[i], x2[j]) - max(x1[i], x1[j]) + off)
            h = max(np.float32(0), min(y2[i], y2[j]) - max(y1[i], y1[j]) + off)
            inter = w * h
            if inter / (areas[i] + areas[j] - inter) > np.float32(thr):
                sel[_j] = False
    return np.array(keep, np.int64)

rng = np.random.default_rng(0)
xy = rng.uniform(0, 60, (300, 2)).astype(np.float32)
wh = rng.uniform(1, 30, (300, 2)).astype(np.float32)
boxes = np.concatenate([xy, xy + wh], 1)
scores = rng.permutation(300).astype(np.float32) / 300 + 0.001  # no ties
for offset in (0, 1):
    for thr in (0.3, 0.5, 0.7):
        dets, inds = nms(torch.from_numpy(boxes), torch.from_numpy(scores), thr, offset=offset)
        want = mmcv_nms_cpu(boxes, scores, thr, offset)
        assert np.array_equal(inds.numpy(), want), (offset, thr)
        assert torch.equal(dets[:, 4], torch.from_numpy(scores)[inds])
# batched_nms (mmcv's offset trick, then the shim) keeps torchvision's batched set
idxs = torch.from_numpy(rng.integers(0, 5, 300))
dets, keep = batched_nms(torch.from_numpy(boxes), torch.from_numpy(scores), idxs, dict(type="nms", iou_threshold=0.5))
tv = torchvision.ops.batched_nms(torch.from_numpy(boxes), torch.from_numpy(scores), idxs, 0.5)
assert torch.equal(keep, tv), "batched_nms"
empty = nms(torch.zeros(0, 4), torch.zeros(0), 0.5)[1]
assert empty.shape == (0,) and empty.dtype == torch.int64

# RoIAlign through the shim equals mmcv's own torchvision path (use_torchvision=True)
feat = torch.from_numpy(rng.standard_normal((2, 8, 40, 50)).astype(np.float32))
r = torch.from_numpy(np.concatenate([rng.integers(0, 2, (64, 1)), boxes[:64] * 2.5], 1).astype(np.float32))
r[0, 1:] = torch.tensor([10.0, 10.0, 10.2, 10.1])  # smaller than a bin
r[1, 1:] = torch.tensor([-30.0, -20.0, 400.0, 300.0])  # beyond the map
for size, scale, ratio, aligned in ((7, 0.25, 0, True), (14, 0.125, 0, True), (7, 0.25, 2, False)):
    a = RoIAlign(size, scale, ratio, aligned=aligned)(feat, r)
    b = RoIAlign(size, scale, ratio, aligned=aligned, use_torchvision=True)(feat, r.clone())
    assert a.shape == (64, 8, size, size) and torch.equal(a, b), (size, scale, ratio, aligned)
try:
    RoIAlign(7, 0.25, 0, pool_mode="max")(feat, r)
    raise SystemExit("max pooling did not raise")
except NotImplementedError as e:
    assert "pool_mode 0" in str(e), e
print("shim ok")
'''


def test_mmcv_shim(mmdet_py):
    """The torchvision shim for mmcv._ext (tests/mmdet/mmcv_ext.py, installed by make deps): mmcv's
    nms (offset 0 and 1) against a transcription of mmcv's CPU kernel, batched_nms against
    torchvision's, RoIAlign against mmcv's own torchvision branch; max pooling and every other op
    refused by name."""
    r = subprocess.run([mmdet_py, "-c", SHIM_CHECK, os.path.join(REPO, "tests", "mmdet", "mmcv_ext.py")],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "shim ok" in r.stdout, r.stderr[-3000:]


def convert(src, dst, *extra):
    r = subprocess.run([sys.executable, CONVERT, str(src), str(dst), *extra], capture_output=True, text=True,
                       timeout=600)
    assert r.returncode == 0, r.stderr
    tensors, meta = safetensors_io.load(dst)
    return tensors, meta, r


def expected_from_mmdet(sd, canon_names, rpn_convs):
    """Our tensors, from an mmdet state_dict: each canonical name's mmdet tensor (mmdet_name), the
    classifier's background row moved from last to 0, 4 zero background rows in front of a
    class-specific fc_reg and a zero channel in front of a class-specific conv_logits."""
    out = collections.OrderedDict()
    for c in canon_names:
        a = sd[zoo.mmdet_name(c, rpn_convs)].numpy()
        if c.startswith("box_predictor.cls_score."):
            a = np.concatenate([a[-1:], a[:-1]])
        elif c.startswith("box_predictor.bbox_pred.") and a.shape[0] != 4:
            a = np.concatenate([np.zeros((4,) + a.shape[1:], a.dtype), a])
        elif c.startswith("mask_head.logits.") and a.shape[0] != 1:
            a = np.concatenate([np.zeros((1,) + a.shape[1:], a.dtype), a])
        out[c] = a
    return out


def check_converted(ckpt, dst, canon_shapes, rpn_convs=1):
    """Convert mmdet's own file; its names are §3c's, and every converted tensor is mmdet's."""
    with open(ckpt, "rb") as f:  # publish_model.py's legacy (non-zip) torch.save format
        assert f.read(4) == b"\x80\x02\x8a\x0a"
    obj = torch.load(ckpt, map_location="cpu")
    assert sorted(obj) == ["meta", "state_dict"]
    sd = obj["state_dict"]
    names = {zoo.mmdet_name(c, rpn_convs) for c in canon_shapes}
    weights = {k for k in sd if not k.endswith("num_batches_tracked")}
    assert weights == names, sorted(weights ^ names)[:10]
    tensors, meta, r = convert(ckpt, dst)
    expected = expected_from_mmdet(sd, canon_shapes, rpn_convs)
    assert sorted(tensors) == sorted(expected)
    for k, want in expected.items():
        assert tensors[k].shape == want.shape and np.array_equal(tensors[k], want), k
    assert meta["source_format"] == "mmdetection" and "mmdetection checkpoint (detected)" in r.stdout
    assert meta["stride_in_1x1"] == "false"  # the saved config text says style='pytorch'
    return obj, tensors, meta, r


STRONG = {"model.neck.norm_cfg": {"type": "BN"}, "model.rpn_head.num_convs": 2,
          "model.roi_head.bbox_head.type": "Shared4Conv1FCBBoxHead",
          "model.roi_head.bbox_head.norm_cfg": {"type": "BN"},
          "model.roi_head.mask_head.norm_cfg": {"type": "BN"}}


@pytest.mark.parametrize("arch", ["classic", "lsj"])
def test_seeded_mmdet_checkpoint_converts(tmp_path, mmdet_py, arch):
    """mask-rcnn_r101_fpn_1x_coco built by mmdet (and, "lsj", with the strong baselines' heads
    through cfg_options: BN FPN, 2 RPN convs, Shared4Conv1FCBBoxHead and mask convs with BN),
    seeded, saved as a published zoo file: it converts, and every tensor is mmdet's."""
    ckpt = tmp_path / "model.pth"
    results, report = om.run_oracle(om.MASK_RCNN_R101, 7, None, None, checkpoint_out=ckpt,
                                    cfg_options=STRONG if arch == "lsj" else None)
    assert results is None and report["num_classes"] == 80
    rpn_convs = 2 if arch == "lsj" else 1
    obj, tensors, meta, r = check_converted(ckpt, tmp_path / "model.safetensors",
                                            zoo.canonical_shapes(depth=101, **zoo.ARCHS[arch]), rpn_convs)
    assert meta["architecture"] == ("bn_heads_rpn2" if arch == "lsj" else "classic")
    assert (meta["depth"], meta["num_classes"], meta["norm_eps"]) == ("101", "81", "1e-05")
    assert (meta["box_head_class_agnostic"], meta["mask_head_class_agnostic"]) == ("false", "false")
    # mmdet's COCO names (meta['dataset_meta']['classes']) are ours
    assert list(obj["meta"]["dataset_meta"]["classes"]) == coco_classes.COCO_81[1:]
    assert json.loads(meta["class_names"]) == coco_classes.COCO_81
    assert "style='pytorch'" in obj["meta"]["cfg"]
    # the seeded statistics are not the defaults (so folding them is tested downstream)
    assert not np.allclose(tensors["backbone.res4.7.conv2.norm.running_var"], 1)


CUSTOM_CFG = """_base_ = '{base}'
metainfo = dict(classes=('cat', 'dog', 'traffic cone'))
model = dict(
    roi_head=dict(
        bbox_head=dict(num_classes=3, reg_class_agnostic=True),
        mask_head=dict(num_classes=3, class_agnostic=True)))
test_pipeline = [
    dict(type='LoadImageFromFile', backend_args=None),
    dict(type='Resize', scale=(512, 320), keep_ratio=True),
    dict(type='PackDetInputs', meta_keys=('img_id', 'img_path', 'ori_shape', 'img_shape', 'scale_factor')),
]
train_dataloader = dict(dataset=dict(metainfo=metainfo))
val_dataloader = dict(dataset=dict(metainfo=metainfo, pipeline=test_pipeline))
test_dataloader = val_dataloader
"""


def test_custom_agnostic_config_oracle(tmp_path, mmdet_py):
    """A training config that `_base_`s on mmdet's R-101 config: 3 named classes, class-agnostic box
    regression and masks, a smaller test resize.  The oracle runs it on a photograph (decoded with
    Pillow), hooks included; its checkpoint converts with the names and agnostic heads; and mmdet,
    loading that checkpoint, gives the seeded run's detections exactly."""
    base = os.path.join(mmdet_site(mmdet_py), "mmdet", ".mim", "configs", om.MASK_RCNN_R101)
    cfg = tmp_path / "mask-rcnn_r101_fpn_custom.py"
    cfg.write_text(CUSTOM_CFG.format(base=base))
    ckpt = tmp_path / "custom.pth"
    res, report = om.run_oracle(str(cfg), 3, CHELSEA, tmp_path / "seeded.npz", checkpoint_out=ckpt,
                                intermediates=True)
    n = len(res["scores"])
    assert report["detections"] == n > 0 and report["num_classes"] == 3
    assert list(res["classes"]) == ["cat", "dog", "traffic cone"]
    assert list(res["ori_shape"]) == [300, 451] and list(res["img_shape"]) == [320, 481]
    assert res["masks"].shape == (n, 300, 451) and res["masks"].dtype == bool
    assert res["labels"].min() >= 0 and res["labels"].max() < 3
    b = res["boxes"]
    assert (b[:, 0] >= 0).all() and (b[:, 2] <= 451).all() and (b[:, 1] >= 0).all() and (b[:, 3] <= 300).all()
    assert np.all(np.diff(res["scores"]) <= 0) and res["scores"].min() > 0.05
    # the hooks: proposals in resized pixels, the agnostic heads' raw outputs
    rois = res["hook_box_rois"]
    assert rois.shape[1] == 5 and 0 < len(rois) <= 1000 and (rois[:, 3] <= 481).all() and (rois[:, 4] <= 320).all()
    assert res["hook_box_cls"].shape == (len(rois), 4) and res["hook_box_reg"].shape == (len(rois), 4)
    assert res["hook_mask_rois"].shape == (n, 5) and res["hook_mask_logits"].shape == (n, 1, 28, 28)
    assert res["hook_rpn_cls_p2"].shape == (3, 80, 128) and res["hook_rpn_reg_p6"].shape == (12, 5, 8)

    canon = zoo.canonical_shapes(depth=101, K=4, box_agnostic=True, mask_agnostic=True)
    obj, tensors, meta, r = check_converted(ckpt, tmp_path / "custom.safetensors", canon)
    assert tensors["box_predictor.bbox_pred.weight"].shape == (4, 1024)
    assert tensors["mask_head.logits.weight"].shape[0] == 1
    assert (meta["box_head_class_agnostic"], meta["mask_head_class_agnostic"]) == ("true", "true")
    assert json.loads(meta["class_names"]) == ["__background__", "cat", "dog", "traffic cone"]
    assert "box_head.class_agnostic_regression true" in r.stdout and "mask_head.class_agnostic true" in r.stdout

    again, _ = om.run_oracle(str(cfg), str(ckpt), CHELSEA, tmp_path / "loaded.npz")
    for k in ("boxes", "scores", "labels", "masks", "classes"):
        assert np.array_equal(again[k], res[k]), k


def mmdet_site(mmdet_py):
    r = subprocess.run([mmdet_py, "-c", "import mmdet, os; print(os.path.dirname(os.path.dirname(mmdet.__file__)))"],
                       capture_output=True, text=True, check=True)
    return r.stdout.strip()
