/* WebP decoding through libwebp's animation decoder (libwebpdemux), which
 * is what Pillow 9.4 reads every WebP file with: the first frame composed
 * on its canvas as unpremultiplied RGBA (a still image is its one frame),
 * then alpha dropped, so the RGB is Pillow's convert("RGB") exactly. */
#include <stdlib.h>
#include <string.h>

#include <webp/decode.h>
#include <webp/demux.h>

#include "io/image_source.h"

mr_status image_decode_webp(const image_source *src, int max_side, mr_image *out, mr_error *err)
{
    memset(out, 0, sizeof *out);
    const uint8_t *b;
    size_t n;
    void *owned;
    MR_TRY(image_source_read_all(src, &b, &n, &owned, err));
    mr_status st = MR_OK;
    /* The canvas size first, so an oversized image is refused before
     * libwebp allocates it. */
    WebPBitstreamFeatures feat;
    VP8StatusCode vs = WebPGetFeatures(b, n, &feat);
    if (vs == VP8_STATUS_NOT_ENOUGH_DATA)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: truncated WebP (file ends inside the header)", src->name);
    else if (vs != VP8_STATUS_OK)
        st = mr_fail(err, MR_ERR_FORMAT, "%s: corrupt WebP (header, libwebp status %d)", src->name, (int)vs);
    else
        st = image_check_side(src->name, "WebP", (uint32_t)feat.height, (uint32_t)feat.width, max_side, err);
    WebPAnimDecoder *dec = NULL;
    if (st == MR_OK) {
        WebPAnimDecoderOptions opt;
        WebPData data = {b, n};
        if (!WebPAnimDecoderOptionsInit(&opt)) {
            st = mr_fail(err, MR_ERR_INTERNAL, "%s: libwebp version mismatch", src->name);
        } else {
            opt.color_mode = MODE_RGBA;
            opt.use_threads = 0;
            dec = WebPAnimDecoderNew(&data, &opt);
            if (!dec) st = mr_fail(err, MR_ERR_FORMAT, "%s: corrupt WebP (container)", src->name);
        }
    }
    WebPAnimInfo info;
    uint8_t *rgba = NULL;
    int timestamp;
    if (st == MR_OK && (!WebPAnimDecoderGetInfo(dec, &info) || info.canvas_width != (uint32_t)feat.width ||
                        info.canvas_height != (uint32_t)feat.height))
        st = mr_fail(err, MR_ERR_FORMAT, "%s: corrupt WebP (canvas)", src->name);
    if (st == MR_OK && !WebPAnimDecoderGetNext(dec, &rgba, &timestamp))
        st = mr_fail(err, MR_ERR_FORMAT, "%s: corrupt or truncated WebP (first frame does not decode)", src->name);
    uint8_t *pixels = st == MR_OK ? image_alloc_rgb(info.canvas_height, info.canvas_width) : NULL;
    if (st == MR_OK && !pixels) st = mr_fail(err, MR_ERR_OOM, "%s: out of memory decoding a WebP", src->name);
    if (st == MR_OK) {
        const size_t count = (size_t)info.canvas_height * info.canvas_width;
        for (size_t i = 0; i < count; i++) memcpy(pixels + 3 * i, rgba + 4 * i, 3);
        out->pixels = pixels;
        out->h = (int)info.canvas_height;
        out->w = (int)info.canvas_width;
        out->frames = info.frame_count > 1 ? (int)info.frame_count : 0;
    }
    WebPAnimDecoderDelete(dec);
    free(owned);
    return st;
}
