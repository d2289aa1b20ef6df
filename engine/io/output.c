#include "io/output.h"

#include <stdlib.h>
#include <string.h>

#include "io/rle.h"

mr_status output_json_open(output_json *out, const char *path, mr_error *err)
{
    memset(out, 0, sizeof *out);
    MR_TRY(atomic_file_open(&out->file, path, err));
    atomic_file_printf(&out->file, "{\"images\": [");
    return MR_OK;
}

static mr_status reserve(output_json *out, size_t pixels, mr_error *err)
{
    if (pixels <= out->pixels_cap) return MR_OK;
    uint32_t *counts = realloc(out->counts, sizeof(uint32_t) * (pixels + 1));
    if (counts) out->counts = counts;
    char *rle = counts ? realloc(out->rle, rle_string_max_bytes((int)pixels + 1)) : NULL;
    if (!rle) return mr_fail(err, MR_ERR_OOM, "out of memory encoding masks of %zu pixels", pixels);
    out->rle = rle;
    out->pixels_cap = pixels;
    return MR_OK;
}

/* A JSON string literal (file names may hold quotes, backslashes, controls). */
static void put_string(atomic_file *f, const char *s)
{
    atomic_file_write(f, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') atomic_file_printf(f, "\\%c", c);
        else if (c < 0x20) atomic_file_printf(f, "\\u%04x", c);
        else atomic_file_write(f, s, 1);
    }
    atomic_file_write(f, "\"", 1);
}

mr_status output_json_add(output_json *out, const char *file, const mr_result *res, const mr_config *cfg,
                          mr_error *err)
{
    atomic_file *f = &out->file;
    size_t pixels = (size_t)res->width * (size_t)res->height;
    MR_TRY(reserve(out, pixels, err));
    atomic_file_printf(f, "%s\n  {\"file\": ", out->images++ ? "," : "");
    put_string(f, file);
    atomic_file_printf(f, ", \"width\": %d, \"height\": %d, \"detections\": [", res->width, res->height);
    for (int i = 0; i < res->count; i++) {
        const mr_detection *d = &res->dets[i];
        atomic_file_printf(f, "%s\n    {\"class_id\": %d, \"class\": ", i ? "," : "", d->class_id);
        put_string(f, cfg->classes.class_names[d->class_id]);
        /* %.9g round-trips a float32 exactly. */
        atomic_file_printf(f, ", \"score\": %.9g, \"box\": [%.9g, %.9g, %.9g, %.9g]", d->score, d->box[0], d->box[1],
                           d->box[2], d->box[3]);
        if (d->mask) {
            int n = 0;
            const mr_mask_window *w = &d->mask_win;
            if (rle_encode_window(d->mask, w->x0, w->y0, w->w, w->h, res->height, res->width, out->counts, &n) !=
                MR_OK)
                return mr_fail(err, MR_ERR_INTERNAL, "%s: detection %d's %dx%d mask window at %d,%d is outside the "
                               "%dx%d image", file, i, w->w, w->h, w->x0, w->y0, res->width, res->height);
            rle_to_string(out->counts, n, out->rle, rle_string_max_bytes((int)pixels + 1));
            /* The RLE alphabet ('0'..'o') includes the backslash: escape it. */
            atomic_file_printf(f, ", \"mask\": {\"size\": [%d, %d], \"counts\": ", res->height, res->width);
            put_string(f, out->rle);
            atomic_file_printf(f, "}");
        }
        atomic_file_printf(f, "}");
    }
    atomic_file_printf(f, "%s]}", res->count ? "\n  " : "");
    return MR_OK;
}

static void release(output_json *out)
{
    free(out->counts);
    free(out->rle);
    out->counts = NULL;
    out->rle = NULL;
}

mr_status output_json_close(output_json *out, mr_error *err)
{
    atomic_file_printf(&out->file, "\n]}\n");
    release(out);
    return atomic_file_commit(&out->file, err);
}

void output_json_abort(output_json *out)
{
    release(out);
    atomic_file_abort(&out->file);
}

void output_print_text(FILE *f, const char *file, const mr_result *res, const mr_config *cfg)
{
    for (int i = 0; i < res->count; i++) {
        const mr_detection *d = &res->dets[i];
        size_t px = 0, n = mask_window_pixels(d->mask_win);
        for (size_t p = 0; d->mask && p < n; p++) px += d->mask[p];
        fprintf(f, "%s: %-14s %.3f  box %.1f,%.1f,%.1f,%.1f  mask %zu px\n", file,
                cfg->classes.class_names[d->class_id], d->score, d->box[0], d->box[1], d->box[2], d->box[3], px);
    }
}
