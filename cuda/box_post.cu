/* Box head post-processing on the GPU (box_post_cpu's steps, in its
 * order, engine/ops/box_post.c):
 *  - softmax_kernel: every RoI's class probabilities (softmax_row);
 *  - candidate_kernel: every (RoI, class >= 1) slot, RoI-major and
 *    class-minor as torchvision flattens them, decoded, clipped and tested
 *    (score > score_thresh, both sides >= min_size: box_post_candidate),
 *    written as a candidate of group = class with a valid flag. The CPU's
 *    candidate indices are the valid slots in slot order, so the batched
 *    NMS (nms.cu, per class) visits and returns them in the CPU's order;
 *  - out_kernel: box_post_count (max_dets, keep_ties) over the NMS's
 *    order, then the rows.
 * With the RoIs' count on the device (rois_count, backend.h), the slots of
 * RoIs past it are invalid: they come after every valid slot, so the NMS
 * sees the valid ones in the same order as without the padding. A
 * negative RoI count (the RPN's NMS broke its group limits) makes the
 * output count -1, which the paste stage reports. The image's clip window
 * and RoI divisor (img_h, img_w, roi_divisor) are read from device memory
 * (the per-image parameters, cuda_internal.h).
 * The math is box_post.h's MR_HD functions, the CPU's own. Device expf may
 * differ from glibc's by an ulp, so a score can differ by an ulp from the
 * CPU's. */
#include "ops/box_post.h"
#include "cuda_launch.cuh"

static __global__ void softmax_kernel(const float *logits, float *probs, int n, int K)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < n; r += gridDim.x * blockDim.x)
        softmax_row(logits + (size_t)r * K, K, probs + (size_t)r * K);
}

static __global__ void candidate_kernel(mr_box_post_params p, const float *image, const float *rois,
                                        const int *rois_count, const float *probs, const float *deltas, int n,
                                        cuda_box_cand *cand, unsigned char *valid)
{
    p.img_h = image[0];
    p.img_w = image[1];
    p.roi_divisor = image[2];
    const int K = p.num_classes;
    const size_t total = (size_t)n * (size_t)(K - 1);
    const size_t rows = rois_count ? (size_t)(*rois_count > 0 ? *rois_count : 0) : (size_t)n;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)(K - 1);
        int k = (int)(i % (size_t)(K - 1)) + 1;
        cuda_box_cand c;
        c.score = 0.0f;
        c.group = k;
        c.box[0] = c.box[1] = c.box[2] = c.box[3] = 0.0f;
        if (r >= rows) { /* padding: never read (its RoI may be anything) */
            cand[i] = c;
            valid[i] = 0;
            continue;
        }
        c.score = probs[r * K + k];
        int ok = c.score > p.score_thresh &&
                 box_post_candidate(&p, rois + 4 * r, deltas + box_post_delta_offset(&p, r, k), c.box);
        cand[i] = c;
        valid[i] = (unsigned char)ok;
    }
}

/* One block: *count = box_post_count over the kept (-1 if the NMS failed),
 * then the rows. */
static __global__ void out_kernel(mr_box_post_params p, const cuda_box_cand *cand, const int *keep, const int *kept,
                                  const int *rois_count, float *boxes, float *scores, float *labels, int *count)
{
    __shared__ int d;
    if (threadIdx.x == 0) {
        int k = *kept;
        if (rois_count && *rois_count < 0) k = -1;
        d = k < 0 ? -1 : box_post_count(&p, &cand[0].score, sizeof(cuda_box_cand) / sizeof(float), keep, k);
        *count = d;
    }
    __syncthreads();
    for (int i = threadIdx.x; i < d; i += blockDim.x) {
        const cuda_box_cand c = cand[keep[i]];
        for (int j = 0; j < 4; j++) boxes[4 * (size_t)i + j] = c.box[j];
        scores[i] = c.score;
        labels[i] = (float)c.group;
    }
}

extern "C" mr_status cuda_box_cand_launch(cudaStream_t s, const mr_box_post_params *p, const void *d_image,
                                          const float *rois, const int *rois_count, const float *logits, const float *deltas, int n,
                                          float *d_probs, cuda_box_cand *cand, unsigned char *valid, mr_error *err)
{
    const int K = p->num_classes;
    if (n <= 0 || K < 2) return MR_OK;
    size_t m = (size_t)n * (size_t)(K - 1);
    softmax_kernel<<<cuda_grid((size_t)n), MR_CUDA_BLOCK, 0, s>>>(logits, d_probs, n, K);
    candidate_kernel<<<cuda_grid(m), MR_CUDA_BLOCK, 0, s>>>(*p, (const float *)d_image, rois, rois_count, d_probs,
                                                            deltas, n, cand, valid);
    return cuda_launch_status("box_detections", err);
}

extern "C" mr_status cuda_box_out_launch(cudaStream_t s, const mr_box_post_params *p, const cuda_box_cand *cand,
                                         const int *keep, const int *kept, const int *rois_count, float *boxes,
                                         float *scores, float *labels, int *count, mr_error *err)
{
    out_kernel<<<1, MR_CUDA_BLOCK, 0, s>>>(*p, cand, keep, kept, rois_count, boxes, scores, labels, count);
    return cuda_launch_status("box_detections", err);
}
