/* OpenCV's INTER_LINEAR resize on the CPU. Contract and shared math in
 * resize_cv2.h. */
#include "ops/resize_cv2.h"

size_t resize_cv2_scratch_bytes(const mr_resize_cv2 *p)
{
    return (size_t)p->out_w * sizeof(mr_cv2_tap);
}

void pixel_lut_apply(const mr_pixel_lut *lut, const uint8_t *src, int h, int w, float *dst, size_t dst_row_stride)
{
    const int s0 = lut->src_ch[0], s1 = lut->src_ch[1], s2 = lut->src_ch[2];
#pragma omp parallel for schedule(static)
    for (int y = 0; y < h; y++) {
        const uint8_t *s = src + (size_t)y * w * 3;
        float *d = dst + (size_t)y * dst_row_stride;
        for (int x = 0; x < w; x++, s += 3, d += 3) {
            d[0] = lut->v[0][s[s0]];
            d[1] = lut->v[1][s[s1]];
            d[2] = lut->v[2][s[s2]];
        }
    }
}

void resize_cv2_linear(const mr_resize_cv2 *p, const uint8_t *src, const mr_pixel_lut *lut, float *dst,
                       size_t dst_row_stride, void *scratch)
{
    const int in_h = p->in_h, in_w = p->in_w, out_h = p->out_h, out_w = p->out_w;
    const int s0 = lut->src_ch[0], s1 = lut->src_ch[1], s2 = lut->src_ch[2];
    if (in_h == out_h && in_w == out_w) {
        pixel_lut_apply(lut, src, out_h, out_w, dst, dst_row_stride);
        return;
    }
    /* OpenCV's scale_x = 1./inv_scale_x, in double. */
    const double scale_x = 1.0 / p->fx, scale_y = 1.0 / p->fy;
    mr_cv2_tap *xt = scratch;
    for (int x = 0; x < out_w; x++) xt[x] = mr_cv2_tap_x(in_w, scale_x, x);
    const int sc[3] = {s0, s1, s2};
#pragma omp parallel for schedule(static)
    for (int y = 0; y < out_h; y++) {
        const mr_cv2_tap ty = mr_cv2_tap_y(in_h, scale_y, y);
        const uint8_t *r0 = src + (size_t)ty.i0 * in_w * 3;
        const uint8_t *r1 = src + (size_t)ty.i1 * in_w * 3;
        float *d = dst + (size_t)y * dst_row_stride;
        for (int x = 0; x < out_w; x++) {
            const mr_cv2_tap tx = xt[x];
            for (int c = 0; c < 3; c++) {
                const float *v = lut->v[c];
                const int o0 = tx.i0 * 3 + sc[c], o1 = tx.i1 * 3 + sc[c];
                const float t0 = mr_cv2_lerp(v[r0[o0]], v[r0[o1]], tx.w0, tx.w1);
                const float t1 = mr_cv2_lerp(v[r1[o0]], v[r1[o1]], tx.w0, tx.w1);
                d[x * 3 + c] = mr_cv2_lerp(t0, t1, ty.w0, ty.w1);
            }
        }
    }
}
