/* The CPU backend's detection ops: thin wrappers over the CPU versions in
 * roi_align.c, proposals.c, box_post.c and mask_paste.c, with their scratch
 * kept in the backend context (grown only for a new largest shape). */
#include <math.h>
#include <omp.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/backend_cpu.h"
#include "ops/mask_probs.h"

static mr_status post_scratch(cpu_ctx *c, size_t bytes, void **out, mr_error *err)
{
    if (bytes > c->post_scratch_size) {
        void *p = realloc(c->post_scratch, bytes);
        if (!p) return mr_fail(err, MR_ERR_OOM, "out of memory (%zu bytes of scratch)", bytes);
        c->post_scratch = p;
        c->post_scratch_size = bytes;
    }
    *out = c->post_scratch;
    return MR_OK;
}

/* The smallest s8 level RoIAlign reads as s8 (bench/NOTES.md section 40:
 * the demo model's levels, all in cache, were read 30% slower so). */
#define ROI_ALIGN_S8_MIN_BYTES ((size_t)1 << 20)

mr_status cpu_roi_align(void *ctx, const mr_roi_align_params *p, const mr_level_map *map,
                        const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err)
{
    if (out->n != rois->n || out->h != p->out_h || out->w != p->out_w || out->c != levels[0]->c)
        return mr_fail(err, MR_ERR_SHAPE, "roi_align: output must be [%d,%d,%d,%d]", rois->n, p->out_h, p->out_w,
                       levels[0]->c);
    /* A level the convolutions left blocked is read in place: turning P2
     * back to NHWC alone would move 62 MB at 800x1216. blocked[l] is the
     * level's block (0: NHWC), and so are levels the convs handed over in
     * bf16 or s8 (ROI_ALIGN_LEVEL_BF16, _S8 with its step; a u8 level,
     * which no model hands over, is widened first). */
    cpu_ctx *c = ctx;
    int blocked[MR_MAX_FPN_LEVELS] = {0};
    float step[MR_MAX_FPN_LEVELS] = {0};
    int count = map->max_level - map->min_level + 1;
    if (count > MR_MAX_FPN_LEVELS) return mr_fail(err, MR_ERR_SHAPE, "roi_align: %d levels", count);
    for (int l = 0; l < count; l++) {
        dnnl_data_type_t held = dnnl_data_type_undef;
        if (!cpu_layout_held(c, levels[l], &held, &step[l])) held = dnnl_data_type_undef;
        /* an s8 level that fits in cache is widened once instead: its pixels
         * are sampled about ten times over, and an s8 tap costs twice an fp32
         * one; a larger level is read as s8, a quarter of the bytes */
        if (held == dnnl_s8 && mr_tensor_numel(levels[l]) <= ROI_ALIGN_S8_MIN_BYTES) held = dnnl_data_type_undef;
        blocked[l] = held == dnnl_bf16                                                       ? ROI_ALIGN_LEVEL_BF16
                     : held == dnnl_s8                                                       ? ROI_ALIGN_LEVEL_S8
                     : levels[l]->c % c->block == 0 && cpu_layout_is_blocked(c, levels[l]) ? c->block
                                                                                             : 0;
        if (!blocked[l]) MR_TRY(cpu_read(ctx, levels[l], err));
    }
    MR_TRY(cpu_read(ctx, rois, err));
    cpu_wrote(ctx, out);
    roi_align_multilevel_layout_cpu(p, map, levels, blocked, step, rois->data, rois->n, NULL, out->data);
    return MR_OK;
}

mr_status cpu_rpn_proposals(void *ctx, const mr_proposal_params *p, const mr_tensor *const *logits,
                            const mr_tensor *const *deltas, mr_tensor *boxes, mr_tensor *scores, mr_error *err)
{
    const float *lg[MR_PROPOSAL_MAX_LEVELS], *dl[MR_PROPOSAL_MAX_LEVELS];
    for (int l = 0; l < p->num_levels; l++) {
        lg[l] = logits[l]->data;
        dl[l] = deltas[l]->data;
        MR_TRY(cpu_read(ctx, logits[l], err));
        MR_TRY(cpu_read(ctx, deltas[l], err));
    }
    size_t cap = (size_t)p->post_nms_top_n;
    if (boxes->cap < 4 * cap || scores->cap < cap)
        return mr_fail(err, MR_ERR_SHAPE, "rpn_proposals: outputs hold fewer than post_nms_top_n = %d rows",
                       p->post_nms_top_n);
    cpu_wrote(ctx, boxes);
    cpu_wrote(ctx, scores);
    void *scratch = NULL;
    MR_TRY(post_scratch(ctx, proposals_scratch_bytes(p), &scratch, err));
    int n = proposals_cpu(p, lg, dl, boxes->data, scores->data, scratch);
    boxes->n = scores->n = n;
    return MR_OK;
}

mr_status cpu_box_detections(void *ctx, const mr_box_post_params *p, const mr_tensor *rois, const mr_tensor *logits,
                             const mr_tensor *deltas, mr_tensor *boxes, mr_tensor *scores, mr_tensor *labels,
                             mr_error *err)
{
    size_t cap = (size_t)p->out_capacity;
    if (p->max_dets > p->out_capacity || boxes->cap < 4 * cap || scores->cap < cap || labels->cap < cap)
        return mr_fail(err, MR_ERR_SHAPE, "box_detections: outputs hold fewer than %d rows", p->out_capacity);
    if (logits->n != rois->n || deltas->n != rois->n || logits->c != p->num_classes ||
        deltas->c != box_post_delta_cols(p->num_classes, p->class_agnostic))
        return mr_fail(err, MR_ERR_SHAPE, "box_detections: logits/deltas do not match %d rois of %d classes", rois->n,
                       p->num_classes);
    MR_TRY(cpu_read(ctx, rois, err));
    MR_TRY(cpu_read(ctx, logits, err));
    MR_TRY(cpu_read(ctx, deltas, err));
    cpu_wrote(ctx, boxes);
    cpu_wrote(ctx, scores);
    cpu_wrote(ctx, labels);
    void *scratch = NULL;
    MR_TRY(post_scratch(ctx, box_post_scratch_bytes(p, rois->n), &scratch, err));
    int d = box_post_cpu(p, rois->data, logits->data, deltas->data, rois->n, boxes->data, scores->data,
                         labels->data, scratch);
    boxes->n = scores->n = labels->n = d;
    return MR_OK;
}

mr_status cpu_mask_probs(void *ctx, const mr_tensor *logits, const mr_tensor *labels, mr_tensor *probs,
                         mr_error *err)
{
    int K = logits->c, plane = logits->h * logits->w;
    if (labels->n != logits->n || probs->n != logits->n || probs->h * probs->w * probs->c != plane)
        return mr_fail(err, MR_ERR_SHAPE, "mask_probs: %d logits, %d labels, probs [%d,%d,%d,%d] do not match",
                       logits->n, labels->n, probs->n, probs->h, probs->w, probs->c);
    MR_TRY(cpu_read(ctx, logits, err));
    MR_TRY(cpu_read(ctx, labels, err));
    cpu_wrote(ctx, probs);
    for (int d = 0; d < logits->n; d++) {
        int channel = mask_channel_of(labels->data[d], K);
        if (channel < 0)
            return mr_fail(err, MR_ERR_RANGE, "mask_probs: detection %d has label %g, outside 0..%d", d,
                           (double)labels->data[d], K - 1);
        const float *logit = logits->data + (size_t)d * plane * K + channel;
        float *prob = probs->data + (size_t)d * plane;
        for (int i = 0; i < plane; i++) prob[i] = 1.0f / (1.0f + expf(-logit[(size_t)i * K]));
    }
    return MR_OK;
}

/* Parallel over the detections' rows of pixels; each pixel one dot product
 * over the C channels (contiguous in NHWC) with its detection's row of the
 * weights. At 100 detections of 28x28 and 256 channels: 20 M multiply-adds
 * instead of the 1.6 G of all 81 classes (bench/NOTES.md section 10). */
mr_status cpu_mask_class_probs(void *ctx, const mr_tensor *x, const mr_tensor *weight, const mr_tensor *bias,
                               const mr_tensor *labels, mr_tensor *probs, mr_error *err)
{
    int D = x->n, C = x->c, K = weight->n, rows = x->h, cols = x->w;
    if (weight->h != 1 || weight->w != 1 || weight->c != C || mr_tensor_numel(bias) != (size_t)K ||
        labels->n != D || probs->n != D || probs->h != rows || probs->w != cols || probs->c != 1)
        return mr_fail(err, MR_ERR_SHAPE,
                       "mask_class_probs: x [%d,%d,%d,%d], weight [%d,%d,%d,%d], %zu biases, %d labels, probs "
                       "[%d,%d,%d,%d] do not match",
                       D, rows, cols, C, weight->n, weight->h, weight->w, weight->c, mr_tensor_numel(bias), labels->n,
                       probs->n, probs->h, probs->w, probs->c);
    MR_TRY(cpu_read(ctx, x, err));
    MR_TRY(cpu_read(ctx, weight, err));
    MR_TRY(cpu_read(ctx, bias, err));
    MR_TRY(cpu_read(ctx, labels, err));
    cpu_wrote(ctx, probs);
    for (int d = 0; d < D; d++) {
        if (mask_channel_of(labels->data[d], K) < 0)
            return mr_fail(err, MR_ERR_RANGE, "mask_class_probs: detection %d has label %g, outside 0..%d", d,
                           (double)labels->data[d], K - 1);
    }
#pragma omp parallel for schedule(static)
    for (long r = 0; r < (long)D * rows; r++) {
        int channel = mask_channel_of(labels->data[r / rows], K);
        const float *w = weight->data + (size_t)channel * C, b = bias->data[channel];
        const float *px = x->data + (size_t)r * cols * C;
        float *prob = probs->data + (size_t)r * cols;
        for (int i = 0; i < cols; i++, px += C) {
            float s = 0.0f;
#pragma omp simd reduction(+ : s)
            for (int c = 0; c < C; c++) s += px[c] * w[c];
            prob[i] = 1.0f / (1.0f + expf(-(s + b)));
        }
    }
    return MR_OK;
}

/* Each detection writes its own window of masks (and soft), so they run
 * across the threads, each with its own padding scratch: serial, the paste
 * took 0.02 s of a full-size pass of 100 detections (bench/NOTES.md section
 * 39). The same bytes at any thread count. */
mr_status cpu_mask_paste(void *ctx, const mr_mask_paste_params *p, const mr_tensor *probs, const mr_tensor *boxes,
                         int img_h, int img_w, const mr_mask_window *win, uint8_t *masks, float *soft, mr_error *err)
{
    cpu_ctx *c = ctx;
    MR_TRY(cpu_read(ctx, probs, err));
    MR_TRY(cpu_read(ctx, boxes, err));
    const int n = probs->n, threads = c->threads > 0 ? c->threads : omp_get_max_threads();
    const size_t per_thread = (mask_paste_scratch_bytes(p->mask_size, p->padding) + 63) / 64 * 64;
    void *scratch = NULL;
    MR_TRY(post_scratch(ctx, per_thread * (size_t)threads + sizeof(size_t) * (size_t)n, &scratch, err));
    size_t *at = (size_t *)((char *)scratch + per_thread * (size_t)threads);
    size_t mplane = (size_t)p->mask_size * (size_t)p->mask_size, total = 0;
    for (int d = 0; d < n; d++) {
        mr_mask_window own = mask_paste_window(p, boxes->data + 4 * (size_t)d, img_h, img_w);
        if (memcmp(&own, &win[d], sizeof own) != 0)
            return mr_fail(err, MR_ERR_INTERNAL, "mask_paste: detection %d's window is not its box's", d);
        at[d] = total;
        total += mask_window_pixels(own);
    }
    int failed = n; /* the first detection that failed, to report after the loop */
#pragma omp parallel for schedule(dynamic, 1) num_threads(threads)
    for (int d = 0; d < n; d++) {
        const float *prob = probs->data + (size_t)d * mplane, *box = boxes->data + 4 * (size_t)d;
        void *mine = (char *)scratch + per_thread * (size_t)omp_get_thread_num();
        if (mask_paste_binary(p, prob, box, img_h, img_w, masks + at[d], mine, NULL) != MR_OK ||
            (soft && mask_paste_prob(p, prob, box, img_h, img_w, soft + at[d], mine, NULL) != MR_OK)) {
#pragma omp critical(mask_paste_failed)
            if (d < failed) failed = d;
        }
    }
    if (failed < n) /* again, alone, for its message */
        return mask_paste_binary(p, probs->data + (size_t)failed * mplane, boxes->data + 4 * (size_t)failed, img_h,
                                 img_w, masks + at[failed], scratch, err);
    return MR_OK;
}
