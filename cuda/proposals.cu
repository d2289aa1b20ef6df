/* RPN proposal selection on the GPU, after the per-level ranking
 * (rpn_rank.cu), in proposals_select's order (engine/ops/proposals.c):
 *  - cand_kernel: every ranked anchor (slot t, level after level, rank
 *    order within a level) decoded, clipped and tested by
 *    proposal_candidate (proposals.h, the CPU's own function), written as
 *    a candidate of group = level with a valid flag. The CPU's candidate
 *    indices are the valid slots in slot order, so the batched NMS
 *    (nms.cu, per level) visits and returns them in the CPU's order.
 *  - out_kernel: the first min(kept, post_nms_top_n) kept candidates, in
 *    the NMS's order (descending score, ties by slot), become the outputs.
 *    proposals_select's post_nms_per_level cap never binds before the
 *    total cap of the same post_nms_top_n: a level's count so far is at
 *    most the total so far, which is below post_nms_top_n inside its loop
 *    (Detectron's per-level cap followed by its top post_nms_top_n over the
 *    levels keeps the same set). So the outputs equal the CPU's.
 * Device expf may differ from glibc's by an ulp (box_decode, the sigmoid).
 *
 * The cell anchors travel in the kernel's parameter block
 * (__grid_constant__, read in place): at most CUDA_MAX_CELL_ANCHORS per
 * level; the caller runs larger tables on the host. The image's clip window
 * and scale (img_h, img_w, im_scale) are read from device memory (the
 * per-image parameters, cuda_internal.h), so that a graph serves every
 * image of its padded size. */
#include <string.h>

#include "cuda_launch.cuh"
#include "ops/proposals.h"

typedef struct {
    mr_proposal_params p; /* its cell_anchors are host pointers: cells below instead */
    float cells[MR_PROPOSAL_MAX_LEVELS][CUDA_MAX_CELL_ANCHORS * 4];
    const float *logits[MR_PROPOSAL_MAX_LEVELS], *deltas[MR_PROPOSAL_MAX_LEVELS];
    int base[MR_PROPOSAL_MAX_LEVELS + 1]; /* first slot of each level; base[levels] = total */
} proposal_dev;

static __global__ void cand_kernel(const __grid_constant__ proposal_dev d, const float *image, const int *ranked,
                                   cuda_box_cand *cand, unsigned char *valid)
{
    const int L = d.p.num_levels, total = d.base[L];
    mr_proposal_params p = d.p;
    p.img_h = image[0];
    p.img_w = image[1];
    p.im_scale = image[2];
    for (int t = blockIdx.x * blockDim.x + threadIdx.x; t < total; t += gridDim.x * blockDim.x) {
        int l = 0;
        while (l + 1 < L && t >= d.base[l + 1]) l++;
        const int i = ranked[t];
        cuda_box_cand c;
        c.group = l;
        valid[t] = (unsigned char)proposal_candidate(&p, l, d.cells[l], i, d.logits[l][i],
                                                     d.deltas[l] + 4 * (size_t)i, c.box, &c.score);
        cand[t] = c;
    }
}

/* One block: *count = min(*kept, post) (-1 if the NMS failed), then the rows. */
static __global__ void out_kernel(int post, const cuda_box_cand *cand, const int *keep, const int *kept,
                                  float *boxes, float *scores, int *count)
{
    __shared__ int n;
    if (threadIdx.x == 0) {
        int k = *kept;
        n = k < 0 ? -1 : (k < post ? k : post);
        *count = n;
    }
    __syncthreads();
    for (int r = threadIdx.x; r < n; r += blockDim.x) {
        const cuda_box_cand c = cand[keep[r]];
        for (int j = 0; j < 4; j++) boxes[4 * (size_t)r + j] = c.box[j];
        scores[r] = c.score;
    }
}

extern "C" mr_status cuda_proposal_cand_launch(cudaStream_t s, const mr_proposal_params *p, const void *d_image,
                                               const float *const *d_logits, const float *const *d_deltas,
                                               const int *tops, const int *d_ranked, cuda_box_cand *cand,
                                               unsigned char *valid, mr_error *err)
{
    if (p->num_levels < 1 || p->num_levels > MR_PROPOSAL_MAX_LEVELS || p->num_anchors < 1 ||
        p->num_anchors > CUDA_MAX_CELL_ANCHORS)
        return mr_fail(err, MR_ERR_INTERNAL, "rpn_proposals: %d levels of %d cell anchors on the GPU", p->num_levels,
                       p->num_anchors);
    proposal_dev d;
    memset(&d, 0, sizeof d);
    d.p = *p;
    d.base[0] = 0;
    for (int l = 0; l < p->num_levels; l++) {
        memcpy(d.cells[l], p->cell_anchors[l], sizeof(float) * 4 * (size_t)p->num_anchors);
        d.p.cell_anchors[l] = NULL;
        d.logits[l] = d_logits[l];
        d.deltas[l] = d_deltas[l];
        d.base[l + 1] = d.base[l] + tops[l];
    }
    const int total = d.base[p->num_levels];
    if (total == 0) return MR_OK;
    cand_kernel<<<cuda_grid((size_t)total), MR_CUDA_BLOCK, 0, s>>>(d, (const float *)d_image, d_ranked, cand, valid);
    return cuda_launch_status("rpn_proposals", err);
}

extern "C" mr_status cuda_proposal_out_launch(cudaStream_t s, int post_nms_top_n, const cuda_box_cand *cand,
                                              const int *keep, const int *kept, float *boxes, float *scores,
                                              int *count, mr_error *err)
{
    out_kernel<<<1, MR_CUDA_BLOCK, 0, s>>>(post_nms_top_n, cand, keep, kept, boxes, scores, count);
    return cuda_launch_status("rpn_proposals", err);
}
