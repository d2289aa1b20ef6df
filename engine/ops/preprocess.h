/* Preprocessing's per-pixel math, shared by the CPU (engine/ops/image_preprocess.c) and
 * the GPU (cuda/preprocess.cu), so the CPU tests exercise the arithmetic
 * the kernel runs. The contract of the whole step (which resize, in which
 * order, against which reference) is image.h's; this header holds:
 *
 *   mr_pre_norm      the normalisation v = (p * pixel_scale - mean[c]) / std[c]
 *                    of one 8-bit level, in the configured channel order;
 *   mr_lerp_*        one axis of torch's bilinear resize (align_corners=False)
 *                    and the order in which torch rounds the combination;
 *   mr_pre_job       everything one pass over the padded output needs:
 *                    sampler, sizes, per-axis ratios;
 *   mr_pre_pixel     one pixel of the padded NHWC network input [ph, pw, 3]:
 *                    zero in the padding (bottom and right), else the
 *                    resized, normalised value of each channel.
 *
 * Source image: uint8 [in_h, in_w, 3], row-major, RGB as decoded. The
 * normalisation of a level depends on nothing else, so both backends build
 * a table lut[3][256] once per image (mr_pre_lut_fill) and index it; the
 * resize then runs on normalised floats, as torchvision and Detectron do. */
#ifndef MR_PREPROCESS_H
#define MR_PREPROCESS_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"
#include "ops/resize_cv2.h"

/* ---- normalisation ---- */

/* From the config (mr_pre_norm_make): output channel c reads source
 * channel src_ch[c] (BGR swaps R and B) and uses mean[c], std[c], which the
 * config gives in its channel order. */
typedef struct {
    float mean[3], std[3];
    float scale;   /* pixel_scale                                          */
    float divisor; /* n when pixel_scale is exactly 1/n (1/255, 1), else 0  */
    int src_ch[3];
} mr_pre_norm;

static inline MR_HD mr_pre_norm mr_pre_norm_make(const float mean[3], const float std[3], float pixel_scale,
                                                 int bgr)
{
    mr_pre_norm n;
    /* torchvision's to_tensor divides by 255 where the config says multiply
     * by 1/255; the two differ by an ulp for half of the 256 levels, so a
     * pixel_scale that is the reciprocal of an integer divides by it. */
    const float inv = rintf(1.0f / pixel_scale);
    n.divisor = inv >= 1.0f && 1.0f / inv == pixel_scale ? inv : 0.0f;
    n.scale = pixel_scale;
    for (int c = 0; c < 3; c++) {
        n.mean[c] = mean[c];
        n.std[c] = std[c];
        n.src_ch[c] = bgr ? 2 - c : c;
    }
    return n;
}

/* (p * scale - mean) / std of one level for output channel c, each step
 * rounded to float as torchvision does it (sub_, div_ on float tensors).
 * The GPU build uses -fmad=false, so the product and the subtraction are
 * not fused there either. */
static inline MR_HD float mr_pre_normalise(const mr_pre_norm *n, int c, int level)
{
    const float x = n->divisor != 0.0f ? (float)level / n->divisor : (float)level * n->scale;
    return (x - n->mean[c]) / n->std[c];
}

/* lut[c * 256 + p] = mr_pre_normalise(n, c, p), entries [first, 768) in
 * steps of `step` (a CUDA block fills its shared copy with first = thread,
 * step = block size; the CPU with 0, 1). */
static inline MR_HD void mr_pre_lut_fill(const mr_pre_norm *n, float *lut, int first, int step)
{
    for (int i = first; i < 3 * 256; i += step) lut[i] = mr_pre_normalise(n, i >> 8, i & 255);
}

/* ---- torch's bilinear resize, one axis ---- */

/* The two source indices and their weights for output index dst. `ratio`
 * is in/out in float (mr_lerp_ratio). The source position is
 * ratio * (dst + 0.5) - 0.5 evaluated in double, clamped at 0; index0
 * truncates it; lambda1 is the double difference src - index0 rounded to
 * float, lambda0 = 1 - lambda1 in float; equal sizes copy. This is what
 * torch 1.13's CPU kernel computes (UpSampleKernel.cpp,
 * compute_source_index_and_lambda): doing the position in float instead
 * rounds e.g. 480->800's src 1 + 2^-24 to 1 and changes weights at a third
 * of the positions (errors up to ~1e-4 after normalisation). Checked weight
 * by weight against F.interpolate on unit vectors, 0 of ~10^4 weights
 * differ. */
typedef struct {
    int i0, i1;
    float l0, l1;
} mr_lerp_tap;

static inline MR_HD mr_lerp_tap mr_lerp_tap_at(int in_size, int out_size, float ratio, int dst)
{
    mr_lerp_tap t;
    if (in_size == out_size) {
        t.i0 = dst;
        t.i1 = dst;
        t.l0 = 1.0f;
        t.l1 = 0.0f;
        return t;
    }
    double src = (double)ratio * ((double)dst + 0.5) - 0.5;
    if (src < 0.0) src = 0.0;
    t.i0 = (int)src;
    t.i1 = t.i0 + (t.i0 < in_size - 1 ? 1 : 0);
    t.l1 = (float)(src - (double)t.i0);
    t.l0 = 1.0f - t.l1;
    return t;
}

/* torch's area_pixel_compute_scale<float> for align_corners=False and no
 * given scale: in/out in float, for any output size (the 0 for a single
 * output pixel is align_corners=True's rule: a 67-row image resized to one
 * row samples row 33, not row 0). No given scale is the
 * `recompute_scale_factor=True` semantics torchvision's transform asks for:
 * the output size is computed first (image_geometry) and the ratio comes
 * from the two sizes, not from the scale factor. out_size >= 1. */
static inline MR_HD float mr_lerp_ratio(int in_size, int out_size)
{
    return (float)in_size / (float)out_size;
}

/* The bilinear combination as torch 1.13's CPU kernel rounds it for an
 * NCHW float input (upsample_generic_Nd_kernel_impl, Interpolate<2>):
 * each pair `a * wa + b * wb` is compiled with FMA contraction into
 * fma(a, wa, b * wb); first along the row (w), then across the two rows
 * (h). Found by testing candidate orders against F.interpolate on [1,3,H,W]
 * tensors: this one matches bit for bit; plain float, double accumulation
 * and the other FMA pairings differ by an ulp at 20-50% of the outputs.
 * (A channels-last input, which includes any C=1 tensor, takes torch's other
 * kernel, which accumulates h*w-weighted terms in double; torchvision's
 * 3-channel CHW images never do.) fmaf is exact on both sides: correctly
 * rounded in libm and in the GPU's FMA unit. */
static inline MR_HD float mr_lerp2(float v00, float v01, float v10, float v11, float w0, float w1,
                                   float h0, float h1)
{
    const float t0 = fmaf(v00, w0, v01 * w1);
    const float t1 = fmaf(v10, w0, v11 * w1);
    return fmaf(t0, h0, t1 * h1);
}

/* One output channel of torch's resize: v is that channel's 256 normalised
 * levels, r0 and r1 the two source rows, s the source channel. */
static inline MR_HD float mr_pre_torch_sample(const float *v, const uint8_t *r0, const uint8_t *r1,
                                              mr_lerp_tap tx, mr_lerp_tap ty, int s)
{
    const int o0 = tx.i0 * 3 + s, o1 = tx.i1 * 3 + s;
    return mr_lerp2(v[r0[o0]], v[r0[o1]], v[r1[o0]], v[r1[o1]], tx.l0, tx.l1, ty.l0, ty.l1);
}

/* One output channel of OpenCV's INTER_LINEAR resize (resize_cv2.h): the
 * two row lerps, then the one across them, unfused, as resize_cv2.c does. */
static inline MR_HD float mr_pre_cv2_sample(const float *v, const uint8_t *r0, const uint8_t *r1, mr_cv2_tap tx,
                                            mr_cv2_tap ty, int s)
{
    const int o0 = tx.i0 * 3 + s, o1 = tx.i1 * 3 + s;
    const float t0 = mr_cv2_lerp(v[r0[o0]], v[r0[o1]], tx.w0, tx.w1);
    const float t1 = mr_cv2_lerp(v[r1[o0]], v[r1[o1]], tx.w0, tx.w1);
    return mr_cv2_lerp(t0, t1, ty.w0, ty.w1);
}

/* ---- one pass over the padded output ---- */

/* How the source image becomes the resized one, per output pixel.
 * COPY: the source already has the resized size (pil_bilinear, whose
 * integer resize runs first on the uint8 image; or any method when the
 * sizes agree, where all three resamplers copy). */
typedef enum { MR_PRE_COPY = 0, MR_PRE_TORCH, MR_PRE_CV2 } mr_pre_sampler;

typedef struct {
    mr_pre_sampler sampler;
    int in_h, in_w;         /* the source image [in_h, in_w, 3]          */
    int resized_h, resized_w;
    int padded_h, padded_w; /* the output [padded_h, padded_w, 3]         */
    float ratio_h, ratio_w; /* TORCH: mr_lerp_ratio per axis              */
    double inv_fy, inv_fx;  /* CV2: OpenCV's scale = 1.0 / factor, double */
    mr_pre_norm norm;
} mr_pre_job;

/* out[0..2] = output pixel (y, x) of the padded input; lut as filled by
 * mr_pre_lut_fill(&job->norm, ...); img [in_h, in_w, 3]. */
static inline MR_HD void mr_pre_pixel(const mr_pre_job *j, const float *lut, const uint8_t *img, int y, int x,
                                      float *out)
{
    if (y >= j->resized_h || x >= j->resized_w) {
        out[0] = out[1] = out[2] = 0.0f; /* padding comes after normalisation */
        return;
    }
    const size_t row = (size_t)j->in_w * 3;
    if (j->sampler == MR_PRE_TORCH) {
        const mr_lerp_tap tx = mr_lerp_tap_at(j->in_w, j->resized_w, j->ratio_w, x);
        const mr_lerp_tap ty = mr_lerp_tap_at(j->in_h, j->resized_h, j->ratio_h, y);
        const uint8_t *r0 = img + (size_t)ty.i0 * row, *r1 = img + (size_t)ty.i1 * row;
        for (int c = 0; c < 3; c++) out[c] = mr_pre_torch_sample(lut + c * 256, r0, r1, tx, ty, j->norm.src_ch[c]);
    } else if (j->sampler == MR_PRE_CV2) {
        const mr_cv2_tap tx = mr_cv2_tap_x(j->in_w, j->inv_fx, x);
        const mr_cv2_tap ty = mr_cv2_tap_y(j->in_h, j->inv_fy, y);
        const uint8_t *r0 = img + (size_t)ty.i0 * row, *r1 = img + (size_t)ty.i1 * row;
        for (int c = 0; c < 3; c++) out[c] = mr_pre_cv2_sample(lut + c * 256, r0, r1, tx, ty, j->norm.src_ch[c]);
    } else {
        const uint8_t *p = img + (size_t)y * row + (size_t)x * 3;
        for (int c = 0; c < 3; c++) out[c] = lut[c * 256 + p[j->norm.src_ch[c]]];
    }
}

#endif
