/* libFuzzer target: COCO RLE (engine/io/rle.c).
 *
 * Input: byte 0 and 1 give a mask size h, w in 0..63; the rest is used
 * twice.
 *  1. As a counts string (NUL-terminated copy): rle_from_string into an
 *     array of exactly strlen + 1 counts (rle.h promises no more than
 *     strlen), then rle_decode into an exactly h*w mask when it succeeds.
 *  2. As mask bits (LSB first, cycled): the mask is encoded, written as a
 *     string, parsed back and decoded; every step must succeed and the
 *     round trip must give the same mask and the same counts. rle_to_string
 *     into a buffer one byte short must return the same length and write a
 *     NUL-terminated prefix.
 *  3. A window of that mask (placed by the first four bytes): the mask
 *     with everything outside the window cleared encodes by rle_encode to
 *     the counts rle_encode_window gives from the window alone, into an
 *     array of exactly the count bound rle.h promises. */
#include <string.h>

#include "fuzz_common.h"
#include "io/rle.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2 || size > 65536) return 0;
    const int h = data[0] & 63, w = data[1] & 63;
    const size_t hw = (size_t)h * (size_t)w;
    const uint8_t *rest = data + 2;
    const size_t nrest = size - 2;

    /* 1. the bytes as a string */
    char *s = malloc(nrest + 1);
    memcpy(s, rest, nrest);
    s[nrest] = '\0';
    size_t slen = strlen(s);
    uint32_t *counts = malloc((slen + 1) * sizeof *counts);
    int n = -1;
    mr_error err = {MR_OK, ""};
    mr_status st = rle_from_string(s, counts, (int)slen + 1, &n, &err);
    if (st == MR_OK) {
        FUZZ_CHECK(n >= 0 && (size_t)n <= slen, "%d counts from a %zu-char string", n, slen);
        uint8_t *mask = malloc(hw ? hw : 1);
        st = rle_decode(counts, n, h, w, mask, &err);
        if (st == MR_OK)
            for (size_t i = 0; i < hw; i++) FUZZ_CHECK(mask[i] <= 1, "mask byte %u", mask[i]);
        free(mask);
        /* Any counts the parser accepts survive rle_to_string -> rle_from_string. */
        size_t cap = rle_string_max_bytes(n);
        char *re = malloc(cap);
        size_t len = rle_to_string(counts, n, re, cap);
        FUZZ_CHECK(len < cap, "%zu chars for %d counts, bound %zu", len, n, cap);
        uint32_t *again = malloc((len + 1) * sizeof *again);
        int m = -1;
        FUZZ_CHECK(rle_from_string(re, again, (int)len + 1, &m, &err) == MR_OK, "reparse: %s", err.msg);
        FUZZ_CHECK(m == n && memcmp(again, counts, (size_t)n * sizeof *counts) == 0, "counts changed");
        free(again);
        free(re);
    } else {
        FUZZ_CHECK(st == MR_ERR_FORMAT, "status %d: %s", (int)st, err.msg);
    }
    /* A limit below the count is MR_ERR_RANGE, never a write past it. */
    if (st == MR_OK && n > 0) {
        uint32_t *few = malloc((size_t)(n - 1) * sizeof *few + 1);
        int m = -1;
        FUZZ_CHECK(rle_from_string(s, few, n - 1, &m, NULL) == MR_ERR_RANGE, "max_counts not enforced");
        free(few);
    }
    free(counts);
    free(s);

    /* 2. the bytes as a mask: encode -> string -> parse -> decode */
    uint8_t *mask = malloc(hw ? hw : 1);
    for (size_t i = 0; i < hw; i++)
        mask[i] = nrest ? (rest[(i / 8) % nrest] >> (i % 8)) & 1 : 0;
    uint32_t *enc = malloc((hw + 1) * sizeof *enc);
    int nenc = -1;
    FUZZ_CHECK(rle_encode(mask, h, w, enc, &nenc) == MR_OK, "encode failed");
    FUZZ_CHECK(nenc >= 1 && (size_t)nenc <= hw + 1, "%d counts for %zu pixels", nenc, hw);
    size_t cap = rle_string_max_bytes(nenc);
    char *str = malloc(cap);
    size_t len = rle_to_string(enc, nenc, str, cap);
    FUZZ_CHECK(len < cap && strlen(str) == len, "string of %zu chars in %zu bytes", len, cap);
    if (len > 0) {
        char *shortbuf = malloc(len);
        size_t len2 = rle_to_string(enc, nenc, shortbuf, len);
        FUZZ_CHECK(len2 == len && strlen(shortbuf) == len - 1 && memcmp(shortbuf, str, len - 1) == 0,
                   "truncated rle_to_string");
        free(shortbuf);
    }
    uint32_t *dec = malloc((len + 1) * sizeof *dec);
    int ndec = -1;
    st = rle_from_string(str, dec, (int)len + 1, &ndec, &err);
    FUZZ_CHECK(st == MR_OK, "parsing our own string \"%s\": %s", str, err.msg);
    FUZZ_CHECK(ndec == nenc && memcmp(dec, enc, (size_t)nenc * sizeof *enc) == 0, "counts differ after the string");
    uint8_t *back = malloc(hw ? hw : 1);
    memset(back, 0xEE, hw ? hw : 1);
    st = rle_decode(dec, ndec, h, w, back, &err);
    FUZZ_CHECK(st == MR_OK, "decoding our own counts: %s", err.msg);
    FUZZ_CHECK(memcmp(back, mask, hw) == 0, "round trip changed a %dx%d mask", h, w);
    free(back);
    free(dec);
    free(str);

    /* 3. a window of the mask */
    if (nrest >= 4) {
        const int x0 = rest[0] % (w + 1), ww = rest[1] % (w - x0 + 1);
        const int y0 = rest[2] % (h + 1), wh = rest[3] % (h - y0 + 1);
        const size_t wpx = (size_t)ww * (size_t)wh, bound = (2 * wpx < hw ? 2 * wpx : hw) + 1;
        uint8_t *win = malloc(wpx ? wpx : 1);
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const int in = x >= x0 && x < x0 + ww && y >= y0 && y < y0 + wh;
                if (in) win[(size_t)(y - y0) * ww + (x - x0)] = mask[(size_t)y * w + x];
                else mask[(size_t)y * w + x] = 0;
            }
        uint32_t *wenc = malloc(bound * sizeof *wenc);
        int nwin = -1;
        FUZZ_CHECK(rle_encode_window(win, x0, y0, ww, wh, h, w, wenc, &nwin) == MR_OK, "window encode failed");
        FUZZ_CHECK(rle_encode(mask, h, w, enc, &nenc) == MR_OK, "encode failed");
        FUZZ_CHECK(nwin == nenc && memcmp(wenc, enc, (size_t)nenc * sizeof *enc) == 0,
                   "a %dx%d window at %d,%d of a %dx%d mask encodes differently", ww, wh, x0, y0, w, h);
        free(wenc);
        free(win);
    }
    free(enc);
    free(mask);
    return 0;
}
