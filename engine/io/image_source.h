/* What the decoders (image.c and image_<format>.c) share: where encoded
 * bytes come from, opening a file without blocking, and the size checks.
 * Internal to engine/io. */
#ifndef MR_IMAGE_SOURCE_H
#define MR_IMAGE_SOURCE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "core/image_types.h"
#include "core/status.h"

/* A file (data == NULL: name is its path), or memory (data, size); `name`
 * labels every message: the path, or what the caller calls the bytes. */
typedef struct {
    const char *name;
    const void *data;
    size_t size;
} image_source;

/* Opens src for reading. A path is opened with O_NONBLOCK and checked with
 * fstat before any read, so a FIFO, socket, device or folder is refused
 * ("not a regular file (a FIFO)", MR_ERR_IO) instead of blocking the run.
 * Memory is read through fmemopen. *f is NULL for an empty buffer (which
 * fmemopen refuses). Then reads up to n bytes into head (*got of them) and
 * rewinds. On failure *f is NULL and err names the source. */
mr_status image_source_open(const image_source *src, FILE **f, uint8_t *head, size_t n, size_t *got,
                            mr_error *err);

/* The whole source in memory: for memory sources *bytes points into it and
 * *owned is NULL; for files both are one malloc'ed copy the caller frees.
 * Refuses files over 2 GiB (MR_ERR_RANGE). */
mr_status image_source_read_all(const image_source *src, const uint8_t **bytes, size_t *size, void **owned,
                                mr_error *err);

/* MR_ERR_FORMAT for a zero side, MR_ERR_RANGE for a side over max_side
 * (when > 0); `kind` names the format ("PNG", "WebP", ...). */
mr_status image_check_side(const char *name, const char *kind, uint32_t h, uint32_t w, int max_side,
                           mr_error *err);

/* h*w*3 bytes, or NULL on overflow or failure. */
uint8_t *image_alloc_rgb(uint32_t h, uint32_t w);

/* Pillow 9.4's CMYK -> RGB (Convert.c cmyk2rgb), n pixels: each channel
 * (255 - k) - x * (255 - k) / 255 with libImaging's rounded division. */
void image_cmyk_to_rgb(const uint8_t *cmyk, uint8_t *rgb, size_t n);

/* The decoders behind image_load's sniffing; each sets *out on success
 * and leaves it {NULL, 0, 0, 0} on failure. */
mr_status image_decode_webp(const image_source *src, int max_side, mr_image *out, mr_error *err);
mr_status image_decode_tiff(const image_source *src, int max_side, mr_image *out, mr_error *err);
mr_status image_decode_gif(const image_source *src, int max_side, mr_image *out, mr_error *err);
mr_status image_decode_bmp(const image_source *src, int max_side, mr_image *out, mr_error *err);

#endif
