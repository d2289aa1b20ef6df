"""The detectron2 and Detectron input conventions of engine/io/image.c and
engine/resize_{pil,cv2}.c, through ctypes (build/libdetect_internal.so or $DETECT_LIB).

(a) resize_pil_bilinear equals Pillow's Image.resize((w, h), BILINEAR)
    byte for byte on seeded random RGB images, over size pairs that upscale,
    downscale by large and small factors, keep one axis, have 1-pixel sides
    and odd sizes. Pillow (the installed one, 9.4) is the reference.
(b) resize_rounding "detectron2" gives the sizes of a Python port of
    detectron2's ResizeShortestEdge.get_output_shape
    (detectron2/data/transforms/augmentation_impl.py), written below from
    its source, over a grid of sizes and every size around the max_size
    boundary; and differs from "round" where the two rules do.
(c) resize_cv2_linear against a numpy port of OpenCV's cv2.resize
    INTER_LINEAR on float32 images (imgproc/src/resize.cpp semantics: the
    factor-based source coordinate, column clamping, row-index clipping),
    written below from those semantics. cv2 itself is not installed here,
    so this checks our reading of OpenCV, not OpenCV: max abs error
    <= 1e-4 on values of magnitude ~130 (float rounding of the two
    evaluation orders).
(d) image_preprocess with resize_method "pil_bilinear" equals, bit for bit,
    detectron2's pipeline computed here: PIL resize of the uint8 image ->
    float32 -> BGR -> (x - mean) / std -> zero padding to a multiple of 32.
    And "cv2_linear" with "round" equals Detectron's prep_im_for_blob port:
    float32 - means, cv2-style resize (the numpy port of (c)), padding.

Every random case prints its seed. Run with /usr/bin/python3 -m pytest."""

import ctypes as C

import numpy as np
import pytest
from PIL import Image

from image_ctypes import (MR_OK, PixelLut, ResizeCv2, ResizePil, geometry, input_config, load_library,
                          preprocess)

D2_MEAN = [103.530, 116.280, 123.675]  # detectron2 PIXEL_MEAN, BGR
D2_STD = [1.0, 1.0, 1.0]
D_MEAN = [102.9801, 115.9465, 122.7717]  # Detectron PIXEL_MEANS, BGR


@pytest.fixture(scope="module")
def lib():
    return load_library()


# ---- (a) Pillow's bilinear resize ----------------------------------------

def ours_pil(lib, src, out_h, out_w):
    h, w = src.shape[:2]
    p = ResizePil(h, w, out_h, out_w)
    scratch = C.create_string_buffer(max(lib.resize_pil_scratch_bytes(C.byref(p)), 1))
    dst = np.zeros((out_h, out_w, 3), np.uint8)
    src = np.ascontiguousarray(src)
    lib.resize_pil_bilinear(C.byref(p), src.ctypes.data, dst.ctypes.data, scratch)
    return dst


def pillow(src, out_h, out_w):
    return np.asarray(Image.fromarray(src).resize((out_w, out_h), Image.BILINEAR))


PIL_PAIRS = [
    # (in_h, in_w, out_h, out_w)
    (480, 640, 800, 1066),   # torchvision-like upscale
    (480, 640, 800, 1067),
    (1000, 1500, 800, 1200),  # mild downscale
    (2000, 3000, 800, 1200),  # 2.5x down
    (997, 1013, 13, 17),     # large factors, odd sizes
    (1200, 900, 40, 31),
    (100, 99, 99, 100),      # factors near 1, both directions
    (333, 517, 332, 518),
    (64, 64, 64, 200),       # one axis unchanged (no vertical pass)
    (64, 64, 200, 64),       # (no horizontal pass)
    (50, 70, 50, 70),        # identity: a copy
    (1, 1, 7, 5),            # 1-pixel sides
    (1, 300, 1, 17),
    (300, 1, 23, 1),
    (5, 7, 1, 1),
    (1, 9, 4, 2),
    (2, 3, 9, 11),
    (17, 19, 3, 2),
    (801, 1203, 800, 1201),
    (640, 427, 1199, 800),
    (255, 256, 511, 129),
    (31, 1000, 5, 999),
]


@pytest.mark.parametrize("in_h,in_w,out_h,out_w", PIL_PAIRS)
def test_pil_resize_bit_exact(lib, in_h, in_w, out_h, out_w):
    seed = in_h * 100003 + in_w * 101 + out_h * 7 + out_w
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, (in_h, in_w, 3), dtype=np.uint8)
    ours, ref = ours_pil(lib, src, out_h, out_w), pillow(src, out_h, out_w)
    diff = int(np.count_nonzero(ours != ref))
    print(f"seed {seed}: {in_h}x{in_w} -> {out_h}x{out_w}: {diff} of {ref.size} bytes differ")
    assert diff == 0


def test_pil_resize_random_pairs(lib):
    """Random sizes 1..160 each way, and the extremes of uint8 (0 and 255
    images: the fixed-point sums must round back to exactly 0 and 255)."""
    seed = 5
    rng = np.random.default_rng(seed)
    for i in range(150):
        in_h, in_w, out_h, out_w = (int(v) for v in rng.integers(1, 161, 4))
        kind = i % 5
        if kind == 3:
            src = np.full((in_h, in_w, 3), 255, np.uint8)
        elif kind == 4:
            src = np.zeros((in_h, in_w, 3), np.uint8)
        else:
            src = rng.integers(0, 256, (in_h, in_w, 3), dtype=np.uint8)
        ours, ref = ours_pil(lib, src, out_h, out_w), pillow(src, out_h, out_w)
        assert np.array_equal(ours, ref), f"seed {seed} case {i}: {in_h}x{in_w} -> {out_h}x{out_w}"


def test_pil_resize_smooth_photo_like(lib):
    """A smooth gradient with noise, downscaled by a non-integer factor: a
    systematic rounding error would show on smooth data as a bias."""
    y, x = np.mgrid[0:701, 0:933]
    rng = np.random.default_rng(6)
    src = np.dstack([(x * 255) // 932, (y * 255) // 700, ((x + y) * 3) % 256]).astype(np.int32)
    src = np.clip(src + rng.integers(-3, 4, src.shape), 0, 255).astype(np.uint8)
    for out_h, out_w in [(600, 800), (800, 1066), (100, 133)]:
        assert np.array_equal(ours_pil(lib, src, out_h, out_w), pillow(src, out_h, out_w)), (out_h, out_w)


# ---- (b) detectron2's geometry ---------------------------------------------

def d2_output_shape(oldh, oldw, short_edge_length, max_size):
    """detectron2 ResizeShortestEdge.get_output_shape, in Python floats."""
    h, w = oldh, oldw
    size = short_edge_length * 1.0
    scale = size / min(h, w)
    if h < w:
        newh, neww = size, scale * w
    else:
        newh, neww = scale * h, size
    if max(newh, neww) > max_size:
        scale = max_size * 1.0 / max(newh, neww)
        newh = newh * scale
        neww = neww * scale
    neww = int(neww + 0.5)
    newh = int(newh + 0.5)
    return newh, neww


def detectron_round_shape(h, w, target, max_size):
    """Detectron blob.py get_target_scale + cv2's dsize (round half even)."""
    s = float(target) / float(min(h, w))
    if np.round(s * max(h, w)) > max_size:
        s = float(max_size) / float(max(h, w))
    return int(np.round(h * s)), int(np.round(w * s))


GEOMETRY_SIZE_LIMITS = [(800, 1333), (320, 512), (640, 640), (1, 65536)]


def geometry_cases():
    """Image sizes (h, w) for the resize-size rules: a coarse grid; around
    the max_size boundary, long/short ratios near 1333/800 on both sides, in
    both orientations; squares; and known examples."""
    cases = [(h, w) for h in range(1, 700, 37) for w in range(1, 2100, 53)]
    # Around the max_size boundary: long/short ratios near 1333/800 on both
    # sides, in both orientations, and squares.
    for short in (300, 480, 600, 799, 800, 801, 1000, 1999):
        lim = short * 1333 / 800
        for lon in range(int(lim) - 3, int(lim) + 4):
            cases += [(short, lon), (lon, short)]
    cases += [(s, s) for s in (1, 2, 799, 800, 801, 1333, 1334, 5000)]
    cases += [(320, 421), (305, 610), (480, 640), (427, 640), (1, 19999), (19999, 2)]
    return cases


def test_detectron2_geometry(lib):
    cases = geometry_cases()
    checked = differ = 0
    for min_size, max_size in GEOMETRY_SIZE_LIMITS:
        cfg = input_config(D2_MEAN, D2_STD, min_size, max_size, "detectron2", "pil_bilinear", bgr=True,
                           pixel_scale=1.0)
        for h, w in cases:
            want = d2_output_shape(h, w, min_size, max_size)
            st, g, msg = geometry(lib, cfg, h, w)
            if min(want) < 1:
                assert st != MR_OK, (h, w, min_size, max_size)
                assert "elongated" in msg, msg
                continue
            assert st == MR_OK, msg
            assert (g.resized_h, g.resized_w) == want, (h, w, min_size, max_size)
            assert g.padded_h % 32 == 0 and 0 <= g.padded_h - g.resized_h < 32
            assert g.scale_h == np.float32(np.float32(want[0]) / np.float32(h))
            assert g.factor_w == want[1] / w
            checked += 1
            differ += want != detectron_round_shape(h, w, min_size, max_size)
    print(f"{checked} sizes equal detectron2's; {differ} of them differ from Detectron's rounding")
    assert differ > 0  # the two rules are really different keys


def test_detectron2_geometry_examples(lib):
    cfg = input_config(D2_MEAN, D2_STD, 800, 1333, "detectron2")
    rnd = input_config(D2_MEAN, D2_STD, 800, 1333, "round")
    for (h, w), d2, dround in [((320, 421), (800, 1053), (800, 1052)), ((305, 610), (667, 1333), (666, 1333)),
                               ((480, 640), (800, 1067), (800, 1067))]:
        assert d2_output_shape(h, w, 800, 1333) == d2
        assert detectron_round_shape(h, w, 800, 1333) == dround
        _, g, _ = geometry(lib, cfg, h, w)
        assert (g.resized_h, g.resized_w) == d2
        _, g, _ = geometry(lib, rnd, h, w)
        assert (g.resized_h, g.resized_w) == dround


def mrcnn_benchmark_size(h, w, min_size, max_size):
    """maskrcnn-benchmark Resize.get_size as published (Python 3 semantics:
    round() half to even, int() truncating), returning (h, w)."""
    size = min_size
    min_original_size = float(min((w, h)))
    max_original_size = float(max((w, h)))
    if max_original_size / min_original_size * size > max_size:
        size = int(round(max_size * min_original_size / max_original_size))
    if (w <= h and w == size) or (h <= w and h == size):
        return (h, w)
    if w < h:
        ow = size
        oh = int(size * h / w)
    else:
        oh = size
        ow = int(size * w / h)
    return (oh, ow)


def test_maskrcnn_benchmark_geometry(lib):
    cases = geometry_cases()
    checked = differ = 0
    for min_size, max_size in GEOMETRY_SIZE_LIMITS:
        cfg = input_config(D2_MEAN, D2_STD, min_size, max_size, "maskrcnn_benchmark", "pil_bilinear", bgr=True,
                           pixel_scale=1.0)
        for h, w in cases:
            want = mrcnn_benchmark_size(h, w, min_size, max_size)
            st, g, msg = geometry(lib, cfg, h, w)
            if min(want) < 1:
                assert st != MR_OK, (h, w, min_size, max_size)
                continue
            assert st == MR_OK, msg
            assert (g.resized_h, g.resized_w) == want, (h, w, min_size, max_size)
            assert g.scale_w == np.float32(np.float32(want[1]) / np.float32(w))
            checked += 1
            differ += want != d2_output_shape(h, w, min_size, max_size)
    print(f"{checked} sizes equal maskrcnn-benchmark's; {differ} of them differ from detectron2's")
    assert differ > 0


# ---- (c) OpenCV's INTER_LINEAR ---------------------------------------------

def cv2_linear_ref(img, out_h, out_w, fx, fy):
    """cv2.resize(img, (out_w, out_h)-sized output, fx, fy, INTER_LINEAR) for a
    float32 [h, w, c] image, from resize.cpp's semantics: scale = 1/f in
    double; src = float32((d + 0.5) * scale - 0.5); i = floor(src), weight
    src - i in float32. Columns: i < 0 -> (0, weight 0); i >= w-1 ->
    (w-1, weight 0). Rows: indices i and i+1 each clipped to [0, h-1],
    weights kept. Rows combined after columns, all in float32. Equal sizes
    copy."""
    h, w = img.shape[:2]
    if (h, w) == (out_h, out_w):
        return img.copy()

    def pos(n_out, f):
        s = np.float32((np.arange(n_out, dtype=np.float64) + 0.5) * (1.0 / f) - 0.5)
        i = np.floor(s).astype(np.int64)
        return i, (s - i.astype(np.float32)).astype(np.float32)

    xi, xw = pos(out_w, fx)
    left = xi < 0
    xi[left], xw[left] = 0, 0
    right = xi >= w - 1
    xi[right], xw[right] = w - 1, 0
    x1 = np.minimum(xi + 1, w - 1)
    yi, yw = pos(out_h, fy)
    y0, y1 = np.clip(yi, 0, h - 1), np.clip(yi + 1, 0, h - 1)
    one = np.float32(1)
    a0, a1 = (one - xw)[None, :, None], xw[None, :, None]
    b0, b1 = (one - yw)[:, None, None], yw[:, None, None]
    rows0, rows1 = img[y0], img[y1]
    t0 = rows0[:, xi] * a0 + rows0[:, x1] * a1
    t1 = rows1[:, xi] * a0 + rows1[:, x1] * a1
    return (t0 * b0 + t1 * b1).astype(np.float32)


def ours_cv2(lib, src, lut_values, src_ch, out_h, out_w, fx, fy):
    h, w = src.shape[:2]
    p = ResizeCv2(h, w, out_h, out_w, fx, fy)
    lut = PixelLut()
    for c in range(3):
        lut.src_ch[c] = src_ch[c]
        for v in range(256):
            lut.v[c][v] = float(lut_values[c][v])
    scratch = C.create_string_buffer(max(lib.resize_cv2_scratch_bytes(C.byref(p)), 1))
    dst = np.full((out_h, out_w, 3), np.nan, np.float32)
    src = np.ascontiguousarray(src)
    lib.resize_cv2_linear(C.byref(p), src.ctypes.data, C.byref(lut), dst.ctypes.data, out_w * 3, scratch)
    return dst


CV2_CASES = [
    # (in_h, in_w, factor): the output size is round(in * f), as cv2 computes it
    (480, 640, 800 / 480),
    (427, 640, 800 / 427),
    (1000, 1500, 0.8),
    (2000, 3000, 0.4),
    (1600, 2400, 0.5),
    (333, 517, 1.0005),   # sizes stay, s != 1: cv2 copies
    (300, 1, 2.7),
    (1, 1, 3.0),
    (7, 9, 0.3),
    (613, 419, 1333 / 613),
]


@pytest.mark.parametrize("in_h,in_w,f", CV2_CASES)
def test_cv2_linear_against_port(lib, in_h, in_w, f):
    seed = in_h * 1009 + in_w
    rng = np.random.default_rng(seed)
    src = rng.integers(0, 256, (in_h, in_w, 3), dtype=np.uint8)
    lut = np.stack([np.arange(256, dtype=np.float32) - np.float32(m) for m in D_MEAN])
    out_h, out_w = int(np.round(in_h * f)), int(np.round(in_w * f))
    src_ch = [2, 1, 0]
    ours = ours_cv2(lib, src, lut, src_ch, out_h, out_w, f, f)
    img = np.stack([lut[c][src[:, :, src_ch[c]]] for c in range(3)], axis=2)
    ref = cv2_linear_ref(img, out_h, out_w, f, f)
    err = float(np.abs(ours - ref).max())
    print(f"seed {seed}: {in_h}x{in_w} x{f:.6g} -> {out_h}x{out_w}: max abs err {err:g}")
    assert not np.isnan(ours).any()
    assert err <= 1e-4


# ---- (d) end to end ----------------------------------------------------------

def detectron2_pipeline(rgb, min_size, max_size):
    """DefaultPredictor on a BGR image: ResizeShortestEdge (Pillow bilinear on
    uint8), float32, (x - mean) / std, ImageList padding to 32 with zeros."""
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    h, w = d2_output_shape(*bgr.shape[:2], min_size, max_size)
    resized = np.asarray(Image.fromarray(bgr).resize((w, h), Image.BILINEAR))
    x = (resized.astype(np.float32) - np.array(D2_MEAN, np.float32)) / np.array(D2_STD, np.float32)
    ph, pw = -(-h // 32) * 32, -(-w // 32) * 32
    out = np.zeros((ph, pw, 3), np.float32)
    out[:h, :w] = x
    return (h, w), out


@pytest.mark.parametrize("h,w,min_size,max_size", [(480, 640, 800, 1333), (1000, 1500, 800, 1333),
                                                   (320, 421, 800, 1333), (900, 300, 320, 512),
                                                   (2000, 2999, 800, 1333), (37, 53, 64, 100)])
def test_preprocess_pil_matches_detectron2(lib, h, w, min_size, max_size):
    seed = h * 31 + w
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    cfg = input_config(D2_MEAN, D2_STD, min_size, max_size, "detectron2", "pil_bilinear", bgr=True,
                       pixel_scale=1.0)
    g, ours = preprocess(lib, cfg, rgb)
    size, ref = detectron2_pipeline(rgb, min_size, max_size)
    assert (g.resized_h, g.resized_w) == size
    assert ours.shape[1:] == ref.shape
    diff = int(np.count_nonzero(ours[0] != ref))
    print(f"seed {seed}: {h}x{w} -> {size}, padded {ref.shape[:2]}: {diff} values differ")
    assert diff == 0


def detectron_pipeline(rgb, target, max_size):
    """prep_im_for_blob on a BGR image: float32 - means (float64, in place),
    cv2.resize(fx=fy=s) (the port above), then zero padding to 32."""
    im = rgb[:, :, ::-1].astype(np.float32)
    im -= np.array([[D_MEAN]])  # float64 means, result kept float32, as Detectron
    h, w = im.shape[:2]
    s = float(target) / float(min(h, w))
    if np.round(s * max(h, w)) > max_size:
        s = float(max_size) / float(max(h, w))
    oh, ow = int(np.round(h * s)), int(np.round(w * s))
    resized = cv2_linear_ref(im, oh, ow, s, s)
    ph, pw = -(-oh // 32) * 32, -(-ow // 32) * 32
    out = np.zeros((ph, pw, 3), np.float32)
    out[:oh, :ow] = resized
    return (oh, ow), out


@pytest.mark.parametrize("h,w", [(480, 640), (427, 640), (1000, 1500), (612, 612)])
def test_preprocess_cv2_matches_detectron(lib, h, w):
    seed = h * 17 + w
    rng = np.random.default_rng(seed)
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    cfg = input_config(D_MEAN, [1.0, 1.0, 1.0], 800, 1333, "round", "cv2_linear", bgr=True, pixel_scale=1.0)
    g, ours = preprocess(lib, cfg, rgb)
    size, ref = detectron_pipeline(rgb, 800, 1333)
    assert (g.resized_h, g.resized_w) == size
    assert ours.shape[1:] == ref.shape
    err = float(np.abs(ours[0] - ref).max())
    print(f"seed {seed}: {h}x{w} -> {size}: max abs err {err:g}")
    assert err <= 1e-4
    assert (ours[0, size[0]:] == 0).all() and (ours[0, :, size[1]:] == 0).all()
