/* COCO RLE; see rle.h for the format. */
#include "io/rle.h"

#include "core/result.h"

#include <string.h>

/* Index of the first / last nonzero byte of row[0, n), or -1: eight bytes
 * at a time through the long zero stretches a mask is mostly made of. */
static int first_nonzero(const uint8_t *row, int n)
{
    int i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t v;
        memcpy(&v, row + i, 8);
        if (v) break;
    }
    for (; i < n; i++)
        if (row[i]) return i;
    return -1;
}

static int last_nonzero(const uint8_t *row, int n)
{
    int i = n;
    for (; i >= 8; i -= 8) {
        uint64_t v;
        memcpy(&v, row + i - 8, 8);
        if (v) break;
    }
    for (; i > 0; i--)
        if (row[i - 1]) return i - 1;
    return -1;
}

int mask_bounds(const uint8_t *mask_rowmajor, int h, int w, int *y0, int *y1, int *x0, int *x1)
{
    *y0 = *y1 = *x1 = -1;
    *x0 = w;
    for (int y = 0; y < h; y++) {
        const uint8_t *row = mask_rowmajor + (size_t)y * w;
        int first = first_nonzero(row, w);
        if (first < 0) continue;
        int last = last_nonzero(row, w); /* each row is read from both ends: its zeros, not its middle */
        if (*y0 < 0) *y0 = y;
        *y1 = y;
        if (first < *x0) *x0 = first;
        if (last > *x1) *x1 = last;
    }
    if (*y0 >= 0) return 1;
    *x0 = 0;
    return 0;
}

/* The runs being built: appending `len` pixels of value v. */
typedef struct {
    uint32_t *counts;
    int k;
    uint8_t prev;
    uint32_t run;
} rle_builder;

static void push(rle_builder *b, uint8_t v, uint32_t len)
{
    if (!len) return;
    if (v != b->prev) {
        b->counts[b->k++] = b->run;
        b->run = 0;
        b->prev = v;
    }
    b->run += len;
}

/* Column-major order walks down each column of a row-major mask: a stride
 * of w bytes per pixel, a new cache line per pixel once the mask outgrows
 * the cache (1.9 MB at 1200x1600, for every detection). So the
 * foreground's bounding box is found first, by rows (sequential reads);
 * outside it every pixel is background, counted without being read, and
 * only the box is walked column by column (its rows stay in cache from
 * one column to the next). The counts are the same as a walk over every
 * pixel. */
mr_status rle_encode_window(const uint8_t *win_rowmajor, int win_x0, int win_y0, int win_w, int win_h, int h, int w,
                            uint32_t *counts, int *ncounts)
{
    *ncounts = 0;
    if (h < 0 || w < 0 || !mask_window_fits((mr_mask_window){win_x0, win_y0, win_w, win_h}, h, w))
        return MR_ERR_RANGE;
    int y0, y1, x0, x1;
    rle_builder b = {counts, 0, 0, 0};
    if (!mask_bounds(win_rowmajor, win_h, win_w, &y0, &y1, &x0, &x1)) { /* all background (or empty) */
        counts[0] = (uint32_t)((size_t)h * w);
        *ncounts = 1;
        return MR_OK;
    }
    const uint8_t *box = win_rowmajor + (size_t)y0 * win_w + x0; /* the foreground's box, in the window */
    const size_t stride = (size_t)win_w;
    y0 += win_y0, y1 += win_y0, x0 += win_x0, x1 += win_x0; /* now in image pixels */
    push(&b, 0, (uint32_t)((size_t)x0 * h + y0)); /* the columns left of the box, the top of its first */
    for (int x = x0; x <= x1; x++) {
        if (x > x0) push(&b, 0, (uint32_t)(h - 1 - y1 + y0)); /* below the box in x - 1, above it in x */
        const uint8_t *col = box + (x - x0);
        for (int y = 0; y <= y1 - y0; y++) push(&b, col[(size_t)y * stride] != 0, 1);
    }
    push(&b, 0, (uint32_t)(h - 1 - y1 + (size_t)(w - 1 - x1) * h)); /* below the box, then the columns right of it */
    counts[b.k++] = b.run;
    *ncounts = b.k;
    return MR_OK;
}

mr_status rle_encode(const uint8_t *mask_rowmajor, int h, int w, uint32_t *counts, int *ncounts)
{
    return rle_encode_window(mask_rowmajor, 0, 0, w, h, h, w, counts, ncounts);
}

size_t rle_string_max_bytes(int n)
{
    /* a delta lies in (-2^32, 2^32): 34 significant bits incl. sign -> 7 chars */
    return n > 0 ? (size_t)n * 7 + 1 : 1;
}

size_t rle_to_string(const uint32_t *counts, int n, char *out, size_t cap)
{
    size_t len = 0;
    for (int i = 0; i < n; i++) {
        int64_t x = (int64_t)counts[i];
        if (i > 2) x -= (int64_t)counts[i - 2];
        int more = 1;
        while (more) {
            int c = (int)(x & 0x1f);
            x >>= 5; /* arithmetic: the sign is carried */
            more = (c & 0x10) ? x != -1 : x != 0;
            if (more) c |= 0x20;
            if (len + 1 < cap) out[len] = (char)(c + 48);
            len++;
        }
    }
    if (cap > 0) out[len < cap ? len : cap - 1] = '\0';
    return len;
}

mr_status rle_from_string(const char *s, uint32_t *counts, int max_counts, int *ncounts, mr_error *err)
{
    int m = 0;
    size_t p = 0;
    *ncounts = 0;
    while (s[p]) {
        int64_t x = 0;
        int k = 0, more = 1;
        size_t start = p;
        while (more) {
            int c = (unsigned char)s[p] - 48;
            if (s[p] == '\0')
                return mr_fail(err, MR_ERR_FORMAT, "RLE string: value at offset %zu is cut off", start);
            if (c < 0 || c > 63)
                return mr_fail(err, MR_ERR_FORMAT, "RLE string: invalid char 0x%02x at offset %zu",
                               (unsigned char)s[p], p);
            if (k >= 12) return mr_fail(err, MR_ERR_FORMAT, "RLE string: value at offset %zu is too long", start);
            x |= (int64_t)(c & 0x1f) << (5 * k);
            more = c & 0x20;
            p++;
            k++;
            if (!more && (c & 0x10)) x |= (int64_t)(~(uint64_t)0 << (5 * k)); /* sign-extend */
        }
        if (m > 2) x += (int64_t)counts[m - 2];
        if (x < 0 || x > (int64_t)UINT32_MAX)
            return mr_fail(err, MR_ERR_FORMAT, "RLE string: count %lld at offset %zu is out of range", (long long)x,
                           start);
        if (m >= max_counts)
            return mr_fail(err, MR_ERR_RANGE, "RLE string: more than %d counts", max_counts);
        counts[m++] = (uint32_t)x;
    }
    *ncounts = m;
    return MR_OK;
}

mr_status rle_decode(const uint32_t *counts, int n, int h, int w, uint8_t *mask_rowmajor, mr_error *err)
{
    if (h < 0 || w < 0) return mr_fail(err, MR_ERR_RANGE, "RLE decode: mask size %dx%d is negative", h, w);
    uint64_t total = (uint64_t)h * (uint64_t)w, sum = 0;
    for (int i = 0; i < n; i++) sum += counts[i];
    if (sum != total)
        return mr_fail(err, MR_ERR_FORMAT, "RLE decode: counts sum to %llu, mask %dx%d has %llu pixels",
                       (unsigned long long)sum, h, w, (unsigned long long)total);
    uint64_t pos = 0; /* column-major position */
    uint8_t v = 0;
    for (int i = 0; i < n; i++, v ^= 1) {
        for (uint32_t r = 0; r < counts[i]; r++, pos++) {
            uint64_t x = pos / (uint64_t)h, y = pos % (uint64_t)h;
            mask_rowmajor[y * (uint64_t)w + x] = v;
        }
    }
    return MR_OK;
}
