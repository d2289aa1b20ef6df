/* OpenCV's INTER_LINEAR resize of a uint8 image on the CPU. Contract and
 * shared math in resize_cv2_uint8.h; OpenCV's structure is
 * resizeGeneric_Invoker in modules/imgproc/src/resize.cpp (a ring of
 * horizontally resized rows per thread); ours makes each source row's
 * horizontal pass once for all threads, then the vertical pass. */
#include "ops/resize_cv2_uint8.h"

#include <string.h>

#include "core/scratch.h"

typedef struct {
    mr_cv2u8_tap *xt; /* [out_w] column taps                                  */
    int y_first;      /* first source row the vertical pass reads             */
    int rows;         /* source rows y_first .. y_first + rows - 1            */
    int16_t *h;       /* [rows, out_w * 3]: their horizontal pass (>> 4)      */
    uint8_t *used;    /* [rows]: 1 where an output row reads that source row  */
} cv2u8_plan;

/* One layout for measuring (base NULL) and for running. */
static void cv2u8_layout(const mr_resize_cv2_uint8 *p, mr_scratch *sc, cv2u8_plan *pl)
{
    memset(pl, 0, sizeof *pl);
    if (mr_cv2u8_path_of(p) != MR_CV2U8_LINEAR) return;
    const double sy = mr_cv2u8_scale(p->in_h, p->out_h);
    const int first = mr_cv2u8_tap_y(p->in_h, sy, 0).i0;
    const int last = mr_cv2u8_tap_y(p->in_h, sy, p->out_h - 1).i1;
    pl->y_first = first;
    pl->rows = last - first + 1;
    pl->xt = scratch_take(sc, sizeof(mr_cv2u8_tap) * (size_t)p->out_w);
    pl->h = scratch_take(sc, sizeof(int16_t) * (size_t)pl->rows * (size_t)p->out_w * 3);
    pl->used = scratch_take(sc, (size_t)pl->rows);
}

size_t resize_cv2_uint8_scratch_bytes(const mr_resize_cv2_uint8 *p)
{
    mr_scratch sc = {NULL, 0};
    cv2u8_plan pl;
    cv2u8_layout(p, &sc, &pl);
    return sc.used;
}

/* INTER_AREA's fast path for exactly half the size on both axes. */
static void area2(const mr_resize_cv2_uint8 *p, const uint8_t *src, uint8_t *dst)
{
    const size_t src_stride = (size_t)p->in_w * 3, dst_stride = (size_t)p->out_w * 3;
#pragma omp parallel for schedule(static)
    for (int y = 0; y < p->out_h; y++) {
        const uint8_t *s0 = src + (size_t)(2 * y) * src_stride, *s1 = s0 + src_stride;
        uint8_t *d = dst + (size_t)y * dst_stride;
        for (int x = 0; x < p->out_w; x++, s0 += 6, s1 += 6, d += 3)
            for (int c = 0; c < 3; c++) d[c] = mr_cv2u8_area2(s0[c], s0[c + 3], s1[c], s1[c + 3]);
    }
}

void resize_cv2_linear_uint8(const mr_resize_cv2_uint8 *p, const uint8_t *src, uint8_t *dst, void *scratch)
{
    switch (mr_cv2u8_path_of(p)) {
    case MR_CV2U8_COPY:
        memcpy(dst, src, (size_t)p->in_h * (size_t)p->in_w * 3);
        return;
    case MR_CV2U8_AREA2:
        area2(p, src, dst);
        return;
    case MR_CV2U8_LINEAR:
        break;
    }
    mr_scratch sc = {scratch, 0};
    cv2u8_plan pl;
    cv2u8_layout(p, &sc, &pl);
    const int in_w = p->in_w, out_w = p->out_w, out_h = p->out_h;
    const size_t width = (size_t)out_w * 3;
    const double sx = mr_cv2u8_scale(in_w, out_w), sy = mr_cv2u8_scale(p->in_h, out_h);
    for (int x = 0; x < out_w; x++) pl.xt[x] = mr_cv2u8_tap_x(in_w, sx, x);
    /* A downscale reads some rows only; the others are not resized. */
    memset(pl.used, 0, (size_t)pl.rows);
    for (int y = 0; y < out_h; y++) {
        const mr_cv2u8_tap t = mr_cv2u8_tap_y(p->in_h, sy, y);
        pl.used[t.i0 - pl.y_first] = 1;
        pl.used[t.i1 - pl.y_first] = 1;
    }
    const mr_cv2u8_tap *xt = pl.xt;
#pragma omp parallel for schedule(static)
    for (int r = 0; r < pl.rows; r++) {
        if (!pl.used[r]) continue;
        const uint8_t *s = src + (size_t)(pl.y_first + r) * (size_t)in_w * 3;
        int16_t *h = pl.h + (size_t)r * width;
        for (int x = 0; x < out_w; x++, h += 3) {
            const mr_cv2u8_tap t = xt[x];
            const uint8_t *a = s + (size_t)t.i0 * 3, *b = s + (size_t)t.i1 * 3;
            h[0] = mr_cv2u8_h(a[0], b[0], t);
            h[1] = mr_cv2u8_h(a[1], b[1], t);
            h[2] = mr_cv2u8_h(a[2], b[2], t);
        }
    }
#pragma omp parallel for schedule(static)
    for (int y = 0; y < out_h; y++) {
        const mr_cv2u8_tap t = mr_cv2u8_tap_y(p->in_h, sy, y);
        const int16_t *h0 = pl.h + (size_t)(t.i0 - pl.y_first) * width;
        const int16_t *h1 = pl.h + (size_t)(t.i1 - pl.y_first) * width;
        const int32_t b0 = t.w0, b1 = t.w1;
        uint8_t *d = dst + (size_t)y * width;
        for (size_t j = 0; j < width; j++) d[j] = mr_cv2u8_v(h0[j], h1[j], b0, b1);
    }
}
