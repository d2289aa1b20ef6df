/* The box head: multi-level RoIAlign of the proposals (7x7 from P2..P5),
 * fc6 + ReLU, fc7 + ReLU, the class and box predictors, then
 * post-processing (box_post.h) into at most detections_per_image boxes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/box_post.h"
#include "model/model_internal.h"
#include "ops/roi_align.h"

/* Reads a linear layer [out, in]. With chw = {C, H, W}, the input columns
 * are stored in PyTorch's flatten order (C, H, W) and are permuted here to
 * our NHWC order (H, W, C), once, so pooled features need no transpose. */
static mr_status linear_layer(mr_model *m, mr_weights *w, const char *prefix, int in, int out, int relu,
                              const int *chw, mr_layer **dst, mr_error *err)
{
    char name[256];
    float *wt = malloc(sizeof(float) * ((size_t)in * (size_t)out * (chw ? 2 : 1) + (size_t)out));
    if (!wt) return mr_fail(err, MR_ERR_OOM, "out of memory loading %s", prefix);
    float *bias = wt + (size_t)in * (size_t)out, *perm = bias + out;
    int64_t wshape[2] = {out, in}, bshape[1] = {out};
    snprintf(name, sizeof name, "%s.weight", prefix);
    mr_status st = weights_read_f32(w, name, 2, wshape, wt, err);
    snprintf(name, sizeof name, "%s.bias", prefix);
    if (st == MR_OK) st = weights_read_f32(w, name, 1, bshape, bias, err);
    const float *use = wt;
    if (st == MR_OK && chw) {
        int C = chw[0], H = chw[1], W = chw[2];
        for (int o = 0; o < out; o++)
            for (int c = 0; c < C; c++)
                for (int y = 0; y < H; y++)
                    for (int x = 0; x < W; x++)
                        perm[(size_t)o * in + ((size_t)y * W + x) * C + c] = wt[(size_t)o * in + ((size_t)c * H + y) * W + x];
        use = perm;
    }
    if (st == MR_OK) st = model_check_finite(w, prefix, wt, (size_t)in * (size_t)out + (size_t)out, err);
    if (st == MR_OK) {
        mr_linear_params p = {in, out, relu};
        st = m->be.i->linear_init(m->be.ctx, prefix, &p, use, bias, dst, err);
    }
    free(wt);
    return st;
}

mr_status box_head_load(mr_model *m, mr_weights *w, mr_error *err)
{
    const mr_box_head_config *bh = &m->cfg.box_head;
    int F = m->cfg.fpn.out_channels, R = bh->pooler.resolution, K = m->cfg.classes.num_classes;
    int chw[3] = {F, R, R};
    MR_TRY(linear_layer(m, w, "box_head.fc6", F * R * R, bh->fc_dim, 1, chw, &m->fc6, err));
    MR_TRY(linear_layer(m, w, "box_head.fc7", bh->fc_dim, bh->fc_dim, 1, NULL, &m->fc7, err));
    MR_TRY(linear_layer(m, w, "box_predictor.cls_score", bh->fc_dim, K, 0, NULL, &m->cls_score, err));
    return linear_layer(m, w, "box_predictor.bbox_pred", bh->fc_dim, 4 * K, 0, NULL, &m->bbox_pred, err);
}

void model_level_map(const mr_model *m, const mr_pooler_config *pc, mr_level_map *map)
{
    map->min_level = m->cfg.fpn.min_level;
    map->max_level = 5; /* RoIs pool from P2..P5; P6 only feeds the RPN */
    map->canonical_size = pc->canonical_size;
    map->canonical_level = pc->canonical_level;
    map->eps = pc->level_eps;
    map->plus_one = m->cfg.box.legacy_plus_one;
    map->eps_inside_log = pc->level_eps_inside_log;
}

mr_status model_roi_align(mr_model *m, const mr_pooler_config *pc, const mr_tensor *rois, mr_tensor *out,
                          mr_error *err)
{
    int n = rois->n, F = m->cfg.fpn.out_channels, R = pc->resolution;
    MR_TRY(tensor_shape(out, n, R, R, F, err));
    mr_roi_align_params p = {R, R, pc->sampling_ratio, pc->aligned, 1.0f};
    mr_level_map map;
    model_level_map(m, pc, &map);
    const mr_tensor *levels[4] = {&m->buf.p[0], &m->buf.p[1], &m->buf.p[2], &m->buf.p[3]};
    return m->be.i->roi_align(m->be.ctx, &p, &map, levels, rois, out, err);
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
    int n = b->proposals.n, K = c->classes.num_classes, D = c->box_head.fc_dim;
    MR_TRY(model_roi_align(m, &c->box_head.pooler, &b->proposals, &b->box_feats, err));
    mr_tensor flat = b->box_feats;
    flat.h = flat.w = 1;
    flat.c = b->box_feats.h * b->box_feats.w * b->box_feats.c;
    MR_TRY(tensor_shape(&b->fc6, n, 1, 1, D, err));
    MR_TRY(be->linear(m->be.ctx, m->fc6, &flat, &b->fc6, err));
    MR_TRY(tensor_shape(&b->fc7, n, 1, 1, D, err));
    MR_TRY(be->linear(m->be.ctx, m->fc7, &b->fc6, &b->fc7, err));
    MR_TRY(tensor_shape(&b->class_logits, n, 1, 1, K, err));
    MR_TRY(be->linear(m->be.ctx, m->cls_score, &b->fc7, &b->class_logits, err));
    MR_TRY(tensor_shape(&b->box_deltas, n, 1, 1, 4 * K, err));
    MR_TRY(be->linear(m->be.ctx, m->bbox_pred, &b->fc7, &b->box_deltas, err));

    mr_box_post_params p;
    memset(&p, 0, sizeof p);
    p.num_classes = K;
    for (int k = 0; k < 4; k++) p.coder.weights[k] = c->box_head.box_weights[k];
    p.coder.clip = c->box.bbox_xform_clip;
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
