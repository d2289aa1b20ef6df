/* Naive double-precision references of the dense backend ops, shared by
 * the op tests (test_backend_ops.c: every backend in fp32; test_cuda_fp16.c:
 * the CUDA backend in fp16): direct loops over NHWC activations and
 * PyTorch's weight layouts, written here from the ops' definitions and
 * independent of both backends. Plus the normalised error they compare by. */
#ifndef MR_TEST_REF_OPS_H
#define MR_TEST_REF_OPS_H

#include <math.h>
#include <stddef.h>

#include "backend/backend.h"

/* ||got - ref|| / ||ref|| in double, or ||got - ref|| when ref is all zero;
 * NaN when either side holds a NaN or an infinity. */
static inline double norm_err(const float *got, const float *ref, size_t n)
{
    double d2 = 0.0, r2 = 0.0;
    for (size_t i = 0; i < n; i++) {
        if (!isfinite(got[i]) || !isfinite(ref[i])) return NAN;
        double d = (double)got[i] - (double)ref[i];
        d2 += d * d;
        r2 += (double)ref[i] * (double)ref[i];
    }
    return r2 > 0.0 ? sqrt(d2 / r2) : sqrt(d2);
}

/* y = act(conv(x, w) + b + (accumulate ? y_before : 0)): x NHWC, w OIHW
 * ([cout, cin/groups, k, k]), y NHWC, double accumulation. */
static inline void ref_conv(const mr_conv_params *p, int n, int h, int w, int oh, int ow, const float *x,
                            const float *wt, const float *b, int accumulate, const float *y_before, float *y)
{
    int cpg = p->cin / p->groups, opg = p->cout / p->groups;
    for (int in = 0; in < n; in++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int co = 0; co < p->cout; co++) {
                    int g = co / opg;
                    double acc = b[co];
                    for (int ky = 0; ky < p->kh; ky++) {
                        int iy = oy * p->stride - p->pad + ky * p->dilation;
                        if (iy < 0 || iy >= h) continue;
                        for (int kx = 0; kx < p->kw; kx++) {
                            int ix = ox * p->stride - p->pad + kx * p->dilation;
                            if (ix < 0 || ix >= w) continue;
                            for (int ci = 0; ci < cpg; ci++) {
                                double xv = x[(((size_t)in * h + iy) * w + ix) * p->cin + (size_t)(g * cpg + ci)];
                                double wv = wt[(((size_t)co * cpg + ci) * p->kh + ky) * p->kw + kx];
                                acc += xv * wv;
                            }
                        }
                    }
                    size_t o = (((size_t)in * oh + oy) * ow + ox) * p->cout + co;
                    if (accumulate) acc += y_before[o];
                    if (p->relu && acc < 0.0) acc = 0.0;
                    y[o] = (float)acc;
                }
}

/* y[r, o] = act(b[o] + sum_k x[r, k] * w[o, k]) over `rows` rows. */
static inline void ref_linear(const mr_linear_params *p, int rows, const float *x, const float *w, const float *b,
                              float *y)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < p->out; o++) {
            double acc = b[o];
            for (int k = 0; k < p->in; k++) acc += (double)x[(size_t)r * p->in + k] * (double)w[(size_t)o * p->in + k];
            if (p->relu && acc < 0.0) acc = 0.0;
            y[(size_t)r * p->out + o] = (float)acc;
        }
}

/* ConvTranspose2d(kernel 2, stride 2), w [cin, cout, 2, 2], x [n, h, w, cin]:
 * input pixel (i, j) writes output pixels (2i + ki, 2j + kj). */
static inline void ref_deconv2x2(const mr_deconv2x2_params *p, int n, int h, int w, const float *x, const float *wt,
                                 const float *b, float *y)
{
    int oh = 2 * h, ow = 2 * w;
    for (int in = 0; in < n; in++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int co = 0; co < p->cout; co++) {
                    int i = oy / 2, j = ox / 2, ki = oy % 2, kj = ox % 2;
                    double acc = b[co];
                    for (int ci = 0; ci < p->cin; ci++)
                        acc += (double)x[(((size_t)in * h + i) * w + j) * p->cin + ci] *
                               (double)wt[(((size_t)ci * p->cout + co) * 2 + ki) * 2 + kj];
                    if (p->relu && acc < 0.0) acc = 0.0;
                    y[(((size_t)in * oh + oy) * ow + ox) * p->cout + co] = (float)acc;
                }
}

/* Max pooling with PyTorch's -inf padding (a padded tap never wins); a NaN
 * in the window wins. x [n, h, w, c], y [n, oh, ow, c]. */
static inline void ref_max_pool(const mr_pool_params *p, int n, int h, int w, int c, const float *x, int oh, int ow,
                                float *y)
{
    for (int in = 0; in < n; in++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int ch = 0; ch < c; ch++) {
                    float m = -INFINITY;
                    for (int ky = 0; ky < p->kernel; ky++)
                        for (int kx = 0; kx < p->kernel; kx++) {
                            int iy = oy * p->stride - p->pad + ky, ix = ox * p->stride - p->pad + kx;
                            if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                            float v = x[(((size_t)in * h + iy) * w + ix) * c + ch];
                            if (v > m || v != v) m = v;
                            if (m != m) break; /* NaN wins */
                        }
                    y[(((size_t)in * oh + oy) * ow + ox) * c + ch] = m;
                }
}

/* PyTorch's "nearest": src = min(floor(dst * (float)in / out), in - 1), in
 * float; exact 2x is dst >> 1. */
static inline int ref_nearest(int dst, int in, int out)
{
    if (out == 2 * in) return dst >> 1;
    float scale = (float)in / (float)out;
    int i = (int)floorf((float)dst * scale);
    return i < in - 1 ? i : in - 1;
}

/* Nearest-neighbour resize of x [n, ih, iw, c] to y [n, oh, ow, c]. */
static inline void ref_upsample_nearest(int n, int ih, int iw, int oh, int ow, int c, const float *x, float *y)
{
    for (int in = 0; in < n; in++)
        for (int oy = 0; oy < oh; oy++)
            for (int ox = 0; ox < ow; ox++)
                for (int ch = 0; ch < c; ch++) {
                    int iy = ref_nearest(oy, ih, oh), ix = ref_nearest(ox, iw, ow);
                    y[(((size_t)in * oh + oy) * ow + ox) * c + ch] = x[(((size_t)in * ih + iy) * iw + ix) * c + ch];
                }
}

/* GroupNorm (torch.nn.functional.group_norm, then the residual and ReLU):
 * per sample and group, the mean and then the biased variance of the
 * group's h*w*C/G values in double (two passes), y = act((x - mean) /
 * sqrt(var + eps) * gamma[c] + beta[c] (+ y_before)) in double. x, y
 * [n, h, w, C] NHWC; y may be x without accumulate. */
static inline void ref_group_norm(const mr_group_norm_params *p, int n, int h, int w, const float *x,
                                  const float *gamma, const float *beta, int accumulate, const float *y_before,
                                  float *y)
{
    const int C = p->channels, cpg = C / p->groups;
    const size_t hw = (size_t)h * (size_t)w;
    for (int in = 0; in < n; in++)
        for (int g = 0; g < p->groups; g++) {
            const size_t base = (size_t)in * hw * (size_t)C + (size_t)g * (size_t)cpg;
            double sum = 0.0, sq = 0.0, count = (double)hw * cpg;
            for (size_t i = 0; i < hw; i++)
                for (int c = 0; c < cpg; c++) sum += x[base + i * (size_t)C + (size_t)c];
            const double mean = sum / count;
            for (size_t i = 0; i < hw; i++)
                for (int c = 0; c < cpg; c++) {
                    double d = x[base + i * (size_t)C + (size_t)c] - mean;
                    sq += d * d;
                }
            const double rstd = 1.0 / sqrt(sq / count + (double)p->eps);
            for (size_t i = 0; i < hw; i++)
                for (int c = 0; c < cpg; c++) {
                    size_t at = base + i * (size_t)C + (size_t)c;
                    double v = (x[at] - mean) * rstd * gamma[g * cpg + c] + beta[g * cpg + c];
                    if (accumulate) v += y_before[at];
                    if (p->relu && v < 0.0) v = 0.0;
                    y[at] = (float)v;
                }
        }
}

#endif
