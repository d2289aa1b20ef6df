"""EXIF orientation of JPEGs (engine/io/image.c) against Pillow, through ctypes.

image_load must give exactly the pixels of
    ImageOps.exif_transpose(Image.open(p)).convert('RGB')
for every orientation 1..8, in both TIFF byte orders, and must ignore a
malformed EXIF block (no crash, no out-of-bounds read, the stored image as
is). Bit-exact: the decode is the same libjpeg-turbo with the same defaults
(test_image_torch.py checks that), and the transposes only move pixels.

Pillow cannot open some malformed files at all (a TIFF header with no IFD
offset raises in JpegImagePlugin's dpi lookup); there the reference is the
same JPEG without the APP1 segment, which is what "ignored" means.

Run with /usr/bin/python3 -m pytest tests/parity/test_exif.py."""

import ctypes as C
import io
import struct
import warnings

import numpy as np
import pytest
from PIL import Image, ImageOps

from conftest import engine_library_path

MR_OK = 0


class Image_(C.Structure):  # engine/core/image_types.h: mr_image
    _fields_ = [("pixels", C.POINTER(C.c_uint8)), ("h", C.c_int), ("w", C.c_int), ("frames", C.c_int)]


class Error(C.Structure):  # engine/core/status.h: mr_error
    _fields_ = [("status", C.c_int), ("msg", C.c_char * 1024)]


@pytest.fixture(scope="module")
def lib():
    L = C.CDLL(engine_library_path())
    L.image_load.argtypes = [C.c_char_p, C.c_int, C.POINTER(Image_), C.POINTER(Error)]
    L.image_free.argtypes = [C.POINTER(Image_)]
    L.image_exif_orientation.argtypes = [C.c_char_p, C.c_size_t]
    L.image_exif_orientation.restype = C.c_int
    return L


def load(lib, path, max_side=20000):
    img, err = Image_(), Error()
    st = lib.image_load(str(path).encode(), max_side, C.byref(img), C.byref(err))
    assert st == MR_OK, err.msg.decode()
    try:
        return np.ctypeslib.as_array(img.pixels, shape=(img.h, img.w, 3)).copy()
    finally:
        lib.image_free(C.byref(img))


def pillow_upright(path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "Corrupt EXIF data", "Truncated File Read"
        return np.asarray(ImageOps.exif_transpose(Image.open(path)).convert("RGB"))


# Pillow's Image.Transpose for each orientation, as exif_transpose maps them.
TRANSPOSE = {2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180,
             4: Image.Transpose.FLIP_TOP_BOTTOM, 5: Image.Transpose.TRANSPOSE,
             6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
             8: Image.Transpose.ROTATE_90}


def transposed(pixels, k):
    img = Image.fromarray(pixels)
    return np.asarray(img.transpose(TRANSPOSE[k]) if k != 1 else img)


def make_pixels(h=37, w=53, seed=7):
    """Odd sizes (partial MCUs), so a wrong flip cannot hide in symmetry."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    base = np.dstack([(x * 5) % 256, (y * 7) % 256, (x * y) % 256]).astype(np.int64)
    return np.clip(base + rng.integers(-25, 26, base.shape), 0, 255).astype(np.uint8)


def tiff(order, entries, extra=b"", ifd_offset=8):
    """A TIFF block with one IFD; entries are (tag, type, count, 4-byte field)."""
    e = "<" if order == "II" else ">"
    out = order.encode() + struct.pack(e + "HI", 42, ifd_offset) + struct.pack(e + "H", len(entries))
    for tag, typ, count, field in entries:
        out += struct.pack(e + "HHI", tag, typ, count) + field
    return out + struct.pack(e + "I", 0) + extra


def short_field(order, v):
    return struct.pack(("<" if order == "II" else ">") + "HH", v, 0)


def with_app1(jpeg, *payloads):
    """jpeg with APP1 segments carrying payloads inserted right after SOI."""
    segs = b"".join(b"\xff\xe1" + struct.pack(">H", len(p) + 2) + p for p in payloads)
    return jpeg[:2] + segs + jpeg[2:]


def plain_jpeg(pixels, **kw):
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, "JPEG", quality=90, **kw)
    return buf.getvalue()


@pytest.mark.parametrize("subsampling", [0, 2], ids=["444", "420"])
@pytest.mark.parametrize("k", range(1, 9))
def test_orientation_written_by_pillow(lib, tmp_path, k, subsampling):
    exif = Image.Exif()
    exif[0x0112] = k
    p = tmp_path / f"o{k}.jpg"
    Image.fromarray(make_pixels()).save(p, quality=90, subsampling=subsampling, exif=exif.tobytes())
    assert Image.open(p).getexif().get(0x0112) == k
    ours, ref = load(lib, p), pillow_upright(p)
    assert ours.shape == ref.shape == ((53, 37, 3) if k >= 5 else (37, 53, 3))
    np.testing.assert_array_equal(ours, ref)


@pytest.mark.parametrize("k", range(1, 9))
@pytest.mark.parametrize("order", ["II", "MM"])
def test_orientation_both_byte_orders(lib, tmp_path, order, k):
    """A hand-made EXIF block, with other tags around the orientation."""
    e = "<" if order == "II" else ">"
    entries = [(0x010F, 2, 4, b"Cam\0"),                    # Make, inline ASCII
               (0x0110, 2, 9, struct.pack(e + "I", 62)),    # Model, out of line
               (0x0112, 3, 1, short_field(order, k)),
               (0x011A, 5, 1, struct.pack(e + "I", 71))]    # XResolution, RATIONAL
    block = tiff(order, entries, extra=b"Model-X\0\0" + struct.pack(e + "II", 72, 1))
    assert block[62:71] == b"Model-X\0\0"
    p = tmp_path / f"{order}{k}.jpg"
    p.write_bytes(with_app1(plain_jpeg(make_pixels(31, 44, seed=k)), b"Exif\0\0" + block))
    assert lib.image_exif_orientation(b"Exif\0\0" + block, len(block) + 6) == k
    np.testing.assert_array_equal(load(lib, p), pillow_upright(p))


def test_progressive_and_grey(lib, tmp_path):
    exif = Image.Exif()
    exif[0x0112] = 6
    for name, pixels, kw in [("prog", make_pixels(), dict(progressive=True)),
                             ("grey", make_pixels()[:, :, 1], {})]:
        p = tmp_path / f"{name}.jpg"
        Image.fromarray(pixels).save(p, quality=85, exif=exif.tobytes(), **kw)
        np.testing.assert_array_equal(load(lib, p), pillow_upright(p))


II_SHORT6 = (0x0112, 3, 1, short_field("II", 6))

# (name, APP1 payloads, the orientation the engine must apply). Where
# Pillow opens the file, it must agree too.
MALFORMED = [
    ("exif-header-only", [b"Exif\0\0"], 1),
    ("garbage", [b"Exif\0\0garbage!! \xff\xff\xff\xff"], 1),
    ("tiff-header-cut", [b"Exif\0\0II*\0"], 1),
    ("tiff-header-cut-mm", [b"Exif\0\0MM\0*\0\0"], 1),
    ("not-exif00", [b"Exif\0xII*\0\x08\0\0\0"], 1),
    ("bad-magic", [b"Exif\0\0II+\0" + tiff("II", [II_SHORT6])[4:]], 1),
    ("ifd-offset-past-end", [b"Exif\0\0" + tiff("II", [II_SHORT6], ifd_offset=0xFFFFFFF0)], 1),
    ("ifd-offset-at-end", [b"Exif\0\0" + tiff("II", [II_SHORT6], ifd_offset=26)], 1),
    # The orientation entry is complete, the IFD claims 300 entries: Pillow
    # keeps what it read, and so do we.
    ("ifd-cut-after-entry", [b"Exif\0\0" + tiff("II", [II_SHORT6])[:-4].replace(b"\x01\x00\x12", b"\x2c\x01\x12", 1)], 6),
    ("ifd-cut-inside-entry", [b"Exif\0\0" + tiff("II", [II_SHORT6])[:16]], 1),
    # An earlier entry's data lies past the end: the scan stops there.
    ("data-offset-past-end", [b"Exif\0\0" + tiff("II", [(0x0110, 2, 400, struct.pack("<I", 8)), II_SHORT6])], 1),
    ("data-count-wraps", [b"Exif\0\0" + tiff("II", [(0x0110, 5, 0x20000000, struct.pack("<I", 8)), II_SHORT6])], 1),
    ("value-out-of-range", [b"Exif\0\0" + tiff("II", [(0x0112, 3, 1, short_field("II", 9))])], 1),
    ("value-zero", [b"Exif\0\0" + tiff("II", [(0x0112, 3, 1, short_field("II", 0))])], 1),
    ("value-negative-sshort", [b"Exif\0\0" + tiff("II", [(0x0112, 8, 1, struct.pack("<hH", -2, 0))])], 1),
    ("type-byte", [b"Exif\0\0" + tiff("II", [(0x0112, 1, 1, b"\x06\0\0\0")])], 1),
    ("type-long", [b"Exif\0\0" + tiff("II", [(0x0112, 4, 1, struct.pack("<I", 3))])], 3),
    # Pillow compares the value with the ints 1..8: 6.0 and 12/2 match too.
    ("type-float", [b"Exif\0\0" + tiff("II", [(0x0112, 11, 1, struct.pack("<f", 6.0))])], 6),
    ("type-float-fraction", [b"Exif\0\0" + tiff("II", [(0x0112, 11, 1, struct.pack("<f", 6.5))])], 1),
    ("type-double", [b"Exif\0\0" + tiff("MM", [(0x0112, 12, 1, struct.pack(">I", 26))], struct.pack(">d", 3.0))], 3),
    ("type-rational", [b"Exif\0\0" + tiff("II", [(0x0112, 5, 1, struct.pack("<I", 26))], struct.pack("<II", 12, 2))], 6),
    ("type-rational-inexact", [b"Exif\0\0" + tiff("II", [(0x0112, 5, 1, struct.pack("<I", 26))], struct.pack("<II", 7, 2))], 1),
    ("type-rational-zero-den", [b"Exif\0\0" + tiff("II", [(0x0112, 5, 1, struct.pack("<I", 26))], struct.pack("<II", 6, 0))], 1),
    ("type-srational", [b"Exif\0\0" + tiff("II", [(0x0112, 10, 1, struct.pack("<I", 26))], struct.pack("<ii", -8, -1))], 8),
    ("type-long8", [b"Exif\0\0" + tiff("II", [(0x0112, 16, 1, struct.pack("<I", 26))], struct.pack("<Q", 5))], 5),
    ("type-ifd", [b"Exif\0\0" + tiff("MM", [(0x0112, 13, 1, struct.pack(">I", 7))])], 7),
    ("type-ascii", [b"Exif\0\0" + tiff("II", [(0x0112, 2, 2, b"6\0\0\0")])], 1),
    ("type-unknown-skipped", [b"Exif\0\0" + tiff("II", [II_SHORT6, (0x0112, 99, 1, b"\0\0\0\0")])], 6),
    ("count-zero-skipped", [b"Exif\0\0" + tiff("II", [II_SHORT6, (0x0112, 3, 0, b"\0\0\0\0")])], 6),
    ("duplicate-last-wins", [b"Exif\0\0" + tiff("II", [II_SHORT6, (0x0112, 3, 1, short_field("II", 3))])], 3),
    ("count-two-first-value", [b"Exif\0\0" + tiff("II", [(0x0112, 3, 2, struct.pack("<HH", 8, 3))])], 8),
    # Only the first "Exif\0" APP1 counts, as in Pillow.
    ("first-exif-empty", [b"Exif\0\0", b"Exif\0\0" + tiff("II", [II_SHORT6])], 1),
    ("xmp-then-exif", [b"http://ns.adobe.com/xap/1.0/\0<x/>", b"Exif\0\0" + tiff("II", [II_SHORT6])], 6),
]


@pytest.mark.parametrize("name,payloads,want", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_exif_ignored(lib, tmp_path, name, payloads, want):
    pixels = make_pixels(29, 41, seed=3)
    jpeg = plain_jpeg(pixels)
    base = tmp_path / "base.jpg"
    base.write_bytes(jpeg)
    p = tmp_path / f"{name}.jpg"
    p.write_bytes(with_app1(jpeg, *payloads))
    ours = load(lib, p)
    np.testing.assert_array_equal(ours, transposed(np.asarray(Image.open(base).convert("RGB")), want))
    try:
        ref = pillow_upright(p)
    except Exception:  # Pillow cannot open it at all; the check above stands
        return
    np.testing.assert_array_equal(ours, ref)


def test_exif_parser_fuzz(lib, tmp_path):
    """Random cuts and byte flips of a valid block never crash the parser,
    and the orientation agrees with Pillow whenever Pillow reads the file.
    Seed 1234."""
    rng = np.random.default_rng(1234)
    e = "<"
    good = b"Exif\0\0" + tiff("II", [(0x010F, 2, 4, b"Cam\0"), (0x0110, 2, 9, struct.pack(e + "I", 50)),
                                     (0x0112, 3, 1, short_field("II", 6))], extra=b"Model-X\0\0")
    jpeg = plain_jpeg(make_pixels(9, 14, seed=5))
    compared = 0
    for i in range(300):
        b = bytearray(good)
        for _ in range(int(rng.integers(1, 4))):
            b[int(rng.integers(6, len(b)))] = int(rng.integers(0, 256))
        if rng.random() < 0.3:
            b = b[:int(rng.integers(6, len(b)))]
        b = bytes(b)
        ours = lib.image_exif_orientation(b, len(b))
        assert 1 <= ours <= 8
        p = tmp_path / "fuzz.jpg"
        p.write_bytes(with_app1(jpeg, b))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                theirs = Image.open(p).getexif().get(0x0112)
        except Exception:
            continue
        try:  # exif_transpose's lookup: a dict of the ints 1..8
            theirs = {k: k for k in range(1, 9)}.get(theirs, 1)
        except TypeError:  # unhashable
            theirs = 1
        assert ours == theirs, f"case {i}: {b!r}"
        compared += 1
    assert compared > 100
