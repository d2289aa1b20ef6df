/* Box head post-processing for one image (torchvision roi_heads.py
 * postprocess_detections; Detectron test.py box_results_with_nms_and_limit):
 *   softmax over the K class logits of each RoI; decode the class-specific
 *   deltas against the RoI (box_coder.h), or against RoI / roi_divisor
 *   (Detectron decodes in original-image pixels: rois / im_scale); clip to
 *   img_h x img_w (the resized image, or the original one with roi_divisor);
 *   keep (RoI, class >= 1) pairs with score > score_thresh and both sides
 *   >= min_size; NMS per class at nms_thresh; with agnostic_nms, NMS over
 *   the survivors of all classes at agnostic_nms_thresh (a box overlapping
 *   a higher-scored survivor of any class goes: torchvision.ops.nms on the
 *   per-class survivors, ignoring their labels); keep the max_dets best by
 *   score (keep_ties: also every further one tied with the last kept, as
 *   Detectron's "score >= the 100th score").
 *
 * Inputs: rois [n,4], logits [n,K], deltas [n,4K] (row 4k+j, j = dx,dy,dw,dh),
 * or [n,4] with class_agnostic (one box regression for every class:
 * detectron2 CLS_AGNOSTIC_BBOX_REG, mmdetection reg_class_agnostic; each
 * class's candidate is that box, as both expand it to every class).
 * Outputs: boxes [D,4] (in the clip window's pixels), scores [D], labels [D]
 * (class ids as floats), sorted by descending score. */
#ifndef MR_BOX_POST_H
#define MR_BOX_POST_H

#include <stddef.h>

#include <math.h>

#include "ops/box_coder.h"
#include "core/hd.h"

typedef struct {
    int num_classes;  /* K, including background at 0 */
    int class_agnostic; /* 1: deltas [n,4], the same for every class */
    mr_box_coder coder;
    float roi_divisor; /* 0 or 1: none; else Detectron's im_scale (float32, as numpy divides) */
    float img_h, img_w;
    double nms_thresh;
    int agnostic_nms;           /* 1: the class-agnostic pass after the per-class NMS */
    double agnostic_nms_thresh; /* its IoU threshold (same rule: nms_flags) */
    float score_thresh, min_size;
    int max_dets;
    int keep_ties;
    int nms_flags;    /* nms.h MR_NMS_* */
    int out_capacity; /* rows the outputs can hold (>= max_dets) */
} mr_box_post_params;

/* Columns of the deltas: 4 per class, or 4 for a class-agnostic regression. */
MR_HD static inline int box_post_delta_cols(int num_classes, int class_agnostic)
{
    return class_agnostic ? 4 : 4 * num_classes;
}

/* Offset of RoI r's deltas for class k in the [n, box_post_delta_cols] deltas. */
MR_HD static inline size_t box_post_delta_offset(const mr_box_post_params *p, size_t r, int k)
{
    return p->class_agnostic ? 4 * r : (r * (size_t)p->num_classes + (size_t)k) * 4;
}

/* softmax of one row, as PyTorch computes it: exp(x - max) * (1 / sum). */
MR_HD static inline void softmax_row(const float *x, int k, float *out)
{
    float mx = x[0], sum = 0.0f;
    for (int i = 1; i < k; i++) mx = x[i] > mx ? x[i] : mx;
    for (int i = 0; i < k; i++) {
        out[i] = expf(x[i] - mx);
        sum += out[i];
    }
    float inv = 1.0f / sum;
    for (int i = 0; i < k; i++) out[i] *= inv;
}

/* One candidate: decodes class-specific deltas against the RoI (divided by
 * roi_divisor first when it is not 1), clips, and returns 1 if both sides
 * are >= min_size (+1 widths with the Detectron convention). */
MR_HD static inline int box_post_candidate(const mr_box_post_params *p, const float *roi, const float *delta,
                                           float *box)
{
    float scaled[4];
    if (p->roi_divisor > 0.0f && p->roi_divisor != 1.0f) {
        for (int j = 0; j < 4; j++) scaled[j] = roi[j] / p->roi_divisor;
        roi = scaled;
    }
    box_decode(&p->coder, roi, delta, box);
    box_clip(box, p->img_h, p->img_w, p->coder.plus_one);
    float w = box[2] - box[0], h = box[3] - box[1];
    if (p->coder.plus_one) {
        w += 1.0f;
        h += 1.0f;
    }
    return w >= p->min_size && h >= p->min_size;
}

/* How many of the `kept` NMS survivors (keep[], by descending score) become
 * detections: the max_dets best, and with keep_ties every further one
 * scored equal to the last (Detectron's "score >= the max_dets-th score"),
 * up to out_capacity. Candidate c's score is scores[c * stride] (stride 1
 * on the CPU; the CUDA backend's candidate records on the GPU). */
MR_HD static inline int box_post_count(const mr_box_post_params *p, const float *scores, size_t stride, const int *keep,
                                       int kept)
{
    int d = kept < p->max_dets ? kept : p->max_dets;
    if (p->keep_ties && d > 0)
        while (d < kept && d < p->out_capacity &&
               scores[(size_t)keep[d] * stride] == scores[(size_t)keep[d - 1] * stride])
            d++;
    return d;
}

size_t box_post_scratch_bytes(const mr_box_post_params *p, int n);

/* Returns D, the number of detections written. */
int box_post_cpu(const mr_box_post_params *p, const float *rois, const float *logits, const float *deltas, int n,
                 float *boxes, float *scores, float *labels, void *scratch);

/* box_post_cpu after its candidates: cand (RoI, class) pairs that passed
 * the score and size tests, in RoI-major, class-minor order: boxes [cand,4],
 * scores, groups (the class ids). Per-class NMS, then the best max_dets
 * (keep_ties). With agnostic_nms, between the two: nms_ordered_cpu over the
 * per-class survivors in their order (descending score, ties by index, the
 * visiting order of one NMS over them all).
 * keep: cand ints; nms_scratch: nms_scratch_bytes(cand) (nms.h).
 * The CUDA backend runs the same steps on the GPU (cuda/box_post.cu,
 * cuda/nms.cu) in this function's order. */
int box_post_select(const mr_box_post_params *p, const float *boxes, const float *scores, const int *groups, int cand,
                    float *out_boxes, float *out_scores, float *out_labels, int *keep, void *nms_scratch);

#endif
