#!/usr/bin/python3
"""Writes the fuzzers' seed corpora into tests/fuzz/corpus/<target>/.

    /usr/bin/python3 tests/fuzz/make_corpus.py

Small valid inputs, one per feature a parser has, so the fuzzers start from
every branch of the happy path: configs (the shipped ones and partial
overlays), safetensors files of each dtype with batchnorm and affine
tensors, PNGs of every colour type, bit depth and interlace (written here
with zlib: Pillow cannot write interlaced or 16-bit RGB PNGs), JPEGs from
Pillow (baseline, progressive, grey, subsamplings, EXIF orientations,
CMYK), RLE strings, and torch.save files in the zip and the legacy format
plus Detectron/detectron2 .pkl pickles for the converter. Deterministic (fixed seeds) except the legacy torch.save files, whose
storage keys are object ids. torch is needed only for the converter's
seeds (skipped without it).
"""

import io
import json
import os
import shutil
import struct
import sys
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def out_dir(target):
    d = os.path.join(CORPUS, target)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    return d


def write(d, name, data):
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


# ---- config --------------------------------------------------------------------------

def make_config():
    d = out_dir("config")
    for name in sorted(os.listdir(os.path.join(REPO, "configs"))):
        if name.endswith(".json"):
            with open(os.path.join(REPO, "configs", name), "rb") as f:
                write(d, name, f.read())
    overlays = {
        "empty.json": {},
        "input.json": {"input": {"channel_order": "BGR", "pixel_scale": 1, "pixel_mean": [102.98, 115.95, 122.77],
                                 "pixel_std": [1, 1, 1], "resize_rounding": "round", "min_size": 64,
                                 "max_size": 96}},
        "detectron.json": {"backbone": {"depth": 50, "stride_in_1x1": True, "num_groups": 32,
                                        "width_per_group": 4},
                           "box": {"legacy_plus_one": True},
                           "anchors": {"stride_rule": "level", "sizes": [[32, 40], [64, 80], [128, 160],
                                                                        [256, 320], [512, 640]],
                                       "aspect_ratios": [0.5, 1, 2, 4]},
                           "rpn": {"post_nms_per_level": True, "nms_thresh": 0.7},
                           "box_head": {"pooler": {"aligned": True, "sampling_ratio": 0}, "keep_ties": True},
                           "mask_head": {"threshold_rule": ">=", "num_convs": 0}},
        "levels.json": {"fpn": {"min_level": 3, "max_level": 4}, "anchors": {"sizes": [[64], [128]]}},
        "classes.json": {"name": "three", "classes": {"num_classes": 3,
                                                      "class_names": ["__background__", "cat", "dog"]}},
    }
    for name, obj in overlays.items():
        write(d, name, json.dumps(obj, indent=1).encode())


# ---- safetensors ---------------------------------------------------------------------

def safetensors(tensors, metadata=None, align=8):
    """tensors: [(name, dtype tag, shape, raw bytes)] in file order."""
    header, data = {}, b""
    for name, tag, shape, raw in tensors:
        header[name] = {"dtype": tag, "shape": list(shape), "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-(8 + len(h)) % align)
    return struct.pack("<Q", len(h)) + h + data


def bf16(a):
    return (np.asarray(a, np.float32).view(np.uint32) >> 16).astype("<u2").tobytes()


def make_weights():
    d = out_dir("weights")
    rng = np.random.RandomState(0)
    c = 4
    bn = lambda p, f: [  # noqa: E731
        (f"{p}.weight", "F32", [c], rng.rand(c).astype("<f4").tobytes()),
        (f"{p}.bias", "F32", [c], rng.randn(c).astype("<f4").tobytes()),
        (f"{p}.running_mean", "F32", [c], rng.randn(c).astype("<f4").tobytes()),
        (f"{p}.running_var", "F32", [c], (rng.rand(c) + 0.5).astype("<f4").tobytes()),
    ]
    write(d, "batchnorm.safetensors", safetensors(
        [("backbone.stem.conv.weight", "F32", [c, 3, 1, 1], rng.randn(c, 3, 1, 1).astype("<f4").tobytes())]
        + bn("backbone.stem.norm", "F32"),
        {"format": "detect-maskrcnn", "format_version": "1", "depth": "101"}))
    write(d, "affine.safetensors", safetensors([
        ("backbone.res2.0.conv1.norm.scale", "F32", [c], rng.rand(c).astype("<f4").tobytes()),
        ("backbone.res2.0.conv1.norm.shift", "F32", [c], rng.randn(c).astype("<f4").tobytes()),
    ]))
    write(d, "dtypes.safetensors", safetensors([
        ("f64", "F64", [2], np.array([1.5, -2.25], "<f8").tobytes()),
        ("f32", "F32", [2, 2], np.arange(4, dtype="<f4").tobytes()),
        ("f16", "F16", [3], np.array([1, -0.5, 6e-8], "<f2").tobytes()),  # a subnormal
        ("bf16", "BF16", [2], bf16([3.0, -1.0])),
    ], {"k": "v"}))
    write(d, "shapes.safetensors", safetensors([
        ("empty", "F32", [0, 4], b""),
        ("scalar", "F32", [], np.array(2.0, "<f4").tobytes()),
        ("eight_dims", "F16", [1, 1, 1, 1, 1, 1, 1, 2], np.array([1, 2], "<f2").tobytes()),
    ]))
    write(d, "unaligned.safetensors", safetensors([  # header not padded, odd offsets
        ("a.weight", "F16", [1], np.array([1], "<f2").tobytes()),
        ("a.bias", "F32", [1], np.array([2], "<f4").tobytes()),
        ("a.running_mean", "F32", [1], np.array([0], "<f4").tobytes()),
        ("a.running_var", "BF16", [1], bf16([1.0])),
    ], align=1))


# ---- PNG -------------------------------------------------------------------------------

def png_chunk(kind, body):
    return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)


ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
CHANNELS = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def pack_row(samples, depth):
    """One scanline's samples (ints) at `depth` bits, big-endian, padded to a byte."""
    if depth == 16:
        return b"".join(struct.pack(">H", s) for s in samples)
    if depth == 8:
        return bytes(samples)
    out, acc, nbits = bytearray(), 0, 0
    for s in samples:
        acc, nbits = (acc << depth) | s, nbits + depth
        if nbits == 8:
            out.append(acc)
            acc, nbits = 0, 0
    if nbits:
        out.append(acc << (8 - nbits))
    return bytes(out)


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filter_rows(rows, bpp):
    """Each row filtered with type (index % 5), so every unfilter path is seeded."""
    out, prev = b"", None
    for i, row in enumerate(rows):
        ft = i % 5
        up = prev if prev is not None else bytes(len(row))
        f = bytearray()
        for x, v in enumerate(row):
            a = row[x - bpp] if x >= bpp else 0
            b, c = up[x], (up[x - bpp] if x >= bpp else 0)
            pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][ft]
            f.append((v - pred) & 0xFF)
        out += bytes([ft]) + bytes(f)
        prev = row
    return out


def png(h, w, ctype, depth, interlace=0, palette=None, trns=None, extra=b""):
    rng = np.random.RandomState(h * 1000 + w * 10 + ctype + depth)
    ch = CHANNELS[ctype]
    maxv = (1 << depth) - 1 if ctype != 3 else min((1 << depth) - 1, len(palette) // 3 - 1)
    img = rng.randint(0, maxv + 1, size=(h, w, ch))
    bpp = max(1, ch * depth // 8)
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    raw = b""
    for x0, y0, dx, dy in passes:
        sub = img[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        rows = [pack_row(r.reshape(-1).tolist(), depth) for r in sub]
        raw += filter_rows(rows, bpp)
    out = b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, ctype, 0, 0, interlace))
    out += extra
    if palette is not None:
        out += png_chunk(b"PLTE", palette)
    if trns is not None:
        out += png_chunk(b"tRNS", trns)
    out += png_chunk(b"IDAT", zlib.compress(raw, 9)) + png_chunk(b"IEND", b"")
    return out


def make_png():
    d = out_dir("png")
    pal = bytes(range(0, 48))  # 16 entries
    for depth in (1, 2, 4, 8, 16):
        write(d, f"grey{depth}.png", png(5, 7, 0, depth))
    write(d, "grey1_interlaced.png", png(9, 11, 0, 1, interlace=1))
    write(d, "grey16_trns.png", png(3, 4, 0, 16, trns=b"\x00\x05"))
    write(d, "rgb8.png", png(6, 5, 2, 8, extra=png_chunk(b"gAMA", struct.pack(">I", 45455))))
    write(d, "rgb16.png", png(4, 3, 2, 16))
    write(d, "rgb8_interlaced.png", png(9, 10, 2, 8, interlace=1))
    write(d, "rgb8_trns_text.png", png(3, 3, 2, 8, trns=b"\x00\x01\x00\x02\x00\x03",
                                       extra=png_chunk(b"tEXt", b"Comment\x00fuzz seed")))
    for depth in (1, 2, 4, 8):
        write(d, f"palette{depth}.png", png(5, 6, 3, depth, palette=pal[: 3 * min(16, 1 << depth)]))
    write(d, "palette4_trns_interlaced.png", png(8, 8, 3, 4, interlace=1, palette=pal, trns=b"\x00\x80\xff"))
    write(d, "grey_alpha8.png", png(4, 4, 4, 8))
    write(d, "grey_alpha16_interlaced.png", png(5, 3, 4, 16, interlace=1))
    write(d, "rgba8.png", png(3, 5, 6, 8))
    write(d, "rgba16.png", png(2, 2, 6, 16))
    write(d, "one_pixel.png", png(1, 1, 2, 8))


# ---- JPEG ------------------------------------------------------------------------------

def make_jpeg():
    from PIL import Image

    d = out_dir("jpeg")
    rng = np.random.RandomState(1)
    rgb = Image.fromarray(rng.randint(0, 256, size=(12, 20, 3), dtype=np.uint8), "RGB")
    grey = Image.fromarray(rng.randint(0, 256, size=(9, 13), dtype=np.uint8), "L")

    def save(name, im, **kw):
        b = io.BytesIO()
        im.save(b, "JPEG", quality=kw.pop("quality", 50), **kw)
        write(d, name, b.getvalue())

    save("baseline_420.jpg", rgb, subsampling=2)
    save("baseline_444.jpg", rgb, subsampling=0)
    save("baseline_422_optimized.jpg", rgb, subsampling=1, optimize=True)
    save("progressive.jpg", rgb, progressive=True)
    save("grey.jpg", grey)
    save("grey_progressive.jpg", grey, progressive=True)
    save("cmyk.jpg", Image.new("CMYK", (4, 3), (10, 20, 30, 40)))
    for o in (3, 6, 8):
        ex = Image.Exif()
        ex[0x0112] = o
        save(f"exif_orientation{o}.jpg", rgb, exif=ex.tobytes())
    # Big-endian TIFF with the orientation as a LONG, stored by hand.
    tiff = b"MM\x00\x2a" + struct.pack(">I", 8) + struct.pack(">H", 1) + \
        struct.pack(">HHII", 0x0112, 4, 1, 5) + struct.pack(">I", 0)
    save("exif_be_long5.jpg", rgb, exif=b"Exif\x00\x00" + tiff)


# ---- WebP, TIFF, GIF, BMP ----------------------------------------------------------------

def _seed_images():
    from PIL import Image

    rng = np.random.RandomState(2)
    rgb = Image.fromarray(rng.randint(0, 256, size=(12, 20, 3), dtype=np.uint8), "RGB")
    rgba = Image.fromarray(rng.randint(0, 256, size=(9, 7, 4), dtype=np.uint8), "RGBA")
    grey = Image.fromarray(rng.randint(0, 256, size=(9, 13), dtype=np.uint8), "L")
    return rgb, rgba, grey


def _saver(d, fmt):
    def save(name, im, **kw):
        b = io.BytesIO()
        im.save(b, fmt, **kw)
        write(d, name, b.getvalue())
    return save


def make_webp():
    d = out_dir("webp")
    rgb, rgba, grey = _seed_images()
    save = _saver(d, "WEBP")
    save("lossy.webp", rgb, quality=50)
    save("lossless.webp", rgb, lossless=True)
    save("alpha_lossy.webp", rgba, quality=50)
    save("alpha_lossless.webp", rgba, lossless=True)
    save("grey.webp", grey, quality=50)
    save("animated.webp", rgb, save_all=True, append_images=[rgb.rotate(180)], duration=10, lossless=True)


def _tiff(entries, data, big_endian=False):
    """A one-page TIFF by hand: entries [(tag, type, values)] (SHORT=3, LONG=4), pixel data after
    the IFD; StripOffsets (273) is filled in."""
    e = ">" if big_endian else "<"
    n = len(entries)
    data_at = 8 + 2 + 12 * n + 4
    out = (b"MM\x00\x2a" if big_endian else b"II\x2a\x00") + struct.pack(e + "I", 8) + struct.pack(e + "H", n)
    for tag, typ, vals in sorted(entries):
        vals = [data_at] if tag == 273 else vals
        fmt = "H" if typ == 3 else "I"
        raw = b"".join(struct.pack(e + fmt, v) for v in vals)
        assert len(raw) <= 4, tag
        out += struct.pack(e + "HHI", tag, typ, len(vals)) + raw.ljust(4, b"\0")
    return out + struct.pack(e + "I", 0) + data


def make_tiff():
    d = out_dir("tiff")
    rgb, rgba, grey = _seed_images()
    save = _saver(d, "TIFF")
    save("rgb.tif", rgb)
    save("rgb_lzw.tif", rgb, compression="tiff_lzw")
    save("rgb_deflate.tif", rgb, compression="tiff_adobe_deflate")
    save("rgb_packbits.tif", rgb, compression="packbits")
    save("rgba.tif", rgba)
    save("grey.tif", grey)
    save("bilevel_g4.tif", grey.convert("1"), compression="group4")
    save("palette.tif", rgb.convert("P", palette=1, colors=16))
    save("cmyk.tif", rgb.convert("CMYK"))
    save("ycbcr_jpeg.tif", rgb, compression="jpeg")
    save("grey16.tif", Image_fromarray16(grey))
    save("pages.tif", rgb, save_all=True, append_images=[grey.convert("RGB").resize(rgb.size)])
    h, w = 3, 4
    px16 = np.arange(h * w * 3, dtype="<u2") * 1000
    base = [(256, 3, [w]), (257, 3, [h]), (259, 3, [1]), (277, 3, [3]), (278, 3, [h]), (279, 4, [px16.nbytes]),
            (273, 4, [0])]
    write(d, "rgb16_le.tif", _tiff(base + [(258, 3, [16]), (262, 3, [2])], px16.tobytes()))
    write(d, "rgb16_be.tif", _tiff(base + [(258, 3, [16]), (262, 3, [2])], px16.astype(">u2").tobytes(), True))
    px = np.arange(h * w * 4, dtype=np.uint8)
    rgba_base = [(256, 3, [w]), (257, 3, [h]), (259, 3, [1]), (277, 3, [4]), (278, 3, [h]), (279, 4, [px.nbytes]),
                 (273, 4, [0]), (258, 3, [8]), (262, 3, [2])]
    write(d, "rgba_premultiplied.tif", _tiff(rgba_base + [(338, 3, [1])], px.tobytes()))
    write(d, "tiled_header.tif", _tiff(base[:5] + [(258, 3, [8]), (262, 3, [2]), (322, 3, [16]), (323, 3, [16])],
                                        b"\0" * 16))


def Image_fromarray16(grey):
    from PIL import Image
    return Image.fromarray(np.asarray(grey).astype(np.uint16) * 257, "I;16")


def make_gif():
    d = out_dir("gif")
    rgb, rgba, grey = _seed_images()
    save = _saver(d, "GIF")
    pal = rgb.convert("P", palette=1, colors=32)
    save("palette.gif", pal)
    save("interlaced.gif", pal, interlace=True)
    save("transparent.gif", rgb.convert("P", palette=1, colors=8), transparency=3)
    save("grey.gif", grey)
    save("animated.gif", pal, save_all=True, append_images=[pal.rotate(90)], duration=20, loop=0)
    # a 6x5 frame placed at (2, 1) on a 10x8 screen
    b = io.BytesIO()
    pal.crop((0, 0, 6, 5)).save(b, "GIF")
    write(d, "offset_frame.gif", gif_offset_frame(b.getvalue(), 10, 8, 2, 1))


def gif_offset_frame(raw, screen_w, screen_h, left, top):
    """A one-frame GIF with its logical screen resized and its frame moved (tests/parity/test_formats.py
    does the same)."""
    raw = bytearray(raw)
    struct.pack_into("<HH", raw, 6, screen_w, screen_h)
    pos = 13 + (3 << ((raw[10] & 7) + 1) if raw[10] & 0x80 else 0)
    while raw[pos] == 0x21:  # extensions: introducer, label, then sub-blocks up to a zero length
        pos += 2
        while raw[pos]:
            pos += raw[pos] + 1
        pos += 1
    assert raw[pos] == 0x2C
    struct.pack_into("<HH", raw, pos + 1, left, top)
    return bytes(raw)


def make_bmp():
    d = out_dir("bmp")
    rgb, rgba, grey = _seed_images()
    save = _saver(d, "BMP")
    save("rgb24.bmp", rgb)
    save("grey8.bmp", grey)
    save("palette8.bmp", rgb.convert("P", palette=1, colors=200))
    save("palette4.bmp", rgb.convert("P", palette=1, colors=16))
    save("bilevel1.bmp", grey.convert("1"))
    save("rgba32.bmp", rgba)
    # 16-bit 5-6-5 with BITFIELDS and a top-down 32-bit BGRX, written by hand (Pillow writes neither)
    h, w = 3, 5
    def bmp(bits, compression, masks, rows, top_down=False):
        hdr = 40 + len(masks) * 4
        pixels = b"".join(r.ljust((len(r) + 3) // 4 * 4, b"\0") for r in rows)
        info = struct.pack("<IiiHHIIiiII", 40, w, -h if top_down else h, 1, bits, compression, len(pixels),
                           2835, 2835, 0, 0) + b"".join(struct.pack("<I", m) for m in masks)
        return b"BM" + struct.pack("<IHHI", 14 + hdr + len(pixels), 0, 0, 14 + hdr) + info + pixels
    rows565 = [struct.pack("<" + "H" * w, *[(y * 7 + x * 1301) & 0xFFFF for x in range(w)]) for y in range(h)]
    write(d, "rgb565.bmp", bmp(16, 3, [0xF800, 0x7E0, 0x1F], rows565))
    write(d, "rgb555.bmp", bmp(16, 0, [], rows565))
    rows32 = [bytes((x * 40 + y * 9 + c * 3) & 0xFF for x in range(w) for c in range(4)) for y in range(h)]
    write(d, "bgrx32_top_down.bmp", bmp(32, 0, [], rows32, top_down=True))


# ---- RLE -------------------------------------------------------------------------------

def rle_string(counts):
    """pycocotools' rleToString: deltas from the fourth count on, 5 bits a char."""
    out = []
    for i, x in enumerate(counts):
        if i > 2:
            x -= counts[i - 2]
        more = True
        while more:
            c = x & 0x1F
            x >>= 5
            more = x != -1 if c & 0x10 else x != 0
            out.append(chr((c | (0x20 if more else 0)) + 48))
    return "".join(out).encode()


def make_rle():
    d = out_dir("rle")
    # byte 0, 1: h, w (mod 64); then a counts string (also read as mask bits)
    seeds = {
        "empty": (0, 0, [0]),
        "square": (4, 4, [5, 2, 2, 2, 5]),
        "full": (3, 5, [0, 15]),
        "stripes": (6, 6, [6, 6] * 3),
        "big_delta": (2, 3, [1, 4000000000, 7, 3]),
        "negative_delta": (8, 8, [30, 2, 1, 30, 1]),
    }
    for name, (h, w, counts) in seeds.items():
        write(d, name, bytes([h, w]) + rle_string(counts))
    write(d, "bits", bytes([7, 9]) + bytes(range(48, 112)))


# ---- torch.save files for the converter ------------------------------------------------

def make_convert():
    d = out_dir("convert")
    try:
        import torch
    except ImportError:
        print("make_corpus.py: no torch, skipping corpus/convert", file=sys.stderr)
        return
    import collections

    torch.manual_seed(0)
    g = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    sd = collections.OrderedDict([
        ("backbone.body.conv1.weight", torch.randn(2, 3, 1, 1)),
        ("backbone.body.bn1.running_var", torch.rand(2)),
        ("backbone.body.bn1.num_batches_tracked", torch.tensor(5)),
    ])
    variants = {
        "plain": sd,
        # a module's state_dict() carries _metadata, pickled with BUILD
        "module_state_dict": torch.nn.Sequential(torch.nn.Conv2d(3, 2, 1), torch.nn.BatchNorm2d(2)).state_dict(),
        "f16_bf16_f64": {"a": torch.randn(3).half(), "b": torch.randn(2).bfloat16(), "c": torch.randn(2).double()},
        "views": {"t": g.t(), "row": g[1], "col": g[:, 2], "same": g},  # shared storage, strides, offsets
        "wrapped": {"model": {"module.x": torch.ones(2)}, "iteration": 7},
        "parameter": {"p": torch.nn.Parameter(torch.zeros(2, 2))},
        "empty_and_scalar": {"e": torch.zeros(0, 3), "s": torch.tensor(1.5)},
    }
    for name, obj in variants.items():
        for legacy in (False, True):
            b = io.BytesIO()
            torch.save(obj, b, _use_new_zipfile_serialization=not legacy)
            write(d, f"{name}{'_legacy' if legacy else ''}.pth", b.getvalue())

    # .pkl pickles of numpy arrays: Detectron's Python 2 layout (tests/parity/zoo_checkpoints.py
    # writes the opcodes Python 2 + numpy write) and detectron2's Python 3 ones, protocols 2/4/5
    import pickle
    sys.path.insert(0, os.path.join(REPO, "tests", "parity"))
    import zoo_checkpoints

    rng = np.random.default_rng(0)
    blobs = [("conv1_w", rng.standard_normal((2, 3, 1, 1), dtype=np.float32)),
             ("res_conv1_bn_s", np.ones(2, np.float32)), ("res_conv1_bn_b", np.zeros(2, np.float32)),
             ("conv1_b", np.zeros(2, np.float32)), ("fc6_w_momentum", np.zeros((1, 300), np.float32)),
             ("half", np.arange(3, dtype=np.float16)), ("fortran", np.asfortranarray(np.eye(2, 3, dtype=np.float32)))]
    write(d, "detectron_py2.pkl", zoo_checkpoints.py2_pickle([("cfg", b"MODEL:\n  NUM_CLASSES: 81\n"),
                                                              ("blobs", blobs[:5])]))
    model = dict(blobs)
    for proto in (2, 4, 5):
        write(d, f"detectron2_p{proto}.pkl", pickle.dumps(
            {"model": {"backbone.bottom_up.stem.conv1.weight": model["conv1_w"], "h": model["half"],
                       "f": model["fortran"]}, "__author__": "Detectron2 Model Zoo"}, protocol=proto))


if __name__ == "__main__":
    # make_corpus.py [TARGET...]: those corpora only (all without arguments)
    makers = {"config": make_config, "weights": make_weights, "png": make_png, "jpeg": make_jpeg,
              "webp": make_webp, "tiff": make_tiff, "gif": make_gif, "bmp": make_bmp, "rle": make_rle,
              "convert": make_convert}
    for name in sys.argv[1:] or makers:
        makers[name]()
    total = sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(CORPUS) for f in fs)
    count = sum(len(fs) for _, _, fs in os.walk(CORPUS))
    print(f"make_corpus.py: {count} files, {total} bytes in {os.path.relpath(CORPUS, REPO)}")
