/* The box head: multi-level RoIAlign of the proposals (7x7 from P2..P5),
 * the head block (head_block.c: fc6 + ReLU, fc7 + ReLU for the classic
 * head; four 3x3 convs with their norm, then fc6, for 4conv1fc), the class
 * and box predictors, then
 * post-processing (box_post.h) into at most detections_per_image boxes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/box_post.h"
#include "model/model_internal.h"
#include "ops/roi_align.h"

mr_status box_head_load(mr_model *m, mr_weights *w, mr_error *err)
{
    const mr_box_head_config *bh = &m->cfg.box_head;
    int F = m->cfg.fpn.out_channels, R = bh->pooler.resolution, K = m->cfg.classes.num_classes;
    /* "box_head.conv1".."convN" over every RoI (batched: N = RoIs), then
     * "box_head.fc6", "fc7", ... (models/README.md) */
    mr_head_spec head;
    memset(&head, 0, sizeof head);
    head.num_convs = bh->num_convs;
    head.conv_dim = bh->conv_dim;
    head.norm = model_norm_spec(bh->norm, bh->norm_eps, bh->norm_groups, "box_head");
    head.num_fcs = bh->num_fcs;
    head.fc_dim = bh->fc_dim;
    head.cin = F;
    head.resolution = R;
    head.in = (mr_extent){m->max_rois, R, R};
    for (int i = 0; i < bh->num_convs && i < MR_HEAD_MAX_CONVS; i++)
        snprintf(head.conv_name[i], sizeof head.conv_name[i], "box_head.conv%d", i + 1);
    for (int i = 0; i < bh->num_fcs && i < MR_HEAD_MAX_FCS; i++)
        snprintf(head.fc_name[i], sizeof head.fc_name[i], "box_head.fc%d", i + 6);
    MR_TRY(head_block_load(m, w, &head, &m->box_head, err));
    MR_TRY(model_linear_layer(m, w, "box_predictor.cls_score", bh->fc_dim, K, 0, NULL, &m->cls_score, err));
    int agnostic = bh->class_agnostic_regression, deltas = box_post_delta_cols(K, agnostic);
    MR_TRY(model_check_class_rows(w, "box_predictor.bbox_pred.weight", deltas, agnostic, box_post_delta_cols(K, !agnostic),
                                  "box_head.class_agnostic_regression", err));
    return model_linear_layer(m, w, "box_predictor.bbox_pred", bh->fc_dim, deltas, 0, NULL, &m->bbox_pred, err);
}

/* Detectron decodes detections in original pixels: keep those as the final
 * boxes and give the mask head its RoIs in network-input pixels, as
 * test.py _get_rois_blob does (boxes * im_scale in float64, stored as
 * float32; factor_h is that im_scale, as a double, under resize_rounding
 * "round"). A few hundred floats cross to the host and back. */
static mr_status project_original_detections(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    size_t n = (size_t)b->detections.n, bytes = sizeof(float) * 4 * n;
    if (n == 0) return tensor_shape(&b->final_boxes, 0, 1, 1, 4, err);
    float *host = malloc(bytes);
    if (!host) return mr_fail(err, MR_ERR_OOM, "out of memory for %zu detections", n);
    mr_status st = tensor_shape(&b->final_boxes, (int)n, 1, 1, 4, err);
    if (st == MR_OK) st = be->copy_to_host(m->be.ctx, host, b->detections.data, bytes, err);
    if (st == MR_OK) st = be->copy_to_device(m->be.ctx, b->final_boxes.data, host, bytes, err);
    for (size_t i = 0; i < 4 * n; i++) host[i] = (float)((double)host[i] * m->geo.factor_h);
    if (st == MR_OK) st = be->copy_to_device(m->be.ctx, b->detections.data, host, bytes, err);
    free(host);
    return st;
}

mr_status box_head_forward(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    const mr_config *c = &m->cfg;
    int n = b->proposals.n, K = c->classes.num_classes;
    MR_TRY(model_roi_align(m, &c->box_head.pooler, &b->proposals, &b->box_feats, err));
    mr_tensor *conv_bufs[2] = {&b->box_conv[0], &b->box_conv[1]}, *fc_bufs[2] = {&b->box_fc[0], &b->box_fc[1]};
    const mr_tensor *features = NULL;
    MR_TRY(head_block_forward(m, &m->box_head, &b->box_feats, conv_bufs, fc_bufs, &features, err));
    MR_TRY(tensor_shape(&b->class_logits, n, 1, 1, K, err));
    MR_TRY(be->linear(m->be.ctx, m->cls_score, features, &b->class_logits, err));
    int deltas = box_post_delta_cols(K, c->box_head.class_agnostic_regression);
    MR_TRY(tensor_shape(&b->box_deltas, n, 1, 1, deltas, err));
    MR_TRY(be->linear(m->be.ctx, m->bbox_pred, features, &b->box_deltas, err));

    mr_box_post_params p;
    memset(&p, 0, sizeof p);
    p.num_classes = K;
    p.class_agnostic = c->box_head.class_agnostic_regression;
    for (int k = 0; k < 4; k++) p.coder.weights[k] = c->box_head.box_weights[k];
    p.coder.clip = c->box.bbox_xform_clip;
    p.coder.clip_both_sides = c->box.bbox_xform_clip_rule == MR_XFORM_CLIP_SYMMETRIC;
    p.coder.plus_one = c->box.legacy_plus_one;
    p.nms_flags = model_nms_flags(c);
    int original = c->box_head.decode_coordinates == MR_DECODE_ORIGINAL;
    p.roi_divisor = original ? (float)m->geo.factor_h : 1.0f;
    p.img_h = (float)(original ? m->geo.in_h : m->geo.resized_h);
    p.img_w = (float)(original ? m->geo.in_w : m->geo.resized_w);
    p.score_thresh = c->box_head.score_thresh;
    p.nms_thresh = c->box_head.nms_thresh;
    p.agnostic_nms = c->box_head.agnostic_nms;
    p.agnostic_nms_thresh = c->box_head.agnostic_nms_thresh;
    p.min_size = c->box_head.min_size;
    p.max_dets = c->box_head.detections_per_image;
    p.keep_ties = c->box_head.keep_ties;
    p.out_capacity = (int)b->detection_scores.cap;
    MR_TRY(model_set_count(m, "detections", p.out_capacity, err));
    MR_TRY(be->box_detections(m->be.ctx, &p, &b->proposals, &b->class_logits, &b->box_deltas, &b->detections,
                              &b->detection_scores, &b->detection_labels, err));
    return original ? project_original_detections(m, err) : MR_OK;
}
