/* The mask head: multi-level RoIAlign (14x14) of the final boxes, four
 * 3x3 conv (+ norm: config mask_head.norm) + ReLU as a head block
 * (head_block.c), a 2x2 stride-2 transposed conv + ReLU, 1x1 class
 * logits, and the sigmoid of the predicted class's channel (28x28): only
 * that class's logits where the backend has mask_class_probs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops/box_coder.h"
#include "model/model_internal.h"

/* The mask predictor for mask_class_probs: its [K, D, 1, 1] weights and its
 * bias, copied once into backend memory (one block: weights, then bias). */
static mr_status mask_class_load(mr_model *m, mr_weights *w, int D, int K, mr_error *err)
{
    size_t wn = (size_t)K * (size_t)D, bytes = sizeof(float) * (wn + (size_t)K);
    float *host = malloc(bytes);
    if (!host) return mr_fail(err, MR_ERR_OOM, "out of memory loading mask_head.logits");
    int64_t wshape[4] = {K, D, 1, 1}, bshape[1] = {K};
    mr_status st = weights_read_f32(w, "mask_head.logits.weight", 4, wshape, host, err);
    if (st == MR_OK) st = weights_read_f32(w, "mask_head.logits.bias", 1, bshape, host + wn, err);
    if (st == MR_OK) st = model_check_finite(w, "mask_head.logits", host, wn + (size_t)K, err);
    void *dev = NULL;
    if (st == MR_OK) st = m->be.i->buffer_alloc(m->be.ctx, bytes, &dev, err);
    if (st == MR_OK) {
        m->mask_class_weight = mr_tensor_make(dev, K, 1, 1, D);
        m->mask_class_bias = mr_tensor_make((float *)dev + wn, K, 1, 1, 1);
        st = m->be.i->copy_to_device(m->be.ctx, dev, host, bytes, err);
    }
    free(host);
    return st;
}

mr_status mask_head_load(mr_model *m, mr_weights *w, mr_error *err)
{
    const mr_mask_head_config *mh = &m->cfg.mask_head;
    /* a class-agnostic predictor has one channel for every class (ops/mask_probs.h) */
    int F = m->cfg.fpn.out_channels, K = mh->class_agnostic ? 1 : m->cfg.classes.num_classes;
    /* batches of up to max_dets RoIs: R x R features, 2R x 2R after the deconv */
    int R = mh->pooler.resolution;
    mr_extent roi = {m->max_dets, R, R}, up = {m->max_dets, 2 * R, 2 * R};
    mr_head_spec head;
    memset(&head, 0, sizeof head);
    head.num_convs = mh->num_convs;
    head.conv_dim = mh->conv_dim;
    head.norm = model_norm_spec(mh->norm, mh->norm_eps, mh->norm_groups, "mask_head");
    head.cin = F;
    head.resolution = R;
    head.in = roi;
    for (int i = 0; i < mh->num_convs && i < MR_HEAD_MAX_CONVS; i++)
        snprintf(head.conv_name[i], sizeof head.conv_name[i], "mask_head.fcn%d", i + 1);
    MR_TRY(head_block_load(m, w, &head, &m->mask_head, err));
    /* without convs the deconv reads the pooled features */
    int D = mh->conv_dim, Din = mh->num_convs ? D : F;
    size_t wn = (size_t)Din * (size_t)D * 4;
    float *wt = malloc(sizeof(float) * (wn + (size_t)D));
    if (!wt) return mr_fail(err, MR_ERR_OOM, "out of memory loading mask_head.deconv");
    int64_t wshape[4] = {Din, D, 2, 2}, bshape[1] = {D};
    mr_status st = weights_read_f32(w, "mask_head.deconv.weight", 4, wshape, wt, err);
    if (st == MR_OK) st = weights_read_f32(w, "mask_head.deconv.bias", 1, bshape, wt + wn, err);
    if (st == MR_OK) st = model_check_finite(w, "mask_head.deconv", wt, wn + (size_t)D, err);
    if (st == MR_OK) {
        mr_deconv2x2_params p = {Din, D, 1, roi.n, roi.h, roi.w, model_layer_keeps_fp32(&m->cfg, "mask_head.deconv"),
                                 0.0f, 0};
        st = model_gemm_int8_range(m, "mask_head.deconv", &p.int8_range, &p.int8_signed, err);
        if (st == MR_OK)
            st = m->be.i->deconv2x2_init(m->be.ctx, "mask_head.deconv", &p, wt, wt + wn, &m->mask_deconv,
                                     err);
    }
    free(wt);
    MR_TRY(st);
    MR_TRY(model_check_class_rows(w, "mask_head.logits.weight", K, mh->class_agnostic,
                                  mh->class_agnostic ? m->cfg.classes.num_classes : 1, "mask_head.class_agnostic", err));
    if (m->be.i->mask_class_probs) return mask_class_load(m, w, D, K, err);
    return model_conv_layer(m, w, "mask_head.logits", D, K, 1, 1, 0, 0, up, &m->mask_logits, err);
}

mr_status mask_head_forward(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    const mr_mask_head_config *mh = &m->cfg.mask_head;
    int n = b->detections.n, R = mh->pooler.resolution, D = mh->conv_dim;
    int K = mh->class_agnostic ? 1 : m->cfg.classes.num_classes;
    MR_TRY(model_roi_align(m, &mh->pooler, &b->detections, &b->mask_feats, err));
    mr_tensor *conv_bufs[2] = {&b->mask_a, &b->mask_b};
    const mr_tensor *x = NULL;
    MR_TRY(head_block_forward(m, &m->mask_head, &b->mask_feats, conv_bufs, NULL, &x, err));
    MR_TRY(tensor_shape(&b->mask_up, n, 2 * R, 2 * R, D, err));
    MR_TRY(be->deconv2x2(m->be.ctx, m->mask_deconv, x, &b->mask_up, err));
    MR_TRY(tensor_shape(&b->mask_probs, n, 2 * R, 2 * R, 1, err));
    if (!m->mask_logits)
        return be->mask_class_probs(m->be.ctx, &b->mask_up, &m->mask_class_weight, &m->mask_class_bias,
                                    &b->detection_labels, &b->mask_probs, err);
    MR_TRY(tensor_shape(&b->mask_logits, n, 2 * R, 2 * R, K, err));
    MR_TRY(be->conv(m->be.ctx, m->mask_logits, &b->mask_up, &b->mask_logits, 0, err));
    return be->mask_probs(m->be.ctx, &b->mask_logits, &b->detection_labels, &b->mask_probs, err);
}

void model_final_box_params(const mr_model *m, mr_final_box_params *p)
{
    p->img_h = m->geo.in_h;
    p->img_w = m->geo.in_w;
    p->ratio_w = (float)m->geo.in_w / (float)m->geo.resized_w;
    p->ratio_h = (float)m->geo.in_h / (float)m->geo.resized_h;
    p->clip = m->cfg.box_head.clip_final_boxes;
}

void model_paste_params(const mr_model *m, mr_mask_paste_params *p)
{
    const mr_mask_head_config *mh = &m->cfg.mask_head;
    mr_mask_paste_params q = {2 * mh->pooler.resolution, mh->paste_padding, mh->threshold,
                              mh->threshold_rule == MR_MASK_THRESH_GE ? MR_MASK_GE : MR_MASK_GT,
                              mh->paste_rule == MR_MASK_PASTE_DETECTRON2 ? MR_PASTE_DETECTRON2 : MR_PASTE_TORCHVISION};
    *p = q;
}

/* Final boxes in original-image pixels into host[0..4n): final_box
 * (ops/final_boxes.h), or as the box head decoded them (Detectron). */
static mr_status final_boxes(mr_model *m, float *host, int n, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_box_head_config *bh = &m->cfg.box_head;
    size_t bytes = sizeof(float) * 4 * (size_t)n;
    if (bh->decode_coordinates == MR_DECODE_ORIGINAL) return m->be.i->copy_to_host(m->be.ctx, host, b->final_boxes.data, bytes, err);
    MR_TRY(m->be.i->copy_to_host(m->be.ctx, host, b->detections.data, bytes, err));
    mr_final_box_params fp;
    model_final_box_params(m, &fp);
    for (int d = 0; d < n; d++) final_box(&fp, host + 4 * d);
    return MR_OK;
}

/* detectron2 keeps only non-empty boxes (x2 > x1 and y2 > y1) after the
 * clip; the float masks (plane floats each, when given) are compacted the
 * same way so that row d still belongs to res->dets[d]. (A dropped box's
 * mask window is empty: the paste skips it.) */
static void drop_empty(mr_result *res, float *float_masks, size_t plane)
{
    int kept = 0;
    for (int d = 0; d < res->count; d++) {
        mr_detection *det = &res->dets[d];
        if (det->box[2] > det->box[0] && det->box[3] > det->box[1]) {
            if (float_masks && kept != d)
                memmove(float_masks + (size_t)kept * plane, float_masks + (size_t)d * plane, plane * sizeof(float));
            res->dets[kept++] = *det;
        }
    }
    res->count = kept;
}

/* Each detection's mask window from its final box, and the windows'
 * storage (all back to back, in res->mask_storage; soft: the same layout
 * in floats, when asked for). */
static mr_status mask_windows(const mr_mask_paste_params *p, const float *boxes, mr_result *res,
                              mr_mask_window *win, float **soft, mr_error *err)
{
    size_t total = 0;
    for (int d = 0; d < res->count; d++) {
        win[d] = mask_paste_window(p, boxes + 4 * d, res->height, res->width);
        total += mask_window_pixels(win[d]);
    }
    res->mask_storage = malloc(total ? total : 1);
    if (soft) *soft = malloc(sizeof(float) * (total ? total : 1));
    if (!res->mask_storage || (soft && !*soft))
        return mr_fail(err, MR_ERR_OOM, "out of memory for %d masks (%zu pixels)", res->count, total);
    size_t at = 0;
    for (int d = 0; d < res->count; d++) {
        res->dets[d].mask = res->mask_storage + at;
        res->dets[d].mask_win = win[d];
        at += mask_window_pixels(win[d]);
    }
    return MR_OK;
}

/* Final results in original-image pixels: final_boxes above, and each
 * 28x28 probability map pasted into its window of the image and
 * thresholded. */
mr_status model_stage_paste(mr_model *m, mr_result *res, float *float_masks, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    memset(res, 0, sizeof *res);
    MR_TRY(model_counts_to_host(m, 0, err)); /* the first wait for the device, where counts stayed there */
    int n = b->detections.n, H = m->geo.in_h, W = m->geo.in_w;
    res->width = W;
    res->height = H;
    if (n == 0) return MR_OK;
    /* Detections come back to the host once: boxes, scores, labels (6 floats each). */
    float *host = malloc(sizeof(float) * 6 * (size_t)n), *soft = NULL;
    mr_mask_window *win = calloc((size_t)n, sizeof *win);
    res->dets = calloc((size_t)n, sizeof *res->dets);
    mr_status st = host && win && res->dets ? MR_OK : mr_fail(err, MR_ERR_OOM, "out of memory for %d detections", n);
    if (st == MR_OK) st = final_boxes(m, host, n, err);
    if (st == MR_OK)
        st = be->copy_to_host(m->be.ctx, host + 4 * n, b->detection_scores.data, sizeof(float) * (size_t)n, err);
    if (st == MR_OK)
        st = be->copy_to_host(m->be.ctx, host + 5 * n, b->detection_labels.data, sizeof(float) * (size_t)n, err);
    for (int d = 0; st == MR_OK && d < n; d++) {
        mr_detection *det = &res->dets[d];
        memcpy(det->box, host + 4 * d, sizeof det->box);
        det->score = host[4 * n + d];
        det->class_id = (int)host[5 * n + d];
    }
    if (st == MR_OK) res->count = n;
    mr_mask_paste_params p;
    model_paste_params(m, &p);
    if (st == MR_OK) st = mask_windows(&p, host, res, win, float_masks ? &soft : NULL, err);
    if (st == MR_OK) st = tensor_shape(&b->final_boxes, n, 1, 1, 4, err);
    if (st == MR_OK) st = be->copy_to_device(m->be.ctx, b->final_boxes.data, host, sizeof(float) * 4 * (size_t)n, err);
    if (st == MR_OK)
        st = be->mask_paste(m->be.ctx, &p, &b->mask_probs, &b->final_boxes, H, W, win, res->mask_storage, soft, err);
    if (st == MR_OK && float_masks) {
        size_t at = 0;
        for (int d = 0; d < n; d++) {
            mask_window_to_plane_f32(win[d], soft + at, H, W, float_masks + (size_t)d * H * W);
            at += mask_window_pixels(win[d]);
        }
    }
    free(host);
    free(win);
    free(soft);
    if (st != MR_OK)
        result_free(res);
    else if (m->cfg.box_head.clip_final_boxes)
        drop_empty(res, float_masks, (size_t)H * (size_t)W);
    return st;
}

/* The paste stage's device half (backend.h, paste_on_device), issued inside
 * the forward unit; model_result_from_block reads what it left. */
mr_status model_paste_on_device(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    mr_mask_paste_params p;
    mr_final_box_params fb;
    model_paste_params(m, &p);
    model_final_box_params(m, &fb);
    return m->be.i->paste_on_device(m->be.ctx, &p, &fb, &b->detections, &b->detection_scores, &b->detection_labels,
                                    &b->mask_probs, &b->final_boxes, err);
}

/* The result from the backend's block: one wait, then the host only copies
 * (the masks' windows, already back to back in mr_result's layout). Windows
 * that overflowed the block are pasted here with mask_paste, as the host
 * stage does. Empty boxes are dropped as model_stage_paste drops them. */
mr_status model_result_from_block(mr_model *m, mr_result *res, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    const mr_paste_block_header *h;
    const mr_paste_block_row *rows;
    const uint8_t *masks;
    memset(res, 0, sizeof *res);
    MR_TRY(be->paste_block(m->be.ctx, &h, &rows, &masks, err));
    int n = h->count, H = m->geo.in_h, W = m->geo.in_w;
    if (n < 0 || n > b->detections.n)
        return mr_fail(err, MR_ERR_INTERNAL, "detections: the backend counted %d rows of %d (its NMS over its planned "
                       "group size?)", n, b->detections.n);
    res->width = W;
    res->height = H;
    if (n == 0) return MR_OK;
    size_t pixels = (size_t)h->pixels;
    res->dets = calloc((size_t)n, sizeof *res->dets);
    res->mask_storage = malloc(pixels ? pixels : 1);
    mr_mask_window *win = h->overflow ? calloc((size_t)n, sizeof *win) : NULL;
    if (!res->dets || !res->mask_storage || (h->overflow && !win)) {
        free(win);
        result_free(res);
        return mr_fail(err, MR_ERR_OOM, "out of memory for %d detections (%zu mask pixels)", n, pixels);
    }
    res->count = n;
    for (int d = 0; d < n; d++) {
        mr_detection *det = &res->dets[d];
        memcpy(det->box, rows[d].box, sizeof det->box);
        det->score = rows[d].score;
        det->class_id = (int)rows[d].label;
        det->mask_win = rows[d].win;
        det->mask = res->mask_storage + rows[d].offset;
        if (win) win[d] = rows[d].win;
    }
    mr_status st = MR_OK;
    if (!h->overflow) {
        memcpy(res->mask_storage, masks, pixels);
    } else {
        mr_mask_paste_params p;
        model_paste_params(m, &p);
        b->detections.n = b->final_boxes.n = b->mask_probs.n = n;
        b->final_boxes.device_count = NULL;
        st = be->mask_paste(m->be.ctx, &p, &b->mask_probs, &b->final_boxes, H, W, win, res->mask_storage, NULL, err);
    }
    free(win);
    if (st != MR_OK) {
        result_free(res);
        return st;
    }
    if (m->cfg.box_head.clip_final_boxes) drop_empty(res, NULL, 0);
    return MR_OK;
}
