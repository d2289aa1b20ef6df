/* Unit tests for engine/weights.{h,c}: safetensors files written byte by
 * byte here (8-byte little-endian header length, JSON header, data), read
 * back through the loader, and one malformed file per rule the loader must
 * enforce. Every failure must come back as a status whose message names the
 * file and the thing at fault; nothing may crash or leak (this test is run
 * under valgrind --leak-check=full). Temp files live in one mkdtemp folder
 * that the group teardown removes. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp, ftruncate */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/weights.h"

/* ---- temp files ---- */

static char g_dir[256];
static int g_seq;

static int group_setup(void **state)
{
    (void)state;
    snprintf(g_dir, sizeof g_dir, "/tmp/test_weights_XXXXXX");
    return mkdtemp(g_dir) ? 0 : -1;
}

static void remove_tree(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..")) continue;
        char p[512];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(p, &sb) == 0 && S_ISDIR(sb.st_mode))
            remove_tree(p);
        else
            unlink(p);
    }
    closedir(d);
    rmdir(dir);
}

static int group_teardown(void **state)
{
    (void)state;
    remove_tree(g_dir);
    return 0;
}

/* A fresh path in the temp folder; `tag` makes failing messages readable. */
static void temp_path(char *path, size_t n, const char *tag)
{
    snprintf(path, n, "%s/%03d_%s.safetensors", g_dir, g_seq++, tag);
}

static void write_bytes(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    if (n) assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

static void put_le64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}

/* Writes an 8-byte header length `hlen` (not necessarily strlen(header)),
 * the header text and `ndata` data bytes. */
static void write_st_hlen(const char *path, uint64_t hlen, const char *header, const void *data, size_t ndata)
{
    size_t hl = strlen(header);
    unsigned char *buf = malloc(8 + hl + ndata + 1);
    assert_non_null(buf);
    put_le64(buf, hlen);
    memcpy(buf + 8, header, hl);
    if (ndata) memcpy(buf + 8 + hl, data, ndata);
    write_bytes(path, buf, 8 + hl + ndata);
    free(buf);
}

static void write_st(const char *path, const char *header, const void *data, size_t ndata)
{
    write_st_hlen(path, strlen(header), header, data, ndata);
}

/* A file from tensor specs: data laid out back to back in `data_order`,
 * header entries written in `header_order` (both index lists of n). */
typedef struct {
    const char *name;
    const char *dtype;
    const char *shape; /* JSON array text */
    const void *data;
    size_t nbytes;
} tensor_spec;

static size_t build_file(const char *path, const tensor_spec *t, int n, const int *header_order,
                         const int *data_order, const char *metadata)
{
    size_t begin[16], total = 0;
    assert_true(n <= 16);
    for (int i = 0; i < n; i++) {
        begin[data_order[i]] = total;
        total += t[data_order[i]].nbytes;
    }
    char header[8192];
    size_t at = (size_t)snprintf(header, sizeof header, "{");
    if (metadata) at += (size_t)snprintf(header + at, sizeof header - at, "\"__metadata__\":%s", metadata);
    for (int k = 0; k < n; k++) {
        int i = header_order[k];
        at += (size_t)snprintf(header + at, sizeof header - at, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":%s,"
                               "\"data_offsets\":[%zu,%zu]}", (k || metadata) ? "," : "", t[i].name, t[i].dtype,
                               t[i].shape, begin[i], begin[i] + t[i].nbytes);
        assert_true(at < sizeof header);
    }
    at += (size_t)snprintf(header + at, sizeof header - at, "}");
    assert_true(at < sizeof header);
    unsigned char *data = malloc(total ? total : 1);
    assert_non_null(data);
    for (int i = 0; i < n; i++)
        if (t[i].nbytes) memcpy(data + begin[i], t[i].data, t[i].nbytes);
    write_st(path, header, data, total);
    free(data);
    return 8 + strlen(header) + total;
}

/* ---- checks ---- */

static void check_msg(const mr_error *err, const char *path, const char *want0, const char *want1)
{
    const char *want[3] = {path, want0, want1};
    for (int i = 0; i < 3; i++) {
        if (want[i] && !strstr(err->msg, want[i])) {
            print_error("message lacks \"%s\": %s\n", want[i], err->msg);
            fail();
        }
    }
    if (strchr(err->msg, '\n')) {
        print_error("message has a newline: %s\n", err->msg);
        fail();
    }
}

/* Opens path; asserts it fails with `status`, a message naming the file and
 * want0/want1, and that the struct is left empty (closing it again is safe). */
static void expect_open_fail(const char *path, mr_status status, const char *want0, const char *want1)
{
    mr_weights w;
    mr_error err = {MR_OK, ""};
    mr_status st = weights_open(&w, path, &err);
    if (st != status || err.status != status) {
        print_error("%s: want %s, got %s: %s\n", path, mr_status_name(status), mr_status_name(st), err.msg);
        if (st == MR_OK) weights_close(&w);
        fail();
    }
    check_msg(&err, path, want0, want1);
    assert_null(w.map);
    assert_null(w.entries);
    assert_null(w.metadata_json);
    assert_int_equal(w.count, 0);
    weights_close(&w);
}

/* Writes `header` (+ data) and expects the open to fail as MR_ERR_FORMAT. */
static void expect_header_fail(const char *header, const void *data, size_t ndata, const char *want0,
                               const char *want1)
{
    char path[512];
    temp_path(path, sizeof path, "bad");
    write_st(path, header, data, ndata);
    expect_open_fail(path, MR_ERR_FORMAT, want0, want1);
}

static void open_ok(mr_weights *w, const char *path)
{
    mr_error err = {MR_OK, ""};
    mr_status st = weights_open(w, path, &err);
    if (st != MR_OK) {
        print_error("%s: %s: %s\n", path, mr_status_name(st), err.msg);
        fail();
    }
}

static void read_ok(mr_weights *w, const char *name, int ndim, const int64_t *shape, float *out)
{
    mr_error err = {MR_OK, ""};
    mr_status st = weights_read_f32(w, name, ndim, shape, out, &err);
    if (st != MR_OK) {
        print_error("%s: %s: %s\n", name, mr_status_name(st), err.msg);
        fail();
    }
}

static uint32_t f32_bits(float f)
{
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}

static float f32_from_bits(uint32_t b)
{
    float f;
    memcpy(&f, &b, 4);
    return f;
}

/* Reference conversions by arithmetic on the fields, not by bit shuffling,
 * so they are independent of the loader's code. Every finite half and
 * bfloat16 is exactly representable as a float. */
static float half_ref(uint16_t h)
{
    int s = h >> 15, e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0)
        v = ldexp(m, -24); /* subnormal: m * 2^-14 * 2^-10 */
    else if (e == 31)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(1024 + m, e - 15 - 10);
    return (float)(s ? -v : v);
}

static float bf16_ref(uint16_t h)
{
    int s = h >> 15, e = (h >> 7) & 0xff, m = h & 0x7f;
    double v;
    if (e == 0)
        v = ldexp(m, -126 - 7);
    else if (e == 255)
        v = m ? NAN : INFINITY;
    else
        v = ldexp(128 + m, e - 127 - 7);
    return (float)(s ? -v : v);
}

/* got must equal want bit for bit, except that any NaN matches a NaN of the
 * same sign. */
static void expect_same_float(const char *what, size_t i, float got, float want)
{
    int ok = isnan(want) ? isnan(got) && !signbit(got) == !signbit(want) : f32_bits(got) == f32_bits(want);
    if (!ok) {
        print_error("%s[%zu]: got %a (0x%08x), want %a (0x%08x)\n", what, i, (double)got, f32_bits(got),
                    (double)want, f32_bits(want));
        fail();
    }
}

/* ---- the valid file ---- */

enum { N_HALF = 65536, N_F32 = 12, N_F64 = 9, N_BF16_ODD = 3 };

typedef struct {
    float f32[N_F32];
    unsigned char f16[2 * N_HALF];  /* every half bit pattern, little-endian */
    unsigned char bf16[2 * N_HALF]; /* every bfloat16 bit pattern */
    unsigned char odd[2 * N_BF16_ODD];
    double f64[N_F64];
    float scalar;
} valid_data;

static const double F64_VALUES[N_F64] = {0.5, -3.25, -0.0, 0x1p-149, 65504.0, 0.1, 3.4028234663852886e38, -INFINITY,
                                         NAN};

static valid_data *valid_data_new(void)
{
    valid_data *d = calloc(1, sizeof *d);
    assert_non_null(d);
    const float f32[N_F32] = {0.0f, -0.0f, 1.0f, -2.5f, FLT_MIN, 0x1p-149f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY,
                              f32_from_bits(0x7fc00001u), f32_from_bits(0xff812345u)};
    memcpy(d->f32, f32, sizeof f32);
    for (int i = 0; i < N_HALF; i++) {
        d->f16[2 * i] = d->bf16[2 * i] = (unsigned char)(i & 0xff);
        d->f16[2 * i + 1] = d->bf16[2 * i + 1] = (unsigned char)(i >> 8);
    }
    const uint16_t odd[N_BF16_ODD] = {0x3f80, 0xc000, 0x0001}; /* 1, -2, smallest subnormal */
    for (int i = 0; i < N_BF16_ODD; i++) {
        d->odd[2 * i] = (unsigned char)(odd[i] & 0xff);
        d->odd[2 * i + 1] = (unsigned char)(odd[i] >> 8);
    }
    memcpy(d->f64, F64_VALUES, sizeof d->f64);
    d->scalar = 42.0f;
    return d;
}

/* The F64 tensor follows the 6-byte odd BF16 one, so it is not 8-aligned in
 * the file: the loader may not assume alignment. */
static int valid_specs(const valid_data *d, tensor_spec *t)
{
    int n = 0;
    t[n++] = (tensor_spec){"conv.weight", "F32", "[3,2,2]", d->f32, sizeof d->f32};
    t[n++] = (tensor_spec){"all.f16", "F16", "[256,256]", d->f16, sizeof d->f16};
    t[n++] = (tensor_spec){"all.bf16", "BF16", "[65536]", d->bf16, sizeof d->bf16};
    t[n++] = (tensor_spec){"odd.bf16", "BF16", "[3]", d->odd, sizeof d->odd};
    t[n++] = (tensor_spec){"fc.f64", "F64", "[9,1]", d->f64, sizeof d->f64};
    t[n++] = (tensor_spec){"empty", "F32", "[2,0,3]", NULL, 0};
    t[n++] = (tensor_spec){"scalar", "F32", "[]", &d->scalar, sizeof d->scalar};
    return n;
}

static void check_valid_contents(mr_weights *w, const valid_data *d)
{
    assert_int_equal(w->count, 7);
    float *out = malloc(sizeof(float) * N_HALF);
    assert_non_null(out);

    const int64_t s_f32[3] = {3, 2, 2};
    read_ok(w, "conv.weight", 3, s_f32, out);
    for (int i = 0; i < N_F32; i++) assert_int_equal(f32_bits(out[i]), f32_bits(d->f32[i])); /* NaN payloads too */

    const int64_t s_f16[2] = {256, 256};
    read_ok(w, "all.f16", 2, s_f16, out);
    for (int i = 0; i < N_HALF; i++) expect_same_float("all.f16", (size_t)i, out[i], half_ref((uint16_t)i));
    /* spot checks of the reference itself */
    assert_true(out[0x0001] == 0x1p-24f);             /* smallest subnormal */
    assert_true(out[0x03ff] == 1023 * 0x1p-24f);      /* largest subnormal */
    assert_true(out[0x0400] == 0x1p-14f);             /* smallest normal */
    assert_true(out[0x3c00] == 1.0f);
    assert_true(out[0x7bff] == 65504.0f);
    assert_true(out[0x7c00] == INFINITY && out[0xfc00] == -INFINITY);
    assert_true(isnan(out[0x7e00]) && isnan(out[0x7c01]) && isnan(out[0xfe00]));
    assert_int_equal(f32_bits(out[0x8000]), 0x80000000u); /* -0 */
    assert_true(out[0x8001] == -0x1p-24f);

    const int64_t s_bf16[1] = {65536};
    read_ok(w, "all.bf16", 1, s_bf16, out);
    for (int i = 0; i < N_HALF; i++) expect_same_float("all.bf16", (size_t)i, out[i], bf16_ref((uint16_t)i));
    assert_true(out[0x3f80] == 1.0f && out[0x0001] == 0x1p-133f && out[0x7f80] == INFINITY);

    const int64_t s_odd[1] = {3};
    read_ok(w, "odd.bf16", 1, s_odd, out);
    assert_true(out[0] == 1.0f && out[1] == -2.0f && out[2] == 0x1p-133f);

    const int64_t s_f64[2] = {9, 1};
    read_ok(w, "fc.f64", 2, s_f64, out);
    for (int i = 0; i < N_F64; i++) expect_same_float("fc.f64", (size_t)i, out[i], (float)F64_VALUES[i]);
    assert_true(out[5] == 0.1f && out[3] == 0x1p-149f && out[6] == FLT_MAX);
    assert_int_equal(f32_bits(out[2]), 0x80000000u);

    const int64_t s_empty[3] = {2, 0, 3};
    out[0] = 7.0f;
    read_ok(w, "empty", 3, s_empty, out);
    assert_true(out[0] == 7.0f); /* nothing written */

    read_ok(w, "scalar", 0, NULL, out);
    assert_true(out[0] == 42.0f);

    free(out);
    char buf[256];
    assert_int_equal(weights_unused(w, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
}

static void test_valid_file_reads_back_exactly(void **state)
{
    (void)state;
    valid_data *d = valid_data_new();
    tensor_spec t[8];
    int n = valid_specs(d, t);
    const int order[7] = {0, 1, 2, 3, 4, 5, 6};
    char path[512];
    temp_path(path, sizeof path, "valid");
    build_file(path, t, n, order, order, "{\"format\":\"pt\",\"source\":\"unit test\"}");

    mr_weights w;
    open_ok(&w, path);
    assert_string_equal(w.path, path);
    check_valid_contents(&w, d);
    weights_close(&w);
    assert_null(w.map);
    weights_close(&w); /* twice is harmless */
    free(d);
}

static void test_header_order_does_not_matter(void **state)
{
    (void)state;
    valid_data *d = valid_data_new();
    tensor_spec t[8];
    int n = valid_specs(d, t);
    /* header reverse-sorted and shuffled; data in yet another order */
    const int orders[3][7] = {{6, 5, 4, 3, 2, 1, 0}, {3, 0, 6, 1, 5, 2, 4}, {2, 4, 0, 5, 1, 6, 3}};
    for (int k = 0; k < 3; k++) {
        char path[512];
        temp_path(path, sizeof path, "order");
        build_file(path, t, n, orders[k], orders[(k + 1) % 3], NULL);
        mr_weights w;
        open_ok(&w, path);
        assert_null(w.metadata_json);
        for (int i = 0; i < n; i++) {
            const mr_weight_entry *e = weights_find(&w, t[i].name);
            assert_non_null(e);
            assert_string_equal(e->name, t[i].name);
            assert_int_equal(e->nbytes, t[i].nbytes);
        }
        check_valid_contents(&w, d);
        weights_close(&w);
    }
    free(d);
}

static void test_find_and_metadata(void **state)
{
    (void)state;
    valid_data *d = valid_data_new();
    tensor_spec t[8];
    int n = valid_specs(d, t);
    const int order[7] = {4, 2, 0, 6, 1, 3, 5};
    char path[512];
    temp_path(path, sizeof path, "find");
    /* metadata first, then tensors: the loader must not count it as one */
    build_file(path, t, n, order, order, "{\"format\":\"pt\",\"source\":\"unit test\",\"n\":{\"a\":[1,2]}}");

    mr_weights w;
    open_ok(&w, path);
    assert_int_equal(w.count, n);

    assert_non_null(w.metadata_json);
    cJSON *meta = cJSON_Parse(w.metadata_json);
    assert_non_null(meta);
    assert_true(cJSON_IsObject(meta));
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "format")->valuestring, "pt");
    assert_string_equal(cJSON_GetObjectItemCaseSensitive(meta, "source")->valuestring, "unit test");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(meta, "n"), "a");
    assert_int_equal(cJSON_GetArraySize(a), 2);
    cJSON_Delete(meta);

    const mr_weight_entry *e = weights_find(&w, "conv.weight");
    assert_non_null(e);
    assert_int_equal(e->dtype, MR_DTYPE_F32);
    assert_int_equal(e->ndim, 3);
    assert_int_equal(e->shape[0], 3);
    assert_int_equal(e->shape[1], 2);
    assert_int_equal(e->shape[2], 2);
    assert_int_equal(e->nbytes, 48);
    assert_int_equal(e->used, 0);
    /* data points into the mapping at the place the header says */
    const unsigned char *lo = w.map, *hi = lo + w.map_size;
    assert_true(e->data >= lo && e->data + e->nbytes <= hi);
    assert_memory_equal(e->data, d->f32, sizeof d->f32);

    e = weights_find(&w, "fc.f64");
    assert_non_null(e);
    assert_int_equal(e->dtype, MR_DTYPE_F64);
    assert_memory_equal(e->data, d->f64, sizeof d->f64);
    assert_int_equal(weights_find(&w, "all.f16")->dtype, MR_DTYPE_F16);
    assert_int_equal(weights_find(&w, "all.bf16")->dtype, MR_DTYPE_BF16);
    e = weights_find(&w, "empty");
    assert_non_null(e);
    assert_int_equal(e->nbytes, 0);
    assert_int_equal(e->ndim, 3);
    assert_int_equal(e->shape[1], 0);
    e = weights_find(&w, "scalar");
    assert_non_null(e);
    assert_int_equal(e->ndim, 0);
    assert_int_equal(e->nbytes, 4);

    assert_null(weights_find(&w, "__metadata__"));
    assert_null(weights_find(&w, "conv"));
    assert_null(weights_find(&w, "conv.weightx"));
    assert_null(weights_find(&w, ""));
    assert_null(weights_find(&w, "CONV.WEIGHT"));

    /* entries are sorted by name */
    for (int i = 1; i < w.count; i++) assert_true(strcmp(w.entries[i - 1].name, w.entries[i].name) < 0);
    weights_close(&w);
    free(d);
}

static void test_edge_headers_that_load(void **state)
{
    (void)state;
    char path[512];
    mr_weights w;

    /* no tensors at all */
    temp_path(path, sizeof path, "empty_obj");
    write_st(path, "{}", NULL, 0);
    open_ok(&w, path);
    assert_int_equal(w.count, 0);
    assert_null(weights_find(&w, "x"));
    char buf[16] = "junk";
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    weights_close(&w);

    /* only metadata */
    temp_path(path, sizeof path, "meta_only");
    write_st(path, "{\"__metadata__\":{\"k\":\"v\"}}", NULL, 0);
    open_ok(&w, path);
    assert_int_equal(w.count, 0);
    assert_string_equal(w.metadata_json, "{\"k\":\"v\"}");
    weights_close(&w);

    /* the safetensors writer pads the header with spaces to 8 bytes */
    temp_path(path, sizeof path, "padded");
    const float v[2] = {1.5f, -2.0f};
    write_st(path, "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}     ", v, sizeof v);
    open_ok(&w, path);
    float out[2];
    const int64_t s2[1] = {2};
    read_ok(&w, "a", 1, s2, out);
    assert_memory_equal(out, v, sizeof v);
    weights_close(&w);

    /* zero-size tensors may share an offset with each other and with data */
    temp_path(path, sizeof path, "zero_share");
    write_st(path, "{\"z1\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                   "\"z2\":{\"dtype\":\"F16\",\"shape\":[4,0],\"data_offsets\":[0,0]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"z3\":{\"dtype\":\"BF16\",\"shape\":[0],\"data_offsets\":[8,8]}}",
             v, sizeof v);
    open_ok(&w, path);
    assert_int_equal(w.count, 4);
    read_ok(&w, "a", 1, s2, out);
    assert_memory_equal(out, v, sizeof v);
    weights_close(&w);

    /* adjacent tensors touch but do not overlap */
    temp_path(path, sizeof path, "adjacent");
    write_st(path, "{\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                   "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
             v, sizeof v);
    open_ok(&w, path);
    const int64_t s1[1] = {1};
    read_ok(&w, "a", 1, s1, out);
    read_ok(&w, "b", 1, s1, out + 1);
    assert_memory_equal(out, v, sizeof v);
    weights_close(&w);
}

/* ---- batchnorm / AffineChannel folding ---- */

static void test_read_affine_batchnorm(void **state)
{
    (void)state;
    enum { C = 5 };
    const float wt[C] = {1.0f, -0.5f, 2.25f, 0.0f, 3.0f};
    const float bias[C] = {0.0f, 0.125f, -1.5f, 4.0f, -0.75f};
    const float mean[C] = {0.5f, -2.0f, 0.0f, 1.0f, 10.0f};
    const float var[C] = {1.0f, 0.0f, 4.0f, 0.25f, 123.456f}; /* var 0: only eps keeps it finite */
    const float eps = 1e-5f;
    unsigned char data[4 * C * 4];
    memcpy(data, wt, sizeof wt);
    memcpy(data + 20, bias, sizeof bias);
    memcpy(data + 40, mean, sizeof mean);
    memcpy(data + 60, var, sizeof var);
    char path[512];
    temp_path(path, sizeof path, "bn");
    write_st(path, "{\"bb.norm.running_var\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[60,80]},"
                   "\"bb.norm.weight\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[0,20]},"
                   "\"bb.norm.running_mean\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[40,60]},"
                   "\"bb.norm.bias\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[20,40]},"
                   "\"bb.other\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[80,80]}}",
             data, sizeof data);
    mr_weights w;
    open_ok(&w, path);
    float scale[C], shift[C];
    mr_error err = {MR_OK, ""};
    assert_int_equal(weights_read_affine(&w, "bb.norm", C, eps, scale, shift, &err), MR_OK);
    for (int c = 0; c < C; c++) {
        double s = (double)wt[c] / sqrt((double)var[c] + (double)eps);
        double b = (double)bias[c] - (double)mean[c] * s;
        if (fabs(scale[c] - s) > 1e-6 * fabs(s) ||
            fabs(shift[c] - b) > 1e-6 * (fabs((double)bias[c]) + fabs((double)mean[c] * s))) {
            print_error("channel %d: scale %.9g want %.9g, shift %.9g want %.9g\n", c, (double)scale[c], s,
                        (double)shift[c], b);
            fail();
        }
    }
    /* all four parts count as read */
    char buf[128];
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 1);
    assert_string_equal(buf, "bb.other");

    /* wrong channel count: a shape error naming the first part */
    assert_int_equal(weights_read_affine(&w, "bb.norm", 4, eps, scale, shift, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "\"bb.norm.weight\"", "[4]");
    weights_close(&w);
}

static void test_read_affine_channel(void **state)
{
    (void)state;
    const float sc[3] = {0.5f, -0.0f, 1e-30f}, sh[3] = {-1.0f, 2.0f, INFINITY};
    unsigned char data[24];
    memcpy(data, sc, 12);
    memcpy(data + 12, sh, 12);
    char path[512];
    temp_path(path, sizeof path, "affine");
    write_st(path, "{\"res2.0.bn.shift\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[12,24]},"
                   "\"res2.0.bn.scale\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,12]}}",
             data, sizeof data);
    mr_weights w;
    open_ok(&w, path);
    float scale[3], shift[3];
    mr_error err = {MR_OK, ""};
    assert_int_equal(weights_read_affine(&w, "res2.0.bn", 3, 1e-5f, scale, shift, &err), MR_OK);
    for (int c = 0; c < 3; c++) {
        assert_int_equal(f32_bits(scale[c]), f32_bits(sc[c]));
        assert_int_equal(f32_bits(shift[c]), f32_bits(sh[c]));
    }
    char buf[64];
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 0);
    weights_close(&w);
}

/* A variance that would fold to NaN or Inf is refused, naming the tensor. */
static void test_read_affine_bad_variance(void **state)
{
    (void)state;
    const float v[8] = {1, 1, 0, 0, 0, 0, 1, -2};
    char path[512];
    temp_path(path, sizeof path, "affine_bad_var");
    write_st(path, "{\"n.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"n.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                   "\"n.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                   "\"n.running_var\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]}}",
             v, sizeof v);
    mr_weights w;
    mr_error err = {MR_OK, ""};
    open_ok(&w, path);
    float scale[2], shift[2];
    assert_int_equal(weights_read_affine(&w, "n", 2, 1e-5f, scale, shift, &err), MR_ERR_FORMAT);
    check_msg(&err, path, "\"n.running_var\"[1]", "positive");
    weights_close(&w);
}

/* __metadata__ must be an object; its wrong type is refused. */
static void test_metadata_not_object(void **state)
{
    (void)state;
    expect_header_fail("{\"__metadata__\":5}", NULL, 0, "__metadata__", "object");
}

static void test_read_affine_missing_part(void **state)
{
    (void)state;
    const float v[8] = {1, 2, 3, 4, 5, 6, 7, 8};
    char path[512];
    temp_path(path, sizeof path, "affine_missing");
    write_st(path, "{\"n1.weight\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                   "\"n1.bias\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]},"
                   "\"n1.running_mean\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[16,24]},"
                   "\"n2.scale\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[24,32]},"
                   "\"n3.bias\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[32,32]}}",
             v, sizeof v);
    mr_weights w;
    mr_error err = {MR_OK, ""};
    open_ok(&w, path);
    float scale[2], shift[2];
    assert_int_equal(weights_read_affine(&w, "n1", 2, 1e-5f, scale, shift, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "\"n1.running_var\"", "missing");
    assert_int_equal(weights_read_affine(&w, "n2", 2, 1e-5f, scale, shift, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "\"n2.shift\"", "missing");
    assert_int_equal(weights_read_affine(&w, "n3", 2, 1e-5f, scale, shift, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "\"n3.weight\"", "missing");
    assert_int_equal(weights_read_affine(&w, "n4", 2, 1e-5f, scale, shift, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "n4.", "missing");
    weights_close(&w);
}

/* ---- lookups with the wrong shape, missing tensors, unused ---- */

static void test_read_wrong_shape_and_missing(void **state)
{
    (void)state;
    const float v[6] = {1, 2, 3, 4, 5, 6};
    char path[512];
    temp_path(path, sizeof path, "shape");
    write_st(path, "{\"fpn.inner.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]}}", v,
             sizeof v);
    mr_weights w;
    open_ok(&w, path);
    float out[8] = {0};
    mr_error err = {MR_OK, ""};

    const int64_t transposed[2] = {3, 2};
    assert_int_equal(weights_read_f32(&w, "fpn.inner.weight", 2, transposed, out, &err), MR_ERR_SHAPE);
    assert_int_equal(err.status, MR_ERR_SHAPE);
    check_msg(&err, path, "\"fpn.inner.weight\"", "[2,3]");
    check_msg(&err, path, "[3,2]", NULL);
    for (int i = 0; i < 8; i++) assert_true(out[i] == 0.0f); /* nothing written */

    const int64_t more_dims[3] = {2, 3, 1};
    assert_int_equal(weights_read_f32(&w, "fpn.inner.weight", 3, more_dims, out, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "[2,3]", "[2,3,1]");

    const int64_t flat[1] = {6};
    assert_int_equal(weights_read_f32(&w, "fpn.inner.weight", 1, flat, out, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "[2,3]", "[6]");

    assert_int_equal(weights_read_f32(&w, "fpn.inner.weight", 0, NULL, out, &err), MR_ERR_SHAPE);
    check_msg(&err, path, "[2,3]", "[]");

    const int64_t s23[2] = {2, 3};
    assert_int_equal(weights_read_f32(&w, "fpn.inner.bias", 2, s23, out, &err), MR_ERR_SHAPE);
    assert_int_equal(err.status, MR_ERR_SHAPE);
    check_msg(&err, path, "\"fpn.inner.bias\"", "missing");

    /* failed reads do not count as use */
    char buf[64];
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 1);
    assert_string_equal(buf, "fpn.inner.weight");

    read_ok(&w, "fpn.inner.weight", 2, s23, out);
    assert_memory_equal(out, v, sizeof v);
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 0);
    weights_close(&w);
}

static void test_unused_lists_exactly_unread(void **state)
{
    (void)state;
    const float v[4] = {1, 2, 3, 4};
    char path[512];
    temp_path(path, sizeof path, "unused");
    write_st(path, "{\"d.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]},"
                   "\"a.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                   "\"c.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                   "\"b.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]},"
                   "\"e.w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[16,16]}}",
             v, sizeof v);
    mr_weights w;
    open_ok(&w, path);
    char buf[128];
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 5);
    assert_string_equal(buf, "a.w, b.w, c.w, d.w, e.w");

    const int64_t s1[1] = {1}, s0[1] = {0};
    float out[1];
    read_ok(&w, "b.w", 1, s1, out);
    assert_true(out[0] == 2.0f);
    read_ok(&w, "d.w", 1, s1, out);
    assert_true(out[0] == 4.0f);
    read_ok(&w, "e.w", 1, s0, out);
    read_ok(&w, "d.w", 1, s1, out); /* twice is still once */
    assert_null(weights_find(&w, "zz")); /* a lookup alone is not a read */
    assert_non_null(weights_find(&w, "a.w"));
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 2);
    assert_string_equal(buf, "a.w, c.w");

    /* a small buffer is truncated, terminated, and the count is still right */
    char small[5];
    memset(small, 'x', sizeof small);
    assert_int_equal(weights_unused(&w, small, sizeof small), 2);
    assert_non_null(memchr(small, '\0', sizeof small));
    assert_int_equal(strncmp(small, "a.w", 3), 0);
    assert_int_equal(weights_unused(&w, NULL, 0), 2);

    read_ok(&w, "a.w", 1, s1, out);
    read_ok(&w, "c.w", 1, s1, out);
    assert_int_equal(weights_unused(&w, buf, sizeof buf), 0);
    assert_string_equal(buf, "");
    weights_close(&w);
}

/* ---- malformed files ---- */

static void test_file_level_errors(void **state)
{
    (void)state;
    char path[512];

    /* shorter than the 8-byte length */
    const unsigned char bytes[8] = {2, 0, 0, 0, 0, 0, 0, 0};
    for (size_t n = 0; n < 8; n++) {
        temp_path(path, sizeof path, "short");
        write_bytes(path, bytes, n);
        expect_open_fail(path, MR_ERR_FORMAT, "too short", NULL);
    }

    /* header length 0 */
    temp_path(path, sizeof path, "hlen0");
    write_st_hlen(path, 0, "{}", NULL, 0);
    expect_open_fail(path, MR_ERR_FORMAT, "header length 0", NULL);
    temp_path(path, sizeof path, "hlen0_only");
    write_st_hlen(path, 0, "", NULL, 0);
    expect_open_fail(path, MR_ERR_FORMAT, "header length 0", NULL);

    /* header length beyond the file: by one, by a lot, and all ones */
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}";
    const float one = 1.0f;
    temp_path(path, sizeof path, "hlen_past");
    write_st_hlen(path, strlen(hdr) + 5, hdr, &one, 4);
    expect_open_fail(path, MR_ERR_FORMAT, "header length", NULL);
    temp_path(path, sizeof path, "hlen_big");
    write_st_hlen(path, 1000000, hdr, &one, 4);
    expect_open_fail(path, MR_ERR_FORMAT, "header length 1000000", NULL);
    temp_path(path, sizeof path, "hlen_max");
    write_st_hlen(path, UINT64_MAX, hdr, &one, 4);
    expect_open_fail(path, MR_ERR_FORMAT, "header length 18446744073709551615", NULL);
    temp_path(path, sizeof path, "hlen_2^63");
    write_st_hlen(path, (uint64_t)1 << 63, hdr, &one, 4);
    expect_open_fail(path, MR_ERR_FORMAT, "header length 9223372036854775808", NULL);

    /* header length over 64 MiB in a file that is long enough (sparse):
     * refused by the cap, not by trying to parse 64 MiB of JSON */
    temp_path(path, sizeof path, "hlen_64mib");
    const uint64_t big = (64u << 20) + 1;
    write_st_hlen(path, big, "{}", NULL, 0);
    assert_int_equal(truncate(path, (off_t)(8 + big + 16)), 0);
    expect_open_fail(path, MR_ERR_FORMAT, "header length 67108865", NULL);

    /* exactly 8 bytes: a length and nothing else */
    temp_path(path, sizeof path, "len_only");
    write_st_hlen(path, 2, "", NULL, 0);
    expect_open_fail(path, MR_ERR_FORMAT, "header length 2", NULL);

    /* a directory instead of a file */
    temp_path(path, sizeof path, "dir");
    assert_int_equal(mkdir(path, 0700), 0);
    expect_open_fail(path, MR_ERR_IO, "not a regular file", NULL);

    /* a missing file */
    temp_path(path, sizeof path, "missing");
    expect_open_fail(path, MR_ERR_IO, "cannot open", NULL);
    expect_open_fail("/nonexistent_dir_for_test_weights/model.safetensors", MR_ERR_IO, "cannot open", NULL);
}

static void test_header_not_an_object(void **state)
{
    (void)state;
    expect_header_fail("{not json", NULL, 0, "header", "JSON");
    expect_header_fail("{\"a\":", NULL, 0, "header", "JSON");
    expect_header_fail("\x01\x02\x03\x04", NULL, 0, "header", "JSON");
    expect_header_fail("[1,2]", NULL, 0, "header", "JSON object");
    expect_header_fail("[{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}]", NULL, 0, "header",
                       "JSON object");
    expect_header_fail("\"a string\"", NULL, 0, "header", "JSON object");
    expect_header_fail("42", NULL, 0, "header", "JSON object");
    expect_header_fail("null", NULL, 0, "header", "JSON object");

    /* the header length cuts the JSON short although the file goes on */
    char path[512];
    temp_path(path, sizeof path, "cut_json");
    const char *hdr = "{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    write_st_hlen(path, strlen(hdr) - 3, hdr, NULL, 0);
    expect_open_fail(path, MR_ERR_FORMAT, "header", "JSON");
}

static void test_entry_fields(void **state)
{
    (void)state;
    const unsigned char data[64] = {0};
    /* missing fields */
    expect_header_fail("{\"t.w\":{\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4, "\"t.w\"", "dtype");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", data, 4, "\"t.w\"", "shape");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1]}}", data, 4, "\"t.w\"", "data_offsets");
    expect_header_fail("{\"t.w\":{}}", data, 4, "\"t.w\"", "dtype");
    /* fields of the wrong type, and an entry that is not an object */
    expect_header_fail("{\"t.w\":{\"dtype\":5,\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4, "\"t.w\"", "dtype");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":1,\"data_offsets\":[0,4]}}", data, 4, "\"t.w\"",
                       "shape");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":{\"b\":0}}}", data, 4, "\"t.w\"",
                       "data_offsets");
    expect_header_fail("{\"t.w\":5}", data, 4, "\"t.w\"", NULL);
    expect_header_fail("{\"t.w\":[\"F32\",[1],[0,4]]}", data, 4, "\"t.w\"", NULL);
    expect_header_fail("{\"t.w\":null}", data, 4, "\"t.w\"", NULL);
    /* a good entry followed by a bad one: the bad one is named */
    expect_header_fail("{\"good\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"bad\":{\"dtype\":\"F32\",\"shape\":[1]}}",
                       data, 4, "\"bad\"", "data_offsets");

    /* unknown dtypes (names are case-sensitive) */
    const char *dtypes[] = {"I64", "Q8", "f32", "F8_E4M3", "BOOL", "U8", ""};
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"t.w\":{\"dtype\":\"%s\",\"shape\":[1],\"data_offsets\":[0,8]}}", dtypes[i]);
        char want[64];
        snprintf(want, sizeof want, "dtype %s", dtypes[i]);
        expect_header_fail(hdr, data, 8, "\"t.w\"", want);
    }

    /* shapes: negative, fractional, not numbers */
    const char *shapes[] = {"[-1]", "[2,-3]", "[1.5]", "[2,0.5]", "[\"2\"]", "[null]", "[[2]]", "[true]", "[1e300]"};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"t.w\":{\"dtype\":\"F32\",\"shape\":%s,\"data_offsets\":[0,4]}}", shapes[i]);
        expect_header_fail(hdr, data, 4, "\"t.w\"", "shape");
    }

    /* dimensions: 8 load, 9 do not */
    char path[512];
    temp_path(path, sizeof path, "dims8");
    write_st(path, "{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", data, 8);
    mr_weights w;
    open_ok(&w, path);
    float out[2];
    const int64_t s8[8] = {1, 1, 1, 1, 1, 1, 1, 2};
    read_ok(&w, "t.w", 8, s8, out);
    weights_close(&w);
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", data,
                       8, "\"t.w\"", "9 dimensions");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],"
                       "\"data_offsets\":[0,4]}}",
                       data, 4, "\"t.w\"", "dimensions");
}

static void test_offsets_and_sizes(void **state)
{
    (void)state;
    const unsigned char data[64] = {0};
    /* end beyond the data area */
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", data, 12, "\"t.w\"",
                       "past the end");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[12,16]}}", data, 12, "\"t.w\"",
                       "past the end");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[13,13]}}", data, 12, "\"t.w\"",
                       "past the end");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[18446744073709551612,"
                       "18446744073709551616]}}",
                       data, 12, "\"t.w\"", NULL);
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,1e300]}}", data, 12, "\"t.w\"",
                       NULL);
    /* malformed offsets */
    const char *offs[] = {"[8,4]", "[-4,0]", "[0.5,4.5]", "[0,4,8]", "[0]", "[]", "[\"0\",\"4\"]", "[0,null]",
                          "[null,4]"};
    for (size_t i = 0; i < sizeof offs / sizeof offs[0]; i++) {
        char hdr[256];
        snprintf(hdr, sizeof hdr, "{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":%s}}", offs[i]);
        expect_header_fail(hdr, data, 12, "\"t.w\"", "data_offsets");
    }
    /* byte size not numel * dtype size, for each dtype */
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[2,2],\"data_offsets\":[0,12]}}", data, 16, "\"t.w\"",
                       "data size 12, expected 16 (element count 4, F32)");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F16\",\"shape\":[3],\"data_offsets\":[0,12]}}", data, 16, "\"t.w\"",
                       "data size 12, expected 6 (element count 3, F16)");
    expect_header_fail("{\"t.w\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,5]}}", data, 16, "\"t.w\"",
                       "data size 5, expected 6 (element count 3, BF16)");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F64\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 16, "\"t.w\"",
                       "data size 4, expected 8 (element count 1, F64)");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,4]}}", data, 16, "\"t.w\"",
                       "data size 4, expected 0 (element count 0, F32)");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,0]}}", data, 16, "\"t.w\"",
                       "data size 0, expected 4 (element count 1, F32)");
    /* a shape far too large for any file */
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[1000000,1000000,1000000],\"data_offsets\":[0,4]}}",
                       data, 16, "\"t.w\"", "shape");
}

static void test_overlap_and_duplicates(void **state)
{
    (void)state;
    const unsigned char data[64] = {0};
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}",
                       data, 12, "overlap", "\"a\" and \"b\"");
    /* identical ranges, listed out of order */
    expect_header_fail("{\"y\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]},"
                       "\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"w\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[8,12]}}",
                       data, 12, "overlap", NULL);
    /* one tensor inside another */
    expect_header_fail("{\"outer\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
                       "\"inner\":{\"dtype\":\"BF16\",\"shape\":[1],\"data_offsets\":[6,8]},"
                       "\"after\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[16,20]}}",
                       data, 20, "overlap", "\"outer\"");

    /* the same name twice (cJSON keeps both members) */
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                       data, 8, "\"a\"", "twice");
    expect_header_fail("{\"m.b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[8,8]},"
                       "\"m.b\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[4,8]}}",
                       data, 8, "\"m.b\"", "twice");
}

/* Found by the fuzzers' one-line check (tests/fuzz/), here as in config.c: a
 * tensor name holding a newline (JSON "\n", or a raw one, which cJSON
 * accepts) made a two-line message; control characters from the header now
 * print as '?' (check_msg asserts one line). */
static void test_control_chars_in_messages(void **state)
{
    (void)state;
    const unsigned char data[16] = {0};
    expect_header_fail("{\"a\\nb\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,8]}}", data, 8,
                       "tensor \"a?b\"", "data size 8, expected 4 (element count 1, F32)");
    expect_header_fail("{\"x\n\":{\"dtype\":\"F3\\r2\",\"shape\":[1],\"data_offsets\":[0,4]}}", data, 4,
                       "tensor \"x?\"", "unsupported dtype F3?2");
    expect_header_fail("{\"a\\t\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
                       "\"b\\u007f\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}",
                       data, 4, "tensors \"a?\" and \"b?\" overlap", NULL);
}

/* A zero-size tensor sorted between two overlapping ones must not hide
 * the overlap: a [0,8), z [4,4), b [6,14); and a [0,8), z [0,0), b [4,8),
 * where z ties with a. */
static void test_overlap_behind_empty_tensor(void **state)
{
    (void)state;
    const unsigned char data[64] = {0};
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,4]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[6,14]}}",
                       data, 14, "overlap", "\"b\"");
    expect_header_fail("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
                       "\"z\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]},"
                       "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}",
                       data, 8, "overlap", "\"b\"");
}

/* The element count may not wrap around 2^64. Each dimension is within the
 * loader's 1e12 cap and each partial product within its 2^40 cap, but
 * 313145656379 * 1413788915 = 24 * 2^64 + 1 and 2^39 * 2^25 = 2^64, so a
 * uint64 product wraps to 1 and 0 elements, matching 4 and 0 bytes. */
static void test_shape_numel_overflow(void **state)
{
    (void)state;
    const unsigned char data[64] = {0};
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[313145656379,1413788915],\"data_offsets\":[0,4]}}",
                       data, 4, "\"t.w\"", "shape");
    expect_header_fail("{\"t.w\":{\"dtype\":\"F32\",\"shape\":[549755813888,33554432],\"data_offsets\":[0,0]}}",
                       data, 4, "\"t.w\"", "shape");
}

/* A good file cut short at every 7th byte: the open fails cleanly (the last
 * tensor ends at the end of the file, so no prefix is a valid file). */
static void test_truncated_file(void **state)
{
    (void)state;
    const float f32[6] = {1, -2, 3.5f, 0, -0.0f, 1e-3f};
    const uint16_t f16[5] = {0x3c00, 0x0001, 0x7c00, 0x8000, 0x7e00};
    const double f64[3] = {1.25, -7.0, 1e-300};
    const uint16_t bf16[3] = {0x3f80, 0x4000, 0xff80};
    tensor_spec t[5] = {
        {"stem.conv1.weight", "F32", "[2,3]", f32, sizeof f32},
        {"stem.bn.weight", "F16", "[5]", f16, sizeof f16},
        {"head.fc.bias", "F64", "[3]", f64, sizeof f64},
        {"head.bf", "BF16", "[1,3]", bf16, sizeof bf16},
        {"z.empty", "F32", "[0]", NULL, 0},
    };
    const int order[5] = {0, 1, 2, 4, 3};
    char good[512];
    temp_path(good, sizeof good, "trunc_src");
    size_t size = build_file(good, t, 5, order, order, "{\"format\":\"pt\"}");

    FILE *f = fopen(good, "rb");
    assert_non_null(f);
    unsigned char *bytes = malloc(size);
    assert_non_null(bytes);
    assert_int_equal(fread(bytes, 1, size, f), size);
    fclose(f);

    mr_weights w;
    open_ok(&w, good);
    weights_close(&w);

    int cases = 0;
    for (size_t cut = 0; cut < size; cut += 7) {
        char path[512];
        temp_path(path, sizeof path, "trunc");
        write_bytes(path, bytes, cut);
        mr_error err = {MR_OK, ""};
        mr_status st = weights_open(&w, path, &err);
        if (st == MR_OK) {
            print_error("cut at %zu of %zu bytes: opened\n", cut, size);
            weights_close(&w);
            fail();
        }
        assert_int_equal(st, MR_ERR_FORMAT);
        check_msg(&err, path, NULL, NULL);
        assert_null(w.map);
        if (cut >= 8 + 100) { /* past the header: the message says what ran off the end */
            if (!strstr(err.msg, "past the end") && !strstr(err.msg, "header length")) {
                print_error("cut at %zu: %s\n", cut, err.msg);
                fail();
            }
        }
        unlink(path);
        cases++;
    }
    assert_true(cases > 20);
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_valid_file_reads_back_exactly),
        cmocka_unit_test(test_header_order_does_not_matter),
        cmocka_unit_test(test_find_and_metadata),
        cmocka_unit_test(test_edge_headers_that_load),
        cmocka_unit_test(test_read_affine_batchnorm),
        cmocka_unit_test(test_read_affine_channel),
        cmocka_unit_test(test_read_affine_missing_part),
        cmocka_unit_test(test_read_affine_bad_variance),
        cmocka_unit_test(test_metadata_not_object),
        cmocka_unit_test(test_read_wrong_shape_and_missing),
        cmocka_unit_test(test_unused_lists_exactly_unread),
        cmocka_unit_test(test_file_level_errors),
        cmocka_unit_test(test_header_not_an_object),
        cmocka_unit_test(test_entry_fields),
        cmocka_unit_test(test_offsets_and_sizes),
        cmocka_unit_test(test_overlap_and_duplicates),
        cmocka_unit_test(test_overlap_behind_empty_tensor),
        cmocka_unit_test(test_control_chars_in_messages),
        cmocka_unit_test(test_shape_numel_overflow),
        cmocka_unit_test(test_truncated_file),
    };
    return cmocka_run_group_tests_name("weights", tests, group_setup, group_teardown);
}
