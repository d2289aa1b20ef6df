/* What a detection run gives: instances with their masks, each mask kept
 * over its window (the part of the image its paste can touch) rather than
 * as a whole-image plane. Below both the model, which fills a result
 * (model_stage_paste), and io, which writes one (text, JSON, COCO, RLE,
 * drawings): neither depends on the other for these types. */
#ifndef MR_RESULT_H
#define MR_RESULT_H

#include <stddef.h>
#include <stdint.h>

#include "core/hd.h"

/* Where one detection's paste can be nonzero: [x0, x0 + w) x [y0, y0 + h),
 * inside the image; w = h = 0 (and x0 = y0 = 0) when nothing is pasted. */
typedef struct {
    int x0, y0, w, h;
} mr_mask_window;

MR_HD static inline size_t mask_window_pixels(mr_mask_window win) { return (size_t)win.w * (size_t)win.h; }

/* Whether `win` is a window of an img_h x img_w image: no negative side,
 * and an empty window anywhere or a non-empty one wholly inside (written
 * so that no sum can overflow). Every reader of a window checks this
 * first: the encoders, the drawing, the CUDA paste. */
MR_HD static inline int mask_window_fits(mr_mask_window win, int img_h, int img_w)
{
    if (win.w < 0 || win.h < 0) return 0;
    return mask_window_pixels(win) == 0 ||
           (win.x0 >= 0 && win.y0 >= 0 && win.x0 <= img_w - win.w && win.y0 <= img_h - win.h);
}

typedef struct {
    float box[4];   /* x1, y1, x2, y2 in original-image pixels */
    float score;
    int class_id;   /* 1..num_classes-1; 0 is background and never reported */
    /* The binary mask (0/1) over mask_win only, the part of the image its
     * paste can touch (ops/mask_paste.h): mask_win.h rows of mask_win.w bytes,
     * image pixel (x, y) at mask[(y - mask_win.y0) * mask_win.w + x -
     * mask_win.x0]; every pixel outside the window is 0. NULL: no mask. */
    uint8_t *mask;
    mr_mask_window mask_win;
} mr_detection;

typedef struct {
    int width, height;
    int count;
    mr_detection *dets;
    uint8_t *mask_storage; /* every detection's mask, back to back; owned, the dets point into it */
} mr_result;

/* Pixel (x, y) of the image in d's mask: 0 or 1 (0 outside the window). */
static inline int detection_mask_at(const mr_detection *d, int x, int y)
{
    const mr_mask_window *w = &d->mask_win;
    if (!d->mask || x < w->x0 || y < w->y0 || x >= w->x0 + w->w || y >= w->y0 + w->h) return 0;
    return d->mask[(size_t)(y - w->y0) * (size_t)w->w + (size_t)(x - w->x0)] != 0;
}

/* Frees what a result owns and zeroes it (a zeroed result is fine too). */
void result_free(mr_result *res);

#endif
