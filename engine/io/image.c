/* Image decoding (libpng, libjpeg-turbo) and the EXIF orientation.
 * Contracts in image.h; geometry and preprocessing are image_preprocess.c. */
#include "io/image.h"
#include "io/image_source.h"

#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>
#include <png.h>

static const uint8_t png_signature[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};

void image_free(mr_image *img)
{
    if (!img) return;
    free(img->pixels);
    img->pixels = NULL;
    img->h = img->w = img->frames = 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | (uint32_t)p[3];
}

static void close_source(FILE *f)
{
    if (f) fclose(f);
}

/* ---- PNG ---------------------------------------------------------------- */

/* Everything the decoder changes between setjmp and a libpng error lives
 * here, in the caller's frame, so nothing needs `volatile` (C11 7.13.2.1). */
typedef struct {
    FILE *f;
    int truncated;  /* the file ended early */
    int io_error;   /* fread failed */
    int oom;        /* our own allocation failed */
    char msg[200];  /* libpng's message */
    uint8_t *pixels;
    png_bytep *rows;
    uint32_t h, w;
} png_job;

static void png_read_cb(png_structp png, png_bytep data, size_t n)
{
    png_job *job = png_get_io_ptr(png);
    if (fread(data, 1, n, job->f) != n) {
        if (ferror(job->f))
            job->io_error = 1;
        else
            job->truncated = 1;
        png_error(png, "file ends early");
    }
}

static void png_error_cb(png_structp png, png_const_charp msg)
{
    png_job *job = png_get_error_ptr(png);
    snprintf(job->msg, sizeof job->msg, "%s", msg);
    png_longjmp(png, 1);
}

/* Warnings (bad ancillary CRCs, odd sRGB profiles) are not the user's
 * problem: Pillow ignores them too. */
static void png_warning_cb(png_structp png, png_const_charp msg)
{
    (void)png;
    (void)msg;
}

/* Decodes into job->pixels; returns 0, or 1 after a libpng error (job says
 * which). Frees nothing it did not create except through job. */
static int png_decode(png_job *job, int max_side)
{
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, job, png_error_cb, png_warning_cb);
    if (!png) {
        job->oom = 1;
        return 1;
    }
    png_infop info = png_create_info_struct(png);
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        job->oom = 1;
        return 1;
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_read_struct(&png, &info, NULL);
        return 1;
    }
    png_set_read_fn(png, job, png_read_cb);
    if (max_side > 0) png_set_user_limits(png, (png_uint_32)max_side, (png_uint_32)max_side);
    /* Skip, unread, every ancillary chunk but tRNS (libpng's list for -1): none
     * changes the pixels kept here (no gamma, no background), and libpng would
     * otherwise allocate a text or profile chunk's declared length, up to 2 GiB,
     * before finding that a 50-byte file ends (its size check only warns). */
    png_set_keep_unknown_chunks(png, PNG_HANDLE_CHUNK_NEVER, NULL, -1);
    png_read_info(png, info);

    png_uint_32 w, h;
    int depth, ctype, interlace;
    png_get_IHDR(png, info, &w, &h, &depth, &ctype, &interlace, NULL, NULL);
    /* To 8-bit RGB: palette -> RGB (tRNS becomes alpha, stripped below), low
     * grey depths -> 8, 16 -> 8 keeping the high byte (strip, not scale, as
     * Pillow), alpha dropped, grey replicated. */
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (depth == 16) png_set_strip_16(png);
    png_set_strip_alpha(png);
    if (ctype == PNG_COLOR_TYPE_GRAY || ctype == PNG_COLOR_TYPE_GRAY_ALPHA) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_channels(png, info) != 3 || png_get_bit_depth(png, info) != 8 ||
        png_get_rowbytes(png, info) != (size_t)w * 3)
        png_error(png, "unexpected layout after conversion to 8-bit RGB");

    job->h = h;
    job->w = w;
    job->pixels = image_alloc_rgb(h, w);
    job->rows = malloc((size_t)h * sizeof *job->rows);
    if (!job->pixels || !job->rows) {
        job->oom = 1;
        png_error(png, "out of memory");
    }
    for (png_uint_32 y = 0; y < h; y++) job->rows[y] = job->pixels + (size_t)y * w * 3;
    png_read_image(png, job->rows);
    png_read_end(png, NULL);
    png_destroy_read_struct(&png, &info, NULL);
    return 0;
}

static mr_status load_png(const image_source *src, int max_side, mr_image *out, mr_error *err)
{
    const char *path = src->name;
    out->pixels = NULL;
    out->h = out->w = out->frames = 0;

    /* Signature and IHDR size first, so an oversized or empty image is
     * refused with a plain message before libpng allocates anything. */
    uint8_t head[24];
    size_t got;
    FILE *f;
    MR_TRY(image_source_open(src, &f, head, sizeof head, &got, err));
    mr_status st = MR_OK;
    if (got == 0)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: empty file", path);
    else if (got < 8 || memcmp(head, png_signature, 8) != 0)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: not a PNG file (bad signature)", path);
    else if (got < sizeof head)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: truncated PNG (file ends inside the header)", path);
    else if (memcmp(head + 12, "IHDR", 4) != 0)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: corrupt PNG (first chunk is not IHDR)", path);
    else
        st = image_check_side(path, "PNG", be32(head + 20), be32(head + 16), max_side, err);
    if (st != MR_OK) {
        close_source(f);
        return st;
    }

    png_job job;
    memset(&job, 0, sizeof job);
    job.f = f;
    int failed = png_decode(&job, max_side);
    fclose(job.f);
    free(job.rows);
    if (!failed) {
        out->pixels = job.pixels;
        out->h = (int)job.h;
        out->w = (int)job.w;
        return MR_OK;
    }
    free(job.pixels);
    if (job.oom)
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory decoding a %ux%u (HxW) PNG", path,
                       (unsigned)be32(head + 20), (unsigned)be32(head + 16));
    if (job.io_error) return mr_fail(err, MR_ERR_IO, "%s: read error", path);
    if (job.truncated) return mr_fail(err, MR_ERR_FORMAT, "%s: truncated PNG (file ends early)", path);
    return mr_fail(err, MR_ERR_FORMAT, "%s: corrupt PNG (%s)", path, job.msg);
}

/* ---- EXIF orientation -------------------------------------------------- */

static uint32_t tiff_u16(const uint8_t *p, int big_endian)
{
    return big_endian ? (uint32_t)p[0] << 8 | p[1] : (uint32_t)p[1] << 8 | p[0];
}

static uint32_t tiff_u32(const uint8_t *p, int big_endian)
{
    return big_endian ? be32(p)
                      : (uint32_t)p[3] << 24 | (uint32_t)p[2] << 16 | (uint32_t)p[1] << 8 | p[0];
}

/* Bytes per value of a TIFF field type, 0 for a type TIFF does not define
 * (Pillow skips those entries). */
static uint32_t tiff_type_size(uint32_t type)
{
    switch (type) {
    case 1: case 2: case 6: case 7: return 1;    /* BYTE ASCII SBYTE UNDEFINED */
    case 3: case 8: return 2;                    /* SHORT SSHORT */
    case 4: case 9: case 11: case 13: return 4;  /* LONG SLONG FLOAT IFD */
    case 5: case 10: case 12: case 16: return 8; /* RATIONAL SRATIONAL DOUBLE LONG8 */
    default: return 0;
    }
}

static uint64_t tiff_u64(const uint8_t *p, int big_endian)
{
    const uint64_t a = tiff_u32(p, big_endian), b = tiff_u32(p + 4, big_endian);
    return big_endian ? a << 32 | b : b << 32 | a;
}

/* The first value of a field as Pillow compares it with the orientations
 * 1..8 (a Python int, float or Fraction equal to one of them counts), or
 * NaN where it cannot equal one (BYTE and UNDEFINED load as bytes, ASCII
 * as str; a zero denominator as NaN). v holds at least one value. */
static double tiff_first_value(const uint8_t *v, uint32_t type, int be)
{
    switch (type) {
    case 3: return tiff_u16(v, be);
    case 4: case 13: return tiff_u32(v, be);
    case 16: return (double)tiff_u64(v, be);
    case 6: return (int8_t)v[0];
    case 8: return (int16_t)tiff_u16(v, be);
    case 9: return (int32_t)tiff_u32(v, be);
    case 11: {
        const uint32_t bits = tiff_u32(v, be);
        float f;
        memcpy(&f, &bits, sizeof f);
        return f;
    }
    case 12: {
        const uint64_t bits = tiff_u64(v, be);
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    case 5: case 10: {
        /* num/den, exact: 1..8 only when den divides num. */
        const uint32_t n = tiff_u32(v, be), d = tiff_u32(v + 4, be);
        const int64_t num = type == 5 ? (int64_t)n : (int64_t)(int32_t)n;
        const int64_t den = type == 5 ? (int64_t)d : (int64_t)(int32_t)d;
        if (den == 0 || num % den != 0) return NAN;
        return (double)(num / den);
    }
    default: return NAN;
    }
}

int image_exif_orientation(const uint8_t *app1, size_t n)
{
    static const uint8_t sig[6] = {'E', 'x', 'i', 'f', 0, 0};
    if (!app1 || n < sizeof sig || memcmp(app1, sig, sizeof sig) != 0) return 1;
    const uint8_t *t = app1 + sizeof sig; /* the TIFF block; offsets count from here */
    n -= sizeof sig;
    if (n < 8) return 1;
    int be;
    if (t[0] == 'I' && t[1] == 'I')
        be = 0;
    else if (t[0] == 'M' && t[1] == 'M')
        be = 1;
    else
        return 1;
    /* 42, in either byte order: Pillow accepts the swapped one too. */
    if (!((t[2] == 0x2A && t[3] == 0) || (t[2] == 0 && t[3] == 0x2A))) return 1;
    const uint32_t ifd = tiff_u32(t + 4, be);
    if (ifd > n || n - ifd < 2) return 1;
    const uint32_t count = tiff_u16(t + ifd, be);
    int orientation = 1;
    for (uint32_t i = 0; i < count; i++) {
        const size_t e = (size_t)ifd + 2 + (size_t)i * 12;
        if (e > n || n - e < 12) break; /* IFD cut off: keep what was read */
        const uint8_t *p = t + e;
        const uint32_t tag = tiff_u16(p, be), type = tiff_u16(p + 2, be);
        const uint64_t cnt = tiff_u32(p + 4, be), unit = tiff_type_size(type);
        if (unit == 0 || cnt == 0) continue;
        const uint8_t *v = p + 8;
        if (cnt * unit > 4) {
            /* Out-of-line data; data past the end ends the scan, as Pillow's
             * "Truncated File Read" ends its IFD. */
            const uint64_t off = tiff_u32(p + 8, be);
            if (off > n || n - off < cnt * unit) break;
            v = t + off;
        }
        if (tag != 0x0112) continue;
        /* A later entry overrides an earlier one. */
        const double val = tiff_first_value(v, type, be);
        orientation = val >= 1.0 && val <= 8.0 && val == floor(val) ? (int)val : 1;
    }
    return orientation;
}

/* The first APP1 segment that starts "Exif\0" decides, as in Pillow (a
 * later one is not looked at, even when the first is unusable). */
static int jpeg_orientation(j_decompress_ptr ci)
{
    for (jpeg_saved_marker_ptr m = ci->marker_list; m; m = m->next) {
        if (m->marker != JPEG_APP0 + 1 || m->data_length < 5 || memcmp(m->data, "Exif\0", 5) != 0)
            continue;
        return image_exif_orientation(m->data, m->data_length);
    }
    return 1;
}

mr_status image_apply_orientation(mr_image *img, int orientation, mr_error *err)
{
    if (orientation < 1 || orientation > 8)
        return mr_fail(err, MR_ERR_RANGE, "EXIF orientation %d is outside 1..8", orientation);
    if (orientation == 1) return MR_OK;
    const int swap = orientation >= 5;
    const ptrdiff_t h = img->h, w = img->w;
    const int oh = swap ? img->w : img->h, ow = swap ? img->h : img->w;
    if (h <= 0 || w <= 0 || !img->pixels) {
        img->h = oh;
        img->w = ow;
        return MR_OK;
    }
    /* out(y, x) = src[start + y * sy + x * sx] in pixels, from
     * 2: (y, w-1-x)  3: (h-1-y, w-1-x)  4: (h-1-y, x)  5: (x, y)
     * 6: (h-1-x, y)  7: (h-1-x, w-1-y)  8: (x, w-1-y), source (row, column). */
    ptrdiff_t start = 0, sy = 0, sx = 0;
    switch (orientation) {
    case 2: start = w - 1; sy = w; sx = -1; break;
    case 3: start = (h - 1) * w + w - 1; sy = -w; sx = -1; break;
    case 4: start = (h - 1) * w; sy = -w; sx = 1; break;
    case 5: start = 0; sy = 1; sx = w; break;
    case 6: start = (h - 1) * w; sy = 1; sx = -w; break;
    case 7: start = (h - 1) * w + w - 1; sy = -1; sx = -w; break;
    default: start = w - 1; sy = -1; sx = w; break; /* 8 */
    }
    uint8_t *dst = image_alloc_rgb((uint32_t)oh, (uint32_t)ow);
    if (!dst)
        return mr_fail(err, MR_ERR_OOM, "out of memory applying EXIF orientation to a %dx%d (HxW) image",
                       img->h, img->w);
    const uint8_t *src = img->pixels;
    /* Tiles of 64x64 output pixels keep the column walks of 5..8 in cache. */
    enum { TILE = 64 };
    for (int y0 = 0; y0 < oh; y0 += TILE)
        for (int x0 = 0; x0 < ow; x0 += TILE) {
            const int y1 = y0 + TILE < oh ? y0 + TILE : oh, x1 = x0 + TILE < ow ? x0 + TILE : ow;
            for (int y = y0; y < y1; y++) {
                uint8_t *d = dst + ((size_t)y * ow + x0) * 3;
                ptrdiff_t s = start + y * sy + x0 * sx;
                for (int x = x0; x < x1; x++, s += sx, d += 3) memcpy(d, src + s * 3, 3);
            }
        }
    free(img->pixels);
    img->pixels = dst;
    img->h = oh;
    img->w = ow;
    return MR_OK;
}

/* ---- JPEG --------------------------------------------------------------- */

typedef struct {
    struct jpeg_error_mgr mgr; /* first, so the cinfo->err pointer is ours */
    jmp_buf jmp;
    int truncated;
    char msg[JMSG_LENGTH_MAX];
} jpeg_err;

static void jpeg_error_exit_cb(j_common_ptr cinfo)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    cinfo->err->format_message(cinfo, e->msg);
    longjmp(e->jmp, 1);
}

/* A truncated file is an error (Pillow raises "image file is truncated");
 * libjpeg would only warn and fill the rest with grey. Other warnings, like
 * extraneous bytes before a marker, are ignored as Pillow ignores them. */
static void jpeg_emit_message_cb(j_common_ptr cinfo, int level)
{
    jpeg_err *e = (jpeg_err *)cinfo->err;
    if (level < 0 && cinfo->err->msg_code == JWRN_JPEG_EOF) {
        e->truncated = 1;
        cinfo->err->format_message(cinfo, e->msg);
        longjmp(e->jmp, 1);
    }
}

typedef struct {
    FILE *f;
    const char *path;
    int max_side;
    int orientation; /* EXIF, 1..8 */
    struct jpeg_decompress_struct cinfo;
    jpeg_err err;
    uint8_t *pixels;
    uint8_t *cmyk_row; /* one row of CMYK samples, for CMYK and YCCK files */
    uint32_t h, w;
    int oom;
    int refused; /* size refused; the message is already in err */
    mr_status refused_status;
} jpeg_job;

static int jpeg_decode(jpeg_job *job, mr_error *err)
{
    struct jpeg_decompress_struct *ci = &job->cinfo;
    ci->err = jpeg_std_error(&job->err.mgr);
    job->err.mgr.error_exit = jpeg_error_exit_cb;
    job->err.mgr.emit_message = jpeg_emit_message_cb;
    if (setjmp(job->err.jmp)) {
        jpeg_destroy_decompress(ci);
        return 1;
    }
    jpeg_create_decompress(ci);
    jpeg_stdio_src(ci, job->f);
    jpeg_save_markers(ci, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(ci, TRUE);
    job->orientation = jpeg_orientation(ci);
    mr_status st = image_check_side(job->path, "JPEG", ci->image_height, ci->image_width,
                                    job->max_side, err);
    if (st != MR_OK) {
        job->refused = 1;
        job->refused_status = st;
        jpeg_destroy_decompress(ci);
        return 1;
    }
    /* CMYK and YCCK come out as CMYK (libjpeg turns YCCK into it), then
     * are converted as Pillow does: it reads them as "CMYK;I" (Adobe's
     * inverted samples, its assumption for every CMYK JPEG), then
     * convert("RGB") applies cmyk2rgb. */
    const int cmyk = ci->jpeg_color_space == JCS_CMYK || ci->jpeg_color_space == JCS_YCCK;
    ci->out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(ci);
    if (ci->output_components != (cmyk ? 4 : 3)) {
        snprintf(job->err.msg, sizeof job->err.msg, "unexpected %d output components",
                 ci->output_components);
        jpeg_destroy_decompress(ci);
        return 1;
    }
    const uint32_t w = ci->output_width;
    job->h = ci->output_height;
    job->w = w;
    job->pixels = image_alloc_rgb(job->h, w);
    if (!job->pixels) {
        job->oom = 1;
        jpeg_destroy_decompress(ci);
        return 1;
    }
    job->cmyk_row = cmyk ? malloc((size_t)w * 4) : NULL;
    if (cmyk && !job->cmyk_row) {
        job->oom = 1;
        jpeg_destroy_decompress(ci);
        return 1;
    }
    while (ci->output_scanline < ci->output_height) {
        uint8_t *rgb = job->pixels + (size_t)ci->output_scanline * w * 3;
        JSAMPROW row = cmyk ? job->cmyk_row : rgb;
        jpeg_read_scanlines(ci, &row, 1);
        if (!cmyk) continue;
        for (size_t i = 0; i < (size_t)w * 4; i++) job->cmyk_row[i] = (uint8_t)(255 - job->cmyk_row[i]);
        image_cmyk_to_rgb(job->cmyk_row, rgb, w);
    }
    jpeg_finish_decompress(ci);
    jpeg_destroy_decompress(ci);
    return 0;
}

static mr_status load_jpeg(const image_source *src, int max_side, mr_image *out, mr_error *err)
{
    const char *path = src->name;
    out->pixels = NULL;
    out->h = out->w = out->frames = 0;
    uint8_t head[3];
    size_t got;
    FILE *f;
    MR_TRY(image_source_open(src, &f, head, sizeof head, &got, err));
    mr_status st = MR_OK;
    if (got == 0)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: empty file", path);
    else if (got < 3 || head[0] != 0xFF || head[1] != 0xD8 || head[2] != 0xFF)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: not a JPEG file (bad signature)", path);
    jpeg_job *job = st == MR_OK ? calloc(1, sizeof *job) : NULL;
    if (st == MR_OK && !job) st = mr_fail(err, MR_ERR_OOM, "%s: out of memory", path);
    if (st != MR_OK) {
        close_source(f);
        return st;
    }
    job->path = path;
    job->max_side = max_side;
    job->f = f;
    int failed = jpeg_decode(job, err);
    fclose(job->f);
    free(job->cmyk_row);
    if (!failed) {
        out->pixels = job->pixels;
        out->h = (int)job->h;
        out->w = (int)job->w;
        st = image_apply_orientation(out, job->orientation, err);
        if (st != MR_OK) {
            image_free(out);
            mr_error_prefix(err, "%s", path);
        }
    } else {
        free(job->pixels);
        if (job->refused)
            st = job->refused_status;
        else if (job->oom)
            st = mr_fail(err, MR_ERR_OOM, "%s: out of memory decoding a JPEG", path);
        else if (job->err.truncated)
            st = mr_fail(err, MR_ERR_FORMAT, "%s: truncated JPEG (file ends early)", path);
        else
            st = mr_fail(err, MR_ERR_FORMAT, "%s: corrupt JPEG (%s)", path, job->err.msg);
    }
    free(job);
    return st;
}

/* ---- Sniffing ----------------------------------------------------------- */

/* An ISO base media file (HEIF, AVIF) names its brands in its first box,
 * "ftyp": the major brand at 8, then compatible brands from 16 to the
 * box's end. Returns the format's name for the message, or NULL. */
static const char *isobmff_kind(const uint8_t *head, size_t got)
{
    if (got < 16 || memcmp(head + 4, "ftyp", 4) != 0) return NULL;
    size_t end = be32(head);
    if (end > got) end = got;
    const char *kind = NULL;
    for (size_t at = 8; at + 4 <= end; at += at == 8 ? 8 : 4) {
        const uint8_t *b = head + at;
        if (memcmp(b, "avif", 4) == 0 || memcmp(b, "avis", 4) == 0) return "AVIF";
        if (memcmp(b, "heic", 4) == 0 || memcmp(b, "heix", 4) == 0 || memcmp(b, "hevc", 4) == 0 ||
            memcmp(b, "hevx", 4) == 0 || memcmp(b, "heim", 4) == 0 || memcmp(b, "heis", 4) == 0 ||
            memcmp(b, "mif1", 4) == 0 || memcmp(b, "msf1", 4) == 0)
            kind = "HEIC";
    }
    return kind;
}

/* Formats we recognise but do not read: named, with what to do. */
static const char *unsupported_kind(const uint8_t *head, size_t got)
{
    const char *iso = isobmff_kind(head, got);
    if (iso) return iso;
    if (got >= 2 && head[0] == 0xFF && head[1] == 0x0A) return "JPEG XL";
    if (got >= 12 && memcmp(head, "\0\0\0\x0cJXL \r\n\x87\n", 12) == 0) return "JPEG XL";
    if (got >= 12 && memcmp(head, "\0\0\0\x0cjP  \r\n\x87\n", 12) == 0) return "JPEG 2000";
    if (got >= 4 && memcmp(head, "\xff\x4f\xff\x51", 4) == 0) return "JPEG 2000";
    if (got >= 4 && memcmp(head, "8BPS", 4) == 0) return "Photoshop (PSD)";
    return NULL;
}

static mr_status load_any(const image_source *src, int max_side, mr_image *out, mr_error *err)
{
    const char *path = src->name;
    out->pixels = NULL;
    out->h = out->w = out->frames = 0;
    uint8_t head[64];
    size_t got;
    FILE *f;
    MR_TRY(image_source_open(src, &f, head, sizeof head, &got, err));
    close_source(f);
    if (got == 0) return mr_fail(err, MR_ERR_FORMAT, "%s: empty file", path);
    /* By content, never by name. */
    if (got >= 8 && memcmp(head, png_signature, 8) == 0) return load_png(src, max_side, out, err);
    if (got >= 3 && head[0] == 0xFF && head[1] == 0xD8 && head[2] == 0xFF)
        return load_jpeg(src, max_side, out, err);
    if (got >= 12 && memcmp(head, "RIFF", 4) == 0 && memcmp(head + 8, "WEBP", 4) == 0)
        return image_decode_webp(src, max_side, out, err);
    if (got >= 4 && (memcmp(head, "II*\0", 4) == 0 || memcmp(head, "MM\0*", 4) == 0 ||
                     memcmp(head, "II+\0", 4) == 0 || memcmp(head, "MM\0+", 4) == 0))
        return image_decode_tiff(src, max_side, out, err);
    if (got >= 6 && (memcmp(head, "GIF87a", 6) == 0 || memcmp(head, "GIF89a", 6) == 0))
        return image_decode_gif(src, max_side, out, err);
    if (got >= 2 && head[0] == 'B' && head[1] == 'M') return image_decode_bmp(src, max_side, out, err);
    const char *kind = unsupported_kind(head, got);
    if (kind)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: %s image: not supported; convert it to JPEG or PNG", path, kind);
    return mr_fail(err, MR_ERR_FORMAT, "%s: not an image (no PNG, JPEG, WebP, TIFF, GIF or BMP signature)", path);
}

mr_status image_load_png(const char *path, int max_side, mr_image *out, mr_error *err)
{
    image_source src = {path, NULL, 0};
    return load_png(&src, max_side, out, err);
}

mr_status image_load_jpeg(const char *path, int max_side, mr_image *out, mr_error *err)
{
    image_source src = {path, NULL, 0};
    return load_jpeg(&src, max_side, out, err);
}

mr_status image_load(const char *path, int max_side, mr_image *out, mr_error *err)
{
    image_source src = {path, NULL, 0};
    return load_any(&src, max_side, out, err);
}

mr_status image_load_memory(const void *data, size_t size, const char *name, int max_side, mr_image *out,
                            mr_error *err)
{
    image_source src = {name ? name : "image bytes", data, size};
    if (!data && size) {
        out->pixels = NULL;
        out->h = out->w = out->frames = 0;
        return mr_fail(err, MR_ERR_INTERNAL, "%s: no data", src.name);
    }
    static const uint8_t none[1];
    if (!data) src.data = none; /* NULL with size 0: an empty buffer */
    return load_any(&src, max_side, out, err);
}
