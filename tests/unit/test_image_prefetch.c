/* Unit tests for engine/io/image_prefetch.c: whatever the thread count and
 * depth, each image taken equals image_load() of its file called directly
 * (status, message, pixels), in order; skipped entries, indices passed
 * over, out-of-order takes and stopping early. Leaks and races show under
 * `make sanitize` (ASan) and valgrind. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <png.h>

#include "io/image_prefetch.h"

#define FILES 13

typedef struct {
    char dir[64];
    char paths[FILES][96];
    const char *list[FILES];
} fixture;

/* A PNG of h x w whose pixels depend on seed, so images cannot be confused. */
static void write_png(const char *path, int h, int w, int seed)
{
    uint8_t *px = malloc((size_t)h * w * 3);
    assert_non_null(px);
    for (int i = 0; i < h * w * 3; i++) px[i] = (uint8_t)(i * 7 + seed * 31);
    png_image im;
    memset(&im, 0, sizeof im);
    im.version = PNG_IMAGE_VERSION;
    im.width = (png_uint_32)w;
    im.height = (png_uint_32)h;
    im.format = PNG_FORMAT_RGB;
    assert_true(png_image_write_to_file(&im, path, 0, px, 0, NULL));
    free(px);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

/* Good images of different sizes, with bad ones among them: a missing
 * file, a text file, a truncated PNG, one over the size limit (300). */
static int setup(void **state)
{
    fixture *fx = calloc(1, sizeof *fx);
    snprintf(fx->dir, sizeof fx->dir, "/tmp/test_prefetch_XXXXXX");
    if (!mkdtemp(fx->dir)) return -1;
    for (int i = 0; i < FILES; i++) {
        snprintf(fx->paths[i], sizeof fx->paths[i], "%s/img%02d.png", fx->dir, i);
        fx->list[i] = fx->paths[i];
        if (i == 3) continue; /* missing */
        if (i == 5) write_text(fx->paths[i], "not an image\n");
        else if (i == 8) write_png(fx->paths[i], 400, 20, i); /* a side over the limit */
        else write_png(fx->paths[i], 17 + 5 * i, 60 - 3 * i, i);
    }
    /* Truncate image 10. */
    FILE *f = fopen(fx->paths[10], "r+b");
    if (!f || ftruncate(fileno(f), 200) != 0) return -1;
    fclose(f);
    *state = fx;
    return 0;
}

static int teardown(void **state)
{
    fixture *fx = *state;
    for (int i = 0; i < FILES; i++) unlink(fx->paths[i]);
    rmdir(fx->dir);
    free(fx);
    return 0;
}

/* Image i through the prefetcher against image_load called here. */
static void expect_same(image_prefetch *pf, int i, const char *path)
{
    mr_image got, want = {0};
    mr_error e1 = {0}, e2 = {0};
    double secs = -1;
    mr_status st = image_prefetch_take(pf, i, &got, &secs, &e1);
    mr_status ref = path ? image_load(path, 300, &want, &e2) : MR_OK;
    assert_int_equal(st, ref);
    assert_true(secs >= 0);
    if (st != MR_OK) {
        assert_string_equal(e1.msg, e2.msg);
        assert_null(got.pixels);
        return;
    }
    assert_int_equal(got.h, want.h);
    assert_int_equal(got.w, want.w);
    if (want.pixels) assert_memory_equal(got.pixels, want.pixels, (size_t)want.h * want.w * 3);
    else assert_null(got.pixels);
    image_free(&got);
    image_free(&want);
}

static void test_every_thread_count_and_depth(void **state)
{
    fixture *fx = *state;
    const int threads[] = {1, 2, 4, 8}, depths[] = {1, 2, 3, 16};
    for (int a = 0; a < 4; a++)
        for (int b = 0; b < 4; b++) {
            image_prefetch *pf = NULL;
            image_prefetch_params p = {threads[a], depths[b], 300};
            mr_error err = {0};
            assert_int_equal(image_prefetch_start(&pf, fx->list, FILES, &p, &err), MR_OK);
            for (int i = 0; i < FILES; i++) expect_same(pf, i, fx->list[i]);
            image_prefetch_stop(pf);
        }
}

static void test_errors_name_the_file(void **state)
{
    fixture *fx = *state;
    image_prefetch *pf = NULL;
    image_prefetch_params p = {2, 2, 300};
    mr_error err = {0};
    assert_int_equal(image_prefetch_start(&pf, fx->list, FILES, &p, &err), MR_OK);
    const int bad[] = {3, 5, 8, 10};
    for (int k = 0; k < 4; k++) {
        mr_image img;
        double secs;
        memset(&err, 0, sizeof err);
        assert_int_not_equal(image_prefetch_take(pf, bad[k], &img, &secs, &err), MR_OK);
        assert_non_null(strstr(err.msg, fx->paths[bad[k]]));
    }
    image_prefetch_stop(pf);
}

/* NULL entries are not decoded; passed-over indices are dropped; a take
 * out of order is refused; the images after it still come. */
static void test_skips_and_order(void **state)
{
    fixture *fx = *state;
    const char *list[FILES];
    for (int i = 0; i < FILES; i++) list[i] = i % 3 == 1 ? NULL : fx->list[i];
    image_prefetch *pf = NULL;
    image_prefetch_params p = {3, 2, 300};
    mr_error err = {0};
    assert_int_equal(image_prefetch_start(&pf, list, FILES, &p, &err), MR_OK);
    expect_same(pf, 0, list[0]);
    expect_same(pf, 1, list[1]); /* NULL: empty, MR_OK */
    expect_same(pf, 6, list[6]); /* 2..5 passed over */
    mr_image img;
    double secs;
    assert_int_equal(image_prefetch_take(pf, 4, &img, &secs, &err), MR_ERR_RANGE);
    assert_int_equal(image_prefetch_take(pf, FILES, &img, &secs, &err), MR_ERR_RANGE);
    for (int i = 7; i < FILES; i++) expect_same(pf, i, list[i]);
    image_prefetch_stop(pf);
}

/* Stopping with images decoded and not taken, or before taking any. */
static void test_stop_early(void **state)
{
    fixture *fx = *state;
    for (int taken = 0; taken < 3; taken++) {
        image_prefetch *pf = NULL;
        image_prefetch_params p = {4, 8, 300};
        mr_error err = {0};
        assert_int_equal(image_prefetch_start(&pf, fx->list, FILES, &p, &err), MR_OK);
        for (int i = 0; i < taken; i++) expect_same(pf, i, fx->list[i]);
        if (taken == 2) usleep(20000); /* let the workers fill the window */
        image_prefetch_stop(pf);
    }
    image_prefetch_stop(NULL);
}

static void test_bad_parameters(void **state)
{
    fixture *fx = *state;
    image_prefetch *pf = (image_prefetch *)fx;
    mr_error err = {0};
    image_prefetch_params bad[] = {{0, 2, 300}, {65, 2, 300}, {2, 0, 300}, {2, 257, 300}};
    for (int k = 0; k < 4; k++) {
        assert_int_equal(image_prefetch_start(&pf, fx->list, FILES, &bad[k], &err), MR_ERR_RANGE);
        assert_null(pf);
    }
    image_prefetch_params p = {2, 2, 300};
    assert_int_equal(image_prefetch_start(&pf, fx->list, 0, &p, &err), MR_OK); /* nothing to do */
    image_prefetch_stop(pf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_thread_count_and_depth),
        cmocka_unit_test(test_errors_name_the_file),
        cmocka_unit_test(test_skips_and_order),
        cmocka_unit_test(test_stop_early),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
