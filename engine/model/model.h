/* Mask R-CNN with a ResNet-FPN backbone: load once, detect many.
 *
 *   model_load   config + safetensors weights -> layers prepared on a
 *                backend (batchnorm folded into the convolutions), and every
 *                activation buffer allocated for the largest input the
 *                config allows (input.min_size x input.max_size, padded).
 *   model_detect one decoded image -> instances in original-image pixels.
 *
 * The forward pass is also exposed stage by stage (model_stage_*), with
 * each stage's tensors reachable by name (model_tensor), so tests can feed
 * a stage the reference's output of the previous one. Stage names:
 *   "input" [1,Hp,Wp,3]; "c2".."c5"; "p2".."p6" (NHWC);
 *   "proposals" [N,4] + "proposal_scores" [N];
 *   "detections" [D,4] (resized-image coords) + "detection_scores" [D]
 *   + "detection_labels" [D] (float class ids); "mask_probs" [D,28,28].
 * Stage tensors share one arena by lifetime (model.c), so a tensor is valid
 * from the stage that writes it until the last stage that reads it: the
 * input until the backbone has run, C2..C5 until the FPN has, P2..P6 until
 * the mask head, proposals until the box head, detections until the paste. */
#ifndef MR_MODEL_H
#define MR_MODEL_H

#include <stdint.h>

#include "backend/backend.h"
#include "core/config.h"
#include "core/int8_ranges.h"
#include "core/result.h"
#include "core/image_types.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct mr_model mr_model;

/* Seconds per stage for one image (host clock on the CPU backend). */
typedef struct {
    double preprocess, backbone, fpn, rpn, box_head, mask_head, paste;
} mr_stage_times;

/* int8_ranges: each conv's calibrated input range, for a backend that
 * computes in int8 (every conv it quantizes, those not kept fp32 by the
 * config's reduced_precision, must have one), refused (MR_ERR_CONFIG) when
 * measured on other weights; NULL otherwise. Only read during the load. */
mr_status model_load(mr_model **out, const mr_config *cfg, const char *weights_path, mr_backend backend,
                     const mr_int8_ranges *int8_ranges, mr_error *err);
void model_free(mr_model *m);
const mr_config *model_config(const mr_model *m);
/* The padded network input size an image of in_h x in_w runs at (0 x 0
 * for an image the geometry refuses, which will fail its run). */
void model_input_size(const mr_model *m, int in_h, int in_w, int *padded_h, int *padded_w);

/* Runs everything; res is filled (free it with result_free, core/result.h). times may be NULL. */
mr_status model_detect(mr_model *m, const mr_image *img, mr_result *res, mr_stage_times *times, mr_error *err);

/* Stages, in order. model_stage_input sets the geometry for an image of
 * in_h x in_w; pass img = NULL to only set the geometry (the caller then
 * fills "input" itself). */
mr_status model_stage_input(mr_model *m, const mr_image *img, int in_h, int in_w, mr_error *err);
mr_status model_stage_backbone(mr_model *m, mr_error *err);
mr_status model_stage_fpn(mr_model *m, mr_error *err);
mr_status model_stage_rpn(mr_model *m, mr_error *err);
mr_status model_stage_box_head(mr_model *m, mr_error *err);
mr_status model_stage_mask_head(mr_model *m, mr_error *err);
/* Final boxes in original pixels and pasted masks; float_masks (may be
 * NULL, else room for every detection before the drop of empty boxes)
 * receives res->count whole H x W planes of pasted probabilities (0
 * outside each window) for parity tests, plane d belonging to
 * res->dets[d]. */
mr_status model_stage_paste(mr_model *m, mr_result *res, float *float_masks, mr_error *err);

/* A stage tensor by name (see above), shaped for the current image; its data
 * is in backend memory (host memory on the CPU backend). Returns NULL for an
 * unknown name. Row counts of "proposals"/"detections" may be set by the
 * caller to feed a stage (model_set_count). */
mr_tensor *model_tensor(mr_model *m, const char *name);
mr_status model_set_count(mr_model *m, const char *name, int count, mr_error *err);

#endif
