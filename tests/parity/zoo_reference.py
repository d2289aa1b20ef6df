"""A small reference for the model zoos' per-function conventions, written
here from the documented semantics (../shared/reference/conventions.md and
the upstream sources named per function); no upstream code is copied.

Detectron (Caffe2, facebookresearch/Detectron) runs its box bookkeeping in
numpy. Its arrays are float32 (network blobs, im_info) except the anchor
tables and grid shifts, which numpy builds in float64 (Python floats); each
function below says which. numpy keeps float32 when an array meets a Python
scalar, and every function here spells out that cast (np.float32(...)) so
the result does not depend on numpy's promotion rules.

Box format everywhere: [x1, y1, x2, y2]. Detectron's boxes are inclusive
(the "+1" convention: width = x2 - x1 + 1); detectron2's are not.

The detectron2 paste (paste_mask_detectron2) uses torch's own grid_sample,
so there the reference is torch's kernel with detectron2's grid."""

import math

import numpy as np

F32 = np.float32
# Detectron core/config.py: BBOX_XFORM_CLIP = np.log(1000. / 16.) (float64;
# compared with float32 arrays it acts as float32)
BBOX_XFORM_CLIP = math.log(1000.0 / 16.0)


# ---------------------------------------------------------------- utils/boxes.py

def delta2bbox_mmdet(rois, deltas, weights=(1.0, 1.0, 1.0, 1.0), clip=BBOX_XFORM_CLIP):
    """mmdetection `models/task_modules/coders/delta_xywh_bbox_coder.py: delta2bbox`
    (float32), without its clip to the image (that is box_clip's, tested apart).

    The coder's stds are 1/weights (RCNN target_stds (0.1, 0.1, 0.2, 0.2) = weights
    (10, 10, 5, 5)) and means 0: deltas * std; pxy = (x1 + x2) * 0.5, pwh = x2 - x1;
    dwh clamped to [-max_ratio, max_ratio] with max_ratio = |log(wh_ratio_clip)| =
    log(1000/16), on both sides; gxy = pxy + pwh * dxy, gwh = pwh * exp(dwh);
    corners gxy -+ gwh * 0.5. Returned in float64 for the comparison."""
    rois = np.asarray(rois, F32)
    deltas = np.asarray(deltas, F32)
    stds = np.array([1.0 / w for w in weights], F32)
    d = deltas * stds
    pxy = (rois[:, :2] + rois[:, 2:]) * F32(0.5)
    pwh = rois[:, 2:] - rois[:, :2]
    dxy = d[:, :2]
    dwh = np.clip(d[:, 2:], F32(-clip), F32(clip))
    gxy = pxy + pwh * dxy
    gwh = pwh * np.exp(dwh)
    return np.concatenate([gxy - gwh * F32(0.5), gxy + gwh * F32(0.5)], 1).astype(np.float64)


def bbox_transform(boxes, deltas, weights=(1.0, 1.0, 1.0, 1.0), clip=BBOX_XFORM_CLIP):
    """Detectron `utils/boxes.py: bbox_transform` (float32, as the deltas).

    boxes [n,4] (cast to float32 like `boxes.astype(deltas.dtype)`), deltas
    [n,4k]. Inclusive widths w = x2 - x1 + 1, centre x1 + 0.5*w, dw and dh
    clamped above at `clip` before exp, and the asymmetric corners
    x1 = cx - 0.5*pw, x2 = cx + 0.5*pw - 1."""
    boxes = np.asarray(boxes, F32)
    deltas = np.asarray(deltas, F32)
    if boxes.shape[0] == 0:
        return np.zeros((0, deltas.shape[1]), F32)
    one, half = F32(1), F32(0.5)
    widths = boxes[:, 2] - boxes[:, 0] + one
    heights = boxes[:, 3] - boxes[:, 1] + one
    ctr_x = boxes[:, 0] + half * widths
    ctr_y = boxes[:, 1] + half * heights
    wx, wy, ww, wh = (F32(v) for v in weights)
    dx = deltas[:, 0::4] / wx
    dy = deltas[:, 1::4] / wy
    dw = np.minimum(deltas[:, 2::4] / ww, F32(clip))
    dh = np.minimum(deltas[:, 3::4] / wh, F32(clip))
    pcx = dx * widths[:, None] + ctr_x[:, None]
    pcy = dy * heights[:, None] + ctr_y[:, None]
    pw = np.exp(dw) * widths[:, None]
    ph = np.exp(dh) * heights[:, None]
    out = np.zeros(deltas.shape, F32)
    out[:, 0::4] = pcx - half * pw
    out[:, 1::4] = pcy - half * ph
    out[:, 2::4] = (pcx + half * pw) - one
    out[:, 3::4] = (pcy + half * ph) - one
    return out


def clip_tiled_boxes(boxes, im_shape):
    """Detectron `utils/boxes.py: clip_tiled_boxes`: every coordinate to
    [0, W-1] (x) or [0, H-1] (y), min first then max, float32.
    im_shape = (H, W, ...). Returns a new array."""
    b = np.array(boxes, F32, copy=True)
    h1, w1 = F32(im_shape[0]) - F32(1), F32(im_shape[1]) - F32(1)
    b[:, 0::4] = np.maximum(np.minimum(b[:, 0::4], w1), F32(0))
    b[:, 1::4] = np.maximum(np.minimum(b[:, 1::4], h1), F32(0))
    b[:, 2::4] = np.maximum(np.minimum(b[:, 2::4], w1), F32(0))
    b[:, 3::4] = np.maximum(np.minimum(b[:, 3::4], h1), F32(0))
    return b


def boxes_area(boxes):
    """Detectron `utils/boxes.py: boxes_area` (and the areas of
    cython_nms.pyx): (x2 - x1 + 1) * (y2 - y1 + 1), float32."""
    b = np.asarray(boxes, F32)
    return (b[:, 2] - b[:, 0] + F32(1)) * (b[:, 3] - b[:, 1] + F32(1))


def iou_pairs(a, b):
    """IoU of a[i] with b[i] as Detectron `utils/cython_nms.pyx` computes it
    (a = the kept box), float32: w = max(0, min(x2) - max(x1) + 1), likewise
    h, inter = w*h, ovr = inter / (area_a + area_b - inter)."""
    a, b = np.asarray(a, F32), np.asarray(b, F32)
    aa, ab = boxes_area(a), boxes_area(b)
    w = np.maximum(F32(0), np.minimum(a[:, 2], b[:, 2]) - np.maximum(a[:, 0], b[:, 0]) + F32(1))
    h = np.maximum(F32(0), np.minimum(a[:, 3], b[:, 3]) - np.maximum(a[:, 1], b[:, 1]) + F32(1))
    inter = w * h
    return inter / (aa + ab - inter)


def nms(boxes, scores, thresh):
    """Detectron `utils/cython_nms.pyx: nms` (via utils/boxes.py: nms).

    Visits boxes by `scores.argsort()[::-1]`, skips suppressed ones, and a
    visited box suppresses every later unsuppressed box whose IoU with it
    (iou_pairs) is `>= thresh`, thresh being a float32 (`np.float32_t
    thresh`): suppression AT the threshold, in float32.
    Returns the kept indices in ASCENDING INDEX order
    (`np.where(suppressed == 0)[0]`), as Detectron does.

    Ties: numpy's default argsort is an introsort; for n <= 16 it is an
    insertion sort (stable), so after [::-1] tied boxes are visited highest
    index first. This reference uses a stable sort, i.e. that small-n order,
    for every n (for larger n numpy's tie order is not specified)."""
    boxes = np.asarray(boxes, F32)
    scores = np.asarray(scores, F32)
    n = len(scores)
    if n == 0:
        return np.zeros(0, np.int64)
    t = F32(thresh)
    order = np.argsort(scores, kind="stable")[::-1]
    suppressed = np.zeros(n, bool)
    for pos, i in enumerate(order):
        if suppressed[i]:
            continue
        rest = order[pos + 1:]
        rest = rest[~suppressed[rest]]
        if len(rest) == 0:
            continue
        ovr = iou_pairs(np.repeat(boxes[i:i + 1], len(rest), 0), boxes[rest])
        suppressed[rest[ovr >= t]] = True
    return np.where(~suppressed)[0]


# ---------------------------------------------------------------- modeling/FPN.py

def map_rois_to_fpn_levels(rois, k_min, k_max, s0=224, lvl0=4, eps=1e-6):
    """Detectron `modeling/FPN.py: map_rois_to_fpn_levels`, float32:
    s = sqrt(boxes_area(rois)) (+1 areas), lvl = floor(lvl0 + log2(s/s0 + eps)),
    clipped to [k_min, k_max]. Returns (levels int, the unfloored value)."""
    s = np.sqrt(boxes_area(rois))
    v = F32(lvl0) + np.log2(s / F32(s0) + F32(eps))
    return np.clip(np.floor(v), k_min, k_max).astype(np.int64), v


def assign_boxes_to_levels_d2(boxes, min_level, max_level, canonical_box_size=224, canonical_level=4):
    """detectron2 `modeling/poolers.py: assign_boxes_to_levels` (float32,
    torch): s = sqrt(Boxes.area()) with area (x2-x1)*(y2-y1) (no +1),
    lvl = floor(canonical_level + log2(s / canonical_box_size + 1e-8)),
    clamped to [min_level, max_level]; returned as ABSOLUTE levels (detectron2
    subtracts min_level). Returns (levels, the unfloored value).
    Note 1 + 1e-8 == 1 in float32: the eps only matters for tiny boxes."""
    b = np.asarray(boxes, F32)
    s = np.sqrt((b[:, 2] - b[:, 0]) * (b[:, 3] - b[:, 1]))
    v = F32(canonical_level) + np.log2(s / F32(canonical_box_size) + F32(1e-8))
    return np.clip(np.floor(v), min_level, max_level).astype(np.int64), v


# ---------------------------------------------------------------- modeling/generate_anchors.py

def generate_anchors(stride, sizes, aspect_ratios):
    """Detectron `modeling/generate_anchors.py: generate_anchors` (float64).

    Base window [0, 0, stride-1, stride-1] (w = h = stride, centre
    (stride-1)/2). For each ratio r (h/w): ws = round(sqrt(stride^2 / r)),
    hs = round(ws * r) (np.round: half to even); then for each size, the
    sides times size/stride; each anchor is centre -+ 0.5*(side - 1).
    Order: ratio-major, then size."""
    stride = float(stride)
    ctr = 0.5 * (stride - 1.0)
    out = []
    for r in aspect_ratios:
        ws = np.round(np.sqrt(stride * stride / float(r)))
        hs = np.round(ws * float(r))
        for size in sizes:
            scale = float(size) / stride
            w, h = ws * scale, hs * scale
            out.append([ctr - 0.5 * (w - 1), ctr - 0.5 * (h - 1), ctr + 0.5 * (w - 1), ctr + 0.5 * (h - 1)])
    return np.array(out, np.float64)


def fpn_level_anchors(lvl, k_min=2, start_size=32, aspect_ratios=(0.5, 1.0, 2.0)):
    """The table `modeling/FPN.py: add_fpn_rpn_outputs` builds for level lvl:
    generate_anchors(stride=2**lvl, sizes=(start_size * 2**(lvl - k_min),))."""
    return generate_anchors(2.0 ** lvl, (start_size * 2.0 ** (lvl - k_min),), aspect_ratios)


def grid_anchors(anchors, feat_stride, height, width):
    """The shifted anchors of Detectron `ops/generate_proposals.py:
    GenerateProposalsOp.forward` (float64): shifts x*feat_stride,
    y*feat_stride for x < width, y < height; order (y, x, a), a fastest."""
    sx, sy = np.meshgrid(np.arange(width) * float(feat_stride), np.arange(height) * float(feat_stride))
    shifts = np.stack([sx.ravel(), sy.ravel(), sx.ravel(), sy.ravel()], 1)
    return (anchors[None, :, :] + shifts[:, None, :]).reshape(-1, 4)


# ---------------------------------------------------------------- ops/generate_proposals.py

def filter_boxes(boxes, min_size, im_info):
    """Detectron `ops/generate_proposals.py: _filter_boxes` (float32):
    sides measured at the original scale, (x2-x1)/im_scale + 1, must be
    >= max(min_size, 1); the centre x1 + (x2-x1+1)/2 must be < im_info[1]
    (y: < im_info[0]), im_info being the PADDED network input size.
    Returns the kept indices."""
    b = np.asarray(boxes, F32)
    im_info = np.asarray(im_info, F32)
    one = F32(1)
    ws_orig = (b[:, 2] - b[:, 0]) / im_info[2] + one
    hs_orig = (b[:, 3] - b[:, 1]) / im_info[2] + one
    m = F32(max(float(min_size), 1.0))
    ws = b[:, 2] - b[:, 0] + one
    hs = b[:, 3] - b[:, 1] + one
    x_ctr = b[:, 0] + ws / F32(2)
    y_ctr = b[:, 1] + hs / F32(2)
    return np.where((ws_orig >= m) & (hs_orig >= m) & (x_ctr < im_info[1]) & (y_ctr < im_info[0]))[0]


def proposals_for_one_image(im_info, all_anchors, bbox_deltas, scores, pre_nms_topN, post_nms_topN, nms_thresh,
                            min_size):
    """Detectron `ops/generate_proposals.py: proposals_for_one_image` for one
    level. all_anchors [K*A,4] (grid_anchors), bbox_deltas [K*A,4] and
    scores [K*A] already in (y, x, a) order (Detectron transposes its
    (A,H,W) blobs to that). Top pre_nms_topN by score (argsort of -scores;
    the tests use distinct scores, where argpartition+argsort gives the same),
    bbox_transform (weights 1), clip_tiled_boxes to im_info[:2] (the PADDED
    size), filter_boxes, nms (>=), first post_nms_topN. float32."""
    scores = np.asarray(scores, F32)
    order = np.argsort(-scores, kind="stable")
    if 0 < pre_nms_topN < len(scores):
        order = order[:pre_nms_topN]
    deltas = np.asarray(bbox_deltas, F32)[order]
    anchors = np.asarray(all_anchors)[order]
    scores = scores[order]
    props = bbox_transform(anchors, deltas, (1.0, 1.0, 1.0, 1.0))
    props = clip_tiled_boxes(props, np.asarray(im_info, F32)[:2])
    keep = filter_boxes(props, min_size, im_info)
    props, scores = props[keep], scores[keep]
    if nms_thresh > 0:
        keep = nms(props, scores, nms_thresh)
        if post_nms_topN > 0:
            keep = keep[:post_nms_topN]
        props, scores = props[keep], scores[keep]
    return props, scores


def collect(rois_per_level, scores_per_level, post_nms_topN):
    """Detectron `ops/collect_and_distribute_fpn_rpn_proposals.py: collect`
    (test, one image): the post_nms_topN best by score over all levels,
    `np.argsort(-scores)[:post_nms_topN]` (distinct scores in the tests)."""
    rois = np.concatenate(rois_per_level)
    scores = np.concatenate(scores_per_level)
    inds = np.argsort(-scores, kind="stable")[:post_nms_topN]
    return rois[inds], scores[inds]


def sigmoid(x):
    """Caffe2's Sigmoid op as Detectron's FPN RPN applies it, float32."""
    x = np.asarray(x, F32)
    return F32(1) / (F32(1) + np.exp(-x))


# ---------------------------------------------------------------- utils/blob.py

def prep_im_for_blob_geometry(h, w, target_size, max_size, coarsest_stride=32):
    """The geometry of Detectron `utils/blob.py: prep_im_for_blob` +
    `im_list_to_blob` + `get_image_blob` (float64 Python arithmetic):
    im_scale = target/min(h,w); if np.round(im_scale*max(h,w)) > max_size:
    im_scale = max_size/max(h,w). cv2.resize(fx=fy=im_scale) makes the image
    round(h*im_scale) x round(w*im_scale) (OpenCV: saturate_cast<int>, i.e.
    cvRound, half to even); the blob is padded up to a multiple of
    coarsest_stride, and im_info = float32 [padded_h, padded_w, im_scale].
    Returns dict(resized=(rh, rw), padded=(ph, pw), im_scale=float,
    im_info=float32[3])."""
    im_scale = float(target_size) / float(min(h, w))
    if np.round(im_scale * max(h, w)) > max_size:
        im_scale = float(max_size) / float(max(h, w))
    rh, rw = int(np.rint(h * im_scale)), int(np.rint(w * im_scale))
    s = float(coarsest_stride)
    ph, pw = int(np.ceil(rh / s) * s), int(np.ceil(rw / s) * s)
    return dict(resized=(rh, rw), padded=(ph, pw), im_scale=im_scale,
                im_info=np.array([ph, pw, im_scale], np.float32))


def resize_get_size_mrcnn(h, w, min_size=800, max_size=1333):
    """maskrcnn-benchmark `data/transforms/transforms.py: Resize.get_size`
    (Python floats): size = min_size, but if max/min * size > max_size then
    size = int(round(max_size * min / max)) (half to even); the short side
    becomes size and the long side int(size * long / short) (truncated), so
    the long side can exceed max_size by one. Returns (h, w)."""
    mn, mx = float(min(w, h)), float(max(w, h))
    size = min_size
    if mx / mn * size > max_size:
        size = int(round(max_size * mn / mx))
    if (w <= h and w == size) or (h <= w and h == size):
        return (h, w)
    if w < h:
        return (int(size * h / w), size)
    return (size, int(size * w / h))


def resize_shortest_edge_d2(h, w, short_edge_length=800, max_size=1333):
    """detectron2 `data/transforms/augmentation_impl.py:
    ResizeShortestEdge.get_output_shape` (Python floats): scale =
    short/min(h,w); the short side becomes short, the long scale*long; if the
    larger exceeds max_size both are multiplied by max_size/larger; then
    int(x + 0.5) (half up). Returns (h, w)."""
    size = short_edge_length * 1.0
    scale = size / min(h, w)
    newh, neww = (size, scale * w) if h < w else (scale * h, size)
    if max(newh, neww) > max_size:
        scale = max_size * 1.0 / max(newh, neww)
        newh, neww = newh * scale, neww * scale
    return (int(newh + 0.5), int(neww + 0.5))


# ---------------------------------------------------------------- core/test.py

def softmax(logits):
    """Row softmax in float32: exp(x - max) / sum (Caffe2's Softmax op)."""
    x = np.asarray(logits, F32)
    e = np.exp(x - x.max(1, keepdims=True))
    return e / e.sum(1, keepdims=True)


def im_detect_bbox_decode(rois, box_deltas, im_scale, im_h, im_w, weights=(10.0, 10.0, 5.0, 5.0)):
    """The decode of Detectron `core/test.py: im_detect_bbox` (FASTER_RCNN,
    BBOX_REG, class-specific): boxes = rois / im_scale (a float32 array by
    a Python float: float32), bbox_transform against those (original-image
    pixels), clip_tiled_boxes to the ORIGINAL image (im_h, im_w).
    rois [n,4] network-input pixels; box_deltas [n,4K]. Returns [n,4K]."""
    boxes = np.asarray(rois, F32) / F32(im_scale)
    pred = bbox_transform(boxes, box_deltas, weights)
    return clip_tiled_boxes(pred, (im_h, im_w))


def box_results_with_nms_and_limit(scores, boxes, score_thresh=0.05, nms_thresh=0.5, detections_per_im=100):
    """Detectron `core/test.py: box_results_with_nms_and_limit` (no soft NMS,
    no box voting). For each class j >= 1: rows with score > score_thresh,
    nms (>=, float32 threshold); then, if more than detections_per_im
    survive over all classes, keep those with score >= the
    detections_per_im-th highest score (ties at that score are all kept).
    Returns a list of (roi_index, class, score, box[4]) in class order, each
    class in ascending roi order (as Detectron stacks them)."""
    scores = np.asarray(scores, F32)
    boxes = np.asarray(boxes, F32)
    K = scores.shape[1]
    per_class = {}
    for j in range(1, K):
        inds = np.where(scores[:, j] > F32(score_thresh))[0]
        keep = nms(boxes[inds, 4 * j:4 * j + 4], scores[inds, j], nms_thresh)
        per_class[j] = inds[keep]
    all_scores = np.concatenate([scores[per_class[j], j] for j in range(1, K)])
    if detections_per_im > 0 and len(all_scores) > detections_per_im:
        image_thresh = np.sort(all_scores)[-detections_per_im]
        for j in range(1, K):
            per_class[j] = per_class[j][scores[per_class[j], j] >= image_thresh]
    return [(int(r), j, scores[r, j], boxes[r, 4 * j:4 * j + 4]) for j in range(1, K) for r in per_class[j]]


# ---------------------------------------------------------------- maskrcnn-benchmark

def remove_small_boxes_mrcnn(boxes, min_size):
    """maskrcnn-benchmark `structures/boxlist_ops.py: remove_small_boxes`
    (after `BoxList.convert("xywh")`, which adds TO_REMOVE = 1): keep boxes
    with x2 - x1 + 1 >= min_size and y2 - y1 + 1 >= min_size, float32, in
    resized-image pixels (its RPN clips to the unpadded image first)."""
    b = np.asarray(boxes, F32)
    t = F32(min_size)
    return ((b[:, 2] - b[:, 0] + F32(1)) >= t) & ((b[:, 3] - b[:, 1] + F32(1)) >= t)


# ---------------------------------------------------------------- detectron2

def nonempty_d2(boxes, threshold=0.0):
    """detectron2 `structures/boxes.py: Boxes.nonempty(threshold)` as
    `modeling/proposal_generator/proposal_utils.py: find_top_rpn_proposals`
    uses it (threshold = MIN_SIZE): (x2-x1) > t and (y2-y1) > t, float32."""
    b = np.asarray(boxes, F32)
    t = F32(threshold)
    return ((b[:, 2] - b[:, 0]) > t) & ((b[:, 3] - b[:, 1]) > t)


def paste_mask_detectron2(mask, box, img_h, img_w, threshold=0.5):
    """detectron2 `layers/mask_ops.py: paste_masks_in_image` on the CPU
    (one mask per chunk, `_do_paste_mask(..., skip_empty=True)`), using
    torch.nn.functional.grid_sample itself with detectron2's grid:
      window x0 = clamp(floor(bx1) - 1, min=0), x1 = clamp(ceil(bx2) + 1,
      max=img_w) (to int32), likewise y; grid at pixel centres
      (x + 0.5 - bx1) / (bx2 - bx1) * 2 - 1 (float32); grid_sample
      (bilinear, zeros padding, align_corners=False) of the M x M mask;
      binary = prob >= threshold. Pixels outside the window stay 0.
    Returns (prob float32 [img_h,img_w], binary bool [img_h,img_w]).
    Only for non-empty boxes (detectron2 drops empty ones first)."""
    import torch
    import torch.nn.functional as F

    m = torch.from_numpy(np.ascontiguousarray(mask, F32))[None, None]
    b = torch.from_numpy(np.asarray(box, F32).reshape(1, 4))
    x0_int, y0_int = torch.clamp(b.min(dim=0).values.floor()[:2] - 1, min=0).to(dtype=torch.int32)
    x1_int = torch.clamp(b[:, 2].max().ceil() + 1, max=img_w).to(dtype=torch.int32)
    y1_int = torch.clamp(b[:, 3].max().ceil() + 1, max=img_h).to(dtype=torch.int32)
    out = np.zeros((img_h, img_w), F32)
    if int(y1_int) <= int(y0_int) or int(x1_int) <= int(x0_int):
        return out, out >= F32(threshold)  # entirely outside (torch.arange would raise)
    x0, y0, x1, y1 = torch.split(b, 1, dim=1)
    img_y = torch.arange(y0_int, y1_int, dtype=torch.float32) + 0.5
    img_x = torch.arange(x0_int, x1_int, dtype=torch.float32) + 0.5
    img_y = (img_y - y0) / (y1 - y0) * 2 - 1
    img_x = (img_x - x0) / (x1 - x0) * 2 - 1
    gx = img_x[:, None, :].expand(1, img_y.size(1), img_x.size(1))
    gy = img_y[:, :, None].expand(1, img_y.size(1), img_x.size(1))
    grid = torch.stack([gx, gy], dim=3)
    win = F.grid_sample(m, grid, align_corners=False)[0, 0].numpy()
    ys, xs = int(y0_int), int(x0_int)
    out[ys:ys + win.shape[0], xs:xs + win.shape[1]] = win
    return out, out >= F32(threshold)
