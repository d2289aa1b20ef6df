"""mmdetection's input resize (engine/ops/resize_cv2_uint8.c and
resize_rounding "mmdet" in engine/ops/image_preprocess.c) against OpenCV
itself, through ctypes (build/libdetect_internal.so or $DETECT_LIB).

(a) resize_cv2_linear_uint8 equals cv2.resize(img, (out_w, out_h),
    interpolation=cv2.INTER_LINEAR) of opencv-python-headless 4.10.0.84 (the
    wheel mmdetection's requirements pin, tests/mmdet/requirements.txt) byte
    for byte on seeded random uint8 RGB images: upscales and downscales by
    small and large factors, exactly half (OpenCV's INTER_AREA switch), half
    on one axis only, equal sizes (a copy), 1-pixel sides, very elongated
    images, sizes whose weights fall on a half of 1/2048 (rounded to even),
    constant 0 and 255 images, and the sizes the "mmdet" rule gives.
(b) resize_rounding "mmdet" gives mmcv's rescale_size((w, h), (1333, 800))
    (mmcv/image/geometric.py, re-implemented below from its source; also
    mmcv's own function when `import mmcv` works in the venv), with the box
    scale per axis new/old as mmdet's Resize stores it.
(c) image_preprocess with "mmdet" + "cv2_linear_uint8" equals mmdetection's
    pipeline computed here: cv2's resize of the uint8 image, float32,
    (x - mean) / std in RGB (DetDataPreprocessor), zero padding to a
    multiple of 32.

cv2 is not in Debian's python: it runs in build/venv-mmdet (make deps:
scripts/install_deps.sh from tests/mmdet/requirements.txt), in one
subprocess per test. Without that venv the test fails. Seeds are fixed and
printed."""

import ctypes as C
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import REPO
from image_ctypes import MR_OK, ResizeCv2Uint8, geometry, input_config, load_library, preprocess

CV2_VERSION = "4.10.0"  # opencv-python-headless 4.10.0.84
MMDET_MEAN = [123.675, 116.28, 103.53]  # mmdet's DetDataPreprocessor, RGB (bgr_to_rgb=True)
MMDET_STD = [58.395, 57.12, 57.375]
MMDET_SCALE = (1333, 800)

# Runs in build/venv-mmdet: argv[1] an .npz of the cases in, argv[2] the results out.
CV2_SCRIPT = r"""
import sys
import numpy as np
import cv2
data = np.load(sys.argv[1])
out = {"cv2_version": np.array(cv2.__version__)}
for i in range(int(data["n"])):
    oh, ow = (int(v) for v in data[f"size{i}"])
    out[f"out{i}"] = cv2.resize(data[f"img{i}"], (ow, oh), interpolation=cv2.INTER_LINEAR)
if "geometry" in data:
    try:
        from mmcv.image.geometric import rescale_size
    except ImportError:
        pass
    else:
        scale = tuple(int(v) for v in data["scale"])
        out["mmcv"] = np.array([rescale_size((int(w), int(h)), scale)[::-1] for h, w in data["geometry"]],
                               np.int64)
np.savez(sys.argv[2], **out)
"""


def mmdet_python():
    """build/venv-mmdet's interpreter, which has opencv-python-headless; a
    test without it fails (it is a dependency of the test suite, not an
    optional extra)."""
    path = os.path.join(REPO, "build", "venv-mmdet", "bin", "python")
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} is missing: run `make deps` (scripts/install_deps.sh makes build/venv-mmdet "
                    "from tests/mmdet/requirements.txt, with opencv-python-headless)")
    return path


def run_cv2(tmp_path, cases, geometry_sizes=None):
    """cv2.resize of each (img, out_h, out_w) in build/venv-mmdet: the outputs,
    and mmcv's rescale_size of geometry_sizes [(h, w)] as (h, w) rows, or
    None when mmcv is not importable there."""
    arrays = {"n": np.array(len(cases))}
    for i, (img, out_h, out_w) in enumerate(cases):
        arrays[f"img{i}"] = np.ascontiguousarray(img)
        arrays[f"size{i}"] = np.array([out_h, out_w])
    if geometry_sizes is not None:
        arrays["geometry"] = np.array(geometry_sizes, np.int64).reshape(-1, 2)
        arrays["scale"] = np.array(MMDET_SCALE)
    src, dst = tmp_path / "cases.npz", tmp_path / "cv2.npz"
    np.savez(src, **arrays)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the venv's own packages
    proc = subprocess.run([mmdet_python(), "-c", CV2_SCRIPT, str(src), str(dst)], env=env,
                          capture_output=True, text=True)
    assert proc.returncode == 0, f"cv2 in build/venv-mmdet failed:\n{proc.stderr}"
    res = np.load(dst)
    assert str(res["cv2_version"]) == CV2_VERSION, \
        f"build/venv-mmdet has cv2 {res['cv2_version']}, not {CV2_VERSION}: run `make deps`"
    outs = [res[f"out{i}"] for i in range(len(cases))]
    return outs, (res["mmcv"] if "mmcv" in res else None)


def ours(lib, src, out_h, out_w):
    h, w = src.shape[:2]
    p = ResizeCv2Uint8(h, w, out_h, out_w)
    scratch = C.create_string_buffer(max(lib.resize_cv2_uint8_scratch_bytes(C.byref(p)), 1))
    dst = np.zeros((out_h, out_w, 3), np.uint8)
    src = np.ascontiguousarray(src)
    lib.resize_cv2_linear_uint8(C.byref(p), src.ctypes.data, dst.ctypes.data, scratch)
    return dst


def mmcv_rescale_size(h, w, scale=MMDET_SCALE):
    """mmcv.image.geometric.rescale_size((w, h), scale) for a tuple scale,
    then _scale_size, in Python floats: (new_h, new_w)."""
    max_long_edge, max_short_edge = max(scale), min(scale)
    scale_factor = min(max_long_edge / max(h, w), max_short_edge / min(h, w))
    return int(h * float(scale_factor) + 0.5), int(w * float(scale_factor) + 0.5)


@pytest.fixture(scope="module")
def lib():
    return load_library()


# ---- (a) the resize, byte for byte -------------------------------------------------

FIXED_PAIRS = [
    # (in_h, in_w, out_h, out_w)
    (480, 640, 800, 1067),   # mmdet's 800x1333 rule on a VGA image
    (480, 640, 800, 1066),
    (1200, 1600, 800, 1067),  # 1.5x down
    (2000, 3000, 800, 1200),  # 2.5x down
    (997, 1013, 13, 17),      # large factors, odd sizes
    (100, 99, 99, 100),       # factors near 1, both directions
    (333, 517, 332, 518),
    (640, 960, 320, 480),     # exactly half on both axes: INTER_AREA's 2x2 mean
    (2, 2, 1, 1),
    (63, 64, 63, 32),         # half on one axis only: bilinear
    (64, 63, 32, 63),
    (64, 96, 32, 47),         # half on one axis, not quite on the other
    (50, 70, 50, 70),         # equal sizes: a copy
    (64, 64, 64, 200),        # one axis unchanged
    (64, 64, 200, 64),
    (1, 1, 7, 5),             # 1-pixel sides
    (1, 300, 1, 17),
    (300, 1, 23, 1),
    (5, 7, 1, 1),
    (1, 9, 4, 2),
    (2, 3, 9, 11),
    (3, 2000, 2, 1333),       # very elongated
    (2000, 3, 1333, 2),
    (7, 9, 1024, 2048),       # weights on halves of 1/2048: half to even
    (5, 3, 4096, 2048),
    (255, 256, 511, 129),
    (31, 1000, 5, 999),
]


def random_pairs(rng, n):
    """Random sizes: 1..200 each way, about a third of them downscales by
    up to 20x, some exactly half, some equal, some 1 pixel wide."""
    pairs = []
    for i in range(n):
        kind = i % 8
        in_h, in_w = (int(v) for v in rng.integers(1, 201, 2))
        if kind == 0:  # strong downscale
            in_h, in_w = (int(v) for v in rng.integers(100, 1201, 2))
            out_h, out_w = max(1, in_h // int(rng.integers(2, 21))), max(1, in_w // int(rng.integers(2, 21)))
        elif kind == 1:  # exactly half
            out_h, out_w = max(1, in_h // 2), max(1, in_w // 2)
            in_h, in_w = 2 * out_h, 2 * out_w
        elif kind == 2:  # equal sizes
            out_h, out_w = in_h, in_w
        elif kind == 3:  # a 1-pixel side
            in_h, out_h = (1, int(rng.integers(1, 50))) if rng.integers(2) else (int(rng.integers(1, 50)), 1)
            out_w = int(rng.integers(1, 300))
        else:
            out_h, out_w = (int(v) for v in rng.integers(1, 401, 2))
        pairs.append((in_h, in_w, out_h, out_w))
    return pairs


def image(rng, h, w, kind):
    if kind == 0:
        return np.zeros((h, w, 3), np.uint8)
    if kind == 1:
        return np.full((h, w, 3), 255, np.uint8)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def test_resize_bit_exact_with_cv2(lib, tmp_path):
    seed = 4610
    rng = np.random.default_rng(seed)
    pairs = FIXED_PAIRS + random_pairs(rng, 480)
    # and the sizes the "mmdet" rule gives 800x1333 for, from photos' sizes
    for h, w in rng.integers(1, 1601, (40, 2)).tolist():
        nh, nw = mmcv_rescale_size(h, w)
        if min(nh, nw) >= 1:
            pairs.append((h, w, nh, nw))
    images = [image(rng, h, w, i % 23) for i, (h, w, _, _) in enumerate(pairs)]
    refs, _ = run_cv2(tmp_path, [(img, oh, ow) for img, (_, _, oh, ow) in zip(images, pairs)])
    bad = []
    for img, (h, w, oh, ow), ref in zip(images, pairs, refs):
        assert ref.shape == (oh, ow, 3)
        diff = int(np.count_nonzero(ours(lib, img, oh, ow) != ref))
        if diff:
            bad.append(f"{h}x{w} -> {oh}x{ow}: {diff} of {ref.size} bytes differ")
    print(f"seed {seed}: {len(pairs)} resizes compared with cv2 {CV2_VERSION}, {len(bad)} differ")
    assert not bad, "\n".join(bad[:20])


def test_resize_smooth_photo_like(lib, tmp_path):
    """A smooth gradient with noise: a rounding bias shows on smooth data."""
    y, x = np.mgrid[0:701, 0:933]
    rng = np.random.default_rng(6)
    src = np.dstack([(x * 255) // 932, (y * 255) // 700, ((x + y) * 3) % 256]).astype(np.int32)
    src = np.clip(src + rng.integers(-3, 4, src.shape), 0, 255).astype(np.uint8)
    sizes = [(600, 800), (800, 1066), (1000, 1333), (100, 133), (350, 466)]
    refs, _ = run_cv2(tmp_path, [(src, oh, ow) for oh, ow in sizes])
    for (oh, ow), ref in zip(sizes, refs):
        assert np.array_equal(ours(lib, src, oh, ow), ref), (oh, ow)


# ---- (b) mmcv's geometry ------------------------------------------------------------

def geometry_sizes():
    """A coarse grid; long/short ratios near 1333/800 on both sides, in both
    orientations; squares; known examples."""
    cases = [(h, w) for h in range(1, 700, 37) for w in range(1, 2100, 53)]
    for short in (300, 480, 600, 799, 800, 801, 1000, 1999):
        lim = short * 1333 / 800
        for lon in range(int(lim) - 3, int(lim) + 4):
            cases += [(short, lon), (lon, short)]
    cases += [(s, s) for s in (1, 2, 799, 800, 801, 1333, 1334, 5000)]
    cases += [(320, 421), (305, 610), (480, 640), (427, 640), (1, 19999), (16, 20000), (19999, 2)]
    return cases


def test_mmdet_geometry(lib, tmp_path):
    sizes = geometry_sizes()
    _, mmcv_sizes = run_cv2(tmp_path, [], geometry_sizes=sizes)
    if mmcv_sizes is not None:
        assert [tuple(r) for r in mmcv_sizes.tolist()] == [mmcv_rescale_size(h, w) for h, w in sizes]
    cfg = input_config(MMDET_MEAN, MMDET_STD, 800, 1333, "mmdet", "cv2_linear_uint8", pixel_scale=1.0)
    checked = differ = 0
    for h, w in sizes:
        want = mmcv_rescale_size(h, w)
        st, g, msg = geometry(lib, cfg, h, w)
        if min(want) < 1:
            assert st != MR_OK and "elongated" in msg, (h, w, msg)
            continue
        assert st == MR_OK, msg
        assert (g.resized_h, g.resized_w) == want, (h, w)
        assert g.padded_h % 32 == 0 and 0 <= g.padded_h - g.resized_h < 32
        # mmdet's Resize: scale_factor = (new_w / w, new_h / h)
        assert g.factor_w == want[1] / w and g.factor_h == want[0] / h, (h, w)
        assert g.scale_w == np.float32(np.float32(want[1]) / np.float32(w)), (h, w)
        checked += 1
        st, gf, _ = geometry(lib, input_config(MMDET_MEAN, MMDET_STD, 800, 1333), h, w)
        differ += st == MR_OK and (gf.resized_h, gf.resized_w) != want
    print(f"{checked} sizes equal mmcv's rescale_size"
          f"{' (and mmcv itself)' if mmcv_sizes is not None else ' (formula; mmcv not importable)'}; "
          f"{differ} differ from torchvision's floor rule")
    assert differ > 0


# ---- (c) mmdetection's preprocessing ------------------------------------------------

def test_preprocess_matches_mmdet_pipeline(lib, tmp_path):
    seed = 4611
    rng = np.random.default_rng(seed)
    sizes = [(480, 640), (427, 640), (640, 427), (600, 1000), (1200, 1600), (375, 500), (333, 333), (64, 1900)]
    images = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]
    cfg = input_config(MMDET_MEAN, MMDET_STD, 800, 1333, "mmdet", "cv2_linear_uint8", pixel_scale=1.0)
    refs, _ = run_cv2(tmp_path, [(img, *mmcv_rescale_size(*img.shape[:2])) for img in images])
    mean, std = np.array(MMDET_MEAN, np.float32), np.array(MMDET_STD, np.float32)
    for img, ref in zip(images, refs):
        g, out = preprocess(lib, cfg, img)
        h, w = ref.shape[:2]
        want = np.zeros((g.padded_h, g.padded_w, 3), np.float32)
        want[:h, :w] = (ref.astype(np.float32) - mean) / std
        assert (g.padded_h, g.padded_w) == (-(-h // 32) * 32, -(-w // 32) * 32)
        label = f"seed {seed}: {img.shape[:2]} -> {h}x{w}"
        np.testing.assert_array_equal(out[0], want, err_msg=label)


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
