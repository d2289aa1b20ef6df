"""Loading libdetect and declaring the C signatures of include/detect.h.

The library is the one `pip install .` copied into this package (beside
this file), or $DETECT_LIBRARY when set (a build tree's build/libdetect.so)."""

import ctypes
import os
import threading

PIXELS_RGB, PIXELS_BGR, PIXELS_RGBA, PIXELS_BGRA, PIXELS_GRAY = range(5)

ABI_VERSION = 1  # the DETECT_ABI_VERSION this binding is written for


class Instance(ctypes.Structure):
    """detect_instance."""
    _fields_ = [("class_id", ctypes.c_int), ("score", ctypes.c_float), ("box", ctypes.c_float * 4),
                ("mask", ctypes.c_void_p), ("mask_x", ctypes.c_int), ("mask_y", ctypes.c_int),
                ("mask_w", ctypes.c_int), ("mask_h", ctypes.c_int)]


_P = ctypes.c_void_p
_PP = ctypes.POINTER(ctypes.c_void_p)
_S = ctypes.c_char_p
_I = ctypes.c_int

_SIGNATURES = {
    # name: (restype, argtypes)
    "detect_status_name": (_S, [_I]),
    "detect_last_error": (_S, []),
    "detect_version": (_S, [ctypes.POINTER(ctypes.c_int)]),
    "detect_free": (None, [_P]),
    "detect_options_create": (_I, [_PP]),
    "detect_options_free": (None, [_P]),
    "detect_options_set_device": (_I, [_P, _S]),
    "detect_options_set_precision": (_I, [_P, _S]),
    "detect_options_set_threads": (_I, [_P, _I]),
    "detect_options_set_score_threshold": (_I, [_P, ctypes.c_double]),
    "detect_options_set_max_detections": (_I, [_P, _I]),
    "detect_options_set_classes": (_I, [_P, _S]),
    "detect_options_set_agnostic_nms": (_I, [_P, _I]),
    "detect_model_open": (_I, [_PP, _S, _S, _P]),
    "detect_model_free": (None, [_P]),
    "detect_model_device": (_S, [_P]),
    "detect_model_notice": (_S, [_P]),
    "detect_model_name": (_S, [_P]),
    "detect_model_num_classes": (_I, [_P]),
    "detect_model_class_name": (_S, [_P, _I]),
    "detect_model_max_image_side": (_I, [_P]),
    "detect_run_file": (_I, [_P, _S, _PP]),
    "detect_run_encoded": (_I, [_P, ctypes.c_char_p, ctypes.c_size_t, _PP]),
    "detect_run_pixels": (_I, [_P, _P, _I, _I, ctypes.c_size_t, _I, _PP]),
    "detect_result_free": (None, [_P]),
    "detect_result_count": (_I, [_P]),
    "detect_result_width": (_I, [_P]),
    "detect_result_height": (_I, [_P]),
    "detect_result_instance": (_I, [_P, _I, ctypes.POINTER(Instance)]),
    "detect_result_mask": (_I, [_P, _I, _P]),
    "detect_result_mask_rle": (_I, [_P, _I, _PP]),
    "detect_result_stage_seconds": (ctypes.c_double, [_P, _I]),
    "detect_result_json": (_I, [_P, _P, _S, _PP]),
    "detect_options_set_in_flight": (_I, [_P, _I]),
    "detect_options_set_canvas": (_I, [_P, _I, _I]),
    "detect_model_in_flight": (_I, [_P]),
    "detect_model_device_memory": (ctypes.c_size_t, [_P, _I]),
    "detect_image_decode": (_I, [ctypes.c_char_p, ctypes.c_size_t, _S, _I, _PP]),
    "detect_image_from_pixels": (_I, [_P, _I, _I, ctypes.c_size_t, _I, _PP]),
    "detect_image_free": (None, [_P]),
    "detect_run_queue_start": (_I, [_PP, _P, _I]),
    "detect_run_queue_depth": (_I, [_P]),
    "detect_run_queue_pending": (_I, [_P]),
    "detect_run_queue_submit": (_I, [_P, _P, _P]),
    "detect_run_queue_submit_file": (_I, [_P, _S, _P]),
    "detect_run_queue_collect": (_I, [_P, _PP, _PP]),
    "detect_run_queue_stop": (None, [_P]),
}

_lock = threading.Lock()
_lib = None


def library_path() -> str:
    env = os.environ.get("DETECT_LIBRARY")
    if env:
        return env
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "libdetect.so.%d" % ABI_VERSION)


def load() -> ctypes.CDLL:
    """The library, loaded once per process, its ABI checked."""
    global _lib
    with _lock:
        if _lib is None:
            lib = ctypes.CDLL(library_path())
            for name, (res, args) in _SIGNATURES.items():
                fn = getattr(lib, name)
                fn.restype, fn.argtypes = res, args
            abi = ctypes.c_int()
            lib.detect_version(ctypes.byref(abi))
            if abi.value != ABI_VERSION:
                raise ImportError(f"{library_path()}: ABI {abi.value}, this binding needs {ABI_VERSION}")
            _lib = lib
        return _lib
