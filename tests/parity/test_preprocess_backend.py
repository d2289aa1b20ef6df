"""The backend's preprocess entry (engine/backend/backend.h) and the GPU kernel's
per-pixel math (engine/ops/preprocess.h), on the CPU, against torchvision.

(a) The CPU backend's `preprocess` entry, called through its table, for
    resize_method "torch_bilinear" equals torchvision's
    GeneralizedRCNNTransform (F.interpolate bilinear, align_corners=False,
    recompute_scale_factor=True; normalise; zero padding to
    size_divisible) bit for bit, on random images and sizes, in RGB and BGR
    order, with pixel_scale 1/255 (to_tensor) and 1 (0..255 means).
(b) cuda/preprocess.cu's kernel, emulated on the CPU: the shared table fill
    (strided as the kernel's threads do it) and mr_pre_pixel over every
    output pixel, from the decoded image (torch_bilinear, cv2_linear) or
    from the host's uint8 resize (Pillow's for pil_bilinear, OpenCV's for
    cv2_linear_uint8), as backend_cuda_preprocess.c feeds it. It must
    equal the CPU backend bit for bit for every method, so the GPU's
    arithmetic is tested here (the CPU paths of pil_bilinear, cv2_linear
    and cv2_linear_uint8 are checked against Pillow, OpenCV's rules and
    cv2 itself in test_image_pil.py, tests/unit/test_image.c and
    test_resize_cv2_uint8.py).

Seed: DETECT_PARITY_SEED, else 20240611, printed."""

import ctypes as C
import os

import numpy as np
import pytest
import torch
from torchvision.models.detection.transform import GeneralizedRCNNTransform
from torchvision.transforms.functional import to_tensor

from conftest import compile_shim
from image_ctypes import MR_OK, Geometry, InputConfig, geometry, input_config, load_library

SEED = int(os.environ.get("DETECT_PARITY_SEED", "20240611"))

SHIM = r"""
#include <stdlib.h>

#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "ops/image_preprocess.h"
#include "ops/preprocess.h"
#include "ops/resize_cv2_uint8.h"
#include "ops/resize_pil.h"

/* The CPU backend's entry through its table. */
int shim_backend_preprocess(const mr_input_config *cfg, const mr_input_geometry *g, const uint8_t *pix, float *out)
{
    mr_backend be;
    mr_error err = {0};
    if (backend_open("cpu", &(mr_backend_params){.threads = 2}, &be, &err) != MR_OK) return -1;
    mr_image img = {.pixels = (uint8_t *)pix, .h = g->in_h, .w = g->in_w};
    mr_tensor t = mr_tensor_make(out, 1, g->padded_h, g->padded_w, 3);
    int st = be.i->preprocess(be.ctx, cfg, &img, g, &t, &err);
    be.i->destroy(be.ctx);
    return st;
}

/* cuda/preprocess.cu's kernel on the CPU: 256 "threads" fill the table with
 * the kernel's stride, then mr_pre_pixel for every output pixel. For
 * pil_bilinear and cv2_linear_uint8 the image is the host's uint8 resize, as
 * the CUDA backend does. */
int shim_kernel_preprocess(const mr_input_config *cfg, const mr_input_geometry *g, const uint8_t *pix, float *out)
{
    mr_pre_job job;
    image_preprocess_job(cfg, g, &job);
    const uint8_t *src = pix;
    uint8_t *resized = NULL;
    void *work = NULL;
    if (g->method == MR_RESIZE_PIL_BILINEAR) {
        mr_resize_pil p = {g->in_h, g->in_w, g->resized_h, g->resized_w};
        resized = malloc((size_t)g->resized_h * (size_t)g->resized_w * 3);
        work = malloc(resize_pil_scratch_bytes(&p) + 64);
        if (!resized || !work) return -1;
        resize_pil_bilinear(&p, pix, resized, work);
        src = resized;
    } else if (g->method == MR_RESIZE_CV2_LINEAR_UINT8) {
        mr_resize_cv2_uint8 p = {g->in_h, g->in_w, g->resized_h, g->resized_w};
        resized = malloc((size_t)g->resized_h * (size_t)g->resized_w * 3);
        work = malloc(resize_cv2_uint8_scratch_bytes(&p) + 64);
        if (!resized || !work) return -1;
        resize_cv2_linear_uint8(&p, pix, resized, work);
        src = resized;
    }
    float lut[3 * 256];
    for (int t = 0; t < 256; t++) mr_pre_lut_fill(&job.norm, lut, t, 256);
    for (int y = 0; y < job.padded_h; y++)
        for (int x = 0; x < job.padded_w; x++)
            mr_pre_pixel(&job, lut, src, y, x, out + ((size_t)y * (size_t)job.padded_w + (size_t)x) * 3);
    free(resized);
    free(work);
    return 0;
}
"""

RGB_MEAN, RGB_STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]
BGR255_MEAN, BGR255_STD = [102.9801, 115.9465, 122.7717], [57.375, 57.12, 58.395]


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    lib = load_library()
    shim = compile_shim(tmp_path_factory.mktemp("preshim"), SHIM, "preshim", link_engine=True)
    for fn in (shim.shim_backend_preprocess, shim.shim_kernel_preprocess):
        fn.argtypes = [C.POINTER(InputConfig), C.POINTER(Geometry), C.c_void_p, C.c_void_p]
        fn.restype = C.c_int
    return lib, shim


def run(fn, cfg, g, pixels):
    pixels = np.ascontiguousarray(pixels)
    out = np.full((1, g.padded_h, g.padded_w, 3), np.nan, np.float32)
    assert fn(C.byref(cfg), C.byref(g), pixels.ctypes.data, out.ctypes.data) == MR_OK
    return out


def random_cases(n, rng):
    """(h, w, min_size, max_size, size_divisible): downscales, upscales,
    tiny and elongated images, max_size below min_size."""
    cases = []
    while len(cases) < n:
        h, w = (int(v) for v in rng.integers(1, 260, 2))
        if max(h, w) > 12 * min(h, w):
            continue
        min_size = int(rng.integers(4, 300))
        max_size = int(rng.integers(max(4, min_size // 2), 2 * min_size + 2))
        cases.append((h, w, min_size, max_size, int(rng.choice([1, 7, 32]))))
    return cases


def torchvision_preprocess(pixels, bgr, scale255, mean, std, min_size, max_size, div):
    p = pixels[:, :, ::-1].copy() if bgr else pixels
    # contiguous CHW, as to_tensor gives: a channels-last tensor would take
    # torch's other interpolation kernel (preprocess.h, mr_lerp2)
    x = torch.from_numpy(p).permute(2, 0, 1).contiguous().float() if scale255 else to_tensor(p)
    transform = GeneralizedRCNNTransform(min_size, max_size, mean, std, size_divisible=div).eval()
    with torch.no_grad():
        images, _ = transform([x])
    return tuple(images.image_sizes[0]), images.tensors[0].permute(1, 2, 0).numpy()


@pytest.mark.parametrize("bgr,scale255", [(False, False), (True, True), (True, False)])
def test_backend_torch_bilinear_matches_torchvision(libs, bgr, scale255):
    lib, shim = libs
    torch.set_num_threads(2)
    rng = np.random.default_rng(SEED + 2 * bgr + scale255)
    print(f"seed {SEED}")
    mean, std = (BGR255_MEAN, BGR255_STD) if scale255 else ((RGB_MEAN[::-1], RGB_STD[::-1]) if bgr else
                                                               (RGB_MEAN, RGB_STD))
    checked = 0
    for h, w, min_size, max_size, div in random_cases(16, rng):
        pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        cfg = input_config(mean, std, min_size, max_size, bgr=bgr, pixel_scale=1.0 if scale255 else 1.0 / 255.0,
                           size_divisibility=div)
        st, g, msg = geometry(lib, cfg, h, w)
        if st != MR_OK:  # a side would resize to 0: torchvision fails there too
            continue
        size, ref = torchvision_preprocess(pixels, bgr, scale255, mean, std, min_size, max_size, div)
        label = f"{h}x{w} min {min_size} max {max_size} /{div} -> {size}"
        assert (g.resized_h, g.resized_w) == size, label
        ours = run(shim.shim_backend_preprocess, cfg, g, pixels)[0]
        assert ours.shape == ref.shape, label
        np.testing.assert_array_equal(ours, ref, err_msg=label)
        np.testing.assert_array_equal(run(shim.shim_kernel_preprocess, cfg, g, pixels)[0], ours, err_msg=label)
        checked += 1
    assert checked >= 12


@pytest.mark.parametrize("method,rounding", [("torch_bilinear", "floor"), ("pil_bilinear", "detectron2"),
                                             ("cv2_linear", "round"), ("cv2_linear_uint8", "mmdet")])
def test_kernel_math_matches_cpu_backend(libs, method, rounding):
    lib, shim = libs
    rng = np.random.default_rng(SEED + 17 + len(method))
    print(f"seed {SEED}")
    # same size (all methods copy), then random ones
    cases = [(40, 56, 40, 56, 8)] + random_cases(14, rng)
    for i, (h, w, min_size, max_size, div) in enumerate(cases):
        bgr = i % 2 == 1
        pixels = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        cfg = input_config(BGR255_MEAN if bgr else RGB_MEAN, BGR255_STD if bgr else RGB_STD, min_size, max_size,
                           rounding=rounding, method=method, bgr=bgr, pixel_scale=1.0 if bgr else 1.0 / 255.0,
                           size_divisibility=div)
        st, g, msg = geometry(lib, cfg, h, w)
        if st != MR_OK:
            continue
        label = f"{method} {h}x{w} -> {g.resized_h}x{g.resized_w} padded {g.padded_h}x{g.padded_w}"
        cpu = run(shim.shim_backend_preprocess, cfg, g, pixels)
        assert not np.isnan(cpu).any(), label
        np.testing.assert_array_equal(run(shim.shim_kernel_preprocess, cfg, g, pixels), cpu, err_msg=label)
