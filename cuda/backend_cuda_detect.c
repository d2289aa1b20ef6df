/* The CUDA backend's memory-bound and detection ops.
 *
 * On the GPU: max_pool, upsample_nearest (pool.cu), roi_align (roi_align.cu,
 * all levels in one launch) and mask_probs (mask_probs.cu).
 *
 * mask_paste: on the GPU (mask_paste.cu), in chunks through a buffer
 * planned at load (mask_paste_chunk.h), the uint8 windows copied back to
 * the host masks of the interface.
 *
 * rpn_proposals and box_detections are in backend_cuda_post.c, wholly on
 * the GPU (ranking, decode, filter, bitmask NMS, top-N). */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "ops/mask_paste_chunk.h"
#include "ops/mask_probs.h"

static mr_status to_host(cuda_ctx *c, void *dst, const void *src, size_t bytes, const char *op, mr_error *err)
{
    if (!bytes) return MR_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "copy to host", e);
}

mr_status cuda_max_pool(void *vctx, const mr_pool_params *p, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    cuda_ctx *c = vctx;
    if (c->graph_mode == CUDA_GRAPH_REPLAYING) return MR_OK; /* the stage's graph runs it */
    MR_TRY(cuda_max_pool_launch(c->stream, p, x, y, err));
    return cuda_after_launch(c, "max_pool", err);
}

mr_status cuda_upsample_nearest(void *vctx, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    cuda_ctx *c = vctx;
    if (c->graph_mode == CUDA_GRAPH_REPLAYING) return MR_OK;
    MR_TRY(cuda_upsample_nearest_launch(c->stream, x, y, err));
    return cuda_after_launch(c, "upsample_nearest", err);
}

mr_status cuda_roi_align(void *vctx, const mr_roi_align_params *p, const mr_level_map *map,
                         const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err)
{
    cuda_ctx *c = vctx;
    int replaying = 0;
    MR_TRY(cuda_graph_op(c, "roi_align", &replaying, err));
    if (replaying) return MR_OK;
    MR_TRY(cuda_roi_align_launch(c->stream, p, map, levels, rois, out, err));
    return cuda_after_launch(c, "roi_align", err);
}

/* The labels (D floats) come to the host to be checked, as the CPU backend
 * checks them: an out-of-range label must be an error, not a wild read.
 * Labels with their count on the device are not copied (mask_probs.cu:
 * such a label gives NaN probabilities). */
mr_status cuda_mask_probs(void *vctx, const mr_tensor *logits, const mr_tensor *labels, mr_tensor *probs,
                          mr_error *err)
{
    cuda_ctx *c = vctx;
    int D = logits->n, K = logits->c, replaying = 0;
    MR_TRY(cuda_graph_op(c, "mask_probs", &replaying, err));
    MR_TRY(cuda_need_f32("mask_probs", logits, "the logits", err));
    if (labels->n != D)
        return mr_fail(err, MR_ERR_SHAPE, "mask_probs: %d logits, %d labels do not match", D, labels->n);
    if (labels->device_count) {
        if (replaying) return MR_OK;
        MR_TRY(cuda_mask_probs_launch(c->stream, logits, labels->data, labels->device_count, probs, err));
        return cuda_after_launch(c, "mask_probs", err);
    }
    MR_TRY(cuda_graph_forbid(c, "mask_probs", err));
    MR_TRY(cuda_host_reserve(c, sizeof(float) * (size_t)(D > 0 ? D : 1), "mask_probs", err));
    float *h = c->host;
    MR_TRY(to_host(c, h, labels->data, sizeof(float) * (size_t)D, "mask_probs", err));
    for (int d = 0; d < D; d++) {
        /* the CPU backend's test (ops/mask_probs.h): a class of the predictor, any
         * label with a one-channel (class-agnostic) one; NaN fails */
        if (mask_channel_of(h[d], K) < 0)
            return mr_fail(err, MR_ERR_RANGE, "mask_probs: detection %d has label %g, outside 0..%d", d, (double)h[d],
                           K - 1);
    }
    MR_TRY(cuda_mask_probs_launch(c->stream, logits, labels->data, NULL, probs, err));
    return cuda_after_launch(c, "mask_probs", err);
}

/* The region mask_paste pastes its windows through (mask_paste_chunk.h),
 * planned at load: 64 MiB holds every window of a typical photo in one
 * chunk (100 whole 1920x1080 planes would need 198 MiB; windows are a
 * fraction of that), and is small beside the activations (hundreds of MB
 * at 1344x800). A larger image takes more chunks, down to bands of rows of
 * one window, so every image up to input.max_image_side pastes without
 * allocating. */
#define CUDA_PASTE_REGION ((size_t)64 << 20)

static size_t paste_pad_bytes(int D, int M, int padding)
{
    size_t P = (size_t)M + 2 * (size_t)padding;
    return (sizeof(float) * (size_t)D * P * P + 255) & ~(size_t)255;
}

/* The window table: D windows, then their D packed offsets (host staging
 * and device copy alike). */
static size_t paste_table_bytes(int D)
{
    return ((sizeof(mr_mask_window) + sizeof(size_t)) * (size_t)(D > 0 ? D : 0) + 255) & ~(size_t)255;
}

void cuda_plan_paste_bytes(const mr_backend_plan *p, size_t *dev, size_t *host)
{
    size_t region = mask_paste_chunk_min_bytes(p->max_image_side, 1);
    /* + 256: paste_on_device's state before its region */
    *dev = paste_pad_bytes(p->max_dets, p->mask_size, p->mask_padding) + paste_table_bytes(p->max_dets) + 256 +
           (region > CUDA_PASTE_REGION ? region : CUDA_PASTE_REGION);
    *host = paste_table_bytes(p->max_dets);
}

/* On the GPU (mask_paste.cu): the masks padded once, the window table
 * copied over, then the windows pasted chunk by chunk through d_paste's
 * fixed region, each chunk copied to the host masks (and soft) before the
 * next is pasted (stream order). The host buffers have the region's
 * packing, so a chunk of whole windows is one copy. */
mr_status cuda_mask_paste(void *vctx, const mr_mask_paste_params *p, const mr_tensor *probs, const mr_tensor *boxes,
                          int img_h, int img_w, const mr_mask_window *win, uint8_t *masks, float *soft,
                          mr_error *err)
{
    cuda_ctx *c = vctx;
    const char *op = "mask_paste";
    /* the CPU's checks (engine/ops/mask_paste.c), in its order */
    if (p->rule != MR_PASTE_TORCHVISION && p->rule != MR_PASTE_DETECTRON2)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: paste rule %d is not implemented", op, (int)p->rule);
    if (p->mask_size <= 0 || p->mask_size > 4096 || p->padding < 0 || p->padding > 4096)
        return mr_fail(err, MR_ERR_RANGE, "%s: mask size %d / padding %d out of range", op, p->mask_size, p->padding);
    if (img_h < 0 || img_w < 0) return mr_fail(err, MR_ERR_RANGE, "%s: image size %dx%d is negative", op, img_h, img_w);
    int D = probs->n;
    size_t M = (size_t)p->mask_size;
    MR_TRY(cuda_graph_forbid(c, op, err));
    MR_TRY(cuda_need_f32(op, probs, "the mask probabilities", err));
    MR_TRY(cuda_need_f32(op, boxes, "the boxes", err));
    if (boxes->n != probs->n)
        return mr_fail(err, MR_ERR_SHAPE, "%s: %d masks, %d boxes do not match", op, probs->n, boxes->n);
    if ((size_t)probs->h * (size_t)probs->w * (size_t)probs->c != M * M)
        return mr_fail(err, MR_ERR_SHAPE, "%s: masks are not %dx%d", op, p->mask_size, p->mask_size);
    if (D == 0 || (size_t)img_h * (size_t)img_w == 0) return MR_OK;
    /* the window table, staged on the host: windows, then packed offsets */
    size_t pad_bytes = paste_pad_bytes(D, p->mask_size, p->padding), table_bytes = paste_table_bytes(D);
    MR_TRY(cuda_host_reserve(c, table_bytes, op, err));
    mr_mask_window *h_win = c->host;
    size_t *h_off = (size_t *)(h_win + D), total = 0;
    for (int d = 0; d < D; d++) {
        const mr_mask_window w = win[d];
        if (!mask_window_fits(w, img_h, img_w))
            return mr_fail(err, MR_ERR_INTERNAL, "%s: detection %d's window %dx%d at %d,%d is outside the %dx%d image",
                           op, d, w.w, w.h, w.x0, w.y0, img_w, img_h);
        h_win[d] = w;
        h_off[d] = total;
        total += mask_window_pixels(w);
    }
    /* before plan (op tests) the buffer grows to a full region; after it,
     * the planned region is there and one row is all a paste needs */
    size_t region_need = c->planned ? mask_paste_chunk_min_bytes(img_w, soft != NULL) : CUDA_PASTE_REGION;
    MR_TRY(cuda_reserve(c, &c->d_paste, &c->paste_size, pad_bytes + table_bytes + region_need, op, err));
    float *d_padded = c->d_paste;
    mr_mask_window *d_win = (mr_mask_window *)((uint8_t *)c->d_paste + pad_bytes);
    size_t *d_off = (size_t *)(d_win + D);
    uint8_t *d_bin = (uint8_t *)c->d_paste + pad_bytes + table_bytes;
    size_t cap_px = mask_paste_chunk_pixels(c->paste_size - pad_bytes - table_bytes, soft != NULL);
    float *d_soft = soft ? (float *)(d_bin + mask_paste_chunk_soft_offset(cap_px)) : NULL;
    cudaError_t e = cudaMemcpyAsync(d_win, h_win, table_bytes, cudaMemcpyHostToDevice, c->stream);
    if (e != cudaSuccess) return cuda_fail(err, op, "copy the window table", e);
    MR_TRY(cuda_mask_pad_launch(c->stream, p, probs->data, D, d_padded, err));
    MR_TRY(cuda_after_launch(c, op, err));
    mr_paste_chunk ch;
    int d = 0, row = 0, more;
    while ((more = mask_paste_chunk_at(cap_px, h_win, D, d, row, &ch)) > 0) {
        size_t widest = 0, at = h_off[ch.d0]; /* the chunk's host offset */
        for (int j = ch.d0; j < ch.d0 + ch.nd; j++)
            if (mask_window_pixels(h_win[j]) > widest) widest = mask_window_pixels(h_win[j]);
        if (ch.rows >= 0) {
            widest = ch.pixels;
            at += (size_t)ch.row0 * (size_t)h_win[ch.d0].w;
        }
        MR_TRY(cuda_mask_paste_launch(c->stream, p, probs->data, d_padded, boxes->data, d_win, d_off, img_h, img_w,
                                      &ch, widest, h_off[ch.d0], d_bin, d_soft, err));
        MR_TRY(cuda_after_launch(c, op, err));
        if (ch.pixels > 0) {
            e = cudaMemcpyAsync(masks + at, d_bin, ch.pixels, cudaMemcpyDeviceToHost, c->stream);
            if (e == cudaSuccess && soft)
                e = cudaMemcpyAsync(soft + at, d_soft, sizeof(float) * ch.pixels, cudaMemcpyDeviceToHost, c->stream);
            if (e != cudaSuccess) return cuda_fail(err, op, "copy to host", e);
        }
        mask_paste_chunk_next(h_win, &ch, &d, &row);
    }
    if (more < 0)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: a %d-pixel row of window %d does not fit the %zu-pixel paste region",
                       op, h_win[d].w, d, cap_px);
    e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "the paste kernel", e);
}

/* ---- the paste on the device (backend.h paste_on_device) ---- */

/* The result block: header, rows for cap detections, then the mask region
 * (as large as the chunked paste's device region: every window of a
 * typical photo; more overflows, and the caller pastes in chunks).
 * MR_CUDA_PASTE_BLOCK=BYTES sets the region (tests make it overflow). */
typedef struct {
    size_t rows, masks, total;
} paste_block_layout;

static paste_block_layout paste_block_layout_of(int cap, size_t region)
{
    paste_block_layout L;
    L.rows = 256;
    L.masks = L.rows + ((sizeof(mr_paste_block_row) * (size_t)(cap > 0 ? cap : 1) + 255) & ~(size_t)255);
    L.total = L.masks + region;
    return L;
}

mr_status cuda_plan_paste_block(cuda_ctx *c, const mr_backend_plan *p, mr_error *err)
{
    if (c->h_block) cudaFreeHost(c->h_block);
    c->h_block = NULL;
    c->block_cap = 0;
    if (!c->counts_wanted) return MR_OK;
    const char *env = getenv("MR_CUDA_PASTE_BLOCK");
    c->block_region = env && *env ? (size_t)strtoull(env, NULL, 10) : CUDA_PASTE_REGION;
    if (c->block_region > CUDA_PASTE_REGION) c->block_region = CUDA_PASTE_REGION; /* the device region planned */
    paste_block_layout L = paste_block_layout_of(p->max_dets, c->block_region);
    cudaError_t e = cudaMallocHost(&c->h_block, L.total);
    if (e != cudaSuccess) {
        c->h_block = NULL;
        cudaGetLastError();
        return mr_fail(err, MR_ERR_OOM, "out of pinned host memory: %zu bytes for the paste's result block", L.total);
    }
    memset(c->h_block, 0, L.total);
    c->block_cap = p->max_dets;
    return MR_OK;
}

mr_status cuda_paste_on_device(void *vctx, const mr_mask_paste_params *p, const mr_final_box_params *fb,
                               const mr_tensor *boxes, const mr_tensor *scores, const mr_tensor *labels,
                               const mr_tensor *probs, mr_tensor *final_boxes, mr_error *err)
{
    cuda_ctx *c = vctx;
    const char *op = "paste_on_device";
    int cap = boxes->n, replaying = 0;
    MR_TRY(cuda_graph_op(c, op, &replaying, err));
    if (!boxes->device_count || !c->h_block)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: needs the detections' count on the device and a planned block", op);
    if (p->rule != MR_PASTE_TORCHVISION && p->rule != MR_PASTE_DETECTRON2)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: paste rule %d is not implemented", op, (int)p->rule);
    if (cap > c->block_cap || scores->n != cap || labels->n != cap || probs->n != cap ||
        final_boxes->cap < 4 * (size_t)cap ||
        (size_t)probs->h * (size_t)probs->w * (size_t)probs->c != (size_t)p->mask_size * (size_t)p->mask_size)
        return mr_fail(err, MR_ERR_SHAPE, "%s: %d detections (block for %d), %d scores, %d labels, %d masks of %dx%d",
                       op, cap, c->block_cap, scores->n, labels->n, probs->n, probs->h, probs->w);
    MR_TRY(cuda_need_f32(op, probs, "the mask probabilities", err));
    final_boxes->n = cap;
    final_boxes->h = final_boxes->w = 1;
    final_boxes->c = 4;
    final_boxes->device_count = boxes->device_count;
    /* the image's sizes and ratios, read on the device (cuda_internal.h) */
    MR_TRY(cuda_image_params_writable(c, CUDA_IMAGE_PASTE, op, err));
    c->h_image->fb = *fb;
    const void *d_fb = NULL;
    MR_TRY(cuda_image_params_upload(c, CUDA_IMAGE_PASTE, &c->h_image->fb, sizeof *fb, &d_fb, op, err));
    if (replaying || cap == 0) return MR_OK;
    /* d_paste: the padded masks, the window table, 256 bytes of state and
     * total, then the region the windows are pasted into before they are
     * copied to the block (the chunked paste's region, planned at load) */
    size_t pad_bytes = paste_pad_bytes(cap, p->mask_size, p->padding), table_bytes = paste_table_bytes(cap);
    size_t head = pad_bytes + table_bytes + 256, region = c->block_region;
    MR_TRY(cuda_reserve(c, &c->d_paste, &c->paste_size, head + region, op, err));
    mr_mask_window *d_win = (mr_mask_window *)((uint8_t *)c->d_paste + pad_bytes);
    size_t *d_off = (size_t *)(d_win + cap);
    int *d_state = (int *)((uint8_t *)c->d_paste + pad_bytes + table_bytes);
    size_t *d_total = (size_t *)((uint8_t *)d_state + 16);
    paste_block_layout L = paste_block_layout_of(c->block_cap, c->block_region);
    uint8_t *block = c->h_block;
    MR_TRY(cuda_paste_on_device_launch(c->stream, p, d_fb, boxes->data, scores->data, labels->data, boxes->device_count,
                                       probs->data, cap, c->d_paste, final_boxes->data, d_win, d_off, d_state, d_total,
                                       (mr_paste_block_header *)block, (mr_paste_block_row *)(block + L.rows),
                                       (uint8_t *)c->d_paste + head, block + L.masks, region, err));
    return cuda_after_launch(c, op, err);
}

mr_status cuda_paste_block(void *vctx, const mr_paste_block_header **header, const mr_paste_block_row **rows,
                           const uint8_t **masks, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(cuda_graph_forbid(c, "paste_block", err));
    if (!c->h_block) return mr_fail(err, MR_ERR_INTERNAL, "paste_block: no block was planned");
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) return cuda_fail(err, "paste_block", "a queued kernel (set MR_CUDA_SYNC=1 to name it)", e);
    cuda_preprocess_idle(c); /* every copy out of its staging has finished */
    paste_block_layout L = paste_block_layout_of(c->block_cap, c->block_region);
    const uint8_t *block = c->h_block;
    *header = (const mr_paste_block_header *)block;
    *rows = (const mr_paste_block_row *)(block + L.rows);
    *masks = block + L.masks;
    return MR_OK;
}

/* The device scratch (d_post) and host staging of rpn_proposals and
 * box_detections at the plan's largest sizes: the plan translated into
 * cuda_post_limits for backend_cuda_post.c's own sizing (cub's queries at
 * the largest item counts; every smaller pass fits, and if one did not,
 * cuda_reserve would say so rather than allocate). The host staging of the
 * MR_CUDA_HOST_POST debugging path is planned too when it is switched on. */
mr_status cuda_plan_post_scratch(const cuda_ctx *c, const mr_backend_plan *p, size_t *dev, size_t *host,
                                 mr_error *err)
{
    *dev = *host = 0;
    int L = p->num_levels, A = p->num_anchors, K = p->num_classes;
    if (L < 1 || L > MR_PROPOSAL_MAX_LEVELS || A < 1 || K < 1 || p->max_rois < 0 || p->max_dets < 0)
        return mr_fail(err, MR_ERR_INTERNAL, "plan: %d levels of %d anchors, %d classes, %d rois, %d detections", L,
                       A, K, p->max_rois, p->max_dets);
    cuda_post_limits lim;
    memset(&lim, 0, sizeof lim);
    lim.levels = L;
    for (int l = 0; l < L; l++)
        if (p->level_anchors[l] > lim.max_anchors) lim.max_anchors = p->level_anchors[l];
    lim.pre_nms_top_n = p->pre_nms_top_n;
    lim.post_nms_top_n = p->post_nms_top_n;
    lim.post_nms_per_level = p->post_nms_per_level;
    lim.max_rois = p->max_rois;
    lim.num_classes = K;
    lim.max_dets = p->max_dets;
    /* the host path also runs, unasked, for more anchors per cell than the GPU's cell table holds */
    lim.host_post = c->host_post || p->num_anchors > CUDA_MAX_CELL_ANCHORS;
    return cuda_post_scratch_bytes(&lim, dev, host, err);
}
