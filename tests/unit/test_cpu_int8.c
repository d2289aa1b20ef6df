/* The CPU backend's int8 convolution (backend_cpu.h: cpu_ctx.int8) against
 * the arithmetic it promises, computed here in double:
 *   q_x = saturate(round(x / s_x))            u8 [0,255] or s8 [-128,127],
 *                                              s_x = range / 255 or / 127
 *   q_w = round(w / s_w[oc]),                  s_w[oc] = max|w[oc]| / qmax
 *   y   = relu(s_x * s_w[oc] * sum q_x q_w + bias (+ y_before))
 * qmax is 127, except for u8 inputs where oneDNN's ISA lacks VNNI: 63.
 * With s8 inputs and no VNNI oneDNN halves the weights in its reorder
 * (round to nearest even) and doubles the output scale: q_w' = round(q_w /
 * 2), s_w' = 2 s_w. (make check runs this test again under
 * ONEDNN_MAX_CPU_ISA=AVX2.) Without VNNI a 3x3 stride-1 conv stays our
 * fp32 Winograd (backend_cpu_layers.c): then y = relu(sum x w + bias ...)
 * unquantized is what it must give. Inputs and
 * weights are made so that no value sits near a rounding tie (each is a
 * whole number of steps plus at most 0.4 of one), so the only differences
 * left are float rounding in the output: they must be within 1e-5 of the
 * output's scale. Covers u8 1x1 with ReLU, s8 3x3 stride 2, a residual sum,
 * inputs beyond the range (saturation), and a layer that keeps fp32. */
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

static uint64_t rng = 88172645463325252ull;
static double uniform(void) /* [0, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

typedef struct {
    int cin, cout, k, stride, pad, relu, is_signed, accumulate, h, w;
    int n; /* images (0: 1); above 1 the layer is planned for batches (a head's: max_n = n) */
} int8_case;

static mr_tensor tensor(mr_backend *be, int n, int h, int w, int c, const float *host)
{
    void *p;
    mr_error err = {0};
    size_t count = (size_t)n * h * w * c;
    assert_int_equal(be->i->buffer_alloc(be->ctx, sizeof(float) * count, &p, &err), MR_OK);
    if (host) assert_int_equal(be->i->copy_to_device(be->ctx, p, host, sizeof(float) * count, &err), MR_OK);
    return mr_tensor_make(p, n, h, w, c);
}

/* n inputs of step sx: whole steps plus at most 0.4 of one, 1 in 50 beyond
 * the range (saturating); qx gets the steps the conv must see. */
static void fill_inputs(float *x, int *qx, size_t n, int is_signed, float sx)
{
    const int qlo = is_signed ? -128 : 0, qhi = is_signed ? 127 : 255;
    for (size_t i = 0; i < n; i++) {
        int q = qlo + (int)floor(uniform() * (qhi - qlo + 1));
        double frac = (uniform() - 0.5) * 0.8;
        if (uniform() < 0.02) {
            q = uniform() < 0.5 && is_signed ? -400 : 400;
            frac = 0;
        }
        x[i] = (float)((q + frac) * sx);
        qx[i] = q < qlo ? qlo : q > qhi ? qhi : q;
    }
}

/* A case's layer, its two tensors and the backend, freed. */
static void release(mr_backend *be, mr_layer *layer, mr_tensor *x, mr_tensor *y)
{
    be->i->layer_free(be->ctx, layer);
    be->i->buffer_free(be->ctx, x->data);
    be->i->buffer_free(be->ctx, y->data);
    be->i->destroy(be->ctx);
}

static void run_case(const int8_case *tc)
{
    mr_backend be;
    mr_error err = {0};
    assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 2, .precision = MR_PRECISION_INT8}, &be,
                                  &err), MR_OK);
    const int vnni = ((cpu_ctx *)be.ctx)->int8_vnni;
    const int qmax = vnni || tc->is_signed ? 127 : 63, halved = !vnni && tc->is_signed;
    const int K = tc->k, per_out = tc->cin * K * K;
    const float range = 6.0f, sx = range / (tc->is_signed ? 127.0f : 255.0f), sw = 1.0f / 128.0f;
    const int stays_fp32 = !vnni && K == 3 && tc->stride == 1; /* Winograd's, without VNNI */
    int oh = (tc->h + 2 * tc->pad - K) / tc->stride + 1, ow = (tc->w + 2 * tc->pad - K) / tc->stride + 1;
    const int N = tc->n ? tc->n : 1;

    /* weights: whole steps of sw plus at most 0.4 of one; each row's first is qmax steps, so s_w = sw exactly */
    float *w = malloc(sizeof(float) * (size_t)tc->cout * per_out), *bias = malloc(sizeof(float) * tc->cout);
    int *qw = malloc(sizeof(int) * (size_t)tc->cout * per_out);
    for (int o = 0; o < tc->cout; o++) {
        for (int i = 0; i < per_out; i++) {
            int q = i == 0 ? (o % 2 ? -qmax : qmax) : (int)floor(uniform() * (2 * qmax - 1)) - (qmax - 1);
            double frac = i == 0 ? 0.0 : (uniform() - 0.5) * 0.8;
            qw[(size_t)o * per_out + i] = halved ? (int)nearbyint(q / 2.0) : q;
            w[(size_t)o * per_out + i] = (float)((q + frac) * sw);
        }
        bias[o] = (float)(uniform() - 0.5);
    }
    /* inputs: whole steps plus at most 0.4 of one; 1 in 50 beyond the range (saturates) */
    size_t xn = (size_t)N * tc->h * tc->w * tc->cin, yn = (size_t)N * oh * ow * tc->cout;
    float *x = malloc(sizeof(float) * xn), *y0 = malloc(sizeof(float) * yn), *y = malloc(sizeof(float) * yn);
    int *qx = malloc(sizeof(int) * xn);
    fill_inputs(x, qx, xn, tc->is_signed, sx);
    for (size_t i = 0; i < yn; i++) y0[i] = (float)(uniform() * 4 - 2);

    mr_conv_params p = {tc->cin, tc->cout, K, K, tc->stride, tc->pad, 1, 1, tc->relu, N, tc->h, tc->w, 0, range,
                        tc->is_signed, 0.0f, 0, 0, 0.0f};
    mr_layer *layer;
    assert_int_equal(be.i->conv_init(be.ctx, "int8 test", &p, w, bias, &layer, &err), MR_OK);
    assert_int_equal(layer->int8, !stays_fp32);
    mr_tensor xt = tensor(&be, N, tc->h, tc->w, tc->cin, x), yt = tensor(&be, N, oh, ow, tc->cout, y0);
    assert_int_equal(be.i->conv(be.ctx, layer, &xt, &yt, tc->accumulate, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, y, yt.data, sizeof(float) * yn, &err), MR_OK);
    /* under 0.2 G multiply-adds oneDNN's plain AMX kernel, at or above it brgemm (backend_cpu_layers.c,
     * INT8_PLAIN_KERNEL_MACS), where the CPU has AMX */
    const double macs = (double)N * oh * ow * tc->cin * tc->cout * K * K;
    const char *impl = "";
    if (layer->int8 && layer->cache_count) {
        const_dnnl_primitive_desc_t pd = NULL;
        assert_int_equal(dnnl_primitive_get_primitive_desc(layer->cache[0].prim, &pd), dnnl_success);
        assert_int_equal(dnnl_primitive_desc_query(pd, dnnl_query_impl_info_str, 0, &impl), dnnl_success);
        if (strstr(impl, "amx")) assert_true((strstr(impl, "brg") != NULL) == (macs >= 200e6));
    }
    /* a batch ran in power-of-two parts: 21 RoIs of 14x14 as 16 + 4 + 1, 3 of 7x7 as 2 + 1 */
    if (N > 1 && layer->int8) {
        int parts = 0;
        for (int i = 0; i < layer->cache_count; i++) parts += layer->cache[i].n;
        assert_int_equal(parts, N);
        assert_int_equal(layer->cache[0].n, tc->h == 14 ? 16 : 2);
    }

    double worst = 0;
    for (int img = 0; img < N; img++)
    for (int oy = 0; oy < oh; oy++)
        for (int ox = 0; ox < ow; ox++)
            for (int o = 0; o < tc->cout; o++) {
                const size_t xo = (size_t)img * tc->h * tc->w * tc->cin; /* this image's input */
                long long acc = 0;
                long long mag = 0;
                double facc = 0, fmag = 0; /* unquantized */
                for (int ky = 0; ky < K; ky++)
                    for (int kx = 0; kx < K; kx++) {
                        int iy = oy * tc->stride - tc->pad + ky, ix = ox * tc->stride - tc->pad + kx;
                        if (iy < 0 || ix < 0 || iy >= tc->h || ix >= tc->w) continue;
                        for (int c = 0; c < tc->cin; c++) {
                            int a = qx[xo + ((size_t)iy * tc->w + ix) * tc->cin + c];
                            int b = qw[(size_t)o * per_out + (size_t)c * K * K + ky * K + kx];
                            acc += (long long)a * b;
                            mag += llabs((long long)a * b);
                            double xw = (double)x[xo + ((size_t)iy * tc->w + ix) * tc->cin + c] *
                                        w[(size_t)o * per_out + (size_t)c * K * K + ky * K + kx];
                            facc += xw;
                            fmag += fabs(xw);
                        }
                    }
                size_t yi = (((size_t)img * oh + oy) * ow + ox) * tc->cout + o;
                const double swe = halved ? 2.0 * sw : sw;
                double sum = stays_fp32 ? facc : (double)sx * swe * (double)acc;
                double ref = sum + bias[o] + (tc->accumulate ? y0[yi] : 0.0);
                if (tc->relu && ref < 0) ref = 0;
                double scale = (stays_fp32 ? fmag : (double)sx * swe * (double)mag) + fabs(bias[o]) + 2.0;
                double d = fabs(y[yi] - ref) / scale;
                if (d > worst) worst = d;
                if (d > 1e-5)
                    fail_msg("y[%d,%d,%d,%d] = %.7g, expected %.7g (qmax %d)", img, oy, ox, o, y[yi], ref, qmax);
            }
    print_message("N=%d %dx%d %d->%d stride %d %s%s%s: %s (%s), worst difference %.2g of the output's scale\n", N, K,
                  K, tc->cin, tc->cout, tc->stride, tc->is_signed ? "s8" : "u8", tc->accumulate ? " +sum" : "",
                  tc->relu ? " relu" : "", stays_fp32 ? "fp32 Winograd (no VNNI)" : qmax == 127 ? "qmax 127" : "qmax 63",
                  impl, worst);
    release(&be, layer, &xt, &yt);
    free(w), free(bias), free(qw), free(x), free(qx), free(y0), free(y);
}

static void test_1x1_u8_relu(void **s)
{
    (void)s;
    run_case(&(int8_case){64, 48, 1, 1, 0, 1, 0, 0, 13, 17, 1});
    /* above RUNTIME_SCALES_MAX_PIXELS (backend_cpu_layers.c): the scales as the attribute's constants */
    run_case(&(int8_case){64, 48, 1, 1, 0, 1, 0, 0, 40, 30, 1});
    /* 0.27 G multiply-adds: oneDNN's brgemm kernel on AMX */
    run_case(&(int8_case){256, 256, 1, 1, 0, 1, 0, 1, 64, 64, 1});
}

static void test_3x3_s8_stride2(void **s)
{
    (void)s;
    run_case(&(int8_case){32, 64, 3, 2, 1, 0, 1, 0, 15, 22, 1});
}

static void test_3x3_u8_residual_relu(void **s)
{
    (void)s;
    run_case(&(int8_case){48, 32, 3, 1, 1, 1, 0, 1, 9, 11, 1});
}

static void test_1x1_s8_residual(void **s)
{
    (void)s;
    run_case(&(int8_case){16, 256, 1, 1, 0, 0, 1, 1, 7, 5, 1});
}

/* The int8 backend at 2 threads; the calling test skips, visibly, without
 * VNNI, where outputs are not handed over quantized (backend_cpu_layers.c). */
static void open_int8_with_vnni(mr_backend *be)
{
    mr_error err = {0};
    assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 2, .precision = MR_PRECISION_INT8}, be,
                                  &err), MR_OK);
    if (!((cpu_ctx *)be->ctx)->int8_vnni) {
        be->i->destroy(be->ctx);
        skip();
    }
}

/* A bottleneck's conv1 -> conv2 under int8: conv1's output handed over
 * quantized for conv2 (mr_conv_params.int8_out_range; VNNI only). Checks
 * that (1) read back to the host it is conv1's fp32 output rounded to
 * conv2's steps, saturated at the range: within half a step of the same
 * layer without the hint, and a whole number of steps; (2) conv2 on it
 * gives the same bytes as conv2 on those host values given as fp32 (which
 * it quantizes itself). */
static void test_quantized_map_between_convs(void **s)
{
    (void)s;
    mr_backend be;
    mr_error err = {0};
    open_int8_with_vnni(&be);
    enum { H = 11, W = 13, C0 = 64, C1 = 32, C2 = 48 };
    const float range_b = 3.0f, step = range_b / 255.0f;
    float *x = malloc(sizeof(float) * H * W * C0), *wa = malloc(sizeof(float) * C1 * C0);
    float *wb = malloc(sizeof(float) * C2 * C1 * 9), ba[C1], bb[C2];
    for (int i = 0; i < H * W * C0; i++) x[i] = (float)(uniform() * 4.0);
    for (int i = 0; i < C1 * C0; i++) wa[i] = (float)(uniform() - 0.5) * 0.2f;
    for (int i = 0; i < C2 * C1 * 9; i++) wb[i] = (float)(uniform() - 0.5) * 0.2f;
    for (int i = 0; i < C1; i++) ba[i] = (float)(uniform() - 0.3);
    for (int i = 0; i < C2; i++) bb[i] = (float)(uniform() - 0.5);
    mr_conv_params pa = {C0, C1, 1, 1, 1, 0, 1, 1, 1, 1, H, W, 0, 4.0f, 0, range_b, 0, 1, 0.0f};
    mr_conv_params pa_plain = pa, pb = {C1, C2, 3, 3, 1, 1, 1, 1, 1, 1, H, W, 0, range_b, 0, 0.0f, 0, 0, 0.0f};
    pa_plain.int8_out_range = 0.0f;
    pa_plain.out_to_convs = 0;
    mr_layer *a, *a_plain, *b;
    assert_int_equal(be.i->conv_init(be.ctx, "conv1", &pa, wa, ba, &a, &err), MR_OK);
    assert_int_equal(be.i->conv_init(be.ctx, "conv1 plain", &pa_plain, wa, ba, &a_plain, &err), MR_OK);
    assert_int_equal(be.i->conv_init(be.ctx, "conv2", &pb, wb, bb, &b, &err), MR_OK);
    assert_non_null(a->out_scales_q);
    mr_tensor xt = tensor(&be, 1, H, W, C0, x), ya = tensor(&be, 1, H, W, C1, NULL),
              ya_plain = tensor(&be, 1, H, W, C1, NULL), yb1 = tensor(&be, 1, H, W, C2, NULL);
    assert_int_equal(be.i->conv(be.ctx, a, &xt, &ya, 0, &err), MR_OK);
    assert_int_equal(be.i->conv(be.ctx, a_plain, &xt, &ya_plain, 0, &err), MR_OK);
    assert_int_equal(be.i->conv(be.ctx, b, &ya, &yb1, 0, &err), MR_OK);
    float *qa = malloc(sizeof(float) * H * W * C1), *fa = malloc(sizeof(float) * H * W * C1);
    float *r1 = malloc(sizeof(float) * H * W * C2), *r2 = malloc(sizeof(float) * H * W * C2);
    assert_int_equal(be.i->copy_to_host(be.ctx, qa, ya.data, sizeof(float) * H * W * C1, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, fa, ya_plain.data, sizeof(float) * H * W * C1, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, r1, yb1.data, sizeof(float) * H * W * C2, &err), MR_OK);
    int saturated = 0;
    for (int i = 0; i < H * W * C1; i++) {
        double k = qa[i] / step;
        assert_true(fabs(k - nearbyint(k)) < 1e-3 && k >= 0 && k <= 255.0 + 1e-3);
        double want = fmin(fmax(fa[i], 0.0), 255.0 * step);
        saturated += fa[i] > 255.0 * step;
        if (fabs(qa[i] - want) > 0.5 * step + 1e-6)
            fail_msg("conv1 output %d: %.6g held quantized, %.6g in fp32 (step %.4g)", i, qa[i], fa[i], step);
    }
    mr_tensor qt = tensor(&be, 1, H, W, C1, qa), yb2 = tensor(&be, 1, H, W, C2, NULL);
    assert_int_equal(be.i->conv(be.ctx, b, &qt, &yb2, 0, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, r2, yb2.data, sizeof(float) * H * W * C2, &err), MR_OK);
    assert_memory_equal(r1, r2, sizeof(float) * H * W * C2);
    print_message("conv1 -> conv2 through a u8 map: within half a step of fp32 (%d of %d saturated), conv2's "
                  "output the same bytes as from fp32 input\n", saturated, H * W * C1);
    mr_layer *layers[] = {a, a_plain, b};
    for (int i = 0; i < 3; i++) be.i->layer_free(be.ctx, layers[i]);
    mr_tensor ts[] = {xt, ya, ya_plain, yb1, qt, yb2};
    for (int i = 0; i < 6; i++) be.i->buffer_free(be.ctx, ts[i].data);
    be.i->destroy(be.ctx);
    free(x), free(wa), free(wb), free(qa), free(fa), free(r1), free(r2);
}

/* Checks that `got` (read back from a quantized map) is whole steps in
 * [0, 255] and within half a step of `fp32` clamped to that range. */
static void assert_quantized_near(const float *got, const float *fp32, int count, float step, const char *what)
{
    for (int i = 0; i < count; i++) {
        double k = got[i] / step;
        if (!(fabs(k - nearbyint(k)) < 1e-3 && k >= 0 && k <= 255.0 + 1e-3))
            fail_msg("%s %d: %.6g is not a whole number of steps %.4g in [0, 255]", what, i, got[i], step);
        double want = fmin(fmax(fp32[i], 0.0), 255.0 * step);
        if (fabs(got[i] - want) > 0.5 * step * (1 + 1e-4))
            fail_msg("%s %d: %.6g held quantized, %.6g in fp32 (step %.4g)", what, i, got[i], fp32[i], step);
    }
}

/* A bottleneck's conv3 writing the residual stream quantized (int8_out_range
 * with accumulate; VNNI only), against the same layer without the hint,
 * whose fp32 sum run_case checks:
 * (1) onto an fp32 map (the stage's first block, after its shortcut): the
 *     sum in fp32, then the map quantized, within half a step of fp32's;
 * (2) onto that map, still held quantized: the sum post-op reads the u8
 *     values in place, and the result is within half a step of the fp32
 *     layer's sum onto those values given as fp32.
 * At 9x7 (the scales given at run time) and 40x30 (as constants). */
static void run_stream_case(int H, int W)
{
    mr_backend be;
    mr_error err = {0};
    open_int8_with_vnni(&be);
    enum { CI = 32, CO = 48 };
    const int NY = H * W * CO;
    const float range = 5.0f, step = range / 255.0f;
    float *x1 = malloc(sizeof(float) * H * W * CI), *x2 = malloc(sizeof(float) * H * W * CI);
    float *w = malloc(sizeof(float) * CO * CI), bias[CO];
    float *y0 = malloc(sizeof(float) * NY), *got = malloc(sizeof(float) * NY), *want = malloc(sizeof(float) * NY);
    for (int i = 0; i < H * W * CI; i++) x1[i] = (float)(uniform() * 3.0), x2[i] = (float)(uniform() * 3.0);
    for (int i = 0; i < CO * CI; i++) w[i] = (float)(uniform() - 0.5) * 0.2f;
    for (int i = 0; i < CO; i++) bias[i] = (float)(uniform() - 0.5);
    for (int i = 0; i < NY; i++) y0[i] = (float)(uniform() * 4.0 - 0.5);
    mr_conv_params p = {CI, CO, 1, 1, 1, 0, 1, 1, 1, 1, H, W, 0, 3.0f, 0, range, 0, 1, 0.0f}, p_plain = p;
    p_plain.int8_out_range = 0.0f;
    p_plain.out_to_convs = 0;
    mr_layer *c3, *plain;
    assert_int_equal(be.i->conv_init(be.ctx, "conv3", &p, w, bias, &c3, &err), MR_OK);
    assert_int_equal(be.i->conv_init(be.ctx, "conv3 plain", &p_plain, w, bias, &plain, &err), MR_OK);
    mr_tensor x1t = tensor(&be, 1, H, W, CI, x1), x2t = tensor(&be, 1, H, W, CI, x2);
    mr_tensor ya = tensor(&be, 1, H, W, CO, y0), yb = tensor(&be, 1, H, W, CO, y0), yf = tensor(&be, 1, H, W, CO, y0);
    /* (1) onto fp32: ya read back, yb left quantized for (2) */
    assert_int_equal(be.i->conv(be.ctx, c3, &x1t, &ya, 1, &err), MR_OK);
    assert_int_equal(be.i->conv(be.ctx, c3, &x1t, &yb, 1, &err), MR_OK);
    assert_true(cpu_layout_is_reduced(be.ctx, &yb, dnnl_u8, c3->out_step));
    assert_int_equal(be.i->conv(be.ctx, plain, &x1t, &yf, 1, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, got, ya.data, sizeof(float) * NY, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, want, yf.data, sizeof(float) * NY, &err), MR_OK);
    assert_quantized_near(got, want, NY, step, "first block's conv3");
    /* (2) onto the quantized map, against fp32 onto its values */
    mr_tensor yq = tensor(&be, 1, H, W, CO, got);
    assert_int_equal(be.i->conv(be.ctx, c3, &x2t, &yb, 1, &err), MR_OK);
    int summed_quantized = 0;
    for (int i = 0; i < c3->cache_count; i++) summed_quantized |= c3->cache[i].accumulate && c3->cache[i].handoff_out;
    assert_true(summed_quantized);
    assert_int_equal(be.i->conv(be.ctx, plain, &x2t, &yq, 1, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, got, yb.data, sizeof(float) * NY, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, want, yq.data, sizeof(float) * NY, &err), MR_OK);
    assert_quantized_near(got, want, NY, step, "next block's conv3");
    print_message("%dx%d conv3 into the residual stream: onto fp32 then quantized, and summed onto u8 in place, "
                  "each within half a step of fp32\n", H, W);
    be.i->layer_free(be.ctx, c3);
    be.i->layer_free(be.ctx, plain);
    mr_tensor ts[] = {x1t, x2t, ya, yb, yf, yq};
    for (int i = 0; i < 6; i++) be.i->buffer_free(be.ctx, ts[i].data);
    be.i->destroy(be.ctx);
    free(x1), free(x2), free(w), free(y0), free(got), free(want);
}

static void test_residual_stream_quantized(void **s)
{
    (void)s;
    run_stream_case(9, 7);
    run_stream_case(40, 30);
}

/* The FPN's top-down path under int8 (VNNI only): a lateral writes s8 at its
 * reader's step, the upsample copies it as it is (held s8 at that step),
 * and the finer lateral adds onto it at its own step (the sum post-op
 * scaled by the ratio of the steps). Against the same finer lateral
 * without the hint adding onto the upsampled values given as fp32: within
 * half a step of its output step; and the upsample read back equals the
 * coarse map read back, repeated. */
static void test_fpn_topdown_quantized(void **s)
{
    (void)s;
    mr_backend be;
    mr_error err = {0};
    open_int8_with_vnni(&be);
    enum { H = 5, W = 7, CC = 48, CF = 32, C = 16 };
    const float range_c = 3.0f, range_f = 4.0f, step_c = range_c / 127.0f, step_f = range_f / 127.0f;
    const int NU = 4 * H * W * C;
    float *xc = malloc(sizeof(float) * H * W * CC), *xf = malloc(sizeof(float) * NU / C * CF);
    float *wc = malloc(sizeof(float) * C * CC), *wf = malloc(sizeof(float) * C * CF), bc[C], bf[C];
    for (int i = 0; i < H * W * CC; i++) xc[i] = (float)(uniform() * 3.0);
    for (int i = 0; i < NU / C * CF; i++) xf[i] = (float)(uniform() * 3.0);
    for (int i = 0; i < C * CC; i++) wc[i] = (float)(uniform() - 0.5) * 0.2f;
    for (int i = 0; i < C * CF; i++) wf[i] = (float)(uniform() - 0.5) * 0.2f;
    for (int i = 0; i < C; i++) bc[i] = (float)(uniform() - 0.5), bf[i] = (float)(uniform() - 0.5);
    /* the laterals: no ReLU, signed readers (the output convs) */
    mr_conv_params pc = {CC, C, 1, 1, 1, 0, 1, 1, 0, 1, H, W, 0, 3.0f, 0, range_c, 1, 1, 0.0f};
    mr_conv_params pf = {CF, C, 1, 1, 1, 0, 1, 1, 0, 1, 2 * H, 2 * W, 0, 3.0f, 0, range_f, 1, 1, 0.0f}, pf_plain = pf;
    pf_plain.int8_out_range = 0.0f;
    pf_plain.out_to_convs = 0;
    mr_layer *lc, *lf, *lf_plain;
    assert_int_equal(be.i->conv_init(be.ctx, "lateral coarse", &pc, wc, bc, &lc, &err), MR_OK);
    assert_int_equal(be.i->conv_init(be.ctx, "lateral fine", &pf, wf, bf, &lf, &err), MR_OK);
    assert_int_equal(be.i->conv_init(be.ctx, "lateral fine plain", &pf_plain, wf, bf, &lf_plain, &err), MR_OK);
    mr_tensor xct = tensor(&be, 1, H, W, CC, xc), xft = tensor(&be, 1, 2 * H, 2 * W, CF, xf);
    mr_tensor inner = tensor(&be, 1, H, W, C, NULL), inner2 = tensor(&be, 1, H, W, C, NULL);
    mr_tensor up = tensor(&be, 1, 2 * H, 2 * W, C, NULL), up2 = tensor(&be, 1, 2 * H, 2 * W, C, NULL);
    assert_int_equal(be.i->conv(be.ctx, lc, &xct, &inner, 0, &err), MR_OK);
    assert_int_equal(be.i->conv(be.ctx, lc, &xct, &inner2, 0, &err), MR_OK);
    assert_true(cpu_layout_is_reduced(be.ctx, &inner, dnnl_s8, step_c));
    assert_int_equal(be.i->upsample_nearest(be.ctx, &inner, &up, &err), MR_OK);
    assert_true(cpu_layout_is_reduced(be.ctx, &up, dnnl_s8, step_c));
    assert_int_equal(be.i->upsample_nearest(be.ctx, &inner2, &up2, &err), MR_OK);
    float *gc = malloc(sizeof(float) * H * W * C), *gu = malloc(sizeof(float) * NU);
    float *got = malloc(sizeof(float) * NU), *want = malloc(sizeof(float) * NU);
    assert_int_equal(be.i->copy_to_host(be.ctx, gc, inner2.data, sizeof(float) * H * W * C, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, gu, up2.data, sizeof(float) * NU, &err), MR_OK);
    for (int y = 0; y < 2 * H; y++)
        for (int x = 0; x < 2 * W; x++)
            assert_memory_equal(gu + ((size_t)y * 2 * W + x) * C, gc + ((size_t)(y / 2) * W + x / 2) * C,
                                sizeof(float) * C);
    /* the finer lateral onto the s8 map (sum scaled step_c / step_f), and in fp32 onto its values */
    assert_int_equal(be.i->conv(be.ctx, lf, &xft, &up, 1, &err), MR_OK);
    assert_true(cpu_layout_is_reduced(be.ctx, &up, dnnl_s8, step_f));
    int scaled = 0;
    for (int i = 0; i < lf->cache_count; i++) scaled |= lf->cache[i].handoff_out && lf->cache[i].sum_scale != 1.0f;
    assert_true(scaled);
    assert_int_equal(be.i->conv(be.ctx, lf_plain, &xft, &up2, 1, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, got, up.data, sizeof(float) * NU, &err), MR_OK);
    assert_int_equal(be.i->copy_to_host(be.ctx, want, up2.data, sizeof(float) * NU, &err), MR_OK);
    for (int i = 0; i < NU; i++) {
        double k = got[i] / step_f, w = fmin(fmax(want[i], -128.0 * step_f), 127.0 * step_f);
        if (!(fabs(k - nearbyint(k)) < 1e-3) || fabs(got[i] - w) > 0.5 * step_f * (1 + 1e-4))
            fail_msg("finer lateral %d: %.6g held as s8, %.6g in fp32 (step %.4g)", i, got[i], want[i], step_f);
    }
    print_message("FPN top-down: the upsample copies the s8 map as it is; the finer lateral's scaled sum within "
                  "half a step of fp32\n");
    mr_layer *ls[] = {lc, lf, lf_plain};
    for (int i = 0; i < 3; i++) be.i->layer_free(be.ctx, ls[i]);
    mr_tensor ts[] = {xct, xft, inner, inner2, up, up2};
    for (int i = 0; i < 6; i++) be.i->buffer_free(be.ctx, ts[i].data);
    be.i->destroy(be.ctx);
    free(xc), free(xf), free(wc), free(wf), free(gc), free(gu), free(got), free(want);
}

/* A head's convs (planned for batches) run batches of power-of-two sizes
 * only (backend_cpu_layers.c, HEAD_CHUNK_PIXELS): 21 RoIs of 14x14 as 16 +
 * 4 + 1, 3 RoIs of 7x7 (chunks of 64) as 2 + 1. The same promise, image by
 * image. */
static void test_head_convs_in_chunks(void **s)
{
    (void)s;
    run_case(&(int8_case){16, 24, 3, 1, 1, 1, 0, 0, 14, 14, 21});
    run_case(&(int8_case){24, 8, 1, 1, 0, 0, 1, 0, 7, 7, 3});
}

/* The fully connected layers and the 2x2 deconvolution in int8
 * (backend_cpu_gemm.c) against the same promise, per GEMM column instead
 * of per output channel: y[r, col] = act(s_x * s_w[col] * sum_k q_x q_w +
 * bias). A linear layer's columns are its outputs; the deconvolution's are
 * (tap, output channel), and its bias and ReLU come after, in fp32. Rows
 * run in chunks of a fixed count: `rows` is chosen to leave a short last
 * chunk, which goes through scratch when the output has no room past it. */
typedef struct {
    int deconv;           /* 0: linear [rows, k] -> [rows, cols]; 1: deconv [n, h, w, k] -> [n, 2h, 2w, cols] */
    int n, h, w, k, cols; /* linear: n rows (h = w = 1) */
    int relu, is_signed;
} gemm_case;

static void run_gemm_case(const gemm_case *tc)
{
    mr_backend be;
    mr_error err = {0};
    assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 2, .precision = MR_PRECISION_INT8}, &be,
                                  &err), MR_OK);
    /* without VNNI the GEMMs' weights take 63 steps for s8 inputs too (backend_cpu_gemm.c) */
    const int qmax = ((cpu_ctx *)be.ctx)->int8_vnni ? 127 : 63;
    const int K = tc->k, taps = tc->deconv ? 4 : 1, gcols = taps * tc->cols; /* GEMM columns */
    const float range = 6.0f, sx = range / (tc->is_signed ? 127.0f : 255.0f), sw = 1.0f / 128.0f;
    /* GEMM weights g[k][col]: whole steps plus at most 0.4 of one, each
     * column's first qmax steps (s_w = sw exactly) */
    int *qw = malloc(sizeof(int) * (size_t)K * gcols);
    float *g = malloc(sizeof(float) * (size_t)K * gcols), *w = malloc(sizeof(float) * (size_t)K * gcols);
    float *bias = malloc(sizeof(float) * tc->cols);
    for (int col = 0; col < gcols; col++)
        for (int i = 0; i < K; i++) {
            int q = i == 0 ? (col % 2 ? -qmax : qmax) : (int)floor(uniform() * (2 * qmax - 1)) - (qmax - 1);
            double frac = i == 0 ? 0.0 : (uniform() - 0.5) * 0.8;
            qw[(size_t)i * gcols + col] = q;
            g[(size_t)i * gcols + col] = (float)((q + frac) * sw);
        }
    for (int o = 0; o < tc->cols; o++) bias[o] = (float)(uniform() - 0.5);
    /* in the layers' own layouts: linear [out, in]; deconv [cin, cout, 2, 2] with column = tap * cout + co */
    for (int i = 0; i < K; i++)
        for (int col = 0; col < gcols; col++) {
            if (tc->deconv)
                w[((size_t)i * tc->cols + col % tc->cols) * 4 + col / tc->cols] = g[(size_t)i * gcols + col];
            else
                w[(size_t)col * K + i] = g[(size_t)i * gcols + col];
        }
    const size_t rows = (size_t)tc->n * tc->h * tc->w, xn = rows * K;
    float *x = malloc(sizeof(float) * xn);
    int *qx = malloc(sizeof(int) * xn);
    fill_inputs(x, qx, xn, tc->is_signed, sx);
    mr_layer *layer;
    mr_tensor xt, yt;
    size_t yn;
    if (tc->deconv) {
        mr_deconv2x2_params p = {K, tc->cols, tc->relu, 0, 0, 0, 0, range, tc->is_signed};
        assert_int_equal(be.i->deconv2x2_init(be.ctx, "mask_head.deconv", &p, w, bias, &layer, &err), MR_OK);
        xt = tensor(&be, tc->n, tc->h, tc->w, K, x);
        yt = tensor(&be, tc->n, 2 * tc->h, 2 * tc->w, tc->cols, NULL);
        yn = rows * 4 * tc->cols;
        assert_int_equal(be.i->deconv2x2(be.ctx, layer, &xt, &yt, &err), MR_OK);
    } else {
        mr_linear_params p = {K, tc->cols, tc->relu, 0, range, tc->is_signed};
        assert_int_equal(be.i->linear_init(be.ctx, "box_head.fc6", &p, w, bias, &layer, &err), MR_OK);
        xt = tensor(&be, tc->n, 1, 1, K, x);
        yt = tensor(&be, tc->n, 1, 1, tc->cols, NULL);
        yn = rows * tc->cols;
        assert_int_equal(be.i->linear(be.ctx, layer, &xt, &yt, &err), MR_OK);
    }
    /* without VNNI a fully connected layer stays fp32 (backend_cpu_layers.c): y = act(x w + bias) unquantized */
    const int stays_fp32 = !((cpu_ctx *)be.ctx)->int8_vnni && !tc->deconv;
    assert_int_equal(layer->int8, !stays_fp32);
    float *y = malloc(sizeof(float) * yn);
    assert_int_equal(be.i->copy_to_host(be.ctx, y, yt.data, sizeof(float) * yn, &err), MR_OK);
    double worst = 0;
    for (size_t r = 0; r < rows; r++)
        for (int col = 0; col < gcols; col++) {
            long long acc = 0, mag = 0;
            double facc = 0, fmag = 0; /* unquantized */
            for (int i = 0; i < K; i++) {
                long long t = (long long)qx[r * K + i] * qw[(size_t)i * gcols + col];
                acc += t;
                mag += llabs(t);
                double xw = (double)x[r * K + i] * g[(size_t)i * gcols + col];
                facc += xw;
                fmag += fabs(xw);
            }
            const int o = col % tc->cols;
            double ref = (stays_fp32 ? facc : (double)sx * sw * (double)acc) + bias[o];
            if (tc->relu && ref < 0) ref = 0;
            size_t yi = r * (size_t)tc->cols + o;
            if (tc->deconv) { /* pixel r = (n, i, j) -> output (n, 2i + di, 2j + dj), tap = di * 2 + dj */
                size_t n = r / ((size_t)tc->h * tc->w), i = r / tc->w % tc->h, j = r % tc->w;
                int tap = col / tc->cols;
                yi = ((n * 2 * tc->h + 2 * i + tap / 2) * 2 * tc->w + 2 * j + tap % 2) * tc->cols + o;
            }
            double scale = (stays_fp32 ? fmag : (double)sx * sw * (double)mag) + fabs(bias[o]) + 2.0;
            double d = fabs(y[yi] - ref) / scale;
            if (d > worst) worst = d;
            if (d > 1e-5) fail_msg("row %zu column %d = %.7g, expected %.7g (qmax %d)", r, col, y[yi], ref, qmax);
        }
    char how[32];
    snprintf(how, sizeof how, stays_fp32 ? "fp32 (no VNNI)" : "qmax %d", qmax);
    print_message("%s %zu rows %d->%d %s%s: %s, worst difference %.2g of the output's scale\n",
                  tc->deconv ? "deconv" : "linear", rows, K, gcols, tc->is_signed ? "s8" : "u8",
                  tc->relu ? " relu" : "", how, worst);
    release(&be, layer, &xt, &yt);
    free(qw), free(g), free(w), free(bias), free(x), free(qx), free(y);
}

/* fc6: s8 (the FPN's pooled maps), 300 rows = two chunks and a short one */
static void test_linear_s8(void **s)
{
    (void)s;
    run_gemm_case(&(gemm_case){0, 300, 1, 1, 200, 40, 1, 1});
}

/* fc7: u8 (after fc6's ReLU), one exact chunk, then fewer rows than one */
static void test_linear_u8(void **s)
{
    (void)s;
    run_gemm_case(&(gemm_case){0, 128, 1, 1, 96, 24, 1, 0});
    run_gemm_case(&(gemm_case){0, 5, 1, 1, 96, 24, 0, 0});
}

/* the mask head's deconv: u8 (after the last conv's ReLU), 5 RoIs of 7x7
 * (245 pixels: one short chunk) and 3 of 14x14 (588: one and a half) */
static void test_deconv_u8(void **s)
{
    (void)s;
    run_gemm_case(&(gemm_case){1, 5, 7, 7, 32, 8, 1, 0});
    run_gemm_case(&(gemm_case){1, 3, 14, 14, 16, 8, 0, 1});
}

/* A layer without a range is refused by name; one that keeps fp32 needs none. */
static void test_ranges_required(void **s)
{
    (void)s;
    mr_backend be;
    mr_error err = {0};
    assert_int_equal(backend_open("cpu", &(mr_backend_params){.precision = MR_PRECISION_INT8}, &be, &err), MR_OK);
    float w[8 * 8] = {0}, b[8] = {0};
    mr_conv_params p = {8, 8, 1, 1, 1, 0, 1, 1, 0, 1, 4, 4, 0, 0.0f, 0, 0.0f, 0, 0, 0.0f};
    mr_layer *l = NULL;
    assert_int_equal(be.i->conv_init(be.ctx, "backbone.res2.0.conv1", &p, w, b, &l, &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "backbone.res2.0.conv1"));
    assert_non_null(strstr(err.msg, "calibrated input range"));
    p.keep_fp32 = 1;
    assert_int_equal(be.i->conv_init(be.ctx, "backbone.stem.conv", &p, w, b, &l, &err), MR_OK);
    be.i->layer_free(be.ctx, l);
    be.i->destroy(be.ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_1x1_u8_relu),          cmocka_unit_test(test_3x3_s8_stride2),
        cmocka_unit_test(test_3x3_u8_residual_relu), cmocka_unit_test(test_1x1_s8_residual),
        cmocka_unit_test(test_ranges_required),      cmocka_unit_test(test_quantized_map_between_convs),
        cmocka_unit_test(test_linear_s8),            cmocka_unit_test(test_linear_u8),
        cmocka_unit_test(test_deconv_u8),            cmocka_unit_test(test_head_convs_in_chunks),
        cmocka_unit_test(test_residual_stream_quantized), cmocka_unit_test(test_fpn_topdown_quantized),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
