"""The child process of models/train_config_sandbox.py: loads one Python training config and
prints its tree as JSON.  Self-contained (standard library only); not imported by anything.

    python3 -I -S -B train_config_child.py lazy  CONFIG.py   detectron2 LazyConfig, stub detectron2
    VENV/bin/python -I -B train_config_child.py mmengine CONFIG.py   mmengine's Config.fromfile

It runs with the limits and the scrubbed environment the parent set (train_config_sandbox.py
says which) and first installs an audit hook (PEP 578) that refuses, with PermissionError,
writing or changing files outside $TMPDIR, starting processes, sockets and ctypes.  Python's
audit hooks are documented as not a sandbox: they stop a config that writes, spawns or
connects by ordinary means, not one written to escape them.

Output on stdout: {"tree": ...} or {"error": "...", "where": "FILE:LINE"}.  While the config
runs, sys.stdout is stderr, so a config that prints cannot corrupt the answer.

The tree's encoding: dicts and lists as JSON; tuples as lists; a LazyCall or an eager call of
a stub name as a dict with "_target_" (the dotted name) and, for positional arguments,
"_args_"; a stub name itself as {"_name_": dotted}; a function (e.g. a norm given as
`lambda c: NaiveSyncBatchNorm(c, ...)`) as {"_function_": qualname, "_returns_": what it
returns for 256 channels}; anything else as {"_object_": type name, "repr": ...}.

The "lazy" loader follows detectron2's LazyConfig.load (detectron2/config/lazy.py, read, not
copied): a config file runs with __file__ set; a relative import in it (`from ..common.x
import y`) runs the file ../common/x.py (relative to the importing file, one dot = its own
folder, each further dot one folder up; `from . import x` is refused as it is by
detectron2) and gives the names asked for, dicts turned into attribute-access nodes as
detectron2 turns them into DictConfig; the result is every top-level name whose value is a
dict, list or node and which does not start with "_".  `detectron2.config.LazyCall(target)
(**kw)` returns a node of kw with "_target_"; `omegaconf.OmegaConf.create(x)` a node of x.
Every other module that is not in Python's standard library (detectron2.*, torch, fvcore,
...) is a stub whose attributes are names: nothing of them is imported or instantiated.
"""

import builtins
import copy
import importlib.abc
import importlib.machinery
import importlib.util
import json
import os
import sys
import traceback
import types

PROBE_CHANNELS = 256  # what a norm-building function is called with
MAX_DEPTH = 64
_real_stdout = sys.stdout


# ---------------------------------------------------------------------------------------
# The audit hook
# ---------------------------------------------------------------------------------------

_TMP = os.path.realpath(os.environ.get("TMPDIR") or "/nonexistent-tmp") + os.sep
_BLOCKED = ("subprocess.", "os.system", "os.exec", "os.posix_spawn", "os.spawn", "os.fork",
            "os.forkpty", "os.kill", "os.killpg", "pty.", "socket.", "ctypes.", "urllib.",
            "http.client.", "ftplib.", "smtplib.", "poplib.", "imaplib.", "nntplib.", "telnetlib.",
            "webbrowser.", "winreg.", "_winapi.", "msvcrt.", "os.startfile",
            "sys.setprofile", "sys.settrace", "os.setxattr", "os.removexattr")
_PATH_CHANGES = ("os.remove", "os.rename", "os.rmdir", "os.mkdir", "os.chmod", "os.chown",
                 "os.link", "os.symlink", "os.truncate", "os.utime", "os.chflags", "os.lchflags",
                 "shutil.rmtree", "shutil.chown", "shutil.move", "shutil.copytree",
                 "shutil.make_archive", "shutil.unpack_archive")
_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND


def _in_tmp(path):
    try:
        if isinstance(path, int):
            return False
        return os.path.realpath(os.fsdecode(path)).startswith(_TMP)
    except (TypeError, ValueError):
        return False


def _audit(event, args):
    if event == "open":
        path, mode, flags = (tuple(args) + (None, None, None))[:3]
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or \
            (isinstance(flags, int) and flags & _WRITE_FLAGS)
        if writes and not _in_tmp(path):
            raise PermissionError(f"the training-config sandbox refuses writing {path!r}")
        return
    if event.startswith(_PATH_CHANGES):
        if not all(_in_tmp(a) for a in args[:2] if isinstance(a, (str, bytes, os.PathLike))):
            raise PermissionError(f"the training-config sandbox refuses {event}{tuple(args[:2])!r}")
        return
    if event.startswith(_BLOCKED):
        raise PermissionError(f"the training-config sandbox refuses {event}")


# ---------------------------------------------------------------------------------------
# Stubs: names, nodes, LazyCall
# ---------------------------------------------------------------------------------------

class Name:
    """A stand-in for any attribute of a stub module: a dotted name, callable (records the
    call), with attributes (longer names)."""

    def __init__(self, dotted):
        object.__setattr__(self, "_dotted", dotted)

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Name(f"{self._dotted}.{attr}")

    def __setattr__(self, attr, value):
        raise AttributeError(f"cannot set {attr} on the stub name {self._dotted}")

    def __call__(self, *args, **kwargs):
        node = CallRecord(kwargs)
        node["_target_"] = self._dotted
        if args:
            node["_args_"] = list(args)
        return node

    def __repr__(self):
        return f"<stub {self._dotted}>"

    def __deepcopy__(self, memo):
        return self

    def __mro_entries__(self, bases):  # `class X(stub.Base)`: a plain class
        return (object,)


class Node(dict):
    """A dict with attribute access: what DictConfig is to a detectron2 config (values are
    copied on assignment, dicts become nodes, as DictConfig does)."""

    def __init__(self, content=None):
        super().__init__()
        for k, v in (content or {}).items():
            self[k] = v

    def __setitem__(self, key, value):
        super().__setitem__(key, _wrap(value))

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        try:
            return self[attr]
        except KeyError:
            raise AttributeError(f"config node has no key {attr!r}") from None

    def __setattr__(self, attr, value):
        self[attr] = value

    def __delattr__(self, attr):
        del self[attr]

    def __deepcopy__(self, memo):
        return Node({k: copy.deepcopy(v, memo) for k, v in self.items()})


class CallRecord(Node):
    """What calling a stub name returns: its arguments, not its result."""

    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__") or attr in self:
            return super().__getattr__(attr)
        raise AttributeError(f"{self['_target_']}(...) is a stub here, not run: its result has no {attr!r} "
                             "(write what it returns into the config)")


def _wrap(value):
    if isinstance(value, Node):
        return copy.deepcopy(value)
    if isinstance(value, dict):
        return Node(value)
    if isinstance(value, (list, tuple)) and any(isinstance(v, dict) for v in value):
        return type(value)(_wrap(v) for v in value) if isinstance(value, tuple) else [_wrap(v) for v in value]
    if isinstance(value, list):
        return list(value)
    return value


class LazyCall:
    """detectron2.config.LazyCall: records the target and the keyword arguments."""

    def __init__(self, target):
        if not (callable(target) or isinstance(target, (str, dict))):
            raise TypeError(f"target of LazyCall must be a callable or defines a callable! Got {target}")
        self._target = target

    def __call__(self, **kwargs):
        node = Node(kwargs)
        dict.__setitem__(node, "_target_", self._target)
        return node


class _StubModule(types.ModuleType):
    def __getattr__(self, attr):
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)
        return Name(f"{self.__name__}.{attr}")


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Every module outside the standard library (and outside the relative config imports,
    which _import handles) is a stub module."""

    def find_spec(self, fullname, path, target=None):
        top = fullname.partition(".")[0]
        if top in sys.stdlib_module_names or top in sys.builtin_module_names:
            return None
        return importlib.machinery.ModuleSpec(fullname, self, is_package=True)

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        name = module.__name__
        if name in ("detectron2.config", "detectron2.config.lazy"):
            module.LazyCall = LazyCall
            module.LazyConfig = _LazyConfig
        elif name == "omegaconf":
            module.OmegaConf = _OmegaConf
            module.DictConfig = Node


class _OmegaConf:
    @staticmethod
    def create(obj=None, *args, **kwargs):
        if obj is None:
            return Node()
        if isinstance(obj, (list, tuple)):
            return _wrap(list(obj))
        return Node(obj)


_PACKAGE = "detectron2._cfg_loader"  # the package name detectron2 gives config files


_EXECUTED = []  # config files run, for naming where an error happened


def _run_file(path):
    """Executes one config file; returns its namespace."""
    _EXECUTED.append(os.path.abspath(path))
    with open(path, encoding="utf-8") as f:
        source = f.read()
    namespace = {"__file__": path, "__package__": _PACKAGE, "__name__": _PACKAGE + ".cfg",
                 "__builtins__": builtins}
    exec(compile(source, path, "exec"), namespace)
    return namespace


def _relative_file(importer, name, level):
    if not name:
        raise ImportError("Relative import of directories is not allowed within config files "
                          f"(`from {'.' * level} import ...` in {importer})")
    folder = os.path.dirname(importer)
    for _ in range(level - 1):
        folder = os.path.dirname(folder)
    path = os.path.join(folder, *name.split("."))
    if not path.endswith(".py"):
        path += ".py"
    if not os.path.isfile(path):
        raise ImportError(f"cannot import {'.' * level}{name} from {importer}: {path} does not exist")
    return path


_original_import = builtins.__import__


def _import(name, globals=None, locals=None, fromlist=(), level=0):
    if level and globals is not None and (globals.get("__package__") or "").startswith(_PACKAGE):
        path = _relative_file(globals["__file__"], name, level)
        namespace = _run_file(path)
        module = types.ModuleType(os.path.basename(path)[:-3])
        module.__dict__.update(namespace)
        for item in fromlist or ():
            if item in namespace and isinstance(namespace[item], dict):
                setattr(module, item, _wrap(namespace[item]))
        return module
    return _original_import(name, globals, locals, fromlist, level)


def _top_level(namespace):
    return Node({k: v for k, v in namespace.items()
                 if isinstance(v, (dict, list)) and not k.startswith("_")})


class _LazyConfig:
    """detectron2.config.LazyConfig.load / load_rel, for configs that call them."""

    @staticmethod
    def load(filename, keys=None):
        if not filename.endswith(".py"):
            raise ValueError(f"{filename}: only .py configs can be loaded from a config here")
        ns = _top_level(_run_file(filename))
        if keys is None:
            return ns
        if isinstance(keys, str):
            return _wrap(ns[keys])
        return tuple(_wrap(ns[k]) for k in keys)

    @staticmethod
    def load_rel(filename, keys=None):
        caller = sys._getframe(1).f_globals.get("__file__")
        if not caller:
            raise ValueError("load_rel: cannot find the calling config file")
        return _LazyConfig.load(os.path.join(os.path.dirname(caller), filename), keys)


def load_lazy(path):
    sys.meta_path.insert(0, _StubFinder())
    builtins.__import__ = _import
    try:
        return _top_level(_run_file(path))
    finally:
        builtins.__import__ = _original_import


def load_mmengine(path):
    from mmengine.config import Config  # imported before the audit hook (main)
    cfg = Config.fromfile(path, import_custom_modules=False)
    return cfg.to_dict()


# ---------------------------------------------------------------------------------------
# The tree as JSON
# ---------------------------------------------------------------------------------------

def encode(value, depth=0, seen=None):
    seen = set() if seen is None else seen
    if depth > MAX_DEPTH:
        raise ValueError(f"the config nests deeper than {MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Name):
        return {"_name_": value._dotted}
    if id(value) in seen:
        raise ValueError("the config contains a cycle")
    if isinstance(value, dict):
        seen.add(id(value))
        out = {}
        for k, v in value.items():
            if k == "_target_" and not isinstance(v, str):
                out[k] = _target_name(v)
            else:
                out[str(k)] = encode(v, depth + 1, seen)
        seen.discard(id(value))
        return out
    if isinstance(value, (list, tuple)):
        seen.add(id(value))
        out = [encode(v, depth + 1, seen) for v in value]
        seen.discard(id(value))
        return out
    if isinstance(value, type):
        return {"_name_": f"{value.__module__}.{value.__qualname__}"}
    if isinstance(value, (types.FunctionType, types.LambdaType, types.MethodType)):
        out = {"_function_": getattr(value, "__qualname__", "?")}
        try:
            out["_returns_"] = encode(value(PROBE_CHANNELS), depth + 1, seen)
        except Exception as e:  # a function that takes something else: its name is all
            out["_error_"] = f"{type(e).__name__}: {e}"
        return out
    return {"_object_": type(value).__name__, "repr": repr(value)[:200]}


def _target_name(target):
    if isinstance(target, Name):
        return target._dotted
    if isinstance(target, type):
        return f"{target.__module__}.{target.__qualname__}"
    if callable(target):
        return f"<function {getattr(target, '__qualname__', '?')}>"
    return repr(target)[:200]


def _where(tb, path):
    """FILE:LINE of the innermost frame in a config file the loader ran, else the config."""
    for fr in reversed(traceback.extract_tb(tb)):
        if os.path.abspath(fr.filename) in _EXECUTED:
            return f"{fr.filename}:{fr.lineno}"
    return path


def main(argv):
    if len(argv) != 3 or argv[1] not in ("lazy", "mmengine"):
        print("usage: train_config_child.py lazy|mmengine CONFIG.py", file=sys.stderr)
        return 2
    mode, path = argv[1], os.path.abspath(argv[2])
    if mode == "mmengine":
        try:  # the loader's own library (numpy, ctypes) loads before the hook
            import mmengine.config  # noqa: F401
        except ImportError as e:
            _real_stdout.write(json.dumps({"error": f"cannot import mmengine: {e}", "where": sys.executable}))
            return 0
    sys.addaudithook(_audit)
    sys.stdout = sys.stderr
    try:
        tree = load_lazy(path) if mode == "lazy" else load_mmengine(path)
        answer = {"tree": encode(tree)}
    except SystemExit as e:
        answer = {"error": f"the config called exit({e.code})", "where": path}
    except BaseException as e:  # anything the config raises is the answer
        answer = {"error": f"{type(e).__name__}: {e}", "where": _where(e.__traceback__, path)}
    sys.stdout = _real_stdout
    _real_stdout.write(json.dumps(answer, allow_nan=True))
    _real_stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
