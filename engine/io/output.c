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

/* A JSON string literal (file names may hold quotes, backslashes, controls). */
static void put_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
    }
    fputc('"', f);
}

/* Writes the entry to f; counts and rle have room for the image's masks. */
static mr_status write_entry(FILE *f, const char *file, const mr_result *res, const mr_config *cfg, uint32_t *counts,
                             char *rle, size_t rle_cap, mr_error *err)
{
    fprintf(f, "{\"file\": ");
    put_string(f, file);
    fprintf(f, ", \"width\": %d, \"height\": %d, \"detections\": [", res->width, res->height);
    for (int i = 0; i < res->count; i++) {
        const mr_detection *d = &res->dets[i];
        fprintf(f, "%s\n    {\"class_id\": %d, \"class\": ", i ? "," : "", d->class_id);
        put_string(f, cfg->classes.class_names[d->class_id]);
        /* %.9g round-trips a float32 exactly. */
        fprintf(f, ", \"score\": %.9g, \"box\": [%.9g, %.9g, %.9g, %.9g]", d->score, d->box[0], d->box[1], d->box[2],
                d->box[3]);
        if (d->mask) {
            int n = 0;
            const mr_mask_window *w = &d->mask_win;
            if (rle_encode_window(d->mask, w->x0, w->y0, w->w, w->h, res->height, res->width, counts, &n) != MR_OK)
                return mr_fail(err, MR_ERR_INTERNAL, "%s: detection %d's %dx%d mask window at %d,%d is outside the "
                               "%dx%d image", file, i, w->w, w->h, w->x0, w->y0, res->width, res->height);
            rle_to_string(counts, n, rle, rle_cap);
            /* The RLE alphabet ('0'..'o') includes the backslash: escape it. */
            fprintf(f, ", \"mask\": {\"size\": [%d, %d], \"counts\": ", res->height, res->width);
            put_string(f, rle);
            fprintf(f, "}");
        }
        fprintf(f, "}");
    }
    fprintf(f, "%s]}", res->count ? "\n  " : "");
    return MR_OK;
}

mr_status output_json_entry(const char *file, const mr_result *res, const mr_config *cfg, char **text, size_t *len,
                            mr_error *err)
{
    *text = NULL;
    *len = 0;
    size_t pixels = (size_t)res->width * (size_t)res->height;
    uint32_t *counts = malloc(sizeof(uint32_t) * (pixels + 1));
    size_t rle_cap = rle_string_max_bytes((int)pixels + 1);
    char *rle = counts ? malloc(rle_cap) : NULL;
    FILE *mem = rle ? open_memstream(text, len) : NULL;
    mr_status st = mem ? write_entry(mem, file, res, cfg, counts, rle, rle_cap, err)
                       : mr_fail(err, MR_ERR_OOM, "%s: out of memory encoding masks of %zu pixels", file, pixels);
    if (mem && (fclose(mem) != 0 || !*text) && st == MR_OK)
        st = mr_fail(err, MR_ERR_OOM, "%s: out of memory writing the JSON", file);
    free(counts);
    free(rle);
    if (st != MR_OK) {
        free(*text);
        *text = NULL;
        *len = 0;
    }
    return st;
}

mr_status output_json_add(output_json *out, const char *file, const mr_result *res, const mr_config *cfg,
                          mr_error *err)
{
    char *text;
    size_t len;
    MR_TRY(output_json_entry(file, res, cfg, &text, &len, err));
    atomic_file_printf(&out->file, "%s\n  ", out->images++ ? "," : "");
    atomic_file_write(&out->file, text, len);
    free(text);
    return MR_OK;
}

mr_status output_json_close(output_json *out, const char *members, mr_error *err)
{
    atomic_file_printf(&out->file, "\n]%s}\n", members ? members : "");
    return atomic_file_commit(&out->file, err);
}

void output_json_abort(output_json *out)
{
    atomic_file_abort(&out->file);
}
