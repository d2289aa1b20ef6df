/* The mask head: multi-level RoIAlign (14x14) of the final boxes, four
 * 3x3 conv + ReLU, a 2x2 stride-2 transposed conv + ReLU, 1x1 class
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
    int F = m->cfg.fpn.out_channels, K = m->cfg.classes.num_classes;
    if (mh->num_convs > MR_MAX_MASK_CONVS)
        return mr_fail(err, MR_ERR_CONFIG, "mask_head.num_convs %d exceeds %d", mh->num_convs, MR_MAX_MASK_CONVS);
    /* batches of up to max_dets RoIs: R x R features, 2R x 2R after the deconv */
    int R = mh->pooler.resolution;
    mr_extent roi = {m->max_dets, R, R}, up = {m->max_dets, 2 * R, 2 * R};
    for (int i = 0; i < mh->num_convs; i++) {
        char name[64];
        snprintf(name, sizeof name, "mask_head.fcn%d", i + 1);
        MR_TRY(model_conv_layer(m, w, name, NULL, NULL, i ? mh->conv_dim : F, mh->conv_dim, 3, 1, 1, 1, roi,
                                &m->mask_fcn[i], err));
    }
    int D = mh->conv_dim;
    float *wt = malloc(sizeof(float) * ((size_t)D * D * 4 + (size_t)D));
    if (!wt) return mr_fail(err, MR_ERR_OOM, "out of memory loading mask_head.deconv");
    int64_t wshape[4] = {D, D, 2, 2}, bshape[1] = {D};
    mr_status st = weights_read_f32(w, "mask_head.deconv.weight", 4, wshape, wt, err);
    if (st == MR_OK) st = weights_read_f32(w, "mask_head.deconv.bias", 1, bshape, wt + (size_t)D * D * 4, err);
    if (st == MR_OK) st = model_check_finite(w, "mask_head.deconv", wt, (size_t)D * D * 4 + (size_t)D, err);
    if (st == MR_OK) {
        mr_deconv2x2_params p = {D, D, 1, roi.n, roi.h, roi.w};
        st = m->be.i->deconv2x2_init(m->be.ctx, "mask_head.deconv", &p, wt, wt + (size_t)D * D * 4, &m->mask_deconv,
                                     err);
    }
    free(wt);
    MR_TRY(st);
    if (m->be.i->mask_class_probs) return mask_class_load(m, w, D, K, err);
    return model_conv_layer(m, w, "mask_head.logits", NULL, NULL, D, K, 1, 1, 0, 0, up, &m->mask_logits, err);
}

mr_status mask_head_forward(mr_model *m, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_backend_i *be = m->be.i;
    const mr_mask_head_config *mh = &m->cfg.mask_head;
    int n = b->detections.n, R = mh->pooler.resolution, D = mh->conv_dim, K = m->cfg.classes.num_classes;
    MR_TRY(model_roi_align(m, &mh->pooler, &b->detections, &b->mask_feats, err));
    const mr_tensor *x = &b->mask_feats;
    for (int i = 0; i < mh->num_convs; i++) {
        mr_tensor *y = i % 2 ? &b->mask_b : &b->mask_a;
        MR_TRY(tensor_shape(y, n, R, R, D, err));
        MR_TRY(be->conv(m->be.ctx, m->mask_fcn[i], x, y, 0, err));
        x = y;
    }
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

/* Final boxes in original-image pixels into host[0..4n): scaled back per
 * axis (torchvision's resize_boxes, ratio = original / resized in float32),
 * or as the box head decoded them (Detectron); with clip_final_boxes
 * clipped to the image as detectron2's detector_postprocess does. */
static mr_status final_boxes(mr_model *m, float *host, int n, mr_error *err)
{
    mr_buffers *b = &m->buf;
    const mr_box_head_config *bh = &m->cfg.box_head;
    int H = m->geo.in_h, W = m->geo.in_w;
    size_t bytes = sizeof(float) * 4 * (size_t)n;
    if (bh->decode_coordinates == MR_DECODE_ORIGINAL) return m->be.i->copy_to_host(m->be.ctx, host, b->final_boxes.data, bytes, err);
    MR_TRY(m->be.i->copy_to_host(m->be.ctx, host, b->detections.data, bytes, err));
    float ratio_w = (float)W / (float)m->geo.resized_w, ratio_h = (float)H / (float)m->geo.resized_h;
    for (int d = 0; d < n; d++) {
        float *box = host + 4 * d;
        box[0] *= ratio_w;
        box[1] *= ratio_h;
        box[2] *= ratio_w;
        box[3] *= ratio_h;
        if (bh->clip_final_boxes) box_clip(box, (float)H, (float)W, 0);
    }
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
    const mr_mask_head_config *mh = &m->cfg.mask_head;
    int n = b->detections.n, H = m->geo.in_h, W = m->geo.in_w, M = 2 * mh->pooler.resolution;
    memset(res, 0, sizeof *res);
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
    mr_mask_paste_params p = {M, mh->paste_padding, mh->threshold,
                              mh->threshold_rule == MR_MASK_THRESH_GE ? MR_MASK_GE : MR_MASK_GT,
                              mh->paste_rule == MR_MASK_PASTE_DETECTRON2 ? MR_PASTE_DETECTRON2 : MR_PASTE_TORCHVISION};
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
