/* RPN proposal selection for one image (torchvision rpn.py
 * RegionProposalNetwork.filter_proposals; Detectron generate_proposals +
 * collect):
 *   per level: top pre_nms_top_n anchors by objectness logit,
 *   decode their deltas (box_coder.h), clip to the resized image,
 *   drop boxes with a side < min_size, drop sigmoid scores < score_thresh;
 *   then NMS per level at nms_thresh, and keep the post_nms_top_n best over
 *   all levels (with post_nms_per_level, each level is capped first).
 *
 * Inputs per level l: logits [H*W*A] and deltas [H*W*A*4] in (y, x, a)
 * order, which is exactly the NHWC output of the RPN head's 1x1 convs.
 * Outputs: boxes [N,4] (x1,y1,x2,y2 in resized-image pixels) and sigmoid
 * scores [N], sorted by descending score; N <= post_nms_top_n. */
#ifndef MR_PROPOSALS_H
#define MR_PROPOSALS_H

#include <stddef.h>

#include "box_coder.h"
#include "status.h"

#define MR_PROPOSAL_MAX_LEVELS 8

typedef struct {
    int num_levels;
    int num_anchors;                                 /* A, per position */
    const float *cell_anchors[MR_PROPOSAL_MAX_LEVELS]; /* [A,4] per level, centred on 0 */
    int grid_h[MR_PROPOSAL_MAX_LEVELS], grid_w[MR_PROPOSAL_MAX_LEVELS];
    float stride_h[MR_PROPOSAL_MAX_LEVELS], stride_w[MR_PROPOSAL_MAX_LEVELS];
    float offset;                                    /* anchor centre offset, in strides */
    int pre_nms_top_n, post_nms_top_n, post_nms_per_level;
    double nms_thresh;
    float min_size, score_thresh;
    mr_box_coder coder;
    float img_h, img_w;                              /* clip window: the resized image */
} mr_proposal_params;

size_t proposals_scratch_bytes(const mr_proposal_params *p);

/* Returns the number of proposals written. */
int proposals_cpu(const mr_proposal_params *p, const float *const *logits, const float *const *deltas,
                  float *boxes, float *scores, void *scratch);

#endif
