/* Pillow's bilinear resize on the CPU. Contract and shared math in
 * resize_pil.h; Pillow's structure is ImagingResampleInner in
 * src/libImaging/Resample.c. */
#include "ops/resize_pil.h"

#include <string.h>

#include "core/scratch.h"

/* Weights and bounds of one axis: out taps of ksize weights each. */
typedef struct {
    mr_pil_axis a;
    int32_t *k;  /* [out, ksize] fixed point; unused tail entries are 0 */
    int *bounds; /* [out, 2]: xmin, n */
} pil_axis_plan;

typedef struct {
    pil_axis_plan x, y;
    int need_x, need_y; /* the axis changes size */
    int y_first;        /* first source row the vertical pass reads */
    int tmp_rows;       /* rows of the horizontal pass's output     */
    uint8_t *tmp;       /* [tmp_rows, out_w, 3]                     */
} pil_plan;

/* One layout for measuring (base NULL) and for running: the sizes depend
 * only on p, so both walks take the same blocks. */
static void pil_layout(const mr_resize_pil *p, mr_scratch *sc, pil_plan *pl)
{
    pl->need_x = p->out_w != p->in_w;
    pl->need_y = p->out_h != p->in_h;
    pl->x.a = mr_pil_axis_make(p->in_w, p->out_w);
    pl->y.a = mr_pil_axis_make(p->in_h, p->out_h);
    pl->x.k = scratch_take(sc, sizeof(int32_t) * (size_t)p->out_w * (size_t)pl->x.a.ksize);
    pl->x.bounds = scratch_take(sc, sizeof(int) * 2 * (size_t)p->out_w);
    pl->y.k = scratch_take(sc, sizeof(int32_t) * (size_t)p->out_h * (size_t)pl->y.a.ksize);
    pl->y.bounds = scratch_take(sc, sizeof(int) * 2 * (size_t)p->out_h);
    /* Pillow's ybox_first / ybox_last: the horizontal pass only makes the
     * rows the vertical one reads. Without a vertical pass that is every
     * row, and the horizontal pass writes dst directly. */
    int first, n0, last, n1;
    mr_pil_bounds(&pl->y.a, p->in_h, 0, &first, &n0);
    mr_pil_bounds(&pl->y.a, p->in_h, p->out_h - 1, &last, &n1);
    pl->y_first = first;
    pl->tmp_rows = last + n1 - first;
    pl->tmp = NULL;
    if (pl->need_x && pl->need_y)
        pl->tmp = scratch_take(sc, (size_t)pl->tmp_rows * (size_t)p->out_w * 3);
}

size_t resize_pil_scratch_bytes(const mr_resize_pil *p)
{
    mr_scratch sc = {NULL, 0};
    pil_plan pl;
    pil_layout(p, &sc, &pl);
    return sc.used;
}

static void plan_axis(pil_axis_plan *ax, int in_size, int out_size)
{
    const int ks = ax->a.ksize;
#pragma omp parallel for schedule(static)
    for (int i = 0; i < out_size; i++) {
        int32_t *k = ax->k + (size_t)i * ks;
        int xmin, n;
        mr_pil_taps(&ax->a, in_size, i, &xmin, &n, k);
        for (int t = n; t < ks; t++) k[t] = 0;
        ax->bounds[2 * i] = xmin;
        ax->bounds[2 * i + 1] = n;
    }
}

/* dst[rows, out_w, 3] from src rows row0.. of width in_w. */
static void pass_horizontal(const pil_axis_plan *ax, const uint8_t *src, int in_w, int row0, int rows,
                            uint8_t *dst, int out_w)
{
    const int ks = ax->a.ksize;
#pragma omp parallel for schedule(static)
    for (int y = 0; y < rows; y++) {
        const uint8_t *s = src + (size_t)(row0 + y) * in_w * 3;
        uint8_t *d = dst + (size_t)y * out_w * 3;
        for (int x = 0; x < out_w; x++) {
            const int32_t *k = ax->k + (size_t)x * ks;
            const uint8_t *sp = s + (size_t)ax->bounds[2 * x] * 3;
            const int n = ax->bounds[2 * x + 1];
            int32_t s0 = 1 << (MR_PIL_PRECISION_BITS - 1), s1 = s0, s2 = s0;
            for (int t = 0; t < n; t++) {
                s0 += sp[3 * t + 0] * k[t];
                s1 += sp[3 * t + 1] * k[t];
                s2 += sp[3 * t + 2] * k[t];
            }
            d[3 * x + 0] = mr_pil_clip8(s0);
            d[3 * x + 1] = mr_pil_clip8(s1);
            d[3 * x + 2] = mr_pil_clip8(s2);
        }
    }
}

/* dst[out_h, w, 3] from src rows (bounds counted from src's first row). */
static void pass_vertical(const pil_axis_plan *ay, int row_shift, const uint8_t *src, int w, uint8_t *dst,
                          int out_h)
{
    const int ks = ay->a.ksize;
    const size_t stride = (size_t)w * 3;
#pragma omp parallel for schedule(static)
    for (int y = 0; y < out_h; y++) {
        const int32_t *k = ay->k + (size_t)y * ks;
        const uint8_t *s = src + (size_t)(ay->bounds[2 * y] - row_shift) * stride;
        const int n = ay->bounds[2 * y + 1];
        uint8_t *d = dst + (size_t)y * stride;
        /* Row by row over a chunk of bytes, so the source is read in order;
         * the sums are the same integers in any order. */
        enum { CHUNK = 512 };
        int32_t acc[CHUNK];
        for (size_t i0 = 0; i0 < stride; i0 += CHUNK) {
            const size_t m = stride - i0 < CHUNK ? stride - i0 : CHUNK;
            for (size_t j = 0; j < m; j++) acc[j] = 1 << (MR_PIL_PRECISION_BITS - 1);
            for (int t = 0; t < n; t++) {
                const uint8_t *row = s + (size_t)t * stride + i0;
                const int32_t kt = k[t];
                for (size_t j = 0; j < m; j++) acc[j] += row[j] * kt;
            }
            for (size_t j = 0; j < m; j++) d[i0 + j] = mr_pil_clip8(acc[j]);
        }
    }
}

void resize_pil_bilinear(const mr_resize_pil *p, const uint8_t *src, uint8_t *dst, void *scratch)
{
    mr_scratch sc = {scratch, 0};
    pil_plan pl;
    pil_layout(p, &sc, &pl);
    if (!pl.need_x && !pl.need_y) {
        memcpy(dst, src, (size_t)p->in_h * p->in_w * 3);
        return;
    }
    if (pl.need_x) plan_axis(&pl.x, p->in_w, p->out_w);
    if (pl.need_y) plan_axis(&pl.y, p->in_h, p->out_h);
    if (!pl.need_y) {
        pass_horizontal(&pl.x, src, p->in_w, 0, p->in_h, dst, p->out_w);
    } else if (!pl.need_x) {
        pass_vertical(&pl.y, 0, src, p->in_w, dst, p->out_h);
    } else {
        pass_horizontal(&pl.x, src, p->in_w, pl.y_first, pl.tmp_rows, pl.tmp, p->out_w);
        pass_vertical(&pl.y, pl.y_first, pl.tmp, p->out_w, dst, p->out_h);
    }
}
