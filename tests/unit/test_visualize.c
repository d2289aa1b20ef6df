/* Unit tests for engine/io/visualize.c: what each pass draws and where, what it
 * leaves alone, clipping at the image edges, and the PNG writer's round trip
 * and failures (missing directory, /dev/full, a file-size limit). */
#define _POSIX_C_SOURCE 200809L
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/config.h"
#include "io/image.h"
#include "io/visualize.h"

enum { H = 64, W = 80 };

static mr_image make_image(int h, int w, unsigned seed)
{
    mr_image im = {malloc((size_t)h * w * 3), h, w, 0};
    assert_non_null(im.pixels);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            uint8_t *p = im.pixels + ((size_t)y * w + x) * 3;
            p[0] = (uint8_t)(x * 3 + y * 5 + seed);
            p[1] = (uint8_t)(x * 7 + seed * 3);
            p[2] = (uint8_t)(y * 11 + seed * 7);
        }
    return im;
}

/* An ellipse mask at image size; parts outside the image are simply absent. */
static uint8_t *ellipse_mask(int h, int w, float cx, float cy, float rx, float ry)
{
    uint8_t *m = calloc((size_t)h * w, 1);
    assert_non_null(m);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const float dx = (x - cx) / rx, dy = (y - cy) / ry;
            m[(size_t)y * w + x] = dx * dx + dy * dy <= 1.0f;
        }
    return m;
}

/* The mask as the model hands it over (model.h): only a window of it, the
 * set pixels' bounding box grown by `margin` (clipped to the image); with
 * margin 0 the outline lies on the window's border, where the neighbours
 * outside it must count as background. */
static mr_detection windowed(mr_detection d, const uint8_t *full, int h, int w, int margin)
{
    int x0 = w, y0 = h, x1 = -1, y1 = -1;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            if (full[(size_t)y * w + x]) {
                x0 = x < x0 ? x : x0, x1 = x > x1 ? x : x1;
                y0 = y < y0 ? y : y0, y1 = y > y1 ? y : y1;
            }
    assert_true(x1 >= 0);
    x0 = x0 - margin > 0 ? x0 - margin : 0, y0 = y0 - margin > 0 ? y0 - margin : 0;
    x1 = x1 + margin < w - 1 ? x1 + margin : w - 1, y1 = y1 + margin < h - 1 ? y1 + margin : h - 1;
    d.mask_win = (mr_mask_window){x0, y0, x1 - x0 + 1, y1 - y0 + 1};
    d.mask = malloc(mask_window_pixels(d.mask_win));
    assert_non_null(d.mask);
    for (int y = y0; y <= y1; y++) memcpy(d.mask + (size_t)(y - y0) * d.mask_win.w, full + (size_t)y * w + x0, (size_t)d.mask_win.w);
    return d;
}

static mr_config *test_config(void)
{
    mr_config *cfg = calloc(1, sizeof *cfg);
    assert_non_null(cfg);
    config_defaults(cfg);
    memset(cfg->classes.class_names, 0, sizeof cfg->classes.class_names);
    cfg->classes.num_classes = 30;
    strcpy(cfg->classes.class_names[0], "__background__");
    strcpy(cfg->classes.class_names[1], "person");
    strcpy(cfg->classes.class_names[25], "cat");
    return cfg;
}

static const uint8_t *px(const mr_image *im, int x, int y)
{
    return im->pixels + ((size_t)y * im->w + x) * 3;
}

static int is_colour(const uint8_t *p, const uint8_t c[3])
{
    return p[0] == c[0] && p[1] == c[1] && p[2] == c[2];
}

static int is_ink(const uint8_t *p)
{
    return (p[0] == 0 && p[1] == 0 && p[2] == 0) || (p[0] == 255 && p[1] == 255 && p[2] == 255);
}

/* A: inside the image, mask well inside its box. B: box beyond the top and
 * right edges, mask cut by both. */
typedef struct {
    mr_image img;
    mr_config *cfg;
    mr_detection dets[2];
    uint8_t *full[2]; /* the dets' masks as whole planes */
    mr_result res;
    uint8_t ca[3], cb[3];
} scene;

static void scene_init(scene *s)
{
    s->img = make_image(H, W, 1);
    s->cfg = test_config();
    s->full[0] = ellipse_mask(H, W, 25, 40, 10, 12);
    s->full[1] = ellipse_mask(H, W, 70, 5, 15, 12);
    s->dets[0] = windowed((mr_detection){.box = {10, 24, 40, 56}, .score = 0.9f, .class_id = 1}, s->full[0], H, W, 0);
    s->dets[1] = windowed((mr_detection){.box = {55, -10, 100, 30}, .score = 0.5f, .class_id = 25}, s->full[1], H, W, 3);
    s->res = (mr_result){.width = W, .height = H, .count = 2, .dets = s->dets};
    visualize_class_color(1, s->ca);
    visualize_class_color(25, s->cb);
}

static void scene_free(scene *s)
{
    for (int d = 0; d < 2; d++) {
        free(s->dets[d].mask);
        free(s->full[d]);
    }
    free(s->cfg);
    image_free(&s->img);
}

static mr_vis_rect label_rect_of(const scene *s, int d)
{
    char text[128];
    const int len = visualize_label_text(&s->dets[d], s->cfg, text, sizeof text);
    return visualize_label_rect(H, W, s->dets[d].box, len);
}

static void test_render_masks_boxes_labels(void **state)
{
    (void)state;
    scene s;
    scene_init(&s);
    assert_false(is_colour(s.ca, s.cb));
    mr_image out = {0};
    mr_error err = {0};
    assert_int_equal(visualize_render(&s.img, &s.res, s.cfg, &out, &err), MR_OK);
    assert_int_equal(out.h, H);
    assert_int_equal(out.w, W);

    /* Mask A: interior pixels are the 50% blend, the outline is darker. */
    const uint8_t *ma = s.full[0];
    int interior = 0, outline = 0;
    for (int y = 1; y < H - 1; y++)
        for (int x = 1; x < W - 1; x++) {
            if (!ma[y * W + x]) continue;
            const uint8_t *o = px(&s.img, x, y), *p = px(&out, x, y);
            const int edge = !ma[y * W + x - 1] || !ma[y * W + x + 1] || !ma[(y - 1) * W + x] ||
                             !ma[(y + 1) * W + x];
            if (edge) {
                for (int c = 0; c < 3; c++) assert_int_equal(p[c], visualize_darken(s.ca[c]));
                outline++;
            } else {
                for (int c = 0; c < 3; c++) {
                    assert_int_equal(p[c], visualize_blend(o[c], s.ca[c]));
                    assert_int_equal(p[c], (o[c] + s.ca[c] + 1) / 2);
                }
                assert_memory_not_equal(p, o, 3);
                interior++;
            }
        }
    assert_true(interior > 300);
    assert_true(outline > 40);

    /* Box A: rows 24, 25, 54, 55 and columns 10, 11, 38, 39 over its extent. */
    for (int x = 10; x < 40; x++)
        for (int k = 0; k < 2; k++) {
            assert_true(is_colour(px(&out, x, 24 + k), s.ca));
            assert_true(is_colour(px(&out, x, 54 + k), s.ca));
        }
    for (int y = 24; y < 56; y++)
        for (int k = 0; k < 2; k++) {
            assert_true(is_colour(px(&out, 10 + k, y), s.ca));
            assert_true(is_colour(px(&out, 38 + k, y), s.ca));
        }
    /* Just inside the box's 2-px edge and away from the mask: unchanged. */
    assert_memory_equal(px(&out, 12, 26), px(&s.img, 12, 26), 3);

    /* Box B, clipped: bottom rows 28, 29 and left columns 55, 56 below both
     * labels are drawn; its right edge (x 98, 99) is outside, so column 79
     * inside the box is untouched. */
    for (int x = 55; x < W; x++) {
        assert_true(is_colour(px(&out, x, 28), s.cb));
        assert_true(is_colour(px(&out, x, 29), s.cb));
    }
    for (int y = 24; y < 30; y++) {
        assert_true(is_colour(px(&out, 55, y), s.cb));
        assert_true(is_colour(px(&out, 56, y), s.cb));
    }
    assert_memory_equal(px(&out, 79, 20), px(&s.img, 79, 20), 3);

    /* Label A sits right above box A at its left corner; label B, whose box
     * starts above the image, at the top of the image, moved left to fit. */
    const mr_vis_rect la = label_rect_of(&s, 0), lb = label_rect_of(&s, 1);
    assert_int_equal(la.h, 13);
    assert_int_equal(la.w, 6 * 11 + 3); /* "person 0.90" */
    assert_int_equal(la.y + la.h, 24);
    assert_int_equal(la.x, 10);
    assert_int_equal(lb.y, 0);
    assert_int_equal(lb.w, 6 * 8 + 3); /* "cat 0.50" */
    assert_int_equal(lb.x + lb.w, W);
    int fill = 0, ink = 0;
    for (int y = la.y; y < la.y + la.h; y++)
        for (int x = la.x; x < la.x + la.w; x++) {
            const uint8_t *p = px(&out, x, y);
            assert_true(is_colour(p, s.ca) || is_ink(p));
            fill += is_colour(p, s.ca);
            ink += is_ink(p);
        }
    assert_true(fill > 0 && ink > 30);
    for (int y = la.y; y < la.y + la.h; y++) assert_true(is_colour(px(&out, la.x, y), s.ca)); /* padding */
    /* B's label where A's does not cover it; A, the better one, is on top. */
    for (int y = lb.y; y < la.y; y++)
        for (int x = lb.x; x < lb.x + lb.w; x++)
            assert_true(is_colour(px(&out, x, y), s.cb) || is_ink(px(&out, x, y)));
    assert_true(is_colour(px(&out, lb.x + 1, la.y), s.ca));

    /* Everything outside the boxes, labels and B's mask is unchanged. */
    int untouched = 0;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            const int in_a = x >= 10 && x < 40 && y >= 24 && y < 56;
            const int in_b = x >= 55 && y < 30;
            const int in_la = x >= la.x && x < la.x + la.w && y >= la.y && y < la.y + la.h;
            const int in_lb = x >= lb.x && x < lb.x + lb.w && y >= lb.y && y < lb.y + lb.h;
            if (in_a || in_b || in_la || in_lb || s.full[1][y * W + x]) continue;
            assert_memory_equal(px(&out, x, y), px(&s.img, x, y), 3);
            untouched++;
        }
    assert_true(untouched > H * W / 3);

    image_free(&out);
    scene_free(&s);
}

static void test_render_no_detections_and_box_only(void **state)
{
    (void)state;
    scene s;
    scene_init(&s);
    mr_image out = {0};
    mr_error err = {0};

    mr_result none = {.width = W, .height = H, .count = 0, .dets = NULL};
    assert_int_equal(visualize_render(&s.img, &none, s.cfg, &out, &err), MR_OK);
    assert_memory_equal(out.pixels, s.img.pixels, (size_t)H * W * 3);
    assert_ptr_not_equal(out.pixels, s.img.pixels);
    image_free(&out);

    /* A NULL mask draws the box and label only; no config: "class 1 0.90". */
    free(s.dets[0].mask);
    s.dets[0].mask = NULL;
    mr_result one = {.width = W, .height = H, .count = 1, .dets = s.dets};
    assert_int_equal(visualize_render(&s.img, &one, NULL, &out, &err), MR_OK);
    assert_memory_equal(px(&out, 25, 40), px(&s.img, 25, 40), 3);
    assert_true(is_colour(px(&out, 10, 40), s.ca));
    image_free(&out);

    /* a mask window reaching past the image is refused, not drawn */
    s.dets[1].mask_win.x0 = W - s.dets[1].mask_win.w + 1;
    mr_result bad = {.width = W, .height = H, .count = 2, .dets = s.dets};
    assert_int_equal(visualize_render(&s.img, &bad, NULL, &out, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "mask window"));
    scene_free(&s);
}

static void test_label_text_and_scale(void **state)
{
    (void)state;
    mr_config *cfg = test_config();
    char buf[64];
    mr_detection d = {.box = {0, 0, 1, 1}, .score = 0.87f, .class_id = 1};
    assert_int_equal(visualize_label_text(&d, cfg, buf, sizeof buf), 11);
    assert_string_equal(buf, "person 0.87");
    d.class_id = 99;
    d.score = 0.5f;
    visualize_label_text(&d, cfg, buf, sizeof buf);
    assert_string_equal(buf, "class 99 0.50");
    d.class_id = 1;
    visualize_label_text(&d, NULL, buf, sizeof buf);
    assert_string_equal(buf, "class 1 0.50");
    strcpy(cfg->classes.class_names[2], "caf\xc3\xa9");
    d.class_id = 2;
    visualize_label_text(&d, cfg, buf, sizeof buf);
    assert_string_equal(buf, "caf?? 0.50");
    assert_int_equal(visualize_label_text(&d, cfg, buf, 4), 3);
    assert_string_equal(buf, "caf");

    /* Wider than 1000 px: glyphs at x2. */
    const float box[4] = {100, 100, 200, 200};
    mr_vis_rect r = visualize_label_rect(600, 1001, box, 5);
    assert_int_equal(r.h, 26);
    assert_int_equal(r.w, (5 * 6 + 3) * 2);
    assert_int_equal(r.y, 100 - 26);
    r = visualize_label_rect(600, 1000, box, 5);
    assert_int_equal(r.h, 13);
    free(cfg);
}

static void test_render_errors(void **state)
{
    (void)state;
    scene s;
    scene_init(&s);
    mr_image out = {0};
    mr_error err = {0};
    assert_int_equal(visualize_render(NULL, &s.res, s.cfg, &out, &err), MR_ERR_INTERNAL);
    assert_int_equal(visualize_render(&s.img, NULL, s.cfg, &out, &err), MR_ERR_INTERNAL);
    assert_int_equal(visualize_render(&s.img, &s.res, s.cfg, NULL, &err), MR_ERR_INTERNAL);
    assert_int_equal(visualize_render(&s.img, &s.res, s.cfg, &s.img, &err), MR_ERR_INTERNAL);
    mr_image empty = {s.img.pixels, 0, W, 0};
    assert_int_equal(visualize_render(&empty, &s.res, s.cfg, &out, &err), MR_ERR_SHAPE);
    assert_null(out.pixels);
    mr_result wrong = {.width = W + 1, .height = H, .count = 2, .dets = s.dets};
    assert_int_equal(visualize_render(&s.img, &wrong, s.cfg, &out, &err), MR_ERR_SHAPE);
    assert_non_null(strstr(err.msg, "64x81"));
    mr_result nodets = {.width = W, .height = H, .count = 2, .dets = NULL};
    assert_int_equal(visualize_render(&s.img, &nodets, s.cfg, &out, &err), MR_ERR_INTERNAL);
    s.dets[1].box[2] = NAN;
    assert_int_equal(visualize_render(&s.img, &s.res, s.cfg, &out, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "detection 1"));
    s.dets[1].box[2] = 1e30f; /* huge but finite: clipped, no overflow */
    s.dets[1].box[0] = -1e30f;
    assert_int_equal(visualize_render(&s.img, &s.res, s.cfg, &out, &err), MR_OK);
    image_free(&out);
    scene_free(&s);
}

/* ---- PNG ---- */

static char *make_temp_dir(void)
{
    char *dir = strdup("/tmp/test_visualize_XXXXXX");
    assert_non_null(dir);
    assert_non_null(mkdtemp(dir));
    return dir;
}

/* Files in dir other than "." and "..". */
static int count_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) n++;
    closedir(d);
    return n;
}

static void test_png_roundtrip_and_overwrite(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char path[256];
    snprintf(path, sizeof path, "%s/out.png", dir);
    mr_error err = {0};
    for (unsigned seed = 1; seed <= 2; seed++) { /* the second write replaces the first */
        mr_image im = make_image(H, W, seed);
        assert_int_equal(visualize_write_png(path, &im, &err), MR_OK);
        mr_image back = {0};
        assert_int_equal(image_load(path, 0, &back, &err), MR_OK);
        assert_int_equal(back.h, H);
        assert_int_equal(back.w, W);
        assert_memory_equal(back.pixels, im.pixels, (size_t)H * W * 3);
        image_free(&back);
        image_free(&im);
        assert_int_equal(count_entries(dir), 1); /* no temporary left */
    }
    unlink(path);
    rmdir(dir);
    free(dir);
}

static void test_png_errors(void **state)
{
    (void)state;
    char *dir = make_temp_dir();
    char path[256];
    mr_error err = {0};
    mr_image im = make_image(H, W, 3);

    assert_int_equal(visualize_write_png(NULL, &im, &err), MR_ERR_INTERNAL);
    mr_image empty = {NULL, H, W, 0};
    snprintf(path, sizeof path, "%s/out.png", dir);
    assert_int_equal(visualize_write_png(path, &empty, &err), MR_ERR_SHAPE);

    /* A directory that does not exist. */
    snprintf(path, sizeof path, "%s/missing/out.png", dir);
    assert_int_equal(visualize_write_png(path, &im, &err), MR_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(count_entries(dir), 0);

    /* A full device: the error is reported and the device is not replaced. */
    struct stat st;
    if (stat("/dev/full", &st) == 0 && S_ISCHR(st.st_mode)) {
        err.msg[0] = '\0';
        assert_int_equal(visualize_write_png("/dev/full", &im, &err), MR_ERR_IO);
        assert_non_null(strstr(err.msg, "/dev/full"));
        assert_non_null(strstr(err.msg, strerror(ENOSPC)));
        assert_int_equal(stat("/dev/full", &st), 0);
        assert_true(S_ISCHR(st.st_mode));
    } else {
        print_message("SKIP /dev/full: not a character device here\n");
    }

    /* A regular file that cannot grow (the file-size limit stands in for a
     * full disk): the temporary is removed and the target never appears. */
    snprintf(path, sizeof path, "%s/out.png", dir);
    struct rlimit old, small;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    small = old;
    small.rlim_cur = 100;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);
    const mr_status st_full = visualize_write_png(path, &im, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);
    assert_int_equal(st_full, MR_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_int_equal(count_entries(dir), 0);

    image_free(&im);
    rmdir(dir);
    free(dir);
}

/* A solid block filling its window exactly: its outline is where the
 * window ends (the background neighbours are all outside the window), so
 * the drawing must treat outside-the-window as background there. */
static void test_render_mask_window_border(void **state)
{
    (void)state;
    mr_image img = make_image(H, W, 2), out = {0};
    uint8_t block[6 * 4], c[3];
    memset(block, 1, sizeof block);
    mr_detection d = {{60, 50, 90, 70}, 0.8f, 1, block, {20, 30, 6, 4}}; /* box and label away from the block */
    mr_result res = {.width = W, .height = H, .count = 1, .dets = &d};
    mr_error err = {0};
    assert_int_equal(visualize_render(&img, &res, NULL, &out, &err), MR_OK);
    visualize_class_color(1, c);
    const uint8_t dark[3] = {visualize_darken(c[0]), visualize_darken(c[1]), visualize_darken(c[2])};
    for (int y = 28; y < 36; y++)
        for (int x = 18; x < 28; x++) {
            const uint8_t *o = px(&img, x, y), *p = px(&out, x, y);
            const int inside = x >= 20 && x < 26 && y >= 30 && y < 34;
            const int border = inside && (x == 20 || x == 25 || y == 30 || y == 33);
            if (!inside) {
                assert_memory_equal(p, o, 3);
            } else if (border) {
                assert_true(is_colour(p, dark));
            } else {
                const uint8_t want[3] = {visualize_blend(o[0], c[0]), visualize_blend(o[1], c[1]),
                                         visualize_blend(o[2], c[2])};
                assert_memory_equal(p, want, 3);
            }
        }
    image_free(&out);
    image_free(&img);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render_masks_boxes_labels),
        cmocka_unit_test(test_render_mask_window_border),
        cmocka_unit_test(test_render_no_detections_and_box_only),
        cmocka_unit_test(test_label_text_and_scale),
        cmocka_unit_test(test_render_errors),
        cmocka_unit_test(test_png_roundtrip_and_overwrite),
        cmocka_unit_test(test_png_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
