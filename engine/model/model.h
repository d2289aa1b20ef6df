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
#include "io/image.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct mr_model mr_model;

typedef struct {
    float box[4];   /* x1, y1, x2, y2 in original-image pixels */
    float score;
    int class_id;   /* 1..num_classes-1; 0 is background and never reported */
    /* The binary mask (0/1) over mask_win only, the part of the image its
     * paste can touch (mask_paste.h): mask_win.h rows of mask_win.w bytes,
     * image pixel (x, y) at mask[(y - mask_win.y0) * mask_win.w + x -
     * mask_win.x0]; every pixel outside the window is 0. NULL: no mask. */
    uint8_t *mask;
    mr_mask_window mask_win;
} mr_detection;

typedef struct {
    int width, height;
    int count;
    mr_detection *dets;
    uint8_t *mask_storage; /* every detection's mask, back to back; owned, the dets point into it */
} mr_result;

/* Pixel (x, y) of the image in d's mask: 0 or 1 (0 outside the window). */
static inline int detection_mask_at(const mr_detection *d, int x, int y)
{
    const mr_mask_window *w = &d->mask_win;
    if (!d->mask || x < w->x0 || y < w->y0 || x >= w->x0 + w->w || y >= w->y0 + w->h) return 0;
    return d->mask[(size_t)(y - w->y0) * (size_t)w->w + (size_t)(x - w->x0)] != 0;
}

/* Seconds per stage for one image (host clock on the CPU backend). */
typedef struct {
    double preprocess, backbone, fpn, rpn, box_head, mask_head, paste;
} mr_stage_times;

mr_status model_load(mr_model **out, const mr_config *cfg, const char *weights_path, mr_backend backend,
                     mr_error *err);
void model_free(mr_model *m);
const mr_config *model_config(const mr_model *m);

/* Runs everything; res is filled (free it with result_free). times may be NULL. */
mr_status model_detect(mr_model *m, const mr_image *img, mr_result *res, mr_stage_times *times, mr_error *err);
void result_free(mr_result *res);

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
