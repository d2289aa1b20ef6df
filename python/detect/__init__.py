"""detect: Mask R-CNN instance segmentation, a thin binding over libdetect.

    import detect
    with detect.Model("configs/mask_rcnn_R-101-FPN_shapes.json",
                      "models/shapes_r101_narrow.safetensors", device="cpu") as m:
        r = m("examples/shapes/scene_1.png")      # a path, encoded bytes, or an HxWx3 uint8 RGB array
        for name, score, box in zip(r.class_names, r.scores, r.boxes):
            print(name, score, box)
        masks = r.masks                           # (N, H, W) bool
        rles = r.masks_rle                        # pycocotools-style {"size": [H, W], "counts": ...}

Every number comes from the C library (include/detect.h), so a result equals
`detect --json` on the same image bit for bit. The GIL is released while the
model runs (ctypes releases it around every foreign call), so threads that
share a model overlap their decoding and Python work, and run up to
`in_flight` images at once (the model's execution contexts). run_many keeps
them busy from one thread:

    with detect.Model(config, weights, in_flight=4) as m:
        for path, r in zip(paths, m.run_many(paths)):   # results in input order
            ...

Errors raise DetectError with the library's message.

For many machines, detect.ray_pipeline runs the model in a pool of Ray
actors (importing detect does not import Ray; that module does).
"""

from __future__ import annotations

import ctypes
import json
import os
import threading
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Union

import numpy as np

from . import _lib

__all__ = ["Model", "Result", "DetectError", "version", "STAGES"]

STAGES = ("preprocess", "backbone", "fpn", "rpn", "box_head", "mask_head", "mask_paste")

# a path, encoded bytes, a numpy array, a PIL image or anything with __array_interface__ (_as_array)
ImageInput = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, np.ndarray, Any]


def _as_array(image: Any) -> np.ndarray:
    """A numpy array of image: an array as is; a PIL image (any mode: those the library does not
    take, such as P, 1, I;16 or CMYK, through its convert("RGB"), which is what Image.open().convert
    gives); anything else with the numpy __array_interface__ (or __array__) through np.asarray."""
    if isinstance(image, np.ndarray):
        return image
    mode = getattr(image, "mode", None)
    if isinstance(mode, str) and callable(getattr(image, "convert", None)):  # PIL, without importing it
        if mode not in ("RGB", "RGBA", "L"):
            image = image.convert("RGB")
        return np.asarray(image)
    if hasattr(image, "__array_interface__") or hasattr(image, "__array__"):
        return np.asarray(image)
    raise DetectError("DETECT_ERR_ARGUMENT", "image: expected a path, bytes, a numpy array, a PIL image or an "
                      f"object with __array_interface__, got {type(image).__name__}")


class DetectError(RuntimeError):
    """A failed library call: `status` is the detect_status name
    ("DETECT_ERR_IO", ...), the message names the file or option at fault."""

    def __init__(self, status: str, message: str):
        super().__init__(message)
        self.status = status


def _check(status: int) -> None:
    if status != 0:
        lib = _lib.load()
        raise DetectError(lib.detect_status_name(status).decode(), lib.detect_last_error().decode("utf-8", "replace"))


def version() -> str:
    """The loaded library's release, "1.0.0"."""
    return _lib.load().detect_version(None).decode()


class Result:
    """One image's instances, best first. Arrays are numpy copies; masks are
    made on first use from the library's result, which this object owns."""

    def __init__(self, model: "Model", handle: ctypes.c_void_p):
        lib = _lib.load()
        self._lib = lib
        self._handle = handle
        self._finalizer = _finalize(self, lib.detect_result_free, handle)
        self.width: int = lib.detect_result_width(handle)
        self.height: int = lib.detect_result_height(handle)
        n = lib.detect_result_count(handle)
        self.boxes = np.zeros((n, 4), dtype=np.float32)
        """(N, 4) float32: x1, y1, x2, y2 in image pixels"""
        self.scores = np.zeros(n, dtype=np.float32)
        self.class_ids = np.zeros(n, dtype=np.int32)
        inst = _lib.Instance()
        self._windows = []
        for i in range(n):
            _check(lib.detect_result_instance(handle, i, ctypes.byref(inst)))
            self.boxes[i] = inst.box
            self.scores[i] = inst.score
            self.class_ids[i] = inst.class_id
        self.class_names: List[str] = [model.class_names[c] for c in self.class_ids]
        self.stage_seconds: Dict[str, float] = {
            name: lib.detect_result_stage_seconds(handle, s) for s, name in enumerate(STAGES)}
        self._model = model

    def __len__(self) -> int:
        return len(self.scores)

    @property
    def masks(self) -> np.ndarray:
        """(N, H, W) bool: each instance's mask over the whole image."""
        out = np.zeros((len(self), self.height, self.width), dtype=np.uint8)
        for i in range(len(self)):
            _check(self._lib.detect_result_mask(self._handle, i, out[i].ctypes.data_as(ctypes.c_void_p)))
        return out.view(bool)

    @property
    def masks_rle(self) -> List[Dict[str, Any]]:
        """COCO compressed RLE per instance, {"size": [H, W], "counts": str}:
        what pycocotools.mask.decode reads (counts may also be passed as
        bytes: rle["counts"].encode())."""
        out = []
        for i in range(len(self)):
            s = ctypes.c_void_p()
            _check(self._lib.detect_result_mask_rle(self._handle, i, ctypes.byref(s)))
            try:
                counts = ctypes.string_at(s).decode("ascii")
            finally:
                self._lib.detect_free(s)
            out.append({"size": [self.height, self.width], "counts": counts})
        return out

    def to_json(self, file: str = "") -> Dict[str, Any]:
        """The image's entry of `detect --json`, parsed: {"file", "width",
        "height", "detections": [{"class_id", "class", "score", "box",
        "mask"}]}."""
        return json.loads(self.to_json_text(file))

    def to_json_text(self, file: str = "") -> str:
        """The same entry as the text `detect --json` writes, byte for byte
        (floats with 9 significant digits: exact float32)."""
        s = ctypes.c_void_p()
        _check(self._lib.detect_result_json(self._model._require(), self._handle, os.fsencode(file),
                                            ctypes.byref(s)))
        try:
            return ctypes.string_at(s).decode("utf-8")
        finally:
            self._lib.detect_free(s)

    def __repr__(self) -> str:
        return f"<detect.Result {len(self)} instances in {self.width}x{self.height}>"


def _finalize(owner: object, free, handle):
    import weakref
    return weakref.finalize(owner, free, handle)


class Model:
    """A loaded model. `config`: a JSON config path or the JSON text itself;
    `weights`: a converted safetensors file (models/README.md).
    device: "auto" (a GPU when there is one, else the CPU), "cpu", "cuda",
    "cuda:N" (that GPU, or DetectError DETECT_ERR_UNSUPPORTED saying why);
    precision: "fp32", "tf32", "fp16" (GPU), "bf16" (CPU with AVX512_BF16 or AMX),
    "int8" (CPU, with the ranges `detect calibrate` wrote beside the weights);
    threads: CPU threads (0: all);
    in_flight: images run at once, each on its own execution context (0: the
    device's default: 1 on the CPU, on a GPU what its memory holds, at most 4);
    canvas: (height, width) every image that fits is padded to, as torchvision
    pads a batch (one CUDA graph for all; (0, 0): none; None: the config's);
    score_threshold, max_detections, agnostic_nms: override the config's
    box_head settings; classes: keep only the named classes."""

    def __init__(self, config: Union[str, "os.PathLike[str]"], weights: Union[str, "os.PathLike[str]"], *,
                 device: str = "auto", precision: Optional[str] = None, threads: int = 0,
                 score_threshold: Optional[float] = None, max_detections: Optional[int] = None,
                 classes: Optional[Sequence[str]] = None, agnostic_nms: Optional[bool] = None,
                 in_flight: int = 0, canvas: Optional[Sequence[int]] = None):
        lib = _lib.load()
        self._lib = lib
        self._handle: Optional[ctypes.c_void_p] = None
        # close() waits for the runs in flight, and no run starts after it.
        self._runs = threading.Condition()
        self._active = 0
        self._queues: set = set()  # run_many's C run queues, stopped by close()
        opts = ctypes.c_void_p()
        _check(lib.detect_options_create(ctypes.byref(opts)))
        try:
            _check(lib.detect_options_set_device(opts, device.encode()))
            if precision is not None:
                _check(lib.detect_options_set_precision(opts, precision.encode()))
            _check(lib.detect_options_set_threads(opts, int(threads)))
            if score_threshold is not None:
                _check(lib.detect_options_set_score_threshold(opts, float(score_threshold)))
            if max_detections is not None:
                _check(lib.detect_options_set_max_detections(opts, int(max_detections)))
            if classes:
                _check(lib.detect_options_set_classes(opts, ",".join(classes).encode()))
            if agnostic_nms is not None:
                _check(lib.detect_options_set_agnostic_nms(opts, int(bool(agnostic_nms))))
            _check(lib.detect_options_set_in_flight(opts, int(in_flight)))
            if canvas is not None:
                height, width = canvas
                _check(lib.detect_options_set_canvas(opts, int(height), int(width)))
            handle = ctypes.c_void_p()
            config_arg = config if isinstance(config, str) and config.lstrip().startswith("{") else os.fspath(config)
            _check(lib.detect_model_open(ctypes.byref(handle), os.fsencode(config_arg), os.fsencode(weights), opts))
        finally:
            lib.detect_options_free(opts)
        self._handle = handle
        self._finalizer = _finalize(self, lib.detect_model_free, handle)
        self.device: str = lib.detect_model_device(handle).decode()
        self.notice: str = lib.detect_model_notice(handle).decode()
        self.name: str = lib.detect_model_name(handle).decode()
        self.class_names: List[str] = [
            lib.detect_model_class_name(handle, k).decode() for k in range(lib.detect_model_num_classes(handle))]
        self.max_image_side: int = lib.detect_model_max_image_side(handle)
        self.in_flight: int = lib.detect_model_in_flight(handle)
        # bytes of device memory each execution context took at open (0s on the CPU)
        self.device_memory: List[int] = [lib.detect_model_device_memory(handle, k) for k in range(self.in_flight)]

    def _require(self) -> ctypes.c_void_p:
        if self._handle is None:
            raise DetectError("DETECT_ERR_ARGUMENT", "the model is closed")
        return self._handle

    def __call__(self, image: ImageInput) -> Result:
        return self.detect(image)

    def detect(self, image: ImageInput) -> Result:
        """Runs the model on a path, encoded image bytes (PNG, JPEG, WebP,
        TIFF, GIF, BMP), an HxWx3 (RGB) / HxWx4 (RGBA) / HxW (grey) uint8
        array (any strides), a PIL image (any mode; converted to RGB as
        convert("RGB") does) or anything with __array_interface__."""
        with self._runs:
            handle = self._require()
            self._active += 1
        try:
            return Result(self, self._run(handle, image))
        finally:
            with self._runs:
                self._active -= 1
                self._runs.notify_all()

    def _enter(self) -> ctypes.c_void_p:
        with self._runs:
            handle = self._require()
            self._active += 1
            return handle

    def _leave(self) -> None:
        with self._runs:
            self._active -= 1
            self._runs.notify_all()

    def run_many(self, images: Iterable[ImageInput], depth: int = 0,
                 errors: str = "raise") -> Iterator[Union[Result, DetectError]]:
        """Results of `images` (each as detect() takes it) in their order,
        with up to in_flight of them running at once through the library's
        run queue (detect.h): paths are decoded on its worker threads too.
        Each result equals detect()'s for that image. depth: images
        submitted ahead of the one awaited (0: twice in_flight).
        errors="raise": a failing image raises its DetectError there (the
        generator ends); "return": its DetectError is yielded in its place
        and the others go on. close() on the model stops the generator."""
        if errors not in ("raise", "return"):
            raise ValueError(f"errors: expected 'raise' or 'return', got {errors!r}")
        lib = self._lib
        queue = ctypes.c_void_p()
        handle = self._enter()
        try:
            _check(lib.detect_run_queue_start(ctypes.byref(queue), handle, int(depth)))
            with self._runs:
                self._queues.add(queue.value)
        finally:
            self._leave()
        depth = lib.detect_run_queue_depth(queue)
        # per image submitted or refused, in order: its decoded image (freed at its collect), None for a path,
        # or the DetectError that refused it (bytes that do not decode), yielded at its turn
        held: List[Any] = []
        source = iter(images)
        exhausted = False
        try:
            while True:
                error: Optional[DetectError] = None
                result: Optional[ctypes.c_void_p] = None
                self._enter()
                try:
                    if queue.value not in self._queues:
                        raise DetectError("DETECT_ERR_ARGUMENT", "the model is closed")
                    while not exhausted and len(held) < depth:
                        try:
                            image = next(source)
                        except StopIteration:
                            exhausted = True
                            break
                        try:
                            held.append(self._submit(queue, image))
                        except DetectError as e:
                            held.append(e)
                    if not held:
                        return
                    if isinstance(held[0], DetectError):
                        error = held.pop(0)
                        status = 0
                    else:
                        out = ctypes.c_void_p()
                        status = lib.detect_run_queue_collect(queue, ctypes.byref(out), None)
                        image_handle = held.pop(0)
                        if image_handle is not None:
                            lib.detect_image_free(image_handle)
                    if error is not None:
                        pass
                    elif status != 0:
                        error = DetectError(lib.detect_status_name(status).decode(),
                                            lib.detect_last_error().decode("utf-8", "replace"))
                    else:
                        result = out
                finally:
                    self._leave()
                if error is not None:
                    if errors == "raise":
                        raise error
                    yield error
                else:
                    yield Result(self, result)
        finally:
            with self._runs:
                live = queue.value in self._queues
                self._queues.discard(queue.value)
            if live:
                lib.detect_run_queue_stop(queue)
            for h in held:
                if h is not None and not isinstance(h, DetectError):
                    lib.detect_image_free(h)

    def _submit(self, queue: ctypes.c_void_p, image: ImageInput) -> Optional[ctypes.c_void_p]:
        """Submits one image to a run queue; the decoded image it must keep
        until the collect (None for a path, which the queue decodes)."""
        lib = self._lib
        if isinstance(image, (str, os.PathLike)):
            _check(lib.detect_run_queue_submit_file(queue, os.fsencode(image), None))
            return None
        img = ctypes.c_void_p()
        if isinstance(image, (bytes, bytearray, memoryview)):
            data = bytes(image)
            _check(lib.detect_image_decode(data, len(data), b"image bytes", self.max_image_side, ctypes.byref(img)))
        else:
            arr, fmt = self._pixels(image)
            _check(lib.detect_image_from_pixels(arr.ctypes.data_as(ctypes.c_void_p), arr.shape[1], arr.shape[0],
                                                arr.strides[0], fmt, ctypes.byref(img)))
        status = lib.detect_run_queue_submit(queue, img, None)
        if status != 0:
            lib.detect_image_free(img)
            _check(status)
        return img

    @staticmethod
    def _pixels(image: Any):
        """An array the library reads (rows may be strided, pixels packed) and its pixel format."""
        arr = _as_array(image)
        if arr.dtype != np.uint8:
            raise DetectError("DETECT_ERR_ARGUMENT", f"image: expected a uint8 array, got {arr.dtype}")
        if arr.ndim == 2:
            fmt = _lib.PIXELS_GRAY
        elif arr.ndim == 3 and arr.shape[2] in (3, 4):
            fmt = _lib.PIXELS_RGB if arr.shape[2] == 3 else _lib.PIXELS_RGBA
        else:
            raise DetectError("DETECT_ERR_SHAPE", f"image: expected HxWx3, HxWx4 or HxW, got shape {arr.shape}")
        if arr.strides[1] != (1 if arr.ndim == 2 else arr.shape[2]) or (arr.ndim == 3 and arr.strides[2] != 1) \
                or arr.strides[0] < 0:
            arr = np.ascontiguousarray(arr)
        return arr, fmt

    def _run(self, handle: ctypes.c_void_p, image: ImageInput) -> ctypes.c_void_p:
        lib = self._lib
        out = ctypes.c_void_p()
        if isinstance(image, (str, os.PathLike)):
            _check(lib.detect_run_file(handle, os.fsencode(image), ctypes.byref(out)))
        elif isinstance(image, (bytes, bytearray, memoryview)):
            data = bytes(image)
            _check(lib.detect_run_encoded(handle, data, len(data), ctypes.byref(out)))
        else:
            arr, fmt = self._pixels(image)
            _check(lib.detect_run_pixels(handle, arr.ctypes.data_as(ctypes.c_void_p), arr.shape[1], arr.shape[0],
                                         arr.strides[0], fmt, ctypes.byref(out)))
        return out

    def close(self) -> None:
        """Frees the model now; using it afterwards raises DetectError.
        Results already returned stay valid."""
        with self._runs:
            if self._handle is None:
                return
            self._handle = None
            while self._active:
                self._runs.wait()
            # run_many's queues hold the model: stop them (each waits for its images running) first
            for q in self._queues:
                self._lib.detect_run_queue_stop(ctypes.c_void_p(q))
            self._queues.clear()
            self._finalizer()

    def __enter__(self) -> "Model":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._handle is None else self.device
        return f"<detect.Model {self.name!r} on {state}>"
