/* Paste one M x M mask probability map into the image (torchvision rule).
 *
 * Inputs: mask float[M*M] row-major (sigmoid probabilities of the
 * predicted class), box float[4] [x1,y1,x2,y2] in original-image pixels
 * (the final detection box), the image size img_h x img_w.
 * Outputs: only the detection's window (mask_paste_window: the part of the
 * image its paste can touch; every pixel outside it is 0 by the rule), as
 * win.h rows of win.w values, row-major, image pixel (x, y) at
 * [(y - win.y0) * win.w + (x - win.x0)]:
 *   mask_paste_prob:   float[win.w*win.h] probabilities (parity tests)
 *   mask_paste_binary: uint8[win.w*win.h], 1 where prob > threshold
 *                      (MR_MASK_GT) or >= threshold (MR_MASK_GE), else 0
 * Why a window and not the image: a detection covers a small part of it,
 * and 100 full planes of a 1200x1600 photo are 190 MB to write, fault in,
 * scan when encoding, and (on a GPU) copy to the host.
 *
 * Reference: torchvision 0.14 `models/detection/roi_heads.py:
 * paste_masks_in_image, expand_masks, expand_boxes, paste_mask_in_image`:
 *  1. pad the mask with `padding` zeros on each side: P = M + 2*padding;
 *     scale = (float)((double)P / M) (Python float, applied as float32)
 *  2. expand the box about its centre, float32:
 *       w_half = (x2 - x1)*0.5*scale, x_c = (x2 + x1)*0.5,
 *       bx0 = (int)(x_c - w_half), bx1 = (int)(x_c + w_half)   (toward zero)
 *  3. w = max(bx1 - bx0 + 1, 1), h likewise (TO_REMOVE = 1)
 *  4. resize the padded mask to h x w with F.interpolate(bilinear,
 *     align_corners=False) (mask_resize_axis / mask_resize_tap)
 *  5. paste rows [max(by0,0), min(by1+1,H)) x cols [max(bx0,0), min(bx1+1,W))
 * The window is that paste rectangle; no h x w or H x W temporary is made.
 *
 * Float32 parity: bitwise equal to torch 1.13 CPU. Its channels-last
 * bilinear kernel (which a [1,1,h,w] tensor takes) turned out to compute
 * the source index in double from the float scale in/out, round the
 * lambdas to float, multiply the weights in float (w00 = ly0*lx0) and
 * accumulate the four taps in double; mask_resize_tap does the same (found
 * by matching torch bit for bit, tests/parity/test_ops_torchvision.py).
 *
 * Differences by design: a box whose expanded window lies wholly outside
 * the image pastes nothing (torchvision slices with negative indices there
 * and raises a shape error); coordinates beyond +-2^28 are saturated before
 * the int cast.
 *
 * Detectron's paste (test.py segm_results) is the same algorithm with
 * cv2.resize(INTER_LINEAR) on the float mask and "> 0.5": use this rule with
 * MR_MASK_GT (cv2's float bilinear samples the same taps with the same
 * half-pixel mapping; its rounding differs from torch's by float ulps).
 *
 * MR_PASTE_DETECTRON2: detectron2 `layers/mask_ops.py: _do_paste_mask` as
 * run on the CPU (one mask per chunk, skip_empty), float32 throughout:
 *  1. window: x0i = max(floor(x1) - 1, 0), x1i = min(ceil(x2) + 1, W),
 *     likewise y; pixels outside stay 0
 *  2. grid per pixel centre: gx = (x + 0.5 - x1) / (x2 - x1) * 2 - 1
 *  3. F.grid_sample(bilinear, zeros padding, align_corners=False) of the
 *     unpadded M x M mask: u = (gx + 1) * (M / 2) - 0.5 (torch's vectorised
 *     CPU kernel), taps outside the mask read 0
 *  4. binary: prob >= threshold (detectron2 uses MR_MASK_GE)
 * A box with x2 <= x1 or y2 <= y1 pastes nothing (detectron2 drops empty
 * boxes before pasting; box_head.clip_final_boxes). padding is unused; the
 * window is step 1's. */
#ifndef MR_MASK_PASTE_H
#define MR_MASK_PASTE_H

#include "core/hd.h"
#include "core/result.h"
#include "core/status.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    MR_PASTE_TORCHVISION = 0,
    MR_PASTE_DETECTRON2 = 1
} mr_paste_rule;

typedef enum {
    MR_MASK_GT = 0, /* prob > threshold: torchvision users, Detectron */
    MR_MASK_GE = 1  /* prob >= threshold: detectron2 */
} mr_mask_cmp;

typedef struct {
    int mask_size;     /* M (28) */
    int padding;       /* 1 */
    float threshold;   /* 0.5; binary output only */
    mr_mask_cmp cmp;   /* binary output only */
    mr_paste_rule rule;
} mr_mask_paste_params;

/* The result block a backend pastes into on the device (backend.h,
 * paste_on_device), in host memory: the header, then one row per
 * detection up to the capacity, then the masks' region, each window's
 * pixels at its row's offset, row-major, back to back in detection order
 * (the layout of mr_result's mask_storage). */
typedef struct {
    int32_t count;    /* detections; -1 when the box head's NMS broke its planned limits */
    int32_t overflow; /* 1: the windows need more than the mask region (pixels): none was pasted */
    uint64_t pixels;  /* the windows' pixels, all together */
} mr_paste_block_header;

typedef struct {
    float box[4]; /* the final box (ops/final_boxes.h), original pixels */
    float score, label;
    mr_mask_window win; /* mask_paste_window of the final box */
    uint64_t offset;    /* the window's first pixel in the mask region */
} mr_paste_block_row;

/* Integer geometry of one paste. The resized mask is h x w with its (0,0)
 * at image pixel (bx0, by0); the window [x0,x1) x [y0,y1) is the part
 * inside the image (empty when x0 >= x1 or y0 >= y1). */
typedef struct {
    int bx0, by0; /* expanded, truncated box corner */
    int w, h;     /* resized mask size */
    int x0, y0, x1, y1;
} mr_paste_geom;

MR_HD static inline int mask_paste_trunc(float v)
{
    /* .to(int64): truncation toward zero; saturate far-out values */
    if (!(v > -268435456.0f)) return v != v ? 0 : -268435456;
    if (v > 268435456.0f) return 268435456;
    return (int)v;
}

MR_HD static inline mr_paste_geom mask_paste_geom(int mask_size, int padding, const float *box, int img_h, int img_w)
{
    mr_paste_geom g;
    float scale = (float)((double)(mask_size + 2 * padding) / (double)mask_size);
    float w_half = (box[2] - box[0]) * 0.5f;
    float h_half = (box[3] - box[1]) * 0.5f;
    float x_c = (box[2] + box[0]) * 0.5f;
    float y_c = (box[3] + box[1]) * 0.5f;
    w_half = w_half * scale;
    h_half = h_half * scale;
    g.bx0 = mask_paste_trunc(x_c - w_half);
    g.by0 = mask_paste_trunc(y_c - h_half);
    int bx1 = mask_paste_trunc(x_c + w_half);
    int by1 = mask_paste_trunc(y_c + h_half);
    g.w = bx1 - g.bx0 + 1;
    g.h = by1 - g.by0 + 1;
    if (g.w < 1) g.w = 1;
    if (g.h < 1) g.h = 1;
    g.x0 = g.bx0 > 0 ? g.bx0 : 0;
    g.y0 = g.by0 > 0 ? g.by0 : 0;
    g.x1 = bx1 + 1 < img_w ? bx1 + 1 : img_w;
    g.y1 = by1 + 1 < img_h ? by1 + 1 : img_h;
    /* never read past the resized mask (only reachable when w or h was forced to 1) */
    if (g.x1 > g.bx0 + g.w) g.x1 = g.bx0 + g.w;
    if (g.y1 > g.by0 + g.h) g.y1 = g.by0 + g.h;
    return g;
}


/* detectron2 rule, step 1: the integer window [*lo, *hi) of one axis for
 * box sides [b0, b1] and image extent n. */
MR_HD static inline void mask_paste_d2_window(float b0, float b1, int n, int *lo, int *hi)
{
    float f = floorf(b0) - 1.0f, c = ceilf(b1) + 1.0f;
    *lo = f > 0.0f ? mask_paste_trunc(f) : 0;
    *hi = c < (float)n ? mask_paste_trunc(c) : n;
}

/* The window of p's rule for box in an img_h x img_w image. */
MR_HD static inline mr_mask_window mask_paste_window(const mr_mask_paste_params *p, const float *box, int img_h,
                                                     int img_w)
{
    mr_mask_window win = {0, 0, 0, 0};
    int x0, y0, x1, y1;
    if (p->rule == MR_PASTE_DETECTRON2) {
        if (!(box[2] > box[0] && box[3] > box[1])) return win;
        mask_paste_d2_window(box[0], box[2], img_w, &x0, &x1);
        mask_paste_d2_window(box[1], box[3], img_h, &y0, &y1);
    } else {
        mr_paste_geom g = mask_paste_geom(p->mask_size, p->padding, box, img_h, img_w);
        x0 = g.x0, y0 = g.y0, x1 = g.x1, y1 = g.y1;
    }
    if (x1 <= x0 || y1 <= y0) return win;
    win.x0 = x0;
    win.y0 = y0;
    win.w = x1 - x0;
    win.h = y1 - y0;
    return win;
}

/* One axis of F.interpolate(bilinear, align_corners=False, size given) from
 * in_size to out_size at output index d: taps i0, i1, weights l0, l1. */
MR_HD static inline void mask_resize_axis(int in_size, int out_size, int d, int *i0, int *i1, float *l0, float *l1)
{
    if (in_size == out_size) {
        *i0 = *i1 = d;
        *l0 = 1.0f;
        *l1 = 0.0f;
        return;
    }
    float scale = (float)in_size / (float)out_size;
    double src = (double)scale * ((double)d + 0.5) - 0.5;
    if (src < 0.0) src = 0.0;
    int lo = (int)src;
    *i0 = lo;
    *i1 = lo + (lo < in_size - 1 ? 1 : 0);
    float lam = (float)(src - (double)lo);
    *l1 = lam;
    *l0 = 1.0f - lam;
}

/* The interpolated value from the padded P x P mask (row-major). */
MR_HD static inline float mask_resize_tap(const float *padded, int P, int y0, int y1, float ly0, float ly1, int x0,
                                          int x1, float lx0, float lx1)
{
    float w00 = ly0 * lx0, w01 = ly0 * lx1, w10 = ly1 * lx0, w11 = ly1 * lx1;
    double acc = (double)padded[y0 * P + x0] * (double)w00;
    acc += (double)padded[y0 * P + x1] * (double)w01;
    acc += (double)padded[y1 * P + x0] * (double)w10;
    acc += (double)padded[y1 * P + x1] * (double)w11;
    return (float)acc;
}

/* detectron2 rule, steps 2-3 for one axis: pixel index -> source coordinate
 * in the M-sized mask, in torch's float32 operation order. The grid is
 * separate torch ops (no fusion); grid_sample's unnormalize is fused:
 * torch's AVX2 CPU kernel (aten/src/ATen/native/cpu/GridSamplerKernel.cpp,
 * `(in + 1) * scaling_factor - 0.5`, built with FMA contraction) rounds
 * once, as fma(g + 1, M/2, -0.5); the CUDA kernel's ((g + 1) * M - 1) / 2
 * contracted by nvcc is the same value (the factor 2 is exact). A separate
 * multiply and subtract differs by an ulp of u (2e-6 for u in [16, 32)),
 * ~1e-6 in the pasted probability. */
MR_HD static inline float mask_paste_d2_coord(int pixel, float b0, float b1, int M)
{
    float g = ((float)pixel + 0.5f - b0) / (b1 - b0) * 2.0f - 1.0f;
    return fmaf(g + 1.0f, (float)M / 2.0f, -0.5f);
}

/* detectron2 rule, step 3: bilinear sample with zero padding, the weights
 * and the sum in grid_sample's order (nw, ne, sw, se). The sum is a chain
 * of fused multiply-adds, as torch's CPU kernel (FMA-contracted) and its
 * CUDA kernel (`out_acc += tap * weight`, contracted by nvcc) both round
 * it; a zero tap leaves the running sum unchanged in either. */
MR_HD static inline float mask_paste_d2_sample(const float *mask, int M, float u, float v)
{
    /* every tap is outside (or NaN): 0, and no int overflow below */
    if (!(u > -2.0f && u < (float)M + 1.0f && v > -2.0f && v < (float)M + 1.0f)) return 0.0f;
    float xw = floorf(u), yn = floorf(v);
    float w = u - xw, e = 1.0f - w, nn = v - yn, s = 1.0f - nn;
    float wnw = s * e, wne = s * w, wsw = nn * e, wse = nn * w;
    int x0 = (int)xw, y0 = (int)yn;
    float tap[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int xs[2] = {x0, x0 + 1}, ys[2] = {y0, y0 + 1};
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < 2; i++)
            if (xs[i] >= 0 && xs[i] < M && ys[j] >= 0 && ys[j] < M) tap[2 * j + i] = mask[ys[j] * M + xs[i]];
    return fmaf(tap[3], wse, fmaf(tap[2], wsw, fmaf(tap[1], wne, tap[0] * wnw)));
}

/* Bytes of scratch for one paste: the padded mask, (M+2p)^2 floats. */
size_t mask_paste_scratch_bytes(int mask_size, int padding);

/* out holds mask_window_pixels(mask_paste_window(p, box, img_h, img_w))
 * values. MR_ERR_RANGE for a bad size/padding/image size,
 * MR_ERR_UNSUPPORTED for a rule not implemented yet; err may be NULL. */
mr_status mask_paste_prob(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                          float *out, void *scratch, mr_error *err);

mr_status mask_paste_binary(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                            uint8_t *out, void *scratch, mr_error *err);

/* The same pastes spread over whole zeroed img_h x img_w planes, for
 * callers that want planes (tests; through ctypes too). They allocate the
 * window: MR_ERR_OOM if that fails. */
mr_status mask_paste_prob_plane(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h,
                                int img_w, float *plane, void *scratch, mr_error *err);
mr_status mask_paste_binary_plane(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h,
                                  int img_w, uint8_t *plane, void *scratch, mr_error *err);

/* A window's values spread over a zeroed img_h x img_w plane. */
void mask_window_to_plane_f32(mr_mask_window win, const float *window, int img_h, int img_w, float *plane);
void mask_window_to_plane_u8(mr_mask_window win, const uint8_t *window, int img_h, int img_w, uint8_t *plane);

#endif
