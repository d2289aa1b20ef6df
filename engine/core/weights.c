#include "core/weights.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* A header larger than this is not a model we wrote (R-101-FPN's is 60 KB). */
#define MAX_HEADER_BYTES (64u << 20)
/* No tensor of a detection model has more elements than this. */
#define MAX_ELEMENTS ((uint64_t)1 << 40)

static size_t dtype_size(mr_dtype d)
{
    switch (d) {
    case MR_DTYPE_F32: return 4;
    case MR_DTYPE_F16: return 2;
    case MR_DTYPE_BF16: return 2;
    case MR_DTYPE_F64: return 8;
    }
    return 0;
}

static int dtype_parse(const char *s, mr_dtype *out)
{
    static const struct { const char *name; mr_dtype dtype; } table[] = {
        {"F32", MR_DTYPE_F32}, {"F16", MR_DTYPE_F16}, {"BF16", MR_DTYPE_BF16}, {"F64", MR_DTYPE_F64},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (strcmp(s, table[i].name) == 0) { *out = table[i].dtype; return 1; }
    return 0;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, mant = h & 0x3ff, bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) { mant <<= 1; exp--; }
            bits = sign | (exp << 23) | ((mant & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp - 15 + 127) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static int cmp_entry_name(const void *a, const void *b)
{
    return strcmp(((const mr_weight_entry *)a)->name, ((const mr_weight_entry *)b)->name);
}

static int cmp_entry_offset(const void *a, const void *b)
{
    const mr_weight_entry *x = *(const mr_weight_entry *const *)a, *y = *(const mr_weight_entry *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

/* Parses one header entry; data_base/data_size describe the data area. */
static mr_status parse_entry(const cJSON *item, const unsigned char *data_base, size_t data_size,
                             mr_weight_entry *e, mr_error *err)
{
    const char *name = item->string;
    const cJSON *dtype = cJSON_GetObjectItemCaseSensitive(item, "dtype");
    const cJSON *shape = cJSON_GetObjectItemCaseSensitive(item, "shape");
    const cJSON *offs = cJSON_GetObjectItemCaseSensitive(item, "data_offsets");
    if (!cJSON_IsObject(item) || !cJSON_IsString(dtype) || !cJSON_IsArray(shape) || !cJSON_IsArray(offs))
        return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": header entry needs dtype, shape and data_offsets", name);
    if (!dtype_parse(dtype->valuestring, &e->dtype))
        return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": unsupported dtype %s (F32, F16, BF16, F64 are)",
                       name, dtype->valuestring);
    e->ndim = cJSON_GetArraySize(shape);
    if (e->ndim > MR_WEIGHTS_MAX_DIMS)
        return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": %d dimensions (at most %d)", name, e->ndim,
                       MR_WEIGHTS_MAX_DIMS);
    uint64_t numel = 1;
    for (int d = 0; d < e->ndim; d++) {
        const cJSON *v = cJSON_GetArrayItem(shape, d);
        if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > 1e12 || v->valuedouble != floor(v->valuedouble))
            return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": shape[%d] is not a non-negative integer", name, d);
        e->shape[d] = (int64_t)v->valuedouble;
        /* Checked before multiplying, so the count cannot wrap. */
        if (e->shape[d] && numel > (MAX_ELEMENTS / (uint64_t)e->shape[d]))
            return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": shape too large", name);
        numel *= (uint64_t)e->shape[d];
    }
    if (cJSON_GetArraySize(offs) != 2)
        return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": data_offsets must be [begin, end]", name);
    double b = cJSON_GetArrayItem(offs, 0)->valuedouble, en = cJSON_GetArrayItem(offs, 1)->valuedouble;
    if (!cJSON_IsNumber(cJSON_GetArrayItem(offs, 0)) || !cJSON_IsNumber(cJSON_GetArrayItem(offs, 1)) || b < 0 ||
        en < b || b != floor(b) || en != floor(en))
        return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": bad data_offsets", name);
    if (en > (double)data_size)
        return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": data_offsets [%.0f, %.0f] run past the end of the file "
                       "(data area size %zu; truncated?)", name, b, en, data_size);
    e->nbytes = (size_t)(en - b);
    if ((uint64_t)e->nbytes != numel * dtype_size(e->dtype))
        return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\": data size %zu, expected %llu (element count %llu, %s)",
                       name, e->nbytes, (unsigned long long)(numel * dtype_size(e->dtype)), (unsigned long long)numel,
                       dtype->valuestring);
    e->data = data_base + (size_t)b;
    e->name = strdup(name);
    if (!e->name) return mr_fail(err, MR_ERR_OOM, "out of memory");
    return MR_OK;
}

static mr_status parse_header(mr_weights *w, const char *json, size_t len, const unsigned char *data_base,
                              size_t data_size, mr_error *err)
{
    cJSON *root = cJSON_ParseWithLength(json, len);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return mr_fail(err, MR_ERR_FORMAT, "header is not a JSON object");
    }
    int n = 0;
    const cJSON *item;
    cJSON_ArrayForEach(item, root) n++;
    w->entries = calloc((size_t)(n ? n : 1), sizeof *w->entries);
    if (!w->entries) {
        cJSON_Delete(root);
        return mr_fail(err, MR_ERR_OOM, "out of memory");
    }
    mr_status st = MR_OK;
    cJSON_ArrayForEach(item, root) {
        if (strcmp(item->string, "__metadata__") == 0) {
            if (!cJSON_IsObject(item)) {
                st = mr_fail(err, MR_ERR_FORMAT, "__metadata__ must be an object of strings");
                break;
            }
            free(w->metadata_json);
            w->metadata_json = cJSON_PrintUnformatted(item);
            continue;
        }
        st = parse_entry(item, data_base, data_size, &w->entries[w->count], err);
        if (st != MR_OK) break;
        w->count++;
    }
    cJSON_Delete(root);
    if (st != MR_OK) return st;

    qsort(w->entries, (size_t)w->count, sizeof *w->entries, cmp_entry_name);
    for (int i = 1; i < w->count; i++)
        if (strcmp(w->entries[i - 1].name, w->entries[i].name) == 0)
            return mr_fail(err, MR_ERR_FORMAT, "tensor \"%s\" appears twice in the header", w->entries[i].name);

    /* Overlapping tensors would let one name alias another's data: sorted by
     * offset, each non-empty tensor must start at or after the furthest end
     * seen so far (empty tensors occupy nothing and are skipped). */
    mr_weight_entry **by_off = malloc(sizeof *by_off * (size_t)(w->count ? w->count : 1));
    if (!by_off) return mr_fail(err, MR_ERR_OOM, "out of memory");
    for (int i = 0; i < w->count; i++) by_off[i] = &w->entries[i];
    qsort(by_off, (size_t)w->count, sizeof *by_off, cmp_entry_offset);
    const mr_weight_entry *furthest = NULL;
    for (int i = 0; i < w->count; i++) {
        const mr_weight_entry *e = by_off[i];
        if (!e->nbytes) continue;
        if (furthest && furthest->data + furthest->nbytes > e->data) {
            st = mr_fail(err, MR_ERR_FORMAT, "tensors \"%s\" and \"%s\" overlap in the data area", furthest->name,
                         e->name);
            break;
        }
        if (!furthest || e->data + e->nbytes > furthest->data + furthest->nbytes) furthest = e;
    }
    free(by_off);
    return st;
}

/* Tensor names and dtypes from the header appear in messages, and JSON allows
 * a newline in them: control characters print as '?', so the message stays
 * one line. */
static void one_line(mr_error *err)
{
    if (!err) return;
    for (char *p = err->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = '?';
}

uint64_t weights_fingerprint(const mr_weights *w)
{
    const unsigned char *p = w->map;
    uint64_t h = 14695981039346656037ull;
    size_t i = 0;
    for (; i + 8 <= w->map_size; i += 8) {
        uint64_t word;
        memcpy(&word, p + i, 8); /* little-endian: x86 and aarch64 */
        h = (h ^ word) * 1099511628211ull;
    }
    if (i < w->map_size) {
        uint64_t word = 0;
        memcpy(&word, p + i, w->map_size - i);
        h = (h ^ word) * 1099511628211ull;
    }
    return h;
}

mr_status weights_open(mr_weights *w, const char *path, mr_error *err)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    int fd = open(path, O_RDONLY);
    if (fd < 0) return mr_fail(err, MR_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return mr_fail(err, MR_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size < 8) {
        close(fd);
        return mr_fail(err, MR_ERR_FORMAT, "%s: size %lld is too short for a safetensors file (minimum 8)", path,
                       (long long)sb.st_size);
    }
    w->map_size = (size_t)sb.st_size;
    w->map = mmap(NULL, w->map_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (w->map == MAP_FAILED) {
        w->map = NULL;
        return mr_fail(err, MR_ERR_IO, "%s: mmap failed: %s", path, strerror(errno));
    }
    const unsigned char *base = w->map;
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = (hlen << 8) | base[i];
    mr_status st;
    if (hlen > MAX_HEADER_BYTES) {
        st = mr_fail(err, MR_ERR_FORMAT, "header length %llu exceeds the %u-byte limit; not a safetensors file",
                     (unsigned long long)hlen, MAX_HEADER_BYTES);
    } else if (hlen == 0 || hlen > w->map_size - 8) {
        st = mr_fail(err, MR_ERR_FORMAT, "header length %llu does not fit in the file (%zu bytes); "
                     "not a safetensors file, or truncated", (unsigned long long)hlen, w->map_size);
    } else {
        st = parse_header(w, (const char *)base + 8, (size_t)hlen, base + 8 + hlen, w->map_size - 8 - (size_t)hlen,
                          err);
    }
    if (st != MR_OK) {
        mr_error_prefix(err, "%s", path);
        one_line(err);
        weights_close(w);
    }
    return st;
}

void weights_close(mr_weights *w)
{
    for (int i = 0; i < w->count; i++) free(w->entries[i].name);
    free(w->entries);
    free(w->metadata_json);
    if (w->map) munmap(w->map, w->map_size);
    memset(w, 0, sizeof *w);
}

const mr_weight_entry *weights_find(const mr_weights *w, const char *name)
{
    mr_weight_entry key = {0};
    key.name = (char *)name;
    return bsearch(&key, w->entries, (size_t)w->count, sizeof *w->entries, cmp_entry_name);
}

static void shape_str(char *buf, size_t cap, int ndim, const int64_t *shape)
{
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? "," : "", (long long)shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
}

mr_status weights_read_f32(mr_weights *w, const char *name, int ndim, const int64_t *shape, float *out,
                           mr_error *err)
{
    mr_weight_entry *e = (mr_weight_entry *)weights_find(w, name);
    if (!e) return mr_fail(err, MR_ERR_SHAPE, "%s: tensor \"%s\" is missing", w->path, name);
    int same = e->ndim == ndim;
    for (int d = 0; same && d < ndim; d++) same = e->shape[d] == shape[d];
    if (!same) {
        char want[128], got[128];
        shape_str(want, sizeof want, ndim, shape);
        shape_str(got, sizeof got, e->ndim, e->shape);
        return mr_fail(err, MR_ERR_SHAPE, "%s: tensor \"%s\" has shape %s, the config needs %s", w->path, name, got,
                       want);
    }
    e->used = 1;
    size_t numel = e->nbytes / dtype_size(e->dtype);
    switch (e->dtype) {
    case MR_DTYPE_F32:
        memcpy(out, e->data, e->nbytes);
        break;
    case MR_DTYPE_F16:
        for (size_t i = 0; i < numel; i++) {
            uint16_t h = (uint16_t)(e->data[2 * i] | (e->data[2 * i + 1] << 8));
            out[i] = half_to_float(h);
        }
        break;
    case MR_DTYPE_BF16:
        for (size_t i = 0; i < numel; i++) {
            uint32_t bits = (uint32_t)(e->data[2 * i] | (e->data[2 * i + 1] << 8)) << 16;
            memcpy(&out[i], &bits, 4);
        }
        break;
    case MR_DTYPE_F64:
        for (size_t i = 0; i < numel; i++) {
            double v;
            memcpy(&v, e->data + 8 * i, 8);
            out[i] = (float)v;
        }
        break;
    }
    return MR_OK;
}

mr_status weights_read_affine(mr_weights *w, const char *prefix, int channels, float eps, float *scale,
                              float *shift, mr_error *err)
{
    char name[512];
    int64_t shape[1] = {channels};
    snprintf(name, sizeof name, "%s.scale", prefix);
    if (weights_find(w, name)) { /* AffineChannel: already folded by Detectron */
        MR_TRY(weights_read_f32(w, name, 1, shape, scale, err));
        snprintf(name, sizeof name, "%s.shift", prefix);
        return weights_read_f32(w, name, 1, shape, shift, err);
    }
    static const char *const parts[4] = {"weight", "bias", "running_mean", "running_var"};
    int any = 0;
    for (int i = 0; i < 4 && !any; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, parts[i]);
        any = weights_find(w, name) != NULL;
    }
    if (!any)
        return mr_fail(err, MR_ERR_SHAPE, "%s: normalisation \"%s\" is missing (neither %s.weight/bias/"
                       "running_mean/running_var nor %s.scale/shift)", w->path, prefix, prefix, prefix);
    float *mean = malloc(sizeof(float) * 2 * (size_t)channels);
    if (!mean) return mr_fail(err, MR_ERR_OOM, "out of memory");
    float *var = mean + channels;
    float *dst[4] = {scale, shift, mean, var};
    mr_status st = MR_OK;
    for (int i = 0; i < 4 && st == MR_OK; i++) {
        snprintf(name, sizeof name, "%s.%s", prefix, parts[i]);
        st = weights_read_f32(w, name, 1, shape, dst[i], err);
    }
    if (st == MR_OK) {
        /* The same float32 operations as FrozenBatchNorm2d: scale = w * rsqrt(var + eps). */
        for (int c = 0; c < channels && st == MR_OK; c++)
            if (!(var[c] + eps > 0.0f) || !isfinite(var[c]))
                st = mr_fail(err, MR_ERR_FORMAT, "%s: tensor \"%s.running_var\"[%d] = %g: a variance must be "
                             "positive and finite", w->path, prefix, c, (double)var[c]);
    }
    if (st == MR_OK) {
        for (int c = 0; c < channels; c++) {
            float s = scale[c] * (1.0f / sqrtf(var[c] + eps));
            scale[c] = s;
            shift[c] = shift[c] - mean[c] * s;
        }
    }
    free(mean);
    return st;
}

int weights_unused(const mr_weights *w, char *buf, size_t cap)
{
    int n = 0;
    size_t at = 0;
    if (cap) buf[0] = '\0';
    for (int i = 0; i < w->count; i++) {
        if (w->entries[i].used) continue;
        if (at < cap) at += (size_t)snprintf(buf + at, cap - at, "%s%s", n ? ", " : "", w->entries[i].name);
        n++;
    }
    return n;
}
