/* Unit tests for engine/config.{h,c}: the defaults, the shipped configs, the
 * key table's coverage of the struct, and one error per class of mistake.
 * Run from the repository root (the configs are opened by relative path). */
#define _POSIX_C_SOURCE 200809L /* mkstemp, fdopen */
#include <dirent.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/config.h"
#include "core/config_table.h"

#define CONFIG_FULL "configs/mask_rcnn_R-101-FPN_torchvision.json"
#define CONFIG_SMALL "configs/mask_rcnn_R-101-FPN_torchvision_small.json"
#define CONFIG_README "configs/README.md"

static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    if (s && fread(s, 1, (size_t)n, f) != (size_t)n) {
        free(s);
        s = NULL;
    }
    if (s) s[n] = '\0';
    fclose(f);
    return s;
}

/* Parses json; asserts the status and that the message holds each of want[]. */
static void expect_status(const char *json, mr_status status, const char *want0, const char *want1)
{
    mr_config cfg;
    mr_error err = {MR_OK, ""};
    mr_status st = config_parse(&cfg, json, "test.json", &err);
    const char *want[2] = {want0, want1};
    int ok = st == status;
    for (int i = 0; i < 2; i++)
        if (want[i] && !strstr(err.msg, want[i])) ok = 0;
    if (status != MR_OK && err.status != status) ok = 0;
    if (status != MR_OK && strncmp(err.msg, "test.json: ", 11) != 0) ok = 0;
    if (status != MR_OK && strchr(err.msg, '\n')) ok = 0;
    if (!ok) {
        print_error("json: %s\nwant %s with \"%s\" \"%s\"\ngot  %s: %s\n", json, mr_status_name(status),
                    want0 ? want0 : "", want1 ? want1 : "", mr_status_name(st), err.msg);
        fail();
    }
}

static void parse_ok(mr_config *cfg, const char *json)
{
    mr_error err = {MR_OK, ""};
    mr_status st = config_parse(cfg, json, "test.json", &err);
    if (st != MR_OK) {
        print_error("json: %s\n%s\n", json, err.msg);
        fail();
    }
}

/* ---- defaults and shipped files ----------------------------------------- */

static void test_defaults_valid(void **state)
{
    (void)state;
    mr_config cfg;
    mr_error err = {MR_OK, ""};
    config_defaults(&cfg);
    assert_int_equal(config_validate(&cfg, "defaults", &err), MR_OK);

    assert_int_equal(cfg.input.channel_order, MR_CHANNELS_RGB);
    assert_true(cfg.input.pixel_scale == (float)(1.0 / 255.0));
    assert_true(cfg.input.pixel_std[2] == 0.225f);
    assert_int_equal(cfg.input.min_size, 800);
    assert_int_equal(cfg.input.max_size, 1333);
    assert_int_equal(cfg.input.resize_rounding, MR_RESIZE_FLOOR);
    assert_int_equal(cfg.input.resize_method, MR_RESIZE_TORCH_BILINEAR);
    assert_int_equal(cfg.backbone.depth, 101);
    assert_false(cfg.backbone.stride_in_1x1);
    assert_int_equal(cfg.anchors.num_levels, 5);
    assert_true(cfg.anchors.sizes[4][0] == 512.0f);
    assert_int_equal(cfg.anchors.num_ratios, 3);
    assert_true(cfg.rpn.min_size == 1e-3f);
    assert_true(fabsf(cfg.box.bbox_xform_clip - logf(1000.0f / 16.0f)) < 1e-6f);
    assert_int_equal(cfg.box_head.pooler.resolution, 7);
    assert_int_equal(cfg.mask_head.pooler.resolution, 14);
    assert_int_equal(cfg.mask_head.threshold_rule, MR_MASK_THRESH_GT);
    assert_int_equal(cfg.classes.num_classes, 81);
    assert_string_equal(cfg.classes.class_names[0], "__background__");
    assert_string_equal(cfg.classes.class_names[80], "toothbrush");

    int blocks[4];
    config_stage_blocks(&cfg, blocks);
    assert_int_equal(blocks[0], 3);
    assert_int_equal(blocks[1], 4);
    assert_int_equal(blocks[2], 23);
    assert_int_equal(blocks[3], 3);
}

static void test_stage_blocks(void **state)
{
    (void)state;
    mr_config cfg;
    int blocks[4];
    parse_ok(&cfg, "{\"backbone\": {\"depth\": 50}}");
    config_stage_blocks(&cfg, blocks);
    assert_int_equal(blocks[2], 6);
    parse_ok(&cfg, "{\"backbone\": {\"depth\": 152}}");
    config_stage_blocks(&cfg, blocks);
    assert_int_equal(blocks[1], 8);
    assert_int_equal(blocks[2], 36);
}

static void test_empty_object_is_defaults(void **state)
{
    (void)state;
    mr_config a, b;
    config_defaults(&a);
    memset(&b, 0x5a, sizeof b);
    parse_ok(&b, "{}");
    assert_memory_equal(&a, &b, sizeof a);
}

static void test_shipped_config_equals_defaults(void **state)
{
    (void)state;
    mr_config def, cfg;
    mr_error err = {MR_OK, ""};
    config_defaults(&def);
    mr_status st = config_load(&cfg, CONFIG_FULL, &err);
    if (st != MR_OK) print_error("%s\n", err.msg);
    assert_int_equal(st, MR_OK);
    assert_memory_equal(&def, &cfg, sizeof def);
}

static void test_small_config_differs_only_in_size(void **state)
{
    (void)state;
    mr_config def, cfg;
    mr_error err = {MR_OK, ""};
    config_defaults(&def);
    mr_status st = config_load(&cfg, CONFIG_SMALL, &err);
    if (st != MR_OK) print_error("%s\n", err.msg);
    assert_int_equal(st, MR_OK);
    assert_int_equal(cfg.input.min_size, 320);
    assert_int_equal(cfg.input.max_size, 512);
    assert_string_equal(cfg.name, "mask_rcnn_R-101-FPN_torchvision_small");
    cfg.input.min_size = def.input.min_size;
    cfg.input.max_size = def.input.max_size;
    memcpy(cfg.name, def.name, sizeof cfg.name);
    assert_memory_equal(&def, &cfg, sizeof def);
}

/* Every table key appears in the shipped file: the file is documentation. */
static int count_missing(const cfg_section *sec, const cJSON *obj, const char *prefix)
{
    int missing = 0;
    for (int i = 0; i < sec->num_keys; i++) {
        const cfg_key *k = &sec->keys[i];
        const cJSON *item = cJSON_GetObjectItemCaseSensitive(obj, k->name);
        if (!item) {
            print_error("missing key %s%s\n", prefix, k->name);
            missing++;
        } else if (k->type == CFG_SECTION) {
            char sub[256];
            snprintf(sub, sizeof sub, "%s%s.", prefix, k->name);
            missing += count_missing(k->section, item, sub);
        }
    }
    return missing;
}

/* Every config in configs/, one per zoo convention and depth. */
static const char *const shipped_configs[] = {
    CONFIG_FULL,
    CONFIG_SMALL,
    "configs/mask_rcnn_R-50-FPN_torchvision.json",
    "configs/mask_rcnn_R-101-FPN_detectron.json",
    "configs/mask_rcnn_R-50-FPN_detectron.json",
    "configs/mask_rcnn_R-101-FPN_detectron2.json",
    "configs/mask_rcnn_R-50-FPN_detectron2.json",
    "configs/mask_rcnn_R-101-FPN_maskrcnn-benchmark.json",
    "configs/mask_rcnn_R-50-FPN_maskrcnn-benchmark.json",
    "configs/mask_rcnn_R-101-FPN_shapes.json",
    "configs/mask_rcnn_R-101-FPN_detectron2_LSJ.json",
    "configs/mask_rcnn_R-50-FPN_detectron2_LSJ.json",
    "configs/mask_rcnn_R-50-FPN_detectron2_syncbn.json",
    "configs/mask_rcnn_R-50-FPN_detectron2_gn.json",
    "configs/mask_rcnn_R-101-FPN_detectron_gn.json",
    "configs/mask_rcnn_R-50-FPN_detectron_gn.json",
    "configs/mask_rcnn_R-50-FPN_maskrcnn-benchmark_gn.json",
    "configs/mask_rcnn_R-50-FPN_torchvision_v2.json",
    "configs/mask_rcnn_R-101-FPN_torchvision_v2.json",
    "configs/mask_rcnn_R-101-FPN_mmdetection.json",
    "configs/mask_rcnn_R-101-FPN_mmdetection_caffe.json",
    "configs/mask_rcnn_R-50-FPN_mmdetection.json",
    "configs/mask_rcnn_R-50-FPN_mmdetection_caffe.json",
};

/* The list above is every .json in configs/: a new config cannot escape the two tests below. */
static void test_shipped_list_is_the_folder(void **state)
{
    (void)state;
    DIR *dir = opendir("configs");
    assert_non_null(dir);
    int unlisted = 0;
    for (struct dirent *e; (e = readdir(dir));) {
        size_t n = strlen(e->d_name);
        if (n < 5 || strcmp(e->d_name + n - 5, ".json") != 0) continue;
        char path[300];
        snprintf(path, sizeof path, "configs/%s", e->d_name);
        int listed = 0;
        for (size_t f = 0; f < sizeof shipped_configs / sizeof shipped_configs[0]; f++)
            listed |= strcmp(shipped_configs[f], path) == 0;
        if (!listed) print_error("%s is not in test_config.c's shipped_configs\n", path);
        unlisted += !listed;
    }
    closedir(dir);
    assert_int_equal(unlisted, 0);
}

static void test_shipped_configs_spell_out_every_key(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof shipped_configs / sizeof shipped_configs[0]; f++) {
        char *text = read_text(shipped_configs[f]);
        assert_non_null(text);
        cJSON *root = cJSON_Parse(text);
        assert_non_null(root);
        int missing = count_missing(&cfg_root, root, "");
        if (missing) print_error("%s: %d keys missing\n", shipped_configs[f], missing);
        assert_int_equal(missing, 0);
        cJSON_Delete(root);
        free(text);
    }
}

/* ...and loads: every value in range, every cross-key rule met. */
static void test_shipped_configs_load(void **state)
{
    (void)state;
    for (size_t f = 0; f < sizeof shipped_configs / sizeof shipped_configs[0]; f++) {
        mr_config cfg;
        mr_error err = {MR_OK, ""};
        mr_status st = config_load(&cfg, shipped_configs[f], &err);
        if (st != MR_OK) print_error("%s\n", err.msg);
        assert_int_equal(st, MR_OK);
    }
}

/* Every table key is documented in configs/README.md as `path`. */
static int count_undocumented(const cfg_section *sec, const char *readme, const char *prefix)
{
    int missing = 0;
    for (int i = 0; i < sec->num_keys; i++) {
        const cfg_key *k = &sec->keys[i];
        char path[256], quoted[260];
        snprintf(path, sizeof path, "%s%s", prefix, k->name);
        if (k->type == CFG_SECTION) {
            strcat(path, ".");
            /* the pooler table is shared: documented once per head */
            missing += count_undocumented(k->section, readme, path);
            continue;
        }
        snprintf(quoted, sizeof quoted, "`%s`", path);
        if (!strstr(readme, quoted)) {
            print_error("configs/README.md lacks %s\n", quoted);
            missing++;
        }
    }
    return missing;
}

static void test_readme_documents_every_key(void **state)
{
    (void)state;
    char *readme = read_text(CONFIG_README);
    assert_non_null(readme);
    assert_int_equal(count_undocumented(&cfg_root, readme, ""), 0);
    free(readme);
}

/* Each byte of each section's struct belongs to exactly one key (or to a
 * count a key maintains), so a field added to config.h without a table row
 * fails here. The structs have no padding: every member is 4-byte. */
static void check_coverage(const cfg_section *sec)
{
    unsigned char *owned = calloc(sec->size, 1);
    assert_non_null(owned);
    for (int i = 0; i < sec->num_keys; i++) {
        const cfg_key *k = &sec->keys[i];
        size_t ranges[3][2] = {{k->offset, k->size}};
        int n = 1;
        if (k->type == CFG_FLOAT_LIST) ranges[n][0] = k->count_offset, ranges[n++][1] = sizeof(int);
        if (k->type == CFG_ANCHOR_SIZES) {
            ranges[n][0] = offsetof(mr_anchor_config, num_levels), ranges[n++][1] = sizeof(int);
            ranges[n][0] = offsetof(mr_anchor_config, num_sizes_per_level), ranges[n++][1] = sizeof(int);
        }
        for (int r = 0; r < n; r++) {
            assert_true(ranges[r][0] + ranges[r][1] <= sec->size);
            for (size_t b = ranges[r][0]; b < ranges[r][0] + ranges[r][1]; b++) {
                if (owned[b]) print_error("%s.%s overlaps another key\n", sec->name, k->name);
                assert_int_equal(owned[b], 0);
                owned[b] = 1;
            }
        }
        if (k->type == CFG_SECTION) {
            assert_int_equal(k->size, k->section->size);
            check_coverage(k->section);
        }
    }
    /* Alignment padding is no field: fewer than 8 unowned bytes that end at
     * an 8-byte boundary (before a double, or at the struct's end). */
    for (size_t b = 0; b < sec->size; b++) {
        if (owned[b]) continue;
        size_t end = b;
        while (end < sec->size && !owned[end]) end++;
        int padding = end - b < 8 && end % 8 == 0;
        if (!padding) print_error("%s: byte %zu has no key in config_table.c\n", sec->name, b);
        assert_true(padding);
        b = end;
    }
    free(owned);
}

static void test_table_covers_struct(void **state)
{
    (void)state;
    assert_int_equal(cfg_root.size, sizeof(mr_config));
    check_coverage(&cfg_root);
}

/* ---- edge cases that must load ------------------------------------------ */

static void test_one_element_cases(void **state)
{
    (void)state;
    mr_config cfg;

    parse_ok(&cfg, "{\"fpn\": {\"min_level\": 4, \"max_level\": 4}, \"anchors\": {\"sizes\": [[128]]}}");
    assert_int_equal(cfg.anchors.num_levels, 1);
    assert_int_equal(cfg.anchors.num_sizes_per_level, 1);
    assert_true(cfg.anchors.sizes[0][0] == 128.0f);
    assert_true(cfg.anchors.sizes[1][0] == 0.0f); /* no stale default rows */

    parse_ok(&cfg, "{\"anchors\": {\"aspect_ratios\": [1]}}");
    assert_int_equal(cfg.anchors.num_ratios, 1);
    assert_true(cfg.anchors.aspect_ratios[0] == 1.0f);
    assert_true(cfg.anchors.aspect_ratios[1] == 0.0f);

    parse_ok(&cfg, "{\"classes\": {\"num_classes\": 2, \"class_names\": [\"__background__\", \"person\"]}}");
    assert_int_equal(cfg.classes.num_classes, 2);
    assert_string_equal(cfg.classes.class_names[1], "person");
    assert_string_equal(cfg.classes.class_names[2], "");

    /* num_classes without names: placeholders, or COCO's names for 81 */
    parse_ok(&cfg, "{\"classes\": {\"num_classes\": 2}}");
    assert_string_equal(cfg.classes.class_names[0], "__background__");
    assert_string_equal(cfg.classes.class_names[1], "class_1");
    parse_ok(&cfg, "{\"classes\": {\"num_classes\": 81}}");
    assert_string_equal(cfg.classes.class_names[1], "person");

    parse_ok(&cfg, "{\"mask_head\": {\"num_convs\": 0}, \"rpn\": {\"pre_nms_top_n\": 1, \"post_nms_top_n\": 1}, "
                   "\"box_head\": {\"detections_per_image\": 1}}");
    assert_int_equal(cfg.mask_head.num_convs, 0);
    assert_int_equal(cfg.box_head.detections_per_image, 1);
}

static void test_limits_that_must_load(void **state)
{
    (void)state;
    mr_config cfg;
    /* thresholds at both ends of [0,1] */
    parse_ok(&cfg, "{\"rpn\": {\"nms_thresh\": 0, \"score_thresh\": 1}, \"box_head\": {\"nms_thresh\": 1, "
                   "\"score_thresh\": 0}, \"mask_head\": {\"threshold\": 1}}");
    /* the widest arrays */
    parse_ok(&cfg, "{\"anchors\": {\"sizes\": [[32,40,50,64],[64,80,100,128],[128,160,200,256],"
                   "[256,320,400,512],[512,640,800,1024]], \"aspect_ratios\": [0.25,0.5,1,2,4,8,0.125,16]}}");
    assert_int_equal(cfg.anchors.num_sizes_per_level, 4);
    assert_int_equal(cfg.anchors.num_ratios, 8);
    assert_true(cfg.anchors.sizes[4][3] == 1024.0f);
    /* the most classes, named by placeholders */
    parse_ok(&cfg, "{\"classes\": {\"num_classes\": 1024}}");
    assert_string_equal(cfg.classes.class_names[1023], "class_1023");
    /* Detectron's conventions, as a config of their own would spell them */
    parse_ok(&cfg, "{\"input\": {\"channel_order\": \"BGR\", \"pixel_scale\": 1, \"pixel_mean\": [102.9801, "
                   "115.9465, 122.7717], \"pixel_std\": [1, 1, 1], \"resize_rounding\": \"round\", "
                   "\"resize_method\": \"cv2_linear\"}, "
                   "\"backbone\": {\"stride_in_1x1\": true, \"norm_eps\": 0}, \"anchors\": {\"stride_rule\": "
                   "\"level\"}, \"box\": {\"legacy_plus_one\": true}, \"box_head\": {\"keep_ties\": true}, "
                   "\"mask_head\": {\"threshold_rule\": \">=\"}}");
    assert_int_equal(cfg.input.channel_order, MR_CHANNELS_BGR);
    assert_int_equal(cfg.input.resize_rounding, MR_RESIZE_ROUND);
    assert_int_equal(cfg.input.resize_method, MR_RESIZE_CV2_LINEAR);
    assert_int_equal(cfg.anchors.stride_rule, MR_ANCHOR_STRIDE_LEVEL);
    assert_int_equal(cfg.mask_head.threshold_rule, MR_MASK_THRESH_GE);
    assert_true(cfg.backbone.stride_in_1x1 == 1 && cfg.box.legacy_plus_one == 1 && cfg.box_head.keep_ties == 1);
    /* detectron2's */
    parse_ok(&cfg, "{\"input\": {\"resize_rounding\": \"detectron2\", \"resize_method\": \"pil_bilinear\"}}");
    assert_int_equal(cfg.input.resize_rounding, MR_RESIZE_DETECTRON2);
    assert_int_equal(cfg.input.resize_method, MR_RESIZE_PIL_BILINEAR);
    /* mmdetection's: mmcv's rescale_size, cv2.resize on the uint8 image */
    parse_ok(&cfg, "{\"input\": {\"resize_rounding\": \"mmdet\", \"resize_method\": \"cv2_linear_uint8\"}}");
    assert_int_equal(cfg.input.resize_rounding, MR_RESIZE_MMDET);
    assert_int_equal(cfg.input.resize_method, MR_RESIZE_CV2_LINEAR_UINT8);
    /* a name of 127 bytes and a class name of 63 fit their buffers */
    char json[512];
    snprintf(json, sizeof json, "{\"name\": \"%0127d\", \"classes\": {\"num_classes\": 2, \"class_names\": "
                                "[\"bg\", \"%063d\"]}}", 0, 0);
    parse_ok(&cfg, json);
    assert_int_equal(strlen(cfg.name), 127);
    assert_int_equal(strlen(cfg.classes.class_names[1]), 63);
}

/* ---- errors ------------------------------------------------------------- */

typedef struct {
    const char *json;
    mr_status status;
    const char *want0, *want1; /* substrings of the message */
} bad_case;

static const bad_case unknown_and_type_cases[] = {
    /* unknown keys, with a suggestion for a near miss */
    {"{\"rpn\": {\"nms_tresh\": 0.7}}", MR_ERR_CONFIG, "unknown key \"rpn.nms_tresh\"", "did you mean \"rpn.nms_thresh\""},
    {"{\"nmae\": \"x\"}", MR_ERR_CONFIG, "unknown key \"nmae\"", "did you mean \"name\""},
    {"{\"box_head\": {\"pooler\": {\"resolutoin\": 7}}}", MR_ERR_CONFIG, "unknown key \"box_head.pooler.resolutoin\"", "\"box_head.pooler.resolution\""},
    {"{\"rpn\": {\"fc_dim\": 1024}}", MR_ERR_CONFIG, "unknown key \"rpn.fc_dim\"", NULL},
    {"{\"roi_heads\": {}}", MR_ERR_CONFIG, "unknown key \"roi_heads\"", NULL},
    {"{\"Name\": \"x\"}", MR_ERR_CONFIG, "unknown key \"Name\"", NULL},
    {"{\"rpn\": {\"nms_thresh\": 0.7, \"nms_thresh\": 0.6}}", MR_ERR_CONFIG, "duplicate key \"rpn.nms_thresh\"", NULL},
    {"{\"rpn\": {}, \"rpn\": {}}", MR_ERR_CONFIG, "duplicate key \"rpn\"", NULL},
    /* wrong types */
    {"[]", MR_ERR_CONFIG, "expected a JSON object at the top level, got an array", NULL},
    {"42", MR_ERR_CONFIG, "top level, got a number", NULL},
    {"{\"rpn\": []}", MR_ERR_CONFIG, "rpn: expected an object, got an array", NULL},
    {"{\"box_head\": {\"pooler\": 7}}", MR_ERR_CONFIG, "box_head.pooler: expected an object, got a number", NULL},
    {"{\"rpn\": {\"nms_thresh\": \"0.7\"}}", MR_ERR_CONFIG, "rpn.nms_thresh: expected a number, got a string", NULL},
    {"{\"rpn\": {\"nms_thresh\": null}}", MR_ERR_CONFIG, "rpn.nms_thresh: expected a number, got null", NULL},
    {"{\"input\": {\"min_size\": 800.5}}", MR_ERR_CONFIG, "input.min_size: expected an integer, got 800.5", NULL},
    {"{\"input\": {\"min_size\": true}}", MR_ERR_CONFIG, "input.min_size: expected an integer, got a boolean", NULL},
    {"{\"backbone\": {\"stride_in_1x1\": 1}}", MR_ERR_CONFIG, "backbone.stride_in_1x1: expected true or false, got a number", NULL},
    {"{\"box\": {\"legacy_plus_one\": \"false\"}}", MR_ERR_CONFIG, "box.legacy_plus_one: expected true or false", NULL},
    {"{\"name\": 5}", MR_ERR_CONFIG, "name: expected a string, got a number", NULL},
    {"{\"name\": \"\"}", MR_ERR_CONFIG, "name: expected a non-empty string", NULL},
    {"{\"input\": {\"pixel_mean\": 0.5}}", MR_ERR_CONFIG, "input.pixel_mean: expected an array of numbers, got a number", NULL},
    {"{\"input\": {\"pixel_mean\": [0.5, \"x\", 0.5]}}", MR_ERR_CONFIG, "input.pixel_mean[1]: expected a number, got a string", NULL},
    {"{\"anchors\": {\"sizes\": [32, 64]}}", MR_ERR_CONFIG, "anchors.sizes[0]: expected an array of numbers, got a number", NULL},
    {"{\"anchors\": {\"sizes\": {}}}", MR_ERR_CONFIG, "anchors.sizes: expected an array of arrays", NULL},
    {"{\"classes\": {\"class_names\": \"person\"}}", MR_ERR_CONFIG, "classes.class_names: expected an array of strings", NULL},
    {"{\"classes\": {\"num_classes\": 2, \"class_names\": [\"bg\", 1]}}", MR_ERR_CONFIG, "classes.class_names[1]: expected a string, got a number", NULL},
    /* enum strings */
    {"{\"input\": {\"channel_order\": \"rgb\"}}", MR_ERR_CONFIG, "input.channel_order: expected one of \"RGB\", \"BGR\", got \"rgb\"", NULL},
    {"{\"input\": {\"channel_order\": 0}}", MR_ERR_CONFIG, "input.channel_order: expected a string, got a number", NULL},
    {"{\"input\": {\"resize_rounding\": \"ceil\"}}", MR_ERR_CONFIG, "input.resize_rounding: expected one of \"floor\", \"round\", \"detectron2\", \"maskrcnn_benchmark\", \"mmdet\", got \"ceil\"", NULL},
    {"{\"input\": {\"resize_rounding\": \"mmdetection\"}}", MR_ERR_CONFIG, "input.resize_rounding: expected one of", "got \"mmdetection\""},
    {"{\"input\": {\"resize_method\": \"cv2_linear_u8\"}}", MR_ERR_CONFIG, "input.resize_method: expected one of", "got \"cv2_linear_u8\""},
    {"{\"input\": {\"resize_method\": \"bilinear\"}}", MR_ERR_CONFIG, "input.resize_method: expected one of \"torch_bilinear\", \"pil_bilinear\", \"cv2_linear\", \"cv2_linear_uint8\", got \"bilinear\"", NULL},
    {"{\"anchors\": {\"stride_rule\": \"padded\"}}", MR_ERR_CONFIG, "anchors.stride_rule: expected one of \"padded_div_grid\", \"level\"", NULL},
    {"{\"mask_head\": {\"threshold_rule\": \"=>\"}}", MR_ERR_CONFIG, "mask_head.threshold_rule: expected one of \">\", \">=\", got \"=>\"", NULL},
};

static const bad_case range_cases[] = {
    {"{\"input\": {\"min_size\": -800}}", MR_ERR_CONFIG, "input.min_size: expected an integer in [1,65536], got -800", NULL},
    {"{\"input\": {\"max_size\": 0}}", MR_ERR_CONFIG, "input.max_size: expected an integer in [1,65536], got 0", NULL},
    {"{\"input\": {\"size_divisibility\": 0}}", MR_ERR_CONFIG, "input.size_divisibility", "got 0"},
    {"{\"input\": {\"max_image_side\": 1e12}}", MR_ERR_CONFIG, "input.max_image_side", "got 1e+12"},
    {"{\"input\": {\"canvas_h\": 1344}}", MR_ERR_CONFIG, "input.canvas_h, canvas_w: 1344x0: set both", NULL},
    {"{\"input\": {\"canvas_h\": 1344, \"canvas_w\": 1300}}", MR_ERR_CONFIG, "not multiples of input.size_divisibility 32", NULL},
    {"{\"input\": {\"canvas_w\": -32}}", MR_ERR_CONFIG, "input.canvas_w", "got -32"},
    {"{\"input\": {\"pixel_scale\": 0}}", MR_ERR_CONFIG, "input.pixel_scale: expected a number in (0,1], got 0", NULL},
    {"{\"input\": {\"pixel_std\": [0.229, 0, 0.225]}}", MR_ERR_CONFIG, "input.pixel_std[1]: expected a number in (0,", NULL},
    {"{\"input\": {\"pixel_mean\": [1e999, 0, 0]}}", MR_ERR_CONFIG, "input.pixel_mean[0]", "got inf"},
    {"{\"backbone\": {\"depth\": 34}}", MR_ERR_CONFIG, "backbone.depth: expected 50, 101 or 152, got 34", NULL},
    {"{\"backbone\": {\"depth\": 100}}", MR_ERR_CONFIG, "backbone.depth: expected 50, 101 or 152, got 100", NULL},
    {"{\"backbone\": {\"stem_out_channels\": -64}}", MR_ERR_CONFIG, "backbone.stem_out_channels", NULL},
    {"{\"backbone\": {\"num_groups\": 0}}", MR_ERR_CONFIG, "backbone.num_groups", NULL},
    {"{\"backbone\": {\"norm_eps\": -1e-5}}", MR_ERR_CONFIG, "backbone.norm_eps: expected a number in [0,1]", NULL},
    {"{\"fpn\": {\"out_channels\": 0}}", MR_ERR_CONFIG, "fpn.out_channels", NULL},
    {"{\"fpn\": {\"min_level\": 1}}", MR_ERR_CONFIG, "fpn.min_level: expected an integer in [2,6], got 1", NULL},
    {"{\"fpn\": {\"max_level\": 7}}", MR_ERR_CONFIG, "fpn.max_level: expected an integer in [2,6], got 7", NULL},
    {"{\"anchors\": {\"sizes\": [[32], [-64], [128], [256], [512]]}}", MR_ERR_CONFIG, "anchors.sizes[1][0]: expected a number in (0,", "got -64"},
    {"{\"anchors\": {\"aspect_ratios\": [0.5, 0, 2]}}", MR_ERR_CONFIG, "anchors.aspect_ratios[1]: expected a number in (0,", NULL},
    {"{\"anchors\": {\"offset\": 1.5}}", MR_ERR_CONFIG, "anchors.offset: expected a number in [0,1], got 1.5", NULL},
    {"{\"rpn\": {\"pre_nms_top_n\": 0}}", MR_ERR_CONFIG, "rpn.pre_nms_top_n", NULL},
    {"{\"rpn\": {\"post_nms_top_n\": -1}}", MR_ERR_CONFIG, "rpn.post_nms_top_n", NULL},
    {"{\"rpn\": {\"nms_thresh\": 1.5}}", MR_ERR_CONFIG, "rpn.nms_thresh: expected a number in [0,1], got 1.5", NULL},
    {"{\"rpn\": {\"score_thresh\": -0.1}}", MR_ERR_CONFIG, "rpn.score_thresh: expected a number in [0,1], got -0.1", NULL},
    {"{\"rpn\": {\"min_size\": -1}}", MR_ERR_CONFIG, "rpn.min_size", NULL},
    {"{\"rpn\": {\"box_weights\": [1, 1, -1, 1]}}", MR_ERR_CONFIG, "rpn.box_weights[2]", "got -1"},
    {"{\"box\": {\"bbox_xform_clip\": 0}}", MR_ERR_CONFIG, "box.bbox_xform_clip: expected a number in (0,64], got 0", NULL},
    {"{\"box_head\": {\"pooler\": {\"resolution\": 0}}}", MR_ERR_CONFIG, "box_head.pooler.resolution", NULL},
    {"{\"mask_head\": {\"pooler\": {\"sampling_ratio\": -1}}}", MR_ERR_CONFIG, "mask_head.pooler.sampling_ratio: expected an integer in [0,64], got -1", NULL},
    {"{\"mask_head\": {\"pooler\": {\"level_eps\": 2}}}", MR_ERR_CONFIG, "mask_head.pooler.level_eps", NULL},
    {"{\"box_head\": {\"fc_dim\": 0}}", MR_ERR_CONFIG, "box_head.fc_dim", NULL},
    {"{\"box_head\": {\"box_weights\": [10, 10, 5, 0]}}", MR_ERR_CONFIG, "box_head.box_weights[3]", NULL},
    {"{\"box_head\": {\"score_thresh\": 1.01}}", MR_ERR_CONFIG, "box_head.score_thresh: expected a number in [0,1]", NULL},
    {"{\"box_head\": {\"nms_thresh\": -0.5}}", MR_ERR_CONFIG, "box_head.nms_thresh", NULL},
    {"{\"box_head\": {\"detections_per_image\": 0}}", MR_ERR_CONFIG, "box_head.detections_per_image", NULL},
    {"{\"mask_head\": {\"threshold\": 2}}", MR_ERR_CONFIG, "mask_head.threshold: expected a number in [0,1], got 2", NULL},
    {"{\"mask_head\": {\"num_convs\": -1}}", MR_ERR_CONFIG, "mask_head.num_convs", NULL},
    {"{\"mask_head\": {\"paste_padding\": -1}}", MR_ERR_CONFIG, "mask_head.paste_padding", NULL},
    {"{\"classes\": {\"num_classes\": 0}}", MR_ERR_CONFIG, "classes.num_classes: expected an integer in [2,1024], got 0", NULL},
    {"{\"classes\": {\"num_classes\": 1}}", MR_ERR_CONFIG, "classes.num_classes", "got 1"},
    {"{\"classes\": {\"num_classes\": 1025}}", MR_ERR_CONFIG, "classes.num_classes", "got 1025"},
};

static const bad_case array_length_cases[] = {
    {"{\"input\": {\"pixel_mean\": [0.5, 0.5]}}", MR_ERR_CONFIG, "input.pixel_mean: expected an array of 3 numbers, got 2", NULL},
    {"{\"input\": {\"pixel_std\": [1, 1, 1, 1]}}", MR_ERR_CONFIG, "input.pixel_std: expected an array of 3 numbers, got 4", NULL},
    {"{\"rpn\": {\"box_weights\": []}}", MR_ERR_CONFIG, "rpn.box_weights: expected an array of 4 numbers, got 0", NULL},
    {"{\"anchors\": {\"aspect_ratios\": []}}", MR_ERR_CONFIG, "anchors.aspect_ratios: expected an array of 1 to 8 numbers, got 0", NULL},
    {"{\"anchors\": {\"aspect_ratios\": [1,1,1,1,1,1,1,1,1]}}", MR_ERR_CONFIG, "anchors.aspect_ratios", "got 9"},
    {"{\"anchors\": {\"sizes\": []}}", MR_ERR_CONFIG, "anchors.sizes: expected 1 to 6 rows", "got 0"},
    {"{\"anchors\": {\"sizes\": [[1],[2],[3],[4],[5],[6],[7]]}}", MR_ERR_CONFIG, "anchors.sizes: expected 1 to 6 rows", "got 7"},
    {"{\"anchors\": {\"sizes\": [[32], [], [128], [256], [512]]}}", MR_ERR_CONFIG, "anchors.sizes[1]: expected an array of 1 to 4 numbers, got 0", NULL},
    {"{\"anchors\": {\"sizes\": [[1,2,3,4,5], [2], [3], [4], [5]]}}", MR_ERR_CONFIG, "anchors.sizes[0]", "got 5"},
    {"{\"anchors\": {\"sizes\": [[32], [64, 80], [128], [256], [512]]}}", MR_ERR_CONFIG, "anchors.sizes[1]: has 2 sizes, but anchors.sizes[0] has 1", NULL},
    {"{\"classes\": {\"class_names\": []}}", MR_ERR_CONFIG, "classes.class_names: expected 1 to 1024 names, got 0", NULL},
};

static const bad_case cross_key_cases[] = {
    {"{\"classes\": {\"num_classes\": 3, \"class_names\": [\"bg\", \"a\"]}}", MR_ERR_CONFIG, "classes.class_names: has 2 names, but classes.num_classes is 3", NULL},
    {"{\"classes\": {\"class_names\": [\"bg\", \"a\"]}}", MR_ERR_CONFIG, "classes.class_names: has 2 names, but classes.num_classes is 81", NULL},
    {"{\"classes\": {\"class_names\": [\"bg\", \"a\", \"b\"], \"num_classes\": 2}}", MR_ERR_CONFIG, "has 3 names, but classes.num_classes is 2", NULL},
    {"{\"classes\": {\"num_classes\": 2, \"class_names\": [\"bg\", \"\"]}}", MR_ERR_CONFIG, "classes.class_names[1]: expected a non-empty string", NULL},
    {"{\"input\": {\"min_size\": 1400}}", MR_ERR_CONFIG, "input.min_size: 1400 is larger than input.max_size 1333", NULL},
    {"{\"fpn\": {\"min_level\": 5, \"max_level\": 4}}", MR_ERR_CONFIG, "fpn.min_level: 5 is above fpn.max_level 4", NULL},
    {"{\"fpn\": {\"max_level\": 5}}", MR_ERR_CONFIG, "anchors.sizes: has 5 rows, but fpn levels 2..5 need 4", NULL},
    {"{\"anchors\": {\"sizes\": [[32], [64], [128], [256]]}}", MR_ERR_CONFIG, "anchors.sizes: has 4 rows, but fpn levels 2..6 need 5", NULL},
    {"{\"anchors\": {\"cell_rule\": \"detectron\"}}", MR_ERR_CONFIG, "anchors.cell_rule: \"detectron\" needs anchors.stride_rule \"level\"", NULL},
};

/* Malformed JSON: a format error with a position. */
static const bad_case syntax_cases[] = {
    {"", MR_ERR_FORMAT, "malformed JSON at line 1, column 1 (byte 0)", NULL},
    {"   \n  ", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{", MR_ERR_FORMAT, "malformed JSON at line 1", NULL},
    {"}", MR_ERR_FORMAT, "malformed JSON at line 1, column 1", NULL},
    {"{\"rpn\": }", MR_ERR_FORMAT, "malformed JSON at line 1, column 9 (byte 8)", NULL},
    {"{\"rpn\": {\"nms_thresh\": 0.7,}}", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{\"rpn\": {\"nms_thresh\": 0.7}", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{} {}", MR_ERR_FORMAT, "malformed JSON at line 1, column 4 (byte 3)", NULL},
    {"{} x", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{'rpn': {}}", MR_ERR_FORMAT, "malformed JSON at line 1, column 3 (byte 2)", NULL},
    {"{\"rpn\" {}}", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{rpn: {}}", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{\"rpn\": {\"nms_thresh\": NaN}}", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{\"name\": \"unterminated}", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{\"rpn\": {\"nms_thresh\": 0.7}} // comment", MR_ERR_FORMAT, "malformed JSON", NULL},
    {"{\n  \"rpn\": {\n    \"nms_thresh\": ,\n  }\n}", MR_ERR_FORMAT, "malformed JSON at line 3, column 19 (byte 31)", NULL},
    {"nul", MR_ERR_FORMAT, "malformed JSON", NULL},
};

static void run_cases(const bad_case *cases, size_t n)
{
    for (size_t i = 0; i < n; i++) expect_status(cases[i].json, cases[i].status, cases[i].want0, cases[i].want1);
}

#define RUN_CASES(table) run_cases(table, sizeof table / sizeof table[0])

static void test_unknown_keys_and_types(void **state)
{
    (void)state;
    RUN_CASES(unknown_and_type_cases);
}

static void test_out_of_range(void **state)
{
    (void)state;
    RUN_CASES(range_cases);
}

static void test_array_lengths(void **state)
{
    (void)state;
    RUN_CASES(array_length_cases);
}

static void test_cross_key_rules(void **state)
{
    (void)state;
    RUN_CASES(cross_key_cases);
}

static void test_malformed_json(void **state)
{
    (void)state;
    RUN_CASES(syntax_cases);
}

static void test_long_strings(void **state)
{
    (void)state;
    char json[1024];
    snprintf(json, sizeof json, "{\"name\": \"%0128d\"}", 0);
    expect_status(json, MR_ERR_CONFIG, "name: longer than 127 bytes", NULL);
    snprintf(json, sizeof json, "{\"classes\": {\"num_classes\": 2, \"class_names\": [\"bg\", \"%064d\"]}}", 0);
    expect_status(json, MR_ERR_CONFIG, "classes.class_names[1]: longer than 63 bytes", NULL);
    /* an absurdly long unknown key is reported, truncated, without overflow */
    snprintf(json, sizeof json, "{\"rpn\": {\"%0600d\": 1}}", 0);
    expect_status(json, MR_ERR_CONFIG, "unknown key \"rpn.0000", NULL);
}

/* Found by tests/fuzz/fuzz_config.c: a key or enum value holding a newline
 * (escaped, or raw, which cJSON accepts) made a two-line message. Control
 * characters from the file print as '?' (expect_status checks one line). */
static void test_control_chars_stay_out_of_messages(void **state)
{
    (void)state;
    expect_status("{\"input\": {\"a\\nb\": 1}}", MR_ERR_CONFIG, "unknown key \"input.a?b\"", NULL);
    expect_status("{\n \"input\": {\"\n  channelending4,\xf2  bmax_size\": 96\n }\n}", MR_ERR_CONFIG,
                  "unknown key \"input.?  channelending4,", NULL);
    expect_status("{\"input\": {\"channel_order\": \"R\\r\\nGB\\u007f\"}}", MR_ERR_CONFIG,
                  "input.channel_order: expected one of \"RGB\", \"BGR\", got \"R??GB?\"", NULL);
    expect_status("{\"b\\tx\": 1}", MR_ERR_CONFIG, "unknown key \"b?x\"", NULL);
}

/* The exact one-line form the command prints. */
static void test_message_names_file_and_key(void **state)
{
    (void)state;
    mr_config cfg;
    mr_error err = {MR_OK, ""};
    assert_int_equal(config_parse(&cfg, "{\"rpn\": {\"foo\": 1}}", "configs/x.json", &err), MR_ERR_CONFIG);
    assert_string_equal(err.msg, "configs/x.json: unknown key \"rpn.foo\"");
    assert_int_equal(config_parse(&cfg, "{\"rpn\": {\"nms_thresh\": 1.5}}", "configs/x.json", &err), MR_ERR_CONFIG);
    assert_string_equal(err.msg, "configs/x.json: rpn.nms_thresh: expected a number in [0,1], got 1.5");
    /* a NULL error sink is allowed */
    assert_int_equal(config_parse(&cfg, "{", "x", NULL), MR_ERR_FORMAT);
    assert_int_equal(config_parse(&cfg, NULL, "x", &err), MR_ERR_CONFIG);
}

static void test_failure_leaves_config_untouched(void **state)
{
    (void)state;
    mr_config cfg, before;
    mr_error err;
    memset(&cfg, 0x33, sizeof cfg);
    memcpy(&before, &cfg, sizeof cfg);
    /* the first key parses, the second fails */
    assert_int_equal(config_parse(&cfg, "{\"name\": \"x\", \"rpn\": {\"nms_thresh\": 2}}", "t", &err), MR_ERR_CONFIG);
    assert_memory_equal(&cfg, &before, sizeof cfg);
    assert_int_equal(config_load(&cfg, "configs/does_not_exist.json", &err), MR_ERR_IO);
    assert_memory_equal(&cfg, &before, sizeof cfg);
}

static void test_load_errors(void **state)
{
    (void)state;
    mr_config cfg;
    mr_error err = {MR_OK, ""};

    assert_int_equal(config_load(&cfg, "configs/does_not_exist.json", &err), MR_ERR_IO);
    assert_non_null(strstr(err.msg, "configs/does_not_exist.json: cannot open"));
    assert_int_equal(config_load(&cfg, "configs", &err), MR_ERR_IO);
    assert_non_null(strstr(err.msg, "configs: cannot read"));

    char path[] = "/tmp/test_config_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "wb");
    assert_non_null(f);
    fwrite("{\"name\": \"a\0b\"}", 1, 15, f);
    fclose(f);
    assert_int_equal(config_load(&cfg, path, &err), MR_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "NUL byte at byte 11"));

    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\n  \"rpn\": {\n    \"nms_tresh\": 0.7\n  }\n}\n", f);
    fclose(f);
    assert_int_equal(config_load(&cfg, path, &err), MR_ERR_CONFIG);
    char want[128];
    snprintf(want, sizeof want, "%s: unknown key \"rpn.nms_tresh\"", path);
    assert_non_null(strstr(err.msg, want));

    f = fopen(path, "wb");
    assert_non_null(f);
    fputs("{\n  \"rpn\": {\n    \"nms_thresh\": 0.7,\n  }\n}\n", f);
    fclose(f);
    assert_int_equal(config_load(&cfg, path, &err), MR_ERR_FORMAT);
    snprintf(want, sizeof want, "%s: malformed JSON at line 4", path);
    assert_non_null(strstr(err.msg, want));

    f = fopen(path, "wb"); /* over the 1 MiB limit */
    assert_non_null(f);
    for (int i = 0; i < (1 << 20) + 1; i++) fputc(' ', f);
    fclose(f);
    assert_int_equal(config_load(&cfg, path, &err), MR_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "larger than"));
    remove(path);
}

/* config_validate on a struct changed by hand. */
static void test_validate_struct(void **state)
{
    (void)state;
    mr_config cfg;
    mr_error err = {MR_OK, ""};

    config_defaults(&cfg);
    cfg.rpn.nms_thresh = NAN;
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "cli: rpn.nms_thresh: expected a number in [0,1], got nan"));

    config_defaults(&cfg);
    cfg.box.legacy_plus_one = 2;
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "box.legacy_plus_one"));

    config_defaults(&cfg);
    cfg.mask_head.threshold_rule = (mr_mask_thresh_rule)7;
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "mask_head.threshold_rule: invalid value 7"));

    config_defaults(&cfg);
    memset(cfg.name, 'x', sizeof cfg.name);
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "name: not NUL-terminated"));

    config_defaults(&cfg);
    cfg.classes.num_classes = 82; /* name 81 was never set */
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "classes.class_names[81]: empty name"));

    config_defaults(&cfg);
    cfg.anchors.num_ratios = 0;
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "anchors.aspect_ratios: expected 1 to 8 values, got 0"));

    config_defaults(&cfg);
    cfg.fpn.max_level = 5; /* anchors still have 5 rows */
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "anchors.sizes: has 5 rows"));

    config_defaults(&cfg);
    cfg.anchors.sizes[2][0] = -1;
    assert_int_equal(config_validate(&cfg, "cli", &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "anchors.sizes[2][0]"));

    config_defaults(&cfg);
    cfg.backbone.depth = 18;
    assert_int_equal(config_validate(&cfg, NULL, &err), MR_ERR_CONFIG);
    assert_non_null(strstr(err.msg, "backbone.depth: expected 50, 101 or 152, got 18"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_valid),
        cmocka_unit_test(test_stage_blocks),
        cmocka_unit_test(test_empty_object_is_defaults),
        cmocka_unit_test(test_shipped_config_equals_defaults),
        cmocka_unit_test(test_small_config_differs_only_in_size),
        cmocka_unit_test(test_shipped_list_is_the_folder),
        cmocka_unit_test(test_shipped_configs_spell_out_every_key),
        cmocka_unit_test(test_shipped_configs_load),
        cmocka_unit_test(test_readme_documents_every_key),
        cmocka_unit_test(test_table_covers_struct),
        cmocka_unit_test(test_one_element_cases),
        cmocka_unit_test(test_limits_that_must_load),
        cmocka_unit_test(test_unknown_keys_and_types),
        cmocka_unit_test(test_out_of_range),
        cmocka_unit_test(test_array_lengths),
        cmocka_unit_test(test_cross_key_rules),
        cmocka_unit_test(test_malformed_json),
        cmocka_unit_test(test_long_strings),
        cmocka_unit_test(test_control_chars_stay_out_of_messages),
        cmocka_unit_test(test_message_names_file_and_key),
        cmocka_unit_test(test_failure_leaves_config_untouched),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_validate_struct),
    };
    return cmocka_run_group_tests_name("config", tests, NULL, NULL);
}
