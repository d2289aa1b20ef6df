"""A pickle's structure checked in full before the C unpickler sees it.

CPython's C unpickler believes what a pickle declares.  A few hundred bytes can make it
allocate gigabytes: a FRAME opened inside a FRAME makes it read the next frame out of step
with the ops (the 743-byte tests/fuzz/regressions/convert/nested-frame-8gib.pkl then reads a
length of 2^63 and asks for 8.5 GB); a BINBYTES8 or BYTEARRAY8 longer than the data left is
allocated at its declared size first; a PUT index of 2^32 sizes the memo table by it.
Python's own unpickler refuses some of these, the C one does not.

scan() walks the ops once, in step with how the unpickler will read them, and refuses:
  * an unknown opcode, or an op whose arguments run past the end of the data;
  * a FRAME that begins inside another frame, declares more bytes than remain, or an op
    that straddles a frame's end (the pure-Python unpickler's rules, pickle._Unframer);
  * a length-prefixed argument (strings, bytes, LONG4) longer than the bytes that remain;
  * a memo index (PUT, BINPUT, LONG_BINPUT) beyond the number of ops so far, and a GET of
    an index never stored;
  * an op that pops more than the stack holds above its MARK, or needs a MARK that is not
    there, and a STOP that leaves anything but one object.
It seeks nothing and copies no argument: a pickle of N bytes is scanned in time linear in N
with a few small integers per op of memory (the memo's indices).

The memory bound this gives the unpickler (stated here, tested by
tests/parity/test_convert.py::test_parse_memory_is_bounded): after scan() passes, the C
unpickler allocates no argument larger than the input, sizes its memo table by at most the
op count, and builds at most one object per op.  The largest object one byte of pickle
can make is an empty set (EMPTY_SET, 216 bytes), so the objects take at most
MAX_BYTES_PER_PICKLE_BYTE times the pickle's size, plus the arguments' own bytes.
"""

import pickle
import pickletools


class MalformedPickle(ValueError):
    """The pickle breaks a rule above; the message names the op and its byte offset."""


class TruncatedPickle(MalformedPickle):
    """The data ends before the pickle does: an op, its argument or a frame runs past the end
    (a file cut short), as opposed to a rule broken inside the data."""

# The most memory (bytes) the unpickler may take per byte of a pickle that scan() passed,
# beyond the arguments' own bytes: an empty set per EMPTY_SET op (216 bytes) plus its stack
# slot, rounded up.  tests/parity/test_convert.py measures the densest pickles against it.
MAX_BYTES_PER_PICKLE_BYTE = 256

_OPS = {op.code.encode("latin1")[0]: op for op in pickletools.opcodes}
_LENGTH_PREFIX = {pickletools.TAKEN_FROM_ARGUMENT1: (1, False), pickletools.TAKEN_FROM_ARGUMENT4: (4, True),
                  pickletools.TAKEN_FROM_ARGUMENT4U: (4, False), pickletools.TAKEN_FROM_ARGUMENT8U: (8, False)}
_TWO_LINES = {"GLOBAL", "INST"}  # module and name, each on its own line
_PUTS = {"PUT", "BINPUT", "LONG_BINPUT"}
_GETS = {"GET", "BINGET", "LONG_BINGET"}


def _stack_effect(op):
    """(items needed below the MARK or None, items needed on top, items pushed)."""
    before = op.stack_before
    if pickletools.markobject in before:
        i = before.index(pickletools.markobject)
        above = [s for s in before[i + 1:] if s is not pickletools.stackslice]
        return i, len(above), len(op.stack_after)
    return None, len(before), len(op.stack_after)


_EFFECTS = {code: _stack_effect(op) for code, op in _OPS.items()}
_MARK = pickle.MARK[0]


def scan(buf, start=0, end=None):
    """Checks the pickle that begins at buf[start] (bytes, bytearray or mmap) and must end
    by `end` (default: the end of buf).  Returns the offset just past its STOP.  Raises
    MalformedPickle naming the op and its byte offset (from `start`), TruncatedPickle where
    the data ends first."""
    end = len(buf) if end is None else end
    pos = start
    frame_end = None  # where the current frame ends, while one is open
    marks = []  # the stack as item counts between MARKs: marks[-1] is the top segment
    top = 0
    stored = set()
    n_ops = 0

    def refuse(what, at, past_the_end=False):
        raise (TruncatedPickle if past_the_end else MalformedPickle)(f"{what}, at byte {at - start}")

    while True:
        if pos >= end:
            refuse("no STOP before the end of the data", pos, True)
        if frame_end is not None and pos >= frame_end:
            frame_end = None
        op_at = pos
        op = _OPS.get(buf[pos])
        if op is None:
            refuse(f"unknown opcode 0x{buf[pos]:02x}", pos)
        pos += 1
        limit = end if frame_end is None else frame_end
        name, arg, n = op.name, None, op.arg.n if op.arg is not None else 0
        if op.arg is None:
            pass
        elif n >= 0:  # a fixed-size argument
            if pos + n > limit:
                refuse(f"{name} argument cut off", op_at, limit == end)
            if name in ("BINPUT", "LONG_BINPUT", "BINGET", "LONG_BINGET", "FRAME"):
                arg = int.from_bytes(buf[pos:pos + n], "little")
            pos += n
        elif n == pickletools.UP_TO_NEWLINE:
            for _ in range(2 if name in _TWO_LINES else 1):
                nl = buf.find(b"\n", pos, limit)
                if nl < 0:
                    refuse(f"{name} argument without its newline", op_at, limit == end)
                line, pos = buf[pos:nl], nl + 1
            if name in ("PUT", "GET"):
                try:
                    arg = int(bytes(line))
                except ValueError:
                    refuse(f"{name} index is not a number", op_at)
        else:  # a length, then that many bytes
            width, signed = _LENGTH_PREFIX[n]
            if pos + width > limit:
                refuse(f"{name} length cut off", op_at, limit == end)
            length = int.from_bytes(buf[pos:pos + width], "little", signed=signed)
            pos += width
            if length < 0:
                refuse(f"{name} declares {length} bytes", op_at)
            if length > limit - pos:
                refuse(f"{name} declares {length} bytes, {limit - pos} remain", op_at, limit == end)
            pos += length

        if name == "FRAME":
            if frame_end is not None:
                refuse("a frame begins inside another frame", op_at)
            if arg > end - pos:
                refuse(f"a frame declares {arg} bytes, {end - pos} remain", op_at, True)
            frame_end = pos + arg if arg else None
        elif name in _PUTS:
            if arg > n_ops:
                refuse(f"memo index {arg} beyond the {n_ops} ops before it", op_at)
            stored.add(arg)
        elif name == "MEMOIZE":
            stored.add(len(stored))
        elif name in _GETS and arg not in stored:
            refuse(f"memo index {arg} read before it is stored", op_at)

        below, above, pushed = _EFFECTS[buf[op_at]]
        if below is not None:  # pops everything above the last MARK, and the MARK
            if not marks or top < above:
                refuse(f"{name} without its MARK", op_at)
            top = marks.pop()
            if top < below:
                refuse(f"{name} pops more than the stack holds", op_at)
            top -= below
        elif name == "POP" and top == 0 and marks:
            top = marks.pop()  # POP of a bare MARK drops the MARK (the unpicklers agree)
            above = 0
        elif top < above:
            refuse(f"{name} pops more than the stack holds", op_at)
        else:
            top -= above
        if buf[op_at] == _MARK:
            marks.append(top)
            top = 0
        else:
            top += pushed
        n_ops += 1
        if name == "STOP":
            if marks or top != 0:
                refuse("STOP with more than one object on the stack", op_at)
            return pos
