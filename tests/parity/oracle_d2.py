#!/usr/bin/python3
"""The torchvision oracle (oracle.py) patched to detectron2's inference conventions.

detectron2 (`COCO-InstanceSegmentation/mask_rcnn_R_101_FPN_3x.yaml`) differs from torchvision 0.14
in the conventions below. Each is patched into one model instance only: modules are replaced, or
the instance's class is swapped for a subclass defined here; nothing in torchvision's modules is
modified, so unpatched models built in the same process keep torchvision's behaviour.

| patch           | detectron2 (source file in facebookresearch/detectron2)            | torchvision 0.14                     |
|-----------------|---------------------------------------------------------------------|--------------------------------------|
| stride_in_1x1   | first block of res3..res5 strides in conv1 (1x1)                   | in conv2 (3x3)                       |
|                 | (`modeling/backbone/resnet.py: BottleneckBlock`, STRIDE_IN_1X1)     |                                      |
| pixel_norm      | BGR 0..255 minus (103.53, 116.28, 123.675), std 1                   | RGB 0..1, ImageNet mean/std          |
|                 | (`modeling/meta_arch/rcnn.py`, config PIXEL_MEAN/STD)               |                                      |
| anchors         | cell anchors [-w/2,-h/2,w/2,h/2], w = sqrt(s^2/r), h = r*w, not     | rounded cell anchors; stride =       |
|                 | rounded; grid stride 2^level, offset 0                              | padded size // grid (P6 of 320x480:  |
|                 | (`modeling/anchor_generator.py: DefaultAnchorGenerator`)            | 64 x 60)                             |
| rpn_min_size    | proposals kept if w > 0 and h > 0; NMS ranked by logits             | w >= 1e-3 and h >= 1e-3; sigmoid     |
|                 | (`modeling/proposal_generator/proposal_utils.py:                    |                                      |
|                 | find_top_rpn_proposals`, `structures/boxes.py: Boxes.nonempty`)     |                                      |
| aligned         | ROIAlignV2: roi_align(aligned=True)                                 | aligned=False                        |
| sampling_ratio  | POOLER_SAMPLING_RATIO 0 (adaptive ceil(roi/bin))                    | 2                                    |
| level_eps       | floor(4 + log2(sqrt(area)/224 + 1e-8))                              | floor(4 + log2(sqrt(area)/224)+1e-6) |
|                 | (`modeling/poolers.py: assign_boxes_to_levels`)                    |                                      |
| box_min_size    | no size filter on detections                                        | remove_small_boxes(1e-2)             |
|                 | (`modeling/roi_heads/fast_rcnn.py: fast_rcnn_inference_single_image`)|                                     |
| final_clip      | boxes scaled to the original image, clipped to it, empty ones       | scaled only                          |
|                 | dropped (`modeling/postprocessing.py: detector_postprocess`)        |                                      |
| paste           | grid_sample of the 28x28 mask at pixel centres of the float box,    | pad 1, expand box, integer window,   |
|                 | skip-empty window (`layers/mask_ops.py: _do_paste_mask`)            | bilinear resize                      |

What is not patched: detectron2 resizes the uint8 image with PIL (torchvision: F.interpolate on
floats); the parity test feeds an image whose size already equals the target size, so both
resizes are the identity (PIL returns a copy when the size is unchanged).

The engine reads BGR (config input.channel_order "BGR"), torchvision RGB: export_weights_bgr()
reverses the stem conv's input channels, so both compute the same first convolution.

Library:
    PATCHES                                   every patch name, in the order above
    build_model(seed, min_size, max_size, patches=PATCHES)   oracle.build_model + patch()
    patch(model, patches=PATCHES)             apply the named patches to one model
    export_weights_bgr(model, path)           canonical safetensors, stem conv channels reversed
    d2_cell_anchors(size, ratios)             detectron2's cell anchors (float64 math, float32 out)
    paste_masks_d2(probs, boxes, h, w)        detectron2's paste, soft probabilities [N,h,w]
"""

import math
import os
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torchvision.models.detection.anchor_utils import AnchorGenerator
from torchvision.models.detection.roi_heads import RoIHeads
from torchvision.models.detection.rpn import RegionProposalNetwork
from torchvision.models.detection.transform import GeneralizedRCNNTransform
from torchvision.ops import boxes as box_ops
from torchvision.ops import roi_align

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
import oracle  # noqa: E402

PATCHES = ("stride_in_1x1", "pixel_norm", "anchors", "rpn_min_size", "aligned", "sampling_ratio", "level_eps",
           "box_min_size", "final_clip", "paste")

D2_PIXEL_MEAN_BGR = (103.53, 116.28, 123.675)
ANCHOR_SIZES = (32, 64, 128, 256, 512)
ASPECT_RATIOS = (0.5, 1.0, 2.0)


# ---------------------------------------------------------------------------------------
# Anchors
# ---------------------------------------------------------------------------------------

def d2_cell_anchors(size, ratios=ASPECT_RATIOS):
    """detectron2 DefaultAnchorGenerator.generate_cell_anchors for one size: for each ratio
    r = h/w, w = sqrt(size^2 / r), h = r * w, box [-w/2, -h/2, w/2, h/2]; Python floats,
    then a float32 tensor [len(ratios), 4] (ratio order, as the RPN head's channels)."""
    rows = []
    for r in ratios:
        w = math.sqrt(float(size) ** 2 / r)
        h = r * w
        rows.append([-w / 2.0, -h / 2.0, w / 2.0, h / 2.0])
    return torch.tensor(rows, dtype=torch.float32)


class D2AnchorGenerator(AnchorGenerator):
    """Unrounded detectron2 cell anchors shifted by x * 2^level, y * 2^level (offset 0).
    torchvision's grid_anchors does the shifting (int shifts, exact in float32, as detectron2's
    float32 arange); only the cell anchors and the strides change."""

    def __init__(self, level_strides=(4, 8, 16, 32, 64), sizes=ANCHOR_SIZES, ratios=ASPECT_RATIOS):
        super().__init__(tuple((s,) for s in sizes), (tuple(ratios),) * len(sizes))
        self.cell_anchors = [d2_cell_anchors(s, ratios) for s in sizes]
        self.level_strides = tuple(level_strides)

    def forward(self, image_list, feature_maps):
        grid_sizes = [f.shape[-2:] for f in feature_maps]
        assert len(grid_sizes) == len(self.level_strides)
        strides = [[torch.tensor(s, dtype=torch.int64), torch.tensor(s, dtype=torch.int64)]
                   for s in self.level_strides]
        self.set_cell_anchors(feature_maps[0].dtype, feature_maps[0].device)
        per_level = self.grid_anchors(grid_sizes, strides)
        return [torch.cat(per_level) for _ in image_list.image_sizes]


# ---------------------------------------------------------------------------------------
# RPN proposal selection
# ---------------------------------------------------------------------------------------

class D2RPN(RegionProposalNetwork):
    """filter_proposals as detectron2's find_top_rpn_proposals at test time: per level the top
    pre_nms_top_n anchors by logit (torchvision's _get_top_n_idx does the same topk), drop
    non-finite boxes/logits, clip to the image, keep w > min_size and h > min_size
    (Boxes.nonempty, MIN_SIZE 0), NMS per level ranked by the logits, the first post_nms_top_n.
    Scores are returned as sigmoid(logit), as torchvision and our engine report them."""

    def filter_proposals(self, proposals, objectness, image_shapes, num_anchors_per_level):
        n = proposals.shape[0]
        logits = objectness.detach().reshape(n, -1)
        levels = torch.cat([torch.full((k,), i, dtype=torch.int64) for i, k in enumerate(num_anchors_per_level)])
        levels = levels.reshape(1, -1).expand_as(logits)
        top = self._get_top_n_idx(logits, num_anchors_per_level)
        batch = torch.arange(n)[:, None]
        logits, levels, proposals = logits[batch, top], levels[batch, top], proposals[batch, top]
        out_boxes, out_scores = [], []
        for boxes, lg, lvl, shape in zip(proposals, logits, levels, image_shapes):
            ok = torch.isfinite(boxes).all(dim=1) & torch.isfinite(lg)
            boxes, lg, lvl = boxes[ok], lg[ok], lvl[ok]
            boxes = box_ops.clip_boxes_to_image(boxes, shape)
            w, h = boxes[:, 2] - boxes[:, 0], boxes[:, 3] - boxes[:, 1]
            ok = (w > self.min_size) & (h > self.min_size)
            boxes, lg, lvl = boxes[ok], lg[ok], lvl[ok]
            keep = box_ops.batched_nms(boxes, lg, lvl, self.nms_thresh)[: self.post_nms_top_n()]
            out_boxes.append(boxes[keep])
            out_scores.append(torch.sigmoid(lg[keep]))
        return out_boxes, out_scores


# ---------------------------------------------------------------------------------------
# RoI pooling
# ---------------------------------------------------------------------------------------

class D2ROIPooler(nn.Module):
    """detectron2 ROIPooler over P2..P5: level = floor(canonical_level + log2(sqrt(area) /
    canonical_size + eps)) clamped to [2, 5] (eps_inside_log; torchvision adds eps after the
    log2), then torchvision's roi_align at scale 2^-level with the given sampling_ratio and
    aligned flag (detectron2's ROIAlign calls the same op). map_levels() returns 0-based levels
    like torchvision's LevelMapper, so oracle.run_staged can dump them."""

    def __init__(self, featmap_names, output_size, sampling_ratio=0, aligned=True, eps=1e-8, eps_inside_log=True,
                 canonical_size=224, canonical_level=4, min_level=2, max_level=5):
        super().__init__()
        self.featmap_names = list(featmap_names)
        self.output_size = (output_size, output_size)
        self.sampling_ratio, self.aligned = sampling_ratio, aligned
        self.eps, self.eps_inside_log = eps, eps_inside_log
        self.canonical_size, self.canonical_level = canonical_size, canonical_level
        self.min_level, self.max_level = min_level, max_level
        assert len(self.featmap_names) == max_level - min_level + 1

    def map_levels(self, boxes):
        s = torch.sqrt(torch.cat([box_ops.box_area(b) for b in boxes]))
        if self.eps_inside_log:
            lvl = torch.floor(self.canonical_level + torch.log2(s / self.canonical_size + self.eps))
        else:
            lvl = torch.floor(self.canonical_level + torch.log2(s / self.canonical_size) + self.eps)
        lvl = torch.clamp(lvl, min=self.min_level, max=self.max_level)
        return lvl.to(torch.int64) - self.min_level

    def forward(self, x, boxes, image_shapes):
        feats = [x[k] for k in self.featmap_names]
        rois = torch.cat([torch.cat([torch.full_like(b[:, :1], i), b], dim=1) for i, b in enumerate(boxes)])
        levels = self.map_levels(boxes)
        out = torch.zeros((len(rois), feats[0].shape[1]) + self.output_size, dtype=feats[0].dtype)
        for i, f in enumerate(feats):
            idx = torch.where(levels == i)[0]
            out[idx] = roi_align(f, rois[idx], self.output_size, spatial_scale=2.0 ** -(self.min_level + i),
                                 sampling_ratio=self.sampling_ratio, aligned=self.aligned)
        return out


# ---------------------------------------------------------------------------------------
# Box post-processing
# ---------------------------------------------------------------------------------------

class D2RoIHeads(RoIHeads):
    """postprocess_detections as detectron2's fast_rcnn_inference_single_image: softmax, decode
    the class-specific deltas, clip to the image, (RoI, class) pairs with score > score_thresh in
    RoI-major order, NMS per class (class ids 0..79 as detectron2 numbers them), the first
    detections_per_img. No size filter unless box_min_size is set (torchvision: 1e-2).
    Background is column 0 here (torchvision layout); detectron2 has it last."""

    box_min_size = None

    def postprocess_detections(self, class_logits, box_regression, proposals, image_shapes):
        per_image = [len(p) for p in proposals]
        pred_boxes = self.box_coder.decode(box_regression, proposals).split(per_image, 0)
        pred_scores = F.softmax(class_logits, -1).split(per_image, 0)
        all_boxes, all_scores, all_labels = [], [], []
        for boxes, scores, shape in zip(pred_boxes, pred_scores, image_shapes):
            ok = torch.isfinite(boxes).all(dim=2).all(dim=1) & torch.isfinite(scores).all(dim=1)
            boxes, scores = boxes[ok], scores[ok]
            boxes = box_ops.clip_boxes_to_image(boxes, shape)[:, 1:]
            scores = scores[:, 1:]
            mask = scores > self.score_thresh
            inds = mask.nonzero()
            boxes, scores, cls = boxes[mask], scores[mask], inds[:, 1]
            if self.box_min_size is not None:
                keep = box_ops.remove_small_boxes(boxes, self.box_min_size)
                boxes, scores, cls = boxes[keep], scores[keep], cls[keep]
            keep = box_ops.batched_nms(boxes, scores, cls, self.nms_thresh)[: self.detections_per_img]
            all_boxes.append(boxes[keep])
            all_scores.append(scores[keep])
            all_labels.append(cls[keep] + 1)
        return all_boxes, all_scores, all_labels


# ---------------------------------------------------------------------------------------
# Final boxes and the mask paste
# ---------------------------------------------------------------------------------------

def paste_masks_d2(probs, boxes, img_h, img_w):
    """detectron2's paste (layers/mask_ops.py: paste_masks_in_image, _do_paste_mask) as it runs
    on the CPU, one box at a time with the skip-empty window, without the threshold: returns the
    pasted probabilities [N, img_h, img_w] (detectron2 binarises them with >= 0.5).
      window: x from max(floor(x1) - 1, 0) to min(ceil(x2) + 1, img_w) (exclusive), y likewise;
              pixels outside it stay 0
      grid:   pixel centre (x + 0.5) mapped to (x + 0.5 - x1) / (x2 - x1) * 2 - 1, float32
      value:  F.grid_sample(mask, grid, bilinear, zeros padding, align_corners=False)
    probs: [N, M, M] or [N, 1, M, M]; boxes [N, 4] in image pixels."""
    probs = probs.reshape(len(probs), 1, probs.shape[-2], probs.shape[-1]).float()
    out = torch.zeros((len(probs), img_h, img_w), dtype=torch.float32)
    for i in range(len(probs)):
        box = boxes[i:i + 1].float()
        x0i, y0i = torch.clamp(box.min(dim=0).values.floor()[:2] - 1, min=0).to(torch.int32).tolist()
        x1i = int(torch.clamp(box[:, 2].max().ceil() + 1, max=img_w))
        y1i = int(torch.clamp(box[:, 3].max().ceil() + 1, max=img_h))
        if x1i <= x0i or y1i <= y0i:
            continue
        bx0, by0, bx1, by1 = torch.split(box, 1, dim=1)
        ys = (torch.arange(y0i, y1i, dtype=torch.float32) + 0.5 - by0) / (by1 - by0) * 2 - 1
        xs = (torch.arange(x0i, x1i, dtype=torch.float32) + 0.5 - bx0) / (bx1 - bx0) * 2 - 1
        gx = xs[:, None, :].expand(1, ys.shape[1], xs.shape[1])
        gy = ys[:, :, None].expand(1, ys.shape[1], xs.shape[1])
        grid = torch.stack([gx, gy], dim=3)
        out[i, y0i:y1i, x0i:x1i] = F.grid_sample(probs[i:i + 1], grid, align_corners=False)[0, 0]
    return out


class D2Transform(GeneralizedRCNNTransform):
    """postprocess as detectron2's detector_postprocess: boxes scaled by original / network-input
    size per axis (Boxes.scale with Python-float factors), clipped to the original image and
    empty ones (x2 <= x1 or y2 <= y1) dropped (final_clip); masks pasted with paste_masks_d2
    (paste), returned as soft probabilities [N, 1, H, W] like torchvision's."""

    d2_final_clip = True
    d2_paste = True

    def postprocess(self, result, image_shapes, original_image_sizes):
        for i, (pred, (ih, iw), (oh, ow)) in enumerate(zip(result, image_shapes, original_image_sizes)):
            boxes = pred["boxes"].clone()
            boxes[:, 0::2] *= ow / iw
            boxes[:, 1::2] *= oh / ih
            if self.d2_final_clip:
                boxes = box_ops.clip_boxes_to_image(boxes, (oh, ow))
                keep = (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
                pred = {k: v[keep] for k, v in pred.items()}
                boxes = boxes[keep]
            out = dict(pred, boxes=boxes)
            if "masks" in pred:
                if self.d2_paste:
                    out["masks"] = paste_masks_d2(pred["masks"], boxes, oh, ow)[:, None]
                else:
                    from torchvision.models.detection.roi_heads import paste_masks_in_image
                    out["masks"] = paste_masks_in_image(pred["masks"], boxes, (oh, ow))
            result[i] = out
        return result


# ---------------------------------------------------------------------------------------
# Patching a model
# ---------------------------------------------------------------------------------------

def patch(model, patches=PATCHES):
    """Apply the named detectron2 conventions to this model instance (in place; returns it)."""
    patches = set(patches)
    unknown = patches - set(PATCHES)
    assert not unknown, f"unknown patches {sorted(unknown)}"
    body = model.backbone.body
    if "stride_in_1x1" in patches:
        for layer in (body.layer2, body.layer3, body.layer4):
            layer[0].conv1.stride, layer[0].conv2.stride = (2, 2), (1, 1)
    if "pixel_norm" in patches:
        # RGB order inside torchvision; the input is x / 255, so mean / 255 and std 1 / 255.
        model.transform.image_mean = [m / 255.0 for m in D2_PIXEL_MEAN_BGR[::-1]]
        model.transform.image_std = [1.0 / 255.0] * 3
    if "anchors" in patches:
        model.rpn.anchor_generator = D2AnchorGenerator()
    if "rpn_min_size" in patches:
        model.rpn.__class__ = D2RPN
        model.rpn.min_size = 0.0
    rh = model.roi_heads
    pooler = dict(sampling_ratio=0 if "sampling_ratio" in patches else 2, aligned="aligned" in patches,
                  eps=1e-8 if "level_eps" in patches else 1e-6, eps_inside_log="level_eps" in patches)
    if patches & {"aligned", "sampling_ratio", "level_eps"}:
        rh.box_roi_pool = D2ROIPooler(["0", "1", "2", "3"], 7, **pooler)
        rh.mask_roi_pool = D2ROIPooler(["0", "1", "2", "3"], 14, **pooler)
    rh.__class__ = D2RoIHeads
    rh.box_min_size = None if "box_min_size" in patches else 1e-2
    model.transform.__class__ = D2Transform
    model.transform.d2_final_clip = "final_clip" in patches
    model.transform.d2_paste = "paste" in patches
    return model


# oracle.md's init is calibrated for torchvision's input, (x/255 - mean) / std with std ~0.226;
# detectron2's input, x - 255*mean, is 255*0.226 times larger. A detectron2-trained stem conv
# has correspondingly smaller weights: dividing ours by this keeps the activations (and the RPN
# and class scores) in the unsaturated range oracle.md measured, instead of sigmoid and
# softmax scores tied at 1.0.
STEM_INPUT_SCALE = 255.0 * 0.226


@torch.no_grad()
def build_model(seed, min_size=320, max_size=512, patches=PATCHES, bg_bias=0.0, arch=None, num_classes=81):
    """oracle.build_model (seeded init of oracle.md §2; shapes do not depend on the strides;
    `arch`: oracle.ARCH_* for the strong baselines), the stem conv divided by STEM_INPUT_SCALE
    (whatever the patches: the weights stay those the engine gets), and the named patches
    applied."""
    model = oracle.build_model(seed, num_classes=num_classes, min_size=min_size, max_size=max_size, bg_bias=bg_bias,
                               arch=arch)
    model.backbone.body.conv1.weight /= STEM_INPUT_SCALE
    return patch(model, patches)


def export_weights_bgr(model, path):
    """Canonical safetensors for the engine's BGR input: the stem conv's input channels reversed
    (torchvision's conv1 sees RGB)."""
    state = oracle.state_dict_numpy(model)
    w = state["backbone.body.conv1.weight"]
    state["backbone.body.conv1.weight"] = np.ascontiguousarray(w[:, ::-1])
    tensors, info = oracle.convert.convert_state_dict(state, "torchvision", "f32")
    oracle.safetensors_io.save(tensors, path,
                               oracle.convert.make_metadata(info, "torchvision", "in-memory:oracle_d2.py"))
    return info


@torch.no_grad()
def run_mask_stage(model, fpn, boxes, scores, labels, image_hw):
    """The mask head and the final step of a patched model on given detections (network-input
    pixels; the image is not resized): fpn = [P2..P6] NCHW arrays. Returns numpy
    mask_probs [N,28,28] and the final boxes, scores, labels and pasted probabilities [D,H,W]."""
    from collections import OrderedDict
    from torchvision.models.detection.roi_heads import maskrcnn_inference
    feats = OrderedDict((k, torch.from_numpy(np.ascontiguousarray(f)))
                        for k, f in zip(["0", "1", "2", "3", "pool"], fpn))
    rh = model.roi_heads
    b = torch.from_numpy(np.ascontiguousarray(boxes, np.float32))
    lab = torch.from_numpy(np.asarray(labels)).long()
    probs = maskrcnn_inference(rh.mask_predictor(rh.mask_head(rh.mask_roi_pool(feats, [b], [image_hw]))), [lab])[0]
    res = model.transform.postprocess(
        [dict(boxes=b, scores=torch.from_numpy(np.asarray(scores, np.float32)), labels=lab, masks=probs)],
        [image_hw], [image_hw])[0]
    return dict(mask_probs=probs[:, 0].numpy(), final_boxes=res["boxes"].numpy(), final_scores=res["scores"].numpy(),
                final_labels=res["labels"].numpy(), final_masks=res["masks"][:, 0].numpy())
