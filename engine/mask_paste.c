/* CPU mask paste; see mask_paste.h for the contract. */
#include "mask_paste.h"

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

/* Computes the window of g row by row into exactly one of fout (probabilities)
 * or bout (binarised). Pixels outside the window are left as they are. */
static void paste_window(const mr_mask_paste_params *p, const mr_paste_geom *g, const float *padded, int img_w,
                         float *fout, uint8_t *bout)
{
    const int P = p->mask_size + 2 * p->padding;
    const float t = p->threshold;
    const int ge = p->cmp == MR_MASK_GE;
    for (int y = g->y0; y < g->y1; y++) {
        int yi0, yi1;
        float ly0, ly1;
        mask_resize_axis(P, g->h, y - g->by0, &yi0, &yi1, &ly0, &ly1);
        for (int x = g->x0; x < g->x1; x++) {
            int xi0, xi1;
            float lx0, lx1;
            mask_resize_axis(P, g->w, x - g->bx0, &xi0, &xi1, &lx0, &lx1);
            float v = mask_resize_tap(padded, P, yi0, yi1, ly0, ly1, xi0, xi1, lx0, lx1);
            size_t o = (size_t)y * img_w + x;
            if (fout)
                fout[o] = v;
            else
                bout[o] = (uint8_t)(ge ? v >= t : v > t);
        }
    }
}

/* The detectron2 rule (mask_paste.h) into fout or bout. */
static void paste_d2(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                     float *fout, uint8_t *bout)
{
    if (!(box[2] > box[0] && box[3] > box[1])) return;
    int x0, x1, y0, y1, M = p->mask_size;
    mask_paste_d2_window(box[0], box[2], img_w, &x0, &x1);
    mask_paste_d2_window(box[1], box[3], img_h, &y0, &y1);
    const float t = p->threshold;
    const int ge = p->cmp == MR_MASK_GE;
    for (int y = y0; y < y1; y++) {
        float v = mask_paste_d2_coord(y, box[1], box[3], M);
        for (int x = x0; x < x1; x++) {
            float prob = mask_paste_d2_sample(mask, M, mask_paste_d2_coord(x, box[0], box[2], M), v);
            size_t o = (size_t)y * img_w + x;
            if (fout)
                fout[o] = prob;
            else
                bout[o] = (uint8_t)(ge ? prob >= t : prob > t);
        }
    }
}

mr_status mask_paste_prob(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                          float *out, void *scratch, mr_error *err)
{
    MR_TRY(paste_check(p, img_h, img_w, err));
    memset(out, 0, (size_t)img_h * img_w * sizeof(float));
    if (p->rule == MR_PASTE_DETECTRON2) {
        paste_d2(p, mask, box, img_h, img_w, out, NULL);
        return MR_OK;
    }
    mr_paste_geom g = mask_paste_geom(p->mask_size, p->padding, box, img_h, img_w);
    paste_window(p, &g, pad_mask(p, mask, scratch), img_w, out, NULL);
    return MR_OK;
}

mr_status mask_paste_binary(const mr_mask_paste_params *p, const float *mask, const float *box, int img_h, int img_w,
                            uint8_t *out, void *scratch, mr_error *err)
{
    MR_TRY(paste_check(p, img_h, img_w, err));
    memset(out, 0, (size_t)img_h * img_w);
    if (p->rule == MR_PASTE_DETECTRON2) {
        paste_d2(p, mask, box, img_h, img_w, NULL, out);
        return MR_OK;
    }
    mr_paste_geom g = mask_paste_geom(p->mask_size, p->padding, box, img_h, img_w);
    paste_window(p, &g, pad_mask(p, mask, scratch), img_w, NULL, out);
    return MR_OK;
}
