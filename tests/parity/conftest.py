"""Fixtures for the parity tests: seeded torchvision reference runs and our
engine's stage dumps for the same weights and pixels.

A case = (weight seed, image, input size). For each case, once per session:
  1. tests/parity/oracle.py builds torchvision's Mask R-CNN R-101-FPN with
     the seeded init of ../shared/reference/oracle.md, writes the weights
     through models/convert.py's mapping, the image as PNG, and every stage
     tensor of torchvision's forward;
  2. build/stage_runner runs our engine end to end on the PNG ("e2e"), and
     once more with every stage fed torchvision's previous stage
     ("isolated").
Seeds: DETECT_PARITY_SEED overrides every case's weight seed, so the
properties can be checked for other seeds by hand. DETECT_STAGE_ARGS adds
arguments to every stage_runner run (tests/gpu/check.sh: "--device cuda"),
and detect_device_args() gives the same device to the tests that run
detect itself."""

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
BUILD = os.environ.get("DETECT_BUILD", os.path.join(REPO, "build"))
sys.path.insert(0, HERE)

CONFIG_FULL = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision.json")
CONFIG_SMALL = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_torchvision_small.json")

CASES = {
    # A real photograph at full size: 512x512 -> 800x800.
    "astronaut-800": dict(seed=0, image="photo:astronaut", min_size=800, max_size=1333, config=CONFIG_FULL),
    # Synthetic scene at the small size: 320x480, no resize.
    "synthetic-320": dict(seed=1, image="synthetic:320x480", min_size=320, max_size=512, config=CONFIG_SMALL),
    # Another photograph, downscaled and non-square: 400x600 -> 320x480.
    "coffee-320": dict(seed=2, image="photo:coffee", min_size=320, max_size=512, config=CONFIG_SMALL),
    # The strong baselines (issue 48), torchvision's v2 architecture with an R-101 trunk: batchnorm
    # with random statistics in the trunk, the FPN and both heads, two RPN convs, 4conv1fc.
    "v2bn-chelsea-800": dict(seed=4, image="photo:chelsea", min_size=800, max_size=1333, config=CONFIG_FULL,
                             arch="ARCH_V2"),
    # GroupNorm(32) in the trunk, the FPN and both heads (detectron2's and Detectron's GN models), 4conv1fc.
    "gn-rocket-320": dict(seed=5, image="photo:rocket", min_size=320, max_size=512, config=CONFIG_SMALL,
                          arch="ARCH_GN"),
}


def write_config(base, overrides, path):
    """`base` (a config file) with `overrides` ({section: {key: value}}) written to `path`."""
    import json
    with open(base, encoding="utf-8") as f:
        cfg = json.load(f)
    for section, keys in overrides.items():
        cfg[section].update(keys)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f, indent=2)
    return path


class Case:
    def __init__(self, name, root):
        spec = dict(CASES[name])
        if os.environ.get("DETECT_PARITY_SEED"):
            spec["seed"] = int(os.environ["DETECT_PARITY_SEED"])
        self.name, self.spec, self.root = name, spec, root
        if spec.get("arch"):  # the base config with the keys that describe the architecture
            import oracle
            spec["config"] = write_config(spec["config"], oracle.config_keys(getattr(oracle, spec["arch"])),
                                          os.path.join(root, "config.json"))
        self.ref_dir = os.path.join(root, "ref")
        self.e2e_dir = os.path.join(root, "e2e")
        self.iso_dir = os.path.join(root, "isolated")
        self.weights = os.path.join(root, "weights.safetensors")
        self.png = os.path.join(root, "image.png")
        self._cache = {}

    def ref(self, name):
        return self._load(self.ref_dir, name)

    def e2e(self, name):
        return self._load(self.e2e_dir, name)

    def iso(self, name):
        return self._load(self.iso_dir, name)

    def _load(self, d, name):
        key = (d, name)
        if key not in self._cache:
            self._cache[key] = np.load(os.path.join(d, name + ".npy"))
        return self._cache[key]


def run_reference(case):
    import torch
    import oracle
    torch.set_num_threads(2)
    s = case.spec
    arch = getattr(oracle, s["arch"]) if s.get("arch") else None
    model = oracle.build_model(s["seed"], min_size=s["min_size"], max_size=s["max_size"], arch=arch)
    img = oracle.load_image(s["image"], seed=s["seed"])
    oracle.save_png(img, case.png)
    oracle.export_weights(model, case.weights)
    stages = oracle.run_staged(model, img)
    os.makedirs(case.ref_dir, exist_ok=True)
    for k, v in stages.items():
        np.save(os.path.join(case.ref_dir, k + ".npy"), v)
    print(f"\n[{case.name}] seed {s['seed']} image {s['image']} -> {stages['01_input_tensor'].shape}\n"
          + oracle.summary(stages))


def detect_device_args():
    """detect's arguments for the device the suite tests: DETECT_STAGE_ARGS's
    (strict fp32 on CUDA, as stage_runner's default is, unless it names a
    precision), else the CPU. Never detect's own default: that is the GPU
    with TF32 wherever there is one."""
    args = os.environ.get("DETECT_STAGE_ARGS", "").split()
    if "--device" not in args:
        args += ["--device", "cpu"]
    elif "--precision" not in args and args[args.index("--device") + 1].startswith("cuda"):
        args += ["--precision", "fp32"]
    return args


def run_engine(case, out, feeds):
    os.makedirs(out, exist_ok=True)
    cmd = [os.path.join(BUILD, "stage_runner"), "--config", case.spec["config"], "--weights", case.weights,
           "--image", case.png, "--out", out, "--threads", "2"] + feeds + \
        os.environ.get("DETECT_STAGE_ARGS", "").split()
    r = subprocess.run(cmd, capture_output=True, text=True)
    assert r.returncode == 0, f"{' '.join(cmd)}\n{r.stderr}"


# Temporary space. pytest 7.2 keeps every tmp_path and factory folder until the session ends, and
# this suite writes about 15 GB of weights and stage dumps: more than a tmpfs /tmp holds (the clean
# Debian root's, scripts/fresh_debian.sh: half the RAM, 12 GB here). So a passed test's tmp_path
# goes when it passes, and a fixture's folder when the fixture is torn down, unless a test of the
# session has failed (then everything stays, to be looked at).
@pytest.hookimpl(tryfirst=True, hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)


@pytest.fixture(autouse=True)
def drop_tmp_path_when_passed(request):
    yield
    path = request.node.funcargs.get("tmp_path")
    rep = getattr(request.node, "rep_call", None)
    if path is not None and rep is not None and rep.passed:
        shutil.rmtree(path, ignore_errors=True)


def drop_unless_failed(request, path):
    """A fixture's folder, at its teardown, unless a test of the session failed."""
    if not request.session.testsfailed:
        shutil.rmtree(path, ignore_errors=True)


# Module scope (only test_e2e.py uses it): pytest then finishes one case before the next, so one
# case's dumps are on disk at a time.
@pytest.fixture(scope="module", params=sorted(CASES))
def case(request, tmp_path_factory):
    c = Case(request.param, str(tmp_path_factory.mktemp(request.param)))
    run_reference(c)
    run_engine(c, c.e2e_dir, [])
    np.save(os.path.join(c.root, "ref_proposals.npy"), c.ref("07_rpn_proposals"))
    run_engine(c, c.iso_dir, ["--feed-input", os.path.join(c.ref_dir, "01_input_tensor.npy"),
                              "--feed-fpn", c.ref_dir,
                              "--feed-proposals", os.path.join(c.root, "ref_proposals.npy"),
                              "--feed-detections", c.ref_dir])
    yield c
    drop_unless_failed(request, c.root)


@pytest.fixture(scope="session")
def seeded_weights(tmp_path_factory):
    """A valid R-101-FPN weights file (seed 3) for command-line tests."""
    import torch
    import oracle
    torch.set_num_threads(2)
    path = str(tmp_path_factory.mktemp("weights") / "seed3.safetensors")
    oracle.export_weights(oracle.build_model(3, bg_bias=5.0), path)
    return path


def engine_library_path():
    """build/libdetect_internal.so (make builds it before the parity tests), or $DETECT_LIB."""
    path = os.environ.get("DETECT_LIB") or os.path.join(BUILD, "libdetect_internal.so")
    if not os.path.exists(path):
        pytest.fail(f"{path} is missing: run `make` first (or set DETECT_LIB)")
    return path


def compile_shim(directory, source, name, link_engine=False):
    """Compiles a small C file that includes the engine headers (to reach the
    MR_HD inline math) into directory/lib<name>.so; with link_engine it is
    linked against the engine library. Returns the loaded ctypes.CDLL."""
    import ctypes
    c_file = os.path.join(str(directory), name + ".c")
    so = os.path.join(str(directory), "lib" + name + ".so")
    with open(c_file, "w") as f:
        f.write(source)
    link = []
    if link_engine:
        libpath = os.path.abspath(engine_library_path())
        link = [libpath, "-Wl,-rpath," + os.path.dirname(libpath)]
    subprocess.run(["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC", "-O2", "-Iengine",
                    c_file] + link + ["-lm", "-o", so], cwd=REPO, check=True)
    return ctypes.CDLL(so)
