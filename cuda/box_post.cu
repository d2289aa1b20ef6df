/* Box head post-processing, the per-element part on the GPU: the softmax
 * of every RoI's class logits, then every (RoI, class >= 1) candidate
 * decoded, clipped and tested (score > score_thresh, both sides >=
 * min_size) with box_post.h's MR_HD math (softmax_row, box_post_candidate),
 * and the survivors compacted in RoI-major, class-minor order with CUB
 * (cub::DeviceSelect::Flagged, which keeps the input order): the same
 * candidates, in the same order, as box_post_cpu. Only they go to the host,
 * where box_post_select (engine/box_post.c) runs the per-class NMS and the
 * top-N, the CPU backend's code. Device expf may differ from glibc's by an
 * ulp, so a score can differ by an ulp from the CPU's.
 *
 * Device scratch (cuda_box_cand_scratch_bytes, cub's size query): probs
 * [n,K], candidates and flags [n*(K-1)], the selected candidates, their
 * count, cub's temporary storage. */
#include <cub/device/device_select.cuh>

#include "box_post.h"
#include "cuda_launch.cuh"

static __global__ void softmax_kernel(const float *logits, float *probs, int n, int K)
{
    for (int r = blockIdx.x * blockDim.x + threadIdx.x; r < n; r += gridDim.x * blockDim.x)
        softmax_row(logits + (size_t)r * K, K, probs + (size_t)r * K);
}

static __global__ void candidate_kernel(mr_box_post_params p, const float *rois, const float *probs,
                                        const float *deltas, int n, cuda_box_cand *cand, char *flags)
{
    const int K = p.num_classes;
    const size_t total = (size_t)n * (size_t)(K - 1);
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / (size_t)(K - 1);
        int k = (int)(i % (size_t)(K - 1)) + 1;
        cuda_box_cand c;
        c.score = probs[r * K + k];
        c.group = k;
        c.box[0] = c.box[1] = c.box[2] = c.box[3] = 0.0f;
        int ok = c.score > p.score_thresh &&
                 box_post_candidate(&p, rois + 4 * r, deltas + (r * (size_t)K + (size_t)k) * 4, c.box);
        cand[i] = c;
        flags[i] = (char)ok;
    }
}

typedef struct {
    size_t probs, cand, flags, sel, count, temp, total;
} cand_layout;

static size_t align256(size_t x) { return (x + 255) & ~(size_t)255; }

static cudaError_t cand_layout_of(int n, int K, cand_layout *L)
{
    size_t m = (size_t)n * (size_t)(K > 1 ? K - 1 : 0), temp = 0;
    if (m > 0) {
        cudaError_t e = cub::DeviceSelect::Flagged(NULL, temp, (const cuda_box_cand *)NULL, (const char *)NULL,
                                                   (cuda_box_cand *)NULL, (int *)NULL, (int)m);
        if (e != cudaSuccess) return e;
    }
    L->probs = 0;
    L->cand = align256(sizeof(float) * (size_t)n * (size_t)K + 1);
    L->flags = L->cand + align256(sizeof(cuda_box_cand) * m + 1);
    L->sel = L->flags + align256(m + 1);
    L->count = L->sel + align256(sizeof(cuda_box_cand) * m + 1);
    L->temp = L->count + 256;
    L->total = L->temp + align256(temp + 1);
    return cudaSuccess;
}

extern "C" mr_status cuda_box_cand_scratch_bytes(int n, int K, size_t *bytes, mr_error *err)
{
    cand_layout L;
    cudaError_t e = cand_layout_of(n, K, &L);
    if (e != cudaSuccess)
        return mr_fail(err, MR_ERR_BACKEND, "box_detections: cub size query failed: %s", cudaGetErrorString(e));
    *bytes = L.total;
    return MR_OK;
}

extern "C" mr_status cuda_box_cand_launch(cudaStream_t s, const mr_box_post_params *p, const float *rois,
                                          const float *logits, const float *deltas, int n, void *d_scratch,
                                          cuda_box_cand *h_cand, int *h_count, mr_error *err)
{
    const int K = p->num_classes;
    *h_count = 0;
    if (n <= 0 || K < 2) return MR_OK;
    cand_layout L;
    cudaError_t e = cand_layout_of(n, K, &L);
    if (e != cudaSuccess)
        return mr_fail(err, MR_ERR_BACKEND, "box_detections: cub size query failed: %s", cudaGetErrorString(e));
    char *base = (char *)d_scratch;
    float *probs = (float *)(base + L.probs);
    cuda_box_cand *cand = (cuda_box_cand *)(base + L.cand), *sel = (cuda_box_cand *)(base + L.sel);
    char *flags = base + L.flags;
    int *count = (int *)(base + L.count);
    size_t m = (size_t)n * (size_t)(K - 1), temp_bytes = L.total - L.temp;
    softmax_kernel<<<cuda_grid((size_t)n), MR_CUDA_BLOCK, 0, s>>>(logits, probs, n, K);
    candidate_kernel<<<cuda_grid(m), MR_CUDA_BLOCK, 0, s>>>(*p, rois, probs, deltas, n, cand, flags);
    MR_TRY(cuda_launch_status("box_detections", err));
    e = cub::DeviceSelect::Flagged(base + L.temp, temp_bytes, cand, flags, sel, count, (int)m, s);
    if (e == cudaSuccess) e = cudaMemcpyAsync(h_count, count, sizeof(int), cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e == cudaSuccess && (*h_count < 0 || (size_t)*h_count > m)) e = cudaErrorUnknown;
    if (e == cudaSuccess && *h_count > 0)
        e = cudaMemcpyAsync(h_cand, sel, sizeof(cuda_box_cand) * (size_t)*h_count, cudaMemcpyDeviceToHost, s);
    if (e == cudaSuccess) e = cudaStreamSynchronize(s);
    if (e != cudaSuccess)
        return mr_fail(err, MR_ERR_BACKEND, "box_detections: candidates on the GPU failed: %s", cudaGetErrorString(e));
    return MR_OK;
}
