"""detect on a Ray cluster: a Ray Data pipeline over a pool of model actors.

    import ray
    from detect import ray_pipeline
    ray.init()                                   # or ray.init(address="auto") on a cluster
    summary = ray_pipeline.run(paths, "configs/mask_rcnn_R-101-FPN_shapes.json",
                               "models/shapes_r101_narrow.safetensors", "out/",
                               json_path="out/all.json", actors=2, cpus_per_actor=1)

Each actor opens one detect.Model (on its GPU with gpus_per_actor=1, or on
cpus_per_actor CPU threads) and works through batches of image paths. For
every image it writes out/NAME.json, the document of one image that
`detect --output out` writes (the entry is `detect --json`'s, byte for
byte), under a temporary name, renamed into place. An image whose NAME.json
exists is not run again: its file is taken as it is. So when an actor dies
(a node lost, an out-of-memory kill), Ray restarts it (max_restarts) and
runs its unfinished batch again (max_task_retries): the images the dead
actor had finished are not done twice, the others are done once; and a
whole run that failed can be started again with the same arguments and
resumes. At the end the driver writes json_path, the merged document: what
`detect --json` over the same paths in the same order writes, byte for byte.

NAME: the file name without its extension; when two paths share one, the
later ones (in input order) get "-2", "-3", ... as `detect` names files given
one by one. Images that fail (not an image, unreadable) get no NAME.json;
they are listed in the summary, and a later run tries them again.

The driver holds, per image, its path, name and a status byte; the results
themselves stay in the files. Importing detect does not import Ray; this
module does.
"""

from __future__ import annotations

import os
import time
import warnings
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import ray

import detect

__all__ = ["run", "output_names", "DetectActor"]

# The one-image document `detect --output` writes around an entry.
_DOC_HEAD, _DOC_TAIL = '{"images": [\n  ', "\n]}\n"

DONE, EXISTING, FAILED = 1, 2, 3


def output_names(paths: Sequence[str]) -> List[str]:
    """Per path, the stem of its output file, as `detect` names files given
    one by one: the file name without its last extension; the 2nd, 3rd, ...
    path with a stem already taken (in input order) gets "-2", "-3", ..."""
    names = []
    for p in paths:
        base = os.path.basename(os.fspath(p))
        names.append(base[: base.rindex(".")] if base.rfind(".") > 0 else base)
    for _ in range(8):  # a new name may clash in turn
        seen: Dict[str, int] = {}
        out = []
        for n in names:
            seen[n] = seen.get(n, 0) + 1
            out.append(n if seen[n] == 1 else f"{n}-{seen[n]}")
        if out == names:
            break
        names = out
    return names


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def _entry_text(doc_path: str) -> str:
    """The entry of a one-image document NAME.json."""
    with open(doc_path, encoding="utf-8") as f:
        text = f.read()
    if not (text.startswith(_DOC_HEAD) and text.endswith(_DOC_TAIL)):
        raise ValueError(f"{doc_path}: not a one-image document of detect --output")
    return text[len(_DOC_HEAD): -len(_DOC_TAIL)]


class DetectActor:
    """A Ray Data callable class: one model per actor, a batch of rows
    {"position", "path", "name"} in, {"position", "status", "error"} out."""

    def __init__(self, config: str, weights: str, out_dir: str, model_kwargs: Dict[str, Any],
                 die_after: Optional[int] = None):
        self.model = detect.Model(config, weights, **model_kwargs)
        self.out_dir = out_dir
        self.images = 0
        # Test hook: the first actor to finish `die_after` images exits at
        # once, as a lost node would (once per out_dir: a marker file says so).
        self.die_after = die_after
        self.die_marker = os.path.join(out_dir, ".ray_pipeline_died")

    def __call__(self, batch: Dict[str, np.ndarray]) -> Dict[str, np.ndarray]:
        n = len(batch["position"])
        status = np.zeros(n, dtype=np.int8)
        errors = [""] * n
        todo = []
        for i in range(n):
            if os.path.exists(os.path.join(self.out_dir, str(batch["name"][i]) + ".json")):
                status[i] = EXISTING
            else:
                todo.append(i)
        # the model's in_flight images at once (model_kwargs), results in order
        results = self.model.run_many([str(batch["path"][i]) for i in todo], errors="return")
        for i, r in zip(todo, results):
            path, name = str(batch["path"][i]), str(batch["name"][i])
            if isinstance(r, detect.DetectError):
                status[i], errors[i] = FAILED, str(r)
                continue
            text = r.to_json_text(path)
            _write_atomic(os.path.join(self.out_dir, name + ".json"), _DOC_HEAD + text + _DOC_TAIL)
            status[i] = DONE
            self.images += 1
            if self.die_after is not None and self.images >= self.die_after and not os.path.exists(self.die_marker):
                open(self.die_marker, "w").close()
                os._exit(1)
        return {"position": batch["position"], "status": status, "error": np.array(errors, dtype=object)}


def run(paths: Sequence[str], config: str, weights: str, out_dir: str, *, json_path: Optional[str] = None,
        actors: int = 1, cpus_per_actor: float = 1, gpus_per_actor: float = 0, batch_size: int = 4,
        device: Optional[str] = None, in_flight: int = 0, max_restarts: int = 3, max_task_retries: int = 3,
        model_kwargs: Optional[Dict[str, Any]] = None, die_after: Optional[int] = None) -> Dict[str, Any]:
    """Runs every path through a pool of `actors` DetectActor (each with
    cpus_per_actor CPUs, used as its model's threads, and gpus_per_actor
    GPUs), writes out_dir/NAME.json per image and, with json_path, the
    merged document. device: "cpu" without GPUs, "cuda" with (the default
    follows gpus_per_actor). in_flight: images each actor's model runs at
    once (detect.Model's; 0: its device's default, 1 on the CPU; a batch
    runs through model.run_many, so batch_size should be at least this). A
    dead actor is restarted up to max_restarts
    times and its batch retried up to max_task_retries times.

    Returns {"images", "done" (run now), "existing" (taken from an earlier
    attempt or run), "failed": [(path, message)], "seconds"}. Raises
    RuntimeError when an image was reported twice or not at all."""
    t0 = time.monotonic()
    paths = [os.fspath(p) for p in paths]
    names = output_names(paths)
    os.makedirs(out_dir, exist_ok=True)
    if not ray.is_initialized():
        ray.init()
    kwargs = dict(model_kwargs or {})
    kwargs.setdefault("device", device or ("cuda" if gpus_per_actor else "cpu"))
    kwargs.setdefault("in_flight", in_flight)
    if not gpus_per_actor:
        kwargs.setdefault("threads", max(1, int(cpus_per_actor)))
    ds = ray.data.from_items([{"position": i, "path": p, "name": n} for i, (p, n) in enumerate(zip(paths, names))],
                             override_num_blocks=max(1, min(len(paths), 4 * actors)))
    # max_restarts and max_task_retries are Ray's actor options, passed as
    # map_batches' remote arguments (Ray Data's own default is to restart
    # without end); Ray 2.60 warns that this way of passing them will change.
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*ray_remote_args.*deprecated")
        ds = ds.map_batches(DetectActor, batch_size=batch_size, batch_format="numpy",
                            fn_constructor_kwargs=dict(config=os.path.abspath(config),
                                                       weights=os.path.abspath(weights),
                                                       out_dir=os.path.abspath(out_dir), model_kwargs=kwargs,
                                                       die_after=die_after),
                            compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=cpus_per_actor,
                            num_gpus=gpus_per_actor, max_restarts=max_restarts, max_task_retries=max_task_retries)
    status = np.zeros(len(paths), dtype=np.int8)
    seen = np.zeros(len(paths), dtype=np.int32)
    failed = []
    for b in ds.iter_batches(batch_format="numpy", batch_size=None):
        for pos, st, err in zip(b["position"], b["status"], b["error"]):
            seen[pos] += 1
            status[pos] = st
            if st == FAILED:
                failed.append((paths[pos], str(err)))
    if (seen != 1).any():
        twice, missing = np.flatnonzero(seen > 1), np.flatnonzero(seen == 0)
        raise RuntimeError(f"ray_pipeline: {len(twice)} images reported twice, {len(missing)} never "
                           f"(first: {paths[(list(twice) + list(missing))[0]]})")
    if json_path:
        _write_merged(json_path, out_dir, names, status)
    return {"images": len(paths), "done": int((status == DONE).sum()), "existing": int((status == EXISTING).sum()),
            "failed": failed, "seconds": time.monotonic() - t0}


def _write_merged(json_path: str, out_dir: str, names: Sequence[str], status: np.ndarray) -> None:
    """The merged document, streamed from the per-image files in input
    order, written under a temporary name and renamed."""
    tmp = f"{json_path}.tmp.{os.getpid()}"
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write('{"images": [')
            first = True
            for name, st in zip(names, status):
                if st == FAILED:
                    continue
                f.write("\n  " if first else ",\n  ")
                f.write(_entry_text(os.path.join(out_dir, name + ".json")))
                first = False
            f.write("\n]}\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, json_path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
