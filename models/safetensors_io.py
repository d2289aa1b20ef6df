"""Minimal safetensors reader/writer using numpy only (no torch, no safetensors package).

File layout (https://github.com/huggingface/safetensors, format spec):
    u64 little-endian N | N bytes of JSON header | data section
The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]} with
offsets relative to the start of the data section, plus an optional "__metadata__" object of
string -> string.  The data section is covered exactly, without holes or overlaps.

Our writer's additional guarantees (the C loader in engine/core/weights.c may rely on them):
  * the JSON header is padded with spaces so the data section starts at a multiple of 8;
  * tensors are laid out in order of decreasing element size (stable, so within one dtype the
    caller's order is kept), hence every tensor starts at a multiple of its element size;
  * all data is little-endian and C-contiguous;
  * the file is written to a temporary name in the destination directory and renamed into
    place, so a failed write never leaves a partial file under the final name.
"""

import json
import os
import struct
import tempfile

import numpy as np

# safetensors dtype tag <-> little-endian numpy dtype.  BF16 has no numpy equivalent and is
# therefore not supported here.
_TAG_TO_NP = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_KIND_SIZE_TO_TAG = {(dt.kind, dt.itemsize): tag for tag, dt in _TAG_TO_NP.items()}

MAX_HEADER_BYTES = 100 * 1024 * 1024  # same cap as the reference implementation


class SafetensorsError(ValueError):
    """The file is not a valid safetensors file, or a tensor cannot be stored."""


def dtype_tag(dtype):
    """safetensors dtype tag ('F32', ...) for a numpy dtype; raises SafetensorsError."""
    dt = np.dtype(dtype)
    tag = _KIND_SIZE_TO_TAG.get((dt.kind, dt.itemsize))
    if tag is None:
        raise SafetensorsError(f"unsupported dtype {dt}")
    return tag


def _header_bytes(entries, metadata):
    hdr = {}
    if metadata:
        hdr["__metadata__"] = {}
        for k, v in metadata.items():
            if not isinstance(k, str) or not isinstance(v, str):
                raise SafetensorsError(f"metadata must map str to str, got {k!r}: {v!r}")
            hdr["__metadata__"][k] = v
    hdr.update(entries)
    raw = json.dumps(hdr, separators=(",", ":"), ensure_ascii=True).encode("ascii")
    raw += b" " * (-(8 + len(raw)) % 8)
    return raw


def save(tensors, path, metadata=None):
    """Write {name: ndarray} to `path` as safetensors.  metadata: {str: str} or None."""
    if "__metadata__" in tensors:
        raise SafetensorsError("'__metadata__' is reserved and cannot be a tensor name")
    arrays = []
    for name, a in tensors.items():
        if not isinstance(name, str) or not name:
            raise SafetensorsError(f"tensor name must be a non-empty str, got {name!r}")
        a = np.asarray(a)
        tag = dtype_tag(a.dtype)
        a = np.ascontiguousarray(a, dtype=_TAG_TO_NP[tag])  # forces little-endian, C order
        arrays.append((name, tag, a))
    # Larger element sizes first: keeps every tensor aligned to its own element size.
    arrays.sort(key=lambda t: -t[2].dtype.itemsize)

    entries, off = {}, 0
    for name, tag, a in arrays:
        entries[name] = {"dtype": tag, "shape": list(a.shape), "data_offsets": [off, off + a.nbytes]}
        off += a.nbytes
    header = _header_bytes(entries, metadata)

    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=os.path.basename(path) + ".", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(struct.pack("<Q", len(header)))
            f.write(header)
            for _, _, a in arrays:
                f.write(memoryview(a.reshape(-1)).cast("B") if a.size else b"")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def read_header(path):
    """Parse and validate only the header.  Returns (entries, metadata, data_start)."""
    with open(path, "rb") as f:
        head = f.read(8)
        if len(head) != 8:
            raise SafetensorsError(f"{path}: file too short for a safetensors header")
        (n,) = struct.unpack("<Q", head)
        if n > MAX_HEADER_BYTES:
            raise SafetensorsError(f"{path}: header length {n} exceeds {MAX_HEADER_BYTES}")
        raw = f.read(n)
        if len(raw) != n:
            raise SafetensorsError(f"{path}: truncated header ({len(raw)} of {n} bytes)")
        f.seek(0, os.SEEK_END)
        file_size = f.tell()
    try:
        hdr = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid JSON: {e}") from None
    if not isinstance(hdr, dict):
        raise SafetensorsError(f"{path}: header is not a JSON object")
    metadata = hdr.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()
    ):
        raise SafetensorsError(f"{path}: __metadata__ must map str to str")

    data_start = 8 + n
    data_size = file_size - data_start
    spans = []
    for name, e in hdr.items():
        if not isinstance(e, dict) or set(e) != {"dtype", "shape", "data_offsets"}:
            raise SafetensorsError(f"{path}: tensor {name!r}: malformed header entry")
        tag, shape, offs = e["dtype"], e["shape"], e["data_offsets"]
        if tag not in _TAG_TO_NP:
            raise SafetensorsError(f"{path}: tensor {name!r}: unsupported dtype {tag!r}")
        if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
            raise SafetensorsError(f"{path}: tensor {name!r}: bad shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2
                or not all(isinstance(o, int) for o in offs) or not 0 <= offs[0] <= offs[1]):
            raise SafetensorsError(f"{path}: tensor {name!r}: bad data_offsets {offs!r}")
        nbytes = int(np.prod(shape, dtype=np.int64)) * _TAG_TO_NP[tag].itemsize
        if offs[1] - offs[0] != nbytes:
            raise SafetensorsError(
                f"{path}: tensor {name!r}: {offs[1] - offs[0]} bytes for shape {shape} {tag}")
        if offs[1] > data_size:
            raise SafetensorsError(f"{path}: tensor {name!r}: data beyond end of file (truncated?)")
        spans.append((offs[0], offs[1], name))
    spans.sort()
    pos = 0
    for b, e, name in spans:
        if b != pos:
            raise SafetensorsError(f"{path}: tensor {name!r}: data section has a hole or overlap at {pos}")
        pos = e
    if pos != data_size:
        raise SafetensorsError(f"{path}: {data_size - pos} trailing bytes after the last tensor")
    return hdr, metadata, data_start


def load(path):
    """Read a safetensors file.  Returns (tensors, metadata): {name: ndarray} (writable copies,
    in header order, native byte order) and {str: str}."""
    entries, metadata, data_start = read_header(path)
    with open(path, "rb") as f:
        f.seek(data_start)
        data = f.read()
    out = {}
    for name, e in entries.items():
        dt = _TAG_TO_NP[e["dtype"]]
        b, end = e["data_offsets"]
        a = np.frombuffer(data, dtype=dt, count=(end - b) // dt.itemsize, offset=b)
        out[name] = a.astype(dt.newbyteorder("="), copy=True).reshape(e["shape"])
    return out, dict(metadata)
