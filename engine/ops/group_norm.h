/* GroupNorm (Wu & He, 2018) over NHWC feature maps, with its per-channel
 * affine, an optional residual sum and ReLU: the one normalisation that
 * cannot be folded into the convolution before it (its statistics are the
 * input's own), so it runs as an op of its own.
 *
 * Inputs: x [N,H,W,C] NHWC; gamma, beta [C] float. Output: y [N,H,W,C]
 * NHWC, x's shape and element type. Channel c is in group g = c / (C/G).
 * Per sample n and group g, over the M = H*W*C/G values
 * x[n, 0..H-1, 0..W-1, g*C/G .. (g+1)*C/G - 1]:
 *   mean = sum(x) / M,  var = sum((x - mean)^2) / M   (biased)
 *   rstd = 1 / sqrt(var + eps)
 *   y = act((x - mean) * rstd * gamma[c] + beta[c] + (accumulate ? y_before : 0))
 * act: ReLU (a NaN stays NaN, as torch's) when relu, else none. With
 * accumulate y's previous contents are added (a residual), so x and y must
 * be distinct memory; without, y may be x itself (in place). Memory that
 * partly overlaps is refused either way. A group holds at most INT_MAX
 * values (group_norm_check).
 *
 * Reference: torch.nn.GroupNorm / torch.nn.functional.group_norm
 * (torch/nn/functional.py, aten/src/ATen/native/group_norm.cpp), which
 * detectron2's "GN" norm is (layers/batch_norm.py get_norm: GroupNorm(32,
 * C), eps 1e-5), as are torchvision's GN heads. Caffe2's GroupNorm op
 * (caffe2/operators/group_norm_op.cc), which Detectron's GN models
 * (cfg.GROUP_NORM, EPSILON 1e-5) run, is the same math: biased variance,
 * eps inside the square root, affine per channel. Both hold the maps in
 * NCHW; the groups are the same channels here in NHWC.
 *
 * Statistics. The CPU (group_norm.c) sums x and x^2 of a group in double,
 * then var = E[x^2] - mean^2, clamped at 0: with 53 bits the cancellation
 * costs less than rounding the mean to fp32 does (which every fp32 GroupNorm,
 * torch's included, pays), even for a 200x336x256 map's groups of 537,600
 * values, unless the mean lies ~1000 standard deviations from 0.
 * The GPU (cuda/group_norm.cu) runs one block per (n, g): each thread
 * keeps Welford's running mean and sum of squared deviations in float
 * (group_norm_moments_add, no cancellation whatever the mean), and the
 * block merges them pairwise in a tree (group_norm_moments_merge, Chan et
 * al.'s formula), as torch's CUDA kernel does. Both then compute rstd and
 * every output with the same functions below, so they differ only by the
 * statistics' last bits (normalised error ~1e-7 against a double
 * reference; the op tests allow 1e-5). */
#ifndef MR_GROUP_NORM_H
#define MR_GROUP_NORM_H

#include <math.h>
#include <stddef.h>

#include "core/hd.h"
#include "core/status.h"
#include "core/tensor.h"

typedef struct {
    int channels, groups; /* channels % groups == 0 */
    float eps;            /* PyTorch nn.GroupNorm eps, 1e-5 */
    int relu;             /* 1: ReLU after the affine (and after the residual sum) */
} mr_group_norm_params;

/* A group's running statistics: n values, their mean and the sum of their
 * squared deviations from it (m2; var = m2 / n). */
typedef struct {
    float mean, m2;
    int n;
} mr_group_norm_moments;

/* Welford's update with one value. */
MR_HD static inline void group_norm_moments_add(mr_group_norm_moments *m, float x)
{
    m->n++;
    float d = x - m->mean;
    m->mean += d / (float)m->n;
    m->m2 += d * (x - m->mean);
}

/* a = the statistics of a's values and b's together (Chan, Golub and
 * LeVeque's pairwise formula). */
MR_HD static inline void group_norm_moments_merge(mr_group_norm_moments *a, const mr_group_norm_moments *b)
{
    if (b->n == 0) return;
    if (a->n == 0) {
        *a = *b;
        return;
    }
    int n = a->n + b->n;
    float d = b->mean - a->mean, fb = (float)b->n / (float)n;
    a->mean += d * fb;
    a->m2 += b->m2 + d * d * (float)a->n * fb;
    a->n = n;
}

/* 1 / sqrt(var + eps); a negative var (rounding) counts as 0, a NaN stays NaN. */
MR_HD static inline float group_norm_rstd(float var, float eps)
{
    if (var < 0.0f) var = 0.0f;
    return 1.0f / sqrtf(var + eps);
}

/* One output value; residual is y_before when accumulating, else 0. */
MR_HD static inline float group_norm_out(float x, float mean, float rstd, float gamma, float beta, float residual,
                                         int relu)
{
    float v = (x - mean) * rstd * gamma + beta + residual;
    return relu && v < 0.0f ? 0.0f : v;
}

/* The layer's parameters: groups and channels positive, the groups divide
 * the channels, eps finite and >= 0. Errors name the layer. */
mr_status group_norm_params_check(const char *name, const mr_group_norm_params *p, mr_error *err);

/* A call's tensors against the parameters and the contract above: x of
 * p->channels channels, y of x's shape and type, a group of at most INT_MAX
 * values, x and y the same memory (only without accumulate) or disjoint. */
mr_status group_norm_check(const char *name, const mr_group_norm_params *p, const mr_tensor *x, const mr_tensor *y,
                           int accumulate, mr_error *err);

/* The CPU version on plain NHWC float arrays x and y [n,h,w,p->channels]
 * (y == x allowed without accumulate), gamma and beta [p->channels]; OpenMP
 * over (n, group). Parameters already checked. */
void group_norm_cpu(const mr_group_norm_params *p, const float *x, int n, int h, int w, const float *gamma,
                    const float *beta, int accumulate, float *y);

#endif
