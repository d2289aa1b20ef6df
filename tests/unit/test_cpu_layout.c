/* The CPU backend keeps convolution outputs in nChw8c in place and turns
 * them back into NHWC only when something else reads them
 * (engine/cpu/backend_cpu_layout.c). These cases chain ops through the backend
 * table the ways the model does (conv into conv, a residual sum into a
 * blocked tensor, pooling and a linear layer reading a blocked output, the
 * same memory seen with another shape, part of a tensor copied to the host,
 * a tensor overwritten from the host) and compare every result read back
 * with naive NHWC references computed here in double precision. They run
 * with each channel block, and again at --precision bf16, where the
 * convolutions run on NHWC whatever the block, converting their fp32
 * input to bf16: the same chains, residual sums, views and readers
 * (tolerance TOL_BF16; skipped, visibly, on a CPU without AVX512_BF16 or
 * AMX). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "cpu/backend_cpu.h"

#define TOL 1e-5
/* bf16 inputs, weights and outputs: 8 bits of mantissa each (bench/NOTES.md 20). */
#define TOL_BF16 1e-2

static uint64_t g_rng = 0x6c61796f75744f4bull;

static float rnd(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return (float)((g_rng * 0x2545f4914f6cdd1dull) >> 40) / (float)(1 << 24) * 2.0f - 1.0f;
}

static float *rnd_array(size_t n)
{
    float *a = malloc(sizeof(float) * n);
    assert_non_null(a);
    for (size_t i = 0; i < n; i++) a[i] = rnd();
    return a;
}

/* y = act(conv(x, w) + b + (acc ? y : 0)); NHWC, OIHW, n = 1, pad k/2, stride 1. */
static void ref_conv(int h, int w, int cin, int cout, int k, int relu, const float *x, const float *wt,
                     const float *b, int acc, float *y)
{
    for (int oy = 0; oy < h; oy++)
        for (int ox = 0; ox < w; ox++)
            for (int co = 0; co < cout; co++) {
                double s = b[co];
                for (int ky = 0; ky < k; ky++)
                    for (int kx = 0; kx < k; kx++) {
                        int iy = oy + ky - k / 2, ix = ox + kx - k / 2;
                        if (iy < 0 || iy >= h || ix < 0 || ix >= w) continue;
                        for (int ci = 0; ci < cin; ci++)
                            s += (double)x[((size_t)iy * w + ix) * cin + ci] * wt[((co * cin + ci) * k + ky) * k + kx];
                    }
                float *o = &y[((size_t)oy * w + ox) * cout + co];
                if (acc) s += *o;
                *o = relu && s < 0 ? 0.0f : (float)s;
            }
}

static double norm_err(const float *got, const float *ref, size_t n)
{
    double d = 0, r = 0;
    for (size_t i = 0; i < n; i++) {
        if (got[i] != got[i]) return INFINITY;
        d += ((double)got[i] - ref[i]) * ((double)got[i] - ref[i]);
        r += (double)ref[i] * ref[i];
    }
    return sqrt(d / (r > 0 ? r : 1));
}

typedef struct {
    mr_backend be;
    mr_error err;
} fix;

/* The channel block of the layout under test (8: nChw8c, 16: nChw16c);
 * main runs every case with each. */
static int g_block;
/* 1: the backend at MR_PRECISION_BF16, compared within TOL_BF16. */
static int g_bf16;

static int setup(void **state)
{
    fix *f = calloc(1, sizeof *f);
    mr_backend_params p = {.threads = 1, .cpu_block = g_block,
                           .precision = g_bf16 ? MR_PRECISION_BF16 : MR_PRECISION_FP32};
    if (!f || backend_open("cpu", &p, &f->be, &f->err) != MR_OK) return -1;
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fix *f = *state;
    f->be.i->destroy(f->be.ctx);
    free(f);
    return 0;
}

static mr_tensor dev_tensor(fix *f, int n, int h, int w, int c, const float *host)
{
    size_t count = (size_t)n * h * w * c;
    void *p = NULL;
    assert_int_equal(f->be.i->buffer_alloc(f->be.ctx, sizeof(float) * count, &p, &f->err), MR_OK);
    if (host) assert_int_equal(f->be.i->copy_to_device(f->be.ctx, p, host, sizeof(float) * count, &f->err), MR_OK);
    return mr_tensor_make(p, n, h, w, c);
}

static float *to_host(fix *f, const mr_tensor *t)
{
    size_t count = mr_tensor_numel(t);
    float *h = malloc(sizeof(float) * count);
    assert_non_null(h);
    assert_int_equal(f->be.i->copy_to_host(f->be.ctx, h, t->data, sizeof(float) * count, &f->err), MR_OK);
    return h;
}

/* out_to_convs: every reader is a conv (mr_conv_params), so at bf16 the
 * output is handed over in bf16. */
static mr_layer *conv_layer_to(fix *f, int cin, int cout, int k, int relu, int out_to_convs, float **w, float **b)
{
    mr_conv_params p = {cin, cout, k, k, 1, k / 2, 1, 1, relu, 0, 0, 0, 0, 0.0f, 0, 0.0f, 0, out_to_convs, 0.0f};
    *w = rnd_array((size_t)cout * cin * k * k);
    *b = rnd_array((size_t)cout);
    mr_layer *l = NULL;
    assert_int_equal(f->be.i->conv_init(f->be.ctx, "test.conv", &p, *w, *b, &l, &f->err), MR_OK);
    return l;
}

static mr_layer *conv_layer(fix *f, int cin, int cout, int k, int relu, float **w, float **b)
{
    return conv_layer_to(f, cin, cout, k, relu, 0, w, b);
}

static void expect(const float *got, const float *ref, size_t n, const char *what)
{
    double e = norm_err(got, ref, n);
    printf("  %-40s normalised error %.2e\n", what, e);
    assert_true(e <= (g_bf16 ? TOL_BF16 : TOL));
}

/* conv 3x3 -> conv 1x1 -> residual conv 1x1 into it -> max pool, and a
 * linear layer over the first conv's output; every intermediate read back. */
static void test_chain(void **state)
{
    fix *f = *state;
    const mr_backend_i *be = f->be.i;
    int H = 5, W = 7, C0 = 16, C1 = 24;
    float *x_h = rnd_array((size_t)H * W * C0), *wa, *ba, *wb, *bb, *wc, *bc;
    mr_layer *A = conv_layer(f, C0, C0, 3, 1, &wa, &ba), *B = conv_layer(f, C0, C1, 1, 0, &wb, &bb),
             *Cl = conv_layer(f, C0, C1, 1, 1, &wc, &bc);
    mr_tensor x = dev_tensor(f, 1, H, W, C0, x_h), y1 = dev_tensor(f, 1, H, W, C0, NULL),
              y2 = dev_tensor(f, 1, H, W, C1, NULL), y3 = dev_tensor(f, 1, (H - 1) / 2 + 1, (W - 1) / 2 + 1, C1, NULL);
    float *r1 = calloc((size_t)H * W * C0, sizeof(float)), *r2 = calloc((size_t)H * W * C1, sizeof(float));
    ref_conv(H, W, C0, C0, 3, 1, x_h, wa, ba, 0, r1);
    ref_conv(H, W, C0, C1, 1, 0, r1, wb, bb, 0, r2);
    ref_conv(H, W, C0, C1, 1, 1, r1, wc, bc, 1, r2);

    assert_int_equal(be->conv(f->be.ctx, A, &x, &y1, 0, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, B, &y1, &y2, 0, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, Cl, &y1, &y2, 1, &f->err), MR_OK);
    mr_pool_params pool = {1, 2, 0};
    assert_int_equal(be->max_pool(f->be.ctx, &pool, &y2, &y3, &f->err), MR_OK);

    float *g3 = to_host(f, &y3), *r3 = malloc(sizeof(float) * mr_tensor_numel(&y3));
    for (int oy = 0; oy < y3.h; oy++)
        for (int ox = 0; ox < y3.w; ox++)
            memcpy(r3 + ((size_t)oy * y3.w + ox) * C1, r2 + ((size_t)(2 * oy) * W + 2 * ox) * C1, sizeof(float) * C1);
    expect(g3, r3, mr_tensor_numel(&y3), "conv, conv, residual conv, max pool");
    float *g2 = to_host(f, &y2), *g1 = to_host(f, &y1);
    expect(g2, r2, mr_tensor_numel(&y2), "the residual sum read back");
    expect(g1, r1, mr_tensor_numel(&y1), "the first conv's output read back");

    /* A linear layer over a blocked conv output: the NHWC flattening. */
    assert_int_equal(be->conv(f->be.ctx, A, &x, &y1, 0, &f->err), MR_OK);
    mr_linear_params lp = {H * W * C0, 3, 0, 0, 0.0f, 0};
    float *wl = rnd_array((size_t)3 * lp.in), *bl = rnd_array(3), rl[3];
    mr_layer *L = NULL;
    assert_int_equal(be->linear_init(f->be.ctx, "test.linear", &lp, wl, bl, &L, &f->err), MR_OK);
    mr_tensor z = dev_tensor(f, 1, 1, 1, 3, NULL);
    assert_int_equal(be->linear(f->be.ctx, L, &y1, &z, &f->err), MR_OK);
    for (int o = 0; o < 3; o++) {
        double s = bl[o];
        for (int i = 0; i < lp.in; i++) s += (double)r1[i] * wl[(size_t)o * lp.in + i];
        rl[o] = (float)s;
    }
    float *gz = to_host(f, &z);
    expect(gz, rl, 3, "a linear layer over a conv output");

    be->layer_free(f->be.ctx, A);
    be->layer_free(f->be.ctx, B);
    be->layer_free(f->be.ctx, Cl);
    be->layer_free(f->be.ctx, L);
    mr_tensor all[] = {x, y1, y2, y3, z};
    for (int i = 0; i < 5; i++) be->buffer_free(f->be.ctx, all[i].data);
    free(x_h), free(wa), free(ba), free(wb), free(bb), free(wc), free(bc), free(r1), free(r2), free(r3);
    free(g1), free(g2), free(g3), free(wl), free(bl), free(gz);
}

/* Maps handed from conv to conv in bf16 (out_to_convs; at --precision bf16,
 * where it checks that they are held so): a bottleneck's conv1 -> conv2 ->
 * conv3 adding into the stream held in bf16, and the FPN's top-down path (a
 * lateral whose output is upsampled, in bf16, and added onto by the finer
 * lateral, then read by a 3x3 output conv). Every map read back against
 * double references (at fp32 the hint changes nothing). */
static void test_handoff(void **state)
{
    fix *f = *state;
    const mr_backend_i *be = f->be.i;
    const int H = 6, W = 5, C0 = 16, C1 = 32;
    const size_t hw = (size_t)H * W, hw4 = 4 * hw;
    float *x_h = rnd_array(hw * C0), *x2_h = rnd_array(hw4 * C0);
    float *ww, *bw, *w1, *b1, *w2, *b2, *w3, *b3, *wl, *bl, *wf, *bf, *wo, *bo;
    /* writer: the previous block's conv3, leaving the stream held in bf16 */
    mr_layer *writer = conv_layer_to(f, C0, C1, 1, 1, 1, &ww, &bw), *c1 = conv_layer_to(f, C1, C0, 1, 1, 1, &w1, &b1),
             *c2 = conv_layer_to(f, C0, C0, 3, 1, 1, &w2, &b2), *c3 = conv_layer_to(f, C0, C1, 1, 1, 1, &w3, &b3),
             *lat = conv_layer_to(f, C1, C0, 1, 0, 1, &wl, &bl), *fine = conv_layer_to(f, C0, C0, 1, 0, 1, &wf, &bf),
             *out = conv_layer_to(f, C0, C0, 3, 0, 0, &wo, &bo);
    mr_tensor x = dev_tensor(f, 1, H, W, C0, x_h), stream = dev_tensor(f, 1, H, W, C1, NULL),
              t1 = dev_tensor(f, 1, H, W, C0, NULL), t2 = dev_tensor(f, 1, H, W, C0, NULL),
              inner = dev_tensor(f, 1, H, W, C0, NULL), x2 = dev_tensor(f, 1, 2 * H, 2 * W, C0, x2_h),
              up = dev_tensor(f, 1, 2 * H, 2 * W, C0, NULL), p = dev_tensor(f, 1, 2 * H, 2 * W, C0, NULL);
    float *rs = calloc(hw * C1, sizeof(float)), *r1 = calloc(hw * C0, sizeof(float)),
          *r2 = calloc(hw * C0, sizeof(float)), *ri = calloc(hw * C0, sizeof(float)),
          *ru = calloc(hw4 * C0, sizeof(float)), *rp = calloc(hw4 * C0, sizeof(float));
    ref_conv(H, W, C0, C1, 1, 1, x_h, ww, bw, 0, rs);
    ref_conv(H, W, C1, C0, 1, 1, rs, w1, b1, 0, r1);
    ref_conv(H, W, C0, C0, 3, 1, r1, w2, b2, 0, r2);
    ref_conv(H, W, C0, C1, 1, 1, r2, w3, b3, 1, rs);
    ref_conv(H, W, C1, C0, 1, 0, rs, wl, bl, 0, ri);
    for (int yy = 0; yy < 2 * H; yy++)
        for (int xx = 0; xx < 2 * W; xx++)
            memcpy(ru + ((size_t)yy * 2 * W + xx) * C0, ri + ((size_t)(yy / 2) * W + xx / 2) * C0, sizeof(float) * C0);
    ref_conv(2 * H, 2 * W, C0, C0, 1, 0, x2_h, wf, bf, 1, ru);
    ref_conv(2 * H, 2 * W, C0, C0, 3, 0, ru, wo, bo, 0, rp);

    assert_int_equal(be->conv(f->be.ctx, writer, &x, &stream, 0, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, c1, &stream, &t1, 0, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, c2, &t1, &t2, 0, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, c3, &t2, &stream, 1, &f->err), MR_OK);
    if (g_bf16) assert_true(cpu_layout_is_reduced(f->be.ctx, &stream, dnnl_bf16, 0.0f));
    assert_int_equal(be->conv(f->be.ctx, lat, &stream, &inner, 0, &f->err), MR_OK);
    assert_int_equal(be->upsample_nearest(f->be.ctx, &inner, &up, &f->err), MR_OK);
    if (g_bf16) assert_true(cpu_layout_is_reduced(f->be.ctx, &up, dnnl_bf16, 0.0f));
    assert_int_equal(be->conv(f->be.ctx, fine, &x2, &up, 1, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, out, &up, &p, 0, &f->err), MR_OK);
    /* RoIAlign reading that map as it is held (bf16 at --precision bf16), as the heads read the FPN's levels */
    mr_roi_align_params ra = {3, 3, 2, 1, 1.0f};
    mr_level_map one_level = {2, 2, 224, 2, 1e-6f, 0, 0};
    const float boxes[8] = {4.0f, 2.5f, 37.0f, 30.0f, 0.0f, 8.0f, 21.5f, 44.0f}; /* image pixels: 4 per map pixel */
    mr_tensor rois = dev_tensor(f, 2, 1, 1, 4, boxes), pooled = dev_tensor(f, 2, 3, 3, C0, NULL);
    const mr_tensor *levels[1] = {&up};
    if (g_bf16) assert_true(cpu_layout_is_reduced(f->be.ctx, &up, dnnl_bf16, 0.0f));
    assert_int_equal(be->roi_align(f->be.ctx, &ra, &one_level, levels, &rois, &pooled, &f->err), MR_OK);
    mr_tensor ru_t = mr_tensor_make(ru, 1, 2 * H, 2 * W, C0);
    float rr[2 * 9 * 16];
    roi_align_multilevel_cpu(&ra, &one_level, (const mr_tensor *const[]){&ru_t}, boxes, 2, NULL, rr);
    float *gp = to_host(f, &p), *g1 = to_host(f, &t1), *g2 = to_host(f, &t2), *gs = to_host(f, &stream),
          *gi = to_host(f, &inner), *gu = to_host(f, &up), *gr = to_host(f, &pooled);
    expect(g1, r1, hw * C0, "conv1 handed to conv2");
    expect(g2, r2, hw * C0, "conv2 handed to conv3");
    expect(gs, rs, hw * C1, "conv3 adding into the stream");
    expect(gi, ri, hw * C0, "a lateral of the stream");
    expect(gu, ru, hw4 * C0, "its upsample, added onto by a lateral");
    expect(gp, rp, hw4 * C0, "a 3x3 conv over that sum");
    expect(gr, rr, 2 * 9 * C0, "RoIAlign over that sum");
    mr_layer *ls[] = {writer, c1, c2, c3, lat, fine, out};
    for (int i = 0; i < 7; i++) be->layer_free(f->be.ctx, ls[i]);
    mr_tensor ts[] = {x, stream, t1, t2, inner, x2, up, p, rois, pooled};
    for (int i = 0; i < 10; i++) be->buffer_free(f->be.ctx, ts[i].data);
    float *hs[] = {x_h, x2_h, ww, bw, w1, b1, w2, b2, w3, b3, wl, bl, wf, bf, wo, bo,
                   rs, r1, r2, ri, ru, rp, gp, g1, g2, gs, gi, gu, gr};
    for (size_t i = 0; i < sizeof hs / sizeof hs[0]; i++) free(hs[i]);
}

/* The RPN's pattern: a blocked 3x3 output read by two narrow 1x1 heads (3
 * and 12 channels, written NHWC from padded blocked scratch), the hidden map
 * staying blocked for the second head and read back intact afterwards. */
static void test_narrow_heads(void **state)
{
    fix *f = *state;
    const mr_backend_i *be = f->be.i;
    int H = 9, W = 6, C0 = 16;
    float *x_h = rnd_array((size_t)H * W * C0), *wa, *ba, *w3, *b3, *w12, *b12;
    mr_layer *A = conv_layer(f, C0, C0, 3, 1, &wa, &ba), *N3 = conv_layer(f, C0, 3, 1, 0, &w3, &b3),
             *N12 = conv_layer(f, C0, 12, 1, 0, &w12, &b12);
    mr_tensor x = dev_tensor(f, 1, H, W, C0, x_h), hid = dev_tensor(f, 1, H, W, C0, NULL),
              o3 = dev_tensor(f, 1, H, W, 3, NULL), o12 = dev_tensor(f, 1, H, W, 12, NULL);
    float *rh = calloc((size_t)H * W * C0, sizeof(float)), *r3 = calloc((size_t)H * W * 3, sizeof(float)),
          *r12 = calloc((size_t)H * W * 12, sizeof(float));
    ref_conv(H, W, C0, C0, 3, 1, x_h, wa, ba, 0, rh);
    ref_conv(H, W, C0, 3, 1, 0, rh, w3, b3, 0, r3);
    ref_conv(H, W, C0, 12, 1, 0, rh, w12, b12, 0, r12);
    for (int round = 0; round < 2; round++) { /* the second round reuses the cached primitives */
        assert_int_equal(be->conv(f->be.ctx, A, &x, &hid, 0, &f->err), MR_OK);
        assert_int_equal(be->conv(f->be.ctx, N3, &hid, &o3, 0, &f->err), MR_OK);
        assert_int_equal(be->conv(f->be.ctx, N12, &hid, &o12, 0, &f->err), MR_OK);
        float *g3 = to_host(f, &o3), *g12 = to_host(f, &o12), *gh = to_host(f, &hid);
        expect(g3, r3, (size_t)H * W * 3, "3-channel head of a blocked map");
        expect(g12, r12, (size_t)H * W * 12, "12-channel head of the same map");
        expect(gh, rh, (size_t)H * W * C0, "the hidden map read back after both");
        free(g3), free(g12), free(gh);
    }
    be->layer_free(f->be.ctx, A);
    be->layer_free(f->be.ctx, N3);
    be->layer_free(f->be.ctx, N12);
    mr_tensor all[] = {x, hid, o3, o12};
    for (int i = 0; i < 4; i++) be->buffer_free(f->be.ctx, all[i].data);
    free(x_h), free(wa), free(ba), free(w3), free(b3), free(w12), free(b12), free(rh), free(r3), free(r12);
}

/* The same memory as another shape, part of it read, and overwritten from
 * the host: each must see the NHWC values. */
static void test_views(void **state)
{
    fix *f = *state;
    const mr_backend_i *be = f->be.i;
    int H = 4, W = 6, C = 16;
    size_t count = (size_t)H * W * C;
    float *x_h = rnd_array(count), *w1, *b1, *w2, *b2;
    mr_layer *A = conv_layer(f, C, C, 3, 0, &w1, &b1), *B = conv_layer(f, C, C, 3, 0, &w2, &b2);
    mr_tensor x = dev_tensor(f, 1, H, W, C, x_h), y = dev_tensor(f, 1, H, W, C, NULL),
              out = dev_tensor(f, 1, H, W, C, NULL);
    float *r = calloc(count, sizeof(float)), *r2 = calloc(count, sizeof(float));
    ref_conv(H, W, C, C, 3, 0, x_h, w1, b1, 0, r);

    /* Half of y read to the host. */
    assert_int_equal(be->conv(f->be.ctx, A, &x, &y, 0, &f->err), MR_OK);
    float *half = malloc(sizeof(float) * count / 2);
    assert_int_equal(be->copy_to_host(f->be.ctx, half, y.data, sizeof(float) * count / 2, &f->err), MR_OK);
    expect(half, r, count / 2, "the first half of a conv output");

    /* y's memory as a [1, W, H, C] tensor: the NHWC values reinterpreted. */
    assert_int_equal(be->conv(f->be.ctx, A, &x, &y, 0, &f->err), MR_OK);
    mr_tensor yt = mr_tensor_make(y.data, 1, W, H, C), outt = mr_tensor_make(out.data, 1, W, H, C);
    assert_int_equal(be->conv(f->be.ctx, B, &yt, &outt, 0, &f->err), MR_OK);
    ref_conv(W, H, C, C, 3, 0, r, w2, b2, 0, r2);
    float *g = to_host(f, &outt);
    expect(g, r2, count, "a conv output read with another shape");
    free(g);

    /* A 2x nearest upsample of a conv output, then a conv on top (the FPN's
     * top-down path). */
    assert_int_equal(be->conv(f->be.ctx, A, &x, &y, 0, &f->err), MR_OK);
    mr_tensor up = dev_tensor(f, 1, 2 * H, 2 * W, C, NULL), up2 = dev_tensor(f, 1, 2 * H, 2 * W, C, NULL);
    assert_int_equal(be->upsample_nearest(f->be.ctx, &y, &up, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, B, &up, &up2, 0, &f->err), MR_OK);
    float *ru = malloc(sizeof(float) * 4 * count), *ru2 = calloc(4 * count, sizeof(float));
    for (int oy = 0; oy < 2 * H; oy++)
        for (int ox = 0; ox < 2 * W; ox++)
            memcpy(ru + ((size_t)oy * 2 * W + ox) * C, r + ((size_t)(oy / 2) * W + ox / 2) * C, sizeof(float) * C);
    ref_conv(2 * H, 2 * W, C, C, 3, 0, ru, w2, b2, 0, ru2);
    g = to_host(f, &up);
    expect(g, ru, 4 * count, "a nearest upsample of a conv output");
    free(g);
    g = to_host(f, &up2);
    expect(g, ru2, 4 * count, "a conv over that upsample");
    free(g), free(ru), free(ru2);
    be->buffer_free(f->be.ctx, up.data);
    be->buffer_free(f->be.ctx, up2.data);

    /* y overwritten from the host after a conv wrote it blocked. */
    assert_int_equal(be->conv(f->be.ctx, A, &x, &y, 0, &f->err), MR_OK);
    assert_int_equal(be->copy_to_device(f->be.ctx, y.data, x_h, sizeof(float) * count, &f->err), MR_OK);
    assert_int_equal(be->conv(f->be.ctx, B, &y, &out, 0, &f->err), MR_OK);
    ref_conv(H, W, C, C, 3, 0, x_h, w2, b2, 0, r2);
    g = to_host(f, &out);
    expect(g, r2, count, "a conv output overwritten from the host");

    be->layer_free(f->be.ctx, A);
    be->layer_free(f->be.ctx, B);
    be->buffer_free(f->be.ctx, x.data);
    be->buffer_free(f->be.ctx, y.data);
    be->buffer_free(f->be.ctx, out.data);
    free(x_h), free(w1), free(b1), free(w2), free(b2), free(r), free(r2), free(half), free(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_chain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_views, setup, teardown),
        cmocka_unit_test_setup_teardown(test_narrow_heads, setup, teardown),
        cmocka_unit_test_setup_teardown(test_handoff, setup, teardown),
    };
    int failed = 0;
    const int blocks[2] = {8, 16};
    for (int i = 0; i < 2; i++) {
        g_block = blocks[i];
        printf("channel block %d\n", g_block);
        failed += cmocka_run_group_tests(tests, NULL, NULL);
    }
    mr_backend probe;
    mr_error err = {0};
    if (backend_open("cpu", &(mr_backend_params){.precision = MR_PRECISION_BF16}, &probe, &err) != MR_OK) {
        printf("SKIP precision bf16: %s\n", err.msg);
        return failed;
    }
    probe.i->destroy(probe.ctx);
    g_bf16 = 1;
    g_block = 0;
    printf("precision bf16\n");
    failed += cmocka_run_group_tests(tests, NULL, NULL);
    return failed;
}
