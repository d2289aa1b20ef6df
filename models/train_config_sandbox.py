"""Running a Python training config in a child process, with limits (train_config.py's helper).

A detectron2 LazyConfig (.py) or an mmdetection config (.py, also its `_base_` files, which
mmengine's Config.fromfile executes) is a Python program: reading it means running it.  It
runs in a child process, never in the converter's own:

    python -I [-S] -B models/train_config_child.py lazy|mmengine CONFIG

- the interpreter: /usr/bin/python3 (sys.executable) with -S (no site-packages: only the
  standard library and the child's stubs of detectron2, torch, fvcore, omegaconf) for a
  LazyConfig; build/venv-mmdet/bin/python for mmdetection (its mmengine, mmdet's configs);
  -I ignores PYTHON* variables, the user's site-packages and the current folder; -B writes
  no .pyc files;
- a scrubbed environment (PATH=/usr/bin:/bin, LANG=C.UTF-8, HOME and TMPDIR a new empty
  temporary folder, OMP_NUM_THREADS and OPENBLAS_NUM_THREADS 1, nothing else) and that folder
  as the working directory, removed after;
- stdin from /dev/null; stdout (the answer, at most 16 MiB) and stderr (at most 64 KiB, shown
  when the child fails) captured;
- resource limits set in the child before it starts (setrlimit): CPU time 30 s, address
  space 3 GiB, files it writes at most 64 MiB each, 256 open files, no core dumps, and
  RLIMIT_NPROC 0 (no new processes; the kernel does not apply it to root); a wall-clock
  limit of 60 s after which its whole process group is killed;
- in the child, an audit hook (PEP 578, train_config_child.py) that refuses writing or
  changing files outside its temporary folder, starting processes, sockets and ctypes.

What this protects against: a config that loops, allocates without end, prints, writes
files, spawns programs or opens connections by ordinary means, and an answer too large to
read.  What it does not: it is code execution as the user running the converter, with the
user's read access to every file (a config can read ~/.ssh and put it in its answer, which
stays in this process), and the audit hook is not a security boundary (Python's
documentation says so: code written to evade it can).  There is no namespace, seccomp or
network isolation.  Run only configs you would run with detectron2 or mmdetection
themselves; for an untrusted config, read it first or run the converter in a container
without network.
"""

import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "train_config_child.py")
REPO = os.path.dirname(HERE)
MMDET_VENV = os.environ.get("DETECT_MMDET_VENV") or os.path.join(REPO, "build", "venv-mmdet")

CPU_SECONDS = 30
WALL_SECONDS = 60
ADDRESS_SPACE = 3 << 30
FILE_SIZE = 64 << 20
OPEN_FILES = 256
MAX_ANSWER = 16 << 20
MAX_ERRORS = 64 << 10


class SandboxError(Exception):
    """The child failed: the message says how (one line)."""


def _limits():  # runs in the child between fork and exec
    os.setsid()
    for what, value in ((resource.RLIMIT_CPU, (CPU_SECONDS, CPU_SECONDS + 5)),
                        (resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE)),
                        (resource.RLIMIT_FSIZE, (FILE_SIZE, FILE_SIZE)),
                        (resource.RLIMIT_NOFILE, (OPEN_FILES, OPEN_FILES)),
                        (resource.RLIMIT_CORE, (0, 0)),
                        (resource.RLIMIT_NPROC, (0, 0))):
        try:
            resource.setrlimit(what, value)
        except (ValueError, OSError):  # a hard limit already lower: keep it
            pass


def mmdet_python():
    """build/venv-mmdet's python, or None when the venv is missing."""
    path = os.path.join(MMDET_VENV, "bin", "python")
    return path if os.path.isfile(path) and os.access(path, os.X_OK) else None


def run_child(mode, config_path, python=None):
    """The config's tree (JSON-decoded) as the child printed it.  mode: "lazy" or "mmengine".
    Raises SandboxError."""
    python = python or sys.executable
    flags = ["-I", "-B"] + (["-S"] if mode == "lazy" else [])
    tmp = tempfile.mkdtemp(prefix="detect-train-config-")
    env = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8", "HOME": tmp, "TMPDIR": tmp,
           "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}  # no BLAS thread pools: RLIMIT_NPROC 0
    try:
        proc = subprocess.Popen([python, *flags, CHILD, mode, os.path.abspath(config_path)],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                cwd=tmp, env=env, preexec_fn=_limits, close_fds=True)
        try:
            out, err = proc.communicate(timeout=WALL_SECONDS)
        except subprocess.TimeoutExpired:
            _kill(proc)
            raise SandboxError(f"loading it took more than {WALL_SECONDS} s (killed)") from None
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if len(out) > MAX_ANSWER:
        raise SandboxError(f"its loader printed more than {MAX_ANSWER >> 20} MiB")
    if proc.returncode != 0 or not out:
        raise SandboxError(_death(proc.returncode, err))
    try:
        answer = json.loads(out)
    except ValueError:
        raise SandboxError("its loader's answer is not JSON: " + _tail(err)) from None
    if "error" in answer:
        raise SandboxError(f"{answer.get('where')}: {answer['error']}")
    return answer["tree"]


def _kill(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        pass
    proc.communicate()


def _tail(err):
    text = err[-MAX_ERRORS:].decode("utf-8", "replace").strip().splitlines()
    return text[-1] if text else "(nothing on stderr)"


def _death(code, err):
    if code is not None and code < 0:
        sig = -code
        why = {signal.SIGXCPU: f"the CPU limit ({CPU_SECONDS} s)", signal.SIGKILL: "killed",
               signal.SIGXFSZ: f"the file size limit ({FILE_SIZE >> 20} MiB)",
               signal.SIGSEGV: "a crash (or the memory limit)"}.get(sig, f"signal {sig}")
        return f"its loader stopped: {why}; {_tail(err)}"
    if b"MemoryError" in err:
        return f"its loader ran out of memory (limit {ADDRESS_SPACE >> 30} GiB)"
    return f"its loader failed (exit status {code}): {_tail(err)}"
