/* GroupNorm over NHWC feature maps (ops/group_norm.h): one block per
 * (sample, group), a grid-stride loop over those units. Two passes over
 * the group's H*W*C/G values: the statistics (each thread's values by
 * Welford's update in float, group_norm_moments_add; the block's
 * GN_THREADS partial statistics merged pairwise in a tree in shared
 * memory, group_norm_moments_merge), then every output
 * (group_norm_out, the CPU's math). A thread takes the values i, i +
 * GN_THREADS, ... of the group in NHWC order, so neighbouring threads read
 * neighbouring channels of a pixel and then of the next pixel; every
 * thread sees the same values whatever order the threads run in, so the
 * result does not depend on scheduling.
 *
 * Float or half maps (x and y of one type, elem.cuh), statistics and
 * arithmetic in float, gamma and beta float; with accumulate y's previous
 * values are read before being overwritten, by the same thread. y may be x
 * (without accumulate): each value is read by the thread that writes it,
 * after the block's barrier that ends the statistics.
 *
 * Occupancy: N*G blocks (32 at batch 1 with 32 groups: a fraction of a big
 * GPU's SMs, so a backbone map is read at part of the memory's bandwidth;
 * the RoI heads' batches give thousands). Splitting a group over several
 * blocks would need a second launch or atomics into scratch; not done. */
#include <limits.h>

#include "cuda_launch.cuh"
#include "elem.cuh"
#include "ops/group_norm.h"

/* A power of two: the tree below halves it. */
#define GN_THREADS MR_CUDA_BLOCK

template <typename T>
static __global__ void group_norm_kernel(const T *x, T *y, const float *gamma, const float *beta, int units, int G,
                                         int cpg, size_t hw, float eps, int relu, int accumulate)
{
    __shared__ float s_mean[GN_THREADS], s_m2[GN_THREADS];
    __shared__ int s_n[GN_THREADS];
    const int t = (int)threadIdx.x, C = G * cpg;
    const unsigned count = (unsigned)(hw * (size_t)cpg); /* <= INT_MAX: group_norm_check */
    for (int u = blockIdx.x; u < units; u += gridDim.x) {
        const int n = u / G, g = u % G;
        const size_t base = (size_t)n * hw * (size_t)C + (size_t)g * (size_t)cpg;
        mr_group_norm_moments m = {0.0f, 0.0f, 0};
        for (unsigned i = (unsigned)t; i < count; i += GN_THREADS) {
            const size_t at = base + (size_t)(i / (unsigned)cpg) * (size_t)C + i % (unsigned)cpg;
            group_norm_moments_add(&m, elem_load(x, at));
        }
        s_mean[t] = m.mean;
        s_m2[t] = m.m2;
        s_n[t] = m.n;
        __syncthreads();
        for (int half = GN_THREADS / 2; half > 0; half >>= 1) {
            if (t < half) {
                mr_group_norm_moments a = {s_mean[t], s_m2[t], s_n[t]}, b = {s_mean[t + half], s_m2[t + half],
                                                                          s_n[t + half]};
                group_norm_moments_merge(&a, &b);
                s_mean[t] = a.mean;
                s_m2[t] = a.m2;
                s_n[t] = a.n;
            }
            __syncthreads();
        }
        const float mean = s_mean[0], rstd = group_norm_rstd(s_m2[0] / (float)count, eps);
        for (unsigned i = (unsigned)t; i < count; i += GN_THREADS) {
            const int c = g * cpg + (int)(i % (unsigned)cpg);
            const size_t at = base + (size_t)(i / (unsigned)cpg) * (size_t)C + i % (unsigned)cpg;
            const float r = accumulate ? elem_load(y, at) : 0.0f;
            elem_store(y, at, group_norm_out(elem_load(x, at), mean, rstd, gamma[c], beta[c], r, relu));
        }
        __syncthreads(); /* every thread has read s_mean[0], s_m2[0] before the next unit writes them */
    }
}

template <typename T>
static void group_norm_typed(cudaStream_t s, const mr_group_norm_params *p, const mr_tensor *x, const T *xd, T *yd,
                             const float *gamma, const float *beta, int accumulate)
{
    const int units = x->n * p->groups;
    const unsigned grid = units < 65535 * 8 ? (unsigned)units : 65535u * 8u;
    group_norm_kernel<T><<<grid, GN_THREADS, 0, s>>>(xd, yd, gamma, beta, units, p->groups, p->channels / p->groups,
                                                     (size_t)x->h * (size_t)x->w, p->eps, p->relu, accumulate);
}

extern "C" mr_status cuda_group_norm_launch(cudaStream_t s, const char *op, const mr_group_norm_params *p,
                                            const mr_tensor *x, mr_tensor *y, const float *gamma, const float *beta,
                                            int accumulate, mr_error *err)
{
    if (x->dtype != MR_ELEM_F32 && x->dtype != MR_ELEM_F16)
        return mr_fail(err, MR_ERR_SHAPE, "%s: GroupNorm of element type %d", op, (int)x->dtype);
    if ((long long)x->n * p->groups > INT_MAX)
        return mr_fail(err, MR_ERR_SHAPE, "%s: GroupNorm of %d samples in %d groups: too many", op, x->n, p->groups);
    if (mr_tensor_numel(x) == 0) return MR_OK;
    if (x->dtype == MR_ELEM_F16)
        group_norm_typed(s, p, x, (const __half *)elem_f16(x), elem_f16(y), gamma, beta, accumulate);
    else
        group_norm_typed(s, p, x, (const float *)x->data, y->data, gamma, beta, accumulate);
    return cuda_launch_status(op, err);
}
