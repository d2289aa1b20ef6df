/* Unit tests for engine/coco_results.{h,c}: category and image ids, a
 * document written and parsed back with cJSON, and write failures (missing
 * directory, full device, a write cut off by the file-size limit).
 * pycocotools' own reading of the file is tests/parity/test_coco_results.py. */
#define _POSIX_C_SOURCE 200809L /* mkdtemp */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/coco_results.h"
#include "core/config.h"
#include "io/rle.h"

/* The defaults as a config file would give them (COCO's 81 classes and
 * names). Static: mr_config holds 64 KB of class names. */
static const mr_config *coco_config(void)
{
    static mr_config cfg;
    mr_error err;
    assert_int_equal(config_parse(&cfg, "{}", "test", &err), MR_OK);
    assert_int_equal(cfg.classes.num_classes, 81);
    return &cfg;
}

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    assert_non_null(s);
    assert_int_equal(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = '\0';
    fclose(f);
    return s;
}

static void temp_dir(char *dir, size_t n)
{
    snprintf(dir, n, "/tmp/test_coco_results_XXXXXX");
    assert_non_null(mkdtemp(dir));
}

/* Number of entries in dir besides . and .. */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) n++;
    closedir(d);
    return n;
}

static int exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

/* ---- ids ---------------------------------------------------------------- */

static void test_category_ids(void **state)
{
    (void)state;
    const mr_config *cfg = coco_config();
    assert_int_equal(coco_category_id(cfg, 1), 1);
    assert_string_equal(cfg->classes.class_names[1], "person");
    assert_int_equal(coco_category_id(cfg, 11), 11);
    assert_int_equal(coco_category_id(cfg, 12), 13);
    assert_string_equal(cfg->classes.class_names[12], "stop sign");
    assert_int_equal(coco_category_id(cfg, 80), 90);
    assert_string_equal(cfg->classes.class_names[80], "toothbrush");
    /* The table is increasing and within COCO's 1..90. */
    for (int c = 2; c <= 80; c++) assert_true(coco_category_id(cfg, c) > coco_category_id(cfg, c - 1));
    /* background and out of range */
    assert_int_equal(coco_category_id(cfg, 0), -1);
    assert_int_equal(coco_category_id(cfg, 81), -1);
    assert_int_equal(coco_category_id(cfg, -3), -1);

    static mr_config other;
    other = *cfg;
    other.classes.num_classes = 5; /* a dataset of its own: ids are the class ids */
    assert_int_equal(coco_category_id(&other, 1), 1);
    assert_int_equal(coco_category_id(&other, 4), 4);
    assert_int_equal(coco_category_id(&other, 5), -1);
}

static void test_image_ids(void **state)
{
    (void)state;
    assert_int_equal(coco_image_id("a/000000397133.jpg", 4), 397133);
    assert_int_equal(coco_image_id("000000397133.jpg", 4), 397133);
    assert_int_equal(coco_image_id("/data/coco/val2017/000000000139.jpg", 4), 139);
    assert_int_equal(coco_image_id("photo.png", 4), 4);
    assert_int_equal(coco_image_id("12345678901.jpg", 4), 4);          /* 11 digits: too long */
    assert_int_equal(coco_image_id("000123456789.jpg", 4), 123456789); /* 9 after the zeros */
    assert_int_equal(coco_image_id("0001234567890.jpg", 4), 4);        /* 10 after the zeros */
    assert_int_equal(coco_image_id("999999999.png", 4), 999999999);
    assert_int_equal(coco_image_id("000.jpg", 4), 0);
    assert_int_equal(coco_image_id("42", 4), 42);      /* no extension */
    assert_int_equal(coco_image_id("7.tar.gz", 4), 4); /* stem "7.tar" */
    assert_int_equal(coco_image_id("12a.jpg", 4), 4);
    assert_int_equal(coco_image_id("-12.jpg", 4), 4);
    assert_int_equal(coco_image_id(".jpg", 4), 4);
    assert_int_equal(coco_image_id("123/", 4), 4);         /* no file name */
    assert_int_equal(coco_image_id("v1.2/55.jpg", 4), 55); /* dots in the directory */
    assert_int_equal(coco_image_id("", 4), 4);
    assert_int_equal(coco_image_id(NULL, 4), 4);
}

/* ---- a document, written and read back ---------------------------------- */

typedef struct {
    mr_result res[3];
    mr_detection dets[3][2];
    uint8_t masks[3][2][120];
} two_images;

/* Image 397133 (10x12): a mask whose first run is 44 zeros (its counts
 * string holds a backslash, which JSON must escape) and a blob; image 7
 * (4x3): one detection without a mask; a third image with no detections. */
static void make_results(two_images *t)
{
    memset(t, 0, sizeof *t);
    t->res[0] = (mr_result){.width = 12, .height = 10, .count = 2, .dets = t->dets[0]};
    t->res[1] = (mr_result){.width = 3, .height = 4, .count = 1, .dets = t->dets[1]};
    t->res[2] = (mr_result){.width = 5, .height = 5, .count = 0, .dets = t->dets[2]};
    uint8_t *m0 = t->masks[0][0], *m1 = t->masks[0][1];
    for (int x = 0; x < 12; x++)
        for (int y = 0; y < 10; y++) {
            m0[y * 12 + x] = x * 10 + y >= 44; /* column-major index >= 44 */
            m1[y * 12 + x] = (x - 6) * (x - 6) + (y - 4) * (y - 4) < 9;
        }
    t->dets[0][0] =
        (mr_detection){.box = {0.5f, 4.25f, 11.75f, 9.0f}, .score = 0.95f, .class_id = 1, .mask = m0, .mask_win = {0, 0, 12, 10}};
    t->dets[0][1] =
        (mr_detection){.box = {3.1f, 1.3f, 9.7f, 7.9f}, .score = 0.123456789f, .class_id = 12, .mask = m1, .mask_win = {0, 0, 12, 10}};
    t->dets[1][0] =
        (mr_detection){.box = {0.0f, 0.0f, 2.5f, 3.5f}, .score = 1e-5f, .class_id = 80, .mask = NULL};
}

static double num(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    assert_non_null(v);
    assert_true(cJSON_IsNumber(v));
    return v->valuedouble;
}

static void check_entry(const cJSON *e, int image_id, int category_id, const mr_result *res,
                        const mr_detection *d)
{
    assert_true(cJSON_IsObject(e));
    assert_int_equal((int)num(e, "image_id"), image_id);
    assert_int_equal((int)num(e, "category_id"), category_id);
    /* %.9g round-trips float32: each number parses back to the same float. */
    assert_true((float)num(e, "score") == d->score);
    const cJSON *bbox = cJSON_GetObjectItemCaseSensitive(e, "bbox");
    assert_true(cJSON_IsArray(bbox));
    assert_int_equal(cJSON_GetArraySize(bbox), 4);
    const float want[4] = {d->box[0], d->box[1], d->box[2] - d->box[0], d->box[3] - d->box[1]};
    for (int k = 0; k < 4; k++) assert_true((float)cJSON_GetArrayItem(bbox, k)->valuedouble == want[k]);

    const cJSON *seg = cJSON_GetObjectItemCaseSensitive(e, "segmentation");
    if (!d->mask) {
        assert_null(seg);
        return;
    }
    assert_true(cJSON_IsObject(seg));
    const cJSON *size = cJSON_GetObjectItemCaseSensitive(seg, "size");
    assert_int_equal(cJSON_GetArraySize(size), 2);
    assert_int_equal(cJSON_GetArrayItem(size, 0)->valueint, res->height);
    assert_int_equal(cJSON_GetArrayItem(size, 1)->valueint, res->width);
    const cJSON *counts = cJSON_GetObjectItemCaseSensitive(seg, "counts");
    assert_true(cJSON_IsString(counts));

    const int h = res->height, w = res->width;
    uint32_t rle[121];
    char str[1024];
    int n = 0;
    assert_int_equal(rle_encode(d->mask, h, w, rle, &n), MR_OK);
    assert_true(rle_to_string(rle, n, str, sizeof str) < sizeof str);
    assert_string_equal(counts->valuestring, str);
    /* and back to the same mask */
    uint32_t back[121];
    uint8_t mask[120];
    int m = 0;
    assert_int_equal(rle_from_string(counts->valuestring, back, 121, &m, NULL), MR_OK);
    assert_int_equal(rle_decode(back, m, h, w, mask, NULL), MR_OK);
    assert_memory_equal(mask, d->mask, (size_t)h * w);
}

static void test_document_round_trip(void **state)
{
    (void)state;
    const mr_config *cfg = coco_config();
    static two_images t;
    make_results(&t);
    mr_error err;
    coco_results *doc = NULL;
    assert_int_equal(coco_results_create(&doc, &err), MR_OK);
    assert_int_equal(coco_results_add(doc, coco_image_id("val/000000397133.jpg", 0), &t.res[0], cfg, &err),
                     MR_OK);
    assert_int_equal(coco_results_add(doc, 7, &t.res[1], cfg, &err), MR_OK);
    assert_int_equal(coco_results_add(doc, 8, &t.res[2], cfg, &err), MR_OK);
    assert_int_equal(coco_results_count(doc), 3);

    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/results.json", dir);
    assert_int_equal(coco_results_write(doc, path, &err), MR_OK);
    assert_int_equal(dir_entries(dir), 1); /* no temporary left behind */

    char *text = read_text(path);
    assert_non_null(text);
    assert_non_null(strstr(text, "\\\\")); /* the escaped backslash of the first mask */
    cJSON *root = cJSON_Parse(text);
    assert_non_null(root);
    assert_true(cJSON_IsArray(root));
    assert_int_equal(cJSON_GetArraySize(root), 3);
    check_entry(cJSON_GetArrayItem(root, 0), 397133, 1, &t.res[0], &t.dets[0][0]);
    check_entry(cJSON_GetArrayItem(root, 1), 397133, 13, &t.res[0], &t.dets[0][1]);
    check_entry(cJSON_GetArrayItem(root, 2), 7, 90, &t.res[1], &t.dets[1][0]);
    cJSON_Delete(root);
    free(text);

    /* Writing again replaces the file. */
    assert_int_equal(coco_results_add(doc, 9, &t.res[1], cfg, &err), MR_OK);
    assert_int_equal(coco_results_write(doc, path, &err), MR_OK);
    text = read_text(path);
    root = cJSON_Parse(text);
    assert_int_equal(cJSON_GetArraySize(root), 4);
    cJSON_Delete(root);
    free(text);
    assert_int_equal(dir_entries(dir), 1);

    coco_results_free(doc);
    unlink(path);
    rmdir(dir);
}

static void test_empty_document(void **state)
{
    (void)state;
    mr_error err;
    coco_results *doc = NULL;
    assert_int_equal(coco_results_create(&doc, &err), MR_OK);
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/empty.json", dir);
    assert_int_equal(coco_results_write(doc, path, &err), MR_OK);
    char *text = read_text(path);
    assert_string_equal(text, "[]\n");
    free(text);
    coco_results_free(doc);
    unlink(path);
    rmdir(dir);
}

/* A rejected image leaves the document as it was. */
static void test_add_errors(void **state)
{
    (void)state;
    const mr_config *cfg = coco_config();
    static two_images t;
    make_results(&t);
    mr_error err;
    coco_results *doc = NULL;
    assert_int_equal(coco_results_create(&doc, &err), MR_OK);
    assert_int_equal(coco_results_add(doc, 1, &t.res[1], cfg, &err), MR_OK);

    t.dets[0][1].class_id = 81;
    assert_int_equal(coco_results_add(doc, 5, &t.res[0], cfg, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "image 5, detection 1"));
    assert_non_null(strstr(err.msg, "class_id 81"));
    t.dets[0][1].class_id = 12;
    t.dets[0][0].score = NAN;
    assert_int_equal(coco_results_add(doc, 5, &t.res[0], cfg, &err), MR_ERR_RANGE);
    assert_non_null(strstr(err.msg, "not finite"));
    t.dets[0][0].score = 0.5f;
    t.dets[0][1].box[2] = INFINITY;
    assert_int_equal(coco_results_add(doc, 5, &t.res[0], cfg, &err), MR_ERR_RANGE);
    assert_int_equal(coco_results_count(doc), 1);

    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/r.json", dir);
    assert_int_equal(coco_results_write(doc, path, &err), MR_OK);
    char *text = read_text(path);
    cJSON *root = cJSON_Parse(text);
    assert_int_equal(cJSON_GetArraySize(root), 1);
    cJSON_Delete(root);
    free(text);
    coco_results_free(doc);
    unlink(path);
    rmdir(dir);
}

/* ---- write failures ----------------------------------------------------- */

static coco_results *small_doc(void)
{
    static two_images t;
    make_results(&t);
    mr_error err;
    coco_results *doc = NULL;
    assert_int_equal(coco_results_create(&doc, &err), MR_OK);
    assert_int_equal(coco_results_add(doc, 1, &t.res[0], coco_config(), &err), MR_OK);
    return doc;
}

static void test_write_missing_dir(void **state)
{
    (void)state;
    char dir[64], path[160], tmp[200];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/no_such_dir/results.json", dir);
    coco_results *doc = small_doc();
    mr_error err;
    assert_int_equal(coco_results_write(doc, path, &err), MR_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "No such file or directory"));
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    assert_false(exists(tmp));
    assert_false(exists(path));
    assert_int_equal(dir_entries(dir), 0);

    /* A directory as the path */
    assert_int_equal(coco_results_write(doc, dir, &err), MR_ERR_IO);
    assert_non_null(strstr(err.msg, dir));
    assert_int_equal(dir_entries(dir), 0);
    coco_results_free(doc);
    rmdir(dir);
}

/* A character device is written in place (a rename would replace the
 * node): /dev/full fails with ENOSPC, and stays a device. */
static void test_write_dev_full(void **state)
{
    (void)state;
    struct stat sb;
    if (stat("/dev/full", &sb) != 0 || !S_ISCHR(sb.st_mode)) {
        skip();
        return;
    }
    coco_results *doc = small_doc();
    mr_error err;
    assert_int_equal(coco_results_write(doc, "/dev/full", &err), MR_ERR_IO);
    assert_non_null(strstr(err.msg, "/dev/full"));
    assert_non_null(strstr(err.msg, "No space left on device"));
    assert_int_equal(stat("/dev/full", &sb), 0);
    assert_true(S_ISCHR(sb.st_mode));
    char tmp[64];
    snprintf(tmp, sizeof tmp, "/dev/full.tmp.%ld", (long)getpid());
    assert_false(exists(tmp));
    coco_results_free(doc);
}

/* A write into the temporary file that fails half way (the file-size
 * limit standing in for a full disk): an error, the temporary removed, an
 * existing file at the path untouched. */
static void test_write_cut_off(void **state)
{
    (void)state;
    char dir[64], path[128];
    temp_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/results.json", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("old", f);
    fclose(f);

    static two_images t;
    make_results(&t);
    mr_error err;
    coco_results *doc = NULL;
    assert_int_equal(coco_results_create(&doc, &err), MR_OK);
    for (int i = 0; i < 200; i++)
        assert_int_equal(coco_results_add(doc, i, &t.res[0], coco_config(), &err), MR_OK);

    struct rlimit old;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &old), 0);
    struct rlimit lim = old;
    lim.rlim_cur = 4096;
    void (*old_handler)(int) = signal(SIGXFSZ, SIG_IGN);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &lim), 0);
    mr_status st = coco_results_write(doc, path, &err);
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &old), 0);
    signal(SIGXFSZ, old_handler);

    assert_int_equal(st, MR_ERR_IO);
    assert_non_null(strstr(err.msg, path));
    assert_non_null(strstr(err.msg, "write failed"));
    assert_int_equal(dir_entries(dir), 1);
    char *text = read_text(path);
    assert_string_equal(text, "old");
    free(text);

    /* Without the limit the same document writes. */
    assert_int_equal(coco_results_write(doc, path, &err), MR_OK);
    text = read_text(path);
    cJSON *root = cJSON_Parse(text);
    assert_int_equal(cJSON_GetArraySize(root), 400);
    cJSON_Delete(root);
    free(text);
    coco_results_free(doc);
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_category_ids),
        cmocka_unit_test(test_image_ids),
        cmocka_unit_test(test_document_round_trip),
        cmocka_unit_test(test_empty_document),
        cmocka_unit_test(test_add_errors),
        cmocka_unit_test(test_write_missing_dir),
        cmocka_unit_test(test_write_dev_full),
        cmocka_unit_test(test_write_cut_off),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
