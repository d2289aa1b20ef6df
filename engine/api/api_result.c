/* The public API's runs and results: the model on one image, what a result
 * holds, its JSON and RLE forms, drawing, and documents over many images. */
#include "api/api_internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "io/atomic_file.h"
#include "io/coco_results.h"
#include "io/output.h"
#include "io/rle.h"
#include "io/visualize.h"

/* Drops the instances of classes the options did not ask for; their masks
 * stay in mask_storage until the result is freed. */
static void keep_classes(const detect_model *m, mr_result *res)
{
    if (!m->keep_class) return;
    int kept = 0;
    for (int i = 0; i < res->count; i++)
        if (m->keep_class[res->dets[i].class_id]) res->dets[kept++] = res->dets[i];
    res->count = kept;
}

/* Runs the model on img; `file` (may be NULL) prefixes an error message. */
static detect_status run(detect_model *m, const mr_image *img, const char *file, detect_result **out)
{
    detect_result *r = calloc(1, sizeof *r);
    if (!r) return api_failf(DETECT_ERR_OOM, "out of memory");
    mr_error err = {0};
    uint64_t key = api_size_key(m, img->h, img->w); /* once per run: the affinity, then the sizes seen */
    api_context *c = api_context_take(m, key);
    mr_status st = model_detect(c->model, img, &r->res, &r->times, &err);
    api_context_give_back(m, c, st == MR_OK ? key : 0);
    if (st != MR_OK) {
        detect_result_free(r);
        if (file) mr_error_prefix(&err, "%s", file);
        return api_fail(&err);
    }
    keep_classes(m, &r->res);
    *out = r;
    return DETECT_OK;
}

/* (__func__ is run_image etc., the public name without its prefix) */
#define NEED_RUN_ARGS(m, out)                                                                  \
    do {                                                                                       \
        if (!(m) || !(out))                                                                    \
            return api_failf(DETECT_ERR_ARGUMENT, "detect_%s: %s is NULL", __func__,           \
                             (m) ? "out" : "model");                                           \
        *(out) = NULL;                                                                         \
    } while (0)

static detect_status run_image(detect_model *m, const detect_image *img, detect_result **out)
{
    NEED_RUN_ARGS(m, out);
    if (!img) return api_failf(DETECT_ERR_ARGUMENT, "detect_run_image: image is NULL");
    return run(m, &img->img, NULL, out);
}

static detect_status run_pixels(detect_model *m, const uint8_t *pixels, int width, int height, size_t stride,
                                detect_pixel_format format, detect_result **out)
{
    NEED_RUN_ARGS(m, out);
    detect_image *img;
    detect_status st = detect_image_from_pixels(pixels, width, height, stride, format, &img);
    if (st != DETECT_OK) return st;
    st = run(m, &img->img, NULL, out);
    detect_image_free(img);
    return st;
}

static detect_status run_encoded(detect_model *m, const void *data, size_t size, detect_result **out)
{
    NEED_RUN_ARGS(m, out);
    detect_image *img;
    detect_status st = detect_image_decode(data, size, NULL, m->cfg.input.max_image_side, &img);
    if (st != DETECT_OK) return st;
    st = run(m, &img->img, "image bytes", out);
    detect_image_free(img);
    return st;
}

static detect_status run_file(detect_model *m, const char *path, detect_result **out)
{
    NEED_RUN_ARGS(m, out);
    detect_image *img;
    detect_status st = detect_image_load(path, m->cfg.input.max_image_side, &img);
    if (st != DETECT_OK) return st;
    st = run(m, &img->img, path, out);
    detect_image_free(img);
    return st;
}

/* Each run holds asynchronous signals from its first instruction to its
 * return (api_internal.h). */
#define HOLDING_SIGNALS(call)              \
    do {                                   \
        sigset_t signals_;                 \
        api_hold_signals(&signals_);       \
        detect_status st_ = (call);        \
        api_release_signals(&signals_);    \
        return st_;                        \
    } while (0)

detect_status detect_run_image(detect_model *m, const detect_image *img, detect_result **out)
{
    HOLDING_SIGNALS(run_image(m, img, out));
}

detect_status detect_run_pixels(detect_model *m, const uint8_t *pixels, int width, int height, size_t stride,
                                detect_pixel_format format, detect_result **out)
{
    HOLDING_SIGNALS(run_pixels(m, pixels, width, height, stride, format, out));
}

detect_status detect_run_encoded(detect_model *m, const void *data, size_t size, detect_result **out)
{
    HOLDING_SIGNALS(run_encoded(m, data, size, out));
}

detect_status detect_run_file(detect_model *m, const char *path, detect_result **out)
{
    HOLDING_SIGNALS(run_file(m, path, out));
}

/* ---- Results --------------------------------------------------------------- */

void detect_result_free(detect_result *r)
{
    if (!r) return;
    result_free(&r->res);
    free(r);
}

int detect_result_count(const detect_result *r)
{
    return r ? r->res.count : 0;
}

int detect_result_width(const detect_result *r)
{
    return r ? r->res.width : 0;
}

int detect_result_height(const detect_result *r)
{
    return r ? r->res.height : 0;
}

static const mr_detection *instance_at(const detect_result *r, int index, const char *caller)
{
    if (!r) {
        api_failf(DETECT_ERR_ARGUMENT, "%s: result is NULL", caller);
        return NULL;
    }
    if (index < 0 || index >= r->res.count) {
        api_failf(DETECT_ERR_ARGUMENT, "%s: instance %d of a result of %d", caller, index, r->res.count);
        return NULL;
    }
    return &r->res.dets[index];
}

detect_status detect_result_instance(const detect_result *r, int index, detect_instance *out)
{
    const mr_detection *d = instance_at(r, index, __func__);
    if (!d) return DETECT_ERR_ARGUMENT;
    if (!out) return api_failf(DETECT_ERR_ARGUMENT, "detect_result_instance: out is NULL");
    out->class_id = d->class_id;
    out->score = d->score;
    memcpy(out->box, d->box, sizeof out->box);
    out->mask = d->mask;
    out->mask_x = d->mask_win.x0;
    out->mask_y = d->mask_win.y0;
    out->mask_w = d->mask_win.w;
    out->mask_h = d->mask_win.h;
    return DETECT_OK;
}

detect_status detect_result_mask(const detect_result *r, int index, uint8_t *out)
{
    const mr_detection *d = instance_at(r, index, __func__);
    if (!d) return DETECT_ERR_ARGUMENT;
    if (!out) return api_failf(DETECT_ERR_ARGUMENT, "detect_result_mask: out is NULL");
    const int h = r->res.height, w = r->res.width;
    memset(out, 0, (size_t)h * (size_t)w);
    const mr_mask_window *win = &d->mask_win;
    if (!d->mask) return DETECT_OK;
    if (!mask_window_fits(*win, h, w))
        return api_failf(DETECT_ERR_INTERNAL, "instance %d: mask window outside the image", index);
    for (int y = 0; y < win->h; y++)
        memcpy(out + (size_t)(win->y0 + y) * (size_t)w + (size_t)win->x0, d->mask + (size_t)y * (size_t)win->w,
               (size_t)win->w);
    return DETECT_OK;
}

detect_status detect_result_mask_rle(const detect_result *r, int index, char **out)
{
    const mr_detection *d = instance_at(r, index, __func__);
    if (!d) return DETECT_ERR_ARGUMENT;
    if (!out) return api_failf(DETECT_ERR_ARGUMENT, "detect_result_mask_rle: out is NULL");
    *out = NULL;
    const int h = r->res.height, w = r->res.width;
    const size_t pixels = (size_t)h * (size_t)w;
    uint32_t *counts = malloc(sizeof *counts * (pixels + 1));
    if (!counts) return api_failf(DETECT_ERR_OOM, "out of memory encoding a %dx%d mask", h, w);
    static const uint8_t empty[1];
    mr_mask_window win = d->mask ? d->mask_win : (mr_mask_window){0, 0, 0, 0};
    int n = 0;
    detect_status st = DETECT_OK;
    if (rle_encode_window(d->mask ? d->mask : empty, win.x0, win.y0, win.w, win.h, h, w, counts, &n) != MR_OK)
        st = api_failf(DETECT_ERR_INTERNAL, "instance %d: mask window outside the image", index);
    size_t cap = rle_string_max_bytes(n);
    char *s = st == DETECT_OK ? malloc(cap) : NULL;
    if (st == DETECT_OK && !s) st = api_failf(DETECT_ERR_OOM, "out of memory encoding a %dx%d mask", h, w);
    if (s) rle_to_string(counts, n, s, cap);
    free(counts);
    *out = s;
    return st;
}

double detect_result_stage_seconds(const detect_result *r, detect_stage stage)
{
    if (!r) return 0;
    const mr_stage_times *t = &r->times;
    switch (stage) {
    case DETECT_STAGE_PREPROCESS: return t->preprocess;
    case DETECT_STAGE_BACKBONE: return t->backbone;
    case DETECT_STAGE_FPN: return t->fpn;
    case DETECT_STAGE_RPN: return t->rpn;
    case DETECT_STAGE_BOX_HEAD: return t->box_head;
    case DETECT_STAGE_MASK_HEAD: return t->mask_head;
    case DETECT_STAGE_MASK_PASTE: return t->paste;
    case DETECT_STAGE_COUNT: break;
    }
    return 0;
}

const char *detect_stage_name(detect_stage stage)
{
    static const char *const names[DETECT_STAGE_COUNT] = {"preprocess", "backbone",  "fpn",       "rpn",
                                                          "box_head",   "mask_head", "mask_paste"};
    return (unsigned)stage < DETECT_STAGE_COUNT ? names[stage] : "unknown";
}

detect_status detect_result_json(const detect_model *m, const detect_result *r, const char *file, char **out)
{
    if (!m || !r || !out)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_result_json: %s is NULL", !m ? "model" : !r ? "result" : "out");
    size_t len;
    mr_error err = {0};
    return output_json_entry(file ? file : "", &r->res, &m->cfg, out, &len, &err) == MR_OK ? DETECT_OK
                                                                                          : api_fail(&err);
}

/* ---- Results read back from JSON ------------------------------------------ */

/* Masks of a result being rebuilt: each detection's window bytes back to
 * back (the dets' pointers are set once it stops growing). */
typedef struct {
    uint8_t *bytes;
    size_t len, cap;
    size_t *offset; /* per detection; SIZE_MAX: no mask */
} mask_store;

static int store_append(mask_store *ms, const uint8_t *src, size_t n)
{
    if (ms->len + n + 1 > ms->cap) {
        size_t cap = ms->cap ? ms->cap : 4096;
        while (cap < ms->len + n + 1) cap *= 2;
        uint8_t *b = realloc(ms->bytes, cap);
        if (!b) return 0;
        ms->bytes = b;
        ms->cap = cap;
    }
    memcpy(ms->bytes + ms->len, src, n);
    ms->len += n;
    return 1;
}

/* Decodes detection i's {"size": [h, w], "counts": "..."} over the image
 * (full: h*w bytes of scratch) and keeps its bounding box of set pixels. */
static detect_status read_mask(const cJSON *mask, const char *file, int i, mr_detection *d, uint8_t *full,
                               mask_store *ms)
{
    const int h = d->mask_win.h, w = d->mask_win.w; /* the image's, set by the caller */
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(mask, "size");
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(mask, "counts");
    if (!cJSON_IsArray(size) || cJSON_GetArraySize(size) != 2 || !cJSON_IsNumber(cJSON_GetArrayItem(size, 0)) ||
        !cJSON_IsNumber(cJSON_GetArrayItem(size, 1)) || cJSON_GetArrayItem(size, 0)->valuedouble != h ||
        cJSON_GetArrayItem(size, 1)->valuedouble != w || !cJSON_IsString(counts))
        return api_failf(DETECT_ERR_FORMAT, "%s: detection %d: \"mask\" is not {\"size\": [%d, %d], \"counts\": "
                         "\"<RLE>\"}", file, i, h, w);
    const size_t slen = strlen(counts->valuestring);
    uint32_t *c = malloc((slen + 1) * sizeof *c);
    if (!c) return api_failf(DETECT_ERR_OOM, "out of memory");
    int n = 0;
    mr_error err = {0};
    mr_status st = rle_from_string(counts->valuestring, c, (int)slen + 1, &n, &err);
    if (st == MR_OK) st = rle_decode(c, n, h, w, full, &err);
    free(c);
    if (st != MR_OK) {
        mr_error_prefix(&err, "%s: detection %d: mask", file, i);
        return api_fail(&err);
    }
    int y0, y1, x0, x1;
    mr_mask_window win = {0, 0, 0, 0};
    if (mask_bounds(full, h, w, &y0, &y1, &x0, &x1)) win = (mr_mask_window){x0, y0, x1 - x0 + 1, y1 - y0 + 1};
    ms->offset[i] = ms->len;
    for (int y = 0; y < win.h; y++)
        if (!store_append(ms, full + (size_t)(win.y0 + y) * (size_t)w + (size_t)win.x0, (size_t)win.w))
            return api_failf(DETECT_ERR_OOM, "out of memory");
    d->mask_win = win;
    return DETECT_OK;
}

static detect_status read_detection(const detect_model *m, const cJSON *o, const char *file, int i, mr_detection *d,
                                    uint8_t *full, mask_store *ms)
{
    const mr_config *cfg = &m->cfg;
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(o, "class_id");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "class");
    const cJSON *score = cJSON_GetObjectItemCaseSensitive(o, "score");
    const cJSON *box = cJSON_GetObjectItemCaseSensitive(o, "box");
    if (!cJSON_IsNumber(cls) || !cJSON_IsNumber(score) || !cJSON_IsArray(box) || cJSON_GetArraySize(box) != 4)
        return api_failf(DETECT_ERR_FORMAT, "%s: detection %d: needs \"class_id\", \"score\" and a \"box\" of 4 numbers",
                         file, i);
    const double id = cls->valuedouble;
    if (id != (int)id || id < 1 || id >= cfg->classes.num_classes)
        return api_failf(DETECT_ERR_FORMAT, "%s: detection %d: class_id %g is not one of the model's 1..%d", file, i,
                         id, cfg->classes.num_classes - 1);
    d->class_id = (int)id;
    if (cJSON_IsString(name) && strcmp(name->valuestring, cfg->classes.class_names[d->class_id]) != 0)
        return api_failf(DETECT_ERR_FORMAT, "%s: detection %d: class %d is \"%s\" here but \"%s\" in the model: "
                         "written by another model?", file, i, d->class_id, name->valuestring,
                         cfg->classes.class_names[d->class_id]);
    /* Written with %.9g: back to the same float32. */
    d->score = (float)score->valuedouble;
    for (int k = 0; k < 4; k++) {
        const cJSON *v = cJSON_GetArrayItem(box, k);
        if (!cJSON_IsNumber(v)) return api_failf(DETECT_ERR_FORMAT, "%s: detection %d: box[%d] is not a number", file, i, k);
        d->box[k] = (float)v->valuedouble;
    }
    const cJSON *mask = cJSON_GetObjectItemCaseSensitive(o, "mask");
    return mask ? read_mask(mask, file, i, d, full, ms) : DETECT_OK;
}

static detect_status result_from_cjson(const detect_model *m, const cJSON *root, detect_result *r)
{
    const cJSON *jfile = cJSON_GetObjectItemCaseSensitive(root, "file");
    const char *file = cJSON_IsString(jfile) ? jfile->valuestring : "entry";
    const cJSON *jw = cJSON_GetObjectItemCaseSensitive(root, "width");
    const cJSON *jh = cJSON_GetObjectItemCaseSensitive(root, "height");
    const cJSON *dets = cJSON_GetObjectItemCaseSensitive(root, "detections");
    if (!cJSON_IsNumber(jw) || !cJSON_IsNumber(jh) || !cJSON_IsArray(dets))
        return api_failf(DETECT_ERR_FORMAT, "%s: an entry needs \"width\", \"height\" and \"detections\"", file);
    const double w = jw->valuedouble, h = jh->valuedouble;
    if (w != (int)w || h != (int)h || w < 1 || h < 1 || w > 100000 || h > 100000)
        return api_failf(DETECT_ERR_FORMAT, "%s: image size %gx%g is not a positive whole size", file, w, h);
    mr_result *res = &r->res;
    res->width = (int)w;
    res->height = (int)h;
    const int n = cJSON_GetArraySize(dets);
    res->dets = calloc((size_t)n + 1, sizeof *res->dets);
    mask_store ms = {0};
    ms.offset = malloc(((size_t)n + 1) * sizeof *ms.offset);
    uint8_t *full = malloc((size_t)res->width * (size_t)res->height);
    detect_status st = res->dets && ms.offset && full ? DETECT_OK : api_failf(DETECT_ERR_OOM, "out of memory");
    int i = 0;
    for (const cJSON *o = dets ? dets->child : NULL; st == DETECT_OK && o; o = o->next, i++) {
        res->dets[i].mask_win = (mr_mask_window){0, 0, res->width, res->height};
        ms.offset[i] = SIZE_MAX;
        st = cJSON_IsObject(o) ? read_detection(m, o, file, i, &res->dets[i], full, &ms)
                               : api_failf(DETECT_ERR_FORMAT, "%s: detection %d is not an object", file, i);
    }
    if (st == DETECT_OK && !store_append(&ms, (const uint8_t *)"", 0)) st = api_failf(DETECT_ERR_OOM, "out of memory");
    res->count = n;
    res->mask_storage = ms.bytes; /* freed with the result, also on failure */
    for (i = 0; st == DETECT_OK && i < n; i++) {
        mr_detection *d = &res->dets[i];
        if (ms.offset[i] == SIZE_MAX) {
            d->mask = NULL;
            d->mask_win = (mr_mask_window){0, 0, 0, 0};
        } else {
            d->mask = ms.bytes + ms.offset[i];
        }
    }
    free(ms.offset);
    free(full);
    return st;
}

detect_status detect_result_from_json(const detect_model *m, const char *json, detect_result **out)
{
    if (!m || !json || !out)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_result_from_json: %s is NULL", !m ? "model" : !json ? "json" : "out");
    *out = NULL;
    cJSON *root = cJSON_Parse(json);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return api_failf(DETECT_ERR_FORMAT, "not a JSON object (an entry of detect --json)");
    }
    detect_result *r = calloc(1, sizeof *r);
    detect_status st = r ? result_from_cjson(m, root, r) : api_failf(DETECT_ERR_OOM, "out of memory");
    cJSON_Delete(root);
    if (st != DETECT_OK) {
        detect_result_free(r);
        return st;
    }
    *out = r;
    return DETECT_OK;
}

detect_status detect_render(const detect_model *m, const detect_image *img, const detect_result *r,
                            detect_image **out)
{
    if (!m || !img || !r || !out)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_render: %s is NULL",
                         !m ? "model" : !img ? "image" : !r ? "result" : "out");
    *out = NULL;
    detect_image *drawn = calloc(1, sizeof *drawn);
    if (!drawn) return api_failf(DETECT_ERR_OOM, "out of memory");
    mr_error err = {0};
    if (visualize_render(&img->img, &r->res, &m->cfg, &drawn->img, &err) != MR_OK) {
        free(drawn);
        return api_fail(&err);
    }
    *out = drawn;
    return DETECT_OK;
}

/* ---- Documents ------------------------------------------------------------- */

struct detect_document {
    detect_document_kind kind;
    output_json json;   /* DETECT_DOCUMENT_JSON: streamed as images come */
    coco_results *coco; /* DETECT_DOCUMENT_COCO: kept, written at the close */
    char *path;
    char *members;      /* JSON: ", \"name\": value" for each detect_document_add_member, or NULL */
};

detect_status detect_document_open(detect_document **out, detect_document_kind kind, const char *path)
{
    if (!out || !path) return api_failf(DETECT_ERR_ARGUMENT, "detect_document_open: %s is NULL", out ? "path" : "out");
    *out = NULL;
    if (kind != DETECT_DOCUMENT_JSON && kind != DETECT_DOCUMENT_COCO)
        return api_failf(DETECT_ERR_ARGUMENT, "%s: unknown document kind %d", path, (int)kind);
    detect_document *d = calloc(1, sizeof *d);
    char *copy = strdup(path);
    if (!d || !copy) {
        free(d);
        free(copy);
        return api_failf(DETECT_ERR_OOM, "out of memory");
    }
    d->kind = kind;
    d->path = copy;
    mr_error err = {0};
    mr_status st;
    if (kind == DETECT_DOCUMENT_JSON) {
        st = output_json_open(&d->json, path, &err);
    } else {
        /* Written at the close; the path is tried now, so a bad one fails
         * before the work rather than after. */
        atomic_file probe;
        st = atomic_file_open(&probe, path, &err);
        if (st == MR_OK) {
            atomic_file_abort(&probe);
            st = coco_results_create(&d->coco, &err);
        }
    }
    if (st != MR_OK) {
        free(d->path);
        free(d);
        return api_fail(&err);
    }
    *out = d;
    return DETECT_OK;
}

detect_status detect_document_add(detect_document *d, const detect_model *m, const char *file, int index,
                                  const detect_result *r)
{
    if (!d || !m || !r || !file)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_document_add: %s is NULL",
                         !d ? "document" : !m ? "model" : !r ? "result" : "file");
    mr_error err = {0};
    mr_status st = d->kind == DETECT_DOCUMENT_JSON ? output_json_add(&d->json, file, &r->res, &m->cfg, &err)
                                                   : coco_results_add(d->coco, coco_image_id(file, index), &r->res,
                                                                      &m->cfg, &err);
    return st == MR_OK ? DETECT_OK : api_fail(&err);
}

detect_status detect_document_add_member(detect_document *d, const char *name, const char *json_value)
{
    if (!d || !name || !json_value)
        return api_failf(DETECT_ERR_ARGUMENT, "detect_document_add_member: %s is NULL",
                         !d ? "document" : !name ? "name" : "json_value");
    if (d->kind != DETECT_DOCUMENT_JSON)
        return api_failf(DETECT_ERR_ARGUMENT, "%s: a COCO results document is an array: it has no members", d->path);
    /* A plain key: nothing to escape, and "images" stays the only array of entries. */
    if (!*name || strcmp(name, "images") == 0 ||
        name[strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.")])
        return api_failf(DETECT_ERR_ARGUMENT, "%s: \"%s\" cannot be a member's name (letters, digits, _-. only; "
                         "not \"images\")", d->path, name);
    cJSON *v = cJSON_Parse(json_value);
    cJSON_Delete(v);
    if (!v) return api_failf(DETECT_ERR_FORMAT, "%s: member \"%s\": its value is not JSON", d->path, name);
    size_t old = d->members ? strlen(d->members) : 0, n = old + strlen(name) + strlen(json_value) + 8;
    char *m = realloc(d->members, n);
    if (!m) return api_failf(DETECT_ERR_OOM, "out of memory");
    snprintf(m + old, n - old, ", \"%s\": %s", name, json_value);
    d->members = m;
    return DETECT_OK;
}

static void document_release(detect_document *d)
{
    free(d->members);
    coco_results_free(d->coco);
    free(d->path);
    free(d);
}

detect_status detect_document_close(detect_document *d)
{
    if (!d) return api_failf(DETECT_ERR_ARGUMENT, "detect_document_close: document is NULL");
    mr_error err = {0};
    mr_status st = d->kind == DETECT_DOCUMENT_JSON ? output_json_close(&d->json, d->members, &err)
                                                   : coco_results_write(d->coco, d->path, &err);
    document_release(d);
    return st == MR_OK ? DETECT_OK : api_fail(&err);
}

void detect_document_abort(detect_document *d)
{
    if (!d) return;
    if (d->kind == DETECT_DOCUMENT_JSON) output_json_abort(&d->json);
    document_release(d);
}

detect_status detect_write_file(const char *path, const void *data, size_t size)
{
    if (!path || (!data && size))
        return api_failf(DETECT_ERR_ARGUMENT, "detect_write_file: %s is NULL", path ? "data" : "path");
    atomic_file af;
    mr_error err = {0};
    if (atomic_file_open(&af, path, &err) != MR_OK) return api_fail(&err);
    atomic_file_write(&af, data, size);
    return atomic_file_commit(&af, &err) == MR_OK ? DETECT_OK : api_fail(&err);
}
