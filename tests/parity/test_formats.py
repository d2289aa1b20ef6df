"""The formats added for real folders (engine/io/image_*.c) against Pillow, the reference: every
file here is written by Pillow (or, where Pillow cannot write the layout, by hand from the format's
specification), and image_load must give Pillow 9.4's Image.open(p).convert("RGB") pixels bit for
bit: WebP (lossless and lossy: the same libwebp decodes both), TIFF (grey, RGB, RGBA, premultiplied
RGBA, 16-bit RGB, palette, bilevel, CMYK; raw, LZW, deflate, PackBits, JPEG; the first of several
pages), GIF (palette, interlaced, transparent, grey, animated, a frame offset on a larger screen),
BMP (1/4/8-bit palette, 16-bit 5-5-5 and 5-6-5, 24 and 32-bit, top-down) and CMYK JPEG. 16-bit
grey is the one deliberate difference (image.h): our pixel is Pillow's I;16 value's high byte.
Then detections: each format's file through detect equals a PNG of Pillow's RGB of the same file,
run in the same command, entry for entry. Run with /usr/bin/python3 -m pytest."""

import ctypes as C
import io
import json
import os
import struct
import subprocess
import sys
import warnings

import numpy as np
import pytest
from PIL import Image

from conftest import BUILD, REPO
from image_ctypes import MR_OK, Error, Image_, load_library

sys.path.insert(0, os.path.join(REPO, "tests", "fuzz"))
from make_corpus import _tiff, gif_offset_frame  # noqa: E402  (the hand-made layouts, shared with the seeds)

SCENE = os.path.join(REPO, "examples", "shapes", "scene_3.png")


@pytest.fixture(scope="module")
def lib():
    return load_library()


def ours(lib, path):
    img, err = Image_(), Error()
    st = lib.image_load(str(path).encode(), 20000, C.byref(img), C.byref(err))
    assert st == MR_OK, err.msg.decode()
    try:
        return np.ctypeslib.as_array(img.pixels, shape=(img.h, img.w, 3)).copy(), img.frames
    finally:
        lib.image_free(C.byref(img))


def pillow_rgb(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return np.asarray(Image.open(path).convert("RGB"))


def bmp_by_hand(bits, compression, masks, rows, w, top_down=False):
    """A BMP with a 40-byte header (and BITFIELDS masks after it), rows given bottom-up unless top_down."""
    hdr = 40 + 4 * len(masks)
    pixels = b"".join(r.ljust((len(r) + 3) // 4 * 4, b"\0") for r in rows)
    info = struct.pack("<IiiHHIIiiII", 40, w, -len(rows) if top_down else len(rows), 1, bits, compression,
                       len(pixels), 2835, 2835, 0, 0) + b"".join(struct.pack("<I", m) for m in masks)
    return b"BM" + struct.pack("<IHHI", 14 + hdr + len(pixels), 0, 0, 14 + hdr) + info + pixels


def make_files(d):
    """{name: path} of every case, written into d."""
    rng = np.random.default_rng(47)
    rgb = Image.fromarray(rng.integers(0, 256, (37, 53, 3), np.uint8))
    rgba = Image.fromarray(rng.integers(0, 256, (37, 53, 4), np.uint8))
    grey = Image.fromarray(rng.integers(0, 256, (37, 53), np.uint8))
    files = {}

    def save(name, im, **kw):
        files[name] = d / name
        im.save(files[name], **kw)

    def raw(name, data):
        files[name] = d / name
        files[name].write_bytes(data)

    save("lossless.webp", rgb, lossless=True)
    save("lossy.webp", rgb, quality=80)
    save("alpha_lossless.webp", rgba, lossless=True)
    save("alpha_lossy.webp", rgba, quality=70)
    save("animated.webp", rgb, save_all=True, append_images=[rgb.rotate(180)], lossless=True)
    save("rgb.tif", rgb)
    save("rgba.tif", rgba)
    save("grey.tif", grey)
    save("lzw.tif", rgb, compression="tiff_lzw")
    save("deflate.tif", rgb, compression="tiff_adobe_deflate")
    save("packbits.tif", rgb, compression="packbits")
    save("jpeg.tif", rgb, compression="jpeg")
    save("palette.tif", rgb.convert("P", palette=Image.ADAPTIVE))
    save("bilevel.tif", grey.convert("1"))
    save("bilevel_g4.tif", grey.convert("1"), compression="group4")
    save("cmyk.tif", rgb.convert("CMYK"))
    save("pages.tif", rgb, save_all=True, append_images=[rgb.rotate(90), rgb.rotate(180)])
    h, w = 5, 7
    base = [(256, 3, [w]), (257, 3, [h]), (259, 3, [1]), (278, 3, [h]), (273, 4, [0])]
    px16 = rng.integers(0, 65536, h * w * 3).astype("<u2")
    rgb16 = base + [(258, 3, [16]), (262, 3, [2]), (277, 3, [3]), (279, 4, [px16.nbytes])]
    raw("rgb16_le.tif", _tiff(rgb16, px16.tobytes()))
    raw("rgb16_be.tif", _tiff(rgb16, px16.astype(">u2").tobytes(), big_endian=True))
    px = rng.integers(0, 256, h * w * 4).astype(np.uint8)
    raw("rgba_premultiplied.tif", _tiff(base + [(258, 3, [8]), (262, 3, [2]), (277, 3, [4]), (279, 4, [px.nbytes]),
                                                (338, 3, [1])], px.tobytes()))
    pal = rgb.convert("P", palette=Image.ADAPTIVE, colors=64)
    save("palette.gif", pal)
    save("interlaced.gif", pal, interlace=True)
    save("transparent.gif", rgb.convert("P", palette=Image.ADAPTIVE, colors=8), transparency=3)
    save("grey.gif", grey)
    save("animated.gif", pal, save_all=True, append_images=[pal.rotate(90)], duration=20)
    b = io.BytesIO()
    pal.crop((0, 0, 20, 15)).save(b, "GIF")
    raw("offset_frame.gif", gif_offset_frame(b.getvalue(), 31, 22, 6, 4))
    save("rgb24.bmp", rgb)
    save("grey8.bmp", grey)
    save("palette8.bmp", rgb.convert("P", palette=Image.ADAPTIVE))
    save("palette4.bmp", rgb.convert("P", palette=Image.ADAPTIVE, colors=16))
    save("bilevel1.bmp", grey.convert("1"))
    save("rgba32.bmp", rgba)
    rows16 = [rng.integers(0, 65536, w).astype("<u2").tobytes() for _ in range(h)]
    raw("rgb555.bmp", bmp_by_hand(16, 0, [], rows16, w))
    raw("rgb565.bmp", bmp_by_hand(16, 3, [0xF800, 0x7E0, 0x1F], rows16, w))
    raw("bgrx32_top_down.bmp", bmp_by_hand(32, 0, [], [rng.integers(0, 256, 4 * w).astype(np.uint8).tobytes()
                                                       for _ in range(h)], w, top_down=True))
    save("cmyk.jpg", rgb.convert("CMYK"), quality=90)
    save("cmyk_photo.jpg", Image.open(SCENE).convert("CMYK"), quality=95)
    return files


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return make_files(tmp_path_factory.mktemp("formats"))


CASES = ["lossless.webp", "lossy.webp", "alpha_lossless.webp", "alpha_lossy.webp", "animated.webp", "rgb.tif",
         "rgba.tif", "grey.tif", "lzw.tif", "deflate.tif", "packbits.tif", "jpeg.tif", "palette.tif", "bilevel.tif",
         "bilevel_g4.tif", "cmyk.tif", "pages.tif", "rgb16_le.tif", "rgb16_be.tif", "rgba_premultiplied.tif",
         "palette.gif", "interlaced.gif", "transparent.gif", "grey.gif", "animated.gif", "offset_frame.gif",
         "rgb24.bmp", "grey8.bmp", "palette8.bmp", "palette4.bmp", "bilevel1.bmp", "rgba32.bmp", "rgb555.bmp",
         "rgb565.bmp", "bgrx32_top_down.bmp", "cmyk.jpg", "cmyk_photo.jpg"]


@pytest.mark.parametrize("name", CASES)
def test_pixels_equal_pillow(lib, files, name):
    got, _ = ours(lib, files[name])
    want = pillow_rgb(files[name])
    assert got.shape == want.shape
    diff = got != want
    assert not diff.any(), f"{name}: {diff.any(axis=2).sum()} pixels differ from Pillow's"


def test_pages_and_frames_counted(lib, files):
    assert ours(lib, files["pages.tif"])[1] == 3
    assert ours(lib, files["animated.webp"])[1] == 2
    assert ours(lib, files["rgb.tif"])[1] == 0 and ours(lib, files["lossless.webp"])[1] == 0


def test_16bit_grey_tiff_keeps_the_high_byte(lib, tmp_path):
    """Pillow opens it as I;16 (convert("RGB") would clamp to 255); we keep value >> 8, as for PNG."""
    a = np.random.default_rng(16).integers(0, 65536, (19, 23)).astype(np.uint16)
    p = tmp_path / "grey16.tif"
    Image.fromarray(a, "I;16").save(p)
    with Image.open(p) as im:
        assert im.mode == "I;16"
        values = np.asarray(im).astype(np.uint16)
    got, _ = ours(lib, p)
    assert np.array_equal(got, np.repeat((values >> 8).astype(np.uint8)[..., None], 3, axis=2))


def test_detections_equal_the_pngs(files, tmp_path):
    """Each format's scene runs as the PNG of Pillow's RGB of that file: same boxes, scores, masks."""
    scene = Image.open(SCENE).convert("RGB")
    d = tmp_path / "scenes"
    d.mkdir()
    writers = {"lossless.webp": dict(lossless=True), "lossy.webp": dict(quality=80), "rgb.tif": {},
               "lzw.tif": dict(compression="tiff_lzw"), "scene.gif": {}, "scene.bmp": {}}
    for name, kw in writers.items():
        scene.save(d / name, **kw)
    scene.convert("CMYK").save(d / "cmyk.jpg", quality=95)
    names = sorted(os.listdir(d))
    for name in names:
        Image.fromarray(pillow_rgb(d / name)).save(d / (name + ".png"))
    out = tmp_path / "all.json"
    r = subprocess.run([os.path.join(BUILD, "detect"), "--config",
                        os.path.join(REPO, "configs", "mask_rcnn_R-101-FPN_shapes.json"), "--weights",
                        os.path.join(REPO, "models", "shapes_r101_narrow.safetensors"), "-q", "--json", str(out),
                        str(d)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    entries = {os.path.basename(e["file"]): e for e in json.loads(out.read_text())["images"]}
    assert len(entries) == 2 * len(names)
    for name in names:
        assert entries[name]["detections"], f"{name}: nothing found"
        assert entries[name]["detections"] == entries[name + ".png"]["detections"], name
