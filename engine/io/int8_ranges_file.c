/* See int8_ranges_file.h. */
#include "io/int8_ranges_file.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "core/weights.h"
#include "io/atomic_file.h"

#define FORMAT "detect int8 ranges 1"
#define MAX_FILE_BYTES (4u << 20)

void int8_ranges_path_for(const char *weights_path, char *out, size_t out_len)
{
    size_t n = strlen(weights_path);
    const char *ext = ".safetensors";
    size_t e = strlen(ext);
    if (n >= e && strcmp(weights_path + n - e, ext) == 0) n -= e;
    snprintf(out, out_len, "%.*s.int8.json", (int)n, weights_path);
}

/* The file name, size and fingerprint of the weights at `path`. */
static mr_status weights_stamp(const char *path, const char **file, double *bytes, char hex[17], mr_error *err)
{
    mr_weights w;
    MR_TRY(weights_open(&w, path, err));
    snprintf(hex, 17, "%016" PRIx64, weights_fingerprint(&w));
    *bytes = (double)w.map_size;
    weights_close(&w);
    const char *slash = strrchr(path, '/');
    *file = slash ? slash + 1 : path;
    return MR_OK;
}

static mr_status read_text(const char *path, char **out, mr_error *err)
{
    *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return mr_fail(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = malloc(MAX_FILE_BYTES + 1);
    size_t n = buf ? fread(buf, 1, MAX_FILE_BYTES + 1, f) : 0;
    int failed = ferror(f);
    fclose(f);
    mr_status st = !buf      ? mr_fail(err, MR_ERR_OOM, "%s: out of memory", path)
                   : failed  ? mr_fail(err, MR_ERR_IO, "%s: cannot read", path)
                   : n > MAX_FILE_BYTES ? mr_fail(err, MR_ERR_FORMAT, "%s: larger than 4 MiB; not a ranges file", path)
                                        : MR_OK;
    if (st != MR_OK) {
        free(buf);
        return st;
    }
    buf[n] = '\0';
    *out = buf;
    return MR_OK;
}

static mr_status parse(mr_int8_ranges *r, const cJSON *root, mr_error *err)
{
    const cJSON *format = cJSON_GetObjectItemCaseSensitive(root, "format");
    if (!cJSON_IsString(format) || strcmp(format->valuestring, FORMAT) != 0)
        return mr_fail(err, MR_ERR_FORMAT, "\"format\" is not \"%s\"", FORMAT);
    const cJSON *wt = cJSON_GetObjectItemCaseSensitive(root, "weights");
    const cJSON *fp = cJSON_GetObjectItemCaseSensitive(wt, "fnv1a64");
    const cJSON *bytes = cJSON_GetObjectItemCaseSensitive(wt, "bytes");
    char *end = NULL;
    if (cJSON_IsString(fp)) r->weights_fnv1a64 = strtoull(fp->valuestring, &end, 16);
    if (!cJSON_IsString(fp) || strlen(fp->valuestring) != 16 || !end || *end || !cJSON_IsNumber(bytes))
        return mr_fail(err, MR_ERR_FORMAT, "\"weights\" needs \"bytes\" and \"fnv1a64\" (16 hex digits)");
    r->weights_bytes = bytes->valuedouble;
    const cJSON *layers = cJSON_GetObjectItemCaseSensitive(root, "layers");
    if (!cJSON_IsObject(layers)) return mr_fail(err, MR_ERR_FORMAT, "\"layers\" is not an object");
    int count = cJSON_GetArraySize(layers);
    r->items = calloc(count ? (size_t)count : 1, sizeof *r->items);
    if (!r->items) return mr_fail(err, MR_ERR_OOM, "out of memory");
    const cJSON *l;
    cJSON_ArrayForEach(l, layers)
    {
        const cJSON *range = cJSON_GetObjectItemCaseSensitive(l, "range");
        const cJSON *sign = cJSON_GetObjectItemCaseSensitive(l, "signed");
        if (strlen(l->string) >= MR_INT8_NAME_LEN)
            return mr_fail(err, MR_ERR_FORMAT, "layer name \"%.40s...\" is too long", l->string);
        /* a range under 1e-30 would make the quantization scale denormal or 0 */
        if (!cJSON_IsNumber(range) || !(range->valuedouble >= 1e-30 && range->valuedouble <= 3e38) ||
            !cJSON_IsBool(sign))
            return mr_fail(err, MR_ERR_FORMAT, "layer \"%s\": needs \"range\" (a positive finite number) and "
                           "\"signed\" (true or false)", l->string);
        if (int8_ranges_find(r, l->string))
            return mr_fail(err, MR_ERR_FORMAT, "layer \"%s\" is given twice", l->string);
        mr_int8_range *it = &r->items[r->count++];
        snprintf(it->name, sizeof it->name, "%s", l->string);
        it->range = (float)range->valuedouble;
        it->is_signed = cJSON_IsTrue(sign);
    }
    return MR_OK;
}

mr_status int8_ranges_load(mr_int8_ranges *r, const char *path, mr_error *err)
{
    memset(r, 0, sizeof *r);
    snprintf(r->path, sizeof r->path, "%s", path);
    char *text;
    MR_TRY(read_text(path, &text, err));
    cJSON *root = cJSON_Parse(text);
    free(text);
    mr_status st = root ? parse(r, root, err)
                        : mr_fail(err, MR_ERR_FORMAT, "not valid JSON");
    cJSON_Delete(root);
    if (st != MR_OK) {
        int8_ranges_free(r);
        if (st != MR_ERR_IO) mr_error_prefix(err, "%s", path);
    }
    return st;
}

mr_status int8_ranges_save(const mr_int8_ranges *r, const char *path, const char *weights_path, int images,
                           const char *method, mr_error *err)
{
    const char *file;
    double size;
    char hex[17];
    MR_TRY(weights_stamp(weights_path, &file, &size, hex, err));
    cJSON *root = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "format", FORMAT);
    cJSON *wt = cJSON_AddObjectToObject(root, "weights");
    cJSON_AddStringToObject(wt, "file", file);
    cJSON_AddNumberToObject(wt, "bytes", size);
    cJSON_AddStringToObject(wt, "fnv1a64", hex);
    cJSON *cal = cJSON_AddObjectToObject(root, "calibration");
    cJSON_AddNumberToObject(cal, "images", images);
    cJSON_AddStringToObject(cal, "method", method);
    cJSON *layers = cJSON_AddObjectToObject(root, "layers");
    for (int i = 0; i < r->count; i++) {
        cJSON *l = cJSON_AddObjectToObject(layers, r->items[i].name);
        cJSON_AddNumberToObject(l, "range", (double)r->items[i].range);
        cJSON_AddBoolToObject(l, "signed", r->items[i].is_signed);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return mr_fail(err, MR_ERR_OOM, "out of memory writing %s", path);
    atomic_file af;
    mr_status st = atomic_file_open(&af, path, err);
    if (st == MR_OK) {
        atomic_file_printf(&af, "%s\n", text);
        st = atomic_file_commit(&af, err);
    }
    free(text);
    return st;
}
