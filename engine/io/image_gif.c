/* GIF decoding through giflib's low-level reader, the first frame only, as
 * Pillow 9.4 opens it (GifImagePlugin, frame 0, then convert("RGB")):
 *  - the canvas is the logical screen, grown to hold the frame if the frame
 *    reaches past it; outside the frame it holds the transparent index when
 *    a graphic control extension names one, else index 0;
 *  - indices map through the frame's local colour table, else the global
 *    one; an index past the table, or any index when there is no table,
 *    reads Pillow's default ramp (i, i, i). Transparency is not composited;
 *  - interlaced frames are put back in row order.
 * Only the records before the first image are read: a long animation costs
 * no more than its first frame. */
#include <stdlib.h>
#include <string.h>

#include <gif_lib.h>

#include "io/image_source.h"

typedef struct {
    const uint8_t *b;
    size_t n, pos;
} gif_reader;

static int read_cb(GifFileType *gif, GifByteType *buf, int len)
{
    gif_reader *r = gif->UserData;
    if (len < 0) return 0;
    size_t k = r->n - r->pos < (size_t)len ? r->n - r->pos : (size_t)len;
    memcpy(buf, r->b + r->pos, k);
    r->pos += k;
    return (int)k;
}

/* The colour of index i, as Pillow's palette has it. */
static void lookup(const ColorMapObject *map, unsigned i, uint8_t *out)
{
    if (map && i < (unsigned)map->ColorCount) {
        out[0] = map->Colors[i].Red, out[1] = map->Colors[i].Green, out[2] = map->Colors[i].Blue;
    } else {
        out[0] = out[1] = out[2] = (uint8_t)i;
    }
}

/* Row of the k-th line read, for an interlaced frame of height h: passes
 * start at rows 0, 4, 2, 1 with steps 8, 8, 4, 2. */
static int interlaced_row(int k, int h)
{
    static const int start[4] = {0, 4, 2, 1}, step[4] = {8, 8, 4, 2};
    for (int p = 0; p < 4; p++) {
        const int rows = h > start[p] ? (h - start[p] + step[p] - 1) / step[p] : 0;
        if (k < rows) return start[p] + k * step[p];
        k -= rows;
    }
    return -1;
}

static mr_status gif_fail(GifFileType *gif, const char *name, mr_error *err)
{
    const int code = gif->Error;
    const char *why = GifErrorString(code);
    if (code == D_GIF_ERR_READ_FAILED || code == D_GIF_ERR_EOF_TOO_SOON)
        return mr_fail(err, MR_ERR_FORMAT, "%s: truncated GIF (file ends early)", name);
    return mr_fail(err, MR_ERR_FORMAT, "%s: corrupt GIF (%s)", name, why ? why : "giflib error");
}

/* Reads up to the first image descriptor; *transparent is the index the
 * last graphic control extension before it names, or -1. */
static mr_status to_first_image(GifFileType *gif, const char *name, int *transparent, mr_error *err)
{
    *transparent = -1;
    for (;;) {
        GifRecordType type;
        if (DGifGetRecordType(gif, &type) == GIF_ERROR) return gif_fail(gif, name, err);
        if (type == TERMINATE_RECORD_TYPE) return mr_fail(err, MR_ERR_FORMAT, "%s: GIF holds no image", name);
        if (type == IMAGE_DESC_RECORD_TYPE) return DGifGetImageDesc(gif) == GIF_ERROR ? gif_fail(gif, name, err) : MR_OK;
        if (type != EXTENSION_RECORD_TYPE) continue;
        int code;
        GifByteType *ext;
        if (DGifGetExtension(gif, &code, &ext) == GIF_ERROR) return gif_fail(gif, name, err);
        /* ext[0] is the block's length, its bytes follow: flags, delay (2), index */
        if (code == GRAPHICS_EXT_FUNC_CODE && ext && ext[0] >= 4 && (ext[1] & 1)) *transparent = ext[4];
        while (ext)
            if (DGifGetExtensionNext(gif, &ext) == GIF_ERROR) return gif_fail(gif, name, err);
    }
}

static mr_status decode(GifFileType *gif, const char *name, int max_side, mr_image *out, mr_error *err)
{
    int transparent;
    MR_TRY(to_first_image(gif, name, &transparent, err));
    const GifImageDesc *d = &gif->Image;
    const long x0 = d->Left, y0 = d->Top, fw = d->Width, fh = d->Height;
    const long cw = gif->SWidth > x0 + fw ? gif->SWidth : x0 + fw, ch = gif->SHeight > y0 + fh ? gif->SHeight : y0 + fh;
    MR_TRY(image_check_side(name, "GIF", (uint32_t)ch, (uint32_t)cw, max_side, err));
    const ColorMapObject *map = d->ColorMap ? d->ColorMap : gif->SColorMap;
    uint8_t *pixels = image_alloc_rgb((uint32_t)ch, (uint32_t)cw);
    GifPixelType *line = malloc((size_t)(fw > 0 ? fw : 1));
    if (!pixels || !line) {
        free(pixels);
        free(line);
        return mr_fail(err, MR_ERR_OOM, "%s: out of memory decoding a %ldx%ld (HxW) GIF", name, ch, cw);
    }
    uint8_t fill[3];
    lookup(map, transparent >= 0 ? (unsigned)transparent : 0, fill);
    for (size_t i = 0; i < (size_t)ch * (size_t)cw; i++) memcpy(pixels + 3 * i, fill, 3);
    for (long k = 0; k < fh && fw > 0; k++) {
        if (DGifGetLine(gif, line, (int)fw) == GIF_ERROR) {
            free(pixels);
            free(line);
            return gif_fail(gif, name, err);
        }
        const long y = y0 + (d->Interlace ? interlaced_row((int)k, (int)fh) : k);
        uint8_t *dst = pixels + ((size_t)y * (size_t)cw + (size_t)x0) * 3;
        for (long x = 0; x < fw; x++, dst += 3) lookup(map, line[x], dst);
    }
    free(line);
    out->pixels = pixels;
    out->h = (int)ch;
    out->w = (int)cw;
    return MR_OK;
}

mr_status image_decode_gif(const image_source *src, int max_side, mr_image *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    gif_reader r = {0};
    void *owned;
    MR_TRY(image_source_read_all(src, &r.b, &r.n, &owned, err));
    int code = 0;
    GifFileType *gif = DGifOpen(&r, read_cb, &code);
    mr_status st;
    if (!gif) {
        st = code == D_GIF_ERR_NOT_ENOUGH_MEM ? mr_fail(err, MR_ERR_OOM, "%s: out of memory opening a GIF", src->name)
             : code == D_GIF_ERR_NOT_GIF_FILE ? mr_fail(err, MR_ERR_FORMAT, "%s: not a GIF file (bad signature)", src->name)
                                              : mr_fail(err, MR_ERR_FORMAT, "%s: truncated or corrupt GIF header", src->name);
    } else {
        st = decode(gif, src->name, max_side, out, err);
        DGifCloseFile(gif, &code);
    }
    free(owned);
    return st;
}
