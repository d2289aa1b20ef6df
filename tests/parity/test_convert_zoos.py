"""models/convert.py on checkpoints in each model zoo's own format.

Run with Debian's Python: cd tests/parity && /usr/bin/python3 -m pytest -q test_convert_zoos.py

Synthetic files with the zoos' real names, shapes and layouts (zoo_checkpoints.py), random
values.  Each converted tensor is compared with the value computed here from the source
arrays after the documented reordering or folding: detectron2's class rows, maskrcnn-benchmark's
eps-free FrozenBatchNorm2d folded with torch's own ops.
"""

import base64
import collections
import hashlib
import json
import os
import pickle
import pickletools
import re
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CONVERT = os.path.join(REPO, "models", "convert.py")
DOWNLOAD = os.path.join(REPO, "models", "download.sh")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "models"))
import coco_classes  # noqa: E402
import safetensors_io  # noqa: E402
import zoo_checkpoints as zoo  # noqa: E402

torch = pytest.importorskip("torch")

CFG_YAML = b"MODEL:\n  TYPE: generalized_rcnn\n  NUM_CLASSES: 81\n"


def run_convert(src, dst, *extra):
    return subprocess.run([sys.executable, CONVERT, str(src), str(dst), *extra],
                          capture_output=True, text=True, timeout=600)


def convert_ok(src, dst, *extra):
    r = run_convert(src, dst, *extra)
    assert r.returncode == 0, r.stderr
    tensors, meta = safetensors_io.load(dst)
    return tensors, meta, r


def assert_fails(src, dst, *patterns):
    r = run_convert(src, dst)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    assert r.stderr.startswith(f"convert.py: {src}: ") and r.stderr.count("\n") == 1, r.stderr
    for p in patterns:
        assert re.search(p, r.stderr), (p, r.stderr)
    assert not os.path.exists(dst)
    return r.stderr


def assert_tensors(tensors, expected):
    assert sorted(tensors) == sorted(expected)
    for k, want in expected.items():
        got = tensors[k]
        assert got.dtype == np.float32 and got.shape == want.shape, (k, got.shape, want.shape)
        assert np.array_equal(got, want.astype(np.float32)), k


def assert_meta(meta, src, fmt, depth, K, norm, eps, names):
    assert meta["format"] == "detect-maskrcnn" and meta["source_format"] == fmt
    assert meta["source_sha256"] == hashlib.sha256(open(src, "rb").read()).hexdigest()
    assert (meta["depth"], meta["num_classes"], meta["norm"]) == (str(depth), str(K), norm)
    assert meta.get("norm_eps") == eps
    assert meta["num_groups"] == "1"
    assert meta["suggested_config"] == f"configs/mask_rcnn_R-{depth}-FPN_{fmt}.json"
    assert json.loads(meta["class_names"]) == names


@pytest.fixture(scope="module")
def r101():
    return zoo.canonical_model(seed=0, depth=101)


@pytest.fixture(scope="module")
def r50():
    return zoo.canonical_model(seed=1, depth=50)


@pytest.fixture(scope="module")
def tiny():
    return zoo.canonical_model(seed=2, depth=50, **zoo.TINY)


# ---- Detectron ---------------------------------------------------------------------------

# Made by Python 2.7.18 + numpy 1.16.6 (cPickle.dumps(d, 2)) with
#   rs = np.random.RandomState(0); blobs = {'conv1_w': rs.randn(4,3,2,2).astype(np.float32),
#   'conv1_b': np.zeros(4, np.float32), 'res_conv1_bn_s': rs.randn(4)..., 'res_conv1_bn_b':
#   rs.randn(4)..., 'fc6_w_momentum': rs.randn(3,30)..., '_[mask]_fcn1_w': rs.randn(2,2,3,3)...}
#   d = dict(blobs=blobs, cfg='MODEL:\n  NUM_CLASSES: 81\n  TYPE: generalized_rcnn\n' + '# padding\n'*30)
# (Python 2 iterated d as cfg, blobs and blobs in the order of PY2_BLOB_ORDER.)  A 1100-blob
# dict with computed keys (SETITEMS batches of 1000, LONG_BINPUT, unmemoized keys) was also
# compared byte for byte once when the emitter was written.
PY2_FIXTURE = (
    "gAJ9cQEoVQNjZmdxAlReAQAATU9ERUw6CiAgTlVNX0NMQVNTRVM6IDgxCiAgVFlQRTogZ2VuZXJhbGl6ZWRfcmNubgoj"
    "IHBhZGRpbmcKIyBwYWRkaW5nCiMgcGFkZGluZwojIHBhZGRpbmcKIyBwYWRkaW5nCiMgcGFkZGluZwojIHBhZGRpbmcK"
    "IyBwYWRkaW5nCiMgcGFkZGluZwojIHBhZGRpbmcKIyBwYWRkaW5nCiMgcGFkZGluZwojIHBhZGRpbmcKIyBwYWRkaW5n"
    "CiMgcGFkZGluZwojIHBhZGRpbmcKIyBwYWRkaW5nCiMgcGFkZGluZwojIHBhZGRpbmcKIyBwYWRkaW5nCiMgcGFkZGlu"
    "ZwojIHBhZGRpbmcKIyBwYWRkaW5nCiMgcGFkZGluZwojIHBhZGRpbmcKIyBwYWRkaW5nCiMgcGFkZGluZwojIHBhZGRp"
    "bmcKIyBwYWRkaW5nCiMgcGFkZGluZwpxA1UFYmxvYnNxBH1xBShVDnJlc19jb252MV9ibl9icQZjbnVtcHkuY29yZS5t"
    "dWx0aWFycmF5Cl9yZWNvbnN0cnVjdApxB2NudW1weQpuZGFycmF5CnEISwCFVQFih1JxCShLAUsEhWNudW1weQpkdHlw"
    "ZQpxClUCZjRLAEsBh1JxCyhLA1UBPE5OTkr/////Sv////9LAHRiiVUQIMQCv/Uel79r3ua8UU7bPnRiVQ5mYzZfd19t"
    "b21lbnR1bXEMaAdoCEsAhVUBYodScQ0oSwFLA0sehmgLiVRoAQAALjqIPZndmj7vYiK/Nrm5vl4mLL9aF7i+WypQv9T2"
    "3L8zrzU+O7bNvleq0L/M8ew+tURov7LEVD2upTo/GRQEPuLXkT/GDp6/uf/NPrdPL7+Q7F6/fi8Uv9CDn76hDWY9oSOV"
    "v5GcZj9Pa+4+oqPEvwx/vj9/rPI/QOKWPzc+OL5sDom/RviGPzVtzr4UeZw/CUZVPgQFej+odbY+++E0P0cILDxol+Q/"
    "PvUBPo3RzT4VC/E/XoOsv0Gfor9iKng/6CiWv5TI+D/exdO+M1k/v/ci9j+Cgb0/LAzvP4vyZz9JeVy/An30P703ib7I"
    "bU0/G39yP/e6Hr5ONB0/vRVsP9m6wD4quYy/rbKYPgPHqT8zzzG/zDkZvnLM3r6ttOw/ghssP9ae0D44GUW/PAwKPxGh"
    "LL/CYAI9z8Yiv7sqLT91mxM/RUxVvmTByj5x6Yu/h+G+v/P34D51rCo+bJEiP3KFGEBoyXE/dGJVB2NvbnYxX2JxDmgH"
    "aAhLAIVVAWKHUnEPKEsBSwSFaAuJVRAAAAAAAAAAAAAAAAAAAAAAdGJVDnJlc19jb252MV9ibl9zcRBoB2gISwCFVQFi"
    "h1JxEShLAUsEhWgLiVUQNJTOv5fYWb5MPWW/FhjGPnRiVQ5fW21hc2tdX2ZjbjFfd3ESaAdoCEsAhVUBYodScRMoSwEo"
    "SwJLAksDSwN0aAuJVZC4rmm/ZPqOP6dvqL/RVOy+QcKLvdBO2z9BqD6/epFTv3qhyb232Sm/mzWQPzI7ir9B4JK/8yng"
    "vhz+/r7o+vY/Pg1zPxFOsz0S25y/LChYPw4HgL8Pu8W/XBGYP01Goj5nvWs/RTCjPkBZWz+dqSa/EmKEv/p8Lj9BrE2/"
    "VoYwv4476b50MI88sT61vmf+r790YlUHY29udjFfd3EUaAdoCEsAhVUBYodScRUoSwEoSwRLA0sCSwJ0aAuJVcB4zOE/"
    "aOHMPpOOej/Lag9AJAzvP+Iuer//OHM/Yv0avmhk0734OdI+KIATPqIluj9e00I/wDD5PQtC4z5d16o+/D2/PwIVUr5p"
    "SqA+BaZavy9kI8CMUyc/sUtdP4f+Pb+pQxFAqCi6v0htOz0grT++HDLEP/MTvD+Kqh4+hZ7BPu1FY7+9iv2/iyGyvvIZ"
    "ID4qep0/leeZP7NPxr5tx5q+/DaGvybDtb8QZ9q/ArP5P5F4Ar9GS+C+mVugv5wJRz90YnV1Lg==")
PY2_BLOB_ORDER = ["res_conv1_bn_b", "fc6_w_momentum", "conv1_b", "res_conv1_bn_s", "_[mask]_fcn1_w", "conv1_w"]


def py2_fixture_blobs():
    rs = np.random.RandomState(0)  # the legacy generator's stream is stable across numpy versions
    b = {"conv1_w": rs.randn(4, 3, 2, 2).astype(np.float32), "conv1_b": np.zeros(4, np.float32)}
    b["res_conv1_bn_s"] = rs.randn(4).astype(np.float32)
    b["res_conv1_bn_b"] = rs.randn(4).astype(np.float32)
    b["fc6_w_momentum"] = rs.randn(3, 30).astype(np.float32)
    b["_[mask]_fcn1_w"] = rs.randn(2, 2, 3, 3).astype(np.float32)
    return [(k, b[k]) for k in PY2_BLOB_ORDER]


def test_py2_emitter_is_byte_identical_to_python2():
    ref = base64.b64decode(PY2_FIXTURE)
    blobs = py2_fixture_blobs()
    cfg = b"MODEL:\n  NUM_CLASSES: 81\n  TYPE: generalized_rcnn\n" + b"# padding\n" * 30
    assert zoo.py2_pickle([("cfg", cfg), ("blobs", blobs)], inner_keys_shared=True) == ref
    ops = {op.name for op, _, _ in pickletools.genops(ref)}
    assert {"SHORT_BINSTRING", "BINSTRING"} <= ops and not ops & {"BINBYTES", "BINUNICODE", "SHORT_BINBYTES"}
    # numpy itself reads it (latin-1 decoding of the Py2 str data) ...
    real = pickle.loads(ref, encoding="latin1")
    # ... and so does convert.py's restricted reader, without numpy's globals
    import convert
    ours = convert.read_pickle_checkpoint_bytes(ref)
    assert real["cfg"] == ours["cfg"] == cfg.decode()
    for k, a in blobs:
        assert np.array_equal(real["blobs"][k], a) and np.array_equal(ours["blobs"][k].numpy(), a), k
        assert ours["blobs"][k].dtype == np.float32


def detectron_pkl(tmp, canon, name="model_final.pkl"):
    blobs, expected = zoo.detectron_blobs(canon)
    p = tmp / name
    p.write_bytes(zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", blobs)]))
    return p, dict(blobs), expected


def test_detectron_r101(tmp_path, r101):
    src, blobs, expected = detectron_pkl(tmp_path, r101)
    tensors, meta, r = convert_ok(src, tmp_path / "r101.safetensors")
    assert_tensors(tensors, expected)
    assert len(tensors) == 562 - 104 * 2  # AffineChannel: 2 params per norm instead of 4
    assert_meta(meta, src, "detectron", 101, 81, "affine", None, coco_classes.COCO_81)
    assert tensors["backbone.res4.22.conv3.norm.scale"] is not None
    assert np.array_equal(tensors["fpn.lateral4.weight"], blobs["fpn_inner_res4_22_sum_lateral_w"])
    assert np.array_equal(tensors["mask_head.fcn3.bias"], blobs["_[mask]_fcn3_b"])
    n_mom = sum(k.endswith("_momentum") for k in blobs)
    assert "detectron checkpoint (detected)" in r.stdout
    assert f"ignored {104 + n_mom + 2} source tensors" in r.stdout
    assert "104 zero biases" in r.stdout and f"{n_mom} optimizer momentum" in r.stdout
    assert "suggested config: configs/mask_rcnn_R-101-FPN_detectron.json" in r.stdout
    assert r.stderr == ""


def test_detectron_tiny_r50_warnings_and_errors(tmp_path, tiny):
    blobs, expected = zoo.detectron_blobs(tiny)
    d = dict(blobs)
    assert "fpn_inner_res4_5_sum_lateral_w" in d and "fpn_res5_2_sum_b" in d  # R-50's last blocks
    src = tmp_path / "r50.pkl"
    bias = np.zeros_like(d["res3_1_branch2b_b"])
    bias[2] = 0.25
    items = [(k, bias if k == "res3_1_branch2b_b" else v) for k, v in blobs]
    src.write_bytes(zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", items)]))
    tensors, meta, r = convert_ok(src, tmp_path / "r50.safetensors", "--from", "detectron")
    assert_tensors(tensors, expected)
    # the tiny model's widths are not the zoo's and no config in configs/ has them: none is suggested
    # (the stock R-50 config would refuse its tensors by shape)
    assert meta["depth"] == "50" and meta["suggested_config"] == ""
    assert "suggested config: none" in r.stdout
    assert "given with --from" in r.stdout
    assert r.stderr.count("\n") == 1 and "warning: ignored blob res3_1_branch2b_b is not zero" in r.stderr

    def write(items, name):
        p = tmp_path / name
        p.write_bytes(zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", items)]))
        return str(p)

    dst = str(tmp_path / "err.safetensors")
    assert_fails(write(blobs + [("res3_1_branch2d_w", d["res3_1_branch2b_w"])], "unknown.pkl"), dst,
                 r"unknown tensor name\(s\) for --from detectron: res3_1_branch2d_w")
    assert_fails(write([(k, v) for k, v in blobs if k != "res4_3_branch2b_bn_s"], "missing.pkl"), dst,
                 r"missing tensor\(s\): backbone\.res4\.3\.conv2\.norm\.scale \(detectron: res4_3_branch2b_bn_s\)")
    # A mis-numbered FPN blob: the names say which block ends res4
    ren = [("fpn_inner_res4_4_sum_lateral_w" if k == "fpn_inner_res4_5_sum_lateral_w" else k, v) for k, v in blobs]
    assert_fails(write(ren, "fpn.pkl"), dst, r"unknown.*fpn_inner_res4_4_sum_lateral_w")


def test_detectron_pkl_globals_never_run(tmp_path, tiny):
    """numpy's own functions are not among what the .pkl reader resolves; anything else is an
    inert placeholder: an os.system in a blob is an error naming it, next to the blobs it is
    ignored, and in neither case does it run."""
    marker = tmp_path / "pwned"
    evil = b"cposix\nsystem\n(V" + f"touch {marker}".encode() + b"\ntR"
    blobs, _ = zoo.detectron_blobs(tiny)
    good = zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", blobs)])
    # replace the data of the first array by an os.system call: the blob is then no array
    at = good.index(b"cnumpy.core.multiarray\n_reconstruct\n")
    i = good.index(b"\x89", at) + 1  # NEWFALSE, then the data string
    assert good[i:i + 1] in (b"U", b"T")
    n = good[i + 1] if good[i:i + 1] == b"U" else int.from_bytes(good[i + 1:i + 5], "little")
    j = i + (2 if good[i:i + 1] == b"U" else 5) + n
    bad = good[:i] + evil + good[j:]
    (tmp_path / "evil.pkl").write_bytes(bad)
    assert_fails(str(tmp_path / "evil.pkl"), str(tmp_path / "o.safetensors"), r"numpy array data is not a byte string")
    # outside the blobs: ignored, reported, not run
    extra = good[:-1] + b"U\x05extra" + evil + b"s."  # d['extra'] = os.system(...) before STOP
    (tmp_path / "extra.pkl").write_bytes(extra)
    t, _, r = convert_ok(tmp_path / "extra.pkl", tmp_path / "x.safetensors")
    assert "posix.system" in r.stdout and "cfg, extra" in r.stdout
    assert not marker.exists()


# ---- detectron2 --------------------------------------------------------------------------

def test_detectron2_pkl_r101(tmp_path, r101):
    sd, expected = zoo.d2_tensors(r101)
    with open(os.path.join(os.path.dirname(__file__), "detectron2_r101_keys.txt")) as f:
        ref = dict(re.match(r"(\S+) \[([\d, ]+)\]", l).groups() for l in f if re.match(r"\S+ \[", l))
    assert {k: tuple(map(int, v.split(","))) for k, v in ref.items()} == {k: v.shape for k, v in sd.items()}
    src = tmp_path / "model_final_a3ec72.pkl"
    with open(src, "wb") as f:  # as detectron2's zoo writes it (Python 3 pickle of numpy arrays)
        pickle.dump({"model": sd, "__author__": "Detectron2 Model Zoo"}, f, protocol=4)
    tensors, meta, r = convert_ok(src, tmp_path / "d2.safetensors")
    assert_tensors(tensors, expected)
    assert_meta(meta, src, "detectron2", 101, 81, "batchnorm", "1e-05", coco_classes.COCO_81)
    # the reordering, spelled out on the source arrays
    cls = sd["roi_heads.box_predictor.cls_score.weight"]
    assert np.array_equal(tensors["box_predictor.cls_score.weight"][0], cls[80])
    assert np.array_equal(tensors["box_predictor.cls_score.weight"][1:], cls[:80])
    assert not tensors["box_predictor.bbox_pred.bias"][:4].any()
    assert np.array_equal(tensors["box_predictor.bbox_pred.weight"][4 * 5:4 * 6],
                          sd["roi_heads.box_predictor.bbox_pred.weight"][4 * 4:4 * 5])
    assert np.array_equal(tensors["mask_head.logits.weight"][7], sd["roi_heads.mask_head.predictor.weight"][6])
    assert "detectron2 checkpoint (detected)" in r.stdout and "__author__" in r.stdout


def test_detectron2_pth_r50_with_training_state(tmp_path, r50):
    """A detectron2 training checkpoint: {'model', 'optimizer', 'scheduler', 'iteration'}; the
    scheduler holds fvcore objects whose classes the reader does not resolve: they stay inert."""
    import argparse
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    sd, expected = zoo.d2_tensors(r50)
    model = collections.OrderedDict((k, torch.from_numpy(v)) for k, v in sd.items())
    model["pixel_mean"] = torch.zeros(3, 1, 1)  # persistent in older detectron2 versions
    ckpt = {"model": model,
            "optimizer": {"state": {0: {"momentum_buffer": torch.ones(3)}}, "param_groups": [{"lr": 0.02}]},
            "scheduler": {"_multiplier": argparse.Namespace(milestones=[1, 2]), "evil": Evil()},
            "iteration": 269999}
    src = tmp_path / "model_final.pth"
    torch.save(ckpt, src)
    tensors, meta, r = convert_ok(src, tmp_path / "d2.safetensors")
    assert_tensors(tensors, expected)
    assert_meta(meta, src, "detectron2", 50, 81, "batchnorm", "1e-05", coco_classes.COCO_81)
    assert not marker.exists()
    assert "optimizer, scheduler, iteration" in r.stdout
    assert "argparse.Namespace" in r.stdout and "system" in r.stdout
    assert "1 pixel_mean/pixel_std" in r.stdout


def test_detectron2_errors_and_groups(tmp_path, tiny):
    sd, expected = zoo.d2_tensors(tiny)
    dst = str(tmp_path / "err.safetensors")

    def write(d, name, protocol=2):
        p = tmp_path / name
        with open(p, "wb") as f:
            pickle.dump({"model": d, "__author__": "Detectron2 Model Zoo"}, f, protocol=protocol)
        return str(p)

    # protocol 2 (bytes as _codecs.encode(text, 'latin1')) and 5 (numpy's _frombuffer)
    for proto in (2, 5):
        t, _, _ = convert_ok(write(sd, f"p{proto}.pkl", proto), tmp_path / f"p{proto}.safetensors")
        assert_tensors(t, expected)
    # a bbox_pred that is neither class-specific (4 per foreground class) nor agnostic (4 rows)
    odd = dict(sd)
    odd["roi_heads.box_predictor.bbox_pred.weight"] = sd["roi_heads.box_predictor.bbox_pred.weight"][:8]
    odd["roi_heads.box_predictor.bbox_pred.bias"] = sd["roi_heads.box_predictor.bbox_pred.bias"][:8]
    assert_fails(write(odd, "odd.pkl"), dst, r"roi_heads\.box_predictor\.bbox_pred\.weight has 8 rows; detectron2 "
                 r"stores 4 deltas per foreground class \(320\), or 4 for a class-agnostic head", r"81 rows")
    extra = dict(sd, **{"roi_heads.keypoint_head.conv_fcn1.weight": sd["roi_heads.mask_head.mask_fcn1.weight"]})
    assert_fails(write(extra, "extra.pkl"), dst, r"unknown tensor name\(s\) for --from detectron2: "
                 r"roi_heads\.keypoint_head\.conv_fcn1\.weight")
    miss = {k: v for k, v in sd.items() if k != "backbone.bottom_up.res3.2.conv2.norm.running_var"}
    assert_fails(write(miss, "miss.pkl"), dst, r"missing tensor\(s\): backbone\.res3\.2\.conv2\.norm\.running_var "
                 r"\(detectron2: backbone\.bottom_up\.res3\.2\.conv2\.norm\.running_var\)")
    # --from that does not fit the file
    r = run_convert(write(sd, "ok.pkl"), dst, "--from", "torchvision")
    assert r.returncode == 2 and "--from torchvision reads a torch.save() file (.pth)" in r.stderr
    assert not os.path.exists(dst)

    # ResNeXt-style grouped 3x3 convs (X-101 32x8d: 32 groups of 8): detected from the conv2 shape
    x = zoo.canonical_model(seed=3, depth=50, groups=4, **dict(zoo.TINY, width=16))
    xsd, xexp = zoo.d2_tensors(x)
    t, meta, r = convert_ok(write(xsd, "x.pkl"), tmp_path / "x.safetensors")
    assert_tensors(t, xexp)
    assert (meta["num_groups"], meta["width_per_group"], meta["suggested_config"]) == ("4", "4", "")
    assert "4 groups x 4" in r.stdout and "suggested config: none" in r.stdout


# ---- maskrcnn-benchmark ------------------------------------------------------------------

def mb_checkpoint(canon, legacy=True, path=None):
    gn = "mask_head.fcn1.norm.weight" in canon
    sd = collections.OrderedDict()
    for name, a in canon.items():
        sd["module." + zoo.mb_name(name, gn)] = torch.from_numpy(a)
    for i in range(5):  # AnchorGenerator's BufferList
        sd[f"module.rpn.anchor_generator.cell_anchors.{i}"] = torch.zeros(3, 4)
    ckpt = {"model": sd, "optimizer": {"state": {}, "param_groups": [{"lr": 0.02}]},
            "scheduler": {"milestones": [60000, 80000], "last_epoch": 90000}, "iteration": 90000}
    torch.save(ckpt, path, _use_new_zipfile_serialization=not legacy)
    return sd


def mb_expected(canon, sd):
    """What maskrcnn-benchmark computes, with its own float32 torch ops
    (layers/batch_norm.py FrozenBatchNorm2d: scale = weight * running_var.rsqrt(),
    bias = bias - running_mean * scale)."""
    gn = "mask_head.fcn1.norm.weight" in canon
    out = collections.OrderedDict()
    for name in canon:
        g = name[: name.rindex(".")]
        frozen_bn = name.startswith("backbone.") and g + ".running_var" in canon
        if name.endswith((".running_mean", ".running_var")) or name.endswith(".norm.bias") and frozen_bn:
            continue
        src = sd["module." + zoo.mb_name(name, gn)]
        if name.endswith(".norm.weight") and frozen_bn:
            get = lambda p: sd["module." + zoo.mb_name(f"{g}.{p}")]  # noqa: E731
            scale = get("weight") * get("running_var").rsqrt()
            out[g + ".scale"] = scale.numpy()
            out[g + ".shift"] = (get("bias") - get("running_mean") * scale).numpy()
        else:
            out[name] = src.numpy()
    return out


def test_maskrcnn_benchmark_r101(tmp_path, r101):
    src = tmp_path / "e2e_mask_rcnn_R_101_FPN_1x.pth"
    sd = mb_checkpoint(r101, legacy=True, path=src)  # the zoo's 2018 files predate torch 1.6's zip format
    tensors, meta, r = convert_ok(src, tmp_path / "mb.safetensors")
    assert_tensors(tensors, mb_expected(r101, sd))
    assert_meta(meta, src, "maskrcnn-benchmark", 101, 81, "affine", None, coco_classes.COCO_81)
    assert "maskrcnn-benchmark checkpoint (detected)" in r.stdout
    assert "5 anchor buffers" in r.stdout and "optimizer, scheduler, iteration" in r.stdout


def test_maskrcnn_benchmark_errors(tmp_path, tiny):
    dst = str(tmp_path / "err.safetensors")
    src = tmp_path / "zip.pth"
    sd = mb_checkpoint(tiny, legacy=False, path=src)
    t, meta, _ = convert_ok(src, tmp_path / "ok.safetensors", "--from", "maskrcnn-benchmark")
    assert_tensors(t, mb_expected(tiny, sd))
    # a zero running_var: maskrcnn-benchmark would divide by zero (no eps)
    bad = dict(sd)
    bad["module.backbone.body.layer2.1.bn2.running_var"] = torch.zeros_like(bad["module.backbone.body.layer2.1.bn2.running_var"])
    torch.save({"model": bad}, tmp_path / "var0.pth")
    assert_fails(str(tmp_path / "var0.pth"), dst, r"backbone\.res3\.1\.conv2\.norm\.scale", r"NaN or Inf")
    miss = {k: v for k, v in sd.items() if k != "module.roi_heads.mask.feature_extractor.mask_fcn2.bias"}
    torch.save({"model": miss}, tmp_path / "miss.pth")
    assert_fails(str(tmp_path / "miss.pth"), dst,
                 r"missing tensor\(s\): mask_head\.fcn2\.bias \(maskrcnn-benchmark: roi_heads\.mask\.feature_extractor\.mask_fcn2\.bias\)")
    extra = dict(sd, **{"module.roi_heads.box.feature_extractor.fc8.weight": torch.zeros(2)})
    torch.save({"model": extra}, tmp_path / "extra.pth")
    assert_fails(str(tmp_path / "extra.pth"), dst, r"unknown tensor name\(s\) for --from maskrcnn-benchmark: "
                 r"roi_heads\.box\.feature_extractor\.fc8\.weight")
    r = run_convert(src, dst, "--from", "detectron")
    assert r.returncode == 2 and "--from detectron reads a plain pickle of numpy arrays (.pkl)" in r.stderr


# ---- torchvision -------------------------------------------------------------------------

def test_torchvision_coco_r50_legacy_names(tmp_path, r50):
    """torchvision's own COCO checkpoint is R-50 with 91 classes, saved by torchvision 0.3
    (names before the 0.13 refactor)."""
    canon = zoo.canonical_model(seed=4, depth=50, K=91)
    sd = collections.OrderedDict((zoo.tv_legacy_name(k), torch.from_numpy(v)) for k, v in canon.items())
    for k in [k for k in sd if k.endswith("running_var")]:
        sd[k[: -len("running_var")] + "num_batches_tracked"] = torch.tensor(0)
    assert "rpn.head.conv.weight" in sd and "roi_heads.mask_head.mask_fcn1.weight" in sd
    assert "backbone.fpn.inner_blocks.0.weight" in sd
    src = tmp_path / "maskrcnn_resnet50_fpn_coco.pth"
    torch.save(sd, src, _use_new_zipfile_serialization=False)
    tensors, meta, r = convert_ok(src, tmp_path / "tv.safetensors")
    assert_tensors(tensors, canon)
    assert_meta(meta, src, "torchvision", 50, 91, "batchnorm", "1e-05", coco_classes.TORCHVISION_91)
    names = json.loads(meta["class_names"])
    assert names[0] == "__background__" and names[12] == "N/A" and names[90] == "toothbrush"
    assert "torchvision checkpoint (detected)" in r.stdout and "53 BatchNorm num_batches_tracked" in r.stdout


def test_unreadable_inputs(tmp_path):
    dst = str(tmp_path / "o.safetensors")
    (tmp_path / "text.pkl").write_bytes(b"just text, no pickle")
    assert_fails(str(tmp_path / "text.pkl"), dst, r"not a torch\.save\(\) file .* nor a pickle of numpy arrays")
    (tmp_path / "list.pkl").write_bytes(pickle.dumps([1, 2, 3], protocol=2))
    assert_fails(str(tmp_path / "list.pkl"), dst, r"neither Detectron's \{'blobs': \.\.\.\} nor detectron2's")
    (tmp_path / "trunc.pkl").write_bytes(pickle.dumps({"blobs": {"conv1_w": np.ones(300, np.float32)}}, protocol=2)[:-700])
    assert_fails(str(tmp_path / "trunc.pkl"), dst, r"truncated")
    obj = pickle.dumps({"blobs": {"conv1_w": np.array(["a"], dtype=object)}}, protocol=2)
    (tmp_path / "obj.pkl").write_bytes(obj)
    assert_fails(str(tmp_path / "obj.pkl"), dst, r"numpy dtype 'O8?' is not a plain number type")


def test_oversized_length_prefix_is_refused(tmp_path):
    """Found by fuzzing the .pkl reader: a BYTEARRAY8 whose declared length exceeds the data made
    CPython's unpickler allocate the declared size first, or print an ignored SystemError
    ('deallocated bytearray object has exported buffers') besides our error line."""
    good = pickle.dumps({"model": {"a": np.ones(3, np.float32)}}, protocol=5)
    i = good.index(b"\x96")  # BYTEARRAY8 <u64 length>: numpy's in-band buffer
    bad = good[:i + 1] + (1 << 40).to_bytes(8, "little") + good[i + 9:]
    (tmp_path / "big.pkl").write_bytes(bad)
    err = assert_fails(str(tmp_path / "big.pkl"), str(tmp_path / "o.safetensors"), r"truncated pickle data")
    assert "SystemError" not in err


# ---- the stronger architectures: norms in the FPN and heads, 2 RPN convs, 4conv1fc -----------
# (shared/reference/zoo_variants.md sections 1, 2 and 5)

SMALL_HEADS = dict(fpn=32, rep=64, mask=32)  # the zoos' trunk widths (so a config is suggested), small heads

# What the converter reports for each architecture preset of zoo_checkpoints.ARCHS.
ARCH_META = {
    "lsj": dict(architecture="bn_heads_rpn2", norm="batchnorm", fpn_norm="batchnorm", rpn_num_convs="2",
                box_head_num_convs="4", box_head_num_fcs="1", box_head_norm="batchnorm",
                mask_head_norm="batchnorm"),
    "syncbn": dict(architecture="bn_heads", norm="batchnorm", fpn_norm="batchnorm", rpn_num_convs="1",
                   box_head_num_convs="4", box_head_num_fcs="1", box_head_norm="batchnorm",
                   mask_head_norm="batchnorm"),
    "gn": dict(architecture="gn_heads", norm="group_norm", fpn_norm="group_norm", rpn_num_convs="1",
               box_head_num_convs="4", box_head_num_fcs="1", box_head_norm="group_norm",
               mask_head_norm="group_norm"),
}
CONFIG_ARCH_KEYS = {"norm": ("backbone", "norm"), "fpn_norm": ("fpn", "norm"), "rpn_num_convs": ("rpn", "num_convs"),
                    "box_head_num_convs": ("box_head", "num_convs"), "box_head_num_fcs": ("box_head", "num_fcs"),
                    "box_head_norm": ("box_head", "norm"), "mask_head_norm": ("mask_head", "norm")}


def arch_model(seed, depth, arch, **kw):
    return zoo.canonical_model(seed=seed, depth=depth, **zoo.ARCHS[arch], **kw)


def assert_arch(meta, r, arch, src, fmt, depth, config, conv_dim, fc_dim, K=81):
    """The metadata and report of a converted strong-architecture checkpoint, and the suggested
    config: it exists and says the same architecture, depth and class count."""
    want = dict(ARCH_META[arch], box_head_conv_dim=str(conv_dim), box_head_fc_dim=str(fc_dim))
    assert {k: meta.get(k) for k in want} == want
    assert meta["format"] == "detect-maskrcnn" and meta["source_format"] == fmt
    assert meta["source_sha256"] == hashlib.sha256(open(src, "rb").read()).hexdigest()
    assert (meta["depth"], meta["num_classes"]) == (str(depth), str(K))
    assert meta.get("norm_eps") == (None if want["norm"] == "group_norm" else "1e-05")
    assert meta["suggested_config"] == config
    assert f"architecture: {want['architecture']} (" in r.stdout
    if config:
        assert f"suggested config: {config}" in r.stdout
        with open(os.path.join(REPO, config)) as f:
            cfg = json.load(f)
        assert cfg["name"] == os.path.basename(config)[:-len(".json")]
        assert (cfg["backbone"]["depth"], cfg["classes"]["num_classes"]) == (depth, K)
        for key, (section, field) in CONFIG_ARCH_KEYS.items():
            assert str(cfg[section][field]) == meta[key], (key, cfg[section][field], meta[key])
        assert cfg["box_head"]["fc_dim"] == 1024 and cfg["box_head"]["conv_dim"] == 256
    else:
        assert "suggested config: none" in r.stdout


def d2_pkl(path, sd):
    with open(path, "wb") as f:
        pickle.dump({"model": sd, "__author__": "Detectron2 Model Zoo"}, f, protocol=4)
    return path


def test_detectron2_lsj_r101_pkl(tmp_path):
    """mask_rcnn_R_101_FPN_{100,200,400}ep_LSJ: SyncBN trunk and FPN (convs without bias), 2 RPN
    convs, 4conv1fc box head and mask convs with BN, as detectron2's model zoo .pkl."""
    canon = arch_model(10, 101, "lsj")
    sd, expected = zoo.d2_tensors(canon)
    # the names of zoo_variants.md section 1d
    assert {"proposal_generator.rpn_head.conv.conv0.weight", "proposal_generator.rpn_head.conv.conv1.bias",
            "backbone.fpn_lateral2.norm.running_var", "backbone.fpn_output5.norm.weight",
            "roi_heads.box_head.conv4.norm.running_mean", "roi_heads.mask_head.mask_fcn4.norm.bias"} <= set(sd)
    assert not {"proposal_generator.rpn_head.conv.weight", "backbone.fpn_lateral2.bias",
                "roi_heads.box_head.conv1.bias", "roi_heads.box_head.fc2.weight",
                "roi_heads.mask_head.mask_fcn1.bias"} & set(sd)
    assert sd["roi_heads.box_head.fc1.weight"].shape == (1024, 256 * 7 * 7)
    src = d2_pkl(tmp_path / "model_final_lsj.pkl", sd)
    tensors, meta, r = convert_ok(src, tmp_path / "lsj.safetensors")
    assert_tensors(tensors, expected)
    assert np.array_equal(tensors["rpn.conv2.weight"], sd["proposal_generator.rpn_head.conv.conv1.weight"])
    assert np.array_equal(tensors["box_head.conv3.norm.running_var"], sd["roi_heads.box_head.conv3.norm.running_var"])
    assert np.array_equal(tensors["fpn.output4.norm.bias"], sd["backbone.fpn_output4.norm.bias"])
    assert "box_head.fc7.weight" not in tensors and "fpn.lateral3.bias" not in tensors
    assert_arch(meta, r, "lsj", src, "detectron2", 101, "configs/mask_rcnn_R-101-FPN_detectron2_LSJ.json", 256, 1024)
    assert list(tensors)[-1] == "mask_head.logits.bias"


def test_detectron2_lsj_r50_pth_training_file(tmp_path):
    """A LazyConfig training checkpoint (.pth): SyncBatchNorm / BatchNorm2d buffers include
    num_batches_tracked, ignored and counted."""
    canon = arch_model(11, 50, "lsj", **SMALL_HEADS)
    sd, expected = zoo.d2_tensors(canon)
    model = collections.OrderedDict()
    for k, v in sd.items():
        model[k] = torch.from_numpy(v)
        if k.endswith(".running_var"):
            model[k[: -len("running_var")] + "num_batches_tracked"] = torch.tensor(270000)
    n_bn = sum(k.endswith("num_batches_tracked") for k in model)
    src = tmp_path / "model_final.pth"
    torch.save({"model": model, "optimizer": {"state": {}}, "iteration": 184999}, src)
    tensors, meta, r = convert_ok(src, tmp_path / "lsj50.safetensors")
    assert_tensors(tensors, expected)
    assert_arch(meta, r, "lsj", src, "detectron2", 50, "configs/mask_rcnn_R-50-FPN_detectron2_LSJ.json", 32, 64)
    assert f"{n_bn} BatchNorm num_batches_tracked" in r.stdout


@pytest.mark.parametrize("arch,config", [("syncbn", "configs/mask_rcnn_R-50-FPN_detectron2_syncbn.json"),
                                         ("gn", "configs/mask_rcnn_R-50-FPN_detectron2_gn.json")])
def test_detectron2_misc_norm_models(tmp_path, arch, config):
    """configs/Misc/mask_rcnn_R_50_FPN_3x_{syncbn,gn}.yaml: 1 RPN conv, 4conv1fc, SyncBN or GN
    (weight/bias only) in the trunk (stem and shortcut too), the FPN, the box and mask head convs."""
    canon = arch_model(12, 50, arch, **SMALL_HEADS)
    sd, expected = zoo.d2_tensors(canon)
    assert "proposal_generator.rpn_head.conv.weight" in sd and "roi_heads.box_head.conv4.norm.weight" in sd
    if arch == "gn":
        assert "backbone.bottom_up.stem.conv1.norm.weight" in sd and "backbone.bottom_up.res2.0.shortcut.norm.bias" in sd
        assert not [k for k in sd if k.endswith(("running_mean", "running_var"))]
    src = d2_pkl(tmp_path / f"{arch}.pkl", sd)
    tensors, meta, r = convert_ok(src, tmp_path / f"{arch}.safetensors")
    assert_tensors(tensors, expected)
    assert_arch(meta, r, arch, src, "detectron2", 50, config, 32, 64)


def test_detectron_gn_r101(tmp_path):
    """Detectron e2e_mask_rcnn_R-101-FPN_2x_gn: ConvGN blobs <prefix>_w (no bias) + <prefix>_gn_s /
    _gn_b (GroupNorm gamma, beta -> norm.weight, norm.bias) in the stem, bottlenecks and
    shortcuts, the FPN, head_conv1..4 (then fc6 only) and _mask_fcn1..4."""
    canon = arch_model(13, 101, "gn", **SMALL_HEADS)
    blobs, expected = zoo.detectron_blobs(canon)
    d = dict(blobs)
    for name in ("conv1_w", "conv1_gn_s", "res2_0_branch1_gn_b", "res4_22_branch2c_gn_s", "fpn_inner_res5_2_sum_gn_s",
                 "fpn_inner_res4_22_sum_lateral_gn_b", "fpn_res2_2_sum_gn_s", "head_conv1_w", "head_conv4_gn_b",
                 "fc6_w", "_mask_fcn1_gn_s", "_mask_fcn4_w"):
        assert name in d, name
    assert not {"fc7_w", "head_conv1_b", "_mask_fcn1_b", "fpn_res2_2_sum_b", "_[mask]_fcn1_w", "res_conv1_bn_s"} & set(d)
    assert d["fc6_w"].shape == (64, 32 * 7 * 7)
    src = tmp_path / "model_final.pkl"
    src.write_bytes(zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", blobs)]))
    tensors, meta, r = convert_ok(src, tmp_path / "gn.safetensors")
    assert_tensors(tensors, expected)
    assert np.array_equal(tensors["backbone.stem.norm.weight"], d["conv1_gn_s"])
    assert np.array_equal(tensors["fpn.lateral4.norm.bias"], d["fpn_inner_res4_22_sum_lateral_gn_b"])
    assert np.array_equal(tensors["box_head.conv2.norm.weight"], d["head_conv2_gn_s"])
    assert_arch(meta, r, "gn", src, "detectron", 101, "configs/mask_rcnn_R-101-FPN_detectron_gn.json", 32, 64)
    assert r.stderr == ""


def test_maskrcnn_benchmark_gn(tmp_path):
    """configs/gn_baselines/e2e_mask_rcnn_R_50_FPN_Xconv1fc_1x_gn.yaml: GroupNorm bn1..3 in the
    trunk (not folded: no running statistics), Sequential(conv, GN) FPN and mask convs, the
    xconvs box head (conv, GN, ReLU) x 4 + fc6."""
    canon = arch_model(14, 50, "gn", **SMALL_HEADS)
    src = tmp_path / "gn.pth"
    sd = mb_checkpoint(canon, legacy=False, path=src)
    for name in ("module.backbone.body.stem.bn1.weight", "module.backbone.fpn.fpn_inner1.0.weight",
                 "module.backbone.fpn.fpn_layer4.1.bias", "module.roi_heads.box.feature_extractor.xconvs.9.weight",
                 "module.roi_heads.box.feature_extractor.xconvs.10.bias",
                 "module.roi_heads.mask.feature_extractor.mask_fcn4.1.weight"):
        assert name in sd, name
    tensors, meta, r = convert_ok(src, tmp_path / "mbgn.safetensors")
    assert_tensors(tensors, mb_expected(canon, sd))
    assert np.array_equal(tensors["backbone.res3.1.conv2.norm.weight"], sd["module.backbone.body.layer2.1.bn2.weight"].numpy())
    assert_arch(meta, r, "gn", src, "maskrcnn-benchmark", 50, "configs/mask_rcnn_R-50-FPN_maskrcnn-benchmark_gn.json",
                32, 64)


def test_torchvision_v2_r50_layout(tmp_path):
    """maskrcnn_resnet50_fpn_v2's layout (91 classes), written from zoo_variants.md section 2."""
    canon = arch_model(15, 50, "lsj", K=91, **SMALL_HEADS)
    sd = collections.OrderedDict()
    for k, v in canon.items():
        sd[zoo.tv_name(k, box_convs=4)] = torch.from_numpy(v)
        if k.endswith("running_var"):
            sd[zoo.tv_name(k, box_convs=4)[: -len("running_var")] + "num_batches_tracked"] = torch.tensor(0)
    for name in ("backbone.fpn.inner_blocks.3.1.running_var", "backbone.fpn.layer_blocks.0.0.weight",
                 "rpn.head.conv.1.0.bias", "roi_heads.box_head.3.1.weight", "roi_heads.box_head.5.weight",
                 "roi_heads.mask_head.3.1.running_mean"):
        assert name in sd, name
    src = tmp_path / "maskrcnn_resnet50_fpn_v2.pth"
    torch.save(sd, src)
    tensors, meta, r = convert_ok(src, tmp_path / "v2.safetensors")
    assert_tensors(tensors, canon)
    assert_arch(meta, r, "lsj", src, "torchvision", 50, "configs/mask_rcnn_R-50-FPN_torchvision_v2.json", 32, 64, K=91)
    assert json.loads(meta["class_names"]) == coco_classes.TORCHVISION_91


@torch.no_grad()
def randomize_norms(model, seed):
    """Random affine and running statistics in every BatchNorm (a fresh one has mean 0, var 1)."""
    g = torch.Generator().manual_seed(seed)
    for m in model.modules():
        if isinstance(m, (torch.nn.BatchNorm2d, torch.nn.GroupNorm)):
            m.weight.copy_(torch.rand(m.weight.shape, generator=g) + 0.5)
            m.bias.copy_(torch.randn(m.bias.shape, generator=g))
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.running_mean.shape, generator=g))
            m.running_var.copy_(torch.rand(m.running_var.shape, generator=g) + 0.5)
    return model.eval()


def tv_model(norm_layer, K=81, rpn_convs=2, depth=101):
    """torchvision's v2 parts around a ResNet trunk, from public classes only."""
    from torchvision.models import resnet50, resnet101
    from torchvision.models.detection import MaskRCNN
    from torchvision.models.detection.backbone_utils import BackboneWithFPN
    from torchvision.models.detection.faster_rcnn import FastRCNNConvFCHead
    from torchvision.models.detection.mask_rcnn import MaskRCNNHeads
    from torchvision.models.detection.rpn import RPNHead
    trunk = (resnet101 if depth == 101 else resnet50)(weights=None, norm_layer=norm_layer)
    bb = BackboneWithFPN(trunk, {"layer1": "0", "layer2": "1", "layer3": "2", "layer4": "3"},
                         [256, 512, 1024, 2048], 256, norm_layer=norm_layer)
    return MaskRCNN(bb, num_classes=K, rpn_head=RPNHead(256, 3, conv_depth=rpn_convs),
                    box_head=FastRCNNConvFCHead((256, 7, 7), [256] * 4, [1024], norm_layer=norm_layer),
                    mask_head=MaskRCNNHeads(256, [256] * 4, 1, norm_layer=norm_layer))


def assert_tv_model_converts(tmp_path, model, arch, depth, config, K=81):
    sd = model.state_dict()
    src = tmp_path / "model.pth"
    torch.save(sd, src)
    tensors, meta, r = convert_ok(src, tmp_path / "model.safetensors")
    # the real model's names are those zoo_checkpoints writes for this architecture
    names = {zoo.tv_name(k, box_convs=4): k for k in zoo.canonical_shapes(depth=depth, K=K, **zoo.ARCHS[arch])}
    weights = {k: v for k, v in sd.items() if not k.endswith("num_batches_tracked")}
    assert set(weights) == set(names), sorted(set(weights) ^ set(names))[:10]
    assert_tensors(tensors, {names[k]: v.numpy() for k, v in weights.items()})
    assert_arch(meta, r, arch, src, "torchvision", depth, config, 256, 1024, K=K)


def test_torchvision_v2_r101_real_model(tmp_path):
    """The v2 recipe with an R-101 trunk (torchvision publishes no weights for it), built from
    torchvision's public classes, BatchNorm buffers randomised, saved and converted."""
    torch.manual_seed(0)
    model = randomize_norms(tv_model(torch.nn.BatchNorm2d), 1)
    assert model.roi_heads.box_head[5].weight.shape == (1024, 256 * 7 * 7)
    assert_tv_model_converts(tmp_path, model, "lsj", 101, "configs/mask_rcnn_R-101-FPN_torchvision_v2.json")


def test_torchvision_groupnorm_model(tmp_path):
    """The same parts with GroupNorm(32) norm layers everywhere (weight/bias, no statistics): it
    converts; no config ships for it."""
    import functools
    torch.manual_seed(1)
    model = randomize_norms(tv_model(functools.partial(torch.nn.GroupNorm, 32), rpn_convs=1, depth=50), 2)
    assert_tv_model_converts(tmp_path, model, "gn", 50, "")


def test_strong_architecture_errors(tmp_path):
    dst = str(tmp_path / "err.safetensors")
    sd, _ = zoo.d2_tensors(arch_model(16, 50, "lsj", **zoo.TINY))
    n = [0]

    def write(d):
        n[0] += 1
        return str(d2_pkl(tmp_path / f"e{n[0]}.pkl", d))

    # one box head norm of GroupNorm form among BatchNorms
    mixed = {k: v for k, v in sd.items() if not re.fullmatch(r"roi_heads\.box_head\.conv3\.norm\.running_\w+", k)}
    assert_fails(write(mixed), dst, r"box head norms of mixed forms: box_head\.conv3\.norm\.weight "
                 r"\(detectron2: roi_heads\.box_head\.conv3\.norm\.weight\) is GroupNorm", r"are BatchNorm")
    # a box head conv without its norm
    nonorm = {k: v for k, v in sd.items() if not k.startswith("roi_heads.box_head.conv2.norm.")}
    assert_fails(write(nonorm), dst, r"box_head\.conv2\.weight \(detectron2: roi_heads\.box_head\.conv2\.weight\) "
                 r"has no norm, while the other box head convs have BatchNorm",
                 r"missing box_head\.conv2\.norm\.weight \(detectron2: roi_heads\.box_head\.conv2\.norm\.weight\)")
    # an FPN conv without its norm (the bias it would then need is missing too: the norm is named)
    nofpn = {k: v for k, v in sd.items() if not k.startswith("backbone.fpn_output3.norm.")}
    assert_fails(write(nofpn), dst, r"fpn\.output3\.weight \(detectron2: backbone\.fpn_output3\.weight\) has no norm")
    # the second RPN conv's bias missing
    rpn = {k: v for k, v in sd.items() if k != "proposal_generator.rpn_head.conv.conv1.bias"}
    assert_fails(write(rpn), dst, r"missing tensor\(s\): rpn\.conv2\.bias \(detectron2: "
                 r"proposal_generator\.rpn_head\.conv\.conv1\.bias\)")
    # layers the engine does not run
    cascade = dict(sd, **{"roi_heads.box_head.1.fc1.weight": sd["roi_heads.box_head.fc1.weight"]})
    assert_fails(write(cascade), dst, r"unsupported layer for --from detectron2: a cascade of box heads",
                 r"roi_heads\.box_head\.1\.fc1\.weight")
    dcn = dict(sd, **{"backbone.bottom_up.res3.0.conv2_offset.weight": np.zeros((18, 8, 3, 3), np.float32)})
    assert_fails(write(dcn), dst, r"unsupported layer for --from detectron2: deformable convolution offsets",
                 r"backbone\.bottom_up\.res3\.0\.conv2_offset\.weight")
    extra = dict(sd, **{"roi_heads.box_head.conv2.conv_offset.weight": np.zeros((18, 8, 3, 3), np.float32)})
    assert_fails(write(extra), dst, r"unknown tensor name\(s\) for --from detectron2: "
                 r"roi_heads\.box_head\.conv2\.conv_offset\.weight")

    # a trunk BatchNorm among GroupNorms
    gsd, _ = zoo.d2_tensors(arch_model(17, 50, "gn", **zoo.TINY))
    c = gsd["backbone.bottom_up.res3.1.conv2.norm.weight"].shape
    bn = dict(gsd, **{"backbone.bottom_up.res3.1.conv2.norm.running_mean": np.zeros(c, np.float32),
                      "backbone.bottom_up.res3.1.conv2.norm.running_var": np.ones(c, np.float32)})
    assert_fails(write(bn), dst, r"trunk norms of mixed forms: backbone\.res3\.1\.conv2\.norm\.weight "
                 r"\(detectron2: backbone\.bottom_up\.res3\.1\.conv2\.norm\.weight\) is BatchNorm", r"are GroupNorm")

    # Detectron GN: a missing gamma is named by its blob
    blobs, _ = zoo.detectron_blobs(arch_model(18, 50, "gn", **zoo.TINY))
    p = tmp_path / "dt.pkl"
    p.write_bytes(zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", [(k, v) for k, v in blobs if k != "head_conv2_gn_s"])]))
    assert_fails(str(p), dst, r"missing tensor\(s\): box_head\.conv2\.norm\.weight \(detectron: head_conv2_gn_s\)")

    # maskrcnn-benchmark's 2fc head with GroupNorm after the FCs (FPN2MLPFeatureExtractor, USE_GN)
    msd = mb_checkpoint(arch_model(19, 50, "gn", **zoo.TINY), legacy=False, path=tmp_path / "mb.pth")
    fc = {k: v for k, v in msd.items() if ".xconvs." not in k and ".fc6." not in k}
    fc.update({"module.roi_heads.box.feature_extractor.fc6.0.weight": torch.zeros(32, 16 * 49),
               "module.roi_heads.box.feature_extractor.fc6.1.weight": torch.ones(32),
               "module.roi_heads.box.feature_extractor.fc6.1.bias": torch.zeros(32)})
    torch.save({"model": fc}, tmp_path / "mbfc.pth")
    assert_fails(str(tmp_path / "mbfc.pth"), dst, r"unsupported layer for --from maskrcnn-benchmark: GroupNorm after "
                 r"the box head's FCs", r"roi_heads\.box\.feature_extractor\.fc6\.0\.weight")

    # torchvision: an index of FastRCNNConvFCHead that holds no Linear (6 is a ReLU)
    canon = arch_model(20, 50, "lsj", **zoo.TINY)
    tsd = {zoo.tv_name(k, box_convs=4): torch.from_numpy(v) for k, v in canon.items()}
    tsd["roi_heads.box_head.6.weight"] = torch.zeros(3)
    torch.save(tsd, tmp_path / "tv.pth")
    assert_fails(str(tmp_path / "tv.pth"), dst, r"unknown tensor name\(s\) for --from torchvision: roi_heads\.box_head\.6\.weight")


def test_suggested_configs_by_architecture():
    """Which shipped config each zoo's architecture and depth gets (none where the zoo has no
    such model: detectron2's SyncBN and GN models are R-50 only, torchvision ships no GN)."""
    import convert
    base = dict(depth=101, groups=1, num_classes=81, stem_out_channels=64, res2_out_channels=256, width_per_group=64)
    archs = {
        "classic": dict(norm="batchnorm", fpn_norm="none", rpn_num_convs=1, box_head_num_convs=0, box_head_num_fcs=2,
                        box_head_norm="none", mask_head_norm="none"),
        "lsj": dict(norm="batchnorm", fpn_norm="batchnorm", rpn_num_convs=2, box_head_num_convs=4, box_head_num_fcs=1,
                    box_head_norm="batchnorm", mask_head_norm="batchnorm"),
        "syncbn": dict(norm="batchnorm", fpn_norm="batchnorm", rpn_num_convs=1, box_head_num_convs=4,
                       box_head_num_fcs=1, box_head_norm="batchnorm", mask_head_norm="batchnorm"),
        "gn": dict(norm="group_norm", fpn_norm="group_norm", rpn_num_convs=1, box_head_num_convs=4, box_head_num_fcs=1,
                   box_head_norm="group_norm", mask_head_norm="group_norm"),
        "odd": dict(norm="batchnorm", fpn_norm="batchnorm", rpn_num_convs=3, box_head_num_convs=4, box_head_num_fcs=1,
                    box_head_norm="batchnorm", mask_head_norm="none"),
    }
    want = {
        ("lsj", "detectron2", 101): "configs/mask_rcnn_R-101-FPN_detectron2_LSJ.json",
        ("lsj", "detectron2", 50): "configs/mask_rcnn_R-50-FPN_detectron2_LSJ.json",
        ("lsj", "torchvision", 101): "configs/mask_rcnn_R-101-FPN_torchvision_v2.json",
        ("lsj", "torchvision", 50): "configs/mask_rcnn_R-50-FPN_torchvision_v2.json",
        ("syncbn", "detectron2", 50): "configs/mask_rcnn_R-50-FPN_detectron2_syncbn.json",
        ("gn", "detectron2", 50): "configs/mask_rcnn_R-50-FPN_detectron2_gn.json",
        ("gn", "detectron", 101): "configs/mask_rcnn_R-101-FPN_detectron_gn.json",
        ("gn", "detectron", 50): "configs/mask_rcnn_R-50-FPN_detectron_gn.json",
        ("gn", "maskrcnn-benchmark", 50): "configs/mask_rcnn_R-50-FPN_maskrcnn-benchmark_gn.json",
    }
    for arch, a in archs.items():
        for fmt in ("detectron", "detectron2", "maskrcnn-benchmark", "torchvision", "mmdetection"):
            for depth in (50, 101):
                info = dict(base, **a, depth=depth)
                got = convert.suggested_config_of(info, fmt)
                expect = f"configs/mask_rcnn_R-{depth}-FPN_{fmt}.json" if arch == "classic" else \
                    want.get((arch, fmt, depth), "")
                if fmt == "mmdetection" and not os.path.isfile(os.path.join(REPO, expect)):
                    expect = ""  # the engine's mmdetection configs come with its conventions
                assert got == expect, (arch, fmt, depth, got)
                if got:
                    assert os.path.isfile(os.path.join(REPO, got)), got
                # no shipped config has class-agnostic heads: weights with them get no suggestion
                for key in ("box_head_class_agnostic", "mask_head_class_agnostic"):
                    assert convert.suggested_config_of(dict(info, **{key: True}), fmt) == "", (arch, fmt, key)
    # an mmdetection caffe-style file (its config says style='caffe') gets the caffe config, where one ships
    caffe = "configs/mask_rcnn_R-101-FPN_mmdetection_caffe.json"
    assert convert.suggested_config_of(dict(base, **archs["classic"]), "mmdetection", stride_in_1x1=True) == \
        (caffe if os.path.isfile(os.path.join(REPO, caffe)) else "")
    assert convert.architecture_of(dict(archs["odd"])) == "custom"
    # the affine trunk (Detectron, maskrcnn-benchmark) is the classic model
    assert convert.architecture_of(dict(archs["classic"], norm="affine")) == "classic"


# ---- mmdetection (shared/reference/zoo_variants.md §3) -----------------------------------------

MMDET_CFG = """model = dict(
    type='MaskRCNN',
    backbone=dict(
        type='ResNet',
        depth={depth},
        norm_cfg=dict(type='BN', requires_grad=True),
        norm_eval=True,
        style='{style}',
        init_cfg=None),
    neck=dict(type='FPN', in_channels=[256, 512, 1024, 2048], out_channels=256, num_outs=5))
"""


def mmdet_v3_meta(classes, style="pytorch", depth=101):
    """What a published mmdet 3.x file keeps in 'meta' (mmengine Runner.save_checkpoint, then
    publish_model.py): the config's text, versions, and the dataset's classes and palette."""
    return {"cfg": MMDET_CFG.format(depth=depth, style=style), "seed": 0, "experiment_name": "mask-rcnn",
            "time": "20230101_000000", "mmengine_version": "0.10.7", "epoch": 12, "iter": 87960,
            "dataset_meta": {"classes": tuple(classes), "palette": [(220, 20, 60)] * len(classes)}}


def mmdet_v2_meta(classes, style="pytorch", depth=101):
    """An mmdet 2.x file's 'meta' (mmcv EpochBasedRunner.save_checkpoint): the config text under
    'config' and the classes under 'CLASSES'."""
    return {"mmdet_version": "2.28.2", "config": MMDET_CFG.format(depth=depth, style=style),
            "CLASSES": tuple(classes), "epoch": 12, "iter": 7330, "mmcv_version": "1.7.0", "time": "Sat Jan 1"}


def mmdet_state(canon, counters=True):
    """(mmdet state dict of torch tensors, expected canonical tensors).  Real BatchNorms, so every
    norm has a num_batches_tracked counter."""
    sd, expected = zoo.mmdet_tensors(canon)
    out = collections.OrderedDict()
    for k, v in sd.items():
        out[k] = torch.from_numpy(v)
        if counters and k.endswith(".running_var"):
            out[k[: -len("running_var")] + "num_batches_tracked"] = torch.tensor(0)
    return out, expected


def test_mmdetection_r101_published_v3(tmp_path, r101):
    """mask-rcnn_r101_fpn_1x_coco as mmdet 3.x publishes it: {'meta', 'state_dict'} in torch's
    legacy format (publish_model.py: _use_new_zipfile_serialization=False)."""
    sd, expected = mmdet_state(r101)
    for name in ("backbone.layer3.22.bn3.running_var", "backbone.layer1.0.downsample.1.weight",
                 "neck.lateral_convs.3.conv.weight", "neck.fpn_convs.0.conv.bias", "rpn_head.rpn_conv.weight",
                 "rpn_head.rpn_cls.bias", "roi_head.bbox_head.shared_fcs.1.weight", "roi_head.mask_head.convs.3.conv.bias",
                 "roi_head.mask_head.upsample.weight", "roi_head.mask_head.conv_logits.bias"):
        assert name in sd, name
    assert sd["roi_head.bbox_head.fc_cls.weight"].shape[0] == 81 and sd["roi_head.bbox_head.fc_reg.weight"].shape[0] == 320
    assert sd["roi_head.mask_head.conv_logits.weight"].shape[0] == 80
    src = tmp_path / "mask_rcnn_r101_fpn_1x_coco_20200204-1efe0ed5.pth"
    torch.save({"meta": mmdet_v3_meta(coco_classes.COCO_81[1:]), "state_dict": sd}, src,
               _use_new_zipfile_serialization=False)
    tensors, meta, r = convert_ok(src, tmp_path / "mm.safetensors")
    assert_tensors(tensors, expected)
    assert meta["format"] == "detect-maskrcnn" and meta["source_format"] == "mmdetection"
    assert meta["source_sha256"] == hashlib.sha256(open(src, "rb").read()).hexdigest()
    assert (meta["depth"], meta["num_classes"], meta["norm"], meta["norm_eps"]) == ("101", "81", "batchnorm", "1e-05")
    assert (meta["architecture"], meta["stride_in_1x1"]) == ("classic", "false")
    assert (meta["box_head_class_agnostic"], meta["mask_head_class_agnostic"]) == ("false", "false")
    assert json.loads(meta["class_names"]) == coco_classes.COCO_81
    # the reordering, spelled out on the source tensors
    cls = sd["roi_head.bbox_head.fc_cls.weight"].numpy()
    assert np.array_equal(tensors["box_predictor.cls_score.weight"][0], cls[80])
    assert np.array_equal(tensors["box_predictor.cls_score.weight"][1:], cls[:80])
    assert not tensors["box_predictor.bbox_pred.weight"][:4].any()
    assert np.array_equal(tensors["box_predictor.bbox_pred.weight"][4 * 7:4 * 8], sd["roi_head.bbox_head.fc_reg.weight"][4 * 6:4 * 7])
    assert np.array_equal(tensors["mask_head.logits.bias"][3], sd["roi_head.mask_head.conv_logits.bias"][2])
    assert "mmdetection checkpoint (detected)" in r.stdout and "not weights, ignored: meta" in r.stdout
    assert "ignored 104 source tensors: 104 BatchNorm num_batches_tracked" in r.stdout
    assert "from meta['cfg'] style='pytorch'" in r.stdout and "class names from meta['dataset_meta']['classes']" in r.stdout
    assert r.stderr == ""
    # the suggestion is the zoo's classic config where one ships (the engine's mmdetection conventions)
    want = "configs/mask_rcnn_R-101-FPN_mmdetection.json"
    assert meta["suggested_config"] == (want if os.path.isfile(os.path.join(REPO, want)) else "")


def test_mmdetection_v2_caffe_training_checkpoint(tmp_path, r50):
    """An mmdet 2.x training checkpoint of a caffe-style model (mask_rcnn_r50_caffe_fpn_1x_coco):
    {'meta' with 'CLASSES' and the config text, 'state_dict', 'optimizer'}, zip format.  The names
    are those of style='pytorch'; the config text says where the trunk strides."""
    sd, expected = mmdet_state(r50)
    src = tmp_path / "epoch_12.pth"
    torch.save({"meta": mmdet_v2_meta(coco_classes.COCO_81[1:], style="caffe", depth=50), "state_dict": sd,
                "optimizer": {"state": {}, "param_groups": [{"lr": 0.02, "momentum": 0.9}]}}, src)
    tensors, meta, r = convert_ok(src, tmp_path / "caffe.safetensors", "--from", "mmdetection")
    assert_tensors(tensors, expected)
    assert (meta["depth"], meta["stride_in_1x1"], meta["suggested_config"]) == (
        "50", "true", "configs/mask_rcnn_R-50-FPN_mmdetection_caffe.json")
    assert json.loads(meta["class_names"]) == coco_classes.COCO_81
    assert "given with --from" in r.stdout and "not weights, ignored: meta, optimizer" in r.stdout
    assert "trunk strides in the 1x1 conv, from meta['config'] style='caffe' (config backbone.stride_in_1x1 true)" in r.stdout
    assert "class names from meta['CLASSES']" in r.stdout


def test_mmdetection_bare_state_dict(tmp_path, tiny):
    """torch.save(model.state_dict()) of an mmdet model: no meta, so no style and no class names from
    the file (81 rows: COCO's, as for every zoo); also with the DataParallel 'module.' prefix."""
    sd, expected = mmdet_state(tiny, counters=False)
    src = tmp_path / "bare.pth"
    torch.save(collections.OrderedDict(("module." + k, v) for k, v in sd.items()), src)
    tensors, meta, r = convert_ok(src, tmp_path / "bare.safetensors")
    assert_tensors(tensors, expected)
    assert "stride_in_1x1" not in meta and json.loads(meta["class_names"]) == coco_classes.COCO_81
    assert "mmdetection checkpoint (detected)" in r.stdout
    assert "does not say its ResNet style: style='pytorch' (stride in the 3x3 conv) is assumed" in r.stdout
    # another zoo's --from is refused by the names
    r = run_convert(src, tmp_path / "x.safetensors", "--from", "torchvision")
    assert r.returncode == 2 and "unknown tensor name(s) for --from torchvision: backbone.conv1.weight" in r.stderr


def test_mmdetection_strong_heads_v3_training_file(tmp_path):
    """mmdet's strong baselines (mask-rcnn_r50_fpn_rpn-2conv_4conv1fc_syncbn-all_lsj): SyncBN in the
    trunk and FPN (ConvModule `.bn`, convs without bias), rpn_conv.{0,1}.conv, Shared4Conv1FCBBoxHead
    (shared_convs.{0..3}.conv/.bn, shared_fcs.0), BN mask convs; as a 3.x training checkpoint
    (message_hub, optimizer, param_schedulers next to meta and state_dict)."""
    canon = arch_model(21, 50, "lsj", **SMALL_HEADS)
    sd, expected = mmdet_state(canon)
    for name in ("neck.lateral_convs.0.bn.running_mean", "neck.fpn_convs.3.bn.weight", "rpn_head.rpn_conv.1.conv.bias",
                 "roi_head.bbox_head.shared_convs.3.bn.running_var", "roi_head.bbox_head.shared_convs.0.conv.weight",
                 "roi_head.bbox_head.shared_fcs.0.weight", "roi_head.mask_head.convs.2.bn.bias"):
        assert name in sd, name
    assert not {"neck.lateral_convs.0.conv.bias", "roi_head.bbox_head.shared_convs.0.conv.bias",
                "roi_head.bbox_head.shared_fcs.1.weight", "rpn_head.rpn_conv.weight"} & set(sd)
    src = tmp_path / "iter_184375.pth"
    torch.save({"meta": mmdet_v3_meta(coco_classes.COCO_81[1:], depth=50), "state_dict": sd,
                "message_hub": {"log_scalars": {}, "runtime_info": {"epoch": 0, "iter": 184375}},
                "optimizer": {"state": {}, "param_groups": [{"lr": 0.1}]},
                "param_schedulers": [{"start_factor": 0.067, "by_epoch": False}]}, src)
    tensors, meta, r = convert_ok(src, tmp_path / "strong.safetensors")
    assert_tensors(tensors, expected)
    assert np.array_equal(tensors["rpn.conv2.weight"], sd["rpn_head.rpn_conv.1.conv.weight"].numpy())
    assert np.array_equal(tensors["box_head.conv4.norm.running_var"], sd["roi_head.bbox_head.shared_convs.3.bn.running_var"].numpy())
    assert np.array_equal(tensors["fpn.lateral2.norm.bias"], sd["neck.lateral_convs.0.bn.bias"].numpy())
    want = dict(ARCH_META["lsj"], box_head_conv_dim="32", box_head_fc_dim="64", norm_eps="1e-05")
    assert {k: meta.get(k) for k in want} == want
    assert "architecture: bn_heads_rpn2 (" in r.stdout
    assert "not weights, ignored: meta, message_hub, optimizer, param_schedulers" in r.stdout
    assert meta["suggested_config"] == ""  # no mmdetection config with these heads ships


@pytest.mark.parametrize("box,mask", [(True, True), (True, False), (False, True)])
def test_class_agnostic_heads_mmdetection(tmp_path, box, mask):
    """reg_class_agnostic=True: fc_reg has 4 rows; class_agnostic=True: conv_logits has 1 channel.
    Both stay as they are (our agnostic layout); the metadata says which."""
    canon = zoo.canonical_model(seed=22, depth=50, box_agnostic=box, mask_agnostic=mask, **zoo.TINY)
    sd, expected = mmdet_state(canon)
    assert sd["roi_head.bbox_head.fc_reg.weight"].shape[0] == (4 if box else 320)
    assert sd["roi_head.mask_head.conv_logits.weight"].shape[0] == (1 if mask else 80)
    src = tmp_path / "agnostic.pth"
    torch.save({"meta": mmdet_v3_meta(coco_classes.COCO_81[1:], depth=50), "state_dict": sd}, src)
    tensors, meta, r = convert_ok(src, tmp_path / "agnostic.safetensors")
    assert_tensors(tensors, expected)
    assert tensors["box_predictor.bbox_pred.weight"].shape[0] == (4 if box else 324)
    assert tensors["mask_head.logits.weight"].shape[0] == (1 if mask else 81)
    if box:
        assert np.array_equal(tensors["box_predictor.bbox_pred.weight"], sd["roi_head.bbox_head.fc_reg.weight"].numpy())
    assert (meta["box_head_class_agnostic"], meta["mask_head_class_agnostic"]) == \
        ("true" if box else "false", "true" if mask else "false")
    assert ("box_head.class_agnostic_regression true" in r.stdout) == box
    assert ("mask_head.class_agnostic true" in r.stdout) == mask
    assert meta["suggested_config"] == ""


def test_class_agnostic_heads_other_zoos(tmp_path, tiny):
    """detectron2 (CLS_AGNOSTIC_BBOX_REG: 4 rows; CLS_AGNOSTIC_MASK: 1 channel) as mmdetection;
    Detectron and maskrcnn-benchmark (CLS_AGNOSTIC_BBOX_REG) regress background and foreground, 8
    rows, of which inference uses the last 4: those are kept."""
    canon = zoo.canonical_model(seed=23, depth=50, box_agnostic=True, mask_agnostic=True, **zoo.TINY)
    sd, expected = zoo.d2_tensors(canon)
    assert sd["roi_heads.box_predictor.bbox_pred.weight"].shape[0] == 4
    assert sd["roi_heads.mask_head.predictor.weight"].shape[0] == 1
    tensors, meta, r = convert_ok(d2_pkl(tmp_path / "d2.pkl", sd), tmp_path / "d2.safetensors")
    assert_tensors(tensors, expected)
    assert (meta["box_head_class_agnostic"], meta["mask_head_class_agnostic"]) == ("true", "true")
    assert meta["suggested_config"] == "" and "suggested config: none" in r.stdout

    # Detectron: bbox_pred 8 rows (2 "classes" x 4), 81-row classifier; mask class-specific
    c8 = zoo.canonical_model(seed=24, depth=50, **zoo.TINY)
    rng = np.random.default_rng(5)
    pair_w = rng.standard_normal((8, c8["box_head.fc7.weight"].shape[0]), dtype=np.float32)
    pair_b = rng.standard_normal(8, dtype=np.float32)
    blobs, exp = zoo.detectron_blobs(c8)
    blobs = [(k, pair_w if k == "bbox_pred_w" else pair_b if k == "bbox_pred_b" else v) for k, v in blobs]
    exp["box_predictor.bbox_pred.weight"], exp["box_predictor.bbox_pred.bias"] = pair_w[4:], pair_b[4:]
    p = tmp_path / "dt.pkl"
    p.write_bytes(zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", blobs)]))
    tensors, meta, _ = convert_ok(p, tmp_path / "dt.safetensors")
    assert_tensors(tensors, exp)
    assert (meta["box_head_class_agnostic"], meta["mask_head_class_agnostic"]) == ("true", "false")

    # maskrcnn-benchmark: the same 8 rows, then its eps-free norm folding
    msd = mb_checkpoint(c8, legacy=False, path=tmp_path / "mb0.pth")
    msd["module.roi_heads.box.predictor.bbox_pred.weight"] = torch.from_numpy(pair_w)
    msd["module.roi_heads.box.predictor.bbox_pred.bias"] = torch.from_numpy(pair_b)
    torch.save({"model": msd}, tmp_path / "mb.pth")
    mexp = mb_expected(c8, msd)
    mexp["box_predictor.bbox_pred.weight"], mexp["box_predictor.bbox_pred.bias"] = pair_w[4:], pair_b[4:]
    tensors, meta, _ = convert_ok(tmp_path / "mb.pth", tmp_path / "mb.safetensors")
    assert_tensors(tensors, mexp)
    assert meta["box_head_class_agnostic"] == "true"


def test_mmdetection_custom_classes(tmp_path):
    """A custom-trained model: 3 classes named in meta['dataset_meta']['classes'] (recorded, background
    first); names that do not fit the classifier are not recorded (a warning says so); one
    foreground class, whose class-specific and agnostic heads have the same shapes (4 rows, 1
    channel): converted as class-specific, the same numbers."""
    canon = zoo.canonical_model(seed=25, depth=50, K=4, **zoo.TINY)
    sd, expected = mmdet_state(canon)
    assert sd["roi_head.bbox_head.fc_cls.weight"].shape[0] == 4 and sd["roi_head.bbox_head.fc_reg.weight"].shape[0] == 12
    src = tmp_path / "custom.pth"
    torch.save({"meta": mmdet_v3_meta(("cat", "dog", "traffic cone"), depth=50), "state_dict": sd}, src)
    tensors, meta, r = convert_ok(src, tmp_path / "custom.safetensors")
    assert_tensors(tensors, expected)
    assert meta["num_classes"] == "4"
    assert json.loads(meta["class_names"]) == ["__background__", "cat", "dog", "traffic cone"]
    assert "class names from meta['dataset_meta']['classes']: cat, dog, traffic cone" in r.stdout
    assert meta["suggested_config"] == "" and r.stderr == ""

    torch.save({"meta": mmdet_v2_meta(("cat", "dog"), depth=50), "state_dict": sd}, tmp_path / "two.pth")
    _, meta, r = convert_ok(tmp_path / "two.pth", tmp_path / "two.safetensors")
    assert "class_names" not in meta and "class names from" not in r.stdout
    assert "warning: meta['CLASSES'] has 2 names, the classifier 3 classes (+ background): class names not recorded" \
        in r.stderr
    # 80 classes whose file names 79: none recorded, not COCO's either (the file says they are others)
    sd80, _ = mmdet_state(zoo.canonical_model(seed=27, depth=50, **zoo.TINY))
    torch.save({"meta": mmdet_v3_meta(coco_classes.COCO_81[2:], depth=50), "state_dict": sd80}, tmp_path / "79.pth")
    _, meta, r = convert_ok(tmp_path / "79.pth", tmp_path / "79.safetensors")
    assert meta["num_classes"] == "81" and "class_names" not in meta and "79 names" in r.stderr

    one = zoo.canonical_model(seed=26, depth=50, K=2, **zoo.TINY)
    sd1, exp1 = mmdet_state(one)
    assert sd1["roi_head.bbox_head.fc_reg.weight"].shape[0] == 4 and sd1["roi_head.mask_head.conv_logits.weight"].shape[0] == 1
    torch.save({"meta": mmdet_v3_meta(("widget",), depth=50), "state_dict": sd1}, tmp_path / "one.pth")
    tensors, meta, _ = convert_ok(tmp_path / "one.pth", tmp_path / "one.safetensors")
    assert_tensors(tensors, exp1)
    assert tensors["box_predictor.bbox_pred.weight"].shape[0] == 8 and tensors["mask_head.logits.weight"].shape[0] == 2
    assert (meta["box_head_class_agnostic"], meta["mask_head_class_agnostic"]) == ("false", "false")
    assert json.loads(meta["class_names"]) == ["__background__", "widget"]


def test_mmdetection_meta_that_does_not_fit(tmp_path, tiny):
    """What meta holds is never trusted: class names that are not strings, a config that names both
    styles, a meta that is no dict, an object outside the allow-list: warnings or nothing, never an
    error, and the weights convert."""
    import argparse
    sd, expected = mmdet_state(tiny)
    cases = [({"dataset_meta": {"classes": (1, 2)}, "cfg": "style='caffe'\nstyle='pytorch'"},
              ["meta['dataset_meta']['classes'] is not a list of class names",
               "meta['cfg'] names both ResNet styles"]),
             ({"CLASSES": argparse.Namespace(x=1), "config": 5}, ["meta['CLASSES'] is not a list of class names"]),
             ("not a dict", []), ({"dataset_meta": None, "cfg": None}, [])]
    for i, (meta, warnings) in enumerate(cases):
        src = tmp_path / f"m{i}.pth"
        torch.save({"meta": meta, "state_dict": sd}, src)
        tensors, out, r = convert_ok(src, tmp_path / f"m{i}.safetensors")
        assert_tensors(tensors, expected)
        assert "stride_in_1x1" not in out and json.loads(out["class_names"]) == coco_classes.COCO_81
        assert [line.split(": warning: ")[1].split(";")[0] for line in r.stderr.splitlines()] == warnings, r.stderr


def test_mmdetection_refusals(tmp_path, tiny):
    """Layers the engine does not run are refused with the key named (exit 2, nothing written)."""
    sd, _ = mmdet_state(tiny)
    dst = str(tmp_path / "err.safetensors")
    n = [0]

    def write(d):
        n[0] += 1
        p = tmp_path / f"e{n[0]}.pth"
        torch.save({"meta": mmdet_v3_meta(coco_classes.COCO_81[1:], depth=50), "state_dict": d}, p)
        return str(p)

    # Cascade Mask R-CNN: roi_head.bbox_head.{0,1,2}.*
    cascade = {(k.replace("roi_head.bbox_head.", "roi_head.bbox_head.0.") if k.startswith("roi_head.bbox_head.") else k): v
               for k, v in sd.items()}
    assert_fails(write(cascade), dst, r"unsupported layer for --from mmdetection: a cascade of heads",
                 r"roi_head\.bbox_head\.0\.")
    # DCN in the trunk (dcn=dict(type='DCN'), stage_with_dcn): layer{2..4}.{b}.conv2.conv_offset
    dcn = dict(sd, **{"backbone.layer2.0.conv2.conv_offset.weight": torch.zeros(18, 16, 3, 3),
                      "backbone.layer2.0.conv2.conv_offset.bias": torch.zeros(18)})
    assert_fails(write(dcn), dst, r"deformable convolution offsets", r"backbone\.layer2\.0\.conv2\.conv_offset\.weight")
    # GroupNorm (configs/gn, gn+ws): backbone.gn1, layer*.gn{1,2,3}, ConvModule .gn
    gn = collections.OrderedDict()
    for k, v in sd.items():
        if k.endswith(("running_mean", "running_var", "num_batches_tracked")):
            continue
        gn[re.sub(r"\.bn(\d?)\.", r".gn\1.", k)] = v
    assert_fails(write(gn), dst, r"GroupNorm \(mmdetection's gn and gn\+ws configs\)", r"backbone\.gn1\.weight")
    # FPN extra convs (add_extra_convs='on_input'): fpn_convs.4
    extra = dict(sd, **{"neck.fpn_convs.4.conv.weight": sd["neck.fpn_convs.0.conv.weight"],
                        "neck.fpn_convs.4.conv.bias": sd["neck.fpn_convs.0.conv.bias"]})
    assert_fails(write(extra), dst, r"FPN extra convs", r"neck\.fpn_convs\.4\.conv\.weight")
    # a softmax RPN (use_sigmoid=False): 2 outputs per anchor
    soft = dict(sd, **{"rpn_head.rpn_cls.weight": torch.cat([sd["rpn_head.rpn_cls.weight"]] * 2),
                       "rpn_head.rpn_cls.bias": torch.cat([sd["rpn_head.rpn_cls.bias"]] * 2)})
    assert_fails(write(soft), dst, r"rpn_head\.rpn_cls\.weight has 2 outputs per anchor", r"softmax RPN")
    # another head mmdet has (MS R-CNN's mask_iou_head): unknown, named
    msr = dict(sd, **{"roi_head.mask_iou_head.fc_mask_iou.weight": torch.zeros(81, 1024)})
    assert_fails(write(msr), dst, r"unknown tensor name\(s\) for --from mmdetection: roi_head\.mask_iou_head\.fc_mask_iou\.weight")
    # a missing tensor is named by its mmdetection name
    miss = {k: v for k, v in sd.items() if k != "roi_head.mask_head.upsample.bias"}
    assert_fails(write(miss), dst, r"missing tensor\(s\): mask_head\.deconv\.bias \(mmdetection: roi_head\.mask_head\.upsample\.bias\)")


# ---- models/download.sh (offline: this machine cannot reach the zoos' hosts) ----------------

def run_download(name, zoo_dir, timeout=120):
    # A proxy on a closed local port: curl fails at once, as on a machine without network
    # access, and never downloads anything even where a network is reachable.
    env = dict(os.environ, DETECT_ZOO_DIR=str(zoo_dir), PYTHON=sys.executable,
               https_proxy="http://127.0.0.1:9", HTTPS_PROXY="http://127.0.0.1:9",
               http_proxy="http://127.0.0.1:9", no_proxy="", NO_PROXY="")
    return subprocess.run(["bash", DOWNLOAD, name], capture_output=True, text=True, env=env, timeout=timeout)


def test_download_without_network(tmp_path):
    r = run_download("detectron-R101", tmp_path)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr
    url = ("https://dl.fbaipublicfiles.com/detectron/35861858/12_2017_baselines/"
           "e2e_mask_rcnn_R-101-FPN_2x.yaml.02_32_51.SgT4y1cO/output/train/"
           "coco_2014_train%3Acoco_2014_valminusminival/generalized_rcnn/model_final.pkl")
    assert f"cannot download {url}" in r.stderr
    assert f"put it at {tmp_path}/detectron-R101.pkl" in r.stderr and "models/download.sh detectron-R101 again" in r.stderr
    assert os.listdir(tmp_path) == []  # no partial file
    r = run_download("torchvision-R50", tmp_path)
    assert r.returncode == 1 and "https://download.pytorch.org/models/maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth" in r.stderr
    r = run_download("detectron-R102", tmp_path)
    assert r.returncode == 2 and "usage: models/download.sh NAME" in r.stderr and "detectron2-R101" in r.stderr


def test_download_converts_a_file_put_there_by_hand(tmp_path, tiny):
    # maskrcnn-benchmark publishes no checksum: the file is converted (as maskrcnn-benchmark)
    sd = mb_checkpoint(tiny, legacy=True, path=tmp_path / "maskrcnn-benchmark-R50.pth")
    r = run_download("maskrcnn-benchmark-R50", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "publishes no checksum; SHA-256 " in r.stdout and "maskrcnn-benchmark checkpoint (given with --from)" in r.stdout
    t, meta = safetensors_io.load(tmp_path / "maskrcnn-benchmark-R50.safetensors")
    assert_tensors(t, mb_expected(tiny, sd))
    assert meta["source_format"] == "maskrcnn-benchmark"

    # a file whose hash does not match the prefix its zoo publishes is not converted
    (tmp_path / "torchvision-R50.pth").write_bytes(b"not the COCO weights")
    r = run_download("torchvision-R50", tmp_path)
    assert r.returncode == 1 and r.stderr.count("\n") == 1
    assert "says it starts with bf2d0c1e" in r.stderr and "Delete it" in r.stderr
    assert not (tmp_path / "torchvision-R50.safetensors").exists()
    sd2, _ = zoo.d2_tensors(tiny)
    with open(tmp_path / "detectron2-R50.pkl", "wb") as f:
        pickle.dump({"model": sd2, "__author__": "Detectron2 Model Zoo"}, f)
    r = run_download("detectron2-R50", tmp_path)
    assert r.returncode == 1 and "says it starts with f10217" in r.stderr
    # Detectron's checksum is published online only (URL.md5sum): offline it is not verified
    blobs, exp = zoo.detectron_blobs(tiny)
    (tmp_path / "detectron-R50.pkl").write_bytes(zoo.py2_pickle([("cfg", CFG_YAML), ("blobs", blobs)]))
    r = run_download("detectron-R50", tmp_path)
    assert r.returncode == 0, r.stderr
    assert "warning: cannot fetch" in r.stderr and "not verified" in r.stderr
    t, _ = safetensors_io.load(tmp_path / "detectron-R50.safetensors")
    assert_tensors(t, exp)
