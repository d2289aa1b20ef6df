"""Fixtures of the library tests (tests/library/run.sh sets the stage):
$DETECT_TEST_PREFIX is a `make install` tree, and this python's
environment has the package from `pip install .`.

The reference for every comparison is the installed `detect --json` on the
same files: the command's own output, produced without the library's
Python or C clients under test."""

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
WEIGHTS = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
N_IMAGES = 20


@pytest.fixture(scope="session")
def prefix():
    p = os.environ.get("DETECT_TEST_PREFIX")
    if not p:
        pytest.skip("run through tests/library/run.sh (make python-test): needs an installed tree")
    return p


@pytest.fixture(scope="session")
def images(tmp_path_factory):
    """20 held-out shapes scenes (seed 2) as PNG, 4 of them also as JPEG."""
    d = tmp_path_factory.mktemp("images")
    subprocess.run([sys.executable, os.path.join(REPO, "models", "shapes", "shapes_data.py"), str(d),
                    "--seed", "2", "--count", str(N_IMAGES - 4)], check=True, capture_output=True)
    os.remove(d / "annotations.json")
    from PIL import Image
    pngs = sorted(str(p) for p in d.glob("*.png"))
    jpgs = []
    for p in pngs[:4]:
        j = p[:-4] + "_q90.jpg"
        Image.open(p).convert("RGB").save(j, quality=90)
        jpgs.append(j)
    return pngs + jpgs


def cli_json(prefix, paths, *extra):
    """The installed detect's --json document, parsed, and its text."""
    out = os.path.join(os.path.dirname(paths[0]), "cli.json")
    subprocess.run([os.path.join(prefix, "bin", "detect"), "--config", CONFIG, "--weights", WEIGHTS,
                    "--device", "cpu", "-q", "--json", out, *extra, *paths], check=True, capture_output=True)
    with open(out) as f:
        text = f.read()
    return json.loads(text), text


@pytest.fixture(scope="session")
def reference(prefix, images):
    doc, text = cli_json(prefix, images)
    return {e["file"]: e for e in doc["images"]}, text
