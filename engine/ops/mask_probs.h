/* Which channel of the mask predictor is a detection's mask.
 *
 * The predictor has K channels, one per class (index 0 = background, never
 * a detection's label), or one channel that serves every class: the
 * class-agnostic mask of detectron2 (ROI_MASK_HEAD.CLS_AGNOSTIC_MASK:
 * mask_rcnn_inference takes channel 0 when the logits have one channel) and
 * mmdetection (FCNMaskHead class_agnostic: `mask_pred[range, 0]`).
 *
 * Shared by the CPU backend (mask_probs, mask_class_probs) and the CUDA
 * mask_probs kernel. */
#ifndef MR_MASK_PROBS_H
#define MR_MASK_PROBS_H

#include "core/hd.h"

/* The channel of `label` among `channels` mask logits: the label itself, or
 * 0 for a one-channel (class-agnostic) predictor; -1 when the label is not
 * a class of the predictor (negative, NaN, or >= channels). */
MR_HD static inline int mask_channel_of(float label, int channels)
{
    if (!(label > -1.0f)) return -1; /* NaN fails this too */
    if (channels == 1) return 0;
    return label < (float)channels ? (int)label : -1;
}

#endif
