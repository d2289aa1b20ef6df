/* Unit tests for engine/io/image.c and image_preprocess.c: geometry, PNG/JPEG decoding and errors,
 * preprocessing on hand-checked cases. Bit-exact agreement with torchvision
 * is tests/parity/test_image_torch.py. */
#define _POSIX_C_SOURCE 200809L
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cmocka.h>
#include <jpeglib.h>
#include <png.h>

#include "io/image.h"
#include "core/tensor.h"
#include "ops/image_preprocess.h"
#include "ops/resize_cv2.h"
#include "ops/resize_cv2_uint8.h"
#include "ops/resize_pil.h"

/* torchvision's defaults, filled by hand (config.c is not linked here). */
static mr_input_config tv_config(void)
{
    mr_input_config c = {
        .channel_order = MR_CHANNELS_RGB,
        .pixel_scale = 1.0f / 255.0f,
        .pixel_mean = {0.485f, 0.456f, 0.406f},
        .pixel_std = {0.229f, 0.224f, 0.225f},
        .min_size = 800,
        .max_size = 1333,
        .resize_rounding = MR_RESIZE_FLOOR,
        .size_divisibility = 32,
        .max_image_side = 20000,
    };
    return c;
}

/* ---- temp files ---- */

static void temp_path(char *path, size_t n)
{
    snprintf(path, n, "/tmp/test_image_XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(data, 1, n, f), n);
    fclose(f);
}

static uint8_t *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc((size_t)len + 1);
    assert_non_null(buf);
    assert_int_equal(fread(buf, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return buf;
}

/* Writes a PNG with libpng from raw samples `data` laid out as the colour
 * type and depth say (16-bit samples big-endian, as PNG stores them). */
typedef struct {
    int color_type, bit_depth, interlace;
    const png_color *palette;
    int num_palette;
    const png_byte *trans;
    int num_trans;
} png_spec;

static void write_png(const char *path, int h, int w, const png_spec *s, const uint8_t *data)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png_create_info_struct(png);
    assert_non_null(png);
    assert_non_null(info);
    if (setjmp(png_jmpbuf(png))) fail_msg("libpng write failed");
    png_init_io(png, f);
    png_set_IHDR(png, info, (png_uint_32)w, (png_uint_32)h, s->bit_depth, s->color_type,
                 s->interlace ? PNG_INTERLACE_ADAM7 : PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT,
                 PNG_FILTER_TYPE_DEFAULT);
    if (s->palette) png_set_PLTE(png, info, s->palette, s->num_palette);
    if (s->trans) png_set_tRNS(png, info, s->trans, s->num_trans, NULL);
    png_write_info(png, info);
    int channels = s->color_type == PNG_COLOR_TYPE_RGB         ? 3
                   : s->color_type == PNG_COLOR_TYPE_RGB_ALPHA  ? 4
                   : s->color_type == PNG_COLOR_TYPE_GRAY_ALPHA ? 2
                                                                : 1;
    size_t rowbytes = ((size_t)w * channels * s->bit_depth + 7) / 8;
    png_bytep *rows = malloc((size_t)h * sizeof *rows);
    for (int y = 0; y < h; y++) rows[y] = (png_bytep)data + (size_t)y * rowbytes;
    if (s->interlace) png_set_interlace_handling(png);
    png_write_image(png, rows);
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(rows);
    fclose(f);
}

/* Loads path, expecting success, and compares with want ([h,w,3]). */
static void expect_pixels(const char *path, int h, int w, const uint8_t *want)
{
    mr_image img;
    mr_error err = {0};
    mr_status st = image_load(path, 1000, &img, &err);
    if (st != MR_OK) fail_msg("%s", err.msg);
    assert_int_equal(img.h, h);
    assert_int_equal(img.w, w);
    assert_memory_equal(img.pixels, want, (size_t)h * w * 3);
    image_free(&img);
    assert_null(img.pixels);
}

static void expect_error(const char *path, int max_side, mr_status want, const char *fragment)
{
    mr_image img = {(uint8_t *)1, 7, 7, 0};
    mr_error err = {0};
    mr_status st = image_load(path, max_side, &img, &err);
    assert_int_equal(st, want);
    assert_int_equal(err.status, want);
    assert_null(img.pixels);
    assert_int_equal(img.h, 0);
    if (!strstr(err.msg, path)) fail_msg("message lacks the file name: %s", err.msg);
    if (fragment && !strstr(err.msg, fragment)) fail_msg("message lacks '%s': %s", fragment, err.msg);
}

/* Inputs that are not regular files are refused at once by name (a FIFO
 * with no writer would block open() for ever), and formats we know but do
 * not read are named with what to do. */
static void test_not_regular_files_and_unsupported_formats(void **state)
{
    (void)state;
    char dir[] = "/tmp/test_image_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char fifo[96], sock[96], heic[96], avif[96];
    snprintf(fifo, sizeof fifo, "%s/x.png", dir);
    snprintf(sock, sizeof sock, "%s/s.png", dir);
    snprintf(heic, sizeof heic, "%s/h.jpg", dir);
    snprintf(avif, sizeof avif, "%s/a.png", dir);
    assert_int_equal(mkfifo(fifo, 0600), 0);
    expect_error(fifo, 1000, MR_ERR_IO, "not a regular file (a FIFO)");
    expect_error(dir, 1000, MR_ERR_IO, "not a regular file (a folder)");
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", sock);
    assert_int_equal(bind(s, (struct sockaddr *)&addr, sizeof addr), 0);
    expect_error(sock, 1000, MR_ERR_IO, "not a regular file");
    close(s);
    static const uint8_t heic_bytes[32] = {0, 0, 0, 24, 'f', 't', 'y', 'p', 'h', 'e', 'i', 'c', 0, 0, 0, 0,
                                           'm', 'i', 'f', '1', 'h', 'e', 'i', 'c'};
    static const uint8_t avif_bytes[32] = {0, 0, 0, 24, 'f', 't', 'y', 'p', 'a', 'v', 'i', 'f', 0, 0, 0, 0,
                                           'm', 'i', 'f', '1', 'm', 'i', 'a', 'f'};
    write_bytes(heic, heic_bytes, sizeof heic_bytes);
    expect_error(heic, 1000, MR_ERR_UNSUPPORTED, "HEIC image: not supported; convert it to JPEG or PNG");
    write_bytes(avif, avif_bytes, sizeof avif_bytes);
    expect_error(avif, 1000, MR_ERR_UNSUPPORTED, "AVIF image: not supported; convert it to JPEG or PNG");
    unlink(fifo);
    unlink(sock);
    unlink(heic);
    unlink(avif);
    rmdir(dir);
}

/* ---- geometry ---- */

static void test_geometry_torchvision_upscale(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    mr_input_geometry g;
    mr_error err = {0};
    assert_int_equal(image_geometry(&cfg, 480, 640, &g, &err), MR_OK);
    assert_int_equal(g.in_h, 480);
    assert_int_equal(g.in_w, 640);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1066); /* floor, not Detectron's 1067 */
    assert_int_equal(g.padded_h, 800);
    assert_int_equal(g.padded_w, 1088);
    assert_float_equal(g.scale_h, 800.0f / 480.0f, 1e-6);
    assert_float_equal(g.scale_w, 1066.0f / 640.0f, 1e-6);
}

static void test_geometry_identity(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    mr_input_geometry g;
    mr_error err = {0};
    assert_int_equal(image_geometry(&cfg, 800, 1216, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1216);
    assert_int_equal(g.padded_h, 800);
    assert_int_equal(g.padded_w, 1216);
    assert_true(g.scale_h == 1.0f && g.scale_w == 1.0f);
}

static void test_geometry_downscale_and_long_cap(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    mr_input_geometry g;
    mr_error err = {0};
    assert_int_equal(image_geometry(&cfg, 1000, 1500, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1200);
    assert_int_equal(g.padded_w, 1216);
    /* long side capped: 41x1000 -> 54x1333 (checked against torchvision) */
    assert_int_equal(image_geometry(&cfg, 41, 1000, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 54);
    assert_int_equal(g.resized_w, 1333);
    assert_int_equal(g.padded_h, 64);
    assert_int_equal(g.padded_w, 1344);
    /* 799x1000 -> 800x1001 (torchvision) */
    assert_int_equal(image_geometry(&cfg, 799, 1000, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1001);
}

static void test_geometry_detectron_round(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    cfg.resize_rounding = MR_RESIZE_ROUND;
    mr_input_geometry g;
    mr_error err = {0};
    assert_int_equal(image_geometry(&cfg, 480, 640, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1067);
    assert_int_equal(g.padded_w, 1088);
    assert_float_equal(g.scale_h, 800.0 / 480.0, 1e-6);
    assert_true(g.scale_h == g.scale_w);
    /* round(800/600*1000) = 1333 is not > 1333: the short-side scale stays */
    assert_int_equal(image_geometry(&cfg, 600, 1000, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1333);
    /* 500x1000: round(1600) > 1333, s = 1333/1000 = 1.33299999999999996 in
     * double, so 500*s = 666.4999... rounds to 666 (as cv2 would) */
    assert_int_equal(image_geometry(&cfg, 500, 1000, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 666);
    assert_int_equal(g.resized_w, 1333);
}

/* detectron2's get_output_shape: halves round up (int(x + 0.5)) where
 * Detectron's cv2 rounds them to even, and the cap scales the float sizes
 * rather than recomputing the scale from the long side. */
static void test_geometry_detectron2(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    cfg.resize_rounding = MR_RESIZE_DETECTRON2;
    mr_input_geometry g;
    mr_error err = {0};
    /* 320x421: scale 2.5, 1052.5 -> 1053 (ROUND gives 1052) */
    assert_int_equal(image_geometry(&cfg, 320, 421, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1053);
    assert_int_equal(g.padded_w, 1056);
    assert_true(g.scale_w == 1053.0f / 421.0f);
    assert_true(g.factor_w == 1053.0 / 421.0);
    /* 305x610: 800x1600 capped by 1333/1600: 666.5 -> 667 (ROUND: 666) */
    assert_int_equal(image_geometry(&cfg, 305, 610, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 667);
    assert_int_equal(g.resized_w, 1333);
    /* portrait, and a square */
    assert_int_equal(image_geometry(&cfg, 640, 480, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 1067);
    assert_int_equal(g.resized_w, 800);
    assert_int_equal(image_geometry(&cfg, 500, 500, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 800);
    /* too elongated is refused as for the other rules */
    assert_int_equal(image_geometry(&cfg, 1, 20000, &g, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "elongated"));
    cfg.resize_rounding = MR_RESIZE_ROUND;
    assert_int_equal(image_geometry(&cfg, 320, 421, &g, &err), MR_OK);
    assert_int_equal(g.resized_w, 1052);
    assert_true(g.factor_w == 2.5);
}

/* mmcv's rescale_size: one double scale min(1333/long, 800/short), then
 * int(side * s + 0.5) on both sides, so the short side is not forced to
 * min_size; the box scale is new/old per axis, as mmdet's scale_factor. */
static void test_geometry_mmdet(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    cfg.resize_rounding = MR_RESIZE_MMDET;
    mr_input_geometry g;
    mr_error err = {0};
    /* 480x640: s = 800/480, 1066.67 -> 1067 (FLOOR: 1066) */
    assert_int_equal(image_geometry(&cfg, 480, 640, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1067);
    assert_int_equal(g.padded_h, 800);
    assert_int_equal(g.padded_w, 1088);
    assert_true(g.scale_h == 800.0f / 480.0f);
    assert_true(g.scale_w == 1067.0f / 640.0f);
    assert_true(g.factor_w == 1067.0 / 640.0);
    assert_true(g.factor_h == 800.0 / 480.0);
    /* 320x421: s = 2.5, 1052.5 -> 1053 (ROUND: 1052) */
    assert_int_equal(image_geometry(&cfg, 320, 421, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1053);
    /* 305x610: capped, s = 1333/610, 666.5 -> 667 */
    assert_int_equal(image_geometry(&cfg, 305, 610, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 667);
    assert_int_equal(g.resized_w, 1333);
    /* portrait; a square; a downscale */
    assert_int_equal(image_geometry(&cfg, 640, 427, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 1199);
    assert_int_equal(g.resized_w, 800);
    assert_int_equal(image_geometry(&cfg, 3, 3, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 800);
    assert_int_equal(image_geometry(&cfg, 1500, 2500, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1333);
    /* 16x20000: s = 1333/20000, 1.0664 + 0.5 -> 1 and 1333 (FLOOR: 1332) */
    assert_int_equal(image_geometry(&cfg, 16, 20000, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 1);
    assert_int_equal(g.resized_w, 1333);
    /* 1x20000: the short side would be int(0.57) = 0 */
    assert_int_equal(image_geometry(&cfg, 1, 20000, &g, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "elongated"));
    /* mmcv takes the larger of the pair as the long edge's limit */
    cfg.min_size = 1333;
    cfg.max_size = 800;
    assert_int_equal(image_geometry(&cfg, 480, 640, &g, &err), MR_OK);
    assert_int_equal(g.resized_h, 800);
    assert_int_equal(g.resized_w, 1067);
}

static void test_geometry_refusals(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    mr_input_geometry g;
    mr_error err = {0};
    assert_int_equal(image_geometry(&cfg, 1, 100000, &g, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "max_image_side"));
    assert_int_equal(image_geometry(&cfg, 0, 0, &g, &err), MR_ERR_RANGE);
    assert_int_equal(image_geometry(&cfg, -3, 10, &g, &err), MR_ERR_RANGE);
    /* within the side limit, but the short side would resize to 0 */
    assert_int_equal(image_geometry(&cfg, 1, 20000, &g, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "elongated"));
    /* an extreme but possible aspect stays sane; torchvision gives 1x1332
     * ((1/20000)*1333 in float is just under 1333/20000) */
    assert_int_equal(image_geometry(&cfg, 16, 20000, &g, &err), MR_OK);
    assert_int_equal(g.resized_w, 1332);
    assert_int_equal(g.resized_h, 1);
    assert_int_equal(g.padded_h, 32);
    cfg.min_size = 0;
    assert_int_equal(image_geometry(&cfg, 10, 10, &g, &err), MR_ERR_CONFIG);
}

/* ---- PNG decoding ---- */

static void test_png_rgb8_roundtrip(void **state)
{
    (void)state;
    enum { H = 5, W = 7 };
    uint8_t px[H * W * 3];
    for (int i = 0; i < H * W * 3; i++) px[i] = (uint8_t)(i * 37 + 11);
    char path[64];
    temp_path(path, sizeof path);
    png_spec s = {PNG_COLOR_TYPE_RGB, 8, 0, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, px);
    expect_pixels(path, H, W, px);
    /* the direct entry point as well */
    mr_image img;
    mr_error err = {0};
    assert_int_equal(image_load_png(path, 1000, &img, &err), MR_OK);
    assert_memory_equal(img.pixels, px, sizeof px);
    image_free(&img);
    unlink(path);
}

static void test_png_variants(void **state)
{
    (void)state;
    enum { H = 9, W = 11, N = H * W };
    char path[64];
    temp_path(path, sizeof path);
    uint8_t want[N * 3];

    /* RGBA 8: alpha dropped */
    uint8_t rgba[N * 4];
    for (int i = 0; i < N; i++) {
        for (int c = 0; c < 3; c++) want[i * 3 + c] = rgba[i * 4 + c] = (uint8_t)(i * 7 + c * 50);
        rgba[i * 4 + 3] = (uint8_t)(i % 3 ? 0 : 128);
    }
    png_spec s = {PNG_COLOR_TYPE_RGB_ALPHA, 8, 0, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, rgba);
    expect_pixels(path, H, W, want);
    s.interlace = 1; /* Adam7 */
    write_png(path, H, W, &s, rgba);
    expect_pixels(path, H, W, want);

    /* grey 8, grey+alpha 8 */
    uint8_t grey[N], ga[N * 2];
    for (int i = 0; i < N; i++) {
        grey[i] = (uint8_t)(i * 5);
        ga[i * 2] = grey[i];
        ga[i * 2 + 1] = (uint8_t)i;
        want[i * 3] = want[i * 3 + 1] = want[i * 3 + 2] = grey[i];
    }
    s = (png_spec){PNG_COLOR_TYPE_GRAY, 8, 0, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, grey);
    expect_pixels(path, H, W, want);
    s = (png_spec){PNG_COLOR_TYPE_GRAY_ALPHA, 8, 1, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, ga);
    expect_pixels(path, H, W, want);

    /* grey 2-bit: levels x85; rows are packed, padded to a byte */
    enum { RB2 = (W * 2 + 7) / 8 };
    uint8_t g2[H * RB2];
    memset(g2, 0, sizeof g2);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++) {
            int v = (x + y) & 3;
            g2[y * RB2 + x / 4] |= (uint8_t)(v << (6 - 2 * (x % 4)));
            for (int c = 0; c < 3; c++) want[(y * W + x) * 3 + c] = (uint8_t)(v * 85);
        }
    s = (png_spec){PNG_COLOR_TYPE_GRAY, 2, 0, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, g2);
    expect_pixels(path, H, W, want);

    /* grey 16: high byte */
    uint8_t g16[N * 2];
    for (int i = 0; i < N; i++) {
        unsigned v = (unsigned)i * 661u;
        g16[i * 2] = (uint8_t)(v >> 8);
        g16[i * 2 + 1] = (uint8_t)v;
        want[i * 3] = want[i * 3 + 1] = want[i * 3 + 2] = (uint8_t)(v >> 8);
    }
    s = (png_spec){PNG_COLOR_TYPE_GRAY, 16, 0, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, g16);
    expect_pixels(path, H, W, want);

    /* RGB 16 and RGBA 16, interlaced: high byte */
    uint8_t rgb16[N * 8];
    for (int i = 0; i < N; i++)
        for (int c = 0; c < 4; c++) {
            unsigned v = (unsigned)(i * 613 + c * 9000) & 0xffffu;
            rgb16[(i * 4 + c) * 2] = (uint8_t)(v >> 8);
            rgb16[(i * 4 + c) * 2 + 1] = (uint8_t)v;
            if (c < 3) want[i * 3 + c] = (uint8_t)(v >> 8);
        }
    s = (png_spec){PNG_COLOR_TYPE_RGB_ALPHA, 16, 1, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, rgb16);
    expect_pixels(path, H, W, want);
    uint8_t rgb16b[N * 6];
    for (int i = 0; i < N; i++) memcpy(rgb16b + i * 6, rgb16 + i * 8, 6);
    s = (png_spec){PNG_COLOR_TYPE_RGB, 16, 0, NULL, 0, NULL, 0};
    write_png(path, H, W, &s, rgb16b);
    expect_pixels(path, H, W, want);

    /* palette 8 and 4-bit, with tRNS (dropped) */
    png_color pal[16];
    for (int k = 0; k < 16; k++) pal[k] = (png_color){(png_byte)(k * 16), (png_byte)(255 - k * 3), (png_byte)(k * k)};
    png_byte trans[4] = {0, 64, 128, 255};
    uint8_t idx[N];
    for (int i = 0; i < N; i++) {
        idx[i] = (uint8_t)(i % 16);
        want[i * 3] = pal[idx[i]].red;
        want[i * 3 + 1] = pal[idx[i]].green;
        want[i * 3 + 2] = pal[idx[i]].blue;
    }
    s = (png_spec){PNG_COLOR_TYPE_PALETTE, 8, 0, pal, 16, trans, 4};
    write_png(path, H, W, &s, idx);
    expect_pixels(path, H, W, want);
    enum { RB4 = (W * 4 + 7) / 8 };
    uint8_t p4[H * RB4];
    memset(p4, 0, sizeof p4);
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            p4[y * RB4 + x / 2] |= (uint8_t)(idx[y * W + x] << (x % 2 ? 0 : 4));
    s = (png_spec){PNG_COLOR_TYPE_PALETTE, 4, 1, pal, 16, trans, 4};
    write_png(path, H, W, &s, p4);
    expect_pixels(path, H, W, want);
    unlink(path);
}

static void test_png_errors(void **state)
{
    (void)state;
    char path[64], good[64];
    temp_path(path, sizeof path);
    temp_path(good, sizeof good);
    enum { H = 40, W = 50 };
    uint8_t *px = malloc(H * W * 3);
    for (int i = 0; i < H * W * 3; i++) px[i] = (uint8_t)((i * 2654435761u) >> 24);
    png_spec s = {PNG_COLOR_TYPE_RGB, 8, 0, NULL, 0, NULL, 0};
    write_png(good, H, W, &s, px);
    size_t n;
    uint8_t *bytes = read_all(good, &n);

    write_bytes(path, "", 0);
    expect_error(path, 1000, MR_ERR_FORMAT, "empty");
    assert_int_equal(image_load_png(path, 1000, &(mr_image){0}, &(mr_error){0}), MR_ERR_FORMAT);

    write_bytes(path, "hello, world\n", 13);
    expect_error(path, 1000, MR_ERR_FORMAT, "not an image");
    mr_error err = {0};
    mr_image img;
    assert_int_equal(image_load_png(path, 1000, &img, &err), MR_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "not a PNG"));
    assert_non_null(strstr(err.msg, path));

    /* truncated at several points: in the header, in IDAT, before IEND */
    size_t cuts[] = {12, 30, n / 2, n - 5};
    for (size_t k = 0; k < sizeof cuts / sizeof cuts[0]; k++) {
        write_bytes(path, bytes, cuts[k]);
        expect_error(path, 1000, MR_ERR_FORMAT, "truncated");
    }

    /* corrupt: IHDR CRC broken; image data scrambled */
    uint8_t *bad = malloc(n);
    memcpy(bad, bytes, n);
    bad[29] ^= 0xff;
    write_bytes(path, bad, n);
    expect_error(path, 1000, MR_ERR_FORMAT, "corrupt");
    memcpy(bad, bytes, n);
    for (size_t i = 41; i < n - 12; i++) bad[i] = (uint8_t)(bad[i] * 31 + 7);
    write_bytes(path, bad, n);
    expect_error(path, 1000, MR_ERR_FORMAT, "corrupt");

    /* zero width in IHDR */
    memcpy(bad, bytes, n);
    memset(bad + 16, 0, 4);
    write_bytes(path, bad, n);
    expect_error(path, 1000, MR_ERR_FORMAT, "zero size");

    /* too large for max_side: refused before decoding */
    expect_error(good, 49, MR_ERR_RANGE, "larger than");
    /* a huge IHDR with no data behind it is refused by size, not read */
    memcpy(bad, bytes, 33);
    bad[16] = 0x00, bad[17] = 0x10, bad[18] = 0x00, bad[19] = 0x00; /* w = 1048576 */
    write_bytes(path, bad, 33);
    expect_error(path, 20000, MR_ERR_RANGE, "1048576");

    /* missing file */
    mr_error e2 = {0};
    assert_int_equal(image_load("/nonexistent/dir/x.png", 1000, &img, &e2), MR_ERR_IO);
    assert_non_null(strstr(e2.msg, "/nonexistent/dir/x.png"));

    free(bad);
    free(bytes);
    free(px);
    unlink(path);
    unlink(good);
}

/* PNG's CRC-32 (ISO 3309), bitwise: the tests need it only for a few chunks. */
static uint32_t png_crc(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1)));
    }
    return c ^ 0xffffffffu;
}

/* Appends a chunk (declared length `len`, `n` body bytes actually written) at out. */
static size_t put_chunk(uint8_t *out, const char *type, uint32_t len, const void *body, size_t n)
{
    uint8_t *p = out;
    for (int i = 3; i >= 0; i--) *p++ = (uint8_t)(len >> (8 * i));
    memcpy(p, type, 4);
    memcpy(p + 4, body, n);
    uint32_t crc = png_crc(p, 4 + n);
    p += 4 + n;
    for (int i = 3; i >= 0; i--) *p++ = (uint8_t)(crc >> (8 * i));
    return (size_t)(p - out);
}

/* Found by tests/fuzz/fuzz_png.c: a 50-byte PNG whose zTXt chunk declares
 * 1 GiB made libpng allocate that much before reading (its length check only
 * warns). Ancillary chunks other than tRNS are now skipped unread; they never
 * changed the pixels, and a truncated one is still a truncated file. */
static void test_png_ancillary_chunks(void **state)
{
    (void)state;
    char good[64], path[64];
    temp_path(good, sizeof good);
    temp_path(path, sizeof path);
    enum { H = 6, W = 7 };
    uint8_t px[H * W * 3];
    for (int i = 0; i < H * W * 3; i++) px[i] = (uint8_t)(i * 37 + 11);
    png_spec s = {PNG_COLOR_TYPE_RGB, 8, 0, NULL, 0, NULL, 0};
    write_png(good, H, W, &s, px);
    size_t n;
    uint8_t *bytes = read_all(good, &n);
    uint8_t *buf = malloc(n + 512);
    const size_t ihdr_end = 33; /* signature 8 + IHDR 25 */

    /* text, gamma, a broken ICC profile and EXIF after IHDR: same pixels */
    size_t at = ihdr_end;
    memcpy(buf, bytes, ihdr_end);
    at += put_chunk(buf + at, "tEXt", 9, "Comment\0x", 9);
    at += put_chunk(buf + at, "zTXt", 12, "Title\0\0\x78\x9c\x03\0\0", 12);
    at += put_chunk(buf + at, "gAMA", 4, "\0\0\xb1\x8f", 4);
    at += put_chunk(buf + at, "iCCP", 8, "icc\0\0\xde\xad\x00", 8);
    at += put_chunk(buf + at, "eXIf", 4, "MM\0*", 4);
    memcpy(buf + at, bytes + ihdr_end, n - ihdr_end);
    write_bytes(path, buf, at + n - ihdr_end);
    expect_pixels(path, H, W, px);

    /* a zTXt declaring 1 GiB, the file ending 13 bytes into it */
    memcpy(buf, bytes, ihdr_end);
    at = ihdr_end + put_chunk(buf + ihdr_end, "zTXt", 0x4000002du, "Title\0\0\x78\x9c\x03\0\0\0", 13);
    write_bytes(path, buf, at - 4); /* no CRC: the body runs past the end */
    expect_error(path, 1000, MR_ERR_FORMAT, "truncated");

    free(buf);
    free(bytes);
    unlink(path);
    unlink(good);
}

/* ---- JPEG ---- */

static void write_jpeg(const char *path, int h, int w, int comps, const uint8_t *px, int quality)
{
    struct jpeg_compress_struct ci;
    struct jpeg_error_mgr jerr;
    ci.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&ci);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    jpeg_stdio_dest(&ci, f);
    ci.image_width = (JDIMENSION)w;
    ci.image_height = (JDIMENSION)h;
    ci.input_components = comps;
    ci.in_color_space = comps == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&ci);
    jpeg_set_quality(&ci, quality, TRUE);
    jpeg_start_compress(&ci, TRUE);
    while (ci.next_scanline < ci.image_height) {
        JSAMPROW row = (JSAMPROW)px + (size_t)ci.next_scanline * w * comps;
        jpeg_write_scanlines(&ci, &row, 1);
    }
    jpeg_finish_compress(&ci);
    jpeg_destroy_compress(&ci);
    fclose(f);
}

static void test_jpeg(void **state)
{
    (void)state;
    enum { H = 24, W = 40 };
    char path[64];
    temp_path(path, sizeof path);
    uint8_t px[H * W * 3], want[H * W * 3];
    for (int i = 0; i < H * W; i++) px[i * 3] = 200, px[i * 3 + 1] = 100, px[i * 3 + 2] = 30;
    write_jpeg(path, H, W, 3, px, 100);
    mr_image img;
    mr_error err = {0};
    assert_int_equal(image_load(path, 1000, &img, &err), MR_OK);
    assert_int_equal(img.h, H);
    assert_int_equal(img.w, W);
    for (int i = 0; i < H * W * 3; i++) assert_true(abs((int)img.pixels[i] - (int)px[i]) <= 2);
    image_free(&img);

    uint8_t grey[H * W];
    for (int i = 0; i < H * W; i++) grey[i] = 77;
    for (int i = 0; i < H * W * 3; i++) want[i] = 77;
    write_jpeg(path, H, W, 1, grey, 100);
    expect_pixels(path, H, W, want);

    write_jpeg(path, H, W, 3, px, 90);
    expect_error(path, 39, MR_ERR_RANGE, "larger than");
    size_t n;
    uint8_t *bytes = read_all(path, &n);
    write_bytes(path, bytes, n / 2);
    expect_error(path, 1000, MR_ERR_FORMAT, "truncated");
    write_bytes(path, bytes, 3);
    expect_error(path, 1000, MR_ERR_FORMAT, "JPEG");
    free(bytes);
    unlink(path);
}

/* ---- preprocessing ---- */

static float *run_preprocess(const mr_input_config *cfg, const mr_image *img, mr_input_geometry *g)
{
    mr_error err = {0};
    assert_int_equal(image_geometry(cfg, img->h, img->w, g, &err), MR_OK);
    void *scratch = malloc(image_preprocess_scratch_bytes(g) + 1);
    float *data = malloc((size_t)g->padded_h * g->padded_w * 3 * sizeof(float));
    mr_tensor t = mr_tensor_make(data, 1, g->padded_h, g->padded_w, 3);
    image_preprocess(cfg, img, g, scratch, &t);
    free(scratch);
    return data;
}

/* Scale exactly 1: output = normalised pixels, zero padding, BGR swapped. */
static void test_preprocess_identity_bgr_padding(void **state)
{
    (void)state;
    mr_input_config cfg = {
        .channel_order = MR_CHANNELS_BGR,
        .pixel_scale = 1.0f,
        .pixel_mean = {102.9801f, 115.9465f, 122.7717f},
        .pixel_std = {1, 1, 1},
        .min_size = 5,
        .max_size = 100,
        .resize_rounding = MR_RESIZE_ROUND,
        .size_divisibility = 4,
        .max_image_side = 1000,
    };
    enum { H = 5, W = 6 };
    uint8_t px[H * W * 3];
    for (int i = 0; i < H * W * 3; i++) px[i] = (uint8_t)(i * 13);
    mr_image img = {px, H, W, 0};
    mr_input_geometry g;
    float *out = run_preprocess(&cfg, &img, &g);
    assert_int_equal(g.resized_h, H);
    assert_int_equal(g.resized_w, W);
    assert_int_equal(g.padded_h, 8);
    assert_int_equal(g.padded_w, 8);
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++)
            for (int c = 0; c < 3; c++) {
                float v = out[(y * 8 + x) * 3 + c];
                if (y >= H || x >= W) {
                    assert_true(v == 0.0f);
                } else {
                    float want = (float)px[(y * W + x) * 3 + (2 - c)] - cfg.pixel_mean[c];
                    assert_true(v == want);
                }
            }
    free(out);
}

/* 2x2 -> 4x4 upscale: torch's taps for in 2, out 4 are src 0 (clamped),
 * 0.25, 0.75, 1.25 -> (1, 1). With a value 10*x + 100*y in every channel
 * the result is separable: 10*sx + 100*sy with sx, sy in {0, .25, .75, 1}. */
static void test_preprocess_upscale_hand(void **state)
{
    (void)state;
    mr_input_config cfg = {
        .channel_order = MR_CHANNELS_RGB,
        .pixel_scale = 1.0f,
        .pixel_mean = {0, 0, 0},
        .pixel_std = {1, 1, 1},
        .min_size = 4,
        .max_size = 100,
        .resize_rounding = MR_RESIZE_FLOOR,
        .size_divisibility = 1,
        .max_image_side = 1000,
    };
    uint8_t px[2 * 2 * 3];
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++)
            for (int c = 0; c < 3; c++) px[(y * 2 + x) * 3 + c] = (uint8_t)(10 * x + 100 * y);
    mr_image img = {px, 2, 2, 0};
    mr_input_geometry g;
    float *out = run_preprocess(&cfg, &img, &g);
    assert_int_equal(g.resized_h, 4);
    assert_int_equal(g.padded_w, 4);
    const float s[4] = {0.0f, 0.25f, 0.75f, 1.0f};
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 4; x++)
            for (int c = 0; c < 3; c++)
                assert_float_equal(out[(y * 4 + x) * 3 + c], 10 * s[x] + 100 * s[y], 1e-5);
    free(out);
}

/* Pillow's bilinear on the uint8 image, 2x2 -> 4x4 (an upscale: plain
 * linear taps 0, .25, .75, 1 on each axis), then normalisation. Each pass
 * rounds to uint8 with halves up: the row 0, 10 becomes 0, 3 (2.5), 8
 * (7.5), 10, where torch would keep 2.5 and 7.5. */
static void test_preprocess_pil_hand(void **state)
{
    (void)state;
    mr_input_config cfg = {
        .channel_order = MR_CHANNELS_BGR,
        .pixel_scale = 1.0f,
        .pixel_mean = {1, 2, 3},
        .pixel_std = {1, 1, 1},
        .min_size = 4,
        .max_size = 100,
        .resize_rounding = MR_RESIZE_DETECTRON2,
        .resize_method = MR_RESIZE_PIL_BILINEAR,
        .size_divisibility = 8,
        .max_image_side = 1000,
    };
    uint8_t px[2 * 2 * 3];
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++)
            for (int c = 0; c < 3; c++) px[(y * 2 + x) * 3 + c] = (uint8_t)(10 * x + 100 * y + c);
    mr_image img = {px, 2, 2, 0};
    mr_input_geometry g;
    float *out = run_preprocess(&cfg, &img, &g);
    assert_int_equal(g.resized_h, 4);
    assert_int_equal(g.resized_w, 4);
    assert_int_equal(g.padded_h, 8);
    /* per channel c the row pass gives 10*{0, .25, .75, 1} + c rounded:
     * (halves up: c=1 gives 1 3.5 8.5 11 -> 1 4 9 11); then the column
     * pass adds 100*{0, .25, .75, 1}, exact */
    const int col[3][4] = {{0, 3, 8, 10}, {1, 4, 9, 11}, {2, 5, 10, 12}};
    const int row[4] = {0, 25, 75, 100};
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++)
            for (int c = 0; c < 3; c++) {
                const float v = out[(y * 8 + x) * 3 + c];
                if (y >= 4 || x >= 4) {
                    assert_true(v == 0.0f);
                    continue;
                }
                const int src = 2 - c; /* BGR */
                assert_true(v == (float)(col[src][x] + row[y]) - cfg.pixel_mean[c]);
            }
    free(out);
}

/* cv2's INTER_LINEAR takes the factor, not the rounded sizes: 3x4 with
 * min_size 4 has s = 4/3 and resizes to 4x5 (round(5.33)); columns sit at
 * (d + .5) * .75 - .5 = -.125 (clamped to 0), .625, 1.375, 2.125, 2.875,
 * where in/out = .8 would give .7 for d = 1. Rows: -.125, .625, 1.375,
 * 2.125, the last clipped to row 2 on both taps. */
static void test_preprocess_cv2_hand(void **state)
{
    (void)state;
    mr_input_config cfg = {
        .channel_order = MR_CHANNELS_RGB,
        .pixel_scale = 1.0f,
        .pixel_mean = {0, 0, 0},
        .pixel_std = {1, 1, 1},
        .min_size = 4,
        .max_size = 100,
        .resize_rounding = MR_RESIZE_ROUND,
        .resize_method = MR_RESIZE_CV2_LINEAR,
        .size_divisibility = 1,
        .max_image_side = 1000,
    };
    uint8_t px[3 * 4 * 3];
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 4; x++)
            for (int c = 0; c < 3; c++) px[(y * 4 + x) * 3 + c] = (uint8_t)(10 * x + 100 * y);
    mr_image img = {px, 3, 4, 0};
    mr_input_geometry g;
    float *out = run_preprocess(&cfg, &img, &g);
    assert_int_equal(g.resized_h, 4);
    assert_int_equal(g.resized_w, 5);
    const float sx[5] = {0.0f, 0.625f, 1.375f, 2.125f, 2.875f};
    const float sy[4] = {0.0f, 0.625f, 1.375f, 2.0f};
    for (int y = 0; y < 4; y++)
        for (int x = 0; x < 5; x++)
            for (int c = 0; c < 3; c++)
                assert_float_equal(out[(y * 5 + x) * 3 + c], 10 * sx[x] + 100 * sy[y], 1e-4);
    free(out);
}

/* OpenCV's INTER_LINEAR on the uint8 image, 2x2 -> 4x4 (scale 0.5: taps
 * at -.25 (one tap), .25, .75, 1.25 (one tap) on each axis), then
 * normalisation. The values are cv2.resize's (opencv-python-headless
 * 4.10.0.84): the vertical pass floors each row's 16-bit product before
 * rounding, so the exact 2.5 and 7.5 of row 0 come out as 2 and 7 (Pillow
 * gives 3 and 8), and the first row, weighted .25/.75 between row 0 and
 * itself, stays row 0. */
static void test_preprocess_cv2_uint8_hand(void **state)
{
    (void)state;
    mr_input_config cfg = {
        .channel_order = MR_CHANNELS_RGB,
        .pixel_scale = 1.0f,
        .pixel_mean = {0, 0, 0},
        .pixel_std = {1, 1, 1},
        .min_size = 4,
        .max_size = 100,
        .resize_rounding = MR_RESIZE_MMDET,
        .resize_method = MR_RESIZE_CV2_LINEAR_UINT8,
        .size_divisibility = 8,
        .max_image_side = 1000,
    };
    uint8_t px[2 * 2 * 3];
    for (int y = 0; y < 2; y++)
        for (int x = 0; x < 2; x++)
            for (int c = 0; c < 3; c++) px[(y * 2 + x) * 3 + c] = (uint8_t)(10 * x + 100 * y + c);
    mr_image img = {px, 2, 2, 0};
    mr_input_geometry g;
    float *out = run_preprocess(&cfg, &img, &g);
    assert_int_equal(g.resized_h, 4);
    assert_int_equal(g.resized_w, 4);
    assert_int_equal(g.padded_h, 8);
    static const int want[3][4][4] = {
        {{0, 2, 7, 10}, {25, 27, 32, 35}, {75, 77, 82, 85}, {100, 102, 107, 110}},
        {{1, 3, 8, 11}, {26, 28, 33, 36}, {76, 78, 83, 86}, {101, 103, 108, 111}},
        {{2, 4, 9, 12}, {27, 29, 34, 37}, {77, 79, 84, 87}, {102, 104, 109, 112}},
    };
    for (int y = 0; y < 8; y++)
        for (int x = 0; x < 8; x++)
            for (int c = 0; c < 3; c++) {
                const float v = out[(y * 8 + x) * 3 + c];
                assert_true(v == (y >= 4 || x >= 4 ? 0.0f : (float)want[c][y][x]));
            }
    free(out);
}

/* cv::resize's other paths, values from cv2.resize: exactly half on both
 * axes is INTER_AREA's 2x2 mean, rounding half up (1+2+3+4 = 10 -> 3); a
 * half on one axis only stays bilinear (the taps at .5 give (1+2)/2 -> 2,
 * (3+4)/2 -> 4); equal sizes copy. Neither needs scratch. */
static void test_resize_cv2_uint8_paths(void **state)
{
    (void)state;
    static const uint8_t g4[4][4] = {{1, 2, 3, 4}, {3, 4, 7, 8}, {9, 10, 11, 12}, {13, 14, 15, 17}};
    uint8_t src[4 * 4 * 3], dst[4 * 4 * 3];
    for (int i = 0; i < 16; i++) {
        const uint8_t v = g4[i / 4][i % 4];
        src[3 * i] = v;
        src[3 * i + 1] = (uint8_t)(2 * v);
        src[3 * i + 2] = (uint8_t)(255 - v);
    }
    const mr_resize_cv2_uint8 half = {4, 4, 2, 2}, cols = {4, 4, 4, 2}, same = {4, 4, 4, 4};
    assert_int_equal(resize_cv2_uint8_scratch_bytes(&half), 0);
    assert_int_equal(resize_cv2_uint8_scratch_bytes(&same), 0);
    resize_cv2_linear_uint8(&half, src, dst, NULL);
    static const uint8_t want_half[3][4] = {{3, 6, 12, 14}, {5, 11, 23, 28}, {253, 250, 244, 241}};
    for (int i = 0; i < 4; i++)
        for (int c = 0; c < 3; c++) assert_int_equal(dst[3 * i + c], want_half[c][i]);
    void *scratch = malloc(resize_cv2_uint8_scratch_bytes(&cols));
    resize_cv2_linear_uint8(&cols, src, dst, scratch);
    free(scratch);
    static const uint8_t want_cols[3][8] = {{2, 4, 4, 8, 10, 12, 14, 16},
                                            {3, 7, 7, 15, 19, 23, 27, 32},
                                            {254, 252, 252, 248, 246, 244, 242, 239}};
    for (int i = 0; i < 8; i++)
        for (int c = 0; c < 3; c++) assert_int_equal(dst[3 * i + c], want_cols[c][i]);
    resize_cv2_linear_uint8(&same, src, dst, NULL);
    assert_memory_equal(dst, src, sizeof src);
}

/* The PIL path's scratch holds the resized uint8 image and the horizontal
 * pass's uint8 rows on top of the weights; the torch path only column taps. */
static void test_preprocess_scratch_sizes(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    mr_input_geometry g;
    mr_error err = {0};
    assert_int_equal(image_geometry(&cfg, 480, 640, &g, &err), MR_OK);
    assert_int_equal(image_preprocess_scratch_bytes(&g), (size_t)1066 * sizeof(mr_lerp_tap));
    cfg.resize_method = MR_RESIZE_PIL_BILINEAR;
    assert_int_equal(image_geometry(&cfg, 480, 640, &g, &err), MR_OK);
    /* 800x1066 resized + 480 intermediate rows of 1066, 3 bytes a pixel */
    assert_true(image_preprocess_scratch_bytes(&g) >= (size_t)(800 + 480) * 1066 * 3);
    assert_true(image_preprocess_scratch_bytes(&g) < (size_t)(800 + 480) * 1066 * 3 + 200000);
    /* a 20x downscale reads about all rows and 41+ taps per pixel */
    mr_resize_pil p = {16000, 16000, 800, 800};
    const size_t taps = (size_t)800 * (2 * 20 + 1) * 4 * 2;
    assert_true(resize_pil_scratch_bytes(&p) >= (size_t)16000 * 800 * 3 + taps);
    /* OpenCV's: the resized uint8 image, and the int16 horizontal pass of
     * the 480 source rows, 1067 x 3 each */
    cfg.resize_rounding = MR_RESIZE_MMDET;
    cfg.resize_method = MR_RESIZE_CV2_LINEAR_UINT8;
    assert_int_equal(image_geometry(&cfg, 480, 640, &g, &err), MR_OK);
    const size_t cv2 = image_preprocess_scratch_bytes(&g), base = (size_t)800 * 1067 * 3 + (size_t)480 * 1067 * 3 * 2;
    assert_true(cv2 >= base && cv2 < base + 100000);
}

/* The torchvision normalisation divides by 255 (to_tensor) rather than
 * multiplying by 1/255: check level 48, where the two differ in R even
 * after normalisation. */
static void test_preprocess_div255(void **state)
{
    (void)state;
    mr_input_config cfg = tv_config();
    cfg.min_size = 1;
    cfg.max_size = 1;
    cfg.size_divisibility = 1;
    uint8_t px[3] = {48, 48, 48};
    mr_image img = {px, 1, 1, 0};
    mr_input_geometry g;
    float *out = run_preprocess(&cfg, &img, &g);
    float want = (48.0f / 255.0f - cfg.pixel_mean[0]) / cfg.pixel_std[0];
    float mul = (48.0f * (1.0f / 255.0f) - cfg.pixel_mean[0]) / cfg.pixel_std[0];
    assert_true(want != mul);
    assert_true(out[0] == want);
    free(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_geometry_torchvision_upscale),
        cmocka_unit_test(test_geometry_identity),
        cmocka_unit_test(test_geometry_downscale_and_long_cap),
        cmocka_unit_test(test_geometry_detectron_round),
        cmocka_unit_test(test_geometry_detectron2),
        cmocka_unit_test(test_geometry_mmdet),
        cmocka_unit_test(test_geometry_refusals),
        cmocka_unit_test(test_png_rgb8_roundtrip),
        cmocka_unit_test(test_png_variants),
        cmocka_unit_test(test_png_errors),
        cmocka_unit_test(test_png_ancillary_chunks),
        cmocka_unit_test(test_jpeg),
        cmocka_unit_test(test_not_regular_files_and_unsupported_formats),
        cmocka_unit_test(test_preprocess_identity_bgr_padding),
        cmocka_unit_test(test_preprocess_upscale_hand),
        cmocka_unit_test(test_preprocess_pil_hand),
        cmocka_unit_test(test_preprocess_cv2_hand),
        cmocka_unit_test(test_preprocess_cv2_uint8_hand),
        cmocka_unit_test(test_resize_cv2_uint8_paths),
        cmocka_unit_test(test_preprocess_scratch_sizes),
        cmocka_unit_test(test_preprocess_div255),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
