"""The bad-input matrix (issue "Reliability"): weights, configs, images and
outputs that are wrong in every way we could think of. Each case states its
exact outcome: the exit status, one line on stderr (or the lines of a batch)
and the words that line must hold. No case may crash: the status is 0, 1 or
2 and no sanitizer, segfault or abort text appears (scripts/sanitize.sh runs
this file against the ASan/UBSan build through DETECT_BUILD).

Weights files are made from the seeded weights (conftest's seeded_weights)
by raw edits of the 8-byte length and the JSON header, keeping the data
bytes, or through models/safetensors_io.py for tensor-level edits. Every
crafted file is deleted after its run (each is ~250 MB)."""

import json
import os
import re
import struct
import sys
import zlib

import numpy as np
import pytest
from PIL import Image

from conftest import BUILD, CONFIG_SMALL, REPO

sys.path.insert(0, os.path.join(REPO, "models"))
import safetensors_io  # noqa: E402

DETECT = os.path.join(BUILD, "detect")
EXAMPLE = os.path.join(REPO, "examples", "astronaut.png")
CRASH_WORDS = ["Sanitizer", "runtime error", "Segmentation", "Aborted", "core dumped", "double free",
               "malloc(): ", "free(): ", "stack smashing"]


# ---- running the command ---------------------------------------------------

def detect(*args, config=CONFIG_SMALL, weights=None):
    import subprocess
    cmd = [DETECT, "-q"]
    if config:
        cmd += ["--config", str(config)]
    if weights:
        cmd += ["--weights", str(weights)]
    r = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True, timeout=600)
    assert r.returncode in (0, 1, 2), f"crashed (status {r.returncode}):\n{r.stderr[-3000:]}"
    for w in CRASH_WORDS:
        assert w not in r.stderr, f"{w!r} on stderr:\n{r.stderr[-3000:]}"
    return r


def lines_of(r):
    return [l for l in r.stderr.splitlines() if l.strip()]


def expect(r, status, *needles):
    """Exit status `status` and exactly one stderr line holding every needle."""
    lines = lines_of(r)
    assert r.returncode == status, f"status {r.returncode}, expected {status}:\n{r.stderr}"
    assert len(lines) == 1, f"expected one line on stderr, got {len(lines)}:\n{r.stderr}"
    assert lines[0].startswith("detect: "), lines[0]
    for n in needles:
        assert str(n) in lines[0], f"{n!r} not in {lines[0]!r}"
    return lines[0]


@pytest.fixture(scope="module")
def small_png(tmp_path_factory):
    """A 40x40 photo crop: the cheapest good image at the small config (-> 320x320)."""
    p = tmp_path_factory.mktemp("good") / "good.png"
    Image.open(EXAMPLE).convert("RGB").resize((40, 40)).save(p)
    return p


# ---- weights: raw edits ----------------------------------------------------

def read_layout(path):
    """(header length, header dict in file order, file size)."""
    with open(path, "rb") as f:
        (hlen,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(hlen))
    return hlen, header, os.path.getsize(path)


def copy_range(src, dst, offset, count):
    """Appends src[offset:offset+count] to the open file dst, in the kernel where it can."""
    with open(src, "rb") as s:
        while count > 0:
            try:
                n = os.copy_file_range(s.fileno(), dst.fileno(), count, offset)
            except OSError:
                n = 0
            if n <= 0:  # not supported here: plain copy
                s.seek(offset)
                while count > 0:
                    chunk = s.read(min(count, 1 << 24))
                    if not chunk:
                        return
                    dst.write(chunk)
                    count -= len(chunk)
                return
            offset += n
            count -= n


def write_variant(src, dst, header=None, raw_header=None, hlen_field=None):
    """src's data section under a new header (a dict, or raw bytes); the
    8-byte length says len(header) unless hlen_field overrides it."""
    hlen, _, size = read_layout(src)
    if raw_header is None:
        raw_header = json.dumps(header, separators=(",", ":")).encode()
        raw_header += b" " * (-(8 + len(raw_header)) % 8)
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(raw_header) if hlen_field is None else hlen_field))
        f.write(raw_header)
        f.flush()
        copy_range(src, f, 8 + hlen, size - 8 - hlen)
    return dst


def tensor_names(header):
    return [k for k in header if k != "__metadata__"]


def same_size_pair(header):
    by_size = {}
    for k in tensor_names(header):
        b, e = header[k]["data_offsets"]
        by_size.setdefault(e - b, []).append(k)
    return next(v[:2] for v in by_size.values() if len(v) >= 2)


def truncation_offsets(hlen, size):
    """20 cuts: inside the 8-byte length, inside the header, at and inside the data."""
    inside_length = [0, 1, 4, 7]
    inside_header = [8, 9, 8 + hlen // 3, 8 + 2 * hlen // 3, 8 + hlen - 1]
    data = [8 + hlen, 8 + hlen + 1, 8 + hlen + 4096] + [int(size * f) for f in (0.1, 0.25, 0.5, 0.75, 0.9, 0.99)]
    return inside_length + inside_header + data + [size - 4, size - 1]


def test_truncated_weights(tmp_path, seeded_weights):
    hlen, header, size = read_layout(seeded_weights)
    offsets = truncation_offsets(hlen, size)
    assert len(set(offsets)) == 20
    cut = tmp_path / "cut.safetensors"
    with open(cut, "wb") as f:
        copy_range(seeded_weights, f, 0, size)
    try:
        for n in sorted(offsets, reverse=True):  # one copy, cut shorter and shorter
            os.truncate(cut, n)
            r = detect(EXAMPLE, weights=cut)
            if n < 8:
                expect(r, 2, str(cut), f"size {n} is too short for a safetensors file (minimum 8)")
            elif n < 8 + hlen:
                expect(r, 2, str(cut), f"header length {hlen} does not fit in the file ({n} bytes)", "truncated")
            else:
                line = expect(r, 2, str(cut), "run past the end of the file",
                              f"data area size {n - 8 - hlen}; truncated?")
                name = re.search(r'tensor "([^"]+)"', line).group(1)
                assert header[name]["data_offsets"][1] > n - 8 - hlen, f"{name} is not cut at {n}: {line}"
    finally:
        cut.unlink()


def _edit(header, fn):
    h = json.loads(json.dumps(header))
    fn(h)
    return h


def _set(name_index, key, value_fn):
    def fn(h):
        name = same_size_pair(h)[name_index]
        h[name][key] = value_fn(h, name)
    return fn


def _data_size(h):
    return max(h[k]["data_offsets"][1] for k in tensor_names(h))


# (id, edit of the header dict, substrings of the one line; {a}/{b} = the two same-size tensors)
HEADER_CASES = [
    ("overlap-same-span", _set(1, "data_offsets", lambda h, n: list(h[same_size_pair(h)[0]]["data_offsets"])),
     ['tensors "', "overlap in the data area", "{a}", "{b}"]),
    ("overlap-shifted", _set(1, "data_offsets", lambda h, n: [h[n]["data_offsets"][0] + 4, h[n]["data_offsets"][1] + 4]),
     ["overlap in the data area", "{b}"]),
    ("offsets-past-end", _set(1, "data_offsets", lambda h, n: [_data_size(h), _data_size(h) + h[n]["data_offsets"][1]
                                                                - h[n]["data_offsets"][0]]),
     ['tensor "{b}"', "run past the end of the file"]),
    ("offsets-near-2^64", _set(1, "data_offsets", lambda h, n: [2 ** 64 - 8, 2 ** 64 - 4]),
     ['tensor "{b}"', "run past the end of the file"]),
    ("offsets-negative", _set(1, "data_offsets", lambda h, n: [-4, h[n]["data_offsets"][1] - h[n]["data_offsets"][0] - 4]),
     ['tensor "{b}"', "bad data_offsets"]),
    ("offsets-reversed", _set(1, "data_offsets", lambda h, n: h[n]["data_offsets"][::-1]),
     ['tensor "{b}"', "bad data_offsets"]),
    ("offsets-strings", _set(1, "data_offsets", lambda h, n: [str(v) for v in h[n]["data_offsets"]]),
     ['tensor "{b}"', "bad data_offsets"]),
    ("offsets-one-number", _set(1, "data_offsets", lambda h, n: [0]),
     ['tensor "{b}"', "data_offsets must be [begin, end]"]),
    ("size-disagrees-with-shape", _set(1, "data_offsets", lambda h, n: [h[n]["data_offsets"][0], h[n]["data_offsets"][1] - 4]),
     ['tensor "{b}"', "data size", ", expected", "F32)"]),
    ("dtype-I64", _set(1, "dtype", lambda h, n: "I64"), ['tensor "{b}"', "unsupported dtype I64"]),
    ("dtype-Q4", _set(1, "dtype", lambda h, n: "Q4"), ['tensor "{b}"', "unsupported dtype Q4"]),
    ("dtype-F16-with-F32-bytes", _set(1, "dtype", lambda h, n: "F16"), ['tensor "{b}"', "data size", ", F16)"]),
    ("shape-negative", _set(1, "shape", lambda h, n: [-1] + h[n]["shape"][1:]),
     ['tensor "{b}"', "shape[0] is not a non-negative integer"]),
    ("shape-9-dims", _set(1, "shape", lambda h, n: [1] * 9), ['tensor "{b}"', "9 dimensions"]),
    ("entry-not-object", lambda h: h.__setitem__(same_size_pair(h)[1], 5),
     ['tensor "{b}"', "header entry needs dtype, shape and data_offsets"]),
    ("entry-without-dtype", lambda h: h[same_size_pair(h)[1]].pop("dtype"),
     ['tensor "{b}"', "header entry needs dtype, shape and data_offsets"]),
    ("metadata-not-object", lambda h: h.__setitem__("__metadata__", 5), ["__metadata__ must be an object"]),
]


@pytest.mark.parametrize("edit, needles", [c[1:] for c in HEADER_CASES], ids=[c[0] for c in HEADER_CASES])
def test_bad_weights_header(tmp_path, seeded_weights, edit, needles):
    _, header, _ = read_layout(seeded_weights)
    a, b = same_size_pair(header)
    bad = write_variant(seeded_weights, tmp_path / "bad.safetensors", _edit(header, edit))
    try:
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), *[n.format(a=a, b=b) for n in needles])
    finally:
        bad.unlink()


def test_bad_weights_header_length(tmp_path, seeded_weights):
    hlen, header, size = read_layout(seeded_weights)
    raw = open(seeded_weights, "rb").read(8 + hlen)[8:]
    bad = tmp_path / "bad.safetensors"
    cases = [
        (2 ** 64 - 1, [f"header length {2 ** 64 - 1} exceeds the", "limit"]),
        (size, [f"header length {size} exceeds the", "limit"]),  # past the end of the file (and the cap)
        (0, ["header length 0 does not fit in the file"]),
        (hlen - 100, ["header is not a JSON object"]),  # cuts the JSON short
        (hlen + 100, ["run past the end of the file"]),  # swallows 100 data bytes: the last tensor is short
    ]
    try:
        for field, needles in cases:
            write_variant(seeded_weights, bad, raw_header=raw, hlen_field=field)
            expect(detect(EXAMPLE, weights=bad), 2, str(bad), *needles)
        # a header length beyond a small file, within the cap
        with open(bad, "wb") as f:
            f.write(struct.pack("<Q", 4096) + b"{}")
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), "header length 4096 does not fit in the file (10 bytes)")
        # a JSON array, and a duplicate tensor name
        write_variant(seeded_weights, bad, raw_header=b"[1, 2, 3]       ")
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), "header is not a JSON object")
        a = same_size_pair(header)[1]
        text = raw.decode().rstrip()
        i = text.index(f'"{a}":')
        j = text.index("}", i) + 1
        dup = (text[:j] + "," + text[i:j] + text[j:]).encode()
        write_variant(seeded_weights, bad, raw_header=dup + b" " * (-(8 + len(dup)) % 8))
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), f'tensor "{a}" appears twice in the header')
    finally:
        if bad.exists():
            bad.unlink()


# ---- weights: tensor edits through safetensors_io ---------------------------

@pytest.fixture(scope="module")
def tensors(seeded_weights):
    return safetensors_io.load(seeded_weights)


def _save_variant(tensors, path, change):
    t, meta = tensors
    d = dict(t)
    change(d)
    safetensors_io.save(d, path, meta)
    return path


def test_missing_tensor(tmp_path, tensors):
    name = "backbone.res4.7.conv2.weight"
    bad = _save_variant(tensors, tmp_path / "missing.safetensors", lambda d: d.pop(name))
    try:
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), f'tensor "{name}" is missing')
    finally:
        bad.unlink()


def test_shape_mismatch(tmp_path, tensors):
    name = "backbone.res4.7.conv2.weight"
    bad = _save_variant(tensors, tmp_path / "shape.safetensors", lambda d: d.__setitem__(name, d[name][:, :, :2, :]))
    try:
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), f'tensor "{name}" has shape [256,256,2,3]',
               "the config needs [256,256,3,3]")
        # a linear layer's rows and columns exchanged
        name = "box_predictor.cls_score.weight"
        _save_variant(tensors, bad, lambda d: d.__setitem__(name, np.ascontiguousarray(d[name].T)))
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), f'tensor "{name}" has shape [1024,81]', "[81,1024]")
    finally:
        bad.unlink()


def test_extra_tensor_is_a_warning(tmp_path, tensors, small_png):
    """A tensor the config does not use: loads, runs, one warning naming it, exit 0."""
    bad = _save_variant(tensors, tmp_path / "extra.safetensors",
                        lambda d: d.__setitem__("extra.unused.weight", np.ones((3, 4), np.float32)))
    out = tmp_path / "out.json"
    try:
        r = detect("--json", out, small_png, weights=bad)
        expect(r, 0, "warning", str(bad), "not used by this config", "extra.unused.weight")
        assert [im["file"] for im in json.loads(out.read_text())["images"]] == [str(small_png)]
    finally:
        bad.unlink()


# The policy: a NaN or Inf anywhere in a weight the model uses is refused at
# load (exit 2) with one line naming the tensor's layer (the tensor's name
# without ".weight"/".bias"/".norm.*": a prefix of the tensor name) and the
# kind of value; a running variance names the tensor itself.
NONFINITE_CASES = [
    ("backbone.res3.1.conv1.weight", np.nan, "backbone.res3.1.conv1", "NaN"),
    ("rpn.conv.bias", np.inf, "rpn.conv", "Inf"),
    ("mask_head.logits.weight", -np.inf, "mask_head.logits", "Inf"),
    ("box_head.fc6.weight", np.nan, "box_head.fc6", "NaN"),
    ("backbone.res2.0.conv1.norm.running_mean", np.nan, "backbone.res2.0.conv1", "NaN"),
    ("backbone.res2.0.conv1.norm.running_var", np.inf, "backbone.res2.0.conv1.norm.running_var", ""),
]


@pytest.mark.parametrize("name, value, named, kind", NONFINITE_CASES, ids=[c[0] for c in NONFINITE_CASES])
def test_nonfinite_weights_refused(tmp_path, tensors, name, value, named, kind):
    assert name.startswith(named)

    def poison(d):
        a = d[name].copy()
        a.reshape(-1)[a.size // 2] = value
        d[name] = a

    bad = _save_variant(tensors, tmp_path / "nonfinite.safetensors", poison)
    try:
        expect(detect(EXAMPLE, weights=bad), 2, str(bad), f'"{named}', kind)
    finally:
        bad.unlink()


def test_weights_not_a_file(tmp_path):
    expect(detect(EXAMPLE, weights=tmp_path), 2, str(tmp_path), "not a regular file")
    expect(detect(EXAMPLE, weights=tmp_path / "nope.safetensors"), 2, "nope.safetensors", "cannot open")


# ---- configs -----------------------------------------------------------------

CONFIG_CASES = [
    # wrong types
    ("int-as-string", '{"input": {"min_size": "800"}}', ["input.min_size: expected an integer, got a string"]),
    ("int-with-fraction", '{"input": {"min_size": 800.5}}', ["input.min_size: expected an integer, got 800.5"]),
    ("bool-as-number", '{"backbone": {"stride_in_1x1": 0}}', ["backbone.stride_in_1x1: expected true or false"]),
    ("array-as-object", '{"anchors": {"sizes": {"a": 1}}}', ["anchors.sizes: expected an array", "got an object"]),
    ("name-as-number", '{"classes": {"num_classes": 2, "class_names": ["bg", 3]}}',
     ["classes.class_names[1]: expected a string, got a number"]),
    ("section-as-number", '{"rpn": 5}', ["rpn: expected an object, got a number"]),
    ("section-null", '{"rpn": null}', ["rpn: expected an object, got null"]),
    ("top-level-array", "[1, 2]", ["expected a JSON object at the top level, got an array"]),
    # unknown and duplicate keys
    ("unknown-section", '{"inptu": {}}', ['unknown key "inptu"', 'did you mean "input"']),
    ("unknown-key", '{"input": {"min_sise": 800}}', ['unknown key "input.min_sise"', 'did you mean "input.min_size"']),
    ("unknown-far-key", '{"rpn": {"zzzzzzzz": 1}}', ['unknown key "rpn.zzzzzzzz"']),
    ("duplicate-key", '{"rpn": {"nms_thresh": 0.5, "nms_thresh": 0.6}}', ['duplicate key "rpn.nms_thresh"']),
    # out of range
    ("negative-size", '{"input": {"min_size": -1}}', ["input.min_size: expected an integer in [1,65536], got -1"]),
    ("zero-size", '{"input": {"max_size": 0}}', ["input.max_size: expected an integer in [1,65536], got 0"]),
    ("huge-size", '{"input": {"min_size": 1e300}}', ["input.min_size", "got 1e+300"]),
    ("zero-max-image-side", '{"input": {"max_image_side": 0}}', ["input.max_image_side", "got 0"]),
    ("negative-std", '{"input": {"pixel_std": [0.2, -0.2, 0.2]}}', ["input.pixel_std[1]", "got -0.2"]),
    ("zero-classes", '{"classes": {"num_classes": 0}}', ["classes.num_classes: expected an integer in [2,", "got 0"]),
    ("one-class", '{"classes": {"num_classes": 1}}', ["classes.num_classes", "got 1"]),
    ("threshold-below-0", '{"rpn": {"nms_thresh": -0.1}}', ["rpn.nms_thresh: expected a number in [0,1], got -0.1"]),
    ("threshold-above-1", '{"box_head": {"score_thresh": 1.01}}', ["box_head.score_thresh", "[0,1], got 1.01"]),
    ("mask-threshold-2", '{"mask_head": {"threshold": 2}}', ["mask_head.threshold", "got 2"]),
    ("zero-detections", '{"box_head": {"detections_per_image": 0}}', ["box_head.detections_per_image", "got 0"]),
    ("depth-34", '{"backbone": {"depth": 34}}', ["backbone.depth: expected 50, 101 or 152, got 34"]),
    ("min-above-max", '{"input": {"min_size": 600, "max_size": 500}}', ["input.min_size: 600 is larger than input.max_size 500"]),
    ("fpn-levels-reversed", '{"fpn": {"min_level": 5, "max_level": 3}}', ["fpn.min_level: 5 is above fpn.max_level 3"]),
    # malformed text
    ("trailing-comma", '{"rpn": {"nms_thresh": 0.7,}}', ["malformed JSON at line 1, column 29"]),
    ("unclosed", '{\n  "input": {\n    "min_size": 800\n  \n', ["malformed JSON at line 5"]),
    ("trailing-garbage", "{} x", ["malformed JSON at line 1, column 4"]),
    ("nan-literal", '{"rpn": {"nms_thresh": NaN}}', ["malformed JSON"]),
    ("empty-file", "", ["is empty, not a JSON config"]),
    ("only-whitespace", "   \n", ["malformed JSON"]),
    ("nul-byte", '{"rpn": {}}\x00', ["contains a NUL byte at byte 11"]),
]


@pytest.mark.parametrize("text, needles", [c[1:] for c in CONFIG_CASES], ids=[c[0] for c in CONFIG_CASES])
def test_bad_config(tmp_path, seeded_weights, text, needles):
    cfg = tmp_path / "bad.json"
    cfg.write_text(text)
    expect(detect(EXAMPLE, config=cfg, weights=seeded_weights), 2, str(cfg), *needles)


def test_config_not_a_file(tmp_path, seeded_weights):
    d = tmp_path / "dir.json"
    d.mkdir()
    expect(detect(EXAMPLE, config=d, weights=seeded_weights), 2, str(d), "cannot read: Is a directory")
    m = tmp_path / "missing.json"
    expect(detect(EXAMPLE, config=m, weights=seeded_weights), 2, str(m), "cannot open: No such file or directory")
    link = tmp_path / "broken.json"
    link.symlink_to(tmp_path / "nowhere.json")
    expect(detect(EXAMPLE, config=link, weights=seeded_weights), 2, str(link), "cannot open")


# ---- images --------------------------------------------------------------------

def png_chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def handmade_png(w, h, rows=b"", depth=8, colour=2):
    """A PNG written byte by byte (Pillow refuses to write a zero-sized one)."""
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, colour, 0, 0, 0))
            + png_chunk(b"IDAT", zlib.compress(rows)) + png_chunk(b"IEND", b""))


def skimage_truncated_jpeg():
    try:
        import skimage
        p = os.path.join(skimage.data_dir, "truncated.jpg")
    except ImportError:
        p = "/usr/lib/python3/dist-packages/skimage/data/truncated.jpg"
    if not os.path.exists(p):
        pytest.skip("skimage's data/truncated.jpg is not installed (python3-skimage)")
    return p


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    photo = Image.open(EXAMPLE).convert("RGB").resize((64, 48))
    photo.save(d / "ok.png")
    photo.save(d / "ok.jpg", quality=90)
    png, jpg = (d / "ok.png").read_bytes(), (d / "ok.jpg").read_bytes()
    files = {
        "zero.png": handmade_png(0, 0),
        "zero-width.png": handmade_png(0, 10),
        "cut-half.png": png[: len(png) // 2],
        "cut-in-header.png": png[:20],
        "cut-signature.png": png[:8],
        "bad-crc.png": png[:30] + bytes([png[30] ^ 0xFF]) + png[31:],
        "no-palette.png": handmade_png(4, 4, b"\0" * 20, colour=3),
        "bad-depth.png": handmade_png(4, 4, depth=3),
        "bomb.png": handmade_png(20000, 20000, b"\0" + b"\x80" * 600),
        "cut-half.jpg": jpg[: len(jpg) // 2],
        "cut-3.jpg": jpg[:3],
        "garbage.jpg": b"\xff\xd8\xff" + np.random.default_rng(7).integers(0, 256, 300, dtype=np.uint8).tobytes(),
        "text.png": b"this is not an image\n",
        "gif.png": b"GIF89a" + bytes(100),
        "empty.png": b"",
    }
    for name, data in files.items():
        (d / name).write_bytes(data)
    # a BMP (read since issue 47) whose RLE8 compression is refused by name: compression is at 30
    Image.new("L", (10, 10)).convert("P").save(d / "bmp-rle.png", format="BMP")
    rle = bytearray((d / "bmp-rle.png").read_bytes())
    rle[30] = 1
    (d / "bmp-rle.png").write_bytes(bytes(rle))
    Image.new("RGB", (1, 1), (200, 30, 30)).save(d / "one.png")
    for w, h in [(100000, 1), (1, 100000), (20000, 1), (1, 20000), (2000, 3)]:
        Image.new("RGB", (w, h), (90, 90, 90)).save(d / f"{h}x{w}.png")
    Image.new("RGB", (101, 50), (90, 90, 90)).save(d / "101-wide.png")
    (d / "broken-link.png").symlink_to(d / "nowhere.png")
    return d


IMAGE_CASES = [
    ("zero.png", ["PNG has zero size (0x0)"]),
    ("zero-width.png", ["PNG has zero size"]),
    ("cut-half.png", ["truncated PNG"]),
    ("cut-in-header.png", ["truncated PNG"]),
    ("cut-signature.png", ["truncated PNG"]),
    ("bad-crc.png", ["corrupt PNG", "CRC"]),
    ("no-palette.png", ["corrupt PNG", "PLTE"]),
    ("bad-depth.png", ["corrupt PNG"]),
    ("bomb.png", ["corrupt PNG"]),  # 20000x20000 declared, 600 bytes of pixels
    ("cut-half.jpg", ["truncated JPEG"]),
    ("cut-3.jpg", ["truncated JPEG"]),
    ("garbage.jpg", ["corrupt JPEG"]),
    ("text.png", ["not an image"]),
    ("gif.png", ["corrupt GIF"]),
    ("bmp-rle.png", ["RLE-compressed BMP: not supported; convert it to PNG"]),
    ("empty.png", ["empty file"]),
    ("broken-link.png", ["cannot open: a dangling symbolic link"]),
    ("1x100000.png", ["1x100000 (HxW)", "input.max_image_side"]),
    ("100000x1.png", ["100000x1 (HxW)", "input.max_image_side"]),
]


@pytest.mark.parametrize("name, needles", IMAGE_CASES, ids=[c[0] for c in IMAGE_CASES])
def test_bad_image(images, seeded_weights, name, needles):
    expect(detect(images / name, weights=seeded_weights), 1, str(images / name), *needles)


ELONGATED = ["1x20000.png", "20000x1.png", "3x2000.png"]


@pytest.mark.parametrize("name", ELONGATED)
def test_image_degenerate_after_resize(images, seeded_weights, name):
    """Within max_image_side, but the short side resizes to 0 px: an error naming the file."""
    expect(detect(images / name, weights=seeded_weights), 1, str(images / name), "too elongated", "would resize to")


def test_truncated_jpeg_from_skimage(seeded_weights):
    p = skimage_truncated_jpeg()
    expect(detect(p, weights=seeded_weights), 1, p, "truncated JPEG")


def test_beyond_max_image_side(tmp_path, images, seeded_weights):
    cfg = tmp_path / "max100.json"
    cfg.write_text('{"input": {"min_size": 320, "max_size": 512, "max_image_side": 100}}')
    p = images / "101-wide.png"
    expect(detect(p, config=cfg, weights=seeded_weights), 1, str(p), "50x101 (HxW)",
           "limit of 100 pixels a side (input.max_image_side)")


def test_one_pixel_image(tmp_path, images, seeded_weights):
    out = tmp_path / "one.json"
    r = detect("--json", out, images / "one.png", weights=seeded_weights)
    assert r.returncode == 0 and not lines_of(r), r.stderr
    im = json.loads(out.read_text())["images"][0]
    assert (im["width"], im["height"]) == (1, 1)
    for d in im["detections"]:
        assert d["mask"]["size"] == [1, 1]
        x1, y1, x2, y2 = d["box"]
        assert 0 <= x1 <= x2 <= 1 and 0 <= y1 <= y2 <= 1


def test_unreadable_files(seeded_weights):
    """Files that exist but cannot be read, even by root."""
    p = "/proc/sys/vm/drop_caches"  # mode 0200: reading is refused to root too
    if os.path.exists(p):
        expect(detect(p, weights=seeded_weights), 1, p, "cannot open", "Permission denied")
    p = "/proc/self/mem"  # opens, but reading offset 0 fails (EIO)
    expect(detect(p, weights=seeded_weights), 1, p, "read error")


def test_folder_named_like_an_image(tmp_path, seeded_weights):
    """A directory x.png is a folder input (walked), not an unreadable image."""
    d = tmp_path / "x.png"
    d.mkdir()
    expect(detect(d, weights=seeded_weights), 2, "no input images")


def test_bad_images_in_one_batch(images, seeded_weights):
    """All the bad images and one good one in a single run: each bad one named once, exit 1."""
    bad = [images / n for n, _ in IMAGE_CASES]
    r = detect(images / "one.png", *bad, weights=seeded_weights)
    assert r.returncode == 1
    lines = lines_of(r)
    assert len(lines) == len(bad), r.stderr
    for p in bad:
        assert sum(1 for l in lines if f"{p}:" in l) == 1, f"{p} not named exactly once:\n{r.stderr}"


# ---- outputs -------------------------------------------------------------------

def test_output_folder_under_a_file(tmp_path, small_png, seeded_weights):
    f = tmp_path / "file"
    f.write_text("x")
    expect(detect("--output", f / "sub", small_png, weights=seeded_weights), 2, str(f / "sub"),
           "cannot create output folder", "Not a directory")
    expect(detect("--json", f / "all.json", small_png, weights=seeded_weights), 2, str(f / "all.json"),
           "cannot write", "Not a directory")
    expect(detect("--output", "/proc/x", small_png, weights=seeded_weights), 2, "/proc/x", "cannot create output folder")
    expect(detect("--json", "/proc/x/all.json", small_png, weights=seeded_weights), 2, "/proc/x/all.json", "cannot write")


@pytest.mark.parametrize("option", ["--coco-results", "--profile-json"])
def test_unwritable_run_documents_fail_at_setup(tmp_path, small_png, seeded_weights, option):
    f = tmp_path / "file"
    f.write_text("x")
    expect(detect(option, f / "out.json", small_png, weights=seeded_weights), 2, str(f / "out.json"), "Not a directory")


@pytest.mark.parametrize("option", ["--json", "--coco-results"])
def test_full_disk(tmp_path, images, small_png, seeded_weights, option):
    """/dev/full: the write failure is named, exit 1, and the images are still processed."""
    vis = tmp_path / "vis"
    r = detect(option, "/dev/full", "--output", vis, small_png, images / "text.png", weights=seeded_weights)
    assert r.returncode == 1, r.stderr
    lines = lines_of(r)
    assert len(lines) == 2, r.stderr
    assert str(images / "text.png") in lines[0] and "not an image" in lines[0]
    assert "/dev/full" in lines[1] and "write failed" in lines[1] and "No space left on device" in lines[1]
    assert sorted(os.listdir(vis)) == ["good.json", "good.png"]
    doc = json.loads((vis / "good.json").read_text())
    assert [im["file"] for im in doc["images"]] == [str(small_png)]


def test_output_file_blocked_by_a_folder(tmp_path, images, small_png, seeded_weights):
    """NAME.png already exists as a folder: that image fails by name, the others complete, no temporary left."""
    vis = tmp_path / "vis"
    (vis / "good.png").mkdir(parents=True)
    r = detect("--output", vis, small_png, images / "one.png", weights=seeded_weights)
    expect(r, 1, str(vis / "good.png"), "Is a directory")
    assert sorted(os.listdir(vis)) == ["good.png", "one.json", "one.png"]
    assert (vis / "good.png").is_dir() and not os.listdir(vis / "good.png")
