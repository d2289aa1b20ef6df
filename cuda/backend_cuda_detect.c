/* The CUDA backend's memory-bound and detection ops.
 *
 * On the GPU: max_pool, upsample_nearest (pool.cu), roi_align (roi_align.cu,
 * all levels in one launch) and mask_probs (mask_probs.cu).
 *
 * rpn_proposals: the per-level ranking by logit (the costly part: a sort of
 * up to ~180k anchors per level) on the GPU with CUB (rpn_rank.cu); the
 * selection after it (decode, clip, size rule, NMS, top-N over levels) on
 * the host by proposals_select, the CPU backend's code.
 *
 * mask_paste: on the GPU (mask_paste.cu), in chunks through a buffer
 * planned at load (mask_paste_chunk.h), the uint8 planes copied back to
 * the host masks of the interface.
 *
 * box_detections: the softmax and every (RoI, class) candidate's decode,
 * clip and tests on the GPU (box_post.cu), compacted with CUB; the
 * per-class NMS and top-N on the host by box_post_select, the CPU backend's
 * code. MR_CUDA_HOST_POST=1 runs the whole op on the host (box_post_cpu on
 * copies of its inputs), for debugging.
 *
 * STILL ON THE HOST (a first step): the NMS of both ops (Detectron's and
 * maskrcnn-benchmark's GPU bitmask NMS is the plan) and the RPN's decode and
 * filter, which need the logits and deltas on the host. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "mask_paste_chunk.h"
#include "nms.h"
#include "scratch.h"

static mr_status to_host(cuda_ctx *c, void *dst, const void *src, size_t bytes, const char *op, mr_error *err)
{
    if (!bytes) return MR_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "copy to host", e);
}

static mr_status to_device(cuda_ctx *c, void *dst, const void *src, size_t bytes, const char *op, mr_error *err)
{
    if (!bytes) return MR_OK;
    cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream);
    if (e == cudaSuccess) e = cudaStreamSynchronize(c->stream);
    return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "copy to device", e);
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

/* Ranked on the GPU (rpn_rank.cu: CUB radix sort per level, only the top
 * pre_nms_top_n indices come back), then decoded, filtered, NMSed and cut
 * on the host by proposals_select, the CPU backend's own code: the logits
 * and deltas come to the host for that (about 3.6 MB at 800x1216). */
mr_status cuda_rpn_proposals(void *vctx, const mr_proposal_params *p, const mr_tensor *const *logits,
                             const mr_tensor *const *deltas, mr_tensor *boxes, mr_tensor *scores, mr_error *err)
{
    cuda_ctx *c = vctx;
    const char *op = "rpn_proposals";
    size_t cap = (size_t)p->post_nms_top_n;
    if (p->num_levels < 1 || p->num_levels > MR_PROPOSAL_MAX_LEVELS)
        return mr_fail(err, MR_ERR_RANGE, "%s: %d levels (1..%d)", op, p->num_levels, MR_PROPOSAL_MAX_LEVELS);
    if (boxes->cap < 4 * cap || scores->cap < cap)
        return mr_fail(err, MR_ERR_SHAPE, "%s: outputs hold fewer than post_nms_top_n = %d rows", op,
                       p->post_nms_top_n);
    int count[MR_PROPOSAL_MAX_LEVELS], top[MR_PROPOSAL_MAX_LEVELS];
    const float *d_logits[MR_PROPOSAL_MAX_LEVELS];
    for (int l = 0; l < p->num_levels; l++) {
        size_t n = (size_t)p->grid_h[l] * (size_t)p->grid_w[l] * (size_t)p->num_anchors;
        if (n > (size_t)1 << 30 || mr_tensor_numel(logits[l]) < n || mr_tensor_numel(deltas[l]) < 4 * n)
            return mr_fail(err, MR_ERR_SHAPE, "%s: level %d holds fewer than its %dx%dx%d anchors", op, l,
                           p->grid_h[l], p->grid_w[l], p->num_anchors);
        count[l] = (int)n;
        top[l] = count[l] < p->pre_nms_top_n ? count[l] : p->pre_nms_top_n;
        if (top[l] < 0) top[l] = 0;
        d_logits[l] = logits[l]->data;
    }
    size_t dev_bytes = 0;
    MR_TRY(cuda_rank_scratch_bytes(count, p->num_levels, &dev_bytes, err));
    MR_TRY(cuda_reserve(c, &c->d_post, &c->post_size, dev_bytes, op, err));
    /* host layout: ranked indices, logits, deltas per level, the outputs, proposals_select's scratch */
    mr_scratch sc = {NULL, 0};
    for (int l = 0; l < p->num_levels; l++) {
        scratch_take(&sc, sizeof(int) * (size_t)top[l]);
        scratch_take(&sc, sizeof(float) * (size_t)count[l]);
        scratch_take(&sc, sizeof(float) * 4 * (size_t)count[l]);
    }
    scratch_take(&sc, sizeof(float) * 5 * cap);
    scratch_take(&sc, proposals_scratch_bytes(p));
    MR_TRY(cuda_host_reserve(c, sc.used, op, err));
    sc.base = c->host;
    sc.used = 0;
    int *ranked[MR_PROPOSAL_MAX_LEVELS];
    const float *lg[MR_PROPOSAL_MAX_LEVELS], *dl[MR_PROPOSAL_MAX_LEVELS];
    float *hl[MR_PROPOSAL_MAX_LEVELS], *hd[MR_PROPOSAL_MAX_LEVELS];
    for (int l = 0; l < p->num_levels; l++) {
        ranked[l] = scratch_take(&sc, sizeof(int) * (size_t)top[l]);
        lg[l] = hl[l] = scratch_take(&sc, sizeof(float) * (size_t)count[l]);
        dl[l] = hd[l] = scratch_take(&sc, sizeof(float) * 4 * (size_t)count[l]);
    }
    float *hb = scratch_take(&sc, sizeof(float) * 5 * cap), *hs = hb + 4 * cap;
    void *scratch = scratch_take(&sc, proposals_scratch_bytes(p));
    MR_TRY(cuda_rank_launch(c->stream, c->d_post, d_logits, count, top, p->num_levels, ranked, err));
    MR_TRY(cuda_after_launch(c, op, err));
    for (int l = 0; l < p->num_levels; l++) {
        MR_TRY(to_host(c, hl[l], logits[l]->data, sizeof(float) * (size_t)count[l], op, err));
        MR_TRY(to_host(c, hd[l], deltas[l]->data, sizeof(float) * 4 * (size_t)count[l], op, err));
    }
    int n = proposals_select(p, (const int *const *)ranked, lg, dl, hb, hs, scratch);
    MR_TRY(to_device(c, boxes->data, hb, sizeof(float) * 4 * (size_t)n, op, err));
    MR_TRY(to_device(c, scores->data, hs, sizeof(float) * (size_t)n, op, err));
    boxes->n = scores->n = n;
    return MR_OK;
}

/* The whole op on the host (MR_CUDA_HOST_POST=1): box_post_cpu on copies. */
static mr_status box_detections_host(cuda_ctx *c, const mr_box_post_params *p, const mr_tensor *rois,
                                     const mr_tensor *logits, const mr_tensor *deltas, mr_tensor *boxes,
                                     mr_tensor *scores, mr_tensor *labels, mr_error *err)
{
    const char *op = "box_detections";
    size_t cap = (size_t)p->out_capacity;
    size_t n = (size_t)rois->n, K = (size_t)p->num_classes;
    mr_scratch sc = {NULL, 0};
    scratch_take(&sc, sizeof(float) * 4 * n);
    scratch_take(&sc, sizeof(float) * K * n);
    scratch_take(&sc, sizeof(float) * 4 * K * n);
    scratch_take(&sc, sizeof(float) * 6 * cap);
    scratch_take(&sc, box_post_scratch_bytes(p, rois->n));
    MR_TRY(cuda_host_reserve(c, sc.used, op, err));
    sc.base = c->host;
    sc.used = 0;
    float *hr = scratch_take(&sc, sizeof(float) * 4 * n), *hl = scratch_take(&sc, sizeof(float) * K * n);
    float *hd = scratch_take(&sc, sizeof(float) * 4 * K * n), *hb = scratch_take(&sc, sizeof(float) * 6 * cap);
    float *hs = hb + 4 * cap, *hlab = hs + cap;
    void *scratch = scratch_take(&sc, box_post_scratch_bytes(p, rois->n));
    MR_TRY(to_host(c, hr, rois->data, sizeof(float) * 4 * n, op, err));
    MR_TRY(to_host(c, hl, logits->data, sizeof(float) * K * n, op, err));
    MR_TRY(to_host(c, hd, deltas->data, sizeof(float) * 4 * K * n, op, err));
    int d = box_post_cpu(p, hr, hl, hd, rois->n, hb, hs, hlab, scratch);
    MR_TRY(to_device(c, boxes->data, hb, sizeof(float) * 4 * (size_t)d, op, err));
    MR_TRY(to_device(c, scores->data, hs, sizeof(float) * (size_t)d, op, err));
    MR_TRY(to_device(c, labels->data, hlab, sizeof(float) * (size_t)d, op, err));
    boxes->n = scores->n = labels->n = d;
    return MR_OK;
}

/* Candidates on the GPU (box_post.cu), NMS and top-N on the host
 * (box_post_select, the CPU backend's code); MR_CUDA_HOST_POST=1 runs the
 * whole op on the host instead. */
mr_status cuda_box_detections(void *vctx, const mr_box_post_params *p, const mr_tensor *rois,
                              const mr_tensor *logits, const mr_tensor *deltas, mr_tensor *boxes,
                              mr_tensor *scores, mr_tensor *labels, mr_error *err)
{
    cuda_ctx *c = vctx;
    const char *op = "box_detections";
    size_t cap = (size_t)p->out_capacity;
    if (p->max_dets > p->out_capacity || boxes->cap < 4 * cap || scores->cap < cap || labels->cap < cap)
        return mr_fail(err, MR_ERR_SHAPE, "%s: outputs hold fewer than %d rows", op, p->out_capacity);
    if (logits->n != rois->n || deltas->n != rois->n || logits->c != p->num_classes || deltas->c != 4 * p->num_classes)
        return mr_fail(err, MR_ERR_SHAPE, "%s: logits/deltas do not match %d rois of %d classes", op, rois->n,
                       p->num_classes);
    if (c->host_post) return box_detections_host(c, p, rois, logits, deltas, boxes, scores, labels, err);
    int n = rois->n, K = p->num_classes;
    size_t m = (size_t)n * (size_t)(K > 1 ? K - 1 : 0), dev_bytes = 0;
    MR_TRY(cuda_box_cand_scratch_bytes(n, K, &dev_bytes, err));
    MR_TRY(cuda_reserve(c, &c->d_post, &c->post_size, dev_bytes, op, err));
    /* host layout: the candidates as the GPU wrote them, then as box_post_select
     * takes them (boxes, scores, groups), keep, the NMS scratch, the outputs */
    mr_scratch sc = {NULL, 0};
    scratch_take(&sc, sizeof(cuda_box_cand) * m);
    scratch_take(&sc, sizeof(float) * 5 * m);
    scratch_take(&sc, sizeof(int) * 2 * m);
    scratch_take(&sc, nms_scratch_bytes((int)m));
    scratch_take(&sc, sizeof(float) * 6 * cap);
    MR_TRY(cuda_host_reserve(c, sc.used, op, err));
    sc.base = c->host;
    sc.used = 0;
    cuda_box_cand *hc = scratch_take(&sc, sizeof(cuda_box_cand) * m);
    float *cb = scratch_take(&sc, sizeof(float) * 5 * m), *cs = cb + 4 * m;
    int *cg = scratch_take(&sc, sizeof(int) * 2 * m), *keep = cg + m;
    void *nms = scratch_take(&sc, nms_scratch_bytes((int)m));
    float *hb = scratch_take(&sc, sizeof(float) * 6 * cap), *hs = hb + 4 * cap, *hl = hs + cap;
    int count = 0;
    MR_TRY(cuda_box_cand_launch(c->stream, p, rois->data, logits->data, deltas->data, n, c->d_post, hc, &count, err));
    MR_TRY(cuda_after_launch(c, op, err));
    for (int i = 0; i < count; i++) {
        memcpy(cb + 4 * (size_t)i, hc[i].box, 4 * sizeof(float));
        cs[i] = hc[i].score;
        cg[i] = hc[i].group;
    }
    int d = box_post_select(p, cb, cs, cg, count, hb, hs, hl, keep, nms);
    MR_TRY(to_device(c, boxes->data, hb, sizeof(float) * 4 * (size_t)d, op, err));
    MR_TRY(to_device(c, scores->data, hs, sizeof(float) * (size_t)d, op, err));
    MR_TRY(to_device(c, labels->data, hl, sizeof(float) * (size_t)d, op, err));
    boxes->n = scores->n = labels->n = d;
    return MR_OK;
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

/* ==== cuda_plan_post_scratch: TO BE REPLACED at the merge with cuda-post ====
 * The device scratch (d_post) and host staging of rpn_proposals and
 * box_detections at the plan's largest sizes, measured with the sizing
 * those ops use today (cuda_rank_scratch_bytes, cuda_box_cand_scratch_bytes,
 * and the host layouts written out in cuda_rpn_proposals,
 * box_detections_host and cuda_box_detections above). cub's temporary
 * storage and the layouts grow with the item counts, so every smaller pass
 * fits; if one did not, cuda_reserve would say so, not allocate. The
 * cuda-post branch's cuda_post_scratch_bytes() replaces this body. */
mr_status cuda_plan_post_scratch(const mr_backend_plan *p, size_t *dev, size_t *host, mr_error *err)
{
    *dev = *host = 0;
    int L = p->num_levels, A = p->num_anchors, K = p->num_classes;
    if (L < 1 || L > MR_PROPOSAL_MAX_LEVELS || A < 1 || K < 1 || p->max_rois < 0 || p->max_dets < 0)
        return mr_fail(err, MR_ERR_INTERNAL, "plan: %d levels of %d anchors, %d classes, %d rois, %d detections", L,
                       A, K, p->max_rois, p->max_dets);
    /* rpn_proposals */
    mr_proposal_params pp;
    memset(&pp, 0, sizeof pp);
    pp.num_levels = L;
    pp.num_anchors = A;
    pp.pre_nms_top_n = p->pre_nms_top_n;
    pp.post_nms_top_n = p->post_nms_top_n;
    pp.post_nms_per_level = p->post_nms_per_level;
    int count[MR_PROPOSAL_MAX_LEVELS];
    mr_scratch rpn = {NULL, 0};
    for (int l = 0; l < L; l++) {
        count[l] = p->level_anchors[l];
        pp.grid_h[l] = 1; /* only H*W*A matters to the sizes */
        pp.grid_w[l] = count[l] / A;
        int top = count[l] < p->pre_nms_top_n ? count[l] : p->pre_nms_top_n;
        scratch_take(&rpn, sizeof(int) * (size_t)(top > 0 ? top : 0));
        scratch_take(&rpn, sizeof(float) * (size_t)count[l]);
        scratch_take(&rpn, sizeof(float) * 4 * (size_t)count[l]);
    }
    scratch_take(&rpn, sizeof(float) * 5 * (size_t)p->post_nms_top_n);
    scratch_take(&rpn, proposals_scratch_bytes(&pp));
    size_t rank_dev = 0;
    MR_TRY(cuda_rank_scratch_bytes(count, L, &rank_dev, err));
    /* box_detections: the GPU candidates path and the MR_CUDA_HOST_POST one */
    size_t n = (size_t)p->max_rois, cap = (size_t)p->max_dets, m = n * (size_t)(K > 1 ? K - 1 : 0);
    mr_scratch gpu = {NULL, 0}, cpu = {NULL, 0};
    scratch_take(&gpu, sizeof(cuda_box_cand) * m);
    scratch_take(&gpu, sizeof(float) * 5 * m);
    scratch_take(&gpu, sizeof(int) * 2 * m);
    scratch_take(&gpu, nms_scratch_bytes((int)m));
    scratch_take(&gpu, sizeof(float) * 6 * cap);
    mr_box_post_params bp;
    memset(&bp, 0, sizeof bp);
    bp.num_classes = K;
    bp.max_dets = bp.out_capacity = p->max_dets;
    scratch_take(&cpu, sizeof(float) * 4 * n);
    scratch_take(&cpu, sizeof(float) * (size_t)K * n);
    scratch_take(&cpu, sizeof(float) * 4 * (size_t)K * n);
    scratch_take(&cpu, sizeof(float) * 6 * cap);
    scratch_take(&cpu, box_post_scratch_bytes(&bp, p->max_rois));
    size_t box_dev = 0;
    MR_TRY(cuda_box_cand_scratch_bytes(p->max_rois, K, &box_dev, err));
    *dev = rank_dev > box_dev ? rank_dev : box_dev;
    *host = rpn.used;
    if (gpu.used > *host) *host = gpu.used;
    if (cpu.used > *host) *host = cpu.used;
    return MR_OK;
}
