/* The CUDA backend's post-processing ops, wholly on the GPU. With counts
 * on the device (backend.h, the default) nothing comes back: the outputs
 * keep their capacity as n and the count is written to ctx->d_counts; box
 * detections reads the proposals' count there. Otherwise (MR_CUDA_DEVICE_
 * COUNTS=0) the output count (4 bytes) comes to the host, once per op.
 *
 * rpn_proposals: per-level ranking by logit (rpn_rank.cu, CUB radix sort),
 * decode, clip, size rule and score threshold (proposals.cu, proposals.h's
 * proposal_candidate), NMS per level (nms.cu, bitmask NMS), the
 * post_nms_top_n best over the levels (proposals.cu). proposals_select's
 * result and order (engine/ops/proposals.c).
 *
 * box_detections: softmax and every (RoI, class) candidate (box_post.cu,
 * box_post.h's math), NMS per class (nms.cu), with agnostic_nms the
 * ordered NMS over all classes' survivors (nms.cu; it stops at
 * out_capacity kept, all the output can use), max_dets with keep_ties
 * (box_post.cu, box_post_count). box_post_select's result and order.
 *
 * Device scratch: ctx->d_post, one layout per op with named offsets; the
 * RPN's ranking and its NMS share one region (the NMS starts after the
 * ranking, in stream order). cuda_post_scratch_bytes sizes it once for the
 * largest input; until that is called at load, cuda_reserve grows it on a
 * first larger input.
 *
 * MR_CUDA_HOST_POST=1 runs each op wholly on the host (proposals_cpu,
 * box_post_cpu on copies of the inputs), for debugging; so does an RPN of
 * more than CUDA_MAX_CELL_ANCHORS anchors per position. */
#include <stdlib.h>
#include <string.h>

#include "cuda_internal.h"
#include "core/scratch.h"

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

/* An op's three per-image floats (cuda_internal.h) written and copied over;
 * *dev: their device copy, which its kernel reads. */
static mr_status image_floats(cuda_ctx *c, cuda_image_part part, float *field, float a, float b, float d,
                              const void **dev, const char *op, mr_error *err)
{
    MR_TRY(cuda_image_params_writable(c, part, op, err));
    field[0] = a;
    field[1] = b;
    field[2] = d;
    return cuda_image_params_upload(c, part, field, 3 * sizeof(float), dev, op, err);
}

/* Byte offsets in d_post, 256-aligned (cub's temporaries, float4 loads). */
static size_t take(size_t *used, size_t bytes)
{
    size_t at = *used;
    *used += (bytes + 255) & ~(size_t)255;
    return at;
}

/* The op's result count: written by the last kernel, read after the one sync. */
static mr_status count_to_host(cuda_ctx *c, const int *d_count, int cap, int *n, const char *op, mr_error *err)
{
    MR_TRY(to_host(c, c->host, d_count, sizeof(int), op, err));
    memcpy(n, c->host, sizeof(int));
    if (*n < 0 || *n > cap)
        return mr_fail(err, MR_ERR_INTERNAL, "%s: the GPU NMS returned %d rows (a group over its planned size?)", op,
                       *n);
    return MR_OK;
}

/* ---------------------------------------------------------------- RPN */

typedef struct {
    size_t region; /* the ranking's scratch, then the NMS's */
    size_t ranked, cand, valid, keep, counts, total;
} rpn_layout;

static mr_status rpn_layout_of(const int *counts, const int *tops, int levels, rpn_layout *L, mr_error *err)
{
    int total = 0, largest = 0;
    for (int l = 0; l < levels; l++) {
        total += tops[l];
        if (tops[l] > largest) largest = tops[l];
    }
    size_t rank = 0, nms = 0, used = 0, n = (size_t)(total > 0 ? total : 1);
    MR_TRY(cuda_rank_scratch_bytes(counts, levels, &rank, err));
    MR_TRY(cuda_nms_scratch_bytes(total, largest, levels, &nms, err));
    L->region = take(&used, rank > nms ? rank : nms);
    L->ranked = take(&used, sizeof(int) * n);
    L->cand = take(&used, sizeof(cuda_box_cand) * n);
    L->valid = take(&used, n);
    L->keep = take(&used, sizeof(int) * n);
    L->counts = take(&used, 2 * sizeof(int)); /* kept, count */
    L->total = used;
    return MR_OK;
}

/* Host staging of the whole-op host path: logits, deltas, the outputs,
 * proposals_cpu's scratch. */
static size_t rpn_host_bytes(const mr_proposal_params *p, const int *count)
{
    mr_scratch sc = {NULL, 0};
    for (int l = 0; l < p->num_levels; l++) {
        scratch_take(&sc, sizeof(float) * (size_t)count[l]);
        scratch_take(&sc, sizeof(float) * 4 * (size_t)count[l]);
    }
    scratch_take(&sc, sizeof(float) * 5 * (size_t)p->post_nms_top_n);
    scratch_take(&sc, proposals_scratch_bytes(p));
    return sc.used;
}

static mr_status rpn_proposals_host(cuda_ctx *c, const mr_proposal_params *p, const mr_tensor *const *logits,
                                    const mr_tensor *const *deltas, const int *count, mr_tensor *boxes,
                                    mr_tensor *scores, mr_error *err)
{
    const char *op = "rpn_proposals";
    size_t cap = (size_t)p->post_nms_top_n;
    MR_TRY(cuda_host_reserve(c, rpn_host_bytes(p, count), op, err));
    mr_scratch sc = {c->host, 0};
    const float *lg[MR_PROPOSAL_MAX_LEVELS], *dl[MR_PROPOSAL_MAX_LEVELS];
    for (int l = 0; l < p->num_levels; l++) {
        float *hl = scratch_take(&sc, sizeof(float) * (size_t)count[l]);
        float *hd = scratch_take(&sc, sizeof(float) * 4 * (size_t)count[l]);
        MR_TRY(to_host(c, hl, logits[l]->data, sizeof(float) * (size_t)count[l], op, err));
        MR_TRY(to_host(c, hd, deltas[l]->data, sizeof(float) * 4 * (size_t)count[l], op, err));
        lg[l] = hl;
        dl[l] = hd;
    }
    float *hb = scratch_take(&sc, sizeof(float) * 5 * cap), *hs = hb + 4 * cap;
    void *scratch = scratch_take(&sc, proposals_scratch_bytes(p));
    int n = proposals_cpu(p, lg, dl, hb, hs, scratch);
    MR_TRY(to_device(c, boxes->data, hb, sizeof(float) * 4 * (size_t)n, op, err));
    MR_TRY(to_device(c, scores->data, hs, sizeof(float) * (size_t)n, op, err));
    if (!c->device_counts) {
        boxes->n = scores->n = n;
        return MR_OK;
    }
    memcpy(c->host, &n, sizeof n); /* (the staging's scratch is done with) */
    return to_device(c, c->d_counts, c->host, sizeof n, op, err);
}

mr_status cuda_rpn_proposals(void *vctx, const mr_proposal_params *p, const mr_tensor *const *logits,
                             const mr_tensor *const *deltas, mr_tensor *boxes, mr_tensor *scores, mr_error *err)
{
    cuda_ctx *c = vctx;
    const char *op = "rpn_proposals";
    size_t cap = (size_t)p->post_nms_top_n;
    if (p->num_levels < 1 || p->num_levels > MR_PROPOSAL_MAX_LEVELS)
        return mr_fail(err, MR_ERR_RANGE, "%s: %d levels (1..%d)", op, p->num_levels, MR_PROPOSAL_MAX_LEVELS);
    if (p->post_nms_top_n < 0 || boxes->cap < 4 * cap || scores->cap < cap)
        return mr_fail(err, MR_ERR_SHAPE, "%s: outputs hold fewer than post_nms_top_n = %d rows", op,
                       p->post_nms_top_n);
    int replaying = 0;
    MR_TRY(cuda_graph_op(c, op, &replaying, err));
    for (int l = 0; l < p->num_levels; l++) {
        MR_TRY(cuda_need_f32(op, logits[l], "the logits", err));
        MR_TRY(cuda_need_f32(op, deltas[l], "the deltas", err));
    }
    int count[MR_PROPOSAL_MAX_LEVELS], top[MR_PROPOSAL_MAX_LEVELS], total = 0;
    const float *d_logits[MR_PROPOSAL_MAX_LEVELS], *d_deltas[MR_PROPOSAL_MAX_LEVELS];
    for (int l = 0; l < p->num_levels; l++) {
        size_t n = (size_t)p->grid_h[l] * (size_t)p->grid_w[l] * (size_t)p->num_anchors;
        if (n > (size_t)1 << 30 || mr_tensor_numel(logits[l]) < n || mr_tensor_numel(deltas[l]) < 4 * n)
            return mr_fail(err, MR_ERR_SHAPE, "%s: level %d holds fewer than its %dx%dx%d anchors", op, l,
                           p->grid_h[l], p->grid_w[l], p->num_anchors);
        count[l] = (int)n;
        top[l] = count[l] < p->pre_nms_top_n ? count[l] : p->pre_nms_top_n;
        if (top[l] < 0) top[l] = 0;
        if (total > (1 << 30) - top[l])
            return mr_fail(err, MR_ERR_RANGE, "%s: more than 2^30 ranked anchors", op);
        total += top[l];
        d_logits[l] = logits[l]->data;
        d_deltas[l] = deltas[l]->data;
    }
    /* the image's own clip window and scale, read on the device (cuda_internal.h) */
    const void *d_image = NULL;
    MR_TRY(image_floats(c, CUDA_IMAGE_RPN, c->h_image->rpn, p->img_h, p->img_w, p->im_scale, &d_image, op, err));
    if (c->device_counts) {
        boxes->n = scores->n = (int)cap;
        boxes->device_count = scores->device_count = c->d_counts;
        if (replaying) return MR_OK; /* the graph runs it */
    }
    if (c->host_post || p->num_anchors > CUDA_MAX_CELL_ANCHORS)
        return rpn_proposals_host(c, p, logits, deltas, count, boxes, scores, err);
    if (total == 0 || cap == 0) {
        if (!c->device_counts) {
            boxes->n = scores->n = 0;
            return MR_OK;
        }
        cudaError_t e = cudaMemsetAsync(c->d_counts, 0, sizeof(int), c->stream);
        return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "zero the count", e);
    }
    int largest = 0;
    for (int l = 0; l < p->num_levels; l++) largest = top[l] > largest ? top[l] : largest;
    rpn_layout L;
    MR_TRY(rpn_layout_of(count, top, p->num_levels, &L, err));
    MR_TRY(cuda_reserve(c, &c->d_post, &c->post_size, L.total, op, err));
    MR_TRY(cuda_host_reserve(c, sizeof(int), op, err));
    char *base = c->d_post;
    int *ranked = (int *)(base + L.ranked), *keep = (int *)(base + L.keep), *kept = (int *)(base + L.counts);
    cuda_box_cand *cand = (cuda_box_cand *)(base + L.cand);
    unsigned char *valid = (unsigned char *)(base + L.valid);
    MR_TRY(cuda_rank_launch(c->stream, base + L.region, d_logits, count, top, p->num_levels, ranked, err));
    MR_TRY(cuda_after_launch(c, op, err));
    MR_TRY(cuda_proposal_cand_launch(c->stream, p, d_image, d_logits, d_deltas, top, ranked, cand, valid, err));
    MR_TRY(cuda_after_launch(c, op, err));
    MR_TRY(cuda_batched_nms_launch(c->stream, base + L.region, cand, valid, total, largest, p->num_levels,
                                   p->nms_thresh, p->nms_flags, keep, kept, op, err));
    MR_TRY(cuda_after_launch(c, op, err));
    int *out_count = c->device_counts ? c->d_counts : kept + 1;
    MR_TRY(cuda_proposal_out_launch(c->stream, p->post_nms_top_n, cand, keep, kept, boxes->data, scores->data,
                                    out_count, err));
    MR_TRY(cuda_after_launch(c, op, err));
    if (c->device_counts) return MR_OK;
    int n = 0;
    MR_TRY(count_to_host(c, kept + 1, p->post_nms_top_n, &n, op, err));
    boxes->n = scores->n = n;
    return MR_OK;
}

/* ---------------------------------------------------------------- box head */

typedef struct {
    size_t probs, cand, valid, keep, counts, nms, agn_keep, agn_boxes, total;
} box_layout;

/* cap: the outputs' rows (out_capacity), all the agnostic pass keeps */
static mr_status box_layout_of(int n, int K, int cap, box_layout *L, mr_error *err)
{
    size_t m = (size_t)n * (size_t)(K > 1 ? K - 1 : 0), mm = m > 0 ? m : 1, nms = 0, used = 0;
    size_t c = (size_t)(cap > 0 ? cap : 1);
    MR_TRY(cuda_nms_scratch_bytes((int)m, n, K > 1 ? K : 1, &nms, err));
    L->probs = take(&used, sizeof(float) * (size_t)(n > 0 ? n : 1) * (size_t)(K > 0 ? K : 1));
    L->cand = take(&used, sizeof(cuda_box_cand) * mm);
    L->valid = take(&used, mm);
    L->keep = take(&used, sizeof(int) * mm);
    L->counts = take(&used, 3 * sizeof(int)); /* kept, count, kept by the agnostic pass */
    L->agn_keep = take(&used, sizeof(int) * c);
    L->agn_boxes = take(&used, sizeof(float) * 5 * c);
    L->nms = take(&used, nms);
    L->total = used;
    return MR_OK;
}

/* Host staging of the whole-op host path: rois, logits, deltas, outputs, scratch. */
static size_t box_host_bytes(const mr_box_post_params *p, int rois)
{
    size_t n = (size_t)rois, K = (size_t)p->num_classes, cap = (size_t)p->out_capacity;
    mr_scratch sc = {NULL, 0};
    scratch_take(&sc, sizeof(float) * 4 * n);
    scratch_take(&sc, sizeof(float) * K * n);
    scratch_take(&sc, sizeof(float) * (size_t)box_post_delta_cols((int)K, p->class_agnostic) * n);
    scratch_take(&sc, sizeof(float) * 6 * cap);
    scratch_take(&sc, box_post_scratch_bytes(p, rois));
    return sc.used;
}

/* The whole op on the host (MR_CUDA_HOST_POST=1): box_post_cpu on copies. */
static mr_status box_detections_host(cuda_ctx *c, const mr_box_post_params *p, const mr_tensor *rois,
                                     const mr_tensor *logits, const mr_tensor *deltas, mr_tensor *boxes,
                                     mr_tensor *scores, mr_tensor *labels, mr_error *err)
{
    const char *op = "box_detections";
    size_t cap = (size_t)p->out_capacity;
    size_t n = (size_t)rois->n, K = (size_t)p->num_classes;
    MR_TRY(cuda_host_reserve(c, box_host_bytes(p, rois->n), op, err));
    mr_scratch sc = {c->host, 0};
    float *hr = scratch_take(&sc, sizeof(float) * 4 * n), *hl = scratch_take(&sc, sizeof(float) * K * n);
    size_t cols = (size_t)box_post_delta_cols((int)K, p->class_agnostic);
    float *hd = scratch_take(&sc, sizeof(float) * cols * n), *hb = scratch_take(&sc, sizeof(float) * 6 * cap);
    float *hs = hb + 4 * cap, *hlab = hs + cap;
    void *scratch = scratch_take(&sc, box_post_scratch_bytes(p, rois->n));
    MR_TRY(to_host(c, hr, rois->data, sizeof(float) * 4 * n, op, err));
    MR_TRY(to_host(c, hl, logits->data, sizeof(float) * K * n, op, err));
    MR_TRY(to_host(c, hd, deltas->data, sizeof(float) * cols * n, op, err));
    int d = box_post_cpu(p, hr, hl, hd, rois->n, hb, hs, hlab, scratch);
    MR_TRY(to_device(c, boxes->data, hb, sizeof(float) * 4 * (size_t)d, op, err));
    MR_TRY(to_device(c, scores->data, hs, sizeof(float) * (size_t)d, op, err));
    MR_TRY(to_device(c, labels->data, hlab, sizeof(float) * (size_t)d, op, err));
    boxes->n = scores->n = labels->n = d;
    return MR_OK;
}

mr_status cuda_box_detections(void *vctx, const mr_box_post_params *p, const mr_tensor *rois,
                              const mr_tensor *logits, const mr_tensor *deltas, mr_tensor *boxes,
                              mr_tensor *scores, mr_tensor *labels, mr_error *err)
{
    cuda_ctx *c = vctx;
    const char *op = "box_detections";
    size_t cap = (size_t)p->out_capacity;
    if (p->max_dets > p->out_capacity || boxes->cap < 4 * cap || scores->cap < cap || labels->cap < cap)
        return mr_fail(err, MR_ERR_SHAPE, "%s: outputs hold fewer than %d rows", op, p->out_capacity);
    if (logits->n != rois->n || deltas->n != rois->n || logits->c != p->num_classes ||
        deltas->c != box_post_delta_cols(p->num_classes, p->class_agnostic))
        return mr_fail(err, MR_ERR_SHAPE, "%s: logits/deltas do not match %d rois of %d classes", op, rois->n,
                       p->num_classes);
    int replaying = 0;
    MR_TRY(cuda_graph_op(c, op, &replaying, err));
    MR_TRY(cuda_need_f32(op, rois, "the RoIs", err));
    MR_TRY(cuda_need_f32(op, logits, "the logits", err));
    MR_TRY(cuda_need_f32(op, deltas, "the deltas", err));
    if (c->host_post) return box_detections_host(c, p, rois, logits, deltas, boxes, scores, labels, err);
    int n = rois->n, K = p->num_classes;
    if ((size_t)(n > 0 ? n : 0) * (size_t)(K > 1 ? K - 1 : 0) > (size_t)1 << 30)
        return mr_fail(err, MR_ERR_RANGE, "%s: %d rois x %d classes is more than 2^30 candidates", op, n, K);
    const void *d_image = NULL;
    MR_TRY(image_floats(c, CUDA_IMAGE_BOX, c->h_image->box, p->img_h, p->img_w, p->roi_divisor, &d_image, op, err));
    int *d_out_count = c->device_counts ? c->d_counts + 1 : NULL;
    if (d_out_count) {
        boxes->n = scores->n = labels->n = p->out_capacity;
        boxes->device_count = scores->device_count = labels->device_count = d_out_count;
        if (replaying) return MR_OK; /* the graph runs it */
    }
    if (n <= 0 || K < 2 || p->max_dets <= 0) {
        if (!d_out_count) {
            boxes->n = scores->n = labels->n = 0;
            return MR_OK;
        }
        cudaError_t e = cudaMemsetAsync(d_out_count, 0, sizeof(int), c->stream);
        return e == cudaSuccess ? MR_OK : cuda_fail(err, op, "zero the count", e);
    }
    int m = n * (K - 1);
    box_layout L;
    MR_TRY(box_layout_of(n, K, p->out_capacity, &L, err));
    MR_TRY(cuda_reserve(c, &c->d_post, &c->post_size, L.total, op, err));
    MR_TRY(cuda_host_reserve(c, sizeof(int), op, err));
    char *base = c->d_post;
    float *probs = (float *)(base + L.probs);
    cuda_box_cand *cand = (cuda_box_cand *)(base + L.cand);
    unsigned char *valid = (unsigned char *)(base + L.valid);
    int *keep = (int *)(base + L.keep), *kept = (int *)(base + L.counts), *count = kept + 1;
    MR_TRY(cuda_box_cand_launch(c->stream, p, d_image, rois->data, rois->device_count, logits->data, deltas->data, n,
                                probs, cand, valid, err));
    MR_TRY(cuda_after_launch(c, op, err));
    /* a class holds at most one candidate per RoI: groups of at most n */
    MR_TRY(cuda_batched_nms_launch(c->stream, base + L.nms, cand, valid, m, n, K, p->nms_thresh, p->nms_flags, keep,
                                   kept, op, err));
    MR_TRY(cuda_after_launch(c, op, err));
    if (p->agnostic_nms) {
        int *agn_keep = (int *)(base + L.agn_keep);
        MR_TRY(cuda_nms_ordered_launch(c->stream, cand, keep, kept, p->out_capacity, p->agnostic_nms_thresh,
                                       p->nms_flags, (float *)(base + L.agn_boxes), agn_keep, kept + 2, op, err));
        MR_TRY(cuda_after_launch(c, op, err));
        keep = agn_keep;
        kept += 2;
    }
    MR_TRY(cuda_box_out_launch(c->stream, p, cand, keep, kept, rois->device_count, boxes->data, scores->data,
                               labels->data, d_out_count ? d_out_count : count, err));
    MR_TRY(cuda_after_launch(c, op, err));
    if (d_out_count) return MR_OK;
    int d = 0;
    MR_TRY(count_to_host(c, count, p->out_capacity, &d, op, err));
    boxes->n = scores->n = labels->n = d;
    return MR_OK;
}

/* ---------------------------------------------------------------- sizing */

mr_status cuda_post_scratch_bytes(const cuda_post_limits *lim, size_t *device_bytes, size_t *host_bytes,
                                  mr_error *err)
{
    if (lim->levels < 1 || lim->levels > MR_PROPOSAL_MAX_LEVELS || lim->max_anchors < 0 || lim->pre_nms_top_n < 0 ||
        lim->post_nms_top_n < 0 || lim->max_rois < 0 || lim->num_classes < 1 || lim->max_dets < 0 ||
        (size_t)lim->max_rois * (size_t)lim->num_classes > (size_t)1 << 30 ||
        (size_t)lim->levels * (size_t)lim->pre_nms_top_n > (size_t)1 << 30)
        return mr_fail(err, MR_ERR_RANGE, "post-processing limits out of range (%d levels, %d anchors, %d rois)",
                       lim->levels, lim->max_anchors, lim->max_rois);
    int counts[MR_PROPOSAL_MAX_LEVELS], tops[MR_PROPOSAL_MAX_LEVELS];
    for (int l = 0; l < lim->levels; l++) {
        counts[l] = lim->max_anchors;
        tops[l] = lim->max_anchors < lim->pre_nms_top_n ? lim->max_anchors : lim->pre_nms_top_n;
    }
    rpn_layout R;
    box_layout B;
    MR_TRY(rpn_layout_of(counts, tops, lim->levels, &R, err));
    MR_TRY(box_layout_of(lim->max_rois, lim->num_classes, lim->max_dets, &B, err));
    *device_bytes = R.total > B.total ? R.total : B.total;
    *host_bytes = sizeof(int);
    if (lim->host_post) {
        /* the largest level's anchors on one 1 x max_anchors grid of one anchor */
        mr_proposal_params p;
        memset(&p, 0, sizeof p);
        p.num_levels = lim->levels;
        p.num_anchors = 1;
        p.pre_nms_top_n = lim->pre_nms_top_n;
        p.post_nms_top_n = lim->post_nms_top_n;
        p.post_nms_per_level = lim->post_nms_per_level;
        for (int l = 0; l < lim->levels; l++) p.grid_h[l] = 1, p.grid_w[l] = lim->max_anchors;
        mr_box_post_params b;
        memset(&b, 0, sizeof b);
        b.num_classes = lim->num_classes;
        b.max_dets = b.out_capacity = lim->max_dets;
        size_t rh = rpn_host_bytes(&p, counts), bh = box_host_bytes(&b, lim->max_rois);
        size_t h = rh > bh ? rh : bh;
        if (h > *host_bytes) *host_bytes = h;
    }
    return MR_OK;
}
