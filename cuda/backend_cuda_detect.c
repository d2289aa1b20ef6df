/* The CUDA backend's memory-bound and detection ops.
 *
 * On the GPU: max_pool, upsample_nearest (pool.cu), roi_align (roi_align.cu,
 * all levels in one launch) and mask_probs (mask_probs.cu).
 *
 * mask_paste: on the GPU (mask_paste.cu), in chunks through a buffer
 * planned at load (mask_paste_chunk.h), the uint8 planes copied back to
 * the host masks of the interface.
 *
 * rpn_proposals and box_detections are in backend_cuda_post.c, wholly on
 * the GPU (ranking, decode, filter, bitmask NMS, top-N). */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "mask_paste_chunk.h"

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
    MR_TRY(cuda_max_pool_launch(c->stream, p, x, y, err));
    return cuda_after_launch(c, "max_pool", err);
}

mr_status cuda_upsample_nearest(void *vctx, const mr_tensor *x, mr_tensor *y, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(cuda_upsample_nearest_launch(c->stream, x, y, err));
    return cuda_after_launch(c, "upsample_nearest", err);
}

mr_status cuda_roi_align(void *vctx, const mr_roi_align_params *p, const mr_level_map *map,
                         const mr_tensor *const *levels, const mr_tensor *rois, mr_tensor *out, mr_error *err)
{
    cuda_ctx *c = vctx;
    MR_TRY(cuda_roi_align_launch(c->stream, p, map, levels, rois, out, err));
    return cuda_after_launch(c, "roi_align", err);
}

/* The labels (D floats) come to the host to be checked, as the CPU backend
 * checks them: an out-of-range label must be an error, not a wild read. */
mr_status cuda_mask_probs(void *vctx, const mr_tensor *logits, const mr_tensor *labels, mr_tensor *probs,
                          mr_error *err)
{
    cuda_ctx *c = vctx;
    int D = logits->n, K = logits->c;
    if (labels->n != D)
        return mr_fail(err, MR_ERR_SHAPE, "mask_probs: %d logits, %d labels do not match", D, labels->n);
    MR_TRY(cuda_host_reserve(c, sizeof(float) * (size_t)(D > 0 ? D : 1), "mask_probs", err));
    float *h = c->host;
    MR_TRY(to_host(c, h, labels->data, sizeof(float) * (size_t)D, "mask_probs", err));
    for (int d = 0; d < D; d++) {
        /* (int)label in 0..K-1, as the CPU backend's test; NaN fails */
        if (!(h[d] > -1.0f && h[d] < (float)K))
            return mr_fail(err, MR_ERR_RANGE, "mask_probs: detection %d has label %g, outside 0..%d", d, (double)h[d],
                           K - 1);
    }
    MR_TRY(cuda_mask_probs_launch(c->stream, logits, labels->data, probs, err));
    return cuda_after_launch(c, "mask_probs", err);
}

/* The region mask_paste pastes its planes through (mask_paste_chunk.h),
 * planned at load: 64 MiB holds every binary plane of a typical photo in
 * one chunk (100 detections up to 0.67 Mpx, 32 at 1920x1080), and is small
 * beside the activations (hundreds of MB at 1344x800). A larger original
 * image takes more chunks, down to bands of rows of one plane, so every
 * image up to input.max_image_side pastes without allocating. */
#define CUDA_PASTE_REGION ((size_t)64 << 20)

static size_t paste_pad_bytes(int D, int M, int padding)
{
    size_t P = (size_t)M + 2 * (size_t)padding;
    return (sizeof(float) * (size_t)D * P * P + 255) & ~(size_t)255;
}

size_t cuda_plan_paste_bytes(const mr_backend_plan *p)
{
    size_t region = mask_paste_chunk_min_bytes(p->max_image_side, 1);
    return paste_pad_bytes(p->max_dets, p->mask_size, p->mask_padding) +
           (region > CUDA_PASTE_REGION ? region : CUDA_PASTE_REGION);
}

/* On the GPU (mask_paste.cu): the masks padded once, then the planes pasted
 * chunk by chunk through d_paste's fixed region, each chunk copied to the
 * host masks (and soft) before the next is pasted (stream order). */
mr_status cuda_mask_paste(void *vctx, const mr_mask_paste_params *p, const mr_tensor *probs, const mr_tensor *boxes,
                          int img_h, int img_w, uint8_t *const *masks, float *soft, mr_error *err)
{
    cuda_ctx *c = vctx;
    const char *op = "mask_paste";
    /* the CPU's checks (engine/mask_paste.c), in its order */
    if (p->rule != MR_PASTE_TORCHVISION && p->rule != MR_PASTE_DETECTRON2)
        return mr_fail(err, MR_ERR_UNSUPPORTED, "%s: paste rule %d is not implemented", op, (int)p->rule);
    if (p->mask_size <= 0 || p->mask_size > 4096 || p->padding < 0 || p->padding > 4096)
        return mr_fail(err, MR_ERR_RANGE, "%s: mask size %d / padding %d out of range", op, p->mask_size, p->padding);
    if (img_h < 0 || img_w < 0) return mr_fail(err, MR_ERR_RANGE, "%s: image size %dx%d is negative", op, img_h, img_w);
    int D = probs->n;
    size_t M = (size_t)p->mask_size;
    if (boxes->n != probs->n)
        return mr_fail(err, MR_ERR_SHAPE, "%s: %d masks, %d boxes do not match", op, probs->n, boxes->n);
    if ((size_t)probs->h * (size_t)probs->w * (size_t)probs->c != M * M)
        return mr_fail(err, MR_ERR_SHAPE, "%s: masks are not %dx%d", op, p->mask_size, p->mask_size);
    size_t plane = (size_t)img_h * (size_t)img_w, W = (size_t)img_w;
    if (D == 0 || plane == 0) return MR_OK;
    size_t pad_bytes = paste_pad_bytes(D, p->mask_size, p->padding);
    /* before plan (op tests) the buffer grows to a full region; after it,
     * the planned region is there and one row is all a paste needs */
    size_t region_need = c->planned ? mask_paste_chunk_min_bytes(img_w, soft != NULL) : CUDA_PASTE_REGION;
    MR_TRY(cuda_reserve(c, &c->d_paste, &c->paste_size, pad_bytes + region_need, op, err));
    float *d_padded = c->d_paste;
    uint8_t *d_bin = (uint8_t *)c->d_paste + pad_bytes;
    size_t cap_px = mask_paste_chunk_pixels(c->paste_size - pad_bytes, soft != NULL);
    float *d_soft = soft ? (float *)(d_bin + mask_paste_chunk_soft_offset(cap_px)) : NULL;
    mr_paste_chunk ch = mask_paste_chunk(cap_px, D, img_h, img_w);
    if (ch.dets < 1 || ch.rows < 1)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: a %d-pixel row does not fit the %zu-pixel paste region", op, img_w,
                       cap_px);
    MR_TRY(cuda_mask_pad_launch(c->stream, p, probs->data, D, d_padded, err));
    MR_TRY(cuda_after_launch(c, op, err));
    for (int d0 = 0; d0 < D; d0 += ch.dets) {
        int nd = D - d0 < ch.dets ? D - d0 : ch.dets;
        for (int y0 = 0; y0 < img_h; y0 += ch.rows) {
            int rows = img_h - y0 < ch.rows ? img_h - y0 : ch.rows;
            size_t band = (size_t)rows * W;
            MR_TRY(cuda_mask_paste_launch(c->stream, p, probs->data, d_padded, boxes->data, img_h, img_w, d0, nd, y0,
                                          rows, d_bin, d_soft, err));
            MR_TRY(cuda_after_launch(c, op, err));
            for (int j = 0; j < nd; j++) {
                size_t d = (size_t)(d0 + j), at = (size_t)y0 * W;
                cudaError_t e = cudaMemcpyAsync(masks[d] + at, d_bin + (size_t)j * band, band,
                                                cudaMemcpyDeviceToHost, c->stream);
                if (e == cudaSuccess && soft)
                    e = cudaMemcpyAsync(soft + d * plane + at, d_soft + (size_t)j * band, sizeof(float) * band,
                                        cudaMemcpyDeviceToHost, c->stream);
                if (e != cudaSuccess) return cuda_fail(err, op, "copy to host", e);
            }
        }
    }
    cudaError_t e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "the paste kernel", e);
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
    lim.host_post = c->host_post;
    return cuda_post_scratch_bytes(&lim, dev, host, err);
}
