"""The shapes model's training code (models/shapes/train.py, train_gpu.sh, shapes_data.py's hard
mix), checked on the CPU in seconds:

- `train.py --init` loads a converted model exactly: the loaded state dict, written back through
  convert.py's torchvision mapping at F16, equals the shipped file tensor for tensor, bit for bit;
- train_gpu.sh, the one command for a lent GPU, runs every step (from scratch, convert, fine-tune
  from that, convert to F16) with DEVICE=cpu and a few iterations each, and the engine loads and
  runs the file it writes; with INIT it fine-tunes that model and trains nothing from scratch;
- the hard mix is only drawn when asked for: make_scene's default scenes are those of hard=False,
  and hard scenes hold more shapes; --cut-corners leaves shapes in two visible pieces far more
  often (8 against 1 in 40 hard scenes).
"""

import os
import subprocess
import sys

import numpy as np
import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path[:0] = [os.path.join(REPO, "models", "shapes"), os.path.join(REPO, "models")]
import shapes_data  # noqa: E402

SHIPPED = os.path.join(REPO, "models", "shapes_r101_narrow.safetensors")
DETECT = os.path.join(os.environ.get("DETECT_BUILD", os.path.join(REPO, "build")), "detect")
CONFIG = os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json")


def test_init_loads_the_shipped_model_exactly():
    import convert
    import model as shapes_model
    import safetensors_io
    m = shapes_model.load_converted(shapes_model.build_model(frozen_bn=True), SHIPPED)
    state = {k: v.numpy() for k, v in m.state_dict().items()}
    written, _ = convert.convert_state_dict(state, "torchvision", dtype="f16")
    shipped, _ = safetensors_io.load(SHIPPED)
    assert sorted(written) == sorted(shipped)
    for name, a in shipped.items():
        assert written[name].dtype == a.dtype and written[name].shape == a.shape, name
        assert np.array_equal(written[name].view(np.uint16), a.view(np.uint16)), name


def test_train_gpu_script_runs_every_step_on_the_cpu(tmp_path):
    if not os.path.exists(DETECT):
        pytest.fail(f"{DETECT} is missing (run `make`)")
    out = tmp_path / "train"
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(out), DEVICE="cpu", WORKERS="1",
               SCRATCH_ITERS="2", SCRATCH_FREEZE_ITERS="1", FINETUNE_ITERS="2")
    r = subprocess.run(["bash", os.path.join(REPO, "models", "shapes", "train_gpu.sh")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = (out / "train.log").read_text()
    assert f"initialised from {out}/scratch.safetensors" in log, log[-2000:]
    assert f"wrote {out}/finetune/model_final.pth" in log, log[-2000:]
    weights = out / "shapes_r101_narrow.safetensors"
    import safetensors_io
    tensors, _ = safetensors_io.load(str(weights))
    assert {a.dtype for a in tensors.values()} == {np.dtype(np.float16)}
    scene = os.path.join(REPO, "examples", "shapes", "scene_1.png")
    r = subprocess.run([DETECT, "--config", CONFIG, "--weights", str(weights), "-q", "--json", str(tmp_path / "d.json"),
                        scene], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_hard_mix_only_when_asked():
    counts = {False: [], True: []}
    for i in range(12):
        img, objs = shapes_data.make_scene(shapes_data.HELDOUT_SEED, i)
        img0, objs0 = shapes_data.make_scene(shapes_data.HELDOUT_SEED, i, hard=False)
        assert np.array_equal(img, img0) and len(objs) == len(objs0)
        counts[False].append(len(objs))
        counts[True].append(len(shapes_data.make_scene(shapes_data.TRAIN_SEED, i, hard=True)[1]))
    assert np.mean(counts[True]) > np.mean(counts[False]) and min(counts[True]) >= 3, counts


def test_train_gpu_script_with_init_only_fine_tunes(tmp_path):
    out = tmp_path / "train"
    env = dict(os.environ, PYTHON=sys.executable, OUT=str(out), DEVICE="cpu", WORKERS="1", FINETUNE_ITERS="2",
               INIT=SHIPPED, SCENE_OFFSET="123456")
    r = subprocess.run(["bash", os.path.join(REPO, "models", "shapes", "train_gpu.sh")], env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    log = (out / "train.log").read_text()
    assert f"initialised from {SHIPPED}" in log, log[-2000:]
    assert not (out / "scratch").exists()
    assert "--scene-offset 123456" in r.stdout
    assert (out / "shapes_r101_narrow.safetensors").is_file()


def test_cut_corners_splits_shapes_only_when_asked():
    """--cut-corners at 0.8: far more objects of the hard mix are seen in two pieces (a second
    visible part of at least 30 pixels) than without it."""
    from scipy import ndimage

    def split_objects(objs):
        n = 0
        for _, m in objs:
            labels, count = ndimage.label(m)
            sizes = sorted(ndimage.sum(m, labels, range(1, count + 1)), reverse=True)
            n += count > 1 and sizes[1] >= 30
        return n

    plain = cut = 0
    for i in range(40):
        plain += split_objects(shapes_data.make_scene(shapes_data.TRAIN_SEED, 700000 + i, hard=True)[1])
        cut += split_objects(shapes_data.make_scene(shapes_data.TRAIN_SEED, 700000 + i, hard=True,
                                                    cut_corners=0.8)[1])
    assert cut >= 5 * max(plain, 1), (plain, cut)
