/* BMP decoding: a small reader of our own (Debian has no maintained BMP
 * library), bounds-checked against the bytes it is given. It reads what
 * Pillow's BmpImagePlugin reads uncompressed, with Pillow's conversions:
 *  - headers: OS/2 core (12 bytes) and Windows v3..v5 (40, 64, 108, 124);
 *  - 1, 4, 8 bits: palette (BGR or BGRX entries, `colors` of them, or
 *    2^bits); indices past the palette read Pillow's default ramp (i, i, i);
 *  - 16 bits: 5-5-5 (BI_RGB, or BITFIELDS 7C00/3E0/1F) or 5-6-5 (F800/7E0/1F),
 *    each channel v * 255 / max, rounded down (Pillow's BGR;15, BGR;16);
 *  - 24 bits: BGR; 32 bits: BGRX (BI_RGB), or BITFIELDS with byte-aligned
 *    masks (Pillow's list); alpha is dropped;
 *  - bottom-up rows, or top-down when the height is negative.
 * RLE4/RLE8, JPEG-in-BMP and PNG-in-BMP are refused by name. */
#include <stdlib.h>
#include <string.h>

#include "io/image_source.h"

static uint32_t le16(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8; }
static uint32_t le32(const uint8_t *p) { return le16(p) | le16(p + 2) << 16; }

typedef struct {
    uint32_t w, h;
    int top_down;
    uint32_t bits, compression, colors;
    uint32_t mask[4]; /* r, g, b, a for BITFIELDS */
    size_t palette_at, entry;   /* palette offset, bytes per entry (3 or 4) */
    size_t pixels_at, stride;
} bmp_info;

/* The byte of a 32-bit pixel that a byte-aligned mask selects (0..3), or
 * -1 for a mask of zero. */
static int mask_byte(uint32_t m)
{
    for (int k = 0; k < 4; k++)
        if (m == 0xFFu << (8 * k)) return k;
    return -1;
}

static mr_status parse_header(const char *name, const uint8_t *b, size_t n, bmp_info *bi, mr_error *err)
{
    memset(bi, 0, sizeof *bi);
    if (n < 18) return mr_fail(err, MR_ERR_FORMAT, "%s: truncated BMP (file ends inside the header)", name);
    const uint32_t hsize = le32(b + 14), offset = le32(b + 10);
    if (hsize != 12 && hsize != 40 && hsize != 64 && hsize != 108 && hsize != 124)
        return mr_fail(err, MR_ERR_FORMAT, "%s: BMP header of %u bytes is not one Pillow reads", name,
                       (unsigned)hsize);
    if (n < 14 + (size_t)hsize) return mr_fail(err, MR_ERR_FORMAT, "%s: truncated BMP (file ends inside the header)", name);
    const uint8_t *h = b + 18; /* after the header's size field */
    size_t after = 14 + (size_t)hsize;
    if (hsize == 12) {
        bi->w = le16(h);
        bi->h = le16(h + 2);
        bi->bits = le16(h + 6);
        bi->entry = 3;
    } else {
        const int32_t height = (int32_t)le32(h + 4);
        bi->w = le32(h);
        bi->top_down = height < 0;
        bi->h = height < 0 ? (uint32_t)0 - (uint32_t)height : (uint32_t)height;
        if ((int32_t)bi->w < 0) return mr_fail(err, MR_ERR_FORMAT, "%s: corrupt BMP (negative width)", name);
        bi->bits = le16(h + 10);
        bi->compression = le32(h + 12);
        bi->colors = le32(h + 28);
        bi->entry = 4;
        if (bi->compression == 3) {
            if (hsize >= 56) {
                for (int k = 0; k < 4; k++) bi->mask[k] = le32(h + 36 + 4 * k);
            } else { /* a 40-byte header: three masks follow it */
                if (n < after + 12) return mr_fail(err, MR_ERR_FORMAT, "%s: truncated BMP (bitfield masks)", name);
                for (int k = 0; k < 3; k++) bi->mask[k] = le32(b + after + 4 * k);
                after += 12;
            }
        }
    }
    if (bi->compression == 1 || bi->compression == 2)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: RLE-compressed BMP: not supported; convert it to PNG", name);
    if (bi->compression != 0 && bi->compression != 3)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: BMP compression %u: not supported; convert it to PNG", name,
                       (unsigned)bi->compression);
    if (bi->bits != 1 && bi->bits != 4 && bi->bits != 8 && bi->bits != 16 && bi->bits != 24 && bi->bits != 32)
        return mr_fail(err, MR_ERR_FORMAT, "%s: BMP with %u bits a pixel is not supported", name, (unsigned)bi->bits);
    if (bi->compression == 3) {
        const uint32_t *m = bi->mask;
        int ok = 0;
        if (bi->bits == 32)
            ok = (m[0] | m[1] | m[2] | m[3]) == 0 ||
                 (mask_byte(m[0]) >= 0 && mask_byte(m[1]) >= 0 && mask_byte(m[2]) >= 0 && m[3] != m[0] &&
                  m[0] != m[1] && m[1] != m[2] && m[0] != m[2]);
        else if (bi->bits == 24)
            ok = m[0] == 0xFF0000 && m[1] == 0xFF00 && m[2] == 0xFF;
        else if (bi->bits == 16)
            ok = (m[0] == 0xF800 && m[1] == 0x7E0 && m[2] == 0x1F) || (m[0] == 0x7C00 && m[1] == 0x3E0 && m[2] == 0x1F);
        if (!ok) return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: BMP bitfields layout not supported", name);
        if (bi->bits == 32 && (m[0] | m[1] | m[2] | m[3]) == 0) { /* Pillow reads all-zero masks as BGRA */
            bi->mask[0] = 0xFF0000;
            bi->mask[1] = 0xFF00;
            bi->mask[2] = 0xFF;
        }
    } else if (bi->bits == 16) {
        bi->mask[0] = 0x7C00;
        bi->mask[1] = 0x3E0;
        bi->mask[2] = 0x1F;
    } else if (bi->bits == 32) {
        bi->mask[0] = 0xFF0000;
        bi->mask[1] = 0xFF00;
        bi->mask[2] = 0xFF;
    }
    if (bi->bits <= 8) {
        if (bi->colors == 0) bi->colors = 1u << bi->bits;
        if (bi->colors > 65536)
            return mr_fail(err, MR_ERR_FORMAT, "%s: corrupt BMP (palette of %u colours)", name, (unsigned)bi->colors);
        bi->palette_at = after;
        if (n - after < (size_t)bi->colors * bi->entry)
            return mr_fail(err, MR_ERR_FORMAT, "%s: truncated BMP (file ends inside the palette)", name);
    }
    bi->pixels_at = offset;
    bi->stride = (((size_t)bi->w * bi->bits + 31) >> 3) & ~(size_t)3;
    return MR_OK;
}

/* 5- or 6-bit channel to 8 bits, rounded down, as Pillow's unpackers. */
static uint8_t scale_bits(uint32_t v, uint32_t max) { return (uint8_t)(v * 255 / max); }

static void convert_row(const bmp_info *bi, const uint8_t *palette, const uint8_t *row, uint8_t *out)
{
    const uint32_t w = bi->w;
    if (bi->bits <= 8) {
        const uint32_t per_byte = 8 / bi->bits, lowmask = (1u << bi->bits) - 1;
        for (uint32_t x = 0; x < w; x++, out += 3) {
            const uint32_t shift = (per_byte - 1 - x % per_byte) * bi->bits;
            const uint32_t i = (row[x / per_byte] >> shift) & lowmask;
            if (i < bi->colors && i < 256) {
                const uint8_t *e = palette + (size_t)i * bi->entry; /* B, G, R */
                out[0] = e[2], out[1] = e[1], out[2] = e[0];
            } else {
                out[0] = out[1] = out[2] = (uint8_t)i;
            }
        }
    } else if (bi->bits == 16) {
        const int six = bi->mask[1] == 0x7E0;
        for (uint32_t x = 0; x < w; x++, out += 3) {
            const uint32_t p = le16(row + 2 * (size_t)x);
            out[0] = six ? scale_bits(p >> 11 & 31, 31) : scale_bits(p >> 10 & 31, 31);
            out[1] = six ? scale_bits(p >> 5 & 63, 63) : scale_bits(p >> 5 & 31, 31);
            out[2] = scale_bits(p & 31, 31);
        }
    } else if (bi->bits == 24) {
        for (uint32_t x = 0; x < w; x++, out += 3, row += 3) out[0] = row[2], out[1] = row[1], out[2] = row[0];
    } else {
        const int r = mask_byte(bi->mask[0]), g = mask_byte(bi->mask[1]), b = mask_byte(bi->mask[2]);
        for (uint32_t x = 0; x < w; x++, out += 3, row += 4) out[0] = row[r], out[1] = row[g], out[2] = row[b];
    }
}

mr_status image_decode_bmp(const image_source *src, int max_side, mr_image *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    const uint8_t *b;
    size_t n;
    void *owned;
    MR_TRY(image_source_read_all(src, &b, &n, &owned, err));
    bmp_info bi;
    mr_status st = parse_header(src->name, b, n, &bi, err);
    if (st == MR_OK) st = image_check_side(src->name, "BMP", bi.h, bi.w, max_side, err);
    /* Pillow raises "image file is truncated" for missing rows: so do we. */
    if (st == MR_OK && (bi.pixels_at > n || (n - bi.pixels_at) / bi.stride < bi.h))
        st = mr_fail(err, MR_ERR_FORMAT, "%s: truncated BMP (file ends inside the pixels)", src->name);
    uint8_t *pixels = st == MR_OK ? image_alloc_rgb(bi.h, bi.w) : NULL;
    if (st == MR_OK && !pixels)
        st = mr_fail(err, MR_ERR_OOM, "%s: out of memory decoding a %ux%u (HxW) BMP", src->name, (unsigned)bi.h,
                     (unsigned)bi.w);
    if (st == MR_OK) {
        for (uint32_t y = 0; y < bi.h; y++) {
            const uint32_t stored = bi.top_down ? y : bi.h - 1 - y;
            convert_row(&bi, b + bi.palette_at, b + bi.pixels_at + (size_t)stored * bi.stride,
                        pixels + (size_t)y * bi.w * 3);
        }
        out->pixels = pixels;
        out->h = (int)bi.h;
        out->w = (int)bi.w;
    }
    free(owned);
    return st;
}
