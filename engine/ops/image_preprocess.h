/* Decoded image in, network input out: the geometry of the resize and the
 * host preprocessing pass, whose per-pixel math both backends share.
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
 *   CV2_LINEAR_UINT8 (mmdetection's Resize, mmcv.imrescale with the cv2
 *     backend, then DetDataPreprocessor): resize the uint8 image as
 *     cv2.resize INTER_LINEAR does (engine/ops/resize_cv2_uint8.h), then
 *     normalise;
 *   CV2_LINEAR (Detectron's prep_im_for_blob): normalise, then resize as
 *     cv2.resize INTER_LINEAR with the factor of image_geometry
 *     (engine/ops/resize_cv2.h). Detectron subtracts its float64 means from
 *     the float32 image in double; ours are float32 (a last-bit
 *     difference, up to ~1e-5);
 *   then pad with zeros at the bottom and right to a multiple of
 *   size_divisibility, after normalisation, as all of them do.
 * The output is NHWC float32 [1, padded_h, padded_w, 3].
 * image_preprocess is the host version; a backend produces the same input
 * in its own memory through backend.h's preprocess entry (the CPU backend
 * calls image_preprocess; the CUDA backend runs the per-pixel math of
 * preprocess.h, which image_preprocess shares, in one kernel). */
#ifndef MR_IMAGE_PREPROCESS_H
#define MR_IMAGE_PREPROCESS_H

#include <stddef.h>

#include "core/config.h"
#include "core/image_types.h"
#include "core/status.h"
#include "core/tensor.h"
#include "ops/preprocess.h"

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
 * MMDET (mmcv/image/geometric.py rescale_size and _scale_size, which
 *   mmdetection's Resize(keep_ratio=True) calls through mmcv.imrescale),
 *   in double: s = min(long_edge/long, short_edge/short), the edges being
 *   the larger and the smaller of max_size and min_size; resized =
 *   int(side*s + 0.5) per axis: 480x640 gives 800x1067 (800x1066 under
 *   FLOOR), 305x610 gives 667x1333 (666x1333 under ROUND).
 * Then padded = resized rounded up to a multiple of size_divisibility
 * (values <= 1 mean no padding), or the config's canvas when one is set
 * and that fits in it (config.h).
 * Errors: a zero or negative side, a side over cfg->max_image_side (when
 * positive), or an image so elongated that a resized side would be 0
 * (MR_ERR_RANGE; torchvision raises there too); a min_size or max_size that
 * is not positive (MR_ERR_CONFIG). */
mr_status image_geometry(const mr_input_config *cfg, int h, int w, mr_input_geometry *out,
                         mr_error *err);

/* Bytes of scratch image_preprocess needs for geometry g (g->method says
 * which resampler): the column taps for TORCH_BILINEAR and CV2_LINEAR; for
 * PIL_BILINEAR the resized uint8 image, both axes' fixed-point weights and
 * the horizontal pass's uint8 intermediate (resize_pil_scratch_bytes); for
 * CV2_LINEAR_UINT8 the resized uint8 image and
 * resize_cv2_uint8_scratch_bytes. */
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
 * PIL_BILINEAR and CV2_LINEAR_UINT8 are COPY of the already resized uint8
 * image (in_h, in_w are set to the resized size: the integer resize runs
 * first, on the host, resize_pil_bilinear or resize_cv2_linear_uint8). */
void image_preprocess_job(const mr_input_config *cfg, const mr_input_geometry *g, mr_pre_job *job);

#endif
