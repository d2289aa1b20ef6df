/* OpenCV's bilinear resize of a float image, as Detectron calls it
 * (detectron/utils/blob.py, prep_im_for_blob):
 *     cv2.resize(im, None, None, fx=s, fy=s, interpolation=cv2.INTER_LINEAR)
 * on the mean-subtracted float32 BGR image.
 *
 * Input  an 8-bit [in_h, in_w, 3] image and a per-level table that maps it
 *        to the float image to resize (mr_pixel_lut): normalisation is per
 *        pixel, so the table gives exactly the normalised image without a
 *        full-size float copy of it.
 * Output dst [out_h, out_w, 3] float, rows dst_row_stride floats apart.
 *
 * Semantics, written from OpenCV's imgproc/src/resize.cpp (cv::resize,
 * 3.x/4.x, the generic float path):
 *  - the output size is the caller's (cv2 computes round(in * s), half to
 *    even; image_geometry does that for resize_rounding "round"), but the
 *    source coordinate uses the given factor: scale = 1.0 / s in double,
 *    src = (float)((dst + 0.5) * scale - 0.5); i0 = floor(src); the weights
 *    are w1 = src - i0 and w0 = 1 - w1 in float;
 *  - columns: i0 < 0 becomes i0 = 0, w1 = 0; i0 >= in_w - 1 becomes
 *    i0 = in_w - 1, w1 = 0 (one tap);
 *  - rows: the weights are NOT reset; the two row indices i0 and i0 + 1 are
 *    each clamped to [0, in_h - 1] (ResizeGeneric_Invoker's clip), so the
 *    first row of an upscale is r0 * w0 + r0 * w1;
 *  - each output is (a * w0 + b * w1) per row, then the same across the two
 *    rows, in float;
 *  - equal input and output sizes copy the image (cv::resize's dsize ==
 *    ssize shortcut), whatever s is.
 * Not reproduced: OpenCV replaces INTER_LINEAR by INTER_AREA when
 * 1/s is exactly 2 on both axes (a 2x2 mean, equal to the bilinear value
 * up to float rounding), and its SIMD paths may fuse a multiply-add; both
 * differ from this by float rounding only (~1e-5 on values of ~100). */
#ifndef MR_RESIZE_CV2_H
#define MR_RESIZE_CV2_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"

typedef struct {
    int in_h, in_w;   /* source size, >= 1                          */
    int out_h, out_w; /* resized size, >= 1                         */
    double fx, fy;    /* the factors cv2 is given: out/in per axis  */
} mr_resize_cv2;

/* The float image as a table: output channel c of pixel p is
 * v[c][p[src_ch[c]]], p the 8-bit source pixel. */
typedef struct {
    float v[3][256];
    int src_ch[3];
} mr_pixel_lut;

/* dst = the table applied to an 8-bit [h, w, 3] image (rows of dst
 * dst_row_stride floats apart): an unresized image, or one resized as
 * uint8 (Pillow). OpenMP over rows. */
void pixel_lut_apply(const mr_pixel_lut *lut, const uint8_t *src, int h, int w, float *dst, size_t dst_row_stride);

/* Bytes of scratch resize_cv2_linear needs: the column taps. */
size_t resize_cv2_scratch_bytes(const mr_resize_cv2 *p);

/* Resizes src through lut into dst; scratch holds resize_cv2_scratch_bytes
 * bytes, aligned for float. OpenMP over output rows. */
void resize_cv2_linear(const mr_resize_cv2 *p, const uint8_t *src, const mr_pixel_lut *lut, float *dst,
                       size_t dst_row_stride, void *scratch);

/* ---- Shared per-element math ---- */

typedef struct {
    int i0, i1;
    float w0, w1;
} mr_cv2_tap;

/* The source position and weight as OpenCV computes them. */
static inline MR_HD void mr_cv2_position(double scale, int dst, int *i0, float *w1)
{
    const float f = (float)((dst + 0.5) * scale - 0.5);
    const int i = (int)floorf(f);
    *i0 = i;
    *w1 = f - (float)i;
}

/* A column tap: clamped to the image, one tap at the edges. */
static inline MR_HD mr_cv2_tap mr_cv2_tap_x(int in_size, double scale, int dst)
{
    mr_cv2_tap t;
    float w1;
    int i0;
    mr_cv2_position(scale, dst, &i0, &w1);
    if (i0 < 0) {
        i0 = 0;
        w1 = 0.0f;
    }
    if (i0 >= in_size - 1) {
        i0 = in_size - 1;
        w1 = 0.0f;
    }
    t.i0 = i0;
    t.i1 = i0 + 1 < in_size ? i0 + 1 : i0;
    t.w0 = 1.0f - w1;
    t.w1 = w1;
    return t;
}

/* A row tap: weights kept, indices clamped separately. */
static inline MR_HD mr_cv2_tap mr_cv2_tap_y(int in_size, double scale, int dst)
{
    mr_cv2_tap t;
    float w1;
    int i0;
    mr_cv2_position(scale, dst, &i0, &w1);
    t.i0 = i0 < 0 ? 0 : i0 > in_size - 1 ? in_size - 1 : i0;
    t.i1 = i0 + 1 < 0 ? 0 : i0 + 1 > in_size - 1 ? in_size - 1 : i0 + 1;
    t.w0 = 1.0f - w1;
    t.w1 = w1;
    return t;
}

/* a * w0 + b * w1 in float, unfused (the build's -std=c11 keeps GCC from
 * contracting it, as OpenCV's scalar path is compiled). */
static inline MR_HD float mr_cv2_lerp(float a, float b, float w0, float w1)
{
    const float p = a * w0;
    const float q = b * w1;
    return p + q;
}

#endif
