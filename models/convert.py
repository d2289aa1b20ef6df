#!/usr/bin/python3
"""Convert a Mask R-CNN checkpoint to the canonical `detect` safetensors file.

    convert.py SRC DST.safetensors [--from torchvision] [--dtype f32|f16]

SRC is read without importing torch: a torch.save() file (zip format, or the legacy
pre-1.6 pickle stream) is parsed with a restricted unpickler that can only build
OrderedDicts and tensors.  Tensor names are mapped to our canonical scheme
(models/README.md) through a per-source-format table, the result is checked
(no unknown names, nothing missing, consistent shapes; depth and widths inferred from
shapes) and written with safetensors_io.save().

On any problem: one line `convert.py: SRC: <problem>` on stderr, exit status 2, and
DST is not created (the writer renames a finished temporary file into place).

Adding a source format (Detectron .pkl, detectron2, maskrcnn-benchmark): write a reader
returning {name: array-like with .shape/.dtype}, a rule table (source template,
canonical template) with its Field definitions, and register a SourceFormat in
SOURCE_FORMATS.  Validation, dtype conversion and writing are shared.
"""

import argparse
import collections
import hashlib
import math
import os
import pickle
import pickletools
import re
import struct
import sys
import zipfile

try:
    import numpy as np
except ImportError:  # e.g. a python3 without numpy earlier on PATH
    print(f"convert.py: needs numpy, which {sys.executable} lacks (use /usr/bin/python3)", file=sys.stderr)
    sys.exit(2)

try:  # imported as part of a package
    from . import safetensors_io
except ImportError:  # run as a script, or imported with models/ on sys.path
    import safetensors_io

FORMAT = "detect-maskrcnn"
FORMAT_VERSION = "1"


class ConvertError(Exception):
    """A problem with the input (or output) that is reported as one line, exit status 2."""


def _names(names, limit=8):
    names = list(names)
    s = ", ".join(names[:limit])
    if len(names) > limit:
        s += f", ... ({len(names) - limit} more)"
    return s


# ---------------------------------------------------------------------------------------
# Reading torch.save() files without torch
# ---------------------------------------------------------------------------------------

class _NoState:
    """Base of every object the unpickler hands a checkpoint: pickle's BUILD on one is refused.
    BUILD would set its attributes: torch.FloatStorage's dtype for every later file in the
    process, or a tensor's shape after it was checked."""

    __slots__ = ()

    def __setstate__(self, state):
        raise ConvertError(f"pickle sets attributes of {self!r:.60}, which a state dict never does")


class _StorageType(_NoState):
    """Stands in for torch.FloatStorage etc. inside the unpickler."""

    def __init__(self, name, dtype, bf16=False):
        self.name, self.dtype, self.bf16 = name, np.dtype(dtype), bf16

    def __repr__(self):
        return f"torch.{self.name}"


_STORAGE_TYPES = {
    t.name: t
    for t in [
        _StorageType("DoubleStorage", "<f8"),
        _StorageType("FloatStorage", "<f4"),
        _StorageType("HalfStorage", "<f2"),
        _StorageType("BFloat16Storage", "<u2", bf16=True),  # widened to float32 on read
        _StorageType("LongStorage", "<i8"),
        _StorageType("IntStorage", "<i4"),
        _StorageType("ShortStorage", "<i2"),
        _StorageType("CharStorage", "i1"),
        _StorageType("ByteStorage", "u1"),
        _StorageType("BoolStorage", "?"),
    ]
}


class _Storage(_NoState):
    """A typed storage whose bytes are fetched on first use by `fetch()`."""

    def __init__(self, stype, numel, fetch):
        self.stype, self.numel, self._fetch, self._array = stype, int(numel), fetch, None

    def array(self):
        if self._array is None:
            raw = self._fetch()
            want = self.numel * self.stype.dtype.itemsize
            if len(raw) < want:
                raise ConvertError(f"storage data truncated ({len(raw)} of {want} bytes)")
            self._array = np.frombuffer(raw, dtype=self.stype.dtype, count=self.numel)
        return self._array

    def __repr__(self):
        return f"a {self.stype!r} of {self.numel} elements"


class TensorRef(_NoState):
    """A tensor in a checkpoint: storage + offset/size/stride, read only when needed."""

    def __init__(self, storage, offset, size, stride):
        if not isinstance(storage, _Storage):
            raise ConvertError("malformed tensor record (no storage)")
        self.storage = storage
        self.offset = int(offset)
        self.shape = tuple(int(s) for s in size)
        self.stride = tuple(int(s) for s in stride)
        if len(self.stride) != len(self.shape) or self.offset < 0 or min(self.shape, default=0) < 0:
            raise ConvertError("malformed tensor record (size/stride)")
        self.dtype = np.dtype("<f4") if storage.stype.bf16 else storage.stype.dtype

    def __repr__(self):
        return f"a tensor of shape {list(self.shape)}"

    def numpy(self):
        st = self.storage
        if 0 in self.shape:
            return np.zeros(self.shape, dtype=self.dtype)
        if min(self.stride, default=0) < 0:
            raise ConvertError("negative strides are not supported")
        last = self.offset + sum((n - 1) * s for n, s in zip(self.shape, self.stride))
        if last >= st.numel:
            raise ConvertError(f"tensor view exceeds its storage ({last + 1} > {st.numel} elements)")
        base = st.array()[self.offset:]
        item = base.dtype.itemsize
        a = np.lib.stride_tricks.as_strided(
            base, shape=self.shape, strides=[s * item for s in self.stride], writeable=False)
        a = np.array(a, dtype=base.dtype.newbyteorder("="), order="C")
        if st.stype.bf16:
            a = (a.astype(np.uint32) << 16).view(np.float32)
        return a


def _rebuild_tensor(storage, storage_offset, size, stride, *_ignored):
    # torch._utils._rebuild_tensor(_v2)(storage, offset, size, stride[, requires_grad,
    # backward_hooks[, metadata]]): only the view parameters matter here.
    return TensorRef(storage, storage_offset, size, stride)


def _rebuild_parameter(data, *_ignored):
    # torch._utils._rebuild_parameter(data, requires_grad, backward_hooks[, state])
    return data


class _Function(_NoState):
    """A function as the unpickler hands it out (BUILD on a plain function sets attributes)."""

    def __init__(self, fn):
        self.fn = fn

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return f"torch._utils.{self.fn.__name__}"


class _OrderedDict(collections.OrderedDict):
    """collections.OrderedDict inside the unpickler.  A module's state_dict() carries a
    `_metadata` attribute, pickled with BUILD; it is dropped, so that no file can set
    attributes shadowing the methods extract_state_dict calls (`values`, `items`)."""

    def __setstate__(self, state):
        pass


# The only globals a plain state dict (or a {'model': state_dict} wrapper) needs.
_ALLOWED_GLOBALS = {
    ("collections", "OrderedDict"): _OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _Function(_rebuild_tensor),
    ("torch._utils", "_rebuild_tensor_v2"): _Function(_rebuild_tensor),
    ("torch._utils", "_rebuild_parameter"): _Function(_rebuild_parameter),
    ("torch._utils", "_rebuild_parameter_with_state"): _Function(_rebuild_parameter),
}
_ALLOWED_GLOBALS.update({("torch", n): t for n, t in _STORAGE_TYPES.items()})


def _check_memo_indices(f):
    """The C unpickler sizes its memo table by the largest PUT index it meets, so a few
    hundred bytes with LONG_BINPUT 1258647924 make it allocate and zero 20 GB.  A pickler
    numbers memo entries from 0, at most one per op: refuse an index past the op count.
    Scans f from its position to the pickle's STOP and seeks back; other breakage is left
    for the unpickler to report."""
    start = f.tell()
    try:
        for n, (op, arg, _) in enumerate(pickletools.genops(f)):
            if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and arg > n:
                raise ConvertError(f"malformed pickle (memo index {arg} at op {n})")
    except ConvertError:
        raise
    except Exception:  # a broken pickle: the unpickler says how
        pass
    f.seek(start)


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, storage_for):
        super().__init__(file)
        self._file = file
        self._storage_for = storage_for  # callable(pid tuple) -> _Storage

    def load(self):
        _check_memo_indices(self._file)
        return super().load()

    def find_class(self, module, name):
        obj = _ALLOWED_GLOBALS.get((module, name))
        if obj is None:
            hint = ""
            if module.startswith("numpy"):
                hint = " (a pickle of numpy arrays, e.g. a Detectron/detectron2 .pkl, is another source format)"
            raise ConvertError(f"pickle refers to {module}.{name}, which a state dict does not need{hint}")
        return obj

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid or pid[0] != "storage":
            raise ConvertError(f"unsupported persistent id {str(pid)[:60]}")
        return self._storage_for(pid)


def _check_pid(pid, n):
    if len(pid) < n or not isinstance(pid[1], _StorageType):
        raise ConvertError(f"malformed storage record {str(pid)[:80]}")


def _read_zip_checkpoint(path):
    try:
        zf = zipfile.ZipFile(path)
    except zipfile.BadZipFile as e:
        raise ConvertError(f"truncated or corrupt zip archive ({e})") from None
    names = zf.namelist()
    pkls = [n for n in names if n == "data.pkl" or (n.endswith("/data.pkl") and n.count("/") == 1)]
    if len(pkls) != 1:
        raise ConvertError("zip archive is not a torch.save() file (no <archive>/data.pkl)")
    prefix = pkls[0][: -len("data.pkl")]
    order = "<"
    if prefix + "byteorder" in names:
        bo = zf.read(prefix + "byteorder").decode("ascii", "replace").strip()
        if bo not in ("little", "big"):
            raise ConvertError(f"unknown byteorder record {bo!r}")
        order = "<" if bo == "little" else ">"
    members = set(names)
    storages = {}

    def storage_for(pid):
        # zip format: ('storage', storage_type, key, location, numel)
        _check_pid(pid, 5)
        stype, key, numel = pid[1], str(pid[2]), pid[4]
        if key not in storages:
            member = f"{prefix}data/{key}"
            if member not in members:
                raise ConvertError(f"storage record {member} missing from the archive")
            if order == ">":
                stype = _StorageType(stype.name, stype.dtype.newbyteorder(">"), stype.bf16)
            storages[key] = _Storage(stype, numel, lambda m=member: zf.read(m))
        return storages[key]

    with zf.open(pkls[0]) as f:
        obj = _RestrictedUnpickler(f, storage_for).load()
    return obj


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def _read_legacy_checkpoint(path):
    f = open(path, "rb")  # kept open by the storages' fetch closures

    def plain(f):
        return _RestrictedUnpickler(f, lambda pid: None).load()

    if plain(f) != _LEGACY_MAGIC:
        raise ConvertError("not a torch.save() file (bad legacy magic number)")
    proto = plain(f)
    if proto != _LEGACY_PROTOCOL:
        raise ConvertError(f"unsupported legacy torch.save protocol {proto!r}")
    sys_info = plain(f)
    if isinstance(sys_info, dict) and not sys_info.get("little_endian", True):
        raise ConvertError("big-endian legacy checkpoints are not supported")

    roots, views = {}, []

    def storage_for(pid):
        # legacy: ('storage', storage_type, root_key, location, numel, view_metadata)
        _check_pid(pid, 6)
        stype, key, numel, view = pid[1], str(pid[2]), pid[4], pid[5]
        if key not in roots:
            roots[key] = _Storage(stype, numel, None)
        if view is None:
            return roots[key]
        _, voff, vsize = view  # a storage view: elements [voff, voff+vsize) of the root
        s = _Storage(stype, vsize, None)
        views.append((s, key, int(voff)))
        return s

    obj = _RestrictedUnpickler(f, storage_for).load()
    keys = plain(f)
    file_size = os.fstat(f.fileno()).st_size
    if not isinstance(keys, list):
        raise ConvertError("malformed legacy checkpoint (storage key list)")
    for key in keys:
        st = roots.get(str(key))
        if st is None:
            raise ConvertError(f"legacy storage {key} is not referenced")
        head = f.read(8)
        if len(head) != 8:
            raise ConvertError("truncated legacy checkpoint (storage data missing)")
        (numel,) = struct.unpack("<q", head)
        nbytes = numel * st.stype.dtype.itemsize
        pos = f.tell()
        if numel < 0 or pos + nbytes > file_size:
            raise ConvertError("truncated legacy checkpoint (storage data missing)")
        f.seek(nbytes, os.SEEK_CUR)
        st.numel = numel

        def fetch(pos=pos, nbytes=nbytes):
            f.seek(pos)
            return f.read(nbytes)

        st._fetch = fetch
    unread = [k for k, st in roots.items() if st._fetch is None]
    if unread:
        raise ConvertError(f"malformed legacy checkpoint (no data for storage {unread[0][:40]})")
    for s, key, voff in views:
        root = roots[key]
        s._fetch = lambda root=root, voff=voff, s=s: root.array()[voff:voff + s.numel].tobytes()
    return obj


def read_torch_checkpoint(path):
    """Read a torch.save() file (zip or legacy) without torch.  Returns the unpickled top-level
    object, with tensors as TensorRef.  Raises ConvertError."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    try:
        if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
            return _read_zip_checkpoint(path)
        if head.startswith(b"\x80\x02\x8a\x0a" + _LEGACY_MAGIC.to_bytes(10, "little")):
            return _read_legacy_checkpoint(path)
    except ConvertError:
        raise
    except EOFError:
        raise ConvertError("truncated checkpoint (unexpected end of pickle data)") from None
    except Exception as e:  # arbitrary input: any parse failure is a format error
        raise ConvertError(f"cannot parse checkpoint ({type(e).__name__}: {e})") from None
    if len(head) == 0:
        raise ConvertError("empty file")
    if head[:1] == b"\x80":
        raise ConvertError("a plain pickle, not a torch.save() file (zip archive or legacy stream)")
    raise ConvertError("not a torch.save() file (neither a zip archive nor a legacy pickle stream)")


def _is_tensor(x):
    return isinstance(x, (TensorRef, np.ndarray))


def extract_state_dict(obj):
    """The flat {name: tensor} state dict inside a checkpoint object: accepts a plain state dict,
    {'model': sd} / {'state_dict': sd} wrappers and a DataParallel 'module.' prefix."""
    if isinstance(obj, dict) and not all(_is_tensor(v) for v in obj.values()):
        for k in ("model", "state_dict"):
            if isinstance(obj.get(k), dict):
                obj = obj[k]
                break
    if not isinstance(obj, dict):
        raise ConvertError(f"top-level object is a {type(obj).__name__}, not a state dict")
    bad = [str(k) for k, v in obj.items() if not isinstance(k, str) or not _is_tensor(v)]
    if bad:
        raise ConvertError(f"state dict entries that are not tensors: {_names(bad)}")
    if not obj:
        raise ConvertError("state dict is empty")
    if all(k.startswith("module.") for k in obj):
        obj = {k[len("module."):]: v for k, v in obj.items()}
    return dict(obj)


# ---------------------------------------------------------------------------------------
# Name mapping: per-source rule tables, shared machinery
# ---------------------------------------------------------------------------------------

class Field:
    """A `{placeholder}` in a source name template.

    regex: what it matches in the source name; canon: the canonical placeholder it fills;
    offset: canonical value = source value + offset (integers).  Formats whose fields are
    not integer shifts (Detectron's branch2a/b/c -> conv1/2/3) pass to_canon/from_canon."""

    def __init__(self, regex, canon, offset=0, to_canon=None, from_canon=None):
        self.regex, self.canon = regex, canon
        self.to_canon = to_canon or (lambda v: str(int(v) + offset) if offset else v)
        self.from_canon = from_canon or (lambda v: str(int(v) - offset) if offset else v)


# Placeholders of canonical templates (used to describe missing canonical names).
_CANON_FIELD_RE = {
    "S": r"[2-5]", "b": r"0|[1-9][0-9]*", "k": r"[123]", "n": r"[1-4]",
    "p": r"weight|bias|running_mean|running_var|scale|shift", "t": r"weight|bias",
}

_PLACEHOLDER = re.compile(r"\{(\w+)\}")


def _template_regex(template, field_re):
    out, pos = [], 0
    for m in _PLACEHOLDER.finditer(template):
        out.append(re.escape(template[pos:m.start()]))
        out.append(f"(?P<{m.group(1)}>{field_re[m.group(1)]})")
        pos = m.end()
    out.append(re.escape(template[pos:]))
    return re.compile("".join(out) + r"\Z")


class Rule:
    def __init__(self, source, canonical, fields, legacy=False):
        self.source, self.canonical, self.fields, self.legacy = source, canonical, fields, legacy
        self.source_re = _template_regex(source, {k: f.regex for k, f in fields.items()})
        self.canon_re = _template_regex(canonical, _CANON_FIELD_RE)

    def to_canonical(self, name):
        m = self.source_re.match(name)
        if not m:
            return None
        vals = {self.fields[k].canon: self.fields[k].to_canon(v) for k, v in m.groupdict().items()}
        return _PLACEHOLDER.sub(lambda mm: vals[mm.group(1)], self.canonical)

    def to_source(self, canonical_name):
        m = self.canon_re.match(canonical_name)
        if not m:
            return None
        cvals = m.groupdict()
        try:
            vals = {k: f.from_canon(cvals[f.canon]) for k, f in self.fields.items()
                    if f.canon in cvals}
        except ValueError:
            return None
        name = _PLACEHOLDER.sub(lambda mm: vals[mm.group(1)], self.source)
        return name if self.source_re.match(name) else None


class SourceFormat:
    def __init__(self, name, read, rules, skip=()):
        self.name, self.read, self.rules = name, read, rules
        self.skip = [re.compile(s) for s in skip]

    def source_name(self, canonical_name):
        """The (current, non-legacy) source name of a canonical tensor, or None."""
        for r in self.rules:
            if not r.legacy:
                s = r.to_source(canonical_name)
                if s is not None:
                    return s
        return None

    def map_names(self, state):
        """{source name: tensor} -> {canonical name: (source name, tensor)}; unknown names and
        two source names for one canonical tensor are errors."""
        out, unknown = {}, []
        for name, t in state.items():
            if any(s.search(name) for s in self.skip):
                continue
            canon = None
            for r in self.rules:
                canon = r.to_canonical(name)
                if canon is not None:
                    break
            if canon is None:
                unknown.append(name)
            elif canon in out:
                raise ConvertError(f"{out[canon][0]} and {name} both map to {canon}")
            else:
                out[canon] = (name, t)
        if unknown:
            raise ConvertError(f"unknown tensor name(s) for --from {self.name}: {_names(unknown)}")
        return out


_TV_FIELDS = {
    "L": Field(r"[1-4]", "S", offset=1),  # body.layer1..4 -> res2..5
    "l": Field(r"[0-3]", "S", offset=2),  # fpn blocks 0..3 -> levels 2..5
    "j": Field(r"[0-3]", "n", offset=1),  # mask_head.0..3 -> fcn1..4
    "n": Field(r"[1-4]", "n"),
    "b": Field(r"0|[1-9][0-9]*", "b"),
    "k": Field(r"[123]", "k"),
    "p": Field(r"weight|bias|running_mean|running_var", "p"),
    "t": Field(r"weight|bias", "t"),
}

# (torchvision 0.14 state_dict name, canonical name[, legacy]).  Legacy rows: names saved by
# torchvision before the Conv2dNormActivation refactor (0.13), which 0.14 still renames on
# load (FeaturePyramidNetwork / RPNHead / MaskRCNNHeads._load_from_state_dict).
_TV_TABLE = [
    ("backbone.body.conv1.weight", "backbone.stem.conv.weight"),
    ("backbone.body.bn1.{p}", "backbone.stem.norm.{p}"),
    ("backbone.body.layer{L}.{b}.conv{k}.weight", "backbone.res{S}.{b}.conv{k}.weight"),
    ("backbone.body.layer{L}.{b}.bn{k}.{p}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("backbone.body.layer{L}.{b}.downsample.0.weight", "backbone.res{S}.{b}.shortcut.weight"),
    ("backbone.body.layer{L}.{b}.downsample.1.{p}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("backbone.fpn.inner_blocks.{l}.0.{t}", "fpn.lateral{S}.{t}"),
    ("backbone.fpn.layer_blocks.{l}.0.{t}", "fpn.output{S}.{t}"),
    ("rpn.head.conv.0.0.{t}", "rpn.conv.{t}"),
    ("rpn.head.cls_logits.{t}", "rpn.objectness.{t}"),
    ("rpn.head.bbox_pred.{t}", "rpn.deltas.{t}"),
    ("roi_heads.box_head.fc6.{t}", "box_head.fc6.{t}"),
    ("roi_heads.box_head.fc7.{t}", "box_head.fc7.{t}"),
    ("roi_heads.box_predictor.cls_score.{t}", "box_predictor.cls_score.{t}"),
    ("roi_heads.box_predictor.bbox_pred.{t}", "box_predictor.bbox_pred.{t}"),
    ("roi_heads.mask_head.{j}.0.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_heads.mask_predictor.conv5_mask.{t}", "mask_head.deconv.{t}"),
    ("roi_heads.mask_predictor.mask_fcn_logits.{t}", "mask_head.logits.{t}"),
    ("backbone.fpn.inner_blocks.{l}.{t}", "fpn.lateral{S}.{t}", True),
    ("backbone.fpn.layer_blocks.{l}.{t}", "fpn.output{S}.{t}", True),
    ("rpn.head.conv.{t}", "rpn.conv.{t}", True),
    ("roi_heads.mask_head.mask_fcn{n}.{t}", "mask_head.fcn{n}.{t}", True),
]


def _read_torchvision(path):
    return extract_state_dict(read_torch_checkpoint(path))


SOURCE_FORMATS = {
    "torchvision": SourceFormat(
        "torchvision",
        read=_read_torchvision,
        rules=[Rule(row[0], row[1], _TV_FIELDS, legacy=len(row) > 2 and row[2]) for row in _TV_TABLE],
        skip=[r"(^|\.)num_batches_tracked\Z"],
    ),
}


# ---------------------------------------------------------------------------------------
# The canonical model: required names, shapes, depth
# ---------------------------------------------------------------------------------------

BN_PARAMS = ("weight", "bias", "running_mean", "running_var")
AFFINE_PARAMS = ("scale", "shift")
DEPTHS = {(3, 4, 6, 3): 50, (3, 4, 23, 3): 101, (3, 8, 36, 3): 152}
_BLOCK_RE = re.compile(r"backbone\.res([2-5])\.(0|[1-9][0-9]*)\.")


class _Checker:
    """Builds the expected canonical name list (in file order) while checking shapes."""

    def __init__(self, shapes, describe):
        self.shapes, self.describe = shapes, describe
        self.order, self.required, self.bad = [], [], []

    def _note(self, name, required):
        self.order.append(name)
        if required:
            self.required.append(name)

    def has(self, name):
        return name in self.shapes

    def shape(self, name):
        return self.shapes.get(name)

    def expect(self, name, shape, required=True):
        """shape: tuple of ints or None entries (None = inferred, any value)."""
        self._note(name, required)
        got = self.shapes.get(name)
        if got is None:
            return None
        ok = len(got) == len(shape) and all(e is None or e == g for e, g in zip(shape, got))
        if not ok:
            want = "[" + ",".join("?" if e is None else str(e) for e in shape) + "]"
            self.bad.append(f"{self.describe(name)} has shape {list(got)}, expected {want}")
            return None
        return got

    def conv_unit(self, conv, norm, shape):
        """conv weight (+optional bias) and its norm, BatchNorm or AffineChannel form."""
        got = self.expect(conv + ".weight", shape)
        c = got[0] if got else shape[0]
        self.expect(conv + ".bias", (c,), required=False)
        affine = any(self.has(f"{norm}.{p}") for p in AFFINE_PARAMS)
        bn = any(self.has(f"{norm}.{p}") for p in BN_PARAMS)
        if affine and bn:
            self.bad.append(f"{norm} mixes BatchNorm and AffineChannel parameters")
        for p in AFFINE_PARAMS if affine else BN_PARAMS:
            self.expect(f"{norm}.{p}", (c,))
        return got

    def wb(self, prefix, shape):
        got = self.expect(prefix + ".weight", shape)
        self.expect(prefix + ".bias", (got[0] if got else shape[0],))
        return got


def check_canonical(shapes, describe=lambda n: n):
    """Validate {canonical name: shape}.  Returns (ordered names, info dict); raises ConvertError
    naming unexpected, missing or mis-shaped tensors.  describe(name) decorates names in messages."""
    counts = [0, 0, 0, 0]
    for name in shapes:
        m = _BLOCK_RE.match(name)
        if m:
            s = int(m.group(1)) - 2
            counts[s] = max(counts[s], int(m.group(2)) + 1)
    ck = _Checker(shapes, describe)

    stem = ck.conv_unit("backbone.stem.conv", "backbone.stem.norm", (None, 3, None, None))
    cin = stem[0] if stem else None
    stage_out = {}
    groups = 1
    for si, nblocks in enumerate(counts):
        S = si + 2
        for b in range(nblocks):
            p = f"backbone.res{S}.{b}"
            c1 = ck.conv_unit(p + ".conv1", p + ".conv1.norm", (None, cin, 1, 1))
            m = c1[0] if c1 else None
            c2 = ck.conv_unit(p + ".conv2", p + ".conv2.norm", (m, None, 3, 3))
            if c2 and m and (c2[1] <= 0 or m % c2[1]):
                ck.bad.append(f"{describe(p + '.conv2.weight')} has shape {list(c2)}: "
                              f"input channels do not divide {m}")
            elif c2 and m:
                groups = m // c2[1]
            c3 = ck.conv_unit(p + ".conv3", p + ".conv3.norm", (None, m, 1, 1))
            out = c3[0] if c3 else None
            if b == 0:
                ck.conv_unit(p + ".shortcut", p + ".shortcut.norm", (out, cin, 1, 1))
            elif out is not None and cin is not None and out != cin:
                ck.bad.append(f"{describe(p + '.conv3.weight')} outputs {out} channels, "
                              f"the residual input has {cin}")
            cin = out
        stage_out[S] = cin

    lat5 = ck.shape("fpn.lateral5.weight")
    F = lat5[0] if lat5 and len(lat5) == 4 else None
    for S in (2, 3, 4, 5):
        ck.wb(f"fpn.lateral{S}", (F, stage_out.get(S), 1, 1))
    for S in (2, 3, 4, 5):
        ck.wb(f"fpn.output{S}", (F, F, 3, 3))

    ck.wb("rpn.conv", (F, F, 3, 3))
    obj = ck.wb("rpn.objectness", (None, F, 1, 1))
    A = obj[0] if obj else None
    ck.wb("rpn.deltas", (4 * A if A else None, F, 1, 1))

    fc6 = ck.wb("box_head.fc6", (None, None))
    pool = None
    if fc6 and F:
        pool = math.isqrt(fc6[1] // F)
        if pool * pool * F != fc6[1]:
            ck.bad.append(f"{describe('box_head.fc6.weight')} has {fc6[1]} inputs, "
                          f"not {F}*P*P for an integer pooler size P")
            pool = None
    fc7 = ck.wb("box_head.fc7", (None, fc6[0] if fc6 else None))
    R = fc7[0] if fc7 else None
    cls = ck.wb("box_predictor.cls_score", (None, R))
    K = cls[0] if cls else None
    ck.wb("box_predictor.bbox_pred", (4 * K if K else None, R))

    fcn1 = ck.wb("mask_head.fcn1", (None, F, 3, 3))
    M = fcn1[0] if fcn1 else None
    for n in (2, 3, 4):
        ck.wb(f"mask_head.fcn{n}", (M, M, 3, 3))
    dec = ck.expect("mask_head.deconv.weight", (M, None, 2, 2))
    D = dec[1] if dec else None
    ck.expect("mask_head.deconv.bias", (D,))
    ck.wb("mask_head.logits", (K, D, 1, 1))

    allowed = set(ck.order)
    unexpected = [n for n in shapes if n not in allowed]
    if unexpected:
        raise ConvertError(f"unexpected tensor(s): {_names(describe(n) for n in unexpected)}")
    missing = [n for n in ck.required if n not in shapes]
    if missing:
        raise ConvertError(f"missing tensor(s): {_names(describe(n) for n in missing)}")
    if ck.bad:
        raise ConvertError("; ".join(ck.bad[:4]) + (f"; ... ({len(ck.bad) - 4} more)" if len(ck.bad) > 4 else ""))
    depth = DEPTHS.get(tuple(counts))
    if depth is None:
        raise ConvertError(
            "cannot infer ResNet depth: blocks per stage res2..res5 = "
            f"{','.join(map(str, counts))}; supported: "
            + "; ".join(f"{d}: {','.join(map(str, c))}" for c, d in DEPTHS.items()))
    norm = "affine" if any(n.endswith(".norm.scale") for n in shapes) else "batchnorm"
    info = dict(depth=depth, blocks=counts, num_classes=K, num_anchors=A, fpn_dim=F,
                pooler=pool, representation=R, mask_dim=M, groups=groups, norm=norm)
    return [n for n in ck.order if n in shapes], info


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16)}


def _materialize(t):
    return t.numpy() if isinstance(t, TensorRef) else np.asarray(t)


def convert_state_dict(state, source_format="torchvision", dtype="f32"):
    """{source name: ndarray or TensorRef} -> (OrderedDict {canonical name: ndarray}, info).
    The shared path of convert.py and tests/parity/oracle.py export_weights()."""
    fmt = SOURCE_FORMATS[source_format]
    mapped = fmt.map_names(state)

    def describe(canon):
        if canon in mapped:
            src = mapped[canon][0]
        else:
            src = fmt.source_name(canon)
        return f"{canon} ({fmt.name}: {src})" if src and src != canon else canon

    order, info = check_canonical({k: tuple(v[1].shape) for k, v in mapped.items()}, describe)
    target = DTYPES[dtype]
    out = collections.OrderedDict()
    for name in order:
        src, t = mapped[name]
        if np.dtype(t.dtype).kind != "f":
            raise ConvertError(f"{describe(name)} has dtype {np.dtype(t.dtype)}, expected floating point")
        try:
            a = _materialize(t)
        except ConvertError as e:
            raise ConvertError(f"{src}: {e}") from None
        except Exception as e:  # e.g. zipfile's bad CRC, a short read
            raise ConvertError(f"{src}: cannot read tensor data ({type(e).__name__}: {e})") from None
        if not np.all(np.isfinite(a)):
            raise ConvertError(f"{describe(name)} contains NaN or Inf")
        with np.errstate(over="ignore"):
            a = a.astype(target, copy=False)
        if not np.all(np.isfinite(a)):
            raise ConvertError(f"{describe(name)} overflows {dtype}")
        out[name] = a
    return out, info


def make_metadata(info, source_format, source_sha256):
    return {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "source_format": source_format,
        "source_sha256": source_sha256,
        "num_classes": str(info["num_classes"]),
        "depth": str(info["depth"]),
    }


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def convert_file(src, dst, source_format="torchvision", dtype="f32"):
    """Convert SRC to DST.  Returns info; raises ConvertError (DST untouched on error)."""
    if source_format not in SOURCE_FORMATS:
        raise ConvertError(f"unknown source format {source_format!r}")
    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        raise ConvertError("SRC and DST are the same file")
    try:
        digest = sha256_file(src)
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    state = SOURCE_FORMATS[source_format].read(src)
    tensors, info = convert_state_dict(state, source_format, dtype)
    try:
        safetensors_io.save(tensors, dst, make_metadata(info, source_format, digest))
    except OSError as e:
        raise ConvertError(f"cannot write {dst}: {e.strerror or e}") from None
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="convert.py",
        description="Convert a Mask R-CNN checkpoint to canonical detect safetensors (models/README.md).")
    ap.add_argument("src", metavar="SRC", help="checkpoint (torch.save file for --from torchvision)")
    ap.add_argument("dst", metavar="DST", help="output .safetensors")
    ap.add_argument("--from", dest="source_format", default="torchvision", choices=sorted(SOURCE_FORMATS))
    ap.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing on success")
    args = ap.parse_args(argv)
    try:
        info = convert_file(args.src, args.dst, args.source_format, args.dtype)
    except ConvertError as e:
        msg = " ".join(str(e).split())  # one line
        print(f"convert.py: {args.src}: {msg}", file=sys.stderr)
        return 2
    except MemoryError:
        print(f"convert.py: {args.src}: out of memory", file=sys.stderr)
        return 2
    if not args.quiet:
        print(f"{args.dst}: R-{info['depth']} FPN, {info['num_classes']} classes, "
              f"{info['num_anchors']} anchors/position, {info['norm']} norms, {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
