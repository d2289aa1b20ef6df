/* The body of the image targets (fuzz_png.c, fuzz_jpeg.c, fuzz_image.c):
 * bytes of the target's own format -> a file -> image_load with a side limit of
 * FUZZ_MAX_SIDE (4096 unless the target defines a smaller one before including
 * this file: memory stays bounded, at most 48 MiB of pixels), then on success
 * image_geometry and image_preprocess
 * for a small input config (min_size 64, max_size 96, padded to 32) into a
 * buffer of exactly the padded size, once per zoo convention (torchvision
 * floor + torch bilinear, Detectron round + cv2, detectron2 + Pillow), with
 * the scratch image_preprocess_scratch_bytes asks for (under ASan, so a
 * scratch too small is a crash). Checks: the decoded size is within the
 * limit, the geometry is consistent, every output value is finite and the
 * padding is exactly zero. */
#ifndef MR_FUZZ_IMAGE_H
#define MR_FUZZ_IMAGE_H

#include <math.h>
#include <string.h>

#include "core/config.h"
#include "fuzz_common.h"
#include "io/image.h"
#include "ops/image_preprocess.h"

#ifndef FUZZ_MAX_SIDE
#define FUZZ_MAX_SIDE 4096
#endif

#ifndef FUZZ_TARGET
#error "scripts/fuzz.sh names the target: -DFUZZ_TARGET=\"png\""
#endif

/* 1 if the bytes start as the target's format does. image_load picks a
 * decoder by content, so without this a PNG target's mutations drift into
 * GIFs (a 30-byte GIF may declare a 4096x4096 screen: slow, legitimately)
 * and one target's run time comes to depend on another format's decoder.
 * Each format has its own target; the sniffing itself is a few compares. */
static int fuzz_is_target_format(const uint8_t *d, size_t n)
{
    static const struct {
        const char *target, *sig;
        size_t at, len;
    } sigs[] = {{"png", "\x89PNG", 0, 4}, {"jpeg", "\xff\xd8\xff", 0, 3}, {"webp", "WEBP", 8, 4},
                {"tiff", "II*\0", 0, 4},  {"tiff", "MM\0*", 0, 4},        {"tiff", "II+\0", 0, 4},
                {"tiff", "MM\0+", 0, 4},  {"gif", "GIF8", 0, 4},          {"bmp", "BM", 0, 2}};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++)
        if (strcmp(sigs[i].target, FUZZ_TARGET) == 0 && n >= sigs[i].at + sigs[i].len &&
            memcmp(d + sigs[i].at, sigs[i].sig, sigs[i].len) == 0)
            return 1;
    return 0;
}

static void fuzz_image_file(const uint8_t *data, size_t size)
{
    if (!fuzz_is_target_format(data, size)) return;
    char path[64];
    fuzz_memfile(data, size, path);
    mr_image img;
    mr_error err = {MR_OK, ""};
    mr_status st = image_load(path, FUZZ_MAX_SIDE, &img, &err);
    if (st != MR_OK) {
        FUZZ_CHECK(img.pixels == NULL && img.h == 0 && img.w == 0, "failed load left pixels behind");
        FUZZ_CHECK(err.status == st, "status %d, err.status %d", (int)st, (int)err.status);
        FUZZ_CHECK(!strchr(err.msg, '\n'), "message has more than one line: %s", err.msg);
        return;
    }
    FUZZ_CHECK(img.pixels && img.h > 0 && img.w > 0 && img.h <= FUZZ_MAX_SIDE && img.w <= FUZZ_MAX_SIDE,
               "decoded %dx%d", img.h, img.w);

    static mr_config cfg;
    static int cfg_ready;
    if (!cfg_ready) {
        config_defaults(&cfg);
        cfg.input.min_size = 64;
        cfg.input.max_size = 96;
        cfg_ready = 1;
    }
    /* The zoos' pairs of rounding and resampler. */
    static const struct {
        mr_resize_rounding rounding;
        mr_resize_method method;
        mr_channel_order order;
    } conv[4] = {{MR_RESIZE_FLOOR, MR_RESIZE_TORCH_BILINEAR, MR_CHANNELS_RGB},
                 {MR_RESIZE_ROUND, MR_RESIZE_CV2_LINEAR, MR_CHANNELS_BGR},
                 {MR_RESIZE_DETECTRON2, MR_RESIZE_PIL_BILINEAR, MR_CHANNELS_BGR},
                 {MR_RESIZE_MMDET, MR_RESIZE_CV2_LINEAR_UINT8, MR_CHANNELS_RGB}};
    for (int k = 0; k < 4; k++) {
        cfg.input.resize_rounding = conv[k].rounding;
        cfg.input.resize_method = conv[k].method;
        cfg.input.channel_order = conv[k].order;
        mr_input_geometry g;
        if (image_geometry(&cfg.input, img.h, img.w, &g, &err) != MR_OK) continue; /* too elongated */
        FUZZ_CHECK(g.in_h == img.h && g.in_w == img.w, "geometry input size");
        FUZZ_CHECK(g.resized_h >= 1 && g.resized_w >= 1 && g.resized_h <= 96 && g.resized_w <= 96,
                   "resized %dx%d from %dx%d", g.resized_h, g.resized_w, img.h, img.w);
        FUZZ_CHECK(g.padded_h % 32 == 0 && g.padded_w % 32 == 0 && g.padded_h >= g.resized_h &&
                       g.padded_w >= g.resized_w && g.padded_h - g.resized_h < 32 && g.padded_w - g.resized_w < 32,
                   "padded %dx%d for %dx%d", g.padded_h, g.padded_w, g.resized_h, g.resized_w);
        size_t n = (size_t)g.padded_h * (size_t)g.padded_w * 3;
        float *buf = malloc(n * sizeof(float));
        void *scratch = malloc(image_preprocess_scratch_bytes(&g) + 1);
        if (buf && scratch) {
            mr_tensor t = mr_tensor_make(buf, 1, g.padded_h, g.padded_w, 3);
            image_preprocess(&cfg.input, &img, &g, scratch, &t);
            for (int y = 0; y < g.padded_h; y++)
                for (int x = 0; x < g.padded_w; x++)
                    for (int c = 0; c < 3; c++) {
                        float v = buf[((size_t)y * g.padded_w + x) * 3 + c];
                        FUZZ_CHECK(isfinite(v), "output (%d,%d,%d) = %g", y, x, c, (double)v);
                        if (y >= g.resized_h || x >= g.resized_w)
                            FUZZ_CHECK(v == 0.0f, "padding (%d,%d,%d) = %g", y, x, c, (double)v);
                    }
        }
        free(buf);
        free(scratch);
    }
    image_free(&img);
}

#endif
