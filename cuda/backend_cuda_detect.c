/* The CUDA backend's memory-bound and detection ops.
 *
 * On the GPU: max_pool, upsample_nearest (pool.cu), roi_align (roi_align.cu,
 * all levels in one launch) and mask_probs (mask_probs.cu).
 *
 * mask_paste: on the GPU (mask_paste.cu), the uint8 planes copied back to
 * the host masks of the interface.
 *
 * rpn_proposals and box_detections are in backend_cuda_post.c, wholly on
 * the GPU (ranking, decode, filter, bitmask NMS, top-N). */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"

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

/* On the GPU (mask_paste.cu); the planes come back to the host masks (and
 * soft), one copy per mask, after one launch for all of them. */
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
    size_t D = (size_t)probs->n, M = (size_t)p->mask_size;
    if (boxes->n != probs->n)
        return mr_fail(err, MR_ERR_SHAPE, "%s: %d masks, %d boxes do not match", op, probs->n, boxes->n);
    if ((size_t)probs->h * (size_t)probs->w * (size_t)probs->c != M * M)
        return mr_fail(err, MR_ERR_SHAPE, "%s: masks are not %dx%d", op, p->mask_size, p->mask_size);
    size_t plane = (size_t)img_h * (size_t)img_w, P = M + 2 * (size_t)p->padding;
    if (D == 0 || plane == 0) return MR_OK;
    size_t pad_bytes = (sizeof(float) * D * P * P + 255) & ~(size_t)255, bin_bytes = (D * plane + 255) & ~(size_t)255;
    MR_TRY(cuda_reserve(c, &c->d_paste, &c->paste_size, pad_bytes + bin_bytes + (soft ? sizeof(float) * D * plane : 0),
                        op, err));
    float *d_padded = c->d_paste;
    uint8_t *d_bin = (uint8_t *)c->d_paste + pad_bytes;
    float *d_soft = soft ? (float *)(d_bin + bin_bytes) : NULL;
    MR_TRY(cuda_mask_paste_launch(c->stream, p, probs->data, boxes->data, (int)D, img_h, img_w, d_padded, d_bin, d_soft,
                                  err));
    MR_TRY(cuda_after_launch(c, op, err));
    for (size_t d = 0; d < D; d++) {
        cudaError_t e = cudaMemcpyAsync(masks[d], d_bin + d * plane, plane, cudaMemcpyDeviceToHost, c->stream);
        if (e != cudaSuccess) return cuda_fail(err, op, "copy to host", e);
    }
    if (soft) MR_TRY(to_host(c, soft, d_soft, sizeof(float) * D * plane, op, err));
    cudaError_t e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "the paste kernel", e);
}
