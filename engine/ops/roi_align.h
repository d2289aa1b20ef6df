/* RoIAlign (single level and FPN multi-level) and the FPN level mapper.
 *
 * Inputs: a feature map NHWC [1,H,W,C] float (batch 0 is used; rois carry
 * no batch index), rois [n,4] = [x1,y1,x2,y2] in input-image pixels.
 * Output: [n, out_h, out_w, C] NHWC float, each roi's bins row-major.
 *
 * Reference: torchvision 0.14 `csrc/ops/cpu/roi_align_kernel.cpp` +
 * `roi_align_common.h` (pre_calc_for_bilinear_interpolate). For each roi:
 *   offset = aligned ? 0.5 : 0
 *   start = roi * spatial_scale - offset, size = end - start
 *   legacy (aligned = 0): size = max(size, 1)  (malformed rois become 1x1)
 *   bin = size / out, grid = sampling_ratio > 0 ? sampling_ratio
 *                                               : ceil(size / out)  (adaptive)
 *   sample (iy, ix) of bin (ph, pw):
 *     y = start_h + ph*bin_h + (iy + 0.5)*bin_h / grid_h   (x likewise)
 *   bilinear tap (roi_align_axis): y < -1 or y > H -> contributes 0;
 *     y <= 0 -> 0; lo = (int)y; lo >= H-1 -> lo = hi = H-1, y = lo;
 *     l = y - lo, h = 1 - l; w1 = hy*hx, w2 = hy*lx, w3 = ly*hx, w4 = ly*lx
 *   out = (sum over samples, in (iy, ix) order, of
 *          ((w1*v1 + w2*v2) + w3*v3) + w4*v4) / max(grid_h*grid_w, 1)
 * The CPU code evaluates exactly these float32 operations in this order per
 * channel, so it is bitwise equal to torchvision's CPU kernel (which is
 * built without FMA contraction). A CUDA build must keep the same order and
 * avoid contracting into FMAs (nvcc contracts by default: -fmad=false or
 * __fmul_rn/__fadd_rn) to stay bitwise equal; otherwise expect ~1 ulp.
 * Differences by design: a NaN sample coordinate contributes 0 (torchvision
 * 0.14 casts it to int, undefined), and the adaptive grid is capped at
 * MR_ROI_ALIGN_MAX_GRID per axis (torchvision has no cap).
 *
 * Conventions: torchvision and Detectron: aligned = 0, sampling_ratio = 2;
 * detectron2: aligned = 1, sampling_ratio = 0. */
#ifndef MR_ROI_ALIGN_H
#define MR_ROI_ALIGN_H

#include "ops/box_coder.h"
#include "core/hd.h"
#include "core/tensor.h"

#include <math.h>

#define MR_ROI_ALIGN_MAX_GRID 1024

typedef struct {
    int out_h, out_w;   /* 7x7 box head, 14x14 mask head */
    int sampling_ratio; /* > 0: fixed samples per bin axis; <= 0: adaptive ceil(size/out) */
    int aligned;        /* 1: -0.5 pixel shift (ROIAlignV2); 0: legacy, roi forced >= 1x1 */
    float spatial_scale; /* feature pixels per image pixel (1/stride) */
} mr_roi_align_params;

/* Per-roi sampling geometry, shared by every bin and channel. */
typedef struct {
    float start_h, start_w;
    float bin_h, bin_w;
    int grid_h, grid_w;
    float count; /* divisor: max(grid_h*grid_w, 1) */
} mr_roi_geom;

MR_HD static inline int roi_align_grid(int sampling_ratio, float size, int out)
{
    if (sampling_ratio > 0) return sampling_ratio;
    float g = ceilf(size / (float)out);
    if (!(g > 0.0f)) return 0; /* empty or negative roi, NaN: no samples */
    if (g > (float)MR_ROI_ALIGN_MAX_GRID) return MR_ROI_ALIGN_MAX_GRID;
    return (int)g;
}

MR_HD static inline mr_roi_geom roi_align_geom(const mr_roi_align_params *p, const float *roi, float spatial_scale)
{
    mr_roi_geom g;
    float offset = p->aligned ? 0.5f : 0.0f;
    g.start_w = roi[0] * spatial_scale - offset;
    g.start_h = roi[1] * spatial_scale - offset;
    float end_w = roi[2] * spatial_scale - offset;
    float end_h = roi[3] * spatial_scale - offset;
    float rw = end_w - g.start_w;
    float rh = end_h - g.start_h;
    if (!p->aligned) {
        /* std::max(size, 1): NaN stays NaN */
        if (rw < 1.0f) rw = 1.0f;
        if (rh < 1.0f) rh = 1.0f;
    }
    g.bin_h = rh / (float)p->out_h;
    g.bin_w = rw / (float)p->out_w;
    g.grid_h = roi_align_grid(p->sampling_ratio, rh, p->out_h);
    g.grid_w = roi_align_grid(p->sampling_ratio, rw, p->out_w);
    int cnt = g.grid_h * g.grid_w;
    g.count = (float)(cnt > 1 ? cnt : 1);
    return g;
}

/* Sample coordinate i (0..grid-1) of bin b along one axis. */
MR_HD static inline float roi_align_coord(float start, int b, float bin, int i, int grid)
{
    return start + (float)b * bin + ((float)i + 0.5f) * bin / (float)grid;
}

/* Bilinear tap along one axis of length `size`. Returns 0 when the sample
 * lies outside [-1, size] (it then contributes nothing), else 1 with the
 * low/high indices and the fraction l towards hi. */
MR_HD static inline int roi_align_axis(float v, int size, int *lo, int *hi, float *l)
{
    if (!(v >= -1.0f && v <= (float)size)) return 0;
    if (v <= 0.0f) v = 0.0f;
    int a = (int)v, b;
    if (a >= size - 1) {
        a = b = size - 1;
        v = (float)a;
    } else {
        b = a + 1;
    }
    *lo = a;
    *hi = b;
    *l = v - (float)a;
    return 1;
}

/* FPN level mapping (torchvision `ops/poolers.py: LevelMapper`):
 *   s = sqrtf(area)                          area with +1 when plus_one
 *   eps_inside_log = 0 (torchvision):
 *     lvl = floorf(canonical_level + log2f(s / canonical_size) + eps)   eps 1e-6
 *   eps_inside_log = 1 (Detectron `modeling/FPN.py: map_rois_to_fpn_levels`,
 *                       plus_one = 1, eps 1e-6; detectron2
 *                       `modeling/poolers.py: assign_boxes_to_levels`,
 *                       plus_one = 0, eps 1e-8):
 *     lvl = floorf(canonical_level + log2f(s / canonical_size + eps))
 *   clamped to [min_level, max_level]; returns the absolute level.
 * float32 throughout, as torch. torch's vectorised log2 differs from
 * log2f by one ulp for ~1% of inputs, which can move a box whose
 * level is within ~1e-7 of an integer (not the exact powers of two:
 * sqrt(area) = 224 maps to 4, 112 to 3, 448 to 5). A NaN area maps to
 * min_level (torch: undefined int cast). */
typedef struct {
    int min_level, max_level; /* 2, 5 */
    int canonical_size;       /* 224 */
    int canonical_level;      /* 4 */
    float eps;                /* 1e-6 (torchvision, Detectron), 1e-8 (detectron2) */
    int plus_one;             /* Detectron: area of +1 boxes */
    int eps_inside_log;       /* 0: torchvision; 1: Detectron, detectron2 */
} mr_level_map;

MR_HD static inline int roi_level(const mr_level_map *m, const float *box)
{
    float s = sqrtf(box_area(box, m->plus_one));
    float r = s / (float)m->canonical_size;
    float lvl;
    if (m->eps_inside_log)
        lvl = floorf((float)m->canonical_level + log2f(r + m->eps));
    else
        lvl = floorf((float)m->canonical_level + log2f(r) + m->eps);
    if (!(lvl >= (float)m->min_level)) return m->min_level;
    if (lvl > (float)m->max_level) return m->max_level;
    return (int)lvl;
}

/* Single level. OpenMP over rois; n = 0 is a no-op. */
void roi_align_cpu(const mr_roi_align_params *p, const mr_tensor *feat, const float *rois, int n, float *out);

/* FPN: roi i is sampled from levels[roi_level(map, roi) - map->min_level]
 * with spatial_scale = 2^-level (base->spatial_scale is ignored; this is
 * what torchvision's MultiScaleRoIAlign infers when the padded image is a
 * multiple of the coarsest stride). levels[] holds max_level-min_level+1
 * feature maps with the same C. roi_levels_out (may be NULL) receives each
 * roi's absolute level. */
void roi_align_multilevel_cpu(const mr_roi_align_params *base, const mr_level_map *map,
                              const mr_tensor *const *levels, const float *rois, int n, int *roi_levels_out,
                              float *out);

/* The same, with level l in nChw<B>c ([1][C/B][H][W][B], C a multiple of
 * B) where level_blocked[l] = B is positive (NULL: all NHWC), the output
 * NHWC either way and bitwise the same; or, where level_blocked[l] is
 * ROI_ALIGN_LEVEL_BF16, NHWC bf16 values (the upper halves of fp32s, as
 * uint16), each tap widened to fp32 and then the same operations; or
 * ROI_ALIGN_LEVEL_S8, NHWC int8 steps of level_step[l] (the value is
 * q x step), each tap widened so and then the same operations.
 * level_step may be NULL where no level is s8. */
#define ROI_ALIGN_LEVEL_BF16 (-1)
#define ROI_ALIGN_LEVEL_S8 (-2)
void roi_align_multilevel_layout_cpu(const mr_roi_align_params *base, const mr_level_map *map,
                                     const mr_tensor *const *levels, const int *level_blocked, const float *level_step,
                                     const float *rois, int n, int *roi_levels_out, float *out);

#endif
