/* COCO RLE; see rle.h for the format. */
#include "rle.h"

#include <string.h>

mr_status rle_encode(const uint8_t *mask_rowmajor, int h, int w, uint32_t *counts, int *ncounts)
{
    *ncounts = 0;
    if (h < 0 || w < 0) return MR_ERR_RANGE;
    int k = 0;
    uint8_t prev = 0;
    uint32_t run = 0;
    for (int x = 0; x < w; x++) {
        const uint8_t *col = mask_rowmajor + x;
        for (int y = 0; y < h; y++) {
            uint8_t v = col[(size_t)y * w] != 0;
            if (v != prev) {
                counts[k++] = run;
                run = 0;
                prev = v;
            }
            run++;
        }
    }
    counts[k++] = run;
    *ncounts = k;
    return MR_OK;
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
