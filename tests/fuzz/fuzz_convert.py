#!/usr/bin/python3
"""Fuzzes models/convert.py's checkpoint readers in-process: a seeded mutation loop.

    tests/fuzz/fuzz_convert.py [--seconds 60 | --runs N] [--seed N] [--corpus DIR] [--crashes DIR]
    tests/fuzz/fuzz_convert.py --replay FILE...

Each execution mutates one seed of tests/fuzz/corpus/convert/ (small torch.save files, zip and
legacy format, and .pkl pickles of numpy arrays as Detectron (Python 2) and detectron2 write
them, written by make_corpus.py) and runs what convert.py does with a checkpoint before
the name mapping needs a real model: load_checkpoint, detect_format, the format's extract and
read_meta, each tensor's numpy() and convert_state_dict. The contract under test:

  * the only exception is ConvertError (convert.py's documented error, printed as one line).
    Materialising a tensor may also meet the archive's own read errors (anything raised
    inside zipfile or zlib: a bad CRC, a mangled local header), which convert_state_dict
    reports as "cannot read tensor data";
    anything else is a crash: a malformed record that the reader let through;
  * nothing runs but the allow-listed globals: (posix|os).system, os.popen, exec*, subprocess,
    exec, eval and compile are trip-wired during each execution (the
    mutator plants pickles that call them), the unpickled object graph may hold only plain
    containers, numbers, strings, TensorRefs, numpy array records, inert placeholders for
    other globals and the allow-listed globals themselves, and the
    allow-listed objects (the storage types, the rebuild functions) must come out unchanged;
  * a tensor that reads back has the shape and dtype (kind and size) its record promised;
  * each execution takes under 10 s of CPU time (user + system, ITIMER_PROF: a loaded machine
    does not make an honest input look hung; the slowest seed takes about 0.05 s);
  * the process's address space stays within 1 GiB above what it held at the start (RLIMIT_AS):
    an allocation past it is a MemoryError, reported as a crash, and peak RSS is printed.

Mutations: at the pickle level (opcodes deleted, duplicated, swapped or inserted from a list
of dangerous and structural ones, BUILDs setting attributes, integer and string arguments
replaced by boundary values),
on the other zip members (storage data, byteorder, missing or extra records; the zip is
rebuilt so the CRCs are right and the reader sees the change), and on raw bytes (flips,
inserts, truncation, splices) for the legacy format and the zip container itself.

Before fuzzing, a self-test makes sure the trip-wires and the allow-list check fire on a
pickle calling os.system (with find_class falling through, and with os.system allow-listed).

Every distinct crash (exception type + line in convert.py) is saved once to --crashes as
convert-<hash>.pth with its traceback beside it (.txt). Prints executions, time, peak RSS and
crashes; exits 1 if there was any. Stops after --runs mutated executions (the same inputs on
every machine for a given --seed: what make check runs) or at --seconds (wall clock).
"""

import argparse
import builtins
import hashlib
import io
import os
import pickle
import pickletools
import posix
import random
import resource
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
import zipfile
import warnings
import zlib

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "models"))
import convert  # noqa: E402

EXEC_CPU_LIMIT_S = 10
ADDRESS_SPACE_HEADROOM = 1 << 30


class Tripped(BaseException):
    """Raised by a trip-wire: code the pickle should never reach ran. A BaseException, so
    the reader's own `except Exception` cannot swallow it."""


class Hang(BaseException):
    pass


class Crash(Exception):
    """A broken invariant (not an exception of the reader itself)."""


# ---- trip-wires -----------------------------------------------------------------------

_TRIPPED = []


def _tripwire(name, real):
    def f(*args, **kwargs):
        caller = sys._getframe(1).f_code.co_filename
        if caller.startswith("<frozen importlib"):  # a lazy import (e.g. a codec) runs its module
            return real(*args, **kwargs)
        _TRIPPED.append(name)
        raise Tripped(f"{name} called from an unpickled checkpoint with {args!r:.80}")
    return f


_WIRES = [(posix, "system"), (posix, "execv"), (posix, "execve"), (posix, "fork"), (os, "system"), (os, "popen"), (os, "execv"), (os, "execve"), (os, "spawnv"),
          (subprocess, "Popen"), (subprocess, "run"), (subprocess, "check_output"),
          (builtins, "exec"), (builtins, "eval"), (builtins, "compile"), (builtins, "breakpoint")]


class Wired:
    """Context: the callables a malicious pickle reaches for replaced by trip-wires (restored
    on exit). The reader's own code never calls them."""

    def __enter__(self):
        self.saved = [(m, n, getattr(m, n)) for m, n in _WIRES if hasattr(m, n)]
        for m, n, f in self.saved:
            setattr(m, n, _tripwire(f"{m.__name__}.{n}", f))
        return self

    def __exit__(self, *exc):
        for m, n, f in self.saved:
            setattr(m, n, f)
        return False


# ---- the invariants ------------------------------------------------------------------

def _snapshot_globals():
    """What the allow-listed objects look like: a pickle must not be able to change them."""
    snap = {}
    for key, obj in convert._ALLOWED_GLOBALS.items():
        d = getattr(obj, "__dict__", None)
        snap[key] = (dict(d) if isinstance(d, dict) else None, getattr(obj, "__defaults__", None),
                     getattr(obj, "__kwdefaults__", None))
    return snap


_ALLOWED_OBJECTS = {id(v) for v in convert._ALLOWED_GLOBALS.values()}


def check_allow_list():
    """The allow-list may hold only convert.py's own stand-ins: a real
    callable from elsewhere (os.system) would run before any trip-wire could see it."""
    for key, obj in convert._ALLOWED_GLOBALS.items():
        own = (isinstance(obj, convert._StorageType)
               or getattr(obj, "__module__", None) == convert.checkpoint_reader.__name__)
        if not own:
            raise Crash(f"allow-list entry {'.'.join(key)} is {obj!r}, not one of convert.py's stand-ins")
_PLAIN = (str, bytes, bytearray, int, float, complex, bool, type(None))


def check_graph(obj):
    """Every object reachable from the unpickled result is plain data, a TensorRef, a numpy
    array record, an allow-listed global or an inert _Opaque stand-in."""
    seen, stack = set(), [obj]
    while stack:
        o = stack.pop()
        if id(o) in seen:
            continue
        seen.add(id(o))
        if isinstance(o, _PLAIN) or id(o) in _ALLOWED_OBJECTS:
            continue
        if type(o) in (dict, convert._OrderedDict):
            stack.extend(o.keys())
            stack.extend(o.values())
            stack.extend(getattr(o, "__dict__", {}).values())
        elif type(o) in (list, tuple, set, frozenset):
            stack.extend(o)
        elif type(o) in (convert.TensorRef, convert._Storage, convert._ArrayBuilder, convert._DType):
            pass
        elif isinstance(o, convert._Opaque) or (isinstance(o, type) and issubclass(o, convert._Opaque)):
            pass  # a global outside the allow-list: an inert stand-in that ran nothing
        else:
            raise Crash(f"unpickled object of type {type(o).__module__}.{type(o).__qualname__}")


def _archive_error(e):
    """An error of the zip archive itself, met when a storage is read (a bad CRC, a broken
    deflate stream, a mangled local header): raised inside zipfile, or zlib's."""
    if isinstance(e, (zipfile.BadZipFile, zlib.error, EOFError, OSError)):
        return True
    tb = traceback.extract_tb(e.__traceback__)
    return bool(tb) and os.path.basename(tb[-1].filename) == "zipfile.py"


def run_one(path):
    """One execution. Returns normally or raises ConvertError (both fine); anything else is
    a crash."""
    kind, obj = convert.load_checkpoint(path)
    check_graph(obj)
    fmt = convert.detect_format(kind, obj)
    if kind not in convert.SOURCE_FORMATS[fmt].containers:
        raise Crash(f"detected {fmt} for a {kind} file")
    state = convert.SOURCE_FORMATS[fmt].extract(kind, obj, [])
    if convert.SOURCE_FORMATS[fmt].read_meta is not None:  # mmdetection's meta: class names, style
        convert.SOURCE_FORMATS[fmt].read_meta(obj)
    for name, t in state.items():
        if not isinstance(t, (convert.TensorRef, convert._ArrayBuilder)):
            continue
        try:
            a = t.numpy()
        except convert.ConvertError:
            continue
        except Exception as e:
            if not _archive_error(e):
                raise
            continue  # convert_state_dict reports it as "cannot read tensor data"
        want = np.dtype(t.dtype)
        if a.shape != t.shape or a.dtype.kind != want.kind or a.dtype.itemsize != want.itemsize:
            raise Crash(f"{name}: read {a.shape} {a.dtype}, record says {t.shape} {t.dtype}")
    convert.convert_state_dict(state, fmt)


# ---- mutation ------------------------------------------------------------------------

# Pickle snippets a mutator inserts: code execution attempts, then structure.
_EVIL = [b"cos\nsystem\n", b"cposix\nsystem\n", b"cbuiltins\neval\n", b"cbuiltins\nexec\n",
         b"c__builtin__\neval\n", b"cbuiltins\ngetattr\n", b"csubprocess\nPopen\n", b"cnumpy\nload\n",
         b"\x8c\x02os\x8c\x06system\x93", b"\x8c\x08builtins\x8c\x04eval\x93",
         b"cos\nsystem\n(X\x05\x00\x00\x00touch\x00tR", b"\x82\x01", b"\x83\x01\x00"]
_GOOD_GLOBALS = [b"ccollections\nOrderedDict\n", b"ctorch._utils\n_rebuild_tensor_v2\n",
                 b"ctorch._utils\n_rebuild_tensor\n", b"ctorch._utils\n_rebuild_parameter\n",
                 b"ctorch\nFloatStorage\n", b"ctorch\nHalfStorage\n", b"ctorch\nBFloat16Storage\n",
                 b"ctorch\nLongStorage\n", b"ctorch\nBoolStorage\n", b"cnumpy.core.multiarray\n_reconstruct\n",
                 b"cnumpy\nndarray\n", b"cnumpy\ndtype\n", b"cnumpy.core.numeric\n_frombuffer\n",
                 b"c_codecs\nencode\n"]
_STRUCT = [b"b", b"R", b"\x81", b"o", b"(", b")", b"t", b"]", b"}", b"s", b"u", b"a", b"e", b"2", b"0",
           b"1", b"Q", b"P0\n", b"N", b"\x88", b"\x89", b".", b"\x94", b"h\x00", b"h\x05", b"q\x00",
           b"\x85", b"\x86", b"\x87", b"\x8f", b"\x90", b"\x91", b"\x93", b"d", b"l", b"p0\n", b"g0\n",
           b"K\x00", b"K\xff", b"J\xff\xff\xff\xff", b"J\xff\xff\xff\x7f", b"\x8a\x01\x80",
           b"\x8a\x09" + b"\xff" * 8 + b"\x7f", b"X\x00\x00\x00\x00", b"X\x01\x00\x00\x00a",
           b"\x8c\x07storage", b"\x8c\x03cpu", b"G\x7f\xf8\x00\x00\x00\x00\x00\x00", b"C\x00", b"B\x00\x00\x00\x00",
           b"\x95\x00\x00\x00\x00\x00\x00\x00\x00", b"(X\x07\x00\x00\x00storage\x8c\x05torch\x8c\x0cFloatStorage"
           b"\x93X\x01\x00\x00\x000X\x03\x00\x00\x00cpuK\x04tQ",
           # BUILD on whatever is on top of the stack: a dict state, and a (None, slots) state
           b"}X\x05\x00\x00\x00dtypeK\x01sb", b"}X\x04\x00\x00\x00bf16\x88sb", b"}X\x06\x00\x00\x00valuesK\x01sb",
           b"N}X\x0c\x00\x00\x00__defaults__)s\x86b"]
_INTS = [0, 1, -1, 2, 7, 8, 255, 256, 2 ** 31 - 1, 2 ** 31, -2 ** 31, 2 ** 32, 2 ** 62, 2 ** 63 - 1, 2 ** 63,
         -2 ** 63, 2 ** 64, 10 ** 30]
_STRS = ["", "storage", "cpu", "0", "1", "99", "../x", "data.pkl", "module.", "model", "state_dict",
         "__metadata__", "_metadata", "\x00", "\udcff", "a" * 300,
         # attribute names a BUILD could set on what the unpickler returns
         "dtype", "bf16", "numel", "shape", "stride", "offset", "storage", "values", "items", "keys", "get",
         "__defaults__", "__class__", "__setstate__"]


def pickle_ops(p):
    """(opcode, arg, pos) of a pickle; the ops up to a parse error when it is broken."""
    ops = []
    try:
        for op, arg, pos in pickletools.genops(p):
            ops.append((op, arg, pos))
    except Exception:  # a fuzzed pickle: keep what parsed
        pass
    return ops


def encode_int(v):
    if 0 <= v < 256:
        return b"K" + bytes([v])
    if -2 ** 31 <= v < 2 ** 31:
        return b"J" + struct.pack("<i", v)
    raw = v.to_bytes((v.bit_length() + 8) // 8, "little", signed=True)
    return b"\x8a" + bytes([len(raw)]) + raw


def encode_str(s):
    b = s.encode("utf-8", "surrogatepass")
    return b"X" + struct.pack("<I", len(b)) + b


def mutate_pickle(p, rng):
    ops = pickle_ops(p)
    if len(ops) < 2:
        return mutate_bytes(p, rng)
    i = rng.randrange(len(ops))
    op, arg, pos = ops[i]
    end = ops[i + 1][2] if i + 1 < len(ops) else len(p)
    k = rng.randrange(8)
    if k == 0:  # delete an op
        return p[:pos] + p[end:]
    if k == 1:  # duplicate an op
        return p[:end] + p[pos:end] + p[end:]
    if k == 2:  # move an op elsewhere
        piece, rest = p[pos:end], p[:pos] + p[end:]
        j = rng.randrange(len(rest) + 1)
        return rest[:j] + piece + rest[j:]
    if k == 3 and isinstance(arg, int) and not isinstance(arg, bool) and op.name not in ("PROTO", "BINPUT",
                                                                                      "LONG_BINPUT"):
        return p[:pos] + encode_int(rng.choice(_INTS) if rng.random() < 0.8 else arg + rng.randint(-3, 3)) + p[end:]
    if k == 4:  # replace a string (a name, a key, a storage key)
        strs = [j for j, o in enumerate(ops) if o[0].name in ("BINUNICODE", "SHORT_BINUNICODE", "UNICODE")]
        if strs:
            j = rng.choice(strs)
            pos, end = ops[j][2], ops[j + 1][2] if j + 1 < len(ops) else len(p)
            return p[:pos] + encode_str(rng.choice(_STRS)) + p[end:]
    # insert a snippet before an op
    pool = rng.choice([_EVIL, _GOOD_GLOBALS, _STRUCT, _STRUCT])
    snippet = rng.choice(pool)
    return p[:pos] + snippet + p[pos:]


def mutate_bytes(b, rng):
    b = bytearray(b)
    for _ in range(rng.choice([1, 1, 1, 2, 4, 8])):
        k = rng.randrange(7)
        if not b:
            b += bytes([rng.randrange(256)])
            continue
        i = rng.randrange(len(b))
        if k == 0:
            b[i] ^= 1 << rng.randrange(8)
        elif k == 1:
            b[i] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, rng.randrange(256)])
        elif k == 2:
            del b[i:i + rng.randint(1, 16)]
        elif k == 3:
            b[i:i] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif k == 4:
            del b[i:]
        elif k == 5:
            j = rng.randrange(len(b))
            b[i:i] = b[j:j + rng.randint(1, 32)]
        else:  # an 8-byte little-endian boundary value (legacy storage sizes)
            b[i:i + 8] = struct.pack("<q", rng.choice([0, 1, -1, 2 ** 62, 2 ** 63 - 1, 7, 4096]))
    return bytes(b)


def mutate_zip(data, rng, seeds):
    try:
        zf = zipfile.ZipFile(io.BytesIO(data))
        members = [(i.filename, zf.read(i.filename)) for i in zf.infolist()]
    except Exception:
        return mutate_bytes(data, rng)
    k = rng.randrange(10)
    pkl = [i for i, (n, _) in enumerate(members) if n.endswith("data.pkl")]
    if k < 6 and pkl:
        i = pkl[0]
        p = members[i][1]
        for _ in range(rng.choice([1, 1, 2, 3])):
            p = mutate_pickle(p, rng)
        members[i] = (members[i][0], p)
    elif k == 6 and members:  # a storage or the version/byteorder record
        i = rng.randrange(len(members))
        members[i] = (members[i][0], mutate_bytes(members[i][1], rng))
    elif k == 7 and members:  # drop a record
        del members[rng.randrange(len(members))]
    elif k == 8:  # add a record
        prefix = members[0][0].split("/")[0] if members else "archive"
        name = rng.choice([f"{prefix}/byteorder", f"{prefix}/data/{rng.randrange(8)}", "data.pkl",
                           "other/data.pkl", f"{prefix}/data.pkl"])
        body = rng.choice([b"big", b"little", b"middle", b"\x00" * rng.randrange(64), b""])
        members.append((name, body))
    else:  # the container itself
        return mutate_bytes(data, rng)
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w", zipfile.ZIP_DEFLATED if rng.random() < 0.2 else zipfile.ZIP_STORED) as z:
        for name, body in members:
            z.writestr(zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0)), body)
    return b.getvalue()


def mutate_legacy(data, rng):
    """The legacy stream: five pickles (magic, protocol, sys_info, object, keys) then raw
    storages. Mutates one of the pickles at the opcode level, or raw bytes."""
    if rng.random() < 0.35:
        return mutate_bytes(data, rng)
    bounds, pos = [], 0
    for _ in range(5):
        ops = pickle_ops(data[pos:])
        if not ops or ops[-1][0].name != "STOP":
            break
        end = pos + ops[-1][2] + 1
        bounds.append((pos, end))
        pos = end
    if not bounds:
        return mutate_bytes(data, rng)
    # mostly the object pickle (index 3) and the key list (4)
    i = rng.choice([b for b in (3, 3, 3, 4, 2, 1) if b < len(bounds)] or [0])
    s, e = bounds[i]
    return data[:s] + mutate_pickle(data[s:e], rng) + data[e:]


def mutate(data, rng, seeds):
    if rng.random() < 0.05:  # splice two seeds
        other = rng.choice(seeds)
        i, j = rng.randrange(len(data) + 1), rng.randrange(len(other) + 1)
        return data[:i] + other[j:]
    if data.startswith(b"PK"):
        return mutate_zip(data, rng, seeds)
    if not data.startswith(b"\x80\x02\x8a\x0a"):  # a plain pickle (.pkl of numpy arrays)
        return mutate_pickle(data, rng) if rng.random() < 0.75 else mutate_bytes(data, rng)
    return mutate_legacy(data, rng)


# ---- the loop ------------------------------------------------------------------------

def _on_alarm(signum, frame):
    raise Hang(f"execution took more than {EXEC_CPU_LIMIT_S} s of CPU time")


def classify(data, path):
    """Runs one input; returns None (fine) or (signature, traceback text)."""
    with open(path, "wb") as f:
        f.write(data)
    before = _snapshot_globals()
    _TRIPPED.clear()
    signal.setitimer(signal.ITIMER_PROF, EXEC_CPU_LIMIT_S)
    try:
        check_allow_list()
        with Wired():
            run_one(path)
    except convert.ConvertError:
        pass
    except (Exception, Tripped, Hang, RecursionError, MemoryError) as e:
        tb = traceback.format_exc()
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if os.path.basename(f.filename) in ("convert.py", "checkpoint_reader.py", "zoo_formats.py",
                                                      "fuzz_convert.py")]
        where = f"{os.path.basename(frames[-1].filename)}:{frames[-1].lineno}" if frames else "?"
        return f"{type(e).__name__} at {where}", tb
    finally:
        signal.setitimer(signal.ITIMER_PROF, 0)
    if _TRIPPED:
        return "trip-wire " + _TRIPPED[0], "a trip-wire fired but the exception was swallowed"
    after = _snapshot_globals()
    if after != before:
        changed = [".".join(k) for k in before if before[k] != after[k]]
        return "allow-listed global changed", f"changed: {changed}\n"
    return None


def self_test(path):
    """The checks must see what they are for: a pickle calling os.system is refused quietly
    by the real reader, and reported when find_class falls through to the default (the
    trip-wire) or when os.system is allow-listed by mistake (check_allow_list)."""
    b = io.BytesIO()
    with zipfile.ZipFile(b, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00X\x01\x00\x00\x00xcposix\nsystem\nX\x04\x00\x00\x00true"
                   b"\x85Rs.")
    evil = b.getvalue()
    results = [classify(evil, path)]
    orig = convert._RestrictedUnpickler.find_class
    convert._RestrictedUnpickler.find_class = lambda self, m, n: pickle.Unpickler.find_class(self, m, n)
    try:
        results.append(classify(evil, path))
    finally:
        convert._RestrictedUnpickler.find_class = orig
    convert._ALLOWED_GLOBALS[("posix", "system")] = posix.system
    try:
        results.append(classify(evil, path))
    finally:
        del convert._ALLOWED_GLOBALS[("posix", "system")]
    ok = (results[0] is None and results[1] and results[1][0].startswith("Tripped")
          and results[2] and results[2][0].startswith("Crash"))
    if not ok:
        raise SystemExit(f"fuzz_convert.py: self-test failed: {[r and r[0] for r in results]}")


def limit_address_space():
    """RLIMIT_AS at what the process maps now plus ADDRESS_SPACE_HEADROOM: the 8.5 GB that a
    743-byte pickle once asked for fails at once as a MemoryError, instead of swapping the
    machine or waiting for a timer."""
    with open("/proc/self/status") as f:
        vm = next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmSize:"))
    resource.setrlimit(resource.RLIMIT_AS, (vm + ADDRESS_SPACE_HEADROOM, resource.RLIM_INFINITY))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seconds", type=float, default=60)
    ap.add_argument("--runs", type=int, default=None, help="mutated executions (instead of --seconds)")
    ap.add_argument("--seed", type=int, default=None, help="mutation seed (default: from the clock, printed)")
    ap.add_argument("--corpus", default=os.path.join(HERE, "corpus", "convert"))
    ap.add_argument("--crashes", default=os.path.join(REPO, "build", "fuzz", "crashes"))
    ap.add_argument("--replay", nargs="+", metavar="FILE", help="run these inputs once and report")
    args = ap.parse_args(argv)
    signal.signal(signal.SIGPROF, _on_alarm)
    limit_address_space()
    warnings.simplefilter("ignore")  # zipfile's "Duplicate name" when the mutator adds a record
    sys.setrecursionlimit(10000)
    tmpdir = tempfile.mkdtemp(prefix="fuzz_convert.")
    path = os.path.join(tmpdir, "input.pth")
    try:
        if args.replay:
            bad = 0
            for f in args.replay:
                with open(f, "rb") as fh:
                    r = classify(fh.read(), path)
                print(f"{f}: {'ok' if r is None else 'CRASH ' + r[0]}")
                if r:
                    print(r[1])
                    bad += 1
            return 1 if bad else 0

        self_test(path)
        seed = args.seed if args.seed is not None else int(time.time() * 1000) % (2 ** 31)
        rng = random.Random(seed)
        seeds = []
        for name in sorted(os.listdir(args.corpus)):
            with open(os.path.join(args.corpus, name), "rb") as f:
                seeds.append(f.read())
        if not seeds:
            print(f"fuzz_convert.py: no seeds in {args.corpus}", file=sys.stderr)
            return 2
        budget = f"{args.runs} runs" if args.runs is not None else f"{args.seconds:g} s"
        print(f"fuzz_convert.py: seed {seed}, {len(seeds)} seed files, {budget}")
        crashes = {}
        execs = mutated = 0
        pool = list(seeds)  # seeds plus inputs that got past the reader (a cheap feedback)
        t0 = time.monotonic()
        # The seeds themselves first: they must all read without a crash.
        queue = list(seeds)
        while True:
            if queue:
                data = queue.pop()
            else:
                done = mutated >= args.runs if args.runs is not None else time.monotonic() - t0 >= args.seconds
                if done:
                    break
                mutated += 1
                data = mutate(rng.choice(pool), rng, seeds)
                for _ in range(rng.choice([0, 0, 1, 2])):
                    data = mutate(data, rng, seeds)
            r = classify(data, path)
            execs += 1
            if r is None:
                if len(pool) < 2000 and rng.random() < 0.01:
                    pool.append(data)
                continue
            sig, tb = r
            if sig in crashes:
                continue
            os.makedirs(args.crashes, exist_ok=True)
            h = hashlib.sha1(data).hexdigest()[:16]
            out = os.path.join(args.crashes, f"convert-{h}.pth")
            with open(out, "wb") as f:
                f.write(data)
            with open(out[:-4] + ".txt", "w") as f:
                f.write(f"{sig}\n\n{tb}")
            crashes[sig] = out
            print(f"CRASH {sig}: {out}\n{tb}", flush=True)
        dt = time.monotonic() - t0
        peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
        print(f"executions: {execs} in {dt:.1f} s ({execs / max(dt, 1e-9):.0f}/s), crashes: {len(crashes)}, "
              f"peak RSS: {peak_mb} MB")
        for sig, out in crashes.items():
            print(f"  {sig}: {out}")
        return 1 if crashes else 0
    finally:
        for n in os.listdir(tmpdir):
            os.unlink(os.path.join(tmpdir, n))
        os.rmdir(tmpdir)


if __name__ == "__main__":
    sys.exit(main())
