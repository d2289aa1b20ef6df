"""models/convert.py and models/safetensors_io.py against real torch.save() files.

Run with Debian's Python: /usr/bin/python3 -m pytest -q tests/parity/test_convert.py
The name mapping below is written out independently of convert.py's rule table.
"""

import argparse
import collections
import hashlib
import json
import os
import pickle
import re
import struct
import subprocess
import sys
import zipfile

import numpy as np
import pytest

from conftest import drop_unless_failed

torch = pytest.importorskip("torch")
pytest.importorskip("torchvision")

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CONVERT = os.path.join(REPO, "models", "convert.py")
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(REPO, "models"))
import oracle  # noqa: E402
import safetensors_io  # noqa: E402


def canonical_name(tv):
    """torchvision 0.14 state_dict name -> canonical name (models/README.md table)."""
    m = re.fullmatch(r"backbone\.body\.(.*)", tv)
    if m:
        s = m.group(1)
        if s == "conv1.weight":
            return "backbone.stem.conv.weight"
        if s.startswith("bn1."):
            return "backbone.stem.norm." + s[4:]
        layer, block, rest = re.fullmatch(r"layer(\d)\.(\d+)\.(.*)", s).groups()
        p = f"backbone.res{int(layer) + 1}.{block}."
        if rest.startswith("downsample.0."):
            return p + "shortcut." + rest[len("downsample.0."):]
        if rest.startswith("downsample.1."):
            return p + "shortcut.norm." + rest[len("downsample.1."):]
        if rest.startswith("conv"):
            return p + rest
        k, param = re.fullmatch(r"bn(\d)\.(.*)", rest).groups()
        return p + f"conv{k}.norm.{param}"
    m = re.fullmatch(r"backbone\.fpn\.(inner|layer)_blocks\.(\d)\.0\.(weight|bias)", tv)
    if m:
        kind = "lateral" if m.group(1) == "inner" else "output"
        return f"fpn.{kind}{int(m.group(2)) + 2}.{m.group(3)}"
    m = re.fullmatch(r"roi_heads\.mask_head\.(\d)\.0\.(weight|bias)", tv)
    if m:
        return f"mask_head.fcn{int(m.group(1)) + 1}.{m.group(2)}"
    fixed = {
        "rpn.head.conv.0.0.": "rpn.conv.",
        "rpn.head.cls_logits.": "rpn.objectness.",
        "rpn.head.bbox_pred.": "rpn.deltas.",
        "roi_heads.box_head.": "box_head.",
        "roi_heads.box_predictor.": "box_predictor.",
        "roi_heads.mask_predictor.conv5_mask.": "mask_head.deconv.",
        "roi_heads.mask_predictor.mask_fcn_logits.": "mask_head.logits.",
    }
    for a, b in fixed.items():
        if tv.startswith(a):
            return b + tv[len(a):]
    raise KeyError(tv)


def legacy_name(tv):
    """torchvision 0.14 name -> the pre-0.13 name of the same tensor (or itself)."""
    tv = re.sub(r"^rpn\.head\.conv\.0\.0\.", "rpn.head.conv.", tv)
    tv = re.sub(r"^roi_heads\.mask_head\.(\d)\.0\.",
                lambda m: f"roi_heads.mask_head.mask_fcn{int(m.group(1)) + 1}.", tv)
    tv = re.sub(r"^backbone\.fpn\.(inner|layer)_blocks\.(\d)\.0\.", r"backbone.fpn.\1_blocks.\2.", tv)
    return tv


def run_convert(src, dst, *extra):
    return subprocess.run([sys.executable, CONVERT, str(src), str(dst), *extra],
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def work(request, tmp_path_factory):
    torch.set_num_threads(2)
    d = tmp_path_factory.mktemp("convert")
    model = oracle.build_model(seed=3, num_classes=81)
    sd = model.state_dict()
    pth = d / "model.pth"
    torch.save(sd, pth)
    out = d / "model.safetensors"
    r = run_convert(pth, out, "-q")
    assert r.returncode == 0, r.stderr
    yield dict(dir=d, sd=sd, pth=pth, out=out)
    drop_unless_failed(request, d)


def assert_same_as_source(tensors, sd):
    want = {canonical_name(k): v.numpy() for k, v in sd.items()}
    assert sorted(tensors) == sorted(want)
    for k, a in tensors.items():
        assert a.dtype == np.float32 and a.shape == want[k].shape, k
        assert np.array_equal(a, want[k]), k


def test_convert_exact(work):
    tensors, meta = safetensors_io.load(work["out"])
    assert_same_as_source(tensors, work["sd"])
    assert len(tensors) == 562
    names81 = meta.pop("class_names")
    assert meta == {
        "format": "detect-maskrcnn", "format_version": "1", "source_format": "torchvision",
        "source_sha256": hashlib.sha256(work["pth"].read_bytes()).hexdigest(),
        "num_classes": "81", "depth": "101", "num_groups": "1", "width_per_group": "64",
        "stem_out_channels": "64", "res2_out_channels": "256", "norm": "batchnorm",
        "norm_eps": "1e-05", "suggested_config": "configs/mask_rcnn_R-101-FPN_torchvision.json",
        "architecture": "classic", "fpn_norm": "none", "rpn_num_convs": "1", "box_head_num_convs": "0",
        "box_head_num_fcs": "2", "box_head_fc_dim": "1024", "box_head_norm": "none", "mask_head_norm": "none",
        "box_head_class_agnostic": "false", "mask_head_class_agnostic": "false",
    }
    names = json.loads(names81)
    assert len(names) == 81 and names[:3] == ["__background__", "person", "bicycle"]
    # File layout: data section 8-aligned, tensors in canonical (stem -> mask head) order.
    with open(work["out"], "rb") as f:
        (n,) = struct.unpack("<Q", f.read(8))
    assert (8 + n) % 8 == 0
    names = list(tensors)
    assert names[0] == "backbone.stem.conv.weight" and names[-1] == "mask_head.logits.bias"
    # The oracle's in-memory export goes through the same mapping: identical tensors.
    direct = work["dir"] / "direct.safetensors"
    model = oracle.build_model(seed=3)
    oracle.export_weights(model, direct)
    t2, m2 = safetensors_io.load(direct)
    assert list(t2) == names and all(np.array_equal(t2[k], tensors[k]) for k in names)
    assert m2["depth"] == "101" and m2["num_classes"] == "81"


def test_pickle_globals_of_real_file(work):
    """Documents what torch.save actually emits for a state dict (the reader's allow-list)."""
    import pickletools
    with zipfile.ZipFile(work["pth"]) as z:
        pkl = [n for n in z.namelist() if n.endswith("/data.pkl")]
        ops = list(pickletools.genops(z.read(pkl[0])))
    globs = {arg for op, arg, _ in ops if op.name in ("GLOBAL", "STACK_GLOBAL")}
    assert globs == {"collections OrderedDict", "torch._utils _rebuild_tensor_v2", "torch FloatStorage"}


def test_legacy_names_and_wrappers(work):
    d, sd = work["dir"], work["sd"]
    legacy = {legacy_name(k): v for k, v in sd.items()}
    assert sum(a != b for a, b in zip(legacy, sd)) == 2 + 8 + 16  # rpn conv, mask fcn, fpn
    expected, _ = safetensors_io.load(work["out"])

    # (1) legacy names, zip format, plain state dict
    p1, o1 = d / "legacy_names.pth", d / "legacy_names.safetensors"
    torch.save(legacy, p1)
    r = run_convert(p1, o1)
    assert r.returncode == 0, r.stderr
    t1, _ = safetensors_io.load(o1)
    assert list(t1) == list(expected) and all(np.array_equal(t1[k], expected[k]) for k in t1)

    # (2) legacy names + {'model': ...} wrapper + DataParallel prefix + pre-1.6 serialization
    wrapped = {"model": {"module." + k: v for k, v in legacy.items()}, "iteration": 90000}
    p2, o2 = d / "legacy_format.pth", d / "legacy_format.safetensors"
    torch.save(wrapped, p2, _use_new_zipfile_serialization=False)
    assert not zipfile.is_zipfile(p2)
    r = run_convert(p2, o2)
    assert r.returncode == 0, r.stderr
    t2, _ = safetensors_io.load(o2)
    assert list(t2) == list(expected) and all(np.array_equal(t2[k], expected[k]) for k in t2)
    os.unlink(o1)
    os.unlink(o2)


def assert_fails(src, dst, *patterns):
    r = run_convert(src, dst)
    assert r.returncode == 2, (r.returncode, r.stdout, r.stderr)
    err = r.stderr
    assert err.endswith("\n") and err.count("\n") == 1, repr(err)
    assert err.startswith(f"convert.py: {src}: "), err
    for p in patterns:
        assert re.search(p, err), (p, err)
    assert not os.path.exists(dst)
    leftovers = [n for n in os.listdir(os.path.dirname(dst)) if n.startswith(os.path.basename(dst))]
    assert not leftovers, leftovers
    return err


def test_errors(work):
    d, sd = work["dir"], work["sd"]
    dst = str(d / "err.safetensors")

    extra = dict(sd)
    extra["roi_heads.box_head.fc8.weight"] = torch.zeros(3)
    torch.save(extra, d / "extra.pth")
    assert_fails(str(d / "extra.pth"), dst, r"unknown", re.escape("roi_heads.box_head.fc8.weight"))

    missing = {k: v for k, v in sd.items() if k != "backbone.body.layer3.7.conv2.weight"}
    torch.save(missing, d / "missing.pth")
    assert_fails(str(d / "missing.pth"), dst, r"missing",
                 re.escape("backbone.res4.7.conv2.weight"), re.escape("backbone.body.layer3.7.conv2.weight"))

    bad_shape = dict(sd)
    bad_shape["roi_heads.box_predictor.bbox_pred.bias"] = torch.zeros(320)
    torch.save(bad_shape, d / "shape.pth")
    assert_fails(str(d / "shape.pth"), dst, re.escape("box_predictor.bbox_pred.bias"), r"\[320\]", r"324")

    data = work["pth"].read_bytes()
    (d / "trunc.pth").write_bytes(data[: len(data) // 2])
    assert_fails(str(d / "trunc.pth"), dst, r"truncated")
    small = {k: v for k, v in list(sd.items())[:40]}
    torch.save(small, d / "legacy.pth", _use_new_zipfile_serialization=False)
    ldata = (d / "legacy.pth").read_bytes()
    (d / "trunc_legacy.pth").write_bytes(ldata[: len(ldata) - 1000])
    assert_fails(str(d / "trunc_legacy.pth"), dst, r"truncated")

    (d / "garbage.pth").write_bytes(np.random.RandomState(0).bytes(4096))
    assert_fails(str(d / "garbage.pth"), dst, r"not a torch\.save\(\) file")
    assert_fails(str(d / "does_not_exist.pth"), dst, r"cannot read")


def test_refuses_foreign_pickle_globals(work, tmp_path):
    """A pickle that would call os.system never runs it: find_class hands out an inert stand-in."""
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (os.system, (f"touch {marker}",))

    evil = tmp_path / "evil.pth"
    with zipfile.ZipFile(evil, "w") as z:
        z.writestr("archive/data.pkl", pickle.dumps({"x": Evil()}, protocol=2))
    assert_fails(str(evil), str(tmp_path / "o.safetensors"), r"(posix|os|nt)\.system")
    assert not marker.exists()

    # Outside the weights (a training script's args, an LR scheduler) such globals become inert
    # placeholders: never called, reported, and the weights still convert.
    ns = tmp_path / "namespace.pth"
    sd = dict(work["sd"])
    torch.save({"model": sd, "args": argparse.Namespace(lr=1), "evil": Evil()}, ns)
    r = run_convert(ns, tmp_path / "ns.safetensors")
    assert r.returncode == 0, r.stderr
    assert "argparse.Namespace" in r.stdout and "system" in r.stdout and "args, evil" in r.stdout
    assert not marker.exists()
    t, _ = safetensors_io.load(tmp_path / "ns.safetensors")
    assert_same_as_source(t, work["sd"])
    # ... but a weight that is such an object is an error naming it
    sd["backbone.body.conv1.weight"] = argparse.Namespace(lr=1)
    torch.save(sd, ns)
    assert_fails(str(ns), str(tmp_path / "o.safetensors"), r"backbone\.body\.conv1\.weight \(argparse\.Namespace")
    assert not marker.exists()


def test_f16(work):
    out = work["dir"] / "model_f16.safetensors"
    r = run_convert(work["pth"], out, "--dtype", "f16")
    assert r.returncode == 0, r.stderr
    hdr, _, _ = safetensors_io.read_header(out)
    assert {e["dtype"] for e in hdr.values()} == {"F16"}
    tensors, meta = safetensors_io.load(out)
    assert meta["depth"] == "101"
    for k, v in work["sd"].items():
        a = tensors[canonical_name(k)]
        assert a.dtype == np.float16 and np.array_equal(a, v.numpy().astype(np.float16)), k
    os.unlink(out)


def test_safetensors_roundtrip(tmp_path):
    t = {
        "f32": np.arange(6, dtype=np.float32).reshape(2, 3),
        "f16": np.array([1.5, -2, 65504], np.float16),  # odd byte count before the rest
        "i64": np.array([1, -2], np.int64),
        "i32": np.array([[7]], np.int32),
        "u8": np.arange(5, dtype=np.uint8),
        "bool": np.array([True, False]),
        "empty": np.zeros((0, 4), np.float32),
        "f64": np.array([np.pi]),
    }
    p = tmp_path / "t.safetensors"
    safetensors_io.save(t, p, {"k": "v"})
    hdr, meta, start = safetensors_io.read_header(p)
    assert start % 8 == 0 and meta == {"k": "v"}
    for e in hdr.values():  # each tensor aligned to its element size
        size = {"F64": 8, "I64": 8, "F32": 4, "I32": 4, "F16": 2}.get(e["dtype"], 1)
        assert e["data_offsets"][0] % size == 0
    r, m = safetensors_io.load(p)
    assert m == {"k": "v"} and set(r) == set(t)
    for k in t:
        assert r[k].dtype == t[k].dtype and r[k].shape == t[k].shape and np.array_equal(r[k], t[k]), k
    data = p.read_bytes()
    (tmp_path / "short.safetensors").write_bytes(data[:-3])
    with pytest.raises(safetensors_io.SafetensorsError, match="truncated|trailing|beyond"):
        safetensors_io.load(tmp_path / "short.safetensors")


# ---- found by tests/fuzz/fuzz_convert.py ------------------------------------------------

import convert  # noqa: E402


def _legacy_pickles(data):
    """The legacy stream's five pickles as (start, end) offsets; raw storage data follows."""
    import pickletools
    bounds, pos = [], 0
    for _ in range(5):
        for op, _, p in pickletools.genops(data[pos:]):
            end = pos + p + 1
        bounds.append((pos, end))
        pos = end
    return bounds


def test_huge_memo_index_is_refused(tmp_path):
    """A LONG_BINPUT of 2**32-1 made the C unpickler size its memo table by it: ~64 GB for a
    few bytes (a 1.26e9 index, as the fuzzer found it, zeroed 20 GB for a minute)."""
    bomb = b"\x80\x02}r\xff\xff\xff\xff."
    z = tmp_path / "memo_zip.pth"
    with zipfile.ZipFile(z, "w") as f:
        f.writestr("archive/data.pkl", bomb)
    legacy = tmp_path / "memo_legacy.pth"
    legacy.write_bytes(pickle.dumps(convert._LEGACY_MAGIC, protocol=2) + pickle.dumps(1001, protocol=2) + bomb)
    for p in (z, legacy):
        with pytest.raises(convert.ConvertError, match=r"malformed pickle \(memo index 4294967295 beyond the 2 ops before it, at byte 3\)"):
            convert.read_torch_checkpoint(str(p))
        assert_fails(str(p), str(tmp_path / "o.safetensors"), r"memo index")


def test_legacy_storage_without_data_is_refused(tmp_path):
    """A legacy file whose storage key list leaves out a storage the tensors use: the storage
    had no data to read, and materialising it raised TypeError ('NoneType' is not callable)."""
    p = tmp_path / "legacy.pth"
    torch.save({"a": torch.ones(3)}, p, _use_new_zipfile_serialization=False)
    data = p.read_bytes()
    (s, e) = _legacy_pickles(data)[4]
    p.write_bytes(data[:s] + pickle.dumps([], protocol=2))
    with pytest.raises(convert.ConvertError, match=r"malformed legacy checkpoint \(no data for storage"):
        convert.read_torch_checkpoint(str(p))
    assert_fails(str(p), str(tmp_path / "o.safetensors"), r"no data for storage")


def _rewrite_pickle(src, dst, edit):
    """Copies the torch.save zip `src` to `dst` with data.pkl passed through edit(bytes)."""
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for n in zin.namelist():
            body = zin.read(n)
            zout.writestr(n, edit(body) if n.endswith("/data.pkl") else body)


def _insert_after(pkl, pred, snippet):
    """pkl with `snippet` inserted after the last op for which pred(op name, arg) holds."""
    import pickletools
    ops = list(pickletools.genops(pkl))
    i = max(j for j, (op, arg, _) in enumerate(ops) if pred(op.name, arg))
    return pkl[:ops[i + 1][2]] + snippet + pkl[ops[i + 1][2]:]


def test_pickle_build_cannot_change_the_reader(tmp_path):
    """BUILD (set an object's attributes) on what the unpickler returned: on torch.FloatStorage
    it changed the storage type for every later file in the process; on a tensor, its checked
    shape (np.dtype(1) and friends then raised TypeError outside the reader); on a state dict,
    an attribute `values` shadowed the method and convert.py died with a traceback."""
    src = tmp_path / "t.pth"
    torch.save({"a": torch.ones(2)}, src)
    set_dtype = b"}X\x05\x00\x00\x00dtypeK\x01sb"
    cases = {
        "storage_type": lambda p: _insert_after(p, lambda op, arg: arg == "torch FloatStorage", set_dtype),
        "function": lambda p: _insert_after(p, lambda op, arg: arg == "torch._utils _rebuild_tensor_v2", set_dtype),
        "tensor": lambda p: _insert_after(p, lambda op, arg: op == "REDUCE", b"}X\x05\x00\x00\x00shapeK\x01sb"),
        "storage": lambda p: _insert_after(p, lambda op, arg: op == "BINPERSID", b"}X\x05\x00\x00\x00numelK\x01sb"),
    }
    for name, edit in cases.items():
        p = tmp_path / f"build_{name}.pth"
        _rewrite_pickle(src, p, edit)
        with pytest.raises(convert.ConvertError, match=r"pickle sets attributes of (torch\.|a tensor|a torch)"):
            convert.read_torch_checkpoint(str(p))
        assert convert._STORAGE_TYPES["FloatStorage"].dtype == np.dtype("<f4"), name
    assert_fails(str(tmp_path / "build_tensor.pth"), str(tmp_path / "o.safetensors"), r"sets attributes")

    # A module's state_dict() pickles its _metadata with BUILD: still read, and ignored.
    sd_path = tmp_path / "sd.pth"
    torch.save(torch.nn.BatchNorm2d(2).state_dict(), sd_path)
    shadow = tmp_path / "shadow.pth"
    def rename_metadata(pkl):
        assert b"\x09\x00\x00\x00_metadata" in pkl
        return pkl.replace(b"\x09\x00\x00\x00_metadata", b"\x06\x00\x00\x00values")

    _rewrite_pickle(sd_path, shadow, rename_metadata)
    for p in (sd_path, shadow):
        sd = convert.extract_state_dict(convert.read_torch_checkpoint(str(p)))
        assert sorted(sd) == ["bias", "num_batches_tracked", "running_mean", "running_var", "weight"]
    assert_fails(str(shadow), str(tmp_path / "o.safetensors"), r"unknown tensor name")


def test_huge_stride_is_refused():
    """A tensor record with a stride of 2**62 elements: numpy's as_strided raised OverflowError
    (strides in bytes are C longs) instead of convert.py's one-line error."""
    st = convert._Storage(convert._STORAGE_TYPES["FloatStorage"], 4, lambda: bytes(16))
    with pytest.raises(convert.ConvertError, match=r"out of range"):
        convert.TensorRef(st, 0, (2,), (1 << 62,))
    assert convert.TensorRef(st, 0, (2,), (2,)).numpy().shape == (2,)


# ---- bounded parsing (models/pickle_scan.py) -----------------------------------------

import pickle_scan  # noqa: E402

REGRESSIONS = os.path.join(REPO, "tests", "fuzz", "regressions", "convert")


def _peak_bytes(fn, *args):
    """(peak bytes Python allocated while fn ran, fn's result or its ConvertError)."""
    import tracemalloc
    tracemalloc.start()
    try:
        try:
            r = fn(*args)
        except convert.ConvertError as e:
            r = e
        return tracemalloc.get_traced_memory()[1], r
    finally:
        tracemalloc.stop()


def test_nested_frame_is_refused(tmp_path):
    """The convert fuzzer's 743-byte find (seed 1126204390): a FRAME opened inside a FRAME,
    then SETITEMS without a MARK.  The C unpickler read the second frame out of step with the
    ops, met a declared length of 2**63-1 and took 8.5 GB and 12-18 s before it said 'could not
    find MARK'.  Now the scan refuses it with a few KB."""
    src = os.path.join(REGRESSIONS, "nested-frame-8gib.pkl")
    assert os.path.getsize(src) == 743
    peak, r = _peak_bytes(convert.load_checkpoint, src)
    assert isinstance(r, convert.ConvertError), r
    assert str(r) == "malformed pickle (a frame begins inside another frame, at byte 30)"
    assert peak < 64 << 10, peak
    assert_fails(src, str(tmp_path / "o.safetensors"), r"a frame begins inside another frame")


def test_scan_passes_what_pickle_writes():
    """Every protocol's output for the shapes checkpoints hold (nested containers, recursive
    ones, which protocols 0 and 1 close with POP of a MARK, memo references, big bytes that
    protocol 4 and 5 write outside frames) passes the scan, which ends exactly at STOP."""
    looped = []
    looped.append(looped)
    boxed = ([],)
    boxed[0].append(boxed)
    shared = [1, 2]
    objs = [0, -5, 2 ** 100, 3.5, "z" * 70000, b"x" * 100000, bytearray(b"y" * 300000), None, True,
            [1, 2, 3], {"a": (1, 2, [3])}, {1, 2}, frozenset([3]), [[]] * 5, [shared, shared], looped, boxed,
            collections.OrderedDict(a=np.arange(5)), {"w": np.ones((3, 3), np.float32), "n": np.arange(70000)}]
    for proto in range(pickle.HIGHEST_PROTOCOL + 1):
        for o in objs:
            d = pickle.dumps(o, protocol=proto)
            assert pickle_scan.scan(d) == len(d), (proto, type(o))
            two = d + pickle.dumps(7, protocol=proto)
            assert pickle_scan.scan(two) == len(d)
            assert pickle_scan.scan(two, len(d)) == len(two)


# Malformed pickles, each with the rule that refuses it.  The FRAME ones are protocol 4.
_MALFORMED = {
    "unknown opcode 0xff, at byte 2": b"\x80\x02\xff.",
    "no STOP before the end of the data, at byte 3": b"\x80\x02N",
    "a frame begins inside another frame, at byte 11": b"\x80\x04\x95\x0b" + bytes(7) + b"\x95\x01" + bytes(7) + b"N.",
    "a frame declares 4096 bytes, 2 remain, at byte 2": b"\x80\x04\x95\x00\x10" + bytes(6) + b"N.",
    "BINUNICODE declares 3 bytes, 1 remain, at byte 11": b"\x80\x04\x95\x06" + bytes(7) + b"X\x03\x00\x00\x00a.",
    "BINBYTES8 declares 9223372036854775807 bytes, 1 remain, at byte 2":
        b"\x80\x04\x8e" + (2 ** 63 - 1).to_bytes(8, "little") + b".",
    "BYTEARRAY8 declares 4294967296 bytes, 0 remain, at byte 2": b"\x80\x05\x96" + (2 ** 32).to_bytes(8, "little"),
    "BINSTRING declares -1 bytes, at byte 2": b"\x80\x02T\xff\xff\xff\xff.",
    "GLOBAL argument without its newline, at byte 2": b"\x80\x02cos\nsystem",
    "memo index 7 beyond the 2 ops before it, at byte 3": b"\x80\x02Nq\x07.",
    "memo index 0 read before it is stored, at byte 2": b"\x80\x02h\x00.",
    "SETITEMS without its MARK, at byte 3": b"\x80\x02}u.",
    "APPENDS pops more than the stack holds, at byte 4": b"\x80\x02(Ne.",
    "TUPLE2 pops more than the stack holds, at byte 3": b"\x80\x02N\x86.",
    "STOP with more than one object on the stack, at byte 4": b"\x80\x02NN.",
    "STOP with more than one object on the stack, at byte 5": b"\x80\x02N(N.",
    "STOP pops more than the stack holds, at byte 3": b"\x80\x02(.",
}


# Those of _MALFORMED whose data ends before the pickle does (a file cut short): reported as
# truncated, the rest as malformed.
_TRUNCATED = {"no STOP before the end of the data, at byte 3", "a frame declares 4096 bytes, 2 remain, at byte 2",
              "BINBYTES8 declares 9223372036854775807 bytes, 1 remain, at byte 2",
              "BYTEARRAY8 declares 4294967296 bytes, 0 remain, at byte 2",
              "GLOBAL argument without its newline, at byte 2"}


def test_scan_refuses_malformed_pickles(tmp_path):
    """Each rule of pickle_scan on a pickle that breaks only it; through load_checkpoint too,
    as one ConvertError that says truncated where the data ends first."""
    assert _TRUNCATED < set(_MALFORMED)
    for why, data in _MALFORMED.items():
        with pytest.raises(pickle_scan.MalformedPickle) as e:
            pickle_scan.scan(data)
        assert str(e.value) == why, (why, data)
        truncated = why in _TRUNCATED
        assert isinstance(e.value, pickle_scan.TruncatedPickle) == truncated, why
        p = tmp_path / "m.pkl"
        p.write_bytes(data)
        kind = "truncated pickle data" if truncated else "malformed pickle"
        with pytest.raises(convert.ConvertError, match=re.escape(f"{kind} ({why})")):
            convert.load_checkpoint(str(p))


def _legacy_around(obj_pickle):
    """A legacy torch.save stream whose object pickle is obj_pickle and which has no storages."""
    return (pickle.dumps(convert._LEGACY_MAGIC, protocol=2) + pickle.dumps(1001, protocol=2)
            + pickle.dumps({"little_endian": True}, protocol=2) + obj_pickle + pickle.dumps([], protocol=2))


def test_parse_memory_is_bounded(tmp_path):
    """The densest pickles that pass the scan (an object per byte of pickle: empty sets, the
    largest, then dicts, lists, memo entries), read by each reader of load_checkpoint: the
    memory Python allocates stays within MAX_BYTES_PER_PICKLE_BYTE per byte of the file, plus
    a fixed 256 KB for the readers themselves."""
    n = 1 << 16
    dense = {  # what: (pickle, objects in the list it makes)
        "empty sets": (b"\x80\x04](" + b"\x8f" * n + b"e.", n),
        "empty dicts": (b"\x80\x04](" + b"}" * n + b"e.", n),
        "empty lists": (b"\x80\x04](" + b"]" * n + b"e.", n),
        "memo entries": (b"\x80\x04](" + b"N\x94" * (n // 2) + b"e.", n // 2),
        "references": (b"\x80\x04](]\x94" + b"h\x00" * (n // 2) + b"e.", n // 2 + 1),
    }
    for what, (pkl, count) in dense.items():
        z = tmp_path / "dense.pth"
        with zipfile.ZipFile(z, "w") as f:
            f.writestr("archive/data.pkl", pkl)
        legacy = tmp_path / "dense_legacy.pth"
        legacy.write_bytes(_legacy_around(pkl))
        plain = tmp_path / "dense.pkl"
        plain.write_bytes(pkl)
        for path in (plain, z, legacy):
            peak, r = _peak_bytes(convert.load_checkpoint, str(path))
            assert isinstance(r, tuple) and len(r[1]) == count, (what, path.name, r)
            bound = pickle_scan.MAX_BYTES_PER_PICKLE_BYTE * os.path.getsize(path) + (256 << 10)
            assert peak <= bound, (what, path.name, peak, bound)


def test_zip_expansion_is_bounded(tmp_path):
    """A deflated member of 64 MB of zeros is a 64 KB archive: its declared size is refused
    before anything is inflated."""
    z = tmp_path / "bomb.pth"
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as f:
        f.writestr("archive/data.pkl", pickle.dumps({}, protocol=2))
        f.writestr("archive/data/0", bytes(64 << 20))
    assert os.path.getsize(z) < 128 << 10
    peak, r = _peak_bytes(convert.load_checkpoint, str(z))
    assert isinstance(r, convert.ConvertError) and "declare 67108" in str(r), r
    assert peak < 1 << 20, peak
    assert_fails(str(z), str(tmp_path / "o.safetensors"), r"more than 2x the archive's size")


def test_repeating_view_is_refused():
    """A tensor record of shape [2**20, 2**20] with strides 0 over a one-element storage: a few
    bytes that numpy() would have copied into 4 TB."""
    st = convert._Storage(convert._STORAGE_TYPES["FloatStorage"], 1, lambda: bytes(4))
    t = convert.TensorRef(st, 0, (1 << 20, 1 << 20), (0, 0))
    with pytest.raises(convert.ConvertError, match=r"holds more elements than its storage \(1\)"):
        t.numpy()
    assert convert.TensorRef(st, 0, (1, 1), (0, 0)).numpy().shape == (1, 1)
