/* The public API's images: decoding files and bytes, caller pixels in, PNG
 * out, and the decode-ahead queue (io/image_prefetch.h). */
#include "api/api_internal.h"

#include <stdlib.h>
#include <string.h>

#include "io/image_prefetch.h"
#include "io/visualize.h"

/* config.c's default input.max_image_side, for callers without a model. */
#define DEFAULT_MAX_SIDE 20000

static detect_status wrap_image(mr_image *img, detect_image **out)
{
    detect_image *w = malloc(sizeof *w);
    if (!w) {
        image_free(img);
        return api_failf(DETECT_ERR_OOM, "out of memory");
    }
    w->img = *img;
    *out = w;
    return DETECT_OK;
}

detect_status detect_image_load(const char *path, int max_side, detect_image **out)
{
    if (!out || !path) return api_failf(DETECT_ERR_ARGUMENT, "detect_image_load: %s is NULL", out ? "path" : "out");
    *out = NULL;
    mr_image img;
    mr_error err = {0};
    if (image_load(path, max_side > 0 ? max_side : DEFAULT_MAX_SIDE, &img, &err) != MR_OK) return api_fail(&err);
    return wrap_image(&img, out);
}

int detect_image_pages(const detect_image *img) { return img && img->img.frames > 1 ? img->img.frames : 1; }

detect_status detect_image_decode(const void *data, size_t size, const char *name, int max_side, detect_image **out)
{
    if (!out || (!data && size))
        return api_failf(DETECT_ERR_ARGUMENT, "detect_image_decode: %s is NULL", out ? "data" : "out");
    *out = NULL;
    mr_image img;
    mr_error err = {0};
    if (image_load_memory(data, size, name, max_side > 0 ? max_side : DEFAULT_MAX_SIDE, &img, &err) != MR_OK)
        return api_fail(&err);
    return wrap_image(&img, out);
}

detect_status detect_image_from_pixels(const uint8_t *pixels, int width, int height, size_t stride,
                                       detect_pixel_format format, detect_image **out)
{
    static const int bytes_per_pixel[] = {3, 3, 4, 4, 1};
    if (!out || !pixels)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_image_from_pixels: %s is NULL", out ? "pixels" : "out");
    *out = NULL;
    if ((unsigned)format >= sizeof bytes_per_pixel / sizeof *bytes_per_pixel)
        return api_failf(DETECT_ERR_ARGUMENT, "pixels: unknown pixel format %d", (int)format);
    int bpp = bytes_per_pixel[format];
    if (width < 1 || height < 1 || width > DEFAULT_MAX_SIDE || height > DEFAULT_MAX_SIDE)
        return api_failf(DETECT_ERR_SHAPE, "pixels: %dx%d (WxH): each side must be 1..%d", width, height,
                         DEFAULT_MAX_SIDE);
    if (stride < (size_t)width * (size_t)bpp)
        return api_failf(DETECT_ERR_ARGUMENT, "pixels: stride %zu is less than a row's %d bytes", stride, width * bpp);
    mr_image img = {malloc((size_t)width * (size_t)height * 3), height, width, 0};
    if (!img.pixels) return api_failf(DETECT_ERR_OOM, "out of memory for a %dx%d image", width, height);
    /* Where red, green and blue sit within a pixel. */
    int r = 0, g = 1, b = 2;
    if (format == DETECT_PIXELS_BGR || format == DETECT_PIXELS_BGRA) r = 2, b = 0;
    if (format == DETECT_PIXELS_GRAY) r = g = b = 0;
    for (int y = 0; y < height; y++) {
        const uint8_t *src = pixels + (size_t)y * stride;
        uint8_t *dst = img.pixels + (size_t)y * (size_t)width * 3;
        for (int x = 0; x < width; x++, src += bpp, dst += 3) {
            dst[0] = src[r];
            dst[1] = src[g];
            dst[2] = src[b];
        }
    }
    return wrap_image(&img, out);
}

void detect_image_free(detect_image *img)
{
    if (!img) return;
    image_free(&img->img);
    free(img);
}

int detect_image_width(const detect_image *img)
{
    return img ? img->img.w : 0;
}

int detect_image_height(const detect_image *img)
{
    return img ? img->img.h : 0;
}

const uint8_t *detect_image_pixels(const detect_image *img)
{
    return img ? img->img.pixels : NULL;
}

detect_status detect_image_write_png(const detect_image *img, const char *path)
{
    if (!img || !path)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_image_write_png: %s is NULL", img ? "path" : "image");
    mr_error err = {0};
    return visualize_write_png(path, &img->img, &err) == MR_OK ? DETECT_OK : api_fail(&err);
}

/* ---- Decoding ahead ------------------------------------------------------- */

struct detect_image_queue {
    image_prefetch *pf;
};

detect_status detect_image_queue_start(detect_image_queue **out, const char *const *paths, int count, int threads,
                                       int depth, int max_side)
{
    if (!out || (!paths && count > 0))
        return api_failf(DETECT_ERR_ARGUMENT, "detect_image_queue_start: %s is NULL", out ? "paths" : "out");
    *out = NULL;
    detect_image_queue *q = calloc(1, sizeof *q);
    if (!q) return api_failf(DETECT_ERR_OOM, "out of memory");
    image_prefetch_params p = {threads, depth, max_side > 0 ? max_side : DEFAULT_MAX_SIDE};
    mr_error err = {0};
    if (image_prefetch_start(&q->pf, paths, count, &p, &err) != MR_OK) {
        free(q);
        return api_fail(&err);
    }
    *out = q;
    return DETECT_OK;
}

detect_status detect_image_queue_take(detect_image_queue *q, int index, detect_image **out, double *decode_seconds)
{
    if (!q || !out) return api_failf(DETECT_ERR_ARGUMENT, "detect_image_queue_take: %s is NULL", q ? "out" : "queue");
    *out = NULL;
    mr_image img;
    double secs = 0;
    mr_error err = {0};
    mr_status st = image_prefetch_take(q->pf, index, &img, &secs, &err);
    if (decode_seconds) *decode_seconds = secs;
    if (st != MR_OK) return api_fail(&err);
    if (!img.pixels) return DETECT_OK; /* an entry passed over */
    return wrap_image(&img, out);
}

void detect_image_queue_stop(detect_image_queue *q)
{
    if (!q) return;
    image_prefetch_stop(q->pf);
    free(q);
}
