/* Images in, network input out.
 *
 * Decode: image_load() reads a PNG (libpng) or JPEG (libjpeg-turbo) file
 * into 8-bit RGB, row-major [h, w, 3], the pixels Pillow's
 * `Image.open(path).convert('RGB')` gives, with one documented exception
 * (16-bit greyscale, see image_load_png). Alpha is dropped, not
 * composited; gamma and ICC profiles are ignored, as Pillow ignores them.
 * A JPEG's EXIF orientation is applied, so the image comes out upright as
 * `ImageOps.exif_transpose(Image.open(path)).convert('RGB')` gives it
 * (image_load_jpeg); a PNG's eXIf chunk is not (Pillow's exif_transpose
 * would honour it).
 *
 * Preprocess, by input.resize_method:
 *   normalise per pixel: v = (p * pixel_scale - mean[c]) / std[c] in
 *   float, in the configured channel order (BGR swaps R and B). When
 *   pixel_scale is the reciprocal of an integer (1/255) p is divided by
 *   that integer instead, as to_tensor's div(255) does: p * (1/255f)
 *   differs from p / 255f in the last bit for half the levels;
 *   TORCH_BILINEAR (torchvision's GeneralizedRCNNTransform for one image,
 *   torchvision/models/detection/transform.py, 0.14): normalise, then
 *     resize as F.interpolate(mode='bilinear', align_corners=False,
 *     recompute_scale_factor=True) on the CPU
 *     (aten/src/ATen/native/cpu/UpSampleKernel.cpp, UpSample.h);
 *   PIL_BILINEAR (detectron2's DefaultPredictor: ResizeShortestEdge, then
 *     GeneralizedRCNN.preprocess_image): resize the uint8 image with
 *     Pillow's bilinear filter (engine/ops/resize_pil.h), then normalise;
 *   CV2_LINEAR (Detectron's prep_im_for_blob): normalise, then resize as
 *     cv2.resize INTER_LINEAR with the factor of image_geometry
 *     (engine/ops/resize_cv2.h). Detectron subtracts its float64 means from
 *     the float32 image in double; ours are float32 (a last-bit
 *     difference, up to ~1e-5);
 *   then pad with zeros at the bottom and right to a multiple of
 *   size_divisibility, after normalisation, as all three do.
 * The output is NHWC float32 [1, padded_h, padded_w, 3].
 * image_preprocess is the host version; a backend produces the same input
 * in its own memory through backend.h's preprocess entry (the CPU backend
 * calls image_preprocess; the CUDA backend runs the per-pixel math of
 * preprocess.h, which image_preprocess shares, in one kernel). */
#ifndef MR_IMAGE_H
#define MR_IMAGE_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>

#include "core/config.h"
#include "core/hd.h"
#include "ops/preprocess.h"
#include "ops/resize_cv2.h"
#include "ops/resize_pil.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct {
    uint8_t *pixels; /* [h, w, 3] RGB, row-major; owned, free with image_free */
    int h, w;
} mr_image;

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
 * on the same libjpeg. Greyscale is replicated; CMYK/YCCK is refused
 * (MR_ERR_UNSUPPORTED). Same size limit and error rules as PNG; max_side
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

/* Sniffs the content (not the file name): PNG signature, or JPEG's
 * FF D8 FF; anything else is "not an image" (MR_ERR_FORMAT). */
mr_status image_load(const char *path, int max_side, mr_image *out, mr_error *err);

/* The same from encoded bytes in memory (read through fmemopen, so exactly
 * the same decoding); `name` stands for the path in messages. */
mr_status image_load_memory(const void *data, size_t size, const char *name, int max_side, mr_image *out,
                            mr_error *err);

void image_free(mr_image *img);

/* Sizes through preprocessing. scale_h and scale_w map input pixels to
 * resized pixels: resized/in per axis in float32 for resize_rounding FLOOR
 * and DETECTRON2 (torchvision's resize_boxes and detectron2's
 * detector_postprocess use the inverse ratio, in/resized), Detectron's
 * single im_scale for both axes for ROUND. factor_h, factor_w are the
 * factors a cv2.resize is handed, in double: Detectron's im_scale for
 * ROUND, resized/in otherwise (what cv2 derives from an explicit size). */
typedef struct {
    int in_h, in_w;           /* the decoded image                    */
    int resized_h, resized_w; /* after the resize (the "image size")  */
    int padded_h, padded_w;   /* after padding: the network input     */
    float scale_h, scale_w;
    mr_resize_method method;  /* cfg->resize_method: image_preprocess's resampler */
    double factor_h, factor_w;
} mr_input_geometry;

/* FLOOR (torchvision): scale = min(min_size/short, max_size/long) in float32,
 *   computed as torch does it, reciprocal(short) * min_size (Tensor.__rtruediv__);
 *   resized = floor((double)in * (double)scale) (F.interpolate with
 *   recompute_scale_factor=True).
 * ROUND (Detectron, blob.py: prep_im_for_blob): s = min_size/short in double;
 *   if round(s*long) > max_size then s = max_size/long; resized = round(in*s),
 *   rounding half to even (np.round and cv2's saturate_cast).
 * DETECTRON2 (detectron2/data/transforms/augmentation_impl.py,
 *   ResizeShortestEdge.get_output_shape), in double: scale = min_size/short;
 *   the short side becomes min_size, the long one scale*long; if the larger
 *   of the two exceeds max_size both are multiplied by max_size/larger;
 *   resized = int(x + 0.5), halves rounding up: 320x421 gives 800x1053
 *   here, 800x1052 under ROUND (1052.5 to even); 305x610 gives 667x1333,
 *   666x1333 under ROUND (its capped scale is 1333/610).
 * MASKRCNN_BENCHMARK (maskrcnn_benchmark/data/transforms/transforms.py,
 *   Resize.get_size, Python 3): size = min_size; if long/short*size >
 *   max_size then size = round(max_size*short/long) (half to even); a short
 *   side equal to size is kept as is; else short -> size and long ->
 *   int(size*long/short) (truncated).
 * Then padded = resized rounded up to a multiple of size_divisibility
 * (values <= 1 mean no padding).
 * Errors: a zero or negative side, a side over cfg->max_image_side (when
 * positive), or an image so elongated that a resized side would be 0
 * (MR_ERR_RANGE; torchvision raises there too); a min_size or max_size that
 * is not positive (MR_ERR_CONFIG). */
mr_status image_geometry(const mr_input_config *cfg, int h, int w, mr_input_geometry *out,
                         mr_error *err);

/* Bytes of scratch image_preprocess needs for geometry g (g->method says
 * which resampler): the column taps for TORCH_BILINEAR and CV2_LINEAR; for
 * PIL_BILINEAR the resized uint8 image, both axes' fixed-point weights and
 * the horizontal pass's uint8 intermediate (resize_pil_scratch_bytes). */
size_t image_preprocess_scratch_bytes(const mr_input_geometry *g);

/* MR_ERR_SHAPE unless img is the image geo was computed for and input is
 * the [1, padded_h, padded_w, 3] tensor it needs: the backends' preprocess
 * entries check this before touching either. */
mr_status image_preprocess_check(const mr_image *img, const mr_input_geometry *geo, const mr_tensor *input,
                                 mr_error *err);

/* Writes out->data [1, g->padded_h, g->padded_w, 3] (out must have that
 * shape and its data allocated); g comes from image_geometry with the same
 * cfg; scratch holds image_preprocess_scratch_bytes(g) bytes, aligned for
 * float. img must be g->in_h x g->in_w. OpenMP over output rows. */
void image_preprocess(const mr_input_config *cfg, const mr_image *img, const mr_input_geometry *g,
                      void *scratch, mr_tensor *out);

/* The per-pixel description of image_preprocess's pass for geometry g,
 * which both backends run (preprocess.h: mr_pre_pixel, cuda/preprocess.cu):
 * TORCH_BILINEAR samples the decoded image with torch's taps; CV2_LINEAR
 * with OpenCV's (COPY when both sizes are unchanged, as cv::resize does);
 * PIL_BILINEAR is COPY of the already resized uint8 image (in_h, in_w are
 * set to the resized size: Pillow's integer resize runs first, on the
 * host, resize_pil_bilinear). */
void image_preprocess_job(const mr_input_config *cfg, const mr_input_geometry *g, mr_pre_job *job);

#endif
