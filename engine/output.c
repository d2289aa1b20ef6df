#include "output.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rle.h"

struct output_doc {
    cJSON *root;
    cJSON *images;
};

mr_status output_doc_create(output_doc **out, mr_error *err)
{
    output_doc *d = calloc(1, sizeof *d);
    if (!d || !(d->root = cJSON_CreateObject()) ||
        !(d->images = cJSON_AddArrayToObject(d->root, "images"))) {
        if (d) cJSON_Delete(d->root);
        free(d);
        return mr_fail(err, MR_ERR_OOM, "out of memory");
    }
    *out = d;
    return MR_OK;
}

void output_doc_free(output_doc *doc)
{
    if (!doc) return;
    cJSON_Delete(doc->root);
    free(doc);
}

/* cJSON prints doubles with 17 significant digits; a float needs 9. */
static cJSON *number(double v)
{
    char buf[32];
    snprintf(buf, sizeof buf, "%.9g", v);
    return cJSON_CreateRaw(buf);
}

static mr_status add_mask(cJSON *det, const mr_detection *d, int h, int w, uint32_t *counts, char *str,
                          size_t str_cap, mr_error *err)
{
    int n = 0;
    MR_TRY(rle_encode(d->mask, h, w, counts, &n));
    if (rle_to_string(counts, n, str, str_cap) >= str_cap) return mr_fail(err, MR_ERR_INTERNAL, "RLE string overflow");
    cJSON *mask = cJSON_AddObjectToObject(det, "mask");
    cJSON *size = cJSON_AddArrayToObject(mask, "size");
    cJSON_AddItemToArray(size, cJSON_CreateNumber(h));
    cJSON_AddItemToArray(size, cJSON_CreateNumber(w));
    cJSON_AddStringToObject(mask, "counts", str);
    return MR_OK;
}

mr_status output_doc_add(output_doc *doc, const char *file, const mr_result *res, const mr_config *cfg,
                         mr_error *err)
{
    cJSON *img = cJSON_CreateObject();
    if (!img) return mr_fail(err, MR_ERR_OOM, "out of memory");
    cJSON_AddItemToArray(doc->images, img);
    cJSON_AddStringToObject(img, "file", file);
    cJSON_AddNumberToObject(img, "width", res->width);
    cJSON_AddNumberToObject(img, "height", res->height);
    cJSON *dets = cJSON_AddArrayToObject(img, "detections");
    size_t pixels = (size_t)res->width * (size_t)res->height;
    uint32_t *counts = malloc(sizeof(uint32_t) * (pixels + 2));
    size_t str_cap = rle_string_max_bytes((int)pixels + 1);
    char *str = malloc(str_cap);
    mr_status st = counts && str ? MR_OK : mr_fail(err, MR_ERR_OOM, "out of memory encoding masks");
    for (int i = 0; st == MR_OK && i < res->count; i++) {
        const mr_detection *d = &res->dets[i];
        cJSON *det = cJSON_CreateObject();
        cJSON_AddItemToArray(dets, det);
        cJSON_AddNumberToObject(det, "class_id", d->class_id);
        cJSON_AddStringToObject(det, "class", cfg->classes.class_names[d->class_id]);
        cJSON_AddItemToObject(det, "score", number(d->score));
        cJSON *box = cJSON_AddArrayToObject(det, "box");
        for (int k = 0; k < 4; k++) cJSON_AddItemToArray(box, number(d->box[k]));
        if (d->mask) st = add_mask(det, d, res->height, res->width, counts, str, str_cap, err);
    }
    free(counts);
    free(str);
    return st;
}

mr_status output_doc_write(const output_doc *doc, const char *path, mr_error *err)
{
    char *text = cJSON_Print(doc->root);
    if (!text) return mr_fail(err, MR_ERR_OOM, "out of memory");
    size_t len = strlen(path) + 32;
    char *tmp = malloc(len);
    mr_status st = MR_OK;
    if (!tmp) {
        free(text);
        return mr_fail(err, MR_ERR_OOM, "out of memory");
    }
    snprintf(tmp, len, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    if (!f) {
        st = mr_fail(err, MR_ERR_IO, "%s: cannot write: %s", path, strerror(errno));
    } else {
        int ok = fputs(text, f) >= 0 && fputc('\n', f) != EOF;
        ok = (fclose(f) == 0) && ok;
        if (!ok) st = mr_fail(err, MR_ERR_IO, "%s: write failed: %s", path, strerror(errno));
        else if (rename(tmp, path) != 0) st = mr_fail(err, MR_ERR_IO, "%s: cannot rename into place: %s", path, strerror(errno));
        if (st != MR_OK) unlink(tmp);
    }
    free(tmp);
    free(text);
    return st;
}

void output_print_text(FILE *f, const char *file, const mr_result *res, const mr_config *cfg)
{
    for (int i = 0; i < res->count; i++) {
        const mr_detection *d = &res->dets[i];
        size_t px = 0, n = (size_t)res->width * (size_t)res->height;
        for (size_t p = 0; d->mask && p < n; p++) px += d->mask[p];
        fprintf(f, "%s: %-14s %.3f  box %.1f,%.1f,%.1f,%.1f  mask %zu px\n", file,
                cfg->classes.class_names[d->class_id], d->score, d->box[0], d->box[1], d->box[2], d->box[3], px);
    }
}
