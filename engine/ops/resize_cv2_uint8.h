/* OpenCV's bilinear resize of an 8-bit RGB image, bit for bit:
 *     cv2.resize(src, (out_w, out_h), interpolation=cv2.INTER_LINEAR)
 * on a uint8 [h, w, 3] array, as opencv-python-headless 4.10.0.84 (x86-64)
 * computes it. mmdetection resizes the decoded image so
 * (mmcv.imrescale -> mmcv.imresize(backend='cv2')) and only then converts
 * it to float and normalises it.
 *
 * Input  src [in_h, in_w, 3] uint8, row-major, any channel order (the
 *        channels are resampled independently).
 * Output dst [out_h, out_w, 3] uint8.
 *
 * Written from the semantics of modules/imgproc/src/resize.cpp (cv::resize,
 * cv::hal::resize, resizeGeneric_Invoker, HResizeLinear,
 * VResizeLinear<uchar, int, short, FixedPtCast<int, uchar, 22>,
 * VResizeLinearVec_32s8u>, resizeAreaFast_Invoker with ResizeAreaFastVec),
 * 4.x, and checked against the wheel itself
 * (tests/parity/test_resize_cv2_uint8.py):
 *  - equal sizes copy (cv::resize's dsize == ssize shortcut);
 *  - the factors come from the sizes: inv = out/in in double, scale =
 *    1/inv in double (not in/out: the two can differ in the last bit);
 *  - exactly 2x down on both axes (|scale - 2| < DBL_EPSILON on each) is
 *    not bilinear: OpenCV switches to INTER_AREA's fast path, each output
 *    the mean of its 2x2 block, (a + b + c + d + 2) >> 2 (round half up;
 *    its SIMD and scalar tails agree). A 2x on one axis only stays
 *    bilinear;
 *  - otherwise separable fixed point, 11 fraction bits
 *    (INTER_RESIZE_COEF_BITS, 2048 = 1.0). Per axis, output index d:
 *    f = (float)((d + 0.5) * scale - 0.5), i = floor(f), f -= i (float);
 *    weights w0 = rint((1 - f) * 2048), w1 = rint(f * 2048), computed in
 *    float and rounded half to even (saturate_cast<short>(float) is
 *    cvRound); they always sum to 2048;
 *  - columns: i < 0 becomes i = 0, f = 0; i >= in_w - 1 becomes i = in_w - 1,
 *    f = 0 (one tap at both borders). Rows keep their weights; only the two
 *    row indices i and i + 1 are clamped to [0, in_h - 1], so the first
 *    rows of an upscale mix row 0 with itself;
 *  - horizontal pass in int32: h = p[i] * w0 + p[i + 1] * w1 (exact,
 *    0..255 * 2048);
 *  - vertical pass, the arithmetic of VResizeLinearVec_32s8u's 16-bit lanes:
 *    ((b0 * (h0 >> 4)) >> 16) + ((b1 * (h1 >> 4)) >> 16), then (x + 2) >> 2.
 *    Its scalar tail (the VResizeLinear specialisation for uchar) computes
 *    the same, so the result does not depend on the vector width or on
 *    where the vector loop stops. This is not (h0*b0 + h1*b1 + 2^21) >> 22
 *    (FixedPtCast), which differs by one in places at most sizes;
 *  - not the bit-exact resampler: cv2's INTER_LINEAR on 8 bits takes this
 *    path (resize_bitExact is INTER_LINEAR_EXACT only), and its IPP path
 *    declines 8-bit linear resizes (ipp_resize: not exact).
 * The per-element math below is shared with a future CUDA kernel. */
#ifndef MR_RESIZE_CV2_UINT8_H
#define MR_RESIZE_CV2_UINT8_H

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"

typedef struct {
    int in_h, in_w;   /* source size, >= 1  */
    int out_h, out_w; /* resized size, >= 1 */
} mr_resize_cv2_uint8;

/* Bytes of scratch resize_cv2_linear_uint8 needs: the column taps, the
 * horizontal pass of the source rows the vertical one reads (int16, 3 *
 * out_w a row) and a flag per such row; 0 for a copy or a 2x2 mean. */
size_t resize_cv2_uint8_scratch_bytes(const mr_resize_cv2_uint8 *p);

/* Resizes src into dst (which must not overlap it); scratch holds
 * resize_cv2_uint8_scratch_bytes(p) bytes, 8-byte aligned. OpenMP over
 * rows. */
void resize_cv2_linear_uint8(const mr_resize_cv2_uint8 *p, const uint8_t *src, uint8_t *dst, void *scratch);

/* ---- Shared per-element math ---- */

#define MR_CV2_COEF_BITS 11 /* OpenCV's INTER_RESIZE_COEF_BITS */
#define MR_CV2_COEF_ONE (1 << MR_CV2_COEF_BITS)

/* Which path cv::resize takes for these sizes. */
typedef enum { MR_CV2U8_COPY = 0, MR_CV2U8_AREA2, MR_CV2U8_LINEAR } mr_cv2u8_path;

/* OpenCV's source pixels per output pixel, from the sizes as cv::resize
 * derives it: 1 / (out / in), both divisions in double. */
static inline MR_HD double mr_cv2u8_scale(int in_size, int out_size)
{
    return 1.0 / ((double)out_size / (double)in_size);
}

/* cv::hal::resize's is_area_fast with iscale 2: the scale rounds to 2
 * (saturate_cast<int>, half to even) and is within DBL_EPSILON of it. */
static inline MR_HD int mr_cv2u8_is_half(int in_size, int out_size)
{
    const double s = mr_cv2u8_scale(in_size, out_size);
    const double is = rint(s);
    return is == 2.0 && fabs(s - is) < DBL_EPSILON;
}

static inline MR_HD mr_cv2u8_path mr_cv2u8_path_of(const mr_resize_cv2_uint8 *p)
{
    if (p->in_h == p->out_h && p->in_w == p->out_w) return MR_CV2U8_COPY;
    if (mr_cv2u8_is_half(p->in_h, p->out_h) && mr_cv2u8_is_half(p->in_w, p->out_w)) return MR_CV2U8_AREA2;
    return MR_CV2U8_LINEAR;
}

/* Two source indices and their 11-bit weights along one axis. */
typedef struct {
    int i0, i1;
    int32_t w0, w1; /* w0 + w1 == 2048 */
} mr_cv2u8_tap;

/* A float weight -> OpenCV's short coefficient: saturate_cast<short>(w *
 * 2048.f), cvRound, half to even (rintf under the default rounding mode,
 * on the host and on a GPU). */
static inline MR_HD int32_t mr_cv2u8_coef(float w)
{
    return (int32_t)rintf(w * (float)MR_CV2_COEF_ONE);
}

/* The position of output index dst: *i = floor(f), *f = f - *i, f =
 * (float)((dst + 0.5) * scale - 0.5), in OpenCV's precisions. */
static inline MR_HD void mr_cv2u8_position(double scale, int dst, int *i, float *f)
{
    const float fp = (float)((dst + 0.5) * scale - 0.5);
    const int s = (int)floorf(fp);
    *i = s;
    *f = fp - (float)s;
}

/* A column: one tap (f = 0) outside [0, in_size - 1). */
static inline MR_HD mr_cv2u8_tap mr_cv2u8_tap_x(int in_size, double scale, int dst)
{
    int i;
    float f;
    mr_cv2u8_position(scale, dst, &i, &f);
    if (i < 0) {
        i = 0;
        f = 0.0f;
    }
    if (i >= in_size - 1) {
        i = in_size - 1;
        f = 0.0f;
    }
    mr_cv2u8_tap t;
    t.i0 = i;
    t.i1 = i + 1 < in_size ? i + 1 : i;
    t.w0 = mr_cv2u8_coef(1.0f - f);
    t.w1 = mr_cv2u8_coef(f);
    return t;
}

/* A row: the weights as computed, the two indices clamped separately. */
static inline MR_HD mr_cv2u8_tap mr_cv2u8_tap_y(int in_size, double scale, int dst)
{
    int i;
    float f;
    mr_cv2u8_position(scale, dst, &i, &f);
    mr_cv2u8_tap t;
    t.i0 = i < 0 ? 0 : i > in_size - 1 ? in_size - 1 : i;
    t.i1 = i + 1 < 0 ? 0 : i + 1 > in_size - 1 ? in_size - 1 : i + 1;
    t.w0 = mr_cv2u8_coef(1.0f - f);
    t.w1 = mr_cv2u8_coef(f);
    return t;
}

/* The horizontal pass of one channel, already shifted right by 4 as the
 * vertical pass reads it: 0..32640, an int16. */
static inline MR_HD int16_t mr_cv2u8_h(uint8_t p0, uint8_t p1, mr_cv2u8_tap t)
{
    return (int16_t)((p0 * t.w0 + p1 * t.w1) >> 4);
}

/* The vertical pass on two horizontal results (mr_cv2u8_h): each product
 * keeps its high 16 bits (v_mul_hi), then a rounding shift by 2. At most
 * (1020 + 2) >> 2 = 255, so no clamp is needed. */
static inline MR_HD uint8_t mr_cv2u8_v(int32_t h0, int32_t h1, int32_t b0, int32_t b1)
{
    return (uint8_t)((((b0 * h0) >> 16) + ((b1 * h1) >> 16) + 2) >> 2);
}

/* INTER_AREA's 2x2 mean: round half up. */
static inline MR_HD uint8_t mr_cv2u8_area2(uint8_t a, uint8_t b, uint8_t c, uint8_t d)
{
    return (uint8_t)((a + b + c + d + 2) >> 2);
}

#endif
