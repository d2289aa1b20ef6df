/* Final boxes: a detection's box from network-input pixels back to the
 * original image, as torchvision's resize_boxes does it (one float32 ratio
 * per axis, original / resized), clipped to the image where the config asks
 * (detectron2's detector_postprocess: box.clip, then only non-empty boxes
 * are kept, which the caller does). Shared by the model's host paste stage
 * (engine/model/mask_head.c) and the CUDA backend's paste on the device
 * (cuda/mask_paste.cu), so both give the same bits. Detectron's decoding in
 * original pixels needs none of this (the box head decoded there). */
#ifndef MR_FINAL_BOXES_H
#define MR_FINAL_BOXES_H

#include "core/hd.h"
#include "ops/box_coder.h"

typedef struct {
    int img_h, img_w;         /* the original image */
    float ratio_h, ratio_w;   /* (float)img / (float)resized, per axis */
    int clip;                 /* box_head.clip_final_boxes */
} mr_final_box_params;

MR_HD static inline void final_box(const mr_final_box_params *p, float *box)
{
    box[0] *= p->ratio_w;
    box[1] *= p->ratio_h;
    box[2] *= p->ratio_w;
    box[3] *= p->ratio_h;
    if (p->clip) box_clip(box, (float)p->img_h, (float)p->img_w, 0);
}

#endif
