/* The CUDA backend's --precision fp16 (MR_PRECISION_FP16), op by op,
 * against references that share no code with it: the double-precision
 * loops of ref_ops.h for the dense ops, the CPU backend (itself checked
 * against torchvision) for RoIAlign.
 *
 * Every input, weight, bias and residual is first rounded to fp16
 * (half.h), so the reference sees exactly the numbers the fp16 context
 * holds and what differs is what fp16 computation changes: outputs
 * rounded to fp16 (twice where a residual sum and a bias pass follow each
 * other), tensor-core accumulation order. Tolerances are by normalised
 * error ||fp16 - ref|| / ||ref||: 2e-3 for the layers (an fp16 output
 * alone is within 2^-11 = 4.9e-4 of each value), exact for max pooling and
 * nearest upsampling (a max or a copy of halves is a half), 1e-3 for
 * RoIAlign; GroupNorm on half maps (statistics in float) within 2e-3.
 * Also: feature_dtype, the fp16 -> fp32 1x1 convs (RPN heads,
 * mask logits), linear layers with fp32 outputs (box predictor), and the
 * type errors a model bug would meet.
 *
 * Without a GPU every test is skipped, visibly, with the CUDA runtime's
 * reason; CPU-only builds (CUDA=0) skip too. */
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
#include "ref_ops.h"
#include "core/half.h"
#ifdef MR_HAVE_CUDA
#include "backend/backend_registry.h"
#endif

#define TOL_LAYER 2e-3
#define TOL_ROI 1e-3

typedef struct {
    mr_backend f32, f16, f16_nofold, cpu; /* cpu: the RoIAlign reference */
} contexts;

static uint64_t g_rng = 0x66703136u; /* "fp16" */

static float rng_uniform(float lo, float hi)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    return lo + (hi - lo) * (float)((double)((g_rng * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0);
}

/* n uniform values, each rounded to fp16 (representable in both contexts). */
static float *random_halves(size_t n, float lo, float hi)
{
    float *x = malloc(sizeof(float) * (n ? n : 1));
    assert_non_null(x);
    for (size_t i = 0; i < n; i++) x[i] = mr_half_to_float(mr_float_to_half(rng_uniform(lo, hi)));
    return x;
}

static int setup(void **state)
{
    *state = NULL;
#ifdef MR_HAVE_CUDA
    static contexts c;
    mr_error err = {0};
    mr_backend_params p32 = {.precision = MR_PRECISION_FP32}, p16 = {.precision = MR_PRECISION_FP16},
                      p16n = {.precision = MR_PRECISION_FP16, .no_fold = 1}, pcpu = {.threads = 2};
    if (backend_open("cuda", &p32, &c.f32, &err) != MR_OK) {
        printf("SKIP test_cuda_fp16: no GPU (%s)\n", err.msg);
        return 0;
    }
    if (backend_open("cuda", &p16, &c.f16, &err) != MR_OK ||
        backend_open("cuda", &p16n, &c.f16_nofold, &err) != MR_OK) {
        printf("SKIP test_cuda_fp16: no fp16 context (%s)\n", err.msg);
        return 0;
    }
    if (backend_open("cpu", &pcpu, &c.cpu, &err) != MR_OK) fail_msg("backend_open cpu: %s", err.msg);
    *state = &c;
#else
    printf("SKIP test_cuda_fp16: no CUDA backend in this build\n");
#endif
    return 0;
}

#define NEED_GPU(state)                  \
    do {                                 \
        if (!*(state)) skip();           \
    } while (0)

/* ---- device tensors of either type ---- */

static mr_tensor dev_tensor(mr_backend *be, const float *h, int n, int hh, int w, int c, mr_elem_type t)
{
    size_t count = (size_t)n * hh * w * c, bytes = count * mr_elem_size(t);
    void *d = NULL;
    mr_error err = {0};
    assert_int_equal(be->i->buffer_alloc(be->ctx, bytes ? bytes : 2, &d, &err), MR_OK);
    if (h && count) {
        void *src = (void *)h;
        uint16_t *halves = NULL;
        if (t == MR_ELEM_F16) {
            halves = malloc(sizeof(uint16_t) * count);
            assert_non_null(halves);
            mr_floats_to_halves(h, halves, count);
            src = halves;
        }
        assert_int_equal(be->i->copy_to_device(be->ctx, d, src, bytes, &err), MR_OK);
        free(halves);
    }
    mr_tensor ten = mr_tensor_make(d, n, hh, w, c);
    ten.dtype = t;
    return ten;
}

/* The tensor's values as floats (malloc'd). */
static float *dev_read(mr_backend *be, const mr_tensor *t)
{
    size_t count = mr_tensor_numel(t);
    float *out = malloc(sizeof(float) * (count ? count : 1));
    mr_error err = {0};
    assert_non_null(out);
    assert_int_equal(be->i->sync(be->ctx, &err), MR_OK);
    if (t->dtype == MR_ELEM_F16) {
        uint16_t *h = malloc(sizeof(uint16_t) * (count ? count : 1));
        assert_non_null(h);
        assert_int_equal(be->i->copy_to_host(be->ctx, h, t->data, count * 2, &err), MR_OK);
        mr_halves_to_floats(h, out, count);
        free(h);
    } else {
        assert_int_equal(be->i->copy_to_host(be->ctx, out, t->data, count * 4, &err), MR_OK);
    }
    return out;
}

static void dev_free(mr_backend *be, mr_tensor *t) { be->i->buffer_free(be->ctx, t->data); }

static void expect_close(const char *what, const float *got, const float *ref, size_t n, double tol)
{
    double e = norm_err(got, ref, n);
    printf("  %-64s err %.2e (tol %.0e)\n", what, e, tol);
    if (!(e <= tol)) fail_msg("%s: fp16 against the reference: normalised error %.3e > %.0e", what, e, tol);
}

/* ---- layers ---- */

typedef struct {
    int n, h, w, cin, cout, k, stride, pad, relu, accumulate;
    int out_f32; /* the output fp32 in the fp16 context (1x1 only: RPN heads, mask logits) */
    int affine;  /* conv_init_affine (a batchnorm given unfolded), run on the --no-fold fp16 context */
} conv_case;

static const conv_case g_convs[] = {
    /* n  h   w   cin cout k  s  p relu acc f32 aff */
    {1, 13, 19, 16, 32, 1, 1, 0, 0, 0, 0, 0},  /* 1x1 (FPN lateral) */
    {1, 13, 19, 64, 32, 1, 2, 0, 0, 0, 0, 0},  /* 1x1 stride 2 (downsample) */
    {1, 13, 19, 32, 32, 3, 1, 1, 1, 0, 0, 0},  /* 3x3 relu */
    {1, 13, 19, 32, 64, 3, 2, 1, 1, 0, 0, 0},  /* 3x3 stride 2 */
    {1, 26, 38, 3, 64, 7, 2, 3, 1, 0, 0, 0},   /* the stem: 3 channels */
    {2, 13, 19, 64, 32, 1, 1, 0, 1, 1, 0, 0},  /* bottleneck conv3: residual + relu */
    {1, 13, 19, 32, 32, 1, 1, 0, 0, 1, 0, 0},  /* FPN top-down: residual, no relu */
    {1, 13, 19, 32, 3, 1, 1, 0, 0, 0, 1, 0},   /* RPN logits: fp16 -> fp32 */
    {1, 13, 19, 32, 12, 1, 1, 0, 0, 0, 1, 0},  /* RPN deltas */
    {7, 28, 28, 32, 81, 1, 1, 0, 0, 0, 1, 0},  /* mask logits */
    {0, 13, 19, 32, 12, 1, 1, 0, 0, 0, 1, 0},  /* no pixels */
    {1, 13, 19, 32, 32, 3, 1, 1, 1, 0, 0, 1},  /* AffineChannel (--no-fold) */
    {2, 13, 19, 64, 32, 1, 1, 0, 1, 1, 0, 1},  /* AffineChannel + residual */
};

static void run_conv_case(contexts *c, const conv_case *k)
{
    mr_conv_params p = {k->cin, k->cout, k->k, k->k, k->stride, k->pad, 1, 1, k->relu,
                        0, 0, 0, 0, 0.0f, 0, 0.0f, 0, 0, 0.0f};
    size_t wn = (size_t)k->cout * k->cin * k->k * k->k;
    float s = 1.0f / sqrtf((float)(k->cin * k->k * k->k));
    float *w = random_halves(wn, -s, s), *b = random_halves((size_t)k->cout, -0.5f, 0.5f);
    float *scale = random_halves((size_t)k->cout, 0.5f, 1.5f), *shift = random_halves((size_t)k->cout, -0.2f, 0.2f);
    int oh = (k->h + 2 * k->pad - k->k) / k->stride + 1, ow = (k->w + 2 * k->pad - k->k) / k->stride + 1;
    size_t xn = (size_t)k->n * k->h * k->w * k->cin, yn = (size_t)k->n * oh * ow * k->cout;
    float *x = random_halves(xn, -1.0f, 1.0f), *y0 = random_halves(yn, -1.0f, 1.0f);
    mr_backend *be = k->affine ? &c->f16_nofold : &c->f16;
    mr_layer *l = NULL;
    mr_error err = {0};
    mr_status st = k->affine ? be->i->conv_init_affine(be->ctx, "fp16.conv", &p, w, b, scale, shift, &l, &err)
                             : be->i->conv_init(be->ctx, "fp16.conv", &p, w, b, &l, &err);
    if (st != MR_OK) fail_msg("conv_init: %s", err.msg);
    mr_tensor tx = dev_tensor(be, x, k->n, k->h, k->w, k->cin, MR_ELEM_F16);
    mr_tensor ty = dev_tensor(be, y0, k->n, oh, ow, k->cout, k->out_f32 ? MR_ELEM_F32 : MR_ELEM_F16);
    if (be->i->conv(be->ctx, l, &tx, &ty, k->accumulate, &err) != MR_OK) fail_msg("conv: %s", err.msg);
    float *got = dev_read(be, &ty), *ref = malloc(sizeof(float) * (yn ? yn : 1));
    assert_non_null(ref);
    be->i->layer_free(be->ctx, l);
    dev_free(be, &tx);
    dev_free(be, &ty);
    /* the affine as a batchnorm is defined: act((conv(x, W) + b)*s + t (+ y0)), folded here in double */
    for (int o = 0; k->affine && o < k->cout; o++) {
        for (size_t q = 0; q < wn / (size_t)k->cout; q++) w[(size_t)o * (wn / (size_t)k->cout) + q] *= scale[o];
        b[o] = (float)((double)b[o] * scale[o] + shift[o]);
    }
    ref_conv(&p, k->n, k->h, k->w, oh, ow, x, w, b, k->accumulate, y0, ref);
    char what[128];
    snprintf(what, sizeof what, "conv k%d s%d %d->%d N=%d %s%s%s%s", k->k, k->stride, k->cin, k->cout, k->n,
             k->relu ? "relu " : "", k->accumulate ? "acc " : "", k->out_f32 ? "->fp32 " : "",
             k->affine ? "affine" : "");
    expect_close(what, got, ref, yn, TOL_LAYER);
    free(got);
    free(ref);
    free(w);
    free(b);
    free(scale);
    free(shift);
    free(x);
    free(y0);
}

static void test_conv(void **state)
{
    NEED_GPU(state);
    for (size_t i = 0; i < sizeof g_convs / sizeof g_convs[0]; i++) run_conv_case(*state, &g_convs[i]);
}

/* fc6-like (fp16 out, ReLU) and the predictors (fp32 out). */
static void test_linear(void **state)
{
    NEED_GPU(state);
    contexts *c = *state;
    static const struct {
        int rows, in, out, relu, out_f32;
    } cases[] = {{37, 256 * 7 * 7 / 16, 64, 1, 0}, {37, 64, 81, 0, 1}, {37, 64, 324, 0, 1}, {0, 64, 81, 0, 1}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mr_linear_params p = {cases[i].in, cases[i].out, cases[i].relu};
        float s = 1.0f / sqrtf((float)p.in);
        float *w = random_halves((size_t)p.in * p.out, -s, s), *b = random_halves((size_t)p.out, -0.5f, 0.5f);
        size_t yn = (size_t)cases[i].rows * p.out;
        float *x = random_halves((size_t)cases[i].rows * p.in, -1.0f, 1.0f), *ref = malloc(sizeof(float) * (yn + 1));
        assert_non_null(ref);
        mr_backend *be = &c->f16;
        mr_layer *l = NULL;
        mr_error err = {0};
        if (be->i->linear_init(be->ctx, "fp16.fc", &p, w, b, &l, &err) != MR_OK) fail_msg("%s", err.msg);
        mr_tensor tx = dev_tensor(be, x, cases[i].rows, 1, 1, p.in, MR_ELEM_F16);
        mr_tensor ty = dev_tensor(be, NULL, cases[i].rows, 1, 1, p.out, cases[i].out_f32 ? MR_ELEM_F32 : MR_ELEM_F16);
        if (be->i->linear(be->ctx, l, &tx, &ty, &err) != MR_OK) fail_msg("linear: %s", err.msg);
        float *got = dev_read(be, &ty);
        be->i->layer_free(be->ctx, l);
        dev_free(be, &tx);
        dev_free(be, &ty);
        ref_linear(&p, cases[i].rows, x, w, b, ref);
        char what[96];
        snprintf(what, sizeof what, "linear %d->%d rows %d%s%s", p.in, p.out, cases[i].rows, p.relu ? " relu" : "",
                 cases[i].out_f32 ? " ->fp32" : "");
        expect_close(what, got, ref, yn, TOL_LAYER);
        free(got);
        free(ref);
        free(w);
        free(b);
        free(x);
    }
}

static void test_deconv(void **state)
{
    NEED_GPU(state);
    contexts *c = *state;
    mr_deconv2x2_params p = {32, 16, 1, 0, 0, 0};
    int n = 5, h = 14, w = 14;
    float *wt = random_halves((size_t)p.cin * p.cout * 4, -0.2f, 0.2f), *b = random_halves(16, -0.5f, 0.5f);
    size_t yn = (size_t)n * 4 * h * w * p.cout;
    float *x = random_halves((size_t)n * h * w * p.cin, -1.0f, 1.0f), *ref = malloc(sizeof(float) * yn);
    assert_non_null(ref);
    mr_backend *be = &c->f16;
    mr_layer *l = NULL;
    mr_error err = {0};
    if (be->i->deconv2x2_init(be->ctx, "fp16.deconv", &p, wt, b, &l, &err) != MR_OK) fail_msg("%s", err.msg);
    mr_tensor tx = dev_tensor(be, x, n, h, w, p.cin, MR_ELEM_F16);
    mr_tensor ty = dev_tensor(be, NULL, n, 2 * h, 2 * w, p.cout, MR_ELEM_F16);
    if (be->i->deconv2x2(be->ctx, l, &tx, &ty, &err) != MR_OK) fail_msg("deconv2x2: %s", err.msg);
    float *got = dev_read(be, &ty);
    be->i->layer_free(be->ctx, l);
    dev_free(be, &tx);
    dev_free(be, &ty);
    ref_deconv2x2(&p, n, h, w, x, wt, b, ref);
    expect_close("deconv2x2 32->16 relu, 5x14x14", got, ref, yn, TOL_LAYER);
    free(got);
    free(ref);
    free(wt);
    free(b);
    free(x);
}

/* Max pool (the stem's 3x3/2 pad 1, P6's 1x1/2) and nearest upsampling
 * (2x, and a ratio that is not 2) move halves without arithmetic. */
static void test_pool_upsample(void **state)
{
    NEED_GPU(state);
    contexts *c = *state;
    const int H = 25, W = 38, C = 24;
    float *x = random_halves((size_t)H * W * C, -4.0f, 4.0f);
    static const mr_pool_params pools[] = {{3, 2, 1}, {1, 2, 0}};
    for (int k = 0; k < 4; k++) {
        int oh, ow;
        if (k < 2) {
            oh = (H + 2 * pools[k].pad - pools[k].kernel) / pools[k].stride + 1;
            ow = (W + 2 * pools[k].pad - pools[k].kernel) / pools[k].stride + 1;
        } else {
            oh = k == 2 ? 2 * H : 2 * H + 3;
            ow = k == 2 ? 2 * W : 2 * W - 5;
        }
        mr_backend *be = &c->f16;
        mr_tensor tx = dev_tensor(be, x, 1, H, W, C, MR_ELEM_F16), ty = dev_tensor(be, NULL, 1, oh, ow, C, MR_ELEM_F16);
        mr_error err = {0};
        mr_status st = k < 2 ? be->i->max_pool(be->ctx, &pools[k], &tx, &ty, &err)
                             : be->i->upsample_nearest(be->ctx, &tx, &ty, &err);
        if (st != MR_OK) fail_msg("%s: %s", k < 2 ? "max_pool" : "upsample_nearest", err.msg);
        float *got = dev_read(be, &ty);
        dev_free(be, &tx);
        dev_free(be, &ty);
        size_t n = (size_t)oh * ow * C;
        float *ref = malloc(sizeof(float) * n);
        assert_non_null(ref);
        if (k < 2)
            ref_max_pool(&pools[k], 1, H, W, C, x, oh, ow, ref);
        else
            ref_upsample_nearest(1, H, W, oh, ow, C, x, ref);
        char what[64];
        snprintf(what, sizeof what, "%s -> %dx%d", k < 2 ? "max_pool" : "upsample_nearest", oh, ow);
        expect_close(what, got, ref, n, 0.0);
        free(got);
        free(ref);
    }
    free(x);
}

static void test_roi_align(void **state)
{
    NEED_GPU(state);
    contexts *c = *state;
    enum { LEVELS = 4, C = 32, R = 9 };
    const mr_level_map map = {2, 5, 224, 4, 1e-6f, 0, 0};
    const mr_roi_align_params p = {7, 7, 2, 1, 0.25f};
    int side[LEVELS] = {64, 32, 16, 8};
    float *h_lv[LEVELS];
    for (int l = 0; l < LEVELS; l++) h_lv[l] = random_halves((size_t)side[l] * side[l] * C, -2.0f, 2.0f);
    float rois[R * 4];
    for (int r = 0; r < R; r++) { /* small to large, so every level is used */
        float x0 = rng_uniform(0.0f, 100.0f), y0 = rng_uniform(0.0f, 100.0f), sz = 8.0f * (float)(1 << (r % 5));
        rois[4 * r] = x0;
        rois[4 * r + 1] = y0;
        rois[4 * r + 2] = x0 + sz;
        rois[4 * r + 3] = y0 + sz * 0.75f;
    }
    float *out[2]; /* the CPU backend's, then fp16's */
    for (int v = 0; v < 2; v++) {
        mr_backend *be = v ? &c->f16 : &c->cpu;
        mr_elem_type t = v ? MR_ELEM_F16 : MR_ELEM_F32;
        mr_tensor lv[LEVELS];
        const mr_tensor *lvp[LEVELS];
        for (int l = 0; l < LEVELS; l++) {
            lv[l] = dev_tensor(be, h_lv[l], 1, side[l], side[l], C, t);
            lvp[l] = &lv[l];
        }
        mr_tensor tr = dev_tensor(be, rois, R, 1, 1, 4, MR_ELEM_F32), to = dev_tensor(be, NULL, R, 7, 7, C, t);
        mr_error err = {0};
        if (be->i->roi_align(be->ctx, &p, &map, lvp, &tr, &to, &err) != MR_OK) fail_msg("roi_align: %s", err.msg);
        out[v] = dev_read(be, &to);
        for (int l = 0; l < LEVELS; l++) dev_free(be, &lv[l]);
        dev_free(be, &tr);
        dev_free(be, &to);
    }
    expect_close("roi_align 4 levels, 9 rois, 7x7x32", out[1], out[0], (size_t)R * 49 * C, TOL_ROI);
    free(out[0]);
    free(out[1]);
    for (int l = 0; l < LEVELS; l++) free(h_lv[l]);
}

/* What the model plans, and the errors a wrongly typed tensor meets. */
/* GroupNorm on half maps: statistics and arithmetic in float, the output
 * rounded once (a residual read as a half), in place too; in both fp16
 * contexts (the norm is the same op folded or not). */
static void test_group_norm(void **state)
{
    NEED_GPU(state);
    contexts *c = *state;
    static const struct {
        int n, h, w, ch, groups, relu, accumulate, in_place;
    } cases[] = {{1, 25, 38, 256, 32, 1, 0, 0}, {3, 14, 14, 64, 8, 0, 1, 0}, {2, 13, 17, 32, 32, 1, 1, 0},
                 {1, 13, 17, 64, 8, 1, 0, 1}, {0, 13, 17, 64, 8, 1, 1, 0}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        mr_group_norm_params p = {cases[i].ch, cases[i].groups, 1e-5f, cases[i].relu};
        int n = cases[i].n, h = cases[i].h, w = cases[i].w, C = cases[i].ch;
        size_t count = (size_t)n * h * w * C;
        float *gamma = random_halves((size_t)C, 0.5f, 1.5f), *beta = random_halves((size_t)C, -0.5f, 0.5f);
        float *x = random_halves(count, -2.0f, 3.0f), *y0 = random_halves(count, -1.0f, 1.0f);
        float *ref = malloc(sizeof(float) * (count ? count : 1));
        assert_non_null(ref);
        mr_backend *be = i % 2 ? &c->f16_nofold : &c->f16;
        mr_layer *l = NULL;
        mr_error err = {0};
        if (be->i->group_norm_init(be->ctx, "fp16.gn", &p, gamma, beta, &l, &err) != MR_OK) fail_msg("%s", err.msg);
        mr_tensor tx = dev_tensor(be, x, n, h, w, C, MR_ELEM_F16);
        mr_tensor ty = cases[i].in_place ? tx : dev_tensor(be, y0, n, h, w, C, MR_ELEM_F16);
        if (be->i->group_norm(be->ctx, l, &tx, &ty, cases[i].accumulate, &err) != MR_OK)
            fail_msg("group_norm: %s", err.msg);
        float *got = dev_read(be, &ty);
        be->i->layer_free(be->ctx, l);
        dev_free(be, &tx);
        if (!cases[i].in_place) dev_free(be, &ty);
        ref_group_norm(&p, n, h, w, x, gamma, beta, cases[i].accumulate, y0, ref);
        char what[96];
        snprintf(what, sizeof what, "group_norm N=%d %dx%dx%d G%d%s%s%s", n, h, w, C, p.groups, p.relu ? " relu" : "",
                 cases[i].accumulate ? " acc" : "", cases[i].in_place ? " in place" : "");
        expect_close(what, got, ref, count, TOL_LAYER);
        free(got);
        free(ref);
        free(gamma);
        free(beta);
        free(x);
        free(y0);
    }
}

static void test_types(void **state)
{
    NEED_GPU(state);
    contexts *c = *state;
    assert_non_null(c->f16.i->feature_dtype);
    assert_int_equal(c->f16.i->feature_dtype(c->f16.ctx), MR_ELEM_F16);
    assert_int_equal(c->f32.i->feature_dtype(c->f32.ctx), MR_ELEM_F32);
    mr_conv_params p = {8, 8, 3, 3, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0.0f, 0, 0.0f, 0, 0, 0.0f};
    float *w = random_halves(8 * 8 * 9, -0.1f, 0.1f);
    mr_layer *l = NULL;
    mr_error err = {0};
    assert_int_equal(c->f16.i->conv_init(c->f16.ctx, "fp16.types", &p, w, NULL, &l, &err), MR_OK);
    mr_tensor x32 = dev_tensor(&c->f16, NULL, 1, 5, 5, 8, MR_ELEM_F32), y16 = dev_tensor(&c->f16, NULL, 1, 5, 5, 8,
                                                                                        MR_ELEM_F16);
    mr_tensor x16 = dev_tensor(&c->f16, NULL, 1, 5, 5, 8, MR_ELEM_F16), y32 = dev_tensor(&c->f16, NULL, 1, 5, 5, 8,
                                                                                        MR_ELEM_F32);
    /* an fp32 input in an fp16 context */
    assert_int_equal(c->f16.i->conv(c->f16.ctx, l, &x32, &y16, 0, &err), MR_ERR_SHAPE);
    /* a 3x3 conv to fp32: only 1x1 may change the type */
    assert_int_equal(c->f16.i->conv(c->f16.ctx, l, &x16, &y32, 0, &err), MR_ERR_UNSUPPORTED);
    printf("  %s\n", err.msg);
    /* a detection op handed fp16 logits */
    mr_tensor labels = dev_tensor(&c->f16, NULL, 1, 1, 1, 1, MR_ELEM_F32);
    assert_int_equal(c->f16.i->mask_probs(c->f16.ctx, &x16, &labels, &y32, &err), MR_ERR_SHAPE);
    c->f16.i->layer_free(c->f16.ctx, l);
    dev_free(&c->f16, &x32);
    dev_free(&c->f16, &y16);
    dev_free(&c->f16, &x16);
    dev_free(&c->f16, &y32);
    dev_free(&c->f16, &labels);
    free(w);
}

static int teardown(void **state)
{
    contexts *c = *state;
    if (!c) return 0;
    c->f32.i->destroy(c->f32.ctx);
    c->f16.i->destroy(c->f16.ctx);
    c->f16_nofold.i->destroy(c->f16_nofold.ctx);
    c->cpu.i->destroy(c->cpu.ctx);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_types),   cmocka_unit_test(test_conv),          cmocka_unit_test(test_linear),
        cmocka_unit_test(test_deconv),  cmocka_unit_test(test_pool_upsample), cmocka_unit_test(test_roi_align),
        cmocka_unit_test(test_group_norm),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
