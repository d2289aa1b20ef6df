"""The detection ops (engine/{nms,roi_align,box_coder,anchors,mask_paste,rle})
and GroupNorm (engine/ops/group_norm) against torchvision 0.14 / torch 1.13 on
seeded random cases, through ctypes.

What is compared, and how strictly:
  nms, batched_nms   keep lists equal, element for element (scores are
                     distinct, so no tie order is involved); Detectron's
                     +1 NMS against a small numpy port of cython_nms
  roi_align          torchvision.ops.roi_align, aligned False/True, sampling
                     2 and 0, rois partly outside, tiny and degenerate:
                     max abs err <= 1e-5 * max(1, max|ref|); in fact bitwise
  multilevel         torchvision.ops.MultiScaleRoIAlign: levels equal,
                     outputs as roi_align
  box decode         BoxCoder.decode_single, weights (10,10,5,5), (1,1,1,1),
                     deltas large enough to hit the clip: <= 4 ulp of the
                     box scale (torch's vectorised exp is not glibc's expf)
  anchors            AnchorGenerator cell anchors (sizes 32..512) and
                     grid_anchors: exact
  mask paste         paste_masks_in_image: probabilities within 1e-5 (in
                     fact bitwise); binary > 0.5 equal except |p-0.5| < 1e-5
  RLE                pycocotools if importable, else a visible skip; always
                     an independent Python port of the published format
  group_norm         torch.nn.functional.group_norm (fp32), then the
                     residual sum and ReLU: normalised error <= 1e-5, up to
                     a 200x336x256 map (537,600 values a group) with its
                     mean far from 0; in place too

The header-only (MR_HD) functions are reached through a small shim compiled
here from the engine headers. The library: $DETECT_LIB, else
build/libdetect_internal.so, else the op sources compiled into a temporary .so.
Run with /usr/bin/python3 -m pytest. Every random case prints its seed."""

import ctypes as C
import math
import os

import numpy as np
import pytest
import torch
import torchvision
from torchvision.models.detection._utils import BoxCoder
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.image_list import ImageList
from torchvision.models.detection.roi_heads import paste_masks_in_image
from torchvision.ops.boxes import _batched_nms_vanilla

from conftest import compile_shim, engine_library_path

FP = C.POINTER(C.c_float)
IP = C.POINTER(C.c_int)
U8P = C.POINTER(C.c_uint8)
U32P = C.POINTER(C.c_uint32)


class Tensor(C.Structure):  # engine/core/tensor.h
    _fields_ = [("data", FP), ("n", C.c_int), ("h", C.c_int), ("w", C.c_int), ("c", C.c_int)]


class RoiAlignParams(C.Structure):  # engine/ops/roi_align.h
    _fields_ = [("out_h", C.c_int), ("out_w", C.c_int), ("sampling_ratio", C.c_int),
                ("aligned", C.c_int), ("spatial_scale", C.c_float)]


class LevelMap(C.Structure):  # engine/ops/roi_align.h
    _fields_ = [("min_level", C.c_int), ("max_level", C.c_int), ("canonical_size", C.c_int),
                ("canonical_level", C.c_int), ("eps", C.c_float), ("plus_one", C.c_int),
                ("eps_inside_log", C.c_int)]


class BoxCoderParams(C.Structure):  # engine/ops/box_coder.h
    _fields_ = [("weights", C.c_float * 4), ("clip", C.c_float), ("plus_one", C.c_int)]


class GroupNormParams(C.Structure):  # engine/ops/group_norm.h
    _fields_ = [("channels", C.c_int), ("groups", C.c_int), ("eps", C.c_float), ("relu", C.c_int)]


class PasteParams(C.Structure):  # engine/ops/mask_paste.h
    _fields_ = [("mask_size", C.c_int), ("padding", C.c_int), ("threshold", C.c_float),
                ("cmp", C.c_int), ("rule", C.c_int)]


SHIM = r"""
#include "ops/box_coder.h"
#include "ops/anchors.h"
#include "ops/roi_align.h"
void t_box_decode(const mr_box_coder *c, const float *boxes, const float *deltas, int n, float *out)
{ for (int i = 0; i < n; i++) box_decode(c, boxes + 4 * i, deltas + 4 * i, out + 4 * i); }
void t_roi_level(const mr_level_map *m, const float *boxes, int n, int *out)
{ for (int i = 0; i < n; i++) out[i] = roi_level(m, boxes + 4 * i); }
void t_grid_anchors(const float *cell, int A, int gh, int gw, float sh, float sw, float *out)
{ for (int y = 0; y < gh; y++) for (int x = 0; x < gw; x++) for (int a = 0; a < A; a++)
      anchor_at(cell, a, x, y, sw, sh, 0.0f, out + 4 * (((size_t)y * gw + x) * A + a)); }
"""


def ptr(a, t=FP):
    return a.ctypes.data_as(t)


def seeded(seed):
    print(f"seed {seed}")
    return np.random.default_rng(seed)


@pytest.fixture(scope="module")
def lib(tmp_path_factory):
    L = C.CDLL(engine_library_path())
    L.nms_scratch_bytes.restype = C.c_size_t
    L.nms_scratch_bytes.argtypes = [C.c_int]
    L.nms_cpu.restype = C.c_int
    L.nms_cpu.argtypes = [FP, FP, C.c_int, C.c_double, C.c_int, IP, C.c_void_p]
    L.batched_nms_cpu.restype = C.c_int
    L.batched_nms_cpu.argtypes = [FP, FP, IP, C.c_int, C.c_double, C.c_int, IP, C.c_void_p]
    L.roi_align_cpu.restype = None
    L.roi_align_cpu.argtypes = [C.POINTER(RoiAlignParams), C.POINTER(Tensor), FP, C.c_int, FP]
    L.roi_align_multilevel_cpu.restype = None
    L.roi_align_multilevel_cpu.argtypes = [C.POINTER(RoiAlignParams), C.POINTER(LevelMap),
                                           C.POINTER(C.POINTER(Tensor)), FP, C.c_int, IP, FP]
    L.anchors_cell.restype = C.c_int
    L.anchors_cell.argtypes = [FP, C.c_int, FP, C.c_int, C.c_int, FP]
    L.mask_paste_scratch_bytes.restype = C.c_size_t
    L.mask_paste_scratch_bytes.argtypes = [C.c_int, C.c_int]
    for f, out_t in (("mask_paste_prob_plane", FP), ("mask_paste_binary_plane", U8P)):
        getattr(L, f).restype = C.c_int
        getattr(L, f).argtypes = [C.POINTER(PasteParams), FP, FP, C.c_int, C.c_int, out_t, C.c_void_p, C.c_void_p]
    L.group_norm_cpu.restype = None
    L.group_norm_cpu.argtypes = [C.POINTER(GroupNormParams), FP, C.c_int, C.c_int, C.c_int, FP, FP, C.c_int, FP]
    L.rle_encode.restype = C.c_int
    L.rle_encode.argtypes = [U8P, C.c_int, C.c_int, U32P, IP]
    L.rle_string_max_bytes.restype = C.c_size_t
    L.rle_string_max_bytes.argtypes = [C.c_int]
    L.rle_to_string.restype = C.c_size_t
    L.rle_to_string.argtypes = [U32P, C.c_int, C.c_char_p, C.c_size_t]
    L.rle_from_string.restype = C.c_int
    L.rle_from_string.argtypes = [C.c_char_p, U32P, C.c_int, IP, C.c_void_p]
    L.rle_decode.restype = C.c_int
    L.rle_decode.argtypes = [U32P, C.c_int, C.c_int, C.c_int, U8P, C.c_void_p]
    return L


@pytest.fixture(scope="module")
def shim(tmp_path_factory):
    S = compile_shim(tmp_path_factory.mktemp("shim"), SHIM, "shim")
    S.t_box_decode.argtypes = [C.POINTER(BoxCoderParams), FP, FP, C.c_int, FP]
    S.t_roi_level.argtypes = [C.POINTER(LevelMap), FP, C.c_int, IP]
    S.t_grid_anchors.argtypes = [FP, C.c_int, C.c_int, C.c_int, C.c_float, C.c_float, FP]
    return S


# ---------------------------------------------------------------------- NMS

def random_boxes(rng, n, integer=False, span=400.0):
    xy = rng.uniform(-20, span, (n, 2))
    wh = rng.uniform(0, span / 4, (n, 2))
    if integer:
        xy, wh = np.round(xy), np.round(wh)
    wh[rng.random(n) < 0.05] = 0  # some degenerate boxes
    return np.concatenate([xy, xy + wh], 1).astype(np.float32)


def distinct_scores(rng, n):
    # a permutation of well-separated values: no ties, no near-ties
    return (rng.permutation(n).astype(np.float32) + 1) / np.float32(n + 1)


def our_nms(lib, boxes, scores, thr, plus_one=0, groups=None):
    n = len(scores)
    boxes = np.ascontiguousarray(boxes, np.float32)
    scores = np.ascontiguousarray(scores, np.float32)
    keep = np.zeros(max(n, 1), np.int32)
    scratch = C.create_string_buffer(max(lib.nms_scratch_bytes(n), 1))
    if groups is None:
        k = lib.nms_cpu(ptr(boxes), ptr(scores), n, thr, plus_one, ptr(keep, IP), scratch)
    else:
        g = np.ascontiguousarray(groups, np.int32)
        k = lib.batched_nms_cpu(ptr(boxes), ptr(scores), ptr(g, IP), n, thr, plus_one, ptr(keep, IP), scratch)
    return keep[:k].tolist()


@pytest.mark.parametrize("seed", range(6))
def test_nms_matches_torchvision(lib, seed):
    rng = seeded(1000 + seed)
    for n in (0, 1, 7, 300, 2500):
        for integer in (False, True):
            boxes = random_boxes(rng, n, integer)
            scores = distinct_scores(rng, n)
            for thr in (0.3, 0.5, 0.7):
                ref = torchvision.ops.nms(torch.from_numpy(boxes), torch.from_numpy(scores), thr).tolist()
                assert our_nms(lib, boxes, scores, thr) == ref, (n, integer, thr)


@pytest.mark.parametrize("seed", range(4))
def test_batched_nms_matches_torchvision(lib, seed):
    rng = seeded(2000 + seed)
    for n, ngroups in ((0, 3), (5, 2), (400, 5), (900, 80), (3000, 80)):
        # integer coordinates: for n <= 1000 torchvision offsets the boxes by
        # group*(max+1), which is exact only for such coordinates
        boxes = random_boxes(rng, n, integer=True)
        scores = distinct_scores(rng, n)
        groups = rng.integers(0, ngroups, n).astype(np.int64)
        tb, ts, tg = torch.from_numpy(boxes), torch.from_numpy(scores), torch.from_numpy(groups)
        for thr in (0.5, 0.7):
            ours = our_nms(lib, boxes, scores, thr, groups=groups)
            assert ours == torchvision.ops.batched_nms(tb, ts, tg, thr).tolist(), (n, thr)
        # float coordinates: against the per-group algorithm itself
        fb = random_boxes(rng, n)
        ours = our_nms(lib, fb, scores, 0.5, groups=groups)
        assert ours == _batched_nms_vanilla(torch.from_numpy(fb), ts, tg, 0.5).tolist(), n


def detectron_nms(boxes, scores, thr):
    """Detectron utils/cython_nms.pyx (float32 arrays, +1 widths, suppress at
    IoU >= float32(thr): `np.float32_t thresh`, `if ovr >= thresh`)."""
    x1, y1, x2, y2 = boxes.T
    one = np.float32(1)
    areas = (x2 - x1 + one) * (y2 - y1 + one)
    order = np.argsort(-scores, kind="stable")
    suppressed = np.zeros(len(scores), bool)
    keep = []
    for i in order:
        if suppressed[i]:
            continue
        keep.append(int(i))
        for j in order:
            if suppressed[j] or j == i or scores[j] > scores[i] or (scores[j] == scores[i] and j < i):
                continue
            w = max(np.float32(0), min(x2[i], x2[j]) - max(x1[i], x1[j]) + one)
            h = max(np.float32(0), min(y2[i], y2[j]) - max(y1[i], y1[j]) + one)
            inter = np.float32(w * h)
            ovr = np.float32(inter / np.float32(areas[i] + areas[j] - inter))
            if ovr >= np.float32(thr):
                suppressed[j] = True
    return keep


@pytest.mark.parametrize("seed", range(3))
def test_nms_plus_one_matches_detectron(lib, seed):
    rng = seeded(3000 + seed)
    for n in (1, 20, 150):
        boxes = random_boxes(rng, n, integer=True, span=120)
        scores = distinct_scores(rng, n)
        for thr in (0.3, 0.5, 0.7):
            # flags: MR_NMS_PLUS_ONE | MR_NMS_SUPPRESS_GE (nms.h)
            assert our_nms(lib, boxes, scores, thr, plus_one=3) == detectron_nms(boxes, scores, thr), (n, thr)


# ----------------------------------------------------------------- RoIAlign

def nhwc_tensor(feat_nchw):
    arr = np.ascontiguousarray(feat_nchw[0].transpose(1, 2, 0), np.float32)
    _, c, h, w = feat_nchw.shape
    return arr, Tensor(ptr(arr), 1, h, w, c)


def random_rois(rng, n, img_h, img_w):
    x1 = rng.uniform(-0.2 * img_w, img_w, n)
    y1 = rng.uniform(-0.2 * img_h, img_h, n)
    w = rng.uniform(0, 0.6 * img_w, n) * (rng.random(n) ** 2)  # many small ones
    h = rng.uniform(0, 0.6 * img_h, n) * (rng.random(n) ** 2)
    rois = np.stack([x1, y1, x1 + w, y1 + h], 1)
    k = max(n // 10, 1)
    rois[:k, 2:] = rois[:k, :2] + rng.uniform(0, 1.5, (k, 2))  # tiny
    rois[k:2 * k, 2] = rois[k:2 * k, 0]  # zero width
    rois[2 * k:3 * k, 2:] = rois[2 * k:3 * k, :2] - rng.uniform(0, 3, (k, 2))  # x2 < x1
    return rois.astype(np.float32)


def check_close(ours, ref, what):
    assert not np.isnan(ours).any(), what
    err = float(np.abs(ours - ref).max()) if ref.size else 0.0
    scale = max(1.0, float(np.abs(ref).max()) if ref.size else 0.0)
    print(f"{what}: max abs err {err:.3g}, bitwise equal {np.array_equal(ours, ref)}")
    assert err <= 1e-5 * scale, what


@pytest.mark.parametrize("aligned", [False, True])
@pytest.mark.parametrize("sampling", [2, 0])
def test_roi_align_matches_torchvision(lib, aligned, sampling):
    rng = seeded(4000 + 10 * int(aligned) + sampling)
    for scale, (H, W), C_, out, n in ((0.25, (50, 76), 16, 7, 200), (0.125, (25, 38), 8, 14, 100),
                                      (1.0, (12, 9), 5, 7, 60), (0.25, (50, 76), 3, 7, 0)):
        feat = rng.standard_normal((1, C_, H, W)).astype(np.float32)
        rois = random_rois(rng, n, H / scale, W / scale)
        ref = torchvision.ops.roi_align(torch.from_numpy(feat), [torch.from_numpy(rois)], (out, out),
                                        scale, sampling, aligned).numpy()
        arr, t = nhwc_tensor(feat)
        ours = np.full((n, out, out, C_), np.nan, np.float32)
        p = RoiAlignParams(out, out, sampling, int(aligned), scale)
        lib.roi_align_cpu(C.byref(p), C.byref(t), ptr(rois), n, ptr(ours))
        check_close(ours.transpose(0, 3, 1, 2), ref, f"roi_align scale {scale} out {out} n {n}")


@pytest.mark.parametrize("sampling", [2, 0])
def test_multiscale_roi_align_matches_torchvision(lib, sampling):
    rng = seeded(5000 + sampling)
    img_h, img_w, C_ = 320, 480, 8  # padded to 32: P2..P5 = 80x120 .. 10x15
    feats = {str(i): rng.standard_normal((1, C_, img_h >> (i + 2), img_w >> (i + 2))).astype(np.float32)
             for i in range(4)}
    n = 300
    rois = random_rois(rng, n, img_h, img_w)
    # sizes log-uniform over 8..1000 px so that every level is used
    side = np.exp(rng.uniform(np.log(8), np.log(1000), (n - 100, 2))).astype(np.float32)
    rois[100:, 2:] = rois[100:, :2] + side
    rois[:, 2:] = np.maximum(rois[:, 2:], rois[:, :2])  # torchvision's level mapper needs area >= 0
    # boxes exactly on level boundaries, sqrt(area) = 56, 112, 224, 448
    # (past the tiny / zero-width / negative blocks of random_rois)
    for i, s in enumerate((56.0, 112.0, 224.0, 448.0)):
        rois[100 + i] = [10, 10, 10 + s, 10 + s]
    pool = torchvision.ops.MultiScaleRoIAlign(["0", "1", "2", "3"], 7, sampling)
    tfeats = {k: torch.from_numpy(v) for k, v in feats.items()}
    ref = pool(tfeats, [torch.from_numpy(rois)], [(img_h, img_w)]).numpy()
    ref_levels = pool.map_levels([torch.from_numpy(rois)]).numpy() + 2

    keep = [nhwc_tensor(feats[str(i)]) for i in range(4)]
    tensors = (C.POINTER(Tensor) * 4)(*[C.pointer(t) for _, t in keep])
    ours = np.full((n, 7, 7, C_), np.nan, np.float32)
    levels = np.zeros(n, np.int32)
    p = RoiAlignParams(7, 7, sampling, 0, 0.0)
    m = LevelMap(2, 5, 224, 4, 1e-6, 0, 0)
    lib.roi_align_multilevel_cpu(C.byref(p), C.byref(m), tensors, ptr(rois), n, ptr(levels, IP), ptr(ours))
    assert np.array_equal(levels, ref_levels)
    print("rois per level 2..5:", np.bincount(levels, minlength=6)[2:])
    assert (np.bincount(levels, minlength=6)[2:] > 5).all()
    check_close(ours.transpose(0, 3, 1, 2), ref, "MultiScaleRoIAlign")


# ---------------------------------------------------------------- GroupNorm

@pytest.mark.parametrize("n,h,w,c,groups,relu,accumulate,offset", [
    (3, 1, 1, 32, 32, 0, 0, 0.0),       # one value a group: y = beta
    (3, 7, 7, 256, 32, 1, 0, 0.0),      # detectron2's GN(32, 256), a box head's batch
    (3, 13, 17, 64, 8, 0, 1, 0.0),      # residual sum
    (5, 14, 14, 256, 32, 1, 1, 0.0),    # the mask head's RoI batch, residual and ReLU
    (1, 25, 38, 64, 1, 0, 0, 3.0),      # one group (LayerNorm over C, H, W)
    (2, 9, 11, 48, 48, 1, 0, -2.0),     # one channel a group (InstanceNorm)
    (2, 9, 11, 80, 10, 0, 1, 0.0),      # runs of 8 groups of 8 channels, the last one short
    (1, 9, 11, 200, 2, 1, 0, 1.0),      # groups of 100 channels, wider than the CPU's 64 lanes
    (1, 200, 336, 256, 32, 1, 0, 4.0),  # res2 of an 800x1344 input
])
def test_group_norm_matches_torch(lib, n, h, w, c, groups, relu, accumulate, offset):
    """Against torch in fp32 and in fp64. A group of one value (1x1, one
    channel a group) normalises to exactly 0, which we give (beta); torch's
    fp32 kernel leaves ~1e-5 of rounding there, so such a case is held to
    the fp64 result only."""
    rng = seeded(5200 + n * 1000 + c + groups)
    x = (rng.standard_normal((n, c, h, w)) * 1.5 + offset).astype(np.float32)
    gamma = rng.uniform(0.5, 1.5, c).astype(np.float32)
    beta = rng.uniform(-0.5, 0.5, c).astype(np.float32)
    resid = rng.standard_normal((n, c, h, w)).astype(np.float32)

    def reference(dtype):
        def t(a):
            return torch.from_numpy(a).to(dtype)
        ref = torch.nn.functional.group_norm(t(x), groups, t(gamma), t(beta), 1e-5)
        if accumulate:
            ref = ref + t(resid)
        return (torch.relu(ref) if relu else ref).double().numpy()

    refs = {"torch fp64": reference(torch.float64)}
    if h * w * (c // groups) > 1:
        refs["torch fp32"] = reference(torch.float32)
    p = GroupNormParams(c, groups, 1e-5, relu)
    xh = np.ascontiguousarray(x.transpose(0, 2, 3, 1))
    runs = [("", np.ascontiguousarray(resid.transpose(0, 2, 3, 1)) if accumulate
             else np.full_like(xh, np.nan))]
    if not accumulate:
        runs.append((" in place", xh.copy()))
    for how, y in runs:
        src = y if how else xh
        lib.group_norm_cpu(C.byref(p), ptr(src), n, h, w, ptr(gamma), ptr(beta), accumulate, ptr(y))
        ours = y.transpose(0, 3, 1, 2).astype(np.float64)
        assert np.isfinite(ours).all()
        for name, ref in refs.items():
            err = float(np.linalg.norm(ours - ref) / max(np.linalg.norm(ref), 1e-30))
            print(f"group_norm N={n} {h}x{w}x{c} G{groups}{how} against {name}: normalised error {err:.3g}")
            assert err <= 1e-5, (how, name)


def test_level_mapper_matches_torchvision(shim):
    rng = seeded(5100)
    n = 20000
    s = np.exp(rng.uniform(np.log(4), np.log(2000), n))
    ar = np.exp(rng.uniform(-1.5, 1.5, n))
    w, h = s * np.sqrt(ar), s / np.sqrt(ar)
    boxes = np.stack([np.zeros(n), np.zeros(n), w, h], 1).astype(np.float32)
    boxes[:4] = [[0, 0, 224, 224], [0, 0, 112, 112], [0, 0, 448, 448], [0, 0, 56, 56]]
    mapper = torchvision.ops.poolers.LevelMapper(2, 5)
    ref = mapper([torch.from_numpy(boxes)]).numpy() + 2
    ours = np.zeros(n, np.int32)
    m = LevelMap(2, 5, 224, 4, 1e-6, 0, 0)
    shim.t_roi_level(C.byref(m), ptr(boxes), n, ptr(ours, IP))
    assert list(ours[:4]) == [4, 3, 5, 2]
    diff = np.nonzero(ours != ref)[0]
    print(f"level mismatches {len(diff)} of {n}")
    # torch's log2 may differ from log2f by an ulp: only boxes within a few
    # ulp of a level boundary may move
    for i in diff:
        lvl = 4 + math.log2(math.sqrt(float(boxes[i, 2]) * float(boxes[i, 3])) / 224) + 1e-6
        assert abs(lvl - round(lvl)) < 1e-5, (boxes[i], ours[i], ref[i])

    # Detectron (modeling/FPN.py: map_rois_to_fpn_levels) on float32 arrays:
    # area with +1, eps inside the log
    one = np.float32(1)
    s32 = np.sqrt((boxes[:, 2] - boxes[:, 0] + one) * (boxes[:, 3] - boxes[:, 1] + one))
    ref_d = np.clip(np.floor(np.float32(4) + np.log2(s32 / np.float32(224) + np.float32(1e-6))), 2, 5)
    m = LevelMap(2, 5, 224, 4, 1e-6, 1, 1)
    shim.t_roi_level(C.byref(m), ptr(boxes), n, ptr(ours, IP))
    diff = np.nonzero(ours != ref_d)[0]
    print(f"Detectron level mismatches {len(diff)} of {n}")
    for i in diff:
        lvl = 4 + math.log2(float(s32[i]) / 224 + 1e-6)
        assert abs(lvl - round(lvl)) < 1e-5, (boxes[i], ours[i], ref_d[i])


# ---------------------------------------------------------------- box coder

@pytest.mark.parametrize("weights", [(10.0, 10.0, 5.0, 5.0), (1.0, 1.0, 1.0, 1.0)])
def test_box_decode_matches_torchvision(shim, weights):
    rng = seeded(6000 + int(weights[0]))
    n = 20000
    boxes = random_boxes(rng, n, span=1300)
    deltas = (rng.standard_normal((n, 4)) * np.array(weights) * 0.5).astype(np.float32)
    deltas[: n // 10, 2:] = rng.uniform(3, 40, (n // 10, 2)) * np.array(weights[2:])  # past the clip
    coder = BoxCoder(weights)
    ref = coder.decode_single(torch.from_numpy(deltas), torch.from_numpy(boxes)).numpy()
    c = BoxCoderParams((C.c_float * 4)(*weights), math.log(1000.0 / 16), 0)
    ours = np.zeros_like(boxes)
    shim.t_box_decode(C.byref(c), ptr(boxes), ptr(deltas), n, ptr(ours))
    assert np.isfinite(ours).all()
    # error in units of the box's own scale: one ulp of exp() moves a corner
    # by ~|pred_w| * 2^-24
    scale = np.maximum(np.abs(ref), np.abs(ref[:, [2, 3, 2, 3]] - ref[:, [0, 1, 0, 1]])).max(1, keepdims=True)
    ulps = np.abs(ours - ref) / (np.maximum(scale, 1) * 2.0 ** -24)
    print(f"bitwise equal {np.mean(ours == ref):.4f} of coordinates, max {ulps.max():.2f} ulp of box scale")
    assert ulps.max() <= 4


# ------------------------------------------------------------------ anchors

def detectron2_cell_anchors(sizes, aspect_ratios):
    """detectron2 DefaultAnchorGenerator.generate_cell_anchors as documented:
    for each size, for each ratio: area = size**2, w = sqrt(area / ratio),
    h = ratio * w, box (-w/2, -h/2, w/2, h/2), in Python floats, then a
    float32 tensor."""
    out = []
    for size in sizes:
        area = float(size) ** 2.0
        for ratio in aspect_ratios:
            w = math.sqrt(area / ratio)
            h = ratio * w
            out.append([-w / 2.0, -h / 2.0, w / 2.0, h / 2.0])
    return np.array(out, np.float32)


def test_unrounded_anchors_match_detectron2(lib):
    ratios = [0.5, 1.0, 2.0]
    r = np.array(ratios, np.float32)
    differs_from_rounded = False
    for sizes in ([32], [64], [128], [256], [512], [32, 40.3, 50.8]):
        s = np.array(sizes, np.float32)
        out = np.zeros((len(sizes) * 3, 4), np.float32)
        assert lib.anchors_cell(ptr(s), len(sizes), ptr(r), 3, 0, ptr(out)) == len(sizes) * 3
        # the reference gets the float32 sizes, as a config's sizes reach the engine
        ref = detectron2_cell_anchors([float(x) for x in s], ratios)
        assert np.array_equal(out, ref), sizes
        differs_from_rounded |= not np.array_equal(out, np.rint(out))
    assert differs_from_rounded


def test_anchors_match_torchvision(lib, shim):
    sizes = ((32,), (64,), (128,), (256,), (512,))
    ratios = ((0.5, 1.0, 2.0),) * 5
    gen = AnchorGenerator(sizes, ratios)
    r = np.array(ratios[0], np.float32)
    cells = []
    for lvl, s in enumerate(sizes):
        out = np.zeros((3, 4), np.float32)
        a = lib.anchors_cell(ptr(np.array(s, np.float32)), 1, ptr(r), 3, 1, ptr(out))
        assert a == 3
        assert np.array_equal(out, gen.cell_anchors[lvl].numpy()), s
        cells.append(out)
    # several sizes per level: ratio-major order
    s3 = np.array([32, 40.3, 50.8], np.float32)
    out = np.zeros((9, 4), np.float32)
    assert lib.anchors_cell(ptr(s3), 3, ptr(r), 3, 1, ptr(out)) == 9
    assert np.array_equal(out, AnchorGenerator((tuple(s3.tolist()),), ((0.5, 1.0, 2.0),)).cell_anchors[0].numpy())
    # grid anchors of a padded 320x480 image: P2..P5 = size >> k, P6 =
    # ceil(P5 / 2) (max-pool k1 s2), and torchvision's stride is
    # padded_size // grid, which for P6 here is 320 // 5 = 64, 480 // 8 = 60
    grids = [(320 >> k, 480 >> k) for k in range(2, 6)] + [(-(-(320 >> 5) // 2), -(-(480 >> 5) // 2))]
    img = ImageList(torch.zeros(1, 3, 320, 480), [(320, 480)])
    ref = gen(img, [torch.zeros(1, 1, gh, gw) for gh, gw in grids])[0].numpy()
    ours = []
    for lvl, (gh, gw) in enumerate(grids):
        o = np.zeros((gh * gw * 3, 4), np.float32)
        shim.t_grid_anchors(ptr(cells[lvl]), 3, gh, gw, float(320 // gh), float(480 // gw), ptr(o))
        ours.append(o)
    assert np.array_equal(np.concatenate(ours), ref)


# --------------------------------------------------------------- mask paste

def test_mask_paste_matches_torchvision(lib):
    rng = seeded(7000)
    M = 28
    scratch = C.create_string_buffer(lib.mask_paste_scratch_bytes(M, 1))
    worst, near, total = 0.0, 0, 0
    for t in range(140):
        H, W = int(rng.integers(1, 200)), int(rng.integers(1, 200))
        if t >= 120:  # windows wider than the paste's 256-column blocks
            W = int(rng.integers(300, 700))
        mask = (1 / (1 + np.exp(-rng.standard_normal((M, M)) * 3))).astype(np.float32)
        if t % 10 == 0:
            mask[:] = 0.5  # exact ties for the threshold
        x1, y1 = rng.uniform(-0.2 * W, W), rng.uniform(-0.2 * H, H)
        bw, bh = rng.uniform(0, W) * rng.random(), rng.uniform(0, H) * rng.random()
        if t % 7 == 0:
            bw, bh = rng.uniform(0, 2), rng.uniform(0, 2)  # tiny
        box = np.array([x1, y1, x1 + bw, y1 + bh], np.float32)
        # torchvision slices with negative indices when the expanded box
        # lies wholly outside the image (and raises); keep boxes touching it
        if box[2] < 0 or box[3] < 0:
            box[2:] = np.maximum(box[2:], 1)
        ref = paste_masks_in_image(torch.from_numpy(mask)[None, None], torch.from_numpy(box)[None],
                                   (H, W), padding=1)[0, 0].numpy()
        p = PasteParams(M, 1, 0.5, 0, 0)
        prob = np.full((H, W), np.nan, np.float32)
        assert lib.mask_paste_prob_plane(C.byref(p), ptr(mask), ptr(box), H, W, ptr(prob), scratch, None) == 0
        assert not np.isnan(prob).any()
        worst = max(worst, float(np.abs(prob - ref).max()))
        assert np.abs(prob - ref).max() <= 1e-5, (t, box, H, W)
        binary = np.zeros((H, W), np.uint8)
        assert lib.mask_paste_binary_plane(C.byref(p), ptr(mask), ptr(box), H, W, ptr(binary, U8P), scratch, None) == 0
        ok = (binary == (ref > 0.5)) | (np.abs(ref - 0.5) < 1e-5)
        assert ok.all(), t
        near += int((binary != (ref > 0.5)).sum())
        total += H * W
        p.cmp = 1  # >=
        lib.mask_paste_binary_plane(C.byref(p), ptr(mask), ptr(box), H, W, ptr(binary, U8P), scratch, None)
        assert ((binary == (ref >= 0.5)) | (np.abs(ref - 0.5) < 1e-5)).all(), t
    print(f"mask paste: max abs err {worst:.3g}; {near} of {total} binary pixels differ (all at |p-0.5|<1e-5)")


# ---------------------------------------------------------------------- RLE

def ref_counts(mask):
    """Runs over the column-major flattening, starting with a run of zeros."""
    flat = np.asarray(mask, np.uint8).flatten(order="F") != 0
    counts, prev, run = [], False, 0
    for v in flat:
        if v != prev:
            counts.append(run)
            run, prev = 0, v
        run += 1
    counts.append(run)
    return counts


def ref_string(counts):
    """COCO's compressed counts: from the fourth count on, the difference to
    the count two before; each value in 5-bit groups, low first, 0x20 =
    another group follows, the last group's 0x10 = sign; each group + 48."""
    out = []
    for i, c in enumerate(counts):
        x = c - counts[i - 2] if i > 2 else c
        while True:
            g = x & 0x1F
            x >>= 5
            more = x != -1 if g & 0x10 else x != 0
            out.append(chr((g | (0x20 if more else 0)) + 48))
            if not more:
                break
    return "".join(out)


def our_rle(lib, mask):
    h, w = mask.shape
    m = np.ascontiguousarray(mask, np.uint8)
    counts = np.zeros(h * w + 1, np.uint32)
    n = C.c_int()
    assert lib.rle_encode(ptr(m, U8P), h, w, ptr(counts, U32P), C.byref(n)) == 0
    cap = lib.rle_string_max_bytes(n.value)
    buf = C.create_string_buffer(cap)
    length = lib.rle_to_string(ptr(counts, U32P), n.value, buf, cap)
    assert length < cap
    return counts[: n.value].tolist(), buf.value.decode()


def random_masks(rng):
    yield np.zeros((1, 1), np.uint8)
    yield np.ones((1, 1), np.uint8)
    yield np.zeros((17, 5), np.uint8)
    yield np.ones((6, 23), np.uint8)
    for _ in range(60):
        h, w = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        kind = rng.integers(0, 3)
        if kind == 0:
            m = rng.random((h, w)) < rng.random()
        elif kind == 1:  # a blob: long runs, large deltas
            yy, xx = np.mgrid[:h, :w]
            m = (yy - rng.uniform(0, h)) ** 2 + (xx - rng.uniform(0, w)) ** 2 < rng.uniform(1, h * w)
        else:  # stripes: runs that shrink and grow (negative deltas)
            m = (np.arange(h)[:, None] % rng.integers(1, 9)) < rng.integers(0, 5)
            m = np.broadcast_to(m, (h, w))
        yield m.astype(np.uint8)
    # An object inside a larger background, as a detection's mask is: rle_encode
    # walks only the foreground's bounding box and counts the rest; boxes at
    # every edge and corner, one pixel, one row, one column.
    for _ in range(60):
        h, w = int(rng.integers(1, 90)), int(rng.integers(1, 90))
        m = np.zeros((h, w), np.uint8)
        y0, x0 = int(rng.integers(0, h)), int(rng.integers(0, w))
        y1, x1 = int(rng.integers(y0, h)) + 1, int(rng.integers(x0, w)) + 1
        if rng.random() < 0.3:
            y0, y1 = (0, y1) if rng.random() < 0.5 else (y0, h)
        if rng.random() < 0.3:
            x0, x1 = (0, x1) if rng.random() < 0.5 else (x0, w)
        m[y0:y1, x0:x1] = rng.random((y1 - y0, x1 - x0)) < rng.choice([0.2, 0.7, 1.0])
        yield m
    yield np.pad(np.ones((1, 1), np.uint8), ((3, 4), (5, 6)))
    yield np.pad(np.ones((1, 7), np.uint8), ((3, 4), (0, 0)))
    yield np.pad(np.ones((9, 1), np.uint8), ((0, 0), (2, 0)))


def test_rle_matches_reference_format(lib):
    rng = seeded(8000)
    for m in random_masks(rng):
        counts, s = our_rle(lib, m)
        assert counts == ref_counts(m)
        assert s == ref_string(counts)
        # and back
        h, w = m.shape
        back_counts = np.zeros(len(s) + 1, np.uint32)
        n = C.c_int()
        assert lib.rle_from_string(s.encode(), ptr(back_counts, U32P), len(back_counts), C.byref(n), None) == 0
        assert back_counts[: n.value].tolist() == counts
        back = np.zeros((h, w), np.uint8)
        assert lib.rle_decode(ptr(back_counts, U32P), n.value, h, w, ptr(back, U8P), None) == 0
        assert np.array_equal(back, m)


def test_rle_matches_pycocotools(lib):
    try:
        from pycocotools import mask as mask_util
    except ImportError:
        pytest.skip("pycocotools is not importable here: RLE checked only against the format port "
                    "(test_rle_matches_reference_format)")
    rng = seeded(8001)
    for m in random_masks(rng):
        counts, s = our_rle(lib, m)
        enc = mask_util.encode(np.asfortranarray(m))
        assert enc["counts"].decode() == s
        assert list(enc["size"]) == list(m.shape)
        assert np.array_equal(mask_util.decode(enc), m)
