/* probs[d, i] = sigmoid(logits[d, i, labels[d]]): the mask of each
 * detection's own class (or channel 0 of a one-channel, class-agnostic
 * predictor: ops/mask_probs.h), logits [D, M, M, K] NHWC, probs [D, M, M, 1].
 * One thread per output pixel; 1 / (1 + expf(-x)) as on the CPU.
 * With the labels' count on the device (backend.h) the host has not seen
 * them: rows past the count are 0, and a label outside 0..K-1 (which the
 * host path reports as an error) gives NaN, never a read outside the
 * logits. */
#include "cuda_launch.cuh"
#include "ops/mask_probs.h"

static __global__ void mask_probs_kernel(const float *logits, const float *labels, const int *count, float *probs,
                                         int D, int plane, int K)
{
    size_t total = (size_t)D * plane;
    const size_t rows = count ? (size_t)(*count > 0 ? *count : 0) : (size_t)D;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
        size_t d = i / (size_t)plane;
        if (d >= rows) {
            probs[i] = 0.0f;
            continue;
        }
        int channel = mask_channel_of(labels[d], K);
        if (channel < 0) { /* the host check's test; NaN fails it */
            probs[i] = nanf("");
            continue;
        }
        probs[i] = 1.0f / (1.0f + expf(-logits[i * (size_t)K + (size_t)channel]));
    }
}

static void mask_probs(cudaStream_t s, const float *logits, const float *labels, const int *count, float *probs, int D,
                       int plane, int K)
{
    mask_probs_kernel<<<cuda_grid((size_t)D * plane), MR_CUDA_BLOCK, 0, s>>>(logits, labels, count, probs, D, plane,
                                                                             K);
}

extern "C" mr_status cuda_mask_probs_launch(cudaStream_t s, const mr_tensor *logits, const float *labels,
                                            const int *count, mr_tensor *probs, mr_error *err)
{
    int K = logits->c, plane = logits->h * logits->w;
    if (probs->n != logits->n || probs->h * probs->w * probs->c != plane)
        return mr_fail(err, MR_ERR_SHAPE, "mask_probs: %d logits, probs [%d,%d,%d,%d] do not match", logits->n,
                       probs->n, probs->h, probs->w, probs->c);
    if (logits->n == 0 || plane == 0) return MR_OK;
    mask_probs(s, logits->data, labels, count, probs->data, logits->n, plane, K);
    return cuda_launch_status("mask_probs", err);
}
