/* RPN proposal selection for one image (torchvision rpn.py
 * RegionProposalNetwork.filter_proposals; Detectron generate_proposals +
 * collect):
 *   per level: top pre_nms_top_n anchors by objectness logit,
 *   decode their deltas (box_coder.h), clip to the clip window (the
 *   resized image; Detectron: the padded input), drop boxes that fail the
 *   size rule (proposal_keep below), drop sigmoid scores < score_thresh;
 *   then NMS per level at nms_thresh, and keep the post_nms_top_n best over
 *   all levels (with post_nms_per_level, each level is capped first).
 *
 * Inputs per level l: logits [H*W*A] and deltas [H*W*A*4] in (y, x, a)
 * order, which is exactly the NHWC output of the RPN head's 1x1 convs.
 * Outputs: boxes [N,4] (x1,y1,x2,y2 in resized-image pixels) and sigmoid
 * scores [N], sorted by descending score; N <= post_nms_top_n. With
 * rank_by_logit the NMS ranks, and the outputs carry, the logits
 * (detectron2 keeps objectness_logits): the order differs from the
 * sigmoid's only where sigmoids round to 1.0 (logits above about 16.6) and
 * tie across levels. */
#ifndef MR_PROPOSALS_H
#define MR_PROPOSALS_H

#include <stddef.h>

#include <math.h>

#include "ops/anchors.h"
#include "ops/box_coder.h"
#include "core/hd.h"
#include "core/status.h"

#define MR_PROPOSAL_MAX_LEVELS 8

/* Which decoded, clipped boxes survive before NMS:
 *  GE:        w >= min_size && h >= min_size (torchvision remove_small_boxes)
 *  GT:        w >  min_size && h >  min_size (detectron2 Boxes.nonempty)
 *  DETECTRON: (x2-x1)/im_scale + 1 >= max(min_size, 1), likewise for y (the
 *             size in original pixels), and the centre x1 + (x2-x1+1)/2 <
 *             clip_w, likewise for y (Detectron ops/generate_proposals.py
 *             _filter_boxes, float32 as its numpy arrays). */
typedef enum { MR_PROPOSAL_KEEP_GE = 0, MR_PROPOSAL_KEEP_GT, MR_PROPOSAL_KEEP_DETECTRON } mr_proposal_size_rule;

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
    mr_proposal_size_rule size_rule;
    int nms_flags;                                   /* nms.h MR_NMS_* */
    int rank_by_logit;                               /* NMS order and output scores: logits, not sigmoids */
    float im_scale;                                  /* resized / original (DETECTRON rule only) */
    mr_box_coder coder;
    float img_h, img_w;                              /* clip window */
} mr_proposal_params;

/* 1 if the clipped box [x1,y1,x2,y2] passes the size rule. */
MR_HD static inline int proposal_keep(const mr_proposal_params *p, const float *box)
{
    float w = box[2] - box[0], h = box[3] - box[1];
    switch (p->size_rule) {
    case MR_PROPOSAL_KEEP_GT:
        return w > p->min_size && h > p->min_size;
    case MR_PROPOSAL_KEEP_DETECTRON: {
        float min_size = p->min_size > 1.0f ? p->min_size : 1.0f;
        float w_orig = w / p->im_scale + 1.0f, h_orig = h / p->im_scale + 1.0f;
        float x_ctr = box[0] + (w + 1.0f) / 2.0f, y_ctr = box[1] + (h + 1.0f) / 2.0f;
        return w_orig >= min_size && h_orig >= min_size && x_ctr < p->img_w && y_ctr < p->img_h;
    }
    default:
        if (p->coder.plus_one) {
            w += 1.0f;
            h += 1.0f;
        }
        return w >= p->min_size && h >= p->min_size;
    }
}

/* One ranked anchor of level l: anchor index i (in (y, x, a) order) of the
 * cell table `cell` (p->cell_anchors[l], or the device's copy of it), its
 * logit and its deltas [4]. Decodes and clips box[4], sets *score (the
 * logit with rank_by_logit, else the sigmoid) and returns 1 if the box
 * passes the size rule and the sigmoid is >= score_thresh (NaN fails).
 * proposals_select and cuda/proposals.cu both call it. */
MR_HD static inline int proposal_candidate(const mr_proposal_params *p, int l, const float *cell, int i, float logit,
                                           const float *delta, float *box, float *score)
{
    int A = p->num_anchors, a = i % A, x = (i / A) % p->grid_w[l], y = i / (A * p->grid_w[l]);
    float anchor[4];
    anchor_at(cell, a, x, y, p->stride_w[l], p->stride_h[l], p->offset, anchor);
    box_decode(&p->coder, anchor, delta, box);
    box_clip(box, p->img_h, p->img_w, p->coder.plus_one);
    float sigmoid = 1.0f / (1.0f + expf(-logit));
    *score = p->rank_by_logit ? logit : sigmoid;
    return proposal_keep(p, box) && sigmoid >= p->score_thresh;
}

size_t proposals_scratch_bytes(const mr_proposal_params *p);

/* Returns the number of proposals written. scratch: proposals_scratch_bytes(p). */
int proposals_cpu(const mr_proposal_params *p, const float *const *logits, const float *const *deltas,
                  float *boxes, float *scores, void *scratch);

/* proposals_cpu after its ranking step: ranked[l] holds level l's first
 * min(pre_nms_top_n, H*W*A) anchor indices by descending logit, equal
 * logits by ascending index. Same scratch as proposals_cpu. The CUDA
 * backend runs the same steps on the GPU (cuda/proposals.cu, cuda/nms.cu)
 * in this function's order. */
int proposals_select(const mr_proposal_params *p, const int *const *ranked, const float *const *logits,
                     const float *const *deltas, float *boxes, float *scores, void *scratch);

#endif
