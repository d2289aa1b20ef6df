/* Pillow's bilinear resize of an 8-bit RGB image, bit for bit:
 * `Image.fromarray(src).resize((out_w, out_h), Image.BILINEAR)`, which is
 * what detectron2's ResizeTransform.apply_image does to a uint8 image
 * (detectron2/data/transforms/transform.py) before it is converted to
 * float and normalised.
 *
 * Input  src [in_h, in_w, 3] uint8, row-major, any channel order (the
 *        channels are resampled independently).
 * Output dst [out_h, out_w, 3] uint8.
 *
 * The algorithm is Pillow's (src/libImaging/Resample.c; 9.4 is the tests'
 * reference; upstream's current file computes the same), written here from its
 * semantics:
 *  - per axis, scale = in/out in double; the filter is stretched by
 *    filterscale = max(scale, 1), so a downscale averages over a support
 *    of filterscale pixels on each side (an antialiasing triangle), an
 *    upscale is plain linear interpolation;
 *  - output pixel i takes source pixels [xmin, xmin + n): centre =
 *    (i + 0.5) * scale, xmin = (int)(centre - support + 0.5) clamped at 0,
 *    xmax = (int)(centre + support + 0.5) clamped at in; weight of source j
 *    = tri((j - centre + 0.5) / filterscale), tri(x) = max(0, 1 - |x|), in
 *    double, divided by their sum;
 *  - each weight becomes a fixed-point int32 with 22 fraction bits,
 *    rounded half away from zero; a pixel is (2^21 + sum(p_j * k_j)) >> 22
 *    clamped to 0..255;
 *  - horizontal pass first, into a uint8 intermediate of out_w columns
 *    holding only the source rows the vertical pass reads (the first
 *    output row's xmin to the last one's xmin + n); then the vertical
 *    pass. An axis whose size does not change is not resampled (Pillow
 *    skips that pass; its weights would be the identity anyway). Equal
 *    sizes on both axes copy (Image.resize returns a copy).
 * The per-coefficient math below is shared with a future CUDA kernel. */
#ifndef MR_RESIZE_PIL_H
#define MR_RESIZE_PIL_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"

typedef struct {
    int in_h, in_w;   /* source size, >= 1   */
    int out_h, out_w; /* resized size, >= 1  */
} mr_resize_pil;

/* Bytes of scratch resize_pil_bilinear needs: the fixed-point weights and
 * bounds of both axes and the uint8 intermediate of the horizontal pass. */
size_t resize_pil_scratch_bytes(const mr_resize_pil *p);

/* Resizes src into dst (which must not overlap it); scratch holds
 * resize_pil_scratch_bytes(p) bytes, 8-byte aligned. OpenMP over rows. */
void resize_pil_bilinear(const mr_resize_pil *p, const uint8_t *src, uint8_t *dst, void *scratch);

/* ---- Shared per-coefficient math ---- */

#define MR_PIL_PRECISION_BITS 22 /* Pillow: 32 - 8 bits of result - 2 of headroom */

/* One axis of the filter: Pillow's precompute_coeffs setup. */
typedef struct {
    double scale;       /* in / out                                      */
    double filterscale; /* max(scale, 1): how far the triangle stretches */
    double support;     /* 1.0 (bilinear) * filterscale, in source pixels */
    int ksize;          /* most taps any output pixel has                */
} mr_pil_axis;

static inline MR_HD mr_pil_axis mr_pil_axis_make(int in_size, int out_size)
{
    mr_pil_axis a;
    /* Pillow passes the box as floats (0.0f, (float)in): exact for any
     * int side below 2^24. */
    a.scale = (double)in_size / out_size;
    a.filterscale = a.scale < 1.0 ? 1.0 : a.scale;
    a.support = 1.0 * a.filterscale;
    a.ksize = (int)ceil(a.support) * 2 + 1;
    return a;
}

static inline MR_HD double mr_pil_triangle(double x)
{
    if (x < 0.0) x = -x;
    return x < 1.0 ? 1.0 - x : 0.0;
}

/* Weight (double, 0..1, normalised) -> Pillow's fixed point,
 * normalize_coeffs_8bpc: round half away from zero. */
static inline MR_HD int32_t mr_pil_fixed(double w)
{
    const double one = (double)(1 << MR_PIL_PRECISION_BITS);
    return w < 0 ? (int32_t)(-0.5 + w * one) : (int32_t)(0.5 + w * one);
}

/* The source pixels output pixel i reads: [*xmin, *xmin + *n), n <= ksize.
 * (int) truncates as Pillow's does; a negative xmin is clamped anyway. */
static inline MR_HD void mr_pil_bounds(const mr_pil_axis *a, int in_size, int i, int *xmin, int *n)
{
    const double center = (i + 0.5) * a->scale;
    int lo = (int)(center - a->support + 0.5);
    if (lo < 0) lo = 0;
    int hi = (int)(center + a->support + 0.5);
    if (hi > in_size) hi = in_size;
    *xmin = lo;
    *n = hi - lo;
}

/* The taps of output pixel i: mr_pil_bounds and the fixed-point weights
 * k[0..n). Two passes over the taps (sum, then divide) give the same
 * doubles as Pillow's store-then-divide, so no double buffer is needed. */
static inline MR_HD void mr_pil_taps(const mr_pil_axis *a, int in_size, int i, int *xmin, int *n,
                                     int32_t *k)
{
    const double center = (i + 0.5) * a->scale;
    const double ss = 1.0 / a->filterscale;
    int lo, cnt;
    mr_pil_bounds(a, in_size, i, &lo, &cnt);
    double ww = 0.0;
    for (int x = 0; x < cnt; x++) ww += mr_pil_triangle((x + lo - center + 0.5) * ss);
    for (int x = 0; x < cnt; x++) {
        double w = mr_pil_triangle((x + lo - center + 0.5) * ss);
        if (ww != 0.0) w /= ww;
        k[x] = mr_pil_fixed(w);
    }
    *xmin = lo;
    *n = cnt;
}

/* A fixed-point sum (already holding the 2^21 rounding bias) -> uint8, as
 * Pillow's clip8: arithmetic shift, then clamp. */
static inline MR_HD uint8_t mr_pil_clip8(int32_t ss)
{
    const int32_t v = ss >> MR_PIL_PRECISION_BITS;
    return (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
}

#endif
