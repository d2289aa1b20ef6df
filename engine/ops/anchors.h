/* Anchors: the per-cell anchor table of one FPN level and the anchor at a
 * feature-map position.
 *
 * A level's anchors are the A cell anchors (zero-centred boxes
 * [x1, y1, x2, y2], float[A*4]) shifted to every feature-map cell. Order
 * within a level is (y, x, a) with a fastest: anchor index
 * (y*W + x)*A + a, the same as torchvision's AnchorGenerator.grid_anchors
 * and the NHWC RPN head outputs (channel = a for objectness, a*4 + k for
 * deltas), so no reordering is needed.
 *
 * Cell tables (ratio = h / w; A = num_ratios * num_sizes, ratio-major:
 * for each ratio, for each size, except detectron2's below):
 *  - anchors_cell: torchvision `models/detection/anchor_utils.py:
 *    AnchorGenerator.generate_anchors`, in float32 exactly as torch:
 *    hr = sqrtf(r), wr = 1/hr, ws = wr*size, hs = hr*size,
 *    [-ws, -hs, ws, hs] / 2, rounded half-to-even (round_base).
 *    P2 (size 32): [-23,-11,23,11], [-16,-16,16,16], [-11,-23,11,23].
 *    Without round_base: detectron2's DefaultAnchorGenerator
 *    (generate_cell_anchors), w = sqrt(size^2/r), h = r*w in double,
 *    [-w/2, -h/2, w/2, h/2] stored as float32, not rounded, and
 *    size-major (for each size, for each ratio) as detectron2 orders them.
 *  - anchors_cell_detectron: Detectron `modeling/generate_anchors.py`
 *    (FPN: one size per level, stride = 2^level): ratio enumeration on a
 *    stride x stride base box with rounded w, h, then scaling by
 *    size/stride, inclusive (+1) coordinates centred on (stride-1)/2.
 *    P2: [-22,-10,25,13], [-14,-14,17,17], [-10,-22,13,25]. Detectron's
 *    grid shifts are the same x*stride, y*stride, so anchor_at serves both.
 *
 * No allocation; `out` must hold num_ratios*num_sizes*4 floats. */
#ifndef MR_ANCHORS_H
#define MR_ANCHORS_H

#include "core/hd.h"

/* Returns A = num_ratios * num_sizes (0 if either count is <= 0). */
int anchors_cell(const float *sizes, int num_sizes, const float *ratios, int num_ratios, int round_base, float *out);

/* Detectron's table for one level of the given stride. Returns A. */
int anchors_cell_detectron(float stride, const float *sizes, int num_sizes, const float *ratios, int num_ratios,
                           float *out);

/* Anchor a at feature cell (x, y): cell[a] + (sx, sy, sx, sy) with
 * sx = x*stride_w + offset*stride_w, sy likewise. offset is 0 for
 * torchvision and Detectron, detectron2's ANCHOR_GENERATOR.OFFSET
 * otherwise (0.0 by default). With integer strides and offset 0 the shift
 * is exact, as torchvision's int32 shifts converted to float. */
MR_HD static inline void anchor_at(const float *cell, int a, int x, int y, float stride_w, float stride_h, float offset,
                                   float *out)
{
    float sx = (float)x * stride_w + offset * stride_w;
    float sy = (float)y * stride_h + offset * stride_h;
    const float *c = cell + 4 * a;
    out[0] = sx + c[0];
    out[1] = sy + c[1];
    out[2] = sx + c[2];
    out[3] = sy + c[3];
}

#endif
