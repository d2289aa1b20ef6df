/* Pasting mask windows through a fixed buffer (the CUDA backend's
 * mask_paste).
 *
 * mask_paste fills host buffers that hold every detection's window
 * (mask_paste.h) back to back, window d at the sum of the earlier windows'
 * pixels. Their total is bounded only by D x input.max_image_side^2, so
 * it cannot be planned at load. Instead a fixed region of `bytes` is
 * planned, and the windows go through it in chunks, each copied out before
 * the next is pasted:
 *   - a run of whole windows that fit the region together, packed as on
 *     the host (one copy per chunk), or
 *   - when one window alone does not fit, bands of its rows.
 *
 *   region: bin [cap_px] uint8, then (soft) float [cap_px] at a 256-byte
 *   aligned offset.
 *
 * A window of any width up to the region's pixels is handled; the plan
 * makes the region at least one row of max_image_side pixels. */
#ifndef MR_MASK_PASTE_CHUNK_H
#define MR_MASK_PASTE_CHUNK_H

#include <stddef.h>

#include "ops/mask_paste.h"

/* A kernel takes one block row per window of a chunk, and CUDA's grid has
 * at most 65535 of them. */
#define MR_PASTE_CHUNK_MAX_WINDOWS 65535

typedef struct {
    int d0, nd;    /* windows d0 .. d0 + nd - 1 */
    int row0, rows; /* whole windows: row0 = 0, rows = -1; a band (nd = 1): rows [row0, row0 + rows) */
    size_t pixels; /* the chunk's pixels, packed from the region's start */
} mr_paste_chunk;

/* Pixels a region of `bytes` holds: 1 byte each, 5 with the soft windows,
 * less the alignment of the soft part. */
static inline size_t mask_paste_chunk_pixels(size_t bytes, int soft)
{
    return bytes > 256 ? (bytes - 256) / (soft ? 5 : 1) : 0;
}

/* Byte offset of the soft windows in the region. */
static inline size_t mask_paste_chunk_soft_offset(size_t cap_px) { return (cap_px + 255) & ~(size_t)255; }

/* Smallest region that holds one row of `w` pixels. */
static inline size_t mask_paste_chunk_min_bytes(int w, int soft) { return (size_t)(w > 0 ? w : 1) * (soft ? 5 : 1) + 256; }

/* The chunk that starts at window d, row `row` (0 unless bands of window d
 * were pasted already), for D windows and a region of cap_px pixels.
 * Returns 1 and fills *ch; 0 when d >= D (all done); -1 when not even one
 * row of window d fits. */
static inline int mask_paste_chunk_at(size_t cap_px, const mr_mask_window *win, int D, int d, int row,
                                      mr_paste_chunk *ch)
{
    if (d >= D) return 0;
    if (row == 0 && mask_window_pixels(win[d]) <= cap_px) {
        size_t px = 0;
        int n = 0;
        while (d + n < D && n < MR_PASTE_CHUNK_MAX_WINDOWS && px + mask_window_pixels(win[d + n]) <= cap_px)
            px += mask_window_pixels(win[d + n++]);
        ch->d0 = d, ch->nd = n, ch->row0 = 0, ch->rows = -1, ch->pixels = px;
        return 1;
    }
    if ((size_t)win[d].w > cap_px) return -1;
    size_t fit = cap_px / (size_t)win[d].w;
    int rows = fit < (size_t)(win[d].h - row) ? (int)fit : win[d].h - row;
    ch->d0 = d, ch->nd = 1, ch->row0 = row, ch->rows = rows, ch->pixels = (size_t)rows * (size_t)win[d].w;
    return 1;
}

/* The (d, row) where the chunk after ch starts. */
static inline void mask_paste_chunk_next(const mr_mask_window *win, const mr_paste_chunk *ch, int *d, int *row)
{
    if (ch->rows < 0 || ch->row0 + ch->rows >= win[ch->d0].h) {
        *d = ch->d0 + ch->nd;
        *row = 0;
    } else {
        *d = ch->d0;
        *row = ch->row0 + ch->rows;
    }
}

#endif
