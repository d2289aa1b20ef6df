/* Decoding images.
 *
 * image_load() reads a PNG (libpng), JPEG (libjpeg-turbo), WebP (libwebp,
 * image_webp.c), TIFF (libtiff, image_tiff.c), GIF (giflib, image_gif.c)
 * or BMP (image_bmp.c) file into 8-bit RGB, row-major [h, w, 3], the
 * pixels Pillow's `Image.open(path).convert('RGB')` gives, with one
 * documented exception (16-bit greyscale, see image_load_png and
 * image_tiff.c). Each format's file states its rules; a multi-page or
 * animated file gives its first page or frame (mr_image.frames counts a
 * TIFF's pages and a WebP's frames). Files are opened without blocking and
 * must be regular files (image_source.h), so a FIFO never stalls a run. Alpha is dropped, not
 * composited; gamma and ICC profiles are ignored, as Pillow ignores them.
 * A JPEG's EXIF orientation is applied, so the image comes out upright as
 * `ImageOps.exif_transpose(Image.open(path)).convert('RGB')` gives it
 * (image_load_jpeg); a PNG's eXIf chunk is not (Pillow's exif_transpose
 * would honour it).
 * The decoded image goes on to ops/image_preprocess.h. */
#ifndef MR_IMAGE_H
#define MR_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "core/image_types.h"
#include "core/status.h"

/* Decodes a PNG. Every colour type and bit depth becomes 8-bit RGB:
 *  - grey 1/2/4 bit is scaled to 0..255 (x255, x85, x17), grey is replicated;
 *  - palette is looked up; tRNS and alpha channels are dropped;
 *  - 16-bit samples keep their high byte. This is what Pillow does for
 *    16-bit RGB, RGBA and grey+alpha. For 16-bit grey Pillow opens mode 'I'
 *    and convert('RGB') clamps each value to 255 (so nearly every pixel is
 *    white); we keep the high byte instead, deliberately;
 *  - interlaced (Adam7) images are deinterlaced.
 * Refuses, before allocating pixels, an image with a side larger than
 * max_side (MR_ERR_RANGE). Errors name the file: cannot open (MR_ERR_IO),
 * empty, not a PNG, zero size, truncated, corrupt (MR_ERR_FORMAT), out of
 * memory (MR_ERR_OOM). On failure *out is {NULL, 0, 0}. */
mr_status image_load_png(const char *path, int max_side, mr_image *out, mr_error *err);

/* Decodes a baseline or progressive JPEG with libjpeg's defaults (ISLOW
 * IDCT, fancy upsampling), which are Pillow's, so pixels match Pillow built
 * on the same libjpeg. Greyscale is replicated; CMYK and YCCK are read as
 * Pillow reads them (inverted Adobe samples) and converted with Pillow's
 * cmyk2rgb (image_cmyk_to_rgb). Same size limit and error rules as PNG; max_side
 * applies to the stored size, before the EXIF orientation.
 * Then the EXIF orientation (image_exif_orientation of the first APP1
 * segment that starts "Exif\0", as Pillow picks it) is applied with
 * image_apply_orientation: out->h, out->w are the upright size, swapped
 * from the stored one for orientations 5..8. A malformed EXIF block is
 * ignored (orientation 1). An XMP tiff:Orientation is not read (Pillow
 * 9.4, the reference here, ignores it in a JPEG too; later Pillow releases
 * fall back to it when EXIF has no orientation). */
mr_status image_load_jpeg(const char *path, int max_side, mr_image *out, mr_error *err);

/* The EXIF Orientation (tag 0x0112 of IFD0) of one APP1 segment's payload,
 * app1[n] = "Exif\0\0" + a TIFF block ('II' or 'MM'), or 1 when it has none.
 * Every offset is bounds-checked against n: a truncated or garbage block
 * gives 1, never a read outside app1. Pillow's rules (TiffImagePlugin,
 * 9.4): IFD entries are read until the IFD or the block ends, an entry
 * whose out-of-line data lies past the end ends the scan, an entry of an
 * unknown type or with count 0 is skipped; the last 0x0112 entry wins;
 * its first value counts when it equals an integer 1..8 as Pillow compares
 * it: any integer type, a FLOAT or DOUBLE, a RATIONAL whose denominator
 * divides its numerator (BYTE, UNDEFINED and ASCII load as bytes or text
 * in Pillow and never match). Anything else gives 1. */
int image_exif_orientation(const uint8_t *app1, size_t n);

/* Rearranges img's pixels into the upright image for an EXIF orientation,
 * in Pillow's terms (ImageOps.exif_transpose): 1 as is, 2 FLIP_LEFT_RIGHT
 * (mirror), 3 ROTATE_180, 4 FLIP_TOP_BOTTOM, 5 TRANSPOSE, 6 ROTATE_270
 * (90 degrees clockwise), 7 TRANSVERSE, 8 ROTATE_90 (90 counter-
 * clockwise); h and w swap for 5..8. Allocates the new pixels and frees
 * the old ones (MR_ERR_OOM leaves img as it was); MR_ERR_RANGE for an
 * orientation outside 1..8. */
mr_status image_apply_orientation(mr_image *img, int orientation, mr_error *err);

/* Sniffs the content (not the file name): the PNG, JPEG, WebP (RIFF
 * WEBP), TIFF (II*, MM*, and BigTIFF), GIF (GIF87a, GIF89a) and BMP (BM)
 * signatures. HEIC, AVIF (an ISO "ftyp" box's brands), JPEG XL, JPEG 2000
 * and PSD are named as unsupported, with what to do (MR_ERR_UNSUPPORTED);
 * anything else is "not an image" (MR_ERR_FORMAT). */
mr_status image_load(const char *path, int max_side, mr_image *out, mr_error *err);

/* The same from encoded bytes in memory (read through fmemopen, so exactly
 * the same decoding); `name` stands for the path in messages. */
mr_status image_load_memory(const void *data, size_t size, const char *name, int max_side, mr_image *out,
                            mr_error *err);

void image_free(mr_image *img);

#endif
