/* Box head post-processing for one image (torchvision roi_heads.py
 * postprocess_detections; Detectron test.py box_results_with_nms_and_limit):
 *   softmax over the K class logits of each RoI; decode the class-specific
 *   deltas against the RoI (box_coder.h); clip to the resized image;
 *   keep (RoI, class >= 1) pairs with score > score_thresh and both sides
 *   >= min_size; NMS per class at nms_thresh; keep the max_dets best by
 *   score (keep_ties: also every further one tied with the last kept, as
 *   Detectron's "score >= the 100th score").
 *
 * Inputs: rois [n,4], logits [n,K], deltas [n,4K] (row 4k+j, j = dx,dy,dw,dh).
 * Outputs: boxes [D,4] (resized-image pixels), scores [D], labels [D]
 * (class ids as floats), sorted by descending score. */
#ifndef MR_BOX_POST_H
#define MR_BOX_POST_H

#include <stddef.h>

#include <math.h>

#include "box_coder.h"
#include "hd.h"

typedef struct {
    int num_classes;  /* K, including background at 0 */
    mr_box_coder coder;
    float img_h, img_w;
    double nms_thresh;
    float score_thresh, min_size;
    int max_dets;
    int keep_ties;
    int out_capacity; /* rows the outputs can hold (>= max_dets) */
} mr_box_post_params;

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

size_t box_post_scratch_bytes(const mr_box_post_params *p, int n);

/* Returns D, the number of detections written. */
int box_post_cpu(const mr_box_post_params *p, const float *rois, const float *logits, const float *deltas, int n,
                 float *boxes, float *scores, float *labels, void *scratch);

#endif
