/* CPU mask paste; see mask_paste.h for the contract. */
#include "ops/mask_paste.h"

#include <stdlib.h>
#include <string.h>

size_t mask_paste_scratch_bytes(int mask_size, int padding)
{
    if (mask_size <= 0 || padding < 0) return 0;
    size_t P = (size_t)mask_size + 2 * (size_t)padding;
    return P * P * sizeof(float);
}

static mr_status paste_check(const mr_mask_paste_params *p, int img_h, int img_w, mr_error *err)
{
    if (p->rule != MR_PASTE_TORCHVISION && p->rule != MR_PASTE_DETECTRON2)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "mask_paste: paste rule %d is not implemented", (int)p->rule);
    if (p->mask_size <= 0 || p->mask_size > 4096 || p->padding < 0 || p->padding > 4096)
        return mr_fail(err, MR_ERR_RANGE, "mask_paste: mask size %d / padding %d out of range", p->mask_size,
                       p->padding);
    if (img_h < 0 || img_w < 0)
        return mr_fail(err, MR_ERR_RANGE, "mask_paste: image size %dx%d is negative", img_h, img_w);
    return MR_OK;
}

static float *pad_mask(const mr_mask_paste_params *p, const float *mask, void *scratch)
{
    int M = p->mask_size, pad = p->padding, P = M + 2 * pad;
    float *padded = scratch;
    memset(padded, 0, (size_t)P * P * sizeof(float));
    for (int y = 0; y < M; y++) memcpy(padded + (size_t)(y + pad) * P + pad, mask + (size_t)y * M, M * sizeof(float));
    return padded;
}

/* Columns whose horizontal taps paste_window works out once, for every row. */
#define PASTE_COLUMNS 256

/* The torchvision rule over g's window (= win) row by row into exactly one
 * of fout (probabilities) or bout (binarised), window-relative. The
 * horizontal taps (mask_resize_axis, in double) are the same for every
 * row: worked out once per block of PASTE_COLUMNS columns instead of at
 * every pixel, where they were most of the paste's time (bench/NOTES.md
 * section 40); the values are the same. */
static void paste_window(const mr_mask_paste_params *p, const mr_paste_geom *g, const float *padded, float *fout,
                         uint8_t *bout)
{
    const int P = p->mask_size + 2 * p->padding;
    const float t = p->threshold;
    const int ge = p->cmp == MR_MASK_GE;
    const size_t ww = (size_t)(g->x1 - g->x0);
    int xi0[PASTE_COLUMNS], xi1[PASTE_COLUMNS];
    float lx0[PASTE_COLUMNS], lx1[PASTE_COLUMNS];
    for (int cx = g->x0; cx < g->x1; cx += PASTE_COLUMNS) {
        const int n = g->x1 - cx < PASTE_COLUMNS ? g->x1 - cx : PASTE_COLUMNS;
        for (int k = 0; k < n; k++) mask_resize_axis(P, g->w, cx + k - g->bx0, &xi0[k], &xi1[k], &lx0[k], &lx1[k]);
        for (int y = g->y0; y < g->y1; y++) {
            int yi0, yi1;
            float ly0, ly1;
            mask_resize_axis(P, g->h, y - g->by0, &yi0, &yi1, &ly0, &ly1);
            size_t at = (size_t)(y - g->y0) * ww + (size_t)(cx - g->x0);
            for (int k = 0; k < n; k++) {
                float v = mask_resize_tap(padded, P, yi0, yi1, ly0, ly1, xi0[k], xi1[k], lx0[k], lx1[k]);
                if (fout)
                    fout[at + k] = v;
                else
                    bout[at + k] = (uint8_t)(ge ? v >= t : v > t);
            }
        }
    }
}

/* The detectron2 rule (mask_paste.h) over win into fout or bout. */
static void paste_d2(const mr_mask_paste_params *p, const float *mask, const float *box, mr_mask_window win,
                     float *fout, uint8_t *bout)
{
    const int M = p->mask_size;
    const float t = p->threshold;
    const int ge = p->cmp == MR_MASK_GE;
    for (int y = win.y0; y < win.y0 + win.h; y++) {
        float v = mask_paste_d2_coord(y, box[1], box[3], M);
        size_t row = (size_t)(y - win.y0) * (size_t)win.w;
        for (int x = win.x0; x < win.x0 + win.w; x++) {
            float prob = mask_paste_d2_sample(mask, M, mask_paste_d2_coord(x, box[0], box[2], M), v);
            size_t o = row + (size_t)(x - win.x0);
            if (fout)
                fout[o] = prob;
            else
                bout[o] = (uint8_t)(ge ? prob >= t : prob > t);
        }
    }
}

static mr_status paste(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                       float *fout, uint8_t *bout, void *scratch, mr_error *err)
{
    MR_TRY(paste_check(p, img_h, img_w, err));
    mr_mask_window win = mask_paste_window(p, box, img_h, img_w);
    if (mask_window_pixels(win) == 0) return MR_OK;
    if (p->rule == MR_PASTE_DETECTRON2) {
        paste_d2(p, mask, box, win, fout, bout);
        return MR_OK;
    }
    mr_paste_geom g = mask_paste_geom(p->mask_size, p->padding, box, img_h, img_w);
    paste_window(p, &g, pad_mask(p, mask, scratch), fout, bout);
    return MR_OK;
}

mr_status mask_paste_prob(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                          float *out, void *scratch, mr_error *err)
{
    return paste(p, mask, box, img_h, img_w, out, NULL, scratch, err);
}

mr_status mask_paste_binary(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                            uint8_t *out, void *scratch, mr_error *err)
{
    return paste(p, mask, box, img_h, img_w, NULL, out, scratch, err);
}

/* A window of `elem`-byte pixels into a zeroed whole-image plane. */
static void window_to_plane(mr_mask_window win, const void *window, size_t elem, int img_h, int img_w, void *plane)
{
    memset(plane, 0, (size_t)img_h * (size_t)img_w * elem);
    for (int y = 0; y < win.h; y++)
        memcpy((char *)plane + ((size_t)(win.y0 + y) * img_w + win.x0) * elem,
               (const char *)window + (size_t)y * win.w * elem, (size_t)win.w * elem);
}

void mask_window_to_plane_f32(mr_mask_window win, const float *window, int img_h, int img_w, float *plane)
{
    window_to_plane(win, window, sizeof(float), img_h, img_w, plane);
}

void mask_window_to_plane_u8(mr_mask_window win, const uint8_t *window, int img_h, int img_w, uint8_t *plane)
{
    window_to_plane(win, window, 1, img_h, img_w, plane);
}

/* The whole-image plane of one paste: probabilities (prob) or the binary
 * mask (binary), whichever is not NULL, through a window-sized buffer. */
static mr_status paste_plane(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                             float *prob, uint8_t *binary, void *scratch, mr_error *err)
{
    MR_TRY(paste_check(p, img_h, img_w, err));
    mr_mask_window win = mask_paste_window(p, box, img_h, img_w);
    size_t elem = prob ? sizeof(float) : 1;
    void *w = malloc(elem * (mask_window_pixels(win) + 1));
    if (!w) return mr_fail(err, MR_ERR_OOM, "mask_paste: out of memory for a %dx%d window", win.w, win.h);
    mr_status st = paste(p, mask, box, img_h, img_w, prob ? w : NULL, prob ? NULL : w, scratch, err);
    if (st == MR_OK) window_to_plane(win, w, elem, img_h, img_w, prob ? (void *)prob : (void *)binary);
    free(w);
    return st;
}

mr_status mask_paste_prob_plane(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h,
                                int img_w, float *plane, void *scratch, mr_error *err)
{
    return paste_plane(p, mask, box, img_h, img_w, plane, NULL, scratch, err);
}

mr_status mask_paste_binary_plane(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h,
                                  int img_w, uint8_t *plane, void *scratch, mr_error *err)
{
    return paste_plane(p, mask, box, img_h, img_w, NULL, plane, scratch, err);
}
