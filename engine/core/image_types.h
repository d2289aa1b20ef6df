/* A decoded image and its sizes through preprocessing: the types that the
 * decoders (io/image.h), preprocessing (ops/image_preprocess.h), the
 * backends' preprocess entry (backend/backend.h) and the model share. */
#ifndef MR_IMAGE_TYPES_H
#define MR_IMAGE_TYPES_H

#include <stdint.h>

#include "core/config.h"

typedef struct {
    uint8_t *pixels; /* [h, w, 3] RGB, row-major; owned, free with image_free */
    int h, w;
    int frames; /* pages or frames the file holds when more than one (0: one); only the first is decoded */
} mr_image;

/* Sizes through preprocessing. scale_h and scale_w map input pixels to
 * resized pixels: resized/in per axis in float32 for resize_rounding FLOOR,
 * DETECTRON2, MASKRCNN_BENCHMARK and MMDET (torchvision's resize_boxes and
 * detectron2's detector_postprocess use the inverse ratio, in/resized;
 * mmdet's scale_factor is new/old per axis), Detectron's single im_scale
 * for both axes for ROUND. factor_h, factor_w are the
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

#endif
