/* TIFF decoding through libtiff, the first page only (image->frames says
 * how many there are). The samples are read as stored and converted as
 * Pillow 9.4 converts the mode its TiffImagePlugin opens them as, so the
 * RGB equals Pillow's convert("RGB"):
 *  - grey (MinIsBlack, MinIsWhite inverted), 1, 8 or 16 bits, with or
 *    without an extra sample: replicated; 16-bit samples keep their high
 *    byte (Pillow's I;16 -> RGB clamps to 255 instead: the same deliberate
 *    difference as for 16-bit grey PNGs, image.h);
 *  - RGB, 8 or 16 bits (high byte, as Pillow's RGB;16 unpackers), with
 *    alpha dropped; associated (premultiplied) alpha is first divided out
 *    as Pillow's RGBa unpacker does (v * 255 / a, 0 where a is 0);
 *  - palette, 1..8 bits: the colormap's high bytes, as Pillow;
 *  - CMYK, 8 bits: Pillow's CMYK -> RGB (image_cmyk_to_rgb).
 * Anything else libtiff can read (YCbCr, tiles, separate planes, 2- and
 * 4-bit grey, ...) goes through libtiff's own RGBA conversion
 * (TIFFReadRGBAImageOriented): close to Pillow, not promised bit for bit.
 * Floating-point and signed samples are refused by name. libtiff's errors
 * and warnings go to the job, never to stderr. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <tiffio.h>

#include "io/image_source.h"

/* libtiff allocates a strip or tile buffer, directory arrays and so on:
 * none of these is legitimately larger for an image within the side limit. */
#define TIFF_MAX_ALLOC ((tmsize_t)256 << 20)

typedef struct {
    const uint8_t *b;
    size_t n, pos;
    char msg[200]; /* libtiff's first error */
} tiff_job;

static tmsize_t mem_read(thandle_t h, void *buf, tmsize_t size)
{
    tiff_job *j = h;
    if (size < 0) return -1;
    size_t k = j->n - j->pos < (size_t)size ? j->n - j->pos : (size_t)size;
    memcpy(buf, j->b + j->pos, k);
    j->pos += k;
    return (tmsize_t)k;
}

static tmsize_t mem_write(thandle_t h, void *buf, tmsize_t size)
{
    (void)h, (void)buf, (void)size;
    return -1;
}

static toff_t mem_seek(thandle_t h, toff_t off, int whence)
{
    tiff_job *j = h;
    uint64_t base = whence == SEEK_CUR ? j->pos : whence == SEEK_END ? j->n : 0;
    if (off > UINT64_MAX - base || base + off > j->n) return (toff_t)-1;
    j->pos = (size_t)(base + off);
    return j->pos;
}

static int mem_close(thandle_t h)
{
    (void)h;
    return 0;
}

static toff_t mem_size(thandle_t h) { return ((tiff_job *)h)->n; }

static int mem_map(thandle_t h, void **base, toff_t *size)
{
    tiff_job *j = h;
    *base = (void *)j->b;
    *size = j->n;
    return 1;
}

static void mem_unmap(thandle_t h, void *base, toff_t size) { (void)h, (void)base, (void)size; }

static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif, (void)module;
    tiff_job *j = user;
    if (!j->msg[0]) vsnprintf(j->msg, sizeof j->msg, fmt, ap);
    return 1; /* handled: libtiff does not print */
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap)
{
    (void)tif, (void)user, (void)module, (void)fmt, (void)ap;
    return 1; /* unknown tags and the like: Pillow ignores them too */
}

typedef struct {
    uint32_t w, h;
    uint16_t bits, spp, photo, planar, format, extra_kind;
    int assoc_alpha; /* the first extra sample is premultiplied alpha */
    uint16_t *cmap[3];
} tiff_layout;

/* 1: our own conversion reads this layout (see the top of the file). */
static int own_layout(TIFF *tif, const tiff_layout *t)
{
    if (TIFFIsTiled(tif) || (t->planar != PLANARCONFIG_CONTIG && t->spp > 1)) return 0;
    switch (t->photo) {
    case PHOTOMETRIC_MINISBLACK:
    case PHOTOMETRIC_MINISWHITE: return (t->bits == 1 || t->bits == 8 || t->bits == 16) && t->spp >= 1 && t->spp <= 2;
    case PHOTOMETRIC_RGB: return (t->bits == 8 || t->bits == 16) && t->spp >= 3 && t->spp <= 4;
    case PHOTOMETRIC_PALETTE: return t->bits <= 8 && t->spp == 1 && t->cmap[0];
    case PHOTOMETRIC_SEPARATED: return t->bits == 8 && t->spp == 4;
    default: return 0;
    }
}

/* Sample s (0..spp-1) of pixel x of a stored row, as 8 bits: the high
 * byte of a 16-bit sample (native byte order after libtiff), the bits of
 * a sub-byte one unscaled. */
static uint32_t sample(const tiff_layout *t, const uint8_t *row, uint32_t x, uint32_t s)
{
    const size_t i = (size_t)x * t->spp + s;
    if (t->bits == 16) {
        uint16_t v;
        memcpy(&v, row + 2 * i, 2);
        return v >> 8;
    }
    if (t->bits == 8) return row[i];
    const size_t bit = i * t->bits;
    return (uint32_t)(row[bit / 8] >> (8 - t->bits - bit % 8)) & ((1u << t->bits) - 1);
}

static uint8_t unpremultiply(uint32_t v, uint32_t a)
{
    if (a == 0) return 0;
    const uint32_t u = v * 255 / a;
    return (uint8_t)(u > 255 ? 255 : u);
}

static void convert_row(const tiff_layout *t, const uint8_t *row, uint8_t *out)
{
    for (uint32_t x = 0; x < t->w; x++, out += 3) {
        switch (t->photo) {
        case PHOTOMETRIC_MINISBLACK:
        case PHOTOMETRIC_MINISWHITE: {
            uint32_t v = sample(t, row, x, 0);
            if (t->bits == 1) v = v ? 255 : 0;
            if (t->photo == PHOTOMETRIC_MINISWHITE) v = 255 - v;
            out[0] = out[1] = out[2] = (uint8_t)v;
            break;
        }
        case PHOTOMETRIC_RGB:
            for (int c = 0; c < 3; c++) {
                uint32_t v = sample(t, row, x, (uint32_t)c);
                out[c] = t->assoc_alpha ? unpremultiply(v, sample(t, row, x, 3)) : (uint8_t)v;
            }
            break;
        case PHOTOMETRIC_PALETTE: {
            const uint32_t i = sample(t, row, x, 0);
            for (int c = 0; c < 3; c++) out[c] = (uint8_t)(t->cmap[c][i] >> 8);
            break;
        }
        default: { /* CMYK */
            const uint8_t cmyk[4] = {(uint8_t)sample(t, row, x, 0), (uint8_t)sample(t, row, x, 1),
                                     (uint8_t)sample(t, row, x, 2), (uint8_t)sample(t, row, x, 3)};
            image_cmyk_to_rgb(cmyk, out, 1);
        }
        }
    }
}

static mr_status read_own(TIFF *tif, const tiff_layout *t, tiff_job *j, const char *name, uint8_t *pixels,
                          mr_error *err)
{
    uint8_t *row = malloc((size_t)TIFFScanlineSize64(tif) + 8);
    if (!row) return mr_fail(err, MR_ERR_OOM, "%s: out of memory reading a TIFF row", name);
    /* A row holds w * spp samples: libtiff's scanline size says so. */
    if ((uint64_t)TIFFScanlineSize64(tif) * 8 < (uint64_t)t->w * t->spp * t->bits) {
        free(row);
        return mr_fail(err, MR_ERR_FORMAT, "%s: corrupt TIFF (row size)", name);
    }
    for (uint32_t y = 0; y < t->h; y++) {
        if (TIFFReadScanline(tif, row, y, 0) < 0) {
            free(row);
            return mr_fail(err, MR_ERR_FORMAT, "%s: corrupt or truncated TIFF (row %u: %s)", name, (unsigned)y,
                           j->msg[0] ? j->msg : "unreadable");
        }
        convert_row(t, row, pixels + (size_t)y * t->w * 3);
    }
    free(row);
    return MR_OK;
}

/* libtiff's RGBA path, for the layouts read_own does not take. */
static mr_status read_rgba(TIFF *tif, const tiff_layout *t, tiff_job *j, const char *name, uint8_t *pixels,
                           mr_error *err)
{
    char why[1024] = "";
    if (!TIFFRGBAImageOK(tif, why))
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: TIFF layout not supported (%s); convert it to PNG", name, why);
    const size_t count = (size_t)t->w * t->h;
    uint32_t *raster = malloc(count * sizeof *raster);
    if (!raster) return mr_fail(err, MR_ERR_OOM, "%s: out of memory decoding a TIFF", name);
    if (!TIFFReadRGBAImageOriented(tif, t->w, t->h, raster, ORIENTATION_TOPLEFT, 0)) {
        free(raster);
        return mr_fail(err, MR_ERR_FORMAT, "%s: corrupt or truncated TIFF (%s)", name,
                       j->msg[0] ? j->msg : "unreadable");
    }
    for (size_t i = 0; i < count; i++) {
        pixels[3 * i] = (uint8_t)TIFFGetR(raster[i]);
        pixels[3 * i + 1] = (uint8_t)TIFFGetG(raster[i]);
        pixels[3 * i + 2] = (uint8_t)TIFFGetB(raster[i]);
    }
    free(raster);
    return MR_OK;
}

static mr_status decode(TIFF *tif, tiff_job *j, const char *name, int max_side, mr_image *out, mr_error *err)
{
    tiff_layout t;
    memset(&t, 0, sizeof t);
    uint16_t nextra = 0, *extra = NULL;
    TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &t.w);
    TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &t.h);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &t.bits);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &t.spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_PLANARCONFIG, &t.planar);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &t.format);
    if (!TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &t.photo)) t.photo = t.spp >= 3 ? PHOTOMETRIC_RGB : PHOTOMETRIC_MINISBLACK;
    if (TIFFGetField(tif, TIFFTAG_EXTRASAMPLES, &nextra, &extra) && nextra > 0)
        t.assoc_alpha = extra[0] == EXTRASAMPLE_ASSOCALPHA;
    if (t.photo == PHOTOMETRIC_PALETTE && !TIFFGetField(tif, TIFFTAG_COLORMAP, &t.cmap[0], &t.cmap[1], &t.cmap[2]))
        t.cmap[0] = NULL;
    MR_TRY(image_check_side(name, "TIFF", t.h, t.w, max_side, err));
    if (t.format == SAMPLEFORMAT_IEEEFP || t.format == SAMPLEFORMAT_INT)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: TIFF with %s samples: not supported; convert it to 8 or 16-bit",
                       name, t.format == SAMPLEFORMAT_INT ? "signed" : "floating-point");
    uint8_t *pixels = image_alloc_rgb(t.h, t.w);
    if (!pixels) return mr_fail(err, MR_ERR_OOM, "%s: out of memory decoding a %ux%u (HxW) TIFF", name,
                                (unsigned)t.h, (unsigned)t.w);
    mr_status st = own_layout(tif, &t) ? read_own(tif, &t, j, name, pixels, err)
                                        : read_rgba(tif, &t, j, name, pixels, err);
    if (st != MR_OK) {
        free(pixels);
        return st;
    }
    out->pixels = pixels;
    out->h = (int)t.h;
    out->w = (int)t.w;
    return MR_OK;
}

mr_status image_decode_tiff(const image_source *src, int max_side, mr_image *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    tiff_job j;
    memset(&j, 0, sizeof j);
    void *owned;
    MR_TRY(image_source_read_all(src, &j.b, &j.n, &owned, err));
    TIFFOpenOptions *opts = TIFFOpenOptionsAlloc();
    if (!opts) {
        free(owned);
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory", src->name);
    }
    TIFFOpenOptionsSetMaxSingleMemAlloc(opts, TIFF_MAX_ALLOC);
    TIFFOpenOptionsSetErrorHandlerExtR(opts, on_error, &j);
    TIFFOpenOptionsSetWarningHandlerExtR(opts, on_warning, &j);
    TIFF *tif = TIFFClientOpenExt(src->name, "r", &j, mem_read, mem_write, mem_seek, mem_close, mem_size, mem_map,
                                  mem_unmap, opts);
    TIFFOpenOptionsFree(opts);
    mr_status st;
    if (!tif) {
        st = mr_fail(err, MR_ERR_FORMAT, "%s: corrupt TIFF (%s)", src->name, j.msg[0] ? j.msg : "unreadable header");
    } else {
        st = decode(tif, &j, src->name, max_side, out, err);
        if (st == MR_OK) {
            const tdir_t pages = TIFFNumberOfDirectories(tif);
            out->frames = pages > 1 ? (int)pages : 0;
        }
        TIFFClose(tif);
    }
    free(owned);
    return st;
}
