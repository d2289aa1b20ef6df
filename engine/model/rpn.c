/* The region proposal network: shared 3x3 convs + ReLU on every FPN level
 * (one, or two for the strong baselines: config rpn.num_convs; a head block),
 * 1x1 objectness and box-delta convs, then proposal selection
 * (proposals.h). The head's NHWC outputs are already in the (y, x, anchor)
 * order the selection walks, so nothing is permuted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/anchors.h"
#include "model/model_internal.h"
#include "ops/proposals.h"

mr_status rpn_load(mr_model *m, mr_weights *w, mr_error *err)
{
    const mr_anchor_config *ac = &m->cfg.anchors;
    int F = m->cfg.fpn.out_channels;
    m->num_anchors = ac->num_ratios * ac->num_sizes_per_level;
    for (int l = 0; l < m->num_levels; l++) {
        if (ac->cell_rule == MR_ANCHOR_CELL_DETECTRON)
            anchors_cell_detectron((float)(1 << (m->cfg.fpn.min_level + l)), ac->sizes[l], ac->num_sizes_per_level,
                                   ac->aspect_ratios, ac->num_ratios, m->cell_anchors[l]);
        else
            anchors_cell(ac->sizes[l], ac->num_sizes_per_level, ac->aspect_ratios, ac->num_ratios, ac->round_base,
                         m->cell_anchors[l]);
    }
    /* shared by every level: the largest is the finest, P2 */
    mr_extent in = model_level_extent(m, 1 << m->cfg.fpn.min_level);
    /* the shared convs: "rpn.conv", then "rpn.conv2".."rpn.convN" (models/README.md) */
    mr_head_spec head;
    memset(&head, 0, sizeof head);
    head.num_convs = m->cfg.rpn.num_convs;
    head.conv_dim = F;
    head.norm = model_norm_spec(MR_NORM_NONE, 0.0f, 1, "rpn");
    head.cin = F;
    head.in = in;
    for (int i = 0; i < head.num_convs && i < MR_HEAD_MAX_CONVS; i++) {
        if (i == 0) snprintf(head.conv_name[i], sizeof head.conv_name[i], "rpn.conv");
        else snprintf(head.conv_name[i], sizeof head.conv_name[i], "rpn.conv%d", i + 1);
    }
    /* the predictors, both convs reading the same map (so at one range) */
    snprintf(head.last_reader, sizeof head.last_reader, "rpn.objectness");
    MR_TRY(head_block_load(m, w, &head, &m->rpn_head, err));
    MR_TRY(model_conv_layer(m, w, "rpn.objectness", F, m->num_anchors, 1, 1, 0, 0, in, &m->rpn_logits, err));
    return model_conv_layer(m, w, "rpn.deltas", F, 4 * m->num_anchors, 1, 1, 0, 0, in, &m->rpn_deltas, err);
}

static void proposal_params(const mr_model *m, mr_proposal_params *p)
{
    const mr_config *c = &m->cfg;
    memset(p, 0, sizeof *p);
    p->num_levels = m->num_levels;
    p->num_anchors = m->num_anchors;
    for (int l = 0; l < m->num_levels; l++) {
        const mr_tensor *f = &m->buf.p[l];
        p->cell_anchors[l] = m->cell_anchors[l];
        p->grid_h[l] = f->h;
        p->grid_w[l] = f->w;
        if (c->anchors.stride_rule == MR_ANCHOR_STRIDE_PADDED_DIV_GRID) {
            /* torchvision: integer division of the padded size (P6 at 800x1216 gets 61 x 64). */
            p->stride_h[l] = (float)(m->geo.padded_h / f->h);
            p->stride_w[l] = (float)(m->geo.padded_w / f->w);
        } else {
            p->stride_h[l] = p->stride_w[l] = (float)(1 << (c->fpn.min_level + l));
        }
    }
    p->offset = c->anchors.offset;
    p->pre_nms_top_n = c->rpn.pre_nms_top_n;
    p->post_nms_top_n = c->rpn.post_nms_top_n;
    p->post_nms_per_level = c->rpn.post_nms_per_level;
    p->nms_thresh = c->rpn.nms_thresh;
    p->min_size = c->rpn.min_size;
    p->size_rule = c->rpn.min_size_rule == MR_RPN_MIN_SIZE_DETECTRON    ? MR_PROPOSAL_KEEP_DETECTRON
                   : c->rpn.min_size_rule == MR_RPN_MIN_SIZE_DETECTRON2 ? MR_PROPOSAL_KEEP_GT
                                                                        : MR_PROPOSAL_KEEP_GE;
    p->im_scale = m->geo.scale_h; /* Detectron's single im_scale (both axes) */
    p->score_thresh = c->rpn.score_thresh;
    for (int k = 0; k < 4; k++) p->coder.weights[k] = c->rpn.box_weights[k];
    p->coder.clip = c->box.bbox_xform_clip;
    p->coder.clip_both_sides = c->box.bbox_xform_clip_rule == MR_XFORM_CLIP_SYMMETRIC;
    p->coder.plus_one = c->box.legacy_plus_one;
    p->nms_flags = model_nms_flags(c);
    p->rank_by_logit = c->rpn.rank_by_logit;
    int padded = c->rpn.clip_window == MR_CLIP_PADDED;
    p->img_h = (float)(padded ? m->geo.padded_h : m->geo.resized_h);
    p->img_w = (float)(padded ? m->geo.padded_w : m->geo.resized_w);
}

mr_status rpn_head_forward(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    int A = m->num_anchors;
    for (int l = 0; l < m->num_levels; l++) {
        const mr_tensor *f = &b->p[l], *hidden = NULL;
        mr_tensor *bufs[2] = {&b->rpn_hidden[0], &b->rpn_hidden[1]};
        MR_TRY(head_block_forward(m, &m->rpn_head, f, bufs, NULL, &hidden, err));
        MR_TRY(tensor_shape(&b->rpn_logits[l], 1, f->h, f->w, A, err));
        MR_TRY(be->conv(m->be.ctx, m->rpn_logits, hidden, &b->rpn_logits[l], 0, err));
        MR_TRY(tensor_shape(&b->rpn_deltas[l], 1, f->h, f->w, 4 * A, err));
        MR_TRY(be->conv(m->be.ctx, m->rpn_deltas, hidden, &b->rpn_deltas[l], 0, err));
    }
    return MR_OK;
}

mr_status rpn_select(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    mr_proposal_params p;
    proposal_params(m, &p);
    const mr_tensor *logits[MR_MAX_LEVELS], *deltas[MR_MAX_LEVELS];
    for (int l = 0; l < m->num_levels; l++) {
        logits[l] = &b->rpn_logits[l];
        deltas[l] = &b->rpn_deltas[l];
    }
    MR_TRY(tensor_shape(&b->proposals, (int)(b->proposals.cap / 4), 1, 1, 4, err));
    MR_TRY(tensor_shape(&b->proposal_scores, (int)b->proposal_scores.cap, 1, 1, 1, err));
    return be->rpn_proposals(m->be.ctx, &p, logits, deltas, &b->proposals, &b->proposal_scores, err);
}
