"""Reading Mask R-CNN checkpoints without torch and without running anything from the file.

One restricted unpickler reads torch.save() files (zip format and the legacy pre-1.6 stream)
and plain pickles of numpy arrays (Detectron / detectron2 .pkl).  The globals it resolves are
this file's own stand-ins (_ALLOWED_GLOBALS); every other global becomes an inert _Opaque
placeholder.  Tensors come back as lazy TensorRef / _ArrayBuilder objects (.shape, .dtype,
.numpy()).  Every problem is a ConvertError (one line; models/convert.py prints it).
Part of models/convert.py (see models/README.md).

Memory is bounded by the input's size, reader by reader:
  * every pickle is checked in full by pickle_scan.scan() before the C unpickler reads it,
    which bounds what unpickling allocates (pickle_scan's docstring: the arguments' bytes
    plus at most MAX_BYTES_PER_PICKLE_BYTE per byte of pickle);
  * a plain pickle (.pkl) is read into memory once; its arrays are views of that copy's
    byte strings until numpy() copies one;
  * a zip archive's members may declare at most MAX_ZIP_EXPANSION times the archive's
    size in all (torch.save stores them uncompressed), and zipfile never inflates a member
    past its declared size;
  * a legacy stream's storages must lie inside the file;
  * a tensor may not hold more elements than its storage (a stride-0 view would let a
    one-element storage expand to any size).
tests/parity/test_convert.py::test_parse_memory_is_bounded measures each against its bound.
"""

import collections
import io
import math
import mmap
import os
import pickle
import pickletools
import re
import struct
import zipfile

import numpy as np

try:  # imported as part of a package
    from . import pickle_scan
except ImportError:  # run as a script, or imported with models/ on sys.path
    import pickle_scan

# A zip archive's members may declare at most this many times the archive's size, plus
# ZIP_SLACK_BYTES, uncompressed in all: torch.save stores members as they are; a re-zipped
# checkpoint's float storages shrink by ~10%, and its small text records by more (the slack).
MAX_ZIP_EXPANSION = 2
ZIP_SLACK_BYTES = 1 << 20
# Globals outside the allow-list that one file may name (a checkpoint's optimizer, scheduler
# and config objects name a few dozen).
MAX_OPAQUE_CLASSES = 256


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
        if math.prod(self.shape) > st.numel:
            raise ConvertError(f"tensor of shape {list(self.shape)} holds more elements than its storage "
                               f"({st.numel}): a view that repeats elements")
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


class _RestrictedUnpickler(pickle.Unpickler):
    """Resolves the allow-listed globals to convert.py's stand-ins and every other global to an
    inert _Opaque subclass (recorded in `opaque`): nothing from outside this file ever runs."""

    def __init__(self, file, buf, storage_for, opaque=None, encoding="ASCII"):
        # buf: the bytes that file reads (bytes, or an mmap of it), for pickle_scan.scan
        super().__init__(file, encoding=encoding)
        self._file, self._buf = file, buf
        self._storage_for = storage_for  # callable(pid tuple) -> _Storage
        self._opaque = {}
        self.opaque = opaque if opaque is not None else set()

    def load(self):
        try:
            pickle_scan.scan(self._buf, self._file.tell())
        except pickle_scan.TruncatedPickle as e:
            raise ConvertError(f"truncated pickle data ({e})") from None
        except pickle_scan.MalformedPickle as e:
            raise ConvertError(f"malformed pickle ({e})") from None
        return super().load()

    def find_class(self, module, name):
        obj = _ALLOWED_GLOBALS.get((module, name))
        if obj is None:
            origin = f"{module}.{name}"[:120]
            obj = self._opaque.get(origin)
            if obj is None:
                if len(self._opaque) >= MAX_OPAQUE_CLASSES:
                    # each is a class of its own (about 1 KB) from a few bytes of pickle
                    raise ConvertError(f"pickle names more than {MAX_OPAQUE_CLASSES} classes outside the allow-list")
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
    declared = sum(i.file_size for i in zf.infolist())
    allowed = MAX_ZIP_EXPANSION * os.path.getsize(path) + ZIP_SLACK_BYTES
    if declared > allowed:
        raise ConvertError(f"zip archive members declare {declared} bytes uncompressed, more than "
                           f"{MAX_ZIP_EXPANSION}x the archive's size")
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

    data = zf.read(pkls[0])
    return _RestrictedUnpickler(io.BytesIO(data), data, storage_for, opaque).load()


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def _read_legacy_checkpoint(path, opaque):
    f = open(path, "rb")  # kept open by the storages' fetch closures
    # The five pickles are scanned where they lie (pickle_scan), through a map of the file:
    # the storages after them are not read for that.
    buf = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _read_legacy_stream(f, buf, opaque)
    finally:
        buf.close()


def _read_legacy_stream(f, buf, opaque):
    def plain(f):
        return _RestrictedUnpickler(f, buf, lambda pid: None, opaque).load()

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

    obj = _RestrictedUnpickler(f, buf, storage_for, opaque).load()
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
    except MemoryError:  # not a format error: the bounds above failed, or the machine is small
        raise
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
        return _RestrictedUnpickler(io.BytesIO(data), data, no_persistent, opaque, encoding="latin1").load()
    except ConvertError:
        raise
    except EOFError:
        raise ConvertError("truncated pickle (unexpected end of data)") from None
    except MemoryError:  # not a format error: the bounds above failed, or the machine is small
        raise
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



def _materialize(t):
    return np.asarray(t) if isinstance(t, np.ndarray) else t.numpy()
