"""engine/io/image.c against Pillow and torchvision, through ctypes.

(a) Decoding: PNG variants (written by Pillow, or by the small PNG writer
    below for what Pillow cannot write: 16-bit RGB/RGBA and Adam7) must give
    exactly the pixels of PIL.Image.open(p).convert('RGB'). One deliberate
    exception, documented in engine/io/image.h: 16-bit greyscale keeps the high
    byte, where Pillow (mode 'I') clamps every value to 255.
    JPEGs written by Pillow decode to Pillow's pixels (same libjpeg).
(b) Preprocessing: image_geometry + image_preprocess must equal
    torchvision's GeneralizedRCNNTransform(min_size, max_size, mean, std)
    on to_tensor(image): same image_sizes and padded shape, max abs error
    <= 1e-5 (we get 0: bit for bit).

The library: $DETECT_LIB, else build/libdetect_internal.so (image_ctypes.py holds
the struct mirrors). Run with /usr/bin/python3 -m pytest."""

import ctypes as C
import os
import struct
import subprocess
import zlib

import numpy as np
import pytest
import torch
from PIL import Image
from torchvision.models.detection.transform import GeneralizedRCNNTransform
from torchvision.transforms.functional import to_tensor

from image_ctypes import MR_ERR_FORMAT, MR_OK, Error, Image_, input_config, load_library, preprocess

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MEAN = [0.485, 0.456, 0.406]
STD = [0.229, 0.224, 0.225]


@pytest.fixture(scope="module")
def lib():
    return load_library()


def load(lib, path, max_side=20000):
    img, err = Image_(), Error()
    st = lib.image_load(str(path).encode(), max_side, C.byref(img), C.byref(err))
    if st != MR_OK:
        return st, err.msg.decode()
    a = np.ctypeslib.as_array(img.pixels, shape=(img.h, img.w, 3)).copy()
    lib.image_free(C.byref(img))
    return st, a


# ---- (a) decoding ---------------------------------------------------------

def png_bytes(samples, color_type, depth, interlace=False, palette=None, trns=None):
    """A minimal PNG writer: samples is [H, W, C] (or [H, W]) of uint8/uint16
    values at `depth` 8 or 16, filter 0 everywhere, Adam7 when asked."""
    a = samples if samples.ndim == 3 else samples[:, :, None]
    h, w = a.shape[:2]

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    def scanlines(sub):
        dt = ">u2" if depth == 16 else "u1"
        return b"".join(b"\x00" + row.astype(dt).tobytes() for row in sub)

    if interlace:
        passes = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
        raw = b"".join(scanlines(a[y0::dy, x0::dx]) for x0, y0, dx, dy in passes
                       if a[y0::dy, x0::dx].size)
    else:
        raw = scanlines(a)
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color_type, 0, 0, int(interlace)))
    if palette is not None:
        out += chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).ravel()))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    return out + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def pillow_variants(rng, h=37, w=53):
    rgb = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    alpha = rng.integers(0, 256, (h, w), dtype=np.uint8)
    grey = rng.integers(0, 256, (h, w), dtype=np.uint8)
    idx = rng.integers(0, 256, (h, w), dtype=np.uint8)
    pal = rng.integers(0, 256, 768, dtype=np.uint8).tolist()
    p = Image.fromarray(idx, "P")
    p.putpalette(pal)
    p16 = Image.fromarray(idx % 16, "P")
    p16.putpalette(pal[:48])
    return {
        "rgb8": (Image.fromarray(rgb), {}),
        "rgba8": (Image.fromarray(np.dstack([rgb, alpha]), "RGBA"), {}),
        "grey8": (Image.fromarray(grey), {}),
        "grey+alpha8": (Image.fromarray(np.dstack([grey, alpha]), "LA"), {}),
        "grey1": (Image.fromarray(grey > 127), {}),
        "grey8+trns": (Image.fromarray(grey), {"transparency": int(grey[0, 0])}),
        "rgb8+trns": (Image.fromarray(rgb), {"transparency": tuple(int(v) for v in rgb[0, 0])}),
        "palette8": (p, {}),
        "palette8+trns": (p, {"transparency": bytes(range(0, 256, 2)) * 2}),
        "palette4+trns": (p16, {"bits": 4, "transparency": 3}),
    }


@pytest.mark.filterwarnings("ignore:Palette images with Transparency")
def test_png_pillow_variants(lib, tmp_path):
    rng = np.random.default_rng(1)
    for name, (im, opts) in pillow_variants(rng).items():
        path = tmp_path / f"{name}.png"
        im.save(path, **opts)
        want = np.asarray(Image.open(path).convert("RGB"))
        st, got = load(lib, path)
        assert st == MR_OK, f"{name}: {got}"
        np.testing.assert_array_equal(got, want, err_msg=name)


@pytest.mark.filterwarnings("ignore:Palette images with Transparency")
def test_png_handmade_variants(lib, tmp_path):
    """16-bit colour and Adam7, which Pillow can read but not write."""
    rng = np.random.default_rng(2)
    h, w = 29, 43
    rgb16 = rng.integers(0, 65536, (h, w, 3), dtype=np.uint16)
    rgba16 = rng.integers(0, 65536, (h, w, 4), dtype=np.uint16)
    la16 = rng.integers(0, 65536, (h, w, 2), dtype=np.uint16)
    rgb8 = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    idx = rng.integers(0, 200, (h, w), dtype=np.uint8)
    pal = rng.integers(0, 256, (200, 3), dtype=np.uint8)
    cases = {
        "rgb16": png_bytes(rgb16, 2, 16),
        "rgb16-adam7": png_bytes(rgb16, 2, 16, interlace=True),
        "rgba16-adam7": png_bytes(rgba16, 6, 16, interlace=True),
        "grey+alpha16": png_bytes(la16, 4, 16),
        "rgb8-adam7": png_bytes(rgb8, 2, 8, interlace=True),
        "palette8-adam7+trns": png_bytes(idx, 3, 8, interlace=True, palette=pal, trns=bytes(range(100))),
        "tiny-adam7": png_bytes(rgb8[:3, :2], 2, 8, interlace=True),  # passes with no pixels
    }
    for name, data in cases.items():
        path = tmp_path / f"{name}.png"
        path.write_bytes(data)
        want = np.asarray(Image.open(path).convert("RGB"))
        st, got = load(lib, path)
        assert st == MR_OK, f"{name}: {got}"
        np.testing.assert_array_equal(got, want, err_msg=name)
    # Pillow keeps the high byte of 16-bit colour, as we do
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "rgb16.png").convert("RGB")), rgb16 >> 8)


def test_png_grey16_high_byte(lib, tmp_path):
    """The documented divergence: 16-bit grey keeps the high byte; Pillow
    opens it as mode 'I' and convert('RGB') clamps to 255."""
    rng = np.random.default_rng(3)
    g = rng.integers(0, 65536, (31, 17), dtype=np.uint16)
    for name, data in {"pillow": None, "adam7": png_bytes(g, 0, 16, interlace=True)}.items():
        path = tmp_path / f"grey16-{name}.png"
        if data is None:
            Image.fromarray(g, "I;16").save(path)
        else:
            path.write_bytes(data)
        st, got = load(lib, path)
        assert st == MR_OK, got
        np.testing.assert_array_equal(got, np.repeat((g >> 8).astype(np.uint8)[:, :, None], 3, axis=2))
        pil = np.asarray(Image.open(path).convert("RGB"))[:, :, 0]
        np.testing.assert_array_equal(pil, np.minimum(g, 255))  # Pillow's clamp, not ours


def test_jpeg_matches_pillow(lib, tmp_path):
    rng = np.random.default_rng(4)
    y, x = np.mgrid[0:61, 0:83]
    smooth = np.dstack([(x * 3) % 256, (y * 4) % 256, (x + y) % 256]).astype(np.uint8)
    noisy = np.clip(smooth + rng.integers(-20, 21, smooth.shape), 0, 255).astype(np.uint8)
    cases = {
        "420": (Image.fromarray(noisy), dict(quality=90)),
        "444": (Image.fromarray(noisy), dict(quality=95, subsampling=0)),
        "progressive": (Image.fromarray(smooth), dict(quality=75, progressive=True)),
        "grey": (Image.fromarray(noisy[:, :, 0]), dict(quality=85)),
    }
    for name, (im, opts) in cases.items():
        path = tmp_path / f"{name}.jpg"
        im.save(path, **opts)
        want = np.asarray(Image.open(path).convert("RGB"))
        st, got = load(lib, path)
        assert st == MR_OK, f"{name}: {got}"
        np.testing.assert_array_equal(got, want, err_msg=name)


def test_bad_files_name_the_file(lib, tmp_path):
    good = tmp_path / "good.png"
    Image.fromarray(np.zeros((20, 30, 3), np.uint8)).save(good)
    data = good.read_bytes()
    cases = {"empty.png": b"", "text.png": b"not an image at all", "cut.png": data[: len(data) // 2],
             "cut.jpg": b"\xff\xd8\xff\xe0" + b"\x00" * 10}
    for name, content in cases.items():
        p = tmp_path / name
        p.write_bytes(content)
        st, msg = load(lib, p)
        assert st == MR_ERR_FORMAT, (name, msg)
        assert str(p) in msg, msg


# ---- (b) preprocessing ----------------------------------------------------

def engine_preprocess(lib, pixels, min_size, max_size):
    return preprocess(lib, input_config(MEAN, STD, min_size, max_size), pixels)


def torchvision_preprocess(pixels, min_size, max_size):
    transform = GeneralizedRCNNTransform(min_size, max_size, MEAN, STD).eval()
    with torch.no_grad():
        images, _ = transform([to_tensor(pixels)])
    return images.image_sizes[0], images.tensors[0].permute(1, 2, 0).numpy()


SIZES = [(480, 640), (1000, 1500), (800, 1216), (300, 451)]
SCALES = [(800, 1333), (320, 512)]


@pytest.mark.parametrize("min_size,max_size", SCALES)
@pytest.mark.parametrize("h,w", SIZES)
def test_preprocess_matches_torchvision(lib, h, w, min_size, max_size):
    rng = np.random.default_rng(h * 7 + w + min_size)
    pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
    g, ours = engine_preprocess(lib, pixels, min_size, max_size)
    size, ref = torchvision_preprocess(pixels, min_size, max_size)
    assert (g.in_h, g.in_w) == (h, w)
    assert (g.resized_h, g.resized_w) == tuple(size)
    assert ours.shape[1:] == ref.shape
    assert not np.isnan(ours).any()
    err = float(np.abs(ours[0] - ref).max())
    print(f"{h}x{w} min {min_size} max {max_size} -> {size} padded {ref.shape[:2]}: max abs err {err:g}")
    assert err <= 1e-5


def test_preprocess_decoded_png_matches_torchvision(lib, tmp_path):
    """End to end from a file, on a smooth image (the random ones above are
    the harsher test of the interpolation)."""
    y, x = np.mgrid[0:333, 0:517]
    pixels = np.dstack([(x * 255) // 516, (y * 255) // 332, ((x + y) * 3) % 256]).astype(np.uint8)
    path = tmp_path / "smooth.png"
    Image.fromarray(pixels).save(path)
    st, decoded = load(lib, path)
    assert st == MR_OK, decoded
    g, ours = engine_preprocess(lib, decoded, 800, 1333)
    size, ref = torchvision_preprocess(np.array(Image.open(path).convert("RGB")), 800, 1333)
    assert (g.resized_h, g.resized_w) == tuple(size)
    assert ours.shape[1:] == ref.shape
    assert float(np.abs(ours[0] - ref).max()) <= 1e-5
