/* COCO run-length encoding of binary masks, as pycocotools
 * (`common/maskApi.c: rleEncode, rleDecode, rleToString, rleFrString`).
 *
 * counts: uint32 run lengths over the mask in column-major (Fortran)
 * order, i.e. down each column, columns left to right; the first run
 * counts zeros (0 when the first pixel is set), then runs alternate. Their
 * sum is h*w. A mask has at most h*w + 1 runs; an empty (h*w = 0) mask is
 * the single count 0, as pycocotools.
 *
 * Masks here are uint8 row-major [h*w] (the engine's layout); any nonzero
 * byte is foreground (pycocotools compares raw bytes, so a mask holding
 * values other than 0/1 would give it extra runs; ours are 0/1).
 *
 * String form ("counts" in COCO JSON): each count, from the fourth on
 * (index i > 2, pycocotools' exact rule), is replaced by its difference
 * from counts[i-2]; the value is written low 5 bits first, 5 bits per
 * char, 0x20 set on every char but the last of a value, the last char's
 * 0x10 bit carrying the sign, each char + 48 (so chars '0'..'o'). */
#ifndef MR_RLE_H
#define MR_RLE_H

#include "core/status.h"

#include <stddef.h>
#include <stdint.h>

/* The bounding box of a row-major mask's nonzero pixels: rows [y0, y1] and
 * columns [x0, x1], inclusive; returns 0 (and y0 = y1 = x1 = -1, x0 = 0)
 * when there are none. Reads each row from both ends up to its first and
 * last nonzero byte, eight bytes at a time: for a detection's mask, about
 * the image's background once, sequentially. */
int mask_bounds(const uint8_t *mask_rowmajor, int h, int w, int *y0, int *y1, int *x0, int *x1);

/* counts must hold h*w + 1 entries. MR_ERR_RANGE if h or w is negative.
 * Only the foreground's bounding box (mask_bounds) is walked in column
 * order; the counts are those of a walk over every pixel. */
mr_status rle_encode(const uint8_t *mask_rowmajor, int h, int w, uint32_t *counts, int *ncounts);

/* The same counts for an h x w mask held only over a window: win_h rows of
 * win_w bytes, row-major, its (0, 0) at image pixel (win_x0, win_y0); every
 * pixel outside it is 0. counts must hold min(2*win_w*win_h, h*w) + 1
 * entries (one-row window, all set: a run per pixel, with a background run
 * between columns). MR_ERR_RANGE for a negative size or a non-empty window not
 * inside the image. */
mr_status rle_encode_window(const uint8_t *win_rowmajor, int win_x0, int win_y0, int win_w, int win_h, int h, int w,
                            uint32_t *counts, int *ncounts);

/* Bytes that always suffice for rle_to_string of n counts (with the NUL). */
size_t rle_string_max_bytes(int n);

/* Writes the string and a NUL into out (at most cap bytes, snprintf-style)
 * and returns its length without the NUL; a return >= cap means it was
 * truncated. */
size_t rle_to_string(const uint32_t *counts, int n, char *out, size_t cap);

/* Parses a counts string into counts[max_counts]. MR_ERR_FORMAT (with the
 * offending position in err) for a char outside '0'..'o', a value cut off
 * at the end, an over-long value or a count outside uint32;
 * MR_ERR_RANGE if more than max_counts counts. err may be NULL. A string
 * of n counts never has more than strlen(s) counts. */
mr_status rle_from_string(const char *s, uint32_t *counts, int max_counts, int *ncounts, mr_error *err);

/* Expands counts to a row-major uint8 0/1 mask. MR_ERR_FORMAT if the
 * counts do not sum to h*w. err may be NULL. */
mr_status rle_decode(const uint32_t *counts, int n, int h, int w, uint8_t *mask_rowmajor, mr_error *err);

#endif
