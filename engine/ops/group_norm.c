/* CPU GroupNorm over NHWC float arrays; see group_norm.h for the contract.
 *
 * OpenMP over (sample, run of groups): a first pass sums the groups'
 * values and squares in double, a second writes every output with
 * group_norm_out, the math the GPU kernel runs. A run of groups is a
 * contiguous stretch of channels of each pixel, so both inner loops are
 * straight runs the compiler vectorises (norm_groups below). No scratch:
 * the per-channel lanes are on the stack. */
#include "ops/group_norm.h"

#include <limits.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>

mr_status group_norm_params_check(const char *name, const mr_group_norm_params *p, mr_error *err)
{
    if (p->channels < 1 || p->groups < 1 || p->channels % p->groups)
        return mr_fail(err, MR_ERR_SHAPE, "%s: GroupNorm of %d channels in %d groups (the groups must divide the "
                       "channels)", name, p->channels, p->groups);
    if (!(p->eps >= 0.0f) || !isfinite(p->eps))
        return mr_fail(err, MR_ERR_RANGE, "%s: GroupNorm eps %g (finite and >= 0)", name, (double)p->eps);
    return MR_OK;
}

mr_status group_norm_check(const char *name, const mr_group_norm_params *p, const mr_tensor *x, const mr_tensor *y,
                           int accumulate, mr_error *err)
{
    if (x->c != p->channels || y->c != x->c || y->n != x->n || y->h != x->h || y->w != x->w)
        return mr_fail(err, MR_ERR_SHAPE, "%s: GroupNorm of %d channels given input [%d,%d,%d,%d], output "
                       "[%d,%d,%d,%d] (the same shape)", name, p->channels, x->n, x->h, x->w, x->c, y->n, y->h, y->w,
                       y->c);
    if (x->dtype != y->dtype)
        return mr_fail(err, MR_ERR_SHAPE, "%s: GroupNorm input and output types differ", name);
    if (x->n < 0 || x->h < 0 || x->w < 0 ||
        (size_t)x->h * (size_t)x->w * (size_t)(p->channels / p->groups) > (size_t)INT_MAX)
        return mr_fail(err, MR_ERR_SHAPE, "%s: GroupNorm of a [%d,%d,%d,%d] map: a group of more than %d values",
                       name, x->n, x->h, x->w, x->c, INT_MAX);
    size_t bytes = mr_tensor_numel(x) * mr_elem_size(x->dtype);
    uintptr_t xa = (uintptr_t)x->data, ya = (uintptr_t)y->data;
    int overlap = bytes && xa < ya + bytes && ya < xa + bytes;
    if (overlap && (accumulate || xa != ya))
        return mr_fail(err, MR_ERR_SHAPE, "%s: GroupNorm %s", name,
                       accumulate ? "adding into its output needs an output apart from the input"
                                  : "in place needs the output to be the input exactly, not a part of it");
    return MR_OK;
}

/* A thread's task is a run of whole groups of one sample whose channels,
 * at most GN_LANES of them, it sums and normalises pixel after pixel: one
 * contiguous stretch of each pixel, per-channel lanes in the inner loops
 * (a straight vector add or multiply-add per pixel; the lanes are reduced
 * into their groups once, after the pass). A group wider than the lanes
 * is a task of its own, taken GN_LANES channels at a time. */
#define GN_LANES 64

/* Per lane c < width: the sums of x and x^2 over the hw pixels, in double. */
static void lane_sums(const float *xc, size_t hw, int C, int width, double *s, double *s2)
{
    for (int c = 0; c < width; c++) s[c] = s2[c] = 0.0;
    for (size_t i = 0; i < hw; i++) {
        const float *xp = xc + i * (size_t)C;
#pragma omp simd
        for (int c = 0; c < width; c++) {
            double v = xp[c];
            s[c] += v;
            s2[c] += v * v;
        }
    }
}

/* y = group_norm_out over lanes c < width of every pixel, lane c with its
 * group's mean[c] and rstd[c]. */
static void lane_apply(const float *xc, float *yc, size_t hw, int C, int width, const float *mean, const float *rstd,
                       const float *gamma, const float *beta, int accumulate, int relu)
{
    for (size_t i = 0; i < hw; i++) {
        const float *xp = xc + i * (size_t)C;
        float *yp = yc + i * (size_t)C;
        if (accumulate) {
#pragma omp simd
            for (int c = 0; c < width; c++)
                yp[c] = group_norm_out(xp[c], mean[c], rstd[c], gamma[c], beta[c], yp[c], relu);
        } else {
#pragma omp simd
            for (int c = 0; c < width; c++)
                yp[c] = group_norm_out(xp[c], mean[c], rstd[c], gamma[c], beta[c], 0.0f, relu);
        }
    }
}

/* A group's mean and rstd from its sums over count values. */
static void group_stats(double s, double s2, double count, float eps, float *mean, float *rstd)
{
    const double m = s / count;
    *mean = (float)m;
    *rstd = group_norm_rstd((float)(s2 / count - m * m), eps);
}

/* Groups [g0, g1) of the sample at x, y (hw pixels). */
static void norm_groups(const mr_group_norm_params *p, const float *x, float *y, const float *gamma,
                        const float *beta, size_t hw, int g0, int g1, int accumulate)
{
    const int C = p->channels, cpg = C / p->groups, c0 = g0 * cpg, width = (g1 - g0) * cpg;
    const double count = (double)hw * (double)cpg;
    double s[GN_LANES], s2[GN_LANES];
    float mean[GN_LANES], rstd[GN_LANES];
    if (width <= GN_LANES) {
        lane_sums(x + c0, hw, C, width, s, s2);
        for (int k = 0; k < width; k += cpg) {
            double gs = 0.0, gs2 = 0.0;
            for (int c = k; c < k + cpg; c++) {
                gs += s[c];
                gs2 += s2[c];
            }
            group_stats(gs, gs2, count, p->eps, &mean[k], &rstd[k]);
            for (int c = k + 1; c < k + cpg; c++) {
                mean[c] = mean[k];
                rstd[c] = rstd[k];
            }
        }
        lane_apply(x + c0, y + c0, hw, C, width, mean, rstd, gamma + c0, beta + c0, accumulate, p->relu);
        return;
    }
    double gs = 0.0, gs2 = 0.0; /* one group (g1 = g0 + 1), GN_LANES channels at a time */
    for (int c = 0; c < width; c += GN_LANES) {
        const int lanes = width - c < GN_LANES ? width - c : GN_LANES;
        lane_sums(x + c0 + c, hw, C, lanes, s, s2);
        for (int l = 0; l < lanes; l++) {
            gs += s[l];
            gs2 += s2[l];
        }
    }
    group_stats(gs, gs2, count, p->eps, &mean[0], &rstd[0]);
    for (int l = 1; l < GN_LANES; l++) {
        mean[l] = mean[0];
        rstd[l] = rstd[0];
    }
    for (int c = 0; c < width; c += GN_LANES)
        lane_apply(x + c0 + c, y + c0 + c, hw, C, width - c < GN_LANES ? width - c : GN_LANES, mean, rstd,
                   gamma + c0 + c, beta + c0 + c, accumulate, p->relu);
}

void group_norm_cpu(const mr_group_norm_params *p, const float *x, int n, int h, int w, const float *gamma,
                    const float *beta, int accumulate, float *y)
{
    const int C = p->channels, G = p->groups, cpg = C / G;
    const size_t hw = (size_t)h * (size_t)w;
    if (hw == 0 || n <= 0) return;
    /* groups a task: as many as fill the lanes, fewer while that leaves
     * threads without one (a batch-1 map of 256 channels: 4 tasks of 8
     * groups, or 32 of one on 32 threads) */
    int per = cpg <= GN_LANES ? GN_LANES / cpg : 1;
    const long threads = omp_get_max_threads();
    while (per > 1 && (long)n * ((G + per - 1) / per) < threads) per /= 2;
    const int tasks = (G + per - 1) / per;
#pragma omp parallel for collapse(2) schedule(static)
    for (int in = 0; in < n; in++) {
        for (int t = 0; t < tasks; t++) {
            const size_t base = (size_t)in * hw * (size_t)C;
            const int g0 = t * per, g1 = g0 + per < G ? g0 + per : G;
            norm_groups(p, x + base, y + base, gamma, beta, hw, g0, g1, accumulate);
        }
    }
}
