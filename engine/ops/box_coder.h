/* Box coder and box geometry: decode regression deltas against reference
 * boxes, clip boxes to an image, box area and IoU.
 *
 * Boxes are float[4] = [x1, y1, x2, y2] in pixels of whichever image the
 * caller works in (resized or original). Deltas are float[4] =
 * [dx, dy, dw, dh] as predicted by the RPN / box head for one box.
 *
 * Reference: torchvision 0.14 `models/detection/_utils.py: BoxCoder.decode_single`,
 * `ops/boxes.py: clip_boxes_to_image`, `csrc/ops/cpu/nms_kernel.cpp` (IoU).
 * Every function computes in float32 in the same operation order as those
 * (torch runs each elementwise op as one float32 op), so results are
 * bitwise equal except where torch's vectorised expf differs from the C
 * library's by 1 ulp (see box_decode).
 *
 * `plus_one` selects the Detectron (Caffe2) convention, where a box covers
 * the pixels x1..x2 inclusive: width = x2 - x1 + 1 (Detectron
 * `utils/boxes.py: bbox_transform, clip_tiled_boxes, boxes_area`,
 * `utils/cython_nms.pyx`). torchvision and detectron2 use plus_one = 0.
 *
 * Everything here is MR_HD: the CUDA kernels call the same functions. No
 * compound literals, no `restrict`, float math functions only. */
#ifndef MR_BOX_CODER_H
#define MR_BOX_CODER_H

#include "core/hd.h"

#include <math.h>

typedef struct {
    float weights[4]; /* (wx, wy, ww, wh): RPN (1,1,1,1), box head (10,10,5,5) */
    float clip;       /* max of dw, dh before exp: (float)log(1000.0 / 16) in every zoo */
    int plus_one;     /* 1: Detectron widths (x2 - x1 + 1) and x2 = ctr + w/2 - 1 */
    int clip_both_sides; /* 1: also -clip <= dw, dh (mmdetection's delta2bbox clamps both sides) */
} mr_box_coder;

/* Decodes one box. box[4] is the reference (anchor or proposal), delta[4]
 * the regression output; out[4] receives the decoded box (out may alias
 * neither input).
 *
 *   w  = x2 - x1 (+1)            cx = x1 + 0.5*w
 *   dx = delta[0] / wx ...       dw = min(delta[2] / ww, clip) (NaN stays NaN),
 *                                with clip_both_sides also max(dw, -clip)
 *   pcx = dx*w + cx              pw = expf(dw)*w
 *   out = [pcx - 0.5*pw, pcy - 0.5*ph, pcx + 0.5*pw (-1), pcy + 0.5*ph (-1)]
 *
 * Float32 parity with torchvision: all ops match in order; torch's CPU exp
 * is a vectorised (SLEEF-style) expf that differs from glibc's expf by one
 * ulp for roughly 10% of inputs, so pw, ph (and the corners) can differ by
 * about one ulp. Nothing else differs. */
MR_HD static inline void box_decode(const mr_box_coder *c, const float *box, const float *delta, float *out)
{
    float w = box[2] - box[0];
    float h = box[3] - box[1];
    if (c->plus_one) {
        w = w + 1.0f;
        h = h + 1.0f;
    }
    float cx = box[0] + 0.5f * w;
    float cy = box[1] + 0.5f * h;

    float dx = delta[0] / c->weights[0];
    float dy = delta[1] / c->weights[1];
    float dw = delta[2] / c->weights[2];
    float dh = delta[3] / c->weights[3];
    /* torch.clamp(max=clip): only values above clip change; NaN passes */
    if (dw > c->clip) dw = c->clip;
    if (dh > c->clip) dh = c->clip;
    if (c->clip_both_sides) {
        /* mmdetection: dwh.clamp(min=-max_ratio, max=max_ratio); the same
         * float, as its max_ratio is |log(wh_ratio_clip)| = log(1000/16) */
        if (dw < -c->clip) dw = -c->clip;
        if (dh < -c->clip) dh = -c->clip;
    }

    float pcx = dx * w + cx;
    float pcy = dy * h + cy;
    float pw = expf(dw) * w;
    float ph = expf(dh) * h;
    float hw = 0.5f * pw;
    float hh = 0.5f * ph;

    out[0] = pcx - hw;
    out[1] = pcy - hh;
    out[2] = pcx + hw;
    out[3] = pcy + hh;
    if (c->plus_one) {
        /* Detectron: x2 = ctr + 0.5*w - 1, in that order */
        out[2] = out[2] - 1.0f;
        out[3] = out[3] - 1.0f;
    }
}

/* Clamps box[4] in place to [0, W] x [0, H] (torchvision
 * clip_boxes_to_image) or, with plus_one, to [0, W-1] x [0, H-1] (Detectron
 * clip_tiled_boxes). img_h, img_w are the image size in pixels. NaN
 * coordinates stay NaN, as with torch.clamp. */
MR_HD static inline void box_clip(float *box, float img_h, float img_w, int plus_one)
{
    float xmax = plus_one ? img_w - 1.0f : img_w;
    float ymax = plus_one ? img_h - 1.0f : img_h;
    for (int k = 0; k < 4; k += 2) {
        if (box[k] < 0.0f) box[k] = 0.0f;
        if (box[k] > xmax) box[k] = xmax;
        if (box[k + 1] < 0.0f) box[k + 1] = 0.0f;
        if (box[k + 1] > ymax) box[k + 1] = ymax;
    }
}

/* (x2 - x1) * (y2 - y1), or (x2 - x1 + 1) * (y2 - y1 + 1) with plus_one.
 * No clamping: a box with x2 < x1 has a negative (or, with both sides
 * negative, positive) area, exactly as torchvision's box_area. */
MR_HD static inline float box_area(const float *b, int plus_one)
{
    /* adding 0.0f is exact, so one expression serves both conventions and
     * the NMS loop stays branch-free (vectorisable) */
    const float one = plus_one ? 1.0f : 0.0f;
    return (b[2] - b[0] + one) * (b[3] - b[1] + one);
}

/* IoU from precomputed areas (the NMS loops precompute them, as
 * torchvision's kernel does). Operation order of nms_kernel.cpp:
 *   iw = max(0, min(ax2,bx2) - max(ax1,bx1) (+1)), ih likewise,
 *   inter = iw*ih, iou = inter / (area_a + area_b - inter).
 * `a` is the kept (higher-scored) box. A zero union gives NaN or inf, as in
 * torchvision; NaN never exceeds a threshold. */
MR_HD static inline float box_iou_coords(float ax1, float ay1, float ax2, float ay2, float area_a, float bx1,
                                         float by1, float bx2, float by2, float area_b, int plus_one)
{
    float xx1 = ax1 < bx1 ? bx1 : ax1;
    float yy1 = ay1 < by1 ? by1 : ay1;
    float xx2 = bx2 < ax2 ? bx2 : ax2;
    float yy2 = by2 < ay2 ? by2 : ay2;
    const float one = plus_one ? 1.0f : 0.0f;
    float iw = xx2 - xx1 + one;
    float ih = yy2 - yy1 + one;
    /* std::max(0, v): a NaN side becomes 0, as in the reference */
    iw = 0.0f < iw ? iw : 0.0f;
    ih = 0.0f < ih ? ih : 0.0f;
    float inter = iw * ih;
    return inter / (area_a + area_b - inter);
}

MR_HD static inline float box_iou_areas(const float *a, const float *b, float area_a, float area_b, int plus_one)
{
    return box_iou_coords(a[0], a[1], a[2], a[3], area_a, b[0], b[1], b[2], b[3], area_b, plus_one);
}

MR_HD static inline float box_iou(const float *a, const float *b, int plus_one)
{
    return box_iou_areas(a, b, box_area(a, plus_one), box_area(b, plus_one), plus_one);
}

#endif
