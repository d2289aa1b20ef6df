"""bench/make_photo_folder.py, the GPU throughput benchmark's folder: the same seed writes the
same bytes; the sizes follow what dominates COCO val2017 (long side 640 for most, a quarter
portrait, short sides 240..640); --same-size writes one size; detect reads every file."""

import json
import os
import subprocess
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "bench", "make_photo_folder.py")
sys.path.insert(0, os.path.join(REPO, "bench"))
import make_photo_folder  # noqa: E402


def write(out, *args):
    r = subprocess.run([sys.executable, SCRIPT, str(out), *args], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_same_seed_same_bytes(tmp_path):
    write(tmp_path / "a", "--count", "6", "--seed", "3")
    write(tmp_path / "b", "--count", "6", "--seed", "3")
    names = sorted(os.listdir(tmp_path / "a"))
    assert len(names) == 7 and "sizes.tsv" in names
    for n in names:
        assert (tmp_path / "a" / n).read_bytes() == (tmp_path / "b" / n).read_bytes(), n
    write(tmp_path / "c", "--count", "6", "--seed", "4")
    assert (tmp_path / "c" / "photo_00000.jpg").read_bytes() != (tmp_path / "a" / "photo_00000.jpg").read_bytes()


def test_sizes_follow_coco():
    sizes = make_photo_folder.sample_sizes(2000, np.random.RandomState(1))
    long_sides = [max(s) for s in sizes]
    short_sides = [min(s) for s in sizes]
    portrait = sum(h > w for h, w in sizes) / len(sizes)
    assert sum(x == 640 for x in long_sides) >= 0.9 * len(sizes)
    assert min(short_sides) >= 240 and max(long_sides) == 640
    assert 0.2 <= portrait <= 0.3
    nets = {make_photo_folder.network_size(h, w) for h, w in sizes}
    assert 10 <= len(nets) <= 100  # a few dozen network input sizes, as COCO gives
    assert make_photo_folder.network_size(480, 640) == (800, 1088)  # 800x1066 padded to /32


def test_same_size_and_detect_reads_them(tmp_path):
    out = tmp_path / "same"
    write(out, "--count", "3", "--same-size", "640x480")
    rows = (out / "sizes.tsv").read_text().splitlines()[1:]
    assert [r.split("\t")[1:] for r in rows] == [["640", "480"]] * 3
    js = tmp_path / "out.json"
    r = subprocess.run([os.path.join(REPO, "build", "detect"), "-q", "--device", "cpu", "--config",
                        os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json"), "--weights",
                        os.path.join(REPO, "models", "shapes_r101_narrow.safetensors"), "--json", str(js), str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    doc = json.loads(js.read_text())
    assert sorted((im["width"], im["height"]) for im in doc["images"]) == [(640, 480)] * 3
