/* Winograd F(4x4,3x3) (conv_winograd.{h,c}) through the CPU backend, against
 * a naive double-precision direct convolution, beside oneDNN's direct
 * convolution on the same data.
 *
 * Each case builds two layers from the same weights: one with
 * MR_CPU_WINOGRAD=1 (Winograd, the default for these layers), one with
 * MR_CPU_WINOGRAD=0 (oneDNN direct), and runs both through the backend
 * table on NHWC tensors (so the blocked-layout bookkeeping, the fused bias,
 * residual sum and ReLU are all on the path). Errors are printed per case:
 * normalised L2 ||got - ref|| / ||ref|| and the largest absolute error over
 * max |ref|.
 *
 * Tolerance: normalised error <= 2e-5 for Winograd. Why: F(4x4,3x3) with
 * the points 0, +-1, +-2 adds a few ulps of rounding per product through
 * the transforms (entries up to 8 in A^T, 1/24 in G, and sums of 6 terms
 * in B^T before the cin-long dot products); measured here it is 3-6x
 * oneDNN direct's own error (~1e-7..5e-7 for cin 8..512), and stays below
 * 5e-6 at every shape. 2e-5 is the project's conv tolerance (1e-5,
 * tests/unit/test_backend_ops.c) with a 2x margin, and 20x below what the
 * end-to-end parity tests (torchvision, fp32 direct) would notice. The
 * test also asserts Winograd is at most 50x direct's error (plus 1e-6), so
 * a regression in the transforms that stays under 2e-5 at small cin is
 * caught too. Any NaN fails. Seeded xorshift, seed printed. */
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
#include "cpu/conv_winograd.h"

#define SEED 0x77696e6f67726164ull
#define TOL_WINO 2e-5
#define TOL_VS_DIRECT 50.0

static uint64_t g_rng;

static float frand(void)
{
    g_rng ^= g_rng >> 12;
    g_rng ^= g_rng << 25;
    g_rng ^= g_rng >> 27;
    uint64_t r = g_rng * 0x2545F4914F6CDD1Dull;
    return (float)((double)(r >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

typedef struct {
    int n, h, w, cin, cout, relu, accumulate;
} wcase;

/* y = act(conv3x3(x, w) + b (+ y0)), NHWC x, OIHW w, pad 1, double sums. */
static void ref_conv(const wcase *c, const float *x, const float *wt, const float *b, const float *y0, double *y)
{
    for (int n = 0; n < c->n; n++)
        for (int oy = 0; oy < c->h; oy++)
            for (int ox = 0; ox < c->w; ox++)
                for (int co = 0; co < c->cout; co++) {
                    double s = b[co];
                    for (int ky = 0; ky < 3; ky++) {
                        int iy = oy + ky - 1;
                        if (iy < 0 || iy >= c->h) continue;
                        for (int kx = 0; kx < 3; kx++) {
                            int ix = ox + kx - 1;
                            if (ix < 0 || ix >= c->w) continue;
                            const float *xp = x + (((size_t)n * c->h + iy) * c->w + ix) * c->cin;
                            const float *wp = wt + (size_t)co * c->cin * 9 + ky * 3 + kx;
                            for (int ci = 0; ci < c->cin; ci++) s += (double)xp[ci] * (double)wp[(size_t)ci * 9];
                        }
                    }
                    size_t o = (((size_t)n * c->h + oy) * c->w + ox) * c->cout + co;
                    if (c->accumulate) s += y0[o];
                    if (c->relu && s < 0) s = 0;
                    y[o] = s;
                }
}

typedef struct {
    double norm, maxrel; /* ||d|| / ||ref||, max|d| / max|ref| */
    int nan;
} errs;

static errs compare(const float *got, const double *ref, size_t count)
{
    errs e = {0, 0, 0};
    double dd = 0, rr = 0, dmax = 0, rmax = 0;
    for (size_t i = 0; i < count; i++) {
        if (isnan(got[i])) e.nan = 1;
        double d = fabs((double)got[i] - ref[i]);
        dd += d * d;
        rr += ref[i] * ref[i];
        if (d > dmax) dmax = d;
        if (fabs(ref[i]) > rmax) rmax = fabs(ref[i]);
    }
    e.norm = rr > 0 ? sqrt(dd / rr) : sqrt(dd);
    e.maxrel = rmax > 0 ? dmax / rmax : dmax;
    return e;
}

/* Runs one layer of the case on the backend; returns the NHWC output in out. */
static void run_layer(mr_backend *be, const char *mode, const wcase *c, const float *x, const float *wt,
                      const float *b, const float *y0, float *out)
{
    mr_error err;
    setenv("MR_CPU_WINOGRAD", mode, 1);
    mr_conv_params p = {c->cin, c->cout, 3, 3, 1, 1, 1, 1, c->relu, 0, 0, 0, 0, 0.0f, 0, 0.0f, 0, 0, 0.0f};
    mr_layer *layer = NULL;
    assert_int_equal(be->i->conv_init(be->ctx, "test.wino", &p, wt, b, &layer, &err), MR_OK);
    size_t xs = (size_t)c->n * c->h * c->w * c->cin, ys = (size_t)c->n * c->h * c->w * c->cout;
    void *dx, *dy;
    assert_int_equal(be->i->buffer_alloc(be->ctx, sizeof(float) * xs, &dx, &err), MR_OK);
    assert_int_equal(be->i->buffer_alloc(be->ctx, sizeof(float) * ys, &dy, &err), MR_OK);
    assert_int_equal(be->i->copy_to_device(be->ctx, dx, x, sizeof(float) * xs, &err), MR_OK);
    assert_int_equal(be->i->copy_to_device(be->ctx, dy, y0, sizeof(float) * ys, &err), MR_OK);
    mr_tensor tx = mr_tensor_make(dx, c->n, c->h, c->w, c->cin), ty = mr_tensor_make(dy, c->n, c->h, c->w, c->cout);
    assert_int_equal(be->i->conv(be->ctx, layer, &tx, &ty, c->accumulate, &err), MR_OK);
    assert_int_equal(be->i->copy_to_host(be->ctx, out, dy, sizeof(float) * ys, &err), MR_OK);
    be->i->buffer_free(be->ctx, dx);
    be->i->buffer_free(be->ctx, dy);
    be->i->layer_free(be->ctx, layer);
    unsetenv("MR_CPU_WINOGRAD");
}

static const wcase g_cases[] = {
    /* n, h, w, cin, cout, relu, accumulate */
    {1, 4, 4, 8, 8, 0, 0},      /* one tile */
    {1, 1, 1, 8, 16, 0, 0},     /* smaller than a tile */
    {1, 2, 3, 16, 8, 1, 0},     /* H, W < 4 */
    {1, 3, 7, 8, 24, 0, 1},     /* odd cout panels (24 = 16 + 8) */
    {2, 5, 9, 24, 40, 1, 1},    /* edge tiles both ways, batch */
    {1, 13, 19, 64, 64, 1, 0},  /* res2-like */
    {1, 17, 11, 128, 128, 0, 1},
    {3, 14, 14, 256, 256, 1, 0}, /* the mask head's RoIs */
    {1, 9, 10, 256, 256, 1, 1},
    {1, 7, 10, 512, 512, 1, 0}, /* res5-like, 512 channels */
    {1, 6, 5, 512, 8, 0, 0},
    {1, 6, 5, 8, 512, 1, 1},
    {1, 26, 23, 32, 48, 0, 0},  /* several chunks per thread */
    /* the same kinds of edge with channels that 16-channel blocks take */
    {1, 4, 4, 16, 16, 0, 0},
    {1, 1, 1, 16, 32, 0, 0},
    {1, 2, 3, 32, 16, 1, 0},
    {2, 5, 9, 32, 48, 1, 1},
};

/* Every case with the backend's layout in 8-channel blocks, then 16 (a
 * case whose channels are not a multiple of 16 runs oneDNN's direct
 * convolution on NHWC there: both results are still checked). */
static void test_against_double_block(int block)
{
    mr_backend be;
    mr_error err;
    assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 2, .cpu_block = block}, &be, &err), MR_OK);
    if (!wino_cpu_supported()) {
        printf("SKIP: no AVX2/FMA, Winograd is not used on this CPU\n");
        be.i->destroy(be.ctx);
        skip();
    }
    g_rng = SEED;
    printf("channel block %d, seed 0x%llx\n", block, (unsigned long long)SEED);
    printf("%-32s %12s %12s %12s %12s\n", "case n,h,w,cin->cout relu acc", "wino norm", "wino maxrel",
           "direct norm", "direct maxrel");
    double worst = 0;
    for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) {
        const wcase *c = &g_cases[i];
        size_t xs = (size_t)c->n * c->h * c->w * c->cin, ys = (size_t)c->n * c->h * c->w * c->cout;
        size_t ws = (size_t)c->cout * c->cin * 9;
        float *x = malloc(sizeof(float) * xs), *wt = malloc(sizeof(float) * ws), *b = malloc(sizeof(float) * c->cout);
        float *y0 = malloc(sizeof(float) * ys), *yw = malloc(sizeof(float) * ys), *yd = malloc(sizeof(float) * ys);
        double *ref = malloc(sizeof(double) * ys);
        assert_non_null(x && wt && b && y0 && yw && yd && ref);
        /* Weights at He-like scale so outputs are O(1) at every cin. */
        float ws_scale = 1.0f / sqrtf(9.0f * c->cin);
        for (size_t j = 0; j < xs; j++) x[j] = frand();
        for (size_t j = 0; j < ws; j++) wt[j] = frand() * ws_scale;
        for (int j = 0; j < c->cout; j++) b[j] = 0.1f * frand();
        for (size_t j = 0; j < ys; j++) y0[j] = frand();
        ref_conv(c, x, wt, b, y0, ref);
        run_layer(&be, "1", c, x, wt, b, y0, yw);
        run_layer(&be, "0", c, x, wt, b, y0, yd);
        errs ew = compare(yw, ref, ys), ed = compare(yd, ref, ys);
        char label[64];
        snprintf(label, sizeof label, "%d,%d,%d,%d->%d %d %d", c->n, c->h, c->w, c->cin, c->cout, c->relu,
                 c->accumulate);
        printf("%-32s %12.3g %12.3g %12.3g %12.3g\n", label, ew.norm, ew.maxrel, ed.norm, ed.maxrel);
        assert_false(ew.nan);
        assert_false(ed.nan);
        assert_true(ew.norm <= TOL_WINO);
        assert_true(ew.norm <= TOL_VS_DIRECT * ed.norm + 1e-6);
        if (ew.norm > worst) worst = ew.norm;
        free(x), free(wt), free(b), free(y0), free(yw), free(yd), free(ref);
    }
    printf("worst Winograd normalised error %.3g (tolerance %.1g)\n", worst, TOL_WINO);
    be.i->destroy(be.ctx);
}

static void test_against_double_block8(void **state)
{
    (void)state;
    test_against_double_block(8);
}

static void test_against_double_block16(void **state)
{
    (void)state;
    test_against_double_block(16);
}

/* The AVX-512 code (conv_winograd_avx512.c: the GEMM kernel of two 16-wide
 * panels, and in the 16-channel block the 16-lane transforms) adds the
 * same products in the same order per output as the AVX2 code, so on a
 * CPU with AVX-512 both give the same bits, in both blocks; every case,
 * with panels of 32, 16 and 8 left over (cout 40, 48, 24, 8) and edge
 * tiles. Elsewhere the test is skipped, visibly. */
static void test_avx512_equals_avx2(void **state)
{
    (void)state;
    __builtin_cpu_init();
    if (!__builtin_cpu_supports("avx512f")) {
        printf("SKIP: no AVX-512 on this CPU, the AVX2 kernels are the only ones used\n");
        skip();
    }
    for (int block = 8; block <= 16; block += 8) {
        mr_backend avx2, avx512;
        mr_error err;
        setenv("MR_CPU_AVX512", "0", 1);
        assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 2, .cpu_block = block}, &avx2, &err), MR_OK);
        unsetenv("MR_CPU_AVX512");
        assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 2, .cpu_block = block}, &avx512, &err), MR_OK);
        g_rng = SEED ^ 2;
        for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) {
            const wcase *c = &g_cases[i];
            size_t xs = (size_t)c->n * c->h * c->w * c->cin, ys = (size_t)c->n * c->h * c->w * c->cout;
            size_t ws = (size_t)c->cout * c->cin * 9;
            float *x = malloc(sizeof(float) * xs), *wt = malloc(sizeof(float) * ws);
            float *b = malloc(sizeof(float) * c->cout), *y0 = malloc(sizeof(float) * ys);
            float *ya = malloc(sizeof(float) * ys), *yb = malloc(sizeof(float) * ys);
            assert_non_null(x && wt && b && y0 && ya && yb);
            for (size_t j = 0; j < xs; j++) x[j] = frand();
            for (size_t j = 0; j < ws; j++) wt[j] = frand() / sqrtf(9.0f * c->cin);
            for (int j = 0; j < c->cout; j++) b[j] = 0.1f * frand();
            for (size_t j = 0; j < ys; j++) y0[j] = frand();
            run_layer(&avx2, "1", c, x, wt, b, y0, ya);
            run_layer(&avx512, "1", c, x, wt, b, y0, yb);
            assert_memory_equal(ya, yb, sizeof(float) * ys);
            free(x), free(wt), free(b), free(y0), free(ya), free(yb);
        }
        printf("block %d: AVX-512 and AVX2 kernels bitwise equal on %zu cases\n", block,
               sizeof g_cases / sizeof g_cases[0]);
        avx2.i->destroy(avx2.ctx);
        avx512.i->destroy(avx512.ctx);
    }
}

/* wino_forward reading x in NHWC (p->x_nhwc, what the CPU backend hands it
 * where the producer wrote NHWC: an int8 conv on AVX2) gives the same bits
 * as reading the same x relayouted into nChw<block>c: only the strides
 * differ. Both blocks, with the AVX-512 code and without, every case (the
 * double reference above checks the NHWC path through the backend, whose
 * test inputs come in NHWC). */
static void test_nhwc_input_equals_blocked(void **state)
{
    (void)state;
    if (!wino_cpu_supported()) {
        printf("SKIP: no AVX2/FMA, Winograd is not used on this CPU\n");
        skip();
    }
    int checked = 0;
    for (int block = 8; block <= 16; block += 8)
        for (int avx512 = 0; avx512 <= 1; avx512++) {
            g_rng = SEED ^ 3;
            for (size_t i = 0; i < sizeof g_cases / sizeof g_cases[0]; i++) {
                const wcase *c = &g_cases[i];
                if (c->cin % block || c->cout % block) continue;
                mr_wino_params p = {c->cin, c->cout, c->relu, block, avx512, 0};
                size_t xs = (size_t)c->n * c->h * c->w * c->cin, ys = (size_t)c->n * c->h * c->w * c->cout;
                size_t ws = (size_t)c->cout * c->cin * 9, round = 64;
                float *x = aligned_alloc(64, (sizeof(float) * xs + round - 1) / round * round);
                float *xb = aligned_alloc(64, (sizeof(float) * xs + round - 1) / round * round);
                float *wt = malloc(sizeof(float) * ws), *b = malloc(sizeof(float) * c->cout);
                float *u = aligned_alloc(64, (sizeof(float) * wino_weights_floats(&p) + round - 1) / round * round);
                float *ya = aligned_alloc(64, (sizeof(float) * ys + round - 1) / round * round);
                float *yb = aligned_alloc(64, (sizeof(float) * ys + round - 1) / round * round);
                void *scratch = aligned_alloc(64, (wino_scratch_bytes(&p, 2) + round - 1) / round * round);
                assert_non_null(x && xb && wt && b && u && ya && yb && scratch);
                for (size_t j = 0; j < xs; j++) x[j] = frand();
                for (size_t j = 0; j < ws; j++) wt[j] = frand() / sqrtf(9.0f * c->cin);
                for (int j = 0; j < c->cout; j++) b[j] = 0.1f * frand();
                for (size_t j = 0; j < ys; j++) ya[j] = yb[j] = frand(); /* the sum's other operand */
                /* NHWC [n][h][w][cin] -> [n][cin/block][h][w][block] */
                for (int n = 0; n < c->n; n++)
                    for (int yy = 0; yy < c->h; yy++)
                        for (int xx = 0; xx < c->w; xx++)
                            for (int ci = 0; ci < c->cin; ci++)
                                xb[((((size_t)n * (c->cin / block) + ci / block) * c->h + yy) * c->w + xx) * block +
                                   ci % block] = x[(((size_t)n * c->h + yy) * c->w + xx) * c->cin + ci];
                wino_weights_transform(&p, wt, u);
                wino_forward(&p, u, b, xb, c->n, c->h, c->w, ya, c->accumulate, 2, scratch);
                p.x_nhwc = 1;
                wino_forward(&p, u, b, x, c->n, c->h, c->w, yb, c->accumulate, 2, scratch);
                assert_memory_equal(ya, yb, sizeof(float) * ys);
                checked++;
                free(x), free(xb), free(wt), free(b), free(u), free(ya), free(yb), free(scratch);
            }
        }
    printf("NHWC and blocked inputs bitwise equal on %d cases (blocks 8 and 16, AVX-512 code on and off)\n", checked);
}

/* The shared per-tile transforms against the matrices written out in
 * conv_winograd.h, in double: a 6x6 input tile, a 3x3 kernel and the
 * element-wise product give the 4x4 direct correlation. */
static void test_transforms_exact(void **state)
{
    (void)state;
    g_rng = SEED ^ 1;
    float d[36], g[9], v[36], u[36], m[36], o[16];
    for (int i = 0; i < 36; i++) d[i] = frand();
    for (int i = 0; i < 9; i++) g[i] = frand();
    wino43_input_tile(d, v);
    wino43_weight_tile(g, u);
    for (int i = 0; i < 36; i++) m[i] = v[i] * u[i];
    wino43_output_tile(m, o);
    for (int a = 0; a < 4; a++)
        for (int c = 0; c < 4; c++) {
            double s = 0;
            for (int ky = 0; ky < 3; ky++)
                for (int kx = 0; kx < 3; kx++) s += (double)d[(a + ky) * 6 + c + kx] * g[ky * 3 + kx];
            assert_true(fabs(o[a * 4 + c] - s) < 1e-5);
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transforms_exact),
        cmocka_unit_test(test_against_double_block8),
        cmocka_unit_test(test_against_double_block16),
        cmocka_unit_test(test_avx512_equals_avx2),
        cmocka_unit_test(test_nhwc_input_equals_blocked),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
