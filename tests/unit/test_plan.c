/* Load-time planning: the mask paste's chunking of windows through a fixed
 * buffer (mask_paste_chunk.h, the CUDA backend's arithmetic, tested here on the
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

#include "backend/backend.h"
#include "backend/backend_registry.h"
#include "ops/mask_paste_chunk.h"

/* Walks the chunks as cuda_mask_paste does and checks that every row of
 * every window is pasted exactly once, each chunk within the region and
 * packed as the host buffer is (a chunk of whole windows is contiguous
 * there, a band is the next rows of its window); `fail_at` is the window
 * whose row does not fit (-1: none). */
static void check_cover(size_t cap_px, const mr_mask_window *win, int D, int fail_at)
{
    size_t total = 0, *offset = calloc((size_t)D + 1, sizeof *offset);
    int rows_total = 0;
    for (int d = 0; d < D; d++) {
        offset[d] = total;
        total += mask_window_pixels(win[d]);
        rows_total += win[d].h;
    }
    offset[D] = total;
    unsigned char *seen = calloc((size_t)rows_total + 1, 1);
    int *first_row = calloc((size_t)D + 1, sizeof *first_row);
    for (int d = 0, r = 0; d < D; d++) first_row[d] = r, r += win[d].h;
    assert_non_null(offset);
    assert_non_null(seen);
    assert_non_null(first_row);
    mr_paste_chunk ch;
    int d = 0, row = 0, more, chunks = 0;
    size_t host_at = 0; /* where the next chunk lands in the packed host buffer */
    while ((more = mask_paste_chunk_at(cap_px, win, D, d, row, &ch)) > 0) {
        assert_true(ch.d0 == d && ch.nd >= 1 && ch.pixels <= cap_px);
        if (ch.rows < 0) {
            assert_int_equal(row, 0);
            assert_true(ch.pixels == offset[ch.d0 + ch.nd] - offset[ch.d0]);
            for (int j = ch.d0; j < ch.d0 + ch.nd; j++)
                for (int y = 0; y < win[j].h; y++) seen[first_row[j] + y]++;
        } else {
            assert_int_equal(ch.nd, 1);
            assert_true(ch.rows >= 1 && ch.row0 == row && ch.row0 + ch.rows <= win[d].h);
            assert_true(ch.pixels == (size_t)ch.rows * (size_t)win[d].w);
            assert_true(mask_window_pixels(win[d]) > cap_px); /* banded only when it must be */
            for (int y = ch.row0; y < ch.row0 + ch.rows; y++) seen[first_row[d] + y]++;
        }
        assert_true(host_at == offset[ch.d0] + (ch.rows < 0 ? 0 : (size_t)ch.row0 * (size_t)win[d].w));
        host_at += ch.pixels;
        mask_paste_chunk_next(win, &ch, &d, &row);
        assert_true(++chunks <= rows_total + D + 1);
    }
    if (fail_at >= 0) {
        assert_int_equal(more, -1);
        assert_int_equal(d, fail_at);
    } else {
        assert_int_equal(more, 0);
        assert_true(host_at == total);
        for (int r = 0; r < rows_total; r++) assert_int_equal(seen[r], 1);
    }
    free(offset);
    free(seen);
    free(first_row);
}

static void test_paste_chunk_cover(void **state)
{
    (void)state;
    const mr_mask_window ten = {0, 0, 10, 10}, none = {0, 0, 0, 0}, wide = {5, 7, 30, 4};
    const mr_mask_window five_tens[5] = {ten, ten, ten, ten, ten};
    const mr_mask_window mixed[6] = {ten, none, wide, none, ten, {3, 3, 1, 1}};
    const mr_mask_window nones[3] = {none, none, none};
    check_cover(1000, five_tens, 5, -1); /* all in one chunk */
    check_cover(250, five_tens, 5, -1);  /* 2 windows per chunk, the last 1 */
    check_cover(100, five_tens, 5, -1);  /* exactly one window */
    check_cover(99, five_tens, 5, -1);   /* 9 rows of each, then 1 */
    check_cover(10, five_tens, 5, -1);   /* one row at a time */
    check_cover(9, five_tens, 5, 0);     /* not even one row */
    check_cover(230, mixed, 6, -1);      /* empty windows ride along */
    check_cover(100, mixed, 6, -1);      /* the 120-px wide one banded */
    check_cover(29, mixed, 6, 2);        /* its row of 30 does not fit */
    check_cover(0, nones, 3, -1);        /* nothing to paste needs no room */
    check_cover(100, nones, 0, -1);
    /* many random windows through regions of random size */
    unsigned seed = 4242;
    printf("paste chunk seed %u\n", seed);
    srand(seed);
    for (int t = 0; t < 200; t++) {
        mr_mask_window w[40];
        int D = rand() % 40, widest = 0;
        for (int i = 0; i < D; i++) {
            w[i] = (mr_mask_window){rand() % 50, rand() % 50, rand() % 60, rand() % 60};
            if (rand() % 5 == 0) w[i].w = w[i].h = 0;
            if (w[i].w > widest) widest = w[i].w;
        }
        size_t cap = (size_t)(rand() % 5000);
        int fail = -1;
        for (int i = 0; i < D && fail < 0; i++)
            if ((size_t)w[i].w > cap && mask_window_pixels(w[i]) > 0) fail = i;
        check_cover(cap, w, D, fail);
    }
    /* 100 windows of a third of a 1200x1600 photo each fit the planned 64 MiB in one chunk */
    mr_mask_window photo[100];
    for (int i = 0; i < 100; i++) photo[i] = (mr_mask_window){i, i, 800, 800};
    mr_paste_chunk ch;
    assert_int_equal(mask_paste_chunk_at((size_t)64 << 20, photo, 100, 0, 0, &ch), 1);
    assert_int_equal(ch.nd, 100);
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
    assert_int_equal(backend_open("cpu", &(mr_backend_params){.threads = 1}, &be, &err), MR_OK);
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
            mr_conv_params p = {CIN, COUT, K, K, 1, K / 2, 1, 1, relu, 1, H, W, 0, 0.0f, 0, 0.0f, 0, 0, 0.0f};
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
