/* Pasting masks through a fixed buffer (the CUDA backend's mask_paste).
 *
 * The pasted planes are D x H x W of the ORIGINAL image, bounded only by
 * input.max_image_side (20000: one binary plane could be 400 MB), so they
 * cannot be planned whole at load. Instead a fixed region of `bytes` is
 * planned, and the planes are produced in chunks, each `dets` whole planes
 * (when one plane fits) or `rows` full rows of one plane (when not), and
 * copied out before the next chunk is pasted:
 *
 *   region: bin [cap_px] uint8, then (soft) float [cap_px] at a 256-byte
 *   aligned offset; a chunk of nd planes x rows rows x W fills
 *   nd*rows*W <= cap_px pixels, laid out [nd, rows, W].
 *
 * Any image whose width fits the region (cap_px >= W) is handled; the plan
 * makes the region at least one row of max_image_side pixels. */
#ifndef MR_MASK_PASTE_CHUNK_H
#define MR_MASK_PASTE_CHUNK_H

#include <stddef.h>

typedef struct {
    int dets; /* planes per chunk (1 when rows < H) */
    int rows; /* rows per chunk (H when dets > 1) */
} mr_paste_chunk;

/* Pixels a region of `bytes` holds: 1 byte each, 5 with the soft planes,
 * less the alignment of the soft part. */
static inline size_t mask_paste_chunk_pixels(size_t bytes, int soft)
{
    return bytes > 256 ? (bytes - 256) / (soft ? 5 : 1) : 0;
}

/* Byte offset of the soft planes in the region. */
static inline size_t mask_paste_chunk_soft_offset(size_t cap_px) { return (cap_px + 255) & ~(size_t)255; }

/* Smallest region that holds one row of `w` pixels. */
static inline size_t mask_paste_chunk_min_bytes(int w, int soft) { return (size_t)(w > 0 ? w : 1) * (soft ? 5 : 1) + 256; }

/* The chunk for D planes of H x W in cap_px pixels; {0, 0} when there is
 * nothing to paste or not even one row fits. Chunks go plane-major: planes
 * d0, d0 + dets, ... and, within a plane, rows y0, y0 + rows, ... (the last
 * of each shorter). */
static inline mr_paste_chunk mask_paste_chunk(size_t cap_px, int D, int H, int W)
{
    mr_paste_chunk ch = {0, 0};
    size_t plane = (size_t)(H > 0 ? H : 0) * (size_t)(W > 0 ? W : 0);
    if (D <= 0 || plane == 0 || cap_px < (size_t)W) return ch;
    if (plane <= cap_px) {
        size_t k = cap_px / plane;
        ch.dets = k < (size_t)D ? (int)k : D;
        ch.rows = H;
    } else {
        ch.dets = 1;
        ch.rows = (int)(cap_px / (size_t)W);
    }
    return ch;
}

#endif
