"""The CPU backend's results do not depend on its thread count.

Shards and Ray actors run at one thread and are compared byte for byte with
a single run at another (tests/cluster); a library user sizing threads to a
machine expects the same detections too. The reference is the same command
at --threads 1. Before the linear layers ran as fixed tiles (engine/cpu,
cpu_linear), oneDNN split the sums of small layers (the class scores, the box
deltas) between threads on AVX2 processors, and --threads 1 and 2 differed in
the last bits of scores and boxes.

Each case also runs with oneDNN and our own kernels held to AVX2 (on an
AVX2-only machine that is what runs anyway), so an AVX-512 machine checks
the AVX2 paths as well."""

import os
import subprocess

import pytest

from conftest import BUILD, CONFIG_FULL, REPO

DETECT = os.path.join(BUILD, "detect")
SHAPES_CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")
SHAPES_WEIGHTS = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
AVX2_ONLY = {"ONEDNN_MAX_CPU_ISA": "AVX2", "MR_CPU_AVX512": "0", "MR_CPU_BLOCK": "8"}


def run_json(config, weights, images, threads, out, isa_env):
    env = dict(os.environ, **isa_env)
    path = out / f"threads{threads}.json"
    r = subprocess.run([DETECT, "--config", config, "--weights", weights, "--device", "cpu", "--threads", str(threads),
                        "--score-thresh", "0.01", "-q", "--json", str(path), *images],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    return path.read_bytes()


@pytest.mark.parametrize("isa", ["native", "avx2"])
@pytest.mark.parametrize("model", ["shapes-demo", "seeded-full-width"])
def test_same_bytes_at_any_thread_count(tmp_path, seeded_weights, model, isa):
    if model == "shapes-demo":
        # 4 scenes, 1000 RoIs each through a 256-wide box head, 4 classes
        config, weights = SHAPES_CONFIG, SHAPES_WEIGHTS
        images = [os.path.join(REPO, "examples", "shapes")]
    else:
        # a photo at 800 px through the full-width heads (fc 1024, 81 classes)
        config, weights = CONFIG_FULL, seeded_weights
        images = [os.path.join(REPO, "examples", "astronaut.png")]
    isa_env = AVX2_ONLY if isa == "avx2" else {}
    one = run_json(config, weights, images, 1, tmp_path, isa_env)
    assert b'"score"' in one, "no detections: nothing would be compared"
    for threads in (2, 3):
        other = run_json(config, weights, images, threads, tmp_path, isa_env)
        assert other == one, f"--threads {threads} differs from --threads 1 ({model}, {isa})"


def test_onednn_cap_alone_stands_for_an_avx2_cpu(tmp_path):
    """ONEDNN_MAX_CPU_ISA=AVX2 alone makes the choices an AVX2 machine makes:
    the 8-channel block and our AVX2 kernels follow oneDNN's instruction set,
    so the bytes equal those with all three switches set. Before, the block
    followed the processor (16 with AVX-512), and oneDNN capped at AVX2 ran
    16-channel blocks in its reference code, ~100x slower (bench/NOTES.md
    section 28), with other bytes."""
    images = [os.path.join(REPO, "examples", "shapes")]
    (tmp_path / "cap").mkdir()
    (tmp_path / "all").mkdir()
    capped = run_json(SHAPES_CONFIG, SHAPES_WEIGHTS, images, 2, tmp_path / "cap", {"ONEDNN_MAX_CPU_ISA": "AVX2"})
    assert b'"score"' in capped, "no detections: nothing would be compared"
    assert capped == run_json(SHAPES_CONFIG, SHAPES_WEIGHTS, images, 2, tmp_path / "all", AVX2_ONLY)
