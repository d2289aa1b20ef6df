"""A stand-in for mmcv's compiled `mmcv._ext`, for the mmdetection test oracle (build/venv-mmdet).

mmcv-lite (PyPI, pure Python) ships mmcv/ops/*.py without the compiled extension they load at
import (mmcv/utils/ext_loader.py: importlib.import_module('mmcv._ext') and `assert hasattr` for
every op a module names), and mmdet's package __init__ imports every mmcv.ops module.  Mask R-CNN's
inference runs two of them; scripts/install_deps.sh copies this file to <venv>/mmcv/_ext.py:

  nms(boxes, scores, iou_threshold=, offset=)         mmcv/ops/nms.py NMSop.forward (batched_nms
                                                      calls nms, which calls this)
  roi_align_forward(input, rois, output, argmax_y, argmax_x, aligned_height=, aligned_width=,
                    spatial_scale=, sampling_ratio=, pool_mode=, aligned=)
                                                      mmcv/ops/roi_align.py RoIAlignFunction.forward
                                                      (writes into `output`, returns nothing)

Both map onto torchvision.ops (Debian's torchvision, the tests' reference), whose semantics are
those of mmcv's CPU kernels (shared/reference/zoo_variants.md §4):
  * nms: mmcv/ops/csrc/pytorch/cpu/nms.cpp sorts by score, descending, and suppresses a box whose
    IoU with a kept one is > iou_threshold, with areas (x2 - x1 + offset) * (y2 - y1 + offset) and
    the intersection's sides max(0, min(x2) - max(x1) + offset).  torchvision.ops.nms is offset 0.
    offset 1 (mmdet's legacy configs) is offset 0 on boxes whose x2, y2 are 1 larger: every term
    above is the same sum, so it is mapped that way rather than refused.  The order among equal
    scores may differ (neither sort is stable).
  * roi_align_forward: mmcv/ops/csrc/pytorch/cpu/roi_align.cpp with pool_mode 1 (avg) is
    torchvision.ops.roi_align(input, rois [K,5] = (batch, x1, y1, x2, y2), (aligned_height,
    aligned_width), spatial_scale, sampling_ratio, aligned): the -0.5 pixel shift when aligned,
    the minimum size 1 when not, sampling_ratio 0 = ceil(roi / bin) samples, the same bilinear
    edge rules.  mmcv's own RoIAlign(use_torchvision=True) calls that function the same way.
    pool_mode 0 (max, with argmax outputs for the backward) has no torchvision counterpart:
    refused.

Every other name an mmcv.ops module asks for at import (deform_conv_forward, ms_deform_attn_...,
about 150) is a stub, so the `hasattr` checks pass; calling one raises NotImplementedError naming
the op, so a model that needs it fails loudly instead of computing something else.
"""

import torch
import torchvision


def nms(boxes, scores, iou_threshold, offset=0):
    """Indices of the kept boxes (int64), by decreasing score: mmcv's nms kernel."""
    if offset not in (0, 1):
        raise NotImplementedError(f"mmcv._ext.nms: offset {offset!r} (mmcv takes 0 or 1)")
    if boxes.numel() == 0:
        return torch.empty(0, dtype=torch.long, device=boxes.device)
    if offset:
        boxes = torch.cat([boxes[:, :2], boxes[:, 2:] + 1], dim=1)
    return torchvision.ops.nms(boxes, scores, float(iou_threshold))


def roi_align_forward(input, rois, output, argmax_y, argmax_x, aligned_height, aligned_width,
                      spatial_scale, sampling_ratio, pool_mode, aligned):
    """Average RoIAlign of `input` [N,C,H,W] over `rois` [K,5], written into `output` [K,C,h,w]."""
    if pool_mode != 1:
        raise NotImplementedError("mmcv._ext.roi_align_forward: pool_mode 0 (max pooling) is not "
                                  "available in this torchvision shim (only 'avg')")
    out = torchvision.ops.roi_align(input, rois, (int(aligned_height), int(aligned_width)),
                                    spatial_scale=float(spatial_scale), sampling_ratio=int(sampling_ratio),
                                    aligned=bool(aligned))
    output.copy_(out)


def _missing(name):
    def stub(*args, **kwargs):
        raise NotImplementedError(f"mmcv._ext.{name}: this mmcv op is not available: build/venv-mmdet "
                                  "has mmcv-lite with a torchvision shim for nms and roi_align_forward only "
                                  "(tests/mmdet/mmcv_ext.py)")
    stub.__name__ = name
    return stub


def __getattr__(name):
    """A stub for any other op (module-level __getattr__, PEP 562); dunder names stay missing so
    that import machinery and introspection see an ordinary module."""
    if name.startswith("__"):
        raise AttributeError(name)
    return _missing(name)
