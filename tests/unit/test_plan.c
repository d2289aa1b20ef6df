/* Load-time planning: the mask paste's chunking through a fixed buffer
 * (mask_paste_chunk.h, the CUDA backend's arithmetic, tested here on the
 * CPU), and a conv with its normalisation given unfolded
 * (conv_init_affine) against a double-precision reference of
 * act((conv(x, W) + b)*s + t). Seeds are fixed and printed. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "backend.h"
#include "mask_paste_chunk.h"

/* Walks the chunks as cuda_mask_paste does and checks that every row of
 * every plane is pasted exactly once, each chunk within the buffer. */
static void check_cover(size_t cap_px, int D, int H, int W)
{
    mr_paste_chunk ch = mask_paste_chunk(cap_px, D, H, W);
    if (D <= 0 || H <= 0 || W <= 0 || cap_px < (size_t)W) {
        assert_int_equal(ch.dets, 0);
        assert_int_equal(ch.rows, 0);
        return;
    }
    assert_true(ch.dets >= 1 && ch.rows >= 1);
    assert_true(ch.rows == H || ch.dets == 1);
    unsigned char *seen = calloc((size_t)D * (size_t)H, 1);
    assert_non_null(seen);
    for (int d0 = 0; d0 < D; d0 += ch.dets) {
        int nd = D - d0 < ch.dets ? D - d0 : ch.dets;
        for (int y0 = 0; y0 < H; y0 += ch.rows) {
            int rows = H - y0 < ch.rows ? H - y0 : ch.rows;
            assert_true((size_t)nd * (size_t)rows * (size_t)W <= cap_px);
            for (int j = 0; j < nd; j++)
                for (int y = y0; y < y0 + rows; y++) seen[(size_t)(d0 + j) * (size_t)H + (size_t)y]++;
        }
    }
    for (size_t i = 0; i < (size_t)D * (size_t)H; i++) assert_int_equal(seen[i], 1);
    free(seen);
}

static void test_paste_chunk_cover(void **state)
{
    (void)state;
    static const struct { size_t cap; int D, H, W; } cases[] = {
        {1000, 5, 10, 10},   /* 10 planes fit: all 5 in one chunk */
        {250, 7, 10, 10},    /* 2 planes per chunk, the last chunk 1 */
        {100, 3, 10, 10},    /* exactly one plane */
        {99, 3, 10, 10},     /* 9 rows of one plane, then 1 */
        {10, 2, 10, 10},     /* one row at a time */
        {9, 2, 10, 10},      /* not even one row: nothing */
        {64 << 20, 100, 800, 1333},
        {64 << 20, 3, 20000, 20000},
        {1, 1, 1, 1},
        {100, 0, 10, 10},
        {100, 2, 0, 10},
        {100, 2, 10, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        check_cover(cases[i].cap, cases[i].D, cases[i].H, cases[i].W);
}

/* The soft planes lie after the binary ones, aligned, inside the region;
 * the smallest region holds one row. */
static void test_paste_chunk_region(void **state)
{
    (void)state;
    static const size_t sizes[] = {257, 300, 1000, 4096, 100003, (size_t)64 << 20};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        for (int soft = 0; soft < 2; soft++) {
            size_t cap = mask_paste_chunk_pixels(sizes[i], soft);
            size_t end = soft ? mask_paste_chunk_soft_offset(cap) + 4 * cap : cap;
            assert_true(end <= sizes[i]);
            if (soft) {
                assert_true(mask_paste_chunk_soft_offset(cap) >= cap);
                assert_int_equal(mask_paste_chunk_soft_offset(cap) % 256, 0);
            }
        }
    }
    assert_int_equal(mask_paste_chunk_pixels(256, 0), 0);
    static const int widths[] = {1, 7, 640, 20000, 65536};
    for (size_t i = 0; i < sizeof widths / sizeof widths[0]; i++)
        for (int soft = 0; soft < 2; soft++)
            assert_true(mask_paste_chunk_pixels(mask_paste_chunk_min_bytes(widths[i], soft), soft) >=
                        (size_t)widths[i]);
}

static float frand(unsigned *s)
{
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

/* NHWC x [1,H,W,cin], OIHW w, stride 1, pad k/2: the reference in double. */
static double ref_conv(const float *x, const float *w, int H, int W, int cin, int k, int y, int xo, int o)
{
    double acc = 0.0;
    for (int ky = 0; ky < k; ky++)
        for (int kx = 0; kx < k; kx++) {
            int iy = y + ky - k / 2, ix = xo + kx - k / 2;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            for (int i = 0; i < cin; i++)
                acc += (double)x[((size_t)iy * W + ix) * cin + i] * (double)w[(((size_t)o * cin + i) * k + ky) * k + kx];
        }
    return acc;
}

static void test_conv_affine_cpu(void **state)
{
    (void)state;
    unsigned seed = 1234u;
    printf("test_conv_affine_cpu: seed %u\n", seed);
    mr_backend be;
    mr_error err;
    assert_int_equal(backend_cpu_create(&be, 1, &err), MR_OK);
    enum { H = 6, W = 5, CIN = 5, COUT = 6, K = 3 };
    float x[H * W * CIN], w[COUT * CIN * K * K], b[COUT], s[COUT], t[COUT], y[H * W * COUT];
    for (int with_bias = 0; with_bias < 2; with_bias++) {
        for (int relu = 0; relu < 2; relu++) {
            for (size_t i = 0; i < sizeof x / sizeof x[0]; i++) x[i] = frand(&seed);
            for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) w[i] = frand(&seed);
            for (int o = 0; o < COUT; o++) {
                b[o] = frand(&seed);
                s[o] = 0.25f + fabsf(frand(&seed)) * (o % 2 ? 3.0f : 1.0f);
                t[o] = frand(&seed);
            }
            mr_conv_params p = {CIN, COUT, K, K, 1, K / 2, 1, 1, relu, 1, H, W};
            mr_layer *layer = NULL;
            assert_int_equal(be.i->conv_init_affine(be.ctx, "test.conv", &p, w, with_bias ? b : NULL, s, t, &layer,
                                                    &err),
                             MR_OK);
            mr_tensor tx = mr_tensor_make(x, 1, H, W, CIN), ty = mr_tensor_make(y, 1, H, W, COUT);
            assert_int_equal(be.i->conv(be.ctx, layer, &tx, &ty, 0, &err), MR_OK);
            be.i->layer_free(be.ctx, layer);
            double worst = 0.0;
            for (int yy = 0; yy < H; yy++)
                for (int xx = 0; xx < W; xx++)
                    for (int o = 0; o < COUT; o++) {
                        double r = (ref_conv(x, w, H, W, CIN, K, yy, xx, o) + (with_bias ? b[o] : 0.0)) * s[o] + t[o];
                        if (relu && r < 0.0) r = 0.0;
                        double e = fabs((double)y[((size_t)yy * W + xx) * COUT + o] - r) / (1.0 + fabs(r));
                        worst = e > worst ? e : worst;
                    }
            printf("  bias %d relu %d: worst normalised error %.3g\n", with_bias, relu, worst);
            assert_true(worst < 1e-5);
        }
    }
    be.i->destroy(be.ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_paste_chunk_cover),
        cmocka_unit_test(test_paste_chunk_region),
        cmocka_unit_test(test_conv_affine_cpu),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
