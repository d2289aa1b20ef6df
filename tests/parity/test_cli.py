"""The detect command: bad inputs give one clear line and a non-zero exit;
a good run writes the documented JSON whose masks decode to the pixels the
engine reported (RLE decoded by an independent reader written here)."""

import json
import os
import shutil
import subprocess

import numpy as np
import pytest

from conftest import BUILD, CONFIG_SMALL, REPO

DETECT = os.path.join(BUILD, "detect")
EXAMPLE = os.path.join(REPO, "examples", "astronaut.png")


def run(*args):
    return subprocess.run([DETECT, *args], capture_output=True, text=True)


def one_error_line(r, *must_contain):
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, f"expected one error line, got:\n{r.stderr}"
    for s in must_contain:
        assert s in lines[0], f"{s!r} not in {lines[0]!r}"
    return lines[0]


def test_help_and_version():
    assert run("--help").returncode == 0 and "--weights" in run("--help").stdout
    assert run("--version").stdout.startswith("detect ")


def test_no_images_is_usage_error():
    r = run("--config", CONFIG_SMALL)
    assert r.returncode == 2
    one_error_line(r, "no input images")


@pytest.mark.parametrize("text, needle", [
    ('{"rpn": {"nms_tresh": 0.7}}', "nms_tresh"),
    ('{"rpn": {"nms_thresh": "high"}}', "rpn.nms_thresh"),
    ('{"box_head": {"score_thresh": 1.5}}', "box_head.score_thresh"),
    ('{"rpn": {', "bad.json"),
])
def test_bad_config(tmp_path, seeded_weights, text, needle):
    cfg = tmp_path / "bad.json"
    cfg.write_text(text)
    r = run("--config", str(cfg), "--weights", seeded_weights, EXAMPLE)
    assert r.returncode == 2
    one_error_line(r, "bad.json", needle)


def test_bad_weights(tmp_path, seeded_weights):
    truncated = tmp_path / "truncated.safetensors"
    with open(seeded_weights, "rb") as f:
        truncated.write_bytes(f.read(10_000_000))
    garbage = tmp_path / "garbage.safetensors"
    garbage.write_bytes(b"this is not a weights file at all")
    for path, needle in [(truncated, "truncated"), (garbage, "garbage.safetensors"),
                         (tmp_path / "missing.safetensors", "missing.safetensors")]:
        r = run("--config", CONFIG_SMALL, "--weights", str(path), EXAMPLE)
        assert r.returncode == 2, r.stderr
        one_error_line(r, str(path.name))


def test_weights_for_another_config(tmp_path, seeded_weights):
    """Weights for another architecture: R-101 weights with a config that asks for R-50 (a subset of
    R-101's tensors: R-50 would run on the first 6 of res4's 23 blocks, quietly wrong) are refused
    naming a block the config would not run; the first mis-shaped or missing tensor is named."""
    cfg = tmp_path / "r50.json"
    cfg.write_text('{"backbone": {"depth": 50}, "input": {"min_size": 320, "max_size": 512}}')
    r = run("--config", str(cfg), "--weights", seeded_weights, EXAMPLE)
    assert r.returncode == 2, r.stderr
    one_error_line(r, "backbone.res4.", "does not run", "backbone.depth")
    cfg.write_text('{"classes": {"num_classes": 91}, "input": {"min_size": 320, "max_size": 512}}')
    r = run("--config", str(cfg), "--weights", seeded_weights, EXAMPLE)
    assert r.returncode == 2
    one_error_line(r, "box_predictor.cls_score.weight", "[81,1024]")


def test_class_agnostic_mismatch_refused(tmp_path, seeded_weights):
    """A class-agnostic predictor (4 box-delta rows, 1 mask channel) under a config that expects
    one per class, and per-class weights under a config that says class-agnostic: refused at
    load, naming the tensor and the config key (not only shapes), exit 2."""
    import sys
    sys.path.insert(0, os.path.join(REPO, "models"))
    import safetensors_io
    tensors, meta = safetensors_io.load(seeded_weights)
    for p in ("weight", "bias"):
        tensors[f"box_predictor.bbox_pred.{p}"] = tensors[f"box_predictor.bbox_pred.{p}"][4:8].copy()
        tensors[f"mask_head.logits.{p}"] = tensors[f"mask_head.logits.{p}"][1:2].copy()
    agnostic = tmp_path / "agnostic.safetensors"
    safetensors_io.save(tensors, str(agnostic), meta)
    r = run("--config", CONFIG_SMALL, "--weights", str(agnostic), EXAMPLE)
    assert r.returncode == 2, r.stderr
    one_error_line(r, "box_predictor.bbox_pred.weight", "box_head.class_agnostic_regression")
    cfg = tmp_path / "agnostic.json"
    cfg.write_text('{"box_head": {"class_agnostic_regression": true}, "input": {"min_size": 320, "max_size": 512}}')
    r = run("--config", str(cfg), "--weights", str(agnostic), EXAMPLE)
    assert r.returncode == 2, r.stderr
    one_error_line(r, "mask_head.logits.weight", "mask_head.class_agnostic")
    r = run("--config", str(cfg), "--weights", seeded_weights, EXAMPLE)
    assert r.returncode == 2, r.stderr
    one_error_line(r, "box_predictor.bbox_pred.weight", "class_agnostic_regression is true")
    cfg.write_text('{"box_head": {"class_agnostic_regression": true}, "mask_head": {"class_agnostic": true}, '
                   '"input": {"min_size": 320, "max_size": 512}}')
    r = run("-q", "--config", str(cfg), "--weights", str(agnostic), EXAMPLE)
    assert r.returncode == 0, r.stderr


def test_bad_images_fail_alone(tmp_path, seeded_weights):
    text = tmp_path / "notes.txt"
    text.write_text("not an image\n")
    trunc = tmp_path / "cut.png"
    trunc.write_bytes(open(EXAMPLE, "rb").read()[:5000])
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    out = tmp_path / "out.json"
    r = run("-q", "--config", CONFIG_SMALL, "--weights", seeded_weights, "--json", str(out),
            str(text), EXAMPLE, str(trunc), str(empty))
    assert r.returncode == 1, r.stderr
    lines = [l for l in r.stderr.splitlines() if l.strip()]
    assert len(lines) == 3, r.stderr
    for p, line in zip([text, trunc, empty], lines):
        assert str(p) in line
    doc = json.loads(out.read_text())
    assert [im["file"] for im in doc["images"]] == [EXAMPLE]


def rle_decode(counts_str, h, w):
    """COCO compressed RLE string -> mask, from the published format
    (LEB128-like 5-bit groups offset by 48, counts after the second
    delta-coded against counts[i-2]); independent of the engine's code."""
    counts, i = [], 0
    while i < len(counts_str):
        x, k, more = 0, 0, True
        while more:
            c = ord(counts_str[i]) - 48
            x |= (c & 0x1f) << (5 * k)
            more = bool(c & 0x20)
            i += 1
            k += 1
            if not more and (c & 0x10):
                x |= -1 << (5 * k)
        if len(counts) > 2:
            x += counts[-2]
        counts.append(x)
    flat = np.zeros(h * w, np.uint8)
    pos, val = 0, 0
    for n in counts:
        flat[pos:pos + n] = val
        pos += n
        val ^= 1
    assert pos == h * w
    return flat.reshape(w, h).T  # column-major


def detect_json_images(path):
    """detect --json's document, image by image in its order (a file given
    twice is there twice): [(file, (boxes [N,4], scores, class ids), [N
    boolean masks])], for the tests that compare it."""
    out = []
    for im in json.load(open(path))["images"]:
        d = im["detections"]
        dets = (np.array([x["box"] for x in d], np.float32).reshape(-1, 4),
                np.array([x["score"] for x in d], np.float32), np.array([x["class_id"] for x in d]))
        out.append((im["file"], dets, [rle_decode(x["mask"]["counts"], *x["mask"]["size"]) > 0 for x in d]))
    return out


def test_json_output(tmp_path, seeded_weights):
    coco_mask = pytest.importorskip("pycocotools.mask", reason="pycocotools missing (scripts/install_deps.sh installs it)")
    out = tmp_path / "out.json"
    r = run("--config", CONFIG_SMALL, "--weights", seeded_weights, "--json", str(out), EXAMPLE)
    assert r.returncode == 0, r.stderr
    doc = json.loads(out.read_text())
    im = doc["images"][0]
    assert (im["width"], im["height"]) == (512, 512)
    dets = im["detections"]
    assert dets, "no detections to check"
    assert len(r.stdout.splitlines()) == len(dets)
    for d in dets:
        assert 1 <= d["class_id"] < 81 and d["class"] != "__background__"
        x1, y1, x2, y2 = d["box"]
        assert 0 <= x1 <= x2 <= 512 and 0 <= y1 <= y2 <= 512
        mask = rle_decode(d["mask"]["counts"], *d["mask"]["size"])
        assert d["mask"]["size"] == [512, 512]
        # pycocotools encodes the same mask to the very same string
        ref = coco_mask.encode(np.asfortranarray(mask))
        assert ref["counts"].decode() == d["mask"]["counts"] and list(ref["size"]) == [512, 512]
        ys, xs = np.nonzero(mask)
        if len(xs):  # the pasted mask lies within the box expanded by the paste padding (30/28)
            pad = 2 + (x2 - x1) / 28
            assert xs.min() >= x1 - pad and xs.max() <= x2 + pad
    scores = [d["score"] for d in dets]
    assert scores == sorted(scores, reverse=True)
    assert not any(p.name.startswith("out.json.tmp") for p in tmp_path.iterdir())


def test_precision_is_for_the_gpu(tmp_path, seeded_weights):
    """--precision fp16|tf32 asks a GPU for less than fp32: on the CPU it says
    so once and computes exactly what the fp32 run computes. A value it does
    not know is a usage error."""
    outs = {}
    for prec in (None, "fp16", "tf32"):
        out = tmp_path / f"out_{prec}.json"
        args = ["--config", CONFIG_SMALL, "--weights", seeded_weights, "--device", "cpu", "-q", "--json", str(out)]
        r = run(*args, *(["--precision", prec] if prec else []), EXAMPLE)
        assert r.returncode == 0, r.stderr
        notices = [l for l in r.stderr.splitlines() if l.strip()]
        if prec:
            assert len(notices) == 1 and f"--precision {prec}" in notices[0] and "fp32" in notices[0], r.stderr
        else:
            assert not notices, r.stderr
        outs[prec] = json.loads(out.read_text())["images"][0]["detections"]
    assert outs[None], "no detections to compare"
    assert outs["fp16"] == outs[None] and outs["tf32"] == outs[None]
    r = run("--precision", "fp8", "--config", CONFIG_SMALL, EXAMPLE)
    assert r.returncode == 2
    one_error_line(r, "--precision", "fp8")
