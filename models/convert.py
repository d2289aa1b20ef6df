#!/usr/bin/python3
"""Convert a Mask R-CNN checkpoint to the canonical `detect` safetensors file.

    convert.py SRC DST.safetensors [--from detectron|detectron2|maskrcnn-benchmark|torchvision]
                                   [--dtype f32|f16] [-q]

SRC is read without importing torch or running any code from the file: a torch.save() file
(zip format, or the legacy pre-1.6 pickle stream) or a plain pickle of numpy arrays
(Detectron / detectron2 .pkl) goes through one restricted unpickler whose allow-listed globals
are convert.py's own stand-ins and whose every other global is an inert placeholder.  The
source format is detected from the file's structure and names (or forced with --from).
Tensor names are mapped to our canonical scheme (models/README.md) through a per-format rule
table, format-specific value changes are applied (detectron2's background-last class rows,
maskrcnn-benchmark's eps-free FrozenBatchNorm folded into AffineChannel form), the result is
checked (no unknown names, nothing missing, consistent shapes; depth, widths and groups
inferred from shapes) and written with safetensors_io.save(), with metadata naming the
source, classes and the config to use.

On any problem: one line `convert.py: SRC: <problem>` on stderr, exit status 2, and
DST is not created (the writer renames a finished temporary file into place).

Adding a source format: see SourceFormat and models/README.md.
"""

import argparse
import collections
import hashlib
import io
import json
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
    from . import coco_classes, safetensors_io
except ImportError:  # run as a script, or imported with models/ on sys.path
    import coco_classes
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
        if max((abs(v) for v in self.shape + self.stride + (self.offset,)), default=0) >= 1 << 48:
            # numpy's strides are C longs: 2**63 overflowed inside as_strided (found by fuzzing)
            raise ConvertError("malformed tensor record (size/stride/offset out of range)")
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

    def __init__(self, fn, module="torch._utils"):
        self.fn, self.module = fn, module

    def __call__(self, *args):
        return self.fn(*args)

    def __repr__(self):
        return f"{self.module}.{self.fn.__name__}"


class _OrderedDict(collections.OrderedDict):
    """collections.OrderedDict inside the unpickler.  A module's state_dict() carries a
    `_metadata` attribute, pickled with BUILD; it is dropped, so that no file can set
    attributes shadowing the methods extract_state_dict calls (`values`, `items`)."""

    def __setstate__(self, state):
        pass


# --- numpy arrays inside .pkl files (Detectron, detectron2) -----------------------------
# numpy pickles an ndarray as REDUCE(numpy.core.multiarray._reconstruct, (ndarray, (0,), 'b'))
# then BUILD with (version, shape, dtype, is_fortran, raw bytes); a dtype as
# REDUCE(numpy.dtype, ('f4', 0, 1)) then BUILD with (3, byteorder, None, None, None, -1, -1, 0)
# (numpy/core/src/multiarray/methods.c array_reduce/array_setstate, descriptor.c
# arraydescr_reduce/arraydescr_setstate).  These stand-ins rebuild exactly that, for plain
# number dtypes only; numpy's own functions are never called by the pickle.

class _NdarrayClass(_NoState):
    def __repr__(self):
        return "numpy.ndarray"


_NDARRAY = _NdarrayClass()
_PLAIN_DTYPE = re.compile(r"[fiu][1248]|b1|\?")  # what numpy's dtype reduce writes for numbers


class _DType:
    """numpy.dtype(spec, align, copy) under construction; BUILD gives its byte order."""

    __slots__ = ("dtype", "built")

    def __init__(self, spec, align=0, copy=0):
        if not isinstance(spec, str) or not _PLAIN_DTYPE.fullmatch(spec):
            raise ConvertError(f"numpy dtype {str(spec)[:40]!r} is not a plain number type")
        self.dtype, self.built = np.dtype(spec).newbyteorder("<"), False

    def __setstate__(self, state):
        if self.built or not isinstance(state, tuple) or len(state) < 5 or state[1] not in ("<", ">", "|", "="):
            raise ConvertError("malformed numpy dtype record")
        if any(x is not None for x in state[2:5]):
            raise ConvertError("structured numpy dtypes are not supported")
        if state[1] in "<>":
            self.dtype = self.dtype.newbyteorder(state[1])
        self.built = True

    def __repr__(self):
        return f"numpy.dtype({self.dtype.str!r})"


class _ArrayBuilder:
    """numpy.ndarray under construction: _reconstruct makes it empty, BUILD fills it once.
    Acts as a tensor (shape, dtype, numpy()) once filled."""

    __slots__ = ("array",)

    def __init__(self):
        self.array = None

    def __setstate__(self, state):
        if self.array is not None:
            raise ConvertError("pickle sets the state of a numpy array twice")
        if isinstance(state, tuple) and len(state) == 5:
            state = state[1:]  # (version, shape, dtype, is_fortran, data)
        if not isinstance(state, tuple) or len(state) != 4:
            raise ConvertError("malformed numpy array record")
        shape, dt, fortran, data = state
        self.array = _make_array(data, dt, shape, "F" if fortran else "C")

    @property
    def shape(self):
        return self._filled().shape

    @property
    def dtype(self):
        return self._filled().dtype

    def _filled(self):
        if self.array is None:
            raise ConvertError("a numpy array record without data")
        return self.array

    def numpy(self):
        a = self._filled()
        return np.array(a, dtype=a.dtype.newbyteorder("="), order="C")

    def __repr__(self):
        return "a numpy array" if self.array is None else f"a numpy array of shape {list(self.array.shape)}"


def _make_array(data, dt, shape, order):
    if not isinstance(dt, _DType):
        raise ConvertError("numpy array record without a plain dtype (object arrays are not supported)")
    if (not isinstance(shape, tuple) or len(shape) > 8
            or not all(isinstance(n, int) and not isinstance(n, bool) and 0 <= n < 1 << 40 for n in shape)):
        raise ConvertError(f"malformed numpy array shape {str(shape)[:60]}")
    if isinstance(data, str):  # a Python 2 str read with encoding='latin1': code points = bytes
        try:
            data = data.encode("latin1")
        except UnicodeEncodeError:
            raise ConvertError("numpy array data is text, not bytes") from None
    if not isinstance(data, (bytes, bytearray)):
        raise ConvertError("numpy array data is not a byte string (object arrays are not supported)")
    n = math.prod(shape)
    if len(data) != n * dt.dtype.itemsize:
        raise ConvertError(f"numpy array data has {len(data)} bytes, shape {list(shape)} of "
                           f"{dt.dtype} needs {n * dt.dtype.itemsize}")
    return np.frombuffer(bytes(data), dtype=dt.dtype, count=n).reshape(shape, order=order)


def _np_reconstruct(cls, shape, typecode):
    # numpy.core.multiarray._reconstruct(subtype, shape, dtype): an empty array BUILD fills
    if cls is not _NDARRAY:
        raise ConvertError(f"numpy _reconstruct of {cls!r:.60}, not numpy.ndarray")
    return _ArrayBuilder()


def _frombuffer(buf, dt, shape, order):
    # numpy.core.numeric._frombuffer: protocol-5 pickles (numpy >= 1.16) with in-band buffers
    b = _ArrayBuilder()
    b.array = _make_array(buf, dt, shape, "F" if order == "F" else "C")
    return b


def _codecs_encode(text, encoding="utf-8"):
    # Python 3 pickles bytes under protocol 2 as _codecs.encode(str, 'latin1')
    if not isinstance(text, str) or encoding not in ("latin1", "latin-1"):
        raise ConvertError("pickle calls _codecs.encode with something else than latin1 text")
    return text.encode("latin1")


class _Opaque:
    """An object of a class outside the allow-list (an optimizer's scheduler, fvcore's
    ParamScheduler, argparse.Namespace, os.system...), found in a checkpoint part that is not
    the weights: built without running any of its code.  Its arguments and state are dropped;
    the unpickler makes one subclass per global, so messages can name it.  A weight that is one
    of these is an error (extract_state_dict)."""

    origin = "?"

    def __new__(cls, *args, **kwargs):
        return object.__new__(cls)

    def __init__(self, *args, **kwargs):
        pass

    def __setstate__(self, state):
        pass

    def __call__(self, *args, **kwargs):
        return self

    def __setitem__(self, key, value):
        pass

    def append(self, value):
        pass

    def extend(self, values):
        pass

    def __repr__(self):
        return f"a pickled {self.origin} (not loaded)"


# The only globals a plain state dict (or a {'model': state_dict} wrapper) needs, and those of numpy
# arrays in a .pkl (numpy.core became numpy._core in numpy 2).
_ALLOWED_GLOBALS = {
    ("collections", "OrderedDict"): _OrderedDict,
    ("torch._utils", "_rebuild_tensor"): _Function(_rebuild_tensor),
    ("torch._utils", "_rebuild_tensor_v2"): _Function(_rebuild_tensor),
    ("torch._utils", "_rebuild_parameter"): _Function(_rebuild_parameter),
    ("torch._utils", "_rebuild_parameter_with_state"): _Function(_rebuild_parameter),
}
_ALLOWED_GLOBALS.update({("torch", n): t for n, t in _STORAGE_TYPES.items()})
for _core in ("numpy.core", "numpy._core"):
    _ALLOWED_GLOBALS[(_core + ".multiarray", "_reconstruct")] = _Function(_np_reconstruct, _core + ".multiarray")
    _ALLOWED_GLOBALS[(_core + ".numeric", "_frombuffer")] = _Function(_frombuffer, _core + ".numeric")
_ALLOWED_GLOBALS.update({
    ("numpy", "ndarray"): _NDARRAY,
    ("numpy", "dtype"): _Function(_DType, "numpy"),
    ("_codecs", "encode"): _Function(_codecs_encode, "_codecs"),
})


def _check_memo_indices(f):
    """The C unpickler sizes its memo table by the largest PUT index it meets, so a few
    hundred bytes with LONG_BINPUT 1258647924 make it allocate and zero 20 GB.  A pickler
    numbers memo entries from 0, at most one per op: refuse an index past the op count.
    Likewise a length-prefixed string (BINBYTES8, BYTEARRAY8, ...) longer than the data left:
    the C unpickler may allocate the declared size first (and on a short BYTEARRAY8 from a
    BytesIO, CPython 3.11 prints a SystemError about exported buffers).
    Scans f from its position to the pickle's STOP and seeks back; other breakage is left
    for the unpickler to report."""
    start = f.tell()
    try:
        for n, (op, arg, _) in enumerate(pickletools.genops(f)):
            if op.name in ("PUT", "BINPUT", "LONG_BINPUT") and arg > n:
                raise ConvertError(f"malformed pickle (memo index {arg} at op {n})")
    except ConvertError:
        raise
    except ValueError as e:
        if "remain" in str(e):  # pickletools: "expected N bytes in a bytes8, but only M remain"
            raise ConvertError(f"truncated pickle data ({e})") from None
    except Exception:  # a broken pickle: the unpickler says how
        pass
    f.seek(start)


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves the allow-listed globals to convert.py's stand-ins and every other global to an
    inert _Opaque subclass (recorded in `opaque`): nothing from outside this file ever runs."""

    def __init__(self, file, storage_for, opaque=None, encoding="ASCII"):
        super().__init__(file, encoding=encoding)
        self._file = file
        self._storage_for = storage_for  # callable(pid tuple) -> _Storage
        self._opaque = {}
        self.opaque = opaque if opaque is not None else set()

    def load(self):
        _check_memo_indices(self._file)
        return super().load()

    def find_class(self, module, name):
        obj = _ALLOWED_GLOBALS.get((module, name))
        if obj is None:
            origin = f"{module}.{name}"[:120]
            obj = self._opaque.get(origin)
            if obj is None:
                obj = self._opaque[origin] = type("Opaque", (_Opaque,), {"origin": origin, "__slots__": ()})
            self.opaque.add(origin)
        return obj

    def persistent_load(self, pid):
        if not isinstance(pid, tuple) or not pid or pid[0] != "storage":
            raise ConvertError(f"unsupported persistent id {str(pid)[:60]}")
        return self._storage_for(pid)


def _check_pid(pid, n):
    if len(pid) < n or not isinstance(pid[1], _StorageType):
        raise ConvertError(f"malformed storage record {str(pid)[:80]}")


def _read_zip_checkpoint(path, opaque):
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
        obj = _RestrictedUnpickler(f, storage_for, opaque).load()
    return obj


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def _read_legacy_checkpoint(path, opaque):
    f = open(path, "rb")  # kept open by the storages' fetch closures

    def plain(f):
        return _RestrictedUnpickler(f, lambda pid: None, opaque).load()

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

    obj = _RestrictedUnpickler(f, storage_for, opaque).load()
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


def read_torch_checkpoint(path, opaque=None):
    """Read a torch.save() file (zip or legacy) without torch.  Returns the unpickled top-level
    object, with tensors as TensorRef.  Globals outside the allow-list become inert _Opaque
    objects; their names are added to the set `opaque`.  Raises ConvertError."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    try:
        if head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06"):
            return _read_zip_checkpoint(path, opaque)
        if head.startswith(b"\x80\x02\x8a\x0a" + _LEGACY_MAGIC.to_bytes(10, "little")):
            return _read_legacy_checkpoint(path, opaque)
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


def read_pickle_checkpoint(path, opaque=None):
    """Read a plain pickle of numpy arrays (Detectron / detectron2 .pkl) without running any of
    its globals: arrays are rebuilt by _ArrayBuilder.  Python 2 strings are decoded as latin-1
    (their code points are the original bytes, which array data needs).  Raises ConvertError."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    return read_pickle_checkpoint_bytes(data, opaque)


def read_pickle_checkpoint_bytes(data, opaque=None):
    def no_persistent(pid):
        raise ConvertError("a .pkl with persistent ids (a torch pickle without its archive?)")

    try:
        return _RestrictedUnpickler(io.BytesIO(data), no_persistent, opaque, encoding="latin1").load()
    except ConvertError:
        raise
    except EOFError:
        raise ConvertError("truncated pickle (unexpected end of data)") from None
    except Exception as e:  # arbitrary input: any parse failure is a format error
        raise ConvertError(f"cannot parse pickle ({type(e).__name__}: {e})") from None


def load_checkpoint(path, opaque=None):
    """('torch', object) for a torch.save() file, ('pickle', object) for a plain pickle."""
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    torch_head = (head.startswith(b"PK\x03\x04") or head.startswith(b"PK\x05\x06")
                  or head.startswith(b"\x80\x02\x8a\x0a" + _LEGACY_MAGIC.to_bytes(10, "little")))
    if torch_head:
        return "torch", read_torch_checkpoint(path, opaque)
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle", read_pickle_checkpoint(path, opaque)
    if len(head) == 0:
        raise ConvertError("empty file")
    raise ConvertError("not a torch.save() file (neither a zip archive nor a legacy pickle stream) "
                       "nor a pickle of numpy arrays (Detectron/detectron2 .pkl)")


class _Derived:
    """A converted tensor computed from source tensors when it is written (folded norms,
    detectron2's class rows): shape and dtype are known before."""

    def __init__(self, shape, fn):
        self.shape, self.dtype, self._fn = tuple(shape), np.dtype(np.float32), fn

    def numpy(self):
        a = self._fn()
        assert a.shape == self.shape, (a.shape, self.shape)
        return a


def _is_tensor(x):
    return isinstance(x, (TensorRef, np.ndarray, _Derived)) or (
        isinstance(x, _ArrayBuilder) and x.array is not None)


def _not_tensor(k, v):
    if isinstance(v, _Opaque) or (isinstance(v, type) and issubclass(v, _Opaque)):
        return f"{k} ({v.origin}, a pickled object that is not loaded)"
    return f"{k} ({type(v).__name__})"


def extract_state_dict(obj, wrapper_keys=("model", "state_dict"), ignored=None):
    """The flat {name: tensor} state dict inside a checkpoint object: accepts a plain state dict,
    {'model': sd} / {'state_dict': sd} wrappers and a DataParallel 'module.' prefix.  The other
    keys of a wrapper (optimizer, scheduler, iteration, ...) are listed in `ignored`."""
    if isinstance(obj, dict) and not all(_is_tensor(v) for v in obj.values()):
        for k in wrapper_keys:
            if isinstance(obj.get(k), dict):
                if ignored is not None:
                    ignored.extend(str(o) for o in obj if o != k)
                obj = obj[k]
                break
    if not isinstance(obj, dict):
        what = obj.origin if isinstance(obj, _Opaque) else type(obj).__name__
        raise ConvertError(f"top-level object is a {what}, not a state dict")
    bad = [_not_tensor(k, v) for k, v in obj.items() if not isinstance(k, str) or not _is_tensor(v)]
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
    """One model zoo's checkpoint layout.

    containers: the file kinds it comes in ('torch': torch.save(), 'pickle': a .pkl of numpy
    arrays); extract(kind, obj, ignored) -> {source name: tensor}; rules: (source template,
    canonical template) pairs; ignore: (label, regex) pairs of source names that are not
    weights of the model (counted and reported); dynamic_rules(state) -> more Rules that
    depend on the file (Detectron's FPN blob names carry the last block index of a stage);
    transform(mapped) -> mapped: value changes that are not renames; warn(ignored) -> list of
    warnings about ignored tensors."""

    def __init__(self, name, containers, extract, rules, ignore=(), dynamic_rules=None,
                 transform=None, warn=None):
        self.name, self.containers, self.extract, self.rules = name, containers, extract, rules
        self.ignore = [(label, re.compile(rx)) for label, rx in ignore]
        self.dynamic_rules, self.transform, self.warn = dynamic_rules, transform, warn

    def bind(self, state):
        """This format with the rules that depend on the names in `state`."""
        if self.dynamic_rules is None:
            return self
        bound = SourceFormat(self.name, self.containers, self.extract, self.rules + self.dynamic_rules(state),
                             [], None, self.transform, self.warn)
        bound.ignore = self.ignore
        return bound

    def source_name(self, canonical_name):
        """The (current, non-legacy) source name of a canonical tensor, or None."""
        for r in self.rules:
            if not r.legacy:
                s = r.to_source(canonical_name)
                if s is not None:
                    return s
        return None

    def map_names(self, state, ignored=None):
        """{source name: tensor} -> {canonical name: (source name, tensor)}; unknown names and
        two source names for one canonical tensor are errors.  Ignored names are collected in
        `ignored` ({label: [(name, tensor)]})."""
        out, unknown = {}, []
        for name, t in state.items():
            label = next((lb for lb, rx in self.ignore if rx.search(name)), None)
            if label is not None:
                if ignored is not None:
                    ignored.setdefault(label, []).append((name, t))
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


def _enum(regex, canon, table):
    """A Field whose values are renamed through `table` (source value -> canonical value)."""
    back = {v: k for k, v in table.items()}

    def lookup(d, v):
        if v not in d:
            raise ValueError(v)  # Rule.to_source: this canonical name has no such source name
        return d[v]

    return Field(regex, canon, to_canon=lambda v: lookup(table, v), from_canon=lambda v: lookup(back, v))


_BLOCK = Field(r"0|[1-9][0-9]*", "b")
_BN = Field(r"weight|bias|running_mean|running_var", "p")
_WB = Field(r"weight|bias", "t")

# ---- torchvision ------------------------------------------------------------------------

_TV_FIELDS = {
    "L": Field(r"[1-4]", "S", offset=1),  # body.layer1..4 -> res2..5
    "l": Field(r"[0-3]", "S", offset=2),  # fpn blocks 0..3 -> levels 2..5
    "j": Field(r"[0-3]", "n", offset=1),  # mask_head.0..3 -> fcn1..4
    "n": Field(r"[1-4]", "n"),
    "b": _BLOCK,
    "k": Field(r"[123]", "k"),
    "p": _BN,
    "t": _WB,
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


def _rules(table, fields):
    return [Rule(row[0], row[1], fields, legacy=len(row) > 2 and row[2]) for row in table]


def _extract_torch(kind, obj, ignored):
    return extract_state_dict(obj, ignored=ignored)


_IGNORE_BN_COUNTER = ("BatchNorm num_batches_tracked counters", r"(^|\.)num_batches_tracked\Z")

# ---- maskrcnn-benchmark -----------------------------------------------------------------
# Names from facebookresearch/maskrcnn-benchmark: modeling/backbone/resnet.py (StemWithFixedBatchNorm
# conv1/bn1 in `stem`; stages "layer1".."layer4" = res2..res5 (StageSpec index 1..4); Bottleneck
# conv1..3/bn1..3, downsample = Sequential(Conv2d, FrozenBatchNorm2d)), backbone/backbone.py
# (Sequential body/fpn), backbone/fpn.py ("fpn_inner{1..4}"/"fpn_layer{1..4}" for res2..res5),
# rpn/rpn.py RPNHead (conv, cls_logits, bbox_pred), roi_heads/box_head (feature_extractor
# fc6/fc7, predictor cls_score/bbox_pred), roi_heads/mask_head (feature_extractor
# mask_fcn1..4, predictor conv5_mask/mask_fcn_logits).  utils/checkpoint.py saves
# {'model': model.state_dict(), 'optimizer', 'scheduler', 'iteration'}, 'module.'-prefixed
# when trained with DistributedDataParallel.  Classes: 81 rows, background 0 (as Detectron).

_MB_FIELDS = dict(_TV_FIELDS, i=Field(r"[1-4]", "S", offset=1))

_MB_TABLE = [
    ("backbone.body.stem.conv1.weight", "backbone.stem.conv.weight"),
    ("backbone.body.stem.bn1.{p}", "backbone.stem.norm.{p}"),
    ("backbone.body.layer{L}.{b}.conv{k}.weight", "backbone.res{S}.{b}.conv{k}.weight"),
    ("backbone.body.layer{L}.{b}.bn{k}.{p}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("backbone.body.layer{L}.{b}.downsample.0.weight", "backbone.res{S}.{b}.shortcut.weight"),
    ("backbone.body.layer{L}.{b}.downsample.1.{p}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("backbone.fpn.fpn_inner{i}.{t}", "fpn.lateral{S}.{t}"),
    ("backbone.fpn.fpn_layer{i}.{t}", "fpn.output{S}.{t}"),
    ("rpn.head.conv.{t}", "rpn.conv.{t}"),
    ("rpn.head.cls_logits.{t}", "rpn.objectness.{t}"),
    ("rpn.head.bbox_pred.{t}", "rpn.deltas.{t}"),
    ("roi_heads.box.feature_extractor.fc6.{t}", "box_head.fc6.{t}"),
    ("roi_heads.box.feature_extractor.fc7.{t}", "box_head.fc7.{t}"),
    ("roi_heads.box.predictor.cls_score.{t}", "box_predictor.cls_score.{t}"),
    ("roi_heads.box.predictor.bbox_pred.{t}", "box_predictor.bbox_pred.{t}"),
    ("roi_heads.mask.feature_extractor.mask_fcn{n}.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_heads.mask.predictor.conv5_mask.{t}", "mask_head.deconv.{t}"),
    ("roi_heads.mask.predictor.mask_fcn_logits.{t}", "mask_head.logits.{t}"),
]


def _fold_frozen_bn_no_eps(mapped):
    """maskrcnn-benchmark's FrozenBatchNorm2d (layers/batch_norm.py, master) has no eps:
    scale = weight * running_var.rsqrt(); bias = bias - running_mean * scale; y = x*scale + bias.
    Each complete group is folded here, in float32 with the same operations, into the
    AffineChannel form norm.{scale,shift}, so the file needs no eps (the config's
    backbone.norm_eps does not apply to it).  Incomplete groups are left for check_canonical
    to report."""
    out = dict(mapped)
    groups = sorted({n[: -len(".running_var")] for n in mapped if n.endswith(".norm.running_var")})
    for g in groups:
        names = [f"{g}.{p}" for p in BN_PARAMS]
        if not all(n in mapped for n in names):
            continue
        srcs = [mapped[n] for n in names]
        shape = tuple(srcs[0][1].shape)
        if any(tuple(t.shape) != shape or len(shape) != 1 for _, t in srcs):
            continue  # check_canonical reports the shapes

        def fold(srcs=srcs):
            w, b, m, v = (_materialize(t).astype(np.float32) for _, t in srcs)
            with np.errstate(divide="ignore", invalid="ignore"):
                scale = w * (np.float32(1) / np.sqrt(v))
                shift = b - m * scale
            return scale, shift

        cache = {}

        def part(i, fold=fold, cache=cache):
            if "v" not in cache:
                cache["v"] = fold()
            return cache["v"][i]

        src = srcs[0][0].rsplit(".", 1)[0] + ".{weight,bias,running_mean,running_var} (folded, no eps)"
        for n in names:
            del out[n]
        out[g + ".scale"] = (src, _Derived(shape, lambda part=part: part(0)))
        out[g + ".shift"] = (src, _Derived(shape, lambda part=part: part(1)))
    return out


# ---- detectron2 -------------------------------------------------------------------------
# Names: /work/shared/reference/detectron2_r101_keys.txt (detectron2 modeling/backbone/
# resnet.py BasicStem/BottleneckBlock with FrozenBatchNorm2d `norm`, fpn.py fpn_lateral/
# fpn_output{2..5}, proposal_generator/rpn.py StandardRPNHead, roi_heads/box_head.py fc1/fc2,
# fast_rcnn.py FastRCNNOutputLayers, mask_head.py MaskRCNNConvUpsampleHead).  FrozenBN keeps
# running stats with eps 1e-5 (layers/batch_norm.py): the BatchNorm form is kept and the
# config says backbone.norm_eps 1e-5.

_D2_FIELDS = {"S": Field(r"[2-5]", "S"), "b": _BLOCK, "k": Field(r"[123]", "k"),
              "n": Field(r"[1-4]", "n"), "p": _BN, "t": _WB}

_D2_TABLE = [
    ("backbone.bottom_up.stem.conv1.weight", "backbone.stem.conv.weight"),
    ("backbone.bottom_up.stem.conv1.norm.{p}", "backbone.stem.norm.{p}"),
    ("backbone.bottom_up.res{S}.{b}.conv{k}.weight", "backbone.res{S}.{b}.conv{k}.weight"),
    ("backbone.bottom_up.res{S}.{b}.conv{k}.norm.{p}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("backbone.bottom_up.res{S}.{b}.shortcut.weight", "backbone.res{S}.{b}.shortcut.weight"),
    ("backbone.bottom_up.res{S}.{b}.shortcut.norm.{p}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("backbone.fpn_lateral{S}.{t}", "fpn.lateral{S}.{t}"),
    ("backbone.fpn_output{S}.{t}", "fpn.output{S}.{t}"),
    ("proposal_generator.rpn_head.conv.{t}", "rpn.conv.{t}"),
    ("proposal_generator.rpn_head.objectness_logits.{t}", "rpn.objectness.{t}"),
    ("proposal_generator.rpn_head.anchor_deltas.{t}", "rpn.deltas.{t}"),
    ("roi_heads.box_head.fc1.{t}", "box_head.fc6.{t}"),
    ("roi_heads.box_head.fc2.{t}", "box_head.fc7.{t}"),
    ("roi_heads.box_predictor.cls_score.{t}", "box_predictor.cls_score.{t}"),
    ("roi_heads.box_predictor.bbox_pred.{t}", "box_predictor.bbox_pred.{t}"),
    ("roi_heads.mask_head.mask_fcn{n}.{t}", "mask_head.fcn{n}.{t}"),
    ("roi_heads.mask_head.deconv.{t}", "mask_head.deconv.{t}"),
    ("roi_heads.mask_head.predictor.{t}", "mask_head.logits.{t}"),
]


def _d2_classes_to_ours(mapped):
    """detectron2 keeps K = 80+1 rows in cls_score with background LAST (row 80;
    FastRCNNOutputLayers: softmax over K+1, background = index K), bbox_pred has 4 rows per
    foreground class only (320, row 4c+j = class c) and the mask predictor one channel per
    foreground class (80).  Our layout has background at row/channel 0: cls_score rows are
    rotated (row 80 -> 0, rows 0..79 -> 1..80); bbox_pred gets 4 zero rows in front (the
    background deltas, never used); mask logits get a zero channel 0 (never used)."""
    out = dict(mapped)
    cls = mapped.get("box_predictor.cls_score.weight")
    if cls is None or len(cls[1].shape) != 2:
        return out  # check_canonical reports it
    K = cls[1].shape[0]
    for name, rows, per in (("box_predictor.bbox_pred", 4 * (K - 1), 4), ("mask_head.logits", K - 1, 1)):
        w = mapped.get(name + ".weight")
        if w is not None and len(w[1].shape) >= 1 and w[1].shape[0] != rows:
            agnostic = " (class-agnostic, not supported)" if w[1].shape[0] == per else ""
            raise ConvertError(f"{w[0]} has {w[1].shape[0]} rows{agnostic}; detectron2 stores {per} per "
                               f"foreground class, and {cls[0]} has {K} rows (80+1 background): "
                               f"expected {rows}")

    def rotate(t):
        return lambda: np.concatenate([_materialize(t)[-1:], _materialize(t)[:-1]]).astype(np.float32)

    def pad(t, n):
        return lambda: np.concatenate([np.zeros((n,) + tuple(t.shape[1:]), np.float32),
                                       _materialize(t).astype(np.float32)])

    for p in ("weight", "bias"):
        for name, how in (("box_predictor.cls_score", "rotated: background row moved from last to 0"),
                          ("box_predictor.bbox_pred", "4 zero background rows inserted at 0"),
                          ("mask_head.logits", "zero background channel inserted at 0")):
            e = mapped.get(f"{name}.{p}")
            if e is None or len(e[1].shape) == 0:
                continue
            src, t = e
            if name == "box_predictor.cls_score":
                out[f"{name}.{p}"] = (f"{src} ({how})", _Derived(t.shape, rotate(t)))
            else:
                n = 4 if name == "box_predictor.bbox_pred" else 1
                out[f"{name}.{p}"] = (f"{src} ({how})",
                                      _Derived((t.shape[0] + n,) + tuple(t.shape[1:]), pad(t, n)))
    return out


def _extract_d2(kind, obj, ignored):
    if kind == "pickle":  # model zoo .pkl: {'model': {name: ndarray}, '__author__': ..., ...}
        if not isinstance(obj, dict) or not isinstance(obj.get("model"), dict):
            raise ConvertError("a .pkl without a 'model' dict (not a detectron2 model zoo file)")
        return extract_state_dict(obj, wrapper_keys=("model",), ignored=ignored)
    return extract_state_dict(obj, ignored=ignored)  # .pth: {'model', 'optimizer', 'scheduler', 'iteration'}


# ---- Detectron (Caffe2) ---------------------------------------------------------------------
# detectron/utils/net.py save_model_to_weights_file: pickle.dump(dict(blobs=..., cfg=yaml),
# protocol 2, Python 2) of every param, its *_momentum, and the blobs of the ImageNet init file
# the model never used ("preserved": fc1000_*, zero biases of bias-less convs that
# tools/pickle_caffe_blobs.py add_missing_biases created).  Blob names: modeling/ResNet.py
# (conv1 + res_conv1_bn; res{S}_{b}_branch2{a,b,c} + _bn, res{S}_0_branch1 + _bn;
# AffineChannel _bn_s/_bn_b), modeling/FPN.py (fpn_inner_res5_{last}_sum, fpn_inner_res{S}_
# {last}_sum_lateral, fpn_res{S}_{last}_sum; conv_rpn_fpn2/rpn_cls_logits_fpn2/rpn_bbox_pred_
# fpn2 shared by all levels), fast_rcnn_heads.py (fc6, fc7, cls_score, bbox_pred),
# mask_rcnn_heads.py (_[mask]_fcn1..4, conv5_mask, mask_fcn_logits).  Classes: 81 rows,
# background 0, bbox_pred 4*81 rows: our layout already.

_DT_FIELDS = {
    "S": Field(r"[2-5]", "S"), "b": _BLOCK, "n": Field(r"[1-4]", "n"),
    "x": _enum(r"[abc]", "k", {"a": "1", "b": "2", "c": "3"}),  # branch2a/b/c -> conv1/2/3
    "q": _enum(r"s|b", "p", {"s": "scale", "b": "shift"}),  # AffineChannel _bn_s/_bn_b
    "t": _enum(r"w|b", "t", {"w": "weight", "b": "bias"}),
}

_DT_TABLE = [
    ("conv1_w", "backbone.stem.conv.weight"),
    ("res_conv1_bn_{q}", "backbone.stem.norm.{p}"),
    ("res{S}_{b}_branch2{x}_w", "backbone.res{S}.{b}.conv{k}.weight"),
    ("res{S}_{b}_branch2{x}_bn_{q}", "backbone.res{S}.{b}.conv{k}.norm.{p}"),
    ("res{S}_{b}_branch1_w", "backbone.res{S}.{b}.shortcut.weight"),
    ("res{S}_{b}_branch1_bn_{q}", "backbone.res{S}.{b}.shortcut.norm.{p}"),
    ("conv_rpn_fpn2_{t}", "rpn.conv.{t}"),
    ("rpn_cls_logits_fpn2_{t}", "rpn.objectness.{t}"),
    ("rpn_bbox_pred_fpn2_{t}", "rpn.deltas.{t}"),
    ("fc6_{t}", "box_head.fc6.{t}"),
    ("fc7_{t}", "box_head.fc7.{t}"),
    ("cls_score_{t}", "box_predictor.cls_score.{t}"),
    ("bbox_pred_{t}", "box_predictor.bbox_pred.{t}"),
    ("_[mask]_fcn{n}_{t}", "mask_head.fcn{n}.{t}"),
    ("conv5_mask_{t}", "mask_head.deconv.{t}"),
    ("mask_fcn_logits_{t}", "mask_head.logits.{t}"),
]

_DT_BLOCK = re.compile(r"res([2-5])_(0|[1-9][0-9]*)_branch2a_w\Z")
_DT_UNUSED_BIAS = "zero biases of bias-less backbone convs (Detectron's add_missing_biases)"


def _detectron_fpn_rules(state):
    """FPN blobs are named after the last block of each stage (fpn_inner_res4_22_sum_lateral
    for R-101, res4_5 for R-50): rules for the block counts found in `state`."""
    last = {}
    for name in state:
        m = _DT_BLOCK.match(name)
        if m:
            last[int(m.group(1))] = max(last.get(int(m.group(1)), 0), int(m.group(2)))
    rows = []
    for S, b in sorted(last.items()):
        inner = f"fpn_inner_res{S}_{b}_sum" if S == 5 else f"fpn_inner_res{S}_{b}_sum_lateral"
        rows += [(inner + "_{t}", f"fpn.lateral{S}.{{t}}"), (f"fpn_res{S}_{b}_sum_{{t}}", f"fpn.output{S}.{{t}}")]
    return _rules(rows, _DT_FIELDS)


def _detectron_warn(ignored):
    """Detectron's convs are no_bias (ResNet.py ConvAffine), so it never used these blobs; say so
    when one is not zero, since ignoring it then changes nothing Detectron computed but the file
    is unusual."""
    out = []
    for name, t in ignored.get(_DT_UNUSED_BIAS, []):
        a = _materialize(t)
        if a.size and np.any(a != 0):
            out.append(f"ignored blob {name} is not zero (max |b| = {float(np.max(np.abs(a))):.3g}); "
                       "Detectron never applies it (its backbone convs have no bias)")
    return out


def _extract_detectron(kind, obj, ignored):
    if not isinstance(obj, dict):
        raise ConvertError(f"top-level object is a {type(obj).__name__}, not Detectron's {{'blobs': ...}}")
    if "blobs" in obj:  # model_final.pkl; a dict of blobs alone is the older layout
        if not isinstance(obj["blobs"], dict):
            raise ConvertError("'blobs' is not a dict")
        ignored.extend(str(k) for k in obj if k != "blobs")
        obj = obj["blobs"]
    bad = [_not_tensor(k, v) for k, v in obj.items() if not isinstance(k, str) or not _is_tensor(v)]
    if bad:
        raise ConvertError(f"blobs that are not arrays: {_names(bad)}")
    if not obj:
        raise ConvertError("no blobs")
    return dict(obj)


SOURCE_FORMATS = {
    "torchvision": SourceFormat(
        "torchvision", ("torch",), _extract_torch, _rules(_TV_TABLE, _TV_FIELDS),
        ignore=[_IGNORE_BN_COUNTER]),
    "maskrcnn-benchmark": SourceFormat(
        "maskrcnn-benchmark", ("torch",), _extract_torch, _rules(_MB_TABLE, _MB_FIELDS),
        ignore=[("anchor buffers rpn.anchor_generator.cell_anchors.* (the config's anchors)",
                 r"\Arpn\.anchor_generator\.cell_anchors\.[0-9]+\Z"), _IGNORE_BN_COUNTER],
        transform=_fold_frozen_bn_no_eps),
    "detectron2": SourceFormat(
        "detectron2", ("pickle", "torch"), _extract_d2, _rules(_D2_TABLE, _D2_FIELDS),
        ignore=[("pixel_mean/pixel_std buffers (config keys input.pixel_*)", r"\Apixel_(mean|std)\Z"),
                ("anchor buffers (the config's anchors)", r"\Aproposal_generator\.anchor_generator\.cell_anchors\.[0-9]+\Z"),
                _IGNORE_BN_COUNTER],
        transform=_d2_classes_to_ours),
    "detectron": SourceFormat(
        "detectron", ("pickle",), _extract_detectron, _rules(_DT_TABLE, _DT_FIELDS),
        ignore=[("optimizer momentum blobs *_momentum", r"_momentum\Z"),
                ("ImageNet classifier blobs fc1000_*", r"\Afc1000_[wb]\Z"),
                (_DT_UNUSED_BIAS, r"\A(conv1|res[2-5]_[0-9]+_branch(1|2[abc]))_b\Z")],
        dynamic_rules=_detectron_fpn_rules, warn=_detectron_warn),
}


def detect_format(kind, obj):
    """The source format of a loaded checkpoint, from its structure and tensor names."""
    if kind == "pickle":
        if isinstance(obj, dict) and "blobs" in obj:
            return "detectron"
        if isinstance(obj, dict) and isinstance(obj.get("model"), dict):
            return "detectron2"
        if isinstance(obj, dict) and "conv1_w" in obj:
            return "detectron"
        raise ConvertError("a pickle that is neither Detectron's {'blobs': ...} nor detectron2's "
                           "{'model': ...} (use --from to say which it is)")
    names = list(extract_state_dict(obj))
    for prefixes, fmt in ((("backbone.bottom_up.", "proposal_generator."), "detectron2"),
                          (("backbone.body.stem.", "roi_heads.box.", "roi_heads.mask."), "maskrcnn-benchmark"),
                          (("backbone.body.",), "torchvision")):
        if any(n.startswith(prefixes) for n in names):
            return fmt
    return "torchvision"  # the historical default: its unknown-name error lists the names



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
    res2_conv1 = ck.shape("backbone.res2.0.conv1.weight")
    info = dict(depth=depth, blocks=counts, num_classes=K, num_anchors=A, fpn_dim=F,
                pooler=pool, representation=R, mask_dim=M, groups=groups, norm=norm,
                stem_out_channels=stem[0], res2_out_channels=stage_out[2],
                width_per_group=res2_conv1[0] // groups)
    return [n for n in ck.order if n in shapes], info


# ---------------------------------------------------------------------------------------
# Conversion
# ---------------------------------------------------------------------------------------

DTYPES = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16)}


def _materialize(t):
    return np.asarray(t) if isinstance(t, np.ndarray) else t.numpy()


def convert_state_dict(state, source_format="torchvision", dtype="f32"):
    """{source name: ndarray or TensorRef} -> (OrderedDict {canonical name: ndarray}, info).
    The shared path of convert.py and tests/parity/oracle.py export_weights().  info has the
    checks' results plus `ignored` ({label: [source names]}) and `warnings`."""
    fmt = SOURCE_FORMATS[source_format].bind(state)
    ignored = {}
    mapped = fmt.map_names(state, ignored)
    if fmt.transform is not None:
        mapped = fmt.transform(mapped)

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
    info["ignored"] = {label: [n for n, _ in items] for label, items in ignored.items()}
    info["warnings"] = fmt.warn(ignored) if fmt.warn is not None else []
    return out, info


# torchvision's COCO_V1 file (maskrcnn_resnet50_fpn_coco-bf2d0c1e.pth, the file name's hash is
# a SHA-256 prefix): torchvision's maskrcnn_resnet50_fpn calls overwrite_eps(model, 0.0) after
# loading exactly these weights (torchvision/models/detection/mask_rcnn.py).
_TORCHVISION_COCO_SHA256_PREFIX = "bf2d0c1e"


def norm_eps_of(info, source_format, source_sha256):
    """The FrozenBatchNorm eps the source framework uses with these weights (config key
    backbone.norm_eps), or None when the file holds folded AffineChannel norms."""
    if info["norm"] != "batchnorm":
        return None
    if source_format == "torchvision" and str(source_sha256).startswith(_TORCHVISION_COCO_SHA256_PREFIX):
        return "0"
    return "1e-05"  # torchvision and detectron2 FrozenBatchNorm2d


def class_names_of(source_format, num_classes):
    if source_format == "torchvision" and num_classes == 91:
        return coco_classes.TORCHVISION_91
    if num_classes == 81:
        return coco_classes.COCO_81
    return None


def suggested_config_of(info, source_format):
    """configs/mask_rcnn_R-{50,101}-FPN_<format>.json (written by the engine's owners), or ""
    where no config exists (R-152, grouped convolutions)."""
    if info["depth"] not in (50, 101) or info["groups"] != 1:
        return ""
    return f"configs/mask_rcnn_R-{info['depth']}-FPN_{source_format}.json"


def make_metadata(info, source_format, source_sha256):
    meta = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "source_format": source_format,
        "source_sha256": source_sha256,
        "num_classes": str(info["num_classes"]),
        "depth": str(info["depth"]),
        "num_groups": str(info["groups"]),
        "width_per_group": str(info["width_per_group"]),
        "stem_out_channels": str(info["stem_out_channels"]),
        "res2_out_channels": str(info["res2_out_channels"]),
        "norm": info["norm"],
        "suggested_config": suggested_config_of(info, source_format),
    }
    eps = norm_eps_of(info, source_format, source_sha256)
    if eps is not None:
        meta["norm_eps"] = eps
    names = class_names_of(source_format, info["num_classes"])
    if names is not None:
        meta["class_names"] = json.dumps(names)
    return meta


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


_CONTAINER_WORDS = {"torch": "a torch.save() file (.pth)", "pickle": "a plain pickle of numpy arrays (.pkl)"}


def convert_file(src, dst, source_format="auto", dtype="f32"):
    """Convert SRC to DST.  Returns info (with `source_format`, `detected`, `opaque`,
    `ignored_entries`); raises ConvertError (DST untouched on error)."""
    if source_format != "auto" and source_format not in SOURCE_FORMATS:
        raise ConvertError(f"unknown source format {source_format!r}")
    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        raise ConvertError("SRC and DST are the same file")
    try:
        digest = sha256_file(src)
    except OSError as e:
        raise ConvertError(f"cannot read: {e.strerror or e}") from None
    opaque, entries = set(), []
    kind, obj = load_checkpoint(src, opaque)
    detected = source_format == "auto"
    name = detect_format(kind, obj) if detected else source_format
    fmt = SOURCE_FORMATS[name]
    if kind not in fmt.containers:
        raise ConvertError(f"--from {name} reads {' or '.join(_CONTAINER_WORDS[c] for c in fmt.containers)}; "
                           f"this is {_CONTAINER_WORDS[kind]} (leave out --from to detect the format)")
    state = fmt.extract(kind, obj, entries)
    tensors, info = convert_state_dict(state, name, dtype)
    try:
        safetensors_io.save(tensors, dst, make_metadata(info, name, digest))
    except OSError as e:
        raise ConvertError(f"cannot write {dst}: {e.strerror or e}") from None
    info.update(source_format=name, detected=detected, opaque=sorted(opaque), ignored_entries=entries,
                suggested_config=suggested_config_of(info, name))
    return info


def _report(args, info):
    fmt = info["source_format"]
    how = "detected" if info["detected"] else "given with --from"
    print(f"{args.src}: {fmt} checkpoint ({how})")
    if info["ignored_entries"]:
        print(f"  not weights, ignored: {', '.join(info['ignored_entries'])}")
    if info["opaque"]:
        print(f"  pickled objects of classes outside the allow-list, not loaded: {_names(info['opaque'], 6)}")
    n = sum(len(v) for v in info["ignored"].values())
    if n:
        print(f"  ignored {n} source tensors: "
              + "; ".join(f"{len(v)} {label}" for label, v in info["ignored"].items()))
    if info["groups"] != 1:
        print(f"  grouped 3x3 convolutions: {info['groups']} groups x {info['width_per_group']} "
              "(ResNeXt; recorded in the metadata; the engine does not run grouped convolutions yet)")
    print(f"{args.dst}: R-{info['depth']} FPN, {info['num_classes']} classes, "
          f"{info['num_anchors']} anchors/position, {info['norm']} norms, {args.dtype}")
    cfg = info["suggested_config"]
    print(f"suggested config: {cfg}" if cfg else "suggested config: none (no config for this backbone yet)")


def main(argv=None):
    ap = argparse.ArgumentParser(
        prog="convert.py",
        description="Convert a Mask R-CNN checkpoint (Detectron .pkl, detectron2 .pkl/.pth, "
                    "maskrcnn-benchmark .pth, torchvision .pth) to canonical detect safetensors "
                    "(models/README.md).")
    ap.add_argument("src", metavar="SRC", help="checkpoint")
    ap.add_argument("dst", metavar="DST", help="output .safetensors")
    ap.add_argument("--from", dest="source_format", default="auto", choices=["auto"] + sorted(SOURCE_FORMATS),
                    help="source format (default: detected from the file's structure and names)")
    ap.add_argument("--dtype", default="f32", choices=sorted(DTYPES))
    ap.add_argument("-q", "--quiet", action="store_true", help="print nothing on success (warnings still)")
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
    for w in info["warnings"]:
        print(f"convert.py: {args.src}: warning: {w}", file=sys.stderr)
    if not args.quiet:
        _report(args, info)
    return 0


if __name__ == "__main__":
    sys.exit(main())
