/* CPU GroupNorm over NHWC float arrays; see group_norm.h for the contract.
 *
 * One (sample, group) at a time per thread (OpenMP over N*G): a first pass
 * sums the group's values and squares in double, a second writes every
 * output with group_norm_out, the math the GPU kernel runs. A group's
 * channels are C/G contiguous floats of each pixel, so both inner loops
 * are straight runs the compiler vectorises. No scratch. */
#include "ops/group_norm.h"

#include <limits.h>
#include <math.h>
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

void group_norm_cpu(const mr_group_norm_params *p, const float *x, int n, int h, int w, const float *gamma,
                    const float *beta, int accumulate, float *y)
{
    const int C = p->channels, G = p->groups, cpg = C / G;
    const size_t hw = (size_t)h * (size_t)w;
    if (hw == 0) return;
    const int relu = p->relu;
#pragma omp parallel for collapse(2) schedule(static)
    for (int in = 0; in < n; in++) {
        for (int g = 0; g < G; g++) {
            const size_t base = (size_t)in * hw * (size_t)C + (size_t)g * (size_t)cpg;
            const float *xg = x + base, *ga = gamma + (size_t)g * cpg, *be = beta + (size_t)g * cpg;
            float *yg = y + base;
            double s = 0.0, s2 = 0.0;
            for (size_t i = 0; i < hw; i++) {
                const float *xp = xg + i * (size_t)C;
#pragma omp simd reduction(+ : s, s2)
                for (int c = 0; c < cpg; c++) {
                    double v = xp[c];
                    s += v;
                    s2 += v * v;
                }
            }
            const double count = (double)hw * (double)cpg, mean_d = s / count;
            const float mean = (float)mean_d, rstd = group_norm_rstd((float)(s2 / count - mean_d * mean_d), p->eps);
            for (size_t i = 0; i < hw; i++) {
                const float *xp = xg + i * (size_t)C;
                float *yp = yg + i * (size_t)C;
                if (accumulate) {
#pragma omp simd
                    for (int c = 0; c < cpg; c++) yp[c] = group_norm_out(xp[c], mean, rstd, ga[c], be[c], yp[c], relu);
                } else {
#pragma omp simd
                    for (int c = 0; c < cpg; c++) yp[c] = group_norm_out(xp[c], mean, rstd, ga[c], be[c], 0.0f, relu);
                }
            }
        }
    }
}
