/* CPU RoIAlign over NHWC or channel-blocked (nChw<B>c) features; see roi_align.h for the contract.
 *
 * The per-sample weights come from the shared MR_HD math. With NHWC the
 * four taps of a sample are four contiguous C-vectors, so the inner loop is
 * a straight multiply-add over channels that the compiler vectorises; per
 * channel it performs exactly the reference's float operations in the
 * reference's order. nChw<B>c (the CPU backend's layout between
 * convolutions) runs the same multiply-add per B-channel block: the same operations per
 * channel, so the same bits, without turning the FPN maps back to NHWC
 * first. Nothing is precomputed per roi, so no scratch. */
#include "ops/roi_align.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* o[c] += w1*f1[c] + w2*f2[c] + w3*f3[c] + w4*f4[c] for every channel; a
 * tap's channels are contiguous (NHWC, blocked = 0) or in blocks of
 * `blocked` channels a plane apart. */
static inline void accumulate_taps(float *restrict o, int C, int blocked, size_t plane, const float *fd, size_t t1,
                                   size_t t2, size_t t3, size_t t4, float w1, float w2, float w3, float w4)
{
    if (!blocked) {
        const float *restrict f1 = fd + t1 * C, *restrict f2 = fd + t2 * C;
        const float *restrict f3 = fd + t3 * C, *restrict f4 = fd + t4 * C;
#pragma omp simd
        for (int c = 0; c < C; c++) o[c] += w1 * f1[c] + w2 * f2[c] + w3 * f3[c] + w4 * f4[c];
        return;
    }
    const int B = blocked;
    for (int cb = 0; cb < C / B; cb++) {
        const float *restrict b = fd + (size_t)cb * plane * B;
        const float *restrict f1 = b + t1 * B, *restrict f2 = b + t2 * B;
        const float *restrict f3 = b + t3 * B, *restrict f4 = b + t4 * B;
        float *restrict ob = o + cb * B;
#pragma omp simd
        for (int c = 0; c < B; c++) ob[c] += w1 * f1[c] + w2 * f2[c] + w3 * f3[c] + w4 * f4[c];
    }
}

static inline float bf16_widen(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* The same over NHWC bf16 taps. */
static inline void accumulate_taps_bf16(float *restrict o, int C, const uint16_t *fd, size_t t1, size_t t2, size_t t3,
                                        size_t t4, float w1, float w2, float w3, float w4)
{
    const uint16_t *restrict f1 = fd + t1 * C, *restrict f2 = fd + t2 * C;
    const uint16_t *restrict f3 = fd + t3 * C, *restrict f4 = fd + t4 * C;
#pragma omp simd
    for (int c = 0; c < C; c++)
        o[c] += w1 * bf16_widen(f1[c]) + w2 * bf16_widen(f2[c]) + w3 * bf16_widen(f3[c]) + w4 * bf16_widen(f4[c]);
}

/* The same over NHWC s8 taps (a level handed over quantized, int8): each
 * tap widened to q x step, then the same operations. */
static inline void accumulate_taps_s8(float *restrict o, int C, const int8_t *fd, float step, size_t t1, size_t t2,
                                      size_t t3, size_t t4, float w1, float w2, float w3, float w4)
{
    const int8_t *restrict f1 = fd + t1 * C, *restrict f2 = fd + t2 * C;
    const int8_t *restrict f3 = fd + t3 * C, *restrict f4 = fd + t4 * C;
#pragma omp simd
    for (int c = 0; c < C; c++)
        o[c] += w1 * ((float)f1[c] * step) + w2 * ((float)f2[c] * step) + w3 * ((float)f3[c] * step) +
                w4 * ((float)f4[c] * step);
}

/* Built for AVX-512, AVX2 and the baseline, picked at load: at the
 * baseline (SSE2) widening an s8 or bf16 tap takes several instructions a
 * lane, and int8's s8 levels made the box head 4.5 ms slower at full
 * size (bench/NOTES.md section 40). No FMA in either (and ISO C's
 * -ffp-contract=off): the same operations per lane, so the same bits. */
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
roi_align_one(const mr_roi_align_params *p, float spatial_scale, const mr_tensor *feat, int blocked, float step,
              const float *roi, float *out)
{
    const int H = feat->h, W = feat->w, C = feat->c;
    const float *fd = feat->data;
    mr_roi_geom g = roi_align_geom(p, roi, spatial_scale);
    if (H <= 0 || W <= 0) g.grid_h = g.grid_w = 0; /* an empty map has nothing to sample: zeros */

    for (int ph = 0; ph < p->out_h; ph++) {
        for (int pw = 0; pw < p->out_w; pw++) {
            float *restrict o = out + ((size_t)ph * p->out_w + pw) * C;
            for (int c = 0; c < C; c++) o[c] = 0.0f;

            for (int iy = 0; iy < g.grid_h; iy++) {
                int ylo = 0, yhi = 0;
                float ly = 0.0f;
                float y = roi_align_coord(g.start_h, ph, g.bin_h, iy, g.grid_h);
                if (!roi_align_axis(y, H, &ylo, &yhi, &ly)) continue; /* the whole row adds 0 */
                float hy = 1.0f - ly;
                for (int ix = 0; ix < g.grid_w; ix++) {
                    int xlo = 0, xhi = 0;
                    float lx = 0.0f;
                    float x = roi_align_coord(g.start_w, pw, g.bin_w, ix, g.grid_w);
                    if (!roi_align_axis(x, W, &xlo, &xhi, &lx)) continue;
                    float hx = 1.0f - lx;
                    float w1 = hy * hx, w2 = hy * lx, w3 = ly * hx, w4 = ly * lx;
                    size_t t1 = (size_t)ylo * W + xlo, t2 = (size_t)ylo * W + xhi;
                    size_t t3 = (size_t)yhi * W + xlo, t4 = (size_t)yhi * W + xhi;
                    if (blocked == ROI_ALIGN_LEVEL_BF16)
                        accumulate_taps_bf16(o, C, (const uint16_t *)feat->data, t1, t2, t3, t4, w1, w2, w3, w4);
                    else if (blocked == ROI_ALIGN_LEVEL_S8)
                        accumulate_taps_s8(o, C, (const int8_t *)feat->data, step, t1, t2, t3, t4, w1, w2, w3, w4);
                    else
                        accumulate_taps(o, C, blocked, (size_t)H * W, fd, t1, t2, t3, t4, w1, w2, w3, w4);
                }
            }
#pragma omp simd
            for (int c = 0; c < C; c++) o[c] /= g.count;
        }
    }
}

void roi_align_cpu(const mr_roi_align_params *p, const mr_tensor *feat, const float *rois, int n, float *out)
{
    size_t per_roi = (size_t)p->out_h * p->out_w * feat->c;
#pragma omp parallel for schedule(dynamic, 4)
    for (int i = 0; i < n; i++)
        roi_align_one(p, p->spatial_scale, feat, 0, 0.0f, rois + 4 * (size_t)i, out + per_roi * i);
}

void roi_align_multilevel_cpu(const mr_roi_align_params *base, const mr_level_map *map,
                              const mr_tensor *const *levels, const float *rois, int n, int *roi_levels_out,
                              float *out)
{
    roi_align_multilevel_layout_cpu(base, map, levels, NULL, NULL, rois, n, roi_levels_out, out);
}

void roi_align_multilevel_layout_cpu(const mr_roi_align_params *base, const mr_level_map *map,
                                     const mr_tensor *const *levels, const int *level_blocked, const float *level_step,
                                     const float *rois, int n, int *roi_levels_out, float *out)
{
    size_t per_roi = (size_t)base->out_h * base->out_w * levels[0]->c;
#pragma omp parallel for schedule(dynamic, 4)
    for (int i = 0; i < n; i++) {
        const float *roi = rois + 4 * (size_t)i;
        int lvl = roi_level(map, roi);
        if (roi_levels_out) roi_levels_out[i] = lvl;
        /* 2^-lvl exactly, as torchvision's inferred 2 ** -k */
        int l = lvl - map->min_level;
        roi_align_one(base, ldexpf(1.0f, -lvl), levels[l], level_blocked ? level_blocked[l] : 0,
                      level_step ? level_step[l] : 0.0f, roi, out + per_roi * i);
    }
}
