/* Pictures of detections, and PNG output.
 *
 * visualize_render draws, on a copy of an RGB image [h, w, 3], every
 * detection of a result, in three passes over the detections sorted by
 * ascending score (ties: higher index first), so the best detection ends on
 * top and no mask ever covers a label:
 *   1. masks: each pixel whose mask byte is non-zero becomes
 *      visualize_blend(pixel, colour) (alpha 0.5); the mask's outline (mask
 *      pixels with a 4-neighbour inside the image that is not in the mask)
 *      becomes visualize_darken(colour) instead. A NULL mask draws nothing
 *      in this pass (box only);
 *   2. boxes: a 2-px rectangle in the colour, drawn inside the box: columns
 *      floor(x1), floor(x1)+1 and ceil(x2)-2, ceil(x2)-1, rows likewise;
 *      whatever lies outside the image is clipped;
 *   3. labels: "<class name> <score with 2 decimals>" ("person 0.87") in the
 *      X11 6x13 font (font_6x13.h; scaled x2 for images wider than 1000 px),
 *      black or white, whichever contrasts more with the colour, on an
 *      opaque rectangle of the colour (visualize_label_rect).
 * Colours come from a fixed palette indexed by class id, so one class has
 * one colour across images (visualize_class_color).
 *
 * Coordinates are those of mr_detection: [x1, y1, x2, y2] in original-image
 * pixels, masks h x w 0/1 row-major at the image's size. */
#ifndef MR_VISUALIZE_H
#define MR_VISUALIZE_H

#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/image_types.h"
#include "core/result.h"
#include "core/status.h"

/* out receives a new image (free it with image_free) the size of img.
 * res->width x res->height must be img's size when there are detections
 * (MR_ERR_SHAPE otherwise); res->count may be 0 (out is then an exact copy). cfg supplies the class
 * names (cfg->classes); cfg may be NULL, and a class id without a name is
 * labelled "class <id>". Errors: NULL img/res/out, out == img, or dets NULL
 * with count > 0 (MR_ERR_INTERNAL); an image without pixels or of zero size,
 * a negative count, a size mismatch (MR_ERR_SHAPE); a non-finite box
 * coordinate or score (MR_ERR_RANGE, naming the detection); no memory
 * (MR_ERR_OOM). On failure *out is {NULL, 0, 0}. */
mr_status visualize_render(const mr_image *img, const mr_result *res, const mr_config *cfg, mr_image *out,
                           mr_error *err);

/* Writes img as an 8-bit RGB PNG. Atomic for a regular file: the PNG goes to
 * "<path>.tmp.<pid>", is flushed, fsync'ed and closed, every step checked,
 * and then renamed onto path; on any failure the temporary file is removed
 * and path is left as it was. A path that exists and is not a regular file
 * (a device such as /dev/stdout or /dev/full, a FIFO) is written in place,
 * never replaced. Errors: NULL arguments (MR_ERR_INTERNAL), an image
 * without pixels or of zero size (MR_ERR_SHAPE), anything that fails while
 * writing, including a full disk (MR_ERR_IO, naming path and the reason). */
mr_status visualize_write_png(const char *path, const mr_image *img, mr_error *err);

/* The palette colour of a class id (any int; ids wrap around the palette). */
void visualize_class_color(int class_id, uint8_t rgb[3]);

/* The label of a detection, "person 0.87", NUL-terminated in buf (n > 0);
 * returns its length (truncated to n - 1). Bytes outside printable ASCII
 * are drawn as '?'. */
int visualize_label_text(const mr_detection *det, const mr_config *cfg, char *buf, size_t n);

/* Where the label of a box goes, in pixels: [x, x + w) x [y, y + h).
 * Size: text_len glyphs of 6x13 at scale s (2 when img_w > 1000, else 1),
 * 2s px of padding on the left and 1s on the right (the glyphs' own right
 * column is blank), none above or below (the font's cell has blank rows).
 * Place: its bottom row just above the box's top row floor(y1); when that
 * would leave the image, at the top of the box (floor(y1) clamped to 0)
 * instead. Its left column is floor(x1), moved left as needed to end inside
 * the image (a label wider than the image starts at 0 and is clipped). */
typedef struct {
    int x, y, w, h;
} mr_vis_rect;

mr_vis_rect visualize_label_rect(int img_h, int img_w, const float box[4], int text_len);

/* Mask pixel under alpha 0.5: the mean of pixel and colour, rounded half up. */
static inline uint8_t visualize_blend(uint8_t pixel, uint8_t colour)
{
    return (uint8_t)(((unsigned)pixel + colour + 1u) >> 1);
}

/* Mask outline: the colour at half brightness. */
static inline uint8_t visualize_darken(uint8_t colour)
{
    return (uint8_t)(colour >> 1);
}

#endif
