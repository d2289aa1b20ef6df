"""ctypes mirrors of the image structs and functions (engine/core/image_types.h,
engine/io/image.h, engine/ops/image_preprocess.h), shared by test_image_torch.py,
test_image_pil.py and test_resize_cv2_uint8.py. Field order and types follow
the C headers named beside each class; change both together."""

import ctypes as C

import numpy as np

from conftest import engine_library_path

MR_OK, MR_ERR_FORMAT = 0, 2
ROUNDING = {"floor": 0, "round": 1, "detectron2": 2, "maskrcnn_benchmark": 3,
            "mmdet": 4}  # engine/core/config.h mr_resize_rounding
METHOD = {"torch_bilinear": 0, "pil_bilinear": 1, "cv2_linear": 2, "cv2_linear_uint8": 3}  # mr_resize_method


class InputConfig(C.Structure):  # engine/core/config.h: mr_input_config
    _fields_ = [("channel_order", C.c_int), ("pixel_scale", C.c_float),
                ("pixel_mean", C.c_float * 3), ("pixel_std", C.c_float * 3),
                ("min_size", C.c_int), ("max_size", C.c_int), ("resize_rounding", C.c_int),
                ("resize_method", C.c_int), ("size_divisibility", C.c_int), ("max_image_side", C.c_int),
                ("canvas_h", C.c_int), ("canvas_w", C.c_int)]


def input_config(mean, std, min_size, max_size, rounding="floor", method="torch_bilinear", bgr=False,
                 pixel_scale=1.0 / 255.0, size_divisibility=32, max_image_side=20000):
    return InputConfig(int(bgr), pixel_scale, (C.c_float * 3)(*mean), (C.c_float * 3)(*std), min_size,
                       max_size, ROUNDING[rounding], METHOD[method], size_divisibility, max_image_side, 0, 0)


class Geometry(C.Structure):  # engine/core/image_types.h: mr_input_geometry
    _fields_ = [(n, C.c_int) for n in ("in_h", "in_w", "resized_h", "resized_w", "padded_h", "padded_w")] + \
               [("scale_h", C.c_float), ("scale_w", C.c_float), ("method", C.c_int),
                ("factor_h", C.c_double), ("factor_w", C.c_double)]


class Image_(C.Structure):  # mr_image
    _fields_ = [("pixels", C.POINTER(C.c_uint8)), ("h", C.c_int), ("w", C.c_int), ("frames", C.c_int)]


class Tensor(C.Structure):  # engine/core/tensor.h: mr_tensor (cap is read by nobody here)
    _fields_ = [("data", C.POINTER(C.c_float)), ("n", C.c_int), ("h", C.c_int), ("w", C.c_int),
                ("c", C.c_int), ("cap", C.c_size_t)]


class Error(C.Structure):  # engine/core/status.h: mr_error
    _fields_ = [("status", C.c_int), ("msg", C.c_char * 1024)]


class ResizePil(C.Structure):  # engine/ops/resize_pil.h: mr_resize_pil
    _fields_ = [(n, C.c_int) for n in ("in_h", "in_w", "out_h", "out_w")]


class ResizeCv2(C.Structure):  # engine/ops/resize_cv2.h: mr_resize_cv2
    _fields_ = [(n, C.c_int) for n in ("in_h", "in_w", "out_h", "out_w")] + \
               [("fx", C.c_double), ("fy", C.c_double)]


class ResizeCv2Uint8(C.Structure):  # engine/ops/resize_cv2_uint8.h: mr_resize_cv2_uint8
    _fields_ = [(n, C.c_int) for n in ("in_h", "in_w", "out_h", "out_w")]


class PixelLut(C.Structure):  # engine/ops/resize_cv2.h: mr_pixel_lut
    _fields_ = [("v", (C.c_float * 256) * 3), ("src_ch", C.c_int * 3)]


def load_library():
    L = C.CDLL(engine_library_path())
    L.image_load.argtypes = [C.c_char_p, C.c_int, C.POINTER(Image_), C.POINTER(Error)]
    L.image_free.argtypes = [C.POINTER(Image_)]
    L.image_geometry.argtypes = [C.POINTER(InputConfig), C.c_int, C.c_int, C.POINTER(Geometry),
                                 C.POINTER(Error)]
    L.image_preprocess_scratch_bytes.argtypes = [C.POINTER(Geometry)]
    L.image_preprocess_scratch_bytes.restype = C.c_size_t
    L.image_preprocess.argtypes = [C.POINTER(InputConfig), C.POINTER(Image_), C.POINTER(Geometry),
                                   C.c_void_p, C.POINTER(Tensor)]
    L.resize_pil_scratch_bytes.argtypes = [C.POINTER(ResizePil)]
    L.resize_pil_scratch_bytes.restype = C.c_size_t
    L.resize_pil_bilinear.argtypes = [C.POINTER(ResizePil), C.c_void_p, C.c_void_p, C.c_void_p]
    L.resize_cv2_uint8_scratch_bytes.argtypes = [C.POINTER(ResizeCv2Uint8)]
    L.resize_cv2_uint8_scratch_bytes.restype = C.c_size_t
    L.resize_cv2_linear_uint8.argtypes = [C.POINTER(ResizeCv2Uint8), C.c_void_p, C.c_void_p, C.c_void_p]
    L.resize_cv2_scratch_bytes.argtypes = [C.POINTER(ResizeCv2)]
    L.resize_cv2_scratch_bytes.restype = C.c_size_t
    L.resize_cv2_linear.argtypes = [C.POINTER(ResizeCv2), C.c_void_p, C.POINTER(PixelLut), C.c_void_p,
                                    C.c_size_t, C.c_void_p]
    return L


def geometry(lib, cfg, h, w):
    """(status, Geometry, message)."""
    g, err = Geometry(), Error()
    st = lib.image_geometry(C.byref(cfg), h, w, C.byref(g), C.byref(err))
    return st, g, err.msg.decode()


def preprocess(lib, cfg, pixels):
    """image_geometry + image_preprocess on pixels [h, w, 3] uint8: (Geometry, [1, ph, pw, 3])."""
    h, w = pixels.shape[:2]
    st, g, msg = geometry(lib, cfg, h, w)
    assert st == MR_OK, msg
    pixels = np.ascontiguousarray(pixels)
    img = Image_(pixels.ctypes.data_as(C.POINTER(C.c_uint8)), h, w)
    scratch = C.create_string_buffer(max(lib.image_preprocess_scratch_bytes(C.byref(g)), 1))
    out = np.full((1, g.padded_h, g.padded_w, 3), np.nan, np.float32)
    t = Tensor(out.ctypes.data_as(C.POINTER(C.c_float)), 1, g.padded_h, g.padded_w, 3, out.size)
    lib.image_preprocess(C.byref(cfg), C.byref(img), C.byref(g), scratch, C.byref(t))
    return g, out
