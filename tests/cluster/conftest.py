"""Fixtures of the cluster tests (make cluster-test, tests/cluster/run.sh):
40 held-out shapes scenes (models/shapes/shapes_data.py, seed 2) in a
folder with a sub-folder, 4 of them under names without digits (so their
COCO image ids are their positions among all inputs, not their names), and
the reference: one `detect --json --coco-results` run over the folder."""

import json
import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("DETECT_BUILD", os.path.join(REPO, "build"))
DETECT = os.path.join(BUILD, "detect")
CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
WEIGHTS = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
MODEL = ["--config", CONFIG, "--weights", WEIGHTS, "--device", "cpu"]
N_IMAGES = 40


def detect(*args, check=True, **kw):
    r = subprocess.run([DETECT, *args], capture_output=True, text=True, **kw)
    if check and r.returncode != 0:
        raise AssertionError(f"detect {' '.join(args)}: exit {r.returncode}\n{r.stderr}")
    return r


def make_scenes(d, count):
    subprocess.run([sys.executable, os.path.join(REPO, "models", "shapes", "shapes_data.py"), str(d),
                    "--seed", "2", "--count", str(count)], check=True, capture_output=True)
    os.remove(os.path.join(d, "annotations.json"))


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    """The folder: 36 scenes at the top (COCO-style numeric names), 4 in sub/ as scene_a..d.png."""
    d = tmp_path_factory.mktemp("cluster") / "images"
    make_scenes(d, N_IMAGES)
    (d / "sub").mkdir()
    for i, letter in zip(range(37, 41), "abcd"):
        shutil.move(d / f"{i:012d}.png", d / "sub" / f"scene_{letter}.png")
    return str(d)


@pytest.fixture(scope="session")
def reference(images, tmp_path_factory):
    """One run over all 40: (--json text, --coco-results text)."""
    out = tmp_path_factory.mktemp("reference")
    detect(*MODEL, "-q", "--json", str(out / "all.json"), "--coco-results", str(out / "coco.json"), images)
    return (out / "all.json").read_text(), (out / "coco.json").read_text()


def entries(text):
    return {e["file"]: e for e in json.loads(text)["images"]}
