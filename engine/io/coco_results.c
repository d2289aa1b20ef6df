/* COCO results files; the format and the rules are in coco_results.h. */
#include "io/coco_results.h"

#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "io/atomic_file.h"
#include "io/rle.h"

/* COCO's category ids (instances_*.json) for contiguous classes 1..80,
 * the table in pycocotools-era Detectron (json_dataset.py) and detectron2's
 * builtin_meta.py: 11 of the 1..90 ids were never annotated. */
static const int coco_ids[80] = {
    1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11, 13, 14, 15, 16, 17, 18, 19, 20, 21,
    22, 23, 24, 25, 27, 28, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44,
    46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65,
    67, 70, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 84, 85, 86, 87, 88, 89, 90,
};

int coco_category_id(const mr_config *cfg, int class_id)
{
    const int n = cfg->classes.num_classes;
    if (class_id < 1 || class_id >= n) return -1;
    return n == 81 ? coco_ids[class_id - 1] : class_id;
}

int coco_image_id(const char *path, int index)
{
    if (!path) return index;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    const char *dot = strrchr(base, '.');
    const size_t len = dot ? (size_t)(dot - base) : strlen(base);
    if (len == 0) return index;
    size_t i = 0;
    while (i + 1 < len && base[i] == '0') i++; /* keep one digit of "000" */
    if (len - i > 9) return index;
    int v = 0;
    for (; i < len; i++) {
        if (base[i] < '0' || base[i] > '9') return index;
        v = v * 10 + (base[i] - '0');
    }
    /* Leading zeros were skipped without checking them: they are digits. */
    return v;
}

/* ---- Text building ------------------------------------------------------ */

/* A growing string; `oom` is sticky, so a run of appends is checked once. */
typedef struct {
    char *s;
    size_t len, cap;
    int oom;
} strbuf;

static int sb_reserve(strbuf *b, size_t extra)
{
    if (b->oom) return 0;
    if (extra < b->cap - b->len) return 1; /* room for extra and a NUL */
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len <= extra) {
        if (cap > SIZE_MAX / 2) {
            b->oom = 1;
            return 0;
        }
        cap *= 2;
    }
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = 1;
        return 0;
    }
    b->s = s;
    b->cap = cap;
    return 1;
}

__attribute__((format(printf, 2, 3))) static void sb_printf(strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if (!sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->s + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* The chars of a JSON string body. RLE strings use '0'..'o', of which only
 * the backslash needs escaping. */
static void sb_put_json_chars(strbuf *b, const char *s, size_t n)
{
    if (!sb_reserve(b, 2 * n)) return;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '\\' || s[i] == '"') b->s[b->len++] = '\\';
        b->s[b->len++] = s[i];
    }
    b->s[b->len] = '\0';
}

/* ---- Document ----------------------------------------------------------- */

/* The entries as text, one chunk per coco_results_add (entries separated
 * by ",\n" within a chunk), so the file can be streamed without ever
 * joining them into one string. */
struct coco_results {
    char **chunks;
    size_t *lens;
    size_t nchunks, cap;
    size_t entries;
};

mr_status coco_results_create(coco_results **out, mr_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out) return mr_fail(err, MR_ERR_OOM, "out of memory creating a COCO results document");
    return MR_OK;
}

void coco_results_free(coco_results *doc)
{
    if (!doc) return;
    for (size_t i = 0; i < doc->nchunks; i++) free(doc->chunks[i]);
    free(doc->chunks);
    free(doc->lens);
    free(doc);
}

size_t coco_results_count(const coco_results *doc)
{
    return doc ? doc->entries : 0;
}

/* Scratch for one image's masks: counts for the worst case (h*w + 1 runs)
 * and the string for the counts a mask actually has. */
typedef struct {
    uint32_t *counts;
    char *str;
    size_t str_cap;
} rle_scratch;

static mr_status put_segmentation(strbuf *b, const mr_detection *d, int h, int w, rle_scratch *rs, int image_id,
                                  int i, mr_error *err)
{
    if (!rs->counts) {
        const size_t pixels = (size_t)h * (size_t)w;
        if (pixels >= (size_t)INT_MAX)
            return mr_fail(err, MR_ERR_RANGE,
                           "image %d, detection %d: a %dx%d (HxW) mask is too large to RLE-encode", image_id,
                           i, h, w);
        rs->counts = malloc((pixels + 1) * sizeof *rs->counts);
        if (!rs->counts) return mr_fail(err, MR_ERR_OOM, "image %d: out of memory encoding masks", image_id);
    }
    int n = 0;
    const mr_mask_window *mw = &d->mask_win;
    if (rle_encode_window(d->mask, mw->x0, mw->y0, mw->w, mw->h, h, w, rs->counts, &n) != MR_OK)
        return mr_fail(err, MR_ERR_RANGE, "image %d, detection %d: mask window %dx%d at %d,%d is outside the %dx%d image",
                       image_id, i, mw->w, mw->h, mw->x0, mw->y0, w, h);
    const size_t need = rle_string_max_bytes(n);
    if (need > rs->str_cap) {
        free(rs->str);
        rs->str_cap = 0;
        rs->str = malloc(need);
        if (!rs->str) return mr_fail(err, MR_ERR_OOM, "image %d: out of memory encoding masks", image_id);
        rs->str_cap = need;
    }
    const size_t len = rle_to_string(rs->counts, n, rs->str, rs->str_cap);
    if (len >= rs->str_cap)
        return mr_fail(err, MR_ERR_INTERNAL, "image %d, detection %d: RLE string overflow", image_id, i);
    sb_printf(b, ", \"segmentation\": {\"size\": [%d, %d], \"counts\": \"", h, w);
    sb_put_json_chars(b, rs->str, len);
    sb_printf(b, "\"}");
    return MR_OK;
}

static mr_status put_entry(strbuf *b, int image_id, const mr_result *res, int i, const mr_config *cfg,
                           rle_scratch *rs, mr_error *err)
{
    const mr_detection *d = &res->dets[i];
    const int cat = coco_category_id(cfg, d->class_id);
    if (cat < 0)
        return mr_fail(err, MR_ERR_RANGE, "image %d, detection %d: class_id %d is outside 1..%d", image_id, i,
                       d->class_id, cfg->classes.num_classes - 1);
    const float x = d->box[0], y = d->box[1];
    const float bw = d->box[2] - d->box[0], bh = d->box[3] - d->box[1];
    if (!isfinite(d->score) || !isfinite(x) || !isfinite(y) || !isfinite(bw) || !isfinite(bh))
        return mr_fail(err, MR_ERR_RANGE, "image %d, detection %d: score or box is not finite", image_id, i);
    if (b->len) sb_printf(b, ",\n");
    sb_printf(b,
              "{\"image_id\": %d, \"category_id\": %d, \"bbox\": [%.9g, %.9g, %.9g, %.9g], \"score\": %.9g",
              image_id, cat, (double)x, (double)y, (double)bw, (double)bh, (double)d->score);
    if (d->mask) {
        if (res->height <= 0 || res->width <= 0)
            return mr_fail(err, MR_ERR_RANGE, "image %d, detection %d: mask with image size %dx%d (HxW)",
                           image_id, i, res->height, res->width);
        MR_TRY(put_segmentation(b, d, res->height, res->width, rs, image_id, i, err));
    }
    sb_printf(b, "}");
    return MR_OK;
}

mr_status coco_results_add(coco_results *doc, int image_id, const mr_result *res, const mr_config *cfg,
                           mr_error *err)
{
    if (res->count < 0 || (res->count > 0 && !res->dets))
        return mr_fail(err, MR_ERR_INTERNAL, "image %d: result with %d detections and no array", image_id,
                       res->count);
    if (res->count == 0) return MR_OK;
    if (doc->nchunks == doc->cap) {
        const size_t cap = doc->cap ? doc->cap * 2 : 64;
        char **chunks = realloc(doc->chunks, cap * sizeof *chunks);
        if (chunks) doc->chunks = chunks;
        size_t *lens = chunks ? realloc(doc->lens, cap * sizeof *lens) : NULL;
        if (lens) doc->lens = lens;
        if (!chunks || !lens) return mr_fail(err, MR_ERR_OOM, "image %d: out of memory", image_id);
        doc->cap = cap;
    }
    strbuf b = {0};
    rle_scratch rs = {0};
    mr_status st = MR_OK;
    for (int i = 0; st == MR_OK && i < res->count; i++) st = put_entry(&b, image_id, res, i, cfg, &rs, err);
    free(rs.counts);
    free(rs.str);
    if (st == MR_OK && b.oom)
        st = mr_fail(err, MR_ERR_OOM, "image %d: out of memory writing detections", image_id);
    if (st != MR_OK) {
        free(b.s);
        return st;
    }
    doc->chunks[doc->nchunks] = b.s;
    doc->lens[doc->nchunks] = b.len;
    doc->nchunks++;
    doc->entries += (size_t)res->count;
    return MR_OK;
}

/* ---- Writing ------------------------------------------------------------ */

mr_status coco_results_write(const coco_results *doc, const char *path, mr_error *err)
{
    atomic_file af;
    MR_TRY(atomic_file_open(&af, path, err));
    atomic_file_printf(&af, "%s", doc->nchunks ? "[\n" : "[");
    for (size_t i = 0; i < doc->nchunks; i++) {
        if (i > 0) atomic_file_write(&af, ",\n", 2);
        atomic_file_write(&af, doc->chunks[i], doc->lens[i]);
    }
    atomic_file_printf(&af, "%s", doc->nchunks ? "\n]\n" : "]\n");
    return atomic_file_commit(&af, err);
}
